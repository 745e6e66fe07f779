"""Spatial beam finite elements (Euler-Bernoulli and Timoshenko) for flexible bodies.

A straight beam along the x axis of its reference frame, with the principal axes of its
cross-section along y and z (doubly symmetric section: centroid and shear centre on the x axis,
so axial, torsional and the two bending problems decouple). Each node carries six degrees of
freedom, in this order:

``u, v, w`` [m]
    displacements along x, y, z,
``rx, ry, rz`` [rad]
    small rotations of the cross-section about x (twist), y and z (right-hand rule).

A material point of the cross-section at ``(eta, zeta)`` (along y, z) is displaced by
``rot x (0, eta, zeta)``, i.e. ``(u + zeta ry - eta rz, v - zeta rx, w + eta rx)``: plane
sections, small rotations, no warping (St-Venant torsion).

Element formulation (12 dofs ``[u1, v1, w1, rx1, ry1, rz1, u2, ..., rz2]``)
---------------------------------------------------------------------------
Axial ``u`` and twist ``rx``: linear interpolation, ``EA`` and ``GJ`` (``J`` the torsion
constant), consistent masses ``rho A`` and ``rho Ip`` with the polar moment of area
``Ip = Iy + Iz`` (the polar inertia of the section points above, so that the element mass
matrix equals the mass integral of the continuum; ``J = Ip`` only for circular sections).

Bending in the x-y plane (``v``, ``rz``, stiffness ``E Iz``, shear ``kappa_y G A``) is the
planar element of :mod:`~multibody_dynamics.flexible.beam` (the interdependent interpolation
element, exact for end loads) on the dofs ``(u, v, rz)``: the same matrices.

Bending in the x-z plane (``w``, ``ry``, ``E Iy``, ``kappa_z G A``): a rotation ``ry > 0``
turns z towards x, so the slope is ``w' = -ry`` (Euler-Bernoulli) and the shear strain is
``gamma_xz = w' + ry``. With ``psi = -ry`` the x-z problem is the planar one in ``(w, psi)``;
the element uses the planar shape functions with the sign of the ``ry`` columns flipped (the
familiar sign pattern of the 12x12 frame element, e.g. Przemieniecki 1968, Sect. 5.6).

Stiffness ``int EA u'^2 + GJ rx'^2 + E Iz rz'^2 + E Iy ry'^2 + kappa_y G A gamma_xy^2
+ kappa_z G A gamma_xz^2 dx`` and mass ``int rho A (u^2 + v^2 + w^2) + rho Ip rx^2
+ [rho Iz rz^2 + rho Iy ry^2] dx`` (the bracket: rotary inertia, Timoshenko default) by
5-point Gauss-Legendre quadrature (exact here, as in the planar module). The Timoshenko shear
stiffness ``kappa G A`` with ``G = E / (2 (1 + nu))`` is the beam counterpart of the corrected
shear diagonal ``(1 - 2 nu)/2`` of Seifried (2014) eq. (2.75).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from ..errors import InputError
from .beam import (
    _GAUSS_W,
    _GAUSS_XI,
    BeamModel,
    Support,
    Theory,
    _assemble,
    _Isotropic,
    _Meshed,
    _positive,
    _rectangle_sides,
    _validate_config,
    _validate_section,
    element_shapes,
    static_deflection,
)
from .modal import ModalBasis, clamped_modes

__all__ = [
    "DOFS_PER_NODE_3D",
    "COMPONENTS",
    "BeamSection3D",
    "BeamConfig3D",
    "BeamModel3D",
    "element_matrices_3d",
    "element_shapes_3d",
    "assemble_beam_3d",
    "static_deflection_3d",
    "clamped_modes_3d",
    "mode_components",
]

DOFS_PER_NODE_3D = 6
#: Names of the six nodal dofs, in order.
COMPONENTS = ("u", "v", "w", "rx", "ry", "rz")
# "pinned" is a fork support: translations and twist held, both bending rotations free
_SUPPORT_DOFS = {"free": (), "pinned": (0, 1, 2, 3), "clamped": (0, 1, 2, 3, 4, 5)}
# planar element dofs [u1, w1, t1, u2, w2, t2]: the bending ones
_PLANAR_BEND = [1, 2, 4, 5]


@dataclass(frozen=True)
class BeamSection3D(_Isotropic):
    """Material and doubly symmetric cross-section of a homogeneous spatial beam.

    Parameters
    ----------
    E : float
        Young's modulus [Pa], > 0.
    rho : float
        Density [kg/m^3], > 0.
    A : float
        Cross-section area [m^2], > 0.
    Iy : float
        Second moment of area about y, ``int zeta^2 dA`` [m^4], > 0 (bending in the x-z plane).
    Iz : float
        Second moment of area about z, ``int eta^2 dA`` [m^4], > 0 (bending in the x-y plane;
        the ``I`` of the planar :class:`~multibody_dynamics.flexible.beam.BeamSection`).
    J : float
        St-Venant torsion constant [m^4], > 0 (``GJ`` is the torsional stiffness).
    nu : float, optional
        Poisson's ratio [-], in (-1, 0.5). Default 0.3.
    shear_factor_y, shear_factor_z : float, optional
        Timoshenko shear correction factors [-], in (0, 1], for shear along y (x-y bending)
        and along z (x-z bending). Default 5/6.
    """

    E: float
    rho: float
    A: float
    Iy: float
    Iz: float
    J: float
    nu: float = 0.3
    shear_factor_y: float = 5.0 / 6.0
    shear_factor_z: float = 5.0 / 6.0

    def __post_init__(self):
        _validate_section(self, ("E", "rho", "A", "Iy", "Iz", "J"),
                          ("shear_factor_y", "shear_factor_z"))

    @property
    def Ip(self) -> float:
        """Polar moment of area ``Iy + Iz`` [m^4] (torsional mass ``rho Ip`` per length)."""
        return self.Iy + self.Iz

    @classmethod
    def rectangle(
        cls, width: float, height: float, E: float, rho: float, nu: float = 0.3,
        shear_factor: float | None = None, n_terms: int = 50,
    ) -> BeamSection3D:
        """Solid rectangle ``width`` (along z) x ``height`` (along y) [m].

        ``A = b h``, ``Iz = b h^3/12``, ``Iy = h b^3/12``; torsion constant from the series of
        Timoshenko and Goodier (1951), Sect. 109, ``J = a c^3/3 (1 - 192 c/(pi^5 a)
        sum_{n odd} tanh(n pi a / (2 c)) / n^5)`` with ``a >= c`` the longer and shorter side
        (``n_terms`` odd terms). The shear factor defaults to Cowper's (1966)
        ``10 (1 + nu) / (12 + 11 nu)`` for both axes.
        """
        b, h, shear_factor = _rectangle_sides(width, height, nu, shear_factor)
        a, c = max(b, h), min(b, h)
        n = 2 * np.arange(n_terms) + 1.0
        series = np.sum(np.tanh(n * np.pi * a / (2.0 * c)) / n**5)
        J = a * c**3 / 3.0 * (1.0 - 192.0 * c / (np.pi**5 * a) * series)
        return cls(E=E, rho=rho, A=b * h, Iy=h * b**3 / 12.0, Iz=b * h**3 / 12.0, J=J, nu=nu,
                   shear_factor_y=shear_factor, shear_factor_z=shear_factor)

    @classmethod
    def circle(cls, diameter: float, E: float, rho: float, nu: float = 0.3,
               shear_factor: float | None = None) -> BeamSection3D:
        """Solid circle of ``diameter`` [m]: ``I = pi d^4/64``, ``J = Ip = pi d^4/32``; shear
        factor by default Cowper's (1966) ``6 (1 + nu) / (7 + 6 nu)``."""
        d = _positive("diameter", diameter)
        if shear_factor is None:
            shear_factor = 6.0 * (1.0 + nu) / (7.0 + 6.0 * nu)
        i = np.pi * d**4 / 64.0
        return cls(E=E, rho=rho, A=np.pi * d**2 / 4.0, Iy=i, Iz=i, J=2.0 * i, nu=nu,
                   shear_factor_y=shear_factor, shear_factor_z=shear_factor)


@dataclass(frozen=True)
class BeamConfig3D(_Meshed):
    """A straight uniform spatial beam along x from 0 to ``length``, in equal elements.

    Parameters
    ----------
    length : float
        Beam length l [m], > 0.
    n_elements : int
        Number of elements, >= 1.
    section : BeamSection3D
        Material and cross-section.
    theory : {"euler-bernoulli", "timoshenko"}
        Bending theory (both planes).
    rotary_inertia : bool or None
        Include the bending rotary inertia ``rho Iy``, ``rho Iz``; ``None`` (default) means yes
        for Timoshenko and no for Euler-Bernoulli. The torsional inertia ``rho Ip`` is always
        included (without it the twist would have no mass).
    left, right : {"clamped", "pinned", "free"}
        Support at x = 0 and x = l. "clamped" fixes all six dofs; "pinned" is a fork support
        (``u, v, w, rx`` fixed, bending rotations free).
    rayleigh_alpha : float
        Mass-proportional damping coefficient alpha [1/s], >= 0 (D = alpha M + beta K).
    rayleigh_beta : float
        Stiffness-proportional damping coefficient beta [s], >= 0.
    """

    length: float
    n_elements: int
    section: BeamSection3D
    theory: Theory = "euler-bernoulli"
    rotary_inertia: bool | None = None
    left: Support = "clamped"
    right: Support = "free"
    rayleigh_alpha: float = 0.0
    rayleigh_beta: float = 0.0

    def __post_init__(self):
        _validate_config(self, BeamSection3D, _SUPPORT_DOFS)
        object.__setattr__(self, "rotary_inertia", bool(self.rotary_inertia))

    def shear_parameters(self) -> tuple[float, float]:
        """``(Phi_y, Phi_z)`` [-]: ``12 E Iz / (kappa_y G A h^2)`` for x-y bending and
        ``12 E Iy / (kappa_z G A h^2)`` for x-z bending; zeros for Euler-Bernoulli."""
        if self.theory == "euler-bernoulli":
            return 0.0, 0.0
        s = self.section
        h2 = self.element_length**2
        return (12.0 * s.E * s.Iz / (s.shear_factor_y * s.G * s.A * h2),
                12.0 * s.E * s.Iy / (s.shear_factor_z * s.G * s.A * h2))


def element_shapes_3d(h: float, phi_y: float, phi_z: float, xi) -> dict[str, np.ndarray]:
    """Element shape functions of the 12-dof spatial element at ``xi = x/h`` in [0, 1].

    Parameters
    ----------
    h : float
        Element length [m].
    phi_y, phi_z : float
        Shear parameters [-] of x-y and x-z bending (see :meth:`BeamConfig3D.shear_parameters`).
    xi : array_like, shape (k,)
        Local coordinates.

    Returns
    -------
    dict
        ``"disp"`` (k, 3, 12): centre-line displacement ``(u, v, w)`` [m per unit dof];
        ``"rot"`` (k, 3, 12): section rotation ``(rx, ry, rz)``; ``"ddisp"``, ``"drot"``:
        their x-derivatives [1/m]; ``"gamma"`` (k, 2, 12): shear strains
        ``(v' - rz, w' + ry)``.
    """
    xi = np.atleast_1d(np.asarray(xi, float))
    k = xi.size
    sy = element_shapes(h, phi_y, xi)
    sz = element_shapes(h, phi_z, xi)
    out = {name: np.zeros((k, 3, 12)) for name in ("disp", "rot", "ddisp", "drot")}
    lin, dlin = np.stack([1.0 - xi, xi], axis=1), np.tile([-1.0 / h, 1.0 / h], (k, 1))
    out["disp"][:, 0, [0, 6]], out["ddisp"][:, 0, [0, 6]] = lin, dlin  # axial u
    out["rot"][:, 0, [3, 9]], out["drot"][:, 0, [3, 9]] = lin, dlin  # twist rx
    # x-y bending on (v, rz): the planar element as it is
    cols_y = [1, 5, 7, 11]
    for src, dst, comp in (("w", "disp", 1), ("dw", "ddisp", 1),
                           ("theta", "rot", 2), ("dtheta", "drot", 2)):
        out[dst][:, comp, cols_y] = _bending_columns(sy, src)
    # x-z bending on (w, ry) with psi = -ry: w = N_w [w1, -ry1, w2, -ry2], ry = -N_psi [...]
    cols_z = [2, 4, 8, 10]
    flip = np.array([1.0, -1.0, 1.0, -1.0])
    out["disp"][:, 2, cols_z] = _bending_columns(sz, "w") * flip
    out["ddisp"][:, 2, cols_z] = _bending_columns(sz, "dw") * flip
    out["rot"][:, 1, cols_z] = -_bending_columns(sz, "theta") * flip
    out["drot"][:, 1, cols_z] = -_bending_columns(sz, "dtheta") * flip
    out["gamma"] = np.stack([out["ddisp"][:, 1] - out["rot"][:, 2],
                             out["ddisp"][:, 2] + out["rot"][:, 1]], axis=1)
    return out


def _bending_columns(shapes: dict[str, np.ndarray], key: str) -> np.ndarray:
    """The bending columns ``[w1, t1, w2, t2]`` of a planar shape array ``shapes[key]``."""
    return shapes[key][:, _PLANAR_BEND]


def element_matrices_3d(config: BeamConfig3D) -> tuple[np.ndarray, np.ndarray]:
    """Consistent mass and stiffness matrices (12, 12) of one element of ``config``.

    Dof order ``[u1, v1, w1, rx1, ry1, rz1, u2, v2, w2, rx2, ry2, rz2]``; units kg, kg m,
    kg m^2 (mass) and N/m, N, N m (stiffness) for the translation/rotation blocks.
    """
    if not isinstance(config, BeamConfig3D):
        raise InputError(f"config must be a BeamConfig3D, got {type(config).__name__}")
    s = config.section
    h = config.element_length
    phi_y, phi_z = config.shear_parameters()
    sh = element_shapes_3d(h, phi_y, phi_z, _GAUSS_XI)
    wg = _GAUSS_W * h

    def gram(a, b, weight):
        return np.einsum("g,gi,gj->ij", wg * weight, a, b)

    d, r, dd, dr = sh["disp"], sh["rot"], sh["ddisp"], sh["drot"]
    m = sum(gram(d[:, c], d[:, c], s.rho * s.A) for c in range(3))
    m += gram(r[:, 0], r[:, 0], s.rho * s.Ip)
    if config.rotary_inertia:
        m += gram(r[:, 1], r[:, 1], s.rho * s.Iy) + gram(r[:, 2], r[:, 2], s.rho * s.Iz)
    k = gram(dd[:, 0], dd[:, 0], s.E * s.A) + gram(dr[:, 0], dr[:, 0], s.G * s.J)
    k += gram(dr[:, 2], dr[:, 2], s.E * s.Iz) + gram(dr[:, 1], dr[:, 1], s.E * s.Iy)
    if phi_y > 0.0:
        k += gram(sh["gamma"][:, 0], sh["gamma"][:, 0], s.shear_factor_y * s.G * s.A)
    if phi_z > 0.0:
        k += gram(sh["gamma"][:, 1], sh["gamma"][:, 1], s.shear_factor_z * s.G * s.A)
    return 0.5 * (m + m.T), 0.5 * (k + k.T)


@dataclass(frozen=True)
class BeamModel3D(BeamModel):
    """Assembled finite element model of a spatial beam (supports listed separately).

    The attribute names are those of the planar
    :class:`~multibody_dynamics.flexible.beam.BeamModel`, so
    :func:`~multibody_dynamics.flexible.modal.clamped_modes` accepts either.

    Attributes
    ----------
    config : BeamConfig3D
    nodes : ndarray, shape (n + 1,)
        Node x coordinates [m].
    M, K, D : ndarray, shape (ndof, ndof)
        Mass, stiffness and Rayleigh damping ``alpha M + beta K`` of the unsupported beam,
        ``ndof = 6 (n + 1)``.
    fixed_dofs, free_dofs : ndarray of int
        Dofs removed by the supports (and by :meth:`restricted`) and the remaining ones.
    """

    COMPONENTS: ClassVar[tuple[str, ...]] = COMPONENTS

    def restricted(self, fixed_components: Sequence[str]) -> BeamModel3D:
        """The same beam with ``fixed_components`` held at every node.

        ``restricted(("w", "rx", "ry"))`` leaves the x-y plane problem (the planar beam),
        ``restricted(("u", "v", "w", "ry", "rz"))`` pure torsion, and so on.
        """
        comps = [c for c in fixed_components]
        bad = [c for c in comps if c not in COMPONENTS]
        if bad:
            raise InputError(f"unknown components {bad}; expected some of {list(COMPONENTS)}")
        extra = [DOFS_PER_NODE_3D * i + COMPONENTS.index(c)
                 for i in range(self.nodes.size) for c in comps]
        fixed = np.union1d(self.fixed_dofs, np.array(extra, dtype=int)).astype(int)
        free = np.setdiff1d(np.arange(self.ndof), fixed)
        return replace(self, fixed_dofs=fixed, free_dofs=free)


def assemble_beam_3d(config: BeamConfig3D) -> BeamModel3D:
    """Assemble the consistent mass, stiffness and Rayleigh damping matrices of ``config``.

    Parameters
    ----------
    config : BeamConfig3D

    Returns
    -------
    BeamModel3D
    """
    if not isinstance(config, BeamConfig3D):
        raise InputError(f"config must be a BeamConfig3D, got {type(config).__name__}")
    return _assemble(BeamModel3D, config, *element_matrices_3d(config), _SUPPORT_DOFS)


def static_deflection_3d(model: BeamModel3D, f) -> np.ndarray:
    """Static displacement under nodal loads: solve ``K u = f`` on the free dofs.

    Parameters
    ----------
    model : BeamModel3D
    f : array_like, shape (ndof,)
        Nodal forces [N] and moments [N m] in dof order (entries at held dofs are ignored).

    Returns
    -------
    ndarray, shape (ndof,)
        Displacements [m] and rotations [rad], zero at the held dofs.

    Raises
    ------
    ModelError
        If the supports leave a rigid-body motion (singular stiffness).
    """
    if not isinstance(model, BeamModel3D):
        raise InputError(f"model must be a BeamModel3D, got {type(model).__name__}")
    return static_deflection(model, f)  # the planar solve: same model interface


def clamped_modes_3d(
    beam: BeamModel3D,
    n_modes: int,
    static_dofs: Sequence[int] = (),
    orthonormalize: bool = True,
    fixed_components: Sequence[str] = (),
) -> ModalBasis:
    """Fixed-base modes of a supported spatial beam (mass-normalised), optionally with
    Craig-Bampton static modes; :func:`~multibody_dynamics.flexible.modal.clamped_modes`
    applied to the 3-D model.

    Parameters
    ----------
    beam : BeamModel3D
        Assembled beam, normally ``left="clamped"`` (tangent frame at x = 0).
    n_modes : int
        Number of normal modes kept (lowest frequencies).
    static_dofs : sequence of int, optional
        Craig-Bampton interface dofs (:meth:`BeamModel3D.dof`).
    orthonormalize : bool, optional
        Re-diagonalise the basis with static modes (see ``clamped_modes``). Default True.
    fixed_components : sequence of str, optional
        Components held at every node before the eigenproblem (:meth:`BeamModel3D.restricted`),
        e.g. ``("w", "rx", "ry")`` for x-y plane modes only.

    Returns
    -------
    ModalBasis
        ``Phi`` has ``6 (n + 1)`` rows (all dofs of the unrestricted beam, zeros where held);
        ``basis.beam`` is the (restricted) :class:`BeamModel3D`.
    """
    if not isinstance(beam, BeamModel3D):
        raise InputError(f"beam must be a BeamModel3D, got {type(beam).__name__}")
    if isinstance(fixed_components, str):
        fixed_components = (fixed_components,)
    if fixed_components:
        beam = beam.restricted(fixed_components)
    return clamped_modes(beam, n_modes, static_dofs=static_dofs, orthonormalize=orthonormalize)


def mode_components(basis: ModalBasis) -> np.ndarray:
    """Share of each mode's kinetic energy in the axial, twist, x-y and x-z bending dofs.

    Returns
    -------
    ndarray, shape (nq, 4)
        Rows sum to 1: columns ``(axial u, torsion rx, bending v/rz, bending w/ry)``; used to
        label modes (a pure mode has one entry 1).
    """
    M = basis.beam.M
    groups = [(0,), (3,), (1, 5), (2, 4)]
    out = np.zeros((basis.n_modes, 4))
    for j, comps in enumerate(groups):
        mask = np.zeros(M.shape[0], bool)
        for c in comps:
            mask[c::DOFS_PER_NODE_3D] = True
        P = basis.Phi * mask[:, None]
        out[:, j] = np.einsum("ik,ij,jk->k", P, M, P)
    return out / out.sum(axis=1, keepdims=True)
