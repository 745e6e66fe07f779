"""Flexible model descriptions: ``config/robots/<robot>.yaml`` -> :class:`FlexibleChain`.

Flexible models are declared in ``config/robots/`` like the rigid robots; the schema decides
(:mod:`multibody_dynamics.model.resources`): a file with a ``bodies`` list (or a closed-loop
``builder``) is flexible and loads here, every other file is a URDF-backed rigid model for
:func:`~multibody_dynamics.model.load_model`, which stays rigid because its users need
pinocchio models (and which names this loader when given a flexible model). A chain of
floating-frame bodies has no URDF spanning tree, so it gets this loader. The rigid counterpart
of a flexible model (same masses and inertias) is named by ``rigid_counterpart`` and stays a
normal robot.

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

``joint.parent`` names an earlier body (``null``: the previous one, the world for the first).
Errors name the file, the key and what was expected (:class:`ModelError`).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError, ModelError
from ..model.config import YamlChecker
from ..model.resources import (
    FLEXIBLE_KEYS,
    flexible_schema_key,
    robots_dir,
    shipped_flexible_models,
)
from .beam import BeamConfig, BeamSection, assemble_beam
from .modal import clamped_modes
from .output import RigidPart, arm_modal_data
from .sid import ModalData, load_modal_data, modal_data_from_beam
from .system import ChainBody, FlexibleChain, FlexibleChainConfig

__all__ = ["shipped_flexible_models", "is_flexible_model", "read_flexible_config",
           "load_flexible_model", "beam_modal_data"]

_TOP = {"name", "description", "source", "rigid_counterpart", "gravity", "second_order_inertia",
        "geometric_stiffening", "end_effector", "bodies"}
_BODY = {"name", "joint", "rigid", "beam", "modal_data", "distal_node"}
_JOINT = {"name", "type", "axis", "angle", "parent"}
_RIGID = {"mass", "com", "inertia", "distal"}
_BEAM = {"length", "elements", "theory", "section", "material", "modes", "damping", "proximal",
         "distal"}
_PART = {"length", "mass", "inertia", "com"}


def is_flexible_model(robot: str | Path) -> bool:
    """True for a shipped flexible model name or a model YAML of the flexible schema (a
    ``bodies`` list or a closed-loop ``builder``); rigid model files and names give False."""
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


def _beam(w: YamlChecker, raw, key) -> ModalData:
    raw = w.mapping(raw, key, _BEAM)
    for req in ("length", "elements", "section", "material", "modes"):
        if req not in raw:
            raise w.error(f"{key}.{req}", "missing")
    sec = w.mapping(raw["section"], f"{key}.section", {"width", "height"})
    mat = w.mapping(raw["material"], f"{key}.material", {"E", "rho", "nu"})
    damp = w.mapping(raw.get("damping") or {}, f"{key}.damping", {"alpha", "beta"})
    for req, where in (("width", sec), ("height", sec), ("E", mat), ("rho", mat)):
        if req not in where:
            sub = "section" if where is sec else "material"
            raise w.error(f"{key}.{sub}.{req}", "missing")
    theory = raw.get("theory", "timoshenko")
    if theory not in ("timoshenko", "euler-bernoulli"):
        raise w.error(f"{key}.theory", f"expected 'timoshenko' or 'euler-bernoulli', "
                                       f"got {theory!r}")
    try:
        return beam_modal_data(
            length=w.number(raw["length"], f"{key}.length", positive=True),
            elements=w.integer(raw["elements"], f"{key}.elements", minimum=1),
            width=w.number(sec["width"], f"{key}.section.width", positive=True),
            height=w.number(sec["height"], f"{key}.section.height", positive=True),
            E=w.number(mat["E"], f"{key}.material.E", positive=True),
            rho=w.number(mat["rho"], f"{key}.material.rho", positive=True),
            nu=w.number(mat.get("nu", 0.3), f"{key}.material.nu"),
            modes=w.integer(raw["modes"], f"{key}.modes", minimum=1),
            theory=theory,
            alpha=w.number(damp.get("alpha", 0.0), f"{key}.damping.alpha", minimum=0.0),
            beta=w.number(damp.get("beta", 0.0), f"{key}.damping.beta", minimum=0.0),
            proximal=_part(w, raw.get("proximal"), f"{key}.proximal"),
            distal=_part(w, raw.get("distal"), f"{key}.distal"),
        )
    except InputError as exc:  # e.g. nu out of range, too many modes
        raise w.error(key, str(exc)) from None


def read_flexible_config(path: str | Path) -> FlexibleChainConfig:
    """Read and validate a flexible model YAML (beam models are reduced here)."""
    path = Path(path)
    w = YamlChecker(path)
    return _config_from(w, w.load("flexible model", "a mapping with 'name' and 'bodies'"))


def _config_from(w: YamlChecker, raw) -> FlexibleChainConfig:  # noqa: C901
    """The checked :class:`FlexibleChainConfig` of a flexible model file's content ``raw``."""
    w.mapping(raw, "", _TOP)
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
            raise w.error(f"{key}.joint.type", f"expected 'revolute' or 'prismatic', got {jtype!r}")
        parent = rj.get("parent")
        if parent is not None:
            pname = w.string(parent, f"{key}.joint.parent")
            if pname not in names:
                raise w.error(f"{key}.joint.parent", f"unknown or later body {pname!r}; expected "
                                                     f"one of {names}")
            parent = names.index(pname)
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
            if "beam" in rb:
                data = _beam(w, rb["beam"], f"{key}.beam")
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
    opts = {}
    for k in ("second_order_inertia", "geometric_stiffening"):
        if k in raw:
            opts[k] = w.boolean(raw[k], k)
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


def _rigid_model_error(path: Path) -> ModelError:
    return ModelError(
        f"{path}: {path.stem!r} is a rigid model (no 'bodies' list or 'builder' key), not a "
        "flexible one: load it with multibody_dynamics.model.load_model (or use `multibody "
        "check/simulate/invert`, which take both kinds); a flexible model needs 'bodies' or "
        "'builder'"
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


def load_flexible_model(robot: str | Path, backend: str = "auto") -> FlexibleChain:
    """Load a flexible model by shipped name (``"flexible_cart_manipulator"``) or YAML path.

    A file with a ``builder:`` key describes a model with kinematic loops and gives a
    :class:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain` (same ``nq_r``, ``nq_e``,
    ``nv``, ``config`` attributes; e.g. ``flexible_parallel_tool``).

    Parameters
    ----------
    robot : str or Path
    backend : {"auto", "numba", "numpy"}
        See :class:`FlexibleChain`.

    Raises
    ------
    ModelError
        With the file, the key and what was expected; for a rigid model (a file without a
        ``bodies`` list or a ``builder`` key, e.g. ``"arm7"``) naming
        :func:`~multibody_dynamics.model.load_model`.
    """
    path = resolve_flexible_path(robot)
    w = YamlChecker(path)
    raw = w.load("flexible model", "a mapping with 'name' and 'bodies'")
    if isinstance(raw, dict) and not any(k in raw for k in FLEXIBLE_KEYS):
        raise _rigid_model_error(path)
    if isinstance(raw, dict) and "builder" in raw:  # a closed loop, see closed.build_closed_model
        from .closed import build_closed_model

        return build_closed_model(path, raw, backend)
    return FlexibleChain(_config_from(w, raw), backend=backend)
