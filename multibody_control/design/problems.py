"""The structural design problems of Seifried (2014) Sect. 7.4.3 (cases 1-4), by name.

Each problem maps a design vector to the criterion of Sect. 7.4.2.1: step 1, the linearized
zero dynamics of ``y = q_a + Gamma q_u`` must be asymptotically stable (eq. 7.25), also for
perturbed designs when ``robustness`` > 0 (eq. 7.27); step 2, ``f = max_i int q_u,i^2 dt`` of
the nonlinear zero dynamics after an initial disturbance (eq. 7.26).  Designs failing a step
get the penalty (the book's "large default value") with ``ok=False``.

=====================  ===================================================================
``passive_arm2_case1``  balancing masses on links 3 and 4, mass added (Table 7.3, eq. 7.28)
``passive_arm2_case2``  the same variables, total mass constant by the sections of links
                        3 and 4 (Table 7.4, eq. 7.21)
``passive_arm2_case3``  lengths l3, l4 and centre-of-mass ratio n3 of link 3 (extended
                        backwards), l2 = 1 m - l3 - l4, links 2-4 one section, their mass
                        constant; Gamma follows the lengths (Table 7.5)
``passive_arm4_case4``  balancing masses on links 2, 3, 5, 6 of the four-passive-joint arm,
                        total mass constant, all six links one section (Table 7.6)
=====================  ===================================================================

The book does not print the disturbance or the simulation time of (7.26); the defaults
chosen here are ``q_u(0) = 0.02 rad`` on every passive joint, ``q_u'(0) = 0``, ``t1 = 3 s``
(the slowest printed optimum, case 1, decays with Re(lambda) = -0.59 1/s: e^(-2 * 0.59 * 3) =
3 % of its energy is left at t1).  The nonlinear zero dynamics of the printed optima of cases
1 and 4 do not stay bounded for equal disturbances of 0.1 rad and 0.05 rad respectively
(``M_uu - M_ua Gamma`` becomes singular on the way), so a larger default would reject them.
"""

from __future__ import annotations

import numpy as np

from multibody_dynamics.errors import InputError, MultibodyError

from .criteria import (
    PENALTY,
    attenuation,
    linear_zero_dynamics,
    output_zeros,
    servo_attenuation,
)
from .models import ArmDesign, Balancing, gamma_arm2, gamma_arm4, parametric_arm
from .problem import Evaluation, check_design_vector, register_problem

__all__ = ["PRINTED_OPTIMA", "ArmDesignProblem", "Case1", "Case2", "Case3", "Case4",
           "evaluate_printed"]

#: The printed optimization results, Seifried (2014) Tables 7.3-7.6 (order of ``names``).
PRINTED_OPTIMA = {
    "passive_arm2_case1": (0.999, -0.293, 0.062, 1.997, -0.333, 0.166),      # Table 7.3
    "passive_arm2_case2": (1.000, -0.194, 0.003, 1.065, -0.333, 0.166),      # Table 7.4
    "passive_arm2_case3": (0.334, 0.1, 0.1),                                 # Table 7.5
    "passive_arm4_case4": (1.6127, -0.2067, 0.3019, 2.4230, -0.6349, 0.2778,  # Table 7.6
                           0.8381, -0.1824, 0.0865, 1.5187, -0.3011, 0.0096),
}


#: Step-1/2 routes of Sect. 7.4.2: coordinate transformation (combined output) or
#: servo-constraints (exact end-effector output).
ROUTES = ("coordinates", "servo")
#: Integrators of step 2 on the coordinates route (:func:`~.criteria.attenuation`).
INTEGRATORS = ("rk4", "dop853")
#: The exact output of the servo route: cart position and end-effector position.
EXACT_OUTPUT = ("x", "tip.x", "tip.y")


class ArmDesignProblem:
    """Common part of the four cases (a :class:`~.problem.DesignProblem`).

    Parameters
    ----------
    disturbance : float or sequence of float
        Initial disturbance q_u(0) of the passive joints for (7.26) [rad]; a number applies
        to every passive joint.
    t1 : float
        Final time of the zero-dynamics simulation [s].
    robustness : float
        Relative size of the point-wise robustness test (7.27): each design variable is
        perturbed by +- ``robustness`` times its bound width (clipped to the bounds), one at a
        time; 0 switches the test off.
    penalty : float
        Criterion value of rejected designs.
    rtol : float
        Relative tolerance of the zero-dynamics integration.
    route : {"coordinates", "servo"}
        ``"coordinates"`` (Sect. 7.4.2.1): zero dynamics of the combined output
        y = q_a + Gamma q_u at the stretched arm.  ``"servo"`` (Sect. 7.4.2.2): the exact output
        y = [x, tip.x, tip.y] at the arm bent by 0.5 rad in its actuated joints, transmission
        zeros for step 1 (and for the robustness test) and the servo-constraint simulation
        for step 2 (:func:`~.criteria.servo_attenuation`; about 5x slower).
    integrator : {"rk4", "dop853"}
        Step 2 of the coordinates route: the compiled fixed-step RK4 of :mod:`.fast_zero`
        (default; the criterion within 1e-5 relative of the reference on the printed designs,
        about 20x faster) or scipy's DOP853 at ``rtol`` (the reference).  The servo route
        always uses DOP853.

    Notes
    -----
    Only these plain options are pickled; the parametric model is built in the evaluating
    process (and thread) on first use and reused (:func:`.models.parametric_arm`).
    """

    robot: str = ""
    names: tuple[str, ...] = ()
    lower: np.ndarray
    upper: np.ndarray

    def __init__(self, disturbance=0.02, t1: float = 3.0, robustness: float = 0.0,
                 penalty: float = PENALTY, rtol: float = 1e-6, route: str = "coordinates",
                 integrator: str = "rk4"):
        self.disturbance = (float(disturbance) if np.ndim(disturbance) == 0
                            else tuple(float(v) for v in disturbance))
        self.t1 = float(t1)
        self.robustness = float(robustness)
        self.penalty = float(penalty)
        self.rtol = float(rtol)
        if route not in ROUTES:
            raise InputError(f"route: expected one of {', '.join(ROUTES)}, got {route!r}")
        self.route = route
        if integrator not in INTEGRATORS:
            raise InputError(f"integrator: expected one of {', '.join(INTEGRATORS)}, "
                             f"got {integrator!r}")
        self.integrator = integrator
        if not (np.isfinite(self.t1) and self.t1 > 0):
            raise InputError(f"t1: expected a positive time in s, got {t1!r}")
        if not 0 <= self.robustness < 1:
            raise InputError(f"robustness: expected a fraction in [0, 1), got {robustness!r}")

    def __repr__(self):
        return (f"{type(self).__name__}(disturbance={self.disturbance!r}, t1={self.t1!r}, "
                f"robustness={self.robustness!r}, penalty={self.penalty!r}, rtol={self.rtol!r}, "
                f"route={self.route!r}, integrator={self.integrator!r})")

    # -- per case -------------------------------------------------------------------------
    def design(self, x: np.ndarray) -> tuple[ArmDesign, np.ndarray]:
        """The :class:`~.models.ArmDesign` and the output's Gamma for the vector ``x``."""
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------
    def _disturbance(self, n):
        if isinstance(self.disturbance, float):
            return np.full(n, self.disturbance)
        q0 = np.asarray(self.disturbance)
        if q0.shape != (n,):
            raise InputError(f"disturbance: expected one number or {n} values, got {q0.shape}")
        return q0

    def build(self, x):
        """Apply ``x`` to this thread's model; returns (arm, link parameters, Gamma)."""
        x = check_design_vector(self, x)
        arm = parametric_arm(self.robot)
        design, gamma = self.design(x)
        links = arm.apply(design)
        return arm, links, gamma

    def zero_dynamics(self, x):
        """Linearized zero dynamics (:class:`~.criteria.ZeroDynamics`) of the design ``x``."""
        arm, _, gamma = self.build(x)
        return linear_zero_dynamics(arm.model, gamma, linearizer=arm.linearizer)

    def step1(self, x) -> np.ndarray:
        """Eigenvalues of step 1 for the design ``x``: the linearized zero dynamics of the
        combined output, or the transmission zeros of the exact output (``route="servo"``)."""
        arm, _, gamma = self.build(x)
        return self._step1(arm, gamma)

    def _step1(self, arm, gamma) -> np.ndarray:
        """:meth:`step1` of the design just built into ``arm``."""
        if self.route == "coordinates":
            return linear_zero_dynamics(arm.model, gamma, linearizer=arm.linearizer).eigenvalues
        return output_zeros(arm.model, EXACT_OUTPUT)

    def _perturbed(self, x):
        width = self.upper - self.lower
        for i in range(len(self.names)):
            for sign in (1.0, -1.0):
                xp = x.copy()
                xp[i] = np.clip(x[i] + sign * self.robustness * width[i], self.lower[i],
                                self.upper[i])
                if xp[i] != x[i]:
                    yield xp

    def evaluate(self, x) -> Evaluation:
        """The criterion of ``x`` (Sect. 7.4.2.1); never raises for a vector within bounds."""
        x = check_design_vector(self, x)
        try:
            arm, links, gamma = self.build(x)
        except MultibodyError as exc:  # a non-physical design (e.g. no positive section)
            return Evaluation(self.penalty, ok=False, message=str(exc))
        mass = arm.total_mass()
        info = {"mass": mass, "mass_ratio": mass / arm.layout.initial_mass,
                "width_mm": {p.name: 1e3 * p.width for p in links}}
        n = gamma.shape[1]
        try:
            lam = self._step1(arm, gamma)
            stable = lam.size == 2 * n and bool(np.all(lam.real < 0))
            abscissa = float(np.max(lam.real)) if lam.size else float("inf")
            info.update(min_phase=stable,
                        eigenvalues=[[float(z.real), float(z.imag)] for z in lam],
                        spectral_abscissa=abscissa)
            if not stable:
                return Evaluation(self.penalty, ok=False, info=info, message=(
                    f"non-minimum phase: max Re(lambda) = {abscissa:.4g} 1/s" if lam.size == 2 * n
                    else "the output has no relative degree 2 at the equilibrium"))
            if self.robustness > 0:
                for xp in self._perturbed(x):
                    lp = self.step1(xp)
                    if lp.size != 2 * n or not np.all(lp.real < 0):
                        return Evaluation(self.penalty, ok=False, info=info, message=(
                            "not robust (eq. 7.27): the perturbed design "
                            f"{np.round(xp, 6).tolist()} is non-minimum phase"))
                arm, links, gamma = self.build(x)  # back to the nominal design
            if self.route == "coordinates":
                att = attenuation(arm.model, gamma, self._disturbance(n), t1=self.t1,
                                  penalty=self.penalty, rtol=self.rtol, check_linear=False,
                                  method=self.integrator, eigenvalues=lam)
            else:
                att = servo_attenuation(arm.model, EXACT_OUTPUT, self._disturbance(n),
                                        t1=self.t1, penalty=self.penalty, rtol=self.rtol,
                                        check_linear=False)
        except (MultibodyError, np.linalg.LinAlgError, ArithmeticError) as exc:
            return Evaluation(self.penalty, ok=False, info=info,
                              message=f"evaluation failed: {exc}")
        info["integrals"] = [float(v) for v in att.integrals]
        return Evaluation(att.value, ok=att.ok, message=att.message, info=info)

    # -- plots (called by the study engine when present) ----------------------------------
    def plot_design(self, ax, x):
        """Draw the design ``x`` to scale (Seifried (2014) Figs. 7.7, 7.9, 7.10).

        The arm is drawn stretched along +x from the cart (the model's -y axis turned to +x):
        bars with their true width, balancing masses as discs at (s_a, +-d_a) with an area
        proportional to their mass, the load as a square at the tip.
        """
        from .plots import draw_arm

        arm, links, _ = self.build(x)
        passive = [p.name for p in links
                   if arm.model.passive[arm.model.joint_index(arm.joint_of(p.name))]]
        draw_arm(ax, arm.layout, links, passive)
        ax.set_title(f"{type(self).__name__}: total mass {arm.total_mass():.2f} kg")

    def plot_response(self, ax, x):
        """Attenuation of the zero dynamics after the disturbance (as Figs. 7.7, 7.9-7.11)."""
        arm, _, gamma = self.build(x)
        n = gamma.shape[1]
        if self.route == "coordinates":
            att = attenuation(arm.model, gamma, self._disturbance(n), t1=self.t1,
                              penalty=self.penalty, rtol=self.rtol, keep_response=True,
                              method=self.integrator)
        else:
            att = servo_attenuation(arm.model, EXACT_OUTPUT, self._disturbance(n), t1=self.t1,
                                    penalty=self.penalty, rtol=self.rtol, keep_response=True)
        names = arm.model.passive_joint_names
        if att.ok:
            for i in range(n):
                ax.plot(att.t, np.degrees(att.q_u[:, i]), label=names[i])
            ax.legend(loc="upper right")
        else:
            ax.text(0.5, 0.5, att.message, ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("t [s]")
        ax.set_ylabel("passive joint [deg]")
        ax.set_title(f"zero dynamics, f = {att.value:.4g} rad^2 s (eq. 7.26)")


def _freeze_bounds(cls):
    """Bounds shared by every instance: read-only, so no caller can change them in place."""
    for name in ("lower", "upper"):
        getattr(cls, name).setflags(write=False)
    return cls


def _balancing(x, links):
    return {name: Balancing(*x[3 * k:3 * k + 3]) for k, name in enumerate(links)}


_ARM2_GAMMA = gamma_arm2(1 / 3, 1 / 3, 1 / 3)  # eq. 5.23


@register_problem("passive_arm2_case1")
@_freeze_bounds
class Case1(ArmDesignProblem):
    """Case 1 (Seifried (2014) Table 7.3): balancing masses p = [m_a3, s_a3, d_a3, m_a4, s_a4,
    d_a4] (eq. 7.28) on the passive links 3 and 4 of ``passive_arm2``; the mass is added.

    Bounds as printed: m_a3 in [0, 1] kg, m_a4 in [0, 2] kg, s_a in [-0.333, 0.333] m,
    d_a in [0, 0.167] m.  Gamma is eq. 5.23.
    """

    robot = "passive_arm2"
    names = ("m_a3", "s_a3", "d_a3", "m_a4", "s_a4", "d_a4")
    lower = np.array([0.0, -0.333, 0.0, 0.0, -0.333, 0.0])
    upper = np.array([1.0, 0.333, 0.167, 2.0, 0.333, 0.167])

    def design(self, x):
        return ArmDesign(balancing=_balancing(x, ("link3", "link4"))), _ARM2_GAMMA


@register_problem("passive_arm2_case2")
@_freeze_bounds
class Case2(Case1):
    """Case 2 (Seifried (2014) Table 7.4): the variables of case 1 with the total mass kept
    constant by shrinking the square section of links 3 and 4 (eq. 7.21).

    Bounds as printed: m_a3 in [0, 1] kg, m_a4 in [0, 2] kg, s_a in [-0.333, 0] m (only
    counterweights), d_a in [0, 0.167] m.
    """

    lower = np.array([0.0, -0.333, 0.0, 0.0, -0.333, 0.0])
    upper = np.array([1.0, 0.0, 0.167, 2.0, 0.0, 0.167])

    def design(self, x):
        return (ArmDesign(balancing=_balancing(x, ("link3", "link4")),
                          constant_mass=("link3", "link4")), _ARM2_GAMMA)


@register_problem("passive_arm2_case3")
@_freeze_bounds
class Case3(ArmDesignProblem):
    """Case 3 (Seifried (2014) Table 7.5): p = [l3, n3, l4] with l2 = 1 m - l3 - l4.

    Link 3 is extended backwards so that its centre of gravity is n3 l3 from joint beta1
    (total length l3' = 2 l3 (1 - n3)); links 2-4 share one square section whose size keeps
    their combined mass (6.876 kg) constant.  Gamma follows the lengths,
    Gamma = [(l3 + l4), l4] / (l2 + l3 + l4) (NOTES.md: with eq. 5.23 kept the printed optimum
    is not minimum phase).  Bounds as printed: l3 in [0.3, 0.5] m, n3 in [0.1, 0.5],
    l4 in [0.1, 0.5] m; the corner l3 + l4 = 1 m (no link 2) is rejected as non-physical.
    """

    robot = "passive_arm2"
    names = ("l3", "n3", "l4")
    lower = np.array([0.3, 0.1, 0.1])
    upper = np.array([0.5, 0.5, 0.5])

    def design(self, x):
        l3, n3, l4 = (float(v) for v in x)
        l2 = 1.0 - l3 - l4
        return (ArmDesign(lengths={"link2": l2, "link3": l3, "link4": l4},
                          com_ratio={"link3": n3}, constant_mass=("link2", "link3", "link4")),
                gamma_arm2(l2, l3, l4))


@register_problem("passive_arm4_case4")
@_freeze_bounds
class Case4(ArmDesignProblem):
    """Case 4 (Seifried (2014) Table 7.6): balancing masses on links 2, 3, 5, 6 of
    ``passive_arm4`` (12 variables m_a, s_a, d_a per link), total mass constant and all six
    links one square section (eq. 7.21 over the six links).

    Bounds as printed: m_a2, m_a3 in [0, 3] kg, m_a5, m_a6 in [0, 2] kg, s_a in [-0.667, 0] m,
    d_a in [0, 0.333] m except d_a6 in [0, 0.167] m.  Gamma as printed after Table 7.2.
    Springs: c1, d1 on beta1, beta2 and c2, d2 on gamma1, gamma2 (config/robots/passive_arm4).
    """

    robot = "passive_arm4"
    names = tuple(f"{v}{i}" for i in (2, 3, 5, 6) for v in ("m_a", "s_a", "d_a"))
    lower = np.array([0.0, -0.667, 0.0] * 4)
    upper = np.array([3.0, 0.0, 0.333, 3.0, 0.0, 0.333, 2.0, 0.0, 0.333, 2.0, 0.0, 0.167])
    _GAMMA = gamma_arm4([1 / 3] * 6)

    def design(self, x):
        return (ArmDesign(balancing=_balancing(x, ("link2", "link3", "link5", "link6")),
                          constant_mass=tuple(f"link{i}" for i in range(1, 7))), self._GAMMA)


def evaluate_printed(case: str, **options) -> tuple[Evaluation, dict]:
    """Evaluate the printed optimum of ``case`` (a key of :data:`PRINTED_OPTIMA`).

    Returns
    -------
    evaluation : Evaluation
        The problem's criterion with ``options`` (see :class:`ArmDesignProblem`).
    report : dict
        ``x`` and ``names``, ``eigenvalues`` (complex), ``minimum_phase``, ``mass`` [kg],
        ``mass_ratio`` to the initial design, ``width_mm`` per link and ``links`` (the
        :class:`~.models.LinkParameters`).
    """
    from .problem import get_problem

    if case not in PRINTED_OPTIMA:
        raise InputError(f"unknown case {case!r}; expected one of {sorted(PRINTED_OPTIMA)}")
    problem = get_problem(case, **options)
    x = np.array(PRINTED_OPTIMA[case])
    evaluation = problem.evaluate(x)
    arm, links, gamma = problem.build(x)
    zd = linear_zero_dynamics(arm.model, gamma, linearizer=arm.linearizer)
    report = {"case": case, "names": problem.names, "x": x, "eigenvalues": zd.eigenvalues,
              "minimum_phase": zd.minimum_phase, "mass": arm.total_mass(),
              "mass_ratio": arm.total_mass() / arm.layout.initial_mass,
              "width_mm": {p.name: 1e3 * p.width for p in links}, "links": links}
    return evaluation, report
