"""Timing helpers for the benchmarks (every figure is a ratio to a baseline timed in the same
run), and the one set-up of the design studies the flexible suites run (full or reduced)."""

from __future__ import annotations

import gc
import os
import timeit
from pathlib import Path


def per_call(fn, number: int = 2000, repeat: int = 7, timer=timeit.default_timer) -> float:
    """Best-of-``repeat`` seconds per call of ``fn`` (the minimum is the least noisy estimate);
    ``timer`` e.g. ``time.process_time`` for the CPU time of this process (single-threaded code
    on a loaded machine: the time the process waits for a core is not counted)."""
    gc.disable()
    try:
        return min(timeit.repeat(fn, number=number, repeat=repeat, timer=timer)) / number
    finally:
        gc.enable()


def ratio_entry(name: str, candidate, baseline, baseline_name: str, target: float | None = None,
                number: int = 2000, repeat: int = 7, rounds: int = 3,
                timer=timeit.default_timer) -> dict:
    """Time ``candidate`` and ``baseline`` interleaved ``rounds`` times; report the best of each.

    Interleaving spreads the machine's noise over both, so the ratio is stable even when the
    absolute times are not.
    """
    cand, base = float("inf"), float("inf")
    for _ in range(rounds):
        base = min(base, per_call(baseline, number, repeat, timer))
        cand = min(cand, per_call(candidate, number, repeat, timer))
    entry = {
        "name": name,
        "baseline": baseline_name,
        "ratio": cand / base,
        "time_us": cand * 1e6,
        "baseline_time_us": base * 1e6,
    }
    if target is not None:
        entry["target_ratio"] = target
        entry["meets_target"] = bool(entry["ratio"] <= target)
    return entry


# -- design studies in bench: one set-up for the flexible suites ------------------------------

def load_avg() -> float:
    """The machine's 1-minute load average (recorded beside the wall times: it is shared)."""
    return round(os.getloadavg()[0], 2)


def bench_study(path, env: str, particles: int, iterations: int, options: dict | None = None,
                tag: str = "", full: bool | None = None):
    """The study file ``path`` for a benchmark, full or reduced by environment variables.

    ``{env}=full`` runs the file's swarm as written; otherwise a reduced swarm of
    ``{env}_PARTICLES`` x ``{env}_ITERATIONS`` (defaults ``particles`` x ``iterations``), named
    ``<stem>[_tag]_reduced``. ``options`` update the file's problem options (the name then
    carries ``tag``); ``full`` overrides the environment.

    Returns
    -------
    study : multibody_control.design.study.Study
    full : bool
    """
    from multibody_control.design.study import load_study, study_from_mapping
    from multibody_dynamics.yaml_io import load_yaml

    path = Path(path)
    if full is None:
        full = os.environ.get(env, "") == "full"
    if full and not options:
        return load_study(path), True
    raw = load_yaml(path.read_text())
    raw.setdefault("options", {}).update(options or {})
    name = path.stem + (f"_{tag}" if tag else "")
    if not full:
        raw["optimizer"]["particles"] = int(os.environ.get(f"{env}_PARTICLES", particles))
        raw["optimizer"]["iterations"] = int(os.environ.get(f"{env}_ITERATIONS", iterations))
        name += "_reduced"
    return study_from_mapping(raw, path, name=name), full


def run_bench_study(study, out=None, executor=None, kind: str = "pool", workers: int = 2,
                    plots: bool = False, env: str | None = None):
    """Run ``study`` (no progress bar; ``out`` overwritten) on ``executor`` or a new
    ``kind``/``workers`` backend (default: a local pool of 2); the StudyResult.

    With ``env`` and ``out``, a long study runs in parts: ``{env}_STOP_AFTER=N`` stops after N
    iterations (checkpointed in ``out``), ``{env}_RESUME=1`` continues from the checkpoint
    there (if any; the swarm's state is in it, so the parts end as one run would).
    """
    from multibody_control.design.study import CHECKPOINT, run_study

    stop, resume = None, False
    if env is not None and out is not None:
        stop = int(os.environ[f"{env}_STOP_AFTER"]) if os.environ.get(f"{env}_STOP_AFTER") \
            else None
        resume = os.environ.get(f"{env}_RESUME") == "1" and (Path(out) / CHECKPOINT).is_file()
    return run_study(study, out, executor=executor, kind=kind, workers=workers,
                     progress=False, plots=plots, overwrite=out is not None and not resume,
                     resume=resume, stop_after=stop)


def study_fields(study, result, full: bool) -> dict:
    """The figures every bench study entry carries: swarm size, iterations done, evaluations,
    accepted ones, wall time of the iterations [s] (of all parts of a study run in parts),
    evaluations per second, the CPU time spent in the evaluations [s] and its mean per
    evaluation, the load average."""
    records, wall = result.records, result.wall_time
    cpu = float(sum(r.seconds for r in records))
    return {"particles": study.optimizer.particles, "iterations": study.optimizer.iterations,
            "full": bool(full), "iterations_done": result.iterations_done,
            "complete": result.complete, "evaluations": len(records),
            "feasible": sum(r.evaluation.ok for r in records), "wall_s": wall,
            "evaluations_per_s": len(records) / wall if wall > 0 else None,
            "cpu_s_in_evaluations": cpu,
            "cpu_s_per_evaluation": cpu / len(records) if records else None,
            "load_avg_1min": load_avg()}


def selected(env: str, choices: tuple[str, ...]) -> tuple[str, ...]:
    """The comma-separated names in ``{env}`` (default: all ``choices``), checked."""
    value = os.environ.get(env, "")
    names = tuple(n.strip() for n in value.split(",") if n.strip()) or choices
    unknown = [n for n in names if n not in choices]
    if unknown:
        raise ValueError(f"{env}: unknown {', '.join(unknown)}; expected some of "
                         f"{', '.join(choices)}")
    return names


def previous_entries(suite: str, names) -> list[dict]:
    """The entries ``names`` (None: all) of ``suite`` from the last bench/results.json (kept
    when a run measures only some of a suite's studies); those missing are left out."""
    import json

    path = Path(__file__).resolve().parent / "results.json"
    if not path.exists():
        return []
    old = {e["name"]: e for e in json.loads(path.read_text()).get("suites", {}).get(suite, [])}
    return list(old.values()) if names is None else [old[n] for n in names if n in old]
