"""Output design of the flexible cart manipulator (Seifried 2014 Sect. 7.5.2.2).

* ``designs``: the criterion (7.15)-(7.17) of the collocated output (the book's initial design,
  88.7 mm), of Γ0 (7.30) alone, and of the book's printed designs (7.32), (7.33) (1.6 mm,
  1.7 mm), each on Γ0 of our model and on the printed Γ0;
* ``study``: the swarm of config/designs/flexible_cart_manipulator_output.yaml on a local pool
  of 2 (:func:`bench.common.bench_study`: by default a reduced swarm,
  ``BENCH_CARTDESIGN_PARTICLES`` x ``..._ITERATIONS``, 24 x 8; ``BENCH_CARTDESIGN=full`` runs
  the file as written, 120 particles, 30 iterations);
* ``cost``: one evaluation of a minimum-phase design against its step 1 alone and against the
  same evaluation with the Python internal dynamics (``compiled = False``), timed in this run.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bench.bench_flexible_design import compiled_speedup
from bench.common import bench_study, run_bench_study, study_fields
from multibody_control.design.flexible_cart_output import (
    BOOK_DGAMMA_732,
    BOOK_DGAMMA_733,
    FlexibleCartOutputProblem,
)

STUDY = Path(__file__).resolve().parent.parent / "config" / "designs" / \
    "flexible_cart_manipulator_output.yaml"
#: (label, gamma0 option, design vector, the book's max end-effector error [mm] or None)
DESIGNS = (
    ("collocated output y = q_r", "zero", np.zeros(6), 88.7),   # Sect. 7.5.2.1, Fig. 7.15
    ("Γ0 (7.30) alone", "geometric", np.zeros(6), None),         # "non-minimum phase"
    ("Γ0 + ΔΓ (7.32)", "geometric", BOOK_DGAMMA_732, 1.6),       # Sect. 7.5.2.2, Fig. 7.16
    ("Γ0 + ΔΓ (7.33)", "geometric", BOOK_DGAMMA_733, 1.7),
    ("printed Γ0 + ΔΓ (7.32)", "printed", BOOK_DGAMMA_732, 1.6),
    ("printed Γ0 + ΔΓ (7.33)", "printed", BOOK_DGAMMA_733, 1.7),
)


def _designs() -> list:
    rows = []
    for label, g0, x, book in DESIGNS:
        p = FlexibleCartOutputProblem(gamma0=g0)
        ev = p.evaluate(x)
        rows.append({"name": f"cartdesign_{label}", "label": label, "gamma0": g0,
                     "damping": p.damping, "ok": ev.ok,
                     "error_mm": 1e3 * ev.value if ev.ok else None, "book_mm": book,
                     "message": ev.message,
                     "spectral_abscissa": ev.info.get("spectral_abscissa")})
    return rows


def _study() -> dict:
    study, full = bench_study(STUDY, "BENCH_CARTDESIGN", 24, 8)
    result = run_bench_study(study)
    best = result.best
    return {
        "name": "cartdesign_study_pool2", "damping": study.options.get("damping", 0.02),
        **study_fields(study, result, full),
        "best": {n: round(float(v), 3) for n, v in zip(study.names, best.x)},
        "best_ok": bool(best.evaluation.ok),
        "best_error_mm": 1e3 * best.evaluation.value if best.evaluation.ok else None,
        "best_abscissa": best.evaluation.info.get("spectral_abscissa")}


def _cost() -> dict:
    p = FlexibleCartOutputProblem()
    p.evaluate(BOOK_DGAMMA_732)  # warm: model, compiled kernels
    t = time.perf_counter()
    p.zero_dynamics(BOOK_DGAMMA_732)
    step1 = time.perf_counter() - t
    t = time.perf_counter()
    p.evaluate(BOOK_DGAMMA_732)
    full = time.perf_counter() - t
    return {"name": "cartdesign_evaluation_cost", "evaluation_s": full, "step1_s": step1,
            "ratio_to_step1": full / step1, **compiled_speedup(p, BOOK_DGAMMA_732, "")}


def run() -> list:
    entries = _designs()
    entries.append(_study())
    entries.append(_cost())
    return entries
