"""Elastic joints in the reduced form of Yeşiloğlu (2007), Sect. 4.1, eqs. 4.1-4.24.

The joints of an open-chain model are split (the sorting matrix S of eq. 4.1) into the
*elastic* coordinates ``theta_l`` -- the passive joints with a parallel spring and damper --
and the *rigid* coordinates ``theta_baf`` (base, actuated and free joints) -- all the
others.  With ``M``, ``h`` (Coriolis, centrifugal and gravity forces, pinocchio's
``nonLinearEffects``) partitioned accordingly, the equation of motion reads (eq. 4.2)::

    [M1 M2] [theta_baf'']   [C_baf]   [tau_baf]
    [M3 M4] [theta_l''  ] + [C_l  ] = [tau_l  ],     tau_l = -L_d theta_l' - L_s theta_l  (4.3)

with ``L_s``, ``L_d`` the diagonal spring and damper matrices and ``theta_l`` the deflection
from the spring rest position (``pin.difference(q_rest, q)`` on the elastic coordinates).

**Torque-driven** rigid joints (``tau_baf`` given): eliminating ``theta_baf''`` with the
first block row (eq. 4.6) gives the reduced equation -- eq. 4.7, lost in the source's
OCR and reconstructed here::

    M_* theta_l'' + L_d theta_l' + L_s theta_l + C_* = B tau_baf              (4.7)
    M_* = M4 - M3 M1^-1 M2  (4.8),   C_* = C_l - M3 M1^-1 C_baf  (4.9),   B = -M3 M1^-1  (4.11)

(no loop-closure term ``J_*^T F_t``: open chains only).  ``M_*`` is the Schur complement of
``M1`` in ``M``, i.e. the inverse of the elastic block of ``M^-1`` (eqs. 4.21-4.23); it is
formed here with a Cholesky solve of ``M1``, never a dense inverse.

**Motion-driven** rigid joints (``theta_baf''`` prescribed, e.g. stiff position-controlled
drives): the second block row (eq. 4.5) is already the reduced equation, with ``M4`` as the
mass matrix and the prescribed accelerations as forcing::

    M4 theta_l'' + L_d theta_l' + L_s theta_l = -(C_l + M3 theta_baf'')      (4.5)

and the first block row (eq. 4.4) gives the drive torques that realize the motion.

**Discrete step** (eqs. 4.12-4.17, 4.24): over a control period ``h`` the coefficients are
frozen at the step start, and the linear ODE ``M theta'' + L_d theta' + L_s theta = f`` is
solved exactly.  With ``W = [theta; theta']`` (eq. 4.12) it is ``W' = A W + b``; the source
writes its solution with ``L_sd^-1`` (eq. 4.17) and a truncated exponential series (eq. 4.24).
Here one ``scipy.linalg.expm`` of the augmented matrix ``[[A, b], [0, 0]] h`` gives the free
response and the constant-forcing response together (Van Loan), without the series, and
without inverting ``L_sd``.  The spring-damper part is unconditionally stable: the eigenvalues
of ``A`` have non-positive real parts (``M`` positive definite, ``L_s > 0``, ``L_d >= 0``), so
``|eig(expm(A h))| <= 1`` for every ``h``, however stiff the spring (explicit Euler needs
``h < 2 zeta / omega``); the velocity-dependent terms in ``f`` stay explicit.
Freezing the coefficients at the step start (``scheme="start"``, the source's choice) makes a
simulation first order in ``h``; ``scheme="midpoint"`` freezes them at a state predicted half a
step ahead (two reduced equations and two ``expm`` per step, an exponential midpoint rule) and
is second order.  Measured on ``passive_arm_minphase`` with a prescribed motion (test
``test_prescribed_motion_converges...``): elastic-angle error 3.0e-3 rad (start) against
2.2e-5 rad (midpoint) at ``h = 10 ms``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
from scipy.linalg import cho_factor, cho_solve, expm

from .errors import DimensionError, InputError, SolverError
from .linearize import Linearization, Linearizer
from .model import MultibodyModel
from .rigid import RigidDynamics
from .simulate import SimulationResult
from .validation import as_vector, require_finite

__all__ = [
    "ElasticJoints", "ElasticJointsConfig", "ElasticPartition", "ElasticSimulationResult",
    "ReducedEquation", "SCHEMES", "expm_step", "simulate_elastic",
]

#: A prescribed motion of the rigid coordinates: ``motion(t) -> (q_r, v_r, a_r)``.
MotionFn = Callable[[float], tuple]
#: A torque law: ``tau(t, q, v) -> (nv,)``.
TorqueFn = Callable[[float, np.ndarray, np.ndarray], np.ndarray]
#: Where the coefficients of a step are frozen.
SCHEMES = ("start", "midpoint")


@dataclass(frozen=True)
class ElasticJointsConfig:
    """Which joints are elastic and, optionally, their spring and damper.

    Parameters
    ----------
    joints : sequence of str or None
        Names of the elastic joints (passive 1-DoF joints of the model).  Default: every
        passive joint of the model YAML with a positive ``stiffness``.
    stiffness : sequence of float or None
        Diagonal of ``L_s`` [N m/rad | N/m], one value (> 0) per elastic joint, in the order of
        ``ElasticJoints.elastic_names``; default: the model YAML's ``stiffness``.
    damping : sequence of float or None
        Diagonal of ``L_d`` [N m s/rad | N s/m], one value (>= 0) per elastic joint; default:
        the model YAML's ``damping``.
    """

    joints: Sequence[str] | None = None
    stiffness: Sequence[float] | None = None
    damping: Sequence[float] | None = None

    def __post_init__(self):
        for name in ("joints", "stiffness", "damping"):
            value = getattr(self, name)
            if value is not None:
                if isinstance(value, str):  # a single name would iterate over characters
                    value = (value,)
                object.__setattr__(self, name, tuple(value))


@dataclass(frozen=True)
class ElasticPartition:
    """Blocks of the sorted mass matrix and bias forces (Yeşiloğlu (2007) eq. 4.2).

    Attributes
    ----------
    M1 : (nr, nr); M2 : (nr, ne); M3 : (ne, nr); M4 : (ne, ne)
        Rigid-rigid, rigid-elastic, elastic-rigid and elastic-elastic blocks of M(q)
        [kg | kg m | kg m^2].
    C_baf : (nr,); C_l : (ne,)
        Rigid and elastic rows of h(q, v) (Coriolis, centrifugal, gravity) [N | N m]; zero when
        no velocity was given to :meth:`ElasticJoints.partition` (gravity only then).
    """

    M1: np.ndarray
    M2: np.ndarray
    M3: np.ndarray
    M4: np.ndarray
    C_baf: np.ndarray
    C_l: np.ndarray


@dataclass(frozen=True)
class ReducedEquation:
    """The reduced equation of the elastic coordinates at one state.

    ``M theta'' + L_d theta' + L_s theta = force``, with (Yeşiloğlu (2007))

    * ``mode == "torque"``: ``M = M_*`` (eq. 4.8), ``force = B tau_baf - C_*`` (eqs. 4.7, 4.9,
      4.11; ``tau_baf`` includes the model's springs/dampers on rigid coordinates, and any
      force on the elastic rows of ``tau`` is added);
    * ``mode == "motion"``: ``M = M4``, ``force = -(C_l + M3 theta_baf'')`` (eq. 4.5).

    The rigid accelerations follow from the elastic ones as
    ``theta_baf'' = a_rigid0 - G theta_l''`` (eq. 4.6): ``G = M1^-1 M2`` and
    ``a_rigid0 = M1^-1 (tau_baf - C_baf)`` when torque-driven; ``G = 0`` and ``a_rigid0`` the
    prescribed accelerations when motion-driven.

    Attributes
    ----------
    mode : str
        ``"torque"`` or ``"motion"``.
    M : (ne, ne)
        Mass matrix of the reduced equation [kg | kg m^2].
    damping, stiffness : (ne,)
        Diagonals of ``L_d`` [N m s/rad | N s/m] and ``L_s`` [N m/rad | N/m].
    force : (ne,)
        Right-hand side [N m | N].
    bias : (ne,)
        ``C_*`` (torque) or ``C_l`` (motion) [N m | N].
    theta, dtheta : (ne,)
        Elastic deflections from the rest position [rad | m] and their rates [rad/s | m/s].
    B : (ne, nr) or None
        ``-M3 M1^-1`` (eq. 4.11) when torque-driven.
    G : (nr, ne)
    a_rigid0 : (nr,)
    """

    mode: str
    M: np.ndarray
    damping: np.ndarray
    stiffness: np.ndarray
    force: np.ndarray
    bias: np.ndarray
    theta: np.ndarray
    dtheta: np.ndarray
    B: np.ndarray | None
    G: np.ndarray
    a_rigid0: np.ndarray

    def acceleration(self) -> np.ndarray:
        """``theta_l''`` (ne,) [rad/s^2 | m/s^2] from the reduced equation (Cholesky solve)."""
        rhs = self.force - self.damping * self.dtheta - self.stiffness * self.theta
        return cho_solve(_cholesky(self.M, "reduced mass matrix"), rhs, check_finite=False)


@dataclass(frozen=True)
class ElasticSimulationResult(SimulationResult):
    """:class:`~multibody_dynamics.simulate.SimulationResult` plus the elastic torques.

    ``tau`` holds the generalized forces applied (torque-driven) or required by the
    prescribed motion (motion-driven, Yeşiloğlu (2007) eq. 4.4; zero on the elastic rows).

    Attributes
    ----------
    tau_elastic : (N, ne)
        ``tau_l = -L_d theta_l' - L_s theta_l`` (eq. 4.3) at each sample [N m | N].
    elastic_names : tuple of str
        One name per column of ``tau_elastic``.
    """

    tau_elastic: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    elastic_names: tuple[str, ...] = field(default=())


def _cholesky(M: np.ndarray, what: str):
    try:
        return cho_factor(M, check_finite=False)
    except np.linalg.LinAlgError:
        raise SolverError(f"{what} is not positive definite (Cholesky failed)") from None


def _diagonal(x, n: int, name: str) -> np.ndarray:
    """A diagonal given as (n,) or as an (n, n) matrix, returned as the (n, n) matrix."""
    arr = np.asarray(x, dtype=float)
    if arr.shape == (n,):
        return np.diag(arr)
    if arr.shape == (n, n):
        return arr
    raise DimensionError(f"{name}: expected shape ({n},) (diagonal) or ({n}, {n}), "
                         f"got {arr.shape}")


def expm_step(M, damping, stiffness, force, theta, dtheta,
              h: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact solution over ``h`` of ``M theta'' + L_d theta' + L_s theta = force`` (constant).

    Yeşiloğlu (2007) eqs. 4.12-4.17 write this step with ``L_sd^-1`` and a truncated series of
    ``exp(-M_s^-1 L_sd h)`` (eq. 4.24); here the state ``W = [theta; theta']`` and the constant
    forcing are advanced together by one matrix exponential of the augmented matrix::

        [W(h); 1] = expm([[A, b], [0, 0]] h) [W(0); 1],
        A = [[0, I], [-M^-1 L_s, -M^-1 L_d]],   b = [0; M^-1 force],

    (``M^-1`` applied by a Cholesky solve), which stays exact for any ``h`` and needs no
    inverse of ``L_s``.

    Parameters
    ----------
    M : (n, n)
        Symmetric positive definite mass matrix [kg | kg m^2] (``M_*`` or ``M4``).
    damping, stiffness : (n,) or (n, n)
        ``L_d`` [N m s/rad | N s/m] and ``L_s`` [N m/rad | N/m] (a 1-D array is the diagonal).
    force : (n,)
        Constant right-hand side [N m | N].
    theta, dtheta : (n,)
        Initial deflection [rad | m] and rate [rad/s | m/s].
    h : float
        Step [s], > 0.

    Returns
    -------
    theta, dtheta : (n,)
        The state after ``h``.
    """
    M = np.asarray(M, dtype=float)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
        raise DimensionError(f"M: expected a non-empty square matrix (n, n), got shape {M.shape}")
    n = M.shape[0]
    D = _diagonal(damping, n, "damping")
    K = _diagonal(stiffness, n, "stiffness")
    force = as_vector(force, n, "force")
    theta = as_vector(theta, n, "theta")
    dtheta = as_vector(dtheta, n, "dtheta")
    for arr, name in ((M, "M"), (D, "damping"), (K, "stiffness"), (force, "force"),
                      (theta, "theta"), (dtheta, "dtheta")):
        require_finite(arr, name)
    h = _positive(h, "h")
    return _expm_step(_cholesky(M, "M"), D, K, force, theta, dtheta, h)


def _expm_step(chol, D, K, force, theta, dtheta, h):
    n = theta.size
    X = cho_solve(chol, np.column_stack([K, D, force]), check_finite=False)  # M^-1 [L_s, L_d, f]
    aug = np.zeros((2 * n + 1, 2 * n + 1))
    np.fill_diagonal(aug[:n, n:2 * n], h)  # theta' = dtheta
    aug[n:2 * n, :2 * n] = -h * X[:, :2 * n]
    aug[n:2 * n, 2 * n] = h * X[:, 2 * n]
    E = expm(aug)
    w = E[:2 * n, :2 * n] @ np.concatenate([theta, dtheta]) + E[:2 * n, 2 * n]
    return w[:n], w[n:]


def _q_names(pm: pin.Model) -> tuple[str, ...]:
    names = []
    for jid in range(1, pm.njoints):
        nq = pm.joints[jid].nq
        names.extend([pm.names[jid]] if nq == 1 else [f"{pm.names[jid]}.{k}" for k in range(nq)])
    return tuple(names)


def _scheme(scheme) -> str:
    if scheme not in SCHEMES:
        raise InputError(f"scheme: expected one of {', '.join(SCHEMES)}, got {scheme!r}")
    return scheme


def _restart(eq_mid: ReducedEquation, eq0: ReducedEquation) -> ReducedEquation:
    """Coefficients of ``eq_mid`` with the initial state of ``eq0`` (exponential midpoint)."""
    return dataclasses.replace(eq_mid, theta=eq0.theta, dtheta=eq0.dtheta)


def _positive(x, name: str) -> float:
    try:
        value = float(x)
    except (TypeError, ValueError):
        raise InputError(f"{name}: expected a positive time in s, got {x!r}") from None
    if not (np.isfinite(value) and value > 0):
        raise InputError(f"{name}: expected a positive time in s, got {x!r}")
    return value


class ElasticJoints:
    """Dynamics of an open chain with elastic joints in Yeşiloğlu's reduced form.

    The elastic joints are passive joints of the model with a spring ``L_s > 0`` and damper
    ``L_d >= 0``; every other coordinate is *rigid* (actuated, or a free passive joint when
    torque-driven).  Owns pinocchio ``Data``: create one object per thread.

    Parameters
    ----------
    model : MultibodyModel
        An open-chain model (no loop closures) with at least one elastic joint.
    config : ElasticJointsConfig, optional

    Attributes
    ----------
    model : MultibodyModel
    spring_model : MultibodyModel
        ``model`` with the springs/dampers of the elastic joints set to ``L_s``, ``L_d``: the
        same system for :class:`~multibody_dynamics.rigid.RigidDynamics`,
        :func:`~multibody_dynamics.simulate.simulate` and
        :class:`~multibody_dynamics.linearize.Linearizer`.
    elastic_names, rigid_names : tuple of str
        Coordinates of each group, in pinocchio order.
    iv_elastic, iv_rigid : ndarray of int
        Their indices in ``v`` (and ``a``, ``tau``).
    iq_elastic, iq_rigid : ndarray of int
        Their indices in ``q``.
    stiffness, damping : ndarray, (ne,)
        Diagonals of ``L_s`` [N m/rad | N/m] and ``L_d`` [N m s/rad | N s/m].
    free_names : tuple of str
        Rigid coordinates without actuator (passive joints that are not elastic).

    Raises
    ------
    InputError
        The model has loop closures or no elastic joint; a selected joint is actuated or its
        stiffness is not positive; a damping is negative.
    DimensionError
        ``stiffness``/``damping`` overrides of the wrong length.
    FrameNotFound
        An unknown joint name (the message lists the valid ones).
    """

    def __init__(self, model: MultibodyModel, config: ElasticJointsConfig | None = None):
        cfg = config or ElasticJointsConfig()
        if model.closures:
            raise InputError(
                f"{model.name}: elastic joints are implemented for open chains; the loop "
                f"closure(s) {', '.join(c.name for c in model.closures)} would need the "
                "constraint-force term J_*^T F_t of Yeşiloğlu (2007) eq. 4.7")
        self.model = model
        self.config = cfg
        pm = model.pin_model
        names = model.coordinate_names
        if cfg.joints is None:
            iv_e = np.flatnonzero(model.passive & (model.stiffness > 0))
            if iv_e.size == 0:
                springless = model.passive_joint_names
                why = (f"its passive joints ({', '.join(springless)}) have no spring (stiffness 0)"
                       if springless else "it has no passive joint")
                raise InputError(f"{model.name}: no elastic joint: {why}; declare "
                                 "passive_joints.<name>.stiffness > 0 in the model YAML")
        else:
            if not cfg.joints:
                raise InputError(f"{model.name}: joints: expected at least one elastic joint name")
            iv_e = np.array(sorted({model.joint_index(j) for j in cfg.joints}), dtype=int)
            if iv_e.size != len(cfg.joints):
                raise InputError(f"joints: duplicate names in {list(cfg.joints)}")
            active = [names[i] for i in iv_e if not model.passive[i]]
            if active:
                raise InputError(f"{model.name}: joints: {', '.join(active)} is actuated in the "
                                 "model; elastic joints must be passive joints of the model YAML")
        ne = iv_e.size
        self.iv_elastic = iv_e
        self.iv_rigid = np.setdiff1d(np.arange(model.nv), iv_e)
        self.elastic_names = tuple(names[i] for i in iv_e)
        self.rigid_names = tuple(names[i] for i in self.iv_rigid)
        self.free_names = tuple(names[i] for i in self.iv_rigid if model.passive[i])

        K = model.stiffness[iv_e] if cfg.stiffness is None else self._override(
            cfg.stiffness, ne, "stiffness")
        D = model.damping[iv_e] if cfg.damping is None else self._override(
            cfg.damping, ne, "damping")
        bad = [f"{n} ({k:g})" for n, k in zip(self.elastic_names, K) if not k > 0]
        if bad:
            raise InputError(f"{model.name}: stiffness: expected > 0 N m/rad (or N/m) for every "
                             f"elastic joint, got {', '.join(bad)}")
        bad = [f"{n} ({d:g})" for n, d in zip(self.elastic_names, D) if not d >= 0]
        if bad:
            raise InputError(f"{model.name}: damping: expected >= 0 N m s/rad (or N s/m), got "
                             f"{', '.join(bad)}")
        self.stiffness, self.damping = K.copy(), D.copy()
        for arr in (self.stiffness, self.damping):
            arr.setflags(write=False)
        self._Ls, self._Ld = np.diag(K), np.diag(D)

        stiff, damp = model.stiffness.copy(), model.damping.copy()
        stiff[iv_e], damp[iv_e] = K, D
        stiff.setflags(write=False)
        damp.setflags(write=False)
        self.spring_model = dataclasses.replace(model, stiffness=stiff, damping=damp)

        iq_e = []
        for i in iv_e:
            joint = next(pm.joints[j] for j in range(1, pm.njoints) if pm.joints[j].idx_v == i)
            iq_e.extend(range(joint.idx_q, joint.idx_q + joint.nq))
        self.iq_elastic = np.array(iq_e, dtype=int)
        self.iq_rigid = np.setdiff1d(np.arange(model.nq), self.iq_elastic)

        r, e = self.iv_rigid, self.iv_elastic
        self._ix = {"rr": np.ix_(r, r), "re": np.ix_(r, e), "er": np.ix_(e, r), "ee": np.ix_(e, e)}
        # springs/dampers of the model on rigid coordinates (e.g. a damped free joint)
        self._rigid_springs = bool(np.any(stiff[r]) or np.any(damp[r]))
        self._pm = pm
        self._data = pm.createData()
        self._rigid = RigidDynamics(self.spring_model)
        self._qr = model.q_rest
        self._euclidean = model.nq == model.nv

    def _override(self, values, ne, name) -> np.ndarray:
        arr = np.asarray(values, dtype=float)
        if arr.shape != (ne,):
            raise DimensionError(f"{self.model.name}: {name}: expected {ne} value(s), one per "
                                 f"elastic joint ({', '.join(self.elastic_names)}), got shape "
                                 f"{arr.shape}")
        return arr

    # -- sizes ---------------------------------------------------------------------------
    @property
    def ne(self) -> int:
        """Number of elastic coordinates."""
        return self.iv_elastic.size

    @property
    def nr(self) -> int:
        """Number of rigid (base, actuated, free) coordinates."""
        return self.iv_rigid.size

    @property
    def dynamics(self) -> RigidDynamics:
        """Full-model dynamics of :attr:`spring_model` (same springs as the reduced form)."""
        return self._rigid

    # -- argument checks -----------------------------------------------------------------
    def _q(self, q):
        return as_vector(q, self.model.nq, "q")

    def _v(self, v, name="v"):
        return as_vector(v, self.model.nv, name)

    # -- kinematics of the elastic coordinates ---------------------------------------------
    def deflection(self, q) -> np.ndarray:
        """``theta_l`` (ne,): elastic deflections from the spring rest position [rad | m]."""
        q = self._q(q)
        dq = q - self._qr if self._euclidean else pin.difference(self._pm, self._qr, q)
        return dq[self.iv_elastic]

    def elastic_torques(self, q, v) -> np.ndarray:
        """``tau_l = -L_d theta_l' - L_s theta_l`` (ne,) [N m | N] (Yeşiloğlu (2007) eq. 4.3)."""
        v = self._v(v)
        return -self.damping * v[self.iv_elastic] - self.stiffness * self.deflection(q)

    # -- the partition and the reduced quantities -------------------------------------------
    def _M_h(self, q, v):
        M = pin.crba(self._pm, self._data, q).copy()  # the Python binding fills both triangles
        h = pin.nonLinearEffects(self._pm, self._data, q, v).copy()
        return M, h

    def partition(self, q, v=None) -> ElasticPartition:
        """Blocks ``M1..M4``, ``C_baf``, ``C_l`` of the sorted equation (Yeşiloğlu (2007) eq. 4.2).

        Parameters
        ----------
        q : (nq,)
            Configuration [rad | m].
        v : (nv,), optional
            Velocity [rad/s | m/s] (default zero: ``C`` is then the gravity load).
        """
        q = self._q(q)
        v = np.zeros(self.model.nv) if v is None else self._v(v)
        M, h = self._M_h(q, v)
        ix = self._ix
        return ElasticPartition(M1=M[ix["rr"]], M2=M[ix["re"]], M3=M[ix["er"]], M4=M[ix["ee"]],
                                C_baf=h[self.iv_rigid], C_l=h[self.iv_elastic])

    def reduced_mass_matrix(self, q) -> np.ndarray:
        """``M_* = M4 - M3 M1^-1 M2`` (ne, ne) [kg | kg m^2] (Yeşiloğlu (2007) eq. 4.8).

        The Schur complement of ``M1`` in ``M`` (Cholesky solve of ``M1``): the mass the
        springs see when the rigid coordinates are torque-driven; equal to the inverse of the
        elastic block of ``M^-1`` (eq. 4.23).
        """
        p = self.partition(q)
        if self.nr == 0:
            return p.M4
        return p.M4 - p.M3 @ cho_solve(_cholesky(p.M1, "M1"), p.M2, check_finite=False)

    def reduced_bias(self, q, v) -> np.ndarray:
        """``C_* = C_l - M3 M1^-1 C_baf`` (ne,) [N m | N] (Yeşiloğlu (2007) eq. 4.9).

        ``C`` holds the Coriolis, centrifugal and gravity forces (springs excluded).
        """
        p = self.partition(q, v)
        if self.nr == 0:
            return p.C_l
        return p.C_l - p.M3 @ cho_solve(_cholesky(p.M1, "M1"), p.C_baf, check_finite=False)

    def reduced_equation(self, q, v, tau=None, a_rigid=None) -> ReducedEquation:
        """The reduced equation of the elastic coordinates at (q, v).

        Give exactly one of ``tau`` (torque-driven, Yeşiloğlu (2007) eq. 4.7 as reconstructed,
        with eqs. 4.8, 4.9, 4.11) or ``a_rigid`` (motion-driven, eq. 4.5).

        Parameters
        ----------
        q : (nq,); v : (nv,)
            State [rad | m, rad/s | m/s].
        tau : (nv,), optional
            Generalized actuation force [N | N m]; its rigid rows are ``tau_baf`` (the model's
            springs/dampers on rigid coordinates are added), its elastic rows, normally zero,
            an external load on the elastic joints.
        a_rigid : (nr,), optional
            Prescribed accelerations of the rigid coordinates ``theta_baf''``
            [rad/s^2 | m/s^2]; every rigid coordinate must be actuated.

        Returns
        -------
        ReducedEquation
        """
        q = self._q(q)
        v = self._v(v)
        if (tau is None) == (a_rigid is None):
            raise InputError("give exactly one of tau (torque-driven) and a_rigid (motion-driven)")
        if tau is not None:
            tau = require_finite(self._v(tau, "tau"), "tau")
            return self._torque_equation(q, v, tau)[0]
        a_rigid = require_finite(as_vector(a_rigid, self.nr, "a_rigid"), "a_rigid")
        return self._motion_equation(q, v, a_rigid)[0]

    def _torque_equation(self, q, v, tau):
        M, h = self._M_h(q, v)
        r, e, ix = self.iv_rigid, self.iv_elastic, self._ix
        theta, dtheta = self.deflection(q), v[e]
        f_r = tau[r]
        if self._rigid_springs:
            f_r = f_r + self._rigid.spring_forces(q, v)[r]
        M3, M4 = M[ix["er"]], M[ix["ee"]]
        if self.nr:
            chol1 = _cholesky(M[ix["rr"]], "M1")
            X = cho_solve(chol1, np.column_stack([M[ix["re"]], h[r], f_r]), check_finite=False)
            G, Mi_C, Mi_f = X[:, :self.ne], X[:, self.ne], X[:, self.ne + 1]
        else:
            G, Mi_C, Mi_f = np.zeros((0, self.ne)), np.zeros(0), np.zeros(0)
        M_star = M4 - M3 @ G  # (4.8)
        C_star = h[e] - M3 @ Mi_C  # (4.9)
        B = -G.T  # -M3 M1^-1 = -(M1^-1 M2)^T since M is symmetric (4.11)
        force = B @ f_r - C_star + tau[e]
        eq = ReducedEquation("torque", M_star, self.damping, self.stiffness, force, C_star, theta,
                             dtheta, B, G, Mi_f - Mi_C)
        return eq, M, h

    def _motion_equation(self, q, v, a_rigid):
        if self.free_names:
            raise InputError(f"{self.model.name}: a prescribed motion needs every rigid "
                             f"coordinate actuated; {', '.join(self.free_names)} is passive "
                             "without spring")
        M, h = self._M_h(q, v)
        e = self.iv_elastic
        M3 = M[self._ix["er"]]
        force = -(h[e] + M3 @ a_rigid)  # (4.5)
        eq = ReducedEquation("motion", M[self._ix["ee"]], self.damping,
                             self.stiffness, force, h[e],
                             self.deflection(q), v[e], None, np.zeros((self.nr, self.ne)),
                             a_rigid.copy())
        return eq, M, h

    def _accelerations(self, eq: ReducedEquation) -> np.ndarray:
        a_e = eq.acceleration()
        a = np.empty(self.model.nv)
        a[self.iv_elastic] = a_e
        a[self.iv_rigid] = eq.a_rigid0 - eq.G @ a_e  # (4.6)
        return a

    # -- the public dynamics (same calls as RigidDynamics) ------------------------------------
    def forward_dynamics(self, q, v, tau) -> np.ndarray:
        """Accelerations a (nv,) under actuation ``tau`` (nv,), through the reduced form.

        ``theta_l''`` from eq. 4.7, then ``theta_baf''`` from eq. 4.6 (Yeşiloğlu (2007)); equal
        to ``RigidDynamics(spring_model).forward_dynamics``.
        """
        eq = self.reduced_equation(q, v, tau=tau)
        return self._accelerations(eq)

    def inverse_dynamics(self, q, v, a) -> np.ndarray:
        """Actuation tau (nv,) producing the accelerations ``a`` (nv,) at (q, v) (``rnea``).

        The elastic rows are the loads an external agent would have to add on the elastic
        joints; they vanish when ``a`` is a motion the elastic joints can perform (see
        :meth:`motion_dynamics`).
        """
        return self._rigid.inverse_dynamics(self._q(q), self._v(v), self._v(a, "a"))

    def mass_matrix(self, q) -> np.ndarray:
        """Joint-space mass matrix M(q) (nv, nv) (``crba``)."""
        return self._rigid.mass_matrix(self._q(q))

    def energy(self, q, v) -> float:
        """Total mechanical energy T + V [J], the elastic joints' strain energy in V."""
        return self._rigid.energy(self._q(q), self._v(v))

    def motion_dynamics(self, q, v, a_rigid) -> tuple[np.ndarray, np.ndarray]:
        """Elastic response to prescribed rigid accelerations and the drive torques.

        ``theta_l''`` from eq. 4.5, ``tau_baf = M1 theta_baf'' + M2 theta_l'' + C_baf``
        (eq. 4.4, the model's springs on rigid coordinates subtracted) (Yeşiloğlu (2007)).

        Parameters
        ----------
        q : (nq,); v : (nv,)
        a_rigid : (nr,)
            Prescribed ``theta_baf''`` [rad/s^2 | m/s^2].

        Returns
        -------
        a : (nv,)
            All accelerations.
        tau : (nv,)
            Generalized actuation [N | N m] realizing them; zero on the elastic rows.
        """
        q, v = self._q(q), self._v(v)
        a_rigid = require_finite(as_vector(a_rigid, self.nr, "a_rigid"), "a_rigid")
        eq, M, h = self._motion_equation(q, v, a_rigid)
        a = self._accelerations(eq)
        return a, self._drive_torque(q, v, a, M, h)

    def _drive_torque(self, q, v, a, M, h):
        r = self.iv_rigid
        tau = np.zeros(self.model.nv)
        tau[r] = M[r] @ a + h[r]  # (4.4)
        if self._rigid_springs:
            tau[r] -= self._rigid.spring_forces(q, v)[r]
        return tau

    def linearize(self, q, v, u=None) -> Linearization:
        """Linear model about (q, v, u) of :attr:`spring_model` (elastic joints included).

        See :meth:`multibody_dynamics.linearize.Linearizer.linearize`; ``u`` (nu,) are the
        model's inputs (``tau = B u``).
        """
        return Linearizer(self.spring_model).linearize(q, v, u)

    # -- discrete step and simulation --------------------------------------------------------
    def step(self, q, v, h: float, tau=None, a_rigid=None,
             scheme: str = "start") -> tuple[np.ndarray, np.ndarray]:
        """Advance (q, v) over ``h`` with the coefficients of the reduced equation frozen.

        The elastic coordinates follow the exact solution of the frozen reduced equation
        (:func:`expm_step`); the rigid ones integrate ``theta_baf'' = a_rigid0 - G theta_l''``
        exactly along it (eq. 4.6).  Give exactly one of ``tau`` (nv,) (torque-driven) or
        ``a_rigid`` (nr,) (motion-driven); either is held over the step.

        Parameters
        ----------
        q : (nq,); v : (nv,)
        h : float
            Step [s], > 0.
        tau : (nv,), optional
        a_rigid : (nr,), optional
        scheme : str
            ``"start"``: coefficients frozen at (q, v) (first order);
            ``"midpoint"``: frozen at the state predicted ``h/2`` ahead (second order).

        Returns
        -------
        q : (nq,); v : (nv,)
        """
        scheme = _scheme(scheme)
        eq = self.reduced_equation(q, v, tau=tau, a_rigid=a_rigid)
        q, v, h = self._q(q), self._v(v), _positive(h, "h")
        if scheme == "midpoint":
            qm, vm = self._advance(q, v, eq, 0.5 * h)
            eqm = (self._motion_equation(qm, vm, eq.a_rigid0)[0] if eq.mode == "motion"
                   else self._torque_equation(qm, vm, self._v(tau, "tau"))[0])
            eq = _restart(eqm, eq)
        return self._advance(q, v, eq, h)

    def _advance(self, q, v, eq: ReducedEquation, h: float):
        r, e = self.iv_rigid, self.iv_elastic
        theta1, dtheta1 = _expm_step(_cholesky(eq.M, "reduced mass matrix"), self._Ld, self._Ls,
                                     eq.force, eq.theta, eq.dtheta, h)
        dq = np.zeros(self.model.nv)
        dq[e] = theta1 - eq.theta
        v1 = v.copy()
        v1[e] = dtheta1
        if self.nr:
            v_r = v[r]
            # theta_baf'' = a0 - G theta_l'' integrated exactly along the elastic solution
            v1[r] = v_r + h * eq.a_rigid0 - eq.G @ (dtheta1 - eq.dtheta)
            dq[r] = h * v_r + 0.5 * h * h * eq.a_rigid0 - eq.G @ (dq[e] - h * eq.dtheta)
        return pin.integrate(self._pm, q, dq), v1

    def simulate(self, duration: float, h: float, q0=None, v0=None,  # noqa: C901
                 tau: TorqueFn | np.ndarray | None = None, motion: MotionFn | None = None,
                 output_dt: float | None = None, scheme: str = "start") -> ElasticSimulationResult:
        """Fixed-step simulation with :meth:`step` (control period ``h``).

        Parameters
        ----------
        duration : float
            [s], > 0; ``round(duration / h)`` steps.
        h : float
            Step [s], > 0: the coefficients are frozen over each step.
        q0 : (nq,), optional; v0 : (nv,), optional
            Initial state (default: the model's ``q_initial``, at rest).  When ``motion`` is
            given, its rigid entries are replaced by ``motion(0)``.
        tau : (nv,) or callable ``tau(t, q, v) -> (nv,)``, optional
            Torque-driven: generalized actuation [N | N m], held over each step (default zero).
        motion : callable ``motion(t) -> (q_r, v_r, a_r)``, optional
            Motion-driven: rigid configuration ``q[iq_rigid]`` [rad | m], velocity and
            acceleration ``v[iv_rigid]``, ``a[iv_rigid]``; ``a_r`` is held over each step, the
            rigid state is set to ``motion(t)`` at the step end.  Exclusive with ``tau``.
        output_dt : float, optional
            Sample interval [s], rounded to a whole number of steps (default: every step).
        scheme : str
            ``"start"`` (first order) or ``"midpoint"`` (second order); see :meth:`step`.

        Returns
        -------
        ElasticSimulationResult
            ``t`` (N,), ``q`` (N, nq), ``v`` (N, nv), ``tau`` (N, nv) (applied, or required by
            the motion: eq. 4.4), ``tau_elastic`` (N, ne) (eq. 4.3), energy, ...; a NaN state
            ends the run with ``success = False`` and the samples computed before.
        """
        model, nv = self.model, self.model.nv
        duration = _positive(duration, "duration")
        h = _positive(h, "h")
        scheme = _scheme(scheme)
        if tau is not None and motion is not None:
            raise InputError("give at most one of tau (torque-driven) and motion (motion-driven)")
        if motion is not None and not callable(motion):
            raise InputError("motion: expected a callable motion(t) -> (q_r, v_r, a_r)")
        if motion is not None and self.free_names:
            raise InputError(f"{model.name}: a prescribed motion needs every rigid coordinate "
                             f"actuated; {', '.join(self.free_names)} is passive without spring")
        const = None
        if motion is None:
            const = np.zeros(nv) if tau is None else (
                None if callable(tau) else require_finite(as_vector(tau, nv, "tau"), "tau"))
        n = max(1, int(round(duration / h)))
        every = (1 if output_dt is None
                 else max(1, int(round(_positive(output_dt, "output_dt") / h))))
        q = model.q_initial.copy() if q0 is None else require_finite(
            as_vector(q0, model.nq, "q0"), "q0").copy()
        v = np.zeros(nv) if v0 is None else require_finite(as_vector(v0, nv, "v0"), "v0").copy()
        iq_r, iv_r = self.iq_rigid, self.iv_rigid

        def prescribed(t):
            out = motion(t)
            if not isinstance(out, (tuple, list)) or len(out) != 3:
                raise DimensionError("motion(t): expected a tuple (q_r, v_r, a_r)")
            return (as_vector(out[0], iq_r.size, "motion(t)[0] (q_r)"),
                    as_vector(out[1], self.nr, "motion(t)[1] (v_r)"),
                    as_vector(out[2], self.nr, "motion(t)[2] (a_r)"))

        def equation_at(t, q, v):
            """Reduced equation and the generalized force applied (or required) at t."""
            if motion is not None:
                _, _, a_r = prescribed(t)
                eq, M, hh = self._motion_equation(q, v, a_r)
                return eq, self._drive_torque(q, v, self._accelerations(eq), M, hh)
            u = const if const is not None else as_vector(tau(t, q, v), nv, "tau(t, q, v)")
            return self._torque_equation(q, v, u)[0], u

        def midpoint_equation(t, q, v, eq0, u):
            qm, vm = self._advance(q, v, eq0, 0.5 * h)
            if motion is None:
                return _restart(self._torque_equation(qm, vm, u)[0], eq0)
            qm[iq_r], vm[iv_r], a_m = prescribed(t + 0.5 * h)
            return _restart(self._motion_equation(qm, vm, a_m)[0], eq0)

        if motion is not None:
            q[iq_r], v[iv_r], _ = prescribed(0.0)
        n_out = -(-n // every) + 1
        T, Q, V = np.empty(n_out), np.empty((n_out, model.nq)), np.empty((n_out, nv))
        U, E, TE = np.empty((n_out, nv)), np.empty(n_out), np.empty((n_out, self.ne))
        start = time.perf_counter()
        k_out = 0

        def record(t, q, v, u):
            nonlocal k_out
            T[k_out], Q[k_out], V[k_out], U[k_out] = t, q, v, u
            E[k_out] = self._rigid.energy(q, v)
            TE[k_out] = self.elastic_torques(q, v)
            k_out += 1

        eq, u = equation_at(0.0, q, v)
        record(0.0, q, v, u)
        success, message, steps = True, f"completed {n} steps of {h:g} s (expm, {scheme})", 0
        for k in range(n):
            t = (k + 1) * h
            if scheme == "midpoint":
                try:
                    eq = midpoint_equation(t - h, q, v, eq, u)
                except SolverError as exc:
                    success, message = False, f"at t = {t - h:.6g} s: {exc}"
                    break
            q, v = self._advance(q, v, eq, h)
            if motion is not None:
                q[iq_r], v[iv_r], _ = prescribed(t)
            steps += 1
            if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
                success, message = False, f"state became NaN/inf at t = {t:.6g} s"
                break
            try:
                eq, u = equation_at(t, q, v)
            except SolverError as exc:
                success, message = False, f"at t = {t:.6g} s: {exc}"
                break
            if (k + 1) % every == 0 or k + 1 == n:
                record(t, q, v, u)
        wall = time.perf_counter() - start
        m = k_out
        return ElasticSimulationResult(
            T[:m], Q[:m], V[:m], U[:m], E[:m], success, message, steps, wall,
            model.coordinate_names, np.zeros((m, 0)), (), np.zeros(m), np.zeros(m), 0, 0, 0,
            1 + steps * (2 if scheme == "midpoint" else 1),  # reduced equations formed
            "fixed", _q_names(self._pm), tau_elastic=TE[:m], elastic_names=self.elastic_names)


def simulate_elastic(model: MultibodyModel, duration: float, h: float, q0=None, v0=None,
                     tau: TorqueFn | np.ndarray | None = None, motion: MotionFn | None = None,
                     config: ElasticJointsConfig | None = None, output_dt: float | None = None,
                     scheme: str = "start") -> ElasticSimulationResult:
    """Simulate ``model`` with its elastic joints in reduced form; see
    :meth:`ElasticJoints.simulate`."""
    return ElasticJoints(model, config).simulate(duration, h, q0, v0, tau=tau, motion=motion,
                                                 output_dt=output_dt, scheme=scheme)
