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
* ``"causal"``: causal inversion with free trajectory parameters (Seifried eqs. 3.77-3.82,
  4.129-4.135): the desired output gets ``n_free`` extra shape terms during the motion,
  chosen by a Newton-type least-squares iteration so that the forward-integrated internal
  dynamics end on the final equilibrium; no pre-/post-actuation, the output deviates from
  the nominal one during the motion (:mod:`.causal`).

Failures (diverging internal dynamics, singular decoupling matrix, non-convergent BVP, an
interval too short for the pre-actuation) end in ``success=False`` with a message naming
the cause; the samples computed up to then are kept.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import solve_bvp, solve_ivp

from multibody_dynamics.errors import InputError, MultibodyError, SolverError
from multibody_dynamics.model import MultibodyModel

from ..outputs import Output
from ..tasks import Task
from .desired import DesiredOutput
from .servo import ServoConstraints

METHODS = ("classical", "ode", "index1", "index2_euler", "stable", "causal")


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
        Start of the inverse kinematics of the desired output (selects the branch).
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


def _invert(model, output, task, method, servo, desired, start, t0, tf, dt, t_start, t_end, rtol,
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


def _invert_closed_loop(model, output, task, method, dt, t_start, t_end, ik_guess, start):
    """Closed loops whose independent coordinates are the task's joints (Aghili 2005 Sect. 7).

    The task prescribes the independent joint coordinates theta (e.g. the five-bar's motors);
    the dependent ones follow from the closure equations phi(q) = 0 (Newton, warm-started),
    v = J theta' from A v = 0, a from A a + gamma = 0, and the actuation is the projection
    method's minimum-norm inverse dynamics with zero effort on passive joints (eqs. 45,
    59-62).  Other outputs of closed-loop models are not supported yet.
    """
    from multibody_dynamics.constraints import Constraints
    from multibody_dynamics.projection import ProjectedDynamics

    t0, tf = task.law.t0, task.law.tf
    names = task.names
    if tuple(output.names) != tuple(names) or any(n not in model.coordinate_names for n in names):
        raise InputError(f"{model.name} has loop closures: inversion needs the task to prescribe "
                         f"joint coordinates (independent coordinates) and the output to be "
                         f"those joints; got task {names}, output {output.names}")
    ind = np.array([model.coordinate_names.index(n) for n in names])
    dep = np.setdiff1d(np.arange(model.nv), ind)
    cons = Constraints(model)
    pd = ProjectedDynamics(model, cons)
    ta = min(0.0, t0) if t_start is None else t_start
    tb = tf + 0.5 if t_end is None else t_end
    t_out = _time_grid(ta, tb, dt, (t0, tf))
    p, pd_, pdd = task(t_out)
    q = np.empty((t_out.size, model.nq))
    v = np.zeros((t_out.size, model.nv))
    a = np.zeros((t_out.size, model.nv))
    u = np.zeros((t_out.size, model.nu))
    qk = model.neutral() if ik_guess is None else np.array(ik_guess, float)
    B_pinv = np.linalg.pinv(model.B)
    for k in range(t_out.size):
        qk[ind] = p[k]
        for _ in range(50):  # Newton on the dependent coordinates
            phi, A = cons.residual_and_jacobian(qk)
            if np.max(np.abs(phi)) < 1e-12:
                break
            qk[dep] -= np.linalg.lstsq(A[:, dep], phi, rcond=None)[0]
        else:
            return _failed(model, output, method, start, t0, tf, 0.0, 0.0, np.zeros(0),
                           f"the closure cannot be assembled at t = {t_out[k]:.4g} s for "
                           f"{dict(zip(names, np.round(p[k], 4)))} (|phi| = "
                           f"{np.max(np.abs(phi)):.3g}): out of reach or a singular configuration")
        A = cons.jacobian(qk)
        v[k, ind] = pd_[k]
        v[k, dep] = -np.linalg.lstsq(A[:, dep], A[:, ind] @ pd_[k], rcond=None)[0]
        A, gamma = cons.jacobian_and_bias(qk, v[k])
        a[k, ind] = pdd[k]
        a[k, dep] = -np.linalg.lstsq(A[:, dep], A[:, ind] @ pdd[k] + gamma, rcond=None)[0]
        res = pd.inverse_dynamics(qk, v[k], a[k])
        if not res.success:
            return _failed(model, output, method, start, t0, tf, 0.0, 0.0, np.zeros(0),
                           f"t = {t_out[k]:.4g} s: {res.message}")
        q[k], u[k] = qk, B_pinv @ res.tau
    y = np.array([output.value(qk) for qk in q])
    return InversionResult(t_out, q, v, a, u, p, y, np.zeros((t_out.size, 0)),
                           float(np.max(np.abs(y - p))), t0, tf, 0.0, 0.0, np.zeros(0), True,
                           "closed loop: assembled and inverted by projection at every sample",
                           method, t_out.size, time.perf_counter() - start, model.input_names,
                           output.names)


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
    error measures the feedforward, not the check.
    """
    from multibody_dynamics.rigid import RigidDynamics

    from .desired import end_effector_error

    if not result.success or result.t.size < 2:
        raise InputError(f"cannot verify a failed inversion: {result.message}")
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
