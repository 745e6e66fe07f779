"""Inversion of closed-loop models for frame outputs (end-effector paths).

Oracles: the five-bar's closed-form inverse kinematics (two 2R legs, circle intersection)
with analytic path derivatives, independent of pinocchio and of the closure machinery; the
slider-crank's closed form q1 = acos(x / 2l), q2 = -2 q1 (Aghili 2005 Sect. 8); the
projected equation of motion P (M a + h - B u) = 0 written here with numpy; open-loop
simulation of the feedforward (the index-1 projected dynamics in ``verify``, and the
constrained fixed-step Simulator with manifold projection).
"""

import numpy as np
import pinocchio as pin
import pytest
from scipy.optimize import brentq

from multibody_control.inversion.methods import invert, verify
from multibody_control.outputs import Output
from multibody_control.tasks import (
    PathComponent,
    Task,
    TimeLaw,
    circular_arc,
    linear_move,
    straight_line,
)
from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import InputError

# five_bar.yaml / urdf: motors at x = -0.1 m and 0.1 m, proximal 0.2 m, distal 0.3 m
L1, L2, BASE_X = 0.2, 0.3, (-0.1, 0.1)
GUESS = [2.0, -1.2, 1.1, 1.2]  # elbows out (left elbow < 0, right > 0): conftest's assembly
ELBOWS = (-1.0, 1.0)
LAW = TimeLaw(0.1, 0.9)
LINE = straight_line("left_tip", (-0.05, 0.30), (0.08, 0.38))
CIRCLE = circular_arc("left_tip", (0.0, 0.33), 0.05, -90.0, 270.0)  # a full turn


def leg_ik(base_x, p, dp, ddp, elbow):
    """Closed-form 2R inverse kinematics of one leg for points p (N, 2) with the derivatives
    dp, ddp along the path: (q, q', q''), each (N, 2) = [motor, elbow]."""
    d = p - np.array([base_x, 0.0])
    c2 = (np.sum(d * d, axis=1) - L1**2 - L2**2) / (2 * L1 * L2)
    q2 = elbow * np.arccos(c2)
    q1 = np.arctan2(d[:, 1], d[:, 0]) - np.arctan2(L2 * np.sin(q2), L1 + L2 * np.cos(q2))
    s1, c1, s12, c12 = np.sin(q1), np.cos(q1), np.sin(q1 + q2), np.cos(q1 + q2)
    J = np.stack([np.column_stack([-L1 * s1 - L2 * s12, -L2 * s12]),
                  np.column_stack([L1 * c1 + L2 * c12, L2 * c12])], axis=1)  # (N, 2, 2)
    dq = np.linalg.solve(J, dp[..., None])[..., 0]
    w1, w12 = dq[:, 0], dq[:, 0] + dq[:, 1]
    bias = np.column_stack([-L1 * c1 * w1**2 - L2 * c12 * w12**2,
                            -L1 * s1 * w1**2 - L2 * s12 * w12**2])
    ddq = np.linalg.solve(J, (ddp - bias)[..., None])[..., 0]
    return np.column_stack([q1, q2]), dq, ddq


def five_bar_ik(p, dp, ddp, elbows=ELBOWS):
    """(q, q', q'') (N, 4) in the model's order (left_motor, left_elbow, right_motor,
    right_elbow)."""
    legs = [leg_ik(b, p, dp, ddp, e) for b, e in zip(BASE_X, elbows)]
    return tuple(np.hstack([legs[0][k], legs[1][k]]) for k in range(3))


def motor_path(frame_path: PathComponent, elbows=ELBOWS) -> PathComponent:
    """The motors' angles along the frame path, as a joint task (the same motion)."""
    def fn(s):
        q, dq, ddq = five_bar_ik(*frame_path.fn(s), elbows)
        return q[:, [0, 2]], dq[:, [0, 2]], ddq[:, [0, 2]]

    return PathComponent(("left_motor", "right_motor"), fn)


@pytest.fixture(scope="module")
def five_bar(models):
    return models["five_bar"]


@pytest.fixture(scope="module")
def line_result(five_bar):
    out = Output(five_bar, ["left_tip.x", "left_tip.y"])
    task = Task(LAW, (LINE,))
    return out, task, invert(five_bar, out, task, "classical", dt=1e-3, ik_guess=GUESS, t_end=1.0)


def test_closed_form_geometry_matches_the_model(five_bar):
    """The oracle's leg lengths and bases are the model's: closed-form IK assembles the loop."""
    p = np.array([[0.02, 0.35]])
    q = five_bar_ik(p, np.zeros((1, 2)), np.zeros((1, 2)))[0][0]
    np.testing.assert_allclose(Constraints(five_bar).residual(q), 0.0, atol=1e-15)
    np.testing.assert_allclose(Output(five_bar, ["left_tip.x", "left_tip.y"]).value(q), p[0],
                               atol=1e-15)


@pytest.mark.parametrize("path", [LINE, CIRCLE], ids=["line", "circle"])
def test_five_bar_end_point_follows_the_path(five_bar, path, line_result):
    out = Output(five_bar, ["left_tip.x", "left_tip.y"])
    task = Task(LAW, (path,))
    r = line_result[2] if path is LINE else invert(five_bar, out, task, "classical", dt=1e-3,
                                                   ik_guess=GUESS, t_end=1.0)
    assert r.success, r.message
    assert r.eta.shape == (r.t.size, 0)  # fully actuated: no internal dynamics
    # Newton stops below 1e-12 on [phi; h - y_d] (measured 1e-16 .. 1e-15): the end point is
    # on the path to round-off at every sample
    assert r.output_error < 1e-10, r.output_error
    cons = Constraints(five_bar)
    p, pd_, pdd = task(r.t)
    for k in range(0, r.t.size, 25):
        q, v, a = r.q[k], r.v[k], r.a[k]
        A, gamma = cons.jacobian_and_bias(q, v)
        H = out.jacobian(q)
        # velocity and acceleration levels: linear solves with a well-conditioned [A; H]
        # (sigma_min / sigma_max >= 0.1 on these paths) -> round-off, 1e-12 m/s, m/s^2
        np.testing.assert_allclose(cons.residual(q), 0.0, atol=1e-12)
        np.testing.assert_allclose(A @ v, 0.0, atol=1e-12)
        np.testing.assert_allclose(H @ v, pd_[k], atol=1e-12)
        np.testing.assert_allclose(A @ a + gamma, 0.0, atol=1e-12)
        np.testing.assert_allclose(H @ a + out.bias(q, v), pdd[k], atol=1e-12)
    # open loop through the projected dynamics (DOP853, rtol 1e-10) under the spline of u
    # (1 ms samples, O(h^4)): measured 1.1e-11 m (line) and 1.9e-10 m (circle)
    ver = verify(five_bar, r, task, out)
    assert ver.success, ver.message
    assert ver.max_error < 1e-8, ver.max_error


def test_frame_path_agrees_with_joint_task(five_bar, line_result):
    """The same motion given as motor trajectories (closed-form IK of the line) gives the
    same joint motion and the same feedforward."""
    out, task, r = line_result
    ref = five_bar_ik(*LINE.fn(LAW(r.t)[0]))
    # the closed-form IK: arccos/atan2 to round-off, the solver to 1e-12 on the residual
    np.testing.assert_allclose(r.q, ref[0], atol=1e-11)
    joints = Task(LAW, (motor_path(LINE),))
    rj = invert(five_bar, Output(five_bar, ["left_motor", "right_motor"]), joints, "classical",
                dt=1e-3, ik_guess=GUESS, t_end=1.0)
    assert rj.success, rj.message
    np.testing.assert_allclose(rj.t, r.t, atol=0)
    np.testing.assert_allclose(rj.q, r.q, atol=1e-11)
    # v, a from differently stacked linear systems ([A; S] vs [A; H]), both well conditioned
    np.testing.assert_allclose(rj.v, r.v, atol=1e-10)
    np.testing.assert_allclose(rj.a, r.a, atol=1e-9)
    # same u to 1e-8 relative (measured 9e-15): the projection's inverse dynamics of the
    # same (q, v, a)
    np.testing.assert_allclose(rj.u, r.u, atol=1e-8 * np.abs(r.u).max())
    # the frame coordinates of the joint-task motion are on the line
    np.testing.assert_allclose([out.value(q) for q in rj.q], task(rj.t)[0], atol=1e-10)


def test_passive_joints_carry_no_effort(five_bar, line_result):
    """B u (zero on the elbows) alone produces the motion: P (M a + h - B u) = 0, the rest is
    a constraint force A^T lam (Aghili 2005 eqs. 21, 59-62), checked with plain numpy."""
    _, _, r = line_result
    pm, data = five_bar.pin_model, five_bar.pin_model.createData()
    cons = Constraints(five_bar)
    assert np.all(five_bar.B[five_bar.passive] == 0)  # inputs act on the motors only
    scale = np.abs(r.u).max()
    for k in range(0, r.t.size, 20):
        q, v, a = r.q[k], r.v[k], r.a[k]
        tau = five_bar.B @ r.u[k]
        f = pin.crba(pm, data, q) @ a + pin.nonLinearEffects(pm, data, q, v) - tau
        A = cons.jacobian(q)
        P = np.eye(five_bar.nv) - np.linalg.pinv(A) @ A
        # round-off of the projection (||M a + h|| ~ 0.1 N m): 1e-12 of the peak torque
        np.testing.assert_allclose(P @ f, 0.0, atol=1e-12 * max(scale, 1.0))


def test_simulator_reproduces_the_path(five_bar, line_result):
    """The constrained fixed-step simulator (RK4 + Newton projection onto phi = 0), input held
    at its mid-step value: second order in the step."""
    from multibody_dynamics.simulate import SimulatorConfig, simulate

    out, task, r = line_result
    u_of_t, h = r.u_interpolant(), 1e-3
    sim = simulate(five_bar, 0.99, q0=r.q[0], v0=r.v[0], config=SimulatorConfig(dt=h),
                   tau=lambda t, q, v: five_bar.B @ u_of_t(t + 0.5 * h))
    assert sim.success, sim.message
    err = np.linalg.norm([out.value(q) for q in sim.q] - task(sim.t)[0], axis=1).max()
    # midpoint hold over 1 ms steps: measured 5.9e-7 m (2.3e-8 m at 0.2 ms), on a 0.15 m path
    assert err < 2e-6, err


def test_slider_crank_slider_position(models):
    """Aghili (2005) Sect. 8: the slider C as output; closed form q1 = acos(x / 2l), q2 = -2 q1."""
    m = models["slider_crank"]
    out = Output(m, ["slider_pin.x"])
    task = Task(LAW, (linear_move("slider_pin.x", 0.5, 0.25),))
    r = invert(m, out, task, "classical", dt=1e-3, ik_guess=[0.6, -1.2], t_end=1.0)
    assert r.success, r.message
    q1 = np.arccos(task(r.t)[0][:, 0] / (2 * 0.3))
    # arccos amplifies round-off by 1/sin(q1) ~ 2: measured 2e-12 rad
    np.testing.assert_allclose(r.q[:, 0], q1, atol=1e-10)
    np.testing.assert_allclose(r.q[:, 1], -2 * q1, atol=1e-10)
    ver = verify(m, r, task, out)
    # open loop (projected dynamics, spline of u at 1 ms): measured 9e-10 m
    assert ver.success and ver.max_error < 1e-8, ver.max_error


def test_five_bar_parallel_singularity_is_reported(five_bar):
    """Elbows in (+, -): the vertical line x = 0 from y = 0.20 m down to 0.10 m crosses the
    configuration where the distal links are aligned (the constraint forces cannot hold the
    elbows).  Failure names that time; the samples before are kept."""
    path = straight_line("left_tip", (0.0, 0.20), (0.0, 0.10))
    elbows = (1.0, -1.0)
    z = np.zeros((1, 2))
    guess = five_bar_ik(np.array([[0.0, 0.20]]), z, z, elbows)[0][0]

    def aligned(y):  # sine of the angle between the distal links
        q = five_bar_ik(np.array([[0.0, y]]), z, z, elbows)[0][0]
        return np.sin(q[0] + q[1] - q[2] - q[3])

    y_star = brentq(aligned, 0.10, 0.20, xtol=1e-14)
    s_star = (0.20 - y_star) / 0.10
    t_star = brentq(lambda t: LAW(t)[0] - s_star, LAW.t0, LAW.tf, xtol=1e-14)
    r = invert(five_bar, Output(five_bar, ["left_tip.x", "left_tip.y"]), Task(LAW, (path,)),
               "classical", dt=1e-3, ik_guess=guess, t_end=1.0)
    assert not r.success
    assert "parallel" in r.message and "left_elbow, right_elbow" in r.message, r.message
    assert f"t = {r.t[-1] + 1e-3:.4g} s" in r.message, r.message
    # the crossing lies between the last kept sample and the next one
    assert r.t[-1] < t_star <= r.t[-1] + 1e-3 + 1e-12, (r.t[-1], t_star)
    assert r.output_error < 1e-10 and r.q.shape == (r.t.size, 4)


def test_slider_crank_singularity_is_reported(models):
    """The slider through x = 0 passes q1 = pi/2, where the constraint row vanishes
    (Aghili 2005 eq. 70)."""
    m = models["slider_crank"]
    task = Task(LAW, (linear_move("slider_pin.x", 0.3, -0.1),))
    r = invert(m, Output(m, ["slider_pin.x"]), task, "classical", dt=1e-3,
               ik_guess=[1.0, -2.0], t_end=1.0)
    t_star = brentq(lambda t: task(t)[0][0], LAW.t0, LAW.tf, xtol=1e-14)  # x_d(t*) = 0
    assert not r.success and "singularity" in r.message and "rod" in r.message, r.message
    assert r.t[-1] < t_star <= r.t[-1] + 1e-3 + 1e-12
    assert np.all(r.q[:, 0] < np.pi / 2)


def test_out_of_reach_is_reported(five_bar):
    """The line leaves the workspace (the legs reach y = 0.49 m at x = 0)."""
    path = straight_line("left_tip", (0.0, 0.35), (0.0, 0.60))
    r = invert(five_bar, Output(five_bar, ["left_tip.x", "left_tip.y"]), Task(LAW, (path,)),
               "classical", dt=2e-3, ik_guess=GUESS, t_end=1.0)
    assert not r.success and r.t.size > 10
    assert "out of reach" in r.message or "serial" in r.message, r.message
    y_last = r.y[-1, 1]
    assert 0.45 < y_last <= np.sqrt(0.5**2 - 0.1**2) + 1e-9, y_last


def test_task_rows_must_match_the_degrees_of_freedom(five_bar):
    task = Task(LAW, (linear_move("left_tip.x", 0.0, 0.05),))
    with pytest.raises(InputError, match="2 degrees of freedom"):
        invert(five_bar, Output(five_bar, ["left_tip.x"]), task, dt=1e-2, ik_guess=GUESS)
    with pytest.raises(InputError, match="ik_guess"):
        invert(five_bar, Output(five_bar, ["left_tip.x", "left_tip.y"]), Task(LAW, (LINE,)),
               dt=1e-2, ik_guess=[1.0, 2.0])


def test_scenario_runs_through_the_cli(tmp_path, capsys):
    from pathlib import Path

    from multibody_control.cli import main

    path = (Path(__file__).resolve().parents[1] / "config" / "scenarios"
            / "invert_five_bar_path.yaml")
    assert main(["invert", str(path), "--out", str(tmp_path), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "classical: ok" in text and "open-loop check" in text, text
    ee_mm = float(text.split("end-effector error")[1].split("mm")[0])
    assert ee_mm < 1e-5  # 1e-8 m, as in test_five_bar_end_point_follows_the_path
    csv = tmp_path / "invert_five_bar_path.csv"
    header = csv.read_text().splitlines()[0].split(",")
    assert header[:2] == ["t", "q.left_motor"] and "u.right_motor" in header
    data = np.loadtxt(csv, delimiter=",", skiprows=1)
    assert data.shape == (1001, len(header))
    np.testing.assert_allclose(data[:, header.index("y.1")], data[:, header.index("y_d.1")],
                               atol=1e-9)  # written with 10 digits
    assert (tmp_path / "invert_five_bar_path.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_scenario_ik_guess_forms_and_errors(tmp_path):
    from pathlib import Path

    from multibody_control.inversion.scenario import load_inversion_scenario

    shipped = (Path(__file__).resolve().parents[1] / "config" / "scenarios"
               / "invert_five_bar_path.yaml")
    text = shipped.read_text()
    line = "ik_guess: {left_motor: 2.0, left_elbow: -1.2, right_motor: 1.1, right_elbow: 1.2}"
    assert line in text
    np.testing.assert_array_equal(load_inversion_scenario(shipped).ik_guess, GUESS)
    path = tmp_path / "s.yaml"
    path.write_text(text.replace(line, "ik_guess: [2.0, -1.2, 1.1, 1.2]"))
    np.testing.assert_array_equal(load_inversion_scenario(path).ik_guess, GUESS)
    for bad, words in (("ik_guess: {elbow: 1.0}", "ik_guess.elbow: unknown key"),
                       ("ik_guess: [2.0, -1.2]", "ik_guess: expected 4 values")):
        path.write_text(text.replace(line, bad))
        with pytest.raises(InputError, match=words):
            load_inversion_scenario(path)
