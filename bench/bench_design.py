"""Design studies (``multibody design``): evaluations per second on each executor.

* ``sphere`` with a fixed artificial cost (``SPHERE_COST`` s of CPU per evaluation, a busy
  loop, so that a worker loads a core as a real evaluation does): the same ``SPHERE_DESIGNS``
  designs through the in-process executor (the baseline), a local pool of 1 and of 2
  processes, and a 2-worker Dask LocalCluster. Parallel efficiency at 2 workers =
  t(1 worker) / (2 t(2 workers)). On a shared machine whose other users leave less than two
  free cores this is bounded by the cores, not by the executors; the same designs with a
  ``SPHERE_COST`` s *sleep* instead (no core needed) show the executors' own efficiency.
* Per-task overhead: the sphere at zero cost, ``OVERHEAD_DESIGNS`` designs, Dask LocalCluster
  against the local pool, both with 2 workers: wall time per task is then all overhead
  (pickling the problem and the design, scheduling, the round trip).
* ``passive_arm2_case1``, the book's case 1 (Seifried (2014) Sect. 7.4.3: 100 particles, 22
  iterations, "approximately 240 s"; goal here <= 24 s on 2 workers): the whole study on a
  2-process pool, then a fixed batch of its designs from the last iterations (where most are
  feasible and cost a zero-dynamics integration) on 1 and 2 pool processes and on the Dask
  LocalCluster. ``BENCH_DESIGN_CASE1=batch`` skips the study and takes the batch around the
  printed optimum instead (+-5 % of each bound width), ``BENCH_DESIGN_CASE1=0`` skips case 1.

All backends are started and warmed up (their processes spawned, the problem's model built in
each) before any is timed; then they take turns ``ROUNDS`` times and each keeps its best, so
that the machine's noise is spread over all of them. The machine is shared: the
1-minute load average is recorded with every entry.
"""

from __future__ import annotations

import os
import time

import numpy as np

from multibody_control.design.executors import evaluate_batch, open_executor
from multibody_control.design.problem import PROBLEMS, get_problem

SPHERE_COST = 0.02      # s of CPU per evaluation
SPHERE_DESIGNS = 80
OVERHEAD_DESIGNS = 400
CASE1_BATCH = 60        # designs of the last iterations of the case-1 study
ROUNDS = 3
BOOK_CASE1_S = 240.0    # Seifried (2014) Sect. 7.4.3, case 1: "approximately 240 s"
TARGET_CASE1_S = 24.0


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _timed_interleaved(backends: dict, problem, X, rounds: int) -> dict:
    """Best wall time [s] of evaluating every row of X on each backend, the backends taking
    turns ``rounds`` times (the machine's noise spread over all of them)."""
    for backend in backends.values():  # warm up: processes started, the model built in each
        evaluate_batch(backend, problem, X[: max(4, backend.workers * 2)])
    best = dict.fromkeys(backends, float("inf"))
    for _ in range(rounds):
        for key, backend in backends.items():
            start = time.perf_counter()
            out = evaluate_batch(backend, problem, X)
            best[key] = min(best[key], time.perf_counter() - start)
            assert len(out) == len(X)
    return best


def _entry(name, t, n, base_t, base_name, **extra) -> dict:
    return {"name": name, "baseline": base_name, "ratio": t / base_t,
            "time_us": 1e6 * t / n, "baseline_time_us": 1e6 * base_t / n,
            "evaluations_per_s": n / t, "load_avg_1min": _load(), **extra}


def _throughputs(problem, X, label, rounds=ROUNDS) -> tuple[list, dict]:
    configs = (("inprocess", None), ("pool", 1), ("pool", 2), ("dask", 2))
    backends = {c: open_executor(*c) for c in configs}
    try:
        times = _timed_interleaved(backends, problem, X, rounds)
    finally:
        for backend in backends.values():
            backend.close()
    n = len(X)
    t0, t1, t2, td = (times[("inprocess", None)], times[("pool", 1)], times[("pool", 2)],
                      times[("dask", 2)])
    efficiency = t1 / (2 * t2)
    entries = [
        _entry(f"design_{label}_pool1", t1, n, t0, "in-process, same designs"),
        _entry(f"design_{label}_pool2", t2, n, t1, "pool of 1, same designs",
               parallel_efficiency=efficiency, speedup=t1 / t2),
        _entry(f"design_{label}_dask2", td, n, t2, "pool of 2, same designs",
               parallel_efficiency=t1 / (2 * td)),
    ]
    return entries, times


def run() -> list:
    rng = np.random.default_rng(7)
    entries = []

    sphere = get_problem("sphere", dim=3, cost=SPHERE_COST)
    X = sphere.lower + rng.random((SPHERE_DESIGNS, 3)) * (sphere.upper - sphere.lower)
    sphere_entries, _ = _throughputs(sphere, X, f"sphere_{int(SPHERE_COST * 1e3)}ms")
    entries += sphere_entries
    sleeper = get_problem("sphere", dim=3, sleep=SPHERE_COST)
    sleep_entries, _ = _throughputs(sleeper, X, f"sphere_sleep_{int(SPHERE_COST * 1e3)}ms")
    entries += sleep_entries

    free = get_problem("sphere", dim=3)
    X = free.lower + rng.random((OVERHEAD_DESIGNS, 3)) * (free.upper - free.lower)
    backends = {"pool": open_executor("pool", 2), "dask": open_executor("dask", 2)}
    try:
        times = _timed_interleaved(backends, free, X, ROUNDS)
    finally:
        for backend in backends.values():
            backend.close()
    t_pool, t_dask = times["pool"], times["dask"]
    entries.append(_entry("design_task_overhead_dask2", t_dask, OVERHEAD_DESIGNS, t_pool,
                          "pool of 2, zero-cost sphere"))

    mode = os.environ.get("BENCH_DESIGN_CASE1", "full")
    if mode != "0" and "passive_arm2_case1" in PROBLEMS:
        entries += _case1(full=mode == "full")
    return entries


def _case1(full: bool) -> list:
    from pathlib import Path

    from multibody_control.design.study import load_study, run_study

    study = load_study(Path(__file__).resolve().parent.parent / "config" / "designs"
                       / "passive_arm2_case1.yaml")
    problem = study.make_problem()
    entries = []
    if full:
        result = run_study(study, kind="pool", workers=2, progress=False)
        wall = result.run_wall_time
        n = len(result.records)
        cpu = sum(r.seconds for r in result.records)
        entries.append({
            "name": "design_case1_study_pool2", "evaluations": n,
            "feasible": sum(r.evaluation.ok for r in result.records),
            "wall_s": round(wall, 2), "evaluations_per_s": round(n / wall, 1),
            "cpu_s_in_evaluations": round(cpu, 2), "ideal_wall_s_2_idle_cores": round(cpu / 2, 2),
            "book_s": BOOK_CASE1_S, "target_s": TARGET_CASE1_S,
            "meets_target": wall <= TARGET_CASE1_S,
            "best_criterion": result.best.evaluation.value if result.best else None,
            "best_ok": bool(result.best and result.best.evaluation.ok),
            "load_avg_1min": _load(),
        })
        X = np.array([r.x for r in result.records[-CASE1_BATCH:]])
    else:  # designs around the printed optimum (Table 7.3), as in a swarm's last iterations
        rng = np.random.default_rng(3)
        ref = np.array([study.reference["parameters"][n] for n in study.names])
        width = study.upper - study.lower
        X = np.clip(ref + 0.05 * width * rng.uniform(-1, 1, (CASE1_BATCH, len(ref))),
                    study.lower, study.upper)
    feasible = sum(problem.evaluate(x).ok for x in X[:20])
    batch, _ = _throughputs(problem, X, "case1_batch", rounds=2)
    for e in batch:
        e["feasible_in_first_20"] = feasible
    return entries + batch
