"""The open-loop check of ``invert`` applies MuJoCo's actuator limits as ``simulate`` and ``run``
do (:mod:`multibody_dynamics.model.actuator_limits`): the limits a feedforward exceeds are
reported (which, how far, when) and the simulated response is the limited input's; within the
limits the check is unchanged."""

from pathlib import Path

import numpy as np
from numpy.polynomial import Polynomial as P

from multibody_dynamics.model.actuator_limits import limit_excess
from multibody_dynamics.robot import load_robot

DATA = Path(__file__).parent / "data" / "mjcf"

# A free hinge (no gravity), inertia I = 0.25 kg m^2 about its axis, a motor of gear 2.
HINGE_XML = """<mujoco model="hinge">
  <option gravity="0 0 0"/>
  <worldbody><body name="b"><joint name="j" type="hinge" axis="0 0 1"/>
    <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.25"/></body></worldbody>
  <actuator><motor name="m" joint="j" gear="2" {range}/></actuator>
</mujoco>"""
SCENARIO = """robot: {xml}
task: {{t0: 0.0, tf: 1.0, order: 5, joints: {{j: {{start: 0.0, end: 1.0}}}}}}
method: classical
dt: 0.01
"""
INERTIA, GEAR = 0.25, 2.0
# the rest-to-rest law of order 5 over [0, 1] s: q_d = 10 t^3 - 15 t^4 + 6 t^5 [rad]
Q_D = P([0, 0, 0, 10, -15, 6])


def _scenario(tmp_path, name, ctrl_range):
    """An inversion scenario of the hinge with the motor's ``ctrlrange`` (None: no range)."""
    xml = tmp_path / f"{name}.xml"
    xml.write_text(HINGE_XML.format(range="" if ctrl_range is None else
                                    f'ctrlrange="{ctrl_range[0]} {ctrl_range[1]}"'))
    path = tmp_path / f"{name}.yaml"
    path.write_text(SCENARIO.format(xml=xml))
    return path


def _limited_response(t, ctrl_max):
    """Closed form of the hinge under the feedforward of q_d clipped at ``ctrl_max``: the
    acceleration min(q_d'', a_max) with a_max = GEAR ctrl_max / INERTIA, integrated twice
    from rest (the deficit of velocity and of position against q_d)."""
    a_d = Q_D.deriv(2)
    a_max = GEAR * ctrl_max / INERTIA
    roots = np.sort([r.real for r in (a_d - a_max).roots()
                     if abs(r.imag) < 1e-12 and 0 < r.real < 0.5])
    t1, t2 = roots  # q_d'' > a_max between them
    gap = (a_d - a_max).integ()  # velocity lost from t1 on: gap(min(t, t2)) - gap(t1)
    lost_v = np.where(t < t1, 0.0, gap(np.clip(t, t1, t2)) - gap(t1))
    # position lost: integral of lost_v; closed form piecewise
    gap2 = gap.integ()
    lost_q = np.where(t < t1, 0.0,
                      gap2(np.clip(t, t1, t2)) - gap2(t1) - gap(t1) * (np.clip(t, t1, t2) - t1)
                      + (gap(t2) - gap(t1)) * np.maximum(t - t2, 0.0))
    return Q_D(np.minimum(t, 1.0)) - lost_q, lost_v


def test_invert_reports_and_simulates_the_limited_input(tmp_path, capsys):
    """ctrlrange [-1, 0.5]: the inverse input of the hinge, I q_d'' / gear, peaks at
    0.25 * 10 / sqrt(3) / 2 = 0.7217 at t = 0.5 - sqrt(3) / 6 = 0.2113 s (q_d'' = 60 t -
    180 t^2 + 120 t^3 peaks at 10 / sqrt(3) rad/s^2 there); the summary names the actuator, the
    excess 0.2217 and the time, the CSV keeps the unlimited input, and the simulated motion is
    the closed form of the clipped input."""
    from multibody_control.cli import main
    from multibody_control.inversion.verify import verify
    from multibody_control.scenarios.inversion import (
        load_inversion_scenario,
        run_inversion_scenario,
    )

    path = _scenario(tmp_path, "limited", (-1, 0.5))
    assert main(["invert", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    text = capsys.readouterr().out
    peak = INERTIA * 10 / np.sqrt(3) / GEAR
    assert f"peak feedforward  m {peak:.4g}" in text
    assert "the feedforward exceeds 1 actuator limit" in text
    assert "the open-loop output leaves the desired one by" in text  # a joint task's warning
    # the samples are 10 ms apart: the worst sample is t = 0.21 s, 0.3 ms from the peak
    assert (f"m: input {INERTIA * Q_D.deriv(2)(0.21) / GEAR:.4g} beyond ctrlrange [-1, 0.5] by "
            f"{INERTIA * Q_D.deriv(2)(0.21) / GEAR - 0.5:.3g} at t = 0.21 s") in text
    with open(tmp_path / "out" / "limited.csv") as fh:
        header = fh.readline().strip().split(",")
    data = np.loadtxt(tmp_path / "out" / "limited.csv", delimiter=",", skiprows=1)
    t, u = data[:, header.index("t")], data[:, header.index("u.m")]
    motion = t <= 1.0
    # the written feedforward is the unlimited inverse input (10 digits in the CSV)
    np.testing.assert_allclose(u[motion], INERTIA * Q_D.deriv(2)(t[motion]) / GEAR,
                               rtol=0, atol=1e-9)
    assert u.max() > 0.7

    sc = load_inversion_scenario(path)
    result, ver, _ = run_inversion_scenario(sc)
    (e,) = ver.limit_excess
    assert (e.limit, e.name, e.lower, e.upper) == ("ctrlrange", "m", -1.0, 0.5)
    a_d = Q_D.deriv(2)
    beyond = result.t[(result.t <= 1) & (INERTIA * a_d(result.t) / GEAR > 0.5)]
    assert (e.t_first, e.t_last, e.t_worst) == (beyond[0], beyond[-1], 0.21)
    q_ref, _ = _limited_response(ver.t, 0.5)
    # DOP853 at rtol 1e-10 through the acceleration's two kinks: 1e-8 rad over a motion of
    # ~0.1 rad of deficit (the limited motion ends ~0.13 rad short of q_d's 1 rad)
    np.testing.assert_allclose(ver.q[:, 0], q_ref, rtol=0, atol=1e-8)
    assert 0.05 < Q_D(1.0) - ver.q[ver.t == 1.0, 0][0] < 0.5  # the limit matters
    np.testing.assert_allclose(ver.output_error, np.max(np.abs(q_ref - Q_D(np.minimum(
        ver.t, 1.0)))), rtol=1e-6)
    # the unlimited feedforward is unchanged by the check
    np.testing.assert_allclose(result.u[result.t <= 1, 0],
                               INERTIA * a_d(result.t[result.t <= 1]) / GEAR, atol=1e-9)
    # the same check on a model without the range: the motion of q_d, no excess
    free = verify(load_inversion_scenario(_scenario(tmp_path, "free", None)).model, result,
                  sc.task, sc.output)
    assert free.limit_excess == () and free.output_error < 1e-8


def test_within_the_limits_the_check_is_unchanged(tmp_path, capsys):
    """ctrlrange [-1, 1] (the peak 0.7217 within): no excess, no warning, and the simulated
    motion is the one of the same hinge without a range, sample for sample."""
    from multibody_control.cli import main
    from multibody_control.inversion.verify import verify
    from multibody_control.scenarios.inversion import (
        load_inversion_scenario,
        run_inversion_scenario,
    )

    limited = load_inversion_scenario(_scenario(tmp_path, "wide", (-1, 1)))
    assert limited.model.actuator_limits is not None
    free = load_inversion_scenario(_scenario(tmp_path, "free", None))
    assert free.model.actuator_limits is None
    result, ver, _ = run_inversion_scenario(limited)
    assert ver.limit_excess == ()
    plain = verify(free.model, result, free.task, free.output)
    np.testing.assert_array_equal(ver.q, plain.q)
    np.testing.assert_array_equal(ver.v, plain.v)
    # the open-loop motion follows q_d (integration error only)
    assert ver.output_error < 1e-8
    assert main(["invert", str(limited.path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "actuator limit" not in text and "end-effector error - (a joint task)" in text
    assert "warning" not in text


def test_limit_excess_of_servos_and_joint_ranges():
    """Each stage against hand-computed MuJoCo force laws (limits.xml, at q = v = 0 the servo
    biases vanish): p2 (position, kp 50, forcerange [-5, 4]) asked 0.1 gives force 5, 1 beyond;
    on the slide s3, p3 (kp 30) asked 0.1 gives 3 and v3 (kv 7, forcerange [-3, 3]) asked 0.4
    gives 2.8, each within, but their sum 5.8 is 1.8 beyond the joint's actuatorfrcrange
    [-6, 4]; m1 (ctrlrange [-1, 0.5], forcerange [-0.8, 0.9]) asked -1.5 is 0.5 below its
    ctrlrange, and the clamped -1 is 0.2 below its forcerange (MuJoCo's order: the force of the
    clamped control).  At a moving state the servo bias counts: p2 at q_j2 = 0.02 rad
    (L = 1.5 * 0.02) asks 50 * 0.1 - 50 * 0.03 = 3.5, within."""
    model = load_robot(DATA / "limits.xml")
    lim = model.actuator_limits
    names = model.coordinate_names
    u = np.array([[-1.5, 0.1, 0.1, 0.4, 0.0, 0.0]])
    q, v = np.zeros((1, model.nq)), np.zeros((1, model.nv))
    found = {(e.limit, e.name): e for e in limit_excess(lim, [0.0], q, v, u, names)}
    assert set(found) == {("ctrlrange", "m1"), ("forcerange", "m1"), ("forcerange", "p2"),
                          ("actuatorfrcrange", "s3")}
    # hand arithmetic on numbers of a few units: round-off only
    np.testing.assert_allclose([found[("ctrlrange", "m1")].excess,
                                found[("forcerange", "m1")].value,
                                found[("forcerange", "m1")].excess,
                                found[("forcerange", "p2")].value,
                                found[("forcerange", "p2")].excess,
                                found[("actuatorfrcrange", "s3")].value,
                                found[("actuatorfrcrange", "s3")].excess],
                               [0.5, -1.0, 0.2, 5.0, 1.0, 5.8, 1.8], rtol=0, atol=1e-12)
    q2 = q.copy()
    q2[0, model.pin_model.joints[model.pin_model.getJointId("j2")].idx_q] = 0.02
    within = limit_excess(lim, [0.0], q2, v, u, names)
    assert ("forcerange", "p2") not in {(e.limit, e.name) for e in within}
    assert limit_excess(lim, [0.0], q, v, np.zeros((1, model.nu)), names) == ()
