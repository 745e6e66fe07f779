"""Reference solvers for constrained direct dynamics, to check and time the projection method.

* :class:`KKTDynamics` — the index-1 saddle-point system
  ``[[M, A^T], [A, 0]] [a; -lam] = [tau + tau_s - h; -gamma - baumgarte]``,
  solved by ``lstsq`` (minimum norm, tolerates redundant rows) or plain ``solve``
  (fails on a singular matrix, as with redundant rows).
* :class:`CoordinatePartitioning` — Seifried (2014) eqs. 2.52-2.60: dependent
  coordinates ``q_d`` chosen by pivoted QR of A, ``v = Jbar v_i`` with
  ``Jbar = [I; -C_d^{-1} C_i]``, minimal equations ``Jbar^T M Jbar a_i = Jbar^T (f - M gbar)``;
  re-partitioned when ``cond(C_d)`` exceeds a threshold.
* :class:`PinocchioConstraintDynamics` — ``pin.constraintDynamics`` for the closures
  pinocchio can express (spherical -> ``CONTACT_3D``, weld -> ``CONTACT_6D``).

All use the model's springs and dampers as applied forces, like :mod:`.projection`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import scipy.linalg

from .constraints import Constraints
from .errors import InputError, ModelError
from .model import MultibodyModel
from .projection import null_space_projector
from .rigid import RigidDynamics
from .validation import as_vector


class _Base:
    def __init__(self, model: MultibodyModel, constraints: Constraints | None):
        self.model = model
        self.constraints = constraints if constraints is not None else Constraints(model)
        self._pm = model.pin_model
        self._data = self._pm.createData()
        self._rigid = RigidDynamics(model)
        self._springs = model.has_springs

    def _state(self, q, v, tau):
        return (as_vector(q, self.model.nq, "q"), as_vector(v, self.model.nv, "v"),
                as_vector(tau, self.model.nv, "tau"))

    def forward_dynamics(self, q, v, tau) -> np.ndarray:
        """Accelerations a (nv,) (the :class:`~multibody_dynamics.protocols.Dynamics`
        convention); the multipliers and counters: ``forward_dynamics_result``."""
        return self.forward_dynamics_result(q, v, tau).a

    def _applied(self, q, v, tau):
        M = pin.crba(self._pm, self._data, q)
        f = tau - pin.nonLinearEffects(self._pm, self._data, q, v)
        if self._springs:
            f += self._rigid.spring_forces(q, v)
        return M, f


# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KKTSettings:
    """Settings of :class:`KKTDynamics`.

    Parameters
    ----------
    method : str
        ``"lstsq"`` (minimum-norm least squares, SVD) or ``"solve"`` (LU; raises on a
        singular KKT matrix, reported as failure).
    baumgarte_alpha, baumgarte_beta : float
        Baumgarte stabilization [1/s]: the acceleration constraint becomes
        ``A a + gamma + 2 alpha A v + beta^2 phi = 0`` (phi only on the closure rows).
    """

    method: str = "lstsq"
    baumgarte_alpha: float = 0.0
    baumgarte_beta: float = 0.0

    def __post_init__(self):
        if self.method not in ("lstsq", "solve"):
            raise InputError(f"method: expected 'lstsq' or 'solve', got {self.method!r}")
        if not (self.baumgarte_alpha >= 0 and self.baumgarte_beta >= 0):
            raise InputError("baumgarte_alpha, baumgarte_beta: expected numbers >= 0 [1/s]")


@dataclass(frozen=True)
class KKTResult:
    """a (nv,); lam (m,) multipliers (minimum norm with lstsq), ``M a + h = tau + tau_s + A^T
    lam``; residual = ||A a + gamma + baumgarte||_inf; success; message."""

    a: np.ndarray
    lam: np.ndarray
    residual: float
    success: bool
    message: str


class KKTDynamics(_Base):
    """Index-1 (acceleration-level) constrained dynamics by the saddle-point system."""

    def __init__(self, model: MultibodyModel, constraints: Constraints | None = None,
                 settings: KKTSettings | None = None):
        super().__init__(model, constraints)
        self.settings = settings or KKTSettings()

    def kkt_system(self, q, v, tau) -> tuple[np.ndarray, np.ndarray]:
        """The matrix ``K`` (nv + m, nv + m) and right-hand side of the saddle-point system."""
        q, v, tau = self._state(q, v, tau)
        A, gamma = self.constraints.jacobian_and_bias(q, v)
        M, f = self._applied(q, v, tau)
        s = self.settings
        rhs_c = -gamma
        if s.baumgarte_alpha:
            rhs_c = rhs_c - 2.0 * s.baumgarte_alpha * (A @ v)
        if s.baumgarte_beta and self.constraints.n_holonomic:
            rhs_c = rhs_c.copy()
            rhs_c[: self.constraints.n_holonomic] -= (s.baumgarte_beta ** 2
                                                      * self.constraints.residual(q))
        m, nv = A.shape
        K = np.zeros((nv + m, nv + m))
        K[:nv, :nv] = M
        K[:nv, nv:] = A.T
        K[nv:, :nv] = A
        return K, np.concatenate([f, rhs_c])

    def forward_dynamics_result(self, q, v, tau) -> KKTResult:
        K, rhs = self.kkt_system(q, v, tau)
        nv = self.model.nv
        try:
            if self.settings.method == "solve":
                x = np.linalg.solve(K, rhs)
            else:
                x = np.linalg.lstsq(K, rhs, rcond=None)[0]
        except np.linalg.LinAlgError as exc:
            nan = np.full(nv, np.nan)
            return KKTResult(nan, np.full(K.shape[0] - nv, np.nan), np.inf, False,
                             f"KKT matrix is singular ({exc}): redundant constraint rows or a "
                             "singular configuration; use method='lstsq' or the projection method")
        a, lam = x[:nv], -x[nv:]
        residual = float(np.max(np.abs(K[nv:, :nv] @ a - rhs[nv:]))) if K.shape[0] > nv else 0.0
        ok = bool(np.all(np.isfinite(x)))
        return KKTResult(a, lam, residual, ok, "ok" if ok else "non-finite solution")


# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PartitioningSettings:
    """Settings of :class:`CoordinatePartitioning`.

    Parameters
    ----------
    cond_max : float
        Re-partition when the condition number of ``C_d`` exceeds this.
    rank_atol, rank_rtol : float
        Rank decision on A (as :class:`~multibody_dynamics.projection.ProjectionSettings`).
    """

    cond_max: float = 1e3
    rank_atol: float = 1e-9
    rank_rtol: float = 1e-10

    def __post_init__(self):
        if not self.cond_max > 1:
            raise InputError(f"cond_max: expected a number > 1, got {self.cond_max}")


@dataclass(frozen=True)
class PartitioningResult:
    """a (nv,); independent (names of q_i); cond (of C_d); repartitioned (this call);
    residual = ||A a + gamma||_inf; success; message."""

    a: np.ndarray
    independent: tuple[str, ...]
    cond: float
    repartitioned: bool
    residual: float
    success: bool
    message: str


class CoordinatePartitioning(_Base):
    """Minimal equations in independent coordinates (Seifried 2014 eqs. 2.52-2.60).

    The partition ``v = [v_i; v_d]`` (held between calls, re-chosen when ``cond(C_d)``
    exceeds ``cond_max`` or the rank of A changes) comes from pivoted QR: first of
    ``A^T`` to keep ``r = rank A`` independent rows, then of those rows to pick the
    ``r`` best-conditioned columns as dependent coordinates.  With the chosen rows
    ``C = [C_i, C_d]`` and bias ``gamma_r``::

        v_d = -C_d^{-1} C_i v_i,          Jbar = [I; -C_d^{-1} C_i]        (2.55)
        a = Jbar a_i + gbar,              gbar = [0; -C_d^{-1} gamma_r]    (2.56)
        Jbar^T M Jbar a_i = Jbar^T (tau + tau_s - h - M gbar)             (2.60)
    """

    def __init__(self, model: MultibodyModel, constraints: Constraints | None = None,
                 settings: PartitioningSettings | None = None):
        super().__init__(model, constraints)
        self.settings = settings or PartitioningSettings()
        self._rows = self._dep = self._ind = None
        self.repartitions = 0

    @property
    def independent(self) -> tuple[str, ...]:
        """Names of the current independent coordinates (empty before the first call)."""
        if self._ind is None:
            return ()
        return tuple(self.model.coordinate_names[i] for i in self._ind)

    def _partition(self, A):
        s = self.settings
        r = null_space_projector(A, s.rank_atol, s.rank_rtol).rank
        nv = A.shape[1]
        if r == 0:
            return np.zeros(0, int), np.zeros(0, int), np.arange(nv)
        rows = np.sort(scipy.linalg.qr(A.T, pivoting=True, mode="r")[1][:r])
        cols = scipy.linalg.qr(A[rows], pivoting=True, mode="r")[1]
        return rows, np.sort(cols[:r]), np.sort(cols[r:])

    def forward_dynamics_result(self, q, v, tau) -> PartitioningResult:
        q, v, tau = self._state(q, v, tau)
        A, gamma = self.constraints.jacobian_and_bias(q, v)
        repart = False
        cond = np.inf
        if self._rows is not None and self._rows.size:
            cond = np.linalg.cond(A[np.ix_(self._rows, self._dep)])
        rank_now = null_space_projector(A, self.settings.rank_atol, self.settings.rank_rtol).rank
        if self._rows is None or rank_now != self._rows.size or not cond <= self.settings.cond_max:
            self._rows, self._dep, self._ind = self._partition(A)
            self.repartitions += 1
            repart = True
            cond = np.linalg.cond(A[np.ix_(self._rows, self._dep)]) if self._rows.size else 1.0
        rows, dep, ind = self._rows, self._dep, self._ind
        M, f = self._applied(q, v, tau)
        nv = self.model.nv
        Jbar = np.zeros((nv, ind.size))
        Jbar[ind, np.arange(ind.size)] = 1.0
        gbar = np.zeros(nv)
        if rows.size:
            Cd = A[np.ix_(rows, dep)]
            Jbar[dep] = -np.linalg.solve(Cd, A[np.ix_(rows, ind)])
            gbar[dep] = -np.linalg.solve(Cd, gamma[rows])
        ai = np.linalg.solve(Jbar.T @ M @ Jbar, Jbar.T @ (f - M @ gbar))
        a = Jbar @ ai + gbar
        residual = float(np.max(np.abs(A @ a + gamma))) if A.shape[0] else 0.0
        ok = bool(np.all(np.isfinite(a)))
        msg = "ok" if ok else "non-finite accelerations"
        if ok and cond > self.settings.cond_max:
            msg = f"C_d ill-conditioned even after re-partitioning (cond {cond:.3g})"
        return PartitioningResult(a, self.independent, float(cond), repart, residual, ok, msg)


# ----------------------------------------------------------------------------------------------
_CONTACT = {"spherical": pin.ContactType.CONTACT_3D, "weld": pin.ContactType.CONTACT_6D}


@dataclass(frozen=True)
class PinocchioResult:
    """a (nv,); lam (m,) pinocchio's contact forces stacked; iterations of the proximal
    solver; residual (pinocchio's absolute residual); success; message."""

    a: np.ndarray
    lam: np.ndarray
    iterations: int
    residual: float
    success: bool
    message: str


class PinocchioConstraintDynamics:
    """``pin.constraintDynamics`` on the model's spherical and weld closures.

    Parameters
    ----------
    model : MultibodyModel
    reference_frame : pin.ReferenceFrame
        Frame of the contact constraints; ``LOCAL`` and ``LOCAL_WORLD_ALIGNED`` give the same
        accelerations at assembled configurations (checked in the tests).
    mu : float
        Proximal regularization (>= 1e-12: with mu = 0 a rank-deficient closure gives NaN).
    eps : float
        Absolute accuracy of the proximal iterations.
    max_iter : int
    """

    def __init__(self, model: MultibodyModel, reference_frame=pin.ReferenceFrame.LOCAL,
                 mu: float = 1e-12, eps: float = 1e-12, max_iter: int = 50):
        if not mu >= 1e-12:
            raise InputError("mu: expected >= 1e-12 (mu = 0 gives NaN on redundant closures), "
                             f"got {mu}")
        self.model = model
        pm = self._pm = model.pin_model
        self._data = pm.createData()
        self._rigid = RigidDynamics(model)
        self._springs = model.has_springs
        self.cmodels = []
        for c in model.closures:
            if c.type not in _CONTACT:
                raise ModelError(f"{model.name}: closure {c.name!r} of type {c.type!r} has no "
                                 "pinocchio equivalent (only spherical -> CONTACT_3D and "
                                 "weld -> CONTACT_6D)")
            fa = pm.frames[model.frame_id(c.frame_a)]
            fb = pm.frames[model.frame_id(c.frame_b)]
            cm = pin.RigidConstraintModel(_CONTACT[c.type], pm, fa.parentJoint, fa.placement,
                                          fb.parentJoint, fb.placement, reference_frame)
            cm.name = c.name
            self.cmodels.append(cm)
        self.cdatas = [cm.createData() for cm in self.cmodels]
        self._settings = pin.ProximalSettings(eps, mu, max_iter)
        pin.initConstraintDynamics(pm, self._data, self.cmodels, self.cdatas)

    def acceleration(self, q, v, tau) -> np.ndarray:
        """Accelerations only (the timing path)."""
        if self._springs:
            tau = tau + self._rigid.spring_forces(q, v)
        return pin.constraintDynamics(self._pm, self._data, q, v, tau, self.cmodels, self.cdatas,
                                      self._settings)

    def forward_dynamics(self, q, v, tau) -> np.ndarray:
        """Accelerations a (nv,) (the :class:`~multibody_dynamics.protocols.Dynamics`
        convention); the contact forces and solver counters: :meth:`forward_dynamics_result`."""
        return self.forward_dynamics_result(q, v, tau).a

    def forward_dynamics_result(self, q, v, tau) -> PinocchioResult:
        q = as_vector(q, self.model.nq, "q")
        v = as_vector(v, self.model.nv, "v")
        tau = as_vector(tau, self.model.nv, "tau")
        a = np.array(self.acceleration(q, v, tau))
        lam = np.array(self._data.lambda_c)
        ok = bool(np.all(np.isfinite(a)))
        s = self._settings
        return PinocchioResult(a, lam, int(s.iter), float(s.absolute_residual), ok,
                               "ok" if ok else "non-finite accelerations (mu too small?)")
