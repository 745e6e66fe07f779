"""The one schema checker of the scenario files (``run_*.yaml``, ``invert_*.yaml`` for rigid,
flexible and closed flexible robots) and of the design study files (``config/designs/*.yaml``,
:mod:`multibody_control.design.study`).

Every file kind validates its keys with these functions, so that the same value gets the
same answer in every file and the errors read alike: ``<file>: <key>: <what was expected>``
(:class:`~multibody_dynamics.errors.InputError`). A bad number is worded by
:func:`multibody_dynamics.yaml_io.number_problem`, which the model YAML checker shares.

Numbers (:func:`number`): ints and floats, never booleans, never NaN, and finite unless the key
is a limit (``infinite=True``), where ``.inf`` means "no limit" (``controller.effort_limit``,
``controller.integral_limit``, ``plant.effort_limit``, ``plant.max_speed``). A time, a gain, a
tolerance, a coordinate or a matrix entry of ±inf is an error in every scenario kind.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from multibody_dynamics.errors import InputError, ModelError
from multibody_dynamics.yaml_io import load_yaml, number_problem

from ..tasks import TimeLaw

__all__ = ["err", "flag", "gain", "integer", "mapping", "matrix", "merge", "named", "number",
           "read_scenario_file", "robot_path", "scenario_robot", "scenario_robot_path", "text",
           "time_law", "xy"]


def err(where, key, msg) -> InputError:
    """The error of ``key`` in file (or context) ``where``: ``"<where>: <key>: <msg>"``."""
    return InputError(f"{where}: {key}: {msg}")


def mapping(where, key, value, allowed=None) -> dict:
    """``value`` as a mapping whose keys are among ``allowed`` (None: any key)."""
    if not isinstance(value, dict):
        raise err(where, key or "file", f"expected a mapping, got {type(value).__name__}")
    if allowed is not None:
        unknown = sorted(set(value) - set(allowed))
        if unknown:
            raise err(where, f"{key}.{unknown[0]}" if key else unknown[0],
                      f"unknown key; expected one of {', '.join(sorted(allowed))}")
    return value


def number(where, key, value, *, positive=False, minimum=None, infinite=False) -> float:
    """A real number: not a boolean, not NaN; finite unless ``infinite`` (a limit, where
    ``.inf`` means none); ``positive``: > 0; ``minimum``: >= minimum."""
    problem = number_problem(value, infinite=infinite, positive=positive, minimum=minimum)
    if problem is not None:
        raise err(where, key, problem)
    return float(value)


def gain(where, key, value, *, infinite=False):
    """A number or a list of numbers (their count is checked by the consumer)."""
    if isinstance(value, list):
        return tuple(number(where, f"{key}[{i}]", v, infinite=infinite)
                     for i, v in enumerate(value))
    return number(where, key, value, infinite=infinite)


def integer(where, key, value, *, minimum=1) -> int:
    """An integer >= ``minimum`` (not a boolean, not a float)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise err(where, key, f"expected an integer >= {minimum}, got {value!r}")
    return value


def flag(where, key, value) -> bool:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        raise err(where, key, f"expected true or false, got {value!r}")
    return value


def text(where, key, value, *, nullable=False) -> str | None:
    """A string (``nullable``: or null)."""
    if (value is None and nullable) or isinstance(value, str):
        return value
    raise err(where, key, f"expected text{' or null' if nullable else ''}, got {value!r}")


def named(where, key, value) -> dict:
    """An optional mapping keyed by names (joints, frames): {} when absent."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise err(where, key, f"expected a mapping of name to settings, got {value!r}")
    return value


def matrix(where, key, value, shape=None, what="") -> np.ndarray:
    """A matrix of finite numbers given as a list of equally long rows; ``shape`` (rows, cols)
    when fixed, ``what`` names its rows x columns in the message."""
    rows: list = value if isinstance(value, list) else []
    ok = bool(rows) and all(isinstance(r, list) and r and len(r) == len(rows[0]) for r in rows)
    if ok and shape is not None:
        ok = (len(rows), len(rows[0])) == tuple(shape)
    if not ok:
        expected = "a matrix (a list of equally long rows)" if shape is None else \
            f"a finite {shape[0]} x {shape[1]} matrix" + (f" ({what})" if what else "")
        raise err(where, key, f"expected {expected}, got {value!r}")
    return np.array([[number(where, key, x) for x in r] for r in rows])


def xy(where, key, p) -> list[float]:
    """A point ``[x, y]`` [m]."""
    if not isinstance(p, list) or len(p) != 2:
        raise err(where, key, f"expected [x, y] in m, got {p!r}")
    return [number(where, key, c) for c in p]


def time_law(where, t: dict, key: str = "task") -> TimeLaw:
    """The keys t0, tf [s] and order (3, 5, 7, 9; default 5) of the mapping ``t`` at ``key``
    (``task``, ``reference.joints``) as a rest-to-rest :class:`TimeLaw`."""
    for req in ("t0", "tf"):
        if req not in t:
            raise err(where, f"{key}.{req}", "missing (s)")
    order = t.get("order", 5)
    if isinstance(order, bool) or order not in (3, 5, 7, 9):
        raise err(where, f"{key}.order", f"expected 3, 5, 7 or 9, got {order!r}")
    t0, tf = number(where, f"{key}.t0", t["t0"]), number(where, f"{key}.tf", t["tf"])
    if not tf > t0:
        raise err(where, f"{key}.tf", f"expected tf > t0 = {t0:g}, got {tf:g}")
    return TimeLaw(t0, tf, order)


def read_scenario_file(path: Path, kind: str = "scenario") -> dict:
    """The content of a scenario YAML (empty file: {}); InputError naming the file otherwise.
    ``kind`` names the file in the message of a missing one ("study")."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: {kind} file not found")
    try:
        return load_yaml(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: malformed YAML ({' '.join(str(exc).split())})") from None


# top-level keys that mark a scenario's kind: (command, keys)
_KINDS = {"inversion": ("multibody invert", ("task", "output", "method")),
          "run": ("multibody run", ("controller", "reference", "plant", "duration"))}
_NAMED = {"inversion": "an inversion scenario", "run": "a run scenario"}
_MODEL_KEYS = ("urdf", "closures", "passive_joints", "actuation", "gravity")
_DESCRIPTIONS = (".urdf", ".xml", ".sdf", ".mjcf", ".xacro")


def read_scenario_of_kind(path: Path, kind: str) -> dict | object:
    """:func:`read_scenario_file` for a ``kind`` ("inversion" or "run") scenario, refusing in
    one line a file of another kind given by mistake: a robot description (URDF, MJCF, SDF),
    a model YAML, or the other kind of scenario (each used to fail on its first key, e.g.
    ``dt: unknown key; expected one of controller, ...`` for an inversion scenario given to
    ``multibody run``).  The content is returned as read (validated by the caller)."""
    path = Path(path)
    raw = read_scenario_file(path)
    if not isinstance(raw, dict):
        if path.suffix.lower() in _DESCRIPTIONS:
            raise InputError(f"{path}: a robot description, not {_NAMED[kind]}; a scenario "
                             "names its robot with 'robot:' (docs/scenarios.md), and "
                             f"`multibody check {path}` loads the robot")
        return raw
    keys = set(raw)
    if keys & set(_MODEL_KEYS) and "robot" not in keys:
        raise InputError(f"{path}: a model file, not {_NAMED[kind]}; a scenario names it "
                         f"with 'robot: {path.name}' (docs/scenarios.md)")
    own = set(_KINDS[kind][1])
    for other, (command, marks) in _KINDS.items():
        found = sorted(keys & set(marks))
        if other != kind and found and not keys & own:
            raise InputError(f"{path}: {_NAMED[other]} (keys {', '.join(found)}), not "
                             f"{_NAMED[kind]}; use `{command} {path}`")
    return raw


def robot_path(robot: str, path: Path | None) -> str:
    """The ``robot`` key: a shipped name as is, a relative model-YAML path resolved against the
    directory of the scenario file ``path``."""
    if robot.endswith((".yaml", ".yml")) and not Path(robot).is_absolute() and path is not None:
        return str(Path(path).parent / robot)
    return robot


def scenario_robot_path(path: str | Path) -> str | None:
    """What the ``robot`` key of the scenario file ``path`` names (:func:`robot_path`: a shipped
    name, or a model YAML resolved against the scenario's directory); None when the file has
    no ``robot`` text. InputError if the file is missing or malformed."""
    path = Path(path)
    raw = read_scenario_file(path)
    robot = raw.get("robot") if isinstance(raw, dict) else None
    return robot_path(robot, path) if isinstance(robot, str) else None


def scenario_robot(path: str | Path):
    """The robot a scenario file names (its ``robot`` key), loaded by
    :func:`~multibody_dynamics.robot.load_robot`, so that a caller can branch on what the robot
    has (:func:`~multibody_dynamics.robot.has_elastic_coordinates`,
    :func:`~multibody_dynamics.robot.has_closures`).

    Returns
    -------
    RobotModel or None
        None when the file has no ``robot`` text (the scenario's own loader reports it).

    Raises
    ------
    InputError
        The file is missing or malformed, or the robot does not load:
        ``<file>: robot: <the loader's message>``.
    """
    from multibody_dynamics.robot import load_robot

    robot = scenario_robot_path(path)
    if robot is None:
        return None
    try:
        return load_robot(robot)
    except ModelError as exc:
        raise err(path, "robot", " ".join(str(exc).split())) from None


def merge(base: dict, over: dict) -> dict:
    """``base`` with ``over`` merged in (nested mappings merge, other values replace)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
