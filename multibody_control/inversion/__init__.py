"""Inverse models (feedforward) for fully actuated and underactuated systems.

Module map (imports point one way, top to bottom): :mod:`.result` (the result type),
:mod:`.protocol` (the inverse-model interface), :mod:`.desired`, :mod:`.servo`,
:mod:`.internal` (internal-dynamics integration, stable BVP, index-2 Euler),
:mod:`.causal`, :mod:`.quasi_static`, :mod:`.closed_loop`, :mod:`.verify`, :mod:`.methods`
(registry and :func:`invert`), then the flexible models (:mod:`.flexible`,
:mod:`.closed_flexible`). The scenario files are read, run and reported by
:mod:`multibody_control.scenarios` (``scenario`` and ``flexible_scenario`` here re-export them).
"""

from .causal import CausalInversionResult
from .desired import DesiredOutput, end_effector_error
from .methods import (
    METHODS,
    CausalOptions,
    ForwardOptions,
    Index2EulerOptions,
    InversionOptions,
    QuasiStaticOptions,
    StableOptions,
    invert,
)
from .protocol import InverseModel
from .result import InversionInterrupted, InversionResult
from .servo import ServoConstraints

__all__ = ["METHODS", "CausalInversionResult", "CausalOptions", "DesiredOutput",
           "ForwardOptions", "Index2EulerOptions", "InverseModel", "InversionOptions",
           "InversionInterrupted", "InversionResult", "QuasiStaticOptions",
           "ServoConstraints", "StableOptions",
           "end_effector_error", "invert"]
