"""Inverse models and tracking of closed flexible systems (Seifried 2014 Sect. 6.5).

The control side of :mod:`multibody_dynamics.flexible.closed` (which models the closed
flexible chain, its forward dynamics and the machine tool):

* :class:`ClosedOutputServo` -- the inverse model of a :class:`ClosedFlexibleChain` for an
  output ``y = H_r q_r + Γ q_e`` (the book's linearly combined output (6.39), or the
  collocated/rigid outputs with ``Γ = 0``), an :class:`~.protocol.InverseModel` with internal
  states ``η = (q_e, q_e')``;
* :func:`invert_closed` -- the feedforward by classical inversion or stable inversion by
  :func:`dichotomy_sweeps` (Devasia, Chen and Paden 1996), returning a
  :class:`ClosedInversion`;
* :func:`track_closed` -- the closed plant simulated under the feedforward plus joint PD;
* the task side: :func:`rigid_task_path` (rigid coordinates of the undeformed system along a
  point path, whose ``H_r q_r`` is a desired output), :func:`point_error` (the tool error of an
  inverse model or a simulation) and the machine tool's test motion
  :data:`PARALLEL_TOOL_TASK`.

Results with the shipped parameters are listed in the docstring of
:mod:`multibody_dynamics.flexible.closed` (``bench/bench_flexible_parallel.py``).
Of this package it imports only the result types and the interrupt marker; the model side
comes from :mod:`multibody_dynamics`, which never imports :mod:`multibody_control`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import CubicSpline

from multibody_dynamics.deprecation import deprecated_alias
from multibody_dynamics.errors import DimensionError, InputError, SolverError
from multibody_dynamics.flexible.closed import ClosedFlexibleChain, ClosedSimulation
from multibody_dynamics.flexible.servo import ElasticServo
from multibody_dynamics.flexible.simulation import TimeProgress
from multibody_dynamics.interruptible import (
    INTERRUPTS,
    reraise_unless_interrupt,
    solve_ivp_keeping,
)
from multibody_dynamics.validation import as_vector

from .internal import INTERRUPTED
from .result import InversionInterrupted, InversionResult


class ClosedOutputServo(ElasticServo):
    """Inverse model of a closed flexible system for the output ``y = H_r q_r + Γ q_e``.

    Seifried (2014) Sect. 6.5 with (4.89)-(4.113) and the servo-constraint form (5.21): the
    output is prescribed (``m = nu`` rows); internal states ``η = (q_e, q_e')``. Given
    ``y, y', y''`` and ``η``:

    * positions: ``q_r`` from ``[H_r q_r + Γ q_e - y; c(q) = 0]`` (nq_r equations, Newton, warm
      started) — the book's "numerical solution of the loop closing condition";
    * velocities: ``[H_r; C_r] q_r' = [y' - Γ q_e'; -C_e q_e']``;
    * accelerations, cut-joint reactions and inputs in one solve::

          [ M  -C^T  -B ] [a]   [g - k - f_e]
          [ C   0    0  ] [λ] = [-c_tt      ]
          [ H   0    0  ] [u]   [y''        ]

      equivalent to the minimal form (2.150) with the output rows, but without forming
      ``J̄``. The internal dynamics are ``η' = (q_e', a_e)``.

    It is an :class:`~multibody_control.inversion.protocol.InverseModel` (``nu_int``,
    ``internal_rhs_batch``, ``reconstruct``, ``equilibrium``, ``zero_dynamics_jacobian``,
    ``counters``, ``on_evaluate``), as :class:`~multibody_control.inversion.flexible.FlexibleServo`
    is, so the project's stable inversion driver
    (:func:`multibody_control.inversion.internal.solve_stable`) runs it unchanged.

    Parameters
    ----------
    system : ClosedFlexibleChain
    H_r : array_like, shape (nu, nq_r)
        Output weights of the rigid coordinates (a selection for the book's outputs).
    gamma : array_like, shape (nu, nq_e), optional
        Weights of the elastic coordinates [rad or m per unit q_e]; default zero.
    guess : array_like, shape (nq_r,), optional
        Rigid coordinates near the first evaluation (loop branch); default zeros.
    """

    def __init__(self, system: ClosedFlexibleChain, H_r, gamma=None, guess=None):
        if not isinstance(system, ClosedFlexibleChain):
            raise InputError(f"system must be a ClosedFlexibleChain, got {type(system).__name__}")
        nr, ne, m = system.nq_r, system.nq_e, system.nu
        H_r = np.asarray(H_r, float)
        gamma = np.zeros((m, ne)) if gamma is None else np.asarray(gamma, float)
        if H_r.shape != (m, nr):
            raise DimensionError(f"H_r must have shape ({m}, {nr}) (inputs x joints of "
                                 f"{system.name}), got {H_r.shape}")
        if gamma.shape != (m, ne):
            raise DimensionError(f"gamma must have shape ({m}, {ne}) (inputs x elastic "
                                 f"coordinates of {system.name}), got {gamma.shape}")
        if not (np.all(np.isfinite(H_r)) and np.all(np.isfinite(gamma))):
            raise InputError("H_r and gamma must be finite")
        if ne == 0:
            raise InputError(f"{system.name} has no elastic coordinates: no internal dynamics")
        self.system, self.H_r, self.gamma = system, H_r, gamma
        self.H = np.hstack([H_r, gamma])
        self.nr, self.nu_int, self.m = nr, ne, m
        self.iu = np.arange(nr, nr + ne)
        self._qr = np.zeros(nr) if guess is None else np.asarray(guess, float).reshape(nr).copy()
        self.counters = {"dynamics": 0, "newton": 0}
        self.on_evaluate = None

    def configuration(self, y, qe) -> np.ndarray:
        """Tree coordinates q (nv,) with output ``y`` and elastic coordinates ``qe`` on the
        loop."""
        return self._configuration(np.asarray(y, float), np.asarray(qe, float))[0]

    def _configuration(self, y, qe):
        sysm, nr = self.system, self.nr
        q = np.concatenate([self._qr, qe])
        target = y - self.gamma @ qe
        for _ in range(30):
            c, C, _ = sysm.constraint_terms(q)
            res = np.concatenate([self.H_r @ q[:nr] - target, c])
            self.counters["newton"] += 1
            A = np.vstack([self.H_r, C[:, :nr]])
            try:
                q[:nr] -= np.linalg.solve(A, res)
            except np.linalg.LinAlgError:
                raise SolverError(f"{sysm.name}: output and loop constraints singular at q_r = "
                                  f"{q[:nr].tolist()}") from None
            # quadratic convergence: the step taken from |res| < 1e-9 leaves ~1e-16; C (used
            # for the velocities) is then off by O(1e-9) relative, far below what matters
            if np.max(np.abs(res)) < 1e-9:
                break
        else:
            raise SolverError(f"{sysm.name}: rigid coordinates for output "
                              f"{np.asarray(y).tolist()} not found (max residual "
                              f"{np.max(np.abs(res)):.3g})")
        self._qr = q[:nr].copy()
        return q, C

    def state(self, y, yd, qe, qed):
        """``q, v`` (nv,) from the output, its rate and the internal state."""
        q, C = self._configuration(np.asarray(y, float), np.asarray(qe, float))
        nr = self.nr
        A = np.vstack([self.H_r, C[:, :nr]])
        rhs = np.concatenate([yd - self.gamma @ qed, -C[:, nr:] @ qed])
        v = np.concatenate([np.linalg.solve(A, rhs), qed])
        return q, v

    def solve(self, q, v, ydd):
        """``a`` (nv,), ``λ`` (nc,), ``u`` (nu,) of the KKT system in the class docstring."""
        self.counters["dynamics"] += 1
        if self.on_evaluate is not None:
            self.on_evaluate(1)
        sysm = self.system
        nv, nc, m = sysm.nv, sysm.nc, self.m
        M, k, g, fe = sysm.chain.dynamics_terms(q, v)
        _, C, bias = sysm.constraint_terms(q, v)
        n = nv + nc + m
        K = np.zeros((n, n))
        K[:nv, :nv] = M
        K[:nv, nv:nv + nc] = -C.T
        K[:nv, nv + nc:] = -sysm.B
        K[nv:nv + nc, :nv] = C
        K[nv + nc:, :nv] = self.H
        rhs = np.concatenate([g - k - fe, -bias, ydd])
        try:
            x = np.linalg.solve(K, rhs)
        except np.linalg.LinAlgError:
            raise SolverError("decoupling matrix singular: the output does not have relative "
                              "degree 2 here; change H_r or Γ") from None
        return x[:nv], x[nv:nv + nc], x[nv + nc:]

    equilibrium_tol = 1e-9

    def _rest_residual(self, y, qe):
        """Elastic accelerations at rest with constant output ``y`` (zero at the equilibrium)."""
        n = self.nu_int
        zero = np.zeros_like(np.asarray(y, float))
        return self.internal_rhs_at(y, zero, zero, np.concatenate([qe, np.zeros(n)]))[n:]


@dataclass(frozen=True)
class ClosedInversion(InversionResult):
    """Feedforward of :func:`invert_closed`: an :class:`~.result.InversionResult` (same fields,
    same meaning) with the count of dichotomy sweeps.

    Attributes
    ----------
    As :class:`~.result.InversionResult`: ``q, v, a`` (N, nv) reference of every coordinate,
    ``u`` (N, nu) inputs [N | N m], ``eta`` (N, 2 nq_e) internal states, ``y_desired`` and
    ``y = H q`` (N, m), ``output_error`` max |H q - y_d| over the samples (inf without
    samples), ``nfev`` the model solves (``evaluations`` is its deprecated read-only alias),
    ``eigenvalues`` of the zero dynamics at the start (stable inversion; empty for classical),
    ``t0, tf`` the ends of the grid (:func:`invert_closed` is given the grid, not the task's
    motion interval) and ``t_pre = t_post = 0``; besides:
    iterations : int
        Dichotomy sweeps (0 for classical inversion).
    """

    iterations: int = 0

    evaluations = deprecated_alias("nfev", "evaluations")


def _closed_result(servo, t, y, method, q, v, a, u, eta, ok, message, iterations, eigenvalues,
                   nfev, start) -> ClosedInversion:
    """The :class:`ClosedInversion` of the first ``len(q)`` samples of the grid ``t``."""
    n = len(q)
    y_q = q @ servo.H.T if n else np.zeros((0, servo.m))
    return ClosedInversion(
        t=t[:n], q=q, v=v, a=a, u=u, y_desired=y[:n], y=y_q, eta=eta,
        output_error=float(np.max(np.abs(y_q - y[:n]))) if n else np.inf,
        t0=float(t[0]), tf=float(t[-1]), t_pre=0.0, t_post=0.0,
        eigenvalues=np.zeros(0) if eigenvalues is None else eigenvalues, success=bool(ok),
        message=message, method=method, nfev=nfev, wall_time=time.perf_counter() - start,
        input_names=tuple(getattr(servo.system, "actuated", ())), iterations=iterations)


def _phi(x):
    """``phi1 = (e^x - 1)/x``, ``phi2 = (e^x - 1 - x)/x^2``, ``phi3 = (e^x (x - 1) + 1)/x^2``."""
    x = np.asarray(x, complex)
    small = np.abs(x) < 1e-3
    xs = np.where(small, 1.0, x)
    e = np.exp(xs)
    p1 = np.where(small, 1 + x / 2 + x * x / 6, (e - 1) / xs)
    p2 = np.where(small, 0.5 + x / 6 + x * x / 24, (e - 1 - xs) / xs**2)
    p3 = np.where(small, 0.5 + x / 3 + x * x / 8, (e * (xs - 1) + 1) / xs**2)
    return p1, p2, p3


def invert_closed(servo: ClosedOutputServo, ytraj, t, method: str = "stable",
                  tol: float = 1e-10, max_iter: int = 60, rtol: float = 1e-8,
                  atol: float = 1e-10, progress: bool = False) -> ClosedInversion:
    """Feedforward for a prescribed output of a closed flexible system.

    ``"classical"`` (Seifried Def. 3.6): the internal dynamics ``η' = f(t, η)`` are integrated
    forward from the equilibrium at ``y_d(t[0])`` (DOP853, ``rtol``/``atol``): bounded only for a
    minimum-phase output (here the collocated ones).

    ``"stable"`` (Def. 3.7, non-minimum phase): the two-point problem "stable part of η at rest
    at ``t[0]``, unstable part at rest at ``t[-1]``" ((3.76) with the corrected labels), solved
    by the dichotomy iteration of stable inversion (Devasia, Chen and Paden 1996) instead of the
    book's collocation BVP: with ``Q = ∂f/∂η`` at the start equilibrium, ``η' = Q (η - η0) +
    r(t, η)``; in the eigenbasis of Q each stable mode is integrated forward from 0 and each
    unstable mode backward from 0, exactly for ``r`` piecewise linear on the grid (exponential
    integrator), and ``r`` is updated from the new ``η`` until the sweep changes η by less than
    ``tol``. It needs the grid ``t`` to start ``t_pre`` before the motion (pre-actuation) and to
    end after it, and converges when ``r`` stays small against the spectral gap (small
    deformations, as here). Cost: one model evaluation per grid point and sweep, independent of
    the fast stiff modes that make a collocation mesh large.

    Parameters
    ----------
    servo : ClosedOutputServo
    ytraj : callable
        ``ytraj(t) -> (y, y', y'')`` for an array of times (each (N, nu)).
    t : (N,) increasing sample times [s].
    method : {"stable", "classical"}
    tol : float
        Convergence of the dichotomy sweeps on max |Δη| [unit of q_e, q_e'].
    max_iter : int
        Maximum sweeps.
    progress : bool
        tqdm bars on stderr: the classical integration (simulated time) and the
        reconstruction of the states and inputs (samples).

    Returns
    -------
    ClosedInversion
        ``success=False`` with a message if the sweeps diverge or stall (it never raises for
        a numerical failure; misuse raises :class:`InputError`).

    Raises
    ------
    InversionInterrupted
        On Ctrl-C, carrying the :class:`ClosedInversion` of the samples complete before it
        (``success`` False, the message starting with ``"interrupted (Ctrl-C)"``): the
        classical forward integration ends at the end of the solver step under way
        (:func:`~multibody_dynamics.interruptible.solve_ivp_keeping`) and its samples are
        reconstructed; during the reconstruction, the samples reconstructed before are kept;
        during the dichotomy sweeps, the iterate of the last complete sweep is reconstructed
        (every sample, ``iterations`` the complete sweeps, the message naming it unconverged
        with its last change, see :func:`dichotomy_sweeps`), or nothing is kept when the first
        sweep was under way.
    """
    if method not in ("stable", "classical"):
        raise InputError(f"method must be 'stable' or 'classical', got {method!r}")
    t = np.asarray(t, float)
    if t.ndim != 1 or t.size < 3 or np.any(np.diff(t) <= 0):
        raise InputError("t must hold at least three increasing sample times [s]")
    start = time.perf_counter()
    y, yd, ydd = (np.asarray(x, float) for x in ytraj(t))
    if y.shape != (t.size, servo.m):
        raise DimensionError(f"ytraj(t) must return arrays of shape ({t.size}, {servo.m}), "
                             f"got {y.shape}")
    count0 = servo.counters["dynamics"]
    nv = servo.system.nv

    def failed(message, eigenvalues=None):
        empty = np.zeros((0, nv))
        return _closed_result(servo, t, y, method, empty, empty, empty, np.zeros((0, servo.m)),
                              np.zeros((0, 2 * servo.nu_int)), False, message, 0, eigenvalues,
                              servo.counters["dynamics"] - count0, start)

    try:
        eta0 = servo.equilibrium(y[0])
    except SolverError as exc:
        return failed(str(exc))
    iterations, ok, msg, eigenvalues = 0, True, "", None
    if method == "classical":
        eta, ok, msg = _classical_internal(servo, ytraj, t, eta0, rtol, atol, progress)
    else:
        try:
            Q, _ = servo.zero_dynamics_jacobian(y[0], eta0)
        except SolverError as exc:
            return failed(str(exc))
        eigenvalues = np.linalg.eigvals(Q)
        if np.min(np.abs(eigenvalues.real)) < 1e-9:
            return failed("zero dynamics not hyperbolic (eigenvalue on the imaginary axis): "
                          "stable inversion is not defined; use method='classical'", eigenvalues)
        try:
            eta, ok, msg, iterations = dichotomy_sweeps(servo, t, y, yd, ydd, eta0, Q, tol,
                                                        max_iter, progress=progress)
        except INTERRUPTS as exc:  # in the first sweep: no iterate to keep
            reraise_unless_interrupt(exc)
            raise InversionInterrupted(failed(f"{INTERRUPTED} during the first dichotomy "
                                              "sweep, before any iterate was complete",
                                              eigenvalues)) from None
    (q, v, a, u), ok, msg = _reconstruct(servo, ytraj, t, eta, ok, msg, progress)
    m = len(q)
    result = _closed_result(servo, t, y, method, q, v, a, u, eta[:m], ok, msg, iterations,
                            eigenvalues, servo.counters["dynamics"] - count0, start)
    if msg.startswith(INTERRUPTED):  # Ctrl-C: the caller writes the samples kept
        raise InversionInterrupted(result)
    return result


def _classical_internal(servo, ytraj, t, eta0, rtol, atol, progress):
    """Classical inversion's forward integration of ``η`` on ``t`` (see :func:`invert_closed`):
    ``(eta (N', 2n), success, message)``; Ctrl-C ends it at the end of the solver step under
    way (N' < N, the message starts with :data:`~.internal.INTERRUPTED`)."""
    bar = TimeProgress(t[-1] - t[0], progress, "internal dynamics")

    def rhs(tk, x):
        bar.tick(tk - t[0])
        yk, ydk, yddk = (np.asarray(z, float).reshape(-1) for z in ytraj(np.array([tk])))
        return servo.internal_rhs_at(yk, ydk, yddk, x)

    try:
        # bounded steps: the rest before the motion would let the first step jump over it
        hmax = 10.0 * float(np.min(np.diff(t)))
        sol, stopped = solve_ivp_keeping(rhs, (t[0], t[-1]), eta0, method="DOP853", t_eval=t,
                                         rtol=rtol, atol=atol, max_step=hmax,
                                         first_step=hmax / 10)
    except SolverError as exc:
        return np.tile(eta0, (1, 1)), False, f"forward integration failed: {exc}"
    finally:
        bar.close()
    if stopped is not None:
        kept = "the samples until then are kept"
        return sol.y.T, False, f"{INTERRUPTED} at t = {stopped:.6g} s; {kept}"
    return sol.y.T, sol.status == 0, f"forward integration: {sol.message}"


def _reconstruct(servo, ytraj, t, eta, ok, msg, progress):
    """``(q, v, a, u)`` (each (N', .)) of the servo along ``eta`` on ``t``, and the updated
    ``ok, msg``: cut at a failed sample, or where Ctrl-C stopped (the samples before it are
    complete; the message then starts with :data:`~.internal.INTERRUPTED`)."""
    rows = []
    samples = range(len(eta))
    if progress:
        from tqdm import tqdm

        samples = tqdm(samples, desc="reconstruct", unit="sample", leave=False)
    try:
        for k in samples:
            rows.append(servo.reconstruct(t[k], eta[k], ytraj))
    except SolverError as exc:
        ok, msg = False, f"{msg}; reconstruction failed: {exc}"
    except INTERRUPTS as exc:  # the rows before the one under way are complete
        reraise_unless_interrupt(exc)
        ok, msg = False, ((f"{msg}; " if msg.startswith(INTERRUPTED) else "")
                          + f"{INTERRUPTED} while reconstructing the motion at t = "
                          f"{t[len(rows)]:.6g} s; the {len(rows)} samples before are kept")
    finally:
        if progress:
            samples.close()
    m, nv = len(rows), servo.system.nv
    arrays = [np.array([r[j] for r in rows]).reshape(m, n) for j, n in
              enumerate((nv, nv, nv, servo.m))]
    return arrays, ok, msg


def dichotomy_sweeps(servo, t, y, yd, ydd, eta0, Q, tol: float = 1e-10, max_iter: int = 60,
                     progress: bool = False):
    """Stable inversion by dichotomy sweeps (Devasia, Chen and Paden 1996); see
    :func:`invert_closed`.

    ``servo`` needs ``internal_rhs_batch(y, yd, ydd, eta)`` (any inverse model with internal
    states ``η``); ``Q`` is the zero-dynamics Jacobian at ``eta0`` and must be hyperbolic.
    Returns ``(eta (N, 2n), success, message, sweeps)``; never raises for a numerical failure.
    ``progress``: a tqdm bar of the sweeps on stderr.

    Ctrl-C during sweep ``k > 1`` returns the iterate of sweep ``k - 1``, the last complete
    one, with ``success`` False, ``sweeps = k - 1`` and a message starting with
    :data:`~.internal.INTERRUPTED` that names it unconverged with its last change
    ``max |η_(k-1) - η_(k-2)|`` (the fixed-point residual of the iteration; the first sweep's
    change is measured from the start ``η0``). That iterate is a meaningful state to keep:
    every sweep returns a complete trajectory ``η(t)`` meeting both end conditions exactly
    (stable part at rest at ``t[0]``, unstable part at ``t[-1]``), so the motion and inputs
    reconstructed from it realise the desired output exactly and are off the true
    feedforward only through that residual in the internal dynamics. During the first sweep
    nothing is complete and the interrupt is raised (``KeyboardInterrupt``, or the
    ``SystemError`` of a compiled call).
    The sweeps contract only while ``f(t, η) - Q (η - η0)`` stays small against the spectral
    gap: small motions such as the machine tool's. On the serial flexible manipulator's 0.2 m
    line (the arm turns, so the zero dynamics vary along the path) they do not converge in 60
    sweeps (a state still changing by 3 % per sweep), where ``solve_bvp`` converges.
    """
    lam, V = np.linalg.eig(Q)
    iterations = done = 0  # sweeps begun, complete
    Vinv = np.linalg.inv(V)
    h = np.diff(t)
    stable = lam.real < 0
    eta = np.tile(eta0, (t.size, 1))
    msg = f"no convergence in {max_iter} sweeps"
    ok = False
    last = np.inf
    bar = None
    if progress:  # sweeps until convergence, at most max_iter
        from tqdm import tqdm

        bar = tqdm(total=max_iter, desc="stable inversion", unit="sweep", leave=False)
    try:
        for iterations in range(1, max_iter + 1):
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"change {last:.2g}")
            try:
                f = servo.internal_rhs_batch(y, yd, ydd, eta)
            except SolverError as exc:
                msg = f"sweep {iterations}: {exc}"
                break
            new = _sweep(f, eta, eta0, Q, lam, V, Vinv, h, stable)
            change = float(np.max(np.abs(new - eta)))
            if not np.all(np.isfinite(new)) or (iterations > 5 and change > 10 * last):
                eta = new
                msg = f"dichotomy sweeps diverge (change {change:.3g} at sweep {iterations})"
                break
            eta, last, done = new, change, iterations
            if change < tol:
                ok, msg = True, f"converged in {iterations} sweeps (last change {change:.2g})"
                break
    except INTERRUPTS as exc:  # eta: the last complete sweep's iterate
        reraise_unless_interrupt(exc)
        if done == 0:
            raise
        iterations, ok = done, False  # still an interrupt for the caller
        state = "converged" if last < tol else "unconverged"  # Ctrl-C after the last sweep
        msg = (f"{INTERRUPTED} during dichotomy sweep {done + 1}; the iterate of sweep {done} "
               f"is kept, {state} (last change {last:.3g}, tolerance {tol:g})")
    finally:
        if bar is not None:
            bar.close()
    return eta, ok, msg, iterations


def _sweep(f, eta, eta0, Q, lam, V, Vinv, h, stable):
    """One dichotomy sweep of :func:`dichotomy_sweeps`: the new iterate ``η`` (N, 2n) from the
    right-hand side ``f`` (N, 2n) evaluated along the previous one."""
    n2 = lam.size
    w = (f - (eta - eta0) @ Q.T) @ Vinv.T  # modal forcing (N, 2n)
    size = h.size + 1
    z = np.zeros((size, n2), complex)
    xs = lam[None, :] * h[:, None]
    ef = np.exp(np.where(stable, xs, 0.0))
    p1, p2, _ = _phi(np.where(stable, xs, 0.0))
    for k in range(size - 1):  # stable modes forward from 0
        z[k + 1, stable] = (ef[k, stable] * z[k, stable] + h[k] * (
            (p1[k, stable] - p2[k, stable]) * w[k, stable] + p2[k, stable] * w[k + 1, stable]))
    mu = np.where(stable, 0.0, -xs)
    eb = np.exp(mu)
    q1, _, q3 = _phi(mu)
    un = ~stable
    for k in range(size - 2, -1, -1):  # unstable modes backward from 0
        z[k, un] = eb[k, un] * z[k + 1, un] - h[k] * (
            (q1[k, un] - q3[k, un]) * w[k, un] + q3[k, un] * w[k + 1, un])
    return eta0 + (z @ V.T).real



def track_closed(system: ClosedFlexibleChain, result: ClosedInversion, frequency: float = 10.0,
                 damping: float = 1.0, every: int = 1, rtol: float = 1e-8,
                 atol: float = 1e-10, progress: bool = False,
                 interrupted: list | None = None) -> ClosedSimulation:
    """Simulate the closed plant with a feedforward plus a PD law on the actuated joints.

    Starts at the inverse model's first state; inputs ``u_ff(t) + K_P (q_a,ref - q_a) + K_D
    (v_a,ref - v_a)`` with ``u_ff``, ``q_a,ref``, ``v_a,ref`` cubic splines of the inverse
    model's samples (the book's joint controllers around the joint reference), ``K_P = m w^2``,
    ``K_D = 2 damping m w``, ``w = 2 pi frequency`` [Hz], ``m`` the mass (prismatic joint) or
    the inertia (revolute) of each actuated joint's rigid body (a flexible body: the diagonal
    of the mass matrix at the first state). Output at every ``every``-th sample of ``result.t``
    (the bench: 1 ms).  ``progress``: a tqdm bar over simulated time on stderr.  With a list
    ``interrupted``, Ctrl-C ends the simulation keeping the samples before the one under way
    (:meth:`ClosedFlexibleChain.simulate`; the time [s] is appended to the list).
    """
    if not isinstance(result, ClosedInversion):
        raise InputError(f"result must be a ClosedInversion, got {type(result).__name__}")
    if not (frequency > 0 and damping >= 0) or int(every) != every or every < 1:
        raise InputError(f"frequency must be > 0 [Hz], damping >= 0, every an integer >= 1; got "
                         f"{frequency!r}, {damping!r}, {every!r}")
    t = result.t
    ia = np.array([system.joint_names.index(a) for a in system.actuated])
    uff = CubicSpline(t, result.u, axis=0)
    sref = CubicSpline(t, result.q[:, ia], axis=0)
    vref = CubicSpline(t, result.v[:, ia], axis=0)
    w = 2 * np.pi * frequency
    bodies = {b.joint: b for b in system.chain.bodies}
    diag = np.diag(system.chain.mass_matrix(result.q[0]))
    m = np.array([diag[j] if bodies[a].flexible else
                  bodies[a].mass if bodies[a].joint_type == "prismatic" else bodies[a].inertia
                  for a, j in zip(system.actuated, ia)], float)
    kp, kd = m * w * w, 2 * damping * m * w

    bar = TimeProgress(t[-1] - t[0], progress, "plant simulation")

    def feedback(tk, q, v):
        bar.tick(tk - t[0])
        return kp * (sref(tk) - q[ia]) + kd * (vref(tk) - v[ia])

    try:
        return system.simulate(result.q[0], result.v[0], t[::int(every)], u=uff,
                               feedback=feedback, rtol=rtol, atol=atol, interrupted=interrupted)
    finally:
        bar.close()


# ============================================================================ task side
#: The machine tool's test motion (the book's Fig. 6.11 is only plotted; chosen): the tool
#: point (tip of the long arm) from the 45 deg pose (long arm at 45 deg, cart 1 at 0) by
#: (+0.1, -0.1) m on a straight line in 1 s, quintic rest-to-rest law (peak acceleration
#: 1.6 m/s^2), 0.3 s pre- and post-actuation (slowest unstable zero of the combined output
#: ~50 1/s: e^-15), ``guess`` = ``[s1, s2, alpha, beta]`` on the lambda branch. Used by
#: ``bench/bench_flexible_parallel.py`` and ``config/scenarios/invert_flexible_parallel_tool.yaml``
#: (through :func:`multibody_control.scenarios.flexible.parallel_tool_task`).
PARALLEL_TOOL_TASK: dict = {
    "body": "long_arm",
    "start": (1.081 * np.sqrt(0.5), 1.081 * np.sqrt(0.5)),
    "move": (0.1, -0.1),
    "t0": 0.0, "tf": 1.0, "order": 5, "t_pre": 0.3, "t_post": 0.3,
    "guess": (0.0, 0.8, np.pi / 4, 2.4),
}


def rigid_task_path(system: ClosedFlexibleChain, body: str, p, pd, pdd, guess,
                    node: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rigid coordinates of the undeformed system along a point path (rigid inverse kinematics).

    :meth:`ClosedFlexibleChain.rigid_task_kinematics` at every sample of ``p, pd, pdd``
    ((N, 2) [m, m/s, m/s^2]) of the point of ``body`` (its distal node unless ``node``), warm
    started from ``guess`` (nq_r,) and then from the previous sample (the loop branch is kept).
    Returns ``q_r, q_r', q_r''`` (each (N, nq_r)); a desired output is ``y_d = H_r q_r``.
    """
    if not isinstance(system, ClosedFlexibleChain):
        raise InputError(f"system must be a ClosedFlexibleChain, got {type(system).__name__}")
    p, pd, pdd = (np.atleast_2d(np.asarray(x, float)) for x in (p, pd, pdd))
    if p.shape[1:] != (2,) or pd.shape != p.shape or pdd.shape != p.shape:
        raise DimensionError(f"p, pd, pdd must be (N, 2) arrays, got {p.shape}, {pd.shape}, "
                             f"{pdd.shape}")
    g = as_vector(guess, system.nq_r, "guess")
    if not np.all(np.isfinite(g)):
        raise InputError("guess must be finite")
    rows = []
    for k in range(p.shape[0]):
        rows.append(system.rigid_task_kinematics(body, node, p[k], pd[k], pdd[k], g))
        g = rows[-1][0]
    q_r, v_r, a_r = (np.array([r[j] for r in rows]) for j in range(3))
    return q_r, v_r, a_r


def point_error(system: ClosedFlexibleChain, q, body: str, p) -> np.ndarray:
    """Distance [m] of the (deformed) end point of ``body`` at the configurations ``q`` (N, nv)
    from the desired points ``p`` (N, 2): the tool error of an inverse model or a simulation."""
    q = np.atleast_2d(np.asarray(q, float))
    r = np.array([system.chain.point_position(qk, body) for qk in q])
    return np.linalg.norm(r - np.asarray(p, float).reshape(r.shape), axis=1)
