"""Flexible model descriptions: ``config/robots/<robot>.yaml`` -> :class:`FlexibleChain` or,
with ``closures``, :class:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain`.

Flexible models are declared in ``config/robots/`` like the rigid robots; the schema decides
(:mod:`multibody_dynamics.model.resources`): a file with a ``bodies`` list is flexible and loads
here, every other file is a URDF-backed rigid model for
:func:`~multibody_dynamics.model.load_model`, which stays rigid because its users need
pinocchio models (and which names this loader when given a flexible model).
:func:`~multibody_dynamics.robot.load_robot` takes both. A chain of floating-frame bodies has
no URDF spanning tree, so it gets this loader. The rigid counterpart of a flexible model (same
masses and inertias) is named by ``rigid_counterpart`` and stays a normal robot. User
documentation: ``docs/model-files-flexible.md``.

Schema (units in brackets; every key but ``name`` and ``bodies`` optional)::

    name: flexible_cart_manipulator
    description: "..."                    # one line
    source: "Seifried (2014) Sect. 2.3"
    rigid_counterpart: cart_double_pendulum   # shipped robot with the same inertia
    gravity: [0.0, -9.81]                 # [m/s^2] in the plane of motion
    second_order_inertia: true            # exact q_e^T M_e q_e term of the inertia
    geometric_stiffening: false           # centrifugal stiffening (Komega)
    end_effector: link2                   # body whose distal point is the end effector
    bodies:                               # parents before children
      - name: cart
        joint: {name: x, type: prismatic, axis: [1, 0], angle: 0.0, parent: null}
        rigid: {mass: 0.3, com: [0, 0], inertia: 0.00125, distal: [0, 0]}
                                          # [kg], [m], [kg m^2] about the com, [m]
      - name: link1
        joint: {name: alpha, angle: -1.5707963267948966}   # revolute by default [rad]
        beam:                             # clamped at the frame origin, along x of K_i
          length: 1.0                     # [m]
          elements: 100
          theory: timoshenko              # or euler-bernoulli
          section: {width: 0.01, height: 0.01}      # rectangle [m] (height bends)
          material: {E: 7.0e+10, rho: 2700.0, nu: 0.33}  # [Pa], [kg/m^3], [-]
          modes: 2                        # lowest clamped-free eigenmodes kept
          damping: {alpha: 0.0, beta: 0.0}          # Rayleigh [1/s], [s]
          proximal: {length: 0.06, mass: 0.2}       # optional rigid parts before the beam
          distal: {length: 0.08, mass: 0.5, inertia: 1.0e-4, com: 0.04}   # and after it
                                          # [m], [kg], [kg m^2] about the com, [m] from the
                                          # beam end (default length/2); see flexible.output
      - name: link2
        joint: {name: beta}
        modal_data: link2.npz             # alternatively: a modal data file (sid.py format),
        distal_node: -1                   #   relative to this YAML; node for child joints
      - name: arm                         # a beam of segments (rigid parts inside the FE
        joint: {name: gamma, parent: world}   #   model as stiff segments): segmented.py
        beam:                                 #   segmented_arm_modal_data
          segments:                       # from the frame origin along x; instead of
            - {name: hub, length: 0.1, elements: 2,  #   length/elements/section/material
               section: {width: 0.08, height: 0.03}, material: {E: 7.0e+10, rho: 2700.0}}
            - {name: link, length: 0.4, elements: 16,   # name: optional label
               section: {width: 0.08, height: 0.002}, material: {E: 2.1e+11, rho: 7850.0}}
          frame: {type: chord, position: 0.3}   # or tangent (default; clamped at node 0);
                                          #   chord: x axis through that node (or node: k)
          masses: [{position: 0.5, mass: 0.5, inertia: 2.5e-4}]   # lumped at a node [m],
                                          #   [kg], [kg m^2] (or node: k instead of position)
          modes: 4                        # lowest eigenmodes of the supported FE model
          damping: {alpha: 0.5, beta: 1.0e-5}      # Rayleigh D = alpha M + beta K
          theory: timoshenko
    closures:                             # cut joints: the file gives a ClosedFlexibleChain
      - name: pin                         # unique (default closure<i>)
        type: planar_revolute             # 2 rows (points coincide); planar_weld: 3 rows
        body_a: link2                     # point a: a node of this body (default: its distal
        node_a: -1                        #   node; or position_a [m] along the undeformed
                                          #   body); a rigid body: its distal point, no node
        body_b: arm                       # point b on another body (node_b / position_b) or
        position_b: 0.5                   #   point_b: [x, y] fixed in the world [m]
        angle_offset: 0.0                 # planar_weld only [rad]
    actuated: [x, alpha]                  # joints with a drive (B columns); default: all
    independent: [x]                      # q_i of the partitioning (nq_r - rows joints);
                                          #   default: a pivoted QR at q = 0
    outputs:                              # named outputs y = H_r q_r + Γ q_e of the inverse
      combined: {joints: [x, alpha],      #   models (closures only): one joint per input,
                 chord: {alpha: arm}}     #   plus the chord rotation of a flexible body
      joints: {joints: [x, alpha]}        #   (flexible.output.chord_output); Γ = 0 without
    parameters:                           # names load_flexible_model(..., parameters={...})
      arm_modes: [bodies.arm.beam.modes]  #   may change: each sets the keys of its paths
      link_elements: [bodies.arm.beam.segments.link.elements]

``joint.parent`` names an earlier body or ``world`` (``null``: the previous one, the world for
the first). A ``beam`` with ``segments``, ``frame`` or ``masses`` is meshed by
:func:`~multibody_dynamics.flexible.segmented.segmented_arm_modal_data` (no ``proximal`` /
``distal`` then: rigid parts are stiff segments); positions must fall on a node (to 1e-9 of
the length). ``actuated``, ``independent`` and ``outputs`` need ``closures``. A parameter
path walks the file's mappings by key and its lists (``bodies``, ``segments``, ``masses``,
``closures``) by item ``name`` (every item of that name), e.g.
``bodies.long_arm.beam.damping.alpha``; the values set go through the same checks as the
file's own (a key inside a YAML anchor is shared by its aliases). Errors name the file, the
key and what was expected (:class:`ModelError`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..errors import InputError, ModelError, SolverError
from ..model.config import YamlChecker
from ..model.resources import (
    FLEXIBLE_KEYS,
    flexible_schema_key,
    robots_dir,
    shipped_flexible_models,
)
from .beam import BeamConfig, BeamSection, assemble_beam
from .closed import ClosedFlexibleChain, PlanarClosure
from .modal import clamped_modes
from .output import RigidPart, arm_modal_data, chord_output
from .segmented import ArmSegment, LumpedMass, segmented_arm_modal_data
from .sid import ModalData, load_modal_data, modal_data_from_beam
from .system import ChainBody, FlexibleChain, FlexibleChainConfig

__all__ = ["shipped_flexible_models", "is_flexible_model", "read_flexible_config",
           "load_flexible_model", "flexible_model_from_mapping", "beam_modal_data",
           "CLOSURE_TYPES"]

#: Cut-joint types of ``closures:`` and their number of constraint rows (the rigid schema's
#: names, :data:`multibody_dynamics.model.config.CLOSURE_ROWS`).
CLOSURE_TYPES = {"planar_revolute": 2, "planar_weld": 3}

_TOP = {"name", "description", "source", "rigid_counterpart", "gravity", "second_order_inertia",
        "geometric_stiffening", "end_effector", "bodies", "closures", "actuated", "independent",
        "outputs", "parameters"}
_OUTPUT = {"joints", "chord"}
_BODY = {"name", "joint", "rigid", "beam", "modal_data", "distal_node"}
_JOINT = {"name", "type", "axis", "angle", "parent"}
_RIGID = {"mass", "com", "inertia", "distal"}
_BEAM = {"length", "elements", "theory", "section", "material", "modes", "damping", "proximal",
         "distal", "segments", "frame", "masses"}
_UNIFORM = ("length", "elements", "section", "material")
_PART = {"length", "mass", "inertia", "com"}
_SEGMENT = {"name", "length", "elements", "section", "material"}
_FRAME = {"type", "node", "position"}
_MASS = {"position", "node", "mass", "inertia"}
_CLOSURE = {"name", "type", "body_a", "node_a", "position_a", "body_b", "node_b", "position_b",
            "point_b", "angle_offset"}
#: Name of the world in ``joint.parent`` (no body may take it).
WORLD = "world"


def is_flexible_model(robot: str | Path) -> bool:
    """True for a shipped flexible model name or a model YAML of the flexible schema (a
    ``bodies`` list); rigid model files and names give False."""
    robot = str(robot)
    if robot in shipped_flexible_models():
        return True
    return flexible_schema_key(robot) is not None  # the rigid loader reports a broken file


def beam_modal_data(length: float, elements: int, width: float, height: float, E: float,
                    rho: float, nu: float = 0.3, modes: int = 2, theory: str = "timoshenko",
                    alpha: float = 0.0, beta: float = 0.0, proximal: RigidPart | None = None,
                    distal: RigidPart | None = None) -> ModalData:
    """Modal data of a uniform rectangular beam clamped at its root (tangent frame).

    Parameters
    ----------
    length : float
        [m]. elements : int, number of finite elements.
    width, height : float
        Section [m]; ``height`` is the bending direction (y of K_i).
    E, rho, nu : float
        Young's modulus [Pa], density [kg/m^3], Poisson's ratio [-].
    modes : int
        Lowest clamped-free eigenmodes kept (mass-normalised).
    theory : {"timoshenko", "euler-bernoulli"}
    alpha, beta : float
        Rayleigh damping ``D = alpha M + beta K`` [1/s], [s].
    proximal, distal : RigidPart, optional
        Rigid end parts of an arm (:func:`~multibody_dynamics.flexible.output.arm_modal_data`):
        the beam then starts at ``proximal.length`` and the last node is the distal end. The
        modes stay those of the beam alone.
    """
    section = BeamSection.rectangle(width, height, E=E, rho=rho, nu=nu)
    beam = assemble_beam(BeamConfig(length, elements, section, theory=theory,
                                    rayleigh_alpha=alpha, rayleigh_beta=beta))
    basis = clamped_modes(beam, modes)
    if proximal is None and distal is None:
        return modal_data_from_beam(basis)
    return arm_modal_data(basis, proximal, distal)


def _part(w: YamlChecker, raw, key) -> RigidPart | None:
    if raw is None:
        return None
    raw = w.mapping(raw, key, _PART)
    if "length" not in raw:
        raise w.error(f"{key}.length", "missing")
    return RigidPart(
        length=w.number(raw["length"], f"{key}.length", minimum=0.0),
        mass=w.number(raw.get("mass", 0.0), f"{key}.mass", minimum=0.0),
        inertia=w.number(raw.get("inertia", 0.0), f"{key}.inertia", minimum=0.0),
        com=w.number(raw["com"], f"{key}.com") if raw.get("com") is not None else None,
    )


def _section(w: YamlChecker, raw, key) -> BeamSection:
    """The rectangular section of ``raw['section']`` in ``raw['material']`` (``key``: where)."""
    for req in ("section", "material"):
        if req not in raw:
            raise w.error(f"{key}.{req}", "missing")
    sec = w.mapping(raw["section"], f"{key}.section", {"width", "height"})
    mat = w.mapping(raw["material"], f"{key}.material", {"E", "rho", "nu"})
    for req, where, sub in (("width", sec, "section"), ("height", sec, "section"),
                            ("E", mat, "material"), ("rho", mat, "material")):
        if req not in where:
            raise w.error(f"{key}.{sub}.{req}", "missing")
    width = w.number(sec["width"], f"{key}.section.width", positive=True)
    height = w.number(sec["height"], f"{key}.section.height", positive=True)
    E = w.number(mat["E"], f"{key}.material.E", positive=True)
    rho = w.number(mat["rho"], f"{key}.material.rho", positive=True)
    nu = w.number(mat.get("nu", 0.3), f"{key}.material.nu")
    try:
        return BeamSection.rectangle(width, height, E=E, rho=rho, nu=nu)
    except InputError as exc:  # e.g. nu out of range
        raise w.error(f"{key}.material", str(exc)) from None


def _theory(w: YamlChecker, raw, key) -> str:
    theory = raw.get("theory", "timoshenko")
    if theory not in ("timoshenko", "euler-bernoulli"):
        raise w.error(f"{key}.theory", f"expected 'timoshenko' or 'euler-bernoulli', "
                                       f"got {theory!r}")
    return theory


def _node_at(w: YamlChecker, nodes: np.ndarray, raw: dict, node_key: str, pos_key: str,
             key: str) -> int | None:
    """Node index named by ``raw[node_key]`` (index, negative from the end) or
    ``raw[pos_key]`` (x [m] of the undeformed body, must be a node); None if neither."""
    nn = nodes.size
    if node_key in raw and pos_key in raw:
        raise w.error(f"{key}.{pos_key}", f"give either {node_key} or {pos_key}, not both")
    if node_key in raw:
        k = w.integer(raw[node_key], f"{key}.{node_key}")
        if not -nn <= k < nn:
            raise w.error(f"{key}.{node_key}", f"node {k} out of range; the body has {nn} "
                                               f"nodes (expected an index in [-{nn}, {nn}))")
        return k % nn
    if pos_key in raw:
        x = w.number(raw[pos_key], f"{key}.{pos_key}")
        k = int(np.argmin(np.abs(nodes - x)))
        if abs(nodes[k] - x) > 1e-9 * max(abs(nodes[-1]), 1.0):
            raise w.error(f"{key}.{pos_key}", f"no node at x = {x:g} m (expected a node "
                                              f"position in [0, {nodes[-1]:g}] m; nearest: node "
                                              f"{k} at x = {nodes[k]:.6g} m)")
        return k
    return None


def _segment(w: YamlChecker, rs: dict, sk: str) -> ArmSegment:
    """The checked beam segment ``rs`` (``sk``: where): length, elements, section, material."""
    for req in ("length", "elements"):
        if req not in rs:
            raise w.error(f"{sk}.{req}", "missing")
    if "name" in rs:
        w.string(rs["name"], f"{sk}.name")
    return ArmSegment(w.number(rs["length"], f"{sk}.length", positive=True),
                      w.integer(rs["elements"], f"{sk}.elements", minimum=1),
                      _section(w, rs, sk))


def _beam_segments(w: YamlChecker, raw, key) -> list[ArmSegment]:
    """The segments of the beam ``raw``: its ``segments`` list, or the uniform beam as one."""
    if "segments" in raw:
        given = [k for k in _UNIFORM if k in raw]
        if given:
            raise w.error(f"{key}.{given[0]}", "give either segments or length/elements/"
                                               "section/material (a uniform beam), not both")
        if not isinstance(raw["segments"], list) or not raw["segments"]:
            raise w.error(f"{key}.segments", "expected a non-empty list of segments")
        raws = [(w.mapping(r, f"{key}.segments[{i}]", _SEGMENT), f"{key}.segments[{i}]")
                for i, r in enumerate(raw["segments"])]
    else:
        raws = [(raw, key)]
    return [_segment(w, rs, sk) for rs, sk in raws]


def _segment_nodes(segments: list[ArmSegment]) -> np.ndarray:
    """Node positions x [m], shape (nn,), as segmented_arm_modal_data meshes ``segments``."""
    x, nodes = 0.0, [0.0]
    for s in segments:
        h = s.length / s.elements
        for _ in range(s.elements):
            x += h
            nodes.append(x)
    return np.array(nodes)


def _beam_frame(w: YamlChecker, raw, nodes: np.ndarray, key) -> tuple[str, int | None]:
    """``(frame, chord node)`` of ``raw['frame']``: tangent (node None) or chord (x axis
    through that node, not node 0)."""
    frame, chord = raw.get("frame", "tangent"), None
    if isinstance(frame, dict):
        rf = w.mapping(frame, f"{key}.frame", _FRAME)
        frame = rf.get("type", "tangent")
        if frame == "chord":
            chord = _node_at(w, nodes, rf, "node", "position", f"{key}.frame")
            if chord is None:
                raise w.error(f"{key}.frame", "a chord frame needs node or position (the node "
                                              "the frame's x axis passes through)")
            if chord == 0:
                raise w.error(f"{key}.frame", "the chord node must not be node 0 (the origin)")
        elif "node" in rf or "position" in rf:
            raise w.error(f"{key}.frame", f"node/position only for type chord, got {frame!r}")
    if frame not in ("tangent", "chord"):
        raise w.error(f"{key}.frame", f"expected 'tangent' or a mapping {{type: chord, node: k}}"
                                      f" / {{type: chord, position: x}}, got {frame!r}")
    if frame == "chord" and chord is None:
        raise w.error(f"{key}.frame", "a chord frame needs node or position: write "
                                      "{type: chord, position: x}")
    return frame, chord


def _lumped_masses(w: YamlChecker, raw, nodes: np.ndarray, key) -> list[LumpedMass]:
    """The lumped masses of ``raw['masses']``, each at a node of ``nodes`` (x [m])."""
    masses = raw.get("masses") or []
    if not isinstance(masses, list):
        raise w.error(f"{key}.masses", "expected a list of {position, mass, inertia}")
    lumped = []
    for i, rm in enumerate(masses):
        mk = f"{key}.masses[{i}]"
        rm = w.mapping(rm, mk, _MASS)
        if "mass" not in rm:
            raise w.error(f"{mk}.mass", "missing")
        k = _node_at(w, nodes, rm, "node", "position", mk)
        if k is None:
            raise w.error(f"{mk}.position", "missing (or node)")
        lumped.append(LumpedMass(float(nodes[k]),
                                 w.number(rm["mass"], f"{mk}.mass", minimum=0.0),
                                 w.number(rm.get("inertia", 0.0), f"{mk}.inertia", minimum=0.0)))
    return lumped


def _segmented_beam(w: YamlChecker, raw, key, basis=None) -> ModalData:
    """Modal data of a beam given by ``segments`` (or a uniform beam with a ``frame`` or
    ``masses``): :func:`~multibody_dynamics.flexible.segmented.segmented_arm_modal_data`."""
    for k in ("proximal", "distal"):
        if k in raw:
            raise w.error(f"{key}.{k}", "not with segments, frame or masses: give rigid parts "
                                        "as segments with a stiff section (inside the FE model)")
    segments = _beam_segments(w, raw, key)
    nodes = _segment_nodes(segments)
    frame, chord = _beam_frame(w, raw, nodes, key)
    lumped = _lumped_masses(w, raw, nodes, key)
    damp = w.mapping(raw.get("damping") or {}, f"{key}.damping", {"alpha", "beta"})
    try:
        data, _ = segmented_arm_modal_data(
            segments, w.integer(raw["modes"], f"{key}.modes", minimum=1), frame=frame,
            chord_node=chord, masses=lumped, theory=_theory(w, raw, key),
            rayleigh=(w.number(damp.get("alpha", 0.0), f"{key}.damping.alpha", minimum=0.0),
                      w.number(damp.get("beta", 0.0), f"{key}.damping.beta", minimum=0.0)),
            basis=basis)
    except (InputError, SolverError) as exc:  # too many modes, a rigid-body mode, a bad basis
        raise w.error(key, str(exc)) from None
    return data


def _beam(w: YamlChecker, raw, key, basis=None) -> ModalData:
    raw = w.mapping(raw, key, _BEAM)
    if "modes" not in raw:
        raise w.error(f"{key}.modes", "missing")
    if basis is not None or any(k in raw for k in ("segments", "frame", "masses")):
        return _segmented_beam(w, raw, key, basis)
    for req in _UNIFORM:
        if req not in raw:
            raise w.error(f"{key}.{req}", "missing")
    section = _section(w, raw, key)
    damp = w.mapping(raw.get("damping") or {}, f"{key}.damping", {"alpha", "beta"})
    length = w.number(raw["length"], f"{key}.length", positive=True)
    elements = w.integer(raw["elements"], f"{key}.elements", minimum=1)
    modes = w.integer(raw["modes"], f"{key}.modes", minimum=1)
    alpha = w.number(damp.get("alpha", 0.0), f"{key}.damping.alpha", minimum=0.0)
    beta = w.number(damp.get("beta", 0.0), f"{key}.damping.beta", minimum=0.0)
    proximal = _part(w, raw.get("proximal"), f"{key}.proximal")
    distal = _part(w, raw.get("distal"), f"{key}.distal")
    try:
        beam = assemble_beam(BeamConfig(length, elements, section, theory=_theory(w, raw, key),
                                        rayleigh_alpha=alpha, rayleigh_beta=beta))
        basis = clamped_modes(beam, modes)
        if proximal is None and distal is None:
            return modal_data_from_beam(basis)
        return arm_modal_data(basis, proximal, distal)
    except InputError as exc:  # e.g. too many modes
        raise w.error(key, str(exc)) from None


def read_flexible_config(path: str | Path) -> FlexibleChainConfig:
    """Read and validate a flexible model YAML (beam models are reduced here)."""
    path = Path(path)
    w = YamlChecker(path)
    return _config_from(w, w.load("flexible model", "a mapping with 'name' and 'bodies'"))


def _config_from(w: YamlChecker, raw,  # noqa: C901
                 shape_vectors: dict | None = None) -> FlexibleChainConfig:
    """The checked :class:`FlexibleChainConfig` of a flexible model file's content ``raw`` (the
    tree: closures are read by :func:`_closed_from`); ``shape_vectors`` as
    :func:`flexible_model_from_mapping`."""
    w.mapping(raw, "", _TOP)
    shape_vectors = dict(shape_vectors or {})
    for req in ("name", "bodies"):
        if req not in raw:
            raise w.error(req, "missing")
    name = w.string(raw["name"], "name")
    if not isinstance(raw["bodies"], list) or not raw["bodies"]:
        raise w.error("bodies", "expected a non-empty list of bodies")
    bodies, names = [], []
    for i, rb in enumerate(raw["bodies"]):
        key = f"bodies[{i}]"
        rb = w.mapping(rb, key, _BODY)
        bname = w.string(rb.get("name"), f"{key}.name")
        kinds = [k for k in ("rigid", "beam", "modal_data") if k in rb]
        if len(kinds) != 1:
            raise w.error(key, f"expected exactly one of rigid, beam, modal_data; got {kinds}")
        if "joint" not in rb:
            raise w.error(f"{key}.joint", "missing")
        rj = w.mapping(rb["joint"], f"{key}.joint", _JOINT)
        jtype = rj.get("type", "revolute")
        if jtype not in ("revolute", "prismatic"):
            raise w.error(f"{key}.joint.type",
                          f"expected 'revolute' or 'prismatic', got {jtype!r}")
        if bname == WORLD:
            raise w.error(f"{key}.name", f"{WORLD!r} is reserved for the world (joint.parent)")
        if bname in names:
            raise w.error(f"{key}.name", f"duplicate body name {bname!r}")
        parent = rj.get("parent")
        if parent is not None:
            pname = w.string(parent, f"{key}.joint.parent")
            if pname != WORLD and pname not in names:
                raise w.error(f"{key}.joint.parent", f"unknown or later body {pname!r}; expected "
                                                     f"{WORLD!r} or one of {names}")
            parent = -1 if pname == WORLD else names.index(pname)
        kw = dict(
            name=bname,
            joint=w.string(rj.get("name"), f"{key}.joint.name"),
            joint_type=jtype,
            parent=parent,
            axis=w.vector(rj.get("axis", [1.0, 0.0]), f"{key}.joint.axis", 2),
            angle=w.number(rj.get("angle", 0.0), f"{key}.joint.angle"),
        )
        if "rigid" in rb:
            rr = w.mapping(rb["rigid"], f"{key}.rigid", _RIGID)
            if "mass" not in rr:
                raise w.error(f"{key}.rigid.mass", "missing")
            kw.update(
                mass=w.number(rr["mass"], f"{key}.rigid.mass", positive=True),
                com=w.vector(rr.get("com", [0.0, 0.0]), f"{key}.rigid.com", 2),
                inertia=w.number(rr.get("inertia", 0.0), f"{key}.rigid.inertia", minimum=0.0),
                distal=w.vector(rr.get("distal", [0.0, 0.0]), f"{key}.rigid.distal", 2),
            )
        else:
            basis = shape_vectors.pop(bname, None)
            if basis is not None and "beam" not in rb:
                raise InputError(f"shape_vectors: body {bname!r} has no beam (FE model)")
            if "beam" in rb:
                data = _beam(w, rb["beam"], f"{key}.beam", basis)
            else:
                file = Path(w.path).parent / w.string(rb["modal_data"], f"{key}.modal_data")
                data = load_modal_data(file)
            kw.update(modal_data=data,
                      distal_node=w.integer(rb.get("distal_node", -1), f"{key}.distal_node"))
        try:
            bodies.append(ChainBody(**kw))
        except InputError as exc:
            raise w.error(key, str(exc)) from None
        names.append(bname)
    if shape_vectors:
        raise InputError(f"shape_vectors: unknown bodies {sorted(shape_vectors)}; expected some "
                         f"of {names}")
    opts = {}
    for k in ("second_order_inertia", "geometric_stiffening"):
        if k in raw:
            if not isinstance(raw[k], bool):
                raise w.error(k, f"expected true or false, got {raw[k]!r}")
            opts[k] = raw[k]
    try:
        return FlexibleChainConfig(
            bodies=bodies,
            gravity=w.vector(raw.get("gravity", [0.0, -9.81]), "gravity", 2),
            name=name,
            description=str(raw.get("description", "")).strip(),
            source=str(raw.get("source", "")).strip(),
            rigid_counterpart=(w.string(raw["rigid_counterpart"], "rigid_counterpart")
                               if raw.get("rigid_counterpart") is not None else None),
            end_effector=(w.string(raw["end_effector"], "end_effector")
                          if raw.get("end_effector") is not None else None),
            **opts,
        )
    except InputError as exc:
        raise w.error("", str(exc)) from None


def _closure_end(w: YamlChecker, chain: FlexibleChain, rc: dict, end: str, key: str):
    """``(body, node)`` of point ``end`` (``"a"`` or ``"b"``) of a closure; node None for a
    rigid body (its distal point) and for a flexible body's distal node when not given."""
    bkey = f"body_{end}"
    names = [b.name for b in chain.bodies]
    body = w.string(rc[bkey], f"{key}.{bkey}")
    if body not in names:
        raise w.error(f"{key}.{bkey}", f"unknown body {body!r}; expected one of {names}")
    b = chain.bodies[names.index(body)]
    if not b.flexible:
        for k in (f"node_{end}", f"position_{end}"):
            if k in rc:
                raise w.error(f"{key}.{k}", f"{body!r} is rigid: its closure point is its distal "
                                            "point (rigid.distal); remove this key")
        return body, None
    nodes = b.modal_data.node_positions[:, 0]
    return body, _node_at(w, nodes, rc, f"node_{end}", f"position_{end}", key)


def _joint_list(w: YamlChecker, raw, key: str, joints: tuple[str, ...],
                where: str = "") -> tuple[str, ...]:
    """The joint names of ``raw[key]`` (``where``: the mapping holding it, for messages)."""
    value = raw[key]
    key = f"{where}.{key}" if where else key
    if not isinstance(value, list) or not value:
        raise w.error(key, f"expected a non-empty list of joint names of {list(joints)}")
    out = tuple(w.string(v, f"{key}[{i}]") for i, v in enumerate(value))
    for i, j in enumerate(out):
        if j not in joints:
            raise w.error(f"{key}[{i}]", f"unknown joint {j!r}; expected one of {list(joints)}")
    if len(set(out)) != len(out):
        raise w.error(key, f"joints must be distinct, got {list(out)}")
    return out


def _closure_far_end(w: YamlChecker, chain: FlexibleChain, rc: dict, key: str):
    """``(body_b, node_b, point_b)`` of a closure: a point on ``body_b`` or the world point
    ``point_b`` [m] (body and node None then)."""
    if "body_b" in rc:
        if "point_b" in rc:
            raise w.error(f"{key}.point_b", "give either body_b or point_b (a world point)")
        body_b, node_b = _closure_end(w, chain, rc, "b", key)
        return body_b, node_b, (0.0, 0.0)
    for k in ("node_b", "position_b"):
        if k in rc:
            raise w.error(f"{key}.{k}", "needs body_b")
    if "point_b" not in rc:
        raise w.error(f"{key}.body_b", "missing (or point_b: a world point [m])")
    return None, None, w.vector(rc["point_b"], f"{key}.point_b", 2)


def _closure(w: YamlChecker, chain: FlexibleChain, key: str, rc: dict, ctype: str,
             cname: str) -> PlanarClosure:
    """The closure ``rc`` at ``key`` whose common part (keys, type, unique name) is checked
    (:meth:`YamlChecker.closures`): its bodies, nodes and offset."""
    body_a, node_a = _closure_end(w, chain, rc, "a", key)
    body_b, node_b, point_b = _closure_far_end(w, chain, rc, key)
    if "angle_offset" in rc and ctype != "planar_weld":
        raise w.error(f"{key}.angle_offset", "only for type planar_weld")
    offset = w.number(rc.get("angle_offset", 0.0), f"{key}.angle_offset")
    return PlanarClosure(cname, body_a, node_a, body_b, node_b, point_b,
                         angle=ctype == "planar_weld", angle_offset=offset)


def _closed_from(w: YamlChecker, raw, chain: FlexibleChain) -> ClosedFlexibleChain:
    """The :class:`ClosedFlexibleChain` of a file with ``closures:`` on the tree ``chain``."""
    heads = w.closures(raw["closures"], _CLOSURE, ("type", "body_a"), CLOSURE_TYPES,
                       nonempty=True)
    closures = [_closure(w, chain, *head) for head in heads]
    joints = chain.joint_names
    actuated = _joint_list(w, raw, "actuated", joints) if "actuated" in raw else None
    independent = None
    if "independent" in raw:
        independent = _joint_list(w, raw, "independent", joints)
        nc = sum(c.rows for c in closures)
        if len(independent) != len(joints) - nc:
            raise w.error("independent", f"expected {len(joints) - nc} joints (the {len(joints)} "
                                         f"joints minus {nc} closure rows), got "
                                         f"{list(independent)}")
    nu = len(joints) if actuated is None else len(actuated)
    outputs = _outputs(w, raw["outputs"], chain, nu) if "outputs" in raw else None
    try:
        return ClosedFlexibleChain(chain, closures, actuated=actuated, independent=independent,
                                   outputs=outputs)
    except (InputError, ModelError) as exc:  # e.g. no degree of freedom left
        raise w.error("closures", str(exc)) from None


def _outputs(w: YamlChecker, raw, chain: FlexibleChain, nu: int
             ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{name: (H_r, Γ)}`` of the ``outputs:`` section (one joint per input, optional chords)."""
    if not isinstance(raw, dict) or not raw:
        raise w.error("outputs", "expected a mapping {name: {joints: [...], chord: {joint: "
                                 "body}}}")
    out = {}
    for name, spec in raw.items():
        key = f"outputs.{w.string(name, 'outputs')}"
        spec = w.mapping(spec, key, _OUTPUT)
        if "joints" not in spec:
            raise w.error(f"{key}.joints", "missing")
        joints = _joint_list(w, spec, "joints", chain.joint_names, key)
        if len(joints) != nu:
            raise w.error(f"{key}.joints", f"expected {nu} joints (one per input), got "
                                           f"{list(joints)}")
        chord = w.mapping(spec.get("chord") or {}, f"{key}.chord", set(joints))
        chords = {j: w.string(b, f"{key}.chord.{j}") for j, b in chord.items()}
        try:
            out[name] = chord_output(chain, joints, chords)
        except ModelError as exc:  # a rigid or unknown body
            raise w.error(f"{key}.chord", str(exc)) from None
    return out


def _declared_parameters(w: YamlChecker, raw) -> dict[str, list[list[str]]]:
    """The ``parameters:`` section: name -> key paths, each checked to exist in ``raw``."""
    declared = raw.get("parameters") or {}
    if not isinstance(declared, dict):
        raise w.error("parameters", "expected a mapping {name: [key path, ...]}")
    out = {}
    for name, paths in declared.items():
        key = f"parameters.{w.string(name, 'parameters')}"
        if isinstance(paths, str):
            paths = [paths]
        if not isinstance(paths, list) or not paths:
            raise w.error(key, "expected a non-empty list of key paths (e.g. "
                               "bodies.arm.beam.modes)")
        out[name] = [w.string(p, f"{key}[{i}]").split(".") for i, p in enumerate(paths)]
        for i, parts in enumerate(out[name]):
            _parameter_targets(w, raw, parts, f"{key}[{i}]")
    return out


def _parameter_targets(w: YamlChecker, raw, parts: list[str], key: str) -> list[dict]:
    """The mappings whose key ``parts[-1]`` the path ``parts`` sets: mappings are walked by key,
    lists by item ``name`` (every item of that name); the last key may be new."""
    nodes = [raw]
    for depth, part in enumerate(parts[:-1]):
        nxt = []
        for node in nodes:
            if isinstance(node, dict) and part in node:
                nxt.append(node[part])
            elif isinstance(node, list):
                nxt += [x for x in node if isinstance(x, dict) and x.get("name") == part]
        if not nxt:
            raise w.error(key, f"{'.'.join(parts)}: nothing at {'.'.join(parts[:depth + 1])!r} "
                               "(mappings by key, lists by item name)")
        nodes = nxt
    if not all(isinstance(node, dict) for node in nodes):
        raise w.error(key, f"{'.'.join(parts)}: {'.'.join(parts[:-1])!r} is not a mapping")
    return nodes


def _with_parameters(w: YamlChecker, raw, given: Mapping | None):
    """``raw`` with the declared parameters of ``given`` set (a copy when any is given)."""
    declared = _declared_parameters(w, raw)
    if not given:
        return raw
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise InputError(f"parameters: unknown {unknown} for {w.path}; the file declares "
                         f"{sorted(declared) or 'none'} (other changes: edit a copy of the file)")
    raw = copy.deepcopy(raw)
    for name, value in given.items():
        for i, parts in enumerate(declared[name]):
            for node in _parameter_targets(w, raw, parts, f"parameters.{name}[{i}]"):
                node[parts[-1]] = value
    return raw


def flexible_model_from_mapping(raw, path: str | Path, backend: str = "auto",
                                shape_vectors: dict | None = None,
                                parameters: Mapping | None = None
                                ) -> FlexibleChain | ClosedFlexibleChain:
    """The model of a flexible model file's content ``raw`` (a mapping as read from YAML).

    Parameters
    ----------
    raw : dict
        The file's content (see the module docstring).
    path : str or Path
        The file, named in the error messages (``modal_data`` files are relative to it).
    backend : {"auto", "numba", "numpy"}
        See :class:`FlexibleChain`.
    shape_vectors : dict, optional
        ``{body name: (ndof, modes)}``: shape vectors on all FE dofs of that body's beam
        replacing its eigenmodes (e.g. POD shapes; ``basis`` of
        :func:`~multibody_dynamics.flexible.segmented.segmented_arm_modal_data`, ``ndof`` = 3 x
        nodes, node order ``u, w, theta`` from the frame origin). A Python-only argument: a
        model file names no arrays.
    parameters : mapping, optional
        ``{name: value}`` for names the file declares under ``parameters:`` (each sets the
        keys of its paths before the file is checked), e.g. ``{"modes_long": 3}`` for
        ``flexible_parallel_tool``.

    Returns
    -------
    FlexibleChain or ClosedFlexibleChain
        The latter when ``raw`` has ``closures``.

    Raises
    ------
    ModelError
        Naming the file, the key and what was expected.
    InputError
        For a ``shape_vectors`` entry that names no beam body, a parameter the file does not
        declare.
    """
    w = YamlChecker(path)
    if not isinstance(raw, dict):
        raise w.error("", f"expected a mapping with 'name' and 'bodies', got "
                          f"{type(raw).__name__}")
    raw = _with_parameters(w, raw, parameters)
    if "builder" in raw:
        raise w.error("builder", "no longer part of the schema: a closed flexible loop is "
                                 "declared with 'bodies' and 'closures' (see "
                                 "docs/model-files-flexible.md)")
    cfg = _config_from(w, raw, shape_vectors)
    if "closures" not in raw:
        for k in ("actuated", "independent", "outputs"):
            if k in raw:
                raise w.error(k, "only with closures (a tree drives every joint)")
    chain = FlexibleChain(cfg, backend=backend)
    if "closures" not in raw:
        return chain
    return _closed_from(w, raw, chain)


def _rigid_model_error(path: Path) -> ModelError:
    return ModelError(
        f"{path}: {path.stem!r} is a rigid model (no 'bodies' list), not a "
        "flexible one: load it with multibody_dynamics.model.load_model (or use `multibody "
        "check/simulate/invert`, which take both kinds); a flexible model needs 'bodies'"
    )


def resolve_flexible_path(robot: str | Path) -> Path:
    """Model YAML for a shipped flexible model name or a path to a YAML file.

    A shipped rigid robot's name raises :class:`ModelError` naming
    :func:`~multibody_dynamics.model.load_model`.
    """
    p = Path(robot)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    candidate = robots_dir() / f"{robot}.yaml"
    if not candidate.is_file():
        raise ModelError(
            f"unknown flexible model {str(robot)!r}: not shipped "
            f"({', '.join(shipped_flexible_models())}) and not a path to a model YAML file"
        )
    if flexible_schema_key(candidate) is None:  # a shipped rigid robot
        raise _rigid_model_error(candidate)
    return candidate


def load_flexible_model(robot: str | Path, backend: str = "auto",
                        parameters: Mapping | None = None, shape_vectors: dict | None = None
                        ) -> FlexibleChain | ClosedFlexibleChain:
    """Load a flexible model by shipped name (``"flexible_cart_manipulator"``) or YAML path.

    A file with ``closures:`` describes a model with kinematic loops and gives a
    :class:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain` (same ``nq_r``, ``nq_e``,
    ``nv``, ``config`` attributes; e.g. ``flexible_parallel_tool``).

    Parameters
    ----------
    robot : str or Path
    backend : {"auto", "numba", "numpy"}
        See :class:`FlexibleChain`.
    parameters, shape_vectors : optional
        Changes of the declared ``parameters:`` and shape vectors replacing eigenmodes, as
        :func:`flexible_model_from_mapping` (e.g. ``load_flexible_model(
        "flexible_parallel_tool", parameters={"modes_long": 3, "link_elements": 6})``).

    Raises
    ------
    InputError
        For a parameter the file does not declare, a ``shape_vectors`` key naming no beam.
    ModelError
        With the file, the key and what was expected; for a rigid model (a file without a
        ``bodies`` list, e.g. ``"arm7"``) naming
        :func:`~multibody_dynamics.model.load_model`.
    """
    path = resolve_flexible_path(robot)
    w = YamlChecker(path)
    raw = w.load("flexible model", "a mapping with 'name' and 'bodies'")
    if isinstance(raw, dict) and not any(k in raw for k in FLEXIBLE_KEYS):
        raise _rigid_model_error(path)
    return flexible_model_from_mapping(raw, path, backend, shape_vectors, parameters)
