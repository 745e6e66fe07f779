"""Flexible robots in the embedded simulator and the controller.

In-process: the fixed-step :class:`FlexibleStepper` (what simulator_node steps) against the
adaptive :func:`simulate_flexible`, its substep rule, the refusal of closed flexible loops,
and the joint-space reading of a ``/joint_states`` that carries elastic coordinates.
Over DDS: simulator_node + controller_node (PD on the joints) on flexible_manipulator track a
joint trajectory; the elastic coordinates are published; bad commands are rejected.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import ros_helpers

from multibody_control.controllers import Reference, TrajectoryInterpolator, make_controller
from multibody_control.trajectories import rest_to_rest
from multibody_dynamics.errors import ModelError
from multibody_dynamics.flexible.joint_view import joint_space_model
from multibody_dynamics.flexible.loader import is_flexible_model, load_flexible_model
from multibody_dynamics.flexible.simulation import simulate_flexible
from multibody_dynamics.flexible.stepper import (
    H_OMEGA,
    ClosedFlexibleStepper,
    FlexibleStepper,
    make_stepper,
)
from multibody_dynamics.simulate import SimulatorConfig

rclpy = pytest.importorskip("rclpy")

from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from multibody_dynamics.ros import conversions  # noqa: E402
from multibody_dynamics.ros.conversions import (  # noqa: E402
    JointCoordinates,
    MessageError,
    joint_state_to_arrays,
    stamp_to_sec,
)
from multibody_dynamics.ros.runtime import run_node  # noqa: E402

launch = ros_helpers.launch  # fixtures
probe = ros_helpers.probe

ROBOT = "flexible_manipulator"
RATE = 250.0                      # Hz, simulator step rate and control rate
KP = (0.5, 0.03)                  # N m/rad per joint: collocated PD around the feedforward
KD = (0.01, 0.001)                # N m s/rad (see test_flexible_tracking_over_dds)
Q0 = np.zeros(2)                  # rad, the neutral configuration (hold_until_command)
STEP = np.array([0.5, -0.5])      # rad
T_MOVE = (0.2, 1.2)               # rest-to-rest motion inside the trajectory [s]
T_END = 1.4                       # last trajectory point [s]
LEAD = 0.6                        # trajectory starts this long after it is sent (sim time) [s]
DELAY_STEPS = 5                   # transport delay assumed in the library bound (20 ms)
MARGIN = 1.5                      # DDS error may be this much of the delayed library run


@pytest.fixture(scope="module")
def chain():
    return load_flexible_model(ROBOT)


# -- in-process: the stepper ------------------------------------------------------------------

@pytest.mark.parametrize("robot, u", [
    ("flexible_manipulator", [0.05, -0.02]),        # N m: a torque step excites every mode
    ("flexible_cart_manipulator", [0.5, 0.0, 0.0]),  # N on the cart, arms hanging, gravity
])
def test_stepper_matches_adaptive_simulation(robot, u):
    """500 Hz fixed steps (RK4 substeps from the stiffest mode) vs DOP853 at rtol 1e-10 over 1 s.

    The difference is the stepper's: it falls 16x when ``h_omega`` is halved (fourth order),
    so the reference's own error (rtol 1e-10) does not enter. Measured with the default
    h_omega 0.25: flexible_manipulator 2.9e-6 rad on the joints (of a 2.9 rad motion), 0.93 %
    of the peak of each elastic coordinate, 5e-4 of the peak velocity; the cart manipulator
    1.5e-7 rad, 0.12 %, 3e-4. The tolerances are about 3x the larger of these; they fail for
    h_omega 0.5 (flexible_manipulator: 2.7e-5 rad, 8.6 %), i.e. they check the substep rule.
    """
    model = load_flexible_model(robot)
    sim = FlexibleStepper(model, SimulatorConfig(dt=1.0 / 500.0))
    assert sim.omega_max * sim.config.dt / sim.substeps <= H_OMEGA
    u = np.asarray(u, float)
    tau = model.B @ u
    ref = simulate_flexible(model, 1.0, u=u, rtol=1e-10, atol=1e-12, output_dt=0.01)
    assert ref.success, ref.message
    q, v = [sim.q.copy()], [sim.v.copy()]
    for k in range(500):
        sim.step(tau)
        if (k + 1) % 5 == 0:
            q.append(sim.q.copy())
            v.append(sim.v.copy())
    q, v = np.array(q), np.array(v)
    assert q.shape == ref.q.shape
    nr = model.nq_r
    err_r = np.max(np.abs(q[:, :nr] - ref.q[:, :nr]))
    peak_e = np.max(np.abs(ref.q[:, nr:]), axis=0)
    err_e = np.max(np.abs(q[:, nr:] - ref.q[:, nr:]), axis=0) / peak_e
    err_v = np.max(np.abs(v - ref.v)) / np.max(np.abs(ref.v))
    print(f"{robot}: {sim.substeps} substeps of {1e3 / 500 / sim.substeps:.3g} ms "
          f"(omega_max {sim.omega_max:.4g} 1/s); joints {err_r:.3g} rad, elastic "
          f"{err_e.max():.3g} of peak, velocities {err_v:.3g} of peak")
    assert err_r < 1e-5          # rad: see the docstring
    assert np.all(err_e < 2e-2)  # of each elastic coordinate's peak
    assert err_v < 2e-3          # of the peak velocity


def test_stepper_substeps_follow_the_rate(chain):
    """n = ceil(dt * omega_max / h_omega): more substeps at a lower rate, h*omega bounded."""
    sim = FlexibleStepper(chain, SimulatorConfig(dt=1e-3))
    n_fast = sim.substeps
    sim.config = SimulatorConfig(dt=4e-3)  # what simulator_node does on a rate_hz change
    assert sim.substeps >= 4 * n_fast - 3
    assert sim.omega_max * 4e-3 / sim.substeps <= H_OMEGA
    # flexible_manipulator's stiffest mode at rest: 842 1/s (measured)
    assert 700.0 < sim.omega_max < 1000.0
    t0 = sim.t
    sim.step(np.zeros(chain.nv))
    assert sim.t == pytest.approx(t0 + 4e-3)


#: an assembled pose of the machine tool's lambda branch (s1, s2 [m], alpha, beta [rad]; the
#: scenario's ik_guess) and forces on the carts that bend the arms [N]
TOOL_POSE, TOOL_FORCE = [0.0, 0.8, 0.785, 2.4], [20.0, -10.0]


def test_closed_stepper_matches_projected_adaptive_simulation():
    """flexible_parallel_tool, 1 kHz steps (RK4 substeps of the index-1 form, projection after
    every step) vs ClosedFlexibleChain.simulate (DOP853 rtol 1e-10, projected every 1 ms) over
    50 ms with constant cart forces.

    Measured: joints within 1.3e-6 m | rad (of a 41 mm motion), elastic coordinates within
    0.16 % of their peaks; with h_omega halved 7.6e-8 and 0.0098 % (16x: fourth order, the
    reference's error does not enter). Tolerances 3x the default's figures. The loops stay
    closed to 1e-10 after every step.
    """
    model = load_flexible_model("flexible_parallel_tool")
    with pytest.raises(ModelError, match="ClosedFlexibleStepper"):
        FlexibleStepper(model)
    sim = make_stepper(model, SimulatorConfig(dt=1e-3))
    assert isinstance(sim, ClosedFlexibleStepper) and sim.constrained
    sim.reset(np.r_[TOOL_POSE, np.zeros(model.nq_e)])
    # the tree's stiffest mode bounds the closed system's (Rayleigh): h * omega <= H_OMEGA
    assert sim.omega_max * 1e-3 / sim.substeps <= H_OMEGA
    u = np.array(TOOL_FORCE)
    ref = model.simulate(sim.q, sim.v, np.arange(0.0, 0.05 + 1e-9, 1e-3), u=lambda t: u,
                         rtol=1e-10, atol=1e-12)
    assert ref.success, ref.message
    q, residual = [sim.q.copy()], 0.0
    for _ in range(50):
        sim.step(model.B @ u)
        q.append(sim.q.copy())
        residual = max(residual, sim.sample(model.B @ u)[1])
    q, nr = np.array(q), model.nq_r
    err_r = np.max(np.abs(q[:, :nr] - ref.q[:, :nr]))
    err_e = np.max(np.abs(q[:, nr:] - ref.q[:, nr:]), axis=0) / np.max(np.abs(ref.q[:, nr:]),
                                                                        axis=0)
    print(f"{sim.substeps} substeps; joints {err_r:.3g}, elastic {err_e.max():.3g} of peak; "
          f"residual {residual:.3g}")
    assert err_r < 4e-6 and np.all(err_e < 5e-3)
    assert residual < 1e-10


def test_closed_stepper_multipliers_match_coordinate_partitioning():
    """The closure forces the simulator publishes (KKT multipliers) against those of the
    coordinate partitioning: ``C^T lam = M a + k + f_e - g - tau`` with ``a`` from the minimal
    equations (2.150), solved by least squares. Same state, same force; agree to 1e-8
    relative (two linear solves of a well-conditioned system)."""
    model = load_flexible_model("flexible_parallel_tool")
    sim = ClosedFlexibleStepper(model, SimulatorConfig(dt=1e-3))
    sim.reset(np.r_[TOOL_POSE, np.zeros(model.nq_e)])
    tau = model.B @ np.array(TOOL_FORCE)
    for _ in range(5):  # a moving, deformed state
        sim.step(tau)
    lam, phi, av = sim.sample(tau)
    assert lam.shape == (model.nc,) == (len(sim.constraints.labels),)
    assert sim.constraints.labels == ("middle_joint.x", "middle_joint.y")
    a = model.minimal_forward_dynamics(sim.q, sim.v, np.array(TOOL_FORCE))
    M, k, g, fe = model.chain.dynamics_terms(sim.q, sim.v)
    C = model.constraint_jacobian(sim.q)
    expected = np.linalg.lstsq(C.T, M @ a + k + fe - g - tau, rcond=None)[0]
    np.testing.assert_allclose(lam, expected, rtol=1e-8, atol=1e-8 * np.max(np.abs(expected)))
    assert np.max(np.abs(expected)) > 1.0  # N: the arms carry load
    assert phi < 1e-10 and av < 1e-8


def test_joint_view_reads_flexible_joint_states(chain):
    """The controller's joint view drops the elastic entries of /joint_states (after checking
    them) and reorders the joints by name."""
    assert is_flexible_model(ROBOT)
    view = joint_space_model(chain)
    assert view.coordinate_names == chain.joint_names and view.nu == chain.nu == 2
    np.testing.assert_array_equal(view.B, np.eye(2))
    coords = JointCoordinates(view, ignored=chain.coordinate_names[chain.nq_r:])
    names = list(reversed(chain.coordinate_names))  # any order, elastic ones included
    pos = np.arange(len(names), dtype=float)
    msg = JointState(name=names, position=pos.tolist(), velocity=(2 * pos).tolist())
    s = joint_state_to_arrays(msg, coords)
    expect = [pos[names.index(n)] for n in chain.joint_names]
    np.testing.assert_array_equal(s.q, expect)
    np.testing.assert_array_equal(s.v, 2 * np.array(expect))
    bad = list(pos)
    bad[0] = math.nan  # an elastic coordinate
    with pytest.raises(MessageError, match="NaN"):
        joint_state_to_arrays(JointState(name=names, position=bad, velocity=pos.tolist()),
                              coords)
    # the plant's own reader takes every coordinate
    plant = JointCoordinates(chain)
    assert plant.names == chain.coordinate_names
    np.testing.assert_array_equal(joint_state_to_arrays(msg, plant).q,
                                  [pos[names.index(n)] for n in chain.coordinate_names])


@pytest.mark.parametrize("node, params, message", [
    ("simulator", ["robot:=flexible_parallel_tool"], "realtime:=false publish_clock:=true"),
    ("controller", [f"robot:={ROBOT}", "law:=computed_torque"], "law computed_torque:"),
    ("controller", [f"robot:={ROBOT}", "law:=tv_lqr"], "is a flexible model"),
])
def test_refuses_to_start_in_process(capfd, node, params, message):
    """Closed flexible loops in the simulator, laws needing the dynamics in the controller:
    one ``cannot start`` line, exit code 1."""
    if node == "simulator":
        from multibody_dynamics.ros.simulator_node import SimulatorNode as cls
    else:
        from multibody_control.ros.controller_node import ControllerNode as cls
    args = [cls.node_name, "--ros-args"]
    for p in params:
        args += ["-p", p]
    assert run_node(cls, args=args) == 1
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if "cannot start" in ln]
    assert len(lines) == 1 and message in lines[0], err


# -- over DDS -----------------------------------------------------------------------------------

def waypoints(chain):
    """The joint motion and its rigid feedforward (Seifried 2014 Sect. 6.4.1, "rigid"
    design): the joint rows of the chain's inverse dynamics with q_e = 0, (N, nu) [N m]."""
    t = np.arange(0.0, T_END + 1e-9, 0.05)
    wp = rest_to_rest(t, Q0, Q0 + STEP, *T_MOVE)
    z = np.zeros(chain.nq_e)
    effort = np.array([chain.inverse_dynamics(np.r_[q, z], np.r_[v, z], np.r_[a, z])[:chain.nq_r]
                       for q, v, a in zip(wp.q, wp.v, wp.a)])
    return wp, effort


def interpolator(chain) -> TrajectoryInterpolator:
    wp, effort = waypoints(chain)
    return TrajectoryInterpolator(wp.t, wp.q, wp.v, wp.a, effort)


def library_error(chain, delay_steps: int) -> float:
    """Max joint tracking error of the same PD on the joint view + FlexibleStepper at RATE with
    zero-order hold, commands delayed by ``delay_steps`` (the buffer starts with the first)."""
    interp = interpolator(chain)
    ctl = make_controller("pd", joint_space_model(chain), KP, KD)
    sim = FlexibleStepper(chain, SimulatorConfig(dt=1.0 / RATE))
    nr = chain.nq_r
    sim.t = -LEAD
    buffer, err = [], 0.0
    while sim.t < T_END + 0.3:
        p, v, a, e = interp.sample(sim.t)
        u = ctl.step(sim.t, sim.q[:nr], sim.v[:nr], Reference(p, v, a, e))
        buffer = buffer or [u] * delay_steps
        buffer.append(u)
        sim.step(chain.B @ buffer.pop(0))
        err = max(err, float(np.max(np.abs(sim.q[:nr] - interp.sample(sim.t)[0]))))
    return err


def trajectory_msg(chain, start: float) -> JointTrajectory:
    wp, effort = waypoints(chain)
    return conversions.trajectory_msg(chain.joint_names, wp.t, wp.q, wp.v, wp.a, effort,
                                      stamp=start)


def test_flexible_tracking_over_dds(launch, probe, chain):
    """simulator_node + controller_node (PD on the joints + rigid feedforward) on
    flexible_manipulator.

    Gains: the arms are undamped and the joint hubs light (5e-4 and 1.2e-4 kg m^2 against the
    elastic modes), so delayed velocity feedback destabilizes the elastic modes: the library
    run with kd = (0.06, 0.005) N m s/rad reaches 0.43 rad of error with a 2-step command
    delay and 2.3 rad with 5; kd = (0.01, 0.001) stays stable up to 10 steps, and the
    feedforward (the trajectory's ``effort``) does the work, as in the book's feedforward +
    collocated PD.
    Bound: the library run of the same PD, feedforward, FlexibleStepper, rate and zero-order
    hold with a 5-step (20 ms) command delay, times 1.5. The nodes exchange state and command
    over DDS with 1-2 steps of delay on an idle machine; 5 steps cover a loaded one and the
    factor covers timer jitter (the simulator paces by the wall clock, the controller by
    /clock). The library error grows with the delay (measured: 0.025 rad without, 0.070 rad
    with 5 steps, 0.103 rad with 8); the bound (0.104 rad on a 0.5 rad motion) still catches a
    wrong joint mapping or a lost feedforward (0.84 rad without it).
    """
    wall = time.monotonic()
    states, commands, nodes, pub = ros_helpers.start_loop(
        launch, probe, ROBOT, RATE, controller=dict(law="pd", kp=list(KP), kd=list(KD)),
        simulator={})
    ctl, sim = nodes
    start = stamp_to_sec(states[-1].header.stamp) + LEAD
    pub.publish(trajectory_msg(chain, start))
    probe.wait_for(lambda: stamp_to_sec(states[-1].header.stamp) > start + T_END + 0.3, 60.0,
                   "the simulation to pass the end of the trajectory", nodes)

    # bad commands: wrong length and NaN are rejected, the plant runs on
    pub_cmd = probe.publisher(Float64MultiArray, "/effort_controller/commands")
    probe.wait_for(lambda: pub_cmd.get_subscription_count() > 0, 30.0,
                   "the simulator to discover the probe's commands", nodes)
    n_states = len(states)
    for _ in range(3):
        pub_cmd.publish(Float64MultiArray(data=[1.0, 2.0, 3.0]))
        pub_cmd.publish(Float64MultiArray(data=[math.nan, 0.0]))
    probe.wait_for(lambda: "rejected command" in sim.log(), 10.0, "the rejection in the log",
                   nodes)
    probe.wait_for(lambda: len(states) > n_states + 50, 30.0, "states after the bad commands",
                   nodes)
    assert ctl.alive and sim.alive

    interp = interpolator(chain)
    plant_states = [m for m in list(states) if len(m.effort) == chain.nv]
    errors, t_seen = ros_helpers.tracking_errors(plant_states, chain.joint_names, interp, start,
                                                 -LEAD / 2, T_END + 0.3)
    assert max(t_seen) > T_MOVE[1], "the motion was not observed to its end"
    err_dds = float(max(errors))
    err_lib0 = library_error(chain, 0)
    err_lib = library_error(chain, DELAY_STEPS)
    bound = MARGIN * err_lib
    print(f"joint tracking error: DDS {err_dds:.3g} rad, library {err_lib0:.3g} rad (no delay), "
          f"{err_lib:.3g} rad ({DELAY_STEPS}-step delay), bound {bound:.3g} rad; "
          f"test wall time {time.monotonic() - wall:.1f} s")
    assert err_dds < bound
    last = plant_states[-1]
    q_last = np.asarray(last.position)[[last.name.index(n) for n in chain.joint_names]]
    np.testing.assert_allclose(q_last, Q0 + STEP, atol=bound)  # it moved to the target

    # every coordinate is published, the elastic ones too, finite, and the motion bent the arms
    assert tuple(last.name) == chain.coordinate_names
    elastic = np.array([m.position[chain.nq_r:] for m in plant_states])
    for field in ("position", "velocity", "effort"):
        assert all(np.all(np.isfinite(getattr(m, field))) for m in plant_states), field
    assert np.max(np.abs(elastic)) > 1e-6
    assert all(len(m.data) == chain.nu for m in list(commands) if m.layout.dim)


def test_closed_flexible_plant_over_dds(launch, probe):
    """simulator_node robot:=flexible_parallel_tool on simulated time (realtime:=false,
    publish_clock:=true): the positions it publishes under constant cart forces are those of
    the in-process ClosedFlexibleStepper after as many steps (the same code: equal to 1e-12),
    the loops stay closed, the closure forces come labelled, and realtime:=true is refused at
    run time with its reason."""
    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters
    from rosgraph_msgs.msg import Clock as ClockMsg

    model = load_flexible_model("flexible_parallel_tool")
    q0 = np.r_[TOOL_POSE, np.zeros(model.nq_e)]
    dt = 1e-3
    states = probe.record(JointState, "/joint_states", depth=1000)
    forces = probe.record(Float64MultiArray, "/simulator_node/constraint_forces")
    residuals = probe.record(Float64MultiArray, "/simulator_node/constraint_residual")
    clock = probe.record(ClockMsg, "/clock")
    sim = launch("simulator_node", robot="flexible_parallel_tool", rate_hz=1.0 / dt,
                 realtime=False, publish_clock=True, initial_positions=q0.tolist(),
                 diagnostics_period=5)
    pub_cmd = probe.publisher(Float64MultiArray, "/effort_controller/commands")
    probe.wait_for(lambda: states and pub_cmd.get_subscription_count() > 0, 60.0,
                   "the closed flexible simulator's states and its commands subscription",
                   [sim])
    assert "realtime:=false" not in sim.log()

    def moved():
        pub_cmd.publish(Float64MultiArray(data=list(TOOL_FORCE)))  # within command_timeout
        time.sleep(0.02)
        return sum(1 for m in list(states) if np.any(np.asarray(m.effort) != 0.0)) >= 40

    probe.wait_for(moved, 120.0, "40 steps under the cart forces", [sim])
    driven = [m for m in list(states) if np.any(np.asarray(m.effort) != 0.0)]
    t1 = stamp_to_sec(driven[0].header.stamp)  # after the first driven step
    stepper = ClosedFlexibleStepper(model, SimulatorConfig(dt=dt))
    stepper.reset(q0)
    tau = model.B @ np.array(TOOL_FORCE)
    expected = {}
    n_max = int(round((stamp_to_sec(driven[-1].header.stamp) - t1) / dt)) + 1
    for n in range(1, n_max + 1):
        stepper.step(tau)
        expected[n] = stepper.q.copy()
    assert tuple(driven[0].name) == model.coordinate_names
    worst = 0.0
    for m in driven:
        n = int(round((stamp_to_sec(m.header.stamp) - t1) / dt)) + 1
        worst = max(worst, float(np.max(np.abs(np.asarray(m.position) - expected[n]))))
        np.testing.assert_array_equal(np.asarray(m.effort), tau)
    print(f"{len(driven)} driven states, {n_max} steps: max |q_DDS - q_stepper| = {worst:.3g}")
    assert worst < 1e-12
    assert np.max(np.abs(expected[n_max][:model.nq_r] - q0[:model.nq_r])) > 1e-4  # it moved
    assert clock and stamp_to_sec(clock[-1].clock) >= stamp_to_sec(driven[-1].header.stamp)
    assert forces and forces[-1].layout.dim[0].label == "middle_joint.x,middle_joint.y"
    assert all(np.all(np.isfinite(m.data)) for m in forces)
    assert residuals and max(m.data[0] for m in list(residuals)) < 1e-10

    client = probe.node.create_client(SetParameters, "/simulator_node/set_parameters")
    req = SetParameters.Request(parameters=[ParameterMsg(name="realtime", value=ParameterValue(
        type=ParameterType.PARAMETER_BOOL, bool_value=True))])
    result = probe.call(client, req, 30.0).results[0]
    assert not result.successful and "realtime:=false publish_clock:=true" in result.reason
    assert sim.alive
