"""MuJoCo's actuator limits on a model's inputs: ``ctrlrange``, ``forcerange`` and
``actuatorfrcrange``.

An MJCF actuator ``i`` on a hinge or slide ``j`` with gear ``g``, gain ``k`` and bias
``(b1, b2)`` applies (MuJoCo XML reference, *actuator* and *joint*; ``mj_fwdActuation``)::

    c_i = clip(ctrl_i, ctrlrange_i)                   # when ctrllimited
    f_i = clip(k c_i + b1 L_i + b2 L_i', forcerange_i)  # when forcelimited; L_i = g q_j
    F_j = clip(sum_i g f_i, actuatorfrcrange_j)       # the joint's actuator force (limited)

The model keeps the unclipped law linear: ``B`` holds ``g k`` and the joint stiffness and
damping hold ``-g^2 b1``, ``-g^2 b2`` (:mod:`.mjcf`), so its generalized force is ``B u`` plus
those springs.  :meth:`ActuatorLimits.force` returns what replaces ``B u`` so that the sum is
MuJoCo's ``F``: ``F - sum_i g (b1 L_i + b2 L_i')`` on each joint, which is ``B u`` while no
limit is reached.  A limit of a bias-free actuator (a motor) clamps its input; one of a servo
depends on the state, so it is evaluated where the input is (each step of ``simulate``, each
control period of ``run``, each step of the simulator node).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class ActuatorLimits:
    """The limits of a model's inputs, one actuator per input (input ``i`` is actuator ``i``).

    Attributes
    ----------
    names : tuple of str, length nu
        The actuators (the model's input names).
    iq, iv : ndarray of int, (nu,)
        Position and velocity index of each actuator's joint (a hinge or slide).
    gear, gain, bias1, bias2 : ndarray, (nu,)
        MuJoCo's ``gear`` and force law ``gain * ctrl + bias1 * L + bias2 * L'`` [N m | N per
        unit ctrl, per rad | m, per rad/s | m/s].
    ctrl_lower, ctrl_upper : ndarray, (nu,)
        ``ctrlrange`` [unit of ctrl]; -inf / inf where the control is not limited.
    force_lower, force_upper : ndarray, (nu,)
        ``forcerange`` [N m | N, before the gear]; -inf / inf where not limited.
    joint_lower, joint_upper : ndarray, (nv,)
        ``actuatorfrcrange`` of each velocity coordinate [N m | N]; -inf / inf where none.
    """

    names: tuple[str, ...]
    iq: np.ndarray
    iv: np.ndarray
    gear: np.ndarray
    gain: np.ndarray
    bias1: np.ndarray
    bias2: np.ndarray
    ctrl_lower: np.ndarray
    ctrl_upper: np.ndarray
    force_lower: np.ndarray
    force_upper: np.ndarray
    joint_lower: np.ndarray
    joint_upper: np.ndarray

    @property
    def limited(self) -> bool:
        """True when some limit is finite (else :meth:`force` is ``B u``)."""
        return bool(any(np.any(np.isfinite(b)) for b in (
            self.ctrl_lower, self.ctrl_upper, self.force_lower, self.force_upper,
            self.joint_lower, self.joint_upper)))

    def clamp(self, u) -> np.ndarray:
        """The inputs (nu,) clipped to ``ctrlrange`` (what MuJoCo applies as ``ctrl``)."""
        return np.clip(np.asarray(u, float), self.ctrl_lower, self.ctrl_upper)

    def force(self, q, v, u) -> np.ndarray:
        """Generalized actuator force (nv,) [N m | N] that replaces ``B u`` at ``(q, v)``.

        Parameters
        ----------
        q : (nq,) configuration; v : (nv,) velocity; u : (nu,) inputs (MuJoCo's ctrl).

        Returns
        -------
        ndarray, (nv,)
            MuJoCo's clipped actuator force ``F`` (module docstring) less the servo bias
            ``sum_i g (b1 L_i + b2 L_i')`` that the model's joint springs already apply.
        """
        q, v = np.asarray(q, float), np.asarray(v, float)
        c = self.clamp(u)
        length, rate = self.gear * q[self.iq], self.gear * v[self.iv]
        bias = self.bias1 * length + self.bias2 * rate
        f = np.clip(self.gain * c + bias, self.force_lower, self.force_upper)
        total = np.zeros(self.joint_lower.size)
        np.add.at(total, self.iv, self.gear * f)
        in_springs = np.zeros_like(total)
        np.add.at(in_springs, self.iv, self.gear * bias)
        return np.clip(total, self.joint_lower, self.joint_upper) - in_springs

    def select(self, keep) -> ActuatorLimits:
        """The limits of the actuators ``keep`` (indices, in the new input order)."""
        keep = np.asarray(keep, int)
        return ActuatorLimits(tuple(self.names[k] for k in keep), self.iq[keep], self.iv[keep],
                              self.gear[keep], self.gain[keep], self.bias1[keep],
                              self.bias2[keep], self.ctrl_lower[keep], self.ctrl_upper[keep],
                              self.force_lower[keep], self.force_upper[keep], self.joint_lower,
                              self.joint_upper)


def actuation_force(model, q, v, u) -> np.ndarray:
    """Generalized force (nv,) [N m | N] of the inputs ``u`` (nu,) at ``(q, v)``: ``B u``, or
    with MuJoCo actuator limits (``model.actuator_limits``) the clipped force of
    :meth:`ActuatorLimits.force`."""
    limits = getattr(model, "actuator_limits", None)
    if limits is None:
        return np.asarray(model.B, float) @ np.asarray(u, float)
    return limits.force(q, v, u)


def clamp_inputs(model, u) -> np.ndarray:
    """The inputs ``u`` (nu,) as the model applies them: clipped to MuJoCo's ``ctrlrange``
    when the model has actuator limits, else unchanged."""
    limits = getattr(model, "actuator_limits", None)
    return np.asarray(u, float) if limits is None else limits.clamp(u)
