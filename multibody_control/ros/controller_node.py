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

The control laws are :mod:`multibody_control.controllers`; this node only wires
parameters and messages to them (:func:`law_setup` is the parameter -> law mapping).
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pinocchio as pin
import rclpy
from geometry_msgs.msg import TwistStamped
from rcl_interfaces.msg import ParameterType
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_policy_name_from_kind
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from multibody_dynamics.errors import InputError, ModelError, MultibodyError
from multibody_dynamics.flexible.joint_view import joint_space_model
from multibody_dynamics.rigid import RigidDynamics
from multibody_dynamics.robot import has_elastic_coordinates, load_robot
from multibody_dynamics.ros.cdr import patched_or_none
from multibody_dynamics.ros.conversions import (
    JointCoordinates,
    MessageError,
    input_effort_limits,
    joint_state_to_arrays,
    stamp_to_sec,
    trajectory_from_msg,
    vector_msg,
)
from multibody_dynamics.ros.diagnostics import NodeDiagnostics
from multibody_dynamics.ros.parameters import ParameterSet, ParameterSpec
from multibody_dynamics.ros.runtime import (
    DEFAULT_TIMING,
    TIMINGS,
    ExitSafeLogging,
    PacedLoop,
    PolledSubscription,
    StartupError,
    Throttle,
    exit_logger,
    join_worker,
    main_for,
    node_executor,
)

try:
    from rclpy.event_handler import SubscriptionEventCallbacks
except ImportError:  # Humble: rclpy.qos_event
    from rclpy.qos_event import SubscriptionEventCallbacks

from ..controllers import (
    LAWS,
    Controller,
    Reference,
    TrajectoryInterpolator,
    TwistReference,
    inputs_from_generalized,
    make_controller,
)
from ..controllers.lqr import INTERPOLATIONS
from ..controllers.rmrc import INNER_LOOPS
from ..controllers.sampled import input_inertias, unstable_gains
from ..outputs import Output

#: rad | m: states that resume after a gap longer than state_timeout this far from the last
#: state before the gap come from a plant that restarted or moved without control; the law then
#: holds the measured position instead of driving it back (a start-up hiccup of DDS, where the
#: braked plant did not move, keeps the trajectory)
RESUME_JUMP = 0.05
DUPLICATE_WINDOW = 1.0  # s (wall): the same trajectory again within this is a double delivery
#: s (wall): period of the look for a latched (transient-local) publisher of ~/joint_trajectory
LATCHED_WATCH = 0.2
#: Laws of constrained systems (closures, passive joints): their reference is the independent
#: coordinates only (a trajectory may name just those), the desired constraint force
#: ``lambda_d`` comes from the parameter of that name.
CONSTRAINED_LAWS = ("projected_inverse_dynamics", "quasi_velocity")
#: Laws the node runs (all of the library's).
NODE_LAWS = tuple(LAWS)
#: Laws checked for the stability of the sampled loop (multibody_control.controllers.sampled):
#: pd and pid per input with its joint inertia, the error-dynamics laws with unit inertia.
SAMPLED_CHECK = {"pd": "inertia", "pid": "inertia", "computed_torque": "unit",
                 "projected_inverse_dynamics": "unit", "feedback_linearization": "unit"}
#: Laws run on a flexible robot: joint feedback only (its joint view has no dynamics).
FLEXIBLE_LAWS = ("pd", "pid")
#: Laws tv_lqr can fall back on while its gains are computed; "zero": zero effort.
FALLBACK_LAWS = ("pd", "pid", "computed_torque", "zero")
#: Parameters whose change rebuilds the law (and re-solves tv_lqr).
LAW_PARAMETERS = ("law", "output", "kp", "kd", "ki", "integral_limit", "effort_limit",
                  "force_control", "force_kp", "force_ki", "lambda_d", "lqr_r", "lqr_dt",
                  "lqr_interpolation", "fallback_law", "fallback_kp", "fallback_kd", "rmrc_frame",
                  "rmrc_redundant_joint", "rmrc_inner", "rmrc_damping",
                  "rmrc_singular_threshold", "rmrc_pose_gain")

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


def _gain(values, default=float("inf")):
    if not values:
        return default
    return values[0] if len(values) == 1 else tuple(values)


class LawError(InputError):
    """The law parameters do not fit the robot (start-up: the node exits; run time: refused)."""


@dataclass(frozen=True)
class LawSetup:
    """What the law parameters select.

    Attributes
    ----------
    law : str  the ``law`` parameter
    controller : Controller or None
        The law run at every tick: the law itself (pd, pid, computed_torque, rmrc) or, for
        tv_lqr, the fallback (None: ``fallback_law`` zero).
    fallback : str  ``fallback_law`` for tv_lqr, else ``""``
    lqr : dict or None  tv_lqr: ``make_controller`` arguments besides the trajectory and dt
    lqr_dt : float  tv_lqr: ``lqr_dt`` (0: the control period)
    """

    law: str
    controller: Controller | None
    fallback: str = ""
    lqr: dict[str, Any] | None = None
    lqr_dt: float = 0.0


def law_setup(model, values: dict, flexible: bool = False) -> LawSetup:
    """The law (and tv_lqr's fallback and design settings) of the parameter ``values``.

    Checks that the law fits ``model``: every gain vector has the right length, computed
    torque and rmrc need a fully actuated model, rmrc a frame, tv_lqr an open chain (its
    weights are checked by a design along a two-sample rest trajectory), pd, pid,
    computed_torque and projected_inverse_dynamics gains a loop that is stable when sampled at
    ``rate_hz`` (:mod:`multibody_control.controllers.sampled`). ``flexible``:
    ``model`` is the joint view of a flexible robot; only :data:`FLEXIBLE_LAWS` run on it.

    Raises
    ------
    MultibodyError (also ValueError)
        The law does not fit; the message starts with ``law <name>:``.
    """
    law = values["law"]
    limit = _gain(values["effort_limit"])
    urdf = None if flexible or values["effort_limit"] else input_effort_limits(model)
    if urdf is not None and np.any(np.isfinite(urdf)):
        limit = tuple(float(x) for x in urdf)  # the URDF's, as the plant enforces them
    if flexible and law not in FLEXIBLE_LAWS:
        raise LawError(f"law {law}: {model.name} is a flexible model; only "
                       f"{' and '.join(FLEXIBLE_LAWS)} (collocated joint feedback) run on it, "
                       "the laws that need its dynamics (computed_torque, tv_lqr, rmrc) are "
                       "not available for flexible robots")
    try:
        if law == "tv_lqr":
            if model.closures:
                raise ModelError(f"{model.name} has loop closures "
                                 f"({', '.join(c.name for c in model.closures)}); the LQR design "
                                 "linearizes an open chain only")
            opts = {"kp": _gain(values["kp"]), "kd": _gain(values["kd"]),
                    "effort_limit": limit, "R": _gain(values["lqr_r"]),
                    "interpolation": values["lqr_interpolation"]}
            dt = float(values["lqr_dt"]) or 1.0 / float(values.get("rate_hz", 500.0))
            q0 = pin.neutral(model.pin_model)
            rest = {"t": np.array([0.0, dt]), "q": np.vstack([q0, q0]),
                    "v": np.zeros((2, model.nv)), "u": np.zeros((2, model.nu))}
            design_controller(model, opts, rest, dt)  # raises on bad weights
            fallback = values["fallback_law"]
            ctl = None
            if fallback != "zero":
                try:
                    ctl = make_controller(fallback, model, _gain(values["fallback_kp"]),
                                          _gain(values["fallback_kd"]), _gain(values["ki"], 0.0),
                                          _gain(values["integral_limit"]), limit)
                except (MultibodyError, ValueError) as exc:
                    raise InputError(f"fallback_law {fallback}: {exc}") from None
            return LawSetup(law, ctl, fallback, opts, float(values["lqr_dt"]))
        if law == "rmrc":
            frame = values["rmrc_frame"] or model.end_effector
            if not frame:
                raise ModelError(f"{model.name} has no end_effector; set rmrc_frame")
            ctl = make_controller(
                "rmrc", model, _gain(values["kp"]), _gain(values["kd"]), effort_limit=limit,
                frame=frame, redundant_joint=values["rmrc_redundant_joint"] or None,
                inner=values["rmrc_inner"], damping=values["rmrc_damping"],
                singular_threshold=values["rmrc_singular_threshold"],
                pose_gain=values["rmrc_pose_gain"])
            return LawSetup(law, ctl)
        if law == "feedback_linearization":
            rows = tuple(values["output"]) or Output.collocated(model).names
            ctl = make_controller(law, model, _gain(values["kp"]), _gain(values["kd"]),
                                  effort_limit=limit, output=rows)
        elif law in CONSTRAINED_LAWS:
            opts = {"independent": tuple(values["independent"]) or None,
                    "force_control": bool(values["force_control"])}
            if law == "projected_inverse_dynamics":
                opts.update(force_kp=_gain(values["force_kp"], 0.0),
                            force_ki=_gain(values["force_ki"], 0.0))
            ctl = make_controller(law, model, _gain(values["kp"]), _gain(values["kd"]),
                                  effort_limit=limit, **opts)
            _check_lambda_d(model, values)
        else:
            ctl = make_controller(law, model, _gain(values["kp"]), _gain(values["kd"]),
                                  _gain(values["ki"], 0.0), _gain(values["integral_limit"]),
                                  limit)
        if not flexible:  # the joint view of a flexible robot has no mass matrix
            _check_sampled(model, law, values)
        return LawSetup(law, ctl)
    except (MultibodyError, ValueError) as exc:
        text = " ".join(str(exc).split())
        raise LawError(text if text.startswith(f"law {law}:") else f"law {law}: {text}") \
            from None


def _check_lambda_d(model, values):
    """lambda_d needs force_control and one value per constraint row."""
    lam = list(values["lambda_d"])
    if lam and not values["force_control"]:
        raise InputError("lambda_d is set but force_control is false; set force_control: true "
                         "to command the constraint force")
    if values["force_control"]:
        from multibody_dynamics.constraints import Constraints

        m = Constraints(model).n_rows
        if lam and len(lam) != m:
            raise InputError(f"lambda_d: expected {m} values (one per constraint row of "
                             f"{model.name}), got {len(lam)}")


def _check_sampled(model, law: str, values: dict):
    """Refuse gains whose loop sampled at ``rate_hz`` is unstable
    (:mod:`multibody_control.controllers.sampled`)."""
    kind = SAMPLED_CHECK.get(law)
    if kind is None or "rate_hz" not in values:
        return
    dt = 1.0 / float(values["rate_hz"])
    kp, kd = np.asarray(values["kp"], float), np.asarray(values["kd"], float)
    if kind == "inertia":
        names, inertia = list(model.input_names), input_inertias(model)
    else:
        n = max(kp.size, kd.size)
        names, inertia = [f"gain {i}" for i in range(n)] if n > 1 else ["all"], 1.0
        if law == "computed_torque":
            names = list(model.coordinate_names) if n > 1 else ["all coordinates"]
    bad = unstable_gains(kp, kd, inertia, dt, names)
    if bad:
        unit = "" if kind == "inertia" else " (error-dynamics gains: M = 1)"
        raise InputError(f"gains unstable at rate_hz {values['rate_hz']:g} (control period "
                         f"{dt:g} s, one period of delay){unit}: {'; '.join(bad)}; lower kd "
                         "(kd*dt/M well below 1) or raise rate_hz")


def design_controller(model, lqr: dict, trajectory: dict, dt: float) -> Controller:
    """The tv_lqr controller along ``trajectory`` (``t``, ``q``, ``v``, ``u``) at step ``dt``."""
    opts = dict(lqr)
    kp, kd = opts.pop("kp"), opts.pop("kd")
    return make_controller("tv_lqr", model, kp, kd, trajectory=trajectory, dt=dt, **opts)


def nominal_motion(model, coords: JointCoordinates, interp: TrajectoryInterpolator,
                   dt: float) -> dict:
    """The nominal motion (t, q, v, u) of tv_lqr: ``interp`` sampled every ``dt`` [s].

    The nominal input is the trajectory's effort mapped to the inputs; without effort a
    fully actuated model gets ``u = B^-1 ID(q, v, a)`` and an underactuated one is refused
    (the nominal input of the passive coordinates is not determined by the joint motion).
    """
    t0, t1 = interp.start, interp.end
    steps = max(int(np.floor((t1 - t0) / dt + 1e-9)), 1)
    grid = t0 + dt * np.arange(steps + 1)
    samples = [interp.sample(tk) for tk in grid]
    q = np.array([coords.configuration(s[0]) for s in samples])
    v = np.array([s[1] for s in samples])
    if samples[0][3] is not None:
        u = np.array([inputs_from_generalized(model, s[3], "points.effort") for s in samples])
    else:
        B = np.asarray(model.B, float)
        if B.shape[0] != B.shape[1] or np.linalg.matrix_rank(B) < B.shape[0]:
            raise InputError(f"tv_lqr: {model.name} is underactuated; the trajectory must carry "
                             "the feedforward (points[].effort) as the nominal input")
        rigid = RigidDynamics(model)
        Binv = np.linalg.inv(B)
        u = np.array([Binv @ rigid.inverse_dynamics(qk, s[1], s[2])
                      for qk, s in zip(q, samples)])
    return {"t": grid, "q": q, "v": v, "u": u}


@dataclass
class _Plan:
    """tv_lqr gains along one trajectory."""

    generation: int
    controller: Controller
    start: float            # node-clock time of the trajectory's t = 0 [s]
    u_nominal: np.ndarray   # (N, nu) nominal input on the design grid (feedforward without effort)
    t0: float
    dt: float
    solve_time: float       # s (wall) of the design

    def feedforward(self, t: float) -> np.ndarray:
        k = int(np.clip((t - self.t0) / self.dt, 0, self.u_nominal.shape[0] - 1))
        return self.u_nominal[k]


@dataclass
class _DesignJob:
    generation: int
    interp: TrajectoryInterpolator
    start: float
    lqr: dict
    dt: float


def _fully_actuated(model) -> bool:
    B = np.asarray(model.B, float)
    return B.shape[0] == B.shape[1] and np.linalg.matrix_rank(B) == B.shape[0]


def _position_limits(model, coords: JointCoordinates):
    """(lower (n,), upper (n,), names) of the message coordinates from the URDF, or None.

    None for a model without a pinocchio model (a flexible joint view) or with a continuous
    joint (cos/sin in q); an unlimited joint has +-inf."""
    pm = getattr(model, "pin_model", None)
    if pm is None or pm.nq != pm.nv:
        return None
    lo = np.asarray(pm.lowerPositionLimit, float).copy()
    hi = np.asarray(pm.upperPositionLimit, float).copy()
    unset = (lo >= hi)  # pinocchio's placeholder for a joint without limits
    lo[unset], hi[unset] = -np.inf, np.inf
    return lo, hi, coords.names


class ControllerNode(ExitSafeLogging, Node):
    """Tracking controller publishing effort commands for forward_command_controller-style
    plants."""

    node_name = "controller_node"

    def __init__(self, **kwargs):
        super().__init__(self.node_name, **kwargs)
        # with timing paced the ticks run in a PacedLoop thread: this lock serializes them with
        # the executor's callbacks (state, reference, parameters, action), which share the
        # node's state; with the timer everything runs on the executor and it is uncontended
        self._lock = threading.RLock()
        self._loop: PacedLoop | None = None
        self.params = ParameterSet(self, PARAMETERS, on_change=self._locked(self._on_change))
        p = self.params
        self.throttle = Throttle(self.get_logger())
        robot = load_robot(p["robot"])
        self.flexible = has_elastic_coordinates(robot)
        if self.flexible:  # the joints only; the elastic coordinates of /joint_states dropped
            self.model = model = joint_space_model(robot)
            self.coords = JointCoordinates(
                model, ignored=robot.coordinate_names[robot.nv - robot.nq_e:])
        else:
            self.model = model = robot
            self.coords = JointCoordinates(model)
        self._actuated = _fully_actuated(model)
        self._limits = _position_limits(model, self.coords)
        try:
            self.setup = law_setup(model, p.values, self.flexible)
        except LawError as exc:
            raise StartupError(f"{exc} (robot {model.name})") from None
        self.state = None
        self._state_time: float | None = None
        self._hold: Reference | None = None
        self._traj: tuple[TrajectoryInterpolator, float, bool] | None = None
        self._last_ref: Reference | None = None
        self._t_prev: float | None = None
        self._goal_futures: list = []
        self.rejected = {"state": 0, "trajectory": 0, "twist": 0}
        self._twist: np.ndarray | None = None
        self._twist_time = 0.0

        # tv_lqr: designs run in a worker thread; the tick picks up a finished one
        self._cond = threading.Condition()
        self._generation = 0
        self._job: _DesignJob | None = None
        self._ready: _Plan | None = None
        self._plan: _Plan | None = None
        self._stop = False
        self._worker = threading.Thread(target=self._work, name="lqr_design", daemon=True)
        self._worker.start()

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
        if self._paced and node_executor(self) != "events":
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
            f"{self._describe(self.setup)} control of {model.name} at {p['rate_hz']:g} Hz "
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

    # -- parameters --------------------------------------------------------------------------
    @staticmethod
    def _describe(setup: LawSetup) -> str:
        if setup.law == "tv_lqr":
            return f"tv_lqr (fallback {setup.fallback} until the gains are ready)"
        return setup.law

    def _design_dt(self, values=None) -> float:
        values = values or self.params.values
        return float(values["lqr_dt"]) or 1.0 / float(values["rate_hz"])

    def _on_change(self, changes):
        values = {**self.params.values, **changes}
        redesign = "rate_hz" in changes and values["law"] == "tv_lqr" and not values["lqr_dt"]
        if "rate_hz" in changes and not any(k in changes for k in LAW_PARAMETERS):
            try:
                _check_sampled(self.model, values["law"], values)
            except InputError as exc:
                raise LawError(f"rate_hz: {exc}") from None
        if any(k in changes for k in LAW_PARAMETERS) or redesign:
            old = self.setup
            self.setup = law_setup(self.model, values, self.flexible)  # ValueError: refused
            self.get_logger().info(f"control law {self._describe(self.setup)} rebuilt with the "
                                   "new parameters")
            if self.setup.law != "rmrc":
                self._twist = None
            if self.setup.law == "tv_lqr":
                self._request_design(keep_plan=old.law == "tv_lqr", dt=self._design_dt(values))
            else:
                self._request_design(keep_plan=False)
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
    def _request_design(self, keep_plan: bool, dt: float | None = None):
        """A new design for the current trajectory (executor thread); drops a running one's result.

        ``keep_plan``: the current gains stay until the new ones are ready (same trajectory,
        new weights); otherwise the fallback runs until then.
        """
        with self._cond:
            self._generation += 1
            if not keep_plan:
                self._plan = None
            self._job = None
            if self.setup.law != "tv_lqr" or self._traj is None:
                return
            interp, start, _ = self._traj
            self._job = _DesignJob(self._generation, interp, start, self.setup.lqr,
                                   dt or self._design_dt())
            self._cond.notify()

    def _work(self):
        log = self.get_logger()
        while True:
            with self._cond:
                while self._job is None and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                job, self._job = self._job, None
            # the recursion is Python-level numpy: ask the interpreter to hand the GIL back to
            # the executor thread within 0.2 ms instead of the default 5 ms
            interval = sys.getswitchinterval()
            sys.setswitchinterval(min(interval, 2e-4))
            wall = time.perf_counter()
            try:
                nominal = nominal_motion(self.model, self.coords, job.interp, job.dt)
                ctl = design_controller(self.model, job.lqr, nominal, job.dt)
            except Exception as exc:  # the worker must survive anything a design raises
                log.error(f"tv_lqr: design along the trajectory failed after "
                          f"{time.perf_counter() - wall:.3f} s: {type(exc).__name__}: "
                          f"{' '.join(str(exc).split())}; staying on the fallback law")
                continue
            finally:
                sys.setswitchinterval(interval)
            elapsed = time.perf_counter() - wall
            plan = _Plan(job.generation, ctl, job.start, nominal["u"], float(nominal["t"][0]),
                         job.dt, elapsed)
            with self._cond:
                if job.generation != self._generation:
                    log.info(f"tv_lqr: gains solved in {elapsed:.3f} s but superseded by a newer "
                             "trajectory or parameter change; dropped")
                    continue
                self._ready = plan

    def _take_ready(self, now: float):
        with self._cond:
            plan, self._ready = self._ready, None
            if plan is None or plan.generation != self._generation:
                return
            self._plan = plan
        if self.setup.controller is not None:
            self.setup.controller.reset()
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
        previous, self.state = self.state, state
        if self._on_each_state:
            self._stamp_now = stamp_to_sec(msg.header.stamp)
        now = self._now()
        # a clock not yet received (use_sim_time) reads 0: no gap measured from it
        gap = 0.0 if not self._state_time else now - self._state_time
        self._state_time = now
        timeout = self.params["state_timeout"]
        if self._hold is None:
            self._hold = Reference.hold(self.model, self.state.q)
        elif timeout > 0 and gap > timeout and previous is not None:
            jump = float(np.max(np.abs(self.coords.positions(state.q)
                                       - self.coords.positions(previous.q))))
            if jump > RESUME_JUMP:
                self._hold_measured(f"/joint_states resumed after {gap:.3g} s without, "
                                    f"{jump:.3g} rad | m away from the last state")
        if self._on_each_state:
            self._tick()

    def _hold_measured(self, reason: str):
        """The states resumed after a gap far from the last state (RESUME_JUMP) or the clock
        went back: the plant restarted elsewhere or moved, so a held target or a running
        trajectory would make it jump.  Hold the measured position instead (the trajectory
        and its goal are aborted, integrators reset), as joint_trajectory_controller holds the
        measured position on activation."""
        self._reset_laws()
        self._hold = Reference.hold(self.model, self.state.q)
        dropped = ""
        if self._traj is not None:
            self._traj = None
            self._request_design(keep_plan=False)
            self._finish_goals(False, f"{reason}: trajectory aborted")
            dropped = "; the trajectory was aborted"
        self.get_logger().warning(f"{reason}: holding the measured position{dropped}")

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
        self._twist, self._twist_time = twist, self._now()

    def _twist_reference(self, now: float) -> TwistReference:
        timeout = self.params["twist_timeout"]
        if self._twist is None:
            return TwistReference(np.zeros(6))
        if timeout > 0 and now - self._twist_time > timeout:
            self.throttle.info("twist_old", f"twist command older than {timeout:g} s; "
                               "commanding zero twist")
            return TwistReference(np.zeros(6))
        return TwistReference(self._twist)

    def _current_reference(self, now: float) -> Reference | None:
        if self._traj is not None:
            return self._sample(now)
        return self._hold

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
        now = self._now()
        start = arr.start if arr.start is not None else now
        t, pos, vel, acc, eff = arr.t, arr.positions, arr.velocities, arr.accelerations, arr.effort
        if arr.start is not None and arr.start + t[-1] < now:
            # as joint_trajectory_controller: a trajectory that ends before it is received
            raise MessageError(f"JointTrajectory: ends in the past (header.stamp + last "
                               f"time_from_start = {arr.start + t[-1]:.6f} s < now {now:.6f} s); "
                               "stamp it later or leave the stamp zero (start on receipt)")
        self._check_limits(pos)
        if eff is not None:
            for k, e in enumerate(eff):
                try:
                    inputs_from_generalized(self.model, e, f"points[{k}].effort")
                except MultibodyError as exc:
                    raise MessageError(f"JointTrajectory: {exc}") from None
        elif self.setup.law == "tv_lqr" and not self._actuated:
            raise MessageError(f"JointTrajectory: law tv_lqr on the underactuated "
                               f"{self.model.name} needs the feedforward (points[].effort) as "
                               "the nominal input")
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

    def _check_limits(self, pos: np.ndarray):
        """Positions (N, n) within the URDF limits of their joints (revolute/prismatic joints;
        a continuous joint has none).  Finite but absurd values (1e300) fail here too."""
        if self._limits is None:
            return
        lo, hi, names = self._limits
        bad = np.argwhere((pos < lo) | (pos > hi))
        if bad.size:
            k, j = bad[0]
            raise MessageError(f"JointTrajectory: point {k} puts {names[j]} at {pos[k, j]:.6g}, "
                               f"outside its URDF limits [{lo[j]:g}, {hi[j]:g}]")

    def _complete(self, msg: JointTrajectory) -> JointTrajectory:
        """``msg`` with the joints it leaves out added (constrained laws only use the
        independent coordinates theta; the others get the current reference's positions and
        zero velocity, acceleration and effort, which the law ignores)."""
        names = list(msg.joint_names)
        missing = [n for n in self.coords.names if n not in names]
        if not missing:
            return msg
        ind = getattr(self.setup.controller, "independent", None)
        if ind is None:
            raise MessageError(f"JointTrajectory: leaves out {', '.join(missing)}; law "
                               f"{self.setup.law} picks its independent coordinates at the first "
                               "step, so name every joint (or set the parameter independent)")
        needed = [self.coords.names[i] for i in ind]
        absent = [n for n in needed if n not in names]
        if absent:
            raise MessageError(f"JointTrajectory: law {self.setup.law} tracks the independent "
                               f"joints {', '.join(needed)}; {', '.join(absent)} not named "
                               f"(got {', '.join(names) or 'none'})")
        current = self._current_reference(self._now())
        q = current.q if current is not None else (
            self.state.q if self.state is not None else self.model.q_rest)
        pos = self.coords.positions(q)
        fill = [float(pos[self.coords.names.index(n)]) for n in missing]
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
            if self.state is not None:
                self._hold = Reference.hold(self.model, self.state.q)
            self._traj = None
            self._request_design(keep_plan=False)
            self.get_logger().info("empty trajectory: stopping, holding the measured position")
            return
        interp, start = accepted
        self._traj = (interp, start, False)
        self.get_logger().info(f"trajectory accepted: {interp.t.size} points, {interp.kind} "
                               f"interpolation, {interp.end:.3g} s from t = {start:.6g} s")
        if self.setup.law == "tv_lqr":
            self._request_design(keep_plan=False)
            fallback = "zero effort" if self.setup.controller is None else \
                f"the {self.setup.fallback} fallback"
            self.get_logger().info(f"tv_lqr: solving the Riccati recursion along it off the "
                                   f"executor; {fallback} until the gains are ready")

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
    def _reset_laws(self):
        if self.setup.controller is not None:
            self.setup.controller.reset()
        if self._plan is not None:
            self._plan.controller.reset()

    def _command(self, now: float) -> np.ndarray:
        """The active law's inputs (nu,) at node-clock time ``now``."""
        setup, q, v = self.setup, self.state.q, self.state.v
        if setup.law == "rmrc":
            return setup.controller.step(now, q, v, self._twist_reference(now))
        ref = self._last_ref = self._current_reference(now)
        plan = self._plan
        if setup.law == "tv_lqr" and plan is not None:
            t = now - plan.start  # the gain table runs on trajectory time
            if ref.u_ff is None:
                ref = Reference(ref.q, ref.v, ref.a, plan.feedforward(t))
            return plan.controller.step(t, q, v, ref)
        if setup.law in CONSTRAINED_LAWS and self.params["force_control"]:
            lam = self.params["lambda_d"]
            m = setup.controller.constraints.n_rows
            ref = Reference(ref.q, ref.v, ref.a, ref.u_ff,
                            np.asarray(lam, float) if lam else np.zeros(m))
        if setup.controller is None:  # tv_lqr with fallback_law zero
            self.throttle.warn("zero", "tv_lqr: no gains for the current reference yet; "
                               "publishing zero effort (fallback_law zero)")
            return np.zeros(self.model.nu)
        return setup.controller.step(now, q, v, ref)

    def _tick(self):
        if self._states is not None:
            self._states.drain()
        now = self._now()
        if self.state is None:
            self.throttle.info("wait", "waiting for /joint_states")
            return
        if self._t_prev is not None and now < self._t_prev:  # clock went back (sim restarted)
            self._state_time = now
            self._hold_measured(f"the clock went back from {self._t_prev:.6g} s to {now:.6g} s")
        self._t_prev = now
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
        timeout = self.params["state_timeout"]
        if timeout > 0 and now - self._state_time > timeout:
            self.throttle.warn("stale", f"/joint_states older than {timeout:g} s; not commanding")
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
        with self._lock:
            state, ref, published = self.state, self._last_ref, self._published
            state_time, traj, loop = self._state_time, self._traj, self._loop
            law = self._describe(self.setup) if self._plan is None else "tv_lqr"
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
        if ref is not None and self.setup.law != "rmrc":
            error = pin.difference(self.model.pin_model, state.q, ref.q)
            ind = getattr(self.setup.controller, "independent", None)
            if self.setup.law in CONSTRAINED_LAWS and ind is not None:
                error = error[ind]  # the law tracks theta only
            values["tracking error max [rad | m]"] = float(np.max(np.abs(error), initial=0.0))
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
        cond = getattr(self, "_cond", None)  # None: the constructor failed before the worker
        if cond is not None:
            with cond:
                self._stop = True
                cond.notify_all()
            join_worker(getattr(self, "_worker", None), log, "tv_lqr design thread")
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
            if self.state is not None:
                self._hold = Reference.hold(self.model, self.state.q)
            self._traj = None
            self._request_design(keep_plan=False)
            self._finish_goals(False, "canceled")
            return CancelResponse.ACCEPT

        return ActionServer(self, FollowJointTrajectory, "~/follow_joint_trajectory",
                            execute_callback=execute, goal_callback=on_goal,
                            cancel_callback=on_cancel)


main = main_for(ControllerNode)

if __name__ == "__main__":
    main()
