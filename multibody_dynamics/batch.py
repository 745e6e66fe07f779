"""Many simulations of one model in one call: K initial states, K inputs or K parameter sets.

A design study or a Monte Carlo run simulates the same mechanism thousands of times.  Calling
:func:`~multibody_dynamics.simulate.simulate` K times builds K simulators (the rigid-body
dynamics, the projected dynamics of a closed loop, the packed arrays of the compiled step);
:func:`simulate_batch` checks every argument once, builds one
:class:`~multibody_dynamics.simulate.Simulator` and runs the K simulations on it, each through
the same code as :func:`simulate` (so each run's samples are bitwise those of a single
:func:`simulate` call with the same arguments: ``test/test_batch.py``).  With fixed steps and
a constant input a run is whole stretches of the compiled step of
:mod:`multibody_dynamics.fast_step`.

Parameter sets: ``prepare(model, k)`` is called before run ``k`` and may change the model's
inertial and geometric parameters in place (e.g. a parametric model's ``apply``); the compiled
step is packed again after it.  Runs are in this process, on one core; to use several cores,
split the runs over processes (e.g. ``multibody_control.design.executors``), each calling
:func:`simulate_batch` on its share, and add up :attr:`BatchResult.runs_per_s`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .constraints import Constraints
from .errors import DimensionError, InputError
from .model import MultibodyModel
from .simulate import SimulationResult, Simulator, SimulatorConfig, _run_on

__all__ = ["BatchResult", "batch_arguments", "simulate_batch"]


@dataclass(frozen=True)
class BatchResult:
    """The K runs of :func:`simulate_batch`.

    Attributes
    ----------
    results : tuple of SimulationResult
        One per run, in order (a failed run keeps the samples computed before it failed).
    duration : float
        Simulated time of each run [s].
    wall_time : float
        Wall time of the whole batch, set-up included [s].
    """

    results: tuple[SimulationResult, ...]
    duration: float
    wall_time: float

    def __len__(self) -> int:
        return len(self.results)

    @property
    def success(self) -> np.ndarray:
        """(K,) bool: each run completed."""
        return np.array([r.success for r in self.results], dtype=bool)

    @property
    def final_q(self) -> np.ndarray:
        """(K, nq) last recorded configuration of each run."""
        return np.array([r.q[-1] for r in self.results])

    @property
    def final_v(self) -> np.ndarray:
        """(K, nv) last recorded velocity of each run."""
        return np.array([r.v[-1] for r in self.results])

    def stacked(self, name: str) -> np.ndarray:
        """``(K, N, ...)`` of a sample array (``"q"``, ``"v"``, ``"energy"``, ``"lam"``, ...)
        of every run; InputError when the runs have different numbers of samples (a run
        failed early)."""
        arrays = [np.asarray(getattr(r, name)) for r in self.results]
        if len({a.shape for a in arrays}) > 1:
            raise InputError(f"stacked({name!r}): the runs have different numbers of samples "
                             f"(failed runs: {np.flatnonzero(~self.success).tolist()})")
        return np.stack(arrays)

    @property
    def runs_per_s(self) -> float:
        """Runs per wall second on the one core this batch ran on."""
        return len(self.results) / self.wall_time if self.wall_time > 0 else float("inf")

    @property
    def realtime_factor(self) -> float:
        """Simulated seconds (all runs) per wall second, per core."""
        return len(self.results) * self.duration / self.wall_time if self.wall_time > 0 \
            else float("inf")

    def throughput(self) -> dict:
        """``{"runs", "cores", "runs_per_s_per_core", "simulated_s_per_wall_s_per_core",
        "wall_s"}`` (one core: the runs are in this process)."""
        return {"runs": len(self.results), "cores": 1, "runs_per_s_per_core": self.runs_per_s,
                "simulated_s_per_wall_s_per_core": self.realtime_factor,
                "wall_s": self.wall_time}


def _per_run(x, k: int, n: int, name: str, what: str) -> list:
    """``x`` as K per-run vectors (None stays None for every run): (n,) is shared, (K, n)
    gives one row per run."""
    if x is None:
        return [None] * k
    a = np.asarray(x, dtype=float)
    if a.ndim == 1:
        a = np.broadcast_to(a, (k, a.size))
    if a.ndim != 2 or a.shape != (k, n):
        raise DimensionError(f"{name}: expected ({n},) shared by every run or ({k}, {n}) one "
                             f"row per run ({what}), got {np.shape(x)}")
    if not np.all(np.isfinite(a)):
        bad = sorted({int(i) for i in np.argwhere(~np.isfinite(a))[:, 0]})
        raise InputError(f"{name}: expected finite values, got NaN/inf in runs {bad}")
    return [a[i].copy() for i in range(k)]


def _count(runs, q0, v0, tau) -> int:
    """K from ``runs`` or the first 2-D array given; DimensionError when they disagree."""
    sizes = {name: np.shape(x)[0] for name, x in (("q0", q0), ("v0", v0), ("tau", tau))
             if x is not None and not callable(x) and np.ndim(x) == 2}
    if runs is not None:
        if not (isinstance(runs, (int, np.integer)) and runs >= 1):
            raise InputError(f"runs: expected an integer >= 1, got {runs!r}")
        sizes["runs"] = int(runs)
    if not sizes:
        raise InputError("simulate_batch: give K runs as q0 (K, nq), v0 (K, nv), tau (K, nv) "
                         "or runs=K (with prepare for K parameter sets)")
    if len(set(sizes.values())) > 1:
        raise DimensionError(f"simulate_batch: the number of runs differs between arguments: "
                             f"{sizes}")
    return next(iter(sizes.values()))


def batch_arguments(model: MultibodyModel, duration: float, q0=None, v0=None, tau=None, *,
                    runs: int | None = None, output_dt: float | None = None
                    ) -> tuple[list, list, list]:
    """The arguments of :func:`simulate_batch` checked and split per run.

    Returns
    -------
    q0s, v0s, taus : lists of K entries
        ``(nq,)``/``(nv,)`` arrays or None (the model's default); ``taus`` holds None for
        every run when ``tau`` is a callable (the law itself is shared).

    Raises
    ------
    InputError, DimensionError
        As :func:`simulate_batch`.
    """
    if not (np.isfinite(duration) and duration > 0):
        raise InputError(f"duration: expected a positive time in s, got {duration}")
    if output_dt is not None and not (np.isfinite(output_dt) and output_dt > 0):
        raise InputError(f"output_dt: expected a positive interval in s, got {output_dt}")
    k = _count(runs, q0, v0, tau)
    qs = _per_run(q0, k, model.nq, "q0", "initial configurations")
    vs = _per_run(v0, k, model.nv, "v0", "initial velocities")
    if callable(tau):
        taus: list = [None] * k
    else:
        taus = _per_run(np.zeros(model.nv) if tau is None else tau, k, model.nv, "tau",
                        "constant inputs")
    return qs, vs, taus


def simulate_batch(model: MultibodyModel, duration: float, q0=None, v0=None, tau=None, *,
                   runs: int | None = None, config: SimulatorConfig | None = None,
                   constraints: Constraints | None = None, output_dt: float | None = None,
                   prepare: Callable[[MultibodyModel, int], None] | None = None
                   ) -> BatchResult:
    """Run K simulations of ``model`` over ``duration`` seconds in one call (module notes).

    Parameters
    ----------
    model : MultibodyModel
    duration : float
        Simulated time of every run [s] (> 0).
    q0 : (nq,) or (K, nq), optional
        Initial configurations [rad | m]: one shared or one per run (default: the model's).
    v0 : (nv,) or (K, nv), optional
        Initial velocities [rad/s | m/s] (default: at rest).
    tau : (nv,) or (K, nv) or callable ``tau(t, q, v)``, optional
        Generalized input [N m | N]: constant (shared or per run) or a feedback law shared by
        every run (default zero).
    runs : int, optional
        K when no argument above is per run (e.g. K parameter sets through ``prepare``).
    config : SimulatorConfig, optional
        As for :func:`~multibody_dynamics.simulate.simulate`; adaptive configurations run
        each simulation through :func:`~multibody_dynamics.simulate.simulate`'s adaptive path
        on the shared simulator too.
    constraints : Constraints, optional
        As for :func:`~multibody_dynamics.simulate.simulate`.
    output_dt : float, optional
        Interval of the recorded samples [s] (default every step).
    prepare : callable ``prepare(model, k)``, optional
        Called before run k to set that run's parameters in the model in place.

    Returns
    -------
    BatchResult

    Raises
    ------
    InputError, DimensionError
        Before any run: a bad duration or interval, arrays of the wrong shape, non-finite
        values, or a number of runs that differs between arguments.
    """
    cfg = config or SimulatorConfig()
    if prepare is not None and not callable(prepare):
        raise InputError(f"prepare: expected a callable prepare(model, k), got {prepare!r}")
    qs, vs, taus = batch_arguments(model, duration, q0, v0, tau, runs=runs, output_dt=output_dt)
    k = len(qs)
    start = time.perf_counter()
    sim = Simulator(model, cfg, constraints, project_default=False)  # _run_on resets
    results = []
    for i in range(k):
        if prepare is not None:
            prepare(model, i)
            sim._fast_config = None  # the compiled step packs the new parameters
        sim.nsteps = sim.nprojections = sim.newton_iterations = sim.nfev = sim.nsingular = 0
        law = tau if callable(tau) else taus[i]
        results.append(_run_on(sim, duration, qs[i], vs[i], law, taus[i], output_dt, False,
                               time.perf_counter()))
    return BatchResult(tuple(results), float(duration), time.perf_counter() - start)
