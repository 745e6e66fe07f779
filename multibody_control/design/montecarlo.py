"""Monte Carlo simulation of a shipped robot over the design executors (several cores).

:func:`monte_carlo` runs K simulations (K initial states or K constant inputs) of a robot
shipped in ``config/robots/`` by :func:`multibody_dynamics.batch.simulate_batch`, split into
chunks over one of the design studies' backends (:func:`~.executors.open_executor`:
in-process, a local process pool or Dask).  Each task loads the robot by name in its worker
(nothing heavy is pickled) and runs its share of the runs in one batch; the results come back
in run order.  Every argument is checked here, before any task is submitted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from multibody_dynamics.batch import BatchResult, batch_arguments, simulate_batch
from multibody_dynamics.errors import InputError
from multibody_dynamics.model import load_model
from multibody_dynamics.simulate import SimulationResult, SimulatorConfig

from .executors import StudyExecutor

__all__ = ["MonteCarloResult", "monte_carlo"]


@dataclass(frozen=True)
class MonteCarloResult:
    """The K runs of :func:`monte_carlo`.

    Attributes
    ----------
    results : tuple of SimulationResult
        One per run, in run order.
    duration : float
        Simulated time of each run [s].
    wall_time : float
        Wall time of the whole call [s].
    workers : int
        Workers of the backend.
    busy_time : float
        Sum of the tasks' own wall times [s] (the time the workers spent in batches).
    """

    results: tuple[SimulationResult, ...]
    duration: float
    wall_time: float
    workers: int
    busy_time: float

    @property
    def success(self) -> np.ndarray:
        """(K,) bool: each run completed."""
        return np.array([r.success for r in self.results], dtype=bool)

    def throughput(self) -> dict:
        """Runs per second in all and per busy worker, simulated seconds per wall second."""
        k = len(self.results)
        return {"runs": k, "workers": self.workers, "runs_per_s": k / self.wall_time,
                "runs_per_s_per_worker": k / self.busy_time if self.busy_time > 0 else 0.0,
                "simulated_s_per_wall_s": k * self.duration / self.wall_time,
                "wall_s": self.wall_time}


def _chunk_task(robot: str, duration: float, q0s, v0s, taus, config, output_dt) -> BatchResult:
    """One task: ``len(q0s)`` runs of ``robot`` in one batch (module-level: pickles by name)."""
    model = load_model(robot)
    q0 = None if q0s[0] is None else np.array(q0s)
    v0 = None if v0s[0] is None else np.array(v0s)
    return simulate_batch(model, duration, q0=q0, v0=v0, tau=np.array(taus),
                          config=config, output_dt=output_dt)


def monte_carlo(robot: str, duration: float, q0=None, v0=None, tau=None, *,
                runs: int | None = None, config: SimulatorConfig | None = None,
                output_dt: float | None = None, backend: StudyExecutor | None = None,
                chunks: int | None = None) -> MonteCarloResult:
    """K simulations of ``robot`` split over ``backend`` (module notes).

    Parameters
    ----------
    robot : str
        A shipped robot (``config/robots/<robot>.yaml``), loaded in each worker.
    duration : float
        Simulated time of every run [s].
    q0 : (nq,) or (K, nq); v0 : (nv,) or (K, nv); tau : (nv,) or (K, nv), optional
        Initial states and constant inputs, shared or per run (as
        :func:`~multibody_dynamics.batch.simulate_batch`; no callable input, it would have to
        be pickled to every worker).
    runs : int, optional
        K when no argument is per run.
    config : SimulatorConfig, optional
    output_dt : float, optional
        Interval of the recorded samples [s].
    backend : StudyExecutor, optional
        Where the chunks run (default: in this process).
    chunks : int, optional
        Number of tasks (default: 2 per worker, at most K).

    Returns
    -------
    MonteCarloResult
    """
    if callable(tau):
        raise InputError("tau: monte_carlo takes constant inputs (nv,) or (K, nv); a "
                         "callable law would be pickled to every worker")
    model = load_model(robot)
    q0s, v0s, taus = batch_arguments(model, duration, q0, v0, tau, runs=runs,
                                     output_dt=output_dt)
    k = len(q0s)
    workers = backend.workers if backend is not None else 1
    n_chunks = min(k, chunks if chunks is not None else 2 * workers)
    if not (isinstance(n_chunks, int) and n_chunks >= 1):
        raise InputError(f"chunks: expected a positive integer, got {chunks!r}")
    bounds = np.linspace(0, k, n_chunks + 1).round().astype(int)
    start = time.perf_counter()
    tasks = [(q0s[a:b], v0s[a:b], taus[a:b]) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    if backend is None:
        batches = [_chunk_task(robot, duration, *t, config, output_dt) for t in tasks]
    else:
        futures = [backend.executor.submit(_chunk_task, robot, duration, *t, config, output_dt)
                   for t in tasks]
        batches = [f.result() for f in futures]
    wall = time.perf_counter() - start
    results = tuple(r for b in batches for r in b.results)
    return MonteCarloResult(results, float(duration), wall, workers,
                            sum(b.wall_time for b in batches))
