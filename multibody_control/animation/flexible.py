"""Scene of a planar flexible chain (``multibody_dynamics.flexible``): deformed beams.

Each flexible body is drawn through its modal-data nodes at ``P_k + s Phi_k q_e`` (the Ritz
approximation of :meth:`FlexibleChain.point_position`, with the elastic coordinates scaled
by the deformation factor ``s``) in its body frame; the body frames come from
:meth:`FlexibleChain.frames` evaluated at ``[q_r, s q_e]``, so a child body sits on its
parent's drawn (scaled) tip.  The chain lies in the world x-y plane.  Rigid bodies are bars
to their distal point, or a block (a cart) when the distal point is the frame origin.  The
end-effector path is the true one (unscaled).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from multibody_dynamics.errors import InputError, MultibodyError
from multibody_dynamics.model.mjcf import segment_placement

from .scene import (
    CLOSURE_COLOR,
    DESIRED_COLOR,
    JOINT_COLOR,
    LINK_COLORS,
    PATH_COLOR,
    Scene,
    Shape,
    _pose7,
)

MAX_SEGMENTS = 12  # cylinders per drawn beam
MAX_AUTO_SCALE = 1000.0


def _rz(th: float) -> np.ndarray:
    c, s = np.cos(th), np.sin(th)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _node_subset(n_nodes: int, distal: int) -> np.ndarray:
    idx = np.unique(np.r_[np.linspace(0, n_nodes - 1, MAX_SEGMENTS + 1).round().astype(int),
                          distal % n_nodes])
    return idx


def auto_deformation_scale(chain, q: np.ndarray) -> float:
    """Factor that shows the largest elastic deflection (over all samples and nodes) as 10 %
    of that body's length, rounded down to a 1-2-5 number, within [1, MAX_AUTO_SCALE]; 1 when
    the deflection is below 1e-6 of the length (round-off of a run at rest, not a shape)."""
    best = np.inf
    for i, b in enumerate(chain.bodies):
        if not b.flexible:
            continue
        d = b.modal_data
        defl = np.einsum("kij,nj->nki", d.node_shapes[:, :2], q[:, chain.elastic_slices[i]])
        peak = float(np.max(np.linalg.norm(defl, axis=2))) if defl.size else 0.0
        length = float(np.max(np.linalg.norm(d.node_positions, axis=1)))
        if peak > 1e-6 * length:
            best = min(best, 0.1 * length / peak)
    if not np.isfinite(best):
        return 1.0
    return float(min(MAX_AUTO_SCALE, max(1.0, _round_125(best))))


def _round_125(x: float) -> float:
    """Largest 1-2-5 number not above x (so the shown factor is a round one)."""
    e = 10.0 ** np.floor(np.log10(x))
    return max(m * e for m in (1, 2, 5) if m * e <= x)


def _task_path(res) -> np.ndarray | None:
    """(N, 3) desired path of the inversion scenario that wrote ``res`` (its task's
    ``<body>.x``, ``<body>.y`` at the result's times), or None."""
    from pathlib import Path

    scenario = res.meta.get("scenario")
    if res.meta.get("kind") != "invert" or not scenario or not Path(scenario).is_file():
        return None
    from ..inversion.flexible_scenario import load_flexible_scenario

    task = load_flexible_scenario(scenario).task
    names = list(task.names)
    body = next((n.rsplit(".", 1)[0] for n in names if n.endswith(".x")), None)
    if body is None or f"{body}.y" not in names:
        return None
    p = task(res.t)[0]
    return np.column_stack([p[:, names.index(f"{body}.x")], p[:, names.index(f"{body}.y")],
                            np.zeros(res.t.size)])


def _chain_reach(chain) -> float:
    """Size of the drawing [m]: the summed extents of the bodies (1 for a chain of points)."""
    reach = 0.0
    for b in chain.bodies:
        if b.flexible:
            reach += float(np.max(np.linalg.norm(b.modal_data.node_positions, axis=1)))
        else:
            reach += float(np.linalg.norm(b.distal))
    return reach or 1.0


def _body_shapes(i: int, b, r: float, reach: float) -> tuple[list, list]:
    """Shapes of body ``i`` (``b``) and their builders ``(what, i, node a, node c)``: a beam
    through a subset of its nodes, a bar, or a block (a cart); then its joint."""
    color = LINK_COLORS[i % len(LINK_COLORS)]
    shapes, builders = [], []
    if b.flexible:
        d = b.modal_data
        idx = _node_subset(d.node_positions.shape[0], b.distal_node)
        for a, c in zip(idx[:-1], idx[1:]):
            L = float(np.linalg.norm(d.node_positions[c] - d.node_positions[a]))
            shapes.append(Shape("cylinder", (r, L), color, "link", b.name))
            builders.append(("seg", i, a, c))
        shapes.append(Shape("sphere", (r,), color, "link", b.name))
        builders.append(("node", i, int(idx[-1]), None))
    elif np.linalg.norm(b.distal) > 1e-9:
        shapes.append(Shape("cylinder", (r, float(np.linalg.norm(b.distal))), color, "link",
                            b.name))
        builders.append(("bar", i, None, None))
    else:  # a cart: a block on the frame
        shapes.append(Shape("box", (0.06 * reach, 0.03 * reach, 0.02 * reach), color,
                            "link", b.name))
        builders.append(("block", i, None, None))
    shapes.append(Shape("sphere", (1.8 * r,), JOINT_COLOR, "joint", b.joint))
    builders.append(("joint", i, None, None))
    return shapes, builders


def _shape_pose(chain, qk: np.ndarray, fr, builder) -> pin.SE3:
    """Placement of the shape of ``builder`` at the (scaled) configuration ``qk`` whose body
    frames are ``fr``."""
    what, i, a, c = builder
    p0, th = fr[i]
    R, p = _rz(th), np.r_[p0, 0.0]
    if what in ("seg", "node"):
        d, qe = chain.bodies[i].modal_data, qk[chain.elastic_slices[i]]

        def node(n):
            return p + R @ np.r_[d.node_positions[n] + d.node_shapes[n, :2] @ qe, 0.0]

        if what == "seg":
            return segment_placement(node(a), node(c))
        return pin.SE3(np.eye(3), node(a))
    if what == "bar":
        return segment_placement(p, p + R @ np.r_[chain.bodies[i].distal, 0.0])
    if what == "block":
        return pin.SE3(R, p)
    return pin.SE3(np.eye(3), p)


def _flexible_paths(chain, q: np.ndarray, res) -> list[dict]:
    """The end effector's true path along ``q`` and the scenario's desired path, if any."""
    paths = []
    ee = chain.config.end_effector
    if ee is not None:
        pts = np.array([np.r_[chain.point_position(qk, ee), 0.0] for qk in q])
        paths.append({"name": f"{ee} tip path (true, unscaled)", "color": PATH_COLOR,
                      "dashed": False, "points": pts[:: max(1, len(pts) // 600)]})
    desired = _task_path(res)
    if desired is not None:
        paths.append({"name": "desired path", "color": DESIRED_COLOR, "dashed": True,
                      "points": desired[:: max(1, len(desired) // 600)]})
    return paths


class FlexibleDrawing:
    """What is drawn of a flexible model (shapes, deformation factor) and the placements of
    its shapes at one configuration: the static page's scene (:func:`flexible_scene`) and the
    live viewer (:mod:`.live`) place them with the same :meth:`frame`.

    Parameters
    ----------
    model : FlexibleChain, or ClosedFlexibleChain (its spanning chain is drawn, and each
        closure's two points joined by a segment)
    deformation_scale : factor ``s`` on the elastic coordinates in the drawing
    """

    def __init__(self, model, deformation_scale: float):
        closures, name = (), getattr(model, "name", None)
        chain = model
        if hasattr(model, "chain") and hasattr(model, "closures"):  # a closed flexible model
            closures, chain = tuple(model.closures), model.chain
        self.chain, self.closures = chain, closures
        self.name = name or chain.config.name
        self.s = float(deformation_scale)
        self.reach = _chain_reach(chain)  # size of the drawing [m]
        r = 0.012 * self.reach
        self.shapes, self.builders = [], []
        for i, b in enumerate(chain.bodies):
            body_shapes, body_builders = _body_shapes(i, b, r, self.reach)
            self.shapes += body_shapes
            self.builders += body_builders
        for c in closures:
            for _ in range(2):
                self.shapes.append(Shape("sphere", (2.5 * r,), CLOSURE_COLOR, "closure", c.name))
        self.ee = chain.config.end_effector

    def frame(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Poses (S, 7) of the shapes (position [m], quaternion x y z w) and the closure
        segments (K, 2, 3) [m] at the configuration ``q`` (nv,), its elastic coordinates
        scaled by ``s`` (the true ``q`` is not changed)."""
        chain = self.chain
        scaled = np.array(q, float)
        scaled[chain.nq_r:] *= self.s
        fr = chain.frames(scaled)
        nb = len(self.builders)
        poses = np.zeros((nb + 2 * len(self.closures), 7))
        for j, builder in enumerate(self.builders):
            poses[j] = _pose7(_shape_pose(chain, scaled, fr, builder))
        segments = np.zeros((len(self.closures), 2, 3))
        for m, c in enumerate(self.closures):  # each closure's two points, joined
            a = np.r_[chain.point_position(scaled, c.body_a, c.node_a), 0.0]
            b = (np.r_[chain.point_position(scaled, c.body_b, c.node_b), 0.0]
                 if c.body_b is not None else np.r_[c.point_b, 0.0])
            segments[m] = a, b
            poses[nb + 2 * m] = np.r_[a, 0, 0, 0, 1]
            poses[nb + 2 * m + 1] = np.r_[b, 0, 0, 0, 1]
        return poses, segments

    def ee_point(self, q: np.ndarray) -> np.ndarray | None:
        """The end effector's true (unscaled) position (3,) [m] at ``q``, None without one."""
        if self.ee is None:
            return None
        return np.r_[self.chain.point_position(q, self.ee), 0.0]


def static_deformation_scale(model, q0: np.ndarray, u: np.ndarray | None = None) -> float:
    """Deformation factor of a run not yet computed (the live viewer): the rule of
    :func:`auto_deformation_scale` applied to the quasi-static deflection at the start
    ``q0`` (nv,), at rest, under gravity and the constant inputs ``u`` (nu,) [N | N m]: the
    ``q_e`` whose elastic accelerations vanish while the joints accelerate (the links
    carried along undeformed in shape), i.e. the elastic rows of
    ``forward_dynamics(q, 0, u) = 0`` (Newton on ``q_e``, Jacobian by central differences).
    A closed loop's spanning chain is used (closure forces left out).  An estimate: the
    motion may deflect the links more (the drawing then exaggerates more than 10 %) or
    less; 1 when nothing deflects them at the start."""
    chain = model.chain if hasattr(model, "chain") and hasattr(model, "closures") else model
    if chain.nq_e == 0:
        return 1.0
    nr = chain.nq_r
    tau = np.zeros(chain.nv) if u is None else np.asarray(model.B, float) @ np.asarray(u, float)
    q = np.array(q0, float)
    zero = np.zeros(chain.nv)

    def residual(qe):
        x = q.copy()
        x[nr:] = qe
        return chain.forward_dynamics(x, zero, tau=tau)[nr:]

    qe = q[nr:].copy()
    h = 1e-7
    try:
        for _ in range(3):  # linear in q_e but for the floating frame's coupling
            J = np.column_stack([(residual(qe + h * e) - residual(qe - h * e)) / (2 * h)
                                 for e in np.eye(qe.size)])
            qe = qe - np.linalg.solve(J, residual(qe))
    except (np.linalg.LinAlgError, MultibodyError):  # singular, or far out of range
        return 1.0
    q[nr:] = qe
    return auto_deformation_scale(chain, q[None, :]) if np.all(np.isfinite(q)) else 1.0


def flexible_scene(chain, res, frames: np.ndarray, deformation_scale: float | None = None
                   ) -> Scene:
    """Scene of a :class:`~multibody_dynamics.flexible.system.FlexibleChain` result, or of a
    :class:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain` one (its spanning chain,
    and each closure's two points joined by a segment: with an exaggerated deformation the
    drawn loop may open by the exaggeration, the true one is closed)."""
    model = chain
    if hasattr(chain, "chain") and hasattr(chain, "closures"):  # a closed flexible model
        chain = chain.chain
    q = res.block("q", chain.coordinate_names)
    if q is None:
        raise InputError(f"{res.path}: expected columns q.{', q.'.join(chain.coordinate_names)} "
                         f"of {chain.config.name}")
    s = auto_deformation_scale(chain, q) if deformation_scale is None else float(deformation_scale)
    drawing = FlexibleDrawing(model, s)
    placed = [drawing.frame(q[k]) for k in frames]
    poses = np.array([p for p, _ in placed]).reshape(frames.size, len(drawing.shapes), 7)
    segments = np.array([g for _, g in placed]).reshape(frames.size, len(drawing.closures), 2, 3)
    kind = res.meta.get("kind", "result")
    scene = Scene(t=res.t[frames], shapes=drawing.shapes, poses=poses,
                  segments=segments, paths=_flexible_paths(chain, q, res),
                  title=f"{drawing.name}: {kind} ({res.path.name}), deformation x{s:g}",
                  scale=drawing.reach, deformation_scale=s)
    scene.info = (f"{frames.size} frames, t = {res.t[0]:.3g} to {res.t[-1]:.3g} s; elastic "
                  f"deformation drawn {s:g} times its size"
                  + (f"; {len(drawing.closures)} closure(s)" if drawing.closures else ""))
    return scene
