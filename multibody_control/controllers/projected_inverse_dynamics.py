"""Projected inverse-dynamics control of constrained systems, with constraint-force control and
passive joints (Aghili 2005 Sect. 7.1, 7.3, 7.4).

Motion (Sect. 7.1, eqs. 40-48).  The admissible motions are parametrized by minimal
coordinates theta (k,): ``q' = J theta'`` with ``A J = 0``.  Here theta is a subset of the
joint coordinates (the *independent* coordinates: the actuated joints of a parallel robot,
the crank of a slider-crank), so that with the columns of ``A`` split into independent and
dependent ones, ``A = [A_i, A_d]`` (up to a permutation)::

    J = [I; -A_d^+ A_i],        J theta'' + J' theta' = [a_i; -A_d^+ (A_i a_i + gamma)],

``gamma = A' v`` the constraint bias (:mod:`multibody_dynamics.constraints`), so ``J' theta'``
never has to be differentiated explicitly.  ``A_d^+`` is the least-squares inverse: exact for
redundant (consistent) rows as long as ``A_d`` has full column rank.  The law is::

    a = theta_d'' + K_D e' + K_P e,   e = theta_d - theta                (46)
    tau_par = P [M (J a + J' theta') + h - tau_s]                          (45)

with ``P = I - A^+ A`` (eq. 15, rank decision of eq. 70 as :class:`ProjectedDynamics`); with
an exact model the error obeys ``e'' + K_D e' + K_P e = 0`` exactly (47) and ``tau_par`` is
the minimum-norm generalized force that produces the motion (48).  ``M (.) + h`` is one
``rnea`` call.

Constraint force (Sect. 7.3, eqs. 51-54), ``force_control=True``::

    f_cd = A^T lambda_d,   u_f = A^T (K_Pf e_f + K_If int e_f),   e_f = lambda_d - lambda
    tau_perp = (I - P)[M (J a + J' theta') + h - tau_s] - (f_cd + u_f)    (51)
    tau = tau_par + tau_perp

The first term of ``tau_perp`` cancels the constraint force the motion would produce by
itself, so the resulting constraint force is ``f_c = f_cd + u_f`` (eq. 32:
``f_c = (I-P)(M a + h - tau_s - tau)``) and motion and force errors are decoupled.  Reading
chosen for the OCR-damped (52)-(54): ``e_f`` and the gains act on the multipliers (m,), the
measured multipliers ``lambda`` are passed to :meth:`ProjectedInverseDynamicsController.step`
(a force sensor, or the simulator); without a measurement only the feedforward ``f_cd`` acts.
Because ``f_c`` responds algebraically (no dynamics), the positive sign of ``u_f`` closes a
stable loop: a constant force disturbance d gives ``(1 + K_Pf) e_f + K_If int e_f = -d``.

Passive joints (Sect. 7.4, eqs. 59-62): ``S`` selects the actuated coordinates, and
``tau = [I - (I - P) N^+ (I - S)] tau_par``, ``N = (I - S)(I - P)``, adds the constraint-space
force that zeroes the passive torques without changing the motion (minimum norm among the
admissible torques); with ``(I - P) = V V^T`` this is ``tau_par - V (E V)^+ E tau_par``, E the
passive rows (as :meth:`ProjectedDynamics.inverse_dynamics_result`).  Controllable iff
``rank(E V) = n - k`` (eq. 64); otherwise the step raises :class:`SolverError`.  Force control
and passive joints together are not supported (the constraint space is then used up by the
passive joints): :class:`ModelError` at construction.

The inputs are ``u = B^+ tau`` (``tau`` is zero on the passive rows, so ``B u = tau``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from scipy.linalg import lapack

from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import InputError, ModelError, SolverError
from multibody_dynamics.projection import (
    ProjectedDynamics,
    ProjectionSettings,
    _compiled_inverse_kernel,
    _FastPlan,
)
from multibody_dynamics.rigid import RigidDynamics
from multibody_dynamics.validation import as_vector

from .base import Controller, ControllerConfig, check_gain_config, gain_vector
from .reference import Reference

_ND, _F8 = np.ndarray, np.dtype(float)
#: singular values of E V (rows of an orthonormal basis, entries of order 1) below this are zero
_PASSIVE_RANK_TOL = 1e-9


@dataclass(frozen=True)
class ProjectedInverseDynamicsConfig(ControllerConfig):
    """Settings of :class:`ProjectedInverseDynamicsController`.

    Parameters
    ----------
    kp : float or sequence
        Position gain K_P of the error dynamics [1/s^2] (> 0), scalar or one per independent
        coordinate.
    kd : float or sequence
        Velocity gain K_D [1/s] (> 0); ``kd = 2 sqrt(kp)`` is critical damping.
    independent : tuple of str, optional
        Joint names of the minimal coordinates theta.  Default: the actuated joints when the
        model has passive joints (parallel robots), all coordinates without constraints, and
        otherwise a column-pivoted QR of A at the first step (the best-conditioned dependent
        set there, kept afterwards).
    force_control : bool
        Command the constraint force ``A^T lambda_d`` from ``reference.lambda_d`` (Sect. 7.3);
        off: minimum-norm actuation, the constraint force is whatever the motion needs.
    force_kp : float or sequence
        Proportional gain K_Pf on the multiplier error [-] (>= 0), scalar or one per row of A.
    force_ki : float or sequence
        Integral gain K_If [1/s] (>= 0).
    force_integral_limit : float
        Bound on ``|K_If int e_f|`` [N | N m] (> 0; inf: none).
    effort_limit : float or sequence
        Output saturation |u| [N m | N] (> 0; inf: none).  Saturation breaks the exact error
        dynamics.
    projection : ProjectionSettings, optional
        Rank thresholds of A (eq. 70).
    """

    kp: float | tuple = 100.0
    kd: float | tuple = 20.0
    independent: tuple[str, ...] | None = None
    force_control: bool = False
    force_kp: float | tuple = 0.0
    force_ki: float | tuple = 0.0
    force_integral_limit: float = float("inf")
    effort_limit: float | tuple = float("inf")
    projection: ProjectionSettings | None = None

    def __post_init__(self):
        for name, positive in (("kp", True), ("kd", True), ("force_kp", False),
                               ("force_ki", False), ("effort_limit", True)):
            object.__setattr__(self, name, check_gain_config(getattr(self, name), name,
                                                             positive=positive))
        if not (isinstance(self.force_integral_limit, (int, float))
                and self.force_integral_limit > 0):
            raise InputError("force_integral_limit: expected a number > 0 [N | N m], got "
                             f"{self.force_integral_limit!r}")
        if self.independent is not None:
            names = (self.independent,) if isinstance(self.independent, str) else \
                tuple(self.independent)
            if not names or not all(isinstance(n, str) for n in names) or \
                    len(set(names)) != len(names):
                raise InputError("independent: expected distinct joint names, got "
                                 f"{self.independent!r}")
            object.__setattr__(self, "independent", names)
        if self.projection is not None and not isinstance(self.projection, ProjectionSettings):
            raise InputError("projection: expected ProjectionSettings, got "
                             f"{type(self.projection).__name__}")


class ProjectedInverseDynamicsController(Controller):
    """Projected inverse-dynamics control (Aghili 2005 eqs. 45-48, 51-54, 59-62).

    Parameters
    ----------
    model : MultibodyModel
    config : ProjectedInverseDynamicsConfig
    constraints : Constraints, optional
        Default: the closures of the model YAML.

    Attributes (of the last step)
    -----------------------------
    tau_generalized : (nv,) generalized actuation [N m | N] before the mapping to inputs
    f_c : (nv,) constraint force the command produces with the model, ``(I-P)(b - tau)``
        (eq. 32) [N m | N]; with force control, ``f_cd + u_f``
    lam : (m,) its minimum-norm multipliers [N | N m]
    a : (nv,) commanded acceleration ``J a + J' theta'``
    passive_residual : float  largest |tau| on a passive coordinate before the mapping
    independent, dependent : (k,), (nv - k,) velocity indices of theta and of the rest
    """

    config_type = ProjectedInverseDynamicsConfig

    def __init__(self, model, config: ProjectedInverseDynamicsConfig | None = None,
                 constraints: Constraints | None = None):
        super().__init__(model, config or ProjectedInverseDynamicsConfig())
        c = self.config
        self.constraints = constraints if constraints is not None else Constraints(model)
        settings = c.projection or ProjectionSettings()
        self.dynamics = ProjectedDynamics(model, self.constraints, settings)
        self._atol, self._rtol = settings.rank_atol, settings.rank_rtol
        self._pm, self._data = model.pin_model, model.pin_model.createData()
        self._rigid = RigidDynamics(model)
        nv, self._nq, self._nv = model.nv, model.nq, model.nv
        self._m = self.constraints.n_rows
        self._passive = np.asarray(model.passive, bool).copy()
        self._has_passive = bool(self._passive.any())
        self._springs = model.has_springs
        self._euclidean = model.nq == model.nv
        if c.force_control and self._has_passive:
            raise ModelError(f"projected inverse dynamics: force control needs every coordinate "
                             f"actuated; {model.name} has passive joints "
                             f"({', '.join(model.passive_joint_names)}) that use the constraint "
                             "space (Aghili 2005 Sect. 7.4)")
        if c.force_control and self._m == 0:
            raise ModelError(f"projected inverse dynamics: force control needs constraints; "
                             f"{model.name} has none")
        self.effort_limit = gain_vector(c.effort_limit, model.nu, "effort_limit")
        self._limited = bool(np.any(np.isfinite(self.effort_limit)))
        if self._m:
            self.force_kp = gain_vector(c.force_kp, self._m, "force_kp", positive=False,
                                        per="constraint row")
            self.force_ki = gain_vector(c.force_ki, self._m, "force_ki", positive=False,
                                        unit="1/s", per="constraint row")
        else:
            self.force_kp = self.force_ki = np.zeros(0)
        self._Bpinv = np.linalg.pinv(self._B)
        if c.independent is not None:
            ind = np.array(sorted(model.joint_index(n) for n in c.independent), int)
        elif self._m == 0:
            ind = np.arange(nv)
        elif self._has_passive:
            ind = np.flatnonzero(~self._passive)
        else:
            ind = None  # chosen at the first step (pivoted QR of A there)
        if ind is None:
            # count of theta: nv - rank A, checked again on the first step
            A0 = self.constraints.jacobian(model.q_rest)
            k = nv - self._rank(A0)
        else:
            k = ind.size
        self.kp = gain_vector(c.kp, k, "kp", unit="1/s^2",
                              per="independent coordinate")
        self.kd = gain_vector(c.kd, k, "kd", unit="1/s",
                              per="independent coordinate")
        self._k = k
        self.independent = self.dependent = None
        if ind is not None:
            self._set_partition(ind)
        self.a = np.zeros(nv)
        self.tau_generalized = np.zeros(nv)
        self.f_c = np.zeros(nv)
        self.lam = np.zeros(self._m)
        self._fast_plan = self._kernel = None  # compiled path, set up on the first step
        self._fast_checked = False
        self.use_fast_path = True
        self.reset()

    # -- setup ---------------------------------------------------------------------------------
    def _rank(self, A) -> int:
        if A.shape[0] == 0:
            return 0
        s = np.linalg.svd(A, compute_uv=False)
        tol = max(self._atol, self._rtol * s[0]) if s.size else 0.0
        return int((s > tol).sum())

    def _set_partition(self, ind):
        nv = self._nv
        dep = np.setdiff1d(np.arange(nv), ind)
        self.independent, self.dependent = ind, dep
        self._dep64 = dep.astype(np.int64)
        self._square = dep.size == self._m
        self._mask = np.zeros(nv)
        self._mask[ind] = 1.0
        self._kp_full, self._kd_full = np.zeros(nv), np.zeros(nv)
        self._kp_full[ind], self._kd_full[ind] = self.kp, self.kd

    def _fast_ready(self) -> bool:
        """Whether the compiled step applies: numba present, closures only (no Pfaffian rows),
        a square partition (``A_d`` (m, m))."""
        if not self._fast_checked:
            self._fast_checked = True
            c = self.constraints
            if type(c) is Constraints and not c._pfaffian and c.n_holonomic > 0:
                self._kernel = _compiled_inverse_kernel()
                if self._kernel is not None:
                    self._fast_plan = _FastPlan(c, self._pm, self._data)
                    self._par = np.array([self._atol, self._rtol])
                    self._passive_idx = np.flatnonzero(self._passive).astype(np.int64)
                    self._zero_nv = np.zeros(self._nv)
                    self._no_lam = np.zeros(self._m)
                    self._mode = 1 if self.config.force_control else (
                        2 if self._has_passive else 0)
        return self._kernel is not None and self._square and self.use_fast_path

    def _choose_partition(self, A):
        """Dependent coordinates = the first rank(A) pivots of a column-pivoted QR of A."""
        from scipy.linalg import qr

        r = self._rank(A)
        piv = qr(A, mode="r", pivoting=True)[1]
        ind = np.sort(piv[r:])
        if ind.size != self._k:
            raise SolverError(f"projected inverse dynamics: A has rank {r} at the first step, so "
                              f"theta has {ind.size} coordinates, but the gains were sized for "
                              f"{self._k}; set config.independent")
        self._set_partition(ind)

    def reset(self):
        self.integral = np.zeros(self._m)
        self._t_prev: float | None = None

    # -- assembly helper --------------------------------------------------------------------------
    def assemble(self, q, tol: float = 1e-13, max_iter: int = 30) -> np.ndarray:
        """q with the independent coordinates kept and the dependent ones solved from phi(q) = 0.

        Newton on the dependent coordinates, ``q_d <- q_d - A_d^+ phi`` (holonomic rows); use it
        to build consistent initial states and references.  Raises :class:`SolverError` when
        it does not converge.
        """
        q = as_vector(q, self._nq, "q").copy()
        c = self.constraints
        if c.n_holonomic == 0:
            return q
        if self.independent is None:
            self._choose_partition(c.jacobian(q))
        dep = self.dependent
        dq = np.zeros(self._nv)
        for _ in range(max_iter):
            phi, A = c.residual_and_jacobian(q)
            if np.max(np.abs(phi)) < tol:
                return q
            dq[dep] = -np.linalg.lstsq(A[:, dep], phi, rcond=None)[0]
            q = pin.integrate(self._pm, q, dq)
        raise SolverError(f"assemble: no convergence in {max_iter} iterations, ||phi|| = "
                          f"{np.max(np.abs(phi)):.3g}; start closer to an assembled configuration")

    def dependent_velocity(self, q, v_independent) -> np.ndarray:
        """Full admissible velocity (nv,) ``J theta'`` for the independent velocities (k,)."""
        q = as_vector(q, self._nq, "q")
        A = self.constraints.jacobian(q)
        if self.independent is None:
            self._choose_partition(A)
        v = np.zeros(self._nv)
        v[self.independent] = as_vector(v_independent, self._k, "v_independent")
        if self._m:
            v[self.dependent] = -np.linalg.lstsq(A[:, self.dependent],
                                                 A[:, self.independent] @ v[self.independent],
                                                 rcond=None)[0]
        return v

    # -- the law ---------------------------------------------------------------------------------
    def step(self, t, q, v, reference: Reference, lam=None) -> np.ndarray:  # noqa: C901
        """Inputs u (nu,) [N | N m] for the state (q (nq,), v (nv,)) at time t [s].

        Only the independent entries of ``reference.q``, ``.v``, ``.a`` are used (theta_d and
        its derivatives); ``reference.lambda_d`` (m,) [N | N m] is the desired multiplier with
        force control.  ``lam`` (m,): measured multipliers for the force feedback (optional).
        """
        if not (q.__class__ is _ND and q.dtype is _F8 and q.shape == (self._nq,)):
            q = as_vector(q, self._nq, "q")
        if not (v.__class__ is _ND and v.dtype is _F8 and v.shape == (self._nv,)):
            v = as_vector(v, self._nv, "v")
        m = self._m
        if m and self.independent is not None and self._fast_ready():
            return self._step_fast(t, q, v, reference, lam)
        if m:
            A, gamma = self.constraints.jacobian_and_bias(q, v)
            if self.independent is None:
                self._choose_partition(A)
        dep = self.dependent
        # (46): commanded minimal acceleration, on full vectors with gains and mask zero on
        # the dependent coordinates (no fancy indexing in the loop)
        e = reference.q - q if self._euclidean else pin.difference(self._pm, q, reference.q)
        a = self._kd_full * (reference.v - v)
        a += self._kp_full * e
        a += self._mask * reference.a
        self.a = a
        if m == 0:
            tau = self._rigid.inverse_dynamics(q, v, a)
            self.tau_generalized = tau
            self.f_c[:] = 0.0
            return self._inputs(tau)
        # J a + J' theta': dependent accelerations from A a + gamma = 0 (a[dep] = 0 here, so
        # A a = A_i a_i without slicing A twice)
        rhs = A @ a
        rhs += gamma
        np.negative(rhs, out=rhs)
        if self._square:
            a_d, info = lapack.dgesv(A[:, dep], rhs)[2:]
            if info != 0:
                raise SolverError(self._partition_message(q))
        else:
            a_d = np.linalg.lstsq(A[:, dep], rhs, rcond=None)[0]
        a[dep] = a_d
        b = pin.rnea(self._pm, self._data, q, v, a)  # M a + h
        if self._springs:
            b = b - self._rigid.spring_forces(q, v)
        # projector from one SVD of A: (I - P) = V V^T, V (nv, r)
        U, s, Vt, info = lapack.dgesvd(A, full_matrices=0)
        if info != 0:
            raise SolverError(f"projected inverse dynamics: SVD of A failed (LAPACK info {info})")
        tol = self._rtol * s[0]
        r = np.count_nonzero(s > (tol if tol > self._atol else self._atol))
        if self._square and r < dep.size:
            raise SolverError(self._partition_message(q))
        Vr = Vt[:r] if r < s.size else Vt
        f_perp = (Vr @ b) @ Vr  # (I - P) b
        tau = b - f_perp  # (45) tau_par = P b
        if self.config.force_control:
            lam_d = reference.lambda_d
            if lam_d is None:
                raise InputError("projected inverse dynamics with force control: "
                                 f"reference.lambda_d ({m},) [N | N m] is required")
            lam_cmd, self.integral = self._force_command(t, lam_d, lam)
            f_cmd = A.T @ lam_cmd  # f_cd + u_f
            tau += f_perp - f_cmd  # (51)
            f_c = (Vr @ f_cmd) @ Vr
        elif self._has_passive:
            # (59)-(62): tau -= V (E V)^+ E tau_par
            EV = Vr.T[self._passive]
            U2, s2, Vt2, info2 = lapack.dgesvd(EV, full_matrices=0)
            r2 = np.count_nonzero(s2 > _PASSIVE_RANK_TOL)
            if info2 != 0 or r2 < EV.shape[0]:
                raise SolverError(self.dynamics._controllability_message(r2, self._passive, r))
            corr = ((tau[self._passive] @ U2) / s2) @ Vt2  # (E V)^+ E tau_par
            dtau = corr @ Vr
            tau -= dtau
            f_c = f_perp + dtau
        else:
            f_c = f_perp
        self._t_prev = float(t)
        self.f_c = f_c
        # minimum-norm multipliers (A^T)^+ f_c = U S^-1 V^T f_c
        self.lam = U[:, :r] @ ((Vr @ f_c) / s[:r])
        self.tau_generalized = tau
        return self._inputs(tau)

    def _force_command(self, t, lam_d, lam):
        """Commanded multipliers ``lam_d + K_Pf e_f + K_If int e_f`` (eqs. 52-54) and the updated
        integral (not stored here)."""
        m = self._m
        lam_d = as_vector(lam_d, m, "reference.lambda_d")
        integral = self.integral
        if lam is None:
            return lam_d, integral
        e_f = lam_d - as_vector(lam, m, "lam")
        dt = 0.0 if self._t_prev is None else max(float(t) - self._t_prev, 0.0)
        if dt > 0:
            integral = integral + e_f * dt
            lim = self.config.force_integral_limit
            if np.isfinite(lim):
                with np.errstate(divide="ignore", invalid="ignore"):
                    bound = np.where(self.force_ki > 0, lim / self.force_ki, 0.0)
                np.clip(integral, -bound, bound, out=integral)
        return lam_d + self.force_kp * e_f + self.force_ki * integral, integral

    def _step_fast(self, t, q, v, reference, lam):
        """:meth:`step` with one ``computeAllTerms`` and the compiled kernel
        (:func:`multibody_dynamics.projection._inverse_dynamics_kernel`); same results as the
        numpy path to round-off."""
        pm, data, plan = self._pm, self._data, self._fast_plan
        e = reference.q - q if self._euclidean else pin.difference(pm, q, reference.q)
        a = self._kd_full * (reference.v - v)
        a += self._kp_full * e
        a += self._mask * reference.a
        pin.computeAllTerms(pm, data, q, v)  # M, h, J, dJ and the joint placements
        H = plan.H
        for i, fid in plan.moving:
            H[i] = pin.updateFramePlacement(pm, data, fid).homogeneous
        tau_s = self._rigid.spring_forces(q, v) if self._springs else self._zero_nv
        lam_cmd, integral = self._no_lam, None
        if self._mode == 1:
            lam_d = reference.lambda_d
            if lam_d is None:
                raise InputError("projected inverse dynamics with force control: "
                                 f"reference.lambda_d ({self._m},) [N | N m] is required")
            lam_cmd, integral = self._force_command(t, lam_d, lam)
        tau, f_c, lam_out, status, r, r2 = self._kernel(
            plan.M, plan.nle, tau_s, v, plan.J, plan.dJ, H, plan.cl, plan.cf, self._par, a,
            self._dep64, self._passive_idx, lam_cmd, self._mode)
        if status:
            if status == 1:
                raise SolverError(self._partition_message(q))
            if status == 2:
                raise SolverError(self.dynamics._controllability_message(r2, self._passive, r))
            raise SolverError("projected inverse dynamics: non-finite constraint Jacobian or "
                              f"bias at q = {np.round(q, 6).tolist()}")
        if integral is not None:
            self.integral = integral
        self._t_prev = float(t)
        self.a = a
        self.f_c = f_c
        self.lam = lam_out
        self.tau_generalized = tau
        return self._inputs(tau)

    @property
    def passive_residual(self) -> float:
        """Largest |tau| on a passive coordinate at the last step, before the mapping to inputs
        (round-off of eqs. 59-62) [N m | N]."""
        if not self._has_passive:
            return 0.0
        return float(np.max(np.abs(self.tau_generalized[self._passive])))

    def _inputs(self, tau):
        u = self._Bpinv @ tau
        if self._limited:
            np.clip(u, -self.effort_limit, self.effort_limit, out=u)
        return u

    def _partition_message(self, q) -> str:
        names = [self.model.coordinate_names[i] for i in self.independent]
        return (f"projected inverse dynamics: the independent coordinates ({', '.join(names)}) "
                f"do not parametrize the motion at q = {np.round(q, 6).tolist()} (A_d singular: a "
                "singularity of the partition); choose other ones with config.independent")


__all__ = ["ProjectedInverseDynamicsConfig", "ProjectedInverseDynamicsController"]

