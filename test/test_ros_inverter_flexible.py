"""inverter_node on a flexible robot: Seifried's (2014) Sect. 6.4 feedforward loop over DDS.

In-process (no DDS): the glue of :mod:`multibody_control.inversion.flexible_reference` (the
joint part of a flexible inversion result, the point output), the published message built
from it, and the message path (a desired end-effector trajectory given as waypoints, what
``~/output_trajectory`` carries, through ``WaypointTask`` and ``invert_flexible``).

Over DDS: inverter_node (flexible_manipulator, the shipped scenario
``invert_flexible_manipulator.yaml`` with method ``quasi_static``, ``compare`` removed and
``verify: false``, overridden to ``stable`` by the node's ``method`` parameter) publishes
the latched joint trajectory; controller_node (PD on the joints around its ``effort``)
and simulator_node (FlexibleStepper) close the loop. The library inversion of the same
file is computed once per module and is the reference.
"""

from __future__ import annotations

import dataclasses
import re
import time

import numpy as np
import pytest
import ros_helpers
import yaml

from multibody_control.controllers import Reference, TrajectoryInterpolator, make_controller
from multibody_control.inversion.flexible import invert_flexible
from multibody_control.inversion.flexible_reference import PointPathOutput, joint_reference
from multibody_control.inversion.flexible_scenario import (
    load_flexible_scenario,
    run_flexible_scenario,
)
from multibody_dynamics.errors import InputError
from multibody_dynamics.flexible.joint_view import joint_space_model
from multibody_dynamics.flexible.stepper import FlexibleStepper
from multibody_dynamics.model.resources import share_dir
from multibody_dynamics.simulate import SimulatorConfig

launch = ros_helpers.launch  # fixtures
probe = ros_helpers.probe

ROBOT = "flexible_manipulator"
SHIPPED = share_dir() / "config" / "scenarios" / "invert_flexible_manipulator.yaml"
METHOD = "stable"          # the node's ``method`` parameter; the file says quasi_static
TOPIC = "/inverter_node/joint_trajectory"
# Same code and file in the node and here: round-off only (the BLAS may sum in another order)
EFFORT_RTOL = 1e-6

# Closed loop: gains of test_ros_flexible (the arms are undamped and the hubs light; delayed
# velocity feedback destabilizes the elastic modes, see that test), per joint [alpha, beta].
RATE = 250.0               # Hz, simulator step and control rate
KP = [0.5, 0.03]           # N m/rad
KD = [0.01, 0.001]         # N m s/rad
AFTER = 0.3                # s of holding after the last point that are checked
# the loop in lockstep on simulated time (bringup.launch.py lockstep:=true)
LOCKSTEP = {"realtime": False, "lockstep": True, "lockstep_timeout": 1.0}


def scenario_text(method: str = "quasi_static") -> str:
    raw = yaml.safe_load(SHIPPED.read_text())
    raw.pop("compare", None)
    raw.update(method=method, verify=False)
    return yaml.safe_dump(raw, sort_keys=False)


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """The scenario file, the loaded scenario (method overridden as the node does) and the
    library's stable inversion of it."""
    path = tmp_path_factory.mktemp("inverter_flexible") / "scenario.yaml"
    path.write_text(scenario_text())
    sc = dataclasses.replace(load_flexible_scenario(path), methods=(METHOD,))
    start = time.perf_counter()
    result, track = run_flexible_scenario(sc)[METHOD]
    assert result.success, result.message
    assert track is None  # verify: false
    print(f"library {METHOD} inversion: {time.perf_counter() - start:.2f} s")
    return path, sc, result


# -- in-process: the glue ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rigid_design():
    """A cheap flexible inversion (the rigid design, 10 ms samples) of the shipped task."""
    sc = load_flexible_scenario(SHIPPED)
    result = invert_flexible(sc.chain, sc.task, "rigid", dt=0.01, ik_guess=sc.ik_guess)
    assert result.success, result.message
    return sc, result


def test_joint_reference_keeps_the_joints_and_the_feedforward(rigid_design):
    sc, result = rigid_design
    chain = sc.chain
    nr = chain.nq_r
    ref = joint_reference(chain, result)
    assert ref.q.shape == ref.v.shape == ref.a.shape == (result.t.size, nr)
    for name in ("q", "v", "a"):
        np.testing.assert_array_equal(getattr(ref, name), getattr(result, name)[:, :nr])
    np.testing.assert_array_equal(ref.u, result.u)
    np.testing.assert_array_equal(ref.t, result.t)
    assert (ref.method, ref.t0, ref.tf, ref.success) == (result.method, result.t0, result.tf, True)
    # the joint view's B u is u itself (B = [I; 0]): the published effort is the torque
    view = joint_space_model(chain)
    assert view.coordinate_names == chain.joint_names
    np.testing.assert_array_equal(ref.u @ np.asarray(view.B).T, result.u)
    # the input is not changed
    assert result.q.shape[1] == chain.nv
    with pytest.raises(InputError, match="result.q has shape"):
        joint_reference(chain, ref)  # already the joints
    with pytest.raises(InputError, match="FlexibleChain"):
        joint_reference(view, result)


def test_point_path_output(rigid_design):
    sc, _ = rigid_design
    chain = sc.chain
    assert PointPathOutput.of(chain).names == ("arm2.x", "arm2.y")  # the end effector
    assert PointPathOutput.of(chain, sc.task.names).names == sc.task.names
    assert PointPathOutput.of(chain, ["arm1.x", "arm1.y"]).body == "arm1"
    for bad in (["arm2.x"], ["arm2.y", "arm2.x"], ["arm3.x", "arm3.y"], ["alpha", "beta"]):
        with pytest.raises(InputError, match="end point of one body"):
            PointPathOutput.of(chain, bad)


def test_published_message_of_a_flexible_result(rigid_design):
    """What inverter_node publishes for a flexible result: the joints, u as effort."""
    pytest.importorskip("rclpy")
    from multibody_control.ros.inverter_node import joint_trajectory_msg
    from multibody_dynamics.ros.conversions import JointCoordinates, duration_to_sec

    sc, result = rigid_design
    chain = sc.chain
    view = joint_space_model(chain)
    msg = joint_trajectory_msg(view, JointCoordinates(view), joint_reference(chain, result))
    assert tuple(msg.joint_names) == chain.joint_names
    assert len(msg.points) == result.t.size
    eff = np.array([p.effort for p in msg.points])
    pos = np.array([p.positions for p in msg.points])
    np.testing.assert_array_equal(eff, result.u)
    np.testing.assert_array_equal(pos, result.q[:, :chain.nq_r])
    t = np.array([duration_to_sec(p.time_from_start) for p in msg.points])
    np.testing.assert_allclose(t, result.t - result.t[0], atol=1e-9)


def test_output_trajectory_path_inverts_like_the_task(rigid_design):
    """A desired end-effector trajectory as ``~/output_trajectory`` carries it (points every
    50 ms with velocities and accelerations) becomes, through the node's ``WaypointTask``
    (quintic Hermite), the same feedforward as the scenario's task: exactly, up to round-off
    (measured 5e-13 of the peak), because the task is a quintic in t between t0 and tf,
    which quintic Hermite segments through its samples reproduce."""
    pytest.importorskip("rclpy")
    from multibody_control.ros.inverter_node import WaypointTask

    sc, result = rigid_design
    times = np.arange(sc.task.law.t0, sc.task.law.tf + 1e-9, 0.05)
    task = WaypointTask(sc.task.names, times, *sc.task(times))
    from_points = invert_flexible(sc.chain, task, "rigid", dt=0.01, ik_guess=sc.ik_guess)
    assert from_points.success, from_points.message
    np.testing.assert_allclose(from_points.t, result.t, atol=1e-12)
    err = np.abs(from_points.u - result.u).max() / np.abs(result.u).max()
    print(f"rigid design from 50 ms waypoints vs the task: {err:.3g} of the peak feedforward")
    assert err < 1e-9


class _Recorder:
    """Stands in for the node's publisher: keeps the messages."""

    topic_name = TOPIC

    def __init__(self):
        self.messages = []

    def publish(self, msg):
        self.messages.append(msg)


def test_node_flexible_requests_and_refusals_in_process(rigid_design):
    """InverterNode on flexible_manipulator without a scenario, in-process (no peer): an
    output trajectory over [arm2.x, arm2.y] is inverted by the worker (method rigid) into the
    joints and their torques; a request over other names is rejected; the methods of rigid
    robots and other output names are refused at run time with the reason."""
    rclpy = pytest.importorskip("rclpy")
    from rclpy.parameter import Parameter
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from multibody_control.ros.inverter_node import InverterNode
    from multibody_dynamics.ros.conversions import sec_to_duration

    sc, result = rigid_design
    context = rclpy.context.Context()
    rclpy.init(context=context, domain_id=231)  # no peer: nothing is exchanged
    node = None
    try:
        node = InverterNode(context=context, parameter_overrides=[
            Parameter("robot", value=ROBOT), Parameter("method", value="rigid"),
            Parameter("dt", value=0.01)])
        node._pub = recorder = _Recorder()
        assert node.setup.output.names == ("arm2.x", "arm2.y")  # the end effector
        for name, value, reason in [
                ("method", "ode", "flexible model: expected one of rigid, collocated"),
                ("output_names", ["alpha", "beta"], "end point of one body"),
                ("scenario", "invert_passive_arm", "robot 'passive_arm' but the node's robot")]:
            res = node.set_parameters([Parameter(name, value=value)])[0]
            assert not res.successful and reason in res.reason, (name, res.reason)
        assert node.setup.method == "rigid"

        times = np.arange(sc.task.law.t0, sc.task.law.tf + 1e-9, 0.05)
        y, yd, ydd = sc.task(times)

        def request(names):
            msg = JointTrajectory(joint_names=list(names))
            for k, tk in enumerate(times):
                msg.points.append(JointTrajectoryPoint(
                    positions=y[k].tolist(), velocities=yd[k].tolist(),
                    accelerations=ydd[k].tolist(), time_from_start=sec_to_duration(float(tk))))
            return msg

        node._on_output_trajectory(request(["alpha", "beta"]))
        assert node.rejected == 1
        node._on_output_trajectory(request(sc.task.names))
        deadline = time.monotonic() + 60.0
        while not recorder.messages and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(recorder.messages) == 1, "no result of the request within 60 s"
        msg = recorder.messages[0]
        assert tuple(msg.joint_names) == sc.chain.joint_names
        eff = np.array([pt.effort for pt in msg.points])
        pos = np.array([pt.positions for pt in msg.points])
        # the interval starts at 0 as the scenario's: the same samples as the library design
        np.testing.assert_allclose(eff, result.u, rtol=0, atol=1e-9 * np.abs(result.u).max())
        np.testing.assert_allclose(pos, result.q[:, :sc.chain.nq_r], atol=1e-9)
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown(context=context)


# -- over DDS ---------------------------------------------------------------------------------


def library_loop(sc, interp, q0, t_first: float, feedforward: bool = True):
    """Max joint error [rad] and max end-effector distance from the task's line [m] of the same
    PD (+ the trajectory's effort) on the joint view and FlexibleStepper at RATE with
    zero-order hold, each command computed from the state at the start of its step, from
    ``q0`` (every coordinate) at rest, over the trajectory and AFTER; trajectory time tau is
    scenario time tau + t_first."""
    chain = sc.chain
    nr = chain.nq_r
    body = PointPathOutput.of(chain, sc.task.names).body
    ctl = make_controller("pd", joint_space_model(chain), tuple(KP), tuple(KD))
    sim = FlexibleStepper(chain, SimulatorConfig(dt=1.0 / RATE))
    sim.reset(q0)
    err_q, err_p = 0.0, 0.0
    while sim.t < interp.end + AFTER:
        p, v, a, e = interp.sample(sim.t)
        u = ctl.step(sim.t, sim.q[:nr], sim.v[:nr], Reference(p, v, a, e if feedforward else None))
        sim.step(chain.B @ u)
        err_q = max(err_q, float(np.max(np.abs(sim.q[:nr] - interp.sample(sim.t)[0]))))
        p_des = sc.task(sim.t + t_first)[0]
        err_p = max(err_p, float(np.linalg.norm(chain.point_position(sim.q, body) - p_des)))
    return err_q, err_p


def test_flexible_inversion_closed_loop_over_dds(launch, probe, library):
    """inverter_node (stable inversion in its worker) -> controller_node (PD on the joints +
    the trajectory's effort) -> simulator_node (FlexibleStepper), flexible_manipulator.

    Checks: the latched trajectory is the library's inversion of the same file (joints only,
    effort = the joint torques, times from the first sample); the loop runs in lockstep on
    simulated time (simulator ``lockstep``, controller ``timing: state``; the reason is
    test_ros_inverter's: a loaded machine's stalls on the wall clock delay the commands by
    an amount no bound covers honestly), so its joint error over DDS and its end-effector
    path, computed from the recorded /joint_states (joints and elastic coordinates) with
    ``FlexibleChain.point_position``, equal those of the library run of the same PD,
    feedforward, stepper, rate and zero-order hold without delay (tolerance: the trajectory's
    start read from the controller's log to 6 digits, and round-off).  The soft PD makes
    both larger than the book's 0.0044 mm under a 10 Hz PD; without the feedforward the same
    PD misses both by far.
    """
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from multibody_dynamics.ros.conversions import (
        JointCoordinates,
        duration_to_sec,
        stamp_to_sec,
        trajectory_from_msg,
    )

    wall = time.monotonic()
    path, sc, result = library
    chain = sc.chain
    nr = chain.nq_r
    view = joint_space_model(chain)
    states = probe.record(JointState, "/joint_states", depth=2000)
    received = probe.record(JointTrajectory, TOPIC, latched=True)
    inv = launch("inverter_node", robot=ROBOT, scenario=str(path), method=METHOD,
                 progress_period=1.0)
    probe.wait_for(lambda: len(received) == 1, 90.0, "the inverter's trajectory", (inv,))
    solve = float(re.search(r"inverted in ([0-9.]+) s", inv.log()).group(1))
    assert "so far" in inv.log()  # progress logs of the worker (the solve takes seconds)
    assert f"method {METHOD}" in inv.log()  # the parameter overrides the file's quasi_static

    msg = received[0]
    assert tuple(msg.joint_names) == chain.joint_names  # the joints, no elastic coordinates
    assert stamp_to_sec(msg.header.stamp) == 0.0
    arr = trajectory_from_msg(msg, JointCoordinates(view))
    t, pos, vel, acc, eff = arr.t, arr.positions, arr.velocities, arr.accelerations, arr.effort
    assert t[0] == 0.0 and np.all(np.diff(t) > 0)
    np.testing.assert_allclose(t + result.t[0], result.t, atol=1e-9)
    np.testing.assert_allclose(pos, result.q[:, :nr], atol=1e-9)
    np.testing.assert_allclose(vel, result.v[:, :nr], atol=1e-9)
    np.testing.assert_allclose(acc, result.a[:, :nr], atol=1e-9)
    np.testing.assert_allclose(eff, result.u, rtol=0, atol=EFFORT_RTOL * np.abs(result.u).max())
    interp = TrajectoryInterpolator(t, pos, vel, acc, eff)
    q0 = result.q[0]  # the plant starts where the inverse model does (joints and elastic)

    start, nodes = ros_helpers.start_late_controller(launch, probe, inv, states, ROBOT, RATE,
                                                     TOPIC, q0.tolist(), law="pd", kp=KP, kd=KD,
                                                     timing="state", simulator=LOCKSTEP)
    end = start + interp.end + AFTER
    probe.wait_for(lambda: states and stamp_to_sec(states[-1].header.stamp) > end, 60.0,
                   "the simulation to pass the end of the trajectory", nodes)
    assert all(p.alive for p in nodes)

    plant = [m for m in list(states) if len(m.effort) == chain.nv]
    errors, _ = ros_helpers.tracking_errors(plant, chain.joint_names, interp, start, 0.0,
                                            interp.end + AFTER)
    err_q = float(errors.max())
    times, q = ros_helpers.recorded_positions(plant, chain.coordinate_names, start, 0.0,
                                              interp.end + AFTER)
    body = PointPathOutput.of(chain, sc.task.names).body
    p = np.array([chain.point_position(qk, body) for qk in q])
    err_p = float(np.linalg.norm(p - sc.task(times + result.t[0])[0], axis=1).max())
    assert np.max(np.abs(q[:, nr:])) > 1e-6  # the elastic coordinates were published, and moved

    lib_q, lib_p = library_loop(sc, interp, q0, result.t[0])
    open_q, open_p = library_loop(sc, interp, q0, result.t[0], feedforward=False)
    print(f"inverter_node solve {solve:.2f} s; joint error: DDS {err_q:.9g} rad, library "
          f"{lib_q:.9g}, without feedforward {open_q:.3g}; end-effector error: DDS "
          f"{err_p * 1e3:.9g} mm, library {lib_p * 1e3:.9g} mm, without feedforward "
          f"{open_p * 1e3:.3g} mm; test wall time {time.monotonic() - wall:.1f} s")
    assert open_q > 5 * lib_q and open_p > 5 * lib_p  # the comparison tells a lost feedforward
    assert err_q == pytest.approx(lib_q, abs=1e-6)
    assert err_p == pytest.approx(lib_p, abs=1e-6)
    assert duration_to_sec(msg.points[-1].time_from_start) == pytest.approx(interp.end)
