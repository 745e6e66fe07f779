"""inverter_node: desired outputs -> joint reference with feedforward effort (model inversion).

Inputs
    the inversion scenario named by the ``scenario`` parameter (a YAML file as read by
    :func:`multibody_control.inversion.scenario.load_inversion_scenario`), inverted at
    start-up and again whenever ``scenario``, ``output_names``, ``method`` or ``dt`` change;
    ``~/output_trajectory`` (trajectory_msgs/JointTrajectory): a desired output trajectory.
    Its ``joint_names`` are the names of the output rows (see *Output* below), in any order;
    every point carries ``positions`` (the desired outputs, m | rad), optionally
    ``velocities`` and ``velocities`` + ``accelerations``; ``effort`` must be empty.
Publishes
    ``~/joint_trajectory`` (trajectory_msgs/JointTrajectory) with a reliable,
    transient-local (latched, depth 1) QoS: a controller that subscribes later still
    receives the last result.  Connect it to controller_node's ``~/joint_trajectory``
    (controller_node also listens with a transient-local subscription).

Output
    The output rows are ``output_names`` when set (each a coordinate name, a linear
    combination ``"alpha2 + 0.5*beta2"`` or a frame coordinate ``"tip.x"``; as many rows as
    the model has inputs); otherwise the scenario's output; without a scenario the
    collocated output (the actuated joint coordinates).  The method is ``method`` unless it
    is ``scenario`` (the scenario's method; ``stable`` without a scenario), the sample
    spacing ``dt`` unless it is 0 (the scenario's; 0.01 s without a scenario).  A trajectory
    on ``~/output_trajectory`` is inverted with the same output, method, sample spacing and
    the scenario's solver options (except ``t_start``/``t_end``, which belong to the
    scenario's task).

How a message becomes the desired output y_d(t) (the decision, see also DESIGN.md §3)
    The points are interpolated in time, exactly through every point:

    * positions, velocities and accelerations: quintic Hermite segments (C2; y_d'' is
      what the inverse model needs, so this is the preferred form);
    * positions and velocities: cubic Hermite segments (C1: the acceleration and hence the
      feedforward jump at the points);
    * positions only: a clamped cubic spline (C2, at rest at the first and last point).

    Before the first and after the last point the output rests at that point; send points
    that start and end at rest (zero velocity and acceleration) for a smooth start and
    stop.  The motion interval of the task is [first, last time_from_start].  At least
    two points are needed.

The published trajectory
    ``joint_names`` = every coordinate of the model (``model.coordinate_names``), passive
    joints included; per sample of the inversion: ``positions`` (joint angles, continuous
    joints as angles), ``velocities``, ``accelerations`` of the inverse model's motion, and
    ``effort`` = ``B u`` -- the generalized force of the feedforward inputs ``u``: for the
    usual selection matrix B the input's value on its actuated joint and exactly 0 on every
    passive joint (controller_node maps it back to ``u`` with ``B u = effort``).
    ``time_from_start`` = sample time minus the first sample time (the start of the
    pre-actuation for stable inversion), so the first point is at 0.  ``header.stamp`` is
    zero (start on receipt, as joint_trajectory_controller does) for the scenario and for
    messages with a zero stamp; a message with stamp s gives the stamp s + t_first (the
    pre-actuation starts before s). A request that ends in the past (stamp + last
    time_from_start before now) is refused, as controller_node refuses such a trajectory.

Flexible robots (``robot`` a model with elastic coordinates, see
:func:`~multibody_dynamics.robot.has_elastic_coordinates`; open chains such as
flexible_manipulator)
    The scenario is a flexible inversion scenario
    (:mod:`multibody_control.inversion.flexible_scenario`), inverted with
    :func:`~multibody_control.inversion.flexible_scenario.run_flexible_scenario` for its
    method only (its ``compare`` list is left to ``multibody invert``; its tracking check runs
    when ``verify`` is true and is part of the logged summary); ``method`` chooses among the
    flexible designs ``rigid``, ``collocated``, ``quasi_static``, ``stable``, ``classical`` (the
    methods of
    rigid robots are refused with that list, as the flexible designs are on a rigid robot).
    The output is the end point of one body in the plane, ``output_names`` ``["<body>.x",
    "<body>.y"]`` (empty: the scenario's task, or the model's end effector); a scenario fixes
    it. ``~/output_trajectory`` messages over these two names are interpolated as above and
    inverted with :func:`~multibody_control.inversion.flexible.invert_flexible` and the
    scenario's Γ, ``ik_guess`` (elbow branch; default 0.5 rad per joint) and solver options.
    The published trajectory has ``joint_names`` = the joints only (``chain.joint_names``: the
    controller tracks joints, the elastic coordinates are not references), ``positions``,
    ``velocities``, ``accelerations`` the joint rows of the inverse model's motion and
    ``effort`` = the joint torques ``u`` (``B = [I; 0]``), by
    :func:`~multibody_control.inversion.flexible_reference.joint_reference`; times and stamps
    as above.

Closed flexible loops (flexible_parallel_tool)
    Only the task of a closed scenario is inverted (a scenario is required; ``~/output_trajectory``
    requests are rejected): its first design (``method: scenario``) or the ``method``
    ``classical``/``stable`` with the scenario's output, by
    :func:`~multibody_control.inversion.flexible_scenario.run_closed_scenario` (its plant check
    when the scenario says ``verify: true``). The trajectory has ``joint_names`` = the joints
    (``s1, s2, alpha, beta``: passive ones included), their rows of the inverse model's
    motion, and ``effort`` = ``B u`` of the joint view (the cart forces on the actuated joints,
    0 on the passive ones).

Solving runs in a worker thread, off the executor: the node keeps answering parameter
requests and validating messages.  A request arriving during a solve waits; only the
latest waiting request is kept, and a result already superseded by a newer request is
dropped.  Progress is logged every ``progress_period`` seconds.  A failed inversion is
logged with the inversion's message and nothing is published; bad messages are rejected
with a throttled warning.
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rcl_interfaces.msg import ParameterType
from rclpy.clock import Clock, ClockType
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from trajectory_msgs.msg import JointTrajectory

from multibody_dynamics.errors import InputError, MultibodyError
from multibody_dynamics.flexible.joint_view import joint_space_model
from multibody_dynamics.model.resources import share_dir
from multibody_dynamics.robot import has_closures, has_elastic_coordinates, load_robot
from multibody_dynamics.ros.conversions import (
    JointCoordinates,
    MessageError,
    name_order,
    trajectory_from_msg,
    trajectory_msg,
)
from multibody_dynamics.ros.node import MultibodyNode
from multibody_dynamics.ros.parameters import ParameterSet, ParameterSpec
from multibody_dynamics.ros.runtime import (
    SolveWorker,
    StartupError,
    exit_logger,
    join_worker,
    main_for,
)

from ..controllers import TrajectoryInterpolator
from ..inversion.flexible import FLEXIBLE_METHODS, invert_flexible
from ..inversion.flexible_reference import PointPathOutput, joint_reference
from ..inversion.flexible_scenario import (
    CLOSED_METHODS,
    ClosedDesignSpec,
    ClosedInversionScenario,
    FlexibleInversionScenario,
    closed_summary,
    flexible_summary,
    load_flexible_scenario,
    run_closed_scenario,
    run_flexible_scenario,
)
from ..inversion.methods import METHODS, InversionResult, invert
from ..inversion.scenario import (
    InversionScenario,
    load_inversion_scenario,
    run_inversion_scenario,
    summary,
)
from ..outputs import Output
from ..scenarios.schema import scenario_robot
from ..tasks import TimeLaw

DEFAULT_DT = 0.01      # s, sample spacing without a scenario
DEFAULT_METHOD = "stable"
# rigid robots', then flexible
ALL_METHODS = tuple(dict.fromkeys(tuple(METHODS) + FLEXIBLE_METHODS))

PARAMETERS = (
    ParameterSpec("robot", "arm7", "shipped robot name or path to a model YAML file; a "
                  "scenario must name the same robot", read_only=True),
    ParameterSpec("scenario", "", "inversion scenario YAML inverted at start-up and on change; "
                  "a relative path is taken in the package's config/scenarios (.yaml may be "
                  "left out); empty: only ~/output_trajectory requests"),
    ParameterSpec("output_names", [], "output rows to invert (coordinate names, linear "
                  "combinations 'a*x + b*y' or frame coordinates 'tip.x'), one per input; "
                  "empty: the scenario's output, or the actuated joints without a scenario; "
                  "flexible robots: ['<body>.x', '<body>.y'] (empty: the scenario's task or "
                  "the end effector)",
                  type=ParameterType.PARAMETER_STRING_ARRAY),
    ParameterSpec("method", "scenario", "inversion method; 'scenario': the scenario's "
                  f"(or {DEFAULT_METHOD} without one); rigid robots: {', '.join(METHODS)}; "
                  f"flexible robots: {', '.join(FLEXIBLE_METHODS)}; closed flexible loops: "
                  f"{', '.join(CLOSED_METHODS)} (with the scenario's output)",
                  choices=("scenario",) + ALL_METHODS),
    ParameterSpec("dt", 0.0, "sample spacing of the inversion and of the published points; "
                  f"0: the scenario's ({DEFAULT_DT:g} s without one)", unit="s",
                  range=(0.0, 1.0)),
    ParameterSpec("progress_period", 2.0, "log the progress of a running inversion this "
                  "often (wall clock)", unit="s", range=(0.1, 3600.0)),
)

LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)


# -- desired output from waypoints ------------------------------------------------------------

class WaypointTask:
    """A task (as :func:`~multibody_control.inversion.methods.invert` takes it) through waypoints.

    Interpolation: see the module docstring (quintic / cubic Hermite, clamped cubic spline).

    Parameters
    ----------
    names : tuple of str, the output rows (the task is then the exact output)
    t : (N,) strictly increasing times [s], N >= 2
    positions : (N, m); velocities, accelerations : (N, m) or None
    """

    def __init__(self, names, t, positions, velocities=None, accelerations=None):
        t = np.asarray(t, float)
        if t.size < 2:
            raise InputError("output trajectory: expected at least 2 points (a motion), got "
                             f"{t.size}")
        self.names = tuple(names)
        self.law = TimeLaw(float(t[0]), float(t[-1]))  # t0, tf of the motion
        if velocities is None:
            from scipy.interpolate import CubicSpline

            self.kind = "clamped cubic spline"
            spline = CubicSpline(t, np.asarray(positions, float), axis=0, bc_type="clamped")
            self._pieces = (spline, spline.derivative(1), spline.derivative(2))
            self._interp = None
        else:
            self._interp = TrajectoryInterpolator(t, positions, velocities, accelerations)
            self.kind = f"{self._interp.kind} Hermite"
        self._t = t
        self._first = np.asarray(positions, float)[0]
        self._last = np.asarray(positions, float)[-1]

    def _one(self, tk: float):
        m = len(self.names)
        if tk <= self._t[0]:
            return self._first.copy(), np.zeros(m), np.zeros(m)
        if tk >= self._t[-1]:
            return self._last.copy(), np.zeros(m), np.zeros(m)
        if self._interp is not None:
            return self._interp.sample(tk)[:3]
        return tuple(np.asarray(f(tk), float) for f in self._pieces)

    def __call__(self, t):
        """(y, y', y'') each (m,) at a scalar t, or (N, m) at times t (N,)."""
        if np.ndim(t) == 0:
            return self._one(float(t))
        rows = [self._one(float(tk)) for tk in np.ravel(t)]
        return tuple(np.array([r[k] for r in rows]) for k in range(3))


class _OutputNames:
    """Name -> row index of the output, for :func:`trajectory_from_msg` (which reorders by it)."""

    def __init__(self, names):
        self.names = tuple(names)
        self._index = {n: i for i, n in enumerate(self.names)}

    def order(self, names, what: str) -> np.ndarray:
        return name_order(names, self._index, what, "output",
                          f"the output rows are: {', '.join(map(repr, self.names))}")


# -- result -> message --------------------------------------------------------------------------

def joint_trajectory_msg(model, coords: JointCoordinates, result: InversionResult,
                         start: float | None = None) -> JointTrajectory:
    """The published trajectory of an inversion result (see the module docstring)."""
    effort = result.u @ np.asarray(model.B, float).T
    stamp = None if start is None else max(start + float(result.t[0]), 0.0)
    positions = np.array([coords.positions(q) for q in result.q])
    msg = trajectory_msg(coords.names, np.asarray(result.t, float) - float(result.t[0]),
                         positions, result.v, result.a, effort, stamp=stamp)
    return msg


# -- the node -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _ClosedOutput:
    """The output of a closed flexible loop's design: its scenario's tool path (``names``) is
    followed through the design's output (collocated, combined, ...)."""

    names: tuple[str, ...]
    design: ClosedDesignSpec


@dataclass(frozen=True)
class _Setup:
    """What the current parameters select: scenario (or None), output, method, dt."""

    scenario: InversionScenario | FlexibleInversionScenario | ClosedInversionScenario | None
    output: Output | PointPathOutput | _ClosedOutput  # the last two: a flexible robot
    method: str
    dt: float


@dataclass
class _Job:
    source: str
    setup: _Setup
    task: WaypointTask | None = None   # None: the scenario's task
    start: float | None = None         # header.stamp of the request [s], None: zero


def resolve_scenario(path: str) -> Path:
    """Absolute path of a scenario parameter value (relative: in <share>/config/scenarios)."""
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = share_dir() / "config" / "scenarios" / p
    if not p.suffix and not p.exists():
        p = p.with_suffix(".yaml")
    return p


class InverterNode(MultibodyNode):
    """Model inversion of desired output trajectories, published as joint trajectories."""

    node_name = "inverter_node"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)  # name, executor_kind (--executor), throttle
        self.params = ParameterSet(self, PARAMETERS, on_change=self._on_change)
        p = self.params
        self.chain = None  # the flexible model of a flexible robot (open or closed)
        self.closed = False
        robot = load_robot(p["robot"])
        if has_elastic_coordinates(robot):
            self.chain = robot
            self.closed = has_closures(robot)
            self.model = joint_space_model(robot)  # the joints: what is published
        else:
            self.model = robot
        self.coords = JointCoordinates(self.model)
        try:
            self.setup = self._make_setup(p.values)
        except ValueError as exc:
            raise StartupError(str(exc)) from None
        self.rejected = 0
        self.published = 0

        self._pub = self.create_publisher(JointTrajectory, "~/joint_trajectory", LATCHED)
        self.create_subscription(JointTrajectory, "~/output_trajectory",
                                 self._on_output_trajectory,
                                 QoSProfile(depth=10))
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._progress_timer = self.create_timer(p["progress_period"], self._progress,
                                                 clock=self._steady)
        self._worker = SolveWorker(self._solve, name="inversion", on_error=self._failed)
        s = self.setup
        self.get_logger().info(
            f"inverting for {self.model.name} (inputs {', '.join(self.model.input_names)}): "
            f"output [{', '.join(s.output.names)}], method {s.method}, dt {s.dt:g} s; requests on "
            f"{self.resolve_topic_name('~/output_trajectory')}, results (latched) on "
            f"{self.resolve_topic_name('~/joint_trajectory')}")
        if s.scenario is not None:
            self._submit(_Job(f"scenario {s.scenario.path}", s))

    # -- parameters --------------------------------------------------------------------------
    def _load_scenario(self, value: str):
        """The scenario file ``value`` (the flexible loader when its robot has elastic
        coordinates, else the rigid one), or None."""
        if not value:
            return None
        path = resolve_scenario(value)
        robot = scenario_robot(path)  # None: no robot key, the rigid loader says so
        if robot is not None and has_elastic_coordinates(robot):
            sc = load_flexible_scenario(path)
            robot = sc.system.name if isinstance(sc, ClosedInversionScenario) else \
                sc.chain.config.name
        else:
            sc = load_inversion_scenario(path)
            robot = sc.model.name
        if robot != self.model.name:
            raise InputError(f"scenario {path}: robot {robot!r} but the node's robot is "
                             f"{self.model.name!r}")
        return sc

    def _make_setup(self, values) -> _Setup:
        sc = self._load_scenario(values["scenario"])
        if self.closed:
            return self._make_closed_setup(values, sc)
        if self.chain is not None:
            return self._make_flexible_setup(values, sc)
        if values["method"] in FLEXIBLE_METHODS and values["method"] not in METHODS:
            raise InputError(f"method {values['method']}: a design for flexible robots "
                             f"(multibody_control.inversion.flexible); {self.model.name} is a "
                             f"rigid model: expected one of {', '.join(METHODS)}")
        model = sc.model if sc is not None else self.model
        if values["output_names"]:
            output = Output(model, values["output_names"])
        elif sc is not None:
            output = sc.output
        else:
            output = Output.collocated(model)
        if output.m != model.nu:
            raise InputError(f"output_names: {output.m} rows ({', '.join(output.names)}) but "
                             f"{model.name} has {model.nu} inputs "
                             f"({', '.join(model.input_names)}); the inverse model needs as many")
        method = values["method"]
        if method == "scenario":
            method = sc.method if sc is not None else DEFAULT_METHOD
        dt = values["dt"] or (sc.dt if sc is not None else DEFAULT_DT)
        return _Setup(sc, output, method, dt)

    def _make_flexible_setup(self, values, sc: FlexibleInversionScenario | None) -> _Setup:
        output = PointPathOutput.of(self.chain, values["output_names"]
                                    or (sc.task.names if sc is not None else ()))
        if sc is not None and output.names != sc.task.names:
            raise InputError(f"output_names {list(output.names)}: the scenario's task is the path "
                             f"of [{', '.join(sc.task.names)}], and a flexible inversion's output "
                             "is its task's point; leave output_names empty")
        method = values["method"]
        if method == "scenario":
            method = sc.methods[0] if sc is not None else DEFAULT_METHOD
        elif method not in FLEXIBLE_METHODS:
            raise InputError(f"method {method}: {self.model.name} is a flexible model: expected "
                             f"one of {', '.join(FLEXIBLE_METHODS)} (the designs of "
                             "multibody_control.inversion.flexible)")
        dt = values["dt"] or (sc.dt if sc is not None else DEFAULT_DT)
        return _Setup(sc, output, method, dt)

    def _make_closed_setup(self, values, sc: ClosedInversionScenario | None) -> _Setup:
        name = self.model.name
        if sc is None:
            raise InputError(f"{name} is a closed flexible loop: inverter_node inverts the task "
                             "of its scenario file (e.g. "
                             "scenario:=invert_flexible_parallel_tool); "
                             "~/output_trajectory requests are not taken for closed loops")
        if values["output_names"]:
            raise InputError(f"output_names {list(values['output_names'])}: a closed flexible "
                             "loop follows its scenario's tool path through the design's output "
                             f"({sc.designs[0].output}); leave output_names empty")
        design = sc.designs[0]
        if values["method"] != "scenario":
            if values["method"] not in CLOSED_METHODS:
                raise InputError(f"method {values['method']}: {name} is a closed flexible loop: "
                                 f"expected one of {', '.join(CLOSED_METHODS)} (with the "
                                 f"scenario's {design.output} output) or scenario")
            design = ClosedDesignSpec(values["method"], design.output, design.gamma)
        return _Setup(sc, _ClosedOutput(sc.task.names, design), design.label,
                      values["dt"] or sc.dt)

    def _on_change(self, changes):
        if "progress_period" in changes:
            self.destroy_timer(self._progress_timer)
            self._progress_timer = self.create_timer(changes["progress_period"], self._progress,
                                                     clock=self._steady)
        if not {"scenario", "output_names", "method", "dt"} & set(changes):
            return
        setup = self._make_setup({**self.params.values, **changes})  # ValueError: refused
        self.setup = setup
        self.get_logger().info(f"output [{', '.join(setup.output.names)}], method {setup.method}, "
                               f"dt {setup.dt:g} s")
        if setup.scenario is not None:
            self._submit(_Job(f"scenario {setup.scenario.path}", setup))

    # -- requests ----------------------------------------------------------------------------
    def _on_output_trajectory(self, msg: JointTrajectory):
        setup = self.setup
        if self.closed:
            self.rejected += 1
            self.throttle.warn("closed", f"rejected output trajectory: {self.model.name} is a "
                               "closed flexible loop; only its scenario's task is inverted")
            return
        try:
            arr = trajectory_from_msg(msg, _OutputNames(setup.output.names))
            if arr is None:
                raise MessageError("no points")
            if arr.effort is not None:
                raise MessageError("effort given; an output trajectory carries positions "
                                   "[, velocities [, accelerations]] of the outputs only")
            now = self.get_clock().now().nanoseconds * 1e-9
            if arr.start is not None and arr.start + arr.t[-1] < now:
                raise MessageError(f"JointTrajectory: ends in the past (header.stamp "
                                   f"{arr.start:.6g} s + last time_from_start {arr.t[-1]:g} s, "
                                   f"now {now:.6g} s); a zero stamp starts on receipt")
            task = WaypointTask(setup.output.names, arr.t, arr.positions, arr.velocities,
                                arr.accelerations)
        except (MessageError, MultibodyError) as exc:
            self.rejected += 1
            # one throttle key per kind of problem: repeats are throttled, a new problem shows
            key = "request:" + re.sub(r"[-+0-9.eE]+", "#", str(exc))[:60]
            self.throttle.warn(key, f"rejected output trajectory: {exc}")
            return
        for label, rows in (("velocities", arr.velocities), ("accelerations", arr.accelerations)):
            if rows is not None and (np.any(rows[0] != 0) or np.any(rows[-1] != 0)):
                self.throttle.warn("rest", f"output trajectory: {label} not zero at the first "
                                   "or last point; the output rests there, so it jumps")
        self._submit(_Job(f"output trajectory ({len(arr.t)} points, {task.kind}, "
                          f"{arr.t[0]:g}..{arr.t[-1]:g} s)", setup, task, arr.start))

    def _submit(self, job: _Job):
        _, replaced, running = self._worker.submit(job)
        if replaced is not None:
            self.get_logger().info(f"{replaced.source}: superseded before it started")
        if running is not None:
            self.get_logger().info(f"queued {job.source}; waiting for the running inversion")

    def _progress(self):
        running = self._worker.running()
        if running is not None:
            job, since = running
            self.get_logger().info(f"inverting {job.source}: {time.monotonic() - since:.0f} s "
                                   "so far")

    # -- worker thread -----------------------------------------------------------------------
    def _failed(self, job: _Job, exc: Exception, elapsed: float):
        self.get_logger().error(f"inversion of {job.source} failed: {type(exc).__name__}: "
                                f"{' '.join(str(exc).split())}; nothing published")

    def _solve(self, job: _Job, generation: int):
        s = job.setup
        log = self.get_logger()
        log.info(f"inverting {job.source}: output [{', '.join(s.output.names)}], method "
                 f"{s.method}, dt {s.dt:g} s")
        start = time.monotonic()
        if self.chain is not None:
            result, text = self._invert_flexible(job)
        elif job.task is None:
            sc = dataclasses.replace(s.scenario, output=s.output, method=s.method, dt=s.dt)
            result, verification, guess = run_inversion_scenario(sc)
            text = summary(result, verification)
        else:
            options = {k: v for k, v in (s.scenario.options if s.scenario else {}).items()
                       if k not in ("t_start", "t_end")}
            result = invert(s.output.model, s.output, job.task, s.method, dt=s.dt, **options)
            text = summary(result, None)
        elapsed = time.monotonic() - start
        if self._worker.stopped:
            return
        superseded = not self._worker.is_current(generation)
        if not result.success or result.t.size < 2:
            log.error(f"inversion of {job.source} failed after {elapsed:.2f} s: {result.message}; "
                      "nothing published")
            return
        if superseded:
            log.info(f"{job.source}: inverted in {elapsed:.2f} s but superseded by a newer "
                     "request; not published")
            return
        if self.chain is not None:
            result = joint_reference(self.chain, result)  # the joints of the flexible result
        msg = joint_trajectory_msg(self.model, self.coords, result, job.start)
        self._pub.publish(msg)
        self.published += 1
        log.info(f"published {len(msg.points)} points over {result.t[-1] - result.t[0]:.4g} s "
                 f"on {self._pub.topic_name} ({job.source} inverted in {elapsed:.2f} s)\n"
                 + text)

    def _invert_flexible(self, job: _Job) -> tuple[InversionResult, str]:
        """The flexible inversion of a job: the scenario's (its method only) or a request's."""
        s = job.setup
        if self.closed:  # the task of the scenario, for the chosen design only
            design = s.output.design
            sc = dataclasses.replace(s.scenario, designs=(design,), dt=s.dt)
            runs = run_closed_scenario(sc)
            return runs[design.label].result, closed_summary(sc, runs)
        if job.task is None:
            sc = dataclasses.replace(s.scenario, methods=(s.method,), dt=s.dt)
            runs = run_flexible_scenario(sc)
            return runs[s.method][0], flexible_summary(sc, runs)
        sc = s.scenario
        options = {k: v for k, v in (sc.options if sc is not None else {}).items()
                   if k != "t_end" and v is not None}
        result = invert_flexible(self.chain, job.task, s.method, dt=s.dt,
                                 gamma=sc.gamma if sc is not None else None,
                                 ik_guess=sc.ik_guess if sc is not None else None, **options)
        return result, summary(result, None)

    def destroy_node(self):
        worker = getattr(self, "_worker", None)  # None: the constructor failed before it
        if worker is not None:
            # ended before the node goes (runtime.EXIT_JOIN); a running inversion finishes
            worker.stop(timeout=0.0)
            join_worker(worker.thread, exit_logger(self), "inversion thread")
        return super().destroy_node()


main = main_for(InverterNode)

if __name__ == "__main__":
    main()
