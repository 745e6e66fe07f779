"""simulator_node: the suite's embedded plant, driven like ros2_control hardware.

Subscribes
    ``/<controller_name>/commands`` (std_msgs/Float64MultiArray): one effort per
    model input (``model.input_names``), mapped to generalized forces by
    ``tau = B u`` (the interface of forward_command_controller with the effort
    command interface).  Wrong lengths and NaN/inf are rejected with a throttled
    warning; the last valid command stays applied until ``command_timeout``.  A
    command beyond the URDF ``effort`` limit of its joint is saturated there (as a
    ros2_control effort interface bounds it), with a throttled warning
    (``urdf_effort_limits: false`` applies it as sent).  An MJCF model's inputs are
    MuJoCo's ``ctrl``: a command beyond ``ctrlrange`` is saturated there with the same
    warning, and ``forcerange`` and the joints' ``actuatorfrcrange`` clip the applied force at
    each step, as MuJoCo does (:mod:`multibody_dynamics.model.actuator_limits`).
Services
    ``~/reset`` (std_srvs/Trigger, when std_srvs is installed): back to
    ``initial_positions`` at rest, braked until the next command, clock unchanged; it also
    clears a failed simulation.
Publishes
    ``/joint_states`` (sensor_msgs/JointState): position, velocity and applied
    effort of every coordinate, passive joints included, once per step;
    ``/clock`` (rosgraph_msgs/Clock) when ``publish_clock``, after the state of the same
    instant (a controller ticking on /clock then finds that state already sent).

The integration is :class:`multibody_dynamics.simulate.Simulator` (fixed step,
zero-order hold), open chains and constrained models alike: loop closures and rolling
contacts go through the projection method with the state projected onto the constraint
manifold after every step.  For a constrained model the node also publishes
``~/constraint_forces`` (std_msgs/Float64MultiArray: the minimum-norm multipliers,
one per constraint row, dim[0].label = the comma-separated row labels, N | N m) and
``~/constraint_residual`` (Float64MultiArray, labels ``phi,Av``: max |phi| [m | rad] and
max |A v| [m/s | rad/s]) every ``diagnostics_period`` steps.  ``initial_positions`` of
a closed loop are projected onto the manifold first (Newton); a start that cannot be
assembled is refused with a message.

The plant is :func:`~multibody_dynamics.robot.robot_stepper` of
:func:`~multibody_dynamics.robot.load_robot` (a
:class:`~multibody_dynamics.protocols.PlantStepper`).  A flexible model (one with elastic
coordinates, :func:`~multibody_dynamics.robot.has_elastic_coordinates`) is stepped by
:class:`~multibody_dynamics.flexible.stepper.FlexibleStepper`: the same fixed step ``dt =
1/rate_hz`` and zero-order hold, split into RK4 substeps chosen from the stiffest mode of the
linearization at the start (its log line gives the substeps); ``/joint_states`` then carries the
joints and the elastic coordinates (``<body>.e<k>``, modal amplitudes, effort 0), the commands
one effort per joint. A closed flexible loop (flexible_parallel_tool) is stepped by
:class:`~multibody_dynamics.flexible.stepper.ClosedFlexibleStepper` (the loops projected after
every step; ``~/constraint_forces`` carries the closure multipliers) and, far slower than real
time, only with ``realtime: false``: use ``publish_clock: true`` and ``use_sim_time`` in the
other nodes (``realtime: true`` is refused with the measured real-time factor).

``lockstep: true`` (with ``realtime: false``) makes the loop deterministic whatever the load, as
Gazebo's lockstep does for PX4: every valid command steps the plant once, then the node
publishes the state and /clock. A controller_node with ``timing: state`` answers each state
with one command computed from it, so the command computed from the state at t_k acts over
[t_k, t_k + dt], exactly as a zero-order-hold loop in the library. Without a command for
``lockstep_timeout`` of wall time the plant steps anyway (counted in /diagnostics and in the
exit log), so a missing controller does not stop the clock.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.qos import QoSProfile
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from ..errors import MultibodyError
from ..robot import has_elastic_coordinates, load_robot, robot_stepper
from ..simulate import METHODS, SimulatorConfig
from .cdr import patched_or_none
from .conversions import (
    JointCoordinates,
    MessageError,
    input_bounds,
    joint_state_msg,
    sec_to_stamp,
    vector_from_msg,
    vector_msg,
)
from .diagnostics import NodeDiagnostics
from .node import MultibodyNode
from .parameters import ParameterSet, ParameterSpec
from .runtime import (
    DEFAULT_TIMING,
    TIMINGS,
    PacedLoop,
    PolledSubscription,
    StartupError,
    exit_logger,
    main_for,
)

PARAMETERS = (
    ParameterSpec("robot", "arm7", "shipped robot name or path to a model YAML file (rigid, "
                  "constrained or an open flexible chain)", read_only=True),
    ParameterSpec("rate_hz", 500.0, "integration step rate; one step per tick, /joint_states "
                  "published every step (step size dt = 1/rate_hz)", unit="Hz",
                  range=(1.0, 10000.0)),
    ParameterSpec("controller_name", "effort_controller", "effort commands are read from "
                  "/<controller_name>/commands", read_only=True),
    ParameterSpec("command_timeout", 0.5, "apply zero effort when no valid command arrived for "
                  "this long (simulated time); 0 disables", unit="s", range=(0.0, 3600.0)),
    ParameterSpec("initial_positions", [], "initial joint positions, one per coordinate in "
                  "model order (rad | m); empty: the model YAML's initial_positions, else the "
                  "spring rest configuration", read_only=True),
    ParameterSpec("urdf_effort_limits", True, "saturate each command at the URDF effort limit of "
                  "its joint (as a ros2_control effort interface; an MJCF model: MuJoCo's "
                  "ctrlrange, forcerange and actuatorfrcrange); false: apply it as sent",
                  read_only=True),
    ParameterSpec("hold_until_command", True, "keep the robot braked at initial_positions until "
                  "the first valid command arrives (time still advances, with realtime false "
                  "at the wall-clock rate until that command)", read_only=True),
    ParameterSpec("publish_clock", False, "publish /clock with the simulated time and stamp "
                  "/joint_states with it (other nodes then use use_sim_time:=true)",
                  read_only=True),
    ParameterSpec("realtime", True, "true: pace the steps by the wall clock (at most one step "
                  "per 1/rate_hz); false: step as fast as possible (use with publish_clock)"),
    ParameterSpec("lockstep", False, "realtime false: step once per valid command received (a "
                  "controller_node with timing:=state answers every state with one command, "
                  "so each command acts on the step after the state it was computed from, "
                  "whatever the load); without a command for lockstep_timeout of wall time "
                  "the plant steps anyway with the command it holds (braked before the first)",
                  read_only=True),
    ParameterSpec("lockstep_timeout", 0.1, "lockstep: wall time after which a step is taken "
                  "without a new command (counted and reported); also the step period while "
                  "the plant waits for its first command", unit="s", range=(0.001, 60.0),
                  read_only=True),
    ParameterSpec("timing", DEFAULT_TIMING, "how the steps are paced with realtime true: timer "
                  "(an rclpy timer on the executor, which also takes the commands) or paced (a "
                  "thread of its own at absolute wall-clock deadlines that takes the commands "
                  "queued since the last step, steps and publishes /joint_states and /clock; "
                  "the executor keeps parameters and services); missed periods are skipped in "
                  "both", choices=TIMINGS, read_only=True),
    ParameterSpec("thread_priority", 0, "timing paced: 0 keeps normal scheduling; 1-99 asks "
                  "SCHED_FIFO at this priority for the stepping thread (as ros2_control's "
                  "thread_priority; needs an rtprio limit or CAP_SYS_NICE, else a warning)",
                  range=(0, 99), read_only=True),
    ParameterSpec("integrator", "rk4", "fixed-step integration method (flexible models: the "
                  "method of each substep)", choices=METHODS, read_only=True),
    ParameterSpec("diagnostics_period", 10, "publish ~/constraint_forces and "
                  "~/constraint_residual every this many steps (constrained models only)",
                  unit="steps", range=(1, 100000)),
)


class SimulatorNode(MultibodyNode):
    """Fixed-step simulation of a model (open chain or constrained) exposed over ROS 2 topics.

    With ``timing: paced`` (and ``realtime``) the steps run in a :class:`PacedLoop` thread;
    ``self._lock`` guards what that thread and the executor's callbacks (commands,
    parameter changes) both touch: the simulator, the applied command and its time.
    """

    node_name = "simulator_node"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)  # name, executor_kind (--executor), throttle
        self._lock = threading.Lock()
        self._loop: PacedLoop | None = None
        self._timer = None
        self._held_pacing = False
        self.params = ParameterSet(self, PARAMETERS, on_change=self._on_change)
        p = self.params
        config = SimulatorConfig(dt=1.0 / p["rate_hz"], method=p["integrator"])
        if p["lockstep"] and p["realtime"]:
            raise StartupError("lockstep: the steps follow the commands, not the wall clock; "
                               "set realtime:=false (and publish_clock:=true for the other "
                               "nodes' use_sim_time)")
        model = load_robot(p["robot"])
        name = model.name
        self.flexible = has_elastic_coordinates(model)  # stepped in substeps (its stiff modes)
        try:
            self.sim = robot_stepper(model, config)
        except MultibodyError as exc:  # a closed loop whose neutral pose cannot be closed
            raise StartupError(f"{name}: {exc}") from None
        # a rigid model's and an open flexible chain's inputs drive their joints, a closed
        # flexible loop's its actuated joints: input_names says which
        self.input_names = tuple(model.input_names)
        if self.flexible and self.sim.constrained and p["realtime"]:  # a closed flexible loop
            raise StartupError(self._too_slow(name))
        self.model = model
        self.coords = JointCoordinates(model)
        q0 = None
        if p["initial_positions"]:
            if len(p["initial_positions"]) != model.nv:
                raise StartupError(
                    f"parameter initial_positions: expected {model.nv} values (one per joint: "
                    f"{', '.join(model.coordinate_names)}), got {len(p['initial_positions'])}")
            q0 = self.coords.configuration(p["initial_positions"])
        self._q0 = q0
        try:
            self.sim.reset(q0)
        except MultibodyError as exc:
            raise StartupError(f"{name}: the initial configuration cannot be assembled "
                               f"({exc}); set initial_positions near an assembled "
                               "configuration of the loop") from None
        # the compiled step is loaded now (numba's cache: about 0.4-0.6 s in a new process), not
        # in the first period of the wall-clock loop: one step on copies, the state unchanged
        fast = self.sim.fast_stepper() if hasattr(self.sim, "fast_stepper") else None
        if fast is not None:
            fast.step(self.sim.q, self.sim.v, np.zeros(model.nv), self.sim.t, config.dt)
        self.u = np.zeros(model.nu)
        self.tau = np.zeros(model.nv)
        self._B = np.asarray(model.B, float)
        self._u_bounds = input_bounds(model) if p["urdf_effort_limits"] else None
        self._limits = (getattr(model, "actuator_limits", None) if p["urdf_effort_limits"]
                        else None)
        self._limit_source = ("the MJCF ctrlrange" if self._limits is not None else
                              "the URDF effort limits")
        self._t_cmd: float | None = None
        self._failed = False
        self.rejected = 0
        # lockstep: steps taken on a command and on the timeout, wall time of the last step
        self._lockstep = p["lockstep"]
        self.lockstep_steps = {"command": 0, "timeout": 0}
        self._last_step_wall = time.monotonic()

        qos = QoSProfile(depth=10)
        self.topic = f"/{p['controller_name']}/commands"
        self._pub_js = self.create_publisher(JointState, "/joint_states", qos)
        self._pub_clock = (self.create_publisher(ClockMsg, "/clock", qos)
                           if p["publish_clock"] else None)
        # timing paced: the steps take the commands themselves (no executor wake-up per command)
        self._commands = None
        if p["timing"] == "paced" and not self._lockstep and self.executor_kind != "events":
            self._commands = PolledSubscription(self, Float64MultiArray, self.topic,
                                                self._on_command, qos, serialized=True)
        else:
            self.create_subscription(Float64MultiArray, self.topic, self._on_command, qos)
        self._reset_service = self._make_reset_service()
        self._pub_lam = self._pub_res = None
        self._steps = 0
        if self.sim.constrained:
            self._lam_labels = list(self.sim.constraints.labels)
            self._pub_lam = self.create_publisher(Float64MultiArray, "~/constraint_forces", qos)
            self._pub_res = self.create_publisher(Float64MultiArray, "~/constraint_residual", qos)
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        # reused messages: the names and the layout are set once
        self._js = joint_state_msg(self.coords, self.sim.q, self.sim.v,
                                   self.tau, sec_to_stamp(0.0))
        # /joint_states goes out serialized: the message built once, stamp and arrays written in
        self._js_serialized = patched_or_none(self._js, ("position", "velocity", "effort"),
                                              "header.stamp", log=self.get_logger().info)
        self._clock_msg = ClockMsg()
        pacing = "wall-clock paced" if p["realtime"] else "as fast as possible"
        if self._lockstep:
            pacing = (f"in lockstep: one step per command, after {p['lockstep_timeout']:g} s "
                      "of wall time without one")
        if p["realtime"]:
            pacing += " by a thread of its own" if p["timing"] == "paced" else " by an rclpy timer"
        method = p["integrator"]
        if self.flexible:
            method = (f"{method} in {self.sim.substeps} substeps per step (flexible model: "
                      f"stiffest mode {self.sim.omega_max:.4g} 1/s, h*omega <= "
                      f"{self.sim.h_omega:g})")
        self.get_logger().info(
            f"simulating {name} (nq={model.nq}, nv={model.nv}) with {method} at "
            f"{p['rate_hz']:g} Hz ({pacing}); "
            f"commands: {self.topic} ({model.nu} efforts: {', '.join(self.input_names)}); "
            f"publishing /joint_states" + (" and /clock" if self._pub_clock else ""))
        # /diagnostics: the last constraint sample and the step count at the last report
        self._constraint_sample: tuple[np.ndarray, float, float] | None = None
        self._report = (0, time.monotonic(), 0)
        self.diagnostics = NodeDiagnostics(self, "simulation", name, self._diagnose)
        self._publish()
        self._start_timer()

    # -- parameters --------------------------------------------------------------------------
    def _too_slow(self, name: str) -> str:
        """Why a closed flexible loop does not run with ``realtime: true`` (with the measured
        real-time factor of its steps)."""
        factor = self.sim.real_time_factor()
        return (f"{name} is a closed flexible loop: its steps run at {factor:.3g} x real time "
                f"here ({self.sim.substeps} RK4 substeps of a KKT system per step), so it cannot "
                "be wall-clock paced; run it with realtime:=false publish_clock:=true (simulated "
                "time on /clock) and the other nodes with use_sim_time:=true")

    def _on_change(self, changes):
        rate = changes.get("rate_hz", self.params["rate_hz"])
        realtime = changes.get("realtime", self.params["realtime"])
        if realtime and self.flexible and self.sim.constrained:  # a closed flexible loop
            raise ValueError(self._too_slow(getattr(self.model, "name", "model")))
        if realtime and self._lockstep:
            raise ValueError("realtime: the node runs in lockstep (steps follow the commands); "
                             "restart it with lockstep:=false to pace it by the wall clock")
        if "rate_hz" in changes:
            with self._lock:
                self.sim.config = SimulatorConfig(dt=1.0 / rate, method=self.sim.config.method,
                                                  max_speed=self.sim.config.max_speed)
        if "rate_hz" in changes or "realtime" in changes:
            self._start_timer(rate, realtime)

    def _start_timer(self, rate=None, realtime=None):
        """(Re)start the stepping: the paced thread (timing paced, realtime) or a timer."""
        rate = self.params["rate_hz"] if rate is None else rate
        realtime = self.params["realtime"] if realtime is None else realtime
        if self.params["timing"] == "paced" and realtime:
            if self._timer is not None:
                self.destroy_timer(self._timer)
                self._timer = None
            if self._loop is None:
                self._loop = PacedLoop(self._tick, 1.0 / rate, name="simulator_steps",
                                       on_error=self._loop_error,
                                       priority=self.params["thread_priority"]).start()
                if self._loop.priority_error:
                    self.get_logger().warning(f"thread_priority: {self._loop.priority_error}; "
                                              "stepping with normal scheduling")
            else:
                self._loop.set_period(1.0 / rate)
            return
        self._stop_loop()
        if self._timer is not None:
            self.destroy_timer(self._timer)
        if self._lockstep:  # the commands step the plant; the timer only catches their absence
            self._held_pacing = False
            self._timer = self.create_timer(self.params["lockstep_timeout"] / 4,
                                            self._lockstep_timeout, clock=self._steady)
            return
        # off the wall clock a held plant still steps at the wall-clock rate: nothing moves, and
        # its simulated time does not race ahead of the nodes that start after it; its first
        # command switches to full speed (_tick)
        self._held_pacing = not realtime and self._holding()
        period = 1.0 / rate if realtime or self._held_pacing else 0.0  # 0: every executor turn
        self._timer = self.create_timer(period, self._tick, clock=self._steady)

    def _stop_loop(self):
        loop, self._loop = self._loop, None
        if loop is not None and not loop.stop():
            self.get_logger().warning("the stepping thread did not end within one period + 1 s")
        return loop

    def _loop_error(self, exc: Exception) -> bool:
        """An error escaped a paced step: end the thread at shutdown, else log and go on."""
        if not rclpy.ok(context=self.context):
            return False  # a publish interrupted by the shutdown
        self.throttle.error("loop", f"step failed: {type(exc).__name__}: {exc}")
        return True

    def destroy_node(self):
        loop, self._loop = getattr(self, "_loop", None), None
        log = exit_logger(self)
        if loop is not None:  # ended before the node goes (runtime.EXIT_JOIN)
            loop.stop_at_exit(log, "stepping thread")
        if loop is not None and loop.steps:
            log.info(f"stepping thread: {loop.describe()}")
        if getattr(self, "_lockstep", False):
            log.info(f"lockstep: {self._describe_lockstep()}")
        return super().destroy_node()

    # -- commands ----------------------------------------------------------------------------
    def _make_reset_service(self):
        """``~/reset`` (std_srvs/Trigger) when std_srvs can be imported, else None."""
        try:
            from std_srvs.srv import Trigger
        except ImportError:
            return None
        return self.create_service(Trigger, "~/reset", self._on_reset)

    def _on_reset(self, request, response):
        """Back to ``initial_positions`` at rest, braked until the next command; the clock goes
        on (a controller sees the state jump, not time going back).  Also clears a failed
        simulation."""
        with self._lock:
            sim, t = self.sim, self.sim.t
            try:
                sim.reset(self._q0)
            except MultibodyError as exc:  # cannot happen for a start that was assembled once
                response.success, response.message = False, f"reset failed: {exc}"
                return response
            sim.t = t
            self._failed = False
            self._t_cmd = None
            self.u = np.zeros(self.model.nu)
            self.tau = np.zeros(self.model.nv)
        response.success = True
        response.message = (f"reset to initial_positions at t = {t:.6f} s; braked until the "
                            "next command")
        self.get_logger().info(response.message)
        return response

    def _on_command(self, msg: Float64MultiArray):
        try:
            u = vector_from_msg(msg, self.model.nu, self.topic)
        except MessageError as exc:
            self.rejected += 1
            self.throttle.warn("command", f"rejected command: {exc} (inputs: "
                               f"{', '.join(self.input_names)}); keeping the last valid one")
            return
        if self._u_bounds is not None:
            lo, hi = self._u_bounds
            beyond = np.maximum(lo - u, u - hi)
            if np.any(beyond > 0):
                over = int(np.argmax(beyond))
                self.throttle.warn("saturated", f"command saturated at {self._limit_source}: "
                                   f"{self.input_names[over]} = {u[over]:.6g} beyond "
                                   f"[{lo[over]:g}, {hi[over]:g}] N m | N")
                u = np.clip(u, lo, hi)
        with self._lock:
            self.u = u
            self._t_cmd = self.sim.t
        if self._lockstep:
            self.lockstep_steps["command"] += 1
            self._tick()

    def _effort(self) -> np.ndarray:
        if self._t_cmd is None:
            return np.zeros(self.model.nv)
        timeout = self.params["command_timeout"]
        if timeout > 0 and self.sim.t - self._t_cmd > timeout:
            self.throttle.warn("timeout", f"no valid command on {self.topic} for more than "
                               f"{timeout:g} s; applying zero effort")
            return np.zeros(self.model.nv)
        if self._limits is not None:  # MuJoCo's forcerange / actuatorfrcrange at this state
            return self._limits.force(self.sim.q, self.sim.v, self.u)
        return self._B @ self.u

    # -- stepping ----------------------------------------------------------------------------
    def _holding(self) -> bool:
        """Braked at the start: no valid command yet and ``hold_until_command``."""
        return self._t_cmd is None and self.params["hold_until_command"]

    def _lockstep_timeout(self):
        """Lockstep: no command for ``lockstep_timeout`` of wall time, step with the one held."""
        if time.monotonic() - self._last_step_wall >= self.params["lockstep_timeout"]:
            if not self._holding():
                self.lockstep_steps["timeout"] += 1
            self._tick()

    def _describe_lockstep(self) -> str:
        n = self.lockstep_steps
        return (f"{n['command']} steps on a command, {n['timeout']} after "
                f"{self.params['lockstep_timeout']:g} s without one (the waits for the first "
                "command not counted)")

    def _tick(self):
        if self._commands is not None:
            self._commands.drain()
        with self._lock:
            self._step()
            self._publish()
        # lockstep: the timeout runs from the state's publication, not from the start of the
        # step (a step longer than lockstep_timeout, e.g. the first one with its compilation,
        # took a second step on the timeout, and both states were then answered: two states
        # in flight, every command one step late)
        self._last_step_wall = time.monotonic()
        if self._held_pacing and not self._holding():
            self._held_pacing = False
            self._timer.timer_period_ns = 0  # the first command: as fast as possible from now

    def _step(self):
        sim = self.sim
        if self._holding() or self._failed:
            sim.t += sim.config.dt
            self.tau = np.zeros(self.model.nv)
        else:
            self.tau = self._effort()
            q, v, t = sim.q, sim.v, sim.t
            try:
                sim.step(self.tau)
                ok = np.all(np.isfinite(sim.q)) and np.all(np.isfinite(sim.v)) and \
                    np.max(np.abs(sim.v)) <= sim.config.max_speed
                reason = "state became NaN/inf or exceeded max_speed"
            except MultibodyError as exc:
                ok, reason = False, str(exc)
            if not ok:
                sim.q, sim.v, sim.t = q, np.zeros_like(v), t + sim.config.dt
                self._failed = True
                self.get_logger().error(f"simulation failed at t = {t:.6g} s ({reason}); the "
                                        "state is frozen at the last finite value; call ~/reset "
                                        "or restart the node")

    def _publish(self):
        sim, js = self.sim, self._js
        stamp = (sec_to_stamp(sim.t) if self._pub_clock is not None else
                 self.get_clock().now().to_msg())
        position = self.coords.positions(sim.q)
        if self._js_serialized is not None:
            self._pub_js.publish(self._js_serialized.serialize(
                position, sim.v, self.tau, stamp=(stamp.sec, stamp.nanosec)))
        else:
            js.header.stamp = stamp
            js.position, js.velocity = position.tolist(), sim.v.tolist()
            js.effort = self.tau.tolist()
            self._pub_js.publish(js)
        if self._pub_clock is not None:
            # after the state: a use_sim_time controller ticks on /clock and then finds the
            # state of that instant already sent (else it often acts on the previous one)
            self._clock_msg.clock = stamp
            self._pub_clock.publish(self._clock_msg)
        self._steps += 1
        if self._pub_lam is not None and self._steps % self.params["diagnostics_period"] == 0:
            try:
                lam, phi, av = sim.sample(self.tau)
            except MultibodyError as exc:
                self.throttle.warn("diagnostics", f"constraint forces not available: {exc}")
                return
            if np.all(np.isfinite(lam)):
                self._constraint_sample = (lam, phi, av)
                self._pub_lam.publish(vector_msg(lam, self._lam_labels))
                self._pub_res.publish(vector_msg([phi, av], ["phi", "Av"]))


    # -- /diagnostics ------------------------------------------------------------------------
    #: |phi| above which the loop-closure residual is reported as a warning [m | rad]
    RESIDUAL_WARN = 1e-6

    def _diagnose(self):
        """(level, message, values) of the simulation for /diagnostics (on the executor)."""
        p, sim = self.params, self.sim
        with self._lock:
            t, steps, failed, t_cmd = sim.t, self._steps, self._failed, self._t_cmd
            sample, loop = self._constraint_sample, self._loop
        wall = time.monotonic()
        steps0, wall0, skipped0 = self._report
        skipped = loop.skipped if loop is not None else 0
        self._report = (steps, wall, skipped)
        rate = (steps - steps0) / max(wall - wall0, 1e-9)
        values = {"simulated time [s]": t, "steps": steps, "step rate [Hz]": rate,
                  "nominal rate [Hz]": p["rate_hz"], "commands rejected": self.rejected}
        timeout = p["command_timeout"]
        age = None if t_cmd is None else t - t_cmd
        values["last command age [s]"] = "no command yet" if age is None else age
        level, message = "ok", "running"
        if p["realtime"] and steps0 and rate < 0.9 * p["rate_hz"]:
            level, message = "warn", f"behind real time: {rate:.1f} of {p['rate_hz']:g} steps/s"
        if age is not None and timeout > 0 and age > timeout:
            level, message = "warn", (f"no valid command for {age:.3g} s (timeout "
                                      f"{timeout:g} s): applying zero effort")
        elif age is None and p["hold_until_command"]:
            message = "braked until the first command"
        if sample is not None:
            lam, phi, av = sample
            values["constraint residual |phi| [m | rad]"] = float(phi)
            values["constraint velocity residual |A v|"] = float(av)
            values.update({f"constraint force {label}": float(x)
                           for label, x in zip(self._lam_labels, lam)})
            if phi > self.RESIDUAL_WARN and level == "ok":
                level, message = "warn", (f"loop-closure residual {phi:.3g} above "
                                          f"{self.RESIDUAL_WARN:g}")
        if self._lockstep:
            values["lockstep steps on a command"] = self.lockstep_steps["command"]
            values["lockstep steps on the timeout"] = self.lockstep_steps["timeout"]
        if loop is not None:
            st = loop.timing_stats()
            values["missed periods skipped (since the last report)"] = skipped - skipped0
            if st:
                values["step start after the deadline p99 [ms]"] = st["late_p99_ms"]
                values["step duration p99 [ms]"] = st["step_p99_ms"]
        if failed:
            level, message = "error", ("simulation failed; the state is frozen (call ~/reset or "
                                        "restart the node)")
        return level, message, values


main = main_for(SimulatorNode)

if __name__ == "__main__":
    main()
