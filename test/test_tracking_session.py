"""The tracking session (multibody_control/controllers/session.py) without ROS: what
controller_node decides, driven with arrays.

Oracles: the library's control laws built directly (make_controller) on the same reference, the
closed-form rest-to-rest motion (a quintic Hermite through its samples reproduces the quintic
exactly), and the closed loop of ``multibody run`` (run_scenario) on the same scenario.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from multibody_control.controllers import (
    ComputedTorqueController,
    PDController,
    ProjectedInverseDynamicsController,
    Reference,
    TrajectoryInterpolator,
    make_controller,
)
from multibody_control.controllers.session import RESUME_JUMP, LawError, TrackingSession
from multibody_control.scenarios import load_run_scenario, run_scenario, sample_reference
from multibody_control.trajectories import rest_to_rest
from multibody_dynamics.model.resources import share_dir
from multibody_dynamics.robot import input_effort_limits, load_robot
from multibody_dynamics.simulate import Simulator, SimulatorConfig


def test_the_session_starts_from_the_node_defaults():
    """DEFAULTS are controller_node's parameter defaults (a session of a script and the node
    with no parameters set run the same law)."""
    pytest.importorskip("rclpy")
    from multibody_control.controllers.session import DEFAULTS
    from multibody_control.ros.controller_node import PARAMETERS

    node = {spec.name: spec.default for spec in PARAMETERS}
    assert {name: node[name] for name in DEFAULTS} == DEFAULTS


# -- law selection by what the robot has -------------------------------------------------------
@pytest.mark.parametrize("robot, values, kind", [
    ("arm7", {}, ComputedTorqueController),                          # fully actuated: the default
    ("passive_arm", {"law": "pd", "kp": [1.0], "kd": [0.02]}, PDController),
    ("five_bar", {"law": "projected_inverse_dynamics"}, ProjectedInverseDynamicsController),
])
def test_a_law_that_fits_is_chosen(models, robot, values, kind):
    session = TrackingSession(models[robot], values)
    assert isinstance(session.setup.controller, kind) and not session.flexible


@pytest.mark.parametrize("robot, values, words", [
    ("passive_arm", {}, "fully actuated"),                  # computed torque, underactuated
    ("five_bar", {"law": "tv_lqr"}, "loop closures"),       # the LQR design is open-chain only
    ("arm7", {"law": "pd", "kp": [1.0, 2.0]}, "kp"),        # gains of the wrong length
])
def test_a_law_that_does_not_fit_is_refused(models, robot, values, words):
    with pytest.raises(LawError, match=words):
        TrackingSession(models[robot], values)


def test_a_flexible_robot_gets_joint_feedback_only():
    """Elastic coordinates: the joint view is controlled (one input per joint), the elastic
    coordinates are measured but not driven; the laws that need the dynamics are refused."""
    robot = load_robot("flexible_manipulator")
    with pytest.raises(LawError, match="is a flexible model"):
        TrackingSession(robot, {})  # the default law, computed torque
    session = TrackingSession(robot, {"law": "pd", "kp": [1.0], "kd": [0.01]})
    assert session.flexible and session.model.nu == robot.nu == len(robot.joint_names)
    assert set(session.ignored) == set(robot.coordinate_names) - set(robot.joint_names)
    q = np.array([0.1, -0.2])
    session.observe(0.0, q, np.zeros(2))
    # held at the measured joints: PD with zero error, no feedforward
    np.testing.assert_array_equal(session.command(0.01), np.zeros(2))


# -- tv_lqr: fallback, redesign, supersession ----------------------------------------------------
LQR = {"law": "tv_lqr", "rate_hz": 250.0, "kp": [1e3], "kd": [10.0], "lqr_r": [0.1],
       "fallback_kp": [400.0, 400.0, 100.0], "fallback_kd": [40.0, 40.0, 2.0]}
Q0 = np.array([-1.0, 0.3, 0.2, 0.0])
DQ = np.array([0.3, 0.1, 0.1, 0.0])


def _motion():
    """passive_arm's rest-to-rest motion on 21 points with 5 N of feedforward on the cart."""
    t = np.linspace(0.0, 1.0, 21)
    wp = rest_to_rest(t, Q0, Q0 + DQ, 0.1, 0.9)
    effort = np.zeros((t.size, 4))
    effort[:, 0] = 5.0
    return TrajectoryInterpolator(wp.t, wp.q, wp.v, wp.a, effort)


def test_tv_lqr_runs_the_fallback_until_its_gains_are_designed(models):
    model = models["passive_arm"]
    jobs = []
    session = TrackingSession(model, LQR, schedule=jobs.append)
    session.observe(0.0, Q0, np.zeros(4))
    job = session.start(_motion(), 0.0)
    assert job is not None and jobs == [job] and session.plan is None
    # the fallback: the PD law on the same reference and feedforward, built here
    pd = make_controller("pd", model, (400.0, 400.0, 100.0), (40.0, 40.0, 2.0),
                         effort_limit=tuple(input_effort_limits(model)))
    q = Q0 + np.array([0.01, -0.02, 0.0, 0.03])
    v = np.array([0.1, 0.0, -0.1, 0.2])
    session.observe(0.5, q, v)
    closed = rest_to_rest(np.array([0.5]), Q0, Q0 + DQ, 0.1, 0.9)
    ref = Reference(closed.q[0], closed.v[0], closed.a[0], np.array([5.0, 0.0, 0.0]))
    # same law and reference (the Hermite reproduces the quintic to round-off): 1e-9 N
    np.testing.assert_allclose(session.command(0.5), pd.step(0.5, q, v, ref), atol=1e-9)

    plan = session.design(job)
    assert session.offer(plan) and session.take_ready(0.5) is plan and session.plan is plan
    # the gains: a tv_lqr design built here on the closed-form nominal motion sampled at the
    # control period, with the feedforward as nominal input
    dt = 1.0 / 250.0
    grid = dt * np.arange(round(1.0 / dt) + 1)
    nominal = rest_to_rest(grid, Q0, Q0 + DQ, 0.1, 0.9)
    u = np.tile([5.0, 0.0, 0.0], (grid.size, 1))
    lqr = make_controller("tv_lqr", model, 1e3, 10.0, trajectory={
        "t": grid, "q": nominal.q, "v": nominal.v, "u": u}, dt=dt, R=0.1,
        effort_limit=tuple(input_effort_limits(model)))
    # same Riccati recursion on nominal motions equal to round-off (1e-12 rad): 1e-7 relative
    np.testing.assert_allclose(plan.controller.gain(0.5), lqr.gain(0.5), rtol=1e-7,
                               atol=1e-7 * np.abs(lqr.gain(0.5)).max())
    np.testing.assert_allclose(session.command(0.5), lqr.step(0.5, q, v, ref), rtol=1e-6,
                               atol=1e-6)
    assert not np.allclose(session.command(0.5), pd.step(0.5, q, v, ref), atol=1e-3)

    # a gain change keeps the gains until the new design; a new trajectory drops them at once
    assert session.reconfigure({"kp": [2e3]})
    assert session.plan is plan and jobs[-1] is session.job and session.job is not job
    assert not session.offer(plan)  # the design of the old weights is stale
    session.start(_motion(), 0.6)
    assert session.plan is None
    assert not session.offer(session.design(jobs[-2]))  # superseded by the new trajectory
    assert session.offer(session.design(session.job))


def test_tv_lqr_fallback_zero_commands_zero(models):
    session = TrackingSession(models["passive_arm"], {**LQR, "fallback_law": "zero"})
    session.observe(0.0, Q0, np.zeros(4))
    session.start(_motion(), 0.0)
    assert session.zero_fallback
    np.testing.assert_array_equal(session.command(0.2), np.zeros(3))


# -- the held target and stale input -------------------------------------------------------------
def test_hold_on_stale_and_resumed_input(models):
    arm = models["arm7"]
    session = TrackingSession(arm, {"law": "pd", "kp": [1.0], "kd": [0.02],
                                    "state_timeout": 0.5})
    q0 = np.zeros(7)
    # (times from 10 s: a state at clock 0 is one before the clock runs, with no gap measured)
    assert session.observe(10.0, q0, np.zeros(7)) is None
    session.command(10.1)
    np.testing.assert_array_equal(session.last_reference.q, q0)  # the first state is held
    assert not session.stale(10.5) and session.stale(10.51)  # older than state_timeout

    t = np.linspace(0.0, 1.0, 11)
    wp = rest_to_rest(t, q0, q0 + 0.3, 0.0, 1.0)
    session.start(TrajectoryInterpolator(wp.t, wp.q, wp.v, wp.a), 10.0)
    # the states resume 2 s later, 0.1 rad away (> RESUME_JUMP): the measured position is held
    moved = q0.copy()
    moved[0] = 0.1
    assert 0.1 > RESUME_JUMP
    hold = session.observe(12.0, moved, np.zeros(7))
    assert hold is not None and hold.aborted and "resumed after 2 s" in hold.reason
    assert session.traj is None
    np.testing.assert_array_equal(session.current_reference(12.0).q, moved)
    # a gap with a small move (a DDS hiccup, the braked plant did not move) keeps the target
    nudged = moved.copy()
    nudged[1] = 0.01
    assert session.observe(14.0, nudged, np.zeros(7)) is None
    np.testing.assert_array_equal(session.current_reference(14.0).q, moved)
    # the clock going back (a simulation restarted) holds what is measured then
    assert session.check_clock(14.0) is None
    hold = session.check_clock(11.0)
    assert hold is not None and not hold.aborted and "clock went back" in hold.reason
    np.testing.assert_array_equal(session.current_reference(11.0).q, nudged)


def test_trajectories_are_validated(models):
    arm = models["arm7"]
    session = TrackingSession(arm, {"law": "computed_torque"})
    with pytest.raises(ValueError, match="no state observed yet"):
        session.command(0.0)  # misuse: nothing measured to command from
    session.observe(0.0, np.zeros(7), np.zeros(7))
    bad = np.zeros((1, 7))
    bad[0, 1] = 2.5  # urdf/arm7.urdf: joint2 within +-2.09 rad
    with pytest.raises(ValueError, match=r"joint2 at 2.5, outside its URDF limits"):
        session.interpolator([0.5], bad)
    with pytest.raises(ValueError, match="ends in the past"):
        session.interpolator([0.5], np.zeros((1, 7)), start=1.0, now=2.0)
    # a first point after t = 0 is reached from the current reference (the held state)
    interp, start = session.interpolator([0.5], np.full((1, 7), 0.2), now=3.0)
    assert start == 3.0 and interp.t.tolist() == [0.0, 0.5]
    np.testing.assert_array_equal(interp.sample(0.0)[0], np.zeros(7))


def test_a_constrained_law_takes_the_independent_joints_only(models):
    """five_bar under projected_inverse_dynamics: a trajectory of the two motors is completed
    with the elbows (dependent) at their current reference; one that leaves out a motor is
    refused naming it."""
    model = models["five_bar"]
    q0 = np.array([2.260904311, -1.549961486, 0.880688343, 1.549961486])  # assembled
    session = TrackingSession(model, {"law": "projected_inverse_dynamics"})
    session.observe(1.0, q0, np.zeros(4))
    names = list(model.coordinate_names)
    motors = [names[i] for i in session.setup.controller.independent]
    assert sorted(motors) == ["left_motor", "right_motor"]
    missing, fill = session.fill_dependent(motors, 1.0)
    assert sorted(missing) == sorted(set(names) - set(motors))
    np.testing.assert_array_equal(fill, [q0[names.index(n)] for n in missing])  # held: q0
    with pytest.raises(ValueError, match="left_motor not named"):
        session.fill_dependent(["right_motor"], 1.0)


# -- one closed loop against `multibody run` -----------------------------------------------------
def test_closed_loop_matches_multibody_run():
    """arm7 under computed torque (config/scenarios/run_arm7_computed_torque.yaml, first 0.6 s):
    the session driven with the plant's states at the control rate reproduces the closed loop
    of ``multibody run`` (run_scenario: same law, gains, reference samples, plant, zero-order
    hold). The session follows the reference through its quintic Hermite interpolator, exact at
    the control instants; the plant is the same Simulator, so the two runs agree to round-off."""
    sc = load_run_scenario(share_dir() / "config" / "scenarios" / "run_arm7_computed_torque.yaml")
    sc = dataclasses.replace(sc, duration=0.6)
    ref = sample_reference(sc)
    res = run_scenario(sc, reference=ref)
    assert res.success, res.message
    c = sc.controller
    session = TrackingSession(sc.model, {"law": c["law"], "kp": [c["kp"]], "kd": [c["kd"]],
                                         "rate_hz": sc.rate, "effort_limit": [1e9]})
    sim = Simulator(sc.model, SimulatorConfig(dt=sc.dt / sc.substeps, method=sc.method,
                                              max_speed=sc.max_speed))
    sim.reset(res.q[0], res.v[0], t=float(ref.t[0]))
    session.observe(sim.t, sim.q, sim.v)
    session.start(TrajectoryInterpolator(ref.t, ref.q, ref.v, ref.a), float(ref.t[0]))
    B = np.asarray(sc.model.B, float)
    Q = np.empty_like(res.q)
    for k in range(res.t.size):
        Q[k] = sim.q
        session.observe(sim.t, sim.q, sim.v)
        u = session.command(sim.t)
        if k == res.t.size - 1:
            break
        for _ in range(sc.substeps):
            sim.step(B @ u)
    # the initial error (0.02 rad) decays under both runs alike: round-off only, 1e-9 rad
    np.testing.assert_allclose(Q, res.q, rtol=0, atol=1e-9)
    assert np.max(np.abs(res.joint_error[-1])) < 0.5 * 0.02  # and it did decay
