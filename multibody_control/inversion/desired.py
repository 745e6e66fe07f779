"""Desired output trajectory y_d(t), y_d', y_d'' from a task (Seifried 2014 Sect. 4.2.5).

If the output rows are the task coordinates themselves (an exact output such as
``[x, tip.x, tip.y]``) the task is the desired output.  Otherwise (e.g. the linearly
combined output y = q_a + Gamma q_u) the desired output comes from rigid-body inverse
kinematics with the passive joints at rest: the approximate end-effector position
r_ap(y) = r(q_a = y, q_u = q_rest) is made to follow the task (Seifried's
geometric approximation, generalized), and y_d = h(q) of that configuration.
"""

from __future__ import annotations

import numpy as np

from multibody_dynamics.errors import InputError
from multibody_dynamics.model import MultibodyModel

from ..outputs import Output, bent_guess
from ..tasks import Task


class DesiredOutput:
    """Callable ``t -> (y_d, y_d', y_d'')`` (each (m,)) for an output following a task.

    Parameters
    ----------
    model, output : the system and its output
    task : Task
        Its coordinates name joints or frame coordinates; as many as the model has inputs.
    guess : (nq,), optional
        Start of the inverse kinematics at the first call; it selects the branch (elbow up
        or down).  Default: spring rest with every actuated revolute joint at +0.5 rad.
    """

    def __init__(self, model: MultibodyModel, output: Output, task: Task, guess=None):
        self.model, self.output, self.task = model, output, task
        self.exact = tuple(output.names) == tuple(task.names)
        if not self.exact:
            if len(task.names) != model.nu:
                raise InputError(f"task has {len(task.names)} coordinates "
                                 f"({', '.join(task.names)}) but {model.name} has {model.nu} "
                                 "inputs")
            self.task_map = Output(model, task.names)
            self.ia = np.flatnonzero(~model.passive)
            # passive joints stay at rest; the last solution warm-starts the next call
            self.q = bent_guess(model) if guess is None else np.array(guess, float)

    def __call__(self, t):
        p, pd, pdd = self.task(t)
        if self.exact:
            return p, pd, pdd
        tm, ia = self.task_map, self.ia
        q = self.q = tm.solve(self.q, ia, p, tol=1e-13)
        J = tm.jacobian(q)
        v = np.zeros(self.model.nv)
        v[ia] = np.linalg.solve(J[:, ia], pd)
        a = np.zeros(self.model.nv)
        a[ia] = np.linalg.solve(J[:, ia], pdd - tm.bias(q, v))
        out = self.output
        H = out.jacobian(q)
        return out.value(q), H @ v, H @ a + out.bias(q, v)

    def sample(self, t):
        """Stacked (N, m) arrays at times t (N,)."""
        t = np.asarray(t, float)
        if self.exact:
            return self.task(t)
        rows = [self(float(tk)) for tk in t]
        return tuple(np.array([r[k] for r in rows]) for k in range(3))

    def tabulate(self, t_grid) -> TabulatedOutput:
        """A fast interpolant through exact samples on ``t_grid`` (see
        :class:`TabulatedOutput`)."""
        return TabulatedOutput(np.asarray(t_grid, float), *self.sample(t_grid))


class TabulatedOutput:
    """y_d, y_d', y_d'' by piecewise quintic Hermite interpolation of exact samples.

    Each piece matches value, first and second derivative at both of its nodes: exact at
    the nodes, C2 everywhere, O(h^6) between nodes where y_d is smooth.  Put the task's t0
    and tf on the grid so that the jerk discontinuities of a quintic time law fall on
    nodes.  Outside the grid the end values are held (the task is at rest there).
    Evaluation costs one binary search and a Horner loop, for one time or many.
    """

    def __init__(self, t, y, yd, ydd):
        t = np.asarray(t, float)
        if t.ndim != 1 or t.size < 2 or np.any(np.diff(t) <= 0):
            raise InputError("tabulated output: expected at least two increasing sample times")
        h = np.diff(t)[:, None]
        y0, y1, d0, d1, a0, a1 = y[:-1], y[1:], yd[:-1], yd[1:], ydd[:-1], ydd[1:]
        delta = y1 - y0 - d0 * h - a0 * h**2 / 2
        delta1 = d1 - d0 - a0 * h
        delta2 = a1 - a0
        c3 = (10 * delta - 4 * delta1 * h + delta2 * h**2 / 2) / h**3
        c4 = (-15 * delta + 7 * delta1 * h - delta2 * h**2) / h**4
        c5 = (6 * delta - 3 * delta1 * h + delta2 * h**2 / 2) / h**5
        self.t = t
        self.coef = np.stack([y0, d0, a0 / 2, c3, c4, c5], axis=1)  # (N-1, 6, m)
        self._last = (y[-1], yd[-1], ydd[-1])

    def __call__(self, t):
        scalar = np.ndim(t) == 0
        tt = np.atleast_1d(np.asarray(t, float))
        idx = np.clip(np.searchsorted(self.t, tt, side="right") - 1, 0, self.t.size - 2)
        tau = np.clip(tt, self.t[0], self.t[-1]) - self.t[idx]
        c = self.coef[idx]  # (K, 6, m)
        x = tau[:, None]
        y = ((((c[:, 5] * x + c[:, 4]) * x + c[:, 3]) * x + c[:, 2]) * x + c[:, 1]) * x + c[:, 0]
        yd = (((5 * c[:, 5] * x + 4 * c[:, 4]) * x + 3 * c[:, 3]) * x + 2 * c[:, 2]) * x + c[:, 1]
        ydd = ((20 * c[:, 5] * x + 12 * c[:, 4]) * x + 6 * c[:, 3]) * x + 2 * c[:, 2]
        outside = ((tt < self.t[0]) | (tt > self.t[-1]))[:, None]
        if outside.any():  # at rest outside the grid
            yd = np.where(outside, 0.0, yd)
            ydd = np.where(outside, 0.0, ydd)
        if scalar:
            return y[0], yd[0], ydd[0]
        return y, yd, ydd


def end_effector_error(model: MultibodyModel, task: Task, t, q) -> np.ndarray:
    """Euclidean distance [m] between the task's frame coordinates reached by q (N, nq) and
    desired.

    Only task coordinates that are frame coordinates ('frame.x') count; joint coordinates are
    excluded (they are not end-effector positions).
    """
    names = [n for n in task.names if "." in n and n.split(".")[0] not in model.coordinate_names]
    if not names:
        raise InputError("the task has no frame coordinate to measure an end-effector error on")
    idx = [task.names.index(n) for n in names]
    reach = Output(model, names)
    p_des = task(np.asarray(t, float))[0][:, idx]
    p = np.array([reach.value(qk) for qk in q])
    return np.linalg.norm(p - p_des, axis=1)
