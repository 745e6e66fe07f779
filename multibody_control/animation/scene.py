"""The animated scene of a rigid model: shapes from the URDF, their placements from pinocchio.

Every drawn object is a primitive (box, cylinder, sphere) with one placement per frame:

* links: the URDF ``<visual>`` boxes, cylinders and spheres, placed at
  ``oMf[link] * origin`` (pinocchio ``forwardKinematics`` + ``updateFramePlacements``); a
  link whose visuals are meshes, or that has none but carries mass, is drawn as capsules
  (a cylinder with spheres at its ends) from its frame to its child joints;
* joints: a small dark sphere at each moving joint;
* closures (the model YAML's cut joints): a sphere on each of the two cut frames and the
  segment joining them, so a loop is seen closed (the segment has zero length while the
  closure holds); closures with an axis (``point_on_line``, ``prismatic``…) also show the
  line the frame slides on;
* paths: the end-effector frame's path over the whole result, and the desired path where
  the result has it (``run``: the path of the reference ``q_ref``; ``invert``: ``y_d`` of
  frame-coordinate outputs such as ``left_tip.x``).

The scene is plain data (:class:`Scene`), turned into HTML by :mod:`.html` and into a GIF
by :mod:`.gif`.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from multibody_dynamics.errors import InputError
from multibody_dynamics.model.mjcf import segment_placement

LINK_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b", "#e377c2", "#bcbd22",
               "#3b5ba5")
JOINT_COLOR = "#333333"
CLOSURE_COLOR = "#ff7f0e"
PATH_COLOR = "#d62728"
DESIRED_COLOR = "#555555"


@dataclass
class Shape:
    """One drawn primitive.

    kind : "box" (size (3,) [m]), "cylinder" (radius, length [m], axis along local z) or
    "sphere" (radius [m]); color "#rrggbb"; role "link" | "joint" | "closure".
    """

    kind: str
    dims: tuple
    color: str
    role: str
    name: str


@dataclass
class Scene:
    """Shapes, their placements per frame, segments, paths; all in world coordinates [m].

    Attributes
    ----------
    t : (F,) frame times [s]
    shapes : list of Shape (S of them)
    poses : (F, S, 7) position (3) and quaternion (x, y, z, w) of each shape
    segments : (F, K, 2, 3) line segments that move (closure gaps, rails)
    paths : list of dict(name, color, dashed, points (P, 3))
    title, info : str
    """

    t: np.ndarray
    shapes: list
    poses: np.ndarray
    segments: np.ndarray
    paths: list = field(default_factory=list)
    title: str = ""
    info: str = ""
    scale: float = 1.0
    deformation_scale: float | None = None

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper corner (3,) of everything drawn, over all frames [m]."""
        pts = [self.segments.reshape(-1, 3)] + [p["points"] for p in self.paths]
        pts = np.vstack([p for p in pts if p.size] or [np.zeros((0, 3))])
        centres = self.poses[:, :, :3]
        reach = np.array([_reach(s) for s in self.shapes])  # bounding-sphere radius [m]
        lo = np.min(centres - reach[None, :, None], axis=(0, 1))
        hi = np.max(centres + reach[None, :, None], axis=(0, 1))
        if pts.size:
            lo, hi = np.minimum(lo, pts.min(axis=0)), np.maximum(hi, pts.max(axis=0))
        pad = 0.03 * self.scale
        return lo - pad, hi + pad

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        """Viewing direction (unit (3,), from the target to the eye) and the up axis (z).

        A planar mechanism is seen nearly face-on: the eye lies along the axis in which
        everything moves least, tilted by about 30 degrees so that depth stays readable;
        world z is up on the screen (as in matplotlib's 3-D axes).
        """
        eye = {2: (0.2, -0.55, 1.0), 1: (0.25, -1.0, 0.35), 0: (1.0, 0.25, 0.35)}[
            self.plane_normal()]
        eye = np.array(eye)
        return eye / np.linalg.norm(eye), np.array([0.0, 0.0, 1.0])

    def plane_normal(self) -> int:
        """World axis (0, 1, 2) along which the shapes move least (a planar mechanism's
        normal)."""
        pts = self.poses[:, :, :3].reshape(-1, 3)
        return int(np.argmin(np.ptp(pts, axis=0)))

    def subsample(self, step: int) -> Scene:
        """Every ``step``-th frame (the last one kept)."""
        idx = np.unique(np.r_[np.arange(0, self.t.size, step), self.t.size - 1])
        return dataclasses.replace(self, t=self.t[idx], poses=self.poses[idx],
                                   segments=self.segments[idx])

    def to_json(self) -> dict:
        """The scene as JSON-ready lists (coordinates rounded to 0.01 mm)."""
        lo, hi = self.bounds()
        eye, up = self.view()
        return {
            "title": self.title, "info": self.info, "scale": round(self.scale, 6),
            "deformation_scale": self.deformation_scale,
            "t": np.round(self.t, 6).tolist(),
            "shapes": [{"kind": s.kind, "dims": [round(float(d), 6) for d in s.dims],
                        "color": s.color, "role": s.role, "name": s.name} for s in self.shapes],
            "poses": np.round(self.poses, 5).reshape(self.t.size, -1).tolist(),
            "segments": np.round(self.segments, 5).reshape(self.t.size, -1).tolist(),
            "paths": [{"name": p["name"], "color": p["color"], "dashed": p["dashed"],
                       "points": np.round(p["points"], 5).reshape(-1).tolist()}
                      for p in self.paths],
            "bounds": [lo.tolist(), hi.tolist()], "eye": eye.tolist(), "up": up.tolist(),
            "normal": self.plane_normal(),
        }


def _reach(shape: Shape) -> float:
    """Radius of a sphere about the shape's origin that holds the whole shape [m]."""
    d = np.asarray(shape.dims, float)
    if shape.kind == "box":
        return 0.5 * float(np.linalg.norm(d))
    if shape.kind == "cylinder":
        return float(np.hypot(d[0], 0.5 * d[1]))
    return float(d[0])


def q_names(model) -> list[str]:
    """One name per entry of q (the ``q.`` columns of ``multibody simulate``)."""
    pm = model.pin_model
    names = []
    for jid in range(1, pm.njoints):
        nq = pm.joints[jid].nq
        names.extend([pm.names[jid]] if nq == 1 else [f"{pm.names[jid]}.{k}" for k in range(nq)])
    return names


def configurations(model, res, prefix: str = "q") -> np.ndarray | None:
    """(N, nq) configurations from the ``<prefix>.`` columns of a result; None if absent.

    ``simulate`` names one column per entry of q, ``run``/``invert`` one per velocity
    coordinate (continuous joints by angle, converted to their ``(cos, sin)`` pair here); both
    are the same for models of 1-DoF joints (all shipped robots).
    """
    q = res.block(prefix, q_names(model))
    if q is None:
        q = res.block(prefix, model.coordinate_names)
        if q is not None and model.nq != model.nv:  # continuous joints by angle (invert)
            from multibody_dynamics.model.joint_angles import JointAngles

            q = JointAngles(model).configuration(q)
    return q


def _origin(elem) -> pin.SE3:
    o = elem.find("origin") if elem is not None else None
    xyz = np.zeros(3) if o is None else np.array([float(x) for x in o.get("xyz", "0 0 0").split()])
    rpy = np.zeros(3) if o is None else np.array([float(x) for x in o.get("rpy", "0 0 0").split()])
    return pin.SE3(pin.rpy.rpyToMatrix(*rpy), xyz)


def urdf_link_masses(urdf_path) -> dict:
    """Link name -> its own ``<inertial><mass>`` [kg] (0 without one)."""
    out = {}
    for link in ET.parse(str(urdf_path)).getroot().iter("link"):
        m = link.find("inertial/mass")
        out[link.get("name")] = float(m.get("value", 0.0)) if m is not None else 0.0
    return out


def urdf_visuals(urdf_path) -> dict:
    """Link name -> list of (kind, dims, origin SE3) of its primitive visuals; a link with a
    mesh visual maps to None (drawn as capsules instead)."""
    root = ET.parse(str(urdf_path)).getroot()
    out = {}
    for link in root.iter("link"):
        items = []
        for vis in link.findall("visual"):
            geom = vis.find("geometry")
            g = geom[0] if geom is not None and len(geom) else None
            if g is None:
                continue
            if g.tag == "box":
                items.append(("box", tuple(float(x) for x in g.get("size").split()), _origin(vis)))
            elif g.tag == "cylinder":
                items.append(("cylinder", (float(g.get("radius")), float(g.get("length"))),
                              _origin(vis)))
            elif g.tag == "sphere":
                items.append(("sphere", (float(g.get("radius")),), _origin(vis)))
            else:  # mesh (or capsule of some dialects): drawn as a stick figure
                items = None
                break
        out[link.get("name")] = items
    return out


def _model_visuals(model) -> tuple[dict, dict]:
    """(visuals, masses) of the links of a model's URDF, or of the bodies of its MJCF file
    (masses then from pinocchio: MJCF bodies often take theirs from their geoms)."""
    from multibody_dynamics.model.mjcf import is_mjcf_file, mjcf_visuals

    if not is_mjcf_file(model.urdf_path):
        return urdf_visuals(model.urdf_path), urdf_link_masses(model.urdf_path)
    pm = model.pin_model
    masses = {f.name: pm.inertias[f.parentJoint].mass for f in pm.frames
              if f.type == pin.FrameType.BODY}
    return mjcf_visuals(model.urdf_path), masses


def _pose7(M: pin.SE3) -> np.ndarray:
    return np.concatenate([M.translation, pin.Quaternion(M.rotation).coeffs()])


def frame_times(t: np.ndarray, fps: float, max_frames: int | None = None) -> np.ndarray:
    """Indices of the samples shown: one per 1/fps s of result time (the sample at or before
    each frame time), at most ``max_frames`` of them."""
    if not (np.isfinite(fps) and fps > 0):
        raise InputError(f"fps: expected a positive frame rate [1/s], got {fps}")
    span = float(t[-1] - t[0])
    n = int(np.floor(span * fps + 1e-9)) + 1
    if max_frames is not None:
        n = max(2, min(n, max_frames)) if t.size > 1 else 1
    grid = np.linspace(t[0], t[0] + span, n) if n > 1 else t[:1]
    idx = np.searchsorted(t, grid + 1e-12, side="right") - 1
    return np.clip(idx, 0, t.size - 1)


def _link_frames(pm, visuals: dict) -> tuple[dict, dict]:
    """Link name -> BODY frame id (the links of the URDF), and link name -> placements (SE3)
    in the link frame of its child joints and fixed child frames (ends of the stick figure)."""
    body = {}
    for fid, f in enumerate(pm.frames):
        if f.type == pin.FrameType.BODY and f.name in visuals:
            body[f.name] = fid
    children = {name: [] for name in body}
    for jid in range(1, pm.njoints):
        parent = pm.parents[jid]
        for name, fid in body.items():
            fr = pm.frames[fid]
            if fr.parentJoint == parent:
                children[name].append(fr.placement.inverse() * pm.jointPlacements[jid])
    for f in pm.frames:  # fixed child frames (e.g. a tool tip) end sticks too
        if f.type in (pin.FrameType.BODY, pin.FrameType.FIXED_JOINT) and f.name not in body:
            for name, bid in body.items():
                if pm.frames[bid].parentJoint == f.parentJoint and f.placement.translation.any():
                    children[name].append(pm.frames[bid].placement.inverse() * f.placement)
    return body, children


def _robot_scale(pm, data, q: np.ndarray, frames: np.ndarray) -> float:
    """Scale of the robot [m]: extent of the joint origins over (about 20 of) the shown
    frames; 1 when they do not move apart."""
    origins = []
    for k in frames[:: max(1, frames.size // 20)]:
        pin.forwardKinematics(pm, data, q[k])
        origins += [data.oMi[j].translation.copy() for j in range(pm.njoints)]
    origins = np.array(origins)
    return float(np.max(np.ptp(origins, axis=0))) or 1.0


def _stick_shapes(name: str, fid: int, sticks: list, color: str, r: float
                  ) -> tuple[list, list]:
    """Capsules of radius ``r`` [m] from link frame ``fid`` to each of ``sticks`` (SE3): the
    shapes and their placements ``(fid, SE3 in the frame)``."""
    shapes, placements = [], []
    for C in sticks:
        a, b = np.zeros(3), C.translation
        shapes.append(Shape("cylinder", (r, float(np.linalg.norm(b))), color, "link", name))
        placements.append((fid, segment_placement(a, b)))
        for end in (a, b):
            shapes.append(Shape("sphere", (r,), color, "link", name))
            placements.append((fid, pin.SE3(np.eye(3), end)))
    return shapes, placements


def _link_shapes(body: dict, children: dict, visuals: dict, masses: dict, scale: float
                 ) -> tuple[list, list]:
    """Shapes of the links and their placements ``(fid, SE3 in the frame)``: the URDF's
    primitive visuals, or capsules for links with meshes or massive links without visuals."""
    shapes, placements = [], []
    color_of = {}
    for name, fid in body.items():
        items = visuals[name]
        sticks = [C for C in children[name] if np.linalg.norm(C.translation) > 1e-9]
        if not items and not (items is None or (masses.get(name, 0.0) > 0 and sticks)):
            continue  # nothing to draw (world, massless marker links such as a tool point)
        color = color_of.setdefault(name, LINK_COLORS[len(color_of) % len(LINK_COLORS)])
        if items:
            for kind, dims, M in items:
                shapes.append(Shape(kind, dims, color, "link", name))
                placements.append((fid, M))
        else:
            stick_shapes, stick_placements = _stick_shapes(name, fid, sticks, color,
                                                           0.02 * scale)
            shapes += stick_shapes
            placements += stick_placements
    return shapes, placements


def _place(pm, data, qk: np.ndarray) -> None:
    """Joint and frame placements of ``data`` at the configuration ``qk``."""
    pin.forwardKinematics(pm, data, qk)
    pin.updateFramePlacements(pm, data)


def _closure_segments(closures: list, gaps: list, scale: float, n_frames: int) -> np.ndarray:
    """Segments (F, K, 2, 3) [m]: each closure's gap between its frames, and for closures with
    an axis the line the frame slides on (``gaps``: per frame, per closure, the two frame
    origins and the rotation of frame b)."""
    segments = []
    for ci, (c, _, _) in enumerate(closures):
        seg = [[g[ci][0], g[ci][1]] for g in gaps]
        segments.append(seg)
        if c.axis is not None and c.type in ("point_on_line", "prismatic", "line", "slider"):
            axis = np.asarray(c.axis, float) / np.linalg.norm(c.axis)
            s = np.array([axis @ (g[ci][2].T @ (g[ci][0] - g[ci][1])) for g in gaps])
            lo, hi = s.min() - 0.15 * scale, s.max() + 0.15 * scale
            segments.append([[g[ci][1] + g[ci][2] @ axis * lo, g[ci][1] + g[ci][2] @ axis * hi]
                             for g in gaps])
    return np.array(segments, float).transpose(1, 0, 2, 3) if segments else np.zeros(
        (n_frames, 0, 2, 3))


def rig(model, scale: float) -> tuple[list, list, list]:
    """What is drawn of a rigid model, before any configuration: ``(shapes, placements,
    closures)``, each placement ``(fid, SE3)`` in BODY frame ``fid`` (negative: joint ``-fid``),
    each closure ``(closure, frame id a, frame id b)``; ``scale`` [m] sets the joint and
    closure spheres and the capsules' radius."""
    pm = model.pin_model
    visuals, masses = _model_visuals(model)
    # link frame ids, and the child joint placements of every link (for the stick figure)
    body, children = _link_frames(pm, visuals)
    shapes, placements = _link_shapes(body, children, visuals, masses, scale)
    jr = 0.03 * scale
    for jid in range(1, pm.njoints):
        shapes.append(Shape("sphere", (jr,), JOINT_COLOR, "joint", pm.names[jid]))
        placements.append((-jid, pin.SE3.Identity()))  # negative: a joint frame
    closures = []
    for c in model.closures:
        fa, fb = model.frame_id(c.frame_a), model.frame_id(c.frame_b)
        closures.append((c, fa, fb))
        for fid in (fa, fb):
            shapes.append(Shape("sphere", (0.04 * scale,), CLOSURE_COLOR, "closure", c.name))
            placements.append((fid, pin.SE3.Identity()))
    return shapes, placements, closures


def frame_poses(pm, data, placements: list, closures: list, qk: np.ndarray
                ) -> tuple[np.ndarray, list]:
    """Poses (S, 7) (position, quaternion x y z w) of the shapes of :func:`rig` at the
    configuration ``qk`` (nq,), and per closure its two frame origins (3,) [m] and the
    rotation (3, 3) of frame b."""
    _place(pm, data, qk)
    poses = np.zeros((len(placements), 7))
    for s, (fid, M) in enumerate(placements):
        base = data.oMi[-fid] if fid < 0 else data.oMf[fid]
        poses[s] = _pose7(base * M)
    gap = [(data.oMf[fa].translation.copy(), data.oMf[fb].translation.copy(),
            data.oMf[fb].rotation.copy()) for _, fa, fb in closures]
    return poses, gap


def build_scene(model, q: np.ndarray, t: np.ndarray, frames: np.ndarray | None = None,
                desired: np.ndarray | None = None, ee_frame: str | None = None,
                title: str = "") -> Scene:
    """Scene of a rigid ``MultibodyModel`` moving through configurations ``q``.

    Parameters
    ----------
    q : (N, nq) configurations; t : (N,) [s]
    frames : indices of the samples to show (default: all)
    desired : (N, 3) desired end-effector path [m], optional
    ee_frame : frame whose path is drawn (default ``model.end_effector``; none if neither)
    """
    pm = model.pin_model
    data = pm.createData()
    q = np.asarray(q, float)
    if q.ndim != 2 or q.shape[1] != pm.nq or q.shape[0] != t.size:
        raise InputError(f"q: expected shape ({t.size}, {pm.nq}), got {q.shape}")
    frames = np.arange(t.size) if frames is None else np.asarray(frames)
    scale = _robot_scale(pm, data, q, frames)
    shapes, placements, closures = rig(model, scale)
    ee = ee_frame or model.end_effector
    ee_id = model.frame_id(ee) if ee else None

    poses = np.zeros((frames.size, len(shapes), 7))
    gaps = []
    for i, k in enumerate(frames):
        poses[i], gap = frame_poses(pm, data, placements, closures, q[k])
        gaps.append(gap)
    seg_arr = _closure_segments(closures, gaps, scale, frames.size)

    paths = []
    if ee_id is not None:
        pts = np.zeros((t.size, 3))
        for k in range(t.size):
            _place(pm, data, q[k])
            pts[k] = data.oMf[ee_id].translation
        paths.append({"name": f"{ee} path", "color": PATH_COLOR, "dashed": False,
                      "points": _thin(pts)})
    if desired is not None:
        paths.append({"name": "desired path", "color": DESIRED_COLOR, "dashed": True,
                      "points": _thin(np.asarray(desired, float))})
    return Scene(t=t[frames], shapes=shapes, poses=poses, segments=seg_arr, paths=paths,
                 title=title, scale=scale)


def _thin(points: np.ndarray, n: int = 600) -> np.ndarray:
    """At most about ``n`` points of a path (every k-th sample and the last one)."""
    points = points[np.all(np.isfinite(points), axis=1)]
    step = max(1, points.shape[0] // n)
    return np.vstack([points[::step], points[-1:]])


def path_of(model, q: np.ndarray, frame: str) -> np.ndarray:
    """(N, 3) world positions of ``frame`` along configurations ``q`` (N, nq) [m]."""
    pm = model.pin_model
    data = pm.createData()
    fid = model.frame_id(frame)
    out = np.zeros((q.shape[0], 3))
    for k in range(q.shape[0]):
        pin.forwardKinematics(pm, data, q[k])
        out[k] = pin.updateFramePlacement(pm, data, fid).translation
    return out
