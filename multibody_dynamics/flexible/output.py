"""Linearly combined output of planar serial flexible manipulators (Seifried 2014, Sect. 6.3.2).

Arms with rigid end parts
-------------------------
Each arm of Seifried's serial flexible manipulator (Fig. 6.2, Sect. 6.4) is a rigid proximal
part of length ``l_r,k1`` (joint, motor mounting), an elastic beam of length ``l_e,k`` clamped to
it, and a rigid distal part of length ``l_r,k2`` (the next motor or the end effector), so
``l_k = l_r,k1 + l_e,k + l_r,k2``. :func:`arm_modal_data` builds the modal data
(:class:`~multibody_dynamics.flexible.sid.ModalData`) of such an arm in a tangent frame at the
joint: the beam's modes are shifted by ``l_r,k1`` along x and the two rigid parts are added to
the mass integrals. The distal rigid part moves with the beam tip: a point at ``d`` from the
tip is displaced by ``Phi_tip + Psi_tip J d`` (linear Ritz field, small rotation ``Psi_tip``).
The last node of the result is the distal end of the arm, at ``(l_k, 0)``, with shape
``(u_x, Phi_tip + l_r,k2 Psi_tip, Psi_tip)`` (tip values): this is the point where the next joint
attaches (``distal_node = -1``) and the book's tip displacement ``u_k`` (6.31)-(6.32).

The modes stay those of the elastic part alone (clamped-free, mass-normalised without the rigid
masses): admissible Ritz functions for the arm, and the ones that reproduce the book's
Γ (6.38), see below.

Combined output (Seifried 2014 eqs. 6.30-6.37)
----------------------------------------------
The output ``y = q_r + Γ q_e`` makes ``r_ap(y)`` (6.30), the rigid-arm forward kinematics with
the total arm lengths, approximate the end effector (the book measures angles from -e2, a chain
here from the x axis of K_1; Γ does not depend on that choice). For arm k with tip displacement
``u_k = (Φ^k + l_r,k2 Ψ^k) q_e^k`` of its distal end (6.31)-(6.32) and tip rotation
``Ψ^k q_e^k`` (6.33), the chord of the arm turns by ``u_k / l_k`` (6.34)-(6.35) and the next
arm's joint frame by the tip rotation; relative auxiliary angles then give (6.36)-(6.37),
recursively for any number of arms::

    Γ_k,k   = (Φ^k + l_r,k2 Ψ^k) / l_k             (6.34), (6.35)
    Γ_k,k-1 = Ψ^(k-1) - Γ_k-1,k-1                   (6.36)
    Γ_k,j   = 0 otherwise

At ``q_e = 0`` this equals the exact linearisation ``Γ = J_y^-1 ∂r_ef/∂q_e`` with
``J_y = ∂r_ap/∂y``, for every configuration (test_flexible_gamma checks it against
:meth:`FlexibleChain.point_position` by finite differences).

Errata of Sect. 6.4 (evidence: test_flexible_gamma)
---------------------------------------------------
1. Eq. (6.35) prints the lever ``l_r21`` (the proximal part of arm 2, 62.5 mm); by the
   derivation (the distal rigid part carries the end point, as ``l_r12`` in (6.34)) and by the
   numbers it must be ``l_r22`` (15 mm). With ``l_r21`` Γ_23, Γ_24 come out as 41.25 and
   70.88, 28 % and 80 % above the printed 32.316, 39.470; with ``l_r22`` 32.136 and 39.248,
   0.56 % below both (a common factor, as from a 1.1 % larger ``rho A`` of arm 2 than the
   book used).
2. The printed Γ (6.38) row 1 is reproduced (25.769, 47.485 vs 25.779, 47.552) only if the
   elastic part of arm 1 has the mass per length of a 0.9 mm x 76.2 mm steel strip; with the
   printed thickness 1.27 mm, Γ_11 = 21.69 and Γ_12 = 39.97. With mass-normalised modes Γ of an
   arm scales as ``1 / sqrt(rho A)``, and ``(25.779 / 21.693)^2 = 1.412 ≈ 1.27 / 0.9 = 1.411``:
   the book's Γ was evaluated with arm 2's thickness 0.9 mm for arm 1 too (or with a mass per
   length smaller by that factor). Which of the two printed data is the typo cannot be told
   from the book; the shipped model ``flexible_manipulator`` keeps the printed 1.27 mm,
   ``flexible_manipulator_book`` takes 0.9 mm (with it the Γ here is (6.38) to 0.6 %, and
   the zero-dynamics mass matrix ``M_ee - M_er Γ`` of that model changes sign along the
   Sect. 6.4 motion: the book's failed BVP, see README).

Γ depends on the density and the geometry only: the mode shapes of a uniform clamped-free beam
do not depend on E, and mass normalisation fixes their scale through ``rho A l_e``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import DimensionError, InputError, ModelError
from .beam import _GAUSS_W, _GAUSS_XI, DOFS_PER_NODE, gauss_shapes
from .body import _J
from .modal import ModalBasis
from .sid import ModalData, modal_data_from_beam, stepped_element_fields
from .system import FlexibleChain

__all__ = ["RigidPart", "arm_modal_data", "combined_output_gamma", "chain_combined_output",
           "chord_output"]

@dataclass(frozen=True)
class RigidPart:
    """A rigid end part of an arm, lying along the arm's x axis.

    Parameters
    ----------
    length : float
        Length along x [m], >= 0 (the lever from the beam end to the part's far end).
    mass : float
        Mass [kg], >= 0.
    inertia : float
        Inertia about its centre of mass, zz [kg m^2], >= 0.
    com : float or None
        Centre of mass along x, measured from the beam end it is attached to, away from the
        beam [m]; ``None`` (default): the middle, ``length / 2``.
    """

    length: float
    mass: float = 0.0
    inertia: float = 0.0
    com: float | None = None

    def __post_init__(self):
        for name in ("length", "mass", "inertia"):
            value = float(getattr(self, name))
            if not np.isfinite(value) or value < 0.0:
                raise InputError(f"RigidPart.{name} must be finite and >= 0, got {value!r}")
            object.__setattr__(self, name, value)
        com = 0.5 * self.length if self.com is None else float(self.com)
        if not np.isfinite(com):
            raise InputError(f"RigidPart.com must be finite [m], got {self.com!r}")
        object.__setattr__(self, "com", com)


def arm_modal_data(basis: ModalBasis, proximal: RigidPart | None = None,
                   distal: RigidPart | None = None) -> ModalData:
    """Modal data of an arm: rigid proximal part, elastic beam, rigid distal part.

    Parameters
    ----------
    basis : ModalBasis
        Modes of the elastic part alone, clamped at its root (``left="clamped"``,
        ``right="free"``), from :func:`~multibody_dynamics.flexible.modal.clamped_modes`.
    proximal : RigidPart, optional
        Part between the joint (frame origin) and the beam root; its ``com`` is measured from
        the beam root towards the joint. Default: none (the beam starts at the joint).
    distal : RigidPart, optional
        Part beyond the beam tip, moving rigidly with it. Default: none.

    Returns
    -------
    ModalData
        In a tangent frame at the joint; nodes: the joint ``(0, 0)`` (fixed), the beam nodes at
        ``l_r1 + x``, the distal end ``(l_r1 + l_e + l_r2, 0)`` (last node).
        ``Komega`` includes the centrifugal axial force of the distal part and the shift of
        the beam away from the axis of rotation.
    """
    if not isinstance(basis, ModalBasis):
        raise InputError(f"basis must be a ModalBasis, got {type(basis).__name__}")
    beam = basis.beam
    cfg = beam.config
    if cfg.left != "clamped" or cfg.right != "free":
        raise InputError(f"arm beams must be clamped at the root and free at the tip, got "
                         f"left={cfg.left!r}, right={cfg.right!r}")
    prox = proximal if proximal is not None else RigidPart(0.0)
    dist = distal if distal is not None else RigidPart(0.0)
    for name, part in (("proximal", prox), ("distal", dist)):
        if not isinstance(part, RigidPart):
            raise InputError(f"{name} must be a RigidPart or None, got {type(part).__name__}")
    elastic = modal_data_from_beam(basis)
    nq = elastic.nq
    lp, le = prox.length, cfg.length
    m_e = elastic.mass

    # beam shifted by lp along x: r0 -> r0 + (lp, 0)
    mass = m_e
    mc0 = elastic.mc0 + np.array([lp * m_e, 0.0])
    i0 = elastic.I0 + 2.0 * lp * elastic.mc0[0] + lp**2 * m_e
    ct = elastic.Ct.copy()
    i1 = elastic.I1 + 2.0 * lp * elastic.Ct[:, 0]
    cr0 = elastic.Cr0 + lp * elastic.Ct[:, 1]
    cr1 = elastic.Cr1.copy()
    me = elastic.Me.copy()

    # proximal part: fixed in the frame
    xp = lp - prox.com
    mass += prox.mass
    mc0 = mc0 + np.array([prox.mass * xp, 0.0])
    i0 += prox.inertia + prox.mass * xp**2

    # distal part: rigid with the tip; a point at d from the tip moves by phi + psi J d
    tip = elastic.node_shapes[-1]  # (3, nq): u_x, u_y, theta of the beam tip
    phi, psi = tip[:2], tip[2]
    c = np.array([dist.com, 0.0])
    rc = np.array([lp + le, 0.0]) + c
    a = phi + np.outer(_J @ c, psi)  # (2, nq): displacement of the centre of mass
    md = dist.mass
    mass += md
    mc0 = mc0 + md * rc
    i0 += dist.inertia + md * rc @ rc
    ct += md * a.T
    i1 += 2.0 * md * rc @ a
    cr0 += md * a.T @ (_J @ rc) + dist.inertia * psi
    cr1 += md * a.T @ _J @ a
    me += md * a.T @ a + dist.inertia * np.outer(psi, psi)

    # centrifugal stiffening: the beam's own term assumes its root on the axis and a free tip;
    # add the axial force from the shift lp and from the distal part (Omega^2 per unit)
    kom = elastic.Komega.copy()
    h = cfg.element_length
    if cfg.uniform:
        sh = gauss_shapes(h, cfg.shear_parameter())
        rho_a = cfg.section.rho * cfg.section.A
        for e in range(cfg.n_elements):
            pe = basis.Phi[DOFS_PER_NODE * e:DOFS_PER_NODE * e + 6]
            x = beam.nodes[e] + _GAUSS_XI * h
            dw = sh["dw"] @ pe
            extra = rho_a * lp * (le - x) + md * rc[0]
            kom += dw.T @ ((_GAUSS_W * h * extra)[:, None] * dw)
    else:  # a stepped beam: lp times the mass beyond x, element by element, batched
        f = stepped_element_fields(basis)
        ra, x = f["rho_a"], f["x"]
        after = np.concatenate([np.cumsum((ra * h)[::-1])[::-1][1:], [0.0]])
        beyond = ra[:, None] * (beam.nodes[1:, None] - x) + after[:, None]
        extra = lp * beyond + md * rc[0]
        kom += np.einsum("ng,ngp,ngq->pq", extra * f["wg"][None, :], f["dw"], f["dw"])

    nodes = np.vstack([[0.0, 0.0], elastic.node_positions + np.array([lp, 0.0]),
                       [lp + le + dist.length, 0.0]])
    end = np.vstack([phi + np.outer(_J @ np.array([dist.length, 0.0]), psi), psi[None, :]])
    shapes = np.concatenate([np.zeros((1, 3, nq)), elastic.node_shapes, end[None]], axis=0)
    return ModalData(
        mass=mass, mc0=mc0, Ct=ct, I0=i0, I1=i1, Cr0=cr0, Cr1=0.5 * (cr1 - cr1.T),
        Me=0.5 * (me + me.T), Ke=elastic.Ke, De=elastic.De, Komega=0.5 * (kom + kom.T),
        node_positions=nodes, node_shapes=shapes,
    )


def combined_output_gamma(tip_displacements: Sequence, tip_rotations: Sequence,
                          lengths: Sequence[float]) -> np.ndarray:
    """Γ of the combined output ``y = q_r + Γ q_e`` of a planar serial flexible manipulator.

    Seifried (2014) eqs. (6.34)-(6.37), extended recursively to n arms (see the module
    docstring): ``Γ_kk = u^k / l_k``, ``Γ_k,k-1 = Ψ^(k-1) - Γ_k-1,k-1``.

    Parameters
    ----------
    tip_displacements : sequence of array_like, each shape (r_k,)
        Transverse displacement of arm k's distal end per unit elastic coordinate,
        ``u^k = Φ^k + l_r,k2 Ψ^k`` [m per unit q_e] (eqs. 6.31-6.32 with the erratum: the
        distal lever ``l_r22``, not the printed ``l_r21``, for the last arm).
    tip_rotations : sequence of array_like, each shape (r_k,)
        Elastic rotation ``Ψ^k`` of the beam tip of arm k [rad per unit q_e] (eq. 6.33).
    lengths : sequence of float
        Total arm lengths l_k [m] (joint to joint, last one to the end point), > 0.

    Returns
    -------
    ndarray, shape (n, sum r_k)
        Γ, columns in the order of the stacked ``q_e`` of the arms [rad per unit q_e].
    """
    n = len(lengths)
    if len(tip_displacements) != n or len(tip_rotations) != n or n < 1:
        raise DimensionError(f"expected one tip displacement, tip rotation and length per arm; "
                             f"got {len(tip_displacements)}, {len(tip_rotations)}, {n}")
    us, ps, ls = [], [], []
    for k in range(n):
        u = np.atleast_1d(np.asarray(tip_displacements[k], float))
        p = np.atleast_1d(np.asarray(tip_rotations[k], float))
        if u.ndim != 1 or p.shape != u.shape:
            raise DimensionError(f"arm {k}: tip displacement and rotation must both have shape "
                                 f"(r_k,), got {u.shape} and {p.shape}")
        lk = float(lengths[k])
        if not np.isfinite(lk) or lk <= 0.0:
            raise InputError(f"lengths[{k}] must be a positive finite number [m], got {lk!r}")
        if not (np.all(np.isfinite(u)) and np.all(np.isfinite(p))):
            raise InputError(f"arm {k}: tip shapes must be finite")
        us.append(u)
        ps.append(p)
        ls.append(lk)
    offsets = np.concatenate([[0], np.cumsum([u.size for u in us])])
    gamma = np.zeros((n, offsets[-1]))
    for k in range(n):
        own = us[k] / ls[k]  # (6.34), (6.35): chord rotation of arm k
        gamma[k, offsets[k]:offsets[k + 1]] = own
        if k > 0:  # (6.36): tip rotation of the previous arm minus its chord rotation
            prev = gamma[k - 1, offsets[k - 1]:offsets[k]]
            gamma[k, offsets[k - 1]:offsets[k]] = ps[k - 1] - prev
    return gamma


def _distal_tip(body, where: str) -> tuple[np.ndarray, np.ndarray, float]:
    """``(u, Ψ, l)`` of a flexible body's distal node: transverse displacement (nq_b,) and
    rotation (nq_b,) per unit elastic coordinate, and its x coordinate [m], which must be on
    the positive x axis of the body frame."""
    d = body.modal_data
    pos = d.node_positions[body.distal_node]
    if abs(pos[1]) > 1e-12 * max(abs(pos[0]), 1.0) or pos[0] <= 0.0:
        raise ModelError(f"{where}: distal node must lie on the positive x axis, got "
                         f"{pos.tolist()}")
    return d.node_shapes[body.distal_node, 1], d.node_shapes[body.distal_node, 2], float(pos[0])


def chord_output(chain: FlexibleChain, joints: Sequence[str],
                 chords: dict[str, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(H_r, Γ)`` of an output ``y = H_r q_r + Γ q_e`` built from joint coordinates and arm
    chords, for a chain of any topology (the closed loops of
    :class:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain` included).

    Row ``i`` is the coordinate of ``joints[i]``; when ``chords`` maps that joint to a flexible
    body, the row adds the rotation of the body's chord (the line from its frame origin to its
    distal node) relative to the body frame, linearised: ``Γ_i = u / l`` with ``u`` the
    transverse displacement of the distal node per unit elastic coordinate and ``l`` its
    distance from the origin (Seifried 2014 eq. 6.34, the first-arm rule of
    :func:`combined_output_gamma`).  For the parallel machine tool (Sect. 6.5) the combined
    output (6.39) ``y = [s1; alpha + Γ q_e]`` is ``joints = [s1, alpha]``,
    ``chords = {alpha: long_arm}`` (tool point at the long arm's tip, chord frame); with no
    chords Γ = 0 (a selection of joint coordinates).  The model files declare their outputs
    this way (``outputs:``, :mod:`~multibody_dynamics.flexible.loader`).

    Parameters
    ----------
    chain : FlexibleChain
        The tree (of a closed system: its spanning tree).
    joints : sequence of str
        Joint names, one per output row.
    chords : dict, optional
        ``{joint: body}`` for the rows with a chord term; the body must be flexible, with its
        distal node on the positive x axis of its frame.

    Returns
    -------
    H_r : ndarray, shape (m, nq_r)
        Selection of the joint coordinates [-].
    gamma : ndarray, shape (m, nq_e)
        [rad per unit q_e]; columns in the chain's ``q_e`` order.

    Raises
    ------
    ModelError
        For an unknown or repeated joint, a chord of a joint not in ``joints``, an unknown or
        rigid body, or a distal node off the frame's x axis.
    """
    if not isinstance(chain, FlexibleChain):
        raise InputError(f"chain must be a FlexibleChain, got {type(chain).__name__}")
    name, names = chain.config.name, list(chain.joint_names)
    joints, chords = list(joints), dict(chords or {})
    bad = [j for j in joints if j not in names]
    if bad or not joints or len(set(joints)) != len(joints):
        raise ModelError(f"{name}: output joints must be distinct joints of {names}, got {joints}")
    extra = sorted(set(chords) - set(joints))
    if extra:
        raise ModelError(f"{name}: chord rows {extra} are not output joints {joints}")
    nr = chain.nq_r
    H = np.zeros((len(joints), nr))
    gamma = np.zeros((len(joints), chain.nq_e))
    for row, joint in enumerate(joints):
        H[row, names.index(joint)] = 1.0
        if joint not in chords:
            continue
        body = chords[joint]
        i = chain._body_index(body)
        b = chain.bodies[i]
        if not b.flexible:
            raise ModelError(f"{name}: chord of {joint!r}: body {body!r} is rigid (a chord "
                             "rotation needs elastic coordinates)")
        u, _, length = _distal_tip(b, f"{name}: chord of {joint!r}: body {body!r}")
        sl = chain.elastic_slices[i]
        gamma[row, sl.start - nr:sl.stop - nr] = u / length
    return H, gamma


def chain_combined_output(chain: FlexibleChain) -> np.ndarray:
    """Γ (nq_r, nq_e) of a :class:`FlexibleChain` that is a serial manipulator of revolute arms,
    optionally on carts.

    The chain may start with rigid bodies on prismatic joints (carts, e.g. the cart on e1 of
    Seifried (2014) Sect. 7.5.2); their rows of Γ are zero, since a rigid cart coordinate is
    its own output and moves the arms without deforming the kinematics. The rest must be
    flexible arms, each on the previous body with a revolute joint, with their distal node on
    their x axis (as :func:`arm_modal_data` builds it); ``l_k`` is the distal node's x
    coordinate, ``u^k`` and ``Ψ^k`` its shape. The first arm may have any constant joint
    ``angle`` (it turns r_ap and r_ef together, Γ is unchanged); the following arms need
    ``angle = 0``, the chord recursion (6.36) assumes each arm continues its parent's tip
    tangent. The columns follow the chain's ``q_e`` order, so
    ``y = q[:nq_r] + Γ @ q[nq_r:]``.

    Returns
    -------
    ndarray, shape (nq_r, nq_e)
        Γ [rad per unit q_e] (zero rows for the carts).

    Raises
    ------
    ModelError
        The chain is not carts followed by a serial chain of flexible revolute arms.
    """
    if not isinstance(chain, FlexibleChain):
        raise InputError(f"chain must be a FlexibleChain, got {type(chain).__name__}")
    us, ps, ls = [], [], []
    carts = 0
    for i, b in enumerate(chain.bodies):
        where = f"{chain.config.name}: body {b.name!r}"
        serial = chain.config.parents[i] == i - 1
        if not us and not b.flexible and b.joint_type == "prismatic" and serial:
            carts += 1
            continue
        if not b.flexible:
            raise ModelError(f"{where}: the combined output needs flexible arms only (rigid "
                             "bodies only as prismatic carts before the first arm)")
        if b.joint_type != "revolute" or not serial or (us and b.angle != 0.0):
            raise ModelError(f"{where}: expected a serial chain of revolute joints with "
                             f"angle 0 after the first arm (got {b.joint_type}, parent "
                             f"{chain.config.parents[i]}, angle {b.angle})")
        u, psi, length = _distal_tip(b, where)
        us.append(u)
        ps.append(psi)
        ls.append(length)
    if not us:
        raise ModelError(f"{chain.config.name}: no flexible arm, no combined output")
    arms = combined_output_gamma(us, ps, ls)
    return np.vstack([np.zeros((carts, arms.shape[1])), arms])
