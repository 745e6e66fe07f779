"""Open-chain rigid-body dynamics through pinocchio, with the model's springs and dampers.

Equation of motion (Seifried 2014 eq. 2.22, with the passive-joint springs and
dampers as applied forces)::

    M(q) a + h(q, v) = tau + tau_s(q, v),     tau = B u,
    h = Coriolis/centrifugal + gravity,       tau_s = -K (q - q_rest) - D v.

``tau`` is the generalized actuation force (nv,) [N | N m]; the passive rows of
an admissible ``tau`` are zero.  Each :class:`RigidDynamics` owns one pinocchio
``Data``: create one per thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from .errors import DimensionError, InputError
from .model import MultibodyModel
from .validation import as_vector

_ND, _F8 = np.ndarray, np.dtype(float)


@dataclass(frozen=True)
class Payload:
    """A body held rigidly by a frame (default: the model's end effector), plus external loads.

    Parameters
    ----------
    mass : float
        [kg], >= 0.
    com : (3,)
        Centre of mass in the holding frame [m].
    inertia : (3, 3)
        Rotational inertia about the centre of mass, holding-frame axes [kg m^2]
        (default zero: a point mass).
    force : (3,)
        External force applied on the payload, world axes [N].
    force_point : (3,) or None
        Where ``force`` acts, in the holding frame [m] (default: ``com``).
    torque : (3,)
        External torque applied on the payload, world axes [N m].
    frame : str or None
        Holding frame (default: the model's ``end_effector``).
    """

    mass: float = 0.0
    com: tuple = (0.0, 0.0, 0.0)
    inertia: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))
    force: tuple = (0.0, 0.0, 0.0)
    force_point: tuple | None = None
    torque: tuple = (0.0, 0.0, 0.0)
    frame: str | None = None

    def __post_init__(self):
        if not np.isfinite(self.mass) or self.mass < 0:
            raise InputError(f"payload mass: expected a finite number >= 0 kg, got {self.mass}")
        for name in ("com", "force", "torque") + (("force_point",)
                                                  if self.force_point is not None else ()):
            vec = as_vector(getattr(self, name), 3, f"payload {name}")
            if not np.all(np.isfinite(vec)):
                raise InputError(f"payload {name}: expected finite numbers, got {vec.tolist()}")
            object.__setattr__(self, name, tuple(vec))
        inertia = np.asarray(self.inertia, float)
        if not np.all(np.isfinite(inertia)):
            raise InputError("payload inertia: expected finite numbers")
        if inertia.shape != (3, 3):
            raise DimensionError(f"payload inertia: expected shape (3, 3), got {inertia.shape}")
        if not np.allclose(inertia, inertia.T) or np.linalg.eigvalsh(inertia)[0] < -1e-12:
            raise DimensionError("payload inertia: expected a symmetric positive semi-definite "
                                 "matrix")
        object.__setattr__(self, "inertia", inertia)

    @property
    def has_loads(self) -> bool:
        return bool(np.any(self.force) or np.any(self.torque))


def with_payload(model: MultibodyModel, payload: Payload) -> tuple[pin.Model, int, int]:
    """A copy of the pinocchio model whose holding body carries the payload's inertia.

    Returns the copy, the holding frame id and its parent joint id.
    """
    frame_name = payload.frame or model.end_effector
    if frame_name is None:
        raise DimensionError(f"{model.name}: the model has no end_effector; "
                             "name the payload's holding frame (Payload(frame=...))")
    fid = model.frame_id(frame_name)
    pm = model.pin_model.copy()
    frame = pm.frames[fid]
    if payload.mass > 0:
        body = pin.Inertia(payload.mass, np.array(payload.com), payload.inertia)
        pm.inertias[frame.parentJoint] = pm.inertias[frame.parentJoint] + frame.placement.act(body)
    return pm, fid, frame.parentJoint


class RigidDynamics:
    """Inverse and forward dynamics, mass matrix, energies and joint reaction loads.

    Parameters
    ----------
    model : MultibodyModel
    """

    def __init__(self, model: MultibodyModel):
        self.model = model
        self._pm = model.pin_model
        self._data = self._pm.createData()
        self._nq, self._nv = model.nq, model.nv
        self._sq, self._sv = (model.nq,), (model.nv,)
        self._springs = model.has_springs
        self._K, self._D, self._qr = model.stiffness, model.damping, model.q_rest
        self._kidx = np.flatnonzero(model.stiffness)
        self._didx = np.flatnonzero(model.damping)
        self._payload = None  # (payload, model copy, data, frame id, joint id) of the last payload
        # nq == nv means every joint is revolute/prismatic-like: q - q_rest is the difference
        self._euclidean = model.nq == model.nv

    @property
    def data(self) -> pin.Data:
        """The pinocchio Data of the last call (kinematics, ``data.f`` ...)."""
        return self._data

    # -- fast argument checks: ndarray/float64/right shape passes with three comparisons --
    def _q(self, q):
        if q.__class__ is _ND and q.dtype is _F8 and q.shape == self._sq:
            return q
        return as_vector(q, self._nq, "q")

    def _v(self, v, name):
        if v.__class__ is _ND and v.dtype is _F8 and v.shape == self._sv:
            return v
        return as_vector(v, self._nv, name)

    def spring_forces(self, q, v) -> np.ndarray:
        """Generalized spring and damper forces tau_s = -K (q - q_rest) - D v, (nv,)."""
        q, v = self._q(q), self._v(v, "v")
        tau = np.zeros(self._nv)
        if self._springs:
            dq = q - self._qr if self._euclidean else pin.difference(self._pm, self._qr, q)
            tau -= self._K * dq + self._D * v
        return tau

    def inverse_dynamics(self, q, v, a) -> np.ndarray:
        """Actuation force tau (nv,) that produces acceleration ``a`` at state (q, v).

        tau = M a + h - tau_s (Recursive Newton-Euler, pinocchio ``rnea``).
        """
        # Fast path: pinocchio checks sizes and types itself; on its terse error (or a
        # non-1-D array, which pinocchio would accept) the arguments are checked here again
        # for a message naming the argument.  A list has no .ndim: AttributeError, same path.
        try:
            if q.ndim != 1 or v.ndim != 1 or a.ndim != 1:  # pinocchio would take (n, 1)
                raise TypeError
            tau = pin.rnea(self._pm, self._data, q, v, a)
        except (TypeError, ValueError, AttributeError):
            q, v, a = self._q(q), self._v(v, "v"), self._v(a, "a")
            tau = pin.rnea(self._pm, self._data, q, v, a)
        if self._springs:
            tau -= self.spring_forces(q, v)
        return tau

    def forward_dynamics(self, q, v, tau) -> np.ndarray:
        """Acceleration a (nv,) under actuation ``tau`` (Articulated-Body Algorithm, ``aba``)."""
        if self._springs:
            q, v = self._q(q), self._v(v, "v")
            tau = self._v(tau, "tau") + self.spring_forces(q, v)
        try:
            if q.ndim != 1 or v.ndim != 1 or tau.ndim != 1:  # pinocchio would take (n, 1)
                raise TypeError
            return pin.aba(self._pm, self._data, q, v, tau)
        except (TypeError, ValueError, AttributeError):
            return pin.aba(self._pm, self._data, self._q(q), self._v(v, "v"), self._v(tau, "tau"))

    def mass_matrix(self, q) -> np.ndarray:
        """Joint-space mass matrix M(q), (nv, nv), symmetric (``crba``)."""
        try:
            if q.ndim != 1:  # pinocchio would take (n, 1)
                raise TypeError
            return pin.crba(self._pm, self._data, q)
        except (TypeError, ValueError, AttributeError):
            return pin.crba(self._pm, self._data, self._q(q))

    def nonlinear_effects(self, q, v) -> np.ndarray:
        """h(q, v) = Coriolis, centrifugal and gravity forces (nv,), without springs."""
        return pin.nonLinearEffects(self._pm, self._data, self._q(q), self._v(v, "v"))

    def gravity_forces(self, q) -> np.ndarray:
        """Generalized gravity load g(q) (nv,): the tau that holds the robot at rest, springs
        excluded."""
        return pin.computeGeneralizedGravity(self._pm, self._data, self._q(q))

    def coriolis_matrix(self, q, v) -> np.ndarray:
        """C(q, v) with C v = Coriolis/centrifugal forces and M' - 2C skew-symmetric, (nv, nv)."""
        return pin.computeCoriolisMatrix(self._pm, self._data, self._q(q), self._v(v, "v")).copy()

    def kinetic_energy(self, q, v) -> float:
        """T = 1/2 v^T M v [J]."""
        return float(pin.computeKineticEnergy(self._pm, self._data, self._q(q), self._v(v, "v")))

    def potential_energy(self, q) -> float:
        """Gravity plus spring potential [J]; gravity potential is zero at the world origin."""
        q = self._q(q)
        pot = float(pin.computePotentialEnergy(self._pm, self._data, q))
        if self._springs:
            dq = pin.difference(self._pm, self._qr, q)
            pot += 0.5 * float(dq @ (self._K * dq))
        return pot

    def energy(self, q, v) -> float:
        """Total mechanical energy T + V [J]."""
        return self.kinetic_energy(q, v) + self.potential_energy(q)

    def reaction_wrenches(self, q, v, a, payload: Payload | None = None):
        """Full reaction wrench of every moving joint (NASA CR-165977 App. B, 'requirements tool').

        Parameters
        ----------
        q, v, a : (nq,), (nv,), (nv,)
        payload : Payload, optional
            Held body and external loads.

        Returns
        -------
        wrenches : ndarray, (njoints, 6)
            Per moving joint, the force [N] and torque [N m] (about the joint origin)
            that the parent body applies on the child through the joint, in the
            joint frame (the child frame at the joint, pinocchio's convention):
            ``[fx, fy, fz, tx, ty, tz]``.  Its projection on the joint axis is the
            load the joint transmits along its motion (actuator plus any parallel
            spring/damper: tau + tau_s); the other components are structural.
        tau : ndarray, (nv,)
            Actuation alone (springs subtracted, as in :meth:`inverse_dynamics`).
        """
        q, v, a = self._q(q), self._v(v, "v"), self._v(a, "a")
        if payload is None:
            pm, data, fext = self._pm, self._data, None
        else:
            if self._payload is None or self._payload[0] is not payload:
                pm, fid, jid = with_payload(self.model, payload)  # once per payload object
                self._payload = (payload, pm, pm.createData(), fid, jid)
            _, pm, data, fid, jid = self._payload
            fext = payload_forces(pm, data, q, payload, fid, jid)
        tau = pin.rnea(pm, data, q, v, a) if fext is None else pin.rnea(pm, data, q, v, a, fext)
        wrenches = np.array([data.f[j].vector for j in range(1, pm.njoints)])
        if self._springs:
            tau = tau - self.spring_forces(q, v)
        return wrenches, tau


def payload_forces(pm: pin.Model, data: pin.Data, q, payload: Payload, fid: int, jid: int):
    """External forces of ``payload`` as pinocchio expects them in ``rnea``: per joint, local
    frame."""
    fext = [pin.Force.Zero() for _ in range(pm.njoints)]
    if payload.has_loads:
        pin.framesForwardKinematics(pm, data, q)
        point_local = np.array(payload.force_point
                               if payload.force_point is not None else payload.com)
        point_world = data.oMf[fid].act(point_local)
        force = np.array(payload.force)
        world = pin.Force(force, np.cross(point_world, force) + np.array(payload.torque))
        fext[jid] = data.oMi[jid].actInv(world)
    return fext
