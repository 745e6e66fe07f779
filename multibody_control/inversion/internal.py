"""Integration of the internal dynamics of an inverse model (Seifried 2014 Ch. 3, 5).

The methods ``"classical"``, ``"ode"``, ``"index1"``, ``"index2_euler"`` and ``"stable"`` of
:func:`~multibody_control.inversion.methods.invert` (see that module's docstring) and the
pieces other drivers share:

* :func:`time_grid` -- the sample times, with the breakpoints t0 and tf on the grid;
* :func:`eigen_rows`, :func:`decay_time` -- the stable/unstable eigenspaces and decay times of
  the linearized zero dynamics (boundary conditions and pre-/post-actuation);
* :func:`integrate_forward` -- DOP853 with a divergence event (classical inversion);
* :func:`solve_stable` -- the two-point boundary value problem of stable inversion
  (Def. 3.7) with ``scipy.integrate.solve_bvp``;
* :func:`index2_euler` -- backward Euler on the index-2 servo-constraint DAE (5.15)-(5.17);
* :class:`Recorder` -- ``q, v, a, u`` sampled along an internal-state trajectory.

Any :class:`~.protocol.InverseModel` can be driven (rigid servo-constraints, flexible chains,
closed flexible loops).  Imports within the package: :mod:`.result`, :mod:`.protocol`; the
method entry points (``solve_*``) take a :class:`Problem` built by ``methods.invert``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_bvp, solve_ivp

from multibody_dynamics.errors import InputError, MultibodyError
from multibody_dynamics.interruptible import (
    INTERRUPTS,
    reraise_unless_interrupt,
    solve_ivp_keeping,
)
from multibody_dynamics.model import MultibodyModel

from ..outputs import Output
from ..tasks import Task
from .protocol import InverseModel
from .result import InversionInterrupted, InversionResult

#: Start of the message of an integration that Ctrl-C stopped (:func:`integrate_forward`,
#: :meth:`Recorder.sample`): its samples are kept and the inversion raises
#: :class:`.result.InversionInterrupted` with them.
INTERRUPTED = "interrupted (Ctrl-C)"


@dataclass(frozen=True)
class Problem:
    """What an inversion method is given by :func:`~.methods.invert`.

    Attributes
    ----------
    model : MultibodyModel; output : Output; task : Task
    method : str, the registry name of the method
    start : float, ``time.perf_counter()`` when the inversion started [s]
    servo : InverseModel or None, the servo-constraints of ``output`` (None for methods
        that do not need them, e.g. ``"quasi_static"``)
    desired : callable or None, ``desired(t) -> (y_d, y_d', y_d'')`` (a
        :class:`~.desired.DesiredOutput`), None with ``servo``
    """

    model: MultibodyModel
    output: Output
    task: Task
    method: str
    start: float
    servo: InverseModel | None = None
    desired: object | None = None

    def failure(self, message: str, **kwargs) -> InversionResult:
        """:meth:`InversionResult.failure` for this problem (keywords as there; ``nfev``
        defaults to the servo-constraints' dynamics evaluations so far)."""
        if self.servo is not None:
            kwargs.setdefault("nfev", self.servo.counters["dynamics"])
        t0, tf = self.task.law.t0, self.task.law.tf
        return InversionResult.failure(self.model, self.output, self.method, message,
                                       start=self.start, t0=t0, tf=tf, **kwargs)


def time_grid(ta, tb, dt, breaks):
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


def eigen_rows(Q, stable: bool) -> np.ndarray:
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


def decay_time(lam, tol):
    """Time for the slowest mode among ``lam`` to decay by ``tol`` (0 when there is none)."""
    rates = np.abs(np.real(lam))
    return float(np.log(1.0 / tol) / rates.min()) if rates.size else 0.0


class Recorder:
    """``q, v, a, u`` (each (N, .)) of ``servo`` along internal states ``eta`` (N, 2 n).

    With ``keep_on_interrupt``, Ctrl-C during :meth:`sample` keeps the rows reconstructed
    before it: they are returned (N' < N rows) and ``interrupted`` is set True (without it,
    Ctrl-C raises ``KeyboardInterrupt`` as usual).
    """

    def __init__(self, servo: InverseModel, ytraj, keep_on_interrupt: bool = False):
        self.servo, self.ytraj = servo, ytraj
        self.keep_on_interrupt = keep_on_interrupt
        self.interrupted = False

    def sample(self, t, eta):
        rows = []
        try:
            for tk, ek in zip(t, eta):
                rows.append(self.servo.reconstruct(tk, ek, self.ytraj))
        except INTERRUPTS as exc:
            reraise_unless_interrupt(exc)
            if not (self.keep_on_interrupt and rows):  # nothing to keep: interrupt as usual
                raise
            self.interrupted = True
        return [np.array([r[k] for r in rows]).reshape(len(rows), -1) for k in range(4)]


def record(servo: InverseModel, ytraj, t_out, eta, status: bool, msg: str):
    """``(t_out, q, v, a, u, eta, status, msg)`` reconstructed along ``eta`` (N, 2 n) by a
    :class:`Recorder`; cut where Ctrl-C stopped the reconstruction (the samples before it are
    complete; the message then starts with :data:`INTERRUPTED`)."""
    recorder = Recorder(servo, ytraj, keep_on_interrupt=True)
    q, v, a, u = recorder.sample(t_out, eta)
    if recorder.interrupted:
        n = len(q)
        status, msg = False, (f"{INTERRUPTED} while reconstructing the motion at t = "
                              f"{t_out[min(n, len(t_out) - 1)]:.6g} s; the {n} samples before "
                              "are kept")
        t_out, eta = t_out[:n], eta[:n]
    return t_out, q, v, a, u, eta, status, msg


def integrate_forward(rhs, x0, t_out, rtol, atol, max_step, limit, watch,
                      interruptible: bool = False):
    """Integrate with DOP853; stop when the watched internal states exceed ``limit``.

    Returns ``(x (N', n), success, message)``; N' < N when the integration stopped early.
    With ``interruptible``, Ctrl-C ends the integration at the end of the solver step under
    way, keeping the samples up to there
    (:func:`~multibody_dynamics.interruptible.solve_ivp_keeping`), and the message starts
    with :data:`INTERRUPTED`: the caller must turn that into an interrupt (without it,
    Ctrl-C raises ``KeyboardInterrupt`` as usual).
    """
    def blowup(t, x):
        return limit - np.max(np.abs(x[watch])) if np.size(watch) else 1.0

    blowup.terminal = True
    if interruptible:
        sol, stopped = solve_ivp_keeping(rhs, (t_out[0], t_out[-1]), x0, method="DOP853",
                                         t_eval=t_out, rtol=rtol, atol=atol,
                                         max_step=max_step, events=blowup)
    else:
        sol, stopped = solve_ivp(rhs, (t_out[0], t_out[-1]), x0, method="DOP853",
                                 t_eval=t_out, rtol=rtol, atol=atol, max_step=max_step,
                                 events=blowup), None
    x = sol.y.T
    if stopped is not None:
        return x, False, f"{INTERRUPTED} at t = {stopped:.6g} s; the samples until then are kept"
    if sol.status == 1:
        return x, False, (f"internal dynamics diverge: a passive coordinate reached {limit:g} "
                          f"at t = {sol.t_events[0][0]:.4g} s")
    if sol.status != 0:
        return x, False, f"integration failed at t = {sol.t[-1]:.4g} s: {sol.message}"
    return x, True, "completed"


def solve_stable(servo: InverseModel, ytraj, t_out, eta0, etaf, Q0, Qf, max_nodes, tol, guess,
                 verbose, initial_nodes=300):
    """Stable inversion (Seifried Def. 3.7): the boundary value problem for eta on ``t_out``.

    ``B^s (eta(ta) - eta0) = 0`` and ``B^u (eta(tb) - etaf) = 0`` with B^s, B^u the left
    eigenvectors of the stable eigenvalues of ``Q0`` and of the unstable ones of ``Qf``
    (labels of the printed (3.76) swapped, see NOTES.md), ``scipy.integrate.solve_bvp``.

    Returns ``(eta (N, 2 n), success, message)``.

    Raises
    ------
    InputError
        ``guess`` is not (N, 2 n).
    """
    n = servo.nu_int
    if n == 0:
        return np.zeros((len(t_out), 0)), True, "fully actuated: no internal dynamics"
    Bs, Bu = eigen_rows(Q0, stable=True), eigen_rows(Qf, stable=False)

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
                            f"{sol.niter} iterations, max residual "
                            f"{np.max(sol.rms_residuals):.3g}); give a better initial guess (e.g. "
                            "the linearly combined output's "
                            "solution) or loosen bvp_tol")
    return eta, True, f"converged in {sol.niter} iterations on {sol.x.size} nodes"


def index2_euler(servo, ytraj, ta, tb, h, eta0, limit):
    """Backward Euler on q' = v, D^T M v' = D^T (tau_s - h), 0 = h(q) - y_d (Seifried 5.15-5.19).

    ``servo`` is a :class:`~.servo.ServoConstraints` (it needs ``D``, ``dyn``, ``output``).
    Returns ``(t, q, v, a, u, success, message)``, truncated where Newton failed or the
    passive coordinates exceeded ``limit``.
    """
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
        dyn_res = D.T @ (M @ (qn - q_prev - h * v_prev)
                         - h * h * (dyn.spring_forces(qn, vn) - dyn.nonlinear_effects(qn, vn)))
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


# ---------------------------------------------------------------- method entry points
def solve_classical(problem: Problem, options) -> InversionResult:
    """Method ``"classical"``: forward integration of eta in the coordinate transformation."""
    return _invert_internal(problem, options)


def solve_ode(problem: Problem, options) -> InversionResult:
    """Method ``"ode"``: the servo-constraint ODE form (5.21)-(5.22) in (q, v)."""
    return _invert_internal(problem, options)


def solve_index1(problem: Problem, options) -> InversionResult:
    """Method ``"index1"``: the index-1 form (5.20), (q, v_u) integrated."""
    return _invert_internal(problem, options)


def solve_index2_euler(problem: Problem, options) -> InversionResult:
    """Method ``"index2_euler"``: backward Euler on the index-2 DAE (:func:`index2_euler`)."""
    return _invert_internal(problem, options)


def solve_stable_inversion(problem: Problem, options) -> InversionResult:
    """Method ``"stable"``: stable inversion on the extended interval (:func:`solve_stable`)."""
    return _invert_internal(problem, options)


def _invert_internal(problem: Problem, options) -> InversionResult:
    """The five servo-constraint methods: common set-up, then the method's integration."""
    run = _InternalInversion(problem, options)
    failure = run.linearize()
    if failure is None:
        failure = run.interval()
    if failure is not None:
        return failure
    try:
        trajectory = run.integrate()
    except MultibodyError as exc:
        return problem.failure(str(exc), t_pre=run.t_pre, t_post=run.t_post,
                               eigenvalues=run.lam0, nfev=run.servo.counters["dynamics"])
    except INTERRUPTS as exc:  # outside the stages that keep samples (e.g. solve_bvp)
        reraise_unless_interrupt(exc)
        stage = ("while solving the boundary value problem: it has no solved sample before it "
                 "converges" if run.stable else "before any sample was complete")
        raise InversionInterrupted(problem.failure(
            f"{INTERRUPTED} {stage}", t_pre=run.t_pre, t_post=run.t_post,
            eigenvalues=run.lam0)) from None
    return run.result(*trajectory)


class _InternalInversion:
    """The state :func:`_invert_internal` builds step by step for ``problem`` and ``options``.

    :meth:`linearize` sets the equilibria ``eta0, etaf`` (2 n,) at t0 and tf, the zero-dynamics
    Jacobians ``Q0, Qf`` (2 n, 2 n) and their eigenvalues ``lam0, lamf``; :meth:`interval` sets
    ``t_pre, t_post`` [s], the interval ``ta, tb`` [s], the sample times ``t_out`` (N,) and
    the tabulated desired output ``ytraj``; :meth:`integrate` runs the method and
    :meth:`result` assembles the :class:`InversionResult`.
    """

    def __init__(self, problem: Problem, options):
        self.problem, self.options = problem, options
        self.servo = problem.servo
        self.n = self.servo.nu_int
        self.t0, self.tf = problem.task.law.t0, problem.task.law.tf
        self.stable = problem.method == "stable"

    def linearize(self) -> InversionResult | None:
        """Equilibria and linearized zero dynamics at t0 and tf; a failure if not hyperbolic."""
        servo, desired = self.servo, self.problem.desired
        try:
            y0, yf = desired(self.t0)[0], desired(self.tf)[0]
            self.eta0, self.etaf = servo.equilibrium(y0), servo.equilibrium(yf)
            if self.n:
                self.Q0, _ = servo.zero_dynamics_jacobian(y0, self.eta0)
                self.Qf, _ = servo.zero_dynamics_jacobian(yf, self.etaf)
        except MultibodyError as exc:
            return self.problem.failure(str(exc))
        if self.n:
            self.lam0, self.lamf = np.linalg.eigvals(self.Q0), np.linalg.eigvals(self.Qf)
        else:
            self.Q0 = self.Qf = np.zeros((0, 0))
            self.lam0 = self.lamf = np.zeros(0)
        lam0 = self.lam0
        if np.any(np.abs(np.real(np.concatenate([lam0, self.lamf]))) < 1e-9):
            return self.problem.failure("zero dynamics not hyperbolic (eigenvalue on the "
                                        f"imaginary axis): {np.round(lam0, 4).tolist()}; stable "
                                        "inversion is not defined", eigenvalues=lam0)
        return None

    def interval(self) -> InversionResult | None:
        """Pre-/post-actuation, the interval, its samples and the tabulated desired output; a
        failure if ``t_start`` leaves too little pre-actuation (stable inversion)."""
        options, t0, tf, lam0 = self.options, self.t0, self.tf, self.lam0
        dt, t_start, t_end = options.dt, options.t_start, options.t_end
        unstable = lam0[np.real(lam0) > 0]
        stable = self.stable
        t_pre = decay_time(unstable, options.decay_tol) if stable else 0.0
        lamf = self.lamf
        t_post = decay_time(lamf[np.real(lamf) < 0], options.decay_tol) if stable else 0.5
        if stable:
            t_post = min(t_post, 5.0)  # lightly damped stable modes: cap, they are not amplified
            ta = t0 - t_pre if t_start is None else t_start
            if ta > t0 - t_pre + 1e-6 * max(t_pre, 1.0):  # slack: t_pre comes from an FD Jacobian
                return self.problem.failure(
                    f"pre-actuation needs {t_pre:.3g} s before t0 = {t0:g} s (slowest unstable "
                    f"zero-dynamics mode {np.min(unstable.real):.3g} 1/s decays by "
                    f"{options.decay_tol:g}), but the interval starts at {ta:g} s; start at "
                    f"{t0 - t_pre:.4g} s or earlier", t_pre=t_pre, t_post=t_post,
                    eigenvalues=lam0)
        else:
            ta = min(0.0, t0) if t_start is None else t_start
        tb = (tf + t_post) if t_end is None else t_end
        if not tb > ta:
            raise InputError(f"t_end = {tb} s must be after t_start = {ta} s")
        self.t_pre, self.t_post, self.ta, self.tb = t_pre, t_post, ta, tb
        self.t_out = time_grid(ta, tb, dt, (t0, tf))
        # exact samples of y_d on a grid holding t0 and tf, interpolated (quintic Hermite) in
        # between
        grid = np.unique(np.concatenate([np.arange(ta, tb + dt, min(dt, 1e-3)), [t0, tf]]))
        self.ytraj = self.problem.desired.tabulate(grid[(grid >= ta - 1e-12)])
        return None

    def integrate(self):
        """The method's integration: ``(t_out, q, v, a, u, eta, status, message)``, cut
        where it stopped."""
        method = self.problem.method
        if self.stable:
            return self._stable()
        if method == "classical":
            return self._classical()
        if method == "ode":
            return self._ode()
        if method == "index1":
            return self._index1()
        return self._index2_euler()

    def _max_step(self, default: float) -> float:
        """``options.max_step`` [s], or ``default`` when it is None."""
        return self.options.max_step if self.options.max_step is not None else default

    def _eta(self, q, v) -> np.ndarray:
        """Internal states (N, 2 n) of the samples ``q`` (N, nq), ``v`` (N, nv)."""
        return np.column_stack([q[:, self.servo.iu], v[:, self.servo.iu]])

    def _along(self, t_out, q, v):
        """``(a, u, eta)`` at the samples ``t_out, q, v`` of an integration in (q, v)."""
        servo, ytraj = self.servo, self.ytraj
        a = np.array([servo.accelerations(qk, vk, ytraj(tk)[2])
                      for tk, qk, vk in zip(t_out, q, v)])
        u = np.array([servo.inputs(qk, vk, ak) for qk, vk, ak in zip(q, v, a)])
        return a, u, self._eta(q, v)

    def _stable(self):
        """Method ``"stable"``: :func:`solve_stable` on the extended interval."""
        o = self.options
        eta, status, msg = solve_stable(self.servo, self.ytraj, self.t_out, self.eta0, self.etaf,
                                        self.Q0, self.Qf, o.max_nodes, o.bvp_tol, o.guess,
                                        o.verbose)
        return record(self.servo, self.ytraj, self.t_out, eta, status, msg)

    def _classical(self):
        """Method ``"classical"``: eta integrated forward."""
        o, servo, ytraj, dt = self.options, self.servo, self.ytraj, self.options.dt
        # nonlinear outputs solve the servo-constraints by Newton in every evaluation,
        # warm-started from the previous one: keep steps at most dt so that it stays close
        step = self._max_step(10 * dt if self.problem.output.linear else dt)
        eta, status, msg = integrate_forward(lambda t, x: servo.internal_rhs(t, x, ytraj),
                                             self.eta0, self.t_out, o.rtol, o.atol, step,
                                             o.eta_limit, np.arange(self.n), interruptible=True)
        return record(servo, ytraj, self.t_out[: len(eta)], eta, status, msg)

    def _ode(self):
        """Method ``"ode"``: (q, v) integrated forward (5.21)-(5.22)."""
        o, servo, ytraj = self.options, self.servo, self.ytraj
        x0 = np.concatenate(servo.reconstruct(self.ta, self.eta0, ytraj)[:2])
        nq = self.problem.model.nq

        def rhs(t, x):
            return np.concatenate([x[nq:], servo.accelerations(x[:nq], x[nq:], ytraj(t)[2])])

        x, status, msg = integrate_forward(rhs, x0, self.t_out, o.rtol, o.atol,
                                           self._max_step(10 * o.dt), o.eta_limit, servo.iu,
                                           interruptible=True)
        t_out = self.t_out[: len(x)]
        q, v = x[:, :nq], x[:, nq:]
        return (t_out, q, v, *self._along(t_out, q, v), status, msg)

    def _index1(self):
        """Method ``"index1"``: (q, v_u) integrated forward (5.20)."""
        o, servo, ytraj = self.options, self.servo, self.ytraj
        q0 = servo.reconstruct(self.ta, self.eta0, ytraj)[0]
        nq = self.problem.model.nq

        def full_v(t, x):
            return servo.solve_velocities(x[:nq], ytraj(t)[1], x[nq:])

        def rhs(t, x):
            v = full_v(t, x)
            acc = servo.accelerations(x[:nq], v, ytraj(t)[2])
            return np.concatenate([v, acc[servo.iu]])

        x, status, msg = integrate_forward(
            rhs, np.concatenate([q0, self.eta0[self.n:]]), self.t_out, o.rtol, o.atol,
            self._max_step(10 * o.dt), o.eta_limit, servo.iu, interruptible=True)
        t_out = self.t_out[: len(x)]
        q = x[:, :nq]
        v = np.array([full_v(tk, xk) for tk, xk in zip(t_out, x)])
        return (t_out, q, v, *self._along(t_out, q, v), status, msg)

    def _index2_euler(self):
        """Method ``"index2_euler"``: :func:`index2_euler` (backward Euler)."""
        o = self.options
        t_out, q, v, a, u, status, msg = index2_euler(self.servo, self.ytraj, self.ta, self.tb,
                                                      o.euler_dt or o.dt, self.eta0,
                                                      o.eta_limit)
        return t_out, q, v, a, u, self._eta(q, v), status, msg

    def result(self, t_out, q, v, a, u, eta, status, msg) -> InversionResult:
        """The :class:`InversionResult` of the integration's samples (N,), (N, .)."""
        problem, servo, lam0 = self.problem, self.servo, self.lam0
        model, output = problem.model, problem.output
        if not status and not self.stable and np.any(np.real(lam0) > 0):
            msg += (f"; the zero dynamics are unstable (eigenvalues "
                    f"{np.round(lam0[np.real(lam0) > 0], 3).tolist()} 1/s): the system is "
                    "non-minimum phase for this output, use method 'stable' (stable inversion) "
                    "or 'causal'")
        y_des = np.array([self.ytraj(tk)[0] for tk in t_out])
        y = np.array([output.value(qk) for qk in q])
        err = float(np.max(np.abs(y - y_des))) if len(y) else np.inf
        if status and not np.all(np.isfinite(u)):
            status, msg = False, "the feedforward contains NaN/inf"
        result = InversionResult(t_out, q, v, a, u, y_des.reshape(len(t_out), -1),
                                 y.reshape(len(t_out), -1), eta, err, self.t0, self.tf,
                                 self.t_pre, self.t_post, lam0, bool(status), msg,
                                 problem.method, servo.counters["dynamics"],
                                 time.perf_counter() - problem.start, model.input_names,
                                 output.names)
        if msg.startswith(INTERRUPTED):  # Ctrl-C: the caller writes the samples kept
            raise InversionInterrupted(result)
        return result
