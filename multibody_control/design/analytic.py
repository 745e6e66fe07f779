"""Analytic design problems with a known minimum, for testing and benchmarking the study engine.

``sphere``: f(x) = sum_i (x_i - c_i)^2 on a box, minimum 0 at ``x = center``. Options make it
behave like a real design problem where the engine needs it:

* ``cost`` [s]: busy CPU time spent per evaluation (a fixed artificial cost, so that throughput
  and parallel efficiency can be measured on a known workload; a sleep would not load a core);
* ``sleep`` [s]: wall time slept per evaluation, on top of ``cost`` (a fixed latency that needs
  no core: the executors' parallel dispatch measured apart from the machine's free cores);
* ``infeasible_above``: designs with ``x_0 > infeasible_above`` are infeasible, returned as
  ``ok=False`` with the penalty (the book's "large default value", Seifried (2014) Sect. 7.3.1);
* ``raise_above``: ``evaluate`` raises RuntimeError for ``x_0 > raise_above`` (a bug in a
  problem: the engine must record it, not crash);
* ``crash_above``: the evaluating process exits at once for ``x_0 > crash_above`` (a worker
  that dies on a design: the engine must retry it and finally record it as failed). Never
  in the calling process itself (guarded by the pid given at construction);
* ``feasible_radius``: only designs within this distance of the centre are feasible; the
  others are ``ok=False`` with the penalty and ``info['violation']`` = their distance beyond
  the radius (a small feasible region, as in the book's design problems, to test how the
  swarm finds it).
"""

from __future__ import annotations

import os
import time

import numpy as np

from multibody_dynamics.errors import InputError

from .problem import Evaluation, check_design_vector, register_problem

__all__ = ["SphereProblem"]


@register_problem("sphere")
class SphereProblem:
    """Shifted sphere f(x) = |x - center|^2 on ``[lower, upper]^dim`` (see the module docstring).

    Parameters
    ----------
    dim : int
        Number of design variables, named ``x0, x1, ...``.
    center : float or sequence of float
        Location of the minimum (inside the bounds).
    lower, upper : float
        Bounds of every variable.
    cost : float
        Busy CPU seconds per evaluation (>= 0).
    sleep : float
        Seconds slept per evaluation (>= 0).
    infeasible_above, raise_above, crash_above : float or None
        Thresholds on ``x0`` (see the module docstring); None: never.
    feasible_radius : float or None
        Radius of the feasible ball around ``center``; None: everywhere feasible.
    penalty : float
        Criterion of an infeasible design.
    """

    def __init__(self, dim: int = 3, center=0.3, lower: float = -1.0, upper: float = 1.0,
                 cost: float = 0.0, sleep: float = 0.0, infeasible_above: float | None = None,
                 raise_above: float | None = None, crash_above: float | None = None,
                 feasible_radius: float | None = None, penalty: float = 1e6):
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise InputError(f"sphere: dim: expected a positive integer, got {dim!r}")
        if not lower < upper:
            raise InputError(f"sphere: expected lower < upper, got {lower!r}, {upper!r}")
        if cost < 0 or sleep < 0:
            raise InputError(f"sphere: cost, sleep: expected numbers >= 0 [s], got {cost!r}, "
                             f"{sleep!r}")
        self.names = tuple(f"x{i}" for i in range(dim))
        self.lower = np.full(dim, float(lower))
        self.upper = np.full(dim, float(upper))
        self.center = np.broadcast_to(np.asarray(center, dtype=float), (dim,)).copy()
        self.cost = float(cost)
        self.sleep = float(sleep)
        self.infeasible_above = infeasible_above
        self.raise_above = raise_above
        self.crash_above = crash_above
        self.feasible_radius = feasible_radius
        self.penalty = float(penalty)
        self._owner_pid = os.getpid()

    def evaluate(self, x) -> Evaluation:
        """f(x) = sum (x - center)^2, or the penalty (``ok=False``) in the infeasible region."""
        x = check_design_vector(self, x)
        if self.cost > 0:
            end = time.thread_time() + self.cost
            while time.thread_time() < end:  # CPU time of this thread: a loaded core, not a sleep
                pass
        if self.sleep > 0:
            time.sleep(self.sleep)
        if self.crash_above is not None and x[0] > self.crash_above \
                and os.getpid() != self._owner_pid:
            os._exit(3)
        if self.raise_above is not None and x[0] > self.raise_above:
            raise RuntimeError(f"sphere: deliberate failure at x0 = {x[0]:.6g}")
        if self.infeasible_above is not None and x[0] > self.infeasible_above:
            return Evaluation(self.penalty, ok=False,
                              message=f"infeasible: x0 = {x[0]:.6g} > {self.infeasible_above:g}")
        distance = float(np.linalg.norm(x - self.center))
        if self.feasible_radius is not None and distance > self.feasible_radius:
            return Evaluation(self.penalty, ok=False, message=f"infeasible: |x - center| = "
                              f"{distance:.6g} > {self.feasible_radius:g}",
                              info={"distance": distance,
                                    "violation": distance - self.feasible_radius})
        return Evaluation(float(np.sum((x - self.center) ** 2)), info={"distance": distance})

    def plot_design(self, ax, x) -> None:
        """Bar chart of the design against the known optimum."""
        idx = np.arange(len(self.names))
        ax.bar(idx - 0.2, x, width=0.4, label="design")
        ax.bar(idx + 0.2, self.center, width=0.4, label="optimum")
        ax.set_xticks(idx, self.names)
        ax.set_ylabel("value")
        ax.legend()
