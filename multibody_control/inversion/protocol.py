"""The interface the internal-dynamics drivers of :mod:`.internal` use: :class:`InverseModel`.

An inverse model prescribes the output, ``y = y_d(t)``, and leaves internal states
``eta`` (Seifried 2014 Sect. 3.3, 5.2.3, 6.3: the passive coordinates and their velocities for
rigid underactuated systems, the elastic coordinates and their rates for flexible ones) whose
right-hand side the drivers integrate forward (classical inversion), solve as a boundary value
problem (stable inversion, :func:`.internal.solve_stable`) or by dichotomy sweeps
(:func:`.closed_flexible.dichotomy_sweeps`).  Three classes satisfy it:

* :class:`.servo.ServoConstraints` (rigid models, servo-constraints, Seifried Ch. 5);
* :class:`.flexible.FlexibleServo` (open flexible chains) and
  :class:`.closed_flexible.ClosedOutputServo` (closed flexible loops), both through
  :class:`multibody_dynamics.flexible.servo.ElasticServo`, which satisfies this protocol
  structurally: the dynamics package does not import the control package.

The protocol is checked at run time only for the presence of the members
(``isinstance(x, InverseModel)``); ``test/test_inversion_structure.py`` checks the signatures
of the three classes against it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

#: ``ytraj(t) -> (y, y', y'')``: the desired output and its first two time derivatives at
#: time(s) ``t`` [s]; each (m,) for a scalar ``t``, (N, m) for an array of N times.
OutputTrajectory = Callable[[float], tuple[np.ndarray, np.ndarray, np.ndarray]]


@runtime_checkable
class InverseModel(Protocol):
    """An inverse model with internal states ``eta`` (2 nu_int,) (module docstring).

    Attributes
    ----------
    nu_int : int
        Number of internal coordinates (passive or elastic); ``eta`` has 2 nu_int entries.
    iu : (nu_int,) int
        Indices of the internal coordinates in ``q``/``v``.
    counters : dict[str, int]
        Evaluation counts; ``counters["dynamics"]`` is a result's ``nfev``.
    on_evaluate : callable or None
        Called with the number of new dynamics evaluations (progress bars).
    """

    nu_int: int
    iu: np.ndarray
    counters: dict
    on_evaluate: Callable[[int], object] | None

    def internal_rhs(self, t: float, eta: np.ndarray, ytraj: OutputTrajectory) -> np.ndarray:
        """``eta'`` (2 nu_int,) at time ``t`` [s] along ``ytraj``."""

    def internal_rhs_batch(self, y: np.ndarray, yd: np.ndarray, ydd: np.ndarray,
                           eta: np.ndarray) -> np.ndarray:
        """``eta'`` (N, 2 nu_int) for N samples of the output (N, m) and states (N, 2 nu_int)."""

    def accelerations(self, q: np.ndarray, v: np.ndarray, ydd: np.ndarray) -> np.ndarray:
        """Accelerations ``a`` (nv,) that keep the output's second derivative at ``ydd``."""

    def reconstruct(self, t: float, eta: np.ndarray, ytraj: OutputTrajectory):
        """``(q, v, a, u)`` at time ``t`` [s] from the internal state ``eta``."""

    def equilibrium(self, y: np.ndarray, guess=None) -> np.ndarray:
        """Internal state (2 nu_int,) at rest with the constant output ``y``."""

    def zero_dynamics_jacobian(self, y: np.ndarray, eta0=None, step: float = ...):
        """``(Q, eta0)``: ``Q = d eta' / d eta`` (2 nu_int, 2 nu_int) at rest at ``y``."""
