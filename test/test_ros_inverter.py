"""inverter_node over real DDS: the published feedforward, robustness, and a closed loop.

The scenario is the short minimum-phase one of test_inversion_scenario (passive_arm_minphase,
exact output [x, tip.x, tip.y], method ode, motion 0.05..1.05 s) at dt = 0.01 s, with
solver tolerances rtol 1e-6 / atol 1e-8 (half the solve time of 1e-8 / 1e-10; the
feedforward changes by ~2e-3 N of 533 N) and the interval ending at 1.2 s.  The library
inversion of the same file is computed once per module and is the reference of all tests.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import ros_helpers

rclpy = pytest.importorskip("rclpy")

from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from multibody_control.controllers import (  # noqa: E402
    Reference,
    TrajectoryInterpolator,
    inputs_from_generalized,
    make_controller,
)
from multibody_control.inversion.scenario import (  # noqa: E402
    load_inversion_scenario,
    run_inversion_scenario,
)
from multibody_dynamics.ros.conversions import (  # noqa: E402
    JointCoordinates,
    duration_to_sec,
    sec_to_duration,
    stamp_to_sec,
    trajectory_from_msg,
)
from multibody_dynamics.simulate import Simulator, SimulatorConfig  # noqa: E402

launch = ros_helpers.launch  # fixtures
probe = ros_helpers.probe

ROBOT = "passive_arm_minphase"
SCENARIO = """\
robot: passive_arm_minphase
task:
  t0: 0.05
  tf: 1.05
  joints: {x: {start: -1.0, end: 1.0}}
  arcs: {tip: {center: [0.0, -1.5], radius: 1.0, start_deg: 180.0, end_deg: 0.0}}
method: ode
dt: 0.01
options: {t_end: 1.2, rtol: 1.0e-6, atol: 1.0e-8}
verify: false
"""
TOPIC = "/inverter_node/joint_trajectory"
REQUESTS = "/inverter_node/output_trajectory"
# The node runs the library's code on the same file: the efforts agree to round-off (the
# BLAS may sum in another order); 1e-6 of the peak feedforward is far above that and far
# below any real difference (a sample shifted by one dt changes u by ~10 N).
EFFORT_RTOL = 1e-6

# Closed loop (simulator_node + controller_node + inverter_node), collocated PD plus the
# feedforward, per input [F, T1, T2]: soft on T2, whose joint sees only ~0.36 kg m^2 of
# effective inertia with the passive links free (the loop also stays stable with 20 ms of delay).
RATE = 250.0                          # Hz, simulator step and control rate
KP = [400.0, 400.0, 100.0]            # N/m, N m/rad
KD = [40.0, 40.0, 2.0]                # N s/m, N m s/rad
AFTER = 0.3                           # s of holding after the last point that are checked


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    path = tmp_path_factory.mktemp("inverter") / "scenario.yaml"
    path.write_text(SCENARIO)
    sc = load_inversion_scenario(path)
    result, _, _ = run_inversion_scenario(sc)
    assert result.success, result.message
    return path, sc, result


def output_request(sc, times, names=None, nan=False, shuffle=False) -> JointTrajectory:
    """Desired outputs of the scenario's task at ``times`` (positions, velocities,
    accelerations)."""
    y, yd, ydd = sc.task(np.asarray(times, float))
    names = list(names or sc.task.names)
    order = list(range(len(names)))
    if shuffle:
        order = order[::-1]
    msg = JointTrajectory(joint_names=[names[i] for i in order])
    for k, t in enumerate(times):
        pos = y[k, order].tolist()
        if nan and k == 3:
            pos[1] = math.nan
        msg.points.append(JointTrajectoryPoint(positions=pos, velocities=yd[k, order].tolist(),
                                               accelerations=ydd[k, order].tolist(),
                                               time_from_start=sec_to_duration(float(t))))
    return msg


def arrays(msg, model):
    arr = trajectory_from_msg(msg, JointCoordinates(model))
    return arr.t, arr.positions, arr.velocities, arr.accelerations, arr.effort


def test_publishes_feedforward_latched_and_rejects_bad_requests(launch, probe, library):
    path, sc, result = library
    model = sc.model
    inv = launch("inverter_node", robot=ROBOT, scenario=str(path), progress_period=0.1)
    probe.wait_for(lambda: "published" in inv.log(), 60.0, "the scenario's inversion", (inv,))
    # subscribed only now: the result reaches a late subscriber (transient-local QoS)
    received = probe.record(JointTrajectory, TOPIC, latched=True)
    probe.wait_for(lambda: len(received) == 1, 30.0, "the latched joint trajectory", (inv,))
    msg = received[0]
    assert tuple(msg.joint_names) == model.coordinate_names
    assert stamp_to_sec(msg.header.stamp) == 0.0  # start on receipt
    t, pos, vel, acc, eff = arrays(msg, model)
    assert t[0] == 0.0 and np.all(np.diff(t) > 0)
    np.testing.assert_allclose(t + result.t[0], result.t, atol=1e-9)
    np.testing.assert_allclose(pos, result.q, atol=1e-9)  # revolute/prismatic: angles = q
    np.testing.assert_allclose(vel, result.v, atol=1e-9)
    np.testing.assert_allclose(acc, result.a, atol=1e-9)
    ia = np.flatnonzero(~model.passive)
    np.testing.assert_allclose(eff[:, ia], result.u, rtol=0,
                               atol=EFFORT_RTOL * np.abs(result.u).max())
    assert np.all(eff[:, model.passive] == 0.0)  # passive joints: no feedforward
    assert "inverting scenario" in inv.log()
    solve = float(re.search(r"inverted in ([0-9.]+) s", inv.log()).group(1))
    if solve > 0.5:  # progress logged every 0.1 s (timer jitter: allow a few periods)
        assert "so far" in inv.log()

    pub = probe.publisher(JointTrajectory, REQUESTS)
    probe.wait_for(lambda: pub.get_subscription_count() > 0, 30.0, "discovery of the probe",
                   (inv,))
    times = np.arange(0.0, 1.2 + 1e-9, 0.05)
    good = output_request(sc, times, shuffle=True)  # names in another order are fine
    non_monotonic = output_request(sc, times)
    non_monotonic.points[4].time_from_start = sec_to_duration(0.1)
    with_effort = output_request(sc, times)
    for p in with_effort.points:
        p.effort = [1.0, 2.0, 3.0]
    bad = {
        "unknown output name": output_request(sc, times, names=["x", "tip.x", "nib.y"]),
        "NaN": output_request(sc, times, nan=True),
        "time_from_start must increase": non_monotonic,
        "effort given": with_effort,
        "at least 2 points": output_request(sc, times[:1]),
    }
    for m in bad.values():
        pub.publish(m)
    for text in bad:
        probe.wait_for(lambda w=text: w in inv.log(), 20.0, f"rejection {text!r}", (inv,))
    # unreachable: the tip 5 m away -> the inversion fails, is logged, nothing is published
    unreachable = output_request(sc, times)
    for p in unreachable.points:
        p.positions = [p.positions[0], p.positions[1] + 5.0, p.positions[2]]
    pub.publish(unreachable)
    # wait for its failure before the next request: the node keeps only the latest waiting
    # request, so a request sent at once would supersede this one before it starts
    probe.wait_for(lambda: re.search(r"inversion of output trajectory .* failed", inv.log()),
                   60.0, "the failure of the unreachable request", (inv,))
    pub.publish(good)
    probe.wait_for(lambda: len(received) >= 2, 60.0, "the inversion of the good request", (inv,))
    assert "nothing published" in inv.log()
    assert len(received) == 2  # the failed one published nothing
    t2, _, _, _, eff2 = arrays(received[1], model)
    # same desired output, now through quintic Hermite segments every 50 ms and the interval
    # 0..1.55 s: the feedforward agrees with the scenario's on the common samples to the
    # interpolation error (measured ~0.2 % of the peak)
    common = np.isin(np.round(t2, 6), np.round(result.t - result.t[0], 6))
    assert common.sum() == result.t.size
    err = np.abs(eff2[common][:, ia] - result.u).max() / np.abs(result.u).max()
    print(f"feedforward of the message request vs scenario: {err:.3g} of the peak")
    assert err < 0.02
    assert inv.alive


def library_tracking_error(sc, interp, coords, feedforward=True) -> float:
    """Max |q - q_ref| of the same PD + feedforward on Simulator, each command computed from
    the state at the start of its step.

    The reference (positions, velocities, accelerations, effort) is interpolated exactly
    as controller_node does it (TrajectoryInterpolator on the published points).
    """
    model = sc.model
    ctl = make_controller("pd", model, tuple(KP), tuple(KD))
    sim = Simulator(model, SimulatorConfig(dt=1.0 / RATE))
    sim.reset(coords.configuration(interp.sample(0.0)[0]))
    err = 0.0
    while sim.t < interp.end + AFTER:
        p, v, a, e = interp.sample(sim.t)
        u_ff = inputs_from_generalized(model, e) if feedforward else None
        u = ctl.step(sim.t, sim.q, sim.v, Reference(coords.configuration(p), v, a, u_ff))
        sim.step(model.B @ u)
        err = max(err, float(np.max(np.abs(coords.positions(sim.q) - interp.sample(sim.t)[0]))))
    return err


def test_closed_loop_with_a_late_controller(launch, probe, library):
    """inverter_node, then controller_node (PD + the trajectory's effort), then simulator_node.

    The controller starts after the trajectory was published and gets it from the latched
    topic; it starts it at its first control tick with a state.  The loop runs in lockstep
    on simulated time (simulator ``lockstep``, controller ``timing: state``, as
    ``bringup.launch.py lockstep:=true``): each command is computed from the state at its
    stamp and steps the plant once, so the DDS loop is the library run of the same PD,
    feedforward and Simulator without delay, whatever the machine's load.  On the wall clock
    it was not: a loaded 2-core machine stalled a process for 75-300 ms during the motion
    (18 and 82 missed periods in two fresh-clone runs), and the delayed feedforward excites
    the passive links (0.88 and 2.7 rad against 0.107 without delay).  Tolerance: the start
    of the trajectory is read from the controller's log to 6 digits (under 1e-6 s, i.e. a
    few 1e-6 rad at the reference's speed); the rest is round-off.  Without the
    feedforward the same PD misses by about 1 rad.
    """
    path, sc, result = library
    model = sc.model
    coords = JointCoordinates(model)
    states = probe.record(JointState, "/joint_states", depth=2000)
    received = probe.record(JointTrajectory, TOPIC, latched=True)
    q0 = coords.positions(result.q[0])
    inv = launch("inverter_node", robot=ROBOT, scenario=str(path))
    probe.wait_for(lambda: len(received) == 1, 60.0, "the inverter's trajectory", (inv,))
    # the inverted feedforward exceeds the effort ratings of urdf/passive_arm_minphase.urdf
    # (500 N, 200 N m), which simulator_node and controller_node enforce by default; the
    # library run it is compared with has no saturation
    start, nodes = ros_helpers.start_late_controller(
        launch, probe, inv, states, ROBOT, RATE, TOPIC, q0.tolist(),
        simulator={"urdf_effort_limits": False, "realtime": False, "lockstep": True,
                   "lockstep_timeout": 1.0},
        timing="state", law="pd", kp=KP, kd=KD, effort_limit=[1e6])
    t, pos, vel, acc, eff = arrays(received[0], model)
    interp = TrajectoryInterpolator(t, pos, vel, acc, eff)
    rating = np.asarray(model.pin_model.effortLimit)[np.argmax(np.abs(model.B), axis=0)]
    feedforward = np.abs(eff @ np.linalg.pinv(model.B).T).max(axis=0)
    assert np.any(feedforward > rating), (feedforward, rating)  # why the limits are lifted
    end = start + interp.end + AFTER
    probe.wait_for(lambda: states and stamp_to_sec(states[-1].header.stamp) > end, 60.0,
                   "the simulation to pass the end of the trajectory", nodes)

    errors, times = ros_helpers.tracking_errors(states, model.coordinate_names, interp, start, 0.0,
                                    interp.end + AFTER, n_effort=model.nv)
    err_dds = max(errors)
    err_lib = library_tracking_error(sc, interp, coords)
    err_open = library_tracking_error(sc, interp, coords, feedforward=False)
    print(f"tracking error: DDS {err_dds:.9g}, library {err_lib:.9g}, library without "
          f"feedforward {err_open:.3g} (rad | m)")
    assert err_open > 5 * err_lib  # the comparison can tell whether the feedforward was applied
    assert err_dds == pytest.approx(err_lib, abs=1e-5)
    assert all(p.alive for p in nodes)
    assert duration_to_sec(received[0].points[-1].time_from_start) == pytest.approx(interp.end)
