"""Tracking controllers: one module per control law, one ``step(t, q, v, reference) -> u`` interface."""

from .base import Controller, ControllerConfig, gain_vector, inputs_from_generalized
from .computed_torque import ComputedTorqueConfig, ComputedTorqueController
from .pd import PDConfig, PDController
from .reference import Reference, TrajectoryInterpolator

LAWS = ("pd", "pid", "computed_torque")


def make_controller(law: str, model, kp, kd, ki=0.0, integral_limit=float("inf"),
                    effort_limit=float("inf")) -> Controller:
    """Build the controller named ``law`` (one of :data:`LAWS`) with the given gains.

    ``pd`` ignores ``ki``; ``computed_torque`` ignores ``ki`` and ``integral_limit``
    (its ``kp``, ``kd`` are error-dynamics gains [1/s^2], [1/s]).
    """
    if law == "pd":
        return PDController(model, PDConfig(kp, kd, 0.0, integral_limit, effort_limit))
    if law == "pid":
        return PDController(model, PDConfig(kp, kd, ki, integral_limit, effort_limit))
    if law == "computed_torque":
        return ComputedTorqueController(model, ComputedTorqueConfig(kp, kd, effort_limit=effort_limit))
    raise ValueError(f"law: expected one of {', '.join(LAWS)}, got {law!r}")


__all__ = [
    "LAWS", "ComputedTorqueConfig", "ComputedTorqueController", "Controller", "ControllerConfig",
    "PDConfig", "PDController", "Reference", "TrajectoryInterpolator", "gain_vector",
    "inputs_from_generalized", "make_controller",
]
