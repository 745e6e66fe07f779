"""Input-output feedback linearization of an underactuated system (Seifried (2014) 3.1.3-3.1.4,
4.2.6) as a tracking law.

With the output y = h(q) (as many rows as inputs, vector relative degree {2, ..., 2}) and the
equations of motion M a + h_nl = B u + tau_s (our signs)::

    y'' = H a + h_bar = alpha u + H M^-1 (tau_s - h_nl) + h_bar,   alpha = H M^-1 B   (4.28-4.29)

and the input::

    u = alpha^-1 (w - H M^-1 (tau_s - h_nl) - h_bar),
    w = y_d'' + K_d (y_d' - y') + K_p (y_d - y)

leaves the output error e = y_d - y with e'' + K_d e' + K_p e = 0 (the new input w of the
Byrnes-Isidori normal form, Sect. 3.1.3).  The remaining internal dynamics are not controlled:
they stay bounded near an equilibrium only for a minimum-phase system (Sect. 3.1.4; e.g. the
optimized designs of Sect. 7.4.3, for which the book used this law).

The desired output comes from the joint-space reference: y_d = h(q_d), y_d' = H(q_d) v_d,
y_d'' = H(q_d) a_d + h_bar(q_d, v_d); the reference need not be consistent with the
dynamics in its passive coordinates (only its output is tracked).

Closed loops.  With loop closures ``A a + gamma = 0`` the accelerations are those of the
constrained direct dynamics, Aghili (2005) eqs. 22, 24 and 16::

    M_c a = P f + M C v,   M_c = M + P M - (P M)^T,   C v = -A^+ gamma,   f = B u + tau_s - h_nl

(``P = I - A^+ A``, :func:`multibody_dynamics.projection.projected_acceleration`), affine in
u: ``a = a_0 + G u`` with ``a_0 = M_c^-1 (P (tau_s - h_nl) + M C v)`` and ``G = M_c^-1 P B``
(one LU of M_c, 1 + nu right-hand sides).  The decoupling matrix is then ``alpha = H G`` and
``u = alpha^-1 (w - H a_0 - h_bar)``, which gives ``y'' = w`` on the constrained motion.  Where
a closed loop has fewer inputs than degrees of freedom beyond the constraints (dual_arm_load:
2 motors, 6 degrees of freedom), this is the law that still uses the model: projected inverse
dynamics must then assign every independent acceleration, which Aghili (2005) eq. 64 refuses;
here only the outputs are assigned and the rest (the internal dynamics) moves freely.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import InputError, SolverError
from multibody_dynamics.projection import null_space_projector
from multibody_dynamics.rigid import RigidDynamics

from ..outputs import Output
from .base import Controller, ControllerConfig, check_gain_config, gain_vector
from .reference import Reference


@dataclass(frozen=True)
class FeedbackLinearizationConfig(ControllerConfig):
    """Settings of :class:`FeedbackLinearizationController`.

    Parameters
    ----------
    output : sequence of str
        Output rows (:class:`~multibody_control.outputs.Output` expressions: ``"x"``,
        ``"alpha2 + 0.667*beta1"``, ``"tip.x"``), one per input.
    kp : float or sequence
        Output error-dynamics gain [1/s^2] (> 0), one per row or a scalar.
    kd : float or sequence
        [1/s] (> 0); kd = 2 sqrt(kp) is critical damping.
    effort_limit : float or sequence
        Output saturation |u| [N m | N] (> 0; inf: none).
    singular_cond : float
        Condition number of alpha beyond which the step raises (relative degree lost).
    """

    output: tuple[str, ...] = ()
    kp: float | tuple = 100.0
    kd: float | tuple = 20.0
    effort_limit: float | tuple = float("inf")
    singular_cond: float = 1e10

    def __post_init__(self):
        if isinstance(self.output, str) or not self.output:
            raise InputError("output: expected a sequence of output rows (one per input), e.g. "
                             "('x', 'tip.x', 'tip.y')")
        object.__setattr__(self, "output", tuple(str(r) for r in self.output))
        for name in ("kp", "kd", "effort_limit"):
            object.__setattr__(self, name, check_gain_config(getattr(self, name), name))
        if not self.singular_cond > 1:
            raise InputError(f"singular_cond: expected a number > 1, got {self.singular_cond!r}")


class FeedbackLinearizationController(Controller):
    """Input-output linearization of ``config.output`` with PD error dynamics; on a model with
    loop closures, through the constrained direct dynamics (module docstring)."""

    config_type = FeedbackLinearizationConfig

    def __init__(self, model, config: FeedbackLinearizationConfig):
        super().__init__(model, config)
        self.output = Output(model, config.output)
        if self.output.m != model.nu:
            raise InputError(f"feedback linearization: {self.output.m} output rows for "
                             f"{model.nu} inputs ({', '.join(model.input_names)}); expected one "
                             "row per input")
        m = self.output.m
        self.kp = gain_vector(config.kp, m, "kp", unit="1/s^2", per="output row")
        self.kd = gain_vector(config.kd, m, "kd", unit="1/s", per="output row")
        self.effort_limit = gain_vector(config.effort_limit, model.nu, "effort_limit")
        self.dynamics = RigidDynamics(model)
        self.constraints = Constraints(model) if model.closures else None

    def desired_output(self, reference: Reference):
        """(y_d, y_d', y_d'') (m,) each, from the joint-space reference."""
        out = self.output
        q, v, a = reference.q, reference.v, reference.a
        H = out.jacobian(q)
        return out.value(q), H @ v, H @ a + out.bias(q, v)

    def step(self, t, q, v, reference: Reference) -> np.ndarray:
        q, v = self._state(q, v)
        yd, yd_dot, yd_ddot = self.desired_output(reference)
        out = self.output
        y, H, hbar = out.value(q), out.jacobian(q), out.bias(q, v)
        dyn = self.dynamics
        M = dyn.mass_matrix(q)
        f = dyn.spring_forces(q, v) - dyn.nonlinear_effects(q, v)
        if self.constraints is not None:
            a0, G = self._constrained(q, v, M, f)
        else:
            try:
                factor = sla.cho_factor(M)
            except np.linalg.LinAlgError:
                raise SolverError(f"mass matrix not positive definite at q = "
                                  f"{np.round(q, 6).tolist()}") from None
            a0, G = sla.cho_solve(factor, f), sla.cho_solve(factor, self._B)
        alpha = H @ G
        if np.linalg.cond(alpha) > self.config.singular_cond:
            raise SolverError(f"decoupling matrix H M^-1 B singular at q = "
                              f"{np.round(q, 6).tolist()}: the output {out.names} has no "
                              "relative degree 2 here")
        w = yd_ddot + self.kd * (yd_dot - H @ v) + self.kp * (yd - y)
        u = np.linalg.solve(alpha, w - H @ a0 - hbar)
        return np.clip(u, -self.effort_limit, self.effort_limit)

    def _constrained(self, q, v, M, f):
        """``(a_0 (nv,), G (nv, nu))`` of the constrained accelerations ``a = a_0 + G u``
        (Aghili 2005 eqs. 16, 22, 24; module docstring)."""
        A, gamma = self.constraints.jacobian_and_bias(q, v)
        proj = null_space_projector(A)
        P = proj.P
        PM = P @ M
        rhs = np.column_stack([P @ f - M @ (proj.A_pinv @ gamma), P @ self._B])
        try:
            X = sla.solve(M + PM - PM.T, rhs)
        except (np.linalg.LinAlgError, sla.LinAlgWarning):
            raise SolverError(f"constrained mass matrix singular at q = "
                              f"{np.round(q, 6).tolist()}") from None
        return X[:, 0], X[:, 1:]
