"""Shape and output design of the flexible cart manipulator combined (Seifried (2014)
Sect. 7.5.1, 7.5.2.3, eqs. 7.34-7.37).

The model and task are those of :mod:`.flexible_cart_output` (``flexible_cart_manipulator_design``,
the semicircle); the arms are Bézier-shaped as in :mod:`.flexible_shape` (four control heights
per arm (7.22)-(7.23), thickness constant, both arms' mass kept that of the 10 mm arms by one
scale factor, by construction). The output is ``y = q_r + Γ q_e`` with
``Γ = Γ0 + ΔΓ(p_o)`` (7.31), ΔΓ's six entries as in (7.32). Two routes (Sect. 7.5.1):

* serial (7.5.1.2, option ``heights`` given): the arms fixed to ``heights`` [mm] (the shape
  found with the collocated output, e.g. the book's (7.29)); the design variables are the six
  ΔΓ entries in ``[-3, 3]`` (the book's (7.34): 0.7 mm);
* concurrent (7.5.1.1, ``heights`` omitted): 14 variables ``p_c = [p_s, p_o]``, the eight
  heights [m] and the six ΔΓ entries, bounds (7.35)-(7.36) (the book's (7.37): 1.4 mm).

With option ``dgamma`` instead (ΔΓ fixed, e.g. zeros) the eight heights in [1, 100] mm are the
variables: shape design with the combined output, the book's first attempt of Sect. 7.5.2.3
(160 particles, 60 iterations: no minimum-phase design found).

Criterion: that of :class:`~.flexible_output.FlexibleOutputProblem` (Sect. 7.3.1) on the
rebuilt, damped chain: stable linearized zero dynamics at the task's start, then
``f = max_t |r_d - r(q)|`` [m] of the classical inversion.

Γ0 (option ``gamma0``). The book says Γ = Γ0 + ΔΓ and prints only the Γ0 (7.30) of the initial
arms; it does not say whether Γ0 follows the shaped arms. ``"geometric"`` (default): Γ0 from
the geometry of the shaped arms, rebuilt with them
(:func:`~multibody_dynamics.flexible.output.chain_combined_output`); ``"initial"``: Γ0 of our
initial 10 mm arms, the same for every shape; ``"printed"``: the printed (7.30); ``"zero"``:
no Γ0. Mode signs: as :mod:`.flexible_cart_output`, design vectors are in the book's signs
and the columns of the shaped chain's modes whose own-arm Γ0 entry has the other sign are
flipped (a rebuilt eigenvector's sign is arbitrary).
"""

from __future__ import annotations

import threading

import numpy as np

from multibody_dynamics.errors import InputError, MultibodyError

from .criteria import PENALTY
from .flexible_cart_output import (
    _NAMES,
    BOOK_GAMMA0_730,
    FlexibleCartOutputProblem,
    delta_gamma,
)
from .flexible_shape import FlexibleShapeProblem, plot_arm_contours
from .problem import Evaluation, check_design_vector, register_problem

__all__ = ["BOOK_DGAMMA_734", "BOOK_PC_737", "BOUNDS_735_736", "FlexibleCartShapeOutputProblem"]

#: Seifried (2014) eq. (7.34): ΔΓ_opt,3 of the serial design on the (7.29) arms (0.7 mm).
BOOK_DGAMMA_734 = np.array([-0.149, 1.155, 0.042, 0.221, -0.067, 1.004])
#: Seifried (2014) eq. (7.37): the concurrent design p_c = [p_s [m], p_o] (1.4 mm).
BOOK_PC_737 = np.concatenate([np.array([12.1, 9.4, 10.4, 6.9, 17.4, 12.1, 1.0, 10.7]) * 1e-3,
                              [-0.167, 0.258, 0.038, 0.039, -0.452, 1.651]])
#: Seifried (2014) eqs. (7.35), (7.36): lower and upper bounds of p_c (heights in m).
BOUNDS_735_736 = (
    np.concatenate([np.array([5, 5, 5, 5, 1, 1, 1, 1]) * 1e-3, [-1.3, -3, -0.3, 0, -1.3, -3]]),
    np.concatenate([np.array([25, 25, 25, 25, 20, 20, 20, 20]) * 1e-3, [0, 3, 0.3, 3, 0, 3]]))
_GAMMA0 = ("geometric", "initial", "printed", "zero")
_ROBOT = "flexible_cart_manipulator_design"
_OWN = ((1, 0), (1, 1), (2, 2), (2, 3))  # each mode's own-arm entry of Γ0

_LAST = threading.local()


def _vector(value, n: int, name: str, what: str, positive: bool = False) -> np.ndarray:
    """``value`` as a finite float array (n,), else an InputError naming ``name``."""
    try:
        v = np.asarray(value, float)
    except (TypeError, ValueError):
        v = np.full(1, np.nan)
    if v.shape != (n,) or not np.all(np.isfinite(v)) or (positive and np.any(v <= 0)):
        raise InputError(f"{name}: expected {what}, got {value!r}")
    return v


@register_problem("flexible_cart_manipulator_shape_output")
class FlexibleCartShapeOutputProblem(FlexibleCartOutputProblem):
    """Serial or concurrent shape + output design of Seifried (2014) Sect. 7.5.2.3 (a
    :class:`~.problem.DesignProblem`; module docstring).

    Parameters
    ----------
    heights : sequence of 8 float or None
        The fixed control heights [mm] (arm 1 y0..y3, arm 2 y0..y3): the serial route, six
        variables. ``None``: the concurrent route, 14 variables.
    dgamma : sequence of 6 float or None
        A fixed ΔΓ (``dg21 .. dg34``, e.g. zeros: Γ = Γ0 of each shape): shape design with the
        combined output, the eight heights in [1, 100] mm the variables (the book's first
        attempt of Sect. 7.5.2.3, which finds no minimum-phase design).
    gamma0 : {"geometric", "initial", "printed", "zero"}
        Γ0 of (7.31) (module docstring).
    constant_mass : bool
        Scale the heights so both arms keep the mass of the 10 mm arms (within the bounds).
    robot : str
        ``flexible_cart_manipulator_design`` or a variant of its file (a YAML path), e.g.
        without gravity (docs/design.md, "What the unprinted data change").
    damping, dt, t_after, rtol, limit, penalty
        As :class:`~.flexible_cart_output.FlexibleCartOutputProblem`.
    """

    def __init__(self, heights=None, gamma0: str = "geometric", constant_mass: bool = True,
                 damping: float = 0.02, robot: str = _ROBOT, dgamma=None, dt: float = 5e-3,
                 t_after: float = 0.3, rtol: float = 1e-7, limit: float = 0.1,
                 penalty: float = PENALTY):
        if gamma0 not in _GAMMA0:
            raise InputError(f"gamma0: expected one of {', '.join(_GAMMA0)}, got {gamma0!r}")
        super().__init__(damping=damping, gamma0="geometric", robot=robot, dt=dt,
                         t_after=t_after, rtol=rtol, limit=limit, penalty=penalty)
        self.gamma0 = gamma0
        self.shape = FlexibleShapeProblem(robot=robot, task="cart_semicircle",
                                          constant_mass=constant_mass, damping=damping, dt=dt,
                                          t_after=t_after, rtol=rtol, limit=limit,
                                          penalty=penalty)
        self.constant_mass = constant_mass
        lo, hi = BOUNDS_735_736
        self.fixed, self.dgamma = None, None
        if heights is not None and dgamma is not None:
            raise InputError("heights and dgamma: give at most one of them (both fixed leaves "
                             "nothing to design)")
        if heights is not None:  # serial: ΔΓ on fixed arms
            self.fixed = 1e-3 * _vector(heights, 8, "heights", "8 positive control heights in "
                                        "mm (arm 1 y0..y3, arm 2 y0..y3)", positive=True)
            self.names = _NAMES
            self.lower, self.upper = np.full(6, -3.0), np.full(6, 3.0)  # (7.31)
        elif dgamma is not None:  # shape with a fixed combined output (Sect. 7.5.2.3)
            self.dgamma = _vector(dgamma, 6, "dgamma", "the 6 entries dg21 .. dg34 of ΔΓ")
            self.names = tuple(self.shape.names)
            self.lower, self.upper = self.shape.lower.copy(), self.shape.upper.copy()
        else:  # concurrent
            self.names = tuple(self.shape.names) + _NAMES
            self.lower, self.upper = lo.copy(), hi.copy()
        for arr in (self.lower, self.upper):
            arr.setflags(write=False)

    def __repr__(self):
        fixed = None if self.fixed is None else [round(float(1e3 * v), 6) for v in self.fixed]
        dg = None if self.dgamma is None else [float(v) for v in self.dgamma]
        return (f"FlexibleCartShapeOutputProblem(heights={fixed!r}, dgamma={dg!r}, "
                f"gamma0={self.gamma0!r}, constant_mass={self.constant_mass!r}, "
                f"damping={self.damping!r}, robot={self.robot!r}, dt={self.dt!r}, "
                f"t_after={self.t_after!r}, rtol={self.rtol!r})")

    def split(self, x) -> tuple[np.ndarray, np.ndarray]:
        """``(heights [m] (8,), ΔΓ entries (6,))`` of the design ``x`` (heights as given,
        before the mass scaling)."""
        x = check_design_vector(self, x)
        if self.fixed is not None:
            return self.fixed, x
        return (x, self.dgamma) if self.dgamma is not None else (x[:8], x[8:])

    def heights(self, x) -> tuple[dict[str, np.ndarray], float]:
        """Heights built per arm [m] (mass-scaled within the bounds) and the scale factor."""
        from multibody_dynamics.flexible.shape import scale_to_mass

        h = self.split(x)[0]
        names = self.shape.arm_names
        split = [h[:4], h[4:]]
        if not self.constant_mass:
            return dict(zip(names, split)), 1.0
        m = self.shape.model()
        lo, hi = ((self.shape.lower, self.shape.upper) if self.fixed is not None
                  else (self.lower[:8], self.upper[:8]))
        split, s = scale_to_mass([m.arms[n] for n in names], split, m.mass0,
                                 [lo[:4], lo[4:]], [hi[:4], hi[4:]])
        return dict(zip(names, split)), s

    def build(self, x):
        """``(chain, Γ (3, 4) in the chain's mode signs, info)`` of the design ``x``; the last
        one is cached per thread (the zero dynamics and the inversion share it), and so is the
        last shaped chain with its Γ0 (the serial route's fixed arms are built once)."""
        # the repr names every option the build depends on (heights, Γ0, mass, damping, robot)
        key = (repr(self), np.asarray(x, float).tobytes())
        last = getattr(_LAST, "value", None)
        if last is not None and last[0] == key:
            return last[1]
        _, p = self.split(x)
        chain, info, ours, signs = self.shaped(*self.heights(x))
        g0 = {"geometric": lambda: ours * signs, "initial": lambda: self.model().gamma0,
              "printed": lambda: BOOK_GAMMA0_730, "zero": lambda: np.zeros((3, 4))}
        gamma = (g0[self.gamma0]() + delta_gamma(p)) * signs
        info = {**info, "gamma": (gamma * signs).round(6).tolist()}  # in the book's signs
        _LAST.value = (key, (chain, gamma, info))
        return chain, gamma, info

    def shaped(self, heights: dict, s: float = 1.0):
        """``(chain, info, Γ0 of the chain (3, 4), mode signs (4,))`` of the built heights
        ``heights`` (per arm, (4,) [m]); the last one is cached per thread."""
        from multibody_dynamics.flexible.output import chain_combined_output

        key = (repr(self.shape), float(s),
               tuple(np.asarray(h, float).tobytes() for h in heights.values()))
        last = getattr(_LAST, "shaped", None)
        if last is not None and last[0] == key:
            return last[1]
        chain, info = self.shape.chain_of(heights, s)
        ours = chain_combined_output(chain)
        signs = np.ones(4)
        for j, (r, c) in enumerate(_OWN):
            signs[j] = np.sign(ours[r, c]) * np.sign(BOOK_GAMMA0_730[r, c])
        _LAST.shaped = (key, (chain, info, ours, signs))
        return chain, info, ours, signs

    def gamma(self, x) -> np.ndarray:
        """Γ (3, 4) of the design ``x`` in the shaped chain's mode signs."""
        return self.build(x)[1]

    def servo(self, x):
        """The inverse model (:class:`~..inversion.flexible.FlexibleServo`) of the design ``x``
        on its shaped arms."""
        from ..inversion.flexible import FlexibleServo

        chain, gamma, _ = self.build(x)
        return FlexibleServo(chain, gamma)

    def evaluate(self, x) -> Evaluation:
        """The criterion of ``x`` [m] (module docstring); never raises for a vector within
        bounds. ``info`` adds the heights built, the mass scale, the frequencies and Γ."""
        x = check_design_vector(self, x)
        try:
            _, _, built = self.build(x)
        except MultibodyError as exc:  # a degenerate shape (e.g. a mode lost)
            return Evaluation(self.penalty, ok=False, message=f"rebuild failed: {exc}")
        ev = super().evaluate(x)
        return Evaluation(ev.value, ok=ev.ok, message=ev.message, info={**built, **ev.info})

    # -- plots (called by the study engine) ---------------------------------------------------
    def plot_design(self, ax, x):
        """Arm contours of the design ``x`` beside the initial 10 mm arms (as Fig. 7.14)."""
        m = self.shape.model()
        heights, s = self.heights(x)
        plot_arm_contours(ax, {n: m.arms[n] for n in self.shape.arm_names}, heights)
        ax.set_title(f"Bézier arm contours (dotted: initial; mass scale s = {s:.3f})")
