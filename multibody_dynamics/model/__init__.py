"""Robot descriptions: URDF spanning tree + model YAML."""

from .config import CLOSURE_ROWS, ClosureSpec, ModelConfig, PassiveJointSpec, read_config
from .multibody_model import MultibodyModel, build_model, load_model, resolve_model_path
from .resources import share_dir, shipped_robots

__all__ = [
    "CLOSURE_ROWS", "ClosureSpec", "ModelConfig", "MultibodyModel", "PassiveJointSpec",
    "build_model", "load_model", "read_config", "resolve_model_path", "share_dir",
    "shipped_robots",
]
