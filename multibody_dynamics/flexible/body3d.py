"""Spatial flexible body: Taylor-form modal data and the floating frame of reference equations.

Modal data (Seifried 2014, eqs. 2.110-2.122 in the Taylor form 2.128)
---------------------------------------------------------------------
For the linear Ritz approach ``r = r0 + Phi q_e`` (eq. 2.100) every mass integral is a
polynomial of degree <= 2 in ``q_e`` and follows from three *basic shape integrals*
(Wallrapp's "shape mass integrals")::

    P0 = int r0 r0^T dm (3, 3),   P1_i = int r0 phi_i^T dm (3, 3),   P2_ij = int phi_i phi_j^T dm

and ``m``, ``int r0 dm``, ``C_t``. With ``a~ b~ = b a^T - (a.b) I`` and ``axial(P)`` the vector
``(P_yz - P_zy, P_zx - P_xz, P_xy - P_yx)`` (so ``int a x b dm = axial(int a b^T dm)``):

==========  =====================  ===================================================  ======
key         shape                  Taylor coefficients                                   eq.
==========  =====================  ===================================================  ======
mass        ()                     m [kg]                                                2.111
mc0, Ct     (3,), (nq, 3)          ``m c(q) = mc0 + Ct^T q`` [kg m]; ``C_t = int Phi^T``  2.113,
                                                                                         2.115
J0, J1, J2  (3,3), (nq,3,3),       ``I^(q) = J0 + sum_i J1_i q_i + sum_ij J2_ij q_i q_j``  2.112
            (nq,nq,3,3)            about the frame origin [kg m^2]: ``J0 = tr(P0) I - P0``,
                                   ``J1_i = 2 tr(P1_i) I - P1_i - P1_i^T``,
                                   ``J2_ij = tr(P2_ij) I - (P2_ij + P2_ji)/2``
Cr0, Cr1    (nq, 3), (nq, nq, 3)   rows ``C_r[k] = int r x phi_k dm = Cr0[k] + sum_i      2.116
                                   Cr1[k, i] q_i``; ``Cr0[k] = axial(P1_k)``,
                                   ``Cr1[k, i] = axial(P2_ik)`` (skew in k, i)
Me          (nq, nq)               ``M_e[i, j] = tr(P2_ij)``                              2.114
Gr0, Gr1    (nq,3,3), (nq,nq,3,3)  ``G_r = sum_i q'_i (Gr0_i + sum_j Gr1_ij q_j)``;       2.120
                                   ``Gr0_i = 2 (tr(P1_i) I - P1_i^T)``,
                                   ``Gr1_ij = 2 (tr(P2_ij) I - P2_ij)``
Oe0, Oe1    (nq,3,3), (nq,nq,3,3)  ``O_e^k = Oe0_k + sum_j Oe1_kj q_j``;                  2.122
                                   ``Oe0_k = P1_k - tr(P1_k) I``,
                                   ``Oe1_kj = P2_jk - tr(P2_jk) I``
Ke, De      (nq, nq)               K_e (2.124) and D_e (Rayleigh ``alpha Me + beta Ke``)  2.124
Komega      (nq, nq)               centrifugal geometric stiffness (see below)            2.125
==========  =====================  ===================================================  ======

``G_e`` (2.122) needs no own data: ``(G_e omega)_k = 2 sum_i q'_i Cr1[k, i] . omega``.

Errata applied (docs/derivations.md, Seifried 2014 Sect. 2.2): (2.118) ``h_t = omega~ omega~ m c +
2 omega~ C_t^T q'`` carries ``m``; (2.119) reads ``... + G_r omega``; (2.120) is
``G_r = 2 int r~ r'~^T dm`` (the printed integrand lost the dot); the elastic gyroscopic matrix
of (2.122) is ``2 int Phi^T r'~^T dm`` likewise; and ``O_e^k = int phi~_k r~ dm`` -- the
*opposite* sign of the printed ``int phi~_k r~^T dm``: the k-th row of
``int Phi^T omega~ omega~ r dm`` is ``phi_k . (omega (omega . r) - |omega|^2 r) =
omega^T (int phi~_k r~ dm) omega``. The rotating-cantilever test confirms it (in-plane bending
softens by ``Omega^2``, as for the planar body of :mod:`~multibody_dynamics.flexible.body`).

Beam bodies: the integrals are evaluated by Gauss quadrature along x (5 points per element)
times a 4-point section rule ``(eta, zeta) = (+-sqrt(2 Iz/A), 0), (0, +-sqrt(2 Iy/A))`` with
weights ``A/4``, exact for the section moments up to second order that the linear
section kinematics ``(u + zeta ry - eta rz, v - zeta rx, w + eta rx)`` of
:mod:`~multibody_dynamics.flexible.beam3d` produce. Without bending rotary inertia the
``ry, rz`` terms are dropped from the field (matching the element mass matrix), but the
section keeps its own rigid inertia in ``J0`` (``rho Ip`` per length about x; without it the
rigid mass matrix of a line would be singular). ``Komega`` is ``int rho A (l^2 - x^2)/2
(v'^T v' + w'^T w') dx``, the axial foreshortening of bending in both planes; it enters the
kinetic energy as ``-1/2 (omega_y^2 + omega_z^2) q^T Komega q`` (beam along x, clamped at the
frame origin).

Body equations (Seifried 2014, eqs. 2.109-2.127)
------------------------------------------------
Coordinates ``q = [r (3) [m], quaternion (4) [x, y, z, w], q_e (nq)]``, pinocchio's free-flyer
layout; velocities ``v = [v_O (3) [m/s], omega (3) [rad/s], q_e' (nq)]`` with ``omega`` in
body axes K_R and ``v_O`` in body axes (``velocity_frame="body"``, pinocchio's convention,
default) or inertial axes (``"inertial"``, the convention of the planar body). ``S`` rotates
K_R to the inertial frame.

* body velocities (``z_II = v``): ``Mbar v' + h_omega + Mbar[:, :3] (omega x v_O) + f_e = h_v +
  tau``, because the reference acceleration in K_R is ``v_O' + omega x v_O``;
* inertial velocities (``z_II = T v``, ``T = blockdiag(S^T, I, I)``, ``z_III = T v'``):
  ``T^T Mbar T v' + T^T h_omega + f_e = T^T h_v + tau``;

with ``Mbar`` of (2.110), ``h_omega = [h_t; h_r; h_e]`` of (2.117)-(2.122)::

    h_t = omega x (omega x m c) + 2 omega x (C_t^T q_e')
    h_r = omega x (I^ omega) + G_r omega
    h_e,k = omega^T O_e^k omega + (G_e omega)_k

``f_e = [0; K_e q_e + D_e q_e']`` (2.123) and gravity ``h_v = [m b0; m c x b0; C_t b0]``,
``b0 = S^T g0`` (2.126).

Options: ``second_order_inertia=False`` keeps only ``J0 + J1 q`` of the inertia and, so that the
model still derives from one Lagrangian, replaces ``G_r omega`` by ``(sum_i J1_i q'_i) omega +
omega x (C_r^T q')`` (the exact identity ``G_r omega = I^' omega + omega x (C_r^T q')`` without the
``J2`` part) and drops ``Oe1``. ``geometric_stiffening=True`` adds the ``Komega`` kinetic
energy term: ``I^ -= s D``, ``G_r omega -= s' D omega``, ``h_e += (omega^T D omega) Komega q``
with ``s = q^T Komega q``, ``D = diag(0, 1, 1)``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from ..errors import DimensionError, InputError
from .beam import _GAUSS_W, _GAUSS_XI
from .beam3d import DOFS_PER_NODE_3D, BeamModel3D, element_shapes_3d
from .body import _FloatingFrame, _gravity
from .modal import ModalBasis
from .sid import _check_arrays, _failer, _ModalDataBase, _tol

__all__ = [
    "FORMAT_VERSION_3D",
    "KEYS_3D",
    "ModalData3D",
    "modal_data_3d_from_beam",
    "save_modal_data_3d",
    "load_modal_data_3d",
    "FlexibleBody3DConfig",
    "FlexibleBody3D",
    "quaternion_to_matrix",
    "skew",
]

FORMAT_VERSION_3D = 1
#: Keys of a spatial modal data file, in documentation order.
KEYS_3D = ("format_version", "spatial", "mass", "mc0", "Ct", "J0", "J1", "J2", "Cr0", "Cr1",
           "Gr0", "Gr1", "Oe0", "Oe1", "Me", "Ke", "De", "Komega", "node_positions",
           "node_shapes")
_EYE3 = np.eye(3)
_D_STIFF = np.diag([0.0, 1.0, 1.0])


def skew(a) -> np.ndarray:
    """The cross-product matrix ``a~`` (3, 3) with ``a~ b = a x b``."""
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


def _cross(a, b) -> np.ndarray:
    """``a x b`` of two 3-vectors (``np.cross`` costs ~20x more for one pair)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]])


def _axial(P: np.ndarray) -> np.ndarray:
    """``(P_yz - P_zy, P_zx - P_xz, P_xy - P_yx)`` over the last two axes (``int a x b`` from
    ``int a b^T``)."""
    return np.stack([P[..., 1, 2] - P[..., 2, 1], P[..., 2, 0] - P[..., 0, 2],
                     P[..., 0, 1] - P[..., 1, 0]], axis=-1)


def quaternion_to_matrix(quat) -> np.ndarray:
    """Rotation matrix (3, 3) of a unit quaternion ``[x, y, z, w]`` (normalised here)."""
    x, y, z, w = np.asarray(quat, float) / np.linalg.norm(quat)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def _shapes(nq: int, nn: int) -> dict[str, tuple[int, ...]]:
    return {"mass": (), "mc0": (3,), "Ct": (nq, 3), "J0": (3, 3), "J1": (nq, 3, 3),
            "J2": (nq, nq, 3, 3), "Cr0": (nq, 3), "Cr1": (nq, nq, 3), "Gr0": (nq, 3, 3),
            "Gr1": (nq, nq, 3, 3), "Oe0": (nq, 3, 3), "Oe1": (nq, nq, 3, 3), "Me": (nq, nq),
            "Ke": (nq, nq), "De": (nq, nq), "Komega": (nq, nq), "node_positions": (nn, 3),
            "node_shapes": (nn, DOFS_PER_NODE_3D, nq)}


def _check(arrays: dict, source: str) -> dict[str, np.ndarray]:
    """Validate raw arrays; return float copies. Raises ModelError naming source and key."""
    fail = _failer(source)
    out = _check_arrays(arrays, fail, KEYS_3D, ModalData3D._TAGS,
                        _shapes, ("J0", "Me", "Ke", "De", "Komega"), ("J0", "Me"))
    cr1 = out["Cr1"]
    if np.abs(cr1 + cr1.transpose(1, 0, 2)).max() > _tol(cr1):
        fail("Cr1", "not skew in its first two indices (Cr1[k, i] = -Cr1[i, k])")
    return out


@dataclass(frozen=True, eq=False)
class ModalData3D(_ModalDataBase):
    """Taylor-expanded mass integrals, stiffness and damping of one spatial flexible body.

    Fields are the keys of the module docstring's table (SI units, K_R coordinates; for
    mass-normalised modes ``q_e`` has unit sqrt(kg) m). Construction validates them
    (:class:`~multibody_dynamics.errors.ModelError` naming the key).
    """

    mass: float
    mc0: np.ndarray
    Ct: np.ndarray
    J0: np.ndarray
    J1: np.ndarray
    J2: np.ndarray
    Cr0: np.ndarray
    Cr1: np.ndarray
    Gr0: np.ndarray
    Gr1: np.ndarray
    Oe0: np.ndarray
    Oe1: np.ndarray
    Me: np.ndarray
    Ke: np.ndarray
    De: np.ndarray
    Komega: np.ndarray
    node_positions: np.ndarray
    node_shapes: np.ndarray
    format_version: int = FORMAT_VERSION_3D
    spatial: int = 1

    _TAGS: ClassVar[dict[str, int]] = {"format_version": FORMAT_VERSION_3D, "spatial": 1}
    _validate = staticmethod(_check)

    def first_moment(self, q_e) -> np.ndarray:
        """``m c(q_e) = mc0 + Ct^T q_e`` (3,) [kg m] in K_R (eq. 2.113)."""
        return self.mc0 + self.Ct.T @ self._q(q_e)

    def inertia(self, q_e, second_order: bool = True) -> np.ndarray:
        """Inertia tensor ``I^(q_e)`` (3, 3) about the frame origin [kg m^2] (eq. 2.112).

        ``second_order=False`` drops the (exact) quadratic Taylor term ``J2``.
        """
        q = self._q(q_e)
        out = self.J0 + np.tensordot(q, self.J1, axes=1)
        if second_order:
            out = out + np.einsum("i,j,ijab->ab", q, q, self.J2)
        return out

    def Cr(self, q_e) -> np.ndarray:
        """Rotational coupling ``C_r(q_e)`` (nq, 3), rows ``int r x phi_k dm`` (eq. 2.116)."""
        return self.Cr0 + np.einsum("kia,i->ka", self.Cr1, self._q(q_e))

    def Gr(self, q_e, dq_e) -> np.ndarray:
        """``G_r(q_e, q_e')`` (3, 3) of eq. (2.120) (``h_r = omega x I^ omega + G_r omega``)."""
        q, dq = self._q(q_e), self._q(dq_e, "dq_e")
        return np.tensordot(dq, self.Gr0, axes=1) + np.einsum("i,j,ijab->ab", dq, q, self.Gr1)

    def Ge(self, dq_e) -> np.ndarray:
        """Elastic gyroscopic matrix ``G_e(q_e')`` (nq, 3) of eq. (2.122), ``h_e += G_e omega``."""
        return 2.0 * np.einsum("kia,i->ka", self.Cr1, self._q(dq_e, "dq_e"))

    def Oe(self, q_e, second_order: bool = True) -> np.ndarray:
        """``O_e^k(q_e) = int phi~_k r~ dm`` (nq, 3, 3), sign-corrected eq. (2.122)."""
        q = self._q(q_e)
        return self.Oe0 + np.einsum("kjab,j->kab", self.Oe1, q) if second_order else self.Oe0


def modal_data_3d_from_beam(basis: ModalBasis) -> ModalData3D:
    """Mass integrals of a spatial beam body by Gauss integration (see the module docstring).

    The beam lies along x of K_R from the frame origin; the integrals use the element shape
    functions of :mod:`~multibody_dynamics.flexible.beam3d`, so ``Me`` equals
    ``Phi^T M Phi`` of the consistent mass matrix to rounding.

    Parameters
    ----------
    basis : ModalBasis
        Modes of a :class:`~multibody_dynamics.flexible.beam3d.BeamModel3D` (e.g. from
        :func:`~multibody_dynamics.flexible.beam3d.clamped_modes_3d`), normally clamped at
        x = 0 (tangent frame).

    Returns
    -------
    ModalData3D
    """
    if not isinstance(basis, ModalBasis) or not isinstance(basis.beam, BeamModel3D):
        raise InputError("basis must be a ModalBasis of a BeamModel3D (use clamped_modes_3d)")
    beam = basis.beam
    cfg = beam.config
    s = cfg.section
    h, length, nq = cfg.element_length, cfg.length, basis.n_modes
    phi_y, phi_z = cfg.shear_parameters()
    sh = element_shapes_3d(h, phi_y, phi_z, _GAUSS_XI)
    a, b = np.sqrt(2.0 * s.Iz / s.A), np.sqrt(2.0 * s.Iy / s.A)
    section = np.array([[a, 0.0], [-a, 0.0], [0.0, b], [0.0, -b]])  # (eta, zeta), weight A/4
    rot = 1.0 if cfg.rotary_inertia else 0.0
    mass, mr0 = 0.0, np.zeros(3)
    ct, p0 = np.zeros((nq, 3)), np.zeros((3, 3))
    p1, p2 = np.zeros((nq, 3, 3)), np.zeros((nq, nq, 3, 3))
    kom = np.zeros((nq, nq))
    for e in range(cfg.n_elements):
        pe = basis.Phi[DOFS_PER_NODE_3D * e:DOFS_PER_NODE_3D * e + 12]
        x = beam.nodes[e] + _GAUSS_XI * h
        dm_line = s.rho * s.A * _GAUSS_W * h  # (5,)
        d = np.einsum("gcj,jk->gck", sh["disp"], pe)  # (5, 3, nq) centre line
        r = np.einsum("gcj,jk->gck", sh["rot"], pe)  # (5, 3, nq) rotations
        dd = np.einsum("gcj,jk->gck", sh["ddisp"], pe)
        for eta, zeta in section:
            dm = dm_line / 4.0
            r0 = np.column_stack([x, np.full_like(x, eta), np.full_like(x, zeta)])  # (5, 3)
            phi = d.copy()
            phi[:, 0] += rot * (zeta * r[:, 1] - eta * r[:, 2])
            phi[:, 1] -= zeta * r[:, 0]
            phi[:, 2] += eta * r[:, 0]
            mass += dm.sum()
            mr0 += dm @ r0
            ct += np.einsum("g,gck->kc", dm, phi)
            p0 += np.einsum("g,ga,gb->ab", dm, r0, r0)
            p1 += np.einsum("g,ga,gbi->iab", dm, r0, phi)
            p2 += np.einsum("g,gai,gbj->ijab", dm, phi, phi)
        slope = dd[:, 1:]  # (5, 2, nq): v', w'
        kom += np.einsum("g,gci,gcj->ij", dm_line * 0.5 * (length**2 - x**2), slope, slope)
    tr1 = np.trace(p1, axis1=1, axis2=2)
    tr2 = np.trace(p2, axis1=2, axis2=3)
    p2t = p2.transpose(1, 0, 2, 3)  # p2t[i, j] = P2_ji
    j0 = np.trace(p0) * _EYE3 - p0
    j1 = 2.0 * tr1[:, None, None] * _EYE3 - p1 - p1.transpose(0, 2, 1)
    j2 = tr2[..., None, None] * _EYE3 - 0.5 * (p2 + p2t)
    cr0 = _axial(p1)
    cr1 = _axial(p2).transpose(1, 0, 2)  # Cr1[k, i] = axial(P2_ik)
    gr0 = 2.0 * (tr1[:, None, None] * _EYE3 - p1.transpose(0, 2, 1))
    gr1 = 2.0 * (tr2[..., None, None] * _EYE3 - p2)
    oe0 = p1 - tr1[:, None, None] * _EYE3
    oe1 = p2t - tr2.T[..., None, None] * _EYE3  # Oe1[k, j] = P2_jk - tr(P2_jk) I
    nodes = np.column_stack([beam.nodes, np.zeros((beam.nodes.size, 2))])
    node_shapes = basis.Phi.reshape(-1, DOFS_PER_NODE_3D, nq)
    return ModalData3D(
        mass=mass, mc0=mr0, Ct=ct, J0=0.5 * (j0 + j0.T), J1=j1, J2=j2, Cr0=cr0,
        Cr1=0.5 * (cr1 - cr1.transpose(1, 0, 2)), Gr0=gr0, Gr1=gr1, Oe0=oe0, Oe1=oe1,
        Me=0.5 * (tr2 + tr2.T), Ke=basis.Ke, De=basis.De, Komega=0.5 * (kom + kom.T),
        node_positions=nodes, node_shapes=node_shapes,
    )


def save_modal_data_3d(path: str | os.PathLike, data: ModalData3D) -> None:
    """Write ``data`` as one ``.npz`` file with the keys of :data:`KEYS_3D`."""
    ModalData3D._save(path, data)


def load_modal_data_3d(path: str | os.PathLike) -> ModalData3D:
    """Read and validate a spatial modal data file.

    Raises
    ------
    ModelError
        Unreadable file, missing key, wrong version, shape, symmetry or definiteness; the
        message names the file and the key.
    """
    return ModalData3D._load(path)


@dataclass(frozen=True)
class FlexibleBody3DConfig:
    """Options of a spatial floating-frame body.

    Parameters
    ----------
    gravity : tuple of float
        Gravity acceleration (3,) in the inertial frame [m/s^2]. Default (0, 0, -9.81).
    geometric_stiffening : bool
        Add the centrifugal geometric stiffness (``Komega``). Default False.
    second_order_inertia : bool
        Keep the exact quadratic Taylor terms of the inertia (``J2``, ``Oe1``). Default True.
    velocity_frame : {"body", "inertial"}
        Axes of the reference-frame velocity ``v_O`` in ``v`` (``omega`` is always in body
        axes). Default "body" (pinocchio's free-flyer convention).
    """

    gravity: tuple[float, float, float] = (0.0, 0.0, -9.81)
    geometric_stiffening: bool = False
    second_order_inertia: bool = True
    velocity_frame: Literal["body", "inertial"] = "body"

    def __post_init__(self):
        object.__setattr__(self, "gravity", _gravity(self.gravity, 3))
        if self.velocity_frame not in ("body", "inertial"):
            raise InputError(
                f"velocity_frame must be 'body' or 'inertial', got {self.velocity_frame!r}"
            )


class FlexibleBody3D(_FloatingFrame):
    """Spatial floating-frame flexible body built from :class:`ModalData3D`.

    Parameters
    ----------
    data : ModalData3D
        Mass integrals, stiffness and damping of the body.
    config : FlexibleBody3DConfig, optional

    Notes
    -----
    ``q = [r, quat (x, y, z, w), q_e]`` (nq = 7 + ne), ``v = [v_O, omega, q_e']`` (nv = 6 + ne);
    see the module docstring for the equations and their sources.
    """

    _NR, _QE, _VE = 3, 7, 6

    def __init__(self, data: ModalData3D, config: FlexibleBody3DConfig | None = None):
        self._keep(data, ModalData3D, config, FlexibleBody3DConfig)
        self.ne = data.nq
        self.nq = 7 + data.nq
        self.nv = 6 + data.nq
        self._inertial = self.config.velocity_frame == "inertial"
        # the Taylor coefficients flattened to matrices: the same sums as the ModalData3D
        # methods, as a few BLAS products (integrators call _body_terms thousands of times)
        n = data.nq
        self._J1 = data.J1.reshape(n, 9)
        self._J2 = data.J2.reshape(n * n, 9)
        self._Gr0 = data.Gr0.reshape(n, 9)
        self._Gr1 = data.Gr1.reshape(n * n, 9)
        self._Cr1 = data.Cr1.transpose(0, 2, 1).reshape(3 * n, n)
        self._Oe0 = data.Oe0.reshape(n, 9)
        self._Oe1 = data.Oe1.transpose(0, 2, 3, 1).reshape(9 * n, n)

    # -- helpers -------------------------------------------------------------------------
    def neutral(self) -> np.ndarray:
        """The reference configuration: origin, identity orientation, no deformation."""
        q = np.zeros(self.nq)
        q[6] = 1.0
        return q

    def _split(self, q, v=None):
        q = np.asarray(q, float)
        if q.shape != (self.nq,):
            raise DimensionError(
                f"q must have shape ({self.nq},) = 3 position + 4 quaternion + {self.ne} "
                f"elastic, got {q.shape}"
            )
        norm = np.linalg.norm(q[3:7])
        if not np.isfinite(norm) or norm < 1e-12:
            raise InputError(f"q[3:7] must be a non-zero quaternion [x, y, z, w], got {q[3:7]}")
        if v is None:
            return q, None
        v = np.asarray(v, float)
        if v.shape != (self.nv,):
            raise DimensionError(
                f"v must have shape ({self.nv},) = 3 linear + 3 angular + {self.ne} elastic, "
                f"got {v.shape}"
            )
        return q, v

    def _orientation(self, q) -> np.ndarray:
        return quaternion_to_matrix(q[3:7])

    def rotation(self, q) -> np.ndarray:
        """``S`` (3, 3): rotation from the body frame K_R to the inertial frame."""
        q, _ = self._split(q)
        return quaternion_to_matrix(q[3:7])

    def _inertia(self, qe, dqe, w, cr):
        """``I^(q_e)`` and ``G_r omega`` with the configured options (``cr = C_r(q_e)``)."""
        d, cfg = self.data, self.config
        inertia = d.J0 + (qe @ self._J1).reshape(3, 3)
        if cfg.second_order_inertia:
            qq = np.outer(qe, qe).ravel()
            inertia += (qq @ self._J2).reshape(3, 3)
            gr = (dqe @ self._Gr0 + np.outer(dqe, qe).ravel() @ self._Gr1).reshape(3, 3)
            gw = gr @ w
        else:
            gw = (dqe @ self._J1).reshape(3, 3) @ w + _cross(w, cr.T @ dqe)
        if cfg.geometric_stiffening:
            kq = d.Komega @ qe
            inertia = inertia - (qe @ kq) * _D_STIFF
            gw = gw - 2.0 * (kq @ dqe) * (_D_STIFF @ w)
        return inertia, gw

    def _body_terms(self, q, v):
        """``S``, ``Mbar``, ``h_omega`` (with the ``omega x v_O`` term for body velocities),
        ``h_v`` and ``f_e`` in body coordinates ``z``."""
        d, cfg = self.data, self.config
        qe, dqe, w = q[7:], v[6:], v[3:6]
        S = quaternion_to_matrix(q[3:7])
        mc = d.mc0 + d.Ct.T @ qe
        cr = d.Cr0 + (self._Cr1 @ qe).reshape(-1, 3)
        inertia, gw = self._inertia(qe, dqe, w, cr)
        n = self.nv
        Mbar = np.zeros((n, n))
        Mbar[:3, :3] = d.mass * _EYE3
        Mbar[3:6, :3] = skew(mc)
        Mbar[:3, 3:6] = -skew(mc)
        Mbar[:3, 6:] = d.Ct.T
        Mbar[6:, :3] = d.Ct
        Mbar[3:6, 3:6] = inertia
        Mbar[3:6, 6:] = cr.T
        Mbar[6:, 3:6] = cr
        Mbar[6:, 6:] = d.Me
        h = np.empty(n)
        h[:3] = _cross(w, _cross(w, mc)) + 2.0 * _cross(w, d.Ct.T @ dqe)
        h[3:6] = _cross(w, inertia @ w) + gw
        ww = np.outer(w, w).ravel()
        h[6:] = self._Oe0 @ ww + 2.0 * (self._Cr1 @ dqe).reshape(-1, 3) @ w
        if cfg.second_order_inertia:
            h[6:] += (self._Oe1 @ qe).reshape(-1, 9) @ ww
        if cfg.geometric_stiffening:
            h[6:] += (w @ _D_STIFF @ w) * (d.Komega @ qe)
        if not self._inertial:
            h += Mbar[:, :3] @ _cross(w, v[:3])
        b0 = S.T @ self._g0
        hv = np.concatenate([d.mass * b0, _cross(mc, b0), d.Ct @ b0])
        fe = np.zeros(n)
        fe[6:] = d.Ke @ qe + d.De @ dqe
        return S, Mbar, h, hv, fe

    def _to_v(self, S, x):
        """``T^T x`` (generalised forces on ``v``) for inertial velocities, else ``x``."""
        if self._inertial:
            x = x.copy()
            x[:3] = S @ x[:3]
        return x

    def _z(self, S, v):
        """``z_II = T v`` (body-frame velocities)."""
        if self._inertial:
            v = v.copy()
            v[:3] = S.T @ v[:3]
        return v

    # -- dynamics ------------------------------------------------------------------------
    def mass_matrix(self, q) -> np.ndarray:
        """Generalized mass matrix M(q) (nv, nv) [kg, kg m, kg m^2] (eq. 2.110; ``T^T Mbar T``
        for inertial velocities)."""
        q, _ = self._split(q)
        S, Mbar, _, _, _ = self._body_terms(q, np.zeros(self.nv))
        if self._inertial:
            Mbar[:3, :] = S @ Mbar[:3, :]
            Mbar[:, :3] = Mbar[:, :3] @ S.T
        return Mbar

    def nonlinear_effects(self, q, v) -> np.ndarray:
        """Centrifugal, Coriolis and gyroscopic forces ``k(q, v)`` (nv,) (eqs. 2.117-2.122,
        with the errata), incl. ``Mbar[:, :3] (omega x v_O)`` for body velocities."""
        q, v = self._split(q, v)
        S, _, h, _, _ = self._body_terms(q, v)
        return self._to_v(S, h)

    def gravity_forces(self, q) -> np.ndarray:
        """Generalized gravity forces (nv,) [N, N m] (eq. 2.126), applied-force sign."""
        q, _ = self._split(q)
        S, _, _, hv, _ = self._body_terms(q, np.zeros(self.nv))
        return self._to_v(S, hv)

    def forward_dynamics(self, q, v, tau=None) -> np.ndarray:
        """Accelerations ``v'`` (nv,) from ``M v' = g + tau - k - f_e``.

        Parameters
        ----------
        q : array_like, shape (nq,)
        v : array_like, shape (nv,)
        tau : array_like, shape (nv,), optional
            Generalized applied forces [N, N m, N per unit q_e] on ``v``; zero by default.
        """
        q, v = self._split(q, v)
        S, Mbar, h, hv, fe = self._body_terms(q, v)
        rhs = hv - h - fe
        if self._inertial:
            Mbar[:3, :] = S @ Mbar[:3, :]
            Mbar[:, :3] = Mbar[:, :3] @ S.T
            rhs[:3] = S @ rhs[:3]
        if tau is not None:
            rhs = rhs + self._applied(tau)
        return np.linalg.solve(Mbar, rhs)

    # -- kinematics ----------------------------------------------------------------------
    def configuration_derivative(self, q, v) -> np.ndarray:
        """``q'`` (nq,): ``r' = S v_O`` (or ``v_O``), ``quat' = 1/2 quat (x) [omega, 0]``
        (body angular velocity), ``q_e' = v[6:]``; the quaternion is used as given, so the
        caller re-normalises (:meth:`normalize`) between steps."""
        q, v = self._split(q, v)
        S = quaternion_to_matrix(q[3:7])
        xyz, qw = q[3:6], q[6]
        w = v[3:6]
        out = np.empty(self.nq)
        out[:3] = v[:3] if self._inertial else S @ v[:3]
        out[3:6] = 0.5 * (qw * w + _cross(xyz, w))
        out[6] = -0.5 * xyz @ w
        out[7:] = v[6:]
        return out

    def normalize(self, q) -> np.ndarray:
        """``q`` with a unit quaternion."""
        q, _ = self._split(q)
        q = q.copy()
        q[3:7] /= np.linalg.norm(q[3:7])
        return q

    # -- energy and momentum -------------------------------------------------------------
    def momentum(self, q, v) -> tuple[np.ndarray, np.ndarray]:
        """Linear momentum [kg m/s] and angular momentum about the inertial origin
        [kg m^2/s], both (3,) in inertial axes: ``p = Mbar z_II``, ``L = S p_t``,
        ``H = r x L + S p_r``."""
        q, v = self._split(q, v)
        S, Mbar, _, _, _ = self._body_terms(q, np.zeros(self.nv))
        p = Mbar @ self._z(S, v)
        lin = S @ p[:3]
        return lin, _cross(q[:3], lin) + S @ p[3:6]
