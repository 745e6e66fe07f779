"""MultibodyModel: URDF spanning tree + model YAML -> pinocchio model and the extra data."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pinocchio as pin

from ..errors import FrameNotFound, ModelError
from .actuator_limits import ActuatorLimits
from .config import ClosureSpec, ModelConfig, PassiveJointSpec, read_config
from .mjcf import MjcfModel, is_mjcf_file, read_mjcf, sdf_unsupported
from .resources import flexible_schema_key, robots_dir, share_dir, shipped_robots
from .urdf_checks import check_urdf, massless_links


@dataclass(frozen=True, eq=False)
class MultibodyModel:
    """A robot: pinocchio's kinematic tree plus closures, actuation, springs and gravity.

    Build it with :func:`load_model`.  The object is immutable and shared; each
    caller creates its own pinocchio ``Data`` with :meth:`create_data`.

    Attributes
    ----------
    name : str
    pin_model : pinocchio.Model
        The spanning tree with gravity set from the model YAML.
    joint_names : tuple of str
        Moving joints in pinocchio order (the order of ``q`` and ``v``).
    coordinate_names : tuple of str, length nv
        One name per velocity coordinate (the joint name for 1-DoF joints,
        ``<joint>.<k>`` otherwise).
    passive : ndarray of bool, (nv,)
        True for unactuated coordinates.
    stiffness, damping : ndarray, (nv,)
        Parallel spring [N m/rad | N/m] and damper [N m s/rad | N s/m] per coordinate.
    q_rest : ndarray, (nq,)
        Spring rest configuration (the neutral configuration where no spring acts).
    B : ndarray, (nv, nu)
        Actuation map: generalized force ``tau = B @ u``.
    input_names : tuple of str, length nu
    closures : tuple of ClosureSpec
    gravity : ndarray, (3,)
        [m/s^2] in the world frame.
    end_effector : str or None
        Frame used for task-space outputs.
    notes : tuple of str
        What loading chose on the user's behalf (defaults of a plain URDF, frame-only links);
        printed by :meth:`summary`.
    q_initial : ndarray, (nq,)
        The default start of every command and of the simulator: from the model YAML's
        ``initial_positions`` (assembled for a closed loop), else ``q_rest``.
    initial_positions : dict of str to float
        The ``initial_positions`` of the model YAML [rad | m] (empty without).
    actuator_limits : ActuatorLimits or None
        MuJoCo's ``ctrlrange``, ``forcerange`` and ``actuatorfrcrange`` of an MJCF model's
        inputs (None: no limit; ``B u`` is the input's generalized force).  Applied through
        :func:`~multibody_dynamics.model.actuator_limits.actuation_force`.
    """

    name: str
    description: str
    source: str
    config_path: Path | None
    urdf_path: Path
    pin_model: pin.Model
    joint_names: tuple[str, ...]
    coordinate_names: tuple[str, ...]
    passive: np.ndarray
    stiffness: np.ndarray
    damping: np.ndarray
    q_rest: np.ndarray
    B: np.ndarray
    input_names: tuple[str, ...]
    closures: tuple[ClosureSpec, ...]
    gravity: np.ndarray
    end_effector: str | None
    notes: tuple[str, ...] = ()
    q_initial: np.ndarray = None  # type: ignore[assignment]  # set in __post_init__
    initial_positions: dict = field(default_factory=dict)
    actuator_limits: ActuatorLimits | None = None

    def __post_init__(self):
        if self.q_initial is None:
            object.__setattr__(self, "q_initial", self.q_rest)

    @property
    def nq(self) -> int:
        return self.pin_model.nq

    @property
    def nv(self) -> int:
        return self.pin_model.nv

    @property
    def nu(self) -> int:
        return self.B.shape[1]

    @property
    def nq_e(self) -> int:
        """Elastic (flexible-body) coordinates: none in a rigid model (see
        :class:`~multibody_dynamics.robot.RobotModel`)."""
        return 0

    @property
    def has_springs(self) -> bool:
        return bool(np.any(self.stiffness) or np.any(self.damping))

    @property
    def passive_joint_names(self) -> tuple[str, ...]:
        return tuple(n for n, p in zip(self.coordinate_names, self.passive) if p)

    def create_data(self) -> pin.Data:
        return self.pin_model.createData()

    def neutral(self) -> np.ndarray:
        """The neutral configuration q (nq,) (zero angles, unit quaternions)."""
        return pin.neutral(self.pin_model)

    def _initial_angles(self) -> np.ndarray:
        """``q_initial`` per velocity coordinate (continuous joints as angles) (nv,)."""
        return pin.difference(self.pin_model, pin.neutral(self.pin_model), self.q_initial)

    def frame_id(self, name: str) -> int:
        """Index of the frame ``name``; raises :class:`FrameNotFound` listing valid names."""
        if not self.pin_model.existFrame(name):
            valid = ", ".join(sorted({f.name for f in self.pin_model.frames}))
            raise FrameNotFound(f"{self.name}: no frame named {name!r}; valid frames: {valid}")
        return self.pin_model.getFrameId(name)

    def joint_index(self, name: str) -> int:
        """Velocity index of the 1-DoF joint (or coordinate) ``name``."""
        try:
            return self.coordinate_names.index(name)
        except ValueError:
            valid = ", ".join(self.coordinate_names)
            raise FrameNotFound(f"{self.name}: no joint named {name!r}; "
                                f"valid joints: {valid}") from None

    def total_mass(self) -> float:
        """Mass carried by the moving joints [kg] (bodies welded to the world excluded)."""
        return float(sum(inertia.mass for inertia in self.pin_model.inertias[1:]))

    def summary(self) -> str:
        """A few lines describing the model, as printed by ``multibody check``."""
        lines = [
            f"robot        {self.name}" + (f"  ({self.description})" if self.description else ""),
            f"files        {self.config_path or '-'}",
            f"             {self.urdf_path}",
            f"dof          nq={self.nq} nv={self.nv} inputs={self.nu} "
            f"({', '.join(self.input_names)})",
            f"joints       {', '.join(self.coordinate_names)}",
            f"passive      {', '.join(self.passive_joint_names) or '-'}",
        ]
        for i in np.flatnonzero(self.stiffness + self.damping):
            lines.append(
                f"  spring     {self.coordinate_names[i]}: k={self.stiffness[i]:g} "
                f"d={self.damping[i]:g}"
            )
        lines.append(f"closures     {len(self.closures) or '-'}")
        for c in self.closures:
            lines.append(f"  {c.name:10s} {c.type} {c.frame_a} <-> {c.frame_b} ({c.rows} rows)")
        lines += [
            f"gravity      {np.round(self.gravity, 4).tolist()} m/s^2",
            f"moving mass  {self.total_mass():.4g} kg",
            f"end effector {self.end_effector or '-'}",
        ]
        if self.initial_positions:
            given = ", ".join(f"{n}={x:g}" for n, x in self.initial_positions.items())
            start = ", ".join(f"{n}={x:.6g}" for n, x in zip(self.coordinate_names,
                                                             self._initial_angles()))
            lines.append(f"initial      {given} (initial_positions)" + (
                f" -> assembled {start}" if self.closures and self.nv <= 8 else
                " -> assembled" if self.closures else ""))
        if self.source:
            lines.append(f"source       {self.source}")
        lines += [f"note         {note}" for note in self.notes]
        return "\n".join(lines)


def resolve_model_path(robot: str | Path) -> Path:
    """Model YAML for a shipped robot name or a path to a YAML file.

    Raises :class:`ModelError` for an unknown name and for a flexible model (a file with a
    ``bodies`` list), which :func:`load_model` cannot load.
    """
    p = Path(robot)
    if p.suffix in (".yaml", ".yml") or p.exists():
        path = p
    else:
        path = robots_dir() / f"{robot}.yaml"
        if not path.is_file():
            raise ModelError(
                f"unknown robot {str(robot)!r}: not a shipped robot "
                f"({', '.join(shipped_robots())}) and not a path to a model YAML file"
            )
    if path.suffix in (".urdf", ".sdf", ".mjcf", ".xml"):
        return path
    key = flexible_schema_key(path)
    if key is not None:
        raise ModelError(
            f"{path}: {path.stem!r} is a flexible model (it has a {key!r} key), not a rigid "
            "URDF-backed one: load it with multibody_dynamics.flexible.loader.load_flexible_model "
            "(or use `multibody check/simulate/invert`, which take both kinds); load_model "
            "returns rigid pinocchio models only"
        )
    return path


def load_model(robot: str | Path) -> MultibodyModel:
    """Load and validate a rigid robot by shipped name (``"arm7"``) or model-YAML path.

    Only rigid models (URDF + model YAML): a flexible model of ``config/robots/`` (a
    ``bodies`` list) raises :class:`ModelError` naming
    :func:`~multibody_dynamics.flexible.loader.load_flexible_model`, its loader.

    Raises
    ------
    ModelError
        With the file, the key and what was expected, for every inconsistency
        between the YAML and the URDF; for an unknown name; for a flexible model.
    """
    path = resolve_model_path(robot)
    if path.suffix == ".sdf":
        _raise_sdf(path)
    if path.suffix == ".mjcf" or (path.suffix == ".xml" and is_mjcf_file(path)):
        tree = read_mjcf(path)
        return build_model(plain_mjcf_config(path, tree), tree=tree)
    if path.suffix in (".urdf", ".xml"):
        return build_model(plain_urdf_config(path))
    cfg = read_config(path, share_dir() / "urdf")
    return build_model(cfg)


def _initial_configuration(model: MultibodyModel, initial: dict, where, key: str
                           ) -> np.ndarray:
    """The start ``q`` (nq,) of ``initial`` (joint name -> rad | m, the model YAML's
    ``initial_positions``, named ``key`` in the errors): the listed 1-DoF coordinates set in
    ``q_rest``; a closed loop's other coordinates solved by
    :func:`~multibody_dynamics.assembly.assemble`.  When every coordinate is listed and the
    loops do not close exactly, the configuration is projected onto the closures (Newton) if
    that moves no listed value by more than 1e-3 rad | m (a rounding of them); else the key
    is refused."""
    from ..assembly import assemble  # deferred: assembly builds on the model
    from ..projection import ProjectedDynamics

    pm = model.pin_model
    for name in initial:
        if name not in model.coordinate_names:
            raise ModelError(f"{where}: {key}.{name}: unknown joint {name!r}; "
                             f"expected one of: {', '.join(model.coordinate_names)}")
        jid = pm.getJointId(name) if pm.existJointName(name) else 0
        if jid == 0 or pm.joints[jid].nv != 1:
            raise ModelError(f"{where}: {key}.{name}: a joint with several degrees "
                             "of freedom; expected 1-DoF joints only")
    res = assemble(model, initial, guess=model.q_rest)
    if res.success:
        return res.q
    listed = [model.coordinate_names.index(n) for n in initial]
    q_listed = model.q_rest.copy()
    for name, value in initial.items():
        j = pm.joints[pm.getJointId(name)]
        q_listed[j.idx_q:j.idx_q + j.nq] = (value if j.nq == 1 else
                                            (np.cos(value), np.sin(value)))
    proj = ProjectedDynamics(model).project_position(q_listed)
    if proj.success:
        moved = np.abs(pin.difference(pm, q_listed, proj.q)[listed]).max()
        if moved <= 1e-3:
            return proj.q
    raise ModelError(f"{where}: {key}: the loops cannot be assembled with these "
                     f"values ({' '.join(res.message.split())}); list only independent "
                     "coordinates (e.g. the motors) and the others are solved")


def _raise_sdf(path: Path):
    error = sdf_unsupported(path)
    if error is None:  # pragma: no cover - needs a pinocchio built with sdformat
        error = ModelError(f"{path}: SDF models are not supported yet; convert the model to "
                           "URDF or MJCF and load that")
    raise error


#: What a URDF given without a model YAML is taken to be (see :func:`plain_urdf_config`).
PLAIN_URDF_NOTE = ("no model YAML: every joint actuated, gravity [0, 0, -9.81] m/s^2, no loop "
                   "closures (write a model YAML to change these)")


def plain_urdf_config(urdf: str | Path) -> ModelConfig:
    """The model a URDF describes on its own: fully actuated, gravity -z, no closures.

    The name is the URDF's ``<robot name=...>`` (the file stem if it has none).
    """
    urdf = Path(urdf).resolve()
    name = check_urdf(urdf).get("name") or urdf.stem
    return ModelConfig(name=name, path=None, urdf=urdf, description=f"URDF {urdf.name}",
                       gravity=(0.0, 0.0, -9.81))


def plain_mjcf_config(path: str | Path, tree: MjcfModel | None = None) -> ModelConfig:
    """The model an MJCF file describes on its own (see :mod:`.mjcf`): gravity from
    ``<option>``, the joints of ``<actuator>`` actuated (all of them without that section),
    the others passive with the joint's spring and damper; in :func:`build_model` the
    ``<equality>`` constraints become closures and the joints' ``ref`` (``qpos0``) the
    start."""
    path = Path(path).resolve()
    tree = read_mjcf(path) if tree is None else tree
    passive, matrix, inputs = {}, None, None
    if tree.actuators is not None:
        _, coords = _coordinate_names(tree.pin_model)
        matrix = np.zeros((len(coords), len(tree.actuators)))
        pm = tree.pin_model
        for k, (_, joint, gear) in enumerate(tree.actuators):
            matrix[pm.joints[pm.getJointId(joint)].idx_v, k] = gear
        actuated = {joint for _, joint, _ in tree.actuators}
        for jid in range(1, pm.njoints):
            jname = pm.names[jid]
            if jname not in actuated and pm.joints[jid].nv == 1:
                k, d, rest = tree.springs.get(jname, (0.0, 0.0, 0.0))
                passive[jname] = PassiveJointSpec(k, d, rest)
        inputs = tuple(name for name, _, _ in tree.actuators)
        if len(set(inputs)) != len(inputs):
            inputs = tuple(f"{name}[{k}]" for k, name in enumerate(inputs))
    return ModelConfig(name=tree.name, path=None, urdf=path, description=f"MJCF {path.name}",
                       gravity=tree.gravity, passive_joints=passive, input_names=inputs,
                       actuation_matrix=matrix)


def _tree(cfg: ModelConfig, tree: MjcfModel | None):
    """The pinocchio tree of ``cfg.urdf`` (URDF or MJCF), the notes, the MJCF closures and
    the MJCF start: the joints' non-zero ``ref`` (their qpos0), or the keyframe's qpos
    (:func:`_mjcf_start`), and the MJCF as read (None for a URDF)."""
    if tree is not None or is_mjcf_file(cfg.urdf):
        tree = read_mjcf(cfg.urdf) if tree is None else tree
        notes = [MJCF_NOTE] if cfg.path is None else []
        closures = [ClosureSpec(e.name, e.type, e.frame_a, e.frame_b) for e in tree.equalities]
        ignored = [j for j in tree.springs if j not in cfg.passive_joints]
        if cfg.path is None and ignored:
            notes.append(f"spring/damper of {len(ignored)} actuated joint(s) ignored (only "
                         f"passive joints have them here): {', '.join(ignored)}")
        return (tree.pin_model, notes + list(tree.notes), closures, _mjcf_start(cfg, tree),
                tree)
    if cfg.mjcf_keyframe is not None:
        raise ModelError(f"{cfg.path}: mjcf_keyframe: {cfg.urdf.name} is not an MJCF file; "
                         "expected the key of an MJCF model's <keyframe>")
    if cfg.urdf.suffix == ".sdf":
        _raise_sdf(cfg.urdf)
    root = check_urdf(cfg.urdf)
    notes = [PLAIN_URDF_NOTE] if cfg.path is None else []
    massless = massless_links(root)
    if massless:
        notes.append(f"{len(massless)} frame-only link(s) with zero mass, loaded without "
                     f"inertia as pinocchio does: {', '.join(massless)}")
    try:
        model = pin.buildModelFromUrdf(str(cfg.urdf))
    except Exception as exc:  # pinocchio raises plain RuntimeError/ValueError from C++
        raise ModelError(f"{cfg.urdf}: pinocchio could not build the model ({exc})") from None
    return model, notes, [], {}, None


def _mjcf_start(cfg: ModelConfig, tree: MjcfModel) -> dict:
    """Joint name -> start [rad | m] of an MJCF tree: the qpos of the keyframe
    ``cfg.mjcf_keyframe`` (default: the first ``<key>`` with a qpos), else the joints'
    non-zero ``ref`` (qpos0)."""
    name = cfg.mjcf_keyframe
    if name is not None and name not in tree.keyframes:
        raise ModelError(f"{cfg.path}: mjcf_keyframe: no <key name={name!r}> with a qpos in "
                         f"{cfg.urdf.name}; expected one of: "
                         f"{', '.join(tree.keyframes) or '(none)'}")
    if name is None and tree.keyframes:
        name = next(iter(tree.keyframes))
    return dict(tree.refs) if name is None else dict(tree.keyframes[name])


#: What an MJCF file given without a model YAML is taken to be (see :func:`plain_mjcf_config`).
MJCF_NOTE = ("no model YAML: actuation from <actuator> (every joint without one), gravity from "
             "<option>, <equality> connect/weld as closures")


def _coordinate_names(model: pin.Model) -> tuple[list[str], list[str]]:
    joints, coords = [], []
    for jid in range(1, model.njoints):
        jname = model.names[jid]
        nv = model.joints[jid].nv
        joints.append(jname)
        coords.extend([jname] if nv == 1 else [f"{jname}.{k}" for k in range(nv)])
    return joints, coords


def build_model(cfg: ModelConfig, tree: MjcfModel | None = None) -> MultibodyModel:
    """Build a :class:`MultibodyModel` from a validated :class:`ModelConfig`.

    ``cfg.urdf`` is a URDF or an MJCF file (``tree``: the MJCF already read, optional);
    the MJCF's equality constraints are closures besides those of ``cfg``.
    """
    where = cfg.path or cfg.name
    model, notes, mjcf_closures, refs, tree = _tree(cfg, tree)
    cfg, kept = _mjcf_actuation(cfg, tree, where, notes)
    taken = {c.name for c in cfg.closures}
    dup = [c.name for c in mjcf_closures if c.name in taken]
    if dup:
        raise ModelError(f"{where}: closures: {dup[0]!r} is also an <equality> of "
                         f"{cfg.urdf.name}; expected distinct closure names")
    cfg_closures = tuple(cfg.closures) + tuple(mjcf_closures)
    model.gravity = pin.Motion(np.array(cfg.gravity), np.zeros(3))
    joint_names, coords = _coordinate_names(model)
    if model.nv == 0:
        raise ModelError(f"{cfg.urdf}: the URDF has no moving joint")

    def frame_of(name, key):
        if not model.existFrame(name):
            valid = ", ".join(sorted({f.name for f in model.frames if f.name != "universe"}))
            raise ModelError(f"{where}: {key}: unknown frame {name!r}; expected one of: {valid}")
        return model.frames[model.getFrameId(name)]

    passive = np.zeros(model.nv, dtype=bool)
    stiffness = np.zeros(model.nv)
    damping = np.zeros(model.nv)
    q_rest = pin.neutral(model)
    for jname, spec in cfg.passive_joints.items():
        key = f"passive_joints.{jname}"
        if not model.existJointName(jname):
            raise ModelError(f"{where}: {key}: unknown joint {jname!r}; expected one of: "
                             f"{', '.join(joint_names)}")
        joint = model.joints[model.getJointId(jname)]
        if joint.nv != 1:
            raise ModelError(f"{where}: {key}: passive joints must have one degree of freedom, "
                             f"{jname!r} has {joint.nv}")
        _apply_spring(spec, joint, passive, stiffness, damping, q_rest)

    B, inputs = _actuation(cfg, where, coords, passive)
    limits = None
    if kept is not None and tree is not None and tree.limits is not None:
        # the MJCF's own actuators: servos' PD terms (rest at q = 0, the q_rest of a hinge or
        # slide: MuJoCo's length L = gear q) and MuJoCo's limits of the inputs
        limits = tree.limits.select(kept)
        np.add.at(stiffness, limits.iv, -limits.gear ** 2 * limits.bias1)
        np.add.at(damping, limits.iv, -limits.gear ** 2 * limits.bias2)
        limits = limits if limits.limited else None

    closures = []
    for i, c in enumerate(cfg_closures):
        fa = frame_of(c.frame_a, f"closures[{i}].frame_a")
        fb = frame_of(c.frame_b, f"closures[{i}].frame_b")
        if fa.parentJoint == fb.parentJoint:
            body = model.names[fa.parentJoint]
            raise ModelError(
                f"{where}: closures[{i}]: frames {c.frame_a!r} and {c.frame_b!r} are on the same "
                f"body (joint {body!r}); a closure must join two different bodies"
            )
        closures.append(c)

    if cfg.end_effector is not None:
        frame_of(cfg.end_effector, "end_effector")

    _check_mass_matrix(model, where, coords)

    for arr in (passive, stiffness, damping, q_rest, B):
        arr.setflags(write=False)
    gravity = np.array(cfg.gravity)
    gravity.setflags(write=False)
    model_ = MultibodyModel(
        name=cfg.name,
        description=cfg.description,
        source=cfg.source,
        config_path=cfg.path,
        urdf_path=cfg.urdf,
        pin_model=model,
        joint_names=tuple(joint_names),
        coordinate_names=tuple(coords),
        passive=passive,
        stiffness=stiffness,
        damping=damping,
        q_rest=q_rest,
        B=B,
        input_names=inputs,
        closures=tuple(closures),
        gravity=gravity,
        end_effector=cfg.end_effector,
        notes=tuple(notes),
        actuator_limits=limits,
    )
    # an MJCF tree under a model YAML without initial_positions starts at its keyframe or
    # its qpos0
    initial = cfg.initial_positions or refs
    if not initial:
        return model_
    key = ("initial_positions" if cfg.initial_positions else
           "the MJCF keyframe's qpos" if tree is not None and tree.keyframes else
           "qpos0 (the MJCF joints' ref)")
    q_initial = _initial_configuration(model_, initial, where, key)
    q_initial.setflags(write=False)
    return replace(model_, q_initial=q_initial, initial_positions=dict(initial))


def _mjcf_actuation(cfg: ModelConfig, tree: MjcfModel | None, where, notes):
    """``(cfg, kept)``: the MJCF actuators that are the model's inputs (indices into
    ``tree.actuators``; None when the MJCF's actuators are not used) and ``cfg`` with their
    actuation map, input names and the passive joints they leave.

    A plain MJCF file (``cfg.path`` None; :func:`plain_mjcf_config`) uses all of them.  Under a
    model YAML: ``actuation.matrix`` replaces them (the YAML defines the inputs; the MJCF's
    gears, gains, servo terms and limits are not used); else ``actuation.inputs`` selects
    actuators by name (default: all of them), the actuators of joints the YAML lists in
    ``passive_joints`` are left out, and a joint no kept actuator drives is passive with the
    YAML's spring, or else the MJCF joint's ``stiffness``, ``damping``, ``springref``.
    """
    if tree is None or tree.actuators is None:
        return cfg, None
    acts = tree.actuators
    if cfg.path is None:
        return cfg, list(range(len(acts)))
    servo_note = [n for n in notes if n.startswith("servo actuator(s) ")]
    for note in servo_note:  # said again below for the servos kept
        notes.remove(note)
    if cfg.actuation_matrix is not None:
        notes.append(f"actuation.matrix given: the <actuator> section of {cfg.urdf.name} "
                     "(gears, gains, servo terms, limits) is not used")
        return cfg, None
    names = [name for name, _, _ in acts]
    if len(set(names)) != len(names):
        names = [f"{name}[{k}]" for k, name in enumerate(names)]
    if cfg.input_names is not None:
        kept = []
        for i, name in enumerate(cfg.input_names):
            key = f"actuation.inputs[{i}]"
            if name not in names:
                raise ModelError(f"{where}: {key}: {name!r} is not an actuator of "
                                 f"{cfg.urdf.name}; expected one of: {', '.join(names)} (or "
                                 "give actuation.matrix to define the inputs)")
            k = names.index(name)
            if acts[k][1] in cfg.passive_joints:
                raise ModelError(f"{where}: {key}: actuator {name!r} drives {acts[k][1]!r}, "
                                 "which passive_joints lists; expected one or the other")
            kept.append(k)
    else:
        kept = [k for k, (_, joint, _) in enumerate(acts) if joint not in cfg.passive_joints]
    servos = [joint for joint in tree.servos if any(acts[k][1] == joint for k in kept)]
    if servos and servo_note:
        notes.append(servo_note[0].split(": ")[0] + f": {', '.join(servos)}")
    left = [names[k] for k in range(len(acts)) if k not in kept]
    if left:
        notes.append(f"actuator(s) of {cfg.urdf.name} not used (not in actuation.inputs or on "
                     f"a joint of passive_joints): {', '.join(left)}")
    pm = tree.pin_model
    driven = {acts[k][1] for k in kept}
    passive = dict(cfg.passive_joints)
    for jid in range(1, pm.njoints):
        jname = pm.names[jid]
        if jname not in driven and jname not in passive and pm.joints[jid].nv == 1:
            passive[jname] = PassiveJointSpec(*tree.springs.get(jname, (0.0, 0.0, 0.0)))
    matrix = np.zeros((pm.nv, len(kept)))
    for col, k in enumerate(kept):
        matrix[pm.joints[pm.getJointId(acts[k][1])].idx_v, col] = acts[k][2]
    return replace(cfg, passive_joints=passive, actuation_matrix=matrix,
                   input_names=tuple(names[k] for k in kept)), kept


def _apply_spring(spec: PassiveJointSpec, joint, passive, stiffness, damping, q_rest):
    iv, iq = joint.idx_v, joint.idx_q
    passive[iv] = True
    stiffness[iv] = spec.stiffness
    damping[iv] = spec.damping
    if joint.nq == 1:
        q_rest[iq] = spec.rest
    else:  # continuous joint stored as (cos, sin)
        q_rest[iq:iq + 2] = (np.cos(spec.rest), np.sin(spec.rest))


def _actuation(cfg: ModelConfig, where, coords, passive):
    actuated = np.flatnonzero(~passive)
    if cfg.actuation_matrix is None:
        B = np.zeros((len(coords), actuated.size))
        B[actuated, np.arange(actuated.size)] = 1.0
    else:
        B = cfg.actuation_matrix.copy()
        if B.shape[0] != len(coords):
            raise ModelError(f"{where}: actuation.matrix: expected {len(coords)} rows (one per "
                             f"velocity coordinate: {', '.join(coords)}), got shape {B.shape}")
        if np.any(B[passive] != 0.0):
            raise ModelError(f"{where}: actuation.matrix: rows of passive joints must be zero "
                             f"({', '.join(np.asarray(coords)[passive])})")
    nu = B.shape[1]
    if cfg.input_names is not None:
        if len(cfg.input_names) != nu:
            raise ModelError(f"{where}: actuation.inputs: expected {nu} names (one per column of "
                             f"the actuation matrix), got {len(cfg.input_names)}")
        inputs = cfg.input_names
    elif cfg.actuation_matrix is None:
        inputs = tuple(coords[i] for i in actuated)
    else:
        inputs = tuple(f"u{k}" for k in range(nu))
    return B, inputs


def _check_mass_matrix(model: pin.Model, where, coords):
    data = model.createData()
    M = pin.crba(model, data, pin.neutral(model))
    try:
        np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        eigval, eigvec = np.linalg.eigh(M)
        idle = [coords[i] for i in np.flatnonzero(np.abs(eigvec[:, 0]) > 0.3)]
        raise ModelError(
            f"{where}: the mass matrix is singular at the neutral configuration (smallest "
            f"eigenvalue {eigval[0]:.3g}); joint(s) {', '.join(idle)} move no mass or inertia"
        ) from None
