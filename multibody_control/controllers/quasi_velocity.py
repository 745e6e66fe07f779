"""Quasi-velocity tracking and force control of constrained systems (Aghili 2010 Sect. 4).

Aghili, F., "Modeling and control of mechanical systems in terms of quasi-velocities", book
chapter, 2010 (source document 000), eqs. 37-47, on the reduction of
:mod:`multibody_dynamics.quasi_velocity` (``M = W W^T``, ``Lambda = A W^{-T} = U1 S V1^T``,
``nu = W^T v``, ``nu_r = V2^T nu``, motion ``nu_r' + Gamma_r nu_r = u_r`` (31a)).

Minimal coordinates.  theta (k,) is a selection of joint coordinates (the *independent*
ones), ``theta' = J_theta v`` with ``J_theta`` (k, nv) the selection rows.  With the
admissible velocities ``v = W^{-T} V2 nu_r`` (27)::

    theta' = B nu_r,   B = J_theta W^{-T} V2   (k, k), invertible iff theta parametrizes
                                               the admissible motion (k = nv - rank A)

Tracking (37)-(39), ``theta~ = theta - theta_d``, ``nu_rd = B^{-1} theta_d'``; the "K_v" of
(38) is read as K_p (docs/derivations.md, "Aghili (2010)")::

    eps = nu_r - nu_rd + B^{-1} K_p theta~,   s = nu_rd - B^{-1} K_p theta~   (eps = nu_r - s)
    u_r = s' + Gamma_r s - K_d eps

With the skew-symmetric ``Gamma_r = V2^T Gamma V2`` (the ``Gamma`` of the errata, built from
pinocchio's Coriolis matrix) and a Procrustes-aligned basis (``V2^T V2' = 0``), the exact
closed loop is ``eps' = -(Gamma_r + K_d) eps`` and ``theta~' = -K_p theta~ + B eps``: so
``d/dt ||eps||^2 / 2 = -eps^T K_d eps`` (for ``K_d = k_d I``, ``||eps|| = ||eps_0|| e^{-k_d t}``)
and, from ``eps_0 = 0``, ``theta~ = e^{-K_p t} theta~_0``.

``s'`` is analytic: with ``p = theta_d' - K_p theta~``, ``s = B^{-1} p``::

    s' = B^{-1} (p' - B' s),   p' = theta_d'' - K_p (J_theta v - theta_d')
    B' s = J_theta W^{-T} (-X^T V2 s + V2' s),   X = W^{-1} W'
    V2' s = V1 c,   c = -S^{-1} U1^T (A' w - Lambda X^T V2 s),   w = W^{-T} V2 s

(``Lambda V2 = 0`` differentiated; ``V2^T V2' = 0`` for the aligned basis).  ``A'`` (m, nv)
is the time derivative of the constraint Jacobian along v, taken by a central difference
on the configuration manifold (two Jacobian evaluations; :mod:`.constraints` only gives
``A' v``).

Force control (47): Aghili's ``u_o = Lambda_r^T lambda_d + Gamma_o nu_r`` with
``Lambda_r = U1 S`` (so ``Lambda = Lambda_r V1^T``).  His lambda is the force on the
left-hand side; with this project's ``M a + h = tau + A^T lam`` it is ``-lam``, so the law
here is ``u_o = Gamma_o nu_r - S U1^T lambda_d``, which makes the multiplier of (33)
``lam = U1 S^{-1} (Gamma_o nu_r - u_o) = U1 U1^T lambda_d`` (``= lambda_d`` for full-rank A).
Without force control ``u_o = 0``, the actuation of least ``||u||^2 = ||u_r||^2 + ||u_o||^2
= f^T M^{-1} f`` for the motion.  Joint actuation ``f = W (V1 u_o + V2 u_r)``, then
``tau = f + g - tau_s`` and the inputs ``u = B_act^+ tau`` (fully actuated models only).

Gauge invariance (Sect. 4.3): for a change of units ``q = T q~`` (T constant, diagonal,
positive) and diagonal gains, ``W~ = T W``, ``Lambda~ = Lambda``, ``B~ = T_theta^{-1} B``, so
``eps``, ``s``, ``u_r``, ``u_o`` are unchanged and ``f~ = T f``: no weighting matrix is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from scipy.linalg import lapack, qr

from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import DimensionError, InputError, ModelError, SolverError
from multibody_dynamics.quasi_velocity import (
    QuasiVelocitySettings,
    constrained_quasi_velocity,
)
from multibody_dynamics.rigid import RigidDynamics
from multibody_dynamics.validation import as_matrix, as_vector

from .base import Controller, ControllerConfig, check_gain_config, gain_vector
from .reference import Reference

#: B = J_theta W^-T V2 with condition number above this: theta does not parametrize the motion
_MAX_COND_B = 1e10


@dataclass(frozen=True)
class QuasiVelocityLawResult:
    """One evaluation of the quasi-velocity law (Aghili 2010 eqs. 37-47).

    Attributes
    ----------
    f : (nv,)  ``W (V1 u_o + V2 u_r)``, the generalized force without gravity and springs
        [N m | N]
    u_r : (k,); u_o : (r,)  quasi-forces of the motion and of the constraint space [sqrt(J)/s]
    lam : (m,)  multipliers the command produces with the model (33), this project's sign
        (``M a + h = tau + A^T lam``) [N | N m]
    eps : (k,)  ``nu_r - s`` [sqrt(J)]; s, s_dot : (k,)  the reference quasi-velocity and
        its rate; nu_r : (k,)  reduced quasi-velocities
    B : (k, k)  ``J_theta W^{-T} V2``; V2 : (nv, k)  the (aligned) null-space basis
    rank : int  rank of Lambda
    """

    f: np.ndarray
    u_r: np.ndarray
    u_o: np.ndarray
    lam: np.ndarray
    eps: np.ndarray
    s: np.ndarray
    s_dot: np.ndarray
    nu_r: np.ndarray
    B: np.ndarray
    V2: np.ndarray
    rank: int


def quasi_velocity_law(M, C, v, A, A_dot, J_theta, theta_err, theta_d_dot, theta_d_ddot,
                       kp, kd, lambda_d=None, gamma=None, basis=None,
                       settings: QuasiVelocitySettings | None = None) -> QuasiVelocityLawResult:
    """Aghili (2010) eqs. 37-39 and 47 on matrices (see the module docstring).

    Parameters
    ----------
    M, C : (nv, nv)  mass and Coriolis matrices (``M' = C + C^T``); v : (nv,) joint velocity
    A, A_dot : (m, nv)  constraint Jacobian and its time derivative along v
    J_theta : (k, nv)  ``theta' = J_theta v``
    theta_err : (k,)  ``theta - theta_d``; theta_d_dot, theta_d_ddot : (k,)
    kp, kd : (k,)  diagonal gains [1/s] on theta~ and on eps
    lambda_d : (m,) or None  desired multipliers (this project's sign); None: ``u_o = 0``
    gamma : (m,), optional  ``A' v`` (default ``A_dot @ v``)
    basis : (nv, k), optional  the previous ``V2``, to keep the basis continuous
    """
    M = np.asarray(M, float)
    n = M.shape[0]
    v = as_vector(v, n, "v")
    A = as_matrix(A, (None, n), "A")
    m = A.shape[0]
    A_dot = as_matrix(A_dot, (m, n), "A_dot")
    J_theta = as_matrix(J_theta, (None, n), "J_theta")
    k = J_theta.shape[0]
    theta_err = as_vector(theta_err, k, "theta_err")
    theta_d_dot = as_vector(theta_d_dot, k, "theta_d_dot")
    theta_d_ddot = as_vector(theta_d_ddot, k, "theta_d_ddot")
    kp, kd = as_vector(kp, k, "kp"), as_vector(kd, k, "kd")
    gamma = A_dot @ v if gamma is None else as_vector(gamma, m, "gamma")
    red = constrained_quasi_velocity(M, C, np.zeros(n), v, A, gamma, basis, None, settings)
    if n - red.rank != k:
        raise SolverError(f"quasi-velocity control: Lambda has rank {red.rank}, so the motion has "
                          f"{n - red.rank} coordinates, but theta has {k}")
    W, V1, V2, U1, S = red.W, red.V1, red.V2, red.U1, red.S
    # one inverse of the (n, n) triangular factor instead of repeated triangular solves
    Wi, info = lapack.dtrtri(W, lower=1)
    if info != 0:
        raise SolverError(f"quasi-velocity control: W is singular (LAPACK info {info})")
    Y = Wi @ (C + C.T) @ Wi.T  # W^-1 M' W^-T = X + X^T, X = W^-1 W' lower triangular
    X = np.tril(Y, -1)
    X.flat[:: n + 1] = 0.5 * np.diag(Y)
    WiT_V2 = Wi.T @ V2  # W^-T V2
    Bm = J_theta @ WiT_V2
    if np.linalg.cond(Bm) > _MAX_COND_B:
        raise SolverError("quasi-velocity control: B = J_theta W^-T V2 is singular: the "
                          "independent coordinates do not parametrize the admissible motion here")
    p = theta_d_dot - kp * theta_err
    s = np.linalg.solve(Bm, p)
    # B' s (module docstring): V2' s = V1 c from d/dt (Lambda V2) = 0
    XtV2s = X.T @ (V2 @ s)
    w = WiT_V2 @ s
    c = -(U1.T @ (A_dot @ w - red.Lambda @ XtV2s)) / S if red.rank else np.zeros(0)
    dB_s = J_theta @ (Wi.T @ (V1 @ c - XtV2s))
    p_dot = theta_d_ddot - kp * (J_theta @ v - theta_d_dot)
    s_dot = np.linalg.solve(Bm, p_dot - dB_s)
    eps = red.nu_r - s
    u_r = s_dot + red.Gamma_r @ s - kd * eps  # (39)
    if lambda_d is None:
        u_o = np.zeros(red.rank)
    else:
        lambda_d = as_vector(lambda_d, m, "lambda_d")
        u_o = red.Gamma_o_nu_r - S * (U1.T @ lambda_d)  # (47), lambda = -lambda_Aghili
    lam = U1 @ ((red.Gamma_o_nu_r - u_o) / S) if red.rank else np.zeros(m)
    f = W @ (V1 @ u_o + V2 @ u_r)
    return QuasiVelocityLawResult(f=f, u_r=u_r, u_o=u_o, lam=lam, eps=eps, s=s, s_dot=s_dot,
                                  nu_r=red.nu_r, B=Bm, V2=V2, rank=red.rank)


@dataclass(frozen=True)
class QuasiVelocityConfig(ControllerConfig):
    """Settings of :class:`QuasiVelocityController`.

    Parameters
    ----------
    kp : float or sequence
        K_p [1/s] (> 0) on the minimal-coordinate error: ``theta~' = -K_p theta~`` once
        ``eps = 0``; scalar or one per independent coordinate.  Default: Aghili Sect. 5.
    kd : float or sequence
        K_d [1/s] (> 0) on ``eps``: ``||eps||`` decays at least as ``e^{-min(K_d) t}``.
    independent : tuple of str, optional
        Joint names of theta.  Default: all coordinates without constraints, otherwise the
        complement of the first rank(A) pivots of a column-pivoted QR of A at the first step.
    force_control : bool
        ``u_o`` from eq. (47) with ``reference.lambda_d``; off: ``u_o = 0`` (least ``||u||``).
    effort_limit : float or sequence
        Output saturation |u| [N m | N] (> 0; inf: none).
    quasi_velocity : QuasiVelocitySettings, optional
        Rank thresholds of Lambda.
    """

    kp: float | tuple = 3.0
    kd: float | tuple = 5.0
    independent: tuple[str, ...] | None = None
    force_control: bool = False
    effort_limit: float | tuple = float("inf")
    quasi_velocity: QuasiVelocitySettings | None = None

    def __post_init__(self):
        for name in ("kp", "kd", "effort_limit"):
            object.__setattr__(self, name, check_gain_config(getattr(self, name), name))
        if not isinstance(self.force_control, bool):
            raise InputError(f"force_control: expected a bool, got {self.force_control!r}")
        if self.independent is not None:
            names = (self.independent,) if isinstance(self.independent, str) else \
                tuple(self.independent)
            if not names or not all(isinstance(x, str) for x in names) or \
                    len(set(names)) != len(names):
                raise InputError("independent: expected distinct joint names, got "
                                 f"{self.independent!r}")
            object.__setattr__(self, "independent", names)
        if self.quasi_velocity is not None and \
                not isinstance(self.quasi_velocity, QuasiVelocitySettings):
            raise InputError("quasi_velocity: expected QuasiVelocitySettings, got "
                             f"{type(self.quasi_velocity).__name__}")


class QuasiVelocityController(Controller):
    """Quasi-velocity tracking and force control (Aghili 2010 eqs. 37-39, 47).

    Parameters
    ----------
    model : MultibodyModel  fully actuated
    config : QuasiVelocityConfig
    constraints : Constraints, optional  default: the closures of the model YAML

    Attributes (of the last step)
    -----------------------------
    lam : (m,) commanded constraint multipliers, this project's sign [N | N m]
    f_c : (nv,) commanded constraint force ``A^T lam`` [N m | N]
    eps : (k,) ``nu_r - s`` [sqrt(J)]; theta_err : (k,) ``theta - theta_d`` [rad | m]
    u_r, u_o : quasi-forces [sqrt(J)/s]; tau_generalized : (nv,) [N m | N]
    independent : (k,) velocity indices of theta
    """

    config_type = QuasiVelocityConfig

    def __init__(self, model, config: QuasiVelocityConfig | None = None,
                 constraints: Constraints | None = None):
        super().__init__(model, config or QuasiVelocityConfig())
        c = self.config
        if np.any(model.passive):
            raise ModelError(f"quasi-velocity control: needs every coordinate actuated; "
                             f"{model.name} has passive joints "
                             f"({', '.join(model.passive_joint_names)})")
        self.constraints = constraints if constraints is not None else Constraints(model)
        self._settings = c.quasi_velocity or QuasiVelocitySettings()
        self._rigid = RigidDynamics(model) if model.has_springs else None
        self._pm, self._data = model.pin_model, model.pin_model.createData()
        self._nq, self._nv, self._m = model.nq, model.nv, self.constraints.n_rows
        self._euclidean = model.nq == model.nv
        if c.force_control and self._m == 0:
            raise ModelError(f"quasi-velocity control: force control needs constraints; "
                             f"{model.name} has none")
        self.effort_limit = gain_vector(c.effort_limit, model.nu, "effort_limit")
        self._Bpinv = np.linalg.pinv(self._B)
        if c.independent is not None:
            ind = np.array(sorted(model.joint_index(x) for x in c.independent), int)
            k = ind.size
        elif self._m == 0:
            ind, k = np.arange(self._nv), self._nv
        else:
            ind = None
            k = self._nv - self._rank(self.constraints.jacobian(model.q_rest))
        self.kp = gain_vector(c.kp, k, "kp", unit="1/s", per="independent coordinate")
        self.kd = gain_vector(c.kd, k, "kd", unit="1/s", per="independent coordinate")
        self._k = k
        self.independent = None
        if ind is not None:
            self._set_independent(ind)
        self.lam = np.zeros(self._m)
        self.f_c = np.zeros(self._nv)
        self.eps = self.theta_err = np.zeros(k)
        self.u_r, self.u_o = np.zeros(k), np.zeros(0)
        self.tau_generalized = np.zeros(self._nv)
        self.reset()

    def _rank(self, A) -> int:
        if A.shape[0] == 0:
            return 0
        sv = np.linalg.svd(A, compute_uv=False)
        # rank of A (same thresholds as those of Lambda; A and Lambda have the same rank)
        return int(np.count_nonzero(sv > max(self._settings.rank_atol,
                                             self._settings.rank_rtol * sv[0])))

    def _set_independent(self, ind):
        if ind.size != self._k:
            raise DimensionError(f"quasi-velocity control: theta has {ind.size} coordinates but "
                                 f"the gains were sized for {self._k}; set config.independent")
        self.independent = ind
        self._J_theta = np.eye(self._nv)[ind]

    def reset(self):
        self._basis = None

    def _A_dot(self, q, v):
        """``A'`` (m, nv) by a central difference along v on the manifold."""
        vmax = float(np.max(np.abs(v)))
        if vmax == 0.0:
            return np.zeros((self._m, self._nv))
        h = 1e-6 / vmax  # a 1e-6 rad | m move: O(h^2) truncation, O(1e-10) round-off
        Ap = self.constraints.jacobian(pin.integrate(self._pm, q, h * v))
        Am = self.constraints.jacobian(pin.integrate(self._pm, q, -h * v))
        return (Ap - Am) / (2 * h)

    def step(self, t, q, v, reference: Reference, lam=None) -> np.ndarray:
        """Inputs u (nu,) [N | N m] for the state (q (nq,), v (nv,)) at time t [s].

        Only the independent entries of ``reference.q``, ``.v``, ``.a`` are used (theta_d and
        its derivatives); ``reference.lambda_d`` (m,) [N | N m] is required with force
        control.  ``lam`` (measured multipliers) is accepted for interface compatibility with
        the other constrained law and not used: (47) is a feedforward.
        """
        q, v = self._state(q, v)
        m = self._m
        if m:
            A, gamma = self.constraints.jacobian_and_bias(q, v)
            if self.independent is None:
                r = self._rank(A)
                self._set_independent(np.sort(qr(A, mode="r", pivoting=True)[1][r:]))
            A_dot = self._A_dot(q, v)
        else:
            A, gamma, A_dot = np.zeros((0, self._nv)), np.zeros(0), np.zeros((0, self._nv))
        lambda_d = None
        if self.config.force_control:
            if reference.lambda_d is None:
                raise InputError("quasi-velocity control with force control: "
                                 f"reference.lambda_d ({m},) [N | N m] is required")
            lambda_d = as_vector(reference.lambda_d, m, "reference.lambda_d")
        q_d = as_vector(reference.q, self._nq, "reference.q")
        e = q - q_d if self._euclidean else pin.difference(self._pm, q_d, q)
        ind = self.independent
        M = pin.crba(self._pm, self._data, q).copy()
        C = pin.computeCoriolisMatrix(self._pm, self._data, q, v).copy()
        res = quasi_velocity_law(
            M, C, v, A, A_dot, self._J_theta, e[ind],
            as_vector(reference.v, self._nv, "reference.v")[ind],
            as_vector(reference.a, self._nv, "reference.a")[ind],
            self.kp, self.kd, lambda_d, gamma, self._basis, self._settings)
        self._basis = res.V2
        g = pin.computeGeneralizedGravity(self._pm, self._data, q)
        tau = res.f + g
        if self._rigid is not None:
            tau = tau - self._rigid.spring_forces(q, v)
        self.theta_err, self.eps, self.u_r, self.u_o = e[ind], res.eps, res.u_r, res.u_o
        self.lam, self.f_c = res.lam, A.T @ res.lam
        self.tau_generalized = tau
        u = self._Bpinv @ tau
        if np.any(np.isfinite(self.effort_limit)):
            np.clip(u, -self.effort_limit, self.effort_limit, out=u)
        return u


__all__ = ["QuasiVelocityConfig", "QuasiVelocityController", "QuasiVelocityLawResult",
           "quasi_velocity_law"]
