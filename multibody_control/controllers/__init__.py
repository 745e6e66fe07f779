"""Tracking controllers: one module per control law, one ``step(t, q, v, reference) -> u``
interface."""

import numpy as np

from multibody_dynamics.errors import InputError

from .base import Controller, ControllerConfig, gain_vector, inputs_from_generalized
from .computed_torque import ComputedTorqueConfig, ComputedTorqueController
from .feedback_linearization import FeedbackLinearizationConfig, FeedbackLinearizationController
from .lqr import LQRConfig, TimeVariantLQRController
from .pd import PDConfig, PDController
from .projected_inverse_dynamics import (
    ProjectedInverseDynamicsConfig,
    ProjectedInverseDynamicsController,
)
from .quasi_velocity import QuasiVelocityConfig, QuasiVelocityController
from .reference import Reference, TrajectoryInterpolator
from .rmrc import RMRCConfig, RMRCController, TwistReference

LAWS = ("pd", "pid", "computed_torque", "projected_inverse_dynamics", "tv_lqr", "rmrc",
        "quasi_velocity", "feedback_linearization")


def make_controller(law: str, model, kp, kd, ki=0.0, integral_limit=float("inf"),
                    effort_limit=float("inf"), **options) -> Controller:
    """Build the controller named ``law`` (one of :data:`LAWS`) with the given gains.

    ``pd`` ignores ``ki``; ``computed_torque`` ignores ``ki`` and ``integral_limit``
    (its ``kp``, ``kd`` are error-dynamics gains [1/s^2], [1/s]).

    The other laws take their remaining settings as keyword ``options``:

    * ``projected_inverse_dynamics``: ``kp``, ``kd`` are error-dynamics gains of the
      independent coordinates; options are the other fields of
      :class:`ProjectedInverseDynamicsConfig` (``independent``, ``force_control``, ...) and
      ``constraints``;
    * ``tv_lqr``: ``kp``, ``kd`` are the diagonal state weights Q of the position and
      velocity errors; options ``trajectory`` (an InversionResult, or a mapping with ``t``,
      ``q``, ``v``, ``u``; required) and the other :class:`LQRConfig` fields (``dt``, ``R``, ...);
    * ``rmrc``: ``kp``, ``kd`` are the inner-loop gains; options are the other
      :class:`RMRCConfig` fields (``redundant_joint``, ``inner``, ...);
    * ``quasi_velocity``: ``kp`` [1/s] acts on the minimal-coordinate error, ``kd`` [1/s] on
      the quasi-velocity error eps (Aghili 2010 eqs. 37-39); options are the other fields of
      :class:`QuasiVelocityConfig` (``independent``, ``force_control``, ...) and
      ``constraints``;
    * ``feedback_linearization``: ``kp`` [1/s^2], ``kd`` [1/s] are output error-dynamics gains;
      option ``output`` (the output rows, one per input; required).
    """
    if law == "pd":
        return PDController(model, PDConfig(kp, kd, 0.0, integral_limit, effort_limit))
    if law == "pid":
        return PDController(model, PDConfig(kp, kd, ki, integral_limit, effort_limit))
    if law == "computed_torque":
        return ComputedTorqueController(model,
                                        ComputedTorqueConfig(kp, kd, effort_limit=effort_limit))
    if law == "projected_inverse_dynamics":
        constraints = options.pop("constraints", None)
        return ProjectedInverseDynamicsController(model, ProjectedInverseDynamicsConfig(
            kp=kp, kd=kd, effort_limit=effort_limit, **options), constraints)
    if law == "tv_lqr":
        traj = options.pop("trajectory", None)
        if traj is None:
            raise InputError("tv_lqr: needs trajectory= (the nominal motion t, q, v, u)")
        nv = model.nv
        Q = np.concatenate([gain_vector(kp, nv, "kp", positive=False, per="coordinate"),
                            gain_vector(kd, nv, "kd", positive=False, per="coordinate")])
        cfg = LQRConfig(Q=tuple(Q), effort_limit=effort_limit, **options)
        get = traj.get if isinstance(traj, dict) else (lambda k: getattr(traj, k))
        return TimeVariantLQRController(model, cfg, t=get("t"), q=get("q"), v=get("v"),
                                        u=get("u"))
    if law == "rmrc":
        return RMRCController(model, RMRCConfig(kp=kp, kd=kd, effort_limit=effort_limit,
                                                **options))
    if law == "quasi_velocity":
        constraints = options.pop("constraints", None)
        return QuasiVelocityController(model, QuasiVelocityConfig(
            kp=kp, kd=kd, effort_limit=effort_limit, **options), constraints)
    if law == "feedback_linearization":
        return FeedbackLinearizationController(model, FeedbackLinearizationConfig(
            kp=kp, kd=kd, effort_limit=effort_limit, **options))
    if options:
        raise InputError(f"{law}: unexpected options {', '.join(sorted(options))}")
    raise ValueError(f"law: expected one of {', '.join(LAWS)}, got {law!r}")


__all__ = [
    "LAWS", "ComputedTorqueConfig", "ComputedTorqueController", "Controller", "ControllerConfig",
    "FeedbackLinearizationConfig", "FeedbackLinearizationController",
    "LQRConfig", "PDConfig", "PDController", "ProjectedInverseDynamicsConfig",
    "ProjectedInverseDynamicsController", "QuasiVelocityConfig", "QuasiVelocityController",
    "RMRCConfig", "RMRCController", "Reference",
    "TimeVariantLQRController", "TrajectoryInterpolator", "TwistReference", "gain_vector",
    "inputs_from_generalized", "make_controller",
]
