"""Computed-torque control (inverse dynamics + PD) of fully actuated open chains.

tau = M(q) (a_d + Kd (v_d - v) + Kp (q_d - q)) + h(q, v) - tau_s(q, v),  u = B^-1 tau,

so that with an exact model the error e = q_d - q obeys e'' + Kd e' + Kp e = 0
(Siciliano et al. (2009) eq. 8.57).  The model terms come from
:meth:`RigidDynamics.inverse_dynamics` (pinocchio ``rnea``, springs included).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from multibody_dynamics.rigid import RigidDynamics

from .base import (
    Controller,
    ControllerConfig,
    check_gain_config,
    gain_vector,
    require_fully_actuated,
)
from .reference import Reference


@dataclass(frozen=True)
class ComputedTorqueConfig(ControllerConfig):
    """Gains of :class:`ComputedTorqueController` (scalars or one value per coordinate).

    Parameters
    ----------
    kp : float or sequence
        Position gain of the error dynamics [1/s^2] (> 0); natural frequency sqrt(kp).
    kd : float or sequence
        Velocity gain [1/s] (> 0); kd = 2 sqrt(kp) is critical damping.
    add_feedforward : bool
        Add the reference's ``u_ff`` to the model-based input (off by default: the
        inverse dynamics already is the feedforward).
    effort_limit : float or sequence
        Output saturation |u| [N m | N] (> 0; inf: none).
    """

    kp: float | tuple = 100.0
    kd: float | tuple = 20.0
    add_feedforward: bool = False
    effort_limit: float | tuple = float("inf")

    def __post_init__(self):
        for name in ("kp", "kd", "effort_limit"):
            object.__setattr__(self, name, check_gain_config(getattr(self, name), name))


class ComputedTorqueController(Controller):
    """Inverse dynamics with PD error dynamics; needs a fully actuated model."""

    config_type = ComputedTorqueConfig

    def __init__(self, model, config: ComputedTorqueConfig | None = None):
        super().__init__(model, config or ComputedTorqueConfig())
        self._Binv = require_fully_actuated(model, "computed torque")
        c = self.config
        self.kp = gain_vector(c.kp, model.nv, "kp", unit="1/s^2", per="coordinate")
        self.kd = gain_vector(c.kd, model.nv, "kd", unit="1/s", per="coordinate")
        self.effort_limit = gain_vector(c.effort_limit, model.nu, "effort_limit")
        self.dynamics = RigidDynamics(model)

    def step(self, t, q, v, reference: Reference) -> np.ndarray:
        q, v = self._state(q, v)
        e = pin.difference(self.model.pin_model, q, reference.q)
        a_cmd = reference.a + self.kd * (reference.v - v) + self.kp * e
        u = self._Binv @ self.dynamics.inverse_dynamics(q, v, a_cmd)
        if self.config.add_feedforward and reference.u_ff is not None:
            u = u + reference.u_ff
        return np.clip(u, -self.effort_limit, self.effort_limit)
