"""Controller references and their interpolation from trajectory points.

:class:`Reference` is what every controller tracks at one instant;
:class:`TrajectoryInterpolator` turns sparse waypoints (as carried by a
``trajectory_msgs/JointTrajectory``) into references at any time, with the
rules of ros2_control's joint_trajectory_controller: linear between positions
only, cubic Hermite when velocities are given, quintic Hermite when
accelerations are given too; the first point is held before the start and the
last point (at rest) after the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from multibody_dynamics.errors import DimensionError, InputError
from multibody_dynamics.validation import as_matrix, as_vector, require_finite


@dataclass(frozen=True)
class Reference:
    """Desired motion and feedforward at one instant.

    Attributes
    ----------
    q : (nq,) desired configuration
    v : (nv,) desired velocity; a : (nv,) desired acceleration
    u_ff : (nu,) or None
        Feedforward input [N | N m] added to the feedback (the ``effort`` of a
        JointTrajectory point, mapped to the model's inputs); None: zero.
    lambda_d : (m,) or None
        Desired constraint forces, for the constrained control laws.
    """

    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    u_ff: np.ndarray | None = None
    lambda_d: np.ndarray | None = None

    @classmethod
    def hold(cls, model, q) -> Reference:
        """Rest at configuration ``q`` (nq,) with no feedforward."""
        return cls(as_vector(q, model.nq, "q").copy(), np.zeros(model.nv), np.zeros(model.nv))

    def checked(self, model) -> Reference:
        """This reference with shapes checked against ``model`` and finite values required."""
        q = require_finite(as_vector(self.q, model.nq, "reference.q"), "reference.q")
        v = require_finite(as_vector(self.v, model.nv, "reference.v"), "reference.v")
        a = require_finite(as_vector(self.a, model.nv, "reference.a"), "reference.a")
        u = None if self.u_ff is None else require_finite(
            as_vector(self.u_ff, model.nu, "reference.u_ff"), "reference.u_ff")
        return Reference(q, v, a, u, self.lambda_d)


class TrajectoryInterpolator:
    """Piecewise-polynomial interpolation of waypoints in joint coordinates.

    Parameters
    ----------
    t : (N,) strictly increasing times [s]
    positions : (N, n) [rad | m]
    velocities, accelerations : (N, n) or None
        Given velocities select cubic Hermite segments, given velocities and
        accelerations quintic Hermite segments; positions alone: linear.
    effort : (N, n) or None
        Feedforward at the points [N | N m], interpolated linearly.
    """

    def __init__(self, t, positions, velocities=None, accelerations=None, effort=None):
        t = require_finite(np.atleast_1d(np.asarray(t, float)), "t")
        if t.ndim != 1 or t.size < 1:
            raise DimensionError(f"t: expected shape (N,) with N >= 1, got {t.shape}")
        if np.any(np.diff(t) <= 0):
            raise InputError("t: expected strictly increasing times")
        p = require_finite(as_matrix(positions, (t.size, None), "positions"), "positions")
        n = p.shape[1]

        def opt(x, name):
            return None if x is None else require_finite(as_matrix(x, (t.size, n), name), name)

        v, a = opt(velocities, "velocities"), opt(accelerations, "accelerations")
        e = opt(effort, "effort")
        if a is not None and v is None:
            raise InputError("accelerations: need velocities too (quintic Hermite)")
        self.t, self.n = t, n
        self.kind = "linear" if v is None else ("cubic" if a is None else "quintic")
        self._p, self._effort = p, e
        h = np.diff(t)[:, None]
        dp = np.diff(p, axis=0)
        c = np.zeros((max(t.size - 1, 0), 6, n))  # c[k, j] * tau**j on segment k, tau in [0, h]
        c[:, 0] = p[:-1]
        if self.kind == "linear":
            c[:, 1] = dp / h
        elif self.kind == "cubic":
            v0, v1 = v[:-1], v[1:]
            c[:, 1] = v0
            c[:, 2] = (3 * dp - (2 * v0 + v1) * h) / h**2
            c[:, 3] = (-2 * dp + (v0 + v1) * h) / h**3
        else:
            v0, v1, a0, a1 = v[:-1], v[1:], a[:-1], a[1:]
            c[:, 1] = v0
            c[:, 2] = a0 / 2
            c[:, 3] = (20 * dp - (8 * v1 + 12 * v0) * h - (3 * a0 - a1) * h**2) / (2 * h**3)
            c[:, 4] = (-30 * dp + (14 * v1 + 16 * v0) * h + (3 * a0 - 2 * a1) * h**2) / (2 * h**4)
            c[:, 5] = (12 * dp - 6 * (v1 + v0) * h + (a1 - a0) * h**2) / (2 * h**5)
        self._c = c

    @property
    def start(self) -> float:
        return float(self.t[0])

    @property
    def end(self) -> float:
        return float(self.t[-1])

    def sample(self, t: float):
        """Position, velocity, acceleration (n,) each, and effort (n,) or None, at time ``t``."""
        t = float(t)
        if t >= self.t[-1] or self.t.size == 1:  # after the end: rest at the last point
            e = None if self._effort is None else self._effort[-1].copy()
            return self._p[-1].copy(), np.zeros(self.n), np.zeros(self.n), e
        if t <= self.t[0]:
            e = None if self._effort is None else self._effort[0].copy()
            return self._p[0].copy(), np.zeros(self.n), np.zeros(self.n), e
        k = int(np.searchsorted(self.t, t, side="right")) - 1
        tau = t - self.t[k]
        c = self._c[k]
        powers = tau ** np.arange(6)
        p = powers @ c
        v = (np.arange(1, 6) * powers[:5]) @ c[1:]
        a = (np.array([2.0, 6.0, 12.0, 20.0]) * powers[:4]) @ c[2:]
        e = None
        if self._effort is not None:
            s = tau / (self.t[k + 1] - self.t[k])
            e = (1 - s) * self._effort[k] + s * self._effort[k + 1]
        return p, v, a, e
