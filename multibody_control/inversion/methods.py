"""Inverse models: feedforward u_d(t) that makes the output follow a desired trajectory.

One entry point, :func:`invert`, returns an :class:`InversionResult` for

* ``"classical"``: forward integration of the internal dynamics eta = (q_u, v_u) with the
  servo-constraints solved on position level (coordinate transformation, Seifried
  Def. 3.6 / Sect. 4.2.6); fully actuated systems have no internal dynamics and reduce to
  inverse kinematics + inverse dynamics;
* ``"ode"``: the servo-constraint ODE form (5.21)-(5.22) in (q, v), constraints enforced
  on acceleration level only;
* ``"index1"``: the index-1 form (5.20), (q, v_u) integrated, v_a from the velocity-level
  servo-constraints;
* ``"index2_euler"``: backward Euler on the index-2 DAE (5.15)-(5.17) with a fixed step
  (the baseline the book shows to damp the internal dynamics);
* ``"stable"``: stable inversion (Def. 3.7) -- a two-point boundary value problem for
  eta on an extended interval [t0 - t_pre, tf + t_post] with the start on the unstable
  and the end on the stable eigenspace of the linearized zero dynamics: B^s (eta(ta) -
  eta0) = 0 and B^u (eta(tb) - etaf) = 0 (labels of the printed (3.76) swapped, see NOTES.md),
  solved with ``scipy.integrate.solve_bvp`` (the analogue of Matlab's bvp5c);
* ``"quasi_static"``: quasi-static compensation of the deflection of elastic passive joints
  (Seifried Sect. 6.1, :mod:`.quasi_static`); the output is the task, a feedback law must
  track the corrected joint reference;
* ``"causal"``: causal inversion with free trajectory parameters (Seifried eqs. 3.77-3.82,
  4.129-4.135): the desired output gets ``n_free`` extra shape terms during the motion,
  chosen by a Newton-type least-squares iteration so that the forward-integrated internal
  dynamics end on the final equilibrium; no pre-/post-actuation, the output deviates from
  the nominal one during the motion (:mod:`.causal`).

Models with loop closures (fully actuated: as many task rows as the closures leave degrees
of freedom) are inverted by one method whatever ``method`` says, as they have no internal
dynamics: closures and task (joint coordinates or frame coordinates such as an end-effector
path) solved together at every sample, the actuation by the projection method with zero
effort on the passive joints (Aghili 2005 Sect. 7; :func:`.closed_loop.invert_closed_loop`).

Failures (diverging internal dynamics, singular decoupling matrix, non-convergent BVP, an
interval too short for the pre-actuation, a closed loop's singular configuration) end in
``success=False`` with a message naming the cause; the samples computed up to then are kept.

Structure (one module per concern, imports one way: ``result`` <- ``protocol`` <- ``internal``
<- ``causal``, ``quasi_static``, ``closed_loop`` <- ``methods``; ``verify`` beside them):
:data:`METHODS` maps each name to a :class:`Method` -- its options dataclass and the function
that solves it (:mod:`.internal` for the five servo-constraint methods, :mod:`.causal`,
:mod:`.quasi_static`); :func:`invert` validates, builds the servo-constraints and dispatches.
Options are given as ``options=StableOptions(...)`` (the class of the method, see
:data:`METHODS`) or, as before, as keyword arguments of :func:`invert`.

Failure contract: a solver that does not succeed returns its result with ``success=False`` and
a ``message``; misuse (an unknown method or option, options of another method, a bad shape or
interval) raises :class:`~multibody_dynamics.errors.InputError` (``TypeError`` for an unknown
keyword) before any work starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from multibody_dynamics.errors import InputError, SolverError
from multibody_dynamics.model import MultibodyModel
from multibody_dynamics.validation import check_motion_sampled, check_sample_budget

from ..outputs import Output
from ..tasks import Task
from .causal import solve_causal
from .closed_loop import invert_closed_loop
from .desired import DesiredOutput
from .internal import (
    Problem,
    solve_classical,
    solve_index1,
    solve_index2_euler,
    solve_ode,
    solve_stable_inversion,
)
from .quasi_static import solve_quasi_static
from .result import InversionResult
from .servo import ServoConstraints
from .verify import VerificationResult, verify

__all__ = ["METHODS", "CausalOptions", "ForwardOptions", "Index2EulerOptions", "InversionOptions",
           "InversionResult", "Method", "QuasiStaticOptions", "StableOptions",
           "VerificationResult", "invert", "verify"]


def _check_samples(task: Task, opts: InversionOptions) -> None:
    """Refuse, before any work, a ``dt`` not shorter than the motion ``t0 .. tf``, and a
    result whose samples would not fit in memory: at least the
    interval ``t_start .. t_end`` (default ``min(0, t0) .. tf``; a stable inversion adds its
    pre- and post-actuation) every ``dt``."""
    check_motion_sampled(task.law.t0, task.law.tf, opts.dt, "dt / task")
    lo = opts.t_start if opts.t_start is not None else min(0.0, task.law.t0)
    hi = opts.t_end if opts.t_end is not None else task.law.tf
    if hi - lo > opts.dt:  # shorter intervals are the methods' own errors
        check_sample_budget(hi - lo, opts.dt, f"dt / task: {lo:g} .. {hi:g} s",
                            "raise dt or shorten the motion")


# ------------------------------------------------------------------------------- options
@dataclass(frozen=True)
class InversionOptions:
    """Options every method takes.

    Attributes
    ----------
    dt : float
        Output sample spacing and maximum integration step [s].
    t_start, t_end : float, optional
        Interval of the result [s]. Default: the task's t0 - t_pre .. tf + t_post for
        ``"stable"`` (t_pre, t_post from the zero-dynamics eigenvalues and ``decay_tol``),
        min(0, t0) .. tf + 0.5 s otherwise.  A ``t_start`` later than needed for the
        pre-actuation is reported as a failure naming the required time.
    ik_guess : (nq,), optional
        Start of the inverse kinematics of the desired output (selects the branch); for
        closed loops the start of the first assembly (the assembly and working mode).
    verbose : int
        Verbosity of the underlying scipy solver (``solve_bvp``, ``least_squares``).
    progress : bool
        Show a live count of inverse-dynamics evaluations on stderr (tqdm).
    """

    dt: float = 1e-3
    t_start: float | None = None
    t_end: float | None = None
    ik_guess: np.ndarray | None = None
    verbose: int = 0
    progress: bool = False

    def __post_init__(self):
        if not self.dt > 0:
            raise InputError(f"dt: expected a positive sample spacing in s, got {self.dt}")


@dataclass(frozen=True)
class ForwardOptions(InversionOptions):
    """Options of the forward methods ``"classical"``, ``"ode"``, ``"index1"``.

    Attributes
    ----------
    rtol, atol : float
        Integrator tolerances (DOP853).
    eta_limit : float
        |passive coordinate| above this [rad or m] counts as divergence.
    max_step : float, optional
        Largest integration step [s]; default 10 dt, and dt for nonlinear outputs in the
        coordinate-transformation form, whose Newton solves are warm-started from the
        previous evaluation (the book capped ode15s at 1 ms).  Unlimited steps let the
        integrator leap over the start of the motion from the rest phase.
    """

    rtol: float = 1e-9
    atol: float = 1e-11
    eta_limit: float = 10.0
    max_step: float | None = None


@dataclass(frozen=True)
class Index2EulerOptions(InversionOptions):
    """Options of ``"index2_euler"``: ``euler_dt`` the step [s] (default ``dt``);
    ``eta_limit`` as in :class:`ForwardOptions`."""

    euler_dt: float | None = None
    eta_limit: float = 10.0


@dataclass(frozen=True)
class StableOptions(InversionOptions):
    """Options of ``"stable"`` (stable inversion).

    Attributes
    ----------
    decay_tol : float
        Pre-/post-actuation lasts until the slowest unstable/stable zero-dynamics mode has
        decayed by this factor.
    max_nodes, bvp_tol : ``solve_bvp`` settings.
    guess : (N, 2 n_u) or None
        Initial guess of eta on the output samples (default the start equilibrium), e.g. the
        linearly-combined solution when solving for the exact output.
    """

    decay_tol: float = 1e-6
    max_nodes: int = 100000
    bvp_tol: float = 1e-6
    guess: np.ndarray | None = None


@dataclass(frozen=True)
class CausalOptions(InversionOptions):
    """Options of ``"causal"`` (:func:`.causal.invert_causal`).

    Attributes
    ----------
    rtol, atol, eta_limit : as in :class:`ForwardOptions`
    n_free : int, optional
        Number of free trajectory parameters (default: the number of internal states 2 n_u).
    free_rows : sequence of int or str, optional
        The output rows carrying them (default: the last row).
    segments : int, optional
        Shooting segments (default: from the fastest unstable mode).
    end_tol : float
        Accepted end-state error.
    max_iter : int
        Maximum Newton steps of the Levenberg-Marquardt solve.
    """

    rtol: float = 1e-9
    atol: float = 1e-11
    eta_limit: float = 10.0
    n_free: int | None = None
    free_rows: tuple | None = None
    segments: int | None = None
    end_tol: float = 1e-8
    max_iter: int = 30


@dataclass(frozen=True)
class QuasiStaticOptions(InversionOptions):
    """Options of ``"quasi_static"`` (:func:`.quasi_static.invert_quasi_static`):
    ``exact_kinematics`` and ``compensate`` as there."""

    exact_kinematics: bool = True
    compensate: bool = True


# ------------------------------------------------------------------------------ registry
@dataclass(frozen=True)
class Method:
    """One entry of :data:`METHODS`.

    Attributes
    ----------
    options : type
        The method's options dataclass (a subclass of :class:`InversionOptions`).
    solve : callable
        ``solve(problem, options) -> InversionResult`` (:class:`.internal.Problem`).
    servo : bool
        Whether the method inverts the output through the servo-constraints
        (:class:`.servo.ServoConstraints` built by :func:`invert`); False for a method that
        works on the task alone (``"quasi_static"``).
    summary : str
        One line for listings.
    """

    options: type
    solve: Callable[[Problem, InversionOptions], InversionResult]
    servo: bool
    summary: str


#: The inversion methods by name (the order is the one listings show).
METHODS: dict[str, Method] = {
    "classical": Method(ForwardOptions, solve_classical, True,
                        "forward integration of the internal dynamics (Def. 3.6)"),
    "ode": Method(ForwardOptions, solve_ode, True,
                  "servo-constraint ODE form (5.21)-(5.22)"),
    "index1": Method(ForwardOptions, solve_index1, True, "index-1 form (5.20)"),
    "index2_euler": Method(Index2EulerOptions, solve_index2_euler, True,
                           "backward Euler on the index-2 DAE (5.15)-(5.17)"),
    "stable": Method(StableOptions, solve_stable_inversion, True,
                     "stable inversion, boundary value problem (Def. 3.7)"),
    "causal": Method(CausalOptions, solve_causal, True,
                     "causal inversion with free trajectory parameters (3.77)-(3.82)"),
    "quasi_static": Method(QuasiStaticOptions, solve_quasi_static, False,
                           "quasi-static deformation compensation (Sect. 6.1)"),
}


def _all_option_names() -> set[str]:
    names: set[str] = set()
    for m in METHODS.values():
        names.update(f.name for f in fields(m.options))
    return names


def method_options(method: str, options: InversionOptions | None = None, **keywords):
    """The options object of ``method``: ``options`` itself, or one built from ``keywords``.

    Keywords that belong to another method's options are ignored (``invert`` has always
    accepted the union of all methods' keywords, e.g. a scenario file's options for any
    method); a keyword no method knows raises ``TypeError``.

    Raises
    ------
    InputError
        Unknown ``method``; ``options`` of another method's class; ``options`` and
        keywords together; an invalid value (e.g. ``dt <= 0``).
    """
    if method not in METHODS:
        raise InputError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    cls = METHODS[method].options
    unknown = sorted(set(keywords) - _all_option_names())
    if unknown:
        raise TypeError(f"invert() got unexpected keyword arguments {unknown}; the options of "
                        f"method {method!r} are {[f.name for f in fields(cls)]}")
    if options is not None:
        if keywords:
            raise InputError(f"options: give the options either as options= or as keywords, "
                             f"not both (got options= and {sorted(keywords)})")
        if not isinstance(options, cls):
            raise InputError(f"options: method {method!r} expects {cls.__name__}, got "
                             f"{type(options).__name__}")
        return options
    own = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in keywords.items() if k in own})


def invert(model: MultibodyModel, output: Output, task: Task, method: str = "stable", *,
           options: InversionOptions | None = None, **keywords) -> InversionResult:
    """Feedforward for ``output`` to follow ``task`` (see the module docstring for methods).

    Parameters
    ----------
    model : MultibodyModel
    output : Output
        As many rows as the model has inputs.
    task : Task
        The desired motion (its time law gives t0, tf).
    method : str
        A key of :data:`METHODS`.
    options : InversionOptions, optional
        The method's options object (``METHODS[method].options``: :class:`ForwardOptions`,
        :class:`Index2EulerOptions`, :class:`StableOptions`, :class:`CausalOptions`,
        :class:`QuasiStaticOptions`); default: built from ``keywords``.
    **keywords
        The options as keyword arguments (``dt=``, ``t_start=``, ``rtol=``, ``guess=``, ...,
        the fields of the option classes).  Keywords of other methods are ignored.

    Returns
    -------
    InversionResult
        ``success=False`` with a ``message`` naming the cause when the solve fails (the
        samples computed up to then are kept); causal inversion returns a
        :class:`.causal.CausalInversionResult`.

    Raises
    ------
    InputError
        Misuse: an unknown method, options of another method, invalid option values, an
        output that does not fit the model, an empty interval.
    TypeError
        A keyword that is no option of any method.
    """
    opts = method_options(method, options, **keywords)
    _check_samples(task, opts)
    start = time.perf_counter()
    if model.closures:
        return invert_closed_loop(model, output, task, method, opts.dt, opts.t_start, opts.t_end,
                                  opts.ik_guess, start, progress=opts.progress)
    spec = METHODS[method]
    if not spec.servo:
        return spec.solve(Problem(model, output, task, method, start), opts)
    try:
        servo = ServoConstraints(model, output)
    except SolverError as exc:  # e.g. an output that does not determine the actuated joints
        return InversionResult.failure(model, output, method, str(exc), start=start,
                                       t0=task.law.t0, tf=task.law.tf)
    desired = DesiredOutput(model, output, task, guess=opts.ik_guess)
    bar = None
    if opts.progress:
        from tqdm import tqdm  # imported only when a progress bar is asked for

        bar = tqdm(desc=f"{method} inversion", unit=" evaluations", leave=False, mininterval=0.5)
        servo.on_evaluate = bar.update
    try:
        return spec.solve(Problem(model, output, task, method, start, servo, desired), opts)
    finally:
        if bar is not None:
            bar.close()
