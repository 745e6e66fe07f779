"""Linearization about an operating point and along a trajectory; zero-order-hold discretization.

The nonlinear model is the open-chain equation of motion of :mod:`.rigid`::

    M(q) a + h(q, v) = B u + tau_s(q, v),     tau_s = -K_s (q - q_rest) - D_s v,

with ``B`` the model's actuation map.  Perturbing a nominal motion (q0, v0, u0)
with ``q = q0 (+) dq`` (``pin.integrate``: dq lives in the tangent space, nv
components, so joints with nq != nv are handled), ``v = v0 + dv``, ``u = u0 + du``
gives the second-order form (NASA CR-165977 App. C eq. C-83; Seifried (2014) eq. 2.41)::

    M dq'' + C dq' + K dq = B du,
    M = M(q0),  C = d(ID)/dv,  K = d(ID)/dq  (ID = M a + h - tau_s at the nominal a0),

and the first-order form in x = [dq; dv] (2 nv,)::

    x' = A x + B_x du,   A = [[0, I], [-M^-1 K, -M^-1 C]],   B_x = [[0], [M^-1 B]].

The derivatives are pinocchio's analytic ones (``computeABADerivatives``,
``computeRNEADerivatives``), so they hold to round-off, not to a finite-difference
step.  Note that ``dq' = dv`` holds only to first order on the manifold; for the
1-DoF joints of the shipped robots it is exact.

Discretization with the input held over each step (zero-order hold, NASA
CR-165977 eq. C-122)::

    x(k+1) = Phi x(k) + Theta u(k),   [[Phi, Theta], [0, I]] = expm([[A, B_x], [0, 0]] dt).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from scipy.linalg import cho_factor, cho_solve, expm

from .errors import DimensionError, InputError, SolverError
from .model import MultibodyModel
from .validation import as_matrix, as_vector, require_finite

__all__ = [
    "Linearization", "Linearizer", "TrajectoryLinearization", "discretize_zoh", "linearize",
    "linearize_trajectory",
]


@dataclass(frozen=True)
class Linearization:
    """Linear model about one operating point (q0, v0, u0).

    Attributes
    ----------
    A : (2 nv, 2 nv)
        State matrix of x = [dq; dv] (dq in the tangent space at q0) [1/s, 1/s^2].
    B : (2 nv, nu)
        Input matrix of du (the model's inputs, [N | N m]).
    M : (nv, nv)
        Mass matrix M(q0) [kg | kg m^2].
    C : (nv, nv)
        Velocity (damping/gyroscopic) matrix d(M a + h - tau_s)/dv [N s/m | N m s/rad].
    K : (nv, nv)
        Stiffness matrix d(M a + h - tau_s)/dq at the nominal acceleration [N/m | N m/rad].
    Bu : (nv, nu)
        Actuation map of the second-order form (the model's ``B``).
    q, v, u, a : (nq,), (nv,), (nu,), (nv,)
        The operating point and its nominal acceleration a0 = FD(q0, v0, B u0).
    """

    A: np.ndarray
    B: np.ndarray
    M: np.ndarray
    C: np.ndarray
    K: np.ndarray
    Bu: np.ndarray
    q: np.ndarray
    v: np.ndarray
    u: np.ndarray
    a: np.ndarray

    def discretize(self, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Zero-order-hold ``(Phi, Theta)`` for step ``dt`` [s]; see :func:`discretize_zoh`."""
        return discretize_zoh(self.A, self.B, dt)


@dataclass(frozen=True)
class TrajectoryLinearization:
    """Linear time-variant model along a sampled trajectory (sample-first stacks).

    Attributes
    ----------
    t : (N,) [s]
    A : (N, 2 nv, 2 nv); B : (N, 2 nv, nu)
        Continuous-time matrices at every sample.
    M, C, K : (N, nv, nv)
        Second-order matrices at every sample.
    Phi : (N - 1, 2 nv, 2 nv); Theta : (N - 1, 2 nv, nu)
        Zero-order-hold transition over [t_k, t_k+1] from the matrices at t_k:
        x(k+1) = Phi[k] x(k) + Theta[k] du(k).
    a : (N, nv)
        Nominal accelerations FD(q_k, v_k, B u_k) [rad/s^2 | m/s^2].
    """

    t: np.ndarray
    A: np.ndarray
    B: np.ndarray
    M: np.ndarray
    C: np.ndarray
    K: np.ndarray
    Phi: np.ndarray
    Theta: np.ndarray
    a: np.ndarray


def discretize_zoh(A, B, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Zero-order-hold discretization (NASA CR-165977 eq. C-122).

    Parameters
    ----------
    A : (n, n)
        Continuous state matrix [1/s].
    B : (n, m)
        Continuous input matrix.
    dt : float
        Step [s], > 0.

    Returns
    -------
    Phi : (n, n)
        expm(A dt).
    Theta : (n, m)
        int_0^dt expm(A s) ds B, both from one exponential of the augmented matrix
        [[A, B], [0, 0]] dt (Van Loan), which stays valid when A is singular.
    """
    A = np.asarray(A, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise DimensionError(f"A: expected a square matrix (n, n), got shape {A.shape}")
    n = A.shape[0]
    B = np.asarray(B, dtype=float)
    if B.ndim == 1 and n == B.size:
        raise DimensionError(f"B: expected shape ({n}, m) (a column matrix for one input), "
                             f"got shape {B.shape}")
    B = as_matrix(B, (n, None), "B")
    dt = _positive_step(dt, "dt")
    require_finite(A, "A")
    require_finite(B, "B")
    m = B.shape[1]
    aug = np.zeros((n + m, n + m))
    aug[:n, :n] = A * dt
    aug[:n, n:] = B * dt
    E = expm(aug)
    return E[:n, :n].copy(), E[:n, n:].copy()


def _positive_step(dt, name: str) -> float:
    try:
        value = float(dt)
    except (TypeError, ValueError):
        raise InputError(f"{name}: expected a positive step in s, got {dt!r}") from None
    if not (np.isfinite(value) and value > 0):
        raise InputError(f"{name}: expected a positive step in s, got {dt!r}")
    return value


class Linearizer:
    """Linearizes one open-chain model; owns one pinocchio ``Data`` (one per thread).

    Parameters
    ----------
    model : MultibodyModel
        An open-chain model; loop closures would need the constrained dynamics.
    """

    def __init__(self, model: MultibodyModel):
        if model.closures:
            raise InputError(
                f"{model.name}: linearization of a model with loop closures "
                f"({', '.join(c.name for c in model.closures)}) needs the constrained "
                "dynamics; use an open-chain model"
            )
        self.model = model
        self._pm = model.pin_model
        self._data = self._pm.createData()
        self._nq, self._nv, self._nu = model.nq, model.nv, model.nu
        self._Bu = np.array(model.B, dtype=float)
        self._Ks, self._Ds, self._qr = model.stiffness, model.damping, model.q_rest
        self._springs = model.has_springs

    def _spring(self, q, v):
        """Spring/damper force tau_s (nv,) and its tangent Jacobian d tau_s/dq (nv, nv)."""
        nv = self._nv
        if not self._springs:
            return np.zeros(nv), np.zeros((nv, nv))
        dq = pin.difference(self._pm, self._qr, q)
        # d difference(q_rest, q)/dq in the tangent space at q (identity for 1-DoF joints)
        J = pin.dDifference(self._pm, self._qr, q, pin.ARG1)
        tau_s = -self._Ks * dq - self._Ds * v
        return tau_s, -self._Ks[:, None] * J

    def linearize(self, q, v, u=None) -> Linearization:
        """Linear model about (q, v, u).

        Parameters
        ----------
        q : (nq,)
            Configuration [rad | m].
        v : (nv,)
            Velocity [rad/s | m/s].
        u : (nu,), optional
            Input [N | N m] (default zero).

        Returns
        -------
        Linearization
        """
        q = require_finite(as_vector(q, self._nq, "q"), "q").copy()
        v = require_finite(as_vector(v, self._nv, "v"), "v").copy()
        u = (np.zeros(self._nu) if u is None
             else require_finite(as_vector(u, self._nu, "u"), "u").copy())
        return self._linearize(q, v, u)

    @property
    def data(self) -> pin.Data:
        """This linearizer's pinocchio ``Data`` (for other algorithms on the same model in the
        same thread; every call overwrites it)."""
        return self._data

    def second_order(self, q, v, u) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(M, C, K, a)`` of the second-order form about (q, v, u) (module docstring), without
        the first-order matrices; arguments as :meth:`linearize` but not checked (nq,), (nv,),
        (nu,) float arrays."""
        pm, data = self._pm, self._data
        tau_s, dtau_s_dq = self._spring(q, v)
        tau = self._Bu @ u + tau_s
        a = pin.aba(pm, data, q, v, tau).copy()
        # RNEA derivatives at the nominal acceleration: K = d ID/dq, C = d ID/dv, M = d ID/da.
        dtau_dq, dtau_dv, M = (np.array(x) for x in pin.computeRNEADerivatives(pm, data, q, v, a))
        M = np.triu(M) + np.triu(M, 1).T  # only the upper triangle is guaranteed by pinocchio
        K = dtau_dq - dtau_s_dq
        C = dtau_dv + np.diag(self._Ds)
        return M, C, K, a

    def _linearize(self, q, v, u) -> Linearization:
        nv = self._nv
        M, C, K, a = self.second_order(q, v, u)
        try:
            factor = cho_factor(M)
        except np.linalg.LinAlgError:
            raise SolverError(f"{self.model.name}: mass matrix not positive definite at "
                              f"q = {np.round(q, 6).tolist()}") from None
        A = np.zeros((2 * nv, 2 * nv))
        A[:nv, nv:] = np.eye(nv)
        A[nv:, :nv] = -cho_solve(factor, K)
        A[nv:, nv:] = -cho_solve(factor, C)
        B = np.zeros((2 * nv, self._nu))
        B[nv:] = cho_solve(factor, self._Bu)
        return Linearization(A=A, B=B, M=M, C=C, K=K, Bu=self._Bu.copy(), q=q, v=v, u=u, a=a)

    def along(self, t, q, v, u=None) -> TrajectoryLinearization:
        """Linearize at every sample of a trajectory and discretize each interval (ZOH).

        Parameters
        ----------
        t : (N,)
            Strictly increasing sample times [s], N >= 2.
        q : (N, nq); v : (N, nv)
            Nominal configurations and velocities.
        u : (N, nu), optional
            Nominal inputs (default zero).

        Returns
        -------
        TrajectoryLinearization
        """
        t = np.asarray(t, dtype=float)
        if t.ndim != 1:
            raise DimensionError(f"t: expected shape (N,), got {t.shape}")
        n = t.size
        if n < 2:
            raise InputError(f"t: expected at least 2 samples, got {n}")
        require_finite(t, "t")
        dts = np.diff(t)
        if np.any(dts <= 0):
            k = int(np.flatnonzero(dts <= 0)[0])
            raise InputError(f"t: expected strictly increasing times (dt > 0); "
                             f"t[{k + 1}] = {t[k + 1]} <= t[{k}] = {t[k]}")
        q = require_finite(as_matrix(q, (n, self._nq), "q"), "q")
        v = require_finite(as_matrix(v, (n, self._nv), "v"), "v")
        u = (np.zeros((n, self._nu)) if u is None
             else require_finite(as_matrix(u, (n, self._nu), "u"), "u"))
        nv, nu = self._nv, self._nu
        A = np.empty((n, 2 * nv, 2 * nv))
        B = np.empty((n, 2 * nv, nu))
        M, C, K = (np.empty((n, nv, nv)) for _ in range(3))
        acc = np.empty((n, nv))
        for k in range(n):
            lin = self._linearize(q[k].copy(), v[k].copy(), u[k].copy())
            A[k], B[k], M[k], C[k], K[k], acc[k] = lin.A, lin.B, lin.M, lin.C, lin.K, lin.a
        Phi = np.empty((n - 1, 2 * nv, 2 * nv))
        Theta = np.empty((n - 1, 2 * nv, nu))
        for k in range(n - 1):
            Phi[k], Theta[k] = discretize_zoh(A[k], B[k], dts[k])
        return TrajectoryLinearization(t=t.copy(), A=A, B=B, M=M, C=C, K=K, Phi=Phi, Theta=Theta,
                                       a=acc)


def linearize(model: MultibodyModel, q, v, u=None) -> Linearization:
    """Linear model of ``model`` about (q, v, u); see :meth:`Linearizer.linearize`."""
    return Linearizer(model).linearize(q, v, u)


def linearize_trajectory(model: MultibodyModel, t, q, v, u=None) -> TrajectoryLinearization:
    """Linear time-variant model along a trajectory; see :meth:`Linearizer.along`."""
    return Linearizer(model).along(t, q, v, u)
