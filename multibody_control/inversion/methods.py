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
  eta0) = 0 and B^u (eta(tb) - etaf) = 0 (labels of the printed (3.76) swapped, see docs/derivations.md),
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
effort on the passive joints (Aghili 2005 Sect. 7; :func:`_invert_closed_loop`).

Failures (diverging internal dynamics, singular decoupling matrix, non-convergent BVP, an
interval too short for the pre-actuation, a closed loop's singular configuration) end in
``success=False`` with a message naming the cause; the samples computed up to then are kept.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
from scipy.integrate import solve_bvp, solve_ivp

from multibody_dynamics.errors import InputError, MultibodyError, SolverError
from multibody_dynamics.model import MultibodyModel

from ..outputs import Output
from ..tasks import Task
from .desired import DesiredOutput
from .servo import ServoConstraints

METHODS = ("classical", "ode", "index1", "index2_euler", "stable", "causal", "quasi_static")


@dataclass(frozen=True)
class InversionResult:
    """Feedforward and the motion it produces, sample-first.

    Attributes
    ----------
    t : (N,) [s]; q : (N, nq); v, a : (N, nv); u : (N, nu) feedforward input
    y_desired, y : (N, m) desired output and the output of q
    eta : (N, 2 n_u) internal states (passive coordinates and velocities)
    output_error : float, max |y - y_desired| over the samples
    t0, tf : the task's motion interval; t_pre, t_post : pre-/post-actuation lengths [s]
    eigenvalues : zero-dynamics eigenvalues at the start (1/s)
    success : bool; message : str; method : str
    nfev : int (evaluations of the inverse dynamics); wall_time : float [s]
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    u: np.ndarray
    y_desired: np.ndarray
    y: np.ndarray
    eta: np.ndarray
    output_error: float
    t0: float
    tf: float
    t_pre: float
    t_post: float
    eigenvalues: np.ndarray
    success: bool
    message: str
    method: str
    nfev: int
    wall_time: float
    input_names: tuple[str, ...] = field(default=())
    output_names: tuple[str, ...] = field(default=())

    def u_interpolant(self):
        """Callable u(t): cubic splines through the samples, broken at t0 and tf.

        The feedforward has kinks where the desired jerk jumps (t0, tf); one spline per
        smooth piece keeps the interpolation error O(h^4) instead of O(h^2) there.
        """
        from scipy.interpolate import CubicSpline

        t, u = self.t, self.u
        cuts = [t[0]] + [b for b in (self.t0, self.tf) if t[0] < b < t[-1]] + [t[-1]]
        pieces = []
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            sel = (t >= lo - 1e-12) & (t <= hi + 1e-12)
            pieces.append((lo, hi, CubicSpline(t[sel], u[sel], axis=0) if sel.sum() > 2
                           else (lambda x, tt=t[sel], uu=u[sel]: np.array(
                               [np.interp(x, tt, c) for c in uu.T]).T)))
        bounds = np.array([p[1] for p in pieces])

        def u_of_t(x):
            x = float(np.clip(x, t[0], t[-1]))
            lo, hi, spline = pieces[min(int(np.searchsorted(bounds, x)), len(pieces) - 1)]
            return spline(x)

        return u_of_t


def _eigen_rows(Q, stable: bool) -> np.ndarray:
    """Real rows B spanning the left eigenvectors of Q for the stable (or unstable) eigenvalues."""
    lam, V = np.linalg.eig(Q)
    W = np.linalg.inv(V)  # rows: left eigenvectors
    rows = []
    for k in np.flatnonzero((lam.real < 0) == stable):
        if lam[k].imag > 0:  # a conjugate pair: its real and imaginary parts, once
            rows += [W[k].real, W[k].imag]
        elif lam[k].imag == 0:
            rows.append(W[k].real)
    return np.array(rows).reshape(-1, Q.shape[0])


def _decay_time(lam, tol):
    """Time for the slowest mode among ``lam`` to decay by ``tol`` (0 when there is none)."""
    rates = np.abs(np.real(lam))
    return float(np.log(1.0 / tol) / rates.min()) if rates.size else 0.0


class _Recorder:
    def __init__(self, servo, ytraj):
        self.servo, self.ytraj = servo, ytraj

    def sample(self, t, eta):
        rows = [self.servo.reconstruct(tk, ek, self.ytraj) for tk, ek in zip(t, eta)]
        return [np.array([r[k] for r in rows]) for k in range(4)]


def invert(model: MultibodyModel, output: Output, task: Task, method: str = "stable", *,
           dt: float = 1e-3, t_start: float | None = None, t_end: float | None = None,
           rtol: float = 1e-9, atol: float = 1e-11, decay_tol: float = 1e-6,
           max_nodes: int = 100000, bvp_tol: float = 1e-6, eta_limit: float = 10.0,
           max_step: float | None = None, euler_dt: float | None = None, guess=None,
           ik_guess=None, n_free: int | None = None, free_rows=None,
           segments: int | None = None, end_tol: float = 1e-8,
           verbose: int = 0, progress: bool = False) -> InversionResult:
    """Feedforward for ``output`` to follow ``task`` (see the module docstring for methods).

    Parameters
    ----------
    dt : float
        Output sample spacing and maximum integration step [s].
    t_start, t_end : float, optional
        Interval of the result [s]. Default: the task's t0 - t_pre .. tf + t_post for
        ``"stable"`` (t_pre, t_post from the zero-dynamics eigenvalues and ``decay_tol``),
        min(0, t0) .. tf + 0.5 s otherwise.  A ``t_start`` later than needed for the
        pre-actuation is reported as a failure naming the required time.
    rtol, atol : integrator tolerances (forward methods, DOP853)
    max_step : float, optional
        Largest integration step [s] (forward methods); default 10 dt, and dt for nonlinear
        outputs in the coordinate-transformation form, whose Newton solves are warm-started
        from the previous evaluation (the book capped ode15s at 1 ms).  Unlimited steps let
        the integrator leap over the start of the motion from the rest phase.
    decay_tol : float
        Pre-/post-actuation lasts until the slowest unstable/stable zero-dynamics mode has
        decayed by this factor.
    max_nodes, bvp_tol : ``solve_bvp`` settings (stable inversion)
    eta_limit : float
        |passive coordinate| above this [rad or m] counts as divergence (forward methods).
    euler_dt : float, optional
        Step of ``"index2_euler"`` (default ``dt``).
    guess : (N, 2 n_u) or None
        Initial guess of eta on the BVP mesh (default zero deflection), e.g. the
        linearly-combined solution when solving for the exact output.
    ik_guess : (nq,), optional
        Start of the inverse kinematics of the desired output (selects the branch); for
        closed loops the start of the first assembly (the assembly and working mode).
    n_free, free_rows, segments, end_tol :
        Causal inversion only: number of free trajectory parameters (default: the number
        of internal states 2 n_u), the output rows carrying them (default: the last row),
        shooting segments (default: from the fastest unstable mode) and the accepted
        end-state error; see :func:`.causal.invert_causal`.  Its result is a
        :class:`.causal.CausalInversionResult` (an :class:`InversionResult` with the
        parameters, the output deviation and the end-state error).
    progress : bool
        Show a live count of inverse-dynamics evaluations on stderr (tqdm).
    """
    if method not in METHODS:
        raise InputError(f"method: expected one of {', '.join(METHODS)}, got {method!r}")
    if not dt > 0:
        raise InputError(f"dt: expected a positive sample spacing in s, got {dt}")
    start = time.perf_counter()
    t0, tf = task.law.t0, task.law.tf
    if model.closures:
        return _invert_closed_loop(model, output, task, method, dt, t_start, t_end, ik_guess, start)
    if method == "quasi_static":  # no inverse model of the output: the task and the springs
        from .quasi_static import invert_quasi_static

        return invert_quasi_static(model, task, dt=dt, t_start=t_start, t_end=t_end,
                                   ik_guess=ik_guess)
    try:
        servo = ServoConstraints(model, output)
    except SolverError as exc:  # e.g. an output that does not determine the actuated joints
        return _failed(model, output, method, start, t0, tf, 0.0, 0.0, np.zeros(0), str(exc))
    desired = DesiredOutput(model, output, task, guess=ik_guess)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(desc=f"{method} inversion", unit=" evaluations", leave=False, mininterval=0.5)
        servo.on_evaluate = bar.update
    try:
        if method == "causal":
            from .causal import invert_causal

            return invert_causal(model, output, task, servo, desired, dt=dt, t_start=t_start,
                                 t_end=t_end, rtol=rtol, atol=atol, eta_limit=eta_limit,
                                 n_free=n_free, free_rows=free_rows, segments=segments,
                                 end_tol=end_tol, verbose=verbose)
        return _invert(model, output, task, method, servo, desired, start, t0, tf, dt, t_start,
                       t_end, rtol, atol, decay_tol, max_nodes, bvp_tol, eta_limit, max_step,
                       euler_dt, guess, verbose)
    finally:
        if bar is not None:
            bar.close()


def _invert(model, output, task, method, servo, desired, start, t0, tf, dt, t_start, t_end, rtol,  # noqa: C901
            atol, decay_tol, max_nodes, bvp_tol, eta_limit, max_step, euler_dt, guess, verbose):
    ytraj = desired
    n = servo.nu_int
    try:
        y0, yf = ytraj(t0)[0], ytraj(tf)[0]
        eta0, etaf = servo.equilibrium(y0), servo.equilibrium(yf)
    except MultibodyError as exc:
        return _failed(model, output, method, start, t0, tf, 0.0, 0.0, np.zeros(0), str(exc))
    if n:
        Q0, _ = servo.zero_dynamics_jacobian(y0, eta0)
        Qf, _ = servo.zero_dynamics_jacobian(yf, etaf)
        lam0, lamf = np.linalg.eigvals(Q0), np.linalg.eigvals(Qf)
    else:
        Q0 = Qf = np.zeros((0, 0))
        lam0 = lamf = np.zeros(0)
    if np.any(np.abs(np.real(np.concatenate([lam0, lamf]))) < 1e-9):
        raise SolverError("zero dynamics not hyperbolic (eigenvalue on the imaginary axis): "
                          f"{np.round(lam0, 4).tolist()}; stable inversion is not defined")
    unstable = lam0[np.real(lam0) > 0]
    t_pre = _decay_time(unstable, decay_tol) if method == "stable" else 0.0
    t_post = _decay_time(lamf[np.real(lamf) < 0], decay_tol) if method == "stable" else 0.5
    if method == "stable":
        t_post = min(t_post, 5.0)  # lightly damped stable modes: cap, they are not amplified
        ta = t0 - t_pre if t_start is None else t_start
        if ta > t0 - t_pre + 1e-6 * max(t_pre, 1.0):  # slack: t_pre comes from an FD Jacobian
            return _failed(model, output, method, start, t0, tf, t_pre, t_post, lam0,
                           f"pre-actuation needs {t_pre:.3g} s before t0 = {t0:g} s (slowest "
                           f"unstable zero-dynamics mode {np.min(unstable.real):.3g} 1/s decays "
                           f"by {decay_tol:g}), but the interval starts at {ta:g} s; start at "
                           f"{t0 - t_pre:.4g} s or earlier")
    else:
        ta = min(0.0, t0) if t_start is None else t_start
    tb = (tf + t_post) if t_end is None else t_end
    if not tb > ta:
        raise InputError(f"t_end = {tb} s must be after t_start = {ta} s")
    t_out = _time_grid(ta, tb, dt, (t0, tf))
    # exact samples of y_d on a grid holding t0 and tf, interpolated (quintic Hermite) in between
    grid = np.unique(np.concatenate([np.arange(ta, tb + dt, min(dt, 1e-3)), [t0, tf]]))
    ytraj = desired.tabulate(grid[(grid >= ta - 1e-12)])
    recorder = _Recorder(servo, ytraj)

    try:
        if method == "stable":
            eta, status, msg = _stable(servo, ytraj, t_out, eta0, etaf, Q0, Qf, max_nodes,
                                       bvp_tol, guess, verbose)
            q, v, a, u = recorder.sample(t_out, eta)
        elif method == "classical":
            # nonlinear outputs solve the servo-constraints by Newton in every evaluation,
            # warm-started from the previous one: keep steps at most dt so that it stays close
            step = max_step if max_step is not None else (10 * dt if output.linear else dt)
            eta, status, msg = _forward(lambda t, x: servo.internal_rhs(t, x, ytraj), eta0,
                                        t_out, rtol, atol, step, eta_limit, np.arange(n))
            t_out = t_out[: len(eta)]
            q, v, a, u = recorder.sample(t_out, eta)
        elif method == "ode":
            x0 = np.concatenate(servo.reconstruct(ta, eta0, ytraj)[:2])
            nq = model.nq

            def rhs(t, x):
                return np.concatenate([x[nq:], servo.accelerations(x[:nq], x[nq:], ytraj(t)[2])])

            x, status, msg = _forward(rhs, x0, t_out, rtol, atol,
                                      10 * dt if max_step is None else max_step, eta_limit, servo.iu)
            t_out = t_out[: len(x)]
            q, v = x[:, :nq], x[:, nq:]
            a = np.array([servo.accelerations(qk, vk, ytraj(tk)[2]) for tk, qk, vk in zip(t_out, q, v)])
            u = np.array([servo.inputs(qk, vk, ak) for qk, vk, ak in zip(q, v, a)])
            eta = np.column_stack([q[:, servo.iu], v[:, servo.iu]])
        elif method == "index1":
            q0 = servo.reconstruct(ta, eta0, ytraj)[0]
            nq = model.nq

            def full_v(t, x):
                return servo.solve_velocities(x[:nq], ytraj(t)[1], x[nq:])

            def rhs(t, x):
                v = full_v(t, x)
                acc = servo.accelerations(x[:nq], v, ytraj(t)[2])
                return np.concatenate([v, acc[servo.iu]])

            x, status, msg = _forward(rhs, np.concatenate([q0, eta0[n:]]), t_out, rtol, atol,
                                      10 * dt if max_step is None else max_step, eta_limit,
                                      servo.iu)
            t_out = t_out[: len(x)]
            q = x[:, :nq]
            v = np.array([full_v(tk, xk) for tk, xk in zip(t_out, x)])
            a = np.array([servo.accelerations(qk, vk, ytraj(tk)[2]) for tk, qk, vk in zip(t_out, q, v)])
            u = np.array([servo.inputs(qk, vk, ak) for qk, vk, ak in zip(q, v, a)])
            eta = np.column_stack([q[:, servo.iu], v[:, servo.iu]])
        else:
            t_out, q, v, a, u, status, msg = _index2_euler(servo, ytraj, ta, tb, euler_dt or dt,
                                                           eta0, eta_limit)
            eta = np.column_stack([q[:, servo.iu], v[:, servo.iu]])
    except MultibodyError as exc:
        return _failed(model, output, method, start, t0, tf, t_pre, t_post, lam0, str(exc))

    if not status and method != "stable" and np.any(np.real(lam0) > 0):
        msg += (f"; the zero dynamics are unstable (eigenvalues "
                f"{np.round(lam0[np.real(lam0) > 0], 3).tolist()} 1/s): the system is non-minimum "
                "phase for this output, use method 'stable' (stable inversion) or 'causal'")
    y_des = np.array([ytraj(tk)[0] for tk in t_out])
    y = np.array([output.value(qk) for qk in q])
    err = float(np.max(np.abs(y - y_des))) if len(y) else np.inf
    if status and not np.all(np.isfinite(u)):
        status, msg = False, "the feedforward contains NaN/inf"
    return InversionResult(t_out, q, v, a, u, y_des, y, eta, err, t0, tf, t_pre, t_post, lam0,
                           bool(status), msg, method, servo.counters["dynamics"],
                           time.perf_counter() - start, model.input_names, output.names)


#: Relative threshold (smallest / largest singular value) below which the stacked Jacobian
#: [A; H] or the closure Jacobian's passive columns count as rank-deficient in
#: :func:`_invert_closed_loop`: the feedforward there is ~1/threshold times its typical size.
_CLOSED_LOOP_SINGULAR_RTOL = 1e-6


def _invert_closed_loop(model, output, task, method, dt, t_start, t_end, ik_guess, start):
    """Fully actuated closed loops: closures and task solved together (Aghili 2005 Sect. 7).

    At every sample the configuration solves the combined position problem ::

        phi(q) = 0,   h_t(q) = p_d(t)

    (closure residual and task map h_t: joint coordinates such as the five-bar's motors, or
    frame coordinates such as ``'tip.x'``, ``'tip.y'``) by Newton's method on the manifold
    (damped least squares, :func:`_assemble_closed_loop`), warm-started from the previous
    sample with the second-order prediction ``q (+) (v dt + a dt^2 / 2)``; ``ik_guess``
    starts the first solve and so selects the branch (assembly and working mode).  With
    ``K = [A; H_t]`` (closure Jacobian over the task Jacobian)::

        K v = [0; p_d'],   K a = [-gamma; p_d'' - H_t' v],

    solved with the pseudo-inverse of K (redundant closure rows are consistent), and the
    actuation is the projection method's minimum-norm inverse dynamics with zero effort on
    the passive joints (:meth:`ProjectedDynamics.inverse_dynamics`, eqs. 45, 59-62).  The
    output y = h(q) is evaluated on the solution: when its rows are the task coordinates
    y_d is the task itself, otherwise (e.g. the motors of a frame-path task) y_d = h(q).
    The ``method`` does not matter: a fully actuated closed loop has no internal dynamics.

    Singular configurations end the inversion with ``success=False``, a message naming the
    time and the cause, and the samples computed before.  Checked in this order, each by a
    relative smallest singular value below ``_CLOSED_LOOP_SINGULAR_RTOL`` (the sample is at
    the singularity) or a determinant changing sign from the previous sample (the path
    crosses it in between):

    * the passive columns A_p of A: the constraint forces cannot hold the passive joints
      (Aghili 2005 eq. 64) and the feedforward is unbounded -- a parallel (direct-kinematic)
      singularity, e.g. the five-bar's distal links aligned, or the slider-crank at
      q1 = +-pi/2 where its constraint row vanishes (eq. 70).  For a joint task on the
      actuated coordinates det K = +-det A_p, so this is where K loses rank for such tasks;
    * K = [A; H_t]: the task and the closures do not fix the velocities -- an
      inverse-kinematic (serial) singularity, e.g. a five-bar leg stretched or folded at the
      boundary of the workspace, the slider-crank at its dead centres.

    Determinants are taken of square matrices: the closure rows independent at the first
    sample (pivoted QR of A^T), stacked over the task rows for K; both relative singular
    values are scaled by the largest singular value of K.
    """
    from scipy.linalg import qr

    from multibody_dynamics.constraints import Constraints
    from multibody_dynamics.projection import ProjectedDynamics

    t0, tf = task.law.t0, task.law.tf
    pm, nv = model.pin_model, model.nv
    exact = tuple(output.names) == tuple(task.names)
    task_map = output if exact else Output(model, task.names)
    cons = Constraints(model)
    pd = ProjectedDynamics(model, cons)
    passive = np.asarray(model.passive, bool)
    ta = min(0.0, t0) if t_start is None else t_start
    tb = tf + 0.5 if t_end is None else t_end
    if not tb > ta:
        raise InputError(f"t_end = {tb} s must be after t_start = {ta} s")
    t_out = _time_grid(ta, tb, dt, (t0, tf))
    p, pd_, pdd = task(t_out)
    n = t_out.size
    q = np.empty((n, model.nq))
    v, a = np.zeros((n, nv)), np.zeros((n, nv))
    u = np.zeros((n, model.nu))
    if ik_guess is None:
        qk = model.q_rest.copy()
    else:
        qk = np.array(ik_guess, float)
        if qk.shape != (model.nq,):
            raise InputError(f"ik_guess: expected shape ({model.nq},) = "
                             f"({', '.join(model.coordinate_names)}), got {qk.shape}")
    B_pinv = np.linalg.pinv(model.B)
    rows = sign_k = sign_p = None
    worst_k = worst_p = np.inf
    iterations = [0, 0]  # Newton iterations from ik_guess, most at a later sample

    def stop(k, why):
        """Result with the samples before k, ``success=False`` and ``why``."""
        y = np.array([output.value(x) for x in q[:k]]).reshape(k, output.m)
        y_des = p[:k] if exact else y
        err = float(np.max(np.abs(y - y_des))) if k else np.inf
        return InversionResult(t_out[:k], q[:k], v[:k], a[:k], u[:k], y_des, y,
                               np.zeros((k, 0)), err, t0, tf, 0.0, 0.0, np.zeros(0), False,
                               f"t = {t_out[k]:.4g} s: {why}; the {k} samples before are kept",
                               method, k, time.perf_counter() - start, model.input_names,
                               output.names)

    for k in range(n):
        if k:  # second-order prediction from the previous sample
            h = t_out[k] - t_out[k - 1]
            qk = pin.integrate(pm, q[k - 1], h * v[k - 1] + 0.5 * h * h * a[k - 1])
        qk, K, res, its = _assemble_closed_loop(cons, task_map, qk, p[k], 100 if k == 0 else 30)
        iterations[bool(k)] = max(iterations[bool(k)], its)
        if res > 1e-10:
            want = ", ".join(f"{name} = {x:.6g}" for name, x in zip(task.names, p[k]))
            return stop(k, f"the closures and the task ({want}) cannot be met together (residual {res:.3g} after {its} Newton "
                           "iterations): out of reach (outside the workspace) or at a singular "
                           "configuration" + ("" if k else "; give ik_guess near the start"))
        A = K[: cons.n_holonomic]
        if k == 0:
            rank_a = int(np.linalg.matrix_rank(A)) if A.size else 0
            dof = nv - rank_a
            if task_map.m != dof:
                raise InputError(f"{model.name} has loop closures: its closures leave {dof} degrees "
                                 f"of freedom at the start (nv = {nv}, rank A = {rank_a}); the "
                                 f"task prescribes {task_map.m} ({', '.join(task.names)}); the "
                                 "inverse model needs as many (underactuated closed loops are not "
                                 "supported)")
            if passive.sum() > rank_a:
                raise InputError(f"{model.name}: {int(passive.sum())} passive joints but only "
                                 f"{rank_a} independent closure rows to hold them; the inverse "
                                 "model of underactuated closed loops is not supported")
            rows = np.sort(qr(A.T, pivoting=True)[2][:rank_a]) if rank_a else np.zeros(0, int)
        U, s, Vt = np.linalg.svd(K, full_matrices=False)
        cond_k = s[-1] / s[0] if s.size == nv and s[0] > 0 else 0.0
        Ksq = np.vstack([A[rows], K[cons.n_holonomic:]])
        Ap = A[rows][:, passive]
        sig_p = np.linalg.svd(Ap, compute_uv=False) if Ap.size else np.ones(1)
        cond_p = (sig_p[-1] / s[0] if sig_p.size == Ap.shape[1] and s[0] > 0 else 0.0) \
            if Ap.size else 1.0
        worst_k, worst_p = min(worst_k, cond_k), min(worst_p, cond_p)
        new_k = np.sign(np.linalg.det(Ksq)) if Ksq.shape[0] == nv else 0.0
        new_p = np.sign(np.linalg.det(Ap)) if Ap.size and Ap.shape[0] == Ap.shape[1] else 0.0
        between = "" if k == 0 else f"between t = {t_out[k - 1]:.4g} s and {t_out[k]:.4g} s "
        # the passive block first: for a joint task on the actuated coordinates det K = +-det A_p,
        # and its loss of rank is a parallel singularity, not a serial one
        if cond_p < _CLOSED_LOOP_SINGULAR_RTOL or (k and new_p * sign_p < 0):
            how = (f"the closure Jacobian's passive columns lose rank (sigma_min / sigma_max = "
                   f"{cond_p:.3g})" if cond_p < _CLOSED_LOOP_SINGULAR_RTOL else
                   f"the determinant of the closure Jacobian's passive columns changes sign "
                   f"{between}(the path crosses a singular configuration)")
            names = ", ".join(np.asarray(model.coordinate_names)[passive])
            return stop(k, f"parallel (direct-kinematic) singularity: {how}; the constraint "
                           f"forces cannot hold the passive joints ({names}), Aghili (2005) "
                           "eq. 64: the feedforward is unbounded")
        if cond_k < _CLOSED_LOOP_SINGULAR_RTOL or (k and new_k * sign_k < 0):
            how = (f"[A; H] loses rank (sigma_min / sigma_max = {cond_k:.3g})"
                   if cond_k < _CLOSED_LOOP_SINGULAR_RTOL else
                   f"det [A; H] changes sign {between}(the path crosses a singular configuration)")
            return stop(k, f"inverse-kinematic (serial) singularity: {how}; the task "
                           f"({', '.join(task.names)}) and the closures do not fix the joint "
                           "velocities (for an end-effector path: a leg stretched or folded, the "
                           "workspace boundary)")
        sign_k, sign_p = new_k, new_p
        K_pinv = (Vt.T / s) @ U.T
        v[k] = K_pinv @ np.concatenate([np.zeros(A.shape[0]), pd_[k]])
        gamma = cons.bias(qk, v[k])
        a[k] = K_pinv @ np.concatenate([-gamma[: A.shape[0]], pdd[k] - task_map.bias(qk, v[k])])
        ires = pd.inverse_dynamics(qk, v[k], a[k])
        q[k] = qk
        if not ires.success:
            return stop(k, ires.message)
        u[k] = B_pinv @ ires.tau
    y = np.array([output.value(x) for x in q])
    y_des = p if exact else y
    msg = (f"closed loop: closures and task solved together at {n} samples (Newton: "
           f"{iterations[0]} iterations from ik_guess, then at most {iterations[1]} a sample), "
           f"inverted by projection (method {method!r} irrelevant: no internal dynamics); "
           f"smallest sigma_min/sigma_max of [A; H] {worst_k:.3g}, of A's passive columns "
           f"{worst_p:.3g}")
    return InversionResult(t_out, q, v, a, u, y_des, y, np.zeros((n, 0)),
                           float(np.max(np.abs(y - y_des))), t0, tf, 0.0, 0.0, np.zeros(0), True,
                           msg, method, n, time.perf_counter() - start, model.input_names,
                           output.names)


def _assemble_closed_loop(cons, task_map, q, p, max_iter, tol=1e-12):
    """Newton on [phi(q); h_t(q) - p] = 0 over all coordinates, updates by ``pin.integrate``.

    Damped least squares (a tiny fixed damping relative to ||K||^2): well defined where the
    start is singular or closure rows are redundant, quadratic convergence near the answer.
    Stops below ``tol`` [m | rad], after ``max_iter`` steps, or when a step falls below
    round-off of the kinematics.

    Returns
    -------
    q : (nq,) the last iterate; K : (m_c + m_t, nv) [A; H_t] at q
    residual : float, ||[phi; h_t - p]||_inf at q [m | rad]; iterations : int
    """
    pm = cons.model.pin_model
    stalled = False
    for it in range(max_iter + 1):
        phi, A = cons.residual_and_jacobian(q)
        r = np.concatenate([phi, task_map.value(q) - p])
        K = np.vstack([A, task_map.jacobian(q)])
        res = float(np.max(np.abs(r)))
        if res < tol or it == max_iter or stalled:
            return q, K, res, it
        KtK = K.T @ K
        step = np.linalg.solve(KtK + 1e-14 * max(np.trace(KtK), 1.0) * np.eye(KtK.shape[0]),
                               K.T @ r)
        q = pin.integrate(pm, q, -step)
        stalled = bool(np.max(np.abs(step)) < 1e-15)
    raise AssertionError("unreachable")  # pragma: no cover


def _time_grid(ta, tb, dt, breaks):
    """Samples every ``dt`` from ta to tb with the breakpoints (t0, tf) on the grid exactly.

    The desired output's jerk jumps at t0 and tf (quintic time law), so the feedforward has
    kinks there; keeping them on the grid lets interpolants of u break there too.
    """
    grid = np.arange(ta, tb + 0.5 * dt, dt)
    grid = grid[grid <= tb]
    for b in breaks:
        if ta < b < tb:
            grid = grid[np.abs(grid - b) > 1e-6 * dt]
    return np.unique(np.concatenate([grid, [b for b in breaks if ta <= b <= tb], [tb]]))


def _failed(model, output, method, start, t0, tf, t_pre, t_post, lam0, message):
    e2 = np.zeros((0, model.nv))
    return InversionResult(np.zeros(0), np.zeros((0, model.nq)), e2, e2, np.zeros((0, model.nu)),
                           np.zeros((0, output.m)), np.zeros((0, output.m)),
                           np.zeros((0, 2 * int(model.passive.sum()))), np.inf, t0, tf, t_pre,
                           t_post, lam0, False, message, method, 0, time.perf_counter() - start,
                           model.input_names, output.names)


def _forward(rhs, x0, t_out, rtol, atol, max_step, limit, watch):
    """Integrate with DOP853; stop when the watched internal states exceed ``limit``."""
    def blowup(t, x):
        return limit - np.max(np.abs(x[watch])) if np.size(watch) else 1.0

    blowup.terminal = True
    sol = solve_ivp(rhs, (t_out[0], t_out[-1]), x0, method="DOP853", t_eval=t_out, rtol=rtol,
                    atol=atol, max_step=max_step, events=blowup)
    x = sol.y.T
    if sol.status == 1:
        return x, False, (f"internal dynamics diverge: a passive coordinate reached {limit:g} "
                          f"at t = {sol.t_events[0][0]:.4g} s")
    if sol.status != 0:
        return x, False, f"integration failed at t = {sol.t[-1]:.4g} s: {sol.message}"
    return x, True, "completed"


def _stable(servo, ytraj, t_out, eta0, etaf, Q0, Qf, max_nodes, tol, guess, verbose,
            initial_nodes=300):
    n = servo.nu_int
    if n == 0:
        return np.zeros((len(t_out), 0)), True, "fully actuated: no internal dynamics"
    Bs, Bu = _eigen_rows(Q0, stable=True), _eigen_rows(Qf, stable=False)

    def fun(t, x):
        y, yd, ydd = ytraj(t)  # one vectorized evaluation for all nodes
        return servo.internal_rhs_batch(y, yd, ydd, x.T).T

    def bc(xa, xb):
        return np.concatenate([Bs @ (xa - eta0), Bu @ (xb - etaf)])

    mesh = np.linspace(t_out[0], t_out[-1], min(len(t_out), initial_nodes))
    if guess is None:
        x_guess = np.tile(eta0[:, None], (1, mesh.size))
    else:
        guess = np.asarray(guess, float)
        if guess.shape != (len(t_out), 2 * n):
            raise InputError(f"guess: expected shape ({len(t_out)}, {2 * n}), got {guess.shape}")
        x_guess = np.array([np.interp(mesh, t_out, g) for g in guess.T])
    sol = solve_bvp(fun, bc, mesh, x_guess, tol=tol, max_nodes=max_nodes, verbose=verbose)
    eta = sol.sol(t_out).T
    if not sol.success:
        return eta, False, (f"boundary value problem did not converge ({sol.message}; "
                            f"{sol.niter} iterations, max residual {np.max(sol.rms_residuals):.3g}); "
                            "give a better initial guess (e.g. the linearly combined output's "
                            "solution) or loosen bvp_tol")
    return eta, True, f"converged in {sol.niter} iterations on {sol.x.size} nodes"


def _index2_euler(servo, ytraj, ta, tb, h, eta0, limit):
    """Backward Euler on q' = v, D^T M v' = D^T (tau_s - h), 0 = h(q) - y_d (Seifried 5.15-5.19)."""
    model = servo.model
    nv = model.nv
    D = servo.D
    steps = int(round((tb - ta) / h))
    t = ta + h * np.arange(steps + 1)
    q = np.empty((steps + 1, nv))
    v = np.zeros((steps + 1, nv))
    a = np.zeros((steps + 1, nv))
    u = np.zeros((steps + 1, model.nu))
    q[0] = servo.reconstruct(ta, eta0, ytraj)[0]
    a[0] = servo.accelerations(q[0], v[0], ytraj(ta)[2])
    u[0] = servo.inputs(q[0], v[0], a[0])
    dyn, out = servo.dyn, servo.output

    def residual(qn, q_prev, v_prev, y_next):
        # dynamics rows multiplied by h^2 so that both blocks are position-sized and a
        # tolerance near machine precision is reachable
        vn = (qn - q_prev) / h
        servo.counters["dynamics"] += 1
        M = dyn.mass_matrix(qn)
        dyn_res = D.T @ (M @ (qn - q_prev - h * v_prev) - h * h * (dyn.spring_forces(qn, vn)
                                                                    - dyn.nonlinear_effects(qn, vn)))
        return np.concatenate([dyn_res, out.value(qn) - y_next])

    for k in range(steps):
        args = (q[k], v[k], ytraj(t[k + 1])[0])
        qn = q[k] + h * v[k]
        for _ in range(20):
            r = residual(qn, *args)
            J = np.empty((nv, nv))
            for j in range(nv):  # forward differences: the Jacobian only steers Newton
                e = np.zeros(nv)
                e[j] = 1e-7
                J[:, j] = (residual(qn + e, *args) - r) / 1e-7
            step = np.linalg.solve(J, r)
            qn = qn - step
            # converged when the update is below 1e-11 (m or rad; the scaled system has a
            # condition number ~1e4, so steps stall near 1e-13 at round-off)
            if np.max(np.abs(step)) < 1e-11:
                break
        else:
            return (t[: k + 1], q[: k + 1], v[: k + 1], a[: k + 1], u[: k + 1], False,
                    f"backward Euler: Newton did not converge at t = {t[k + 1]:.4g} s")
        q[k + 1], v[k + 1] = qn, (qn - q[k]) / h
        a[k + 1] = (v[k + 1] - v[k]) / h
        u[k + 1] = servo.inputs(q[k + 1], v[k + 1], a[k + 1])
        if np.max(np.abs(q[k + 1, servo.iu])) > limit:
            return (t[: k + 2], q[: k + 2], v[: k + 2], a[: k + 2], u[: k + 2], False,
                    f"internal dynamics diverge at t = {t[k + 1]:.4g} s")
    return t, q, v, a, u, True, f"completed {steps} backward Euler steps of {h:g} s"


@dataclass(frozen=True)
class VerificationResult:
    """Open-loop forward simulation of the plant under a feedforward.

    Attributes
    ----------
    t : (N,) [s]; q : (N, nq); v : (N, nv)
    end_effector_error : (N,) [m] distance between reached and desired task frame points
    max_error : float [m]
    output_error : float, max |h(q) - y_d|
    success : bool; message : str
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    end_effector_error: np.ndarray
    max_error: float
    output_error: float
    success: bool
    message: str


def verify(model: MultibodyModel, result: InversionResult, task: Task, output: Output | None = None,
           rtol: float = 1e-10, atol: float = 1e-12) -> VerificationResult:
    """Simulate the plant open loop with ``result.u`` from the result's first state.

    The feedforward is interpolated by cubic splines through its samples, broken at t0 and
    tf (:meth:`InversionResult.u_interpolant`); the plant
    M a + h = B u + tau_s is integrated with DOP853 at tight tolerances, so that the
    error measures the feedforward, not the check.  Models with loop closures integrate the
    projected dynamics instead (:func:`_verify_closed_loop`); a joint task there has no
    end-effector point, its ``end_effector_error`` is NaN.
    """
    from multibody_dynamics.rigid import RigidDynamics

    from .desired import end_effector_error

    if not result.success or result.t.size < 2:
        raise InputError(f"cannot verify a failed inversion: {result.message}")
    if model.closures:
        return _verify_closed_loop(model, result, task, output, rtol, atol)
    dyn = RigidDynamics(model)
    u_spline = result.u_interpolant()
    B, nq = model.B, model.nq

    def rhs(t, x):
        return np.concatenate([x[nq:], dyn.forward_dynamics(x[:nq], x[nq:], B @ u_spline(t))])

    x0 = np.concatenate([result.q[0], result.v[0]])
    sol = solve_ivp(rhs, (result.t[0], result.t[-1]), x0, method="DOP853", t_eval=result.t,
                    rtol=rtol, atol=atol)
    q, v = sol.y[:nq].T, sol.y[nq:].T
    t = sol.t
    ee = end_effector_error(model, task, t, q)
    out_err = np.inf
    if output is not None:
        out_err = float(np.max(np.abs(np.array([output.value(qk) for qk in q])
                                      - result.y_desired[: len(t)])))
    return VerificationResult(t, q, v, ee, float(ee.max()), out_err, sol.status == 0, sol.message)


def _verify_closed_loop(model, result, task, output, rtol, atol):
    """:func:`verify` for models with loop closures: the projected dynamics (Aghili 2005
    eq. 22, ``A a + gamma = 0`` enforced on acceleration level) integrated with DOP853.

    No position projection: at these tolerances the closure drift stays at the integration
    error (reported in the message), and the motion is not altered by the check.
    """
    from multibody_dynamics.constraints import Constraints
    from multibody_dynamics.projection import ProjectedDynamics

    from .desired import end_effector_error

    if model.nq != model.nv:
        raise InputError(f"verify: {model.name} has loop closures and nq = {model.nq} != nv = "
                         f"{model.nv}; the open-loop check of closed loops integrates q' = v and "
                         "needs nq == nv (use multibody_dynamics.simulate)")
    cons = Constraints(model)
    pd = ProjectedDynamics(model, cons)
    u_spline = result.u_interpolant()
    B, nq = model.B, model.nq

    def rhs(t, x):
        return np.concatenate([x[nq:], pd.acceleration(x[:nq], x[nq:], B @ u_spline(t))])

    x0 = np.concatenate([result.q[0], result.v[0]])
    sol = solve_ivp(rhs, (result.t[0], result.t[-1]), x0, method="DOP853", t_eval=result.t,
                    rtol=rtol, atol=atol)
    q, v, t = sol.y[:nq].T, sol.y[nq:].T, sol.t
    drift = max((float(np.max(np.abs(cons.residual(qk)))) for qk in q), default=0.0)
    if any("." in n and n.split(".")[0] not in model.coordinate_names for n in task.names):
        ee = end_effector_error(model, task, t, q)
        max_ee = float(ee.max())
    else:  # a joint task: no end-effector point to measure
        ee, max_ee = np.full(t.size, np.nan), np.nan
    out_err = np.inf
    if output is not None:
        out_err = float(np.max(np.abs(np.array([output.value(qk) for qk in q])
                                      - result.y_desired[: len(t)])))
    msg = f"{sol.message} (projected dynamics; closure drift {drift:.3g})"
    return VerificationResult(t, q, v, ee, max_ee, out_err, sol.status == 0, msg)
