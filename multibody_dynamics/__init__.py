"""multibody_dynamics: rigid, constrained and flexible multibody dynamics on pinocchio.

No ROS import at module level: the library works without ROS 2.
"""

from .errors import (
    DimensionError,
    FrameNotFound,
    InputError,
    ModelError,
    MultibodyError,
    SolverError,
)
from .model import MultibodyModel, load_model, shipped_robots
from .rigid import Payload, RigidDynamics

__all__ = [
    "DimensionError", "FrameNotFound", "InputError", "ModelError",
    "MultibodyError", "MultibodyModel",
    "Payload", "RigidDynamics", "SolverError", "load_model", "shipped_robots",
]
