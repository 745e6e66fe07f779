"""Parametric models of the manipulators with passive joints of Seifried (2014) Sect. 7.4.3.

A design changes the inertial and geometric parameters of a *loaded* pinocchio model in place
(no URDF is parsed per evaluation): the spatial inertia of every link and the placements of
the joints and tip frames that follow it.  The initial designs are Tables 7.1 (``passive_arm2``)
and 7.2 (``passive_arm4``); the robots ship as ``config/robots/passive_arm{2,4}.yaml``.

Every link of an initial design is a homogeneous bar of square section (width 50 mm,
``I = m (l^2 + w^2) / 12``; that reproduces the tabled 0.0217 kg m^2 and 0.5743 kg m^2) with
its centre of gravity at ``l/2`` from its proximal joint, along the link (the link frame's
``-y`` axis).  A design may

* add balancing masses ``p_i = [m_a, s_a, d_a]`` (Seifried (2014) eq. 7.19): ``m_a`` [kg] at
  distance ``s_a`` [m] along the link from its proximal joint (negative: a counterweight behind
  the joint) and with offset ``d_a`` [m] normal to the link.  The offset only adds
  ``m_a d_a^2`` to the inertia and does not move the centre of gravity sideways (read as two
  halves ``m_a/2`` at ``+-d_a``; the book's (7.19) has no lateral term);
* keep the total mass constant by shrinking the square section of a group of links
  (eq. 7.21): the links of ``constant_mass`` share one new section chosen so that their bars
  plus all balancing masses weigh what their initial bars weighed.  With unchanged lengths
  this is the book's factor ``s = (sum m_bar - sum m_a) / sum m_bar`` on each bar's mass and
  ``sqrt(s)`` on the width;
* change link lengths and, for a link of ``com_ratio``, place its centre of gravity at
  ``n l`` (``0 < n <= 1/2``) by extending the bar backwards past its proximal joint: the bar
  is ``l' = 2 l (1 - n)`` long (Seifried (2014) Sect. 7.4.3, case 3, Fig. 7.10).

Changed bars are homogeneous with the initial bar's density; unchanged bars keep the tabled
values.  The tip load (Table 7.1/7.2: 6 kg, 0.0147 kg m^2) stays at the end of the last link.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from multibody_dynamics.errors import FrameNotFound, InputError, ModelError
from multibody_dynamics.linearize import Linearizer
from multibody_dynamics.model import MultibodyModel, load_model

from .problem import per_thread

__all__ = ["ArmDesign", "ArmLayout", "Balancing", "Bar", "LinkParameters", "PASSIVE_ARM2",
           "PASSIVE_ARM4", "ParametricArm", "evaluate_printed", "gamma_arm2",
           "gamma_arm4", "parametric_arm"]


@dataclass(frozen=True)
class Bar:
    """One homogeneous link of an initial design.

    Attributes
    ----------
    name : str
        URDF link name.
    length : float
        Kinematic length l [m]: proximal joint to the next joint (or the tip).
    mass : float
        [kg].
    inertia : float
        About the centre of gravity, normal to the plane of motion [kg m^2].
    width : float
        Edge of the square section [m].
    """

    name: str
    length: float
    mass: float
    inertia: float
    width: float = 0.05

    @property
    def density(self) -> float:
        """Material density [kg/m^3] implied by mass, length and section."""
        return self.mass / (self.width ** 2 * self.length)


@dataclass(frozen=True)
class ArmLayout:
    """An initial design: the shipped robot it loads and its tabled parameters."""

    robot: str
    source: str
    bars: tuple[Bar, ...]
    load_mass: float
    load_inertia: float
    cart_mass: float

    @property
    def link_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.bars)

    def bar(self, name: str) -> Bar:
        for b in self.bars:
            if b.name == name:
                return b
        raise FrameNotFound(f"{self.robot}: no link named {name!r}; valid links: "
                            f"{', '.join(self.link_names)}")

    @property
    def initial_mass(self) -> float:
        """Total moving mass of the initial design, cart and load included [kg]."""
        return self.cart_mass + sum(b.mass for b in self.bars) + self.load_mass


_LINK = (1 / 3, 2.292, 0.0217)  # Tables 7.1/7.2: l [m], m [kg], I [kg m^2] of links 2-4 / 1-6
#: Seifried (2014) Table 7.1: manipulator with two passive joints (beta1, beta2 after link 2).
PASSIVE_ARM2 = ArmLayout(
    "passive_arm2", "Seifried (2014) Table 7.1",
    (Bar("link1", 1.0, 6.875, 0.5743),) + tuple(Bar(f"link{i}", *_LINK) for i in (2, 3, 4)),
    load_mass=6.0, load_inertia=0.0147, cart_mass=3.0)
#: Seifried (2014) Table 7.2: manipulator with four passive joints (beta after link 1, gamma
#: after link 4).
PASSIVE_ARM4 = ArmLayout(
    "passive_arm4", "Seifried (2014) Table 7.2",
    tuple(Bar(f"link{i}", *_LINK) for i in range(1, 7)),
    load_mass=6.0, load_inertia=0.0147, cart_mass=3.0)
LAYOUTS = {layout.robot: layout for layout in (PASSIVE_ARM2, PASSIVE_ARM4)}


def gamma_arm2(l2: float, l3: float, l4: float) -> np.ndarray:
    """Gamma (3, 2) of y = q_a + Gamma q_u for passive_arm2, q_a = [x, alpha1, alpha2].

    Seifried (2014) eq. 5.23 for equal lengths (2/3, 1/3); for case 3 it follows the lengths,
    Gamma_3 = [l3 + l4, l4] / (l2 + l3 + l4): the direction of the chord from joint alpha2 to
    the tip to first order in beta (with Gamma (5.23) kept, case 3's printed optimum is not
    minimum phase; NOTES.md).
    """
    total = l2 + l3 + l4
    gamma = np.zeros((3, 2))
    gamma[2] = [(l3 + l4) / total, l4 / total]
    return gamma


def gamma_arm4(lengths) -> np.ndarray:
    """Gamma (3, 4) of y = q_a + Gamma q_u for passive_arm4 (Seifried (2014) after Table 7.2).

    q_a = [x, alpha1, alpha2], q_u = [beta1, beta2, gamma1, gamma2]; ``lengths`` l1..l6 [m].
    Row alpha1: [(l2 + l3), l3, 0, 0] / (l1 + l2 + l3); row alpha2: [1 - Gamma_1, 1 - Gamma_2,
    (l5 + l6) / (l4 + l5 + l6), l6 / (l4 + l5 + l6)] -- the printed matrix, 1/3 [[0 0 0 0],
    [2 1 0 0], [1 2 2 1]] for equal lengths (its 4x4 left-hand form in the OCR has a spurious
    row; the 3x4 right-hand form is the one consistent with three outputs).
    """
    l1, l2, l3, l4, l5, l6 = (float(v) for v in lengths)
    g1, g2 = (l2 + l3) / (l1 + l2 + l3), l3 / (l1 + l2 + l3)
    return np.array([[0.0, 0.0, 0.0, 0.0],
                     [g1, g2, 0.0, 0.0],
                     [1.0 - g1, 1.0 - g2, (l5 + l6) / (l4 + l5 + l6), l6 / (l4 + l5 + l6)]])


@dataclass(frozen=True)
class Balancing:
    """A balancing mass p_i = [m_a, s_a, d_a] on one link (Seifried (2014) eq. 7.19).

    Attributes
    ----------
    mass : float
        m_a >= 0 [kg].
    position : float
        s_a [m] along the link from its proximal joint; negative = counterweight.
    offset : float
        d_a >= 0 [m] normal to the link; adds m_a d_a^2 to the inertia only.
    """

    mass: float
    position: float
    offset: float = 0.0


@dataclass(frozen=True)
class ArmDesign:
    """A design of an :class:`ArmLayout` (see the module docstring).

    Attributes
    ----------
    balancing : mapping link name -> Balancing
    lengths : mapping link name -> kinematic length l [m]
    com_ratio : mapping link name -> n = s / l in (0, 1/2], the link extended backwards
    constant_mass : tuple of link names sharing one square section, their bars and all
        balancing masses weighing what their initial bars weighed (eq. 7.21)
    """

    balancing: Mapping[str, Balancing] = field(default_factory=dict)
    lengths: Mapping[str, float] = field(default_factory=dict)
    com_ratio: Mapping[str, float] = field(default_factory=dict)
    constant_mass: tuple[str, ...] = ()


@dataclass(frozen=True)
class LinkParameters:
    """The resulting rigid body of one link (bar + balancing mass [+ load]).

    Attributes
    ----------
    name : str
    length : float
        Kinematic length l [m].
    mass : float
        Total mass of the body [kg] (bar, balancing mass and, on the last link, the load).
    com : float
        Centre of gravity along the link from the proximal joint [m].
    inertia : float
        About the centre of gravity, normal to the plane [kg m^2].
    bar_mass, bar_inertia : float
        The bar alone [kg], [kg m^2] (about the bar's own centre).
    bar_start, bar_end : float
        Extent of the bar along the link [m] (bar_start < 0 for a link extended backwards).
    width : float
        Edge of the square section [m].
    balancing : Balancing or None
    """

    name: str
    length: float
    mass: float
    com: float
    inertia: float
    bar_mass: float
    bar_inertia: float
    bar_start: float
    bar_end: float
    width: float
    balancing: Balancing | None


def _finite(value, what: str) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what}: expected a number, got {value!r}") from None
    if not math.isfinite(value):
        raise InputError(f"{what}: expected a finite number, got {value}")
    return value


def _checked_balancing(balancing: Mapping) -> dict[str, Balancing]:
    """Link name -> :class:`Balancing` with finite m_a >= 0, s_a and d_a >= 0 (InputError)."""
    bal = {}
    for name, b in balancing.items():
        if not isinstance(b, Balancing):
            b = Balancing(*b)
        m_a = _finite(b.mass, f"balancing mass m_a of {name}")
        s_a = _finite(b.position, f"balancing position s_a of {name}")
        d_a = _finite(b.offset, f"balancing offset d_a of {name}")
        if m_a < 0:
            raise InputError(f"balancing mass m_a of {name} = {m_a:g} kg: expected >= 0")
        if d_a < 0:
            raise InputError(f"balancing offset d_a of {name} = {d_a:g} m: expected >= 0")
        bal[name] = Balancing(m_a, s_a, d_a)
    return bal

class ParametricArm:
    """A loaded arm whose link parameters a design changes in place.

    Parameters
    ----------
    layout : ArmLayout
        The initial design; its robot is loaded once with
        :func:`multibody_dynamics.model.load_model` and checked against the layout.

    Notes
    -----
    The object owns and mutates ``self.model.pin_model``: use one per thread (see
    :func:`parametric_arm`).  Code holding the same :class:`MultibodyModel` (a
    ``Linearizer``, ``RigidDynamics``) sees every :meth:`apply`.
    """

    def __init__(self, layout: ArmLayout):
        self.layout = layout
        self.model: MultibodyModel = load_model(layout.robot)
        pm = self.model.pin_model
        self._joint = {}  # link name -> joint id moving it
        for b in layout.bars:
            if not pm.existBodyName(b.name):
                raise ModelError(f"{layout.robot}: the model has no link {b.name!r} of "
                                 f"{layout.source}")
            self._joint[b.name] = pm.frames[pm.getBodyId(b.name)].parentJoint
        jids = [self._joint[b.name] for b in layout.bars]
        self._last = jids[-1]
        # frames at the end of the last link (tip, load) follow its length
        l_last = layout.bars[-1].length
        self._tip_frames = [i for i, f in enumerate(pm.frames) if f.parentJoint == self._last
                            and abs(f.placement.translation[1] + l_last) < 1e-9]
        if not self._tip_frames:
            raise ModelError(f"{layout.robot}: no frame at the end of {layout.bars[-1].name}")
        self._child = dict(zip(jids[:-1], jids[1:]))
        self._reference = self.link_parameters(ArmDesign())
        self._check_initial()

    # ------------------------------------------------------------------ parameters
    def link_parameters(self, design: ArmDesign) -> tuple[LinkParameters, ...]:
        """The rigid bodies of ``design`` (validated; the model is not changed).

        Raises
        ------
        FrameNotFound
            A design entry names a link the layout does not have (the message lists them).
        InputError
            A value is not finite or not physical (m_a < 0, d_a < 0, l <= 0, n outside
            (0, 1/2]), or the constant-mass section has no positive area.
        """
        self._check_link_names(design)
        bal = _checked_balancing(design.balancing)
        extent = self._extents(design)
        width = self._widths(design, bal, extent)
        changed = {b.name for b in self.layout.bars if b.name in design.lengths
                   or b.name in design.com_ratio or b.name in design.constant_mass}
        return tuple(self._link_body(b, extent[b.name], width[b.name], b.name in changed,
                                     bal.get(b.name))
                     for b in self.layout.bars)

    def _check_link_names(self, design: ArmDesign):
        """Every link a design entry names is a link of the layout (FrameNotFound otherwise)."""
        for what, mapping in (("balancing", design.balancing), ("lengths", design.lengths),
                              ("com_ratio", design.com_ratio),
                              ("constant_mass", design.constant_mass)):
            for name in mapping:
                try:
                    self.layout.bar(name)
                except FrameNotFound as exc:
                    raise FrameNotFound(f"design {what}: {exc}") from None

    def _extents(self, design: ArmDesign) -> dict[str, tuple[float, float]]:
        """Link name -> (bar_start, l) [m]: the design's lengths and com ratios, validated.

        The bar runs from ``bar_start`` to the kinematic length ``l``; ``bar_start < 0`` for a
        link of ``com_ratio`` (l' = 2 l (1 - n), Seifried (2014) Sect. 7.4.3, case 3).
        """
        extent = {}
        for b in self.layout.bars:
            length = b.length
            if b.name in design.lengths:
                length = _finite(design.lengths[b.name], f"length l of {b.name}")
                if length <= 0:
                    raise InputError(f"length l of {b.name} = {length:g} m: expected > 0")
            start = 0.0
            if b.name in design.com_ratio:
                n = _finite(design.com_ratio[b.name], f"centre-of-mass ratio n of {b.name}")
                if not 0 < n <= 0.5:
                    raise InputError(f"centre-of-mass ratio n = s/l of {b.name} = {n:g}: "
                                     "expected 0 < n <= 0.5 (the link is extended backwards)")
                start = -length * (1 - 2 * n)  # bar from start to l: l' = 2 l (1 - n)
            extent[b.name] = (start, length)
        return extent

    def _widths(self, design: ArmDesign, bal: Mapping[str, Balancing],
                extent: Mapping[str, tuple[float, float]]) -> dict[str, float]:
        """Link name -> section edge [m]; the ``constant_mass`` group shares one (eq. 7.21)."""
        layout = self.layout
        width = {b.name: b.width for b in layout.bars}
        group = tuple(dict.fromkeys(design.constant_mass))
        if group:
            target = sum(layout.bar(n).mass for n in group) - sum(b.mass for b in bal.values())
            per_area = sum(layout.bar(n).density * (extent[n][1] - extent[n][0]) for n in group)
            if target <= 0:
                raise InputError(
                    f"constant mass over {', '.join(group)}: the balancing masses "
                    f"({sum(b.mass for b in bal.values()):g} kg) leave no mass for the bars "
                    f"({sum(layout.bar(n).mass for n in group):g} kg); expected a positive "
                    "cross-section (eq. 7.21)")
            w = math.sqrt(target / per_area)
            for n in group:
                width[n] = w
        return width

    def _link_body(self, b: Bar, extent: tuple[float, float], width: float, changed: bool,
                   ba: Balancing | None) -> LinkParameters:
        """The rigid body of one link: its bar, balancing mass and (last link) the load.

        ``changed`` bars are homogeneous with the initial bar's density over ``extent`` and
        ``width``; the others keep the tabled mass and inertia.  Parts combine by eq. 7.19.
        """
        start, end = extent
        if changed:
            material = end - start
            m_bar = b.density * width ** 2 * material
            i_bar = m_bar * (material ** 2 + width ** 2) / 12
        else:
            m_bar, i_bar = b.mass, b.inertia
        parts = [(m_bar, 0.5 * (start + end), i_bar)]
        if ba is not None:
            parts.append((ba.mass, ba.position, ba.mass * ba.offset ** 2))
        if b.name == self.layout.bars[-1].name:
            parts.append((self.layout.load_mass, end, self.layout.load_inertia))
        mass = sum(p[0] for p in parts)
        com = sum(p[0] * p[1] for p in parts) / mass if mass > 0 else math.nan
        inertia = sum(p[2] + p[0] * (p[1] - com) ** 2 for p in parts)  # eq. 7.19
        if not (mass > 0 and inertia > 0):
            raise InputError(f"link {b.name}: non-physical result m = {mass:g} kg, "
                             f"I = {inertia:g} kg m^2; expected both > 0")
        return LinkParameters(b.name, end, mass, com, inertia, m_bar, i_bar, start, end, width,
                              ba)

    def total_mass(self, design: ArmDesign | None = None) -> float:
        """Moving mass of ``design`` (default: the one applied last), cart included [kg]."""
        links = self.link_parameters(design) if design is not None else self.current
        return self.layout.cart_mass + sum(p.mass for p in links)

    # ------------------------------------------------------------------ the model
    def _spatial(self, p: LinkParameters) -> pin.Inertia:
        """Spatial inertia in the link frame (link along -y, plane x-y)."""
        # in-plane inertia I (about z), the same about x, and a thin bar's m w^2 / 6 about the
        # link axis (only z enters the planar dynamics; the others keep the body physical)
        rot = np.diag([p.inertia, p.mass * p.width ** 2 / 6, p.inertia])
        return pin.Inertia(p.mass, np.array([0.0, -p.com, 0.0]), rot)

    def apply(self, design: ArmDesign) -> tuple[LinkParameters, ...]:
        """Write ``design`` into the loaded model; returns its link parameters.

        Validation happens before anything is written, so a rejected design leaves the model
        as it was.
        """
        links = self.link_parameters(design)
        pm = self.model.pin_model
        for p in links:
            jid = self._joint[p.name]
            pm.inertias[jid] = self._spatial(p)
            offset = np.array([0.0, -p.length, 0.0])
            if jid in self._child:
                pm.jointPlacements[self._child[jid]] = pin.SE3(np.eye(3), offset)
            else:
                for fid in self._tip_frames:
                    pm.frames[fid].placement = pin.SE3(np.eye(3), offset)
        self.current = links
        return links

    def joint_of(self, link: str) -> str:
        """Name of the joint that moves ``link``."""
        self.layout.bar(link)
        return self.model.pin_model.names[self._joint[link]]

    @property
    def linearizer(self) -> Linearizer:
        """A :class:`~multibody_dynamics.linearize.Linearizer` of the (mutable) model."""
        lin = getattr(self, "_linearizer", None)
        if lin is None:
            lin = self._linearizer = Linearizer(self.model)
        return lin

    def reset(self) -> tuple[LinkParameters, ...]:
        """Back to the initial design."""
        return self.apply(ArmDesign())

    def _check_initial(self):
        """The loaded URDF is the layout's table (guards against the two drifting apart)."""
        pm = self.model.pin_model
        for p in self._reference:
            body = pm.inertias[self._joint[p.name]]
            got = (body.mass, -body.lever[1], body.inertia[2, 2])
            want = (p.mass, p.com, p.inertia)
            if not np.allclose(got, want, rtol=1e-9, atol=1e-12):
                raise ModelError(f"{self.layout.robot}: link {p.name} has (m, s, I) = "
                                 f"{np.round(got, 6).tolist()} in the URDF but "
                                 f"{np.round(want, 6).tolist()} in {self.layout.source}")
        self.current = self._reference


def parametric_arm(robot: str) -> ParametricArm:
    """The :class:`ParametricArm` of ``robot`` for this thread (built once, then reused).

    Design problems call this in the process that evaluates, so that a problem object stays
    small to pickle; one instance per thread because :meth:`ParametricArm.apply` mutates it.
    """
    if robot not in LAYOUTS:
        raise InputError(f"unknown parametric robot {robot!r}; expected one of "
                         f"{sorted(LAYOUTS)}")
    return per_thread(_build_arm, robot)


def _build_arm(robot: str) -> ParametricArm:
    return ParametricArm(LAYOUTS[robot])


def evaluate_printed(case: str, **options):
    """Evaluate and report the printed optimum of a book case (Seifried (2014) Tables 7.3-7.6).

    ``case`` is a problem name (``passive_arm2_case1`` ... ``passive_arm4_case4``); see
    :func:`multibody_control.design.problems.evaluate_printed` for the options and the report.
    """
    from .problems import evaluate_printed as evaluate

    return evaluate(case, **options)
