"""controller_node: trajectory tracking with PD, PID or computed torque, as an effort controller.

Subscribes
    ``/joint_states`` (sensor_msgs/JointState): the measured state (all model coordinates);
    ``~/joint_trajectory`` (trajectory_msgs/JointTrajectory): the reference, as
    joint_trajectory_controller takes it: ``header.stamp`` = start (zero: on
    receipt), ``time_from_start`` per point, names in any order, ``effort`` =
    feedforward.  Positions only: linear interpolation; with velocities: cubic
    Hermite; with velocities and accelerations: quintic Hermite.  A first point
    after t = 0 is reached from the current reference.  An empty trajectory stops
    (holds the measured position).  Invalid trajectories are rejected, the
    current one continues.  The topic is read by two subscriptions: a volatile one
    (as joint_trajectory_controller, for ordinary publishers) and a transient-local one,
    so that a latched trajectory (inverter_node's ``~/joint_trajectory``) published
    before this node started still arrives; a message delivered to both (identical to
    the previous one within ``DUPLICATE_WINDOW`` s wall time) is used once.  A
    trajectory with a zero stamp received before the first ``/joint_states`` starts
    at the first control tick with a state (not at a clock that is not running yet).
Publishes
    ``/<controller_name>/commands`` (std_msgs/Float64MultiArray): one effort per
    model input, at ``rate_hz`` on the node clock (simulated time with
    ``use_sim_time``), while the state is fresh; without a trajectory it holds
    the position measured first (or reached last).
Action
    ``~/follow_joint_trajectory`` (control_msgs/action/FollowJointTrajectory),
    only when control_msgs can be imported.

The control law is :mod:`multibody_control.controllers`; this node only wires
parameters and messages to it.
"""

from __future__ import annotations

import time

import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from multibody_dynamics.errors import MultibodyError
from multibody_dynamics.model import load_model
from multibody_dynamics.ros.conversions import (
    JointCoordinates,
    MessageError,
    joint_state_to_arrays,
    trajectory_from_msg,
    vector_msg,
)
from multibody_dynamics.ros.parameters import ParameterSet, ParameterSpec
from multibody_dynamics.ros.runtime import Throttle, main_for

from ..controllers import (
    LAWS,
    Reference,
    TrajectoryInterpolator,
    inputs_from_generalized,
    make_controller,
)

DUPLICATE_WINDOW = 1.0  # s (wall): the same trajectory again within this is a double delivery
#: Laws the node can run from a joint trajectory alone.  tv_lqr needs gains precomputed along
#: a whole trajectory and rmrc a task-space twist command, so they are library-only for now.
NODE_LAWS = tuple(law for law in LAWS if law in ("pd", "pid", "computed_torque"))

PARAMETERS = (
    ParameterSpec("robot", "arm7", "shipped robot name or path to a model YAML file",
                  read_only=True),
    ParameterSpec("rate_hz", 500.0, "control rate: commands published per second of node-clock "
                  "time (simulated time with use_sim_time)", unit="Hz", range=(1.0, 5000.0)),
    ParameterSpec("controller_name", "effort_controller", "commands are published on "
                  "/<controller_name>/commands", read_only=True),
    ParameterSpec("law", "computed_torque", "control law", choices=NODE_LAWS),
    ParameterSpec("kp", [100.0], "position gains, one value for all inputs or one per input; "
                  "pd/pid: N m/rad | N/m, computed_torque: 1/s^2", range=(0.0, 1e7),
                  min_length=1),
    ParameterSpec("kd", [20.0], "velocity gains, one value or one per input; pd/pid: "
                  "N m s/rad | N s/m, computed_torque: 1/s", range=(0.0, 1e6), min_length=1),
    ParameterSpec("ki", [0.0], "integral gains (pid only), one value or one per input",
                  unit="N m/(rad s) | N/(m s)", range=(0.0, 1e7), min_length=1),
    ParameterSpec("integral_limit", [], "bound of the integral action |ki * integral| (pid), "
                  "one value or one per input; empty: none", unit="N m | N",
                  range=(0.0, 1e6)),
    ParameterSpec("effort_limit", [], "output saturation |u|, one value or one per input; "
                  "empty: none", unit="N m | N", range=(0.0, 1e6)),
    ParameterSpec("state_timeout", 0.5, "stop publishing commands when /joint_states is older "
                  "than this (node-clock time); 0 disables", unit="s", range=(0.0, 3600.0)),
)


def _gain(values, default=float("inf")):
    if not values:
        return default
    return values[0] if len(values) == 1 else tuple(values)


class ControllerNode(Node):
    """Tracking controller publishing effort commands for forward_command_controller-style plants."""

    node_name = "controller_node"

    def __init__(self, **kwargs):
        super().__init__(self.node_name, **kwargs)
        self.params = ParameterSet(self, PARAMETERS, on_change=self._on_change)
        p = self.params
        self.throttle = Throttle(self.get_logger())
        self.model = model = load_model(p["robot"])
        self.coords = JointCoordinates(model)
        self.controller = self._build(p.values)
        self.state = None
        self._state_time: float | None = None
        self._hold: Reference | None = None
        self._traj: tuple[TrajectoryInterpolator, float, bool] | None = None
        self._last_ref: Reference | None = None
        self._t_prev: float | None = None
        self._goal_futures: list = []
        self.rejected = {"state": 0, "trajectory": 0}

        qos = QoSProfile(depth=10)
        self.topic = f"/{p['controller_name']}/commands"
        self._pub = self.create_publisher(Float64MultiArray, self.topic, qos)
        self.create_subscription(JointState, "/joint_states", self._on_state, qos)
        self.create_subscription(JointTrajectory, "~/joint_trajectory", self._on_trajectory, qos)
        latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.create_subscription(JointTrajectory, "~/joint_trajectory", self._on_trajectory,
                                 latched)
        self._last_msg: tuple[JointTrajectory, float] | None = None
        self._pending_msg: JointTrajectory | None = None
        self._timer = self.create_timer(1.0 / p["rate_hz"], self._tick)
        offered = [f"topic {self.resolve_topic_name('~/joint_trajectory')}"]
        self._action = self._make_action_server()
        if self._action is not None:
            offered.append("action ~/follow_joint_trajectory (control_msgs/FollowJointTrajectory)")
        else:
            offered.append("no FollowJointTrajectory action (control_msgs not importable)")
        self.get_logger().info(
            f"{p['law']} control of {model.name} at {p['rate_hz']:g} Hz -> {self.topic} "
            f"({model.nu} efforts: {', '.join(model.input_names)}); reference: "
            + "; ".join(offered))

    # -- parameters --------------------------------------------------------------------------
    def _build(self, values):
        return make_controller(values["law"], self.model, _gain(values["kp"]), _gain(values["kd"]),
                               _gain(values["ki"], 0.0), _gain(values["integral_limit"]),
                               _gain(values["effort_limit"]))

    def _on_change(self, changes):
        values = {**self.params.values, **changes}
        if any(k in changes for k in ("law", "kp", "kd", "ki", "integral_limit", "effort_limit")):
            self.controller = self._build(values)  # raises ValueError: change refused
            self.get_logger().info(f"control law {values['law']} rebuilt with the new gains")
        if "rate_hz" in changes:
            self.destroy_timer(self._timer)
            self._timer = self.create_timer(1.0 / changes["rate_hz"], self._tick)

    # -- inputs ------------------------------------------------------------------------------
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_state(self, msg: JointState):
        try:
            self.state = joint_state_to_arrays(msg, self.coords)
        except MessageError as exc:
            self.rejected["state"] += 1
            self.throttle.warn("state", f"rejected /joint_states: {exc}")
            return
        self._state_time = self._now()
        if self._hold is None:
            self._hold = Reference.hold(self.model, self.state.q)

    def _current_reference(self, now: float) -> Reference | None:
        if self._traj is not None:
            return self._sample(now)
        return self._hold

    def _accept(self, msg) -> tuple[TrajectoryInterpolator, float] | None:
        """Validated interpolator and start time of ``msg``; None for a stop request."""
        arr = trajectory_from_msg(msg, self.coords)
        if arr is None:
            return None
        now = self._now()
        start = arr.start if arr.start is not None else now
        t, pos, vel, acc, eff = arr.t, arr.positions, arr.velocities, arr.accelerations, arr.effort
        if eff is not None:
            for k, e in enumerate(eff):
                try:
                    inputs_from_generalized(self.model, e, f"points[{k}].effort")
                except MultibodyError as exc:
                    raise MessageError(f"JointTrajectory: {exc}") from None
        t_now = now - start
        current = self._current_reference(now)
        if t[0] > 0 and t_now < t[0] and current is not None:
            t0 = max(t_now, 0.0)
            t = np.concatenate([[t0], t])
            pos = np.vstack([self.coords.positions(current.q), pos])
            vel = None if vel is None else np.vstack([current.v, vel])
            acc = None if acc is None else np.vstack([current.a, acc])
            eff = None if eff is None else np.vstack([eff[:1], eff])
        return TrajectoryInterpolator(t, pos, vel, acc, eff), start

    def _on_trajectory(self, msg: JointTrajectory):
        wall = time.monotonic()
        last = self._last_msg
        if last is not None and wall - last[1] < DUPLICATE_WINDOW and last[0] == msg:
            return  # the same sample through the other (volatile / transient-local) subscription
        self._last_msg = (msg, wall)
        if self.state is None and msg.points and msg.header.stamp.sec == 0 \
                and msg.header.stamp.nanosec == 0:
            try:  # validate now (warn at once), start when the state (and clock) is there
                self._accept(msg)
            except (MessageError, MultibodyError) as exc:
                self.rejected["trajectory"] += 1
                self.throttle.warn("trajectory", f"rejected trajectory: {exc}")
                return
            self._pending_msg = msg
            self.get_logger().info("trajectory received before the first /joint_states; it "
                                   "starts at the first control tick with a state")
            return
        self._pending_msg = None
        try:
            accepted = self._accept(msg)
        except (MessageError, MultibodyError) as exc:
            self.rejected["trajectory"] += 1
            self.throttle.warn("trajectory", f"rejected trajectory: {exc}")
            return
        self._start(accepted)

    def _start(self, accepted):
        self._finish_goals(False, "preempted by a new trajectory")
        if accepted is None:
            if self.state is not None:
                self._hold = Reference.hold(self.model, self.state.q)
            self._traj = None
            self.get_logger().info("empty trajectory: stopping, holding the measured position")
            return
        interp, start = accepted
        self._traj = (interp, start, False)
        self.get_logger().info(f"trajectory accepted: {interp.t.size} points, {interp.kind} "
                               f"interpolation, {interp.end:.3g} s from t = {start:.6g} s")

    def _sample(self, now: float) -> Reference:
        interp, start, done = self._traj
        p, v, a, e = interp.sample(now - start)
        u_ff = None if e is None else inputs_from_generalized(self.model, e)
        ref = Reference(self.coords.configuration(p), v, a, u_ff)
        if not done and now - start >= interp.end:
            self._traj = (interp, start, True)
            self._hold = Reference(ref.q, np.zeros(self.model.nv), np.zeros(self.model.nv), u_ff)
            self.get_logger().info("trajectory finished; holding its last point")
            self._finish_goals(True, "")
        return ref

    # -- output ------------------------------------------------------------------------------
    def _tick(self):
        now = self._now()
        if self.state is None:
            self.throttle.info("wait", "waiting for /joint_states")
            return
        if self._t_prev is not None and now < self._t_prev:  # clock went back (sim restarted)
            self.controller.reset()
            self._state_time = now
        self._t_prev = now
        if self._pending_msg is not None:
            msg, self._pending_msg = self._pending_msg, None
            try:
                self._start(self._accept(msg))
            except (MessageError, MultibodyError) as exc:
                self.throttle.warn("trajectory", f"rejected trajectory: {exc}")
        timeout = self.params["state_timeout"]
        if timeout > 0 and now - self._state_time > timeout:
            self.throttle.warn("stale", f"/joint_states older than {timeout:g} s; not commanding")
            return
        try:
            ref = self._current_reference(now)
            u = self.controller.step(now, self.state.q, self.state.v, ref)
        except MultibodyError as exc:
            self.throttle.error("step", f"control law failed: {exc}; no command published")
            return
        if not np.all(np.isfinite(u)):
            self.throttle.error("nan", "control law produced NaN/inf; no command published")
            return
        self._pub.publish(vector_msg(u, self.model.input_names))

    # -- FollowJointTrajectory (when control_msgs exists) -------------------------------------
    def _finish_goals(self, success: bool, message: str):
        futures, self._goal_futures = self._goal_futures, []
        for fut in futures:
            if not fut.done():
                fut.set_result((success, message))

    def _make_action_server(self):
        try:
            from control_msgs.action import FollowJointTrajectory
            from rclpy.action import ActionServer, CancelResponse, GoalResponse
            from rclpy.task import Future
        except ImportError:
            return None

        def on_goal(goal):
            try:
                self._accept(goal.trajectory)
            except (MessageError, MultibodyError) as exc:
                self.throttle.warn("goal", f"rejected goal: {exc}")
                return GoalResponse.REJECT
            return GoalResponse.ACCEPT

        async def execute(goal_handle):
            result = FollowJointTrajectory.Result()
            try:
                accepted = self._accept(goal_handle.request.trajectory)
            except (MessageError, MultibodyError) as exc:
                goal_handle.abort()
                result.error_code = FollowJointTrajectory.Result.INVALID_GOAL
                result.error_string = str(exc)
                return result
            self._start(accepted)
            if accepted is None:
                goal_handle.succeed()
                return result
            fut = Future()
            self._goal_futures.append(fut)
            success, message = await fut
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
            elif success:
                goal_handle.succeed()
            else:
                goal_handle.abort()
                result.error_string = message
            return result

        def on_cancel(goal_handle):
            if self.state is not None:
                self._hold = Reference.hold(self.model, self.state.q)
            self._traj = None
            self._finish_goals(False, "canceled")
            return CancelResponse.ACCEPT

        return ActionServer(self, FollowJointTrajectory, "~/follow_joint_trajectory",
                            execute_callback=execute, goal_callback=on_goal,
                            cancel_callback=on_cancel)


main = main_for(ControllerNode)

if __name__ == "__main__":
    main()
