"""Shape design of beam-like flexible arms: a cubic Bézier contour (Seifried 2014, Sect. 7.4.1.2).

The height ``y(x)`` of a planar beam (bending in x-y, constant thickness ``z`` = ``width``) is the
cubic Bézier curve of eq. (7.22),

    B(b) = (1 - b)^3 P0 + 3 (1 - b)^2 b P1 + 3 (1 - b) b^2 P2 + b^3 P3,   b = x / l in [0, 1],

whose control points sit at ``x_j = 0, l/3, 2l/3, l`` with the design heights
``p = [y0, y1, y2, y3]`` (7.23). Equally spaced control abscissae make ``x(b) = l b`` exactly, so
``y(x)`` is the Bernstein polynomial ``sum_j B_j(x / l) y_j``; ``y_j = h`` for all j gives the
prismatic beam of height ``h``, and collinear heights give a linear taper (linear precision of
Bézier curves). The curve stays within the control polygon, so ``min p > 0`` keeps every
section positive.

Finite element model of the shaped arm: a stepped beam (:class:`~.beam.BeamConfig` with one
section per element), element ``e`` a rectangle of width ``z`` with the element means of the
exact contour, ``A_e = z mean(y)`` and ``I_e = z mean(y^3) / 12`` (5-point Gauss-Legendre on the
element: exact for ``A``, a cubic, and for ``y^3`` up to the rounding of a degree-9 rule). With
``A_e`` the element mean the FE mass equals the continuous one, ``m = rho z l mean(p)`` (each
Bernstein polynomial integrates to 1/4), so the mass is linear in the heights: that is what
:func:`scale_to_mass` uses to keep the mass of several arms constant by construction.

Each evaluation rebuilds the beam, its clamped modes (:mod:`.modal`), the modal data (:mod:`.sid`,
or :func:`~.output.arm_modal_data` when the arm has rigid end parts) and finally the chain
(:func:`rebuild_chain`). :class:`BezierArmBuilder` keeps what does not change between
evaluations: the mesh, the Bernstein values at the Gauss points of every element, the support
and the template of the beam configuration.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InputError, ModelError, SolverError
from .beam import _GAUSS_W, _GAUSS_XI, BeamConfig, BeamSection, assemble_beam
from .modal import clamped_modes
from .output import RigidPart, arm_modal_data
from .sid import ModalData, modal_data_from_beam
from .system import FlexibleChain, FlexibleChainConfig

__all__ = ["N_CONTROL", "BezierArm", "BezierArmBuilder", "bernstein", "bezier_height",
           "arms_from_model", "rebuild_chain", "scale_to_mass", "shaped_chain", "total_mass"]

#: Control heights per arm (cubic Bézier curve, eq. 7.23).
N_CONTROL = 4
_BINOM = np.array([1.0, 3.0, 3.0, 1.0])


def bernstein(b) -> np.ndarray:
    """Cubic Bernstein polynomials ``B_j(b)`` (k, 4) at ``b`` (k,) in [0, 1] (eq. 7.22)."""
    b = np.atleast_1d(np.asarray(b, float))
    j = np.arange(N_CONTROL)
    return _BINOM * b[:, None] ** j * (1.0 - b[:, None]) ** (N_CONTROL - 1 - j)


def _heights(heights, name: str = "heights") -> np.ndarray:
    """The four control heights as a float array; InputError naming the bad entry."""
    try:
        p = np.asarray(heights, float)
    except (TypeError, ValueError):
        raise InputError(f"{name}: expected {N_CONTROL} heights [m], got {heights!r}") from None
    if p.shape != (N_CONTROL,):
        raise InputError(f"{name}: expected {N_CONTROL} control heights [m] (eq. 7.23), got "
                         f"shape {p.shape}")
    for j, v in enumerate(p):
        if not (np.isfinite(v) and v > 0.0):
            raise InputError(f"{name}[{j}] (y{j}): expected a positive finite height [m], "
                             f"got {v!r}")
    return p


def bezier_height(heights, x, length: float) -> np.ndarray:
    """Contour ``y(x)`` [m] (k,) of the Bézier beam at ``x`` (k,) [m] in [0, length].

    Parameters
    ----------
    heights : array_like, shape (4,)
        Control heights ``[y0, y1, y2, y3]`` [m] at ``x = 0, l/3, 2l/3, l`` (eq. 7.23).
    x : array_like, shape (k,)
        Positions along the beam [m].
    length : float
        Beam length l [m].
    """
    p = _heights(heights)
    length = float(length)
    if not (np.isfinite(length) and length > 0.0):
        raise InputError(f"length: expected a positive length [m], got {length!r}")
    return bernstein(np.asarray(x, float) / length) @ p


@dataclass(frozen=True)
class BezierArm:
    """One flexible arm whose beam height is a cubic Bézier curve (a reusable description).

    Parameters
    ----------
    length : float
        Length l of the elastic beam [m].
    width : float
        Constant thickness z of the section (perpendicular to the plane of bending) [m].
    heights : sequence of 4 float
        Control heights ``[y0, y1, y2, y3]`` [m] (eq. 7.23), > 0.
    E, rho, nu : float
        Young's modulus [Pa], density [kg/m^3], Poisson's ratio [-].
    elements : int
        Number of finite elements (equal length).
    modes : int
        Number of clamped-free eigenmodes kept (tangent frame at the root).
    theory : {"timoshenko", "euler-bernoulli"}
    alpha, beta : float
        Rayleigh damping ``D = alpha M + beta K`` [1/s], [s].
    proximal, distal : RigidPart or None
        Rigid parts before and after the beam (:func:`~.output.arm_modal_data`).
    name : str
        Label used in messages (e.g. the body name).
    """

    length: float
    width: float
    heights: tuple[float, ...]
    E: float
    rho: float
    nu: float = 0.3
    elements: int = 20
    modes: int = 2
    theory: str = "timoshenko"
    alpha: float = 0.0
    beta: float = 0.0
    proximal: RigidPart | None = None
    distal: RigidPart | None = None
    name: str = "arm"

    def __post_init__(self):
        where = f"arm {self.name!r}"
        for key in ("length", "width", "E", "rho"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                    or not np.isfinite(v) or v <= 0:
                raise InputError(f"{where}: {key} must be a positive finite number, got {v!r}")
            object.__setattr__(self, key, float(v))
        object.__setattr__(self, "heights", tuple(_heights(self.heights, f"{where}: heights")
                                                  .tolist()))
        for key, lo in (("elements", 1), ("modes", 1)):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise InputError(f"{where}: {key} must be an integer >= {lo}, got {v!r}")
            object.__setattr__(self, key, int(v))
        if self.modes > 3 * self.elements - 1:
            raise InputError(f"{where}: modes must be <= {3 * self.elements - 1} for "
                             f"{self.elements} elements (free dofs minus one), got {self.modes}")
        if self.theory not in ("timoshenko", "euler-bernoulli"):
            raise InputError(f"{where}: theory must be 'timoshenko' or 'euler-bernoulli', "
                             f"got {self.theory!r}")
        for key in ("alpha", "beta"):
            v = float(getattr(self, key))
            if not (np.isfinite(v) and v >= 0):
                raise InputError(f"{where}: {key} (Rayleigh damping) must be >= 0, got {v!r}")
            object.__setattr__(self, key, v)
        for key in ("proximal", "distal"):
            v = getattr(self, key)
            if v is not None and not isinstance(v, RigidPart):
                raise InputError(f"{where}: {key} must be a RigidPart or None, got "
                                 f"{type(v).__name__}")
        BeamSection.rectangle(self.width, min(self.heights), E=self.E, rho=self.rho, nu=self.nu)

    @property
    def beam_mass(self) -> float:
        """Mass of the elastic beam ``rho z l mean(heights)`` [kg] (rigid parts excluded)."""
        return self.rho * self.width * self.length * float(np.mean(self.heights))

    def with_heights(self, heights) -> BezierArm:
        """A copy with other control heights [m] (checked)."""
        return dataclasses.replace(self, heights=tuple(np.asarray(heights, float).tolist()))


class BezierArmBuilder:
    """Rebuilds the modal data of a :class:`BezierArm` for new heights, reusing the mesh.

    Built once per arm (per process); :meth:`modal_data` then does only what depends on the
    heights: the element sections, the FE matrices, the eigenmodes and the mass integrals.

    Parameters
    ----------
    arm : BezierArm
        Everything but ``heights`` is kept; ``heights`` is the default design.
    """

    def __init__(self, arm: BezierArm):
        if not isinstance(arm, BezierArm):
            raise InputError(f"arm must be a BezierArm, got {type(arm).__name__}")
        self.arm = arm
        n = arm.elements
        h = arm.length / n
        # cached: Bernstein values at the 5 Gauss points of every element (n, 5, 4)
        b = (np.arange(n)[:, None] + _GAUSS_XI[None, :]) / n
        self._basis = bernstein(b.ravel()).reshape(n, _GAUSS_XI.size, N_CONTROL)
        self._w = _GAUSS_W  # weights on [0, 1], sum 1: element mean
        self._kappa = 10.0 * (1.0 + arm.nu) / (12.0 + 11.0 * arm.nu)  # Cowper (rectangle)
        self._template = BeamConfig(arm.length, n, BeamSection.rectangle(
            arm.width, arm.heights[0], E=arm.E, rho=arm.rho, nu=arm.nu), theory=arm.theory,
            rayleigh_alpha=arm.alpha, rayleigh_beta=arm.beta)
        self.element_length = h

    def element_sections(self, heights) -> tuple[BeamSection, ...]:
        """Sections of the elements (n,) for control heights ``heights`` (4,) [m].

        ``A_e = z mean_e(y)``, ``I_e = z mean_e(y^3) / 12`` (module docstring).
        """
        a = self.arm
        p = _heights(heights, f"arm {a.name!r}: heights")
        y = self._basis @ p  # (n, 5) heights at the Gauss points
        area = a.width * (y @ self._w)
        inertia = a.width * (y**3 @ self._w) / 12.0
        return tuple(BeamSection(E=a.E, rho=a.rho, A=float(ai), I=float(ii), nu=a.nu,
                                 shear_factor=self._kappa) for ai, ii in zip(area, inertia))

    def beam_config(self, heights) -> BeamConfig:
        """The stepped :class:`~.beam.BeamConfig` of the heights (clamped root, free tip)."""
        secs = self.element_sections(heights)
        return dataclasses.replace(self._template, section=secs[0], sections=secs)

    def modal_data(self, heights) -> tuple[ModalData, np.ndarray]:
        """Modal data of the arm with ``heights`` [m] and its clamped frequencies [rad/s].

        Raises
        ------
        InputError
            A height not positive and finite (named), or a bad mode count.
        ModelError
            The rebuilt arm has a non-finite or non-positive frequency, or not ``modes``
            modes (a degenerate design).
        """
        a = self.arm
        beam = assemble_beam(self.beam_config(heights))
        try:
            basis = clamped_modes(beam, a.modes)
        except SolverError as exc:
            raise ModelError(f"arm {a.name!r}: heights {list(np.round(heights, 9))} m: {exc}") \
                from None
        freq = basis.frequencies
        if freq.shape != (a.modes,) or not np.all(np.isfinite(freq)) or np.any(freq <= 0):
            raise ModelError(f"arm {a.name!r}: heights {list(np.round(heights, 9))} m give "
                             f"frequencies {freq} rad/s; expected {a.modes} finite positive ones")
        if a.proximal is None and a.distal is None:
            data = modal_data_from_beam(basis)
        else:
            data = arm_modal_data(basis, a.proximal, a.distal)
        return data, freq


def total_mass(arms: Sequence[BezierArm], heights: Sequence) -> float:
    """Combined beam mass [kg] of ``arms`` with control heights ``heights`` (one (4,) each)."""
    if len(arms) != len(heights):
        raise InputError(f"heights: expected one set of {N_CONTROL} per arm ({len(arms)}), got "
                         f"{len(heights)}")
    return float(sum(a.rho * a.width * a.length * np.mean(_heights(p, f"arm {a.name!r}: "
                                                                     "heights"))
                     for a, p in zip(arms, heights)))


def scale_to_mass(arms: Sequence[BezierArm], heights: Sequence, mass: float,
                  lower=None, upper=None) -> tuple[list[np.ndarray], float]:
    """Heights scaled by one factor so the arms' combined beam mass is ``mass`` [kg].

    The mass is linear in the heights (module docstring), so ``s = mass / m(p)`` makes the
    constraint hold exactly (the equality constraint of Seifried (2014) Sect. 7.5.1 by
    construction, as the scaling factor (7.21) does for balancing masses). With bounds the
    result is ``clip(s p, lower, upper)`` with the ``s`` that gives ``mass``: the clipped mass
    is piecewise linear and non-decreasing in ``s``, so ``s`` follows exactly from its
    breakpoints ``lower_i / p_i``, ``upper_i / p_i``.

    Parameters
    ----------
    arms : sequence of BezierArm
    heights : sequence of array_like (4,)
        Control heights per arm [m], > 0.
    mass : float
        Target combined beam mass [kg].
    lower, upper : sequence of array_like (4,), optional
        Bounds of the heights per arm [m] (both or neither); ``mass`` must lie between the
        masses of ``lower`` and ``upper``.

    Returns
    -------
    heights : list of ndarray (4,)
        ``s p`` (clipped to the bounds) for every arm [m].
    s : float
        The factor [-].
    """
    mass = float(mass)
    if not (np.isfinite(mass) and mass > 0):
        raise InputError(f"mass: expected a positive mass [kg], got {mass!r}")
    s = mass / total_mass(arms, heights)
    if lower is None and upper is None:
        return [s * np.asarray(p, float) for p in heights], s
    if lower is None or upper is None:
        raise InputError("scale_to_mass: give both lower and upper bounds, or neither")
    p = np.concatenate([np.asarray(h, float) for h in heights])
    lo = np.concatenate([np.asarray(h, float) for h in lower])
    hi = np.concatenate([np.asarray(h, float) for h in upper])
    if lo.shape != p.shape or hi.shape != p.shape or np.any(lo <= 0) or np.any(hi < lo):
        raise InputError(f"scale_to_mass: bounds need {p.size} entries with 0 < lower <= upper")
    c = np.repeat([a.rho * a.width * a.length / N_CONTROL for a in arms], N_CONTROL)

    def m(t):
        return float(c @ np.clip(t * p, lo, hi))

    if not c @ lo <= mass * (1 + 1e-12) or not mass <= c @ hi * (1 + 1e-12):
        raise InputError(f"mass {mass:g} kg is outside [{c @ lo:g}, {c @ hi:g}] kg, the masses "
                         "of the lower and upper bounds")
    knots = np.unique(np.concatenate([[0.0], lo / p, hi / p]))
    values = np.array([m(t) for t in knots])
    k = int(np.clip(np.searchsorted(values, mass), 1, knots.size - 1))
    t0, t1, m0, m1 = knots[k - 1], knots[k], values[k - 1], values[k]
    s = t1 if m1 == m0 else t0 + (mass - m0) * (t1 - t0) / (m1 - m0)  # linear on [t0, t1]
    out = np.clip(s * p, lo, hi)
    return [out[N_CONTROL * i:N_CONTROL * (i + 1)] for i in range(len(arms))], float(s)


def arms_from_model(robot, bodies: Sequence[str] | None = None) -> dict[str, BezierArm]:
    """:class:`BezierArm` descriptions of the uniform beam bodies of a flexible model file.

    Each arm starts as its model's prismatic beam (all four heights = the section height).

    Parameters
    ----------
    robot : str or Path
        A shipped flexible model name or a model YAML path
        (:func:`~.loader.resolve_flexible_path`).
    bodies : sequence of str, optional
        Names of the bodies to shape; default: every body with a uniform ``beam``.

    Raises
    ------
    ModelError
        A named body is missing or is not a uniform rectangular beam (segments, a modal data
        file or a rigid body cannot be reshaped); the message names the file and the body.
    """
    from ..model.config import YamlChecker
    from .loader import _part, resolve_flexible_path

    path = resolve_flexible_path(robot)
    w = YamlChecker(path)
    raw = w.load("flexible model", "a mapping with 'name' and 'bodies'")
    listed = raw.get("bodies") if isinstance(raw, dict) else None
    if not isinstance(listed, list):
        raise w.error("bodies", "expected a non-empty list of bodies")
    found = {}
    for i, rb in enumerate(listed):
        if isinstance(rb, dict) and isinstance(rb.get("beam"), dict) \
                and "segments" not in rb["beam"]:
            found[rb.get("name")] = (i, rb["beam"])
    names = list(found) if bodies is None else list(bodies)
    if not names:
        raise w.error("bodies", "no uniform beam body to shape")
    out = {}
    for name in names:
        if name not in found:
            raise w.error("bodies", f"{name!r} is not a body with a uniform beam; expected one "
                                    f"of {list(found)}")
        i, rb = found[name]
        key = f"bodies[{i}].beam"
        sec, mat = rb.get("section", {}), rb.get("material", {})
        damp = rb.get("damping") or {}
        try:
            out[name] = BezierArm(
                length=rb["length"], width=sec["width"], heights=[sec["height"]] * N_CONTROL,
                E=mat["E"], rho=mat["rho"], nu=mat.get("nu", 0.3), elements=rb["elements"],
                modes=rb["modes"], theory=rb.get("theory", "timoshenko"),
                alpha=damp.get("alpha", 0.0), beta=damp.get("beta", 0.0),
                proximal=_part(w, rb.get("proximal"), f"{key}.proximal"),
                distal=_part(w, rb.get("distal"), f"{key}.distal"), name=name)
        except (KeyError, TypeError) as exc:
            raise w.error(key, f"missing or malformed {exc}") from None
        except InputError as exc:
            raise w.error(key, str(exc)) from None
    return out


def rebuild_chain(config: FlexibleChainConfig, data: Mapping[str, ModalData],
                  backend: str = "auto") -> FlexibleChain:
    """The chain of ``config`` with the modal data of some bodies replaced.

    Parameters
    ----------
    config : FlexibleChainConfig
        The base chain (joints, rigid bodies, the bodies not redesigned).
    data : mapping of str to ModalData
        New modal data per body name (e.g. from :meth:`BezierArmBuilder.modal_data`).
    backend : {"auto", "numba", "numpy"}

    Raises
    ------
    InputError
        A name that is not a flexible body of ``config``, or modal data with another number
        of elastic coordinates than the body had (the mode count must not change: Γ and the
        state layout depend on it).
    """
    bodies = list(config.bodies)
    names = [b.name for b in bodies]
    for name, d in data.items():
        if name not in names or not bodies[names.index(name)].flexible:
            raise InputError(f"rebuild_chain: {name!r} is not a flexible body of "
                             f"{config.name}; flexible bodies: "
                             f"{[b.name for b in bodies if b.flexible]}")
        k = names.index(name)
        if d.nq != bodies[k].nq_e:
            raise InputError(f"rebuild_chain: body {name!r}: {d.nq} modes, expected "
                             f"{bodies[k].nq_e} (the mode count of the base model)")
        bodies[k] = dataclasses.replace(bodies[k], modal_data=d)
    return FlexibleChain(dataclasses.replace(config, bodies=tuple(bodies)), backend=backend)


def shaped_chain(config: FlexibleChainConfig, builders: Mapping[str, BezierArmBuilder],
                 heights: Mapping[str, Sequence[float]], backend: str = "auto"
                 ) -> tuple[FlexibleChain, dict[str, np.ndarray]]:
    """The chain of ``config`` with Bézier arms of the given heights: one call per design.

    Parameters
    ----------
    config : FlexibleChainConfig
        The base chain; the shaped bodies must be flexible bodies of it.
    builders : mapping of str to BezierArmBuilder
        One builder per shaped body (built once, reused for every design).
    heights : mapping of str to sequence of 4 float
        Control heights [m] per shaped body (every key of ``builders``).
    backend : {"auto", "numba", "numpy"}

    Returns
    -------
    chain : FlexibleChain
    frequencies : dict of str to ndarray
        Clamped frequencies [rad/s] of every rebuilt arm.

    Raises
    ------
    InputError
        Heights missing for a builder (or given for an unknown body), a bad height (named).
    ModelError
        A degenerate rebuilt arm (see :meth:`BezierArmBuilder.modal_data`).
    """
    missing = sorted(set(builders) - set(heights))
    extra = sorted(set(heights) - set(builders))
    if missing or extra:
        raise InputError(f"heights: expected one set of {N_CONTROL} per shaped arm "
                         f"{sorted(builders)}; missing {missing}, unknown {extra}")
    data, freq = {}, {}
    for name, builder in builders.items():
        data[name], freq[name] = builder.modal_data(heights[name])
    return rebuild_chain(config, data, backend=backend), freq
