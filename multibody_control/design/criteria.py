"""Design criteria on the zero dynamics of a linearly combined output (Seifried (2014) Ch. 7).

For the output ``y = q_a + Gamma q_u`` (eq. 4.89) held constant, the zero dynamics are
(eq. 7.24, our signs ``M a + h = B u + tau_s``)::

    [M_uu(q) - M_ua(q) Gamma] q_u'' = (tau_s - h)_u(q, q'),   q_a = y - Gamma q_u,
                                                              q_a' = -Gamma q_u'.

* :func:`linear_zero_dynamics` -- the Jacobian linearization ``A`` at an equilibrium and its
  eigenvalues; minimum phase iff every eigenvalue has a negative real part (eq. 7.25,
  Lyapunov's indirect method).
* :func:`robust_minimum_phase` -- the point-wise robustness test (eq. 7.27): ``A(p + dp)``
  stable for a set of perturbed designs.
* :func:`attenuation` -- the damping criterion (eq. 7.26), ``f = max_i int q_u,i^2 dt`` of
  the nonlinear zero dynamics after an initial disturbance, with a large default value for
  unstable designs and failed integrations (Sect. 7.4.2.1, steps 1 and 2).
* :func:`transmission_zeros` -- the servo-constraint route (Sect. 7.4.2.2, step 1): the
  finite transmission zeros of the linearized full model from u to y, which coincide with
  the zero-dynamics eigenvalues (Isidori); computed from the Rosenbrock system matrix.
* :func:`servo_attenuation` -- both steps of the servo-constraint route for any output
  y = h(q), e.g. the exact end-effector position: transmission zeros, then (7.26) on the
  servo-constraint problem (5.3) with y held constant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import scipy.linalg as sla
from scipy.integrate import solve_ivp

from multibody_dynamics.errors import DimensionError, InputError, SolverError
from multibody_dynamics.linearize import Linearizer
from multibody_dynamics.model import MultibodyModel

from .fast_zero import OK as FAST_OK
from .fast_zero import UNBOUNDED, CompiledZeroDynamics, rk4_steps

__all__ = ["Attenuation", "ZeroDynamics", "attenuation", "combined_output_selection",
           "linear_zero_dynamics", "output_zeros", "robust_minimum_phase", "servo_attenuation",
           "transmission_zeros"]

#: The "large default value" of the criterion for unstable designs (Sect. 7.4.2.1).
PENALTY = 1e6


@dataclass(frozen=True)
class ZeroDynamics:
    """Linearized zero dynamics of y = q_a + Gamma q_u at an equilibrium.

    Attributes
    ----------
    A : (2 n_u, 2 n_u)
        System matrix of x = [dq_u; dq_u'] [1/s, 1/s^2] (eq. 7.25's A(p)).
    M, C, K : (n_u, n_u)
        x' = A x is M dq_u'' + C dq_u' + K dq_u = 0 with M = M_uu - M_ua Gamma [kg m^2],
        damping C [N m s/rad] and stiffness K [N m/rad] (each reduced the same way).
    eigenvalues : (2 n_u,) complex
        Sorted by real part, largest (least stable) last [1/s].
    minimum_phase : bool
        Every eigenvalue has a negative real part (eq. 7.25).
    q : (nq,)
        The equilibrium analysed.
    """

    A: np.ndarray
    M: np.ndarray
    C: np.ndarray
    K: np.ndarray
    eigenvalues: np.ndarray
    minimum_phase: bool
    q: np.ndarray

    @property
    def spectral_abscissa(self) -> float:
        """max Re(lambda) [1/s]: negative for minimum phase; its size is the slowest decay."""
        return float(np.max(self.eigenvalues.real))

    @property
    def damping_ratios(self) -> np.ndarray:
        """-Re(lambda) / |lambda| per eigenvalue [-] (1 for real, 0 on the imaginary axis)."""
        lam = self.eigenvalues
        return -lam.real / np.maximum(np.abs(lam), 1e-300)


def combined_output_selection(model: MultibodyModel, gamma) -> tuple[np.ndarray, np.ndarray]:
    """``S`` (n_a, nv) with y = S q for y = q_a + Gamma q_u, and ``T`` (nv, n_u) with q = T q_u.

    ``T`` spans the motions that keep y constant: q_u free, q_a = -Gamma q_u.  Raises
    :class:`DimensionError` when ``gamma`` is not (n_a, n_u).
    """
    iu = np.flatnonzero(model.passive)
    ia = np.flatnonzero(~model.passive)
    gamma = np.asarray(gamma, dtype=float)
    if gamma.shape != (ia.size, iu.size):
        raise DimensionError(f"Gamma: expected shape ({ia.size}, {iu.size}) = actuated "
                             f"{[model.coordinate_names[i] for i in ia]} x passive "
                             f"{[model.coordinate_names[i] for i in iu]}, got {gamma.shape}")
    if model.nq != model.nv:
        raise InputError(f"{model.name}: a linearly combined output needs nq == nv")
    S = np.zeros((ia.size, model.nv))
    S[np.arange(ia.size), ia] = 1.0
    S[:, iu] = gamma
    T = np.zeros((model.nv, iu.size))
    T[iu, np.arange(iu.size)] = 1.0
    T[ia] = -gamma
    return S, T


def _equilibrium(model: MultibodyModel, q, linearizer: Linearizer | None, full: bool = True):
    """The linearization at rest at ``q``, with the input that holds the actuated joints;
    ``full=False``: only ``(M, C, K, q)`` of its second-order form (what the zero dynamics
    need; :meth:`~multibody_dynamics.linearize.Linearizer.second_order`)."""
    q = model.q_rest.copy() if q is None else np.array(q, dtype=float)
    if q.shape != (model.nq,):
        raise DimensionError(f"q: expected shape ({model.nq},), got {q.shape}")
    lin = linearizer or Linearizer(model)
    zero = np.zeros(model.nv)
    tau = pin.rnea(model.pin_model, lin.data, q, zero, zero)  # static generalized forces
    tau = tau + model.stiffness * (q - model.q_rest)  # minus tau_s at rest
    u = np.linalg.lstsq(model.B, tau, rcond=None)[0]
    residual = tau - model.B @ u
    if np.max(np.abs(residual)) > 1e-9 * max(1.0, np.max(np.abs(tau))):
        raise InputError(f"q = {np.round(q, 6).tolist()} is not an equilibrium of the passive "
                         f"joints of {model.name} (unbalanced generalized force "
                         f"{np.max(np.abs(residual)):.3g})")
    if full:
        return lin.linearize(q, zero, u)
    if not np.all(np.isfinite(q)):
        raise InputError(f"q: expected finite values, got {q.tolist()}")
    M, C, K, _ = lin.second_order(q, zero, u)
    return M, C, K, q


def linear_zero_dynamics(model: MultibodyModel, gamma, q=None, *,
                         linearizer: Linearizer | None = None) -> ZeroDynamics:
    """Seifried (2014) eqs. 7.24-7.25: the linearized zero dynamics of y = q_a + Gamma q_u.

    Parameters
    ----------
    model : MultibodyModel
        Open chain, nq == nv, actuation selecting the non-passive coordinates.
    gamma : (n_a, n_u)
        Weighting matrix of the combined output.
    q : (nq,), optional
        An equilibrium at constant output (default: the spring rest configuration; in a
        horizontal plane every configuration with the passive joints at rest is one).
    linearizer : Linearizer, optional
        Reused across calls on the same (in-place modified) model to save its set-up.

    Returns
    -------
    ZeroDynamics

    Notes
    -----
    The full model is linearized with pinocchio's analytic derivatives
    (:mod:`multibody_dynamics.linearize`), ``M dq'' + C dq' + K dq = B du``; substituting
    ``dq = T dq_u`` (the motions at constant output) into the passive rows gives
    ``M_u T dq_u'' + C_u T dq_u' + K_u T dq_u = 0``, whose mass matrix ``M_u T`` is
    eq. 7.24's ``M_uu - M_ua Gamma``.  At rest the velocity terms ``k`` vanish to first order.
    """
    S, T = combined_output_selection(model, gamma)
    M, C, K, q_eq = _equilibrium(model, q, linearizer, full=False)
    iu = np.flatnonzero(model.passive)
    Mz, Cz, Kz = (X[iu] @ T for X in (M, C, K))
    n = iu.size
    try:
        lu = sla.lu_factor(Mz, check_finite=True)
        if np.min(np.abs(np.diag(lu[0]))) < 1e-14 * np.max(np.abs(Mz)):
            raise np.linalg.LinAlgError
    except (np.linalg.LinAlgError, ValueError):
        raise SolverError(f"{model.name}: M_uu - M_ua Gamma is singular: the output has no "
                          "relative degree 2 (decoupling matrix singular)") from None
    A = np.zeros((2 * n, 2 * n))
    A[:n, n:] = np.eye(n)
    A[n:, :n] = -sla.lu_solve(lu, Kz)
    A[n:, n:] = -sla.lu_solve(lu, Cz)
    lam = np.linalg.eigvals(A)
    lam = lam[np.lexsort((lam.imag, lam.real))]
    return ZeroDynamics(A=A, M=Mz, C=Cz, K=Kz, eigenvalues=lam,
                        minimum_phase=bool(np.all(lam.real < 0)), q=q_eq)


def robust_minimum_phase(zero_dynamics_of: Callable[[np.ndarray], ZeroDynamics], p,
                         perturbations: Iterable) -> tuple[bool, float]:
    """Point-wise robustness test (Seifried (2014) eq. 7.27).

    Parameters
    ----------
    zero_dynamics_of : callable p -> ZeroDynamics
        Builds the design ``p`` and returns its linearized zero dynamics.
    p : (n,)
        Nominal design.
    perturbations : iterable of (n,)
        The perturbations dp; each p + dp must be minimum phase too.

    Returns
    -------
    robust : bool
        The nominal design and every perturbed one are minimum phase.
    worst : float
        The largest spectral abscissa max Re(lambda) over all of them [1/s].
    """
    p = np.asarray(p, dtype=float)
    worst = zero_dynamics_of(p).spectral_abscissa
    for dp in perturbations:
        dp = np.asarray(dp, dtype=float)
        if dp.shape != p.shape:
            raise DimensionError(f"perturbation: expected shape {p.shape}, got {dp.shape}")
        worst = max(worst, zero_dynamics_of(p + dp).spectral_abscissa)
    return worst < 0, worst


@dataclass(frozen=True)
class Attenuation:
    """Result of :func:`attenuation`.

    Attributes
    ----------
    value : float
        f = max_i int_t0^t1 q_u,i^2 dt [rad^2 s] (eq. 7.26), or the penalty.
    ok : bool
        False when the design is not minimum phase or the integration failed.
    message : str
    integrals : (n_u,)
        int q_u,i^2 dt per passive coordinate (NaN when not integrated).
    t : (N,), q_u : (N, n_u)
        The response when ``keep_response`` was asked, else empty.
    """

    value: float
    ok: bool
    message: str
    integrals: np.ndarray
    t: np.ndarray
    q_u: np.ndarray


class _ZeroDynamicsRhs:
    """x' of the nonlinear zero dynamics (7.24) with x = [q_u, q_u'] and y held at y_e."""

    bound = 1e3  # |q_u| [rad] or |q_u'| [rad/s] beyond which the design "blew up"

    def __init__(self, model: MultibodyModel, gamma, q_eq):
        S, T = combined_output_selection(model, gamma)
        self.pm, self.data = model.pin_model, model.create_data()
        self.T, self.iu = T, np.flatnonzero(model.passive)
        self.q_eq = np.asarray(q_eq, dtype=float)
        self.K, self.D, self.q_rest = model.stiffness, model.damping, model.q_rest
        self.n = self.iu.size

    def configuration(self, x):
        n = self.n
        return self.q_eq + self.T @ x[:n], self.T @ x[n:]

    def __call__(self, t, x):
        q, v = self.configuration(x)
        M = pin.crba(self.pm, self.data, q)
        M = np.triu(M) + np.triu(M, 1).T
        rhs = -self.K * (q - self.q_rest) - self.D * v - pin.nonLinearEffects(self.pm, self.data,
                                                                              q, v)
        iu = self.iu
        a_u = np.linalg.solve(M[iu] @ self.T, rhs[iu])
        return np.concatenate([x[self.n:], a_u])


def attenuation(model: MultibodyModel, gamma, q_u0, v_u0=None, *, t1: float = 3.0, q=None,
                penalty: float = PENALTY, rtol: float = 1e-6, atol: float = 1e-10,
                check_linear: bool = True, keep_response: bool = False,
                linearizer: Linearizer | None = None, method: str = "dop853",
                omega_h: float = 0.08, eigenvalues=None) -> Attenuation:
    """Seifried (2014) eq. 7.26: f = max_i int_0^t1 q_u,i^2 dt after an initial disturbance.

    Step 1 (eq. 7.25): a design whose linearized zero dynamics are not asymptotically stable
    gets ``penalty``.  Step 2: the nonlinear zero dynamics (7.24) at the constant output of
    the equilibrium ``q`` are integrated from ``q_u(0) = q_u0``, ``q_u'(0) = v_u0``; a failed
    or unbounded integration also gets ``penalty``.  ``method="dop853"`` (the reference):
    explicit Runge-Kutta 8(5,3), scipy's DOP853, tolerances ``rtol``/``atol`` (about half the
    right-hand side evaluations of RK45 at rtol 1e-6 on these lightly damped oscillations, the
    criterion within 5e-6 relative).  ``method="rk4"``: the compiled fixed-step RK4 of
    :mod:`.fast_zero` with ``h max|lambda| = omega_h`` from the linearized eigenvalues (at
    the default 0.08 closer to a tight DOP853 run, rtol 1e-10, than DOP853 at rtol 1e-6 is,
    on every design measured: :mod:`.fast_zero` notes); it falls back to the reference where the
    kernel does not apply (no numba, or a joint the compiled tree does not handle).

    Parameters
    ----------
    model : MultibodyModel
    gamma : (n_a, n_u)
    q_u0 : (n_u,)
        Initial disturbance of the passive coordinates [rad].
    v_u0 : (n_u,), optional
        Initial passive velocities [rad/s] (default zero).
    t1 : float
        Final time of the simulation [s].
    q : (nq,), optional
        Equilibrium (default: spring rest configuration).
    penalty : float
        The "large default value".
    check_linear : bool
        Do step 1 first (skip only when the caller already did).
    keep_response : bool
        Return the sampled response (for plots).
    method : {"dop853", "rk4"}
        Integrator of step 2 (see above).
    omega_h : float
        ``method="rk4"``: step times the largest eigenvalue modulus [-].
    eigenvalues : (2 n_u,) complex, optional
        ``method="rk4"``: the linearized zero dynamics' eigenvalues when the caller has them
        (step 1 computed elsewhere); otherwise computed here.
    """
    if method not in ("dop853", "rk4"):
        raise InputError(f"method: expected 'dop853' or 'rk4', got {method!r}")
    iu = np.flatnonzero(model.passive)
    q_u0 = np.asarray(q_u0, dtype=float)
    v_u0 = np.zeros(iu.size) if v_u0 is None else np.asarray(v_u0, dtype=float)
    for name, x in (("q_u0", q_u0), ("v_u0", v_u0)):
        if x.shape != (iu.size,):
            raise DimensionError(f"{name}: expected shape ({iu.size},) (one per passive joint "
                                 f"{list(model.passive_joint_names)}), got {x.shape}")
    if not (math.isfinite(t1) and t1 > 0):
        raise InputError(f"t1: expected a positive final time in s, got {t1!r}")
    nan = np.full(iu.size, np.nan)
    empty = np.zeros(0)
    q_eq = model.q_rest.copy() if q is None else np.asarray(q, dtype=float)
    if check_linear or (method == "rk4" and eigenvalues is None):
        zd = linear_zero_dynamics(model, gamma, q_eq, linearizer=linearizer)
        if check_linear and not zd.minimum_phase:
            return Attenuation(penalty, False, "non-minimum phase: max Re(lambda) = "
                               f"{zd.spectral_abscissa:.4g} 1/s", nan, empty, empty)
        eigenvalues = zd.eigenvalues if eigenvalues is None else eigenvalues
    n = iu.size
    if method == "rk4":
        _, T = combined_output_selection(model, gamma)
        fast = CompiledZeroDynamics(model, T, q_eq, bound=_ZeroDynamicsRhs.bound)
        if fast.available:
            return _rk4_attenuation(fast, q_u0, v_u0, t1, rk4_steps(t1, eigenvalues, omega_h),
                                    penalty, keep_response)
    rhs = _ZeroDynamicsRhs(model, gamma, q_eq)

    def augmented(t, z):
        dx = rhs(t, z[:2 * n])
        return np.concatenate([dx, z[:n] ** 2])

    def blow_up(t, z):
        return rhs.bound - np.max(np.abs(z[:2 * n]))

    return _integrate_attenuation(augmented, blow_up, np.concatenate([q_u0, v_u0, np.zeros(n)]),
                                  t1, n, penalty, rtol, atol, keep_response)


def _rk4_attenuation(fast: CompiledZeroDynamics, q_u0, v_u0, t1, nsteps, penalty,
                     keep_response) -> Attenuation:
    """(7.26) by the compiled RK4 (:mod:`.fast_zero`); the same outcomes as
    :func:`_integrate_attenuation` (penalty for an unbounded or failed run)."""
    n = fast.n
    nan, empty = np.full(n, np.nan), np.zeros(0)
    status, t, z, resp = fast.integrate(q_u0, v_u0, t1, nsteps, keep_response)
    if status != FAST_OK or not np.all(np.isfinite(z)):
        why = ("unbounded zero dynamics" if status == UNBOUNDED
               else "M_uu - M_ua Gamma is singular")
        return Attenuation(penalty, False, f"integration failed at t = {t:.4g} s: {why}",
                           nan, empty, empty)
    integrals = z[2 * n:].copy()
    times = np.linspace(0.0, t1, nsteps + 1) if keep_response else empty
    return Attenuation(float(np.max(integrals)), True, "", integrals, times,
                       resp if keep_response else empty)


def transmission_zeros(model: MultibodyModel, gamma, q=None, *,
                       linearizer: Linearizer | None = None) -> np.ndarray:
    """Finite transmission zeros of the linearized model from u to y = q_a + Gamma q_u.

    Seifried (2014) Sect. 7.4.2.2, step 1: the zero-dynamics eigenvalues are the transmission
    zeros of the linearized system (Isidori).  The full model is linearized at the
    equilibrium ``q`` (x' = A x + B u, y = [S 0] x) and the zeros are the finite generalized
    eigenvalues of the Rosenbrock pencil ``[[A, B], [C, 0]] - s [[I, 0], [0, 0]]``.

    Returns
    -------
    (k,) complex
        Sorted by real part [1/s]; k = 2 n_u for a square system of vector relative degree
        {2, ..., 2}.
    """
    S, _ = combined_output_selection(model, gamma)
    return _rosenbrock_zeros(_equilibrium(model, q, linearizer), S)


def _rosenbrock_zeros(lin, H) -> np.ndarray:
    """Finite zeros of (A, B, [H 0], 0); H (m, nv) the output Jacobian at the equilibrium."""
    nx, nu = lin.A.shape[0], lin.B.shape[1]
    if H.shape[0] != nu:
        raise DimensionError(f"transmission zeros need a square system: {H.shape[0]} outputs, "
                             f"{nu} inputs")
    C = np.hstack([H, np.zeros_like(H)])
    P = np.block([[lin.A, lin.B], [C, np.zeros((nu, nu))]])
    E = np.zeros_like(P)
    E[:nx, :nx] = np.eye(nx)
    lam = sla.eigvals(P, E)
    lam = lam[np.isfinite(lam) & (np.abs(lam) < 1e8)]  # the infinite zeros come out as inf/huge
    return lam[np.lexsort((lam.imag, lam.real))]


def output_zeros(model: MultibodyModel, output, q=None) -> np.ndarray:
    """Finite transmission zeros from u to any output y = h(q), linearized at the equilibrium q.

    Sect. 7.4.2.2, step 1, for outputs such as the exact end-effector position
    ``("x", "tip.x", "tip.y")``.  ``q`` defaults to the spring rest configuration with the
    actuated revolute joints bent by 0.5 rad (a stretched arm is singular for end-effector
    outputs).  Fewer than 2 n_u finite zeros mean the output has no relative degree 2 there.
    """
    from ..outputs import Output, bent_guess

    out = output if isinstance(output, Output) else Output(model, output)
    q_eq = bent_guess(model) if q is None else np.asarray(q, dtype=float)
    return _rosenbrock_zeros(_equilibrium(model, q_eq, None), out.jacobian(q_eq))


def _integrate_attenuation(augmented, blow_up, z0, t1, n, penalty, rtol, atol, keep_response,
                           offset=0.0) -> Attenuation:
    """(7.26) from the zero dynamics with the integrals of the squared deviations appended
    (state ``z = [q_u, v_u, integrals]``, ``2 n + n``); ``blow_up`` ends a diverging run, whose
    design then gets ``penalty``. The response is reported relative to ``offset``."""
    nan, empty = np.full(n, np.nan), np.zeros(0)
    blow_up.terminal = True
    try:
        sol = solve_ivp(augmented, (0.0, t1), z0, method="DOP853", rtol=rtol, atol=atol,
                        events=blow_up)
    except (SolverError, np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
        return Attenuation(penalty, False, f"integration failed: {exc}", nan, empty, empty)
    if sol.status != 0 or not np.all(np.isfinite(sol.y[:, -1])):
        why = "unbounded zero dynamics" if sol.status == 1 else sol.message
        return Attenuation(penalty, False, f"integration failed at t = {sol.t[-1]:.4g} s: {why}",
                           nan, empty, empty)
    integrals = sol.y[2 * n:, -1].copy()
    t = sol.t if keep_response else empty
    resp = (sol.y[:n].T - offset) if keep_response else empty
    return Attenuation(float(np.max(integrals)), True, "", integrals, t, resp)


def servo_attenuation(model: MultibodyModel, output, q_u0, v_u0=None, *, q=None,
                      t1: float = 3.0, penalty: float = PENALTY, rtol: float = 1e-6,
                      atol: float = 1e-10, check_linear: bool = True,
                      keep_response: bool = False) -> Attenuation:
    """The criterion of Sect. 7.4.2.2 (servo-constraint route) for any output y = h(q).

    Step 1 (:func:`output_zeros`): the transmission zeros of the model linearized at the
    equilibrium ``q`` from u to y must lie in the left half plane; else ``penalty``.
    Step 2: the servo-constraint problem (5.3) is simulated with the output held at
    y_d = h(q) for all time and the passive coordinates disturbed, q_u(0) = q_u,e + q_u0,
    q_u'(0) = v_u0; the actuated coordinates follow from h(q_a, q_u) = y_d (Newton) and the
    accelerations from the ODE form (5.22)
    (:class:`~multibody_control.inversion.servo.ServoConstraints`).  The value is (7.26) on
    q_u - q_u,e.

    Parameters
    ----------
    output : sequence of str or Output
        Output rows, e.g. ``("x", "tip.x", "tip.y")`` (the exact end-effector position).
    q : (nq,), optional
        Equilibrium (default as in :func:`output_zeros`).
    Other parameters as in :func:`attenuation`.
    """
    from ..inversion.servo import ServoConstraints
    from ..outputs import Output, bent_guess

    out = output if isinstance(output, Output) else Output(model, output)
    q_eq = bent_guess(model) if q is None else np.asarray(q, dtype=float)
    iu = np.flatnonzero(model.passive)
    n = iu.size
    q_u0 = np.asarray(q_u0, dtype=float)
    v_u0 = np.zeros(n) if v_u0 is None else np.asarray(v_u0, dtype=float)
    for name, x in (("q_u0", q_u0), ("v_u0", v_u0)):
        if x.shape != (n,):
            raise DimensionError(f"{name}: expected shape ({n},) (one per passive joint "
                                 f"{list(model.passive_joint_names)}), got {x.shape}")
    if not (math.isfinite(t1) and t1 > 0):
        raise InputError(f"t1: expected a positive final time in s, got {t1!r}")
    nan, empty = np.full(n, np.nan), np.zeros(0)
    if check_linear:
        zeros = output_zeros(model, out, q_eq)
        if zeros.size != 2 * n:
            return Attenuation(penalty, False, f"{zeros.size} finite transmission zeros, "
                               f"expected {2 * n}: the output has no relative degree 2 here",
                               nan, empty, empty)
        if not np.all(zeros.real < 0):
            return Attenuation(penalty, False, "non-minimum phase: max Re(zero) = "
                               f"{np.max(zeros.real):.4g} 1/s", nan, empty, empty)
    servo = ServoConstraints(model, out)
    servo._qa_guess = q_eq[servo.ia]  # start Newton on the equilibrium's branch
    y_e, zero_m = out.value(q_eq), np.zeros(out.m)
    qu_e = q_eq[iu]

    def augmented(t, z):
        deta = servo.internal_rhs_at(y_e, zero_m, zero_m, z[:2 * n])
        return np.concatenate([deta, (z[:n] - qu_e) ** 2])

    def blow_up(t, z):
        return 1e3 - np.max(np.abs(z[:2 * n]))

    z0 = np.concatenate([qu_e + q_u0, v_u0, np.zeros(n)])
    return _integrate_attenuation(augmented, blow_up, z0, t1, n, penalty, rtol, atol,
                                  keep_response, offset=qu_e)
