"""Where design evaluations run: one ``concurrent.futures.Executor`` interface, three backends.

* ``inprocess``: evaluated in the calling process when submitted (debugging, profiling, tests);
* ``pool``: a local :class:`~concurrent.futures.ProcessPoolExecutor` (default: one process per
  core this process may use), started with ``forkserver`` so that no thread of the caller is
  forked along;
* ``dask``: Dask ``distributed``, through ``Client.get_executor()``: either a
  :class:`~distributed.LocalCluster` of ``workers`` single-threaded processes, or an existing
  cluster joined at a scheduler address (``tcp://HOST:PORT``), started by hand
  (``dask scheduler`` / ``dask worker``) or by dask-jobqueue on a batch system.

:func:`evaluate_batch` runs one swarm iteration through any of them and guarantees one
:class:`~multibody_control.design.problem.Evaluation` per design, in design order, whatever
happens to the workers.  On the pool and on Dask the designs go in chunks, one task per chunk
(:func:`evaluate_designs`), of decreasing size (guided self-scheduling: each chunk takes
1 / (2 workers) of the designs not yet handed out, at least ``MIN_CHUNK``), so that a swarm
iteration of 100 designs on 2 workers is about 12 tasks instead of 100 (a Dask task costs
milliseconds of scheduler, client and worker time, as much as an evaluation) while the small
chunks at the end still even out the workers' loads.  A design that raises fails alone inside
its chunk; the guarantees below hold per design:

* a Dask worker that dies has its running and queued tasks moved to the other workers by the
  scheduler (up to ``distributed.scheduler.allowed-failures`` deaths per task, default 3);
* a local pool whose process died is rebuilt and the lost evaluations are submitted again;
  evaluations lost twice are then run one at a time, so that a design that kills its process
  is identified and recorded as failed instead of the designs that happened to run beside it;
* a future that raises (a bug in the problem, a task whose workers died too often) becomes an
  ``ok=False`` evaluation with the error as its message and the problem's ``penalty``
  (``inf`` if it has none);
* a future that is cancelled (the executor shut down, the Dask scheduler is gone) is no
  design's doing: :class:`ExecutorError` stops the study at its last checkpoint.

Because problems are pure, a resubmitted evaluation gives the same result, so a study that lost
workers ends exactly like an undisturbed one.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from multibody_dynamics.errors import InputError, MultibodyError

from .problem import DesignProblem, Evaluation

__all__ = ["KINDS", "MIN_CHUNK", "ExecutorError", "InProcessExecutor", "StudyExecutor",
           "available_cores", "chunks", "evaluate_batch", "evaluate_design", "evaluate_designs",
           "open_executor"]

KINDS = ("inprocess", "pool", "dask")
#: smallest chunk of designs per task on the pool and on Dask (see the module docstring)
MIN_CHUNK = 2
#: how long to wait for the first worker of an existing Dask cluster [s]
DASK_CONNECT_TIMEOUT = 30.0


def _one_thread_per_worker() -> None:
    """Pool initializer: one BLAS / OpenMP thread in each worker process, as Dask's nanny sets
    for its workers.  With the libraries' defaults (one thread per core) N workers on N cores
    oversubscribe them: the flexible design evaluations (LAPACK in the modal reduction and the
    inversion) took about three times the CPU per evaluation in a local pool of 2 that they
    took on a 2-worker Dask cluster.  The numeric libraries are loaded before this runs (the
    forkserver preloads the caller's main module): those are limited through threadpoolctl,
    and the ones a task loads later read the environment variables set here.  SIGTERM is
    made to end the worker (:func:`_terminable`)."""
    from threadpoolctl import threadpool_limits

    _terminable()
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"
    threadpool_limits(1)


def _terminable() -> None:
    """SIGTERM's default action, unblocked, in a pool worker: the pool ends a broken pool's
    workers with ``terminate()`` and waits for them, and a worker that inherited an ignored or
    blocked SIGTERM (from the forkserver, started with its caller's state at that moment) would
    keep that wait, and the caller's exit, from ever ending."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _end_broken(pool: ProcessPoolExecutor) -> None:
    """Shut a broken pool down and kill every process it has.  The pool's manager thread
    ends the processes of a broken pool with SIGTERM and waits for them: a process that
    outlives SIGTERM (one whose task ignores it, or one that Python 3.11's pool started while
    breaking, after the others were terminated: seen here in about 1 in 6 test runs that lost
    a process, before the pools started their processes up front) holds that wait, and the
    interpreter's exit, which waits for the manager, for good."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        try:
            process.kill()
        except ValueError:  # already closed
            pass


class ExecutorError(MultibodyError, RuntimeError):
    """An evaluation backend cannot run anything (not one design's failure)."""


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity; ``os.cpu_count()`` where unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def evaluate_design(problem: DesignProblem, x) -> tuple[Evaluation, float]:
    """Evaluate ``x`` on ``problem``; returns the evaluation and its CPU time there [s].

    This is the task every backend runs (a module-level function, so that it pickles by
    reference). Exceptions propagate into the future.
    """
    start = time.thread_time()
    evaluation = problem.evaluate(np.asarray(x, dtype=float))
    return evaluation, time.thread_time() - start


def evaluate_designs(problem: DesignProblem, X) -> list[tuple[Evaluation | None, float | str]]:
    """Evaluate every row of ``X`` on ``problem``: the task of a chunk of designs.

    Returns
    -------
    list
        Per row ``(evaluation, CPU seconds)`` as :func:`evaluate_design`, or ``(None,
        description)`` when its evaluation raised (the other rows are still evaluated).
    """
    out: list[tuple[Evaluation | None, float | str]] = []
    for x in np.asarray(X, dtype=float):
        try:
            out.append(evaluate_design(problem, x))
        except Exception as exc:  # noqa: BLE001 - this design's failure, reported by its row
            out.append((None, _describe(exc)))
    return out


def chunks(rows: Sequence[int], workers: int, min_chunk: int = MIN_CHUNK) -> list[list[int]]:
    """``rows`` cut into consecutive chunks by guided self-scheduling: each chunk holds
    ``ceil(r / (2 workers))`` of the ``r`` rows left, at least ``min_chunk``."""
    out, k = [], 0
    while k < len(rows):
        size = max(min_chunk, math.ceil((len(rows) - k) / (2 * max(workers, 1))))
        out.append(list(rows[k:k + size]))
        k += size
    return out


class InProcessExecutor(Executor):
    """An executor that runs each call in the calling thread when it is submitted."""

    def __init__(self):
        self._shutdown = False
        self._lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit after shutdown")
        future: Future = Future()
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True


class StudyExecutor:
    """An open evaluation backend: ``executor`` plus what a report needs to say about it.

    Use :func:`open_executor` to make one, as a context manager (``close`` shuts everything
    down that it started: pool processes, a LocalCluster).

    Attributes
    ----------
    kind : str
        ``inprocess``, ``pool`` or ``dask``.
    executor : concurrent.futures.Executor
        Where :func:`evaluate_batch` submits.
    address : str or None
        The Dask scheduler's address.
    """

    def __init__(self, kind: str, workers: int | None = None, scheduler: str | None = None):
        self.kind = kind
        self._requested = workers
        self.address = scheduler
        self._client = None
        self._cluster = None
        self.restarts = 0
        if kind == "inprocess":
            self.executor: Executor = InProcessExecutor()
        elif kind == "pool":
            self.executor = self._new_pool()
        else:
            self.executor = self._open_dask(workers, scheduler)

    # -- local pool -------------------------------------------------------------------------
    def _new_pool(self) -> ProcessPoolExecutor:
        """A new pool whose processes are known to start (checked with an empty task)."""
        method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() \
            else "spawn"
        pool = ProcessPoolExecutor(max_workers=self._requested or available_cores(),
                                   mp_context=multiprocessing.get_context(method),
                                   initializer=_one_thread_per_worker)
        # every process started now, before any submission: Python 3.11's pool otherwise starts
        # them one per submission, racing its manager thread, which can then miss a new
        # process's death (its results wait for good) or start one after terminating the
        # others of a broken pool (see _end_broken)
        launch = getattr(pool, "_launch_processes", None)
        if launch is not None:
            launch()
        try:
            pool.submit(os.getpid).result()
        except BrokenProcessPool:
            _end_broken(pool)
            raise ExecutorError(
                "the local process pool cannot start its processes (a script that runs a "
                "study must do so under `if __name__ == '__main__':`, since the processes "
                "import it)") from None
        return pool

    def restart(self) -> None:
        """Replace a broken local pool by a new one (other backends repair themselves)."""
        if self.kind != "pool":
            return
        _end_broken(self.executor)
        self.executor = self._new_pool()
        self.restarts += 1

    # -- Dask -------------------------------------------------------------------------------
    def _open_dask(self, workers, scheduler) -> Executor:
        try:
            from distributed import Client, LocalCluster
        except ImportError as exc:  # a runtime dependency: only a broken install lacks it
            raise InputError(f"the dask backend needs dask[distributed] ({exc})") from None
        if scheduler is not None:
            try:
                self._client = Client(scheduler, timeout=DASK_CONNECT_TIMEOUT)
            except OSError as exc:
                raise InputError(f"--scheduler {scheduler}: cannot connect to a Dask scheduler "
                                 f"there ({' '.join(str(exc).split())})") from None
            try:
                self._client.wait_for_workers(1, timeout=DASK_CONNECT_TIMEOUT)
            except TimeoutError:
                self._client.close()
                raise InputError(f"--scheduler {scheduler}: the scheduler has no worker after "
                                 f"{DASK_CONNECT_TIMEOUT:g} s") from None
        else:
            self._cluster = LocalCluster(n_workers=workers or available_cores(),
                                         threads_per_worker=1, processes=True,
                                         host="127.0.0.1", dashboard_address=None)
            self._client = Client(self._cluster)
            self.address = self._cluster.scheduler_address
        # pure=False: every submission is a task of its own (no deduplication by content)
        return self._client.get_executor(pure=False)

    # -- common -----------------------------------------------------------------------------
    @property
    def workers(self) -> int:
        """Number of workers now (Dask: as the scheduler sees them)."""
        if self.kind == "inprocess":
            return 1
        if self.kind == "pool":
            return self.executor._max_workers
        return len(self._client.scheduler_info(n_workers=-1)["workers"])

    def describe(self) -> dict:
        """JSON-serializable description for a study's report."""
        out = {"kind": self.kind, "workers": self.workers}
        if self.kind == "dask":
            out["scheduler"] = self.address
            out["cluster"] = "LocalCluster" if self._cluster is not None else "external"
        if self.restarts:
            out["pool_restarts"] = self.restarts
        return out

    def close(self) -> None:
        """Shut down what this object started (an external Dask cluster is left running)."""
        if self.kind == "dask":
            if self._client is not None:
                self._client.close()
            if self._cluster is not None:
                self._cluster.close()
        elif getattr(self.executor, "_broken", False):  # lost its last process since restart
            _end_broken(self.executor)
        else:
            self.executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> StudyExecutor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_executor(kind: str = "pool", workers: int | None = None,
                  scheduler: str | None = None) -> StudyExecutor:
    """Open an evaluation backend (checks the arguments first).

    Parameters
    ----------
    kind : str
        ``inprocess``, ``pool`` or ``dask``.
    workers : int, optional
        Pool processes or LocalCluster workers (default: :func:`available_cores`).
    scheduler : str, optional
        ``tcp://HOST:PORT`` of an existing Dask scheduler (``kind='dask'`` only; then
        ``workers`` must be None: the cluster has the workers it has).
    """
    if kind not in KINDS:
        raise InputError(f"executor: expected one of {', '.join(KINDS)}, got {kind!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise InputError(f"workers: expected a positive integer, got {workers!r}")
    if scheduler is not None:
        if kind != "dask":
            raise InputError(f"scheduler: only the dask executor joins a scheduler (got "
                             f"executor {kind!r})")
        if workers is not None:
            raise InputError("workers and scheduler exclude each other: an existing cluster "
                             "has the workers it has")
        if "://" not in scheduler:
            raise InputError(f"scheduler: expected an address like tcp://HOST:PORT, got "
                             f"{scheduler!r}")
    if kind == "inprocess" and workers not in (None, 1):
        raise InputError(f"workers: the in-process executor has one worker, got {workers}")
    return StudyExecutor(kind, workers, scheduler)


def _failure(problem, message: str) -> Evaluation:
    value = float(getattr(problem, "penalty", math.inf))
    return Evaluation(value, ok=False, message=" ".join(message.split()))


def _checked(problem, outcome) -> tuple[Evaluation, float]:
    """The task's (Evaluation, seconds), or a failed evaluation saying what was wrong."""
    evaluation, seconds = outcome
    if not isinstance(evaluation, Evaluation):
        return _failure(problem, f"evaluate returned {type(evaluation).__name__}, expected an "
                        "Evaluation"), seconds
    if not isinstance(evaluation.value, (int, float)) or math.isnan(evaluation.value):
        return _failure(problem, f"evaluate returned the value {evaluation.value!r}"), seconds
    return evaluation, seconds


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def evaluate_batch(backend: StudyExecutor, problem: DesignProblem, X: np.ndarray,
                   on_done: Callable[[int, Evaluation], None] | None = None,
                   max_pool_breaks: int = 2,
                   chunked: bool | None = None) -> list[tuple[Evaluation, float]]:
    """Evaluate every row of ``X`` through ``backend``; one result per row, in row order.

    Parameters
    ----------
    backend : StudyExecutor
        Where to run.
    problem : DesignProblem
        The problem (pickled to the workers with each task; keep it light).
    X : ndarray, shape (m, n)
        The designs.
    on_done : callable, optional
        Called as ``on_done(row, evaluation)`` in this thread as each design finishes (a
        progress bar).
    max_pool_breaks : int
        Local pool only: times an evaluation may be lost to a dying process in parallel before
        it is run alone; run alone, one more loss records it as failed.
    chunked : bool, optional
        Send the designs in chunks (:func:`chunks`) rather than one task each; default: on
        the pool and on Dask.  The evaluations are the same either way.

    Returns
    -------
    list of (Evaluation, float)
        Each design's evaluation and its CPU time in the worker [s] (0 when it failed).
    """
    X = np.asarray(X, dtype=float)
    if chunked is None:
        chunked = backend.kind != "inprocess"
    batch = _Outcomes(problem, len(X), chunked, on_done)
    workers = backend.workers if chunked else 1
    pending = list(range(len(X)))
    while pending:
        alone = [i for i in pending if batch.breaks[i] >= max_pool_breaks]
        together = [i for i in pending if batch.breaks[i] < max_pool_breaks]
        groups = chunks(together, workers) if chunked else [[i] for i in together]
        lost = _run(backend, problem, X, groups, batch.settle, chunked)
        for i in alone:  # one at a time: a loss now is this design's own doing
            if _run(backend, problem, X, [[i]], batch.settle, chunked):
                batch.store(i, (_failure(problem, "the worker process died while evaluating "
                                         f"this design ({batch.breaks[i]} times)"), 0.0))
        pending = lost
    return batch.results  # type: ignore[return-value]


class _Outcomes:
    """The results of :func:`evaluate_batch` as its tasks finish, and how often each row was
    lost with a broken pool."""

    def __init__(self, problem, rows: int, chunked: bool, on_done):
        self.problem, self.chunked, self.on_done = problem, chunked, on_done
        self.results: list[tuple[Evaluation, float] | None] = [None] * rows
        self.breaks = [0] * rows

    def store(self, i: int, outcome) -> None:
        """Row ``i``'s (evaluation, seconds), or (None, description) of what it raised."""
        evaluation, seconds = outcome
        if evaluation is None:
            self.results[i] = (_failure(self.problem, f"evaluation raised {seconds}"), 0.0)
        else:
            self.results[i] = _checked(self.problem, outcome)
        if self.on_done is not None:
            self.on_done(i, self.results[i][0])

    def settle(self, rows: list[int], future: Future) -> bool:
        """Store the outcomes of the task of ``rows``; False when they were lost with a broken
        pool (to resubmit)."""
        try:
            outcome = future.result()
        except BrokenProcessPool:
            for i in rows:
                self.breaks[i] += 1
            return False
        except CancelledError:  # not this design's doing: the backend went away
            raise ExecutorError("an evaluation was cancelled: the executor shut down or lost "
                                "its Dask scheduler; the study stops at its last checkpoint "
                                "(continue with --resume)") from None
        except Exception as exc:  # noqa: BLE001 - a failed evaluation, recorded with its reason
            outcome = [(None, _describe(exc))] * len(rows)
        else:
            if not self.chunked:
                outcome = [outcome]
            if not isinstance(outcome, list) or len(outcome) != len(rows):
                outcome = [(None, f"the task returned {type(outcome).__name__}, expected "
                                  f"{len(rows)} results")] * len(rows)
        for i, one in zip(rows, outcome):
            self.store(i, one)
        return True


def _run(backend: StudyExecutor, problem, X, groups: Sequence[list[int]], settle,
         chunked: bool) -> list[int]:
    """Submit each group of rows as one task (``chunked``; else each group is one row), settle
    them as they finish; the rows lost to a broken pool."""
    if not groups:
        return []
    futures: dict[Future, list[int]] = {}
    lost: list[int] = []
    for k, rows in enumerate(groups):
        try:
            task = (backend.executor.submit(evaluate_designs, problem, X[rows]) if chunked
                    else backend.executor.submit(evaluate_design, problem, X[rows[0]]))
            futures[task] = rows
        except BrokenProcessPool:  # broke while submitting: the rest is lost with it
            lost = [i for rest in groups[k:] for i in rest]
            break
    not_done = set(futures)
    while not_done:
        done, not_done = wait(not_done, timeout=1.0, return_when="FIRST_COMPLETED")
        # a future cancelled without being notified never counts as done for wait()
        cancelled = {f for f in not_done if f.cancelled()}
        done, not_done = done | cancelled, not_done - cancelled
        for future in done:
            if not settle(futures[future], future):
                lost.extend(futures[future])
    if lost:
        backend.restart()
    return sorted(lost)
