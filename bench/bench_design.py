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
  (pickling the problem and the design, scheduling, the round trip). Once with one design per
  task (``design_task_overhead_dask2``), once as the studies send them, in chunks of shrinking
  size (``design_chunked_overhead_dask2``: overhead per design; and the chunked pool against
  the pool with one design per task).
* ``passive_arm2_case1``, the book's case 1 (Seifried (2014) Sect. 7.4.3: 100 particles, 22
  iterations, "approximately 240 s"; goal here <= 24 s on 2 workers): first the criterion
  (7.26) of ``CASE1_BATCH`` designs around the printed optimum (+-5 % of each bound width) with
  the compiled RK4 against the DOP853 reference (CPU time in this process, and the largest
  relative difference of the values), and the RK4 of their zero dynamics on the planar tree
  dynamics against the 6-component tree kernel (CPU time of the integrations alone, and whether
  the integrals are bit for bit the same); then the whole study on warm backends (processes
  started, the model built and the kernels loaded in each) with 1 and 2 pool processes and a
  2-worker Dask LocalCluster: wall time, evaluations per second, parallel efficiency
  t(1) / (2 t(2)), and whether every backend gave the same 2200 evaluations.
  ``BENCH_DESIGN_CASE1=batch`` replaces the studies by the batch of designs on each backend,
  ``BENCH_DESIGN_CASE1=0`` skips case 1.
* Workers to finish in one minute (after a full case-1 run): case 4 (Table 7.6, 300 particles
  x 10 iterations; its study is run here on 2 processes for the mean CPU cost of an
  evaluation as the swarm visits them) and the 14-variable concurrent study of the flexible
  cart manipulator (140 particles x 45 iterations; the mean CPU cost of an evaluation of that
  study on a pool of 2, from suite ``flexible_scale`` in bench/results.json):
  N = ceil(E (c / efficiency) / 60 s) for a local pool and
  ceil(E (c / efficiency + o) / 60 s) for Dask, with c the CPU seconds per evaluation, the
  efficiency of the case-1 study at 2 workers and o the Dask per-task overhead over the pool
  (per worker: twice the wall-time difference per design at 2 workers, designs sent in chunks
  as a study sends them).

All backends are started and warmed up (their processes spawned, the problem's model built in
each) before any is timed; then they take turns ``ROUNDS`` times and each keeps its best, so
that the machine's noise is spread over all of them. The machine is shared: the
1-minute load average is recorded with every entry.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np

from multibody_control.design.executors import chunks, evaluate_batch, open_executor
from multibody_control.design.problem import PROBLEMS, get_problem

SPHERE_COST = 0.02      # s of CPU per evaluation
SPHERE_DESIGNS = 80
OVERHEAD_DESIGNS = 400
CASE1_BATCH = 60        # designs around the printed case-1 optimum
DESIGNS = Path(__file__).resolve().parent.parent / "config" / "designs"
ROUNDS = 3
BOOK_CASE1_S = 240.0    # Seifried (2014) Sect. 7.4.3, case 1: "approximately 240 s"
TARGET_CASE1_S = 24.0


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _timed_interleaved(backends: dict, problem, X, rounds: int, chunked=None) -> dict:
    """Best wall time [s] of evaluating every row of X on each backend, the backends taking
    turns ``rounds`` times (the machine's noise spread over all of them). ``chunked``: as
    :func:`evaluate_batch`, or a mapping backend key -> that option."""
    def option(key):
        return chunked.get(key) if isinstance(chunked, dict) else chunked

    for backend in backends.values():  # warm up: processes started, the model built in each
        evaluate_batch(backend, problem, X[: max(4, backend.workers * 2)])
    best = dict.fromkeys(backends, float("inf"))
    for _ in range(rounds):
        for key, backend in backends.items():
            start = time.perf_counter()
            out = evaluate_batch(backend, problem, X, chunked=option(key))
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

    entries += _overheads(rng)

    mode = os.environ.get("BENCH_DESIGN_CASE1", "full")
    if mode != "0" and "passive_arm2_case1" in PROBLEMS:
        entries += _case1(full=mode == "full")
        by_name = {e["name"]: e for e in entries}
        if "design_case1_study_pool2" in by_name:
            eff = by_name["design_case1_study_pool2"]["parallel_efficiency"]
            overhead = (by_name["design_chunked_overhead_dask2"]["time_us"]
                        - by_name["design_chunked_overhead_dask2"]["baseline_time_us"]) * 2e-6
            entries += _workers_needed(min(eff, 1.0), max(overhead, 0.0))
    return entries


def _overheads(rng) -> list:
    """Zero-cost sphere on 2 workers: Dask against the pool with one design per task, then
    both with the designs in chunks as a study sends them, and the chunked pool against the
    pool with one design per task."""
    free = get_problem("sphere", dim=3)
    X = free.lower + rng.random((OVERHEAD_DESIGNS, 3)) * (free.upper - free.lower)
    pool, dask = open_executor("pool", 2), open_executor("dask", 2)
    backends = {"pool": pool, "dask": dask, "pool_chunked": pool, "dask_chunked": dask}
    chunked = {"pool": False, "dask": False, "pool_chunked": True, "dask_chunked": True}
    try:
        t = _timed_interleaved(backends, free, X, ROUNDS, chunked)
    finally:
        pool.close()
        dask.close()
    n = OVERHEAD_DESIGNS
    return [
        _entry("design_task_overhead_dask2", t["dask"], n, t["pool"],
               "pool of 2, zero-cost sphere, one design per task"),
        _entry("design_chunked_overhead_dask2", t["dask_chunked"], n, t["pool_chunked"],
               "pool of 2, zero-cost sphere, designs in chunks (as a study)",
               tasks=len(chunks(list(range(n)), 2))),
        _entry("design_chunked_overhead_pool2", t["pool_chunked"], n, t["pool"],
               "pool of 2, zero-cost sphere, one design per task",
               tasks=len(chunks(list(range(n)), 2))),
    ]


def _kernel_speed(problem, X) -> dict:
    """The RK4 of (7.26) on the planar tree dynamics against the 6-component tree kernel,
    integrations alone, the feasible designs of ``X``, best of ``ROUNDS`` CPU times."""
    from multibody_control.design.criteria import combined_output_selection
    from multibody_control.design.fast_zero import CompiledZeroDynamics, rk4_steps
    from multibody_dynamics.fast_step import pack_tree

    runs = []
    for x in X:
        evaluation = problem.evaluate(x)
        if not evaluation.ok:
            continue
        arm, _, gamma = problem.build(x)
        _, T = combined_output_selection(arm.model, gamma)
        lam = np.array([complex(*z) for z in evaluation.info["eigenvalues"]])
        planar = CompiledZeroDynamics(arm.model, T, arm.model.q_rest)
        general = CompiledZeroDynamics(arm.model, T, arm.model.q_rest)
        general.tree, general.planar = pack_tree(arm.model.pin_model), False
        runs.append((planar, general, rk4_steps(problem.t1, lam)))
    q0 = np.full(2, problem.disturbance)
    best = {"planar": float("inf"), "general": float("inf")}
    ends = {}
    for _ in range(ROUNDS):
        for key, k in (("general", 1), ("planar", 0)):
            start = time.thread_time()
            ends[key] = [r[k].integrate(q0, 0 * q0, problem.t1, r[2])[2] for r in runs]
            best[key] = min(best[key], time.thread_time() - start)
    steps = sum(r[2] for r in runs)
    same = all(np.array_equal(a, b) for a, b in zip(ends["planar"], ends["general"]))
    return _entry("design_case1_zero_dynamics_planar", best["planar"], len(runs),
                  best["general"], "6-component tree kernel (fast_step), same designs (CPU)",
                  steps=steps, us_per_step=1e6 * best["planar"] / steps,
                  baseline_us_per_step=1e6 * best["general"] / steps,
                  bitwise_equal_integrals=same)


def _study(name: str):
    from multibody_control.design.study import load_study

    return load_study(DESIGNS / f"{name}.yaml")


def _criterion_speed(problem_name: str, X, label: str) -> dict:
    """The criterion of the same designs with the compiled RK4 (default) against the DOP853
    reference, in this process, interleaved, best of ``ROUNDS``; the largest relative
    difference of the feasible designs' values beside the ratio."""
    fast, ref = get_problem(problem_name), get_problem(problem_name, integrator="dop853")
    best = {"rk4": float("inf"), "dop853": float("inf")}
    values = {}
    fast.evaluate(X[0]), ref.evaluate(X[0])  # model built, compiled kernel loaded
    for _ in range(ROUNDS):
        for key, problem in (("dop853", ref), ("rk4", fast)):
            start = time.thread_time()
            values[key] = [problem.evaluate(x) for x in X]
            best[key] = min(best[key], time.thread_time() - start)
    feasible = [i for i, e in enumerate(values["dop853"]) if e.ok]
    same_flags = all(a.ok == b.ok for a, b in zip(values["rk4"], values["dop853"]))
    diff = max((abs(values["rk4"][i].value / values["dop853"][i].value - 1) for i in feasible),
               default=None)
    return _entry(f"design_{label}_criterion_rk4", best["rk4"], len(X), best["dop853"],
                  "DOP853 criterion, same designs (CPU)", feasible=len(feasible),
                  same_feasibility=same_flags, max_relative_difference=diff)


def _case1(full: bool) -> list:
    """Case 1: the criterion's speed-up, then the whole study on warm backends (full) or a
    batch of designs around the printed optimum."""
    from multibody_control.design.study import run_study

    study = _study("passive_arm2_case1")
    problem = study.make_problem()
    rng = np.random.default_rng(3)  # designs around the printed optimum (Table 7.3)
    ref = np.array([study.reference["parameters"][n] for n in study.names])
    width = study.upper - study.lower
    X = np.clip(ref + 0.05 * width * rng.uniform(-1, 1, (CASE1_BATCH, len(ref))),
                study.lower, study.upper)
    entries = [_criterion_speed("passive_arm2_case1", X, "case1"), _kernel_speed(problem, X)]
    if not full:
        batch, _ = _throughputs(problem, X, "case1_batch", rounds=2)
        return entries + batch
    configs = (("pool", 1), ("pool", 2), ("dask", 2))
    backends = {c: open_executor(*c) for c in configs}
    walls, results = {}, {}
    try:
        for backend in backends.values():  # processes started, model built, kernels loaded
            evaluate_batch(backend, problem, X[: max(4, backend.workers * 2)])
        for c, backend in backends.items():
            result = run_study(study, executor=backend, progress=False, plots=False)
            walls[c], results[c] = result.run_wall_time, result
    finally:
        for backend in backends.values():
            backend.close()
    same = len({tuple(r.evaluation.value for r in res.records) for res in results.values()}) == 1
    t1, t2 = walls[("pool", 1)], walls[("pool", 2)]
    for (kind, w), name, base, base_name in (
            (("pool", 1), "design_case1_study_pool1", t1, "itself"),
            (("pool", 2), "design_case1_study_pool2", t1, "pool of 1, same study"),
            (("dask", 2), "design_case1_study_dask2", t2, "pool of 2, same study")):
        result = results[(kind, w)]
        n = len(result.records)
        cpu = sum(r.seconds for r in result.records)
        extra = {"workers": w, "evaluations": n, "wall_s": round(walls[(kind, w)], 2),
                 "cpu_s_in_evaluations": round(cpu, 2),
                 "cpu_ms_per_evaluation": round(1e3 * cpu / n, 2),
                 "feasible": sum(r.evaluation.ok for r in result.records),
                 "best_criterion": result.best.evaluation.value if result.best else None,
                 "same_evaluations_on_every_backend": same,
                 "book_s": BOOK_CASE1_S, "target_s": TARGET_CASE1_S}
        if w == 2:
            extra["parallel_efficiency"] = t1 / (2 * walls[(kind, w)])
            extra["meets_target"] = walls[(kind, w)] <= TARGET_CASE1_S
        entries.append(_entry(name, walls[(kind, w)], n, base, base_name, **extra))
    return entries


#: Studies to finish in one minute: (label, problem whose evaluations are timed, evaluations,
#: what the estimate assumes)
SCALE_STUDIES = (
    ("case4", "passive_arm4_case4", 300 * 10,
     "Seifried (2014) Table 7.6: 300 particles x 10 iterations; cost per evaluation from the "
     "case-4 study run here"),
    ("concurrent14", "flexible_cart_manipulator_shape_output", 140 * 45,
     "Seifried (2014) Sect. 7.5.2.3, the 14-variable concurrent design: 140 particles x 45 "
     "iterations; mean CPU cost per evaluation of that study as its swarm visits the designs "
     "(suite flexible_scale, 40 x 10 swarm on a pool of 2)"),
)
#: The concurrent study's measured cost: suite ``flexible_scale``'s entry (bench/results.json)
CONCURRENT_COST_ENTRY = ("flexible_scale", "flexscale_cart_concurrent_pool2")
MINUTE_S = 60.0


def _workers_needed(efficiency: float, overhead_s: float) -> list:
    """Workers for each of :data:`SCALE_STUDIES` to finish in one minute, from the measured
    cost per evaluation, the case-1 parallel efficiency at 2 workers and the Dask per-task
    overhead: N = ceil(E (c / efficiency + o) / 60 s)."""
    from multibody_control.design.study import run_study

    entries = []
    for label, name, evaluations, basis in SCALE_STUDIES:
        if label == "case4" and name not in PROBLEMS:
            continue
        if label == "case4":  # the whole study, as the optimizer visits it
            with open_executor("pool", 2) as backend:
                result = run_study(_study(name), executor=backend, progress=False, plots=False)
            cost = sum(r.seconds for r in result.records) / len(result.records)
            sample = len(result.records)
        else:  # the swarm's own mean cost, measured by suite flexible_scale
            # (random designs over the whole box are nearly all rejected at step 1 in 0.4 ms,
            # and the first call builds the model: neither is the cost of a study)
            from bench.common import previous_entries

            suite, entry = CONCURRENT_COST_ENTRY
            found = previous_entries(suite, [entry])
            if not found:
                continue
            cost = found[0]["cpu_s_per_evaluation"]
            sample = found[0]["evaluations"]
        local = math.ceil(evaluations * cost / efficiency / MINUTE_S)
        dask = math.ceil(evaluations * (cost / efficiency + overhead_s) / MINUTE_S)
        entries.append({"name": f"design_workers_1min_{label}", "problem": name,
                        "evaluations": evaluations, "cpu_s_per_evaluation": cost,
                        "sample": sample, "parallel_efficiency": efficiency,
                        "dask_overhead_s_per_task": overhead_s,
                        "workers_local": local, "workers_dask": dask, "basis": basis,
                        "load_avg_1min": _load()})
    return entries
