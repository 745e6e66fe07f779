"""Output design of the Sect. 6.4 flexible manipulator (Seifried 2014 Sect. 7.3.2).

* ``damping``: zero-dynamics abscissa of the book's Γ (7.18) and of Γ (6.38) for modal damping
  ratios 0-10 %, and the share of minimum-phase designs in a fixed random sample of the
  +-20 % box (step 1 only);
* ``book_gamma``: Γ (7.18) on the model with the study's damping (criterion, eigenvalues);
* ``study``: the swarm of config/designs/flexible_manipulator_book_output.yaml on a local pool
  of 2 (:func:`bench.common.bench_study`: by default a reduced swarm,
  ``BENCH_FLEXDESIGN_PARTICLES`` x ``..._ITERATIONS``, 30 x 10; ``BENCH_FLEXDESIGN=full`` runs
  the file as written, 100 particles, 20 iterations; its wall time is in the results);
* ``optimum``: the swarm's best Γ for every damping ratio of the sweep, and with the joint PD
  law of Sect. 6.4.1 (:func:`~multibody_control.inversion.flexible.track_flexible`), beside the
  Sect. 6.4 designs (rigid, quasi-static) on the same damped model;
* ``cost``: one evaluation against its step 1, against the general classical inversion
  (:func:`~multibody_control.inversion.flexible.invert_flexible`, ``"classical"``) of the same
  Γ and against the same evaluation with the Python internal dynamics (``compiled = False``,
  the implementation before the compiled kernel; criterion values of both kept), timed in
  this run.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bench.common import bench_study, run_bench_study, study_fields
from multibody_control.design.flexible_output import (
    BOOK_GAMMA_638,
    BOOK_GAMMA_718,
    FlexibleOutputProblem,
    gamma_matrix,
)

STUDY = Path(__file__).resolve().parent.parent / "config" / "designs" / \
    "flexible_manipulator_book_output.yaml"
ZETAS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1)
STUDY_ZETAS = (0.005, 0.05)  # reduced swarms beside the study's 2 %
SAMPLE = 400          # random designs of the box for the minimum-phase share
BOOK_MM = 0.28        # Seifried (2014) Sect. 7.3.2: classical inversion + PID, Fig. 7.3


def _x(gamma):
    return np.array([gamma[0, 0], gamma[0, 1], *gamma[1]])


def _damping() -> list:
    rng = np.random.default_rng(0)
    box = FlexibleOutputProblem()
    X = box.lower + (box.upper - box.lower) * rng.random((SAMPLE, 6))
    rows = []
    for z in ZETAS:
        p = FlexibleOutputProblem(damping=z)
        share = np.mean([np.max(p.zero_dynamics(x).real) < 0 for x in X])
        rows.append({"name": f"flexdesign_damping_{z:g}", "damping": z,
                     "abscissa_718": float(np.max(p.zero_dynamics(_x(BOOK_GAMMA_718)).real)),
                     "abscissa_638": float(np.max(p.zero_dynamics(_x(BOOK_GAMMA_638)).real)),
                     "min_phase_share": float(share), "sample": SAMPLE})
    return rows


def _study(damping: float | None = None):
    """The study file through the shared bench set-up (``BENCH_FLEXDESIGN``); with ``damping``
    always a reduced swarm on that damping."""
    options = None if damping is None else {"damping": damping}
    study, full = bench_study(STUDY, "BENCH_FLEXDESIGN", 30, 10, options,
                              tag="" if damping is None else f"damping_{damping:g}",
                              full=False if damping is not None else None)
    return study, run_bench_study(study), full


def _study_entry(name, study, result, full) -> dict:
    best = result.best
    return {
        "name": name, "damping": study.options.get("damping", 0.02),
        **study_fields(study, result, full),
        "best": {n: round(float(v), 3) for n, v in zip(study.names, best.x)},
        "best_ok": bool(best.evaluation.ok), "best_error_mm": 1e3 * best.evaluation.value,
        "best_abscissa": best.evaluation.info.get("spectral_abscissa")}


def _designs(chain, gamma_opt) -> dict:
    """Max end-point error [mm] of the inverse models (no feedback) and of the classical
    inversion tracked with the joint PD law, on ``chain``."""
    from multibody_control.design.flexible_output import book_task
    from multibody_control.inversion.flexible import invert_flexible, track_flexible

    task = book_task()
    out = {}
    for label, method, gamma in (("rigid", "rigid", None), ("quasi_static", "quasi_static", None),
                                 ("classical_optimum", "classical", gamma_opt)):
        res = invert_flexible(chain, task, method, gamma=gamma, dt=1e-3)
        tr = track_flexible(chain, res, task, frequency=10.0, damping=1.0, t_end=1.5)
        out[f"{label}_pd_mm"] = 1e3 * tr.max_error
        out[f"{label}_success"] = bool(res.success)
    return out


def compiled_speedup(p, x, prefix: str, repeats: int = 3) -> dict:
    """One evaluation of ``x`` with the compiled internal dynamics against the Python path
    (``compiled = False``: the implementation before the kernel), alternated ``repeats`` times
    in this run, medians [s], and the two criterion values."""
    times: dict = {True: [], False: []}
    values = {}
    for _ in range(repeats):
        for compiled in (False, True):
            p.compiled = compiled
            t = time.perf_counter()
            values[compiled] = p.evaluate(x).value
            times[compiled].append(time.perf_counter() - t)
    p.compiled = True
    fast, slow = float(np.median(times[True])), float(np.median(times[False]))
    return {f"{prefix}evaluation_python_s": slow, f"{prefix}speedup_vs_python": slow / fast,
            f"{prefix}criterion_compiled": values[True],
            f"{prefix}criterion_python": values[False]}


def _cost(x) -> dict:
    from multibody_control.inversion.flexible import invert_flexible

    p = FlexibleOutputProblem()
    m = p.model()
    p.evaluate(x)  # warm (compiled kernels)
    t = time.perf_counter()
    p.zero_dynamics(x)
    step1 = time.perf_counter() - t
    t = time.perf_counter()
    p.evaluate(x)
    full = time.perf_counter() - t
    speedup = compiled_speedup(p, x, "")
    t = time.perf_counter()
    invert_flexible(m.chain, m.task, "classical", gamma=gamma_matrix(x), dt=p.dt)
    general = time.perf_counter() - t
    return {"name": "flexdesign_evaluation_cost", "evaluation_s": full, "step1_s": step1,
            "ratio_to_step1": full / step1, "invert_flexible_classical_s": general,
            "ratio_to_invert_flexible": full / general, **speedup}


def run() -> list:
    entries = _damping()
    p = FlexibleOutputProblem()
    ev = p.evaluate(_x(BOOK_GAMMA_718))
    entries.append({"name": "flexdesign_book_gamma_718", "damping": p.damping,
                    "ok": ev.ok, "criterion": ev.value, "message": ev.message,
                    "spectral_abscissa": ev.info.get("spectral_abscissa")})
    study, result, full = _study()
    best = result.best
    x = np.asarray(best.x)
    entries.append(_study_entry("flexdesign_study_pool2", study, result, full))
    for z in STUDY_ZETAS:  # the result's dependence on the damping: reduced swarms
        s_z, r_z, _ = _study(z)
        entries.append(_study_entry(f"flexdesign_study_damping_{z:g}", s_z, r_z, False))
    for z in ZETAS:
        ev = FlexibleOutputProblem(damping=z).evaluate(x)
        entries.append({"name": f"flexdesign_optimum_damping_{z:g}", "damping": z, "ok": ev.ok,
                        "error_mm": 1e3 * ev.value if ev.ok else None,
                        "spectral_abscissa": ev.info.get("spectral_abscissa")})
    if best.evaluation.ok:
        entries.append({"name": "flexdesign_designs_pd", "damping": p.damping,
                        "book_classical_pd_mm": BOOK_MM,
                        **_designs(p.model().chain, gamma_matrix(x))})
        entries.append(_cost(x))
    return entries
