"""Quasi-velocity formulation of unconstrained and constrained dynamics (Aghili 2010).

Aghili, F., "Modeling and control of mechanical systems in terms of quasi-velocities",
book chapter, 2010 (readings: docs/derivations.md, "Aghili (2010)").  Notation: Aghili's
quasi-velocity ``v`` is called ``nu`` here, because ``v`` is pinocchio's joint velocity
``q'``; his generalized force ``f`` (gravity included) is ``tau + tau_s - g(q)``.

* Square-root factorization ``M = W W^T`` (lower Cholesky factor, App. A eq. 48);
  quasi-velocities ``nu = W^T v`` (6a), quasi-forces ``u = W^{-1} f`` (6b), kinetic
  energy ``T = 1/2 ||nu||^2`` (12).
* Equation of motion ``nu' + Gamma nu = u`` (7a).  The ``Gamma`` of eq. (7b) is not
  skew-symmetric; the reading used here is the skew-symmetric one of docs/derivations.md,
  built from pinocchio's Coriolis matrix ``C`` (``M' = C + C^T``)::

      Gamma = W^{-1} (C - W W'^T) W^{-T} = Y - X^T,
      Y = W^{-1} C W^{-T},  X = W^{-1} W' = Phi(Y + Y^T),

  ``Phi`` = strictly lower part plus half the diagonal (the derivative of the Cholesky
  factor: ``W^{-1} M' W^{-T} = X + X^T`` with X lower triangular).  It gives the same
  ``Gamma nu`` as (7b) and ``nu^T Gamma nu = 0`` (13).
* Constraints ``A(q) v = 0`` (16), possibly rank-deficient: ``Lambda = A W^{-T}`` (19),
  SVD ``Lambda = U Sigma V^T`` of rank r (21), ``V = [V1 V2]``, ``U1`` the first r columns
  of U, ``S`` the r non-zero singular values.  Reduced quasi-velocities ``nu_r = V2^T nu``
  (26), ``v = W^{-T} V2 nu_r`` (27), ``u_o = V1^T u``, ``u_r = V2^T u`` (28).
* Motion (31a): ``nu_r' + Gamma_r nu_r = u_r`` with ``Gamma_r = V2^T Gamma V2 + V2^T V2'``
  (the "+V2 V2'" of (35) read as ``V2^T V2'``, errata).
* Constraint force (31b)/(33): ``Gamma_o = V1^T Gamma V2 + V1^T V2'``.  ``V1^T V2'`` does
  not depend on how the null-space basis rotates: from ``Lambda V2 = 0``,
  ``V1^T V2' nu_r = -S^{-1} U1^T Lambda' nu`` with ``Lambda' nu = gamma - Lambda X^T nu``
  (``gamma = A' v``, the bias of :mod:`.constraints`).  With this project's sign
  convention ``M a + h = tau + tau_s + A^T lam`` (:mod:`.projection`), the multiplier is
  ``lam = U1 S^{-1} (Gamma_o nu_r - u_o)``; Aghili writes the constraint force on the
  left-hand side, so his (33) ``U1 S^{-1} (u_o - Gamma_o nu_r)`` is ``-lam``.  It is the
  minimum-norm multiplier when r < m.
* Joint actuation ``f = W (V1 u_o + V2 u_r)``; ``u_o = 0`` gives the actuation of least
  ``||u||^2 = f^T M^{-1} f`` for the motion (‖u‖² = ‖u_r‖² + ‖u_o‖²).

The SVD basis ``V2`` is only defined up to a rotation and may jump between calls.
:func:`align_basis` rotates it onto a previous basis (orthogonal Procrustes); with such a
basis ``V2^T V2' = 0`` to first order (a discrete parallel transport), which is what the
default ``basis_rate=None`` assumes.  For another basis, pass its rate, e.g. from
:func:`basis_derivative` (finite differences of aligned bases).  Accelerations and
multipliers do not depend on this choice.

Gauge invariance (Sect. 4.3): with ``q = T q~`` for a constant diagonal ``T`` (a unit
change), ``W~ = T W`` so ``nu``, ``u``, ``Lambda``, ``nu_r``, ``u_r``, ``u_o`` and ``lam`` are
unchanged (checked in ``test/test_quasi_velocity.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from scipy.linalg import lapack, solve_triangular

from .constraints import Constraints
from .errors import InputError, SolverError
from .model import MultibodyModel
from .rigid import RigidDynamics
from .validation import as_matrix, as_vector


@dataclass(frozen=True)
class QuasiVelocitySettings:
    """Settings of :class:`QuasiVelocityDynamics`.

    Parameters
    ----------
    rank_atol : float
        Singular values of ``Lambda = A W^{-T}`` below ``max(rank_atol, rank_rtol * s_max)``
        are zero [units of A times kg^-1/2].
    rank_rtol : float
        Relative threshold (times the largest singular value).
    """

    rank_atol: float = 1e-9
    rank_rtol: float = 1e-10

    def __post_init__(self):
        if not (self.rank_atol >= 0 and self.rank_rtol >= 0):
            raise InputError("rank_atol, rank_rtol: expected numbers >= 0, got "
                             f"{self.rank_atol}, {self.rank_rtol}")


@dataclass(frozen=True)
class QuasiVelocityTerms:
    """Unconstrained quasi-velocity terms at one state (Aghili 2010 eqs. 6-7).

    Attributes
    ----------
    W : (nv, nv)  lower Cholesky factor, ``M = W W^T``
    W_dot : (nv, nv)  its time derivative, ``W' = W Phi(W^{-1} M' W^{-T})``
    Gamma : (nv, nv)  skew-symmetric ``W^{-1}(C - W W'^T) W^{-T}``
    nu : (nv,)  quasi-velocities ``W^T v`` [sqrt(J)]
    u : (nv,)  quasi-forces ``W^{-1} f`` [sqrt(J)/s]
    nu_dot : (nv,)  ``u - Gamma nu`` (7a): the unconstrained motion
    """

    W: np.ndarray
    W_dot: np.ndarray
    Gamma: np.ndarray
    nu: np.ndarray
    u: np.ndarray
    nu_dot: np.ndarray


@dataclass(frozen=True)
class ConstrainedQuasiVelocityResult:
    """Constrained quasi-velocity dynamics at one state (Aghili 2010 eqs. 19-33).

    Attributes
    ----------
    a : (nv,)  joint accelerations [rad/s^2 | m/s^2]
    lam : (m,)  minimum-norm multipliers, ``M a + h = tau + tau_s + A^T lam`` [N | N m]
    nu : (nv,)  quasi-velocities ``W^T v``
    nu_r : (nv - r,)  reduced quasi-velocities ``V2^T nu`` (26)
    nu_r_dot : (nv - r,)  ``u_r - Gamma_r nu_r`` (31a), for the returned basis and rate
    u : (nv,); u_o : (r,); u_r : (nv - r,)  quasi-forces (28)
    Gamma_r : (nv - r, nv - r)  ``V2^T Gamma V2 + V2^T V2'``
    Gamma_o_nu_r : (r,)  ``Gamma_o nu_r`` of (31b), independent of the basis rotation
    W, Gamma : (nv, nv)  as in :class:`QuasiVelocityTerms`
    Lambda : (m, nv)  ``A W^{-T}`` (19)
    U1 : (m, r); S : (r,); V1 : (nv, r); V2 : (nv, nv - r)  the reduced SVD (21); V2 is
        aligned to the ``basis`` passed in, if any
    singular_values : all singular values of Lambda, descending
    rank : int
    residual : float  ``||A a + gamma||_inf``
    success : bool; message : str
    """

    a: np.ndarray
    lam: np.ndarray
    nu: np.ndarray
    nu_r: np.ndarray
    nu_r_dot: np.ndarray
    u: np.ndarray
    u_o: np.ndarray
    u_r: np.ndarray
    Gamma_r: np.ndarray
    Gamma_o_nu_r: np.ndarray
    W: np.ndarray
    Gamma: np.ndarray
    Lambda: np.ndarray
    U1: np.ndarray
    S: np.ndarray
    V1: np.ndarray
    V2: np.ndarray
    singular_values: np.ndarray
    rank: int
    residual: float
    success: bool
    message: str


@dataclass(frozen=True)
class QuasiVelocityInverseResult:
    """Inverse dynamics in quasi-velocities
    (:meth:`QuasiVelocityDynamics.inverse_dynamics_result`).

    Attributes
    ----------
    tau : (nv,)  joint actuation [N m | N]
    reduction : ConstrainedQuasiVelocityResult  the forward dynamics at (q, v, tau): its ``a``
        is the commanded motion, ``lam`` the multipliers, ``u_o`` / ``u_r`` the quasi-forces
    """

    tau: np.ndarray
    reduction: ConstrainedQuasiVelocityResult

    @property
    def success(self) -> bool:
        """The reduction's success (finite accelerations and multipliers)."""
        return self.reduction.success

    @property
    def message(self) -> str:
        """The reduction's message."""
        return self.reduction.message


# -- kernels on matrices ------------------------------------------------------------------------
def cholesky_factor(M) -> np.ndarray:
    """Lower-triangular ``W`` with ``M = W W^T`` (Aghili 2010 App. A eq. 48)."""
    M = np.asarray(M, float)
    W, info = lapack.dpotrf(M, lower=1, clean=1)
    if info != 0:
        raise SolverError(f"M: Cholesky factorization failed (LAPACK info {info}); the mass "
                          "matrix is not positive definite")
    return W


def _phi(X: np.ndarray) -> np.ndarray:
    """Strictly lower part plus half the diagonal."""
    out = np.tril(X, -1)
    out.flat[:: X.shape[0] + 1] = 0.5 * np.diag(X)
    return out


def quasi_velocity_terms(M, C, f, v) -> QuasiVelocityTerms:
    """W, W', the skew-symmetric Gamma, nu and u from ``M``, Coriolis ``C``, ``f`` and ``v``.

    Parameters
    ----------
    M : (nv, nv)  mass matrix; C : (nv, nv)  Coriolis matrix with ``M' = C + C^T``
    f : (nv,)  applied generalized force ``tau + tau_s - g`` [N | N m]; v : (nv,) joint velocity
    """
    M = np.asarray(M, float)
    n = M.shape[0]
    C = as_matrix(C, (n, n), "C")
    f, v = as_vector(f, n, "f"), as_vector(v, n, "v")
    W = cholesky_factor(M)
    # Y = W^-1 C W^-T by two triangular solves
    Y = solve_triangular(W, solve_triangular(W, C.T, lower=True).T, lower=True)
    X = _phi(Y + Y.T)  # W^-1 W'
    Gamma = Y - X.T
    nu = W.T @ v
    u = solve_triangular(W, f, lower=True)
    return QuasiVelocityTerms(W, W @ X, Gamma, nu, u, u - Gamma @ nu)


def align_basis(V2, previous) -> np.ndarray:
    """``V2 R`` with the orthogonal R that brings it closest to ``previous`` (Procrustes).

    ``R = argmin ||V2 R - previous||_F`` = ``P Q^T`` from the SVD ``V2^T previous = P S Q^T``.
    Both bases span (nearly) the same subspace; the result follows ``previous`` continuously
    (no sign flips or rotations) when the subspace moves a little.
    """
    V2 = np.asarray(V2, float)
    previous = np.asarray(previous, float)
    if previous.shape != V2.shape:
        raise InputError(f"basis: expected shape {V2.shape} (same null-space dimension), got "
                         f"{previous.shape}")
    if V2.shape[1] == 0:
        return V2
    P, _, Qt = np.linalg.svd(V2.T @ previous)
    return V2 @ (P @ Qt)


def basis_derivative(V2, previous, dt: float) -> np.ndarray:
    """Backward finite difference ``(V2 - previous~) / dt`` of a null-space basis.

    ``previous~`` is ``previous`` rotated onto ``V2`` (:func:`align_basis`), so the
    difference measures the motion of the subspace and of ``V2``'s own rotation only.
    """
    if not dt > 0:
        raise InputError(f"dt: expected > 0 [s], got {dt}")
    return (np.asarray(V2, float) - align_basis(previous, V2)) / dt


def constrained_quasi_velocity(M, C, f, v, A, gamma, basis=None, basis_rate=None,
                               settings: QuasiVelocitySettings | None = None
                               ) -> ConstrainedQuasiVelocityResult:
    """Aghili (2010) eqs. 19-33 on matrices: motion, minimum-norm multiplier, accelerations.

    Parameters
    ----------
    M, C : (nv, nv)  mass and Coriolis matrices; f : (nv,) ``tau + tau_s - g``
    v : (nv,)  joint velocity, admissible (``A v = 0``) for (31a) to describe the motion
    A : (m, nv); gamma : (m,)  constraint Jacobian and bias ``A' v``
    basis : (nv, nv - r), optional  previous ``V2``: the new one is aligned to it
    basis_rate : (nv, nv - r), optional  ``V2'`` of the returned basis; default: zero
        ``V2^T V2'`` (a Procrustes-aligned basis, see the module docstring)

    Notes
    -----
    The accelerations follow without ``V2'``: ``V2^T nu' = u_r - V2^T Gamma nu`` (31a) and
    ``V1^T nu' = -S^{-1} U1^T (gamma - Lambda X^T nu)`` (the constraint on acceleration
    level), then ``a = W^{-T} (nu' - X^T nu)``.
    """
    s = settings or QuasiVelocitySettings()
    t = quasi_velocity_terms(M, C, f, v)
    n = t.W.shape[0]
    A = as_matrix(A, (None, n), "A")
    gamma = as_vector(gamma, A.shape[0], "gamma")
    W, Gamma, nu, u = t.W, t.Gamma, t.nu, t.u
    X = solve_triangular(W, t.W_dot, lower=True)
    Lam = solve_triangular(W, A.T, lower=True).T  # A W^-T
    m = A.shape[0]
    if m:
        U, sv, Vt = np.linalg.svd(Lam)
        tol = max(s.rank_atol, s.rank_rtol * sv[0]) if sv.size else s.rank_atol
        r = int(np.count_nonzero(sv > tol))
    else:
        U, sv, Vt, r = np.zeros((0, 0)), np.zeros(0), np.eye(n), 0
    U1, S, V1, V2 = U[:, :r], sv[:r], Vt[:r].T, Vt[r:].T
    if basis is not None:
        V2 = align_basis(V2, basis)
    nu_r = V2.T @ nu
    u_o, u_r = V1.T @ u, V2.T @ u
    Gamma_r = V2.T @ Gamma @ V2
    if basis_rate is not None:
        Gamma_r = Gamma_r + V2.T @ as_matrix(basis_rate, V2.shape, "basis_rate")
    # Lambda' nu = gamma - Lambda X^T nu; V1^T V2' nu_r = -S^-1 U1^T Lambda' nu
    V1t_dV2_nu_r = -(U1.T @ (gamma - Lam @ (X.T @ nu))) / S
    Gamma_o_nu_r = V1.T @ (Gamma @ nu) + V1t_dV2_nu_r
    lam = U1 @ ((Gamma_o_nu_r - u_o) / S)
    nu_dot = V2 @ (u_r - V2.T @ (Gamma @ nu)) + V1 @ V1t_dV2_nu_r
    a = solve_triangular(W, nu_dot - X.T @ nu, lower=True, trans="T")
    residual = float(np.max(np.abs(A @ a + gamma))) if m else 0.0
    ok = bool(np.all(np.isfinite(a)) and np.all(np.isfinite(lam)))
    if not ok:
        msg = "non-finite accelerations or multipliers"
    elif r < m:
        msg = f"rank of Lambda is {r} < {m} rows: redundant or removed constraint direction(s)"
    else:
        msg = "ok"
    return ConstrainedQuasiVelocityResult(
        a=a, lam=lam, nu=nu, nu_r=nu_r, nu_r_dot=u_r - Gamma_r @ nu_r, u=u, u_o=u_o, u_r=u_r,
        Gamma_r=Gamma_r, Gamma_o_nu_r=Gamma_o_nu_r, W=W, Gamma=Gamma, Lambda=Lam, U1=U1, S=S,
        V1=V1, V2=V2, singular_values=sv, rank=r, residual=residual, success=ok, message=msg)


# -- the model-level object -----------------------------------------------------------------------
class QuasiVelocityDynamics:
    """Quasi-velocity dynamics of a (constrained) model (Aghili 2010).

    Parameters
    ----------
    model : MultibodyModel
    constraints : Constraints, optional
        Default: ``Constraints(model)`` (the closures of the model YAML).
    settings : QuasiVelocitySettings, optional

    Notes
    -----
    A :class:`~multibody_dynamics.protocols.Dynamics`: ``forward_dynamics`` returns the
    accelerations and ``inverse_dynamics`` the actuation (the one of least ``f^T M^{-1} f``,
    not :class:`~multibody_dynamics.projection.ProjectedDynamics`' minimum-norm one; passive
    joints are not treated) as arrays; the reduction (multipliers, quasi-velocities, SVD of
    Lambda) is under ``forward_dynamics_result`` / ``inverse_dynamics_result``.
    Owns one pinocchio ``Data`` (plus those of its constraints): one object per thread.
    """

    def __init__(self, model: MultibodyModel, constraints: Constraints | None = None,
                 settings: QuasiVelocitySettings | None = None):
        self.model = model
        self.constraints = constraints if constraints is not None else Constraints(model)
        self.settings = settings or QuasiVelocitySettings()
        self._pm = model.pin_model
        self._data = self._pm.createData()
        self._rigid = RigidDynamics(model)
        self._nq, self._nv = model.nq, model.nv

    def _matrices(self, q, v, tau):
        """M, C and ``f = tau + tau_s - g`` at (q, v)."""
        pm, data = self._pm, self._data
        M = pin.crba(pm, data, q).copy()
        C = pin.computeCoriolisMatrix(pm, data, q, v).copy()
        f = tau - pin.computeGeneralizedGravity(pm, data, q)
        if self.model.has_springs:
            f = f + self._rigid.spring_forces(q, v)
        return M, C, f

    def _state(self, q, v):
        return as_vector(q, self._nq, "q"), as_vector(v, self._nv, "v")

    def terms(self, q, v, tau=None) -> QuasiVelocityTerms:
        """Unconstrained terms W, W', Gamma, nu, u at (q, v) under actuation ``tau`` (nv,)."""
        q, v = self._state(q, v)
        tau = np.zeros(self._nv) if tau is None else as_vector(tau, self._nv, "tau")
        return quasi_velocity_terms(*self._matrices(q, v, tau), v)

    def forward_dynamics(self, q, v, tau) -> np.ndarray:
        """Accelerations a (nv,) [rad/s^2 | m/s^2] under actuation ``tau`` (nv,) [N m | N]: the
        :class:`~multibody_dynamics.protocols.Dynamics` convention.  The multipliers and the
        reduction (W, Lambda, its SVD, Gamma_r, ...): :meth:`forward_dynamics_result`."""
        return self.forward_dynamics_result(q, v, tau).a

    def forward_dynamics_result(self, q, v, tau, basis=None, basis_rate=None
                                ) -> ConstrainedQuasiVelocityResult:
        """Constrained motion (31a), multipliers (33) and accelerations at (q, v).

        Parameters
        ----------
        q : (nq,); v : (nv,) admissible velocity [rad/s | m/s]; tau : (nv,) [N m | N]
        basis : (nv, nv - r), optional  previous ``V2`` to stay continuous with
        basis_rate : (nv, nv - r), optional  ``V2'`` (see :func:`constrained_quasi_velocity`)
        """
        q, v = self._state(q, v)
        tau = as_vector(tau, self._nv, "tau")
        A, gamma = self.constraints.jacobian_and_bias(q, v)
        M, C, f = self._matrices(q, v, tau)
        return constrained_quasi_velocity(M, C, f, v, A, gamma, basis, basis_rate, self.settings)

    def actuation(self, q, v, u_o, u_r, reduction: ConstrainedQuasiVelocityResult) -> np.ndarray:
        """Joint actuation ``tau = W (V1 u_o + V2 u_r) + g - tau_s`` (nv,) [N m | N].

        ``reduction`` is the result of :meth:`forward_dynamics_result` or :meth:`reduce` at
        (q, v), whose ``W``, ``V1`` and ``V2`` define ``u_o`` (r,) and ``u_r`` (nv - r,).
        """
        q, v = self._state(q, v)
        u_o = as_vector(u_o, reduction.rank, "u_o")
        u_r = as_vector(u_r, self._nv - reduction.rank, "u_r")
        return self._tau(q, v, reduction, u_o, u_r)

    def reduce(self, q, v, basis=None, basis_rate=None) -> ConstrainedQuasiVelocityResult:
        """The reduction at (q, v) without actuation (``tau = 0``): W, Lambda, its SVD, Gamma_r."""
        return self.forward_dynamics_result(q, v, np.zeros(self._nv), basis, basis_rate)

    def inverse_dynamics(self, q, v, a) -> np.ndarray:
        """Actuation tau (nv,) [N m | N] of the admissible acceleration ``a`` (nv,) with
        ``u_o = 0``, the least ``f^T M^{-1} f`` (:meth:`inverse_dynamics_result`): the
        :class:`~multibody_dynamics.protocols.Dynamics` convention."""
        return self.inverse_dynamics_result(q, v, a).tau

    def inverse_dynamics_result(self, q, v, a, u_o=None) -> QuasiVelocityInverseResult:
        """Actuation that produces the admissible acceleration ``a``, with ``u_o`` chosen.

        ``u_r = V2^T (W^T a + X^T nu + Gamma nu)`` (the motion, eq. 31a without the basis
        rate); ``u_o`` (r,) defaults to zero, which gives the actuation of least
        ``f^T M^{-1} f`` (Aghili 2010 Sect. 4); a non-zero ``u_o`` sets the constraint force
        through (33).

        Returns
        -------
        QuasiVelocityInverseResult
            ``tau`` (nv,) [N m | N] and the ``reduction`` at (q, v, tau) (its ``a``, ``lam``,
            ``u_o``, ``u_r``, ...).
        """
        q, v = self._state(q, v)
        a = as_vector(a, self._nv, "a")
        red = self.reduce(q, v)
        t = self.terms(q, v)
        X = solve_triangular(t.W, t.W_dot, lower=True)
        u_r = red.V2.T @ (t.W.T @ a + X.T @ t.nu + t.Gamma @ t.nu)
        u_o = np.zeros(red.rank) if u_o is None else as_vector(u_o, red.rank, "u_o")
        tau = self._tau(q, v, red, u_o, u_r)
        return QuasiVelocityInverseResult(tau, self.forward_dynamics_result(q, v, tau,
                                                                            basis=red.V2))

    def _tau(self, q, v, red, u_o, u_r):
        f = red.W @ (red.V1 @ u_o + red.V2 @ u_r)
        tau = f + pin.computeGeneralizedGravity(self._pm, self._data, q)
        if self.model.has_springs:
            tau -= self._rigid.spring_forces(q, v)
        return tau

    def kinetic_energy(self, q, v) -> float:
        """``T = 1/2 ||nu||^2`` (eq. 12) [J]."""
        q, v = self._state(q, v)
        W = cholesky_factor(pin.crba(self._pm, self._data, q))
        nu = W.T @ v
        return 0.5 * float(nu @ nu)

    def mass_matrix(self, q) -> np.ndarray:
        """Joint-space mass matrix ``M(q) = W W^T`` (nv, nv) [kg | kg m^2] (``crba``)."""
        return self._rigid.mass_matrix(as_vector(q, self._nq, "q"))

    def energy(self, q, v) -> float:
        """Total mechanical energy ``T + V`` [J] (gravity and springs; the constraints do no
        work); ``T`` equals :meth:`kinetic_energy`."""
        q, v = self._state(q, v)
        return self._rigid.energy(q, v)


__all__ = [
    "ConstrainedQuasiVelocityResult", "QuasiVelocityDynamics", "QuasiVelocityInverseResult",
    "QuasiVelocitySettings", "QuasiVelocityTerms", "align_basis", "basis_derivative",
    "cholesky_factor",
    "constrained_quasi_velocity", "quasi_velocity_terms",
]
