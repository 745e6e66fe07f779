"""MuJoCo's actuator limits on MJCF models (``ctrlrange``, ``forcerange``, a joint's
``actuatorfrcrange``): the applied forces against MuJoCo's at random states, their use by
``simulate`` (a closed form), the scenario runner's and simulator node's input path, and the
compiler rules MuJoCo refuses a file by."""

from pathlib import Path

import numpy as np
import pytest

from multibody_dynamics.errors import ModelError
from multibody_dynamics.model.actuator_limits import actuation_force
from multibody_dynamics.robot import load_robot

DATA = Path(__file__).parent / "data" / "mjcf"
LIMITS = DATA / "limits.xml"
HINGE_XML = """<mujoco model="hinge">
  <option gravity="0 0 0"/>
  <worldbody><body name="b"><joint name="j" type="hinge" axis="0 0 1"/>
    <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.25"/></body></worldbody>
  <actuator><motor name="m" joint="j" gear="2" ctrlrange="-1 0.5"/></actuator>
</mujoco>"""


def _mujoco():
    return pytest.importorskip("mujoco", reason="mujoco (the `test` extra) is not installed")


def test_limited_actuators_match_mujoco(rng):
    """At random states and controls beyond the ranges, the clipped actuator force plus the
    joint springs and dampers (the servos' bias) equals MuJoCo's ``qfrc_actuator +
    qfrc_passive``, and the accelerations MuJoCo's ``qacc``; the unclipped ``B u`` does not."""
    from multibody_dynamics.rigid import RigidDynamics

    mj = _mujoco()
    mm = mj.MjModel.from_xml_path(str(LIMITS))
    model = load_robot(LIMITS)
    assert model.input_names == ("m1", "p2", "p3", "v3", "m4", "m5")
    lim = model.actuator_limits
    assert lim is not None
    # the ranges as MuJoCo compiled them (the default class's forcerange included)
    np.testing.assert_array_equal(np.c_[lim.ctrl_lower, lim.ctrl_upper][mm.actuator_ctrllimited],
                                  mm.actuator_ctrlrange[mm.actuator_ctrllimited])
    np.testing.assert_array_equal(np.c_[lim.force_lower, lim.force_upper][
        mm.actuator_forcelimited], mm.actuator_forcerange[mm.actuator_forcelimited])
    assert np.all(np.isinf(lim.ctrl_lower[~mm.actuator_ctrllimited]))
    assert np.all(np.isinf(lim.force_lower[~mm.actuator_forcelimited]))
    dyn = RigidDynamics(model)
    d = mj.MjData(mm)
    clipped = 0
    for _ in range(20):
        q, v = rng.uniform(-1, 1, model.nq), rng.uniform(-3, 3, model.nv)
        u = rng.uniform(-3, 3, model.nu)  # mostly beyond the control ranges
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, u
        mj.mj_forward(mm, d)
        mujoco = d.qfrc_actuator + d.qfrc_passive
        ours = actuation_force(model, q, v, u) + dyn.spring_forces(q, v)
        # forces of a few N: round-off only
        np.testing.assert_allclose(ours, mujoco, rtol=0, atol=1e-12)
        clipped += not np.allclose(model.B @ u + dyn.spring_forces(q, v), mujoco, atol=1e-6)
        # accelerations up to ~1e3: relative round-off
        np.testing.assert_allclose(dyn.forward_dynamics(q, v, actuation_force(model, q, v, u)),
                                   d.qacc, rtol=1e-9, atol=1e-9 * np.abs(d.qacc).max())
    assert clipped == 20  # every sample hit a limit: the check above is not B u's
    # within every range, the limits change nothing: B u
    u = np.zeros(model.nu)
    q = np.zeros(model.nq)
    np.testing.assert_array_equal(actuation_force(model, q, np.zeros(model.nv), u), model.B @ u)


def test_unlimited_mjcf_has_no_limits():
    """No range in the file: no limits object, the input force is ``B u``."""
    assert load_robot(DATA / "arm.xml").actuator_limits is None


def test_simulate_applies_the_limits(tmp_path, capsys):
    """``multibody simulate`` of a free hinge (no gravity) under a motor with gear 2 and
    ctrlrange [-1, 0.5], driven with ctrl 5: the joint torque is 2 * 0.5 = 1 N m (unclipped:
    10 N m), so v(t) = t / I and q(t) = t^2 / (2 I) with I the hinge's inertia."""
    from multibody_control.cli import main

    xml = tmp_path / "hinge.xml"
    xml.write_text(HINGE_XML)
    out = tmp_path / "r.csv"
    assert main(["simulate", str(xml), "--tau", "5", "--duration", "0.5", "--quiet",
                 "--out", str(out)]) == 0
    with open(out) as fh:
        header = fh.readline().strip().split(",")
    data = np.loadtxt(out, delimiter=",", skiprows=1)
    t, q, v = (data[:, header.index(name)] for name in ("t", "q.j", "v.j"))
    # RK4 is exact for a constant acceleration up to round-off; the CSV has 10 digits
    np.testing.assert_allclose(v, t / 0.25, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(q, t ** 2 / (2 * 0.25), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("attrs, expected", [
    ('ctrllimited="true" ctrlrange="1 -1"', "ctrlrange '1 -1': expected lower < upper"),
    ('ctrllimited="true"', 'ctrllimited="true" without a ctrlrange'),
    ('forcelimited="maybe" forcerange="-1 1"', "forcelimited='maybe'; expected true, false"),
    ('ctrlrange="-1 x"', "ctrlrange: expected two numbers"),
])
def test_bad_limits_are_refused(tmp_path, attrs, expected):
    """Ranges MuJoCo's compiler refuses are refused with one line naming the actuator."""
    xml = tmp_path / "bad.xml"
    xml.write_text(f"""<mujoco model="bad">
  <worldbody><body name="b"><joint name="j" type="hinge" axis="0 0 1"/>
    <geom type="sphere" size="0.1" mass="1"/></body></worldbody>
  <actuator><motor name="m" joint="j" {attrs}/></actuator>
</mujoco>""")
    with pytest.raises(ModelError, match="actuator 'm'") as caught:
        load_robot(xml)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_autolimits_false_needs_the_flag(tmp_path):
    """With ``<compiler autolimits="false">`` a range without its limited flag is an error in
    MuJoCo, and here; an inverted range under "auto" limits nothing, as in MuJoCo (a note)."""
    mj = _mujoco()
    body = """<worldbody><body name="b"><joint name="j" type="hinge" axis="0 0 1"/>
    <geom type="sphere" size="0.1" mass="1"/></body></worldbody>"""
    xml = tmp_path / "a.xml"
    xml.write_text(f"""<mujoco model="a"><compiler autolimits="false"/>{body}
  <actuator><motor name="m" joint="j" ctrlrange="-1 1"/></actuator></mujoco>""")
    with pytest.raises(ValueError):
        mj.MjModel.from_xml_path(str(xml))
    with pytest.raises(ModelError, match="has a ctrlrange but no ctrllimited"):
        load_robot(xml)
    xml.write_text(f"""<mujoco model="a">{body}
  <actuator><motor name="m" joint="j" ctrlrange="1 -1"/></actuator></mujoco>""")
    assert not mj.MjModel.from_xml_path(str(xml)).actuator_ctrllimited[0]
    model = load_robot(xml)
    assert model.actuator_limits is None
    assert any("has lower >= upper: not a limit" in n for n in model.notes)


def test_scenario_runner_applies_the_limits(tmp_path):
    """``run`` of a stiff PD on the hinge towards a step 1 rad away: the controller asks far
    beyond the ctrlrange; the recorded input is clipped at 0.5 and, from the first period on,
    the hinge accelerates at 2 * 0.5 / I = 4 rad/s^2: q = 2 (t - 1 ms)^2 (zero-order hold of
    a constant input, which RK4 integrates exactly)."""
    from multibody_control.scenarios import run_scenario, scenario_from_mapping

    xml = tmp_path / "hinge.xml"
    xml.write_text(HINGE_XML)
    model = load_robot(xml)
    sc = scenario_from_mapping({
        "robot": model, "duration": 0.3, "task_frame": None,
        "reference": {"joints": {"t0": 0.0, "tf": 0.01, "order": 5, "start": {"j": 0.0},
                                 "end": {"j": 1.0}}},
        "controller": {"law": "pd", "kp": 1000.0, "kd": 10.0}, "plant": {"rate": 1000.0}})
    r = run_scenario(sc)
    assert r.success and r.u[0, 0] == 0.0 and np.all(r.u[1:200, 0] == 0.5)
    k = np.arange(1, 200)
    # round-off of 200 RK4 steps on q ~ 0.08 rad
    np.testing.assert_allclose(r.q[k, 0], 2 * (r.t[k] - r.t[1]) ** 2, rtol=0, atol=1e-13)
