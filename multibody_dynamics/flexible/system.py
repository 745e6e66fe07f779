"""Planar chains of rigid and flexible bodies in relative joint coordinates.

Seifried (2014) Sect. 2.2.4, eqs. (2.131)-(2.143): each body ``i`` has a reference frame K_i
with inertial position ``r_i`` (2,) and angle ``theta_i``; its body coordinates are
``z_i = [r_i, theta_i, q_e,i]`` and its velocities ``z_II,i = J_i(q) v`` (2.133),
accelerations ``z_III,i = J_i v' + beta_i(q, v)`` (2.134). Summing the body equations of
:class:`~multibody_dynamics.flexible.body.FlexibleBody2D` (``Mbar_i z_III + h_omega,i + h_e,i
= h_s,i`` in those coordinates) with ``J_i^T`` gives (2.137)-(2.143)::

    M(q) v' + k(q, v) + f_e(q, v) = g(q) + B u,      q = [q_r; q_e,1; ...; q_e,p]
    M = sum J_i^T Mbar_i J_i                                          (2.139)
    k = sum J_i^T (Mbar_i beta_i + h_omega,i)                         (2.140)
    f_e = [0; K_e q_e + D_e q_e'],  g = sum J_i^T h_gravity,i         (2.141), (2.142)

Kinematics (tree structure, tangent frames). Body ``i`` hangs on its parent ``p`` (or the
world) by one joint with coordinate ``q_r[i]``. The joint sits on the parent's *deformed*
distal point: for a flexible parent the node ``k`` of its modal data, at
``a_p + Phi_k q_e,p`` in K_p, turned by the node slope ``psi_p = Psi_k q_e,p``; for a rigid
parent a fixed point ``a_p``. Then::

    r_j = r_p + S(theta_p) (a_p + Phi_k q_e,p),   theta_j = theta_p + psi_p + theta0_i
    revolute:  r_i = r_j,                     theta_i = theta_j + q_r[i]
    prismatic: r_i = r_j + S(theta_j) d q_r[i], theta_i = theta_j   (axis d in the joint frame)

``theta0_i`` is a constant angle between the parent's distal frame and K_i at zero joint
angle (e.g. ``-pi/2`` to make a beam along x of K_i hang down at zero angle). Because every
flexible body is clamped at its own frame origin (tangent frame, its modes from
:func:`~multibody_dynamics.flexible.modal.clamped_modes`) the joint drives act on the rigid
coordinates only: ``B = [I; 0]`` (Seifried 2014, remark after (2.143), and Sect. 6.1).

Convective terms (``beta_i``, from differentiating ``r_j`` twice, ``J = [[0, -1], [1, 0]]``,
``a(q)`` the distal point in K_p)::

    beta_r,j = beta_r,p + beta_theta,p J S a - w_p^2 S a + 2 w_p J S Phi_k q_e,p'
    prismatic adds beta_theta,j J d_w q_r - w_j^2 d_w q_r + 2 w_j J d_w q_r'  (d_w = S d)

Two implementations give the same numbers: a plain numpy one that reuses
:class:`FlexibleBody2D` for the body terms (the reference), and a compiled kernel (numba, when
installed) that packs every Taylor coefficient into one array when the chain is built and
writes into a preallocated workspace, so a call allocates nothing large. The public methods use
the kernel when it is available.

Rigid bodies are bodies without elastic coordinates: mass ``m``, centre of mass ``c`` in K_i,
inertia ``I_c`` about the centre of mass give ``mc0 = m c`` and ``I0 = I_c + m |c|^2``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..errors import DimensionError, InputError, ModelError, SolverError
from .body import _J, FlexibleBody2D, FlexibleBodyConfig, _rot
from .sid import ModalData

__all__ = ["ChainBody", "FlexibleChainConfig", "FlexibleChain"]

JointType = Literal["revolute", "prismatic"]
def _vector(x, n: int, name: str, finite: bool = False) -> np.ndarray:
    """``x`` as a float array of shape (n,): DimensionError naming ``name`` otherwise and, with
    ``finite``, InputError if it holds NaN or inf (the check of the chains, the closed chains
    and :func:`~multibody_dynamics.flexible.simulation.simulate_flexible`)."""
    x = np.asarray(x, float)
    if x.shape != (n,):
        raise DimensionError(f"{name} must have shape ({n},), got {x.shape}")
    if finite and not np.all(np.isfinite(x)):
        raise InputError(f"{name} must be finite")
    return x

@dataclass(frozen=True, eq=False)
class ChainBody:
    """One body of a planar chain and the joint that carries it.

    Parameters
    ----------
    name : str
        Body name.
    joint : str
        Name of the joint (and of its coordinate in ``q_r``).
    joint_type : {"revolute", "prismatic"}
        Revolute about z, or prismatic along ``axis``.
    parent : int or None
        Index of the parent body in the chain; ``None`` means the previous body (the world for
        the first one). ``-1`` is the world.
    axis : tuple of float
        Prismatic axis (2,) in the joint frame (the parent's distal frame turned by
        ``angle``), normalised on construction. Ignored for revolute joints.
    angle : float
        Constant angle theta0 [rad] from the parent's distal frame to K_i at zero joint angle.
    modal_data : ModalData or None
        Elastic body data (tangent frame at K_i's origin); ``None`` for a rigid body.
    distal_node : int
        Node of ``modal_data`` where child joints attach (default -1, the last node).
    mass : float
        Rigid body mass [kg] (rigid bodies only).
    com : tuple of float
        Rigid body centre of mass (2,) in K_i [m].
    inertia : float
        Rigid body inertia about its centre of mass, zz [kg m^2].
    distal : tuple of float
        Rigid body point (2,) in K_i where child joints attach [m].
    """

    name: str
    joint: str
    joint_type: JointType = "revolute"
    parent: int | None = None
    axis: tuple[float, float] = (1.0, 0.0)
    angle: float = 0.0
    modal_data: ModalData | None = None
    distal_node: int = -1
    mass: float = 0.0
    com: tuple[float, float] = (0.0, 0.0)
    inertia: float = 0.0
    distal: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self):
        where = f"body {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"body name must be a non-empty string, got {self.name!r}")
        if not isinstance(self.joint, str) or not self.joint:
            raise InputError(f"{where}: joint must be a non-empty string, got {self.joint!r}")
        if self.joint_type not in ("revolute", "prismatic"):
            raise InputError(f"{where}: joint_type must be 'revolute' or 'prismatic', "
                             f"got {self.joint_type!r}")
        axis = np.asarray(self.axis, float)
        if axis.shape != (2,) or not np.all(np.isfinite(axis)) or np.linalg.norm(axis) < 1e-12:
            raise InputError(f"{where}: axis must be 2 finite numbers, not both zero, "
                             f"got {self.axis!r}")
        object.__setattr__(self, "axis", tuple((axis / np.linalg.norm(axis)).tolist()))
        angle = float(self.angle)
        if not np.isfinite(angle):
            raise InputError(f"{where}: angle must be finite, got {self.angle!r}")
        object.__setattr__(self, "angle", angle)
        for key in ("com", "distal"):
            val = np.asarray(getattr(self, key), float)
            if val.shape != (2,) or not np.all(np.isfinite(val)):
                raise InputError(f"{where}: {key} must be 2 finite numbers [m], "
                                 f"got {getattr(self, key)!r}")
            object.__setattr__(self, key, (float(val[0]), float(val[1])))
        if self.modal_data is not None:
            if not isinstance(self.modal_data, ModalData):
                raise InputError(f"{where}: modal_data must be a ModalData, "
                                 f"got {type(self.modal_data).__name__}")
            nn = self.modal_data.node_positions.shape[0]
            if not -nn <= int(self.distal_node) < nn:
                raise InputError(f"{where}: distal_node must lie in [-{nn}, {nn}), "
                                 f"got {self.distal_node}")
            object.__setattr__(self, "distal_node", int(self.distal_node) % nn)
        else:
            mass, inertia = float(self.mass), float(self.inertia)
            if not (np.isfinite(mass) and mass > 0.0):
                raise InputError(f"{where}: a rigid body needs mass > 0 [kg], got {self.mass!r}")
            if not (np.isfinite(inertia) and inertia >= 0.0):
                raise InputError(f"{where}: inertia must be >= 0 [kg m^2], got {self.inertia!r}")
            object.__setattr__(self, "mass", mass)
            object.__setattr__(self, "inertia", inertia)

    @property
    def flexible(self) -> bool:
        return self.modal_data is not None

    @property
    def nq_e(self) -> int:
        """Number of elastic coordinates of the body."""
        return self.modal_data.nq if self.flexible else 0


@dataclass(frozen=True)
class FlexibleChainConfig:
    """A planar chain of rigid and flexible bodies.

    Parameters
    ----------
    bodies : sequence of ChainBody
        In an order where every parent comes before its children.
    gravity : tuple of float
        Gravity (2,) in the inertial plane [m/s^2]. Default (0, -9.81).
    second_order_inertia, geometric_stiffening : bool
        As in :class:`~multibody_dynamics.flexible.body.FlexibleBodyConfig`.
    name : str
        Model name (for messages).
    description, source : str
        One-line description and where the parameters come from.
    rigid_counterpart : str or None
        Name of the shipped rigid model (``config/robots``) with the same masses and
        inertias, if there is one (used by the rigid-limit checks).
    end_effector : str or None
        Body whose distal point is the end effector.
    """

    bodies: Sequence[ChainBody]
    gravity: tuple[float, float] = (0.0, -9.81)
    second_order_inertia: bool = True
    geometric_stiffening: bool = False
    name: str = "flexible_chain"
    description: str = ""
    source: str = ""
    rigid_counterpart: str | None = None
    end_effector: str | None = None
    parents: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self):
        bodies = tuple(self.bodies)
        if not bodies or not all(isinstance(b, ChainBody) for b in bodies):
            raise InputError("bodies must be a non-empty sequence of ChainBody")
        object.__setattr__(self, "bodies", bodies)
        # validates gravity the same way a single body does
        g = FlexibleBodyConfig(gravity=self.gravity).gravity
        object.__setattr__(self, "gravity", g)
        names = [b.name for b in bodies]
        joints = [b.joint for b in bodies]
        for label, seq in (("body", names), ("joint", joints)):
            dup = sorted({n for n in seq if seq.count(n) > 1})
            if dup:
                raise InputError(f"{self.name}: duplicate {label} names {dup}")
        parents = []
        for i, b in enumerate(bodies):
            p = i - 1 if b.parent is None else int(b.parent)
            if not -1 <= p < i:
                raise InputError(f"{self.name}: body {b.name!r}: parent must be -1 (world) or "
                                 f"the index of an earlier body (< {i}), got {b.parent!r}")
            parents.append(p)
        object.__setattr__(self, "parents", tuple(parents))
        if self.end_effector is not None and self.end_effector not in names:
            raise InputError(f"{self.name}: end_effector {self.end_effector!r} is not a body; "
                             f"bodies: {names}")


# -- packing of the constant data for the kernel ---------------------------------------------
# I (int): header [nb, nr, nv, second, stiffening, max_n] then per body 6 ints:
#   [parent, joint type (0 revolute, 1 prismatic), elastic offset in q, n_e, float offset, 0].
# P (float): header [g0x, g0y] then per body, from its float offset:
#   theta0, axis (2), mass, mc0 (2), I0, distal point a (2) | Ct (n x 2), I1, Cr0 (n),
#   Cr1, Me, Ke, De, Komega (n x n each), Phi_tip (2 x n), Psi_tip (n).
_NH_I, _NI_B, _NH_P, _NP_B = 6, 6, 2, 9


def _pack(cfg: FlexibleChainConfig):
    bodies = cfg.bodies
    nb = len(bodies)
    ne = [b.nq_e for b in bodies]
    nv = nb + sum(ne)
    ints = [nb, nb, nv, int(cfg.second_order_inertia), int(cfg.geometric_stiffening), max(ne)]
    floats = list(cfg.gravity)
    eo = nb
    for i, b in enumerate(bodies):
        n = ne[i]
        ints += [cfg.parents[i], 0 if b.joint_type == "revolute" else 1, eo, n, len(floats), 0]
        eo += n
        if b.flexible:
            d = b.modal_data
            k = b.distal_node
            a = d.node_positions[k]
            head = [b.angle, *b.axis, d.mass, *d.mc0, d.I0, *a]
            arrays = [d.Ct, d.I1, d.Cr0, d.Cr1, d.Me, d.Ke, d.De, d.Komega,
                      d.node_shapes[k, :2], d.node_shapes[k, 2]]
            floats += head + np.concatenate([np.ravel(x) for x in arrays]).tolist()
        else:
            c = np.array(b.com)
            head = [b.angle, *b.axis, b.mass, *(b.mass * c), b.inertia + b.mass * c @ c,
                    *b.distal]
            floats += head
    maxn = max(ne)
    nw = _workspace_size(nb, nv, maxn)
    return np.array(floats), np.array(ints, dtype=np.int64), nw


def _workspace_size(nb, nv, maxn):
    nz = 3 + maxn
    # M, k, g, fe (nv each), per body: Jr (2 nv), Jt (nv), r (2), th, br (2), bt, w (9 + 3 nv),
    # scratch: Mb (nz^2), Jb (nz nv), X (nz nv), hb, gb, fb, beta (4 nz), rhs/y (2 nv)
    return nv * nv + 3 * nv + nb * (3 * nv + 8) + nz * nz + 2 * nz * nv + 4 * nz + 2 * nv


def _chain_terms(q, v, P, Ip, W):  # pragma: no cover - compiled by numba (checked vs numpy)  # noqa: C901
    """Fill W with M (nv x nv), k, g, f_e (nv each) of the chain; see the module docstring."""
    nb, nr, nv, second, stiff, maxn = Ip[0], Ip[1], Ip[2], Ip[3], Ip[4], Ip[5]
    g0x, g0y = P[0], P[1]
    nz = 3 + maxn
    o = 0
    M = W[o:o + nv * nv].reshape((nv, nv))
    o += nv * nv
    kv = W[o:o + nv]
    o += nv
    gv = W[o:o + nv]
    o += nv
    fv = W[o:o + nv]
    o += nv
    Jr = W[o:o + nb * 2 * nv].reshape((nb, 2, nv))
    o += nb * 2 * nv
    Jt = W[o:o + nb * nv].reshape((nb, nv))
    o += nb * nv
    fr = W[o:o + nb * 8].reshape((nb, 8))  # r (2), th, br (2), bt, w, spare
    o += nb * 8
    Mb = W[o:o + nz * nz].reshape((nz, nz))
    o += nz * nz
    Jb = W[o:o + nz * nv].reshape((nz, nv))
    o += nz * nv
    X = W[o:o + nz * nv].reshape((nz, nv))
    o += nz * nv
    hb = W[o:o + nz]
    gb = W[o + nz:o + 2 * nz]
    fb = W[o + 2 * nz:o + 3 * nz]
    bb = W[o + 3 * nz:o + 4 * nz]
    for i in range(nv):
        kv[i] = 0.0
        gv[i] = 0.0
        fv[i] = 0.0
        for j in range(nv):
            M[i, j] = 0.0
    for b in range(nb):
        ib = _NH_I + _NI_B * b
        p, jtype, eo, n, po = Ip[ib], Ip[ib + 1], Ip[ib + 2], Ip[ib + 3], Ip[ib + 4]
        # ---- frame of the joint on the parent's (deformed) distal point
        if p < 0:
            rx = ry = th = brx = bry = bt = w = 0.0
            for c in range(nv):
                Jr[b, 0, c] = 0.0
                Jr[b, 1, c] = 0.0
                Jt[b, c] = 0.0
        else:
            ip = _NH_I + _NI_B * p
            peo, pn, ppo = Ip[ip + 2], Ip[ip + 3], Ip[ip + 4]
            ax, ay = P[ppo + 7], P[ppo + 8]
            dx = dy = psi = dpsi = 0.0
            phi = ppo + _NP_B + 2 * pn + 2 * pn + 5 * pn * pn  # Phi_tip (2 x pn), then Psi_tip
            for m in range(pn):
                qe, dqe = q[peo + m], v[peo + m]
                ax += P[phi + m] * qe
                ay += P[phi + pn + m] * qe
                dx += P[phi + m] * dqe
                dy += P[phi + pn + m] * dqe
                psi += P[phi + 2 * pn + m] * qe
                dpsi += P[phi + 2 * pn + m] * dqe
            thp, wp, btp = fr[p, 2], fr[p, 6], fr[p, 5]
            c_, s_ = np.cos(thp), np.sin(thp)
            sax, say = c_ * ax - s_ * ay, s_ * ax + c_ * ay  # S a
            sdx, sdy = c_ * dx - s_ * dy, s_ * dx + c_ * dy  # S a'
            rx, ry = fr[p, 0] + sax, fr[p, 1] + say
            brx = fr[p, 3] - btp * say - wp * wp * sax - 2.0 * wp * sdy
            bry = fr[p, 4] + btp * sax - wp * wp * say + 2.0 * wp * sdx
            th = thp + psi
            bt = btp
            w = wp + dpsi
            for c in range(nv):
                jt = Jt[p, c]
                Jr[b, 0, c] = Jr[p, 0, c] - say * jt
                Jr[b, 1, c] = Jr[p, 1, c] + sax * jt
                Jt[b, c] = jt
            for m in range(pn):
                px, py = P[phi + m], P[phi + pn + m]
                Jr[b, 0, peo + m] += c_ * px - s_ * py
                Jr[b, 1, peo + m] += s_ * px + c_ * py
                Jt[b, peo + m] += P[phi + 2 * pn + m]
        th += P[po]
        # ---- the joint
        if jtype == 0:
            th += q[b]
            Jt[b, b] += 1.0
            w += v[b]
        else:
            c_, s_ = np.cos(th), np.sin(th)
            ux, uy = c_ * P[po + 1] - s_ * P[po + 2], s_ * P[po + 1] + c_ * P[po + 2]
            qb, vb = q[b], v[b]
            rx += ux * qb
            ry += uy * qb
            brx += -bt * uy * qb - w * w * ux * qb - 2.0 * w * uy * vb
            bry += bt * ux * qb - w * w * uy * qb + 2.0 * w * ux * vb
            for c in range(nv):
                jt = Jt[b, c]
                Jr[b, 0, c] -= uy * qb * jt
                Jr[b, 1, c] += ux * qb * jt
            Jr[b, 0, b] += ux
            Jr[b, 1, b] += uy
        fr[b, 0], fr[b, 1], fr[b, 2], fr[b, 3], fr[b, 4], fr[b, 5], fr[b, 6] = \
            rx, ry, th, brx, bry, bt, w
        # ---- body terms in z = [r, theta, q_e] (FlexibleBody2D._terms, tangent frame)
        mass, mcx, mcy, izz = P[po + 3], P[po + 4], P[po + 5], P[po + 6]
        oCt = po + _NP_B
        oI1 = oCt + 2 * n
        oCr0 = oI1 + n
        oCr1 = oCr0 + n
        oMe = oCr1 + n * n
        oKe = oMe + n * n
        oDe = oKe + n * n
        oKo = oDe + n * n
        ctdx = ctdy = 0.0
        hr = 0.0
        for m in range(n):
            qe, dqe = q[eo + m], v[eo + m]
            mcx += P[oCt + 2 * m] * qe
            mcy += P[oCt + 2 * m + 1] * qe
            ctdx += P[oCt + 2 * m] * dqe
            ctdy += P[oCt + 2 * m + 1] * dqe
            izz += P[oI1 + m] * qe
            hr += P[oI1 + m] * dqe
        c_, s_ = np.cos(th), np.sin(th)
        for r_ in range(3 + n):
            for s in range(3 + n):
                Mb[r_, s] = 0.0
        for m in range(n):
            meq = 0.0
            koq = 0.0
            cr = P[oCr0 + m]
            he = 0.0
            fe = 0.0
            for l_ in range(n):
                ql, dql = q[eo + l_], v[eo + l_]
                meq += P[oMe + m * n + l_] * ql
                koq += P[oKo + m * n + l_] * ql
                cr += P[oCr1 + m * n + l_] * ql
                he += P[oCr1 + m * n + l_] * dql
                fe += P[oKe + m * n + l_] * ql + P[oDe + m * n + l_] * dql
                Mb[3 + m, 3 + l_] = P[oMe + m * n + l_]
            qm, dqm = q[eo + m], v[eo + m]
            ce = -0.5 * P[oI1 + m]
            if second:
                izz += qm * meq
                hr += 2.0 * meq * dqm
                ce -= meq
            if stiff:
                izz -= qm * koq
                hr -= 2.0 * koq * dqm
                ce += koq
            hb[3 + m] = w * w * ce + 2.0 * w * he
            fb[3 + m] = fe
            ctx, cty = P[oCt + 2 * m], P[oCt + 2 * m + 1]
            Mb[0, 3 + m] = c_ * ctx - s_ * cty
            Mb[1, 3 + m] = s_ * ctx + c_ * cty
            Mb[2, 3 + m] = cr
            gb[3 + m] = ctx * (c_ * g0x + s_ * g0y) + cty * (-s_ * g0x + c_ * g0y)
            Mb[3 + m, 0] = Mb[0, 3 + m]
            Mb[3 + m, 1] = Mb[1, 3 + m]
            Mb[3 + m, 2] = cr
        jx, jy = -mcy, mcx  # J m c in K_i
        Mb[0, 0] = mass
        Mb[1, 1] = mass
        Mb[0, 2] = Mb[2, 0] = c_ * jx - s_ * jy
        Mb[1, 2] = Mb[2, 1] = s_ * jx + c_ * jy
        Mb[2, 2] = izz
        # h_t = -w^2 m c + 2 w J Ct^T q_e' (in K_i), rotated to the inertial frame
        htx = -w * w * mcx - 2.0 * w * ctdy
        hty = -w * w * mcy + 2.0 * w * ctdx
        hb[0] = c_ * htx - s_ * hty
        hb[1] = s_ * htx + c_ * hty
        hb[2] = w * hr
        gb[0] = mass * g0x
        gb[1] = mass * g0y
        gb[2] = jx * (c_ * g0x + s_ * g0y) + jy * (-s_ * g0x + c_ * g0y)
        fb[0] = fb[1] = fb[2] = 0.0
        # ---- Jacobian of the body coordinates and convective accelerations
        nzb = 3 + n
        for c in range(nv):
            Jb[0, c] = Jr[b, 0, c]
            Jb[1, c] = Jr[b, 1, c]
            Jb[2, c] = Jt[b, c]
            for m in range(n):
                Jb[3 + m, c] = 0.0
        for m in range(n):
            Jb[3 + m, eo + m] = 1.0
        bb[0], bb[1], bb[2] = brx, bry, bt
        for m in range(n):
            bb[3 + m] = 0.0
        # ---- M += Jb^T Mb Jb, k += Jb^T (Mb beta + h), g += Jb^T g_b, f_e += Jb^T f_b
        for r_ in range(nzb):
            acc = hb[r_]
            for s in range(3):
                acc += Mb[r_, s] * bb[s]
            hb[r_] = acc
            for c in range(nv):
                x = 0.0
                for s in range(nzb):
                    x += Mb[r_, s] * Jb[s, c]
                X[r_, c] = x
        for c1 in range(nv):
            k1 = 0.0
            g1 = 0.0
            f1 = 0.0
            for r_ in range(nzb):
                jv = Jb[r_, c1]
                if jv != 0.0:
                    k1 += jv * hb[r_]
                    g1 += jv * gb[r_]
                    f1 += jv * fb[r_]
                    for c2 in range(c1, nv):
                        M[c1, c2] += jv * X[r_, c2]
            kv[c1] += k1
            gv[c1] += g1
            fv[c1] += f1
    for c1 in range(nv):
        for c2 in range(c1):
            M[c1, c2] = M[c2, c1]
    return nr


def _chain_forward(q, v, tau, P, Ip, W, a):  # pragma: no cover - compiled by numba
    """``a = M^{-1} (tau + g - k - f_e)`` by a Cholesky factorisation inside W; returns 0, or
    1 when M is not positive definite (``a`` is then left unchanged)."""
    _chain_terms(q, v, P, Ip, W)
    nv = Ip[2]
    M = W[:nv * nv].reshape((nv, nv))
    kv = W[nv * nv:nv * nv + nv]
    gv = W[nv * nv + nv:nv * nv + 2 * nv]
    fv = W[nv * nv + 2 * nv:nv * nv + 3 * nv]
    y = W[W.shape[0] - nv:]
    for i in range(nv):  # in-place Cholesky, lower triangle
        s = M[i, i]
        for k in range(i):
            s -= M[i, k] * M[i, k]
        if not s > 0.0:
            return 1
        d = np.sqrt(s)
        M[i, i] = d
        for j in range(i + 1, nv):
            s = M[j, i]
            for k in range(i):
                s -= M[j, k] * M[i, k]
            M[j, i] = s / d
    for i in range(nv):
        s = tau[i] + gv[i] - kv[i] - fv[i]
        for k in range(i):
            s -= M[i, k] * y[k]
        y[i] = s / M[i, i]
    for i in range(nv - 1, -1, -1):
        s = y[i]
        for k in range(i + 1, nv):
            s -= M[k, i] * a[k]
        a[i] = s / M[i, i]
    return 0


_KERNELS = []  # [(terms, forward)] once numba has compiled them; [None] without numba


def _compiled_kernels():
    """The numba-compiled kernels, or None when numba is not installed."""
    if not _KERNELS:
        try:
            import numba
        except ImportError:  # the plain numpy path is used
            _KERNELS.append(None)
        else:
            from ..compile_notice import install

            install()  # a note while a first run compiles
            terms = numba.njit(cache=True, nogil=True)(_chain_terms)
            # the forward kernel calls the compiled terms kernel through the global name
            glb = dict(_chain_forward.__globals__)
            glb["_chain_terms"] = terms
            fwd = type(_chain_forward)(_chain_forward.__code__, glb, "_chain_forward")
            _KERNELS.append((terms, numba.njit(cache=False, nogil=True)(fwd)))
    return _KERNELS[0]


class FlexibleChain:
    """Equations of motion of a planar chain of rigid and flexible bodies (Seifried 2014
    eqs. 2.131-2.143) with ``q = [q_r; q_e]``, ``v = q'`` and joint-collocated drives.

    Parameters
    ----------
    config : FlexibleChainConfig
    backend : {"auto", "numba", "numpy"}
        ``"auto"`` (default) uses the compiled kernel when numba is installed; ``"numpy"``
        forces the reference implementation.

    Attributes
    ----------
    nq_r, nq_e, nq, nv, nu : int
        Rigid (joint) and elastic coordinates; ``nq = nv = nq_r + nq_e``; ``nu = nq_r``.
    B : ndarray, shape (nv, nu)
        Input matrix ``[I; 0]``: motor forces/torques collocated with the joints.
    joint_names, coordinate_names : tuple of str
        Joint names (``q_r``) and all coordinate names (elastic ones ``<body>.e<k>``).
    elastic_slices : tuple of slice
        Where each body's ``q_e`` lies in ``q`` (empty slices for rigid bodies).
    """

    def __init__(self, config: FlexibleChainConfig, backend: str = "auto"):
        if not isinstance(config, FlexibleChainConfig):
            raise InputError(f"config must be a FlexibleChainConfig, got {type(config).__name__}")
        if backend not in ("auto", "numba", "numpy"):
            raise InputError(f"backend must be 'auto', 'numba' or 'numpy', got {backend!r}")
        self.config = config
        bodies = config.bodies
        self.nq_r = len(bodies)
        self.nq_e = sum(b.nq_e for b in bodies)
        self.nq = self.nv = self.nq_r + self.nq_e
        self.nu = self.nq_r
        self.B = np.vstack([np.eye(self.nq_r), np.zeros((self.nq_e, self.nq_r))])
        self.B.setflags(write=False)
        self.joint_names = tuple(b.joint for b in bodies)
        slices, names, eo = [], list(self.joint_names), self.nq_r
        for b in bodies:
            slices.append(slice(eo, eo + b.nq_e))
            names += [f"{b.name}.e{k + 1}" for k in range(b.nq_e)]
            eo += b.nq_e
        self.elastic_slices = tuple(slices)
        self.coordinate_names = tuple(names)
        self._g0 = np.array(config.gravity)
        body_cfg = FlexibleBodyConfig(config.gravity, config.geometric_stiffening,
                                      config.second_order_inertia)
        self._bodies = [FlexibleBody2D(b.modal_data, body_cfg) if b.flexible else None
                        for b in bodies]
        self._P, self._I, nw = _pack(config)
        self._W = np.zeros(nw)
        self._a = np.zeros(self.nv)
        kernels = _compiled_kernels() if backend != "numpy" else None
        if backend == "numba" and kernels is None:
            raise InputError("backend='numba' needs numba, which is not installed")
        self._kernels = kernels
        if kernels is not None:
            z = np.zeros(self.nv)
            kernels[1](z, z, z, self._P, self._I, self._W, self._a)  # compile now

    def summary(self) -> str:
        """Human-readable description: bodies, joints, modes with their clamped frequencies."""
        cfg = self.config
        lines = [f"{cfg.name}: {cfg.description}" if cfg.description else cfg.name]
        if cfg.source:
            lines.append(f"  source: {cfg.source}")
        lines.append(f"  coordinates: {self.nq} ({self.nq_r} joint + {self.nq_e} elastic), "
                     f"inputs: {self.nu} (joint drives, B = [I; 0]), gravity {list(cfg.gravity)} "
                     "m/s^2")
        for i, b in enumerate(self.bodies):
            parent = "world" if cfg.parents[i] < 0 else self.bodies[cfg.parents[i]].name
            if b.flexible:
                d = b.modal_data
                lam = np.linalg.eigvals(np.linalg.solve(d.Me, d.Ke)).real
                freqs = ", ".join(f"{np.sqrt(max(x, 0.0)) / (2 * np.pi):.4g}"
                                  for x in np.sort(lam))
                what = (f"flexible, {d.nq} modes (clamped {freqs} Hz), mass {d.mass:.4g} kg, "
                        f"length {d.node_positions[b.distal_node][0]:.4g} m")
            else:
                what = f"rigid, mass {b.mass:.4g} kg"
            lines.append(f"  {b.name}: {b.joint_type} joint {b.joint!r} on {parent}; {what}")
        lines.append("  elastic coordinates: "
                     f"{', '.join(self.coordinate_names[self.nq_r:]) or '-'}")
        return "\n".join(lines)

    # -- the model summary shared by every robot (multibody_dynamics.robot.RobotModel) -----
    @property
    def name(self) -> str:
        return self.config.name

    @property
    def description(self) -> str:
        return self.config.description

    @property
    def source(self) -> str:
        return self.config.source

    @property
    def input_names(self) -> tuple[str, ...]:
        """The joint drives, one per joint (``B = [I; 0]``)."""
        return self.joint_names

    @property
    def closures(self) -> tuple:
        """A chain is a tree: no closures (see :class:`~.closed.ClosedFlexibleChain`)."""
        return ()

    @property
    def backend(self) -> str:
        """``"numba"`` or ``"numpy"``: the implementation in use."""
        return "numpy" if self._kernels is None else "numba"

    @property
    def bodies(self) -> tuple[ChainBody, ...]:
        return self.config.bodies

    # -- validation ----------------------------------------------------------------------
    def _vec(self, x, name, n=None):
        return _vector(x, self.nv if n is None else n, name)

    def neutral(self) -> np.ndarray:
        """Zero configuration q (nq,)."""
        return np.zeros(self.nq)

    # -- kinematics (numpy reference) ----------------------------------------------------
    def _kinematics(self, q, v):
        """Per body: position, angle, J (3 + n_e, nv) and beta (3 + n_e,)."""
        out = []
        nv = self.nv
        for i, b in enumerate(self.bodies):
            p = self.config.parents[i]
            if p < 0:
                r, th = np.zeros(2), 0.0
                Jr, Jt = np.zeros((2, nv)), np.zeros(nv)
                br, bt = np.zeros(2), 0.0
            else:
                r_p, th_p, J_p, beta_p = out[p]
                pb = self.bodies[p]
                S = _rot(th_p)
                Jr, Jt = J_p[:2].copy(), J_p[2].copy()
                br, bt = beta_p[:2].copy(), beta_p[2]
                w = Jt @ v
                if pb.flexible:
                    sh = pb.modal_data.node_shapes[pb.distal_node]
                    sl = self.elastic_slices[p]
                    a = pb.modal_data.node_positions[pb.distal_node] + sh[:2] @ q[sl]
                    da = sh[:2] @ v[sl]
                    psi = sh[2] @ q[sl]
                    Jr[:, sl] += S @ sh[:2]
                    Jt[sl] += sh[2]
                else:
                    a, da, psi = np.array(pb.distal), np.zeros(2), 0.0
                Sa = S @ a
                Jr += np.outer(_J @ Sa, J_p[2])
                br = br + bt * (_J @ Sa) - w * w * Sa + 2.0 * w * (_J @ S @ da)
                r, th = r_p + Sa, th_p + psi
            th = th + b.angle
            if b.joint_type == "revolute":
                th = th + q[i]
                Jt[i] += 1.0
            else:
                w = Jt @ v
                d = _rot(th) @ np.array(b.axis)
                Jd = _J @ d
                r = r + d * q[i]
                Jr = Jr + np.outer(Jd * q[i], Jt)
                Jr[:, i] += d
                br = br + bt * Jd * q[i] - w * w * d * q[i] + 2.0 * w * Jd * v[i]
            n = b.nq_e
            J = np.zeros((3 + n, nv))
            J[:2], J[2] = Jr, Jt
            J[3:, self.elastic_slices[i]] = np.eye(n)
            beta = np.zeros(3 + n)
            beta[:2], beta[2] = br, bt
            out.append((r, th, J, beta))
        return out

    def _rigid_body_terms(self, b: ChainBody, th, w):
        S = _rot(th)
        c = np.array(b.com)
        mc = b.mass * c
        izz = b.inertia + b.mass * c @ c
        Mb = np.zeros((3, 3))
        Mb[:2, :2] = b.mass * np.eye(2)
        Mb[:2, 2] = Mb[2, :2] = S @ _J @ mc
        Mb[2, 2] = izz
        h = np.r_[-w * w * (S @ mc), 0.0]
        g = np.r_[b.mass * self._g0, (_J @ mc) @ (S.T @ self._g0)]
        return Mb, h, g, np.zeros(3)

    def _reference_terms(self, q, v):
        nv = self.nv
        M, k, g, fe = np.zeros((nv, nv)), np.zeros(nv), np.zeros(nv), np.zeros(nv)
        for i, (r, th, J, beta) in enumerate(self._kinematics(q, v)):
            b, body = self.bodies[i], self._bodies[i]
            zq = np.r_[r, th, q[self.elastic_slices[i]]]
            zv = J @ v
            if body is None:
                Mb, hb, gb, fb = self._rigid_body_terms(b, th, zv[2])
            else:
                Mb = body.mass_matrix(zq)
                hb = body.nonlinear_effects(zq, zv)
                gb = body.gravity_forces(zq)
                fb = body.elastic_forces(zq, zv)
            M += J.T @ Mb @ J
            k += J.T @ (Mb @ beta + hb)
            g += J.T @ gb
            fe += J.T @ fb
        return M, k, g, fe

    def _terms(self, q, v):
        if self._kernels is None:
            return self._reference_terms(q, v)
        self._kernels[0](q, v, self._P, self._I, self._W)
        nv = self.nv
        W = self._W
        M = W[:nv * nv].reshape(nv, nv).copy()
        return M, W[nv * nv:nv * nv + nv].copy(), W[nv * nv + nv:nv * nv + 2 * nv].copy(), \
            W[nv * nv + 2 * nv:nv * nv + 3 * nv].copy()

    # -- public dynamics -----------------------------------------------------------------
    def dynamics_terms(self, q, v) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``M, k, g, f_e`` of (2.137)-(2.143) from one evaluation (inverse models need all four).

        Returns copies: M (nv, nv), k (nv,), g (nv,) and f_e (nv,) with
        ``M v' + k + f_e = g + B u``.
        """
        q, v = self._vec(q, "q"), self._vec(v, "v")
        return self._terms(q, v)

    def mass_matrix(self, q) -> np.ndarray:
        """System mass matrix M(q) (nv, nv) (Seifried eq. 2.139)."""
        q = self._vec(q, "q")
        return self._terms(q, np.zeros(self.nv))[0]

    def nonlinear_effects(self, q, v) -> np.ndarray:
        """Coriolis, centrifugal and gyroscopic forces k(q, v) (nv,) (eq. 2.140)."""
        q, v = self._vec(q, "q"), self._vec(v, "v")
        return self._terms(q, v)[1]

    def gravity_forces(self, q) -> np.ndarray:
        """Generalized gravity forces g(q) (nv,), applied-force sign (eq. 2.142)."""
        q = self._vec(q, "q")
        return self._terms(q, np.zeros(self.nv))[2]

    def elastic_forces(self, q, v) -> np.ndarray:
        """Elastic and damping forces ``[0; K_e q_e + D_e q_e']`` (nv,) (eqs. 2.141, 2.143)."""
        q, v = self._vec(q, "q"), self._vec(v, "v")
        return self._terms(q, v)[3]

    def generalized_forces(self, u=None, tau=None) -> np.ndarray:
        """``B u + tau`` (nv,) from joint inputs u (nu,) [N | N m] and extra tau (nv,)."""
        out = np.zeros(self.nv)
        if u is not None:
            out[:self.nq_r] += self._vec(u, "u", self.nu)
        if tau is not None:
            out += self._vec(tau, "tau")
        return out

    def forward_dynamics(self, q, v, u=None, tau=None) -> np.ndarray:
        """Accelerations v' (nv,) from ``M v' = B u + tau + g - k - f_e``.

        Parameters
        ----------
        q, v : array_like, shape (nv,)
            Coordinates ``[q_r [rad | m]; q_e]`` and their time derivatives.
        u : array_like, shape (nu,), optional
            Joint forces/torques [N | N m]; zero by default.
        tau : array_like, shape (nv,), optional
            Further generalized forces; zero by default.

        Raises
        ------
        SolverError
            If the mass matrix is not positive definite (deformations far beyond the range
            of the floating-frame approximation).
        """
        q, v = self._vec(q, "q"), self._vec(v, "v")
        f = self.generalized_forces(u, tau)
        a = self._forward(q, v, f)
        if a is None:
            raise SolverError(f"{self.config.name}: mass matrix not positive definite at "
                              f"q = {q.tolist()}")
        return a.copy()

    def inverse_dynamics(self, q, v, a) -> np.ndarray:
        """Generalized forces ``M a + k + f_e - g`` (nv,) that produce the accelerations ``a``.

        Its first ``nq_r`` entries are the joint inputs ``u`` (B = [I; 0]); a consistent
        motion of an unactuated elastic body has zero elastic entries.
        """
        q, v, a = self._vec(q, "q"), self._vec(v, "v"), self._vec(a, "a")
        M, k, g, fe = self._terms(q, v)
        return M @ a + k + fe - g

    def linearize(self, q, v, u=None, step: float = 1e-7):
        """Linear model about ``(q, v, u)`` in the form of the rigid models' linearization.

        Same :class:`~multibody_dynamics.linearize.Linearization` (``A``, ``B``, ``M``, ``C``,
        ``K``, discretization) as :meth:`multibody_dynamics.linearize.Linearizer.linearize`:
        ``K = d ID/dq`` and ``C = d ID/dv`` at the nominal acceleration, with ``ID`` the
        residual :meth:`inverse_dynamics`, by central differences of ``step`` (the chain has no
        analytic derivatives; the elastic stiffness K_e and damping D_e enter exactly through
        ``f_e``, which is linear in ``q_e``, ``q_e'``).
        """
        from ..linearize import Linearization

        q = self._vec(q, "q").copy()
        v = self._vec(v, "v").copy()
        u = np.zeros(self.nu) if u is None else self._vec(u, "u", self.nu).copy()
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v)) and np.all(np.isfinite(u))):
            raise InputError("linearize: q, v and u must be finite")
        a = self.forward_dynamics(q, v, u)
        nv, eye = self.nv, np.eye(self.nv)
        K = np.column_stack([(self.inverse_dynamics(q + step * e, v, a)
                              - self.inverse_dynamics(q - step * e, v, a)) / (2 * step)
                             for e in eye])
        C = np.column_stack([(self.inverse_dynamics(q, v + step * e, a)
                              - self.inverse_dynamics(q, v - step * e, a)) / (2 * step)
                             for e in eye])
        M = self.mass_matrix(q)
        A = np.zeros((2 * nv, 2 * nv))
        A[:nv, nv:] = eye
        A[nv:, :nv] = -np.linalg.solve(M, K)
        A[nv:, nv:] = -np.linalg.solve(M, C)
        B = np.zeros((2 * nv, self.nu))
        B[nv:] = np.linalg.solve(M, self.B)
        return Linearization(A=A, B=B, M=M, C=C, K=K, Bu=np.array(self.B), q=q, v=v, u=u, a=a)

    def _forward(self, q, v, f):
        """Unchecked forward dynamics for integrators; returns an internal buffer, or None if
        the mass matrix is not positive definite."""
        if self._kernels is not None:
            if self._kernels[1](q, v, f, self._P, self._I, self._W, self._a):
                return None
            return self._a
        M, k, g, fe = self._reference_terms(q, v)
        try:
            np.linalg.cholesky(M)
        except np.linalg.LinAlgError:
            return None
        self._a[:] = np.linalg.solve(M, f + g - k - fe)
        return self._a

    def ode(self, u=None, tau=None):
        """``f(t, x)`` for :func:`scipy.integrate.solve_ivp` with state ``x = [q, v]`` and
        constant inputs (use :meth:`forward_dynamics` in your own function otherwise)."""
        f = self.generalized_forces(u, tau)
        nv = self.nv

        def rhs(t, x):
            out = np.empty(2 * nv)
            out[:nv] = x[nv:]
            a = self._forward(x[:nv], x[nv:], f)
            # a rejected trial step of an adaptive solver may reach absurd deformations; NaN
            # makes the solver shrink the step instead of aborting the integration
            out[nv:] = np.nan if a is None else a
            return out

        return rhs

    # -- energy and kinematics -----------------------------------------------------------
    def kinetic_energy(self, q, v) -> float:
        """``1/2 v^T M(q) v`` [J]."""
        v = self._vec(v, "v")
        return 0.5 * v @ self.mass_matrix(q) @ v

    def potential_energy(self, q) -> float:
        """Gravity plus strain energy ``-sum g0^T (m r_i + S_i m c_i) + 1/2 q_e^T K_e q_e`` [J]."""
        q = self._vec(q, "q")
        out = 0.0
        for i, (r, th, _, _) in enumerate(self._kinematics(q, np.zeros(self.nv))):
            b = self.bodies[i]
            if b.flexible:
                qe = q[self.elastic_slices[i]]
                mc = b.modal_data.first_moment(qe)
                out += 0.5 * qe @ b.modal_data.Ke @ qe
                m = b.modal_data.mass
            else:
                mc, m = b.mass * np.array(b.com), b.mass
            out -= self._g0 @ (m * r + _rot(th) @ mc)
        return float(out)

    def energy(self, q, v) -> float:
        """Total mechanical energy [J] (conserved without inputs and damping)."""
        return self.kinetic_energy(q, v) + self.potential_energy(q)

    def frames(self, q) -> list[tuple[np.ndarray, float]]:
        """Position (2,) [m] and angle [rad] of every body frame K_i."""
        q = self._vec(q, "q")
        return [(r, th) for r, th, _, _ in self._kinematics(q, np.zeros(self.nv))]

    def point_position(self, q, body: int | str, node: int | None = None,
                       linear: bool = True) -> np.ndarray:
        """Inertial position (2,) [m] of a point of ``body``: a node of its modal data
        (default: the distal node) or, for rigid bodies, the distal point.

        The node displacement is ``Phi q_e`` (the Ritz approximation, linear in ``q_e``)."""
        q = self._vec(q, "q")
        i = self._body_index(body)
        b = self.bodies[i]
        r, th = self.frames(q)[i]
        if b.flexible:
            k = b.distal_node if node is None else node
            d = b.modal_data
            local = d.node_positions[k] + d.node_shapes[k, :2] @ q[self.elastic_slices[i]]
        else:
            local = np.array(b.distal)
        return r + _rot(th) @ local

    def point_positions(self, Q, body: int | str, node: int | None = None) -> np.ndarray:
        """:meth:`point_position` (``linear=True``) for many configurations ``Q`` (N, nq):
        positions (N, 2) [m]. With the compiled backend the frames come from the kernel (one
        call per row), the node displacements ``Phi q_e`` in one product."""
        Q = np.asarray(Q, float)
        if Q.ndim != 2 or Q.shape[1] != self.nq:
            raise DimensionError(f"Q must have shape (N, {self.nq}), got {Q.shape}")
        i = self._body_index(body)
        b = self.bodies[i]
        if b.flexible:
            k = b.distal_node if node is None else node
            d = b.modal_data
            local = d.node_positions[k] + Q[:, self.elastic_slices[i]] @ d.node_shapes[k, :2].T
        else:
            local = np.tile(np.asarray(b.distal, float), (len(Q), 1))
        if self._kernels is None:
            frames = [self.frames(q)[i] for q in Q]
            r = np.array([f[0] for f in frames]).reshape(-1, 2)
            th = np.array([f[1] for f in frames])
        else:
            nb, nv = self.nq_r, self.nv
            o = nv * nv + 3 * nv + 3 * nb * nv  # the frames' rows (r, theta, ...) of W
            fr = self._W[o:o + 8 * nb].reshape(nb, 8)
            zero, rows = np.zeros(nv), np.empty((len(Q), 3))
            for n, q in enumerate(Q):
                self._kernels[0](np.ascontiguousarray(q), zero, self._P, self._I, self._W)
                rows[n] = fr[i, :3]
            r, th = rows[:, :2], rows[:, 2]
        c, s = np.cos(th), np.sin(th)
        return r + np.column_stack([c * local[:, 0] - s * local[:, 1],
                                    s * local[:, 0] + c * local[:, 1]])

    def point_kinematics(self, q, v, body: int | str, node: int | None = None):
        """Position, Jacobian and acceleration bias of a point of ``body`` (see
        :meth:`point_position`).

        Returns
        -------
        r : (2,) inertial position [m]
        J : (2, nv) with ``r' = J v``
        bias : (2,) with ``r'' = J v' + bias``

        For a point at ``local = P + Phi q_e`` in K_i (angle ``theta``, rate ``w``)::

            J    = J_r + (J S local) J_theta + S Phi E_i
            bias = beta_r + beta_theta J S local - w^2 S local + 2 w J S Phi q_e'
        """
        q, v = self._vec(q, "q"), self._vec(v, "v")
        i = self._body_index(body)
        b = self.bodies[i]
        k = b.distal_node if b.flexible and node is None else node
        r, J, bias, _, _, _ = self._point_terms(self._kinematics(q, v), i, k, q, v)
        return r, J, bias

    def _point_terms(self, kin, i: int, node, q, v):
        """Position (2,), Jacobian (2, nv), bias (2,), angle [rad], angle row (nv,) and angle
        bias of the point at ``node`` of body ``i`` (its distal point when rigid), from the
        body kinematics ``kin`` of :meth:`_kinematics`: the algebra of
        :meth:`point_kinematics`, also used for the closure points of closed chains."""
        b = self.bodies[i]
        r, th, Jb, beta = kin[i]
        S = _rot(th)
        w = Jb[2] @ v
        J = Jb[:2].copy()
        bias = beta[:2].copy()
        Jt = Jb[2].copy()
        ang = th
        if b.flexible:
            d, sl = b.modal_data, self.elastic_slices[i]
            shape = d.node_shapes[node]
            local = d.node_positions[node] + shape[:2] @ q[sl]
            J[:, sl] += S @ shape[:2]
            bias += 2.0 * w * (_J @ S @ shape[:2] @ v[sl])
            ang = th + shape[2] @ q[sl]
            Jt[sl] += shape[2]
        else:
            local = np.array(b.distal)
        Sl = S @ local
        J += np.outer(_J @ Sl, Jb[2])
        bias += beta[2] * (_J @ Sl) - w * w * Sl
        return r + Sl, J, bias, ang, Jt, beta[2]

    def _body_index(self, body):
        if isinstance(body, str):
            names = [b.name for b in self.bodies]
            if body not in names:
                raise ModelError(f"{self.config.name}: no body {body!r}; bodies: {names}")
            return names.index(body)
        i = int(body)
        if not -self.nq_r <= i < self.nq_r:
            raise InputError(f"body index must lie in [-{self.nq_r}, {self.nq_r}), got {body}")
        return i % self.nq_r
