"""Timing helpers for the benchmarks: every figure is a ratio to a baseline timed in the same
run."""

from __future__ import annotations

import gc
import timeit


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
