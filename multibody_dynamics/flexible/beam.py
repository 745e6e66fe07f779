"""Planar beam finite elements (Euler-Bernoulli and Timoshenko) for flexible bodies.

A straight beam along the x axis of its reference frame bends in the x-y plane. Each node
carries three degrees of freedom, in this order:

``u`` [m]
    axial displacement (along x),
``w`` [m]
    transverse displacement (along y),
``theta`` [rad]
    rotation of the cross-section about z (counter-clockwise positive).

A material point of the cross-section at height ``eta`` above the neutral axis is displaced by
``(u - eta * theta, w)`` (plane sections, small rotations).

Element formulation
-------------------
Axial: linear interpolation, ``K = EA/h [[1, -1], [-1, 1]]``, consistent mass
``rho A h / 6 [[2, 1], [1, 2]]``.

Bending: the *interdependent interpolation element* (Reddy 1997; Friedman and Kosmatka 1993):
``w`` is cubic and ``theta`` quadratic, chosen to satisfy the homogeneous Timoshenko equations
``EI theta'' + kappa G A (w' - theta) = 0`` and ``(kappa G A (w' - theta))' = 0`` exactly. With
``w = a0 + a1 x + a2 x^2 + a3 x^3`` the second equation fixes a constant shear strain
``gamma = w' - theta = -6 EI a3 / (kappa G A)``, hence
``theta = a1 + 2 a2 x + 3 a3 x^2 + 6 EI a3 / (kappa G A)``. The four coefficients follow from the
nodal values ``(w1, theta1, w2, theta2)``; they are obtained here by solving that 4x4 system
rather than by typing the printed polynomials. The element is exact for end loads: its stiffness
equals the closed form ``EI / ((1 + Phi) h^3) [[12, 6h, -12, 6h], [6h, (4 + Phi) h^2, -6h,
(2 - Phi) h^2], ...]`` with ``Phi = 12 EI / (kappa G A h^2)`` (Przemieniecki 1968). With
``Phi = 0`` it reduces to the Hermite cubic Euler-Bernoulli element (``theta = w'``).

Stiffness ``K = int EI theta'^T theta' + kappa G A (w' - theta)^T (w' - theta) dx`` and consistent
mass ``M = int rho A (N_u^T N_u + N_w^T N_w) + rho I N_theta^T N_theta dx`` are integrated by
5-point Gauss-Legendre quadrature, exact for these polynomial degrees (at most 6). The rotary
inertia term ``rho I`` is included for Timoshenko beams and omitted (line mass) for
Euler-Bernoulli beams unless ``rotary_inertia`` says otherwise.

Shear modulus ``G = E / (2 (1 + nu))``; the shear correction factor ``kappa`` of a rectangle
defaults to Cowper's (1966) ``10 (1 + nu) / (12 + 11 nu)``. This 1-D beam shear stiffness is the
beam counterpart of the shear entries of the elasticity matrix of Seifried (2014) eq. (2.75),
whose printed shear diagonal ``nu/2`` should read ``(1 - 2 nu)/2`` (times the prefactor
``E / ((1 + nu)(1 - 2 nu))`` this gives ``G``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import ClassVar, Literal

import numpy as np

from ..errors import DimensionError, InputError, ModelError

__all__ = [
    "BeamSection",
    "BeamConfig",
    "BeamModel",
    "assemble_beam",
    "element_matrices",
    "element_shapes",
    "gauss_shapes",
    "stepped_element_matrices",
    "static_deflection",
    "DOFS_PER_NODE",
]

DOFS_PER_NODE = 3
_GAUSS_XI, _GAUSS_W = np.polynomial.legendre.leggauss(5)
# map Gauss points from [-1, 1] to [0, 1]
_GAUSS_XI = 0.5 * (_GAUSS_XI + 1.0)
_GAUSS_W = 0.5 * _GAUSS_W

Theory = Literal["euler-bernoulli", "timoshenko"]
Support = Literal["free", "pinned", "clamped"]
_SUPPORT_DOFS = {"free": (), "pinned": (0, 1), "clamped": (0, 1, 2)}


def _positive(name: str, value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a positive finite number, got {value!r}") from None
    if not np.isfinite(value) or value <= 0.0:
        raise InputError(f"{name} must be a positive finite number, got {value!r}")
    return value


def _validate_section(sec, positive: tuple[str, ...], kappas: tuple[str, ...]) -> None:
    """Check and normalise the material fields every beam section has (planar and spatial):
    the ``positive`` ones > 0, ``nu`` in (-1, 0.5), each shear factor of ``kappas`` in (0, 1];
    InputError naming the field otherwise."""
    for name in positive:
        object.__setattr__(sec, name, _positive(name, getattr(sec, name)))
    try:
        nu = float(sec.nu)
    except (TypeError, ValueError):
        raise InputError(f"nu must be a number in (-1, 0.5), got {sec.nu!r}") from None
    if not (-1.0 < nu < 0.5):
        raise InputError(f"nu must lie in (-1, 0.5), got {nu!r}")
    object.__setattr__(sec, "nu", nu)
    for name in kappas:
        kappa = _positive(name, getattr(sec, name))
        if kappa > 1.0:
            raise InputError(f"{name} must lie in (0, 1], got {kappa!r}")
        object.__setattr__(sec, name, kappa)


def _rectangle_sides(width, height, nu, shear_factor) -> tuple[float, float, float]:
    """``(b, h, kappa)`` of a solid rectangle: the validated sides [m] and the shear factor,
    by default Cowper's (1966) ``10 (1 + nu) / (12 + 11 nu)``."""
    b = _positive("width", width)
    h = _positive("height", height)
    if shear_factor is None:
        shear_factor = 10.0 * (1.0 + nu) / (12.0 + 11.0 * nu)
    return b, h, shear_factor


class _Isotropic:
    """The shear modulus of a section with ``E`` and ``nu`` (planar and spatial)."""

    E: float
    nu: float

    @property
    def G(self) -> float:
        """Shear modulus ``E / (2 (1 + nu))`` [Pa]."""
        return self.E / (2.0 * (1.0 + self.nu))


class _Meshed:
    """The element length of a beam of ``length`` in ``n_elements`` equal elements."""

    length: float
    n_elements: int

    @property
    def element_length(self) -> float:
        """Element length h = l / n [m]."""
        return self.length / self.n_elements


@dataclass(frozen=True)
class BeamSection(_Isotropic):
    """Material and cross-section data of a homogeneous beam.

    Parameters
    ----------
    E : float
        Young's modulus [Pa], > 0.
    rho : float
        Density [kg/m^3], > 0.
    A : float
        Cross-section area [m^2], > 0.
    I : float
        Second moment of area about the bending (z) axis [m^4], > 0.
    nu : float, optional
        Poisson's ratio [-], in (-1, 0.5). Default 0.3.
    shear_factor : float, optional
        Timoshenko shear correction factor kappa [-], in (0, 1]. Default 5/6.
    """

    E: float
    rho: float
    A: float
    I: float  # noqa: E741 - the symbol of the theory
    nu: float = 0.3
    shear_factor: float = 5.0 / 6.0

    def __post_init__(self):
        _validate_section(self, ("E", "rho", "A", "I"), ("shear_factor",))

    @classmethod
    def rectangle(
        cls, width: float, height: float, E: float, rho: float, nu: float = 0.3,
        shear_factor: float | None = None,
    ) -> BeamSection:
        """Solid rectangle ``width`` (along z) x ``height`` (along y, the bending direction) [m].

        ``A = b h``, ``I = b h^3 / 12``; the shear factor defaults to Cowper's (1966)
        ``10 (1 + nu) / (12 + 11 nu)``.
        """
        b, h, shear_factor = _rectangle_sides(width, height, nu, shear_factor)
        return cls(E=E, rho=rho, A=b * h, I=b * h**3 / 12.0, nu=nu, shear_factor=shear_factor)


@dataclass(frozen=True)
class BeamConfig(_Meshed):
    """A straight beam along x from 0 to ``length``, split into equal elements.

    The beam is uniform (``section`` everywhere) unless ``sections`` gives one section per
    element: a stepped beam, the usual finite element model of a tapered or shaped one
    (each element keeps the interpolation of a uniform element with its own section).

    Parameters
    ----------
    length : float
        Beam length l [m], > 0.
    n_elements : int
        Number of elements, >= 1.
    section : BeamSection
        Material and cross-section.
    theory : {"euler-bernoulli", "timoshenko"}
        Bending theory.
    rotary_inertia : bool or None
        Include the section's rotary inertia ``rho I``; ``None`` (default) means yes for
        Timoshenko and no for Euler-Bernoulli.
    left, right : {"clamped", "pinned", "free"}
        Support at x = 0 and x = l. "pinned" fixes u and w, "clamped" also theta.
    rayleigh_alpha : float
        Mass-proportional damping coefficient alpha [1/s], >= 0 (D = alpha M + beta K).
    rayleigh_beta : float
        Stiffness-proportional damping coefficient beta [s], >= 0.
    sections : tuple of BeamSection or None
        One section per element, from x = 0 (``n_elements`` of them); ``None`` (default): the
        uniform beam of ``section``. With ``sections``, ``section`` only names a reference
        section (e.g. the root's) and enters no matrix.
    """

    length: float
    n_elements: int
    section: BeamSection
    theory: Theory = "euler-bernoulli"
    rotary_inertia: bool | None = None
    left: Support = "clamped"
    right: Support = "free"
    rayleigh_alpha: float = 0.0
    rayleigh_beta: float = 0.0
    sections: tuple[BeamSection, ...] | None = None

    def __post_init__(self):
        _validate_config(self, BeamSection, _SUPPORT_DOFS)
        if self.sections is not None:
            secs = tuple(self.sections)
            if len(secs) != self.n_elements:
                raise InputError(f"sections: expected one BeamSection per element "
                                 f"({self.n_elements}), got {len(secs)}")
            bad = [i for i, sec in enumerate(secs) if not isinstance(sec, BeamSection)]
            if bad:
                raise InputError(f"sections[{bad[0]}] must be a BeamSection, got "
                                 f"{type(secs[bad[0]]).__name__}")
            object.__setattr__(self, "sections", secs)

    @property
    def uniform(self) -> bool:
        """True when every element has ``section`` (no per-element ``sections``)."""
        return self.sections is None

    def element_section(self, e: int) -> BeamSection:
        """Section of element ``e`` (0 at x = 0)."""
        return self.section if self.sections is None else self.sections[e]

    def shear_parameter(self, e: int | None = None) -> float:
        """Phi = 12 EI / (kappa G A h^2) of element ``e`` (default: of ``section``) [-]; 0 for
        Euler-Bernoulli."""
        if self.theory == "euler-bernoulli":
            return 0.0
        s = self.section if e is None else self.element_section(e)
        return 12.0 * s.E * s.I / (s.shear_factor * s.G * s.A * self.element_length**2)


def _bending_coefficients(h: float, phi: float) -> tuple[np.ndarray, np.ndarray]:
    """Polynomial coefficients of w and theta in xi = x/h, one column per nodal dof.

    Returns ``Cw`` (4, 4) with ``w(xi) = [1, xi, xi^2, xi^3] @ Cw @ [w1, t1, w2, t2]`` and
    ``Ct`` (3, 4) with ``theta(xi) = [1, xi, xi^2] @ Ct @ [...]``.
    """
    # w = a0 + a1 x + a2 x^2 + a3 x^3 (x in metres);
    # theta = a1 + 2 a2 x + 3 a3 x^2 + (6 EI / kGA) a3, and 6 EI / kGA = phi h^2 / 2
    s = 0.5 * phi * h**2
    rows = np.array([
        [1.0, 0.0, 0.0, 0.0],  # w(0)
        [0.0, 1.0, 0.0, s],  # theta(0)
        [1.0, h, h**2, h**3],  # w(h)
        [0.0, 1.0, 2 * h, 3 * h**2 + s],  # theta(h)
    ])
    a = np.linalg.solve(rows, np.eye(4))  # a[:, j]: coefficients for unit dof j
    scale = np.array([1.0, h, h**2, h**3])
    cw = a * scale[:, None]
    ct = np.vstack([a[1] + s * a[3], 2 * h * a[2], 3 * h**2 * a[3]])
    return cw, ct


def element_shapes(h: float, phi: float, xi) -> dict[str, np.ndarray]:
    """Element shape functions and their x-derivatives at ``xi = x/h`` in [0, 1].

    Parameters
    ----------
    h : float
        Element length [m].
    phi : float
        Shear parameter 12 EI / (kappa G A h^2) [-] (0: Euler-Bernoulli).
    xi : array_like, shape (k,)
        Local coordinates.

    Returns
    -------
    dict
        ``"u", "w", "theta", "du", "dw", "dtheta"``, each (k, 6): rows are the fields at
        ``xi`` per unit value of the element dofs ``[u1, w1, t1, u2, w2, t2]``; derivatives are
        with respect to x [1/m].
    """
    xi = np.atleast_1d(np.asarray(xi, float))
    cw, ct = _bending_coefficients(h, phi)
    p3 = np.stack([np.ones_like(xi), xi, xi**2, xi**3], axis=1)
    dp3 = np.stack([np.zeros_like(xi), np.ones_like(xi), 2 * xi, 3 * xi**2], axis=1) / h
    p2, dp2 = p3[:, :3], dp3[:, :3]
    bend = [1, 2, 4, 5]
    out = {k: np.zeros((xi.size, 6)) for k in ("u", "w", "theta", "du", "dw", "dtheta")}
    out["u"][:, 0], out["u"][:, 3] = 1.0 - xi, xi
    out["du"][:, 0], out["du"][:, 3] = -1.0 / h, 1.0 / h
    out["w"][:, bend] = p3 @ cw
    out["dw"][:, bend] = dp3 @ cw
    out["theta"][:, bend] = p2 @ ct
    out["dtheta"][:, bend] = dp2 @ ct
    return out


@lru_cache(maxsize=512)
def gauss_shapes(h: float, phi: float) -> dict[str, np.ndarray]:
    """:func:`element_shapes` at the 5 Gauss points of the element quadrature (read-only).

    Cached: a uniform beam has one ``(h, phi)``, and a stepped beam is integrated three times
    per rebuild (matrices, mass integrals, centrifugal stiffening) with the same shapes.
    """
    out = element_shapes(h, phi, _GAUSS_XI)
    for v in out.values():
        v.setflags(write=False)
    return out


def element_matrices(config: BeamConfig, e: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Consistent mass and stiffness matrices (6, 6) of one element of ``config``.

    Dof order ``[u1, w1, theta1, u2, w2, theta2]``; units kg, kg m, kg m^2 (mass) and N/m,
    N, N m (stiffness) for the translation/rotation blocks. ``e``: the element (its section
    from ``config.sections``); default: an element of ``config.section``.
    """
    s = config.section if e is None else config.element_section(e)
    h = config.element_length
    phi = config.shear_parameter(e)
    sh = gauss_shapes(h, phi)
    w = _GAUSS_W * h
    rho_i = s.rho * s.I if config.rotary_inertia else 0.0
    m = s.rho * s.A * (np.einsum("g,gi,gj->ij", w, sh["u"], sh["u"])
                       + np.einsum("g,gi,gj->ij", w, sh["w"], sh["w"]))
    m += rho_i * np.einsum("g,gi,gj->ij", w, sh["theta"], sh["theta"])
    k = s.E * s.A * np.einsum("g,gi,gj->ij", w, sh["du"], sh["du"])
    k += s.E * s.I * np.einsum("g,gi,gj->ij", w, sh["dtheta"], sh["dtheta"])
    if phi > 0.0:
        gam = sh["dw"] - sh["theta"]
        k += s.shear_factor * s.G * s.A * np.einsum("g,gi,gj->ij", w, gam, gam)
    return 0.5 * (m + m.T), 0.5 * (k + k.T)


def _stepped_gauss_shapes(config: BeamConfig) -> dict[str, np.ndarray]:
    """:func:`element_shapes` at the Gauss points of every element of ``config`` at once.

    Returns a dict of arrays (n, 5, 6), element ``e`` with its own shear parameter: the same
    numbers as ``gauss_shapes(h, config.shear_parameter(e))``, computed in one batch (a stepped
    beam with many elements is rebuilt in every evaluation of a shape design).
    """
    n, h = config.n_elements, config.element_length
    phi = np.array([config.shear_parameter(e) for e in range(n)])
    s = 0.5 * phi * h**2
    rows = np.zeros((n, 4, 4))
    rows[:, 0, 0] = 1.0
    rows[:, 1, 1], rows[:, 1, 3] = 1.0, s
    rows[:, 2] = [1.0, h, h**2, h**3]
    rows[:, 3, 1], rows[:, 3, 2], rows[:, 3, 3] = 1.0, 2 * h, 3 * h**2 + s
    a = np.linalg.solve(rows, np.broadcast_to(np.eye(4), (n, 4, 4)))
    cw = a * np.array([1.0, h, h**2, h**3])[None, :, None]
    ct = np.stack([a[:, 1] + s[:, None] * a[:, 3], 2 * h * a[:, 2], 3 * h**2 * a[:, 3]],
                  axis=1)
    xi = _GAUSS_XI
    one, zero = np.ones_like(xi), np.zeros_like(xi)
    p3 = np.stack([one, xi, xi**2, xi**3], axis=1)
    dp3 = np.stack([zero, one, 2 * xi, 3 * xi**2], axis=1) / h
    out = {k: np.zeros((n, xi.size, 6)) for k in ("u", "w", "theta", "du", "dw", "dtheta")}
    bend = [1, 2, 4, 5]
    out["u"][:, :, 0], out["u"][:, :, 3] = 1.0 - xi, xi
    out["du"][:, :, 0], out["du"][:, :, 3] = -1.0 / h, 1.0 / h
    out["w"][:, :, bend] = np.einsum("gk,nkj->ngj", p3, cw)
    out["dw"][:, :, bend] = np.einsum("gk,nkj->ngj", dp3, cw)
    out["theta"][:, :, bend] = np.einsum("gk,nkj->ngj", p3[:, :3], ct)
    out["dtheta"][:, :, bend] = np.einsum("gk,nkj->ngj", dp3[:, :3], ct)
    return out


def stepped_element_matrices(config: BeamConfig) -> tuple[np.ndarray, np.ndarray]:
    """Mass and stiffness matrices (n, 6, 6) of every element of ``config``, in one batch.

    The same integrals as :func:`element_matrices` element by element (each element its
    section of ``config.sections``, or ``config.section``).
    """
    n, h = config.n_elements, config.element_length
    secs = [config.element_section(e) for e in range(n)]
    rho_a = np.array([s.rho * s.A for s in secs])
    rho_i = np.array([s.rho * s.I for s in secs]) if config.rotary_inertia else np.zeros(n)
    ea = np.array([s.E * s.A for s in secs])
    ei = np.array([s.E * s.I for s in secs])
    kga = np.array([s.shear_factor * s.G * s.A for s in secs])
    sh = _stepped_gauss_shapes(config)
    w = _GAUSS_W * h

    def gram(a, b):
        return np.einsum("g,ngi,ngj->nij", w, a, b)

    m = rho_a[:, None, None] * (gram(sh["u"], sh["u"]) + gram(sh["w"], sh["w"]))
    m += rho_i[:, None, None] * gram(sh["theta"], sh["theta"])
    k = ea[:, None, None] * gram(sh["du"], sh["du"])
    k += ei[:, None, None] * gram(sh["dtheta"], sh["dtheta"])
    if config.theory != "euler-bernoulli":
        gam = sh["dw"] - sh["theta"]
        k += kga[:, None, None] * gram(gam, gam)
    return 0.5 * (m + m.transpose(0, 2, 1)), 0.5 * (k + k.transpose(0, 2, 1))


def _validate_config(cfg, section_type, supports) -> None:
    """Check and normalise the fields every beam configuration has (planar and spatial):
    length, element count, section type, theory, rotary-inertia default, supports (one of
    ``supports``) and Rayleigh coefficients; InputError naming the field otherwise."""
    object.__setattr__(cfg, "length", _positive("length", cfg.length))
    n = cfg.n_elements
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError(f"n_elements must be an integer >= 1, got {n!r}")
    object.__setattr__(cfg, "n_elements", int(n))
    if not isinstance(cfg.section, section_type):
        raise InputError(f"section must be a {section_type.__name__}, got "
                         f"{type(cfg.section).__name__}")
    if cfg.theory not in ("euler-bernoulli", "timoshenko"):
        raise InputError(f"theory must be 'euler-bernoulli' or 'timoshenko', got {cfg.theory!r}")
    if cfg.rotary_inertia is None:
        object.__setattr__(cfg, "rotary_inertia", cfg.theory == "timoshenko")
    for side in ("left", "right"):
        if getattr(cfg, side) not in supports:
            raise InputError(f"{side} must be one of {sorted(supports)}, got "
                             f"{getattr(cfg, side)!r}")
    for name in ("rayleigh_alpha", "rayleigh_beta"):
        value = float(getattr(cfg, name))
        if not np.isfinite(value) or value < 0.0:
            raise InputError(f"{name} must be finite and >= 0, got {value!r}")
        object.__setattr__(cfg, name, value)


@dataclass(frozen=True)
class BeamModel:
    """Assembled finite element model of a beam (all nodes, supports listed separately).

    Attributes
    ----------
    config : BeamConfig
    nodes : ndarray, shape (n + 1,)
        Node x coordinates [m].
    M, K, D : ndarray, shape (ndof, ndof)
        Mass, stiffness and Rayleigh damping ``alpha M + beta K`` matrices of the unsupported
        beam, ``ndof = 3 (n + 1)``.
    fixed_dofs, free_dofs : ndarray of int
        Dofs removed by the supports and the remaining ones.
    """

    config: BeamConfig
    nodes: np.ndarray
    M: np.ndarray
    K: np.ndarray
    D: np.ndarray
    fixed_dofs: np.ndarray
    free_dofs: np.ndarray = field(repr=False)

    #: names of the dofs of a node, in order (the spatial beam model overrides them)
    COMPONENTS: ClassVar[tuple[str, ...]] = ("u", "w", "theta")

    @property
    def ndof(self) -> int:
        """Number of dofs of the unsupported beam, ``len(COMPONENTS) (n + 1)``."""
        return self.M.shape[0]

    def dof(self, node: int, component: str) -> int:
        """Global index of ``component`` (one of ``COMPONENTS``) at ``node`` (negative: from
        end)."""
        n_nodes = self.nodes.size
        if isinstance(node, bool) or not isinstance(node, (int, np.integer)):
            raise InputError(f"node must be an integer, got {node!r}")
        if not -n_nodes <= node < n_nodes:
            raise InputError(f"node must lie in [-{n_nodes}, {n_nodes}), got {node}")
        if component not in self.COMPONENTS:
            raise InputError(f"component must be one of {list(self.COMPONENTS)}, "
                             f"got {component!r}")
        return len(self.COMPONENTS) * (node % n_nodes) + self.COMPONENTS.index(component)

    def reduced(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(M, K, D)`` restricted to the free dofs."""
        ix = np.ix_(self.free_dofs, self.free_dofs)
        return self.M[ix], self.K[ix], self.D[ix]

    def expand(self, x_free) -> np.ndarray:
        """Embed free-dof vectors (nfree,) or (nfree, k) into all dofs (zeros at supports)."""
        x_free = np.asarray(x_free, float)
        if x_free.ndim == 0 or x_free.shape[0] != self.free_dofs.size:
            raise DimensionError(
                f"expected first dimension {self.free_dofs.size} (free dofs), got {x_free.shape}"
            )
        out = np.zeros((self.ndof,) + x_free.shape[1:])
        out[self.free_dofs] = x_free
        return out


def _assemble(model_class, config, me: np.ndarray, ke: np.ndarray, supports: dict):
    """Assemble elements ``me``, ``ke`` along ``config`` into a ``model_class`` instance.

    ``me``, ``ke``: one element's matrices (all equal) or a stack (n, w, w), one per element.
    ``supports`` maps the support names of ``config.left``/``config.right`` to the local dofs
    they hold; Rayleigh damping ``D = alpha M + beta K`` from the config.
    """
    n, dpn = config.n_elements, len(model_class.COMPONENTS)
    ndof, width = dpn * (n + 1), me.shape[-1]
    if me.ndim == 2:
        M = np.zeros((ndof, ndof))
        K = np.zeros((ndof, ndof))
        for e in range(n):
            sl = slice(dpn * e, dpn * e + width)
            M[sl, sl] += me
            K[sl, sl] += ke
    else:  # one matrix per element: scatter all at once (flat index of each entry)
        dofs = dpn * np.arange(n)[:, None] + np.arange(width)[None, :]  # (n, width)
        flat = (dofs[:, :, None] * ndof + dofs[:, None, :]).ravel()
        M = np.bincount(flat, me.ravel(), ndof * ndof).reshape(ndof, ndof)
        K = np.bincount(flat, ke.ravel(), ndof * ndof).reshape(ndof, ndof)
    D = config.rayleigh_alpha * M + config.rayleigh_beta * K
    fixed = list(supports[config.left]) + [dpn * n + d for d in supports[config.right]]
    fixed = np.array(sorted(fixed), dtype=int)
    free = np.setdiff1d(np.arange(ndof), fixed)
    nodes = np.linspace(0.0, config.length, n + 1)
    return model_class(config, nodes, M, K, D, fixed, free)


def assemble_beam(config: BeamConfig) -> BeamModel:
    """Assemble the consistent mass, stiffness and Rayleigh damping matrices of ``config``.

    Parameters
    ----------
    config : BeamConfig

    Returns
    -------
    BeamModel
    """
    if not isinstance(config, BeamConfig):
        raise InputError(f"config must be a BeamConfig, got {type(config).__name__}")
    if config.uniform:
        return _assemble(BeamModel, config, *element_matrices(config), _SUPPORT_DOFS)
    return _assemble(BeamModel, config, *stepped_element_matrices(config), _SUPPORT_DOFS)


def static_deflection(model: BeamModel, f) -> np.ndarray:
    """Static displacement under nodal loads: solve ``K u = f`` on the free dofs.

    Parameters
    ----------
    model : BeamModel
    f : array_like, shape (ndof,)
        Nodal loads [N, N m] in dof order (entries at supported dofs are ignored).

    Returns
    -------
    ndarray, shape (ndof,)
        Displacements [m, rad], zero at the supports.

    Raises
    ------
    ModelError
        If the supports leave a rigid-body motion (singular stiffness).
    """
    f = np.asarray(f, float)
    if f.shape != (model.ndof,):
        raise DimensionError(f"f must have shape ({model.ndof},), got {f.shape}")
    _, K, _ = model.reduced()
    if np.linalg.cond(K) > 1e14:
        raise ModelError(
            f"supports left={model.config.left!r}, right={model.config.right!r} do not "
            "prevent rigid-body motion: the stiffness matrix is singular"
        )
    return model.expand(np.linalg.solve(K, f[model.free_dofs]))
