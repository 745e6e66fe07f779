"""Joint angles <-> pinocchio configuration for models of 1-DoF joints (no ROS).

Pinocchio stores a continuous joint (``JointModelRUBX`` ...) as the unit pair
``(cos theta, sin theta)``: nq = 2, nv = 1.  Users, CSV files and ``JointState``
messages give one value per velocity coordinate instead (``model.coordinate_names``:
the angle theta [rad] of a continuous joint, the angle or travel [rad | m] of a revolute
or prismatic joint).  :class:`JointAngles` maps between the two;
:func:`configuration_from_values` reads a command-line vector given either way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pinocchio as pin

from ..errors import InputError, ModelError

UNIT_TOL = 1e-6
"""Largest accepted | cos^2 + sin^2 - 1 | of a continuous joint's pair given directly."""


class JointAngles:
    """Index maps of a rigid model whose joints all have one velocity coordinate.

    Parameters
    ----------
    model : MultibodyModel
        Uses ``pin_model``, ``nq``, ``nv``, ``name``.

    Raises
    ------
    ModelError
        If a joint has more than one velocity coordinate (free flyer, spherical, planar):
        its configuration cannot be given by one value per coordinate.
    """

    def __init__(self, model):
        pm = model.pin_model
        self.nq: int = model.nq
        self.nv: int = model.nv
        self.iq = np.empty(model.nv, dtype=int)
        continuous = []
        for jid in range(1, pm.njoints):
            j = pm.joints[jid]
            if j.nv != 1 or j.nq not in (1, 2):
                raise ModelError(f"{model.name}: joint {pm.names[jid]!r} has {j.nv} velocity "
                                 "coordinates; only 1-DoF joints can be given by angle")
            self.iq[j.idx_v] = j.idx_q
            if j.nq == 2:
                continuous.append(j.idx_v)
        self.continuous = np.array(continuous, dtype=int)

    @property
    def simple(self) -> bool:
        """True when q and the angles coincide (no continuous joint)."""
        return self.continuous.size == 0

    def angles(self, q) -> np.ndarray:
        """Joint values (..., nv) [rad | m] of configurations ``q`` (..., nq)."""
        q = np.asarray(q, float)
        if self.simple:
            return q.copy()
        out = q[..., self.iq].copy()
        iq = self.iq[self.continuous]
        out[..., self.continuous] = np.arctan2(q[..., iq + 1], q[..., iq])
        return out

    def configuration(self, angles) -> np.ndarray:
        """Configurations ``q`` (..., nq) of joint values ``angles`` (..., nv) [rad | m]."""
        x = np.asarray(angles, float)
        if self.simple:
            return x.copy()
        q = np.empty(x.shape[:-1] + (self.nq,))
        q[..., self.iq] = x
        iq = self.iq[self.continuous]
        th = x[..., self.continuous]
        q[..., iq], q[..., iq + 1] = np.cos(th), np.sin(th)
        return q


def configuration_from_values(model, values: Sequence[float], flag: str) -> np.ndarray:
    """A start configuration ``q`` (nq,) from a command-line vector.

    ``values`` holds either one value per velocity coordinate (``model.coordinate_names``,
    continuous joints as angles [rad], converted to (cos, sin)) or, for a model with
    continuous joints, the nq configuration entries themselves (each (cos, sin) pair must
    then be a unit vector within :data:`UNIT_TOL`).

    Parameters
    ----------
    model : MultibodyModel
    values : sequence of float
        nv joint values [rad | m] or nq configuration entries.
    flag : str
        Name of the option in the error messages (``"--q0"``).

    Returns
    -------
    q : (nq,) ndarray

    Raises
    ------
    InputError
        Wrong count (naming the expected coordinates), a non-finite value, or a (cos, sin)
        pair off the unit circle.
    """
    x = np.asarray(values, float)
    names = ", ".join(model.coordinate_names)
    if x.ndim != 1 or x.size not in (model.nv, model.nq):
        raise InputError(f"{flag}: expected {model.nv} values ({names}; continuous joints "
                         f"as angles in rad), got {x.size}")
    if not np.all(np.isfinite(x)):
        raise InputError(f"{flag}: values must be finite, got {x.tolist()}")
    if model.nq == model.nv:
        return x.copy()
    try:
        maps = JointAngles(model)
    except ModelError:  # multi-DoF joints: only the configuration itself is meaningful
        if x.size != model.nq:
            raise InputError(f"{flag}: {model.name} has joints with several degrees of "
                             f"freedom: expected its {model.nq} configuration entries, got "
                             f"{x.size}") from None
        return x.copy()
    if x.size == model.nv:
        return maps.configuration(x)
    for iv in maps.continuous:
        iq = maps.iq[iv]
        norm = np.hypot(x[iq], x[iq + 1])
        if abs(norm ** 2 - 1.0) > UNIT_TOL:
            raise InputError(f"{flag}: entries {iq}, {iq + 1} are the (cos, sin) of the "
                             f"continuous joint {model.coordinate_names[iv]} and must be a "
                             f"unit pair (norm {norm:.6g}); give its angle instead "
                             f"({model.nv} values: {names})")
    return x.copy()


#: Continuous (unbounded revolute) joints and the revolute joint with the same motion.
_BOUNDED = {"JointModelRUBX": pin.JointModelRX, "JointModelRUBY": pin.JointModelRY,
            "JointModelRUBZ": pin.JointModelRZ}


def angle_chart_model(model):
    """The same rigid model with every continuous joint as a revolute joint: nq == nv.

    A continuous joint (pinocchio's ``JointModelRUB*``, configuration ``(cos, sin)``) and the
    revolute joint about the same axis have the same velocity coordinate, motion subspace and
    kinematics at the same angle, so the mass matrix, the bias forces, the Jacobians, ``B``
    and the springs are equal, value for value: only the configuration chart differs (the
    angle instead of the unit pair).  Code that needs ``q`` to be coordinates (outputs with
    joint rows, servo-constraints, the analysis) runs on this model; :class:`JointAngles` of
    the original model maps configurations between the two.

    Parameters
    ----------
    model : MultibodyModel
        Joints with one velocity coordinate each.

    Returns
    -------
    MultibodyModel
        ``model`` itself when it has no continuous joint; otherwise a copy with the twin
        pinocchio model (same joint and frame names and order) and ``q_rest``, ``q_initial``
        (nv,) as angles [rad | m].

    Raises
    ------
    ModelError
        A joint with several velocity coordinates (free flyer, spherical, planar), or a
        continuous joint about an axis other than x, y or z of its frame.
    """
    from dataclasses import replace

    maps = JointAngles(model)  # ModelError for multi-DoF joints
    if maps.simple:
        return model
    pm = model.pin_model
    twin = pin.Model()
    twin.name = pm.name
    for jid in range(1, pm.njoints):
        j = pm.joints[jid]
        if j.nq == 2:
            if j.shortname() not in _BOUNDED:
                raise ModelError(f"{model.name}: continuous joint {pm.names[jid]!r} "
                                 f"({j.shortname()}): only axes x, y, z of the joint frame can "
                                 "be taken by angle")
            jm = _BOUNDED[j.shortname()]()
        else:
            jm = j
        new = twin.addJoint(pm.parents[jid], jm, pm.jointPlacements[jid], pm.names[jid])
        twin.inertias[new] = pm.inertias[jid]
    for f in list(pm.frames)[1:]:  # frame 0 is the universe, which pin.Model() has
        twin.addFrame(pin.Frame(f.name, f.parentJoint, f.parentFrame, f.placement, f.type,
                                f.inertia), False)
    twin.gravity = pm.gravity
    twin.armature = pm.armature.copy()
    lo = maps.angles(pm.lowerPositionLimit)
    hi = maps.angles(pm.upperPositionLimit)
    lo[maps.continuous], hi[maps.continuous] = -np.inf, np.inf
    twin.lowerPositionLimit, twin.upperPositionLimit = lo, hi
    twin.velocityLimit, twin.effortLimit = pm.velocityLimit.copy(), pm.effortLimit.copy()
    q_rest, q_initial = maps.angles(model.q_rest), maps.angles(model.q_initial)
    for arr in (q_rest, q_initial):
        arr.setflags(write=False)
    names = ", ".join(model.coordinate_names[k] for k in maps.continuous)
    return replace(model, pin_model=twin, q_rest=q_rest, q_initial=q_initial,
                   notes=model.notes + (f"continuous joint(s) taken by angle: {names}",))
