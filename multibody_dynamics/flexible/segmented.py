"""Modal data of an arm made of uniform segments, with lumped masses (Seifried 2014, Sect. 6.5).

An arm of a flexible machine is rarely one prismatic beam: hubs, bearing blocks and the tool
holder are short stiff pieces carrying their real mass, joined by the elastic links. Seifried
(2014) Sect. 6.5 puts these "rigid parts" inside the finite element model of the arm: each
:class:`ArmSegment` is meshed with the planar beam elements of
:mod:`~multibody_dynamics.flexible.beam` (its own section), :class:`LumpedMass` adds a rigid
mass at a node, and :func:`segmented_arm_modal_data` reduces the model to modes of the chosen
frame (tangent or chord) or to given shape vectors (e.g. POD shapes) and integrates the mass
integrals into :class:`~multibody_dynamics.flexible.sid.ModalData`. The model files' segmented
``beam:`` (:mod:`~multibody_dynamics.flexible.loader`, ``docs/model-files-flexible.md``) is
built here; the bodies may belong to an open chain or to a closed one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..errors import DimensionError, InputError, SolverError
from .beam import (
    _GAUSS_W,
    _GAUSS_XI,
    DOFS_PER_NODE,
    BeamConfig,
    BeamSection,
    element_matrices,
    element_shapes,
)
from .body import _J
from .sid import ModalData, _ElementSums

__all__ = ["ArmSegment", "LumpedMass", "segmented_arm_modal_data"]

@dataclass(frozen=True)
class ArmSegment:
    """A uniform piece of an arm for :func:`segmented_arm_modal_data`.

    Parameters
    ----------
    length : float
        [m] > 0.
    elements : int
        Number of beam elements >= 1.
    section : BeamSection
        Material and cross-section (rigid parts: a stiff section with their real mass).
    """

    length: float
    elements: int
    section: BeamSection

    def __post_init__(self):
        if not (np.isfinite(float(self.length)) and float(self.length) > 0):
            raise InputError(f"ArmSegment.length must be > 0 [m], got {self.length!r}")
        if isinstance(self.elements, bool) or int(self.elements) != self.elements or \
                self.elements < 1:
            raise InputError(f"ArmSegment.elements must be an integer >= 1, got {self.elements!r}")
        if not isinstance(self.section, BeamSection):
            raise InputError(f"ArmSegment.section must be a BeamSection, got "
                             f"{type(self.section).__name__}")


@dataclass(frozen=True)
class LumpedMass:
    """A rigid mass attached at a node of an arm (tool, bearing, motor).

    Parameters
    ----------
    position : float
        Distance from the arm's frame origin along x [m]; must coincide with a node.
    mass : float
        [kg] >= 0.
    inertia : float
        About its centre (at the node), zz [kg m^2] >= 0.
    """

    position: float
    mass: float
    inertia: float = 0.0

    def __post_init__(self):
        for key in ("position", "mass", "inertia"):
            val = float(getattr(self, key))
            if not np.isfinite(val) or (key != "position" and val < 0):
                raise InputError(f"LumpedMass.{key} must be "
                                 f"finite{'' if key == 'position' else ' and >= 0'}, got "
                                 f"{getattr(self, key)!r}")


def segmented_arm_modal_data(segments: Sequence[ArmSegment], modes: int,  # noqa: C901
                             frame: str = "tangent", chord_node: int | None = None,
                             masses: Sequence[LumpedMass] = (), theory: str = "timoshenko",
                             rayleigh: tuple[float, float] = (0.0, 0.0),
                             basis=None) -> tuple[ModalData, dict]:
    """Modal data of an arm made of uniform segments (rigid parts inside the FE model).

    Seifried (2014) Sect. 6.5: "the rigid parts are here included in the finite element model
    of the two arms": each segment is meshed with the planar beam elements of
    :mod:`~multibody_dynamics.flexible.beam` (its own section), the stiff "rigid" parts carry
    their real mass. The mass integrals (2.111)-(2.116) are integrated element by element as in
    :func:`~multibody_dynamics.flexible.sid.modal_data_from_beam`; lumped masses add
    ``m`` at the node and ``I psi psi^T`` for their rotation.

    Parameters
    ----------
    segments : sequence of ArmSegment
        From the frame origin along x.
    modes : int
        Lowest normal modes kept, mass-normalised (the book used 12 POD shapes for the long
        arm and 6 for the short one; here: fixed-interface eigenmodes); with ``basis``: its
        number of columns.
    frame : {"tangent", "chord"}
        ``"tangent"``: clamped at node 0 (u, w, theta fixed). ``"chord"``: u and w fixed at node
        0 and w at ``chord_node``: the frame's x axis passes through that node (the book's
        chord frame of the long arm, through the middle joint).
    chord_node : int
        Node of the chord end (``frame="chord"`` only).
    masses : sequence of LumpedMass
    theory : {"timoshenko", "euler-bernoulli"}
    rayleigh : (alpha, beta)
        Damping ``D = alpha M + beta K`` [1/s, s] of the FE model, projected on the modes.
    basis : array_like, shape (ndof, modes), optional
        Shape vectors on all FE dofs (``ndof = 3 x nodes``, node order ``u, w, theta``; m or
        rad per unit ``q_e``) used instead of the eigenmodes, e.g. POD shapes
        (:func:`~multibody_dynamics.flexible.pod.pod_basis`). They must vanish at the dofs the
        frame holds (see ``frame``) and be linearly independent; they need not be
        mass-normalised (``Me`` is then not the identity). Default: the eigenmodes.

    Returns
    -------
    data : ModalData
        Nodes: every FE node (``node_positions`` along x).
    info : dict
        ``"frequencies"`` (modes,) [rad/s] (of the reduced pair ``(Ke, Me)``), ``"nodes"``
        (nn,) x [m], ``"mass"`` [kg], ``"M"``, ``"K"`` (ndof, ndof) the FE mass and stiffness
        matrices (lumped masses included), ``"fixed"`` the dofs held by the frame.
    """
    segments = tuple(segments)
    if not segments or not all(isinstance(s, ArmSegment) for s in segments):
        raise InputError("segments must be a non-empty sequence of ArmSegment")
    if frame not in ("tangent", "chord"):
        raise InputError(f"frame must be 'tangent' or 'chord', got {frame!r}")
    elems = []  # (x0, h, config) per element
    x0 = 0.0
    for s in segments:
        cfg = BeamConfig(float(s.length), int(s.elements), s.section, theory=theory)
        h = cfg.element_length
        for _ in range(cfg.n_elements):
            elems.append((x0, h, cfg))
            x0 += h
    ne = len(elems)
    nodes = np.array([e[0] for e in elems] + [x0])
    length = x0
    ndof = DOFS_PER_NODE * (ne + 1)
    M, K = np.zeros((ndof, ndof)), np.zeros((ndof, ndof))
    cache = {}
    for e, (_, _, cfg) in enumerate(elems):
        key = id(cfg.section), cfg.element_length
        if key not in cache:
            cache[key] = element_matrices(cfg)
        me, ke = cache[key]
        sl = slice(DOFS_PER_NODE * e, DOFS_PER_NODE * e + 6)
        M[sl, sl] += me
        K[sl, sl] += ke
    lumped = []
    for lm in masses:
        if not isinstance(lm, LumpedMass):
            raise InputError(f"masses must hold LumpedMass, got {type(lm).__name__}")
        k = int(np.argmin(np.abs(nodes - lm.position)))
        if abs(nodes[k] - lm.position) > 1e-9 * max(length, 1.0):
            raise InputError(f"lumped mass at x = {lm.position} m is not on a node; nearest node "
                             f"x = {nodes[k]:.6g} m")
        M[3 * k, 3 * k] += lm.mass
        M[3 * k + 1, 3 * k + 1] += lm.mass
        M[3 * k + 2, 3 * k + 2] += lm.inertia
        lumped.append((k, lm))
    fixed = [0, 1] if frame == "chord" else [0, 1, 2]
    if frame == "chord":
        if chord_node is None or not 0 < int(chord_node) <= ne:
            raise InputError(f"frame='chord' needs chord_node in [1, {ne}], got {chord_node!r}")
        fixed.append(DOFS_PER_NODE * int(chord_node) + 1)
    free = np.setdiff1d(np.arange(ndof), fixed)
    if not isinstance(modes, (int, np.integer)) or isinstance(modes, bool) or \
            not 1 <= modes <= free.size:
        raise InputError(f"modes must be an integer in [1, {free.size}], got {modes!r}")
    ff = np.ix_(free, free)
    if basis is None:
        lam, vec = scipy.linalg.eigh(K[ff], M[ff], subset_by_index=[0, modes - 1])
        if lam.min() <= 1e-8 * lam.max():
            raise SolverError("the supported arm has a rigid-body mode (zero frequency): check "
                              "frame / chord_node")
        Phi = np.zeros((ndof, modes))
        Phi[free] = vec
        idx = np.argmax(np.abs(Phi), axis=0)
        Phi *= np.sign(Phi[idx, np.arange(modes)])  # reproducible signs
    else:
        Phi = np.array(basis, dtype=float)
        if Phi.shape != (ndof, modes):
            raise DimensionError(f"basis must have shape ({ndof}, {modes}) (FE dofs x modes), "
                                 f"got {Phi.shape}")
        if not np.all(np.isfinite(Phi)):
            raise InputError("basis must be finite")
        scale = np.abs(Phi).max(axis=0)
        if np.any(scale == 0) or np.abs(Phi[fixed]).max() > 1e-9 * scale.max():
            raise InputError(f"basis vectors must be non-zero and vanish at the dofs {fixed} "
                             f"held by the {frame} frame")
        Phi[fixed] = 0.0
        mass_gram = Phi[free].T @ M[ff] @ Phi[free]
        if np.linalg.cond(mass_gram) > 1e12:
            raise InputError("basis vectors are (nearly) linearly dependent")
        lam = scipy.linalg.eigh(Phi[free].T @ K[ff] @ Phi[free], mass_gram, eigvals_only=True)
        if lam.min() <= 1e-8 * lam.max():
            raise SolverError("the basis spans a rigid-body motion of the supported arm")
    al, be = rayleigh
    if al < 0 or be < 0:
        raise InputError(f"rayleigh damping coefficients must be >= 0, got {rayleigh}")
    Me = Phi.T @ M @ Phi
    Ke = Phi.T @ K @ Phi
    De = al * Me + be * Ke
    # mass integrals (as sid.modal_data_from_beam, element by element)
    nq = modes
    sums = _ElementSums(nq)
    kom = np.zeros((nq, nq))
    # centrifugal axial force per unit Omega^2 at x: int_x^L rho A s ds + sum of lumped m x_k
    rho_a = np.array([e[2].section.rho * e[2].section.A for e in elems])
    tail = np.zeros(ne + 1)
    for e in range(ne - 1, -1, -1):
        tail[e] = tail[e + 1] + rho_a[e] * 0.5 * (nodes[e + 1] ** 2 - nodes[e] ** 2)
    for k, lm in lumped:
        tail[:k] += lm.mass * nodes[k]  # elements before the node carry its pull
    for e, (xe, h, cfg) in enumerate(elems):
        s = cfg.section
        rho_i = s.rho * s.I if cfg.rotary_inertia else 0.0
        sh = element_shapes(h, cfg.shear_parameter(), _GAUSS_XI)
        pe = Phi[DOFS_PER_NODE * e:DOFS_PER_NODE * e + 6]
        x = xe + _GAUSS_XI * h
        wg = _GAUSS_W * h
        u, w, th, dw = (sh[key] @ pe for key in ("u", "w", "theta", "dw"))
        ra = rho_a[e]
        sums.add(u, w, th, x, wg, ra, rho_i)
        axial = tail[e + 1] + ra * 0.5 * (nodes[e + 1] ** 2 - x**2)
        kom += dw.T @ ((wg * axial)[:, None] * dw)
    shapes = Phi.reshape(-1, DOFS_PER_NODE, nq)
    mass, mx, i0 = sums.mass, sums.mx, sums.i0
    ct, i1, cr0, cr1 = sums.ct, sums.i1, sums.cr0, sums.cr1
    for k, lm in lumped:
        r0 = np.array([nodes[k], 0.0])
        a = shapes[k, :2]  # (2, nq)
        psi = shapes[k, 2]
        mass += lm.mass
        mx += lm.mass * r0[0]
        i0 += lm.inertia + lm.mass * r0 @ r0
        ct += lm.mass * a.T
        i1 += 2.0 * lm.mass * r0 @ a
        cr0 += lm.mass * a.T @ (_J @ r0) + lm.inertia * psi
        cr1 += lm.mass * a.T @ _J @ a
    data = ModalData(mass=mass, mc0=np.array([mx, 0.0]), Ct=ct, I0=i0, I1=i1, Cr0=cr0,
                     Cr1=0.5 * (cr1 - cr1.T), Me=0.5 * (Me + Me.T), Ke=0.5 * (Ke + Ke.T),
                     De=0.5 * (De + De.T), Komega=0.5 * (kom + kom.T),
                     node_positions=np.column_stack([nodes, np.zeros_like(nodes)]),
                     node_shapes=shapes)
    return data, {"frequencies": np.sqrt(lam), "nodes": nodes, "mass": mass, "M": M, "K": K,
                  "fixed": np.array(fixed, dtype=int)}
