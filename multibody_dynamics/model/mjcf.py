"""MuJoCo MJCF models: the kinematic tree from pinocchio, what pinocchio leaves out read here.

pinocchio 3/4 parses an MJCF file into a :class:`pinocchio.Model` (bodies, joints,
inertias; ``buildModelFromMJCF``), but on the installed versions it

* reads only the **first** ``<body>`` under ``<worldbody>`` (a four-bar with two bodies on
  the ground silently loses the second one),
* ignores ``<option gravity>`` and the ``<actuator>`` section,
* reads ``<equality><connect>`` with the anchor taken in the parent *joint's* frame and the
  second body's anchor as its negative, which is MuJoCo's meaning only in special cases, and
  drops ``<weld>``,
* shifts the limits of a joint with ``ref`` by it and reads a slide's range as an angle,
* merges the joints of a body that has several into one composite joint (whose coordinates
  have no joint names, so actuators cannot address them).

So the file is read here with :mod:`xml.etree`: the bodies under ``<worldbody>`` are moved
into one body without a joint (welded to the world, as pinocchio loads a root body without
joints), a body with several joints becomes a chain of bodies with one joint each, the
result is handed to pinocchio, and the rest becomes the suite's model data:

* ``<equality><connect>`` -> a ``spherical`` closure (3 rows: coincident points),
  ``<equality><weld>`` -> a ``weld`` closure (6 rows: coincident frames).  MuJoCo's meaning
  (XML reference, *equality*, and the residuals MuJoCo computes): a connect's ``anchor`` is a
  point of ``body1`` (its frame) and the point of ``body2`` is where that point is in the
  model's reference configuration ``qpos0``; a weld's ``anchor`` is a point of ``body2`` and
  the frame (anchor, body2's axes) sits at ``relpose`` (position, then quaternion w x y z) in
  ``body1``, or where it is at ``qpos0`` when relpose's quaternion is zero (the default);
  with ``site1``/``site2`` the two sites coincide (connect: their origins; weld: their
  frames).  The reading of relpose (the anchor frame's pose in body1, not body2's) is the
  one MuJoCo 3/4 evaluates, which the XML reference words loosely.  Two frames are added to
  the model per constraint (``<name>_a`` on body1, ``<name>_b`` on body2 or the world) that
  coincide when the constraint holds.
* ``<actuator>`` entries with a joint transmission give the actuation map ``B``; the joints
  no actuator drives are passive, with the joint's ``stiffness``, ``damping`` and
  ``springref`` as their spring.  Without an ``<actuator>`` section every joint is actuated,
  as for a plain URDF.  MuJoCo's actuator force is ``gain * ctrl + bias1 * L + bias2 * L'``
  with the length ``L = gear * q`` and the joint force ``gear`` times it (XML reference,
  *actuator*; ``mju_muscleGain``-free kinds only), so an actuator adds ``gear * gain`` to
  ``B`` (the input is its ``ctrl``) and ``-gear^2 bias1``, ``-gear^2 bias2`` to the joint's
  stiffness (rest at q = 0) and damping.  ``<motor>``: gain 1, no bias; ``<position kp kv>``:
  gain kp, bias (-kp, -kv) (a PD servo to ``ctrl``); ``<velocity kv>``: gain kv, bias
  (0, -kv); ``<general>`` with ``gaintype="fixed"`` (gain ``gainprm[0]``), ``biastype``
  ``"none"`` or ``"affine"`` (``biasprm[1:3]``, and ``biasprm[0] = 0``) and
  ``dyntype="none"``.  Actuators with activation dynamics (``dyntype``, ``timeconst``,
  ``intvelocity``, ``cylinder``, ``muscle``), a ctrl-dependent gain (``damper``,
  ``gaintype="affine"``), ``dampratio`` or a constant bias force are refused, naming the
  actuator.  ``ctrlrange``, ``forcerange`` and the joints' ``actuatorfrcrange`` are kept as
  :class:`~.actuator_limits.ActuatorLimits` and enforced as MuJoCo does (see there).
* ``<keyframe>``: the ``qpos`` of the first ``<key>`` (or of the key a model YAML names with
  ``mjcf_keyframe``) is the default start (``initial_positions``) in place of ``qpos0``; its
  ``qvel``, ``act``, ``ctrl`` and ``time`` are not used.
* ``<option gravity>`` is the gravity (MuJoCo's default ``0 0 -9.81``; zero with
  ``<flag gravity="disable"/>``).

MuJoCo enforces equality constraints softly (``solref``, ``solimp``); here they are ideal
constraints, held exactly by the projection methods, so a MuJoCo simulation of the same file
differs by its constraint softness.

Coordinates are MuJoCo's ``qpos`` (as pinocchio reads them): a hinge or slide with a
``ref`` is at the pose the XML draws when ``q = ref``; the equalities are evaluated there
(``qpos0``), and ``qpos0`` is the model's default start (``initial_positions``).
"""

from __future__ import annotations

import os
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from ..errors import ModelError
from .actuator_limits import ActuatorLimits

#: File suffixes read as MJCF (``.xml`` only when the root element is ``<mujoco>``).
MJCF_SUFFIXES = (".mjcf", ".xml")
#: File suffixes read as SDF.
SDF_SUFFIXES = (".sdf",)
#: The body that carries the bodies of ``<worldbody>`` (welded to the world).
WORLD_BODY = "mjcf_world"

_ACTUATOR_TAGS = ("motor", "general", "position", "velocity", "intvelocity", "damper",
                  "cylinder", "muscle", "adhesion", "plugin")
#: What :func:`_actuator_law` maps, for the one-line refusal of the rest.
_SUPPORTED_ACTUATORS = ("motor; position (kp, kv); velocity (kv); general with "
                        "gaintype=fixed, biastype=none|affine (biasprm[0] = 0) and dyntype=none")


def is_mjcf_file(path: str | Path) -> bool:
    """True for a ``.mjcf`` file or an ``.xml`` file whose root element is ``<mujoco>``."""
    p = Path(path)
    if p.suffix == ".mjcf":
        return True
    if p.suffix != ".xml" or not p.is_file():
        return False
    try:
        for _, elem in ET.iterparse(str(p), events=("start",)):
            return elem.tag == "mujoco"
    except ET.ParseError:
        return False
    return False


def sdf_unsupported(path: str | Path) -> ModelError | None:
    """The error to raise for an SDF file when this pinocchio cannot parse SDF, else None."""
    if getattr(pin, "WITH_SDFORMAT", False):
        return None
    return ModelError(
        f"{path}: SDF needs pinocchio built with sdformat, and this pinocchio "
        f"{pin.__version__} has none (pin.WITH_SDFORMAT is False); convert the model to URDF "
        "(`gz sdf -p model.sdf > model.urdf`) or MJCF and load that")


@dataclass(frozen=True)
class MjcfEquality:
    """One ``<equality>`` constraint, as the frames of a closure (see the module docstring)."""

    name: str
    type: str  # "spherical" (connect) or "weld"
    frame_a: str
    frame_b: str


@dataclass(frozen=True)
class MjcfModel:
    """What an MJCF file says, in the suite's terms.

    Attributes
    ----------
    name : str
        ``<mujoco model=...>`` (the file stem if absent).
    pin_model : pinocchio.Model
        The tree, with the constraint frames added; gravity not set yet.
    gravity : tuple of 3 float
        [m/s^2] from ``<option gravity>``.
    equalities : tuple of MjcfEquality
    actuators : tuple of (str, str, float) or None
        (input name, joint name, ``gear * gain``: the entry of ``B``) per actuator; None
        without an ``<actuator>`` section.
    servos : dict of str to (stiffness, damping)
        Per actuated joint whose actuators have a bias (position and velocity servos): the
        joint stiffness [N m/rad | N/m] (rest at q = 0) and damping [N m s/rad | N s/m]
        their bias adds.
    limits : ActuatorLimits or None
        Per actuator (in the order of ``actuators``): gear, force law and MuJoCo's
        ``ctrlrange``, ``forcerange`` and the joints' ``actuatorfrcrange`` (None without an
        ``<actuator>`` section).
    keyframes : dict of str to dict of str to float
        Per ``<key>`` (its name, ``key<k>`` when unnamed; in file order): the hinge and slide
        positions of its ``qpos`` [rad | m] by joint name (past the end of a short ``qpos``
        only the joints with a ``ref``: the others are at 0 in MuJoCo, and in a closed loop
        they are solved by the assembly).
    springs : dict of str to (stiffness, damping, rest)
        Per joint with a non-zero stiffness or damping [N m/rad | N/m, N m s/rad | N s/m,
        rad | m].
    refs : dict of str to float
        Hinges and slides with a non-zero ``ref`` [rad | m]: their position in ``qpos0``.
    notes : tuple of str
    """

    name: str
    pin_model: pin.Model
    gravity: tuple[float, float, float]
    equalities: tuple[MjcfEquality, ...]
    actuators: tuple[tuple[str, str, float], ...] | None
    springs: dict
    refs: dict
    notes: tuple[str, ...]
    servos: dict = field(default_factory=dict)
    keyframes: dict = field(default_factory=dict)
    limits: ActuatorLimits | None = None


def _floats(text, n, where, path):
    try:
        values = [float(x) for x in str(text).split()]
    except ValueError:
        values = []
    if len(values) != n:
        raise ModelError(f"{path}: {where}: expected {n} numbers, got {text!r}")
    return np.array(values)


class _Defaults:
    """Attribute lookup through MuJoCo's ``<default>`` classes (``class``/``childclass``)."""

    def __init__(self, root: ET.Element):
        self.classes: dict[str, tuple[ET.Element, str | None]] = {}
        top = root.find("default")
        if top is not None:
            self._collect(top, "main", None)

    def _collect(self, elem, name, parent):
        self.classes[name] = (elem, parent)
        for child in elem.findall("default"):
            self._collect(child, child.get("class", name), name)

    def get(self, elem: ET.Element, tag: str, key: str, cls: str | None, default=None):
        if elem.get(key) is not None:
            return elem.get(key)
        name: str | None = elem.get("class", cls) or "main"
        while name is not None and name in self.classes:
            node, parent = self.classes[name]
            found = node.find(tag)
            if found is not None and found.get(key) is not None:
                return found.get(key)
            name = parent
        return default


def _inline_includes(elem: ET.Element, folder: Path, path: Path, depth: int = 0) -> None:
    """Replace every ``<include file=...>`` by the children of the included ``<mujoco>``."""
    if depth > 20:
        raise ModelError(f"{path}: <include> nested more than 20 deep (a cycle?)")
    for k, child in enumerate(list(elem)):
        if child.tag == "include":
            target = folder / child.get("file", "")
            try:
                sub = ET.parse(str(target)).getroot()
            except (OSError, ET.ParseError) as exc:
                raise ModelError(f"{path}: <include file={child.get('file')!r}>: {exc}") from None
            _inline_includes(sub, target.parent, target, depth + 1)
            elem.remove(child)
            for j, grand in enumerate(list(sub)):
                elem.insert(k + j, grand)
        else:
            _inline_includes(child, folder, path, depth)


def _read_tree(path: Path) -> ET.Element:
    try:
        root = ET.parse(str(path)).getroot()
    except ET.ParseError as exc:
        raise ModelError(f"{path}: malformed XML ({exc})") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot read the file ({exc.strerror})") from None
    if root.tag != "mujoco":
        raise ModelError(f"{path}: not an MJCF file: the root element is <{root.tag}>, "
                         "expected <mujoco>")
    _inline_includes(root, path.parent, path)
    return root


def _worldbody(root: ET.Element) -> ET.Element:
    world = root.find("worldbody")
    if world is None:
        raise ModelError("MJCF without <worldbody>")  # checked with the file name before
    return world


_FRAME_KEYS = ("pos", "quat", "euler", "axisangle", "xyaxes", "zaxis")


def _split_joints(parent: ET.Element) -> None:
    """Give each joint of a body with several joints its own body: ``<body B><joint j1/>
    <joint j2/>...`` becomes ``<body B__j1><joint j1/><body B><joint j2/>...``, the outer
    body at B's pose and the inner ones at the identity.  MuJoCo applies the joints of a body
    one after the other in its frame, which is what the nested bodies do; pinocchio would
    merge them into one composite joint, whose coordinates have no joint names."""
    for k, body in enumerate(list(parent)):
        if body.tag != "body":
            continue
        _split_joints(body)
        joints = body.findall("joint")
        if len(joints) < 2:
            continue
        name = body.get("name") or f"body{k}"
        outer = ET.Element("body", {key: body.attrib.pop(key) for key in _FRAME_KEYS
                                    if key in body.attrib})
        shell = outer
        for i, joint in enumerate(joints[:-1]):
            if i:
                inner = ET.SubElement(shell, "body")
                shell = inner
            shell.set("name", f"{name}__{joint.get('name') or i}")
            childclass = body.get("childclass")
            if childclass is not None:
                shell.set("childclass", childclass)
            body.remove(joint)
            shell.append(joint)
        parent.remove(body)
        parent.insert(k, outer)
        shell.append(body)


def _normalized(root: ET.Element, path: Path, name: str) -> str:
    """The XML pinocchio reads: one root body carrying the bodies and sites of <worldbody>,
    one joint per body (:func:`_split_joints`), a model name, mesh/asset folders made
    absolute, and no ``<keyframe>``."""
    root.set("model", name)
    world = root.find("worldbody")
    if world is None or world.find("body") is None:
        raise ModelError(f"{path}: <worldbody> has no <body>: nothing moves")
    carrier = ET.Element("body", {"name": WORLD_BODY})
    for child in list(world):
        if child.tag in ("body", "site", "frame"):
            world.remove(child)
            carrier.append(child)
    world.insert(0, carrier)
    _split_joints(carrier)
    for section in root.findall("keyframe"):  # read here (_keyframes); pinocchio 4.1 refuses
        root.remove(section)                  # a qpos shorter than nq, which MuJoCo pads
    compiler = root.find("compiler")
    if compiler is None:
        compiler = ET.SubElement(root, "compiler")
        root.remove(compiler)
        root.insert(0, compiler)
    for key in ("meshdir", "texturedir", "assetdir"):
        folder = compiler.get(key)
        if folder is not None and not os.path.isabs(folder):
            compiler.set(key, str((path.parent / folder).resolve()))
    if compiler.get("meshdir") is None:
        compiler.set("meshdir", str(compiler.get("assetdir") or path.parent.resolve()))
    return ET.tostring(root, encoding="unicode")


def _pin_from_xml(xml: str, path: Path) -> pin.Model:
    with tempfile.TemporaryDirectory(prefix="multibody_mjcf_") as tmp:
        file = Path(tmp) / "model.xml"
        file.write_text(xml)
        try:
            return pin.buildModelFromMJCF(str(file))
        except Exception as exc:  # pinocchio raises plain RuntimeError/ValueError from C++
            msg = " ".join(str(exc).split())
            raise ModelError(f"{path}: pinocchio could not build the model ({msg})") from None


def _angle_scale(root: ET.Element) -> float:
    compiler = root.find("compiler")
    unit = "degree" if compiler is None else compiler.get("angle", "degree")
    return np.pi / 180.0 if unit == "degree" else 1.0


def _joints(root: ET.Element, defaults: _Defaults, path: Path, model: pin.Model):
    """{joint name: (element, default class)} of the named joints, checked against pinocchio."""
    joints = {}

    def walk(body, cls):
        cls = body.get("childclass", cls)
        for j in body.findall("joint"):
            if j.get("name"):
                joints[j.get("name")] = (j, j.get("class", cls))
        for child in body.findall("body"):
            walk(child, cls)

    for body in _worldbody(root).findall("body"):
        walk(body, None)
    scale = _angle_scale(root)
    for name, (j, cls) in joints.items():
        jtype = defaults.get(j, "joint", "type", cls, "hinge")
        j.set("_type", str(jtype))
        j.set("_scale", str(scale if jtype in ("hinge", "ball") else 1.0))
        try:
            ref = float(defaults.get(j, "joint", "ref", cls, "0")) * float(j.get("_scale"))
        except ValueError:
            raise ModelError(f"{path}: joint {name!r}: ref must be a number") from None
        j.set("_ref", repr(ref))
    return joints


def _qpos0_and_limits(joints, defaults, model: pin.Model, notes) -> tuple[np.ndarray, dict]:
    """MuJoCo's reference configuration ``qpos0`` in pinocchio's coordinates, the non-zero
    ``ref`` values, and the position limits of hinges and slides set from ``range``.

    pinocchio's coordinates are MuJoCo's ``qpos`` (a hinge with ``ref`` is at the pose the XML
    draws when ``q = ref``, as in MuJoCo); pinocchio 4.1 shifts the range of such joints by
    ``ref`` and converts a slide's range as an angle, so the limits are set here.
    """
    q0 = pin.neutral(model)
    refs = {}
    for name, (j, cls) in joints.items():
        if not model.existJointName(name):
            continue  # a joint of a composite (several joints in one body)
        joint = model.joints[model.getJointId(name)]
        if joint.nq != 1:
            continue
        ref = float(j.get("_ref"))
        if ref:
            q0[joint.idx_q] = refs[name] = ref
        limited = defaults.get(j, "joint", "limited", cls, "auto")
        rng = defaults.get(j, "joint", "range", cls)
        if rng is not None and limited != "false":
            lo, hi = (float(x) * float(j.get("_scale")) for x in str(rng).split()[:2])
            model.lowerPositionLimit[joint.idx_q] = lo
            model.upperPositionLimit[joint.idx_q] = hi
    if refs:
        notes.append(f"joint(s) with ref: {', '.join(refs)}; q is MuJoCo's qpos, the drawn "
                     "pose (qpos0) is q = ref, and the default start")
    return q0, refs


def _springs(joints, defaults, path):
    springs = {}
    for name, (j, cls) in joints.items():
        k = float(defaults.get(j, "joint", "stiffness", cls, "0"))
        d = float(defaults.get(j, "joint", "damping", cls, "0"))
        rest = float(defaults.get(j, "joint", "springref", cls, "0")) * float(j.get("_scale"))
        if k < 0 or d < 0:
            raise ModelError(f"{path}: joint {name!r}: stiffness and damping must be >= 0, got "
                             f"{k:g} and {d:g}")
        if k or d:
            springs[name] = (k, d, rest)
    return springs


def _actuator_law(act: ET.Element, defaults: _Defaults, label: str, path: Path):
    """``(gain, bias1, bias2)`` of MuJoCo's actuator force ``gain * ctrl + bias1 * L +
    bias2 * L'`` (L the actuator length), or a :class:`ModelError` naming the actuator."""
    cls = act.get("class")

    def text(key, default):
        return str(defaults.get(act, act.tag, key, cls, default))

    def numbers(key, default, n):
        try:
            values = [float(x) for x in text(key, default).split()]
        except ValueError:
            raise ModelError(f"{path}: actuator {label!r}: {key} must be numbers, got "
                             f"{text(key, default)!r}") from None
        return (values + [0.0] * n)[:n]

    def refuse(what):
        return ModelError(f"{path}: actuator {label!r} (<{act.tag}>): {what} is not supported; "
                          f"supported: {_SUPPORTED_ACTUATORS}")

    if act.tag == "motor":
        return 1.0, 0.0, 0.0
    if act.tag == "position":
        if numbers("timeconst", "0", 1)[0] > 0:
            raise refuse("timeconst > 0 (activation dynamics)")
        if act.get("dampratio") is not None:
            raise refuse("dampratio (a damping from the reflected inertia)")
        kp, kv = numbers("kp", "1", 1)[0], numbers("kv", "0", 1)[0]
        return kp, -kp, -kv
    if act.tag == "velocity":
        kv = numbers("kv", "1", 1)[0]
        return kv, 0.0, -kv
    if act.tag != "general":
        raise refuse("this actuator kind")
    for key, allowed in (("dyntype", ("none",)), ("gaintype", ("fixed",)),
                         ("biastype", ("none", "affine"))):
        value = text(key, allowed[0])
        if value not in allowed:
            raise refuse(f"{key}={value!r}")
    gain = numbers("gainprm", "1", 1)[0]
    if text("biastype", "none") == "none":
        return gain, 0.0, 0.0
    bias = numbers("biasprm", "0", 3)
    if bias[0] != 0.0:
        raise refuse(f"a constant bias force (biasprm[0] = {bias[0]:g})")
    return gain, bias[1], bias[2]


def _range(text, where, path):
    values = str(text).split()
    try:
        lo, hi = float(values[0]), float(values[1])
    except (ValueError, IndexError):
        raise ModelError(f"{path}: {where}: expected two numbers (lower upper), got "
                         f"{text!r}") from None
    return lo, hi


def _limit(flag, text, what, where, path, autolimits, notes):
    """``(lower, upper)`` of a MuJoCo range attribute ``what`` (``ctrlrange``, ``forcerange``,
    ``actuatorfrcrange``) whose limited flag is ``flag`` (``"true"``, ``"false"``, ``"auto"``),
    or (-inf, inf) where it does not limit; MuJoCo's compiler rules (XML reference,
    *compiler/autolimits*): "auto" limits when a range is given and ``autolimits`` holds (an
    error without autolimits), "true" needs ``lower < upper``; under "auto" an empty or
    inverted range does not limit (a note says so)."""
    free = (-np.inf, np.inf)
    limited = what.replace("range", "limited")  # ctrllimited, actuatorfrclimited, ...
    flag = str(flag or "auto")
    if flag not in ("true", "false", "auto"):
        raise ModelError(f"{path}: {where}: {limited}={flag!r}; expected true, false or auto")
    if flag == "false":
        return free
    if text is None:
        if flag == "true":
            raise ModelError(f"{path}: {where}: {limited}=\"true\" without a {what}; expected "
                             "a range 'lower upper' with lower < upper")
        return free
    lo, hi = _range(text, f"{where}: {what}", path)
    if flag == "auto" and not autolimits:
        raise ModelError(f"{path}: {where}: has a {what} but no {limited} (MuJoCo refuses "
                         f"this with <compiler autolimits=\"false\">); set {limited}=\"true\" "
                         "or \"false\"")
    if not lo < hi:
        if flag == "true":
            raise ModelError(f"{path}: {where}: {what} {text!r}: expected lower < upper")
        notes.append(f"{where}: {what} {text!r} has lower >= upper: not a limit (as in MuJoCo "
                     f"with {limited}=\"auto\")")
        return free
    return lo, hi


def _actuators(root, defaults, path, model, notes):  # noqa: C901 (one branch per attribute)
    """``(actuators, servos, limits)`` of :class:`MjcfModel` (None, {}, None without an
    <actuator>)."""
    section = root.find("actuator")
    if section is None:
        return None, {}, None
    compiler, option = root.find("compiler"), root.find("option")
    autolimits = compiler is None or compiler.get("autolimits", "true") != "false"
    flag = None if option is None else option.find("flag")
    clampctrl = flag is None or flag.get("clampctrl", "enable") != "disable"
    out: list[tuple[str, str, float]] = []
    servos: dict[str, tuple[float, float]] = {}
    laws: list[tuple[float, ...]] = []  # per actuator: iq, iv, gear, gain, b1, b2, ranges
    for k, act in enumerate(section):
        if act.tag not in _ACTUATOR_TAGS:
            continue
        label = act.get("name") or f"{act.tag}[{k}]"
        joint = act.get("joint") or act.get("jointinparent")
        if joint is None:
            raise ModelError(f"{path}: actuator {label!r}: only joint transmissions are "
                             "supported (joint=...); tendon, site and body actuators are not")
        if not model.existJointName(joint) or model.joints[model.getJointId(joint)].nv != 1:
            raise ModelError(
                f"{path}: actuator {label!r}: joint {joint!r} is not a 1-DoF joint of the model "
                "(hinge or slide expected; pinocchio merges the joints of a body that has "
                "several into one composite joint, which actuators cannot address)")
        cls = act.get("class")
        gear = float(str(defaults.get(act, act.tag, "gear", cls, "1")).split()[0])
        gain, bias1, bias2 = _actuator_law(act, defaults, label, path)
        out.append((act.get("name") or joint, joint, gear * gain))
        if bias1 or bias2:
            stiffness, damping = -gear * gear * bias1, -gear * gear * bias2
            if stiffness < 0 or damping < 0:
                raise ModelError(f"{path}: actuator {label!r}: its bias gives the joint a "
                                 f"negative stiffness or damping ({stiffness:g}, {damping:g}); "
                                 "expected kp, kv >= 0 (biasprm[1], biasprm[2] <= 0)")
            k0, d0 = servos.get(joint, (0.0, 0.0))
            servos[joint] = (k0 + stiffness, d0 + damping)
        where = f"actuator {label!r}"
        ctrl = _limit(defaults.get(act, act.tag, "ctrllimited", cls),
                      defaults.get(act, act.tag, "ctrlrange", cls), "ctrlrange", where, path,
                      autolimits, notes)
        force = _limit(defaults.get(act, act.tag, "forcelimited", cls),
                       defaults.get(act, act.tag, "forcerange", cls), "forcerange", where, path,
                       autolimits, notes)
        if not clampctrl:
            ctrl = (-np.inf, np.inf)
        jm = model.joints[model.getJointId(joint)]
        laws.append((jm.idx_q, jm.idx_v, gear, gain, bias1, bias2, *ctrl, *force))
    if servos:
        notes.append("servo actuator(s) as joint stiffness and damping with the input as their "
                     f"ctrl (setpoint): {', '.join(servos)}")
    if not clampctrl:
        notes.append("<flag clampctrl=\"disable\"/>: ctrlrange not applied, as in MuJoCo")
    if not out:
        return None, {}, None
    a = np.array(laws, float).reshape(len(laws), 10)
    free = np.full(model.nv, np.inf)
    limits = ActuatorLimits(tuple(name for name, _, _ in out), a[:, 0].astype(int),
                            a[:, 1].astype(int), a[:, 2], a[:, 3], a[:, 4], a[:, 5], a[:, 6],
                            a[:, 7], a[:, 8], a[:, 9], -free, free.copy())
    return tuple(out), servos, limits


def _joint_force_limits(joints, defaults, path, model, limits, root, notes):
    """``limits`` with each joint's ``actuatorfrclimited``/``actuatorfrcrange`` (MuJoCo's
    clamp of the total actuator force on the joint), and pinocchio's effort limits cleared:
    pinocchio 4.1 reads ``actuatorfrcrange`` as a symmetric bound on the joint force, which
    the suite would take for a bound on the inputs (they are ctrl, scaled by gear and gain)."""
    model.effortLimit[:] = np.inf
    compiler = root.find("compiler")
    autolimits = compiler is None or compiler.get("autolimits", "true") != "false"
    lower, upper = np.full(model.nv, -np.inf), np.full(model.nv, np.inf)
    for name, (j, cls) in joints.items():
        if not model.existJointName(name):
            continue
        joint = model.joints[model.getJointId(name)]
        lo, hi = _limit(defaults.get(j, "joint", "actuatorfrclimited", cls),
                        defaults.get(j, "joint", "actuatorfrcrange", cls), "actuatorfrcrange",
                        f"joint {name!r}", path, autolimits, notes)
        if joint.nv == 1:
            lower[joint.idx_v], upper[joint.idx_v] = lo, hi
    if limits is None:
        return None
    return ActuatorLimits(limits.names, limits.iq, limits.iv, limits.gear, limits.gain,
                          limits.bias1, limits.bias2, limits.ctrl_lower, limits.ctrl_upper,
                          limits.force_lower, limits.force_upper, lower, upper)


def _keyframes(root: ET.Element, joints, path: Path, model: pin.Model, refs, notes) -> dict:
    """{key name: {joint: qpos value}} of ``<keyframe>`` (hinges and slides; MuJoCo's qpos
    order is the depth-first order of the joints in the file, as pinocchio's here)."""
    section = root.find("keyframe")
    if section is None:
        return {}
    sizes = {"free": 7, "ball": 4, "hinge": 1, "slide": 1}
    layout = []  # (joint name or None, its qpos size, hinge/slide?)
    for body in _worldbody(root).iter("body"):  # bodies in pre-order, joints in file order
        for j in body:
            if j.tag not in ("joint", "freejoint"):
                continue
            name = j.get("name")
            jtype = "free" if j.tag == "freejoint" else (
                joints[name][0].get("_type") if name in joints else j.get("type", "hinge"))
            layout.append((name, sizes.get(str(jtype), 1), jtype in ("hinge", "slide")))
    nq = sum(size for _, size, _ in layout)
    out: dict = {}
    for k, key in enumerate(section.findall("key")):
        name = key.get("name") or f"key{k}"
        if key.get("qpos") is None:
            continue  # a key of velocities or controls only: qpos0
        try:
            qpos = [float(x) for x in str(key.get("qpos")).split()]
        except ValueError:
            qpos = [np.nan] * (nq + 1)
        if not qpos or len(qpos) > nq or not np.all(np.isfinite(qpos)):
            raise ModelError(f"{path}: keyframe <key name={name!r}> qpos: expected at most {nq} "
                             f"numbers (MuJoCo's qpos), got {key.get('qpos')!r}")
        values, at, skipped = {}, 0, False
        for joint, size, scalar in layout:
            if scalar and joint is not None and model.existJointName(joint):
                if at < len(qpos):
                    values[joint] = float(qpos[at])
                elif joint in refs:  # a short qpos: the rest is qpos0, as in MuJoCo (joints
                    values[joint] = refs[joint]  # at 0 are left to the assembly of a loop)
            elif at < len(qpos):
                skipped = True
            at += size
        if skipped:
            notes.append(f"keyframe {name!r}: only hinge and slide positions are used")
        out[name] = values
    return out


def _body_frame(model: pin.Model, body: str, path: Path, where: str) -> int:
    if body == "world":
        return 0
    if not model.existBodyName(body):
        raise ModelError(f"{path}: {where}: unknown body {body!r}; expected one of: "
                         f"{', '.join(f.name for f in model.frames if f.type == pin.BODY)}")
    return model.getBodyId(body)


def _site_frame(model: pin.Model, site: str, path: Path, where: str) -> int:
    if not model.existFrame(site):
        raise ModelError(f"{path}: {where}: unknown site {site!r}")
    return model.getFrameId(site)


def _relpose(text, path, where):
    values = _floats(text, 7, where, path)
    if not np.any(values[3:]):
        return None  # quaternion part zero (MuJoCo's default): the pose at qpos0
    w, x, y, z = values[3:] / np.linalg.norm(values[3:])
    return pin.SE3(pin.Quaternion(w, x, y, z).toRotationMatrix(), values[:3])


def _add_frame(model, name, parent_frame, oMf, data):
    """Add an operational frame with world placement ``oMf`` at the configuration of ``data``."""
    f = model.frames[parent_frame]
    placement = data.oMi[f.parentJoint].actInv(oMf)
    model.addFrame(pin.Frame(name, f.parentJoint, parent_frame, placement, pin.FrameType.OP_FRAME))


def _equalities(root, path, model, q0, notes):  # noqa: C901 (one branch per MJCF form)
    section = root.find("equality")
    if section is None:
        return ()
    data = model.createData()
    pin.framesForwardKinematics(model, data, q0)
    oMf = [data.oMf[i].copy() for i in range(model.nframes)]
    taken = {f.name for f in model.frames}
    out = []
    for k, eq in enumerate(section):
        name = eq.get("name") or f"{eq.tag}{k}"
        where = f"equality <{eq.tag} name={name!r}>"
        if eq.tag not in ("connect", "weld"):
            raise ModelError(f"{path}: {where}: type {eq.tag!r} is not supported; expected "
                             "connect or weld")
        if eq.get("active", "true") == "false":
            notes.append(f"{where} is inactive (active=false): not a closure")
            continue
        fa_name, fb_name = f"{name}_a", f"{name}_b"
        if fa_name in taken or fb_name in taken:
            raise ModelError(f"{path}: {where}: frames {fa_name!r}/{fb_name!r} exist already; "
                             "rename the constraint")
        if eq.get("site1") is not None or eq.get("site2") is not None:
            if eq.get("site1") is None or eq.get("site2") is None:
                raise ModelError(f"{path}: {where}: give both site1 and site2, or body1/body2")
            ia = _site_frame(model, eq.get("site1"), path, where)
            ib = _site_frame(model, eq.get("site2"), path, where)
            oMa, oMb = oMf[ia], oMf[ib]
            if eq.tag == "connect":  # sites coincide in position only
                oMb = pin.SE3(oMa.rotation, oMb.translation)
        else:
            if eq.get("body1") is None:
                raise ModelError(f"{path}: {where}: missing body1 (or site1/site2)")
            ia = _body_frame(model, eq.get("body1"), path, where)
            ib = _body_frame(model, eq.get("body2", "world"), path, where)
            anchor = _floats(eq.get("anchor", "0 0 0"), 3, f"{where}: anchor", path)
            if eq.tag == "connect":  # anchor in body1, satisfied at qpos0
                oMa = oMf[ia] * pin.SE3(np.eye(3), anchor)
                oMb = oMa
            else:  # weld: anchor in body2; its pose in body1 is relpose, else at qpos0
                oMb = oMf[ib] * pin.SE3(np.eye(3), anchor)
                rel = _relpose(eq.get("relpose", "0 1 0 0 0 0 0"), path, f"{where}: relpose")
                oMa = oMb if rel is None else oMf[ia] * rel
        if model.frames[ia].parentJoint == model.frames[ib].parentJoint:
            raise ModelError(f"{path}: {where}: both ends are on the same rigid body; a "
                             "closure must join two different bodies")
        _add_frame(model, fa_name, ia, oMa, data)
        _add_frame(model, fb_name, ib, oMb, data)
        taken |= {fa_name, fb_name}
        out.append(MjcfEquality(name, "spherical" if eq.tag == "connect" else "weld",
                                fa_name, fb_name))
    return tuple(out)


def _check_bodies(root: ET.Element, model: pin.Model, path: Path) -> None:
    named = [str(b.get("name")) for b in _worldbody(root).iter("body") if b.get("name")]
    missing = [b for b in named if not model.existBodyName(b)]
    if missing:
        raise ModelError(f"{path}: pinocchio did not load the body/bodies {', '.join(missing)} "
                         "(an MJCF feature it does not parse)")


def read_mjcf(path: str | Path) -> MjcfModel:
    """Read the MJCF file at ``path`` (see the module docstring for what is taken from it).

    Raises
    ------
    ModelError
        Naming the file and the element for every part that cannot be read (unknown
        bodies or joints, unsupported equality or actuator kinds).
    """
    path = Path(path)
    root = _read_tree(path)
    name = root.get("model") or path.stem
    defaults = _Defaults(root)
    notes: list[str] = []
    option = root.find("option")
    gravity = (0.0, 0.0, -9.81)
    if option is not None and option.get("gravity") is not None:
        gravity = tuple(_floats(option.get("gravity"), 3, "option gravity", path).tolist())
    flag = None if option is None else option.find("flag")
    if flag is not None and flag.get("gravity") == "disable":
        gravity = (0.0, 0.0, 0.0)
    joints_root = _read_tree(path)  # a second copy: _normalized rewrites the first one
    model = _pin_from_xml(_normalized(root, path, name), path)
    _check_bodies(joints_root, model, path)
    joints = _joints(joints_root, defaults, path, model)
    actuators, servos, limits = _actuators(joints_root, defaults, path, model, notes)
    limits = _joint_force_limits(joints, defaults, path, model, limits, joints_root, notes)
    springs = _springs(joints, defaults, path)
    q0, refs = _qpos0_and_limits(joints, defaults, model, notes)
    equalities = _equalities(joints_root, path, model, q0, notes)
    keyframes = _keyframes(joints_root, joints, path, model, refs, notes)
    return MjcfModel(name, model, gravity, equalities, actuators, springs, refs, tuple(notes),
                     servos, keyframes, limits)


def _geom_rotation(geom: ET.Element, scale: float, path: Path) -> np.ndarray:
    """Orientation of a geom in its body (``quat``, ``axisangle``, ``euler`` (x y z,
    rotating axes: MJCF's default ``eulerseq``), ``zaxis``; identity otherwise)."""
    if geom.get("quat") is not None:
        w, x, y, z = _floats(geom.get("quat"), 4, "geom quat", path)
        return pin.Quaternion(w, x, y, z).normalized().toRotationMatrix()
    if geom.get("axisangle") is not None:
        a = _floats(geom.get("axisangle"), 4, "geom axisangle", path)
        return pin.AngleAxis(a[3] * scale, a[:3] / np.linalg.norm(a[:3])).toRotationMatrix()
    if geom.get("euler") is not None:
        e = _floats(geom.get("euler"), 3, "geom euler", path) * scale
        R = np.eye(3)
        for k in range(3):
            R = R @ pin.AngleAxis(e[k], np.eye(3)[k]).toRotationMatrix()
        return R
    if geom.get("zaxis") is not None:
        z = _floats(geom.get("zaxis"), 3, "geom zaxis", path)
        return segment_placement(np.zeros(3), z / np.linalg.norm(z)).rotation
    return np.eye(3)


def segment_placement(a: np.ndarray, b: np.ndarray) -> pin.SE3:
    """Placement whose z axis runs from a to b, centred between them."""
    d = b - a
    n = np.linalg.norm(d)
    z = d / n if n > 1e-12 else np.array([0.0, 0.0, 1.0])
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    return pin.SE3(np.column_stack([x, np.cross(z, x), z]), 0.5 * (a + b))


def _geom_shape(geom: ET.Element, defaults: _Defaults, cls, scale: float, path: Path):
    """(kind, dims, SE3 in the body) of a primitive geom (box sizes full, cylinder (radius,
    length), sphere (radius)), or None for a mesh, plane, height field or SDF."""
    gtype = defaults.get(geom, "geom", "type", cls, "sphere")
    size = [float(x) for x in str(defaults.get(geom, "geom", "size", cls, "0")).split()]
    fromto = defaults.get(geom, "geom", "fromto", cls)
    if gtype in ("capsule", "cylinder") and fromto is not None:
        ends = _floats(fromto, 6, "geom fromto", path)
        M = segment_placement(ends[:3], ends[3:])
        return "cylinder", (size[0], float(np.linalg.norm(ends[3:] - ends[:3]))), M
    pos = _floats(defaults.get(geom, "geom", "pos", cls, "0 0 0"), 3, "geom pos", path)
    M = pin.SE3(_geom_rotation(geom, scale, path), pos)
    if gtype == "box" and len(size) >= 3:
        return "box", tuple(2.0 * x for x in size[:3]), M
    if gtype in ("capsule", "cylinder") and len(size) >= 2:
        return "cylinder", (size[0], 2.0 * size[1]), M
    if gtype in ("sphere", "ellipsoid") and size:
        return "sphere", (max(size),), M
    return None


def mjcf_visuals(path: str | Path) -> dict:
    """Body name -> list of (kind, dims, SE3 in the body) of its primitive geoms, as
    :func:`multibody_control.animation.scene.urdf_visuals` gives them for a URDF's links; a
    body with a mesh (or another non-primitive geom) maps to None (drawn as capsules)."""
    path = Path(path)
    root = _read_tree(path)
    defaults = _Defaults(root)
    scale = _angle_scale(root)
    out: dict = {}

    def walk(body, cls):
        cls = body.get("childclass", cls)
        shapes = [_geom_shape(g, defaults, g.get("class", cls), scale, path)
                  for g in body.findall("geom")]
        if body.get("name"):  # None: a mesh or other non-primitive geom, drawn as capsules
            out[body.get("name")] = None if None in shapes else shapes
        for child in body.findall("body"):
            walk(child, cls)

    for body in _worldbody(root).findall("body"):
        walk(body, None)
    return out
