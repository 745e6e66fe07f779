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
control period of ``run``, each step of the simulator node).  :func:`limit_excess` says where
a planned input (a feedforward) asks for more than a limit allows.
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


@dataclass(frozen=True)
class LimitExcess:
    """Where a planned input asks beyond one limit (:func:`limit_excess`).

    Attributes
    ----------
    limit : str
        ``"ctrlrange"``, ``"forcerange"`` (of an actuator) or ``"actuatorfrcrange"`` (of a
        joint).
    name : str
        The actuator (ctrlrange, forcerange) or the joint (actuatorfrcrange).
    lower, upper : float
        The range [unit of ctrl | N m | N].
    value : float
        What is asked at ``t_worst``: the input, the actuator's force, the joint's summed
        actuator force.
    excess : float
        How far ``value`` is beyond the range (> 0), same unit.
    t_worst, t_first, t_last : float
        Time [s] of the largest excess, of the first and the last sample beyond the range.
    """

    limit: str
    name: str
    lower: float
    upper: float
    value: float
    excess: float
    t_worst: float
    t_first: float
    t_last: float

    def describe(self) -> str:
        """One line: ``m1: input 1.2 beyond ctrlrange [-1, 0.5] by 0.7 at t = 0.3 s (...)``."""
        what = {"ctrlrange": "input", "forcerange": "force"}.get(self.limit, "actuator force")
        span = (f"at t = {self.t_worst:.4g} s" if self.t_first == self.t_last else
                f"at t = {self.t_worst:.4g} s (beyond from {self.t_first:.4g} to "
                f"{self.t_last:.4g} s)")
        return (f"{self.name}: {what} {self.value:.4g} beyond {self.limit} [{self.lower:g}, "
                f"{self.upper:g}] by {self.excess:.3g} {span}")


def limit_excess(limits: ActuatorLimits, t, q, v, u,
                 joint_names=None) -> tuple[LimitExcess, ...]:
    """Where the planned inputs ``u`` at the states ``(q, v)`` ask beyond a limit.

    The stages of :meth:`ActuatorLimits.force` in MuJoCo's order, each on what the stage
    before passes on: the control ``u_i`` against ``ctrlrange``, the actuator force ``gain c_i +
    bias1 L_i + bias2 L_i'`` of the clamped control ``c_i`` against ``forcerange``, the joint's
    ``sum_i gear f_i`` of the clamped forces against ``actuatorfrcrange`` (module docstring).
    So each entry is a limit that acts, by how much it cuts.  A servo's force depends on the
    state: it is taken at the given ``(q, v)``, e.g. the motion an inversion planned.

    Parameters
    ----------
    limits : ActuatorLimits
    t : (N,) [s]; q : (N, nq); v : (N, nv); u : (N, nu)
    joint_names : sequence of str, length nv, optional
        Names of the velocity coordinates (default ``v0``, ``v1``, ...).

    Returns
    -------
    tuple of LimitExcess
        One per limit exceeded at some sample (ctrlrange, forcerange, then actuatorfrcrange;
        in actuator or joint order); empty when every sample is within every range.
    """
    t = np.asarray(t, float)
    q, v, u = (np.atleast_2d(np.asarray(a, float)) for a in (q, v, u))
    nv = limits.joint_lower.size
    names = tuple(joint_names) if joint_names is not None else tuple(f"v{k}" for k in range(nv))
    length, rate = limits.gear * q[:, limits.iq], limits.gear * v[:, limits.iv]
    force = limits.gain * limits.clamp(u) + limits.bias1 * length + limits.bias2 * rate
    clipped = np.clip(force, limits.force_lower, limits.force_upper)
    total = np.zeros((t.size, nv))
    for k, iv in enumerate(limits.iv):
        total[:, iv] += limits.gear[k] * clipped[:, k]
    stages = (("ctrlrange", limits.names, u, limits.ctrl_lower, limits.ctrl_upper),
              ("forcerange", limits.names, force, limits.force_lower, limits.force_upper),
              ("actuatorfrcrange", names, total, limits.joint_lower, limits.joint_upper))
    out = []
    for kind, labels, value, lower, upper in stages:
        beyond = np.maximum(lower - value, value - upper)  # (N, n) > 0 outside the range
        for k in map(int, np.flatnonzero(np.any(beyond > 0, axis=0))):
            hit = np.flatnonzero(beyond[:, k] > 0)
            w = int(np.argmax(beyond[:, k]))
            out.append(LimitExcess(kind, labels[k], float(lower[k]), float(upper[k]),
                                   float(value[w, k]), float(beyond[w, k]), float(t[w]),
                                   float(t[hit[0]]), float(t[hit[-1]])))
    return tuple(out)


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
