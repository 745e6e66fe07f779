"""The book's design studies run as printed (Seifried (2014) Sect. 7.4.3): cases 2 and 3 of the
manipulator with two passive joints (Tables 7.4, 7.5; 100 particles, 22 iterations) and, with
``BENCH_DESIGN_CASE4=1``, case 4 of the one with four (Table 7.6; 300 particles, 10
iterations), each from its study file in config/designs/ on a 2-process pool (case 1 is in
bench_design).

Per case: the best design our swarm finds and its criterion (7.26) beside the criterion of the
printed optimum evaluated the same way, both feasibility flags, the evaluations and the wall
time (feasible: minimum phase, and the attenuation integral computed). ``holds``: our best is
feasible and its criterion is at most the printed design's.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from multibody_control.design.problems import evaluate_printed
from multibody_control.design.study import load_study, run_study

DESIGNS = Path(__file__).resolve().parent.parent / "config" / "designs"


def _case(name: str) -> dict:
    study = load_study(DESIGNS / f"{name}.yaml")
    start = time.perf_counter()
    result = run_study(study, kind="pool", workers=2, progress=False)
    wall = time.perf_counter() - start
    best = result.best
    printed, report = evaluate_printed(name)
    ours = best.evaluation.value if best else None
    ok = bool(best and best.evaluation.ok)
    return {"name": name, "evaluations": len(result.records), "wall_s": round(wall, 1),
            "best_parameters": dict(zip(study.names, [float(v) for v in best.x])) if best
            else None,
            "best_criterion": ours, "best_feasible": ok,
            "printed_criterion": printed.value, "printed_feasible": bool(printed.ok),
            "holds": bool(ok and ours is not None and ours <= printed.value),
            "load_average_1min": round(os.getloadavg()[0], 2)}


def run() -> list[dict]:
    cases = ["passive_arm2_case2", "passive_arm2_case3"]
    if os.environ.get("BENCH_DESIGN_CASE4") == "1":
        cases.append("passive_arm4_case4")
    return [_case(name) for name in cases]
