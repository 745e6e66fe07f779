"""One entry point for every robot the suite models, and the interface they share.

:func:`load_robot` loads any model of ``config/robots/`` or any model YAML path, rigid
(URDF + model YAML: open chains, closed loops, passive and elastic joints) or flexible (a
``bodies`` list, with ``closures`` for a closed loop), and returns an object satisfying
:class:`RobotModel`: the model summary every caller needs (name, sizes, coordinate and input
labels, the closures) whatever the family. The concrete classes stay what they are
(:class:`~multibody_dynamics.model.MultibodyModel` on pinocchio,
:class:`~multibody_dynamics.flexible.system.FlexibleChain`,
:class:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain`), so code that needs one
family's algorithms keeps them; code that only needs to know *what* a robot has branches on
its capabilities (:func:`has_closures`, :func:`has_elastic_coordinates`), never on which
loader built it.

:func:`robot_dynamics` and :func:`robot_stepper` give any loaded robot's dynamics and fixed-step
plant, objects satisfying the protocols :class:`~multibody_dynamics.protocols.Dynamics` and
:class:`~multibody_dynamics.protocols.PlantStepper` (defined in
:mod:`multibody_dynamics.protocols`, re-exported here).

``load_model`` (rigid only, returns pinocchio-backed models) and ``load_flexible_model``
stay as the family loaders that :func:`load_robot` dispatches to.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from .errors import InputError, ModelError
from .model.resources import (
    flexible_schema_key,
    robots_dir,
    shipped_flexible_models,
    shipped_robots,
)
from .protocols import Dynamics, PlantStepper

__all__ = ["Dynamics", "PlantStepper", "RobotModel", "has_closures", "has_elastic_coordinates",
           "input_effort_limits", "load_robot", "robot_dynamics", "robot_stepper",
           "shipped_models"]


@runtime_checkable
class RobotModel(Protocol):
    """What every loaded robot tells about itself, rigid or flexible.

    Attributes
    ----------
    name, description, source : str
        The model's name (its file stem for shipped models), one line, and where the data
        come from.
    nq, nv : int
        Configuration and velocity sizes (``q`` (nq,), ``v`` (nv,)).
    nu : int
        Number of inputs; the generalized force is ``B @ u``.
    nq_e : int
        Number of elastic (flexible-body) coordinates in ``q``; 0 for a rigid robot.
    joint_names : tuple of str
        The joints (the rigid coordinates for a flexible chain).
    coordinate_names : tuple of str, length nv
        One label per velocity coordinate (elastic ones ``<body>.e<k>``).
    input_names : tuple of str, length nu
        One label per input.
    closures : tuple
        The loop closures (empty for a tree); each has ``name`` and ``rows``.
    B : ndarray, shape (nv, nu)
        Input matrix.
    """

    name: str
    description: str
    source: str
    nq: int
    nv: int
    nu: int
    nq_e: int
    joint_names: tuple[str, ...]
    coordinate_names: tuple[str, ...]
    input_names: tuple[str, ...]
    closures: Sequence
    B: np.ndarray

    def neutral(self) -> np.ndarray:
        """A reference configuration q (nq,)."""
        ...

    def summary(self) -> str:
        """A few lines describing the model, as ``multibody check`` prints them."""
        ...


def has_closures(robot: RobotModel) -> bool:
    """True when the robot has kinematic loops (its coordinates are constrained)."""
    return len(robot.closures) > 0


def has_elastic_coordinates(robot: RobotModel) -> bool:
    """True when the robot has flexible bodies (elastic coordinates in ``q``)."""
    return robot.nq_e > 0


def input_effort_limits(model) -> np.ndarray | None:
    """|u| bound (nu,) [N m | N] of each model input: the URDF ``effort`` limit of the
    coordinate it drives (as a ros2_control effort interface bounds its command; inf where the
    URDF gives none); for an MJCF model with actuator limits the larger magnitude of each
    input's ``ctrlrange`` (``multibody_dynamics.ros.conversions.input_bounds`` gives the range
    itself); None for a model without a URDF (flexible)."""
    bounds = getattr(model, "actuator_limits", None)
    if bounds is not None:  # an MJCF model: the envelope of MuJoCo's ctrlrange
        return np.maximum(np.abs(bounds.ctrl_lower), np.abs(bounds.ctrl_upper))
    pm = getattr(model, "pin_model", None)
    B = np.asarray(getattr(model, "B", np.zeros((0, 0))), float)
    if pm is None or B.ndim != 2 or B.shape[0] != pm.nv:
        return None
    limit = np.asarray(pm.effortLimit, float)
    out = np.array([limit[int(np.argmax(np.abs(B[:, j])))] for j in range(B.shape[1])])
    out[~(out > 0)] = np.inf
    return out


def shipped_models() -> list[str]:
    """Names of every shipped model, rigid and flexible, sorted."""
    return sorted(shipped_robots() + shipped_flexible_models())


_MODEL_SUFFIXES = (".yaml", ".yml", ".urdf", ".xml", ".mjcf", ".sdf")


def _model_file(robot: str | Path) -> Path:
    p = Path(robot)
    if p.suffix in _MODEL_SUFFIXES or p.exists():
        if not p.is_file():
            raise ModelError(f"{p}: no such model file (expected a model YAML, a URDF, an MJCF "
                             "or an SDF file)")
        return p
    path = robots_dir() / f"{robot}.yaml"
    if not path.is_file():
        import difflib

        names = shipped_models()
        key = str(robot).lower().replace("-", "_").replace(" ", "_")
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ModelError(f"unknown robot {str(robot)!r}: {hint}not a shipped model "
                         f"({', '.join(names)}) and not a path to a model file (YAML, URDF, "
                         "MJCF or SDF)")
    return path


def load_robot(robot: str | Path, backend: str = "auto", parameters=None) -> RobotModel:
    """Load a shipped model by name (``"arm7"``, ``"flexible_parallel_tool"``), any model
    YAML by path, whichever family it belongs to, a plain URDF (fully actuated, gravity
    -z, no closures; see :func:`~multibody_dynamics.model.multibody_model.plain_urdf_config`)
    or a MuJoCo MJCF file (``.xml``/``.mjcf``: actuators, gravity and ``<equality>``
    connect/weld closures from the file; see :mod:`~multibody_dynamics.model.mjcf`).  SDF
    files load where pinocchio was built with sdformat, else raise naming what is missing.

    Parameters
    ----------
    robot : str or Path
    backend : {"auto", "numba", "numpy"}
        Kernel of a flexible model (see
        :class:`~multibody_dynamics.flexible.system.FlexibleChain`); rigid models ignore it.
    parameters : mapping, optional
        ``{name: value}``: changes a flexible model file declares under ``parameters:``
        (e.g. ``{"modes_long": 3}`` for ``flexible_parallel_tool``); rigid models have none.

    Returns
    -------
    RobotModel
        A :class:`~multibody_dynamics.model.MultibodyModel` for a rigid model, a
        :class:`~multibody_dynamics.flexible.system.FlexibleChain` or
        :class:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain` for a flexible one.

    Raises
    ------
    ModelError
        For an unknown name (listing the shipped ones), a missing file, and every error of
        the file itself (naming the file, the key and what was expected).
    InputError
        For ``parameters`` the file does not declare (or any for a rigid model).
    """
    path = _model_file(robot)
    if flexible_schema_key(path) is not None:
        from .flexible.loader import load_flexible_model

        return load_flexible_model(path, backend=backend, parameters=parameters)
    if parameters:
        raise InputError(f"parameters: {path} is a rigid model, which declares no parameters "
                         f"(got {sorted(parameters)})")
    from .model import load_model

    return load_model(path)


def _is_rigid(robot: RobotModel) -> bool:
    """True for a pinocchio-backed model (the flexible families carry no ``pin_model``)."""
    return hasattr(robot, "pin_model")


def robot_dynamics(robot: RobotModel) -> Dynamics:
    """The dynamics of a loaded robot, as the :class:`Dynamics` protocol states them.

    Parameters
    ----------
    robot : RobotModel
        What :func:`load_robot` returned.

    Returns
    -------
    Dynamics
        A rigid model with closures (or registered Pfaffian rows): its
        :class:`~multibody_dynamics.projection.ProjectedDynamics`; a rigid open chain
        (passive and elastic joints as the model's springs): its
        :class:`~multibody_dynamics.rigid.RigidDynamics`; a flexible model: the model itself
        (:class:`~multibody_dynamics.flexible.system.FlexibleChain` and
        :class:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain` implement the
        protocol).
    """
    if not _is_rigid(robot):
        return robot  # type: ignore[return-value]
    from .projection import ProjectedDynamics
    from .rigid import RigidDynamics
    from .rolling import model_constraints

    constraints = model_constraints(robot)  # type: ignore[arg-type]
    if constraints is None or not constraints.n_rows:
        return RigidDynamics(robot)  # type: ignore[arg-type]
    return ProjectedDynamics(robot, constraints)  # type: ignore[arg-type]


def robot_stepper(robot: RobotModel, config=None) -> PlantStepper:
    """The fixed-step plant of a loaded robot (what ``multibody simulate`` and the simulator
    node advance), as the :class:`PlantStepper` protocol states it.

    Parameters
    ----------
    robot : RobotModel
        What :func:`load_robot` returned.
    config : SimulatorConfig, optional
        ``dt`` [s], ``method``, ... (default ``SimulatorConfig()``).

    Returns
    -------
    PlantStepper
        :class:`~multibody_dynamics.simulate.Simulator` for a rigid model (its closures and
        registered Pfaffian rows projected), :class:`~multibody_dynamics.flexible.stepper.
        FlexibleStepper` or :class:`~multibody_dynamics.flexible.stepper.ClosedFlexibleStepper`
        for a flexible one.

    Raises
    ------
    SolverError
        A closed flexible loop whose neutral configuration cannot be assembled.

    Notes
    -----
    A rigid loop whose start configuration (``q_initial``) does not assemble is not refused
    here (the simulator leaves the choice to its caller): call ``reset(q0)`` with ``q0`` near
    an assembled pose (``initial_positions`` of the model YAML or of the simulator node)
    before stepping.
    """
    if not _is_rigid(robot):
        from .flexible.stepper import make_stepper

        return make_stepper(robot, config)
    from .rolling import model_constraints
    from .simulate import Simulator

    return Simulator(robot, config,  # type: ignore[arg-type]
                     constraints=model_constraints(robot))  # type: ignore[arg-type]
