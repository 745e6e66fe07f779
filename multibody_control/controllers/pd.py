"""PD/PID feedback around a feedforward, with anti-windup.

u = u_ff + Kp e + Kd e' + Ki integral(e),  e = B^T (q_d - q) (manifold difference),
e' = B^T (v_d - v); the error is taken on the actuated directions (collocated
feedback: for the usual selection matrix B these are the actuated joints'
errors).  This is what joint_trajectory_controller does with the effort
interface (PID on each joint plus ``effort`` as feedforward).

Anti-windup: conditional integration (the integrator does not move further into
a saturated output, Astrom & Hagglund (2006) Sect. 3.5) plus a clamp
``|Ki integral| <= integral_limit``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .base import Controller, ControllerConfig, check_gain_config, gain_vector
from .reference import Reference


@dataclass(frozen=True)
class PDConfig(ControllerConfig):
    """Gains of :class:`PDController` (scalars or one value per input).

    Parameters
    ----------
    kp : position gain [N m/rad | N/m] (> 0)
    kd : velocity gain [N m s/rad | N s/m] (> 0)
    ki : integral gain [N m/(rad s) | N/(m s)] (>= 0; 0: PD)
    integral_limit : bound of the integral action |Ki integral| [N m | N] (> 0)
    effort_limit : output saturation |u| [N m | N] (> 0; inf: none)
    """

    kp: float | tuple = 100.0
    kd: float | tuple = 20.0
    ki: float | tuple = 0.0
    integral_limit: float | tuple = float("inf")
    effort_limit: float | tuple = float("inf")

    def __post_init__(self):
        for name, positive in (("kp", True), ("kd", True), ("ki", False),
                               ("integral_limit", True), ("effort_limit", True)):
            object.__setattr__(self, name, check_gain_config(getattr(self, name), name,
                                                             positive=positive))


class PDController(Controller):
    """PD (``ki = 0``) or PID with anti-windup, plus the reference feedforward ``u_ff``."""

    config_type = PDConfig

    def __init__(self, model, config: PDConfig | None = None):
        super().__init__(model, config or PDConfig())
        nu, c = model.nu, self.config
        self.kp = gain_vector(c.kp, nu, "kp")
        self.kd = gain_vector(c.kd, nu, "kd")
        self.ki = gain_vector(c.ki, nu, "ki", positive=False)
        self.integral_limit = gain_vector(c.integral_limit, nu, "integral_limit")
        self.effort_limit = gain_vector(c.effort_limit, nu, "effort_limit")
        self._Bt = self._B.T.copy()
        self.reset()

    def reset(self):
        self.integral = np.zeros(self.model.nu)
        self._t_prev: float | None = None

    def step(self, t, q, v, reference: Reference) -> np.ndarray:
        q, v = self._state(q, v)
        e = self._Bt @ pin.difference(self.model.pin_model, q, reference.q)
        de = self._Bt @ (reference.v - v)
        u_ff = 0.0 if reference.u_ff is None else reference.u_ff
        dt = 0.0 if self._t_prev is None else max(float(t) - self._t_prev, 0.0)
        self._t_prev = float(t)
        u_pd = u_ff + self.kp * e + self.kd * de
        if np.any(self.ki > 0) and dt > 0:
            trial = self.integral + e * dt
            u_trial = u_pd + self.ki * trial
            # conditional integration: freeze components pushing further into saturation
            push = (np.abs(u_trial) > self.effort_limit) & (np.sign(u_trial) == np.sign(e))
            self.integral = np.where(push, self.integral, trial)
            with np.errstate(divide="ignore", invalid="ignore"):
                bound = np.where(self.ki > 0, self.integral_limit / self.ki, 0.0)
            self.integral = np.clip(self.integral, -bound, bound)
        u = u_pd + self.ki * self.integral
        return np.clip(u, -self.effort_limit, self.effort_limit)
