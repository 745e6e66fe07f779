"""The interfaces every robot family satisfies: its dynamics and its plant stepper.

Two small :class:`typing.Protocol` classes, satisfied structurally (no base class to inherit):

:class:`Dynamics`
    ``forward_dynamics``, ``inverse_dynamics``, ``mass_matrix`` and ``energy`` of one model,
    every one returning a plain array (or a float): the accelerations ``a`` (nv,) from
    ``forward_dynamics``, the generalized force ``tau`` (nv,) from ``inverse_dynamics``.
    Where a formulation knows more (the constraint force and multipliers of a closed loop, the
    passive-joint residual of an underactuated one) it offers it through
    ``forward_dynamics_result`` / ``inverse_dynamics_result`` besides.  Satisfied by
    :class:`~multibody_dynamics.rigid.RigidDynamics` (open chains, passive and elastic
    joints as springs), :class:`~multibody_dynamics.projection.ProjectedDynamics` (closed
    loops), :class:`~multibody_dynamics.elastic_joints.ElasticJoints` (the reduced
    elastic-joint form), :class:`~multibody_dynamics.quasi_velocity.QuasiVelocityDynamics`
    (Aghili 2010; its inverse dynamics is the actuation of least ``f^T M^{-1} f``, not the
    minimum-norm one), :class:`~multibody_dynamics.flexible.system.FlexibleChain` and
    :class:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain` (multipliers under
    ``forward_dynamics_result``).

:class:`PlantStepper`
    The fixed-step plant that ``multibody simulate`` and the simulator node advance one tick
    at a time: :class:`~multibody_dynamics.simulate.Simulator` (rigid models, with or without
    closures), :class:`~multibody_dynamics.flexible.stepper.FlexibleStepper` and
    :class:`~multibody_dynamics.flexible.stepper.ClosedFlexibleStepper`.

:func:`multibody_dynamics.robot.robot_dynamics` and :func:`multibody_dynamics.robot.robot_stepper`
give both for any robot :func:`~multibody_dynamics.robot.load_robot` returns.

The generalized force is passed by keyword, ``forward_dynamics(q, v, tau=tau)``: the rigid
classes take it as their third positional argument, the flexible ones take the joint inputs
``u`` (nu,) there (``tau = B u`` when only inputs act).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Dynamics", "PlantStepper"]


@runtime_checkable
class Dynamics(Protocol):
    """Dynamics of one model, ``M(q) a + h(q, v) = tau`` (plus the closure forces of a loop).

    Arrays are 1-D: ``q`` (nq,), ``v``, ``a``, ``tau`` (nv,); SI units ([rad | m] and
    their rates, [N m | N] for forces; modal amplitudes for elastic coordinates).
    """

    def forward_dynamics(self, q: np.ndarray, v: np.ndarray, *, tau: np.ndarray
                         ) -> np.ndarray:
        """Accelerations ``a`` (nv,) [rad/s^2 | m/s^2] under the generalized force ``tau``
        (nv,) [N m | N]; on a closed loop, the accelerations that keep the closures."""
        ...

    def inverse_dynamics(self, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Generalized force ``tau`` (nv,) [N m | N] that produces ``a`` (nv,); on a closed
        loop, the minimum-norm one (the part along the closure directions is carried by the
        loop) for a motion ``a`` that keeps the closures."""
        ...

    def mass_matrix(self, q: np.ndarray) -> np.ndarray:
        """Mass matrix ``M(q)`` (nv, nv) [kg | kg m^2] of the (spanning-tree) coordinates."""
        ...

    def energy(self, q: np.ndarray, v: np.ndarray) -> float:
        """Total mechanical energy ``T + V`` [J] (gravity, springs and strain in ``V``)."""
        ...


@runtime_checkable
class PlantStepper(Protocol):
    """A plant advanced by fixed steps with the generalized force held over each step.

    Attributes
    ----------
    q : ndarray, shape (nq,)
        Current configuration [rad | m | modal].
    v : ndarray, shape (nv,)
        Current velocities.
    t : float
        Current time [s].
    config : SimulatorConfig
        ``dt`` [s], ``method``, ...; assigning a new one changes the step of the next
        :meth:`step` calls.
    constrained : bool
        True when the plant has closures (then :meth:`sample` reports multipliers and
        residuals, and ``constraints.labels`` names the multipliers).
    constraints : object or None
        None for an open plant; else has ``labels`` (one per constraint row).
    nsteps, nfev : int
        Steps taken and dynamics evaluations since construction.
    """

    q: np.ndarray
    v: np.ndarray
    t: float
    config: Any
    constraints: Any
    nsteps: int
    nfev: int

    @property
    def constrained(self) -> bool:
        ...

    def reset(self, q: np.ndarray | None = None, v: np.ndarray | None = None,
              t: float = 0.0) -> None:
        """Set the state (default: the model's initial configuration, at rest), projected on
        the closures of a constrained plant."""
        ...

    def step(self, tau: np.ndarray, dt: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Advance ``dt`` (default ``config.dt``) [s] with ``tau`` (nv,) held; returns
        ``(q, v)``; the state is unchanged when the step fails (``SolverError``)."""
        ...

    def energy(self) -> float:
        """Total mechanical energy at the current state [J]."""
        ...

    def sample(self, tau: np.ndarray) -> tuple[np.ndarray, float, float]:
        """``(lam, max |phi|, max |A v|)`` at the current state under ``tau`` (nv,): the closure
        multipliers [N | N m] (empty for an open plant) and the position and velocity residuals
        of the closures (0 for an open plant)."""
        ...
