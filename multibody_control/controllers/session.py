"""A tracking session: everything a tracking controller decides that is not message plumbing.

:class:`TrackingSession` holds one robot's control law and its reference, and answers the
inputs ``u`` (nu,) for the measured state at any time: the law chosen by the parameter values
(:func:`law_setup`: which laws fit the robot's capabilities, the gains checked), the reference
(a trajectory as a :class:`~multibody_control.controllers.reference.TrajectoryInterpolator`,
or the held target: the position measured first, reached last, or measured after the plant
restarted), the state watch (stale states are not commanded; states resuming far from where
they stopped, or a clock going back, hold the measured position), and for ``tv_lqr`` the
redesign along every trajectory (:func:`nominal_motion` -> :func:`design_controller`) with the
fallback law running until its gains are ready.

``controller_node`` (:mod:`multibody_control.ros.controller_node`) drives a session from
messages and runs the tv_lqr designs in a worker thread; a script or a test drives it with
arrays and designs inline::

    session = TrackingSession(load_robot("passive_arm"), {**defaults, "law": "tv_lqr"})
    session.observe(t, q, v)
    session.start(TrajectoryInterpolator(t_ref, q_ref, v_ref, a_ref, effort), start=t)
    u = session.command(t)                        # the fallback law until the gains exist
    session.offer(session.design(session.job))    # what the worker thread does
    session.take_ready(t)                         # switch to tv_lqr at the next step

The parameter values are those of controller_node (``law``, ``kp``, ``kd``, ``ki``,
``integral_limit``, ``effort_limit``, ``rate_hz``, ``state_timeout``, ``lqr_*``,
``fallback_*``, ``independent``, ``output``, ``force_*``, ``lambda_d``, ``rmrc_*``,
``twist_timeout``; see its documentation for their meaning and units).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pinocchio as pin

from multibody_dynamics.errors import InputError, ModelError, MultibodyError
from multibody_dynamics.flexible.joint_view import joint_space_model
from multibody_dynamics.model.joint_angles import JointAngles
from multibody_dynamics.rigid import RigidDynamics
from multibody_dynamics.robot import has_elastic_coordinates, input_effort_limits

from ..outputs import Output
from . import LAWS, Controller, Reference, TrajectoryInterpolator, TwistReference, make_controller
from .base import inputs_from_generalized
from .sampled import input_inertias, unstable_gains

__all__ = ["CONSTRAINED_LAWS", "DEFAULTS", "FALLBACK_LAWS", "FLEXIBLE_LAWS", "LAW_PARAMETERS",
           "NODE_LAWS", "RESUME_JUMP", "DesignJob", "Hold", "LawError", "LawSetup", "Plan",
           "State", "TrackingSession", "design_controller", "law_setup", "nominal_motion"]

#: rad | m: states that resume after a gap longer than state_timeout this far from the last
#: state before the gap come from a plant that restarted or moved without control; the law then
#: holds the measured position instead of driving it back (a start-up hiccup of DDS, where the
#: braked plant did not move, keeps the trajectory)
RESUME_JUMP = 0.05
#: Laws of constrained systems (closures, passive joints): their reference is the independent
#: coordinates only (a trajectory may name just those), the desired constraint force
#: ``lambda_d`` comes from the parameter of that name.
CONSTRAINED_LAWS = ("projected_inverse_dynamics", "quasi_velocity")
#: Laws a session runs (all of the library's).
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


#: The parameter values a session starts from: controller_node's defaults (its documentation
#: gives their meaning and units; test_tracking_session checks that the two agree).
#: :class:`TrackingSession` takes only the values that differ.
DEFAULTS: dict[str, Any] = {
    "rate_hz": 500.0, "law": "computed_torque", "kp": [100.0], "kd": [20.0], "ki": [0.0],
    "integral_limit": [], "effort_limit": [], "state_timeout": 0.5, "lqr_r": [1.0], "lqr_dt": 0.0,
    "lqr_interpolation": "hold", "fallback_law": "pd", "fallback_kp": [100.0],
    "fallback_kd": [20.0], "independent": [], "output": [], "force_control": False,
    "lambda_d": [], "force_kp": [0.0], "force_ki": [0.0], "rmrc_frame": "",
    "rmrc_redundant_joint": "", "rmrc_inner": "computed_torque", "rmrc_damping": 0.05,
    "rmrc_singular_threshold": 0.05, "rmrc_pose_gain": 0.0, "twist_timeout": 0.5
}


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


def law_setup(model, values: Mapping, flexible: bool = False) -> LawSetup:
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
            return _lqr_setup(model, values, limit)
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
            check_sampled(model, law, values)
        return LawSetup(law, ctl)
    except (MultibodyError, ValueError) as exc:
        text = " ".join(str(exc).split())
        raise LawError(text if text.startswith(f"law {law}:") else f"law {law}: {text}") \
            from None


def _lqr_setup(model, values: Mapping, limit) -> LawSetup:
    """tv_lqr: the design settings (checked by a design along a rest trajectory) and the
    fallback law."""
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
    return LawSetup("tv_lqr", ctl, fallback, opts, float(values["lqr_dt"]))


def _check_lambda_d(model, values: Mapping):
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


def check_sampled(model, law: str, values: Mapping):
    """Refuse gains whose loop sampled at ``rate_hz`` is unstable
    (:mod:`multibody_control.controllers.sampled`)."""
    kind = SAMPLED_CHECK.get(law)
    if kind is None or "rate_hz" not in values:
        return
    dt = 1.0 / float(values["rate_hz"])
    kp, kd = np.asarray(values["kp"], float), np.asarray(values["kd"], float)
    inertia: Any
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


def nominal_motion(model, coords, interp: TrajectoryInterpolator, dt: float) -> dict:
    """The nominal motion (t, q, v, u) of tv_lqr: ``interp`` sampled every ``dt`` [s].

    ``coords`` maps the interpolated joint positions to a configuration
    (``coords.configuration(positions) -> q``). The nominal input is the trajectory's effort
    mapped to the inputs; without effort a fully actuated model gets ``u = B^-1 ID(q, v, a)``
    and an underactuated one is refused (the nominal input of the passive coordinates is not
    determined by the joint motion).
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
        if not fully_actuated(model):
            raise InputError(f"tv_lqr: {model.name} is underactuated; the trajectory must carry "
                             "the feedforward (points[].effort) as the nominal input")
        rigid = RigidDynamics(model)
        Binv = np.linalg.inv(np.asarray(model.B, float))
        u = np.array([Binv @ rigid.inverse_dynamics(qk, s[1], s[2])
                      for qk, s in zip(q, samples)])
    return {"t": grid, "q": q, "v": v, "u": u}


def fully_actuated(model) -> bool:
    """Whether ``model.B`` is square and invertible."""
    B = np.asarray(model.B, float)
    return B.shape[0] == B.shape[1] and np.linalg.matrix_rank(B) == B.shape[0]


def position_limits(model):
    """(lower (n,), upper (n,), names) of the coordinates from the URDF, or None.

    None for a model without a pinocchio model (a flexible joint view) or with a continuous
    joint (cos/sin in q); an unlimited joint has +-inf."""
    pm = getattr(model, "pin_model", None)
    if pm is None or pm.nq != pm.nv:
        return None
    lo = np.asarray(pm.lowerPositionLimit, float).copy()
    hi = np.asarray(pm.upperPositionLimit, float).copy()
    unset = (lo >= hi)  # pinocchio's placeholder for a joint without limits
    lo[unset], hi[unset] = -np.inf, np.inf
    return lo, hi, tuple(model.coordinate_names)


@dataclass
class Plan:
    """tv_lqr gains along one trajectory."""

    generation: int
    controller: Controller
    start: float            # session time of the trajectory's t = 0 [s]
    u_nominal: np.ndarray   # (N, nu) nominal input on the design grid (feedforward without effort)
    t0: float
    dt: float
    solve_time: float       # s (wall) of the design

    def feedforward(self, t: float) -> np.ndarray:
        k = int(np.clip((t - self.t0) / self.dt, 0, self.u_nominal.shape[0] - 1))
        return self.u_nominal[k]


@dataclass
class DesignJob:
    """A tv_lqr design to run (:meth:`TrackingSession.design`), of one request generation."""

    generation: int
    interp: TrajectoryInterpolator
    start: float
    lqr: dict
    dt: float


class State(NamedTuple):
    """The measured state: q (nq,), v (nv,)."""

    q: np.ndarray
    v: np.ndarray


class Hold(NamedTuple):
    """The session held the measured position: why, and whether a trajectory was aborted."""

    reason: str
    aborted: bool


class _Angles:
    """Joint positions <-> configuration of a model (identity without a pinocchio model)."""

    def __init__(self, model):
        self._angles = None if getattr(model, "pin_model", None) is None else JointAngles(model)

    def positions(self, q) -> np.ndarray:
        return np.array(q, float) if self._angles is None else self._angles.angles(q)

    def configuration(self, positions) -> np.ndarray:
        return np.array(positions, float) if self._angles is None else \
            self._angles.configuration(positions)


class TrackingSession:
    """One robot's tracking law and reference, driven with arrays (see the module docstring).

    Parameters
    ----------
    robot : RobotModel
        What :func:`~multibody_dynamics.robot.load_robot` returned. A robot with elastic
        coordinates is controlled through its joints
        (:func:`~multibody_dynamics.flexible.joint_view.joint_space_model`; only
        :data:`FLEXIBLE_LAWS` run on it).
    values : mapping
        The parameter values (controller_node's names and units) that differ from
        :data:`DEFAULTS`.
    coords : object, optional
        ``positions(q)`` and ``configuration(positions)``: the joint positions of a reference
        <-> configurations (default: the model's joint angles).
    schedule : callable(DesignJob or None), optional
        Told of every tv_lqr design requested (None: the running one is superseded) so that a
        caller can run :meth:`design` elsewhere; the latest request is also :attr:`job`.

    Raises
    ------
    LawError
        The law does not fit the robot (:func:`law_setup`).

    Attributes
    ----------
    model : the controlled model (the joint view of a flexible robot)
    flexible : bool  whether the robot has elastic coordinates
    ignored : tuple of str  the elastic coordinate names a measured state may carry
    setup : LawSetup
    state : State or None  the last measured state
    traj : (TrajectoryInterpolator, start [s], finished) or None
    hold : Reference or None  the held target without a trajectory
    plan : Plan or None  the tv_lqr gains in use
    ready : Plan or None  gains designed and offered, switched to at the next :meth:`take_ready`
    job : DesignJob or None  the latest tv_lqr design requested
    """

    def __init__(self, robot, values: Mapping, coords=None,
                 schedule: Callable[[DesignJob | None], None] | None = None):
        self.flexible = has_elastic_coordinates(robot)
        if self.flexible:  # the joints only; the elastic coordinates are measured, not driven
            self.model = joint_space_model(robot)
            self.ignored = tuple(robot.coordinate_names[robot.nv - robot.nq_e:])
        else:
            self.model = robot
            self.ignored = ()
        self.coords = coords if coords is not None else _Angles(self.model)
        self.values = {**DEFAULTS, **values}
        self.actuated = fully_actuated(self.model)
        self.limits = position_limits(self.model)
        self.setup = law_setup(self.model, self.values, self.flexible)
        self._schedule = schedule
        self._lock = threading.Lock()  # the design hand-over (offer from another thread)
        self.generation = 0
        self.job: DesignJob | None = None
        self.plan: Plan | None = None
        self.ready: Plan | None = None
        self.state: State | None = None
        self.state_time: float | None = None
        self.hold: Reference | None = None
        self.traj: tuple[TrajectoryInterpolator, float, bool] | None = None
        self.last_reference: Reference | None = None
        self._t_prev: float | None = None
        self._finished = False
        self.twist: np.ndarray | None = None
        self.twist_time = 0.0
        self.twist_expired = False

    # -- the law --------------------------------------------------------------------------------
    def describe(self) -> str:
        """The law, for logs: its name (tv_lqr also names the fallback run until its gains are
        ready)."""
        if self.setup.law == "tv_lqr":
            return f"tv_lqr (fallback {self.setup.fallback} until the gains are ready)"
        return self.setup.law

    def design_dt(self, values: Mapping | None = None) -> float:
        """tv_lqr design step [s]: ``lqr_dt``, or the control period when it is 0."""
        values = values or self.values
        return float(values["lqr_dt"]) or 1.0 / float(values["rate_hz"])

    def reconfigure(self, changes: Mapping) -> bool:
        """Apply parameter changes; True when the law was rebuilt.

        A change of a :data:`LAW_PARAMETERS` entry rebuilds the law (a tv_lqr gain change keeps
        the current gains until the new ones are designed); ``rate_hz`` alone re-checks the
        sampled loop (and re-designs tv_lqr when ``lqr_dt`` is 0).

        Raises
        ------
        LawError
            The new values do not fit; nothing changed.
        """
        values = {**self.values, **changes}
        redesign = "rate_hz" in changes and values["law"] == "tv_lqr" and not values["lqr_dt"]
        rebuild = any(k in changes for k in LAW_PARAMETERS)
        if "rate_hz" in changes and not rebuild:
            try:
                check_sampled(self.model, values["law"], values)
            except InputError as exc:
                raise LawError(f"rate_hz: {exc}") from None
        setup = law_setup(self.model, values, self.flexible) if rebuild or redesign else None
        old, self.values = self.setup, values
        if setup is None:
            return False
        self.setup = setup
        if setup.law != "rmrc":
            self.twist = None
        if setup.law == "tv_lqr":
            self.request_design(keep_plan=old.law == "tv_lqr", dt=self.design_dt(values))
        else:
            self.request_design(keep_plan=False)
        return True

    def reset_laws(self):
        """Reset the integrators of the law in use and of the tv_lqr gains."""
        if self.setup.controller is not None:
            self.setup.controller.reset()
        if self.plan is not None:
            self.plan.controller.reset()

    # -- tv_lqr designs -------------------------------------------------------------------------
    def request_design(self, keep_plan: bool, dt: float | None = None) -> DesignJob | None:
        """A new tv_lqr design for the current trajectory; a running one's result is dropped.

        ``keep_plan``: the current gains stay until the new ones are ready (same trajectory,
        new weights); otherwise the fallback runs until then. Returns the job (None: no
        design, as for another law or without a trajectory), also told to ``schedule``.
        """
        with self._lock:
            self.generation += 1
            if not keep_plan:
                self.plan = None
            job = None
            if self.setup.law == "tv_lqr" and self.traj is not None:
                interp, start, _ = self.traj
                job = DesignJob(self.generation, interp, start, dict(self.setup.lqr or {}),
                                dt or self.design_dt())
            self.job = job
        if self._schedule is not None:
            self._schedule(job)
        return job

    def design(self, job: DesignJob) -> Plan:
        """The tv_lqr gains of ``job`` (the nominal motion, then the backward Riccati
        recursion); touches nothing of the session, so it may run in another thread."""
        wall = time.perf_counter()
        nominal = nominal_motion(self.model, self.coords, job.interp, job.dt)
        ctl = design_controller(self.model, job.lqr, nominal, job.dt)
        return Plan(job.generation, ctl, job.start, nominal["u"], float(nominal["t"][0]),
                    job.dt, time.perf_counter() - wall)

    def offer(self, plan: Plan) -> bool:
        """Hand designed gains over (any thread); False when a newer request superseded them."""
        with self._lock:
            if plan.generation != self.generation:
                return False
            self.ready = plan
            return True

    def take_ready(self, now: float) -> Plan | None:
        """Switch to gains offered since the last call (the plan switched to, else None)."""
        with self._lock:
            plan, self.ready = self.ready, None
            if plan is None or plan.generation != self.generation:
                return None
            self.plan = plan
        if self.setup.controller is not None:
            self.setup.controller.reset()
        return plan

    # -- the measured state ---------------------------------------------------------------------
    def observe(self, now: float, q, v) -> Hold | None:
        """A measured state at session time ``now`` [s]; a :class:`Hold` when it resumed after
        a gap longer than ``state_timeout`` more than :data:`RESUME_JUMP` away from the last
        state (the plant restarted or moved without control: the measured position is held)."""
        previous, self.state = self.state, State(np.asarray(q, float), np.asarray(v, float))
        # a clock not yet running (simulated time before the first /clock) reads 0: no gap
        gap = 0.0 if not self.state_time else now - self.state_time
        self.state_time = now
        timeout = self.values["state_timeout"]
        if self.hold is None:
            self.hold = Reference.hold(self.model, self.state.q)
        elif timeout > 0 and gap > timeout and previous is not None:
            jump = float(np.max(np.abs(self.coords.positions(self.state.q)
                                       - self.coords.positions(previous.q))))
            if jump > RESUME_JUMP:
                return self.hold_measured(f"/joint_states resumed after {gap:.3g} s without, "
                                          f"{jump:.3g} rad | m away from the last state")
        return None

    def check_clock(self, now: float) -> Hold | None:
        """A :class:`Hold` when the clock went back (a simulation restarted) since the last
        call."""
        held = None
        if self._t_prev is not None and now < self._t_prev:
            self.state_time = now
            held = self.hold_measured(f"the clock went back from {self._t_prev:.6g} s to "
                                      f"{now:.6g} s")
        self._t_prev = now
        return held

    def hold_measured(self, reason: str) -> Hold:
        """Hold the measured position (trajectory aborted, integrators reset), as
        joint_trajectory_controller holds the measured position on activation."""
        self.reset_laws()
        self.hold = Reference.hold(self.model, self._measured().q)
        aborted = self.traj is not None
        if aborted:
            self.traj = None
            self.request_design(keep_plan=False)
        return Hold(reason, aborted)

    def stale(self, now: float) -> bool:
        """Whether the last state is older than ``state_timeout`` (then nothing is commanded)."""
        timeout = self.values["state_timeout"]
        return timeout > 0 and self.state_time is not None and now - self.state_time > timeout

    # -- the reference --------------------------------------------------------------------------
    def interpolator(self, t, positions, velocities=None, accelerations=None, effort=None,
                     start: float | None = None, now: float = 0.0):
        """A validated trajectory (times ``t`` (N,) [s] from ``start``, rows per coordinate):
        ``(TrajectoryInterpolator, start)``. ``start`` None: ``now``. A first point after
        t = 0 is reached from the current reference.

        Raises
        ------
        InputError
            The trajectory ends before ``now``, leaves the URDF position limits, carries an
            effort that no input produces, or (tv_lqr on an underactuated robot) lacks the
            feedforward.
        """
        t, pos = np.asarray(t, float), np.asarray(positions, float)
        vel, acc, eff = velocities, accelerations, effort
        if start is not None and start + t[-1] < now:
            # as joint_trajectory_controller: a trajectory that ends before it is received
            raise InputError(f"ends in the past (header.stamp + last time_from_start = "
                             f"{start + t[-1]:.6f} s < now {now:.6f} s); stamp it later or leave "
                             "the stamp zero (start on receipt)")
        start = now if start is None else start
        self._check_limits(pos)
        if eff is not None:
            for k, e in enumerate(eff):
                inputs_from_generalized(self.model, e, f"points[{k}].effort")
        elif self.setup.law == "tv_lqr" and not self.actuated:
            raise InputError(f"law tv_lqr on the underactuated {self.model.name} needs the "
                             "feedforward (points[].effort) as the nominal input")
        t_now = now - start
        current = self.current_reference(now)
        if t[0] > 0 and t_now < t[0] and current is not None:
            t = np.concatenate([[max(t_now, 0.0)], t])
            pos = np.vstack([self.coords.positions(current.q), pos])
            vel = None if vel is None else np.vstack([current.v, vel])
            acc = None if acc is None else np.vstack([current.a, acc])
            eff = None if eff is None else np.vstack([eff[:1], eff])
        return TrajectoryInterpolator(t, pos, vel, acc, eff), start

    def _check_limits(self, pos: np.ndarray):
        """Positions (N, n) within the URDF limits of their joints (revolute/prismatic joints;
        a continuous joint has none).  Finite but absurd values (1e300) fail here too."""
        if self.limits is None:
            return
        lo, hi, names = self.limits
        bad = np.argwhere((pos < lo) | (pos > hi))
        if bad.size:
            k, j = bad[0]
            raise InputError(f"point {k} puts {names[j]} at {pos[k, j]:.6g}, outside its URDF "
                             f"limits [{lo[j]:g}, {hi[j]:g}]")

    def fill_dependent(self, names, now: float) -> tuple[list[str], list[float]]:
        """The coordinates a trajectory over ``names`` leaves out and their positions: those of
        the current reference at ``now`` [s] (else the measured state, else the rest pose).

        A constrained law (:data:`CONSTRAINED_LAWS`) tracks its independent coordinates only,
        so a trajectory may name just those; the others are filled in (with zero velocity,
        acceleration and effort, which the law ignores).

        Raises
        ------
        InputError
            Names are left out but the law picks its independent coordinates only at its first
            step, or an independent coordinate is not named.
        """
        coordinates = list(self.model.coordinate_names)
        missing = [n for n in coordinates if n not in names]
        if not missing:
            return [], []
        ind = getattr(self.setup.controller, "independent", None)
        if ind is None:
            raise InputError(f"leaves out {', '.join(missing)}; law {self.setup.law} picks its "
                             "independent coordinates at the first step, so name every joint "
                             "(or set the parameter independent)")
        needed = [coordinates[i] for i in ind]
        absent = [n for n in needed if n not in names]
        if absent:
            raise InputError(f"law {self.setup.law} tracks the independent joints "
                             f"{', '.join(needed)}; {', '.join(absent)} not named (got "
                             f"{', '.join(names) or 'none'})")
        current = self.current_reference(now)
        q = current.q if current is not None else (
            self.state.q if self.state is not None else self.model.q_rest)
        pos = self.coords.positions(q)
        return missing, [float(pos[coordinates.index(n)]) for n in missing]

    def start(self, interp: TrajectoryInterpolator, start: float) -> DesignJob | None:
        """Follow ``interp`` from session time ``start`` [s] (tv_lqr: its design is
        requested, the fallback runs until then); the design job or None."""
        self.traj = (interp, start, False)
        return self.request_design(keep_plan=False) if self.setup.law == "tv_lqr" else None

    def stop(self):
        """Drop the trajectory and hold the measured position (an empty trajectory, a
        cancelled goal)."""
        if self.state is not None:
            self.hold = Reference.hold(self.model, self.state.q)
        self.traj = None
        self.request_design(keep_plan=False)

    def current_reference(self, now: float) -> Reference | None:
        """The trajectory sampled at ``now`` [s] (its last point held after its end), else the
        held target; None before any state."""
        if self.traj is None:
            return self.hold
        interp, start, done = self.traj
        p, v, a, e = interp.sample(now - start)
        u_ff = None if e is None else inputs_from_generalized(self.model, e)
        ref = Reference(self.coords.configuration(p), v, a, u_ff)
        if not done and now - start >= interp.end:
            self.traj = (interp, start, True)
            self.hold = Reference(ref.q, np.zeros(self.model.nv), np.zeros(self.model.nv), u_ff)
            self._finished = True
        return ref

    def pop_finished(self) -> bool:
        """Whether the trajectory reached its end since the last call."""
        finished, self._finished = self._finished, False
        return finished

    # -- twist commands (rmrc) ------------------------------------------------------------------
    def set_twist(self, twist, now: float):
        """The commanded end-effector twist (6,) [m/s, rad/s] received at ``now`` [s]."""
        self.twist, self.twist_time = np.asarray(twist, float), now

    def twist_reference(self, now: float) -> TwistReference:
        """The commanded twist, zero ``twist_timeout`` s after its receipt (then
        :attr:`twist_expired` is True)."""
        timeout = self.values["twist_timeout"]
        self.twist_expired = False
        if self.twist is None:
            return TwistReference(np.zeros(6))
        if timeout > 0 and now - self.twist_time > timeout:
            self.twist_expired = True
            return TwistReference(np.zeros(6))
        return TwistReference(self.twist)

    # -- the command ----------------------------------------------------------------------------
    @property
    def zero_fallback(self) -> bool:
        """Whether the command is zero: tv_lqr without gains yet and ``fallback_law`` zero."""
        return self.setup.controller is None and self.plan is None

    def _measured(self) -> State:
        if self.state is None:
            raise InputError("no state observed yet: call observe(t, q, v) first")
        return self.state

    def command(self, now: float) -> np.ndarray:
        """The law's inputs u (nu,) at session time ``now`` [s] for the last measured state.

        Raises
        ------
        InputError
            Before the first :meth:`observe`.
        """
        setup, (q, v) = self.setup, self._measured()
        if setup.law == "rmrc":
            rmrc: Any = setup.controller
            return rmrc.step(now, q, v, self.twist_reference(now))
        ref = self.current_reference(now)
        if ref is None:  # not after observe (it sets the hold); for the type checker
            raise InputError("no reference: call observe(t, q, v) first")
        self.last_reference = ref
        plan = self.plan
        if setup.law == "tv_lqr" and plan is not None:
            t = now - plan.start  # the gain table runs on trajectory time
            if ref.u_ff is None:
                ref = Reference(ref.q, ref.v, ref.a, plan.feedforward(t))
            return plan.controller.step(t, q, v, ref)
        if setup.law in CONSTRAINED_LAWS and self.values["force_control"]:
            lam = self.values["lambda_d"]
            constrained: Any = setup.controller  # projected_inverse_dynamics, quasi_velocity
            m = constrained.constraints.n_rows
            ref = Reference(ref.q, ref.v, ref.a, ref.u_ff,
                            np.asarray(lam, float) if lam else np.zeros(m))
        if setup.controller is None:  # tv_lqr with fallback_law zero
            return np.zeros(self.model.nu)
        return setup.controller.step(now, q, v, ref)

    def tracking_error(self) -> float | None:
        """max |q_ref - q| [rad | m] of the last command (the independent coordinates of a
        constrained law), None before one."""
        ref, state = self.last_reference, self.state
        if ref is None or state is None or self.setup.law == "rmrc":
            return None
        error = pin.difference(self.model.pin_model, state.q, ref.q) \
            if hasattr(self.model, "pin_model") else ref.q - state.q
        ind = getattr(self.setup.controller, "independent", None)
        if self.setup.law in CONSTRAINED_LAWS and ind is not None:
            error = error[ind]  # the law tracks theta only
        return float(np.max(np.abs(error), initial=0.0))
