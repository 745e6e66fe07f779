"""The closed flexible machine tool over DDS, on simulated time: inverter_node (stable inversion
of a closed scenario) -> controller_node (cart PD + the trajectory's effort) -> simulator_node
(ClosedFlexibleStepper, realtime false, in lockstep with the controller, /clock).

The plant steps at about 0.08 x real time here, so the loop runs on the simulator's /clock; the
scenario is the shipped one with 0.2 s of pre- and post-actuation (0.3 s there) and 1 ms
samples (0.5 ms there). A 0.5 s motion is too fast for it: the stable inversion's rigid
coordinates then miss the 1e-10 tolerance (inverter_node logs the failure, publishes nothing).
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import ros_helpers
import yaml

from multibody_control.controllers import Reference, TrajectoryInterpolator, make_controller
from multibody_control.controllers.base import inputs_from_generalized
from multibody_control.inversion.flexible_scenario import load_flexible_scenario
from multibody_dynamics.flexible.joint_view import joint_space_model
from multibody_dynamics.flexible.stepper import ClosedFlexibleStepper
from multibody_dynamics.model.resources import share_dir
from multibody_dynamics.simulate import SimulatorConfig

launch = ros_helpers.launch  # fixtures
probe = ros_helpers.probe

ROBOT = "flexible_parallel_tool"
SHIPPED = share_dir() / "config" / "scenarios" / "invert_flexible_parallel_tool.yaml"
TOPIC = "/inverter_node/joint_trajectory"
RATE = 1000.0             # Hz, simulator step and control rate
DT = 1e-3                 # s, inversion samples (the shipped file: 0.5 ms)
# the scenario's own plant check: K_P = m w^2, K_D = 2 m w on each 3 kg cart, w = 2 pi 10 Hz
# (multibody_control.inversion.closed_flexible.track_closed)
W = 2 * np.pi * 10.0
KP = [3.0 * W * W] * 2    # N/m
KD = [2 * 3.0 * W] * 2    # N s/m
AFTER = 0.1               # s of holding after the last point that are checked
# the library bound's loop timing (see the test): commands act on the step after the state they
# were computed from (lockstep)
DELAY_STEPS, STATE_DELAY = 0, 0
MARGIN = 1.5


def scenario_text() -> str:
    raw = yaml.safe_load(SHIPPED.read_text())
    raw["options"].update(t_pre=0.2, t_post=0.2)  # e^(-0.2 * 49.7): the unstable zero decays
    raw["verify"] = False
    raw.pop("compare")
    return yaml.safe_dump(raw)


def library_loop(sc, interp, q0, t_first: float, delay_steps: int, feedforward: bool = True,
                 state_delay: int = 0, stop_above: tuple[float, float] | None = None):
    """Max cart error [m] and max tool-point distance from the task [m] of the same cart PD (+
    the trajectory's effort) on the joint view and ClosedFlexibleStepper at RATE with
    zero-order hold, commands applied ``delay_steps`` steps late and computed from the state
    ``state_delay`` steps old (the reference of the current step), from ``q0``; trajectory
    time tau is scenario time tau + t_first.  ``stop_above`` (cart, tool) [m]: the run ends
    as soon as both errors exceed these (the maxima then returned exceed them as well)."""
    system = sc.system
    view = joint_space_model(system)
    nr = system.nq_r
    ia = [system.joint_names.index(a) for a in system.actuated]
    ctl = make_controller("pd", view, tuple(KP), tuple(KD))
    sim = ClosedFlexibleStepper(system, SimulatorConfig(dt=1.0 / RATE))
    sim.reset(q0)
    buffer, seen, err_s, err_p = [], [], 0.0, 0.0
    while sim.t < interp.end + AFTER:
        p, v, a, e = interp.sample(sim.t)
        u_ff = inputs_from_generalized(view, e) if feedforward else None
        seen.append((sim.q[:nr], sim.v[:nr]))
        q, v_meas = seen[max(len(seen) - 1 - state_delay, 0)]
        u = ctl.step(sim.t, q, v_meas, Reference(p, v, a, u_ff))
        buffer = buffer or [u] * delay_steps
        buffer.append(u)
        sim.step(system.B @ buffer.pop(0))
        err_s = max(err_s, float(np.max(np.abs(sim.q[ia] - interp.sample(sim.t)[0][ia]))))
        p_des = sc.task(sim.t + t_first)[0]
        err_p = max(err_p, float(np.linalg.norm(system.chain.point_position(sim.q, sc.body)
                                                - p_des)))
        if stop_above is not None and err_s > stop_above[0] and err_p > stop_above[1]:
            break
    return err_s, err_p


def library_bounds(sc, interp, q0, t_first: float) -> tuple[float, float, float, float]:
    """(cart, tool) errors [m] of the library loop with the DDS loop's timing (DELAY_STEPS,
    STATE_DELAY), then of the loop without feedforward and one step of delay, run until both of
    its errors exceed MARGIN x the first (the test's bound: it must fail such a loop)."""
    lib_s, lib_p = library_loop(sc, interp, q0, t_first, DELAY_STEPS, state_delay=STATE_DELAY)
    open_s, open_p = library_loop(sc, interp, q0, t_first, 1, feedforward=False,
                                  stop_above=(MARGIN * lib_s, MARGIN * lib_p))
    return lib_s, lib_p, open_s, open_p


def test_closed_flexible_inversion_loop_over_dds(launch, probe, tmp_path):
    """The stable inversion of the machine tool's task (combined output) tracked over DDS.

    Checks: the latched trajectory carries the four joints, times from 0, the cart forces on
    s1 and s2 and nothing on the passive alpha and beta; the cart error and the tool point's
    distance from the task, both from the recorded /joint_states (joints and elastic
    coordinates, ``point_position`` of the tree), stay below MARGIN x the library run of the
    same PD, feedforward, stepper, rate and zero-order hold with the loop timing below.

    Loop timing: the simulator runs in lockstep (one step per command) and the controller
    answers each state with one command (timing state), so the command computed from the state
    at t_k acts over [t_k, t_k + dt] whatever the load: the library loop without delay. Library
    runs of this loop (cart error / tool error): no delay 0.0098 / 0.022 mm; commands one step
    late 0.0099 / 0.023 mm, two 0.013 / 0.023 mm, three 0.018 / 0.024 mm; states one step old
    (the PD then sees the reference one step ahead of the state: a bias of K_P v dt, up to 2 N)
    0.16 / 0.28 mm; without feedforward 0.32 / 0.85 mm. Measured over DDS: 0.0097 / 0.0222 mm,
    and once in a fresh-clone run 0.0131 / 0.0232 mm (as commands two steps late, though the
    simulator took all its 1560 steps on a command and none on its timeout: not explained yet;
    the reference's start as the controller places it on /clock is the likely place). The bound
    (MARGIN x the no-delay run, 1.5) fails a loop that holds commands three steps late, acts on
    old states or has no feedforward. Before the lockstep (the simulator stepping as fast as it
    could and the controller ticking on /clock) this loop missed the bound in about 3 of 10
    runs of the suite: commands sent before DDS matched the plant's subscription were lost
    while the trajectory ran, and under load commands came several steps late.

    Test time: the two library runs took about 2/3 of this test's time when run after the DDS
    loop; they now run in a thread while the nodes start and the DDS loop runs (the test's
    main thread only waits then), and the run without feedforward ends once both of its errors
    exceed the bounds (what the check needs of it).
    """
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from multibody_dynamics.ros.conversions import (
        JointCoordinates,
        stamp_to_sec,
        trajectory_from_msg,
    )

    wall = time.monotonic()
    path = tmp_path / "tool.yaml"
    path.write_text(scenario_text())
    sc = load_flexible_scenario(path)
    system = sc.system
    view = joint_space_model(system)
    nr = system.nq_r
    ia = [system.joint_names.index(a) for a in system.actuated]
    states = probe.record(JointState, "/joint_states", depth=3000)
    received = probe.record(JointTrajectory, TOPIC, latched=True)
    inv = launch("inverter_node", robot=ROBOT, scenario=str(path), dt=DT, progress_period=2.0)
    probe.wait_for(lambda: len(received) == 1, 120.0, "the inverter's trajectory", (inv,))
    solve = float(re.search(r"inverted in ([0-9.]+) s", inv.log()).group(1))
    assert "method stable/combined" in inv.log() and "so far" in inv.log()

    msg = received[0]
    assert tuple(msg.joint_names) == system.joint_names  # s1, s2, alpha, beta
    arr = trajectory_from_msg(msg, JointCoordinates(view))
    t, pos, vel, acc, eff = arr.t, arr.positions, arr.velocities, arr.accelerations, arr.effort
    assert t[0] == 0.0 and np.all(np.diff(t) > 0)
    assert t[-1] == pytest.approx(0.2 + 1.0 + 0.2, abs=1.5 * DT)
    passive = [k for k in range(nr) if k not in ia]
    assert np.all(eff[:, passive] == 0.0) and np.max(np.abs(eff[:, ia])) > 0.1  # N
    interp = TrajectoryInterpolator(t, pos, vel, acc, eff)
    q0 = np.r_[pos[0], np.zeros(system.nq_e)]  # at rest, undeformed: the pre-actuation's start
    t_first = sc.task.law.t0 - 0.2  # scenario time of the first sample: t_pre before t0
    # the library runs (about 2/3 of this test's CPU) overlap the DDS loop, which mostly waits;
    # the scenario's objects are used by this thread only until its result is taken
    pool = ThreadPoolExecutor(1)
    library = pool.submit(library_bounds, sc, interp, q0, t_first)

    try:
        start, nodes = ros_helpers.start_late_controller(
            launch, probe, inv, states, ROBOT, RATE, TOPIC, q0.tolist(),
            simulator={"realtime": False, "lockstep": True}, law="pd", kp=KP, kd=KD,
            timing="state")
        end = start + interp.end + AFTER
        probe.wait_for(lambda: states and stamp_to_sec(states[-1].header.stamp) > end, 240.0,
                       "the simulation to pass the end of the trajectory", nodes)
        assert all(p.alive for p in nodes)
    finally:
        library.exception()  # waits: the thread uses the scenario's objects until it ends
        pool.shutdown()
    lib_s, lib_p, open_s, open_p = library.result()

    plant = [m for m in list(states) if len(m.effort) == system.nv]
    times, q = ros_helpers.recorded_positions(plant, system.coordinate_names, start, 0.0,
                                              interp.end + AFTER)
    err_s = float(max(np.max(np.abs(qk[ia] - interp.sample(tk)[0][ia]))
                      for tk, qk in zip(times, q)))
    p = np.array([system.chain.point_position(qk, sc.body) for qk in q])
    err_p = float(np.linalg.norm(p - sc.task(times + t_first)[0], axis=1).max())
    assert np.max(np.abs(q[:, nr:])) > 1e-6  # the elastic coordinates were published and moved

    bound_s, bound_p = MARGIN * lib_s, MARGIN * lib_p
    print(f"inverter_node solve {solve:.1f} s; cart error: DDS {err_s * 1e3:.3g} mm, library "
          f"{lib_s * 1e3:.3g} mm ({DELAY_STEPS}-step delay), bound {bound_s * 1e3:.3g} mm, "
          f"without feedforward {open_s * 1e3:.3g} mm (when both passed the bounds); tool "
          f"error: DDS {err_p * 1e3:.3g} mm, "
          f"library {lib_p * 1e3:.3g} mm, bound {bound_p * 1e3:.3g} mm, without feedforward "
          f"{open_p * 1e3:.3g} mm; test wall time {time.monotonic() - wall:.1f} s")
    assert open_s > bound_s and open_p > bound_p
    assert err_s < bound_s
    assert err_p < bound_p


def test_inverter_refuses_a_closed_loop_without_scenario(capfd):
    """A closed flexible loop is inverted from its scenario's task only: without a scenario one
    ``cannot start`` line naming the remedy, exit code 1."""
    pytest.importorskip("rclpy")
    from multibody_control.ros.inverter_node import InverterNode
    from multibody_dynamics.ros.runtime import run_node

    args = [InverterNode.node_name, "--ros-args", "-p", f"robot:={ROBOT}"]
    assert run_node(InverterNode, args=args) == 1
    lines = [ln for ln in capfd.readouterr().err.splitlines() if "cannot start" in ln]
    assert len(lines) == 1 and "scenario:=invert_flexible_parallel_tool" in lines[0], lines


def test_inverter_names_the_scenario_whose_robot_does_not_load(capfd, tmp_path):
    """The inverter chooses the scenario loader by what the scenario's robot has (elastic
    coordinates or not), so it loads that robot first: one that does not load is one
    ``cannot start`` line naming the scenario file and its ``robot`` key, exit code 1."""
    pytest.importorskip("rclpy")
    from multibody_control.ros.inverter_node import InverterNode
    from multibody_dynamics.ros.runtime import run_node

    path = tmp_path / "invert_missing.yaml"
    text = (share_dir() / "config" / "scenarios" / "invert_passive_arm.yaml").read_text()
    path.write_text(re.sub(r"(?m)^robot: .*$", "robot: no_such_robot", text))
    args = [InverterNode.node_name, "--ros-args", "-p", "robot:=passive_arm", "-p",
            f"scenario:={path}"]
    assert run_node(InverterNode, args=args) == 1
    lines = [ln for ln in capfd.readouterr().err.splitlines() if "cannot start" in ln]
    assert len(lines) == 1 and f"{path}: robot: unknown robot 'no_such_robot'" in lines[0], lines


def test_lockstep_needs_realtime_false(capfd):
    """``lockstep`` steps on the commands, so with the default ``realtime: true`` the simulator
    refuses to start: one ``cannot start`` line naming realtime:=false, exit code 1."""
    pytest.importorskip("rclpy")
    from multibody_dynamics.ros.runtime import run_node
    from multibody_dynamics.ros.simulator_node import SimulatorNode

    args = [SimulatorNode.node_name, "--ros-args", "-p", "robot:=arm7", "-p", "lockstep:=true"]
    assert run_node(SimulatorNode, args=args) == 1
    lines = [ln for ln in capfd.readouterr().err.splitlines() if "cannot start" in ln]
    assert len(lines) == 1 and "realtime:=false" in lines[0], lines
