"""Desired task trajectories: joint coordinates and frame paths with a polynomial time law.

A :class:`Task` names m task coordinates (joint names such as ``"x"`` or frame
coordinates such as ``"tip.x"``) and gives their desired values and first two
time derivatives, analytically.  Seifried (2014) Sect. 4.2.7 (Fig. 4.13): the
cart moves from -1 m to 1 m while the end effector follows a half circle (centre
(0, -1.5) m, radius 1 m, open downward), both with the same 5th-order
rest-to-rest polynomial between t0 = 0.2 s and tf = 1.7 s.  The figure shows
only plots: we take the arc angle from 180 deg to 0 deg (left to right, over the
top) and the same normalized polynomial for arc and cart — the reading that puts
cart and end effector at rest together at t0 and tf.

Seifried (2014) Sect. 7.5.2 (Fig. 7.13, a sketch without coordinates): the end effector of the
flexible cart manipulator follows a semicircle of radius 1 m while the cart moves from -0.5 m to
0.5 m, in 3 s, with 5th-order polynomials (:func:`cart_semicircle_task`). With two arms of 1 m
on a cart at the height of the rail, a semicircle whose end points lie level and on the cart's
side of the motion (end effector moving with the cart) brings the end effector within
sqrt(1.25) m of the joint somewhere, i.e. folds the arms to |beta| >= 1.95 rad: at or beyond
where the book's output designs lose stable zero dynamics (from |beta| = 1.75-1.95 rad for
(7.32), 1.5-1.75 rad for (7.33), depending on alpha; 0.05 rad grid). So we read the sketch as:
centre (0, 0.5) m, from (1, 0.5) over the top (0, 1.5) to (-1, 0.5) m, the arms standing up
and the end effector crossing over the cart (|beta| <= 1.45 rad). With the collocated output
this reading gives 92.6 mm maximum error against the book's 88.7 mm; the hanging mirror image
(centre (0, -0.5), under the rail) gives 75.1 mm (both with the chosen 0.5 kg tool).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from multibody_dynamics.errors import InputError

from .trajectories import rest_to_rest_profile


@dataclass(frozen=True)
class TimeLaw:
    """Rest-to-rest time law s(t) in [0, 1] between t0 and tf, polynomial of odd ``order``."""

    t0: float
    tf: float
    order: int = 5

    def __post_init__(self):
        if not self.tf > self.t0:
            raise InputError(f"time law: expected tf > t0, got t0={self.t0}, tf={self.tf}")

    def __call__(self, t):
        """s, s', s'' at times t (each shaped like t)."""
        t = np.asarray(t, float)
        T = self.tf - self.t0
        p = rest_to_rest_profile(np.ravel((t - self.t0) / T), self.order, derivatives=2)
        inside = np.ravel((t > self.t0) & (t < self.tf))
        s, sd, sdd = p[0], p[1] * inside / T, p[2] * inside / T**2
        return s.reshape(t.shape), sd.reshape(t.shape), sdd.reshape(t.shape)


@dataclass(frozen=True)
class PathComponent:
    """Task coordinates ``names`` as a function of the path parameter s: p(s), dp/ds, d2p/ds2."""

    names: tuple[str, ...]
    fn: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def linear_move(name: str, start: float, end: float) -> PathComponent:
    d = end - start
    return PathComponent((name,), lambda s: (start + d * s[:, None], np.full((s.size, 1), d),
                                             np.zeros((s.size, 1))))


def circular_arc(frame: str, center, radius: float, start_deg: float, end_deg: float,
                 plane=("x", "y")) -> PathComponent:
    """Frame origin on a circular arc in a world coordinate plane, angle from start to end."""
    if not radius > 0:
        raise InputError(f"arc radius: expected > 0 m, got {radius}")
    c = np.asarray(center, float)
    a0, a1 = np.radians(start_deg), np.radians(end_deg)
    da = a1 - a0

    def fn(s):
        ang = a0 + da * s
        cos, sin = np.cos(ang), np.sin(ang)
        p = np.column_stack([c[0] + radius * cos, c[1] + radius * sin])
        dp = np.column_stack([-radius * sin, radius * cos]) * da
        ddp = np.column_stack([-radius * cos, -radius * sin]) * da**2
        return p, dp, ddp

    return PathComponent((f"{frame}.{plane[0]}", f"{frame}.{plane[1]}"), fn)


def straight_line(frame: str, start, end, plane=("x", "y")) -> PathComponent:
    p0, p1 = np.asarray(start, float), np.asarray(end, float)
    d = p1 - p0
    return PathComponent((f"{frame}.{plane[0]}", f"{frame}.{plane[1]}"),
                         lambda s: (p0 + np.outer(s, d), np.tile(d, (s.size, 1)),
                                    np.zeros((s.size, 2))))


@dataclass(frozen=True)
class Task:
    """Desired values of task coordinates over time: components sharing one time law."""

    law: TimeLaw
    components: tuple[PathComponent, ...] = field(default=())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for c in self.components for n in c.names)

    def __call__(self, t):
        """(p, p', p'') each (N, m) at times t (N,), or (m,) for a scalar t."""
        scalar = np.ndim(t) == 0
        t = np.atleast_1d(np.asarray(t, float))
        s, sd, sdd = self.law(t)
        ps, ds, dds = [], [], []
        for comp in self.components:
            p, dp, ddp = comp.fn(s)
            ps.append(p)
            ds.append(dp * sd[:, None])
            dds.append(ddp * sd[:, None] ** 2 + dp * sdd[:, None])
        out = tuple(np.hstack(x) for x in (ps, ds, dds))
        return tuple(x[0] for x in out) if scalar else out


def half_circle_task(frame: str = "tip", cart: str = "x", t0: float = 0.2, tf: float = 1.7,
                     order: int = 5) -> Task:
    """Seifried (2014) Sect. 4.2.7 / 5.3 task: cart -1 -> 1 m, end effector on the half circle."""
    return Task(TimeLaw(t0, tf, order), (linear_move(cart, -1.0, 1.0),
                                         circular_arc(frame, (0.0, -1.5), 1.0, 180.0, 0.0)))


def cart_semicircle_task(frame: str = "arm2", cart: str = "s", t0: float = 0.2, tf: float = 3.2,
                         center=(0.0, 0.5), radius: float = 1.0, start_deg: float = 0.0,
                         end_deg: float = 180.0, order: int = 5) -> Task:
    """Seifried (2014) Sect. 7.5.2 task: cart -0.5 -> 0.5 m, end effector on a semicircle.

    Parameters
    ----------
    frame, cart : str
        End-effector body and cart joint of the model (``flexible_cart_manipulator_design``).
    t0, tf : float
        Start and end of the motion [s] (the book: 3 s of motion).
    center : (2,) [m], radius : float [m], start_deg, end_deg : float [deg]
        The semicircle (module docstring: our reading of Fig. 7.13).
    order : int
        Rest-to-rest polynomial order of the common time law.
    """
    return Task(TimeLaw(t0, tf, order), (linear_move(cart, -0.5, 0.5),
                                         circular_arc(frame, center, radius, start_deg,
                                                      end_deg)))
