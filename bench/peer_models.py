"""The suite's planar closed-loop robots rebuilt in MuJoCo, Exudyn and Drake (bench-only).

Every number comes from the loaded :class:`~multibody_dynamics.model.MultibodyModel`: joint
placements, axes, masses, centres of mass and inertias from its pinocchio model, the closure
frames from its closures, gravity from the model.  Nothing is retyped, so the peers simulate the
same mechanism as the suite (``test/test_peer_models.py`` checks the mass matrix and the closure
points at one state).

Supported: planar mechanisms whose joints are all revolute about one common axis ``n`` (in
world coordinates), closed by ``revolute``, ``planar_revolute`` or ``spherical`` closures (both
frames' origins coincide; for a planar loop about ``n`` the in-plane point rows are the
independent ones) and
``point_on_line`` closures with ``normal`` along ``n`` (the point of ``frame_a`` stays on the
line through ``frame_b`` along ``axis``).  MuJoCo and Drake have no point-on-line constraint:
there it is a slider body on a prismatic joint along the line, of mass :data:`SLIDER_MASS`,
whose point coincides with ``frame_a`` (a ball constraint); Exudyn takes the line constraint
directly (a generic joint with one constrained in-plane axis).  Other models raise
:class:`~multibody_dynamics.errors.ModelError` naming what is unsupported.

The peers are optional (``pip install -e '.[bench]'``); each builder imports its peer lazily.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from multibody_dynamics.errors import ModelError
from multibody_dynamics.model import MultibodyModel

#: mass of the slider body that realizes a point-on-line closure in MuJoCo and Drake [kg]
#: (the suite's slider is massless; 1e-6 kg at the slider-crank's 3 m/s adds < 1e-5 J)
SLIDER_MASS = 1e-6
_REVOLUTE = {"JointModelRX": 0, "JointModelRY": 1, "JointModelRZ": 2}


@dataclass(frozen=True)
class Link:
    """One moving body of the tree: pinocchio joint ``index`` and its body."""

    index: int            # pinocchio joint index (1-based)
    name: str             # joint name
    parent: int           # parent joint index (0 = world)
    placement: pin.SE3    # parent joint frame -> this joint frame
    axis: np.ndarray      # (3,) joint axis in the joint frame
    mass: float           # [kg]
    com: np.ndarray       # (3,) centre of mass in the joint frame [m]
    inertia: np.ndarray   # (3, 3) rotational inertia about the centre of mass [kg m^2]


@dataclass(frozen=True)
class Closure:
    """A closure as the peers see it: two points on two links (0 = world)."""

    name: str
    kind: str             # "point" (revolute/spherical) or "line" (point_on_line)
    link_a: int
    p_a: np.ndarray       # (3,) origin of frame_a in joint frame link_a [m]
    link_b: int
    p_b: np.ndarray       # (3,) origin of frame_b in joint frame link_b [m]
    R_b: np.ndarray       # (3, 3) orientation of frame_b in joint frame link_b
    axis_b: np.ndarray    # (3,) the line's direction in frame_b ("line" only)
    normal_link_b: np.ndarray  # (3,) the plane normal n in joint frame link_b


@dataclass(frozen=True)
class PlanarMechanism:
    """A planar closed-loop tree extracted from a MultibodyModel."""

    name: str
    gravity: np.ndarray   # (3,) [m/s^2]
    normal: np.ndarray    # (3,) common joint axis in the world frame
    links: tuple[Link, ...]
    closures: tuple[Closure, ...]

    def world_rotation(self, q: np.ndarray, link: int) -> np.ndarray:
        """Orientation of joint frame ``link`` in the world at ``q`` (3, 3)."""
        R = np.eye(3)
        chain = []
        while link:
            chain.append(link)
            link = self.links[link - 1].parent
        for i in reversed(chain):
            lk = self.links[i - 1]
            R = R @ lk.placement.rotation @ pin.exp3(lk.axis * q[i - 1])
        return R


def _frame(pm: pin.Model, name: str) -> tuple[int, pin.SE3]:
    if not pm.existFrame(name):
        raise ModelError(f"peer model: no frame {name!r}")
    f = pm.frames[pm.getFrameId(name)]
    return int(f.parentJoint), f.placement


def mechanism(model: MultibodyModel) -> PlanarMechanism:
    """The planar description of ``model`` (module docstring: what is supported).

    Raises
    ------
    ModelError
        A joint that is not a revolute about x, y or z of its frame, joint axes that are not
        parallel in the world, or a closure type the peers cannot express.
    """
    pm = model.pin_model
    data = pm.createData()
    q0 = pin.neutral(pm)
    pin.forwardKinematics(pm, data, q0)
    links, normal = [], None
    for i in range(1, pm.njoints):
        short = pm.joints[i].shortname()
        if short not in _REVOLUTE:
            raise ModelError(f"peer model {model.name!r}: joint {pm.names[i]!r} is {short}; "
                             "expected a revolute about x, y or z (JointModelRX/RY/RZ)")
        axis = np.eye(3)[_REVOLUTE[short]]
        world_axis = data.oMi[i].rotation @ axis
        if normal is None:
            normal = world_axis
        elif abs(abs(float(world_axis @ normal)) - 1.0) > 1e-12:
            raise ModelError(f"peer model {model.name!r}: joint {pm.names[i]!r} turns about "
                             f"{world_axis.round(6).tolist()}, not parallel to the first joint's "
                             f"{normal.round(6).tolist()}; expected a planar mechanism")
        inertia = pm.inertias[i]
        links.append(Link(i, pm.names[i], int(pm.parents[i]), pin.SE3(pm.jointPlacements[i]),
                          axis, float(inertia.mass), np.array(inertia.lever),
                          np.array(inertia.inertia)))
    if normal is None:
        raise ModelError(f"peer model {model.name!r}: no moving joint")
    closures = []
    for spec in model.closures:
        ja, pa = _frame(pm, spec.frame_a)
        jb, pb = _frame(pm, spec.frame_b)
        Rwb = data.oMi[jb].rotation
        n_b = Rwb.T @ normal
        if spec.type == "planar_revolute":
            nrm = np.asarray(spec.normal if spec.normal is not None else (0, 0, 1), float)
            if abs(abs(float(pb.rotation @ nrm / np.linalg.norm(nrm) @ n_b)) - 1.0) > 1e-12:
                raise ModelError(f"peer model {model.name!r}: closure {spec.name!r} normal is "
                                 "not the plane normal; expected a planar loop")
            kind, axis_b = "point", np.zeros(3)
        elif spec.type in ("revolute", "spherical"):
            if spec.type == "revolute" and abs(abs(float(
                    (data.oMi[ja].rotation @ pa.rotation @ np.asarray(spec.axis, float)
                     / np.linalg.norm(spec.axis)) @ normal)) - 1.0) > 1e-12:
                raise ModelError(f"peer model {model.name!r}: closure {spec.name!r} axis is not "
                                 "the plane normal; expected a planar loop")
            kind, axis_b = "point", np.zeros(3)
        elif spec.type == "point_on_line":
            axis_b = np.asarray(spec.axis, float) / np.linalg.norm(spec.axis)
            nrm = np.asarray(spec.normal if spec.normal is not None else (0, 0, 1), float)
            if abs(abs(float(pb.rotation @ nrm / np.linalg.norm(nrm) @ n_b)) - 1.0) > 1e-12:
                raise ModelError(f"peer model {model.name!r}: closure {spec.name!r} normal is "
                                 "not the plane normal; expected a planar loop")
            kind = "line"
        else:
            raise ModelError(f"peer model {model.name!r}: closure {spec.name!r} has type "
                             f"{spec.type!r}; expected revolute, planar_revolute, spherical or "
                             "point_on_line")
        closures.append(Closure(spec.name, kind, ja, np.array(pa.translation), jb,
                                np.array(pb.translation), np.array(pb.rotation), axis_b, n_b))
    return PlanarMechanism(model.name, np.asarray(model.gravity, float), normal, tuple(links),
                           tuple(closures))


def _vec(x) -> str:
    return " ".join(f"{float(v):.17g}" for v in np.ravel(x))


def _quat(R: np.ndarray) -> str:
    qt = pin.Quaternion(R)
    return _vec([qt.w, qt.x, qt.y, qt.z])


def _inertial(lk: Link) -> str:
    J = lk.inertia
    full = [J[0, 0], J[1, 1], J[2, 2], J[0, 1], J[0, 2], J[1, 2]]
    return (f'<inertial pos="{_vec(lk.com)}" mass="{lk.mass:.17g}" '
            f'fullinertia="{_vec(full)}"/>')


def mjcf(mech: PlanarMechanism, integrator: str = "RK4", dt: float = 1e-3,
         solref: tuple[float, float] | None = None) -> str:
    """MJCF text of ``mech``: one body per joint, hinge joints, ``connect`` closures.

    Parameters
    ----------
    mech : PlanarMechanism
    integrator : str  MuJoCo's ``option/integrator`` (``"RK4"``, ``"Euler"``, ...)
    dt : float  time step [s]
    solref : (time constant [s], damping ratio), optional
        The closures' ``solref``; default MuJoCo's (0.02 s, 1).

    Notes
    -----
    The closures are MuJoCo's soft constraints (default ``solimp``): the closure gap measured
    is the one a model with that ``solref`` shows.  The ``qpos`` order is the
    suite's ``q`` followed by one slide joint per point-on-line closure.
    """
    sites: dict[int, list[str]] = {}
    sliders: dict[int, list[str]] = {}
    eqs = []
    for c in mech.closures:
        sites.setdefault(c.link_a, []).append(f'<site name="{c.name}_a" pos="{_vec(c.p_a)}"/>')
        if c.kind == "point":
            sites.setdefault(c.link_b, []).append(
                f'<site name="{c.name}_b" pos="{_vec(c.p_b)}"/>')
        else:
            sliders.setdefault(c.link_b, []).append(
                f'<body name="{c.name}_slider" pos="{_vec(c.p_b)}" quat="{_quat(c.R_b)}">'
                f'<joint name="{c.name}_slide" type="slide" axis="{_vec(c.axis_b)}"/>'
                f'<inertial pos="0 0 0" mass="{SLIDER_MASS}" '
                f'diaginertia="{_vec([SLIDER_MASS * 1e-4] * 3)}"/>'
                f'<site name="{c.name}_b" pos="0 0 0"/></body>')
        ref = "" if solref is None else f' solref="{_vec(solref)}"'
        eqs.append(f'<connect name="{c.name}" site1="{c.name}_a" site2="{c.name}_b"{ref}/>')
    # bodies after sliders: slide joints follow the hinges in qpos (body order = dof order)
    children: dict[int, list[Link]] = {}
    for lk in mech.links:
        children.setdefault(lk.parent, []).append(lk)

    def body(lk: Link) -> str:
        inner = [f'<joint name="{lk.name}" type="hinge" axis="{_vec(lk.axis)}"/>',
                 _inertial(lk), *sites.get(lk.index, [])]
        inner += [body(ch) for ch in children.get(lk.index, [])]
        inner += sliders.get(lk.index, [])
        return (f'<body name="{lk.name}_body" pos="{_vec(lk.placement.translation)}" '
                f'quat="{_quat(lk.placement.rotation)}">' + "".join(inner) + "</body>")

    world = [body(lk) for lk in children.get(0, [])] + sites.get(0, []) + sliders.get(0, [])
    return (f'<mujoco model="{mech.name}"><compiler angle="radian" autolimits="true"/>'
            f'<option timestep="{dt:.17g}" integrator="{integrator}" '
            f'gravity="{_vec(mech.gravity)}"/>'
            f'<worldbody>{"".join(world)}</worldbody>'
            f'<equality>{"".join(eqs)}</equality></mujoco>')


def mujoco_model(mech: PlanarMechanism, integrator: str = "RK4", dt: float = 1e-3,
                 solref: tuple[float, float] | None = None):
    """A compiled ``mujoco.MjModel`` of :func:`mjcf`.

    MuJoCo scales the softness of an equality constraint by the inverse weights of its two
    bodies at ``qpos0`` (``body_invweight0``); the slider of a point-on-line closure, a
    stand-in for a massless point, would make that closure about 1e6 times softer than a
    closure between links (measured: a 0.5 m gap on slider_crank).  Its inverse weight is
    therefore set to that of the link carrying ``frame_a``: the closure is as stiff as
    MuJoCo makes a closure between two links.
    """
    import mujoco

    mm = mujoco.MjModel.from_xml_string(mjcf(mech, integrator, dt, solref))
    for c in mech.closures:
        if c.kind == "line":
            slider = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_BODY, f"{c.name}_slider")
            link = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_BODY,
                                     f"{mech.links[c.link_a - 1].name}_body")
            mm.body_invweight0[slider] = mm.body_invweight0[link]
    return mm


_EXU_JOINT = ("RevoluteX", "RevoluteY", "RevoluteZ")


def _plane_basis(n: np.ndarray) -> np.ndarray:
    """Columns t1, t2, n: an orthonormal frame whose third axis is ``n``."""
    t1 = np.cross(n, [1.0, 0.0, 0.0])
    if np.linalg.norm(t1) < 0.5:
        t1 = np.cross(n, [0.0, 1.0, 0.0])
    t1 /= np.linalg.norm(t1)
    return np.column_stack([t1, np.cross(n, t1), n])


def exudyn_system(mech: PlanarMechanism, q0, v0):
    """An assembled Exudyn system: one ``ObjectKinematicTree`` (minimal coordinates = q) closed
    by ``GenericJoint`` constraints on ``MarkerKinematicTreeRigid`` markers.

    Point closures constrain the two in-plane translations, line closures the in-plane one
    normal to the line (the out-of-plane rows vanish identically for a planar loop and would make
    Exudyn's index-3 system singular).

    Returns
    -------
    (SystemContainer, MainSystem, node index)
    """
    import exudyn as exu
    from exudyn import itemInterface as ei

    SC = exu.SystemContainer()
    mbs = SC.AddSystem()
    n = len(mech.links)
    node = mbs.AddNode(ei.NodeGenericODE2(numberOfODE2Coordinates=n,
                                          referenceCoordinates=[0.0] * n,
                                          initialCoordinates=list(map(float, q0)),
                                          initialCoordinates_t=list(map(float, v0))))
    tree = mbs.AddObject(ei.ObjectKinematicTree(
        nodeNumber=node, gravity=list(mech.gravity),
        jointTypes=[getattr(exu.JointType, _EXU_JOINT[int(np.argmax(lk.axis))])
                    for lk in mech.links],
        linkParents=[lk.parent - 1 for lk in mech.links],
        jointTransformations=exu.Matrix3DList([lk.placement.rotation for lk in mech.links]),
        jointOffsets=exu.Vector3DList([lk.placement.translation for lk in mech.links]),
        linkInertiasCOM=exu.Matrix3DList([lk.inertia for lk in mech.links]),
        linkCOMs=exu.Vector3DList([lk.com for lk in mech.links]),
        linkMasses=[lk.mass for lk in mech.links]))
    ground = mbs.AddObject(ei.ObjectGround())

    def marker(link: int, p: np.ndarray, R: np.ndarray):
        """A marker at p with the joint axes R (columns) in the frame of link (0 = world)."""
        ht = exu.HT(rotation=R, translation=list(p))
        if link == 0:
            return mbs.AddMarker(ei.MarkerBodyRigid(bodyNumber=ground, localHT=ht))
        return mbs.AddMarker(ei.MarkerKinematicTreeRigid(objectNumber=tree, linkNumber=link - 1,
                                                         localHT=ht))

    for c in mech.closures:
        if c.kind == "point":
            R0, axes = _plane_basis(c.normal_link_b), [1, 1, 0, 0, 0, 0]
        else:
            d = c.R_b @ c.axis_b
            R0 = np.column_stack([d, np.cross(c.normal_link_b, d), c.normal_link_b])
            axes = [0, 1, 0, 0, 0, 0]
        # frame_a's marker has no own axes: the constrained axes are marker 0's
        m_b, m_a = marker(c.link_b, c.p_b, R0), marker(c.link_a, c.p_a, np.eye(3))
        mbs.AddObject(ei.ObjectJointGeneric(markerNumbers=[m_b, m_a], constrainedAxes=axes))
    mbs.Assemble()
    return SC, mbs, node


def drake_plant(mech: PlanarMechanism, dt: float = 1e-3):
    """A finalized discrete (SAP) ``MultibodyPlant`` of ``mech`` in a ``DiagramBuilder``.

    Revolute joints as in the suite; point closures as ``AddBallConstraint``; line closures as a
    slider body (:data:`SLIDER_MASS`) on a ``PrismaticJoint`` with a ball constraint.

    Returns
    -------
    (builder, plant, joints)  ``joints``: the revolute joints in the suite's q order.
    """
    from pydrake.math import RigidTransform, RotationMatrix
    from pydrake.multibody.plant import AddMultibodyPlant, MultibodyPlantConfig
    from pydrake.multibody.tree import (
        PrismaticJoint,
        RevoluteJoint,
        RotationalInertia,
        SpatialInertia,
    )
    from pydrake.systems.framework import DiagramBuilder

    builder = DiagramBuilder()
    plant, _ = AddMultibodyPlant(MultibodyPlantConfig(time_step=dt,
                                                      discrete_contact_approximation="sap"),
                                 builder)
    plant.mutable_gravity_field().set_gravity_vector(mech.gravity)
    bodies = {0: plant.world_body()}
    joints = []
    for lk in mech.links:
        J = lk.inertia
        rot = RotationalInertia(J[0, 0], J[1, 1], J[2, 2], J[0, 1], J[0, 2], J[1, 2])
        bodies[lk.index] = plant.AddRigidBody(
            f"{lk.name}_body", SpatialInertia.MakeFromCentralInertia(lk.mass, lk.com, rot))
        parent = bodies[lk.parent]
        X = RigidTransform(RotationMatrix(lk.placement.rotation), lk.placement.translation)
        frame = plant.AddFrame(_fixed_frame(f"{lk.name}_parent", parent.body_frame(), X))
        joints.append(plant.AddJoint(RevoluteJoint(lk.name, frame, bodies[lk.index].body_frame(),
                                                   lk.axis)))
    for c in mech.closures:
        if c.kind == "point":
            plant.AddBallConstraint(bodies[c.link_a], c.p_a, bodies[c.link_b], c.p_b)
            continue
        small = SLIDER_MASS * 1e-4
        slider = plant.AddRigidBody(f"{c.name}_slider", SpatialInertia.MakeFromCentralInertia(
            SLIDER_MASS, np.zeros(3), RotationalInertia(small, small, small)))
        X = RigidTransform(RotationMatrix(c.R_b), c.p_b)
        frame = plant.AddFrame(_fixed_frame(f"{c.name}_rail", bodies[c.link_b].body_frame(), X))
        plant.AddJoint(PrismaticJoint(f"{c.name}_slide", frame, slider.body_frame(), c.axis_b))
        plant.AddBallConstraint(bodies[c.link_a], c.p_a, slider, np.zeros(3))
    plant.Finalize()
    return builder, plant, joints


def _fixed_frame(name, parent_frame, X):
    from pydrake.multibody.tree import FixedOffsetFrame

    return FixedOffsetFrame(name, parent_frame, X)
