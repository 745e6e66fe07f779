"""Causal inversion with free trajectory parameters (Seifried 2014 Sect. 3.2.3 and 4.3).

Classical inversion (Def. 3.6) integrates the internal dynamics forward from the initial
equilibrium; for a non-minimum-phase output it diverges.  Stable inversion (Def. 3.7)
keeps them bounded at the price of pre- and post-actuation.  Causal inversion (Graichen
et al., in Seifried eqs. 3.77-3.82 and 4.129-4.135) keeps the start at rest and instead
lets the desired output deviate from the nominal one during the motion: the output is
augmented with free parameters w chosen so that the forward solution ends on the final
equilibrium.

Equations (the OCR of the book is damaged; this is the reading used here)::

    x(t0) = x0,  x(tf) = xf,   y_d(t0) = h(x0),  y_d(tf) = h(xf)            (3.77)-(3.78)
    eta0 = eta(x0),  etaf = eta(xf),  y_d', y_d'' zero at t0 and tf          (3.79)-(3.80)
    y_d(t) -> y_d(t, w),  w: n - r free parameters                           (3.81)
    eta' = q(xi_d(t, w), eta) + p(xi_d, eta) alpha^-1 (-beta(xi_d, eta) + y_d^(r)(t, w)),
           eta(t0) = eta0,  eta(tf) = etaf                                   (3.82)

for the multibody form with the linearly combined or any output (4.134)-(4.135)::

    eta = (q_u, v_u),  eta(t0) = (q_u0, 0),  eta(tf) = (q_uf, 0),

the internal dynamics being the servo-constraint ODE of :class:`ServoConstraints`
(B_a = I, B_u = 0 in the book's (4.134); the general case here).  The internal state has
n - r = 2 n_u components, so 2 n_u conditions at tf need 2 n_u free parameters: the
whole internal state, not only its unstable part B^u (eta(tf) - etaf) (the condition
(3.76) of stable inversion), must reach the equilibrium; otherwise the stable modes
would still ring after tf and the input would not be constant there.

Parametrization (ours; the book names polynomials or cosine series): parameter k adds
``w_k phi_j(s) e_i`` to output row i = ``free_rows[k % len(free_rows)]``, with
j = k // len(free_rows), s = (t - t0) / (tf - t0) and::

    phi_j(s) = 64 s^3 (1 - s)^3 P_j(2 s - 1)          (P_j: Legendre polynomial)

so that w_k is, for j = 0, the deviation at mid-motion in the row's unit (m or rad), and
phi_j, phi_j', phi_j'' vanish at t0 and tf: the modified output starts and ends at the
nominal rest points with continuous velocity and acceleration (continuous input).

Solution: the end condition is solved by a Newton-type least-squares iteration
(``scipy.optimize.least_squares``) on forward integrations of the internal dynamics.
The unstable zero dynamics amplify integration errors by exp(lambda_u (tf - t0)) (about
1e12 for the Sect. 4.2.7 arm over 1 s), which single shooting cannot survive, so the
motion interval is split into ``segments`` shooting intervals (multiple shooting, each
amplifying by at most e, i.e. lambda_u h <= 1): the unknowns are w and the internal
states at the inner segment starts (first guess: the quasi-static passive coordinates),
the residuals the continuity defects and eta(tf) - etaf.  The first
segment starts at eta0 exactly, so the result is causal: at rest until t0, at rest from tf
(eta held at etaf, the remaining end-state error is reported).  All segments and the
finite-difference perturbations are integrated together, as one batch of rows for
:meth:`ServoConstraints.internal_rhs_batch`, on one DOP853 step sequence (so that the
differences are smooth in the perturbation).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.polynomial import Polynomial
from numpy.polynomial.legendre import leg2poly
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares

from multibody_dynamics.errors import InputError, MultibodyError

from .internal import Problem, Recorder, eigen_rows, time_grid
from .result import InversionResult

#: growth allowed on one shooting segment, exp(lambda_u h): longer segments let the
#: strongly driven internal state of a poor guess (w = 0, xi = eta0) run into singular
#: configurations before the first Newton step (Sect. 4.2.7 arm: 10 segments fail, 20 work)
_SEGMENT_GROWTH = math.e


@dataclass(frozen=True)
class CausalInversionResult(InversionResult):
    """:class:`InversionResult` of causal inversion, with the free-parameter solution.

    ``y_desired`` is the *modified* output (the one the feedforward reproduces).

    Attributes
    ----------
    y_nominal : (N, m) the task's output trajectory before modification
    free_parameters : (n_free,) w, in the unit of its output row (m or rad)
    free_rows : (n_free,) names of the output row each parameter acts on
    output_deviation : float, max |y_desired - y_nominal| over samples and rows
    end_state_error : float, max |eta(tf) - etaf| (rad, rad/s) before eta is held at etaf
    unstable_end_error : float, max |B^u (eta(tf) - etaf)| (the stable-inversion condition)
    max_defect : float, largest continuity defect between shooting segments
    segments : int; iterations : int (Newton steps: Jacobian evaluations)
    """

    y_nominal: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    free_parameters: np.ndarray = field(default_factory=lambda: np.zeros(0))
    free_rows: tuple[str, ...] = ()
    output_deviation: float = np.inf
    end_state_error: float = np.inf
    unstable_end_error: float = np.inf
    max_defect: float = np.inf
    segments: int = 0
    iterations: int = 0


class _Diverged(Exception):
    pass


class ShapedOutput:
    """Desired output with free parameters: ``t -> (y_d, y_d', y_d'')`` (Seifried eq. 3.81).

    Parameters
    ----------
    nominal : callable
        ``t -> (y, y', y'')`` for scalar t ((m,) each) or a time array ((K, m) each).
    t0, tf : float
        Motion interval [s]; the shape functions vanish with two derivatives outside it.
    rows : (n_free,) int
        Output row of each parameter.
    shapes : (n_free,) int
        Legendre index j of each parameter's shape function.
    m : int
        Number of output rows.
    w : (n_free,), optional
        Parameter values (default zero: the nominal output).
    """

    def __init__(self, nominal, t0: float, tf: float, rows, shapes, m: int, w=None):
        self.nominal, self.t0, self.T = nominal, float(t0), float(tf - t0)
        rows = np.asarray(rows, int)
        self.E = np.zeros((rows.size, m))
        self.E[np.arange(rows.size), rows] = 1.0
        bump = 64 * Polynomial([0, 0, 0, 1]) * Polynomial([1, -1]) ** 3
        polys = [bump * Polynomial(leg2poly(np.eye(j + 1)[j]))(Polynomial([-1, 2]))
                 for j in shapes]
        # monomial coefficients (ascending powers of s) of phi, phi', phi'': (deg + 1, n_free)
        deg = 6 + max(shapes, default=0)
        self._coef = [np.zeros((deg + 1, len(polys))) for _ in range(3)]
        for k, p in enumerate(polys):
            for d in range(3):
                c = p.deriv(d).coef
                self._coef[d][: c.size, k] = c
        self._powers = np.arange(deg + 1)
        self.w = np.zeros(rows.size) if w is None else np.asarray(w, float)

    def basis(self, t):
        """phi, phi', phi'' (in time) of every parameter at times t: each (K, n_free)."""
        s = np.clip((np.atleast_1d(np.asarray(t, float)) - self.t0) / self.T, 0.0, 1.0)
        V = s[:, None] ** self._powers
        return [V @ c / self.T**d for d, c in enumerate(self._coef)]

    def deviation(self, t, w):
        """(dy, dy', dy'') each (K, m) for parameters w, one row per time or (K, n_free)."""
        return [(b * w) @ self.E for b in self.basis(t)]

    def __call__(self, t):
        scalar = np.ndim(t) == 0
        y = self.nominal(t)
        dy = self.deviation(t, self.w)
        if scalar:
            return tuple(a + b[0] for a, b in zip(y, dy))
        return tuple(a + b for a, b in zip(y, dy))


def invert_causal(model, output, task, servo, desired, *, dt: float = 1e-3,
                  t_start: float | None = None, t_end: float | None = None, rtol: float = 1e-9,
                  atol: float = 1e-11, eta_limit: float = 10.0, n_free: int | None = None,
                  free_rows=None, segments: int | None = None, end_tol: float = 1e-8,
                  max_iter: int = 30, verbose: int = 0) -> CausalInversionResult:
    """Causal inversion with free trajectory parameters (called by :func:`invert`).

    Parameters
    ----------
    model, output, task : the system, its output and the desired task
    servo : ServoConstraints
    desired : DesiredOutput
        The nominal desired output of the task.
    dt : float
        Sample spacing of the result [s].
    t_start, t_end : float, optional
        Interval of the result [s], default min(0, t0) .. tf + 0.5 s; it must contain the
        motion interval [t0, tf] (the system is at rest outside it).
    rtol, atol : float
        DOP853 tolerances of the internal-dynamics integration.
    eta_limit : float
        |internal state| (rad, rad/s, m, m/s) above this counts as divergence.
    n_free : int, optional
        Number of free parameters w, at least the number of internal states 2 n_u.
        Default 2 n_u (Seifried's n - r: as many parameters as end conditions, a square
        Newton system).  More parameters leave the end conditions underdetermined; the
        near-minimum-norm w is taken (a 1e-6 Tikhonov term on w).
    free_rows : sequence of int or str, optional
        Output rows (index or name) that carry the free parameters, cycled over by the
        parameters.  Default: the last output row (for the linearly combined output of
        the Sect. 4.2.7 arm, y3 = alpha2 + beta/2, the row the passive link is coupled to:
        it needs the smallest deviation).
    segments : int, optional
        Shooting segments on [t0, tf]; default such that the fastest unstable zero-dynamics
        mode grows by at most a factor e on a segment, ceil(lambda_u (tf - t0)) (1 for
        minimum-phase outputs).
    end_tol : float
        Accepted end-state error and continuity defect (rad, rad/s, m, m/s).  The
        iteration itself runs to round-off (typically 1e-13).
    max_iter : int
        Maximum number of residual evaluations (Newton steps, each with one Jacobian) of
        the Levenberg-Marquardt solve.
    verbose : int
        Passed to ``scipy.optimize.least_squares``.

    Returns
    -------
    CausalInversionResult
        ``success`` False with a message when the iteration does not converge or the
        internal dynamics diverge on a segment.
    """
    start = time.perf_counter()
    t0, tf = task.law.t0, task.law.tf
    n = servo.nu_int
    names = tuple(output.names)
    rows = _free_rows(free_rows, names)
    n_free = 2 * n if n_free is None else n_free
    if isinstance(n_free, bool) or not isinstance(n_free, (int, np.integer)) or n_free < 2 * n:
        raise InputError(f"n_free: expected an integer >= {2 * n} (the number of internal "
                         f"states, one end condition each), got {n_free!r}")
    n_free = int(n_free)
    if segments is not None and (isinstance(segments, bool) or not isinstance(
            segments, (int, np.integer)) or segments < 1):
        raise InputError(f"segments: expected a positive integer, got {segments!r}")
    if not end_tol > 0:
        raise InputError(f"end_tol: expected a positive tolerance, got {end_tol}")
    ta = min(0.0, t0) if t_start is None else float(t_start)
    tb = tf + 0.5 if t_end is None else float(t_end)
    if ta > t0 or tb < tf:
        raise InputError(f"t_start, t_end: causal inversion needs the whole motion "
                         f"[{t0:g}, {tf:g}] s in the interval, got [{ta:g}, {tb:g}] s")

    def failed(msg, lam=None):
        return CausalInversionResult.failure(model, output, "causal", msg, start=start, t0=t0,
                                             tf=tf, eigenvalues=lam,
                                             nfev=servo.counters["dynamics"])

    try:
        y0, yf = desired(t0)[0], desired(tf)[0]
        eta0, etaf = servo.equilibrium(y0), servo.equilibrium(yf)
        Q0, _ = servo.zero_dynamics_jacobian(y0, eta0)
        Qf, _ = servo.zero_dynamics_jacobian(yf, etaf)
    except MultibodyError as exc:
        return failed(str(exc))
    lam0 = np.linalg.eigvals(Q0)
    growth = max(np.real(np.concatenate([lam0, np.linalg.eigvals(Qf), [0.0]])))
    if segments is None:
        segments = max(1, math.ceil(growth * (tf - t0) / math.log(_SEGMENT_GROWTH)))
    S = int(segments)
    t_out = time_grid(ta, tb, dt, (t0, tf))
    # the nominal output is at rest outside [t0, tf], where the table holds its end values
    grid = np.unique(np.concatenate([np.arange(t0, tf, min(dt, 1e-3)), [tf]]))
    nominal = desired.tabulate(grid)
    shaped = ShapedOutput(nominal, t0, tf, [rows[k % len(rows)] for k in range(n_free)],
                          [k // len(rows) for k in range(n_free)], output.m)
    free_names = tuple(names[rows[k % len(rows)]] for k in range(n_free))
    shoot = _Shooting(servo, shaped, t0, tf, S, eta0, etaf, rtol, atol, eta_limit)

    if n == 0:  # fully actuated: nothing to shoot for, the nominal output is causal
        w = np.zeros(n_free)
        eta_s = np.zeros((t_out.size, 0))
        iterations, defect, end_err = 0, 0.0, 0.0
        solve_msg = "fully actuated: no internal dynamics, nominal output kept"
    else:
        z0 = np.concatenate([np.zeros(n_free), shoot.quasi_static_guess().ravel()])
        # more parameters than end conditions: a small Tikhonov term on w makes the problem
        # overdetermined (Levenberg-Marquardt) and picks the near-minimum-norm solution;
        # its weight 1e-6 shifts the end state by ~1e-12 |w| / sensitivity, negligible
        reg = 1e-6 if n_free > 2 * n else 0.0
        try:
            sol = least_squares(shoot.residual, z0, jac=shoot.jacobian, method="lm",
                                x_scale="jac", ftol=1e-12, xtol=1e-12, gtol=1e-15,
                                max_nfev=max_iter, verbose=verbose, kwargs={"reg": reg})
        except _Diverged as exc:
            return failed(f"internal dynamics diverge during the causal iteration: {exc}; "
                          f"use more shooting segments (now {S}) or other free rows", lam0)
        except MultibodyError as exc:
            return failed(f"causal iteration with free parameters on rows {list(free_names)}: "
                          f"{exc}", lam0)
        w = sol.x[:n_free]
        try:
            r = shoot.residual(sol.x)[: S * 2 * n]
            eta_s = shoot.trajectory(sol.x, t_out)
        except _Diverged as exc:
            return failed(f"internal dynamics diverge at the solution: {exc}", lam0)
        r = r.reshape(S, 2 * n)
        end_err = float(np.max(np.abs(r[-1])))
        defect = float(np.max(np.abs(r[:-1]))) if S > 1 else 0.0
        iterations = int(sol.njev or sol.nfev)
        if not np.all(np.isfinite(r)) or max(end_err, defect) > end_tol:
            res = failed(f"the causal iteration did not converge: end-state error "
                         f"{end_err:.3g}, segment defect {defect:.3g} > end_tol {end_tol:g} "
                         f"after {iterations} Newton steps ({sol.message}); free parameters "
                         f"{np.round(w, 6).tolist()} on rows {list(free_names)}; try more "
                         "segments, more free parameters (n_free) or other free_rows", lam0)
            return replace(res, free_parameters=w, free_rows=free_names,
                           end_state_error=end_err, max_defect=defect, segments=S,
                           iterations=iterations)
        solve_msg = (f"converged in {iterations} Newton steps on {S} shooting segments: "
                     f"end-state error {end_err:.2g}, defect {defect:.2g}")
    shaped.w = w
    Bu = eigen_rows(Qf, stable=False) if n else np.zeros((0, 0))
    inside = (t_out >= t0) & (t_out <= tf)
    eta = np.tile(eta0, (t_out.size, 1))
    eta[t_out > tf] = etaf  # at rest after tf: the end-state error is not propagated
    if n:
        eta[inside] = eta_s[inside]
        unstable = float(np.max(np.abs(Bu @ (eta_s[t_out == tf][-1] - etaf)))) if Bu.size else 0.0
    else:
        unstable = 0.0
    recorder = Recorder(servo, shaped)
    try:
        q, v, a, u = recorder.sample(t_out, eta)
    except MultibodyError as exc:
        return failed(str(exc), lam0)
    y_des = np.array(shaped(t_out)[0])
    y_nom = np.array(nominal(t_out)[0])
    y = np.array([output.value(qk) for qk in q])
    status = bool(np.all(np.isfinite(u)))
    dev = float(np.max(np.abs(y_des - y_nom)))
    msg = (f"{solve_msg}; free parameters {np.round(w, 6).tolist()} on rows "
           f"{list(free_names)}, max output deviation {dev:.3g}" if status
           else "the feedforward contains NaN/inf")
    return CausalInversionResult(
        t_out, q, v, a, u, y_des, y, eta, float(np.max(np.abs(y - y_des))), t0, tf, 0.0, 0.0,
        lam0, status, msg, "causal", servo.counters["dynamics"], time.perf_counter() - start,
        model.input_names, output.names, y_nominal=y_nom, free_parameters=w,
        free_rows=free_names, output_deviation=dev, end_state_error=end_err,
        unstable_end_error=unstable, max_defect=defect, segments=S, iterations=iterations)


def solve_causal(problem: Problem, options) -> CausalInversionResult:
    """Method ``"causal"`` of :data:`~.methods.METHODS`: :func:`invert_causal` with the
    fields of a :class:`~.methods.CausalOptions`."""
    return invert_causal(problem.model, problem.output, problem.task, problem.servo,
                         problem.desired, dt=options.dt, t_start=options.t_start,
                         t_end=options.t_end, rtol=options.rtol, atol=options.atol,
                         eta_limit=options.eta_limit, n_free=options.n_free,
                         free_rows=options.free_rows, segments=options.segments,
                         end_tol=options.end_tol, max_iter=options.max_iter,
                         verbose=options.verbose)


def _free_rows(free_rows, names):
    """Indices of the output rows given by index or name (default: the last row)."""
    if free_rows is None:
        return [len(names) - 1]
    if isinstance(free_rows, (str, int, np.integer)):
        free_rows = [free_rows]
    idx = []
    for r in free_rows:
        if isinstance(r, str) and r in names:
            idx.append(names.index(r))
        elif isinstance(r, (int, np.integer)) and not isinstance(r, bool) and 0 <= r < len(names):
            idx.append(int(r))
        else:
            raise InputError(f"free_rows: {r!r} is not an output row; expected an index 0.."
                             f"{len(names) - 1} or one of {', '.join(names)}")
    if not idx or len(set(idx)) != len(idx):
        raise InputError(f"free_rows: expected distinct output rows, got {list(free_rows)!r}")
    return idx


class _Shooting:
    """Multiple-shooting residual and Jacobian for the causal end condition.

    Unknowns z = (w, xi_1, ..., xi_{S-1}); residuals r_j = Phi_j(xi_j, w) - xi_{j+1},
    j = 0..S-1, with xi_0 = eta0 and xi_S = etaf, where Phi_j integrates the internal
    dynamics over segment j.
    """

    def __init__(self, servo, shaped, t0, tf, S, eta0, etaf, rtol, atol, limit):
        self.servo, self.shaped, self.S = servo, shaped, S
        self.h = (tf - t0) / S
        self.t_seg = t0 + self.h * np.arange(S)
        self.eta0, self.etaf = eta0, etaf
        self.rtol, self.atol, self.limit = rtol, atol, limit
        self.n2 = eta0.size
        self.nw = shaped.E.shape[0]
        self._cache = None

    def split(self, z):
        w = z[: self.nw]
        xi = np.vstack([self.eta0[None], z[self.nw:].reshape(self.S - 1, self.n2)])
        return w, xi

    def _integrate(self, t_off, x0, w, dense=False):
        """Integrate rows (start time t_off[k], state x0[k], parameters w[k]) over h."""
        K, n2, shaped, servo = x0.shape[0], self.n2, self.shaped, self.servo

        def rhs(tau, x):
            t = t_off + tau
            y, yd, ydd = shaped.nominal(t)
            dy, dyd, dydd = shaped.deviation(t, w)
            return servo.internal_rhs_batch(y + dy, yd + dyd, ydd + dydd,
                                            x.reshape(K, n2)).ravel()

        def blowup(tau, x):  # positions only, as in classical inversion
            return self.limit - np.max(np.abs(x.reshape(K, n2)[:, : n2 // 2]))

        blowup.terminal = True
        sol = solve_ivp(rhs, (0.0, self.h), x0.ravel(), method="DOP853", rtol=self.rtol,
                        atol=self.atol, events=blowup, dense_output=dense)
        if sol.status == 1:
            seg = int(np.argmax(np.max(np.abs(sol.y[:, -1].reshape(K, n2)), axis=1)))
            raise _Diverged(f"a passive coordinate exceeded {self.limit:g} at t = "
                            f"{t_off[seg] + sol.t_events[0][0]:.4g} s")
        if sol.status != 0:  # typically a near-singular decoupling matrix: a runaway state
            raise _Diverged(f"the integration failed at t = {t_off[0] + sol.t[-1]:.4g} s + "
                            f"segment start ({sol.message})")
        return sol if dense else sol.y[:, -1].reshape(K, n2)

    def quasi_static_guess(self):
        """Internal states at the inner segment starts (S - 1, n2) for w = 0: the passive
        coordinates that cancel their acceleration under the nominal output at t_j
        (continuation from eta0), velocities by differences of those.

        The internal state under a strongly driven output is far from eta0 (Sect. 4.2.7
        arm: 250 rad/s^2 at the equilibrium), so starting every segment at eta0 puts the
        first Newton step far out; the quasi-static state is close to the bounded solution
        away from the ends.
        """
        from scipy.optimize import root

        n = self.n2 // 2
        t = np.append(self.t_seg, self.t_seg[0] + self.S * self.h)
        qs = np.tile(self.eta0[:n], (t.size, 1))
        nominal = self.shaped.nominal
        for j in range(1, t.size - 1):
            ytj = nominal(t[j])

            def acc(qu, ytj=ytj):
                return self.servo.internal_rhs_at(*ytj, np.concatenate([qu, np.zeros(n)]))[n:]

            try:
                sol = root(acc, qs[j - 1], tol=1e-10)
            except MultibodyError:
                continue
            if sol.success and np.all(np.abs(sol.x) < self.limit):
                qs[j] = sol.x
            else:
                qs[j] = qs[j - 1]
        qs[-1] = self.etaf[:n]
        vs = np.gradient(qs, t, axis=0)
        return np.hstack([qs, vs])[1:-1]

    def _targets(self, xi):
        return np.vstack([xi[1:], self.etaf[None]])

    def residual(self, z, reg=0.0):
        w, xi = self.split(z)
        ends = self._integrate(self.t_seg, xi, np.tile(w, (self.S, 1)))
        r = (ends - self._targets(xi)).ravel()
        return np.concatenate([r, reg * w]) if reg else r

    def jacobian(self, z, reg=0.0):
        """Forward differences, all perturbations of all segments in one integration."""
        w, xi = self.split(z)
        S, n2, nw = self.S, self.n2, self.nw
        C = 1 + n2 + nw  # copies per segment: base, state perturbations, parameter ones
        dx = 1e-7 * np.maximum(1.0, np.abs(xi))  # (S, n2)
        dw = 1e-7 * np.maximum(1.0, np.abs(w))
        x0 = np.repeat(xi[:, None], C, axis=1)  # (S, C, n2)
        ww = np.tile(w, (S, C, 1))
        for i in range(n2):
            x0[:, 1 + i, i] += dx[:, i]
        for k in range(nw):
            ww[:, 1 + n2 + k, k] += dw[k]
        ends = self._integrate(np.repeat(self.t_seg, C), x0.reshape(S * C, n2),
                               ww.reshape(S * C, nw)).reshape(S, C, n2)
        base = ends[:, 0]
        J = np.zeros((S * n2, nw + (S - 1) * n2))
        for j in range(S):
            r = slice(j * n2, (j + 1) * n2)
            J[r, :nw] = ((ends[j, 1 + n2:] - base[j]) / dw[:, None]).T
            if j > 0:  # d r_j / d xi_j (xi_0 = eta0 is fixed)
                J[r, nw + (j - 1) * n2: nw + j * n2] = ((ends[j, 1:1 + n2] - base[j])
                                                         / dx[j][:, None]).T
            if j < S - 1:  # d r_j / d xi_{j+1} = -I
                J[r, nw + j * n2: nw + (j + 1) * n2] = -np.eye(n2)
        if reg:
            J = np.vstack([J, np.hstack([reg * np.eye(nw), np.zeros((nw, J.shape[1] - nw))])])
        return J

    def trajectory(self, z, t_out):
        """eta at the samples t_out inside [t0, tf] (rows outside left as NaN)."""
        w, xi = self.split(z)
        sol = self._integrate(self.t_seg, xi, np.tile(w, (self.S, 1)), dense=True)
        eta = np.full((t_out.size, self.n2), np.nan)
        seg = np.clip(((t_out - self.t_seg[0]) // self.h).astype(int), 0, self.S - 1)
        inside = (t_out >= self.t_seg[0]) & (t_out <= self.t_seg[0] + self.S * self.h + 1e-12)
        for j in range(self.S):
            sel = inside & (seg == j)
            if sel.any():
                tau = np.clip(t_out[sel] - self.t_seg[j], 0.0, self.h)
                eta[sel] = sol.sol(tau).reshape(self.S, self.n2, -1)[j].T
        return eta
