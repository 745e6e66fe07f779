"""The model YAML (``config/robots/<robot>.yaml``): what a URDF cannot say.

Schema (every key but ``name`` optional; units in brackets)::

    name: passive_arm                  # str, the robot's name
    description: "..."                 # str, one line shown by `multibody models`
    source: "Seifried (2014) ..."      # str, where the parameters come from
    urdf: ../../urdf/passive_arm.urdf  # path relative to this file [default urdf/<name>.urdf
                                       #   of the package share]
    gravity: [0.0, 0.0, -9.81]         # 3 numbers [m/s^2], world frame
    end_effector: tip                  # frame name used for task-space outputs
    passive_joints:                    # unactuated joints, with an optional parallel
      beta: {stiffness: 50.0,          #   spring [N m/rad or N/m] (>= 0)
             damping: 0.25,            #   damper [N m s/rad or N s/m] (>= 0)
             rest: 0.0}                #   spring rest position [rad or m]
    actuation:                         # optional; default: one input per actuated joint
      inputs: [F, T1, T2]              # names of the inputs u (an MJCF `urdf`: the names of
                                       #   the MJCF actuators kept; default: all of them)
      matrix: [[1, 0, 0], ...]         # B (nv x nu), tau = B u; default: selection matrix
                                       #   (an MJCF `urdf`: replaces its <actuator> section)
    initial_positions:                 # default start of every command [rad | m], by 1-DoF
      crank: 0.4                       #   joint (continuous joints by angle); closed loops:
                                       #   the others are solved (assembly), or refused
    mjcf_keyframe: home                # an MJCF `urdf`: the <key> whose qpos is the start
                                       #   [default: the first key; initial_positions wins]
    closures:                          # loop closures / contacts of the spanning tree
      - name: loop                     # str, unique
        type: revolute                 # one of CLOSURE_ROWS below
        frame_a: coupler_tip           # frame on one body
        frame_b: rocker_tip            # frame on another body (or the world)
        axis: [0, 0, 1]                # joint/line axis in frame_b (types that need one)
        normal: [0, 0, 1]              # plane normal in frame_b (planar types)

Validation errors name the file, the key and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from ..errors import ModelError
from ..yaml_io import load_yaml, number_problem

#: Closure types and how many constraint rows each imposes.  The planar types
#: act in the plane with normal ``normal`` (default z of frame_b).
CLOSURE_ROWS = {
    "weld": 6,  # relative placement fixed
    "revolute": 5,  # coincident points, rotation only about axis
    "prismatic": 5,  # no rotation, translation only along axis
    "spherical": 3,  # coincident points
    "point_on_plane": 1,  # point of frame_a stays on the plane through frame_b, normal `normal`
    "planar_weld": 3,  # in-plane position and angle fixed
    "planar_revolute": 2,  # in-plane positions coincide
    "planar_prismatic": 2,  # in-plane: no rotation, translation only along axis
    "point_on_line": 1,  # in-plane: point stays on the line through frame_b along axis
}
_NEEDS_AXIS = {"revolute", "prismatic", "planar_prismatic", "point_on_line"}
_NEEDS_NORMAL = {"point_on_plane", "planar_weld", "planar_revolute",
                 "planar_prismatic", "point_on_line"}

_TOP_KEYS = {
    "name", "description", "source", "urdf", "gravity", "end_effector",
    "passive_joints", "actuation", "closures", "initial_positions", "mjcf_keyframe",
}
_PASSIVE_KEYS = {"stiffness", "damping", "rest"}
_CLOSURE_KEYS = {"name", "type", "frame_a", "frame_b", "axis", "normal"}


@dataclass(frozen=True)
class PassiveJointSpec:
    """An unactuated joint with a parallel spring and damper (both may be zero)."""

    stiffness: float = 0.0  # N m/rad (revolute) or N/m (prismatic)
    damping: float = 0.0  # N m s/rad or N s/m
    rest: float = 0.0  # rad or m


@dataclass(frozen=True)
class ClosureSpec:
    """A loop closure or contact between two frames; its kinematics live in constraints.py."""

    name: str
    type: str
    frame_a: str
    frame_b: str
    axis: tuple[float, float, float] | None = None
    normal: tuple[float, float, float] | None = None

    @property
    def rows(self) -> int:
        return CLOSURE_ROWS[self.type]


@dataclass(frozen=True)
class ModelConfig:
    """The validated content of a model YAML (names only; checked against the URDF later)."""

    name: str
    path: Path | None
    urdf: Path
    description: str = ""
    source: str = ""
    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    end_effector: str | None = None
    passive_joints: dict[str, PassiveJointSpec] = field(default_factory=dict)
    input_names: tuple[str, ...] | None = None
    actuation_matrix: np.ndarray | None = None
    closures: tuple[ClosureSpec, ...] = ()
    initial_positions: dict[str, float] = field(default_factory=dict)
    mjcf_keyframe: str | None = None


class YamlChecker:
    """Checks values read from a YAML file; errors read 'FILE: KEY: problem; expected ...'.

    Shared by every loader of the project's description files (model YAML, flexible models).
    """

    def __init__(self, path):
        self.path = path

    def error(self, key, msg):
        return ModelError(f"{self.path}: {key}: {msg}" if key else f"{self.path}: {msg}")

    def load(self, kind: str, expected: str) -> dict:
        """The YAML content of the file: ModelError if missing, malformed or empty.

        ``kind`` names the file in the messages ("model"), ``expected`` says what an empty file
        lacks ("a mapping with at least 'name'")."""
        path = Path(self.path)
        if not path.is_file():
            raise ModelError(f"{path}: {kind} file not found")
        try:
            raw = load_yaml(path.read_text())
        except yaml.YAMLError as exc:
            raise ModelError(f"{path}: malformed YAML ({exc})") from None
        if raw is None:
            raise ModelError(f"{path}: empty file; expected {expected}")
        return raw

    def number(self, value, key, *, minimum=None, positive=False):
        """A finite real number (the wording of :func:`~multibody_dynamics.yaml_io.
        number_problem`, shared with the scenario and study files)."""
        problem = number_problem(value, positive=positive, minimum=minimum)
        if problem is not None:
            raise self.error(key, problem)
        return float(value)

    def integer(self, value, key, *, minimum=None):
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"expected an integer >= {minimum}, got {value!r}")
        return value

    def vector(self, value, key, n):
        if not isinstance(value, (list, tuple)) or len(value) != n:
            raise self.error(key, f"expected a list of {n} numbers, got {value!r}")
        return tuple(self.number(x, f"{key}[{i}]") for i, x in enumerate(value))

    def vector3(self, value, key):
        return self.vector(value, key, 3)

    def unit3(self, value, key):
        vec = np.array(self.vector3(value, key))
        norm = np.linalg.norm(vec)
        if norm < 1e-12:
            raise self.error(key, "expected a non-zero direction vector, got [0, 0, 0]")
        return tuple((vec / norm).tolist())

    def string(self, value, key):
        if not isinstance(value, str) or not value:
            raise self.error(key, f"expected a non-empty string, got {value!r}")
        return value

    def closures(self, value, allowed, required, types, *, nonempty=False):
        """The checked common part of a ``closures:`` list, shared by every schema with one.

        Parameters
        ----------
        value : object
            The value of the key ``closures`` as read from YAML.
        allowed : set of str
            The keys an entry may have (the schema's own: frames, bodies, axes ...).
        required : sequence of str
            The keys every entry must have, ``"type"`` among them.
        types : Mapping or sequence of str
            The closure types the schema knows (e.g. :data:`CLOSURE_ROWS`).
        nonempty : bool
            Whether an empty list is refused (a file whose ``closures`` make it a closed loop).

        Returns
        -------
        list of tuple
            ``(key, entry, type, name)`` per closure: ``key`` as ``"closures[i]"`` for the
            messages of the schema's own checks, ``entry`` the mapping, ``name`` unique
            (default ``closure<i>``).

        Raises
        ------
        ModelError
            Naming the file and the key, e.g. ``closures[1].type``, and what was expected.
        """
        if not isinstance(value, list) or (nonempty and not value):
            raise self.error("closures", f"expected a {'non-empty ' if nonempty else ''}list of "
                                         f"closures (cut joints), got {value!r}")
        heads, seen = [], set()
        for i, entry in enumerate(value):
            key = f"closures[{i}]"
            entry = self.mapping(entry, key, allowed)
            for req in required:
                if req not in entry:
                    raise self.error(f"{key}.{req}", "missing")
            ctype = self.string(entry["type"], f"{key}.type")
            if ctype not in types:
                raise self.error(f"{key}.type", f"unknown closure type {ctype!r}; expected one "
                                                f"of {', '.join(types)}")
            cname = self.string(entry.get("name", f"closure{i}"), f"{key}.name")
            if cname in seen:
                raise self.error(f"{key}.name", f"duplicate closure name {cname!r}")
            seen.add(cname)
            heads.append((key, entry, ctype, cname))
        return heads

    def mapping(self, value, key, allowed):
        if not isinstance(value, dict):
            raise self.error(key, f"expected a mapping, got {type(value).__name__}")
        unknown = sorted(set(value) - allowed)
        if unknown:
            where = f"{key}." if key else ""
            raise self.error(
                f"{where}{unknown[0]}",
                f"unknown key; expected one of {', '.join(sorted(allowed))}"
            )
        return value


def _refuse_scenario(path: Path, raw) -> None:
    """A scenario or study file given where a model is expected (``multibody simulate
    run_x.yaml``) is named as such, with the command that runs it; it used to fail on its
    first key (``controller: unknown key; expected one of actuation, ...``).  Scenarios name
    their robot with ``robot:``, which no model file has."""
    if not isinstance(raw, dict) or "robot" not in raw:
        return
    if "controller" in raw:
        what, how = "a run scenario", f"; run it with `multibody run {path}`"
    elif "task" in raw:
        what, how = "an inversion scenario", f"; run it with `multibody invert {path}`"
    else:
        what, how = "a scenario or study file", ""
    raise ModelError(f"{path}: {what} (it names robot: {raw['robot']}), not a model file{how}")


def read_config(path: Path, default_urdf_dir: Path) -> ModelConfig:  # noqa: C901
    """Read and validate the model YAML at ``path`` (structure and types only)."""
    path = Path(path)
    w = YamlChecker(path)
    raw = w.load("model", "a mapping with at least 'name'")
    _refuse_scenario(path, raw)
    w.mapping(raw, "", _TOP_KEYS)
    if "name" not in raw:
        raise w.error("name", "missing; expected the robot's name")
    name = w.string(raw["name"], "name")

    if "urdf" in raw:
        urdf = (path.parent / w.string(raw["urdf"], "urdf")).resolve()
    else:
        urdf = default_urdf_dir / f"{name}.urdf"

    gravity = w.vector3(raw["gravity"], "gravity") if "gravity" in raw else (0.0, 0.0, -9.81)

    passive = {}
    raw_passive = raw.get("passive_joints") or {}
    if not isinstance(raw_passive, dict):
        raise w.error("passive_joints", "expected a mapping of joint name to "
                      f"{{stiffness, damping, rest}}, got {raw_passive!r}")
    for jname, spec in raw_passive.items():
        key = f"passive_joints.{jname}"
        spec = w.mapping(spec if spec is not None else {}, key, _PASSIVE_KEYS)
        passive[str(jname)] = PassiveJointSpec(
            stiffness=w.number(spec.get("stiffness", 0.0), f"{key}.stiffness", minimum=0.0),
            damping=w.number(spec.get("damping", 0.0), f"{key}.damping", minimum=0.0),
            rest=w.number(spec.get("rest", 0.0), f"{key}.rest"),
        )

    inputs, matrix = None, None
    if raw.get("actuation") is not None:
        act = w.mapping(raw["actuation"], "actuation", {"inputs", "matrix"})
        if "inputs" in act:
            names = act["inputs"]
            if not isinstance(names, list) or not names:
                raise w.error("actuation.inputs",
                              f"expected a non-empty list of names, got {names!r}")
            inputs = tuple(w.string(n, f"actuation.inputs[{i}]") for i, n in enumerate(names))
            if len(set(inputs)) != len(inputs):
                raise w.error("actuation.inputs",
                              f"input names must be unique, got {list(inputs)}")
        if "matrix" in act:
            try:
                matrix = np.array(act["matrix"], dtype=float)
            except (TypeError, ValueError):
                raise w.error("actuation.matrix", "expected a list of rows of numbers") from None
            if matrix.ndim != 2 or not np.all(np.isfinite(matrix)):
                raise w.error("actuation.matrix", f"expected a 2-D matrix of finite numbers, got "
                                                  f"shape {matrix.shape}")

    initial = {}
    if raw.get("initial_positions") is not None:
        raw_initial = raw["initial_positions"]
        if not isinstance(raw_initial, dict) or not raw_initial:
            raise w.error("initial_positions", "expected a mapping of joint name to position "
                          f"[rad | m], e.g. {{crank: 0.4}}, got {raw_initial!r}")
        for jname, value in raw_initial.items():
            initial[str(jname)] = w.number(value, f"initial_positions.{jname}")

    closures = []
    heads = w.closures(raw.get("closures") or [], _CLOSURE_KEYS, ("type", "frame_a", "frame_b"),
                       CLOSURE_ROWS)
    for key, c, ctype, cname in heads:
        if ctype in _NEEDS_AXIS and "axis" not in c:
            raise w.error(f"{key}.axis",
                          f"missing; closure type {ctype!r} needs an axis (3 numbers)")
        axis = w.unit3(c["axis"], f"{key}.axis") if "axis" in c else None
        normal = (w.unit3(c.get("normal", [0, 0, 1]), f"{key}.normal")
                  if ctype in _NEEDS_NORMAL else None)
        if axis is not None and normal is not None and abs(np.dot(axis, normal)) > 1e-9:
            raise w.error(f"{key}.axis",
                          "must be perpendicular to the plane normal of a planar closure")
        closures.append(ClosureSpec(cname, ctype, w.string(c["frame_a"], f"{key}.frame_a"),
                                    w.string(c["frame_b"], f"{key}.frame_b"), axis, normal))

    return ModelConfig(
        name=name,
        path=path,
        urdf=urdf,
        description=str(raw.get("description", "")).strip(),
        source=str(raw.get("source", "")).strip(),
        gravity=gravity,
        end_effector=w.string(raw["end_effector"], "end_effector")
        if "end_effector" in raw else None,
        passive_joints=passive,
        input_names=inputs,
        actuation_matrix=matrix,
        closures=tuple(closures),
        initial_positions=initial,
        mjcf_keyframe=(w.string(raw["mjcf_keyframe"], "mjcf_keyframe")
                       if raw.get("mjcf_keyframe") is not None else None),
    )
