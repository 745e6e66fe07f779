"""Inverse models (feedforward) for fully actuated and underactuated systems."""

from .causal import CausalInversionResult
from .desired import DesiredOutput, end_effector_error
from .methods import METHODS, InversionResult, invert
from .servo import ServoConstraints

__all__ = ["METHODS", "CausalInversionResult", "DesiredOutput", "InversionResult",
           "ServoConstraints", "end_effector_error", "invert"]
