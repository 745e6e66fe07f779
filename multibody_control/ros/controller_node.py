"""controller_node: trajectory tracking (PD, PID, computed torque, time-variant LQR) or
resolved-motion rate control, as an effort controller.

Subscribes
    ``/joint_states`` (sensor_msgs/JointState): the measured state (all model coordinates);
    ``~/joint_trajectory`` (trajectory_msgs/JointTrajectory): the reference, as
    joint_trajectory_controller takes it: ``header.stamp`` = start (zero: on
    receipt), ``time_from_start`` per point, names in any order, ``effort`` =
    feedforward.  Positions only: linear interpolation; with velocities: cubic
    Hermite; with velocities and accelerations: quintic Hermite.  A first point
    after t = 0 is reached from the current reference.  An empty trajectory stops
    (holds the measured position).  Invalid trajectories are rejected, the
    current one continues: among them, as joint_trajectory_controller, one that ends in
    the past (stamp + last time_from_start before now), and one with a position outside
    the joint's URDF limits.  The topic is read by two subscriptions: a volatile one
    (as joint_trajectory_controller, for ordinary publishers) and, while a publisher of the
    topic offers transient-local durability (the ROS graph looked at every ``LATCHED_WATCH``
    s of wall time), a transient-local one, so that a latched trajectory (inverter_node's
    ``~/joint_trajectory``) published before this node started still arrives; a message
    delivered to both (identical to the previous one within ``DUPLICATE_WINDOW`` s wall
    time) is used once.  A volatile publisher alone meets no transient-local reader, so
    neither side warns of incompatible QoS (beside a latched publisher, the reader's QoS
    event goes to the debug log; the volatile reader takes its messages).  A
    trajectory with a zero stamp received before the first ``/joint_states`` starts
    at the first control tick with a state (not at a clock that is not running yet) and a
    matched subscriber of the commands (DDS matches the states and the commands of a new
    plant independently: the states may flow half a second before any command arrives).
    ``~/twist_command`` (geometry_msgs/TwistStamped): the end-effector twist of law
    ``rmrc`` [m/s, rad/s], world axes about the frame origin (``header.frame_id`` empty or
    ending in ``world``); it is applied until ``twist_timeout`` s after its receipt, then
    the commanded twist is zero (the arm stops where it is commanded).  Ignored (with a
    throttled warning) by the other laws, as ``rmrc`` ignores joint trajectories.
Publishes
    ``/<controller_name>/commands`` (std_msgs/Float64MultiArray): one effort per
    model input, at ``rate_hz`` on the node clock (simulated time with
    ``use_sim_time``), while the state is fresh; without a trajectory it holds
    the position measured first (or reached last).
Action
    ``~/follow_joint_trajectory`` (control_msgs/action/FollowJointTrajectory),
    only when control_msgs can be imported.

Laws (parameter ``law``)
    ``pd``, ``pid``, ``computed_torque``: :func:`~multibody_control.controllers.make_controller`
    with ``kp``, ``kd`` (``ki``, ``integral_limit``).
    ``tv_lqr``: time-variant LQR along each received trajectory (Seifried 2014 Sect. 4.2.7);
    ``kp``, ``kd`` are the diagonal state weights Q of the position and velocity errors,
    ``lqr_r`` the input weight R.  The nominal motion is the trajectory sampled every
    ``lqr_dt`` (0: the control period) with its ``effort`` as nominal input (a fully
    actuated robot may omit it: then ``u = B^-1 ID(q, v, a)``; an underactuated one must
    send it).  The backward Riccati recursion runs in a worker thread, off the executor;
    until the gains of the current trajectory are ready the node runs ``fallback_law``
    (default ``pd`` with ``fallback_kp``, ``fallback_kd``: it tracks the same reference and
    feedforward) -- or, with ``fallback_law: zero``, publishes zero effort with a throttled
    warning -- and switches at the first tick after the solve, logging the solve time and
    the switch time.  Without a trajectory (before the first, after an empty one) the
    fallback holds the position.  After the end of a trajectory the last gain (the
    infinite-horizon gain of the final rest point) holds its last point.  A gain change
    re-solves for the current trajectory and keeps the old gains until then.
    ``rmrc``: resolved-motion rate control (NASA CR-165977 App. D as
    :class:`~multibody_control.controllers.RMRCController` implements it) of the frame
    ``rmrc_frame`` (default: the model's end effector) from ``~/twist_command``; ``kp``,
    ``kd`` are the inner loop's gains (``rmrc_inner``).  A redundant joint
    (``rmrc_redundant_joint``) is commanded at rate 0 (held).  Needs a fully actuated
    open chain with the frame.
    A law that does not fit the robot (computed torque / rmrc on an underactuated model,
    tv_lqr on a closed loop, rmrc without a frame, gains of the wrong length) stops the node
    at start-up with one error line and exit code 1, and is refused at run time.

Flexible robots (``robot`` a model with elastic coordinates, see
:func:`~multibody_dynamics.robot.has_elastic_coordinates`): ``pd`` and ``pid`` act on the
joints only (collocated feedback, as Seifried 2014 Ch. 6 closes it around the feedforward),
with ``kp``, ``kd``, ``ki`` per joint; the node reads the joints of ``/joint_states`` (the
elastic coordinates ``<body>.e<k>`` it also carries are checked and dropped, as are elastic
entries of a trajectory) and publishes one effort per joint. The model is the joint view
:func:`~multibody_dynamics.flexible.joint_view.joint_space_model`, which has no dynamics:
computed_torque, tv_lqr and rmrc are refused (start-up: ``cannot start: law ...``; run time:
the parameter change is refused). A computed torque on the ``rigid_counterpart`` was not
chosen: it would cancel a rigid model's dynamics with high-gain feedback that excites the
undamped elastic modes, and only flexible_cart_manipulator names a counterpart.

The control laws are :mod:`multibody_control.controllers`; what the node decides besides
messages (the law for the robot's capabilities, the tv_lqr redesign and its fallback, the
nominal motion, the held target, stale and resumed states) is the ROS-free
:class:`~multibody_control.controllers.session.TrackingSession`, which scripts and tests drive
with arrays. This node only wires: parameters -> session, messages -> arrays -> session ->
commands; the tv_lqr designs run in a :class:`~multibody_dynamics.ros.runtime.SolveWorker`
thread (as inverter_node's inversions).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import rclpy
from geometry_msgs.msg import TwistStamped
from rcl_interfaces.msg import ParameterType
from rclpy.clock import Clock, ClockType
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_policy_name_from_kind
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from multibody_dynamics.errors import MultibodyError
from multibody_dynamics.flexible.joint_view import joint_space_model
from multibody_dynamics.robot import has_elastic_coordinates, load_robot
from multibody_dynamics.ros.cdr import patched_or_none
from multibody_dynamics.ros.conversions import (
    JointCoordinates,
    MessageError,
    joint_state_to_arrays,
    stamp_to_sec,
    trajectory_from_msg,
    vector_msg,
)
from multibody_dynamics.ros.diagnostics import NodeDiagnostics
from multibody_dynamics.ros.node import MultibodyNode
from multibody_dynamics.ros.parameters import ParameterSet, ParameterSpec
from multibody_dynamics.ros.runtime import (
    DEFAULT_TIMING,
    TIMINGS,
    PacedLoop,
    PolledSubscription,
    SolveWorker,
    StartupError,
    exit_logger,
    join_worker,
    main_for,
)

try:
    from rclpy.event_handler import SubscriptionEventCallbacks
except ImportError:  # Humble: rclpy.qos_event
    from rclpy.qos_event import SubscriptionEventCallbacks

from ..controllers import Reference, TrajectoryInterpolator
from ..controllers.lqr import INTERPOLATIONS
from ..controllers.rmrc import INNER_LOOPS
from ..controllers.session import (  # noqa: F401 - law_setup & co. importable from the node
    CONSTRAINED_LAWS,
    FALLBACK_LAWS,
    FLEXIBLE_LAWS,
    LAW_PARAMETERS,
    NODE_LAWS,
    RESUME_JUMP,
    DesignJob,
    Hold,
    LawError,
    LawSetup,
    Plan,
    TrackingSession,
    design_controller,
    law_setup,
    nominal_motion,
)

DUPLICATE_WINDOW = 1.0  # s (wall): the same trajectory again within this is a double delivery
#: s (wall): period of the look for a latched (transient-local) publisher of ~/joint_trajectory
LATCHED_WATCH = 0.2

PARAMETERS = (
    ParameterSpec("robot", "arm7", "shipped robot name or path to a model YAML file",
                  read_only=True),
    ParameterSpec("rate_hz", 500.0, "control rate: commands published per second of node-clock "
                  "time (simulated time with use_sim_time)", unit="Hz", range=(1.0, 5000.0)),
    ParameterSpec("timing", DEFAULT_TIMING, "how the control ticks are paced without "
                  "use_sim_time: timer (an rclpy timer on the executor, which also takes the "
                  "states) or paced (a thread of its own at absolute wall-clock deadlines that "
                  "takes the /joint_states queued since the last tick and publishes the "
                  "commands; the executor keeps references, parameters and the action); with "
                  "use_sim_time the timer on the node clock; state: one tick per received "
                  "/joint_states at its header stamp (the loop with a simulator_node in "
                  "lockstep; rate_hz should then be the plant's step rate, which the sampled-"
                  "gain checks and tv_lqr use)",
                  choices=TIMINGS + ("state",), read_only=True),
    ParameterSpec("thread_priority", 0, "timing paced: 0 keeps normal scheduling; 1-99 asks "
                  "SCHED_FIFO at this priority for the control thread (as ros2_control's "
                  "thread_priority; needs an rtprio limit or CAP_SYS_NICE, else a warning)",
                  range=(0, 99), read_only=True),
    ParameterSpec("controller_name", "effort_controller", "commands are published on "
                  "/<controller_name>/commands", read_only=True),
    ParameterSpec("law", "computed_torque", "control law (see the node's documentation)",
                  choices=NODE_LAWS),
    ParameterSpec("kp", [100.0], "position gains, one value for all inputs or one per input "
                  "(per coordinate for tv_lqr and rmrc); pd/pid: N m/rad | N/m, computed_torque "
                  "and rmrc (inner computed_torque): 1/s^2, rmrc (inner pd): N m/rad, tv_lqr: "
                  "state weight Q of the position errors, 1/rad^2 | 1/m^2", range=(0.0, 1e7),
                  min_length=1),
    ParameterSpec("kd", [20.0], "velocity gains, one value or one per input (per coordinate "
                  "for tv_lqr and rmrc); pd/pid: N m s/rad | N s/m, computed_torque and rmrc "
                  "(inner computed_torque): 1/s, rmrc (inner pd): N m s/rad, tv_lqr: state "
                  "weight Q of the velocity errors, s^2/rad^2 | s^2/m^2", range=(0.0, 1e6),
                  min_length=1),
    ParameterSpec("ki", [0.0], "integral gains (pid, and fallback_law pid), one value or one "
                  "per input", unit="N m/(rad s) | N/(m s)", range=(0.0, 1e7), min_length=1),
    ParameterSpec("integral_limit", [], "bound of the integral action |ki * integral| (pid), "
                  "one value or one per input; empty: none", unit="N m | N",
                  range=(0.0, 1e6)),
    ParameterSpec("effort_limit", [], "output saturation |u|, one value or one per input; "
                  "empty: the URDF effort limits of the driven joints (none for a flexible "
                  "robot)", unit="N m | N", range=(0.0, 1e6)),
    ParameterSpec("state_timeout", 0.5, "stop publishing commands when /joint_states is older "
                  "than this (node-clock time); 0 disables", unit="s", range=(0.0, 3600.0)),
    ParameterSpec("lqr_r", [1.0], "tv_lqr: input weight R (diagonal), one value or one per "
                  "input", unit="1/N^2 | 1/(N m)^2", range=(1e-12, 1e12), min_length=1),
    ParameterSpec("lqr_dt", 0.0, "tv_lqr: design step and spacing of the gain table; 0: the "
                  "control period 1/rate_hz", unit="s", range=(0.0, 1.0)),
    ParameterSpec("lqr_interpolation", "hold", "tv_lqr: gain between two table samples",
                  choices=INTERPOLATIONS),
    ParameterSpec("fallback_law", "pd", "tv_lqr: law run while the gains of the current "
                  "trajectory are computed and without a trajectory; zero: publish zero effort "
                  "(throttled warning)", choices=FALLBACK_LAWS),
    ParameterSpec("fallback_kp", [100.0], "tv_lqr: kp of fallback_law (units as kp of that law)",
                  range=(0.0, 1e7), min_length=1),
    ParameterSpec("fallback_kd", [20.0], "tv_lqr: kd of fallback_law (units as kd of that law)",
                  range=(0.0, 1e6), min_length=1),
    ParameterSpec("independent", [], "projected_inverse_dynamics, quasi_velocity: joint names of "
                  "the independent coordinates theta that kp, kd act on and that a trajectory "
                  "must name; empty: the law's default (the actuated joints of a robot with "
                  "passive joints, else a pivoted QR of the constraint Jacobian)",
                  type=ParameterType.PARAMETER_STRING_ARRAY, read_only=True),
    ParameterSpec("output", [], "feedback_linearization: the output rows y = h(q) it linearizes, "
                  "one per input: joints, linear combinations or frame coordinates (e.g. x, "
                  "tip.x, tip.y or 'alpha2 + 0.667*beta1'); empty: the actuated joints (the "
                  "collocated output, whose zero dynamics are the passive joints with the "
                  "actuated ones held)", type=ParameterType.PARAMETER_STRING_ARRAY),
    ParameterSpec("force_control", False, "projected_inverse_dynamics, quasi_velocity: command "
                  "the constraint force lambda_d (Aghili 2005 Sect. 7.3; needs every coordinate "
                  "actuated)"),
    ParameterSpec("lambda_d", [], "desired constraint multipliers with force_control, one per "
                  "constraint row; empty: zero", unit="N | N m", range=(-1e6, 1e6),
                  type=ParameterType.PARAMETER_DOUBLE_ARRAY),
    ParameterSpec("force_kp", [0.0], "projected_inverse_dynamics: gain on the multiplier error, "
                  "one value or one per constraint row", range=(0.0, 1e4), min_length=1),
    ParameterSpec("force_ki", [0.0], "projected_inverse_dynamics: integral gain on the "
                  "multiplier error", unit="1/s", range=(0.0, 1e4), min_length=1),
    ParameterSpec("rmrc_frame", "", "rmrc: the commanded frame; empty: the model's end "
                  "effector"),
    ParameterSpec("rmrc_redundant_joint", "", "rmrc: joint held (rate 0) instead of resolved; "
                  "empty: every joint resolved (minimum norm)"),
    ParameterSpec("rmrc_inner", "computed_torque", "rmrc: inner joint loop", choices=INNER_LOOPS),
    ParameterSpec("rmrc_damping", 0.05, "rmrc: largest damping mu_max of the damped "
                  "least-squares solve near singularities", range=(0.0, 10.0)),
    ParameterSpec("rmrc_singular_threshold", 0.05, "rmrc: the damping starts when the "
                  "smallest singular value of J drops below this", range=(1e-9, 10.0)),
    ParameterSpec("rmrc_pose_gain", 0.0, "rmrc: feedback of the commanded pose's drift from "
                  "the integrated twist; 0: open-loop RMRC (App. D)", unit="1/s",
                  range=(0.0, 1e4)),
    ParameterSpec("twist_timeout", 0.5, "rmrc: a twist command applies this long after its "
                  "receipt (node-clock time), then the twist is zero; 0: until the next one",
                  unit="s",
                  range=(0.0, 3600.0)),
)


class ControllerNode(MultibodyNode):
    """Tracking controller publishing effort commands for forward_command_controller-style
    plants."""

    node_name = "controller_node"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)  # name, executor_kind (--executor), throttle
        # with timing paced the ticks run in a PacedLoop thread: this lock serializes them with
        # the executor's callbacks (state, reference, parameters, action), which share the
        # node's state; with the timer everything runs on the executor and it is uncontended
        self._lock = threading.RLock()
        self._loop: PacedLoop | None = None
        self.params = ParameterSet(self, PARAMETERS, on_change=self._locked(self._on_change))
        p = self.params
        robot = load_robot(p["robot"])
        # the joints only for a flexible robot; the elastic coordinates of /joint_states dropped
        model = joint_space_model(robot) if has_elastic_coordinates(robot) else robot
        ignored = robot.coordinate_names[robot.nv - robot.nq_e:]
        self.coords = JointCoordinates(model, ignored=ignored)
        try:
            self.session = TrackingSession(robot, p.values, self.coords,
                                           schedule=self._schedule_design)
        except LawError as exc:
            raise StartupError(f"{exc} (robot {model.name})") from None
        # tv_lqr: designs run in a worker thread, off the executor; the tick picks up the gains
        # (the recursion is Python-level numpy: the GIL goes back to the executor within 0.2 ms)
        self._worker = SolveWorker(self._design, name="lqr_design", on_error=self._design_failed,
                                   switch_interval=2e-4)
        self.model, self.flexible = self.session.model, self.session.flexible
        self._goal_futures: list = []
        self.rejected = {"state": 0, "trajectory": 0, "twist": 0}

        qos = QoSProfile(depth=10)
        self.topic = f"/{p['controller_name']}/commands"
        self._pub = self.create_publisher(Float64MultiArray, self.topic, qos)
        # the commands go out serialized: the message built once, the efforts written in
        self._serialized = patched_or_none(vector_msg(np.zeros(model.nu), model.input_names),
                                           ["data"], log=self.get_logger().info)
        sim_time = self.get_parameter("use_sim_time").value
        self._paced = p["timing"] == "paced" and not sim_time
        # timing state: every received state is a tick at its stamp (self._stamp_now)
        self._on_each_state = p["timing"] == "state"
        self._stamp_now: float | None = None
        # paced: the ticks take /joint_states themselves (no executor wake-up per state)
        self._states = None
        if self._paced and self.executor_kind != "events":
            self._states = PolledSubscription(self, JointState, "/joint_states",
                                              self._locked(self._on_state), qos, serialized=True)
        else:
            # timing state: depth 1, so the states queued while the node was busy (before it
            # spins, after a stall) collapse to the newest.  Each answered state steps a
            # lockstep plant once: answering two queued states keeps two states in flight, and
            # every command then acts one step late (seen at start-up in bringup.launch.py;
            # the joint PD of the undamped flexible arms is unstable with that delay).
            # With one state in flight at a time the depth loses nothing.
            self.create_subscription(JointState, "/joint_states", self._locked(self._on_state),
                                     QoSProfile(depth=1) if self._on_each_state else qos)
        self._on_traj = on_trajectory = self._locked(self._on_trajectory)
        self.create_subscription(JointTrajectory, "~/joint_trajectory", on_trajectory, qos)
        # the transient-local reader exists only while a transient-local (latched) publisher
        # does (LATCHED_WATCH): with it, every volatile publisher would be told "requesting
        # incompatible QoS. No messages will be sent to it" in its own process, though the
        # volatile reader takes its messages; created late, it still gets the latched sample
        self._traj_topic = self.resolve_topic_name("~/joint_trajectory")
        self._latched_sub = None
        self._watch_latched()
        watch = self._locked(self._watch_latched)  # a callback without arguments: no TimerInfo
        self.create_timer(LATCHED_WATCH, lambda: watch(),
                          clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.create_subscription(TwistStamped, "~/twist_command",
                                 self._locked(self._on_twist), qos)
        self._last_msg: tuple[JointTrajectory, float] | None = None
        self._pending_msg: JointTrajectory | None = None
        self._timer = None
        self._published = 0
        self._report = (0, time.monotonic())
        self._start_ticks(p["rate_hz"])
        self.diagnostics = NodeDiagnostics(self, "control", model.name, self._diagnose)
        offered = [f"topic {self.resolve_topic_name('~/joint_trajectory')}"]
        self._action = self._make_action_server()
        if self._action is not None:
            offered.append("action ~/follow_joint_trajectory (control_msgs/FollowJointTrajectory)")
        else:
            offered.append("no FollowJointTrajectory action (control_msgs not importable)")
        if self.setup.law == "rmrc":
            offered = [f"twist on {self.resolve_topic_name('~/twist_command')} (frame "
                       f"{p['rmrc_frame'] or model.end_effector}, {p['rmrc_inner']} inner loop)"]
        pacing = "paced by a thread of its own" if self._paced else "rclpy timer"
        if self._on_each_state:
            pacing = "one tick per /joint_states, at its stamp"
        if p["timing"] == "paced" and sim_time:
            pacing += " (timing paced applies to the wall clock; with use_sim_time the timer runs)"
        self.get_logger().info(
            f"{self.session.describe()} control of {model.name} at {p['rate_hz']:g} Hz "
            f"({pacing}) -> "
            f"{self.topic} ({model.nu} efforts: {', '.join(model.input_names)}); reference: "
            + "; ".join(offered))

    def _watch_latched(self):
        """Create the transient-local reader of ``~/joint_trajectory`` when a publisher of the
        topic offers transient-local durability, destroy it when none does (wall-clock timer)."""
        try:
            infos = self.get_publishers_info_by_topic(self._traj_topic)
        except Exception:  # noqa: BLE001 - the context is shutting down
            return
        latched = any(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
                      for i in infos)
        if latched and self._latched_sub is None:
            qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
            # rclpy's default event callback would warn "no messages will be received" for a
            # volatile publisher beside the latched one, which the volatile reader serves:
            # this reader's incompatibilities go to the debug log (a publisher that neither
            # reader matches, e.g. best effort, is still reported by the volatile one)
            quiet = SubscriptionEventCallbacks(incompatible_qos=self._latched_incompatible)
            self._latched_sub = self.create_subscription(
                JointTrajectory, "~/joint_trajectory", self._on_traj, qos, event_callbacks=quiet)
            self.get_logger().debug(f"{self._traj_topic}: a latched publisher; reading it")
        elif not latched and self._latched_sub is not None:
            self.destroy_subscription(self._latched_sub)
            self._latched_sub = None

    def _latched_incompatible(self, event):
        """A publisher of ``~/joint_trajectory`` that the transient-local reader cannot match
        (rclpy's incompatible-QoS event of that reader): debug log only, see ``__init__``."""
        self.get_logger().debug(
            "~/joint_trajectory: a publisher does not match the transient-local reader "
            f"(policy {qos_policy_name_from_kind(event.last_policy_kind)}); the volatile "
            "reader takes its messages")

    # -- the session's state, by the names the node had (tests and diagnostics read them) ----
    @property
    def setup(self) -> LawSetup:
        return self.session.setup

    @property
    def state(self):
        return self.session.state

    @property
    def _traj(self):
        return self.session.traj

    @property
    def _plan(self) -> Plan | None:
        return self.session.plan

    @property
    def _ready(self) -> Plan | None:
        return self.session.ready

    # -- parameters --------------------------------------------------------------------------
    def _on_change(self, changes):
        if self.session.reconfigure(changes):  # LawError (a ValueError): refused
            self.get_logger().info(f"control law {self.session.describe()} rebuilt with the "
                                   "new parameters")
        if "rate_hz" in changes:
            self._start_ticks(changes["rate_hz"])

    # -- pacing ------------------------------------------------------------------------------
    def _locked(self, callback):
        """``callback`` run under the node's lock (executor callbacks vs. the paced ticks)."""
        lock = self._lock

        def run(*args):
            with lock:
                return callback(*args)

        return run

    def _start_ticks(self, rate: float):
        """Start (or re-time) the control ticks: the paced thread or an rclpy timer (none
        with timing state: the states are the ticks)."""
        if self._on_each_state:
            return
        if self._paced:
            if self._loop is None:
                self._loop = PacedLoop(self._locked(self._tick), 1.0 / rate,
                                       name="controller_ticks", on_error=self._loop_error,
                                       priority=self.params["thread_priority"]).start()
                if self._loop.priority_error:
                    self.get_logger().warning(f"thread_priority: {self._loop.priority_error}; "
                                              "ticking with normal scheduling")
            else:
                self._loop.set_period(1.0 / rate)
            return
        if self._timer is not None:
            self.destroy_timer(self._timer)
        self._timer = self.create_timer(1.0 / rate, self._tick)

    def _loop_error(self, exc: Exception) -> bool:
        """An error escaped a paced tick: end the thread at shutdown, else log and go on."""
        if not rclpy.ok(context=self.context):
            return False  # a publish interrupted by the shutdown
        self.throttle.error("loop", f"control tick failed: {type(exc).__name__}: {exc}")
        return True

    # -- tv_lqr design (worker thread) ---------------------------------------------------------
    def _schedule_design(self, job: DesignJob | None):
        """The session asks for a design (None: the running one is superseded)."""
        worker = getattr(self, "_worker", None)
        if worker is None:
            return
        if job is None:
            worker.cancel()
        else:
            worker.submit(job)

    def _design(self, job: DesignJob, generation: int):
        plan = self.session.design(job)
        if not self.session.offer(plan):
            self.get_logger().info(f"tv_lqr: gains solved in {plan.solve_time:.3f} s but "
                                   "superseded by a newer trajectory or parameter change; "
                                   "dropped")

    def _design_failed(self, job: DesignJob, exc: Exception, elapsed: float):
        self.get_logger().error(f"tv_lqr: design along the trajectory failed after "
                                f"{elapsed:.3f} s: {type(exc).__name__}: "
                                f"{' '.join(str(exc).split())}; staying on the fallback law")

    def _take_ready(self, now: float):
        plan = self.session.take_ready(now)
        if plan is None:
            return
        n = plan.u_nominal.shape[0]
        self.get_logger().info(
            f"tv_lqr: gains ready ({n} samples every {plan.dt:g} s, Riccati solve "
            f"{plan.solve_time:.3f} s); switching from {self.setup.fallback} to tv_lqr at "
            f"t = {now:.6f} s (trajectory time {now - plan.start:.4f} s)")

    # -- inputs ------------------------------------------------------------------------------
    def _now(self) -> float:
        if self._stamp_now is not None:  # timing state: the time of the state being answered
            return self._stamp_now
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_state(self, msg: JointState):
        try:
            state = joint_state_to_arrays(msg, self.coords)
        except MessageError as exc:
            self.rejected["state"] += 1
            self.throttle.warn("state", f"rejected /joint_states: {exc}")
            return
        if self._on_each_state:
            self._stamp_now = stamp_to_sec(msg.header.stamp)
        self._held(self.session.observe(self._now(), state.q, state.v))
        if self._on_each_state:
            self._tick()

    def _held(self, hold: Hold | None):
        """Log a hold of the measured position (and abort the goal of an aborted trajectory)."""
        if hold is None:
            return
        dropped = ""
        if hold.aborted:
            self._finish_goals(False, f"{hold.reason}: trajectory aborted")
            dropped = "; the trajectory was aborted"
        self.get_logger().warning(f"{hold.reason}: holding the measured position{dropped}")

    def _on_twist(self, msg: TwistStamped):
        if self.setup.law != "rmrc":
            self.throttle.warn("twist_law", f"twist command ignored: law {self.setup.law} tracks "
                               "joint trajectories (twist commands drive law rmrc)")
            return
        lin, ang = msg.twist.linear, msg.twist.angular
        twist = np.array([lin.x, lin.y, lin.z, ang.x, ang.y, ang.z], float)
        frame = msg.header.frame_id
        problem = None
        if not np.all(np.isfinite(twist)):
            problem = f"NaN or inf in {twist.tolist()}"
        elif frame and not (frame == "world" or frame.endswith("/world")):
            problem = (f"header.frame_id {frame!r}: expected world axes ('' or 'world'; the "
                       "twist is about the frame origin in world axes)")
        if problem is not None:
            self.rejected["twist"] += 1
            self.throttle.warn("twist", f"rejected twist command: {problem}")
            return
        self.session.set_twist(twist, self._now())

    def _current_reference(self, now: float) -> Reference | None:
        ref = self.session.current_reference(now)
        self._check_finished()
        return ref

    def _check_finished(self):
        if self.session.pop_finished():
            self.get_logger().info("trajectory finished; holding its last point")
            self._finish_goals(True, "")

    def _accept(self, msg) -> tuple[TrajectoryInterpolator, float] | None:
        """Validated interpolator and start time of ``msg``; None for a stop request."""
        if self.setup.law == "rmrc":
            raise MessageError("law rmrc follows twist commands on ~/twist_command; joint "
                               "trajectories are not used")
        if self.setup.law in CONSTRAINED_LAWS and msg.points:
            msg = self._complete(msg)
        arr = trajectory_from_msg(msg, self.coords)
        if arr is None:
            return None
        try:
            accepted = self.session.interpolator(arr.t, arr.positions, arr.velocities,
                                                 arr.accelerations, arr.effort, arr.start,
                                                 self._now())
        except MultibodyError as exc:
            raise MessageError(f"JointTrajectory: {exc}") from None
        self._check_finished()
        return accepted

    def _complete(self, msg: JointTrajectory) -> JointTrajectory:
        """``msg`` with the joints it leaves out added (constrained laws only use the
        independent coordinates theta; the others get the current reference's positions and
        zero velocity, acceleration and effort, which the law ignores)."""
        names = list(msg.joint_names)
        try:
            missing, fill = self.session.fill_dependent(names, self._now())
        except MultibodyError as exc:
            raise MessageError(f"JointTrajectory: {exc}") from None
        self._check_finished()
        if not missing:
            return msg
        zeros = [0.0] * len(missing)
        out = JointTrajectory()
        out.header = msg.header
        out.joint_names = names + missing
        for p in msg.points:
            pt = type(p)()
            pt.time_from_start = p.time_from_start
            pt.positions = list(p.positions) + fill
            for field in ("velocities", "accelerations", "effort"):
                given = list(getattr(p, field))
                setattr(pt, field, given + zeros if given else [])
            out.points.append(pt)
        return out

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
            self.session.stop()
            self.get_logger().info("empty trajectory: stopping, holding the measured position")
            return
        interp, start = accepted
        self.get_logger().info(f"trajectory accepted: {interp.t.size} points, {interp.kind} "
                               f"interpolation, {interp.end:.3g} s from t = {start:.6g} s")
        if self.session.start(interp, start) is not None:
            fallback = "zero effort" if self.setup.controller is None else \
                f"the {self.setup.fallback} fallback"
            self.get_logger().info(f"tv_lqr: solving the Riccati recursion along it off the "
                                   f"executor; {fallback} until the gains are ready")

    # -- output ------------------------------------------------------------------------------
    def _command(self, now: float) -> np.ndarray:
        """The active law's inputs (nu,) at node-clock time ``now``."""
        session = self.session
        if session.setup.law != "rmrc" and session.zero_fallback:
            self.throttle.warn("zero", "tv_lqr: no gains for the current reference yet; "
                               "publishing zero effort (fallback_law zero)")
        u = session.command(now)
        self._check_finished()
        if session.twist_expired:
            self.throttle.info("twist_old", f"twist command older than "
                               f"{session.values['twist_timeout']:g} s; commanding zero twist")
        return u

    def _tick(self):
        if self._states is not None:
            self._states.drain()
        now = self._now()
        if self.state is None:
            self.throttle.info("wait", "waiting for /joint_states")
            return
        self._held(self.session.check_clock(now))  # clock went back: the sim restarted
        if self._pending_msg is not None and self._pub.get_subscription_count() == 0:
            # DDS matches the two directions of the loop independently: the states can flow
            # while the plant receives no command yet (measured up to 0.5 s); a trajectory
            # started now would run away from a braked robot
            self.throttle.info("plant", f"trajectory waits for a subscriber of {self.topic}")
        elif self._pending_msg is not None:
            msg, self._pending_msg = self._pending_msg, None
            try:
                self._start(self._accept(msg))
            except (MessageError, MultibodyError) as exc:
                self.throttle.warn("trajectory", f"rejected trajectory: {exc}")
        if self._ready is not None:
            self._take_ready(now)
        if self.session.stale(now):
            self.throttle.warn("stale", f"/joint_states older than "
                               f"{self.params['state_timeout']:g} s; not commanding")
            return
        try:
            u = self._command(now)
        except MultibodyError as exc:
            self.throttle.error("step", f"control law failed: {exc}; no command published")
            return
        if not np.all(np.isfinite(u)):
            self.throttle.error("nan", "control law produced NaN/inf; no command published")
            return
        self._pub.publish(vector_msg(u, self.model.input_names) if self._serialized is None
                          else self._serialized.serialize(u))
        self._published += 1

    def _diagnose(self):
        """(level, message, values) of the control loop for /diagnostics (on the executor)."""
        session = self.session
        with self._lock:
            state, ref, published = session.state, session.last_reference, self._published
            state_time, traj, loop = session.state_time, session.traj, self._loop
            law = self.session.describe() if session.plan is None else "tv_lqr"
            error = session.tracking_error()
        wall = time.monotonic()
        published0, wall0 = self._report
        self._report = (published, wall)
        values = {"law": law, "commands published": published,
                  "command rate [Hz]": (published - published0) / max(wall - wall0, 1e-9),
                  "nominal rate [Hz]": self.params["rate_hz"],
                  "states rejected": self.rejected["state"],
                  "trajectories rejected": self.rejected["trajectory"],
                  "reference": ("twist commands" if self.setup.law == "rmrc" else
                                "trajectory" if traj is not None else
                                "holding the first state" if ref is not None else "none")}
        if loop is not None:
            st = loop.timing_stats()
            if st:
                values["tick start after the deadline p99 [ms]"] = st["late_p99_ms"]
                values["tick duration p99 [ms]"] = st["step_p99_ms"]
        if state is None:
            return "warn", "waiting for /joint_states", values
        age = self._now() - state_time
        values["state age [s]"] = age
        if error is not None:
            values["tracking error max [rad | m]"] = error
        timeout = self.params["state_timeout"]
        if timeout > 0 and age > timeout:
            return "warn", f"/joint_states older than {timeout:g} s: not commanding", values
        return "ok", f"{law} running", values

    def destroy_node(self):
        loop, self._loop = getattr(self, "_loop", None), None
        log = exit_logger(self)
        # the threads end before the node goes (runtime.EXIT_JOIN)
        if loop is not None and loop.stop_at_exit(log, "control thread") and loop.steps:
            log.info(f"control thread: {loop.describe()}")
        worker = getattr(self, "_worker", None)  # None: the constructor failed before it
        if worker is not None:
            worker.stop(timeout=0.0)  # then waited for as every thread (runtime.EXIT_JOIN)
            join_worker(worker.thread, log, "tv_lqr design thread")
        return super().destroy_node()

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
                with self._lock:
                    self._accept(goal.trajectory)
            except (MessageError, MultibodyError) as exc:
                self.throttle.warn("goal", f"rejected goal: {exc}")
                return GoalResponse.REJECT
            return GoalResponse.ACCEPT

        async def execute(goal_handle):
            result = FollowJointTrajectory.Result()
            with self._lock:  # never across the await: the ticks must go on
                try:
                    accepted = self._accept(goal_handle.request.trajectory)
                except (MessageError, MultibodyError) as exc:
                    accepted, problem = False, str(exc)
                else:
                    self._start(accepted)
                    if accepted is not None:
                        fut = Future()
                        self._goal_futures.append(fut)
            if accepted is False:
                goal_handle.abort()
                result.error_code = FollowJointTrajectory.Result.INVALID_GOAL
                result.error_string = problem
                return result
            if accepted is None:
                goal_handle.succeed()
                return result
            success, message = await fut
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
            elif success:
                goal_handle.succeed()
            else:
                goal_handle.abort()
                result.error_string = message
            return result

        @self._locked
        def on_cancel(goal_handle):
            self.session.stop()
            self._finish_goals(False, "canceled")
            return CancelResponse.ACCEPT

        return ActionServer(self, FollowJointTrajectory, "~/follow_joint_trajectory",
                            execute_callback=execute, goal_callback=on_goal,
                            cancel_callback=on_cancel)


main = main_for(ControllerNode)

if __name__ == "__main__":
    main()
