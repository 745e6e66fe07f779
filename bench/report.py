#!/usr/bin/env python3
"""Markdown tables of bench/results.json, for the documentation and the terminal.

The documentation's benchmark tables are built from the measurements when the site is built
(``tools/docs_hooks.py`` replaces ``<!-- bench:TABLE [SUITE,...] -->`` markers with
:func:`table`), so the published figures cannot drift from the last ``make bench`` run.
README.md is not built: there a table stands between ``<!-- bench:TABLE -->`` and
``<!-- /bench:TABLE -->`` and :func:`refresh` rewrites it (``bench/run.py`` does after each run;
``test/test_docs_site.py`` checks that it matches bench/results.json).
Usage: ``python bench/report.py [--results bench/results.json] [TABLE ...]`` prints the tables;
``python bench/report.py --refresh README.md`` rewrites the README's tables.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results.json"


class ReportError(ValueError):
    """A marker names an unknown table or suite, or results.json lacks what a table needs."""


def load(path: str | Path = RESULTS) -> dict:
    """The parsed results file; a clear error when it is missing or not JSON."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportError(f"{path}: no benchmark results (run `make bench`)") from None
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}: not valid JSON ({exc})") from None


def _num(x: float | None, digits: int = 3) -> str:
    """``x`` to ``digits`` significant figures (no exponent for ordinary magnitudes)."""
    if x is None:
        return "—"
    if x == 0:
        return "0"
    if abs(x) >= 10 ** digits:
        return f"{x:.0f}"
    if abs(x) < 1e-4:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def _rows(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    if len(lines) == 2:
        raise ReportError(f"no entries for the table with columns {header}")
    return "\n".join(lines)


def _suite(results: dict, name: str) -> list[dict]:
    suites = results.get("suites", {})
    if name not in suites:
        raise ReportError(f"results.json has no suite {name!r} (has: {', '.join(suites)})")
    return suites[name]


def _suites(results: dict, names: list[str]) -> list[dict]:
    return [e for n in names for e in _suite(results, n)]


def ratios(results: dict, suites: list[str]) -> str:
    """Per-call timings against their same-run baselines (entries with a ``ratio``)."""
    def target(e: dict) -> str:
        if "target_ratio" in e:
            t = f"≤ {_num(e['target_ratio'])}×"
        elif "target_time_us" in e:
            t = f"≤ {_num(e['target_time_us'])} µs"
        else:
            return "—"
        return t + ("" if e.get("meets_target", True) else " (**missed**)")

    rows = ([e["name"], e["baseline"], _num(e["ratio"]), _num(e["time_us"]),
             _num(e["baseline_time_us"]), target(e)]
            for e in _suites(results, suites) if "ratio" in e)
    return _rows(["benchmark", "baseline", "ratio", "time [µs]", "baseline [µs]", "target"], rows)


def skipped(results: dict, suites: list[str]) -> str:
    """Entries a suite skipped, with the reason."""
    rows = ([e["name"], e["skipped"]] for e in _suites(results, suites) if "skipped" in e)
    return _rows(["benchmark", "skipped because"], rows)


def simulate(results: dict, suites: list[str]) -> str:
    """Simulated seconds per wall second and the invariants kept on the way."""
    def energy(e: dict) -> str:
        if "relative_energy_drift" in e:
            return _num(e["relative_energy_drift"], 2) + " (relative)"
        if "energy_balance_error" in e:
            return _num(e["energy_balance_error"], 2) + " J (balance)"
        return "—"

    rows = ([e["name"], _num(e["realtime_factor"]), _num(e["wall_s"]), str(e["steps"]),
             _num(e.get("max_residual"), 2), energy(e),
             _num(e["crank_turns"], 4) if "crank_turns" in e else "—",
             str(e.get("singular_bridges", "—"))]
            for e in _suites(results, suites or ["simulate"]))
    return _rows(["run", "sim s / wall s", "wall [s]", "steps", "max closure residual",
                  "energy drift", "crank turns", "singular crossings bridged"], rows)


def inversion(results: dict, suites: list[str]) -> str:
    """Seifried (2014) Table 5.3 and Sect. 5.3.2: error and CPU time beside the book's."""
    rows = ([e["name"], _num(e["end_effector_error_mm"]), _num(e["book_error_mm"]),
             _num(e["cpu_s"]), _num(e.get("ratio_to_ode")), _num(e.get("book_ratio_to_ode"))]
            for e in _suites(results, suites or ["inversion"]))
    return _rows(["feedforward", "end-effector error [mm]", "book [mm]", "CPU [s]",
                  "CPU / ODE form", "book: CPU / ODE form"], rows)


def scenarios(results: dict, suites: list[str]) -> str:
    """The closed-loop scenarios: the source's claim, whether it holds, the main errors."""
    rows = ([e["name"], e["claim"], "yes" if e["holds"] else "**no**",
             _num(e["joint_error_max"]), _num(e["joint_error_final"]),
             _num(e.get("analytic_deviation")), _num(e["wall_s"])]
            for e in _suites(results, suites or ["scenarios"]))
    return _rows(["scenario", "claim", "holds", "max joint error", "final joint error",
                  "deviation from the analytic error dynamics", "wall [s]"], rows)


def ros_loop(results: dict, suites: list[str]) -> str:
    """controller_node + simulator_node over DDS: rate and p99 period error per timing mode."""
    entries = {e["name"]: e for e in _suites(results, suites or ["ros_loop"])}
    keys = sorted({n.rsplit(" ", 1)[0] for n in entries if n.endswith(" timer") and "/" not in n},
                  key=lambda k: (k.split()[0], float(k.split()[1])))

    def mode(e: dict) -> str:
        js, cm = e["joint_states"], e["commands"]
        return f"{js['rate_hz']:.1f} Hz, {js['p99_error_ms']:.2f} / {cm['p99_error_ms']:.2f} ms"

    rows = []
    for k in keys:
        robot, rate, _hz = k.split()
        timer, paced, fifo = (entries[f"{k} {m}"] for m in ("timer", "paced", "paced_fifo"))
        r1, r2 = entries[f"{k} paced / timer"], entries[f"{k} paced_fifo / timer"]
        rows.append([robot, f"{rate} Hz", mode(timer), mode(paced), mode(fifo),
                     f"{fifo['machine_floor']['p99_error_ms']:.2f} ms",
                     f"{r1['joint_states_p99_error_ratio']:.2f}, "
                     f"{r2['joint_states_p99_error_ratio']:.2f}"])
    return _rows(["robot", "rate", "timer: achieved, p99 error states / commands", "paced",
                  "paced, `thread_priority: 50`", "floor (p99 error), FIFO run",
                  "ratios to timer (states p99 error): paced, paced + FIFO"], rows)


def release(results: dict, suites: list[str]) -> str:
    """Seifried Sect. 2.3: the flexible cart manipulator released near the upward vertical."""
    rows = ([e["name"].removeprefix("release "), _num(e["divergence_time_s"]),
             _num(e["link1_over_link2_first_mode"]), str(e["rhs_evaluations"]),
             str(e["rigid_rhs_evaluations"]), _num(e["flexible_sim_s_per_wall_s"]),
             _num(e["rigid_sim_s_per_wall_s"]), _num(e["flexible_over_rigid_wall"])]
            for e in _suites(results, suites or ["flexible"]) if e["name"].startswith("release"))
    return _rows(["start, tolerance", "rigid and flexible part (0.1 rad) at [s]",
                  "link 1 / link 2 first-mode amplitude", "flexible RHS evaluations",
                  "rigid RHS evaluations", "flexible sim s / wall s", "rigid sim s / wall s",
                  "wall-time ratio"], rows)


def flexible_designs(results: dict, suites: list[str]) -> str:
    """Seifried Sect. 6.4.1: maximum end-effector error of the four feedforward designs."""
    rows = []
    for e in _suites(results, suites or ["flexible"]):
        if "book_mm" not in e:
            continue
        for key, label in (("rigid", "rigid"), ("collocated", "collocated"),
                           ("quasi_static", "quasi-static"), ("stable", "stable inversion")):
            book = e["book_mm"].get(key, e["book_mm"].get("rigid") if key == "collocated" else "—")
            ok = e[f"{key}_success"]
            model = e["name"].partition("(")[2].partition(",")[0] or e["name"]
            rows.append([f"`{model}`", label, _num(e[f"{key}_max_error_mm"]) if ok else "failed",
                         str(book), _num(e[f"{key}_cpu_s"])])
    return _rows(["model", "feedforward", "max error [mm]", "book [mm]", "CPU [s]"], rows)


def _by_name(entries: list[dict]) -> dict:
    return {e["name"]: e for e in entries}


def flexible_output_damping(results: dict, suites: list[str]) -> str:
    """Seifried Sect. 7.3.2 on the damped model: zero dynamics against the modal damping."""
    entries = _suites(results, suites or ["flexible_design"])
    by = _by_name(entries)
    rows = []
    for e in entries:
        if not e["name"].startswith("flexdesign_damping_"):
            continue
        z = e["damping"]
        opt = by.get(f"flexdesign_optimum_damping_{z:g}", {})
        err = opt.get("error_mm")
        rows.append([f"{100 * z:g} %", _num(e["abscissa_718"]), _num(e["abscissa_638"]),
                     f"{100 * e['min_phase_share']:.1f} % of {e['sample']}",
                     _num(opt.get("spectral_abscissa")),
                     _num(err) if err is not None else "rejected"])
    return _rows(["modal damping", "max Re λ, Γ (7.18) [1/s]", "max Re λ, Γ (6.38) [1/s]",
                  "minimum-phase designs in the ±20 % box", "max Re λ, our Γ [1/s]",
                  "our Γ: max error [mm]"], rows)


def flexible_output(results: dict, suites: list[str]) -> str:
    """Seifried Sect. 7.3.2: the output designs beside the Sect. 6.4 designs (damped model)."""
    by = _by_name(_suites(results, suites or ["flexible_design"]))
    book, pd = by["flexdesign_book_gamma_718"], by.get("flexdesign_designs_pd", {})
    rows = [["Γ (7.18), the book's optimum", f"non-minimum phase, max Re λ = "
             f"{_num(book['spectral_abscissa'])} 1/s", "rejected (large value)",
             "—", "minimum phase, ≈ 0.28 (classical inversion + PID)"]]
    for e in (v for k, v in by.items() if k.startswith("flexdesign_study_")):
        g = e["best"]
        gamma = (f"[[{g['g11']}, {g['g12']}, 0, 0], [{g['g21']}, {g['g22']}, {g['g23']}, "
                 f"{g['g24']}]]")
        pd_mm = pd.get("classical_optimum_pd_mm") if e["name"] == "flexdesign_study_pool2" \
            else None
        rows.append([f"our swarm, {100 * e['damping']:g} % damping, {e['particles']} x "
                     f"{e['iterations']}: Γ = {gamma}",
                     f"max Re λ = {_num(e['best_abscissa'])} 1/s", _num(e["best_error_mm"]),
                     _num(pd_mm), "—"])
    for key, label, booktxt in (("rigid", "Sect. 6.4 rigid feedforward", "several cm"),
                                ("quasi_static", "Sect. 6.4 quasi-static compensation",
                                 "< 1")):
        if f"{key}_pd_mm" in pd:
            rows.append([label, "—", "—", _num(pd[f"{key}_pd_mm"]), booktxt])
    return _rows(["design", "zero dynamics", "criterion (7.17) [mm]", "with joint PD [mm]",
                  "book [mm]"], rows)


def flexible_output_cost(results: dict, suites: list[str]) -> str:
    """Seifried Sect. 7.3.2: cost of one evaluation and of the studies."""
    by = _by_name(_suites(results, suites or ["flexible_design"]))
    c = by["flexdesign_evaluation_cost"]
    rows = [["one evaluation (minimum-phase Γ: steps 1 and 2)", _num(c["evaluation_s"]),
             f"{_num(c['ratio_to_step1'])}× step 1 alone ({_num(1e3 * c['step1_s'])} ms); "
             f"{_num(c['ratio_to_invert_flexible'])}× invert_flexible 'classical' "
             f"({_num(c['invert_flexible_classical_s'])} s)"]]
    if "speedup_vs_python" in c:
        rows.append(["the same with the Python internal dynamics", _num(c["evaluation_python_s"]),
                     f"{_num(c['speedup_vs_python'])}× the compiled evaluation"])
    for k, e in by.items():
        if k.startswith("flexdesign_study_"):
            rows.append([f"study, {100 * e['damping']:g} % damping, {e['particles']} particles x "
                         f"{e['iterations']} iterations, pool of 2", _num(e["wall_s"]),
                         f"{e['evaluations']} evaluations, {e['feasible']} minimum phase"
                         + _load(e)])
    return _rows(["what", "wall [s]", "beside"], rows)


def _load(e: dict) -> str:
    """``; load average X`` where the entry recorded the machine's load."""
    return f"; load average {_num(e['load_avg_1min'], 2)}" if "load_avg_1min" in e else ""


def flexible_cart_output(results: dict, suites: list[str]) -> str:
    """Seifried Sect. 7.5.2.2: output designs of the flexible cart manipulator, book beside
    ours."""
    entries = _suites(results, suites or ["flexible_cart_design"])
    rows = []
    for e in entries:
        if "label" in e:
            zd = (f"max Re λ = {_num(e['spectral_abscissa'])} 1/s"
                  if e["spectral_abscissa"] is not None else "—")
            err = _num(e["error_mm"]) if e["ok"] else "rejected (large value)"
            book = _num(e["book_mm"]) if e["book_mm"] is not None else "non-minimum phase"
            rows.append([e["label"], zd, err, book])
        elif "best" in e:
            g = ", ".join(f"{v}" for v in e["best"].values())
            rows.append([f"our swarm, {100 * e['damping']:g} % damping, {e['particles']} x "
                         f"{e['iterations']}: ΔΓ entries [{g}]",
                         f"max Re λ = {_num(e['best_abscissa'])} 1/s",
                         _num(e["best_error_mm"]) if e["best_ok"] else "none feasible",
                         "1.6 (120 x 30)"])
    return _rows(["design", "zero dynamics at the start", "max end-effector error [mm]",
                  "book [mm]"], rows)


def flexible_cart_output_cost(results: dict, suites: list[str]) -> str:
    """Seifried Sect. 7.5.2.2: cost of one evaluation and of the swarm."""
    by = _by_name(_suites(results, suites or ["flexible_cart_design"]))
    c, s = by["cartdesign_evaluation_cost"], by["cartdesign_study_pool2"]
    rows = [["one evaluation (minimum-phase design (7.32): steps 1 and 2)",
             _num(c["evaluation_s"]),
             f"{_num(c['ratio_to_step1'])}× step 1 alone ({_num(1e3 * c['step1_s'])} ms)"]]
    if "speedup_vs_python" in c:
        rows.append(["the same with the Python internal dynamics", _num(c["evaluation_python_s"]),
                     f"{_num(c['speedup_vs_python'])}× the compiled evaluation"])
    rows.append([f"swarm, {s['particles']} particles x {s['iterations']} iterations, pool of 2",
                 _num(s["wall_s"]),
                 f"{s['evaluations']} evaluations, {s['feasible']} minimum phase" + _load(s)])
    return _rows(["what", "wall [s]", "beside"], rows)


def flexible_cart_readings(results: dict, suites: list[str]) -> str:
    """Seifried Sect. 7.5.2: the three printed errors against the unprinted model data."""
    rows = [["Seifried (2014)", "—", "—", "—", "88.7", "1.6", "1.7"]]
    for e in _suites(results, suites or ["flexible_cart_readings"]):
        cells = [_num(e[f"{k}_mm"]) if e[f"{k}_mm"] is not None else "rejected"
                 for k in ("collocated", "d732", "d733")]
        rows.append([e["label"], f"{e['gravity']:g}", f"{e['tool_kg']:g}",
                     f"{100 * e['damping']:g} %", *cells])
    return _rows(["model", "gravity e2 [m/s²]", "tool [kg]", "modal damping",
                  "collocated [mm]", "(7.32) [mm]", "(7.33) [mm]"], rows)


def flexible_cart_shape(results: dict, suites: list[str]) -> str:
    """Seifried Sect. 7.5.2.1, 7.5.2.3: shape and shape + output designs of the cart
    manipulator, the book's printed designs evaluated with our code and our reduced swarms."""
    rows = []
    books = {"shape": "22.0 (7.29)", "serial": "0.7 (7.34)", "concurrent": "1.4 (7.37)",
             "shape_combined": "none minimum phase (160 x 60)"}
    for e in _suites(results, suites or ["flexible_cart_shape"]):
        if "label" in e:
            zd = (f"max Re λ = {_num(e['spectral_abscissa'])} 1/s"
                  if e["spectral_abscissa"] is not None else "— (collocated)")
            err = _num(e["error_mm"]) if e["ok"] else "rejected (large value)"
            rows.append([e["label"], zd, err, "non-minimum phase" if e["book_mm"] is None
                         else _num(e["book_mm"])])
        elif "study" in e:
            h = e["best_heights_mm"]
            heights = "" if not h else " heights " + "; ".join(
                " / ".join(_num(v, 2) for v in hv) for hv in h.values()) + " mm"
            dg = [f"{v:g}" for k, v in (e["best"] or {}).items() if k.startswith("dg")]
            reading = f" ({e['reading']})" if e.get("reading") else ""
            part = "" if e.get("complete", True) else \
                f", stopped after {e['iterations_done']} iterations"
            rows.append([f"our {e['study']} swarm{reading}, {e['particles']} x {e['iterations']} "
                         f"({e['evaluations']} evaluations{part}, {e['feasible']} accepted, "
                         f"{_num(e['wall_s'])} s on a pool of 2):{heights}"
                         + (f" ΔΓ [{', '.join(dg)}]" if dg else ""), "—",
                         _num(e["best_error_mm"]) if e["best_ok"] else "none accepted",
                         books[e["study"]]])
    return _rows(["design", "zero dynamics at the start", "max end-effector error [mm]",
                  "book [mm]"], rows)


def flexible_shape_cost(results: dict, suites: list[str]) -> str:
    """Seifried Sect. 7.4.1.2: cost of one Bézier rebuild of the arms and of one evaluation."""
    by = _by_name(_suites(results, suites or ["flexible_shape"]))
    both, arm = by["flexshape_rebuild_both_arms"], by["flexshape_rebuild_arm1"]
    parts, ev = by["flexshape_rebuild_parts_arm1"], by["flexshape_evaluation_cost"]
    cart = by.get("flexshape_rebuild_cart_link1")
    rows = [["rebuild of both arms + chain (+ modal damping)", _num(both["time_us"] * 1e-3),
             f"{_num(both['ratio'])}× {both['baseline']} ({_num(both['baseline_time_us'] * 1e-3)}"
             " ms)"],
            [f"rebuild of arm 1 ({parts['elements']} {parts['theory']} elements)",
             _num(arm["time_us"] * 1e-3),
             "sections " + _num(parts["sections_ms"]) + ", FE matrices "
             + _num(parts["fe_matrices_ms"]) + ", modes " + _num(parts["modes_ms"])
             + ", modal data " + _num(parts["modal_data_ms"]) + " ms"],
            *([["rebuild of one 1 m link of flexible_cart_manipulator (100 elements)",
                _num(cart["time_us"] * 1e-3), f"{_num(cart['ratio'])}× {cart['baseline']} "
                f"({_num(cart['baseline_time_us'] * 1e-3)} ms)"]] if cart else []),
            ["one evaluation (rebuild + classical inversion)", _num(1e3 * ev["evaluation_s"]),
             f"rebuild {_num(100 * ev['rebuild_share'])} % of it"]]
    for k, e in by.items():
        if k.startswith("flexshape_study_"):
            rows.append([f"study, {e['particles']} particles x {e['iterations']} iterations, "
                         "pool of 2", _num(1e3 * e["wall_s"]),
                         f"{e['evaluations']} evaluations, {e['failed']} failed"])
    return _rows(["what", "time [ms]", "beside"], rows)


def flexible_shape(results: dict, suites: list[str]) -> str:
    """Seifried Sect. 7.5.1.2 route on the Sect. 6.4 manipulator: shape design, collocated
    output."""
    by = _by_name(_suites(results, suites or ["flexible_shape"]))
    rows = []
    for k, e in by.items():
        if not k.startswith("flexshape_study_"):
            continue
        for label, err, h, f in (
                ("initial (0.9 mm strips)", e["initial_max_error_mm"], None,
                 e["initial_frequencies_hz"]),
                (f"best of {e['evaluations']} evaluations", e["best_max_error_mm"],
                 e["best_heights_mm"], e["best_frequencies_hz"])):
            heights = "0.9 everywhere" if h is None else "; ".join(
                f"{n}: " + " / ".join(_num(v, 2) for v in hv) for n, hv in h.items())
            freq = "; ".join(f"{n}: " + " / ".join(_num(v) for v in fv) for n, fv in f.items())
            rows.append([label, _num(err), heights, freq])
    book = by.get("flexshape_book_729_contours")
    if book:
        rows.append(["book (7.29), cart manipulator arms (not this model)", "88.7 → 22.0",
                     "12.9 / 10.4 / 22.1 / 5.3; 5.1 / 16.2 / 7.0 / 1.0",
                     f"mass {book['mass_ratio']:.4f}× the initial arms"])
    return _rows(["design", "max error (7.17) [mm]", "heights y0-y3 [mm]",
                  "clamped frequencies [Hz]"], rows)


def flexible_evaluation_parts(results: dict, suites: list[str]) -> str:
    """Issue 16 §4: one evaluation of each flexible problem and its parts, CPU ms
    (bench_flexible_scale)."""
    keys = ("fe_rebuild", "modal_reduction", "sid", "chain", "zero_dynamics", "inversion",
            "criterion")

    def ms(e: dict, key: str) -> str:
        v = e.get(f"{key}_cpu_s")
        return "—" if v is None else _num(1e3 * v)

    rows = [[e["label"], ms(e, "evaluation"), *(ms(e, k) for k in keys), ms(e, "sum_of_parts"),
             _num(e["criterion_mm"]), _num(e["load_avg_1min"], 2)]
            for e in _suites(results, suites or ["flexible_scale"])
            if e["name"].startswith("flexscale_parts_")]
    return _rows(["problem, design", "one evaluation [ms]", "FE rebuild", "modal reduction",
                  "SID", "chain", "zero dynamics", "inversion", "criterion", "sum of parts",
                  "criterion (7.17) [mm]", "load average"], rows)


def flexible_backends(results: dict, suites: list[str]) -> str:
    """Issue 16 §4: flexible studies on a local pool and a Dask LocalCluster, same run
    (bench_flexible_scale)."""
    names = {"pool2": "local pool, 2 processes", "dask2": "Dask LocalCluster, 2 workers"}
    rows = []
    for e in _suites(results, suites or ["flexible_scale"]):
        if "backend" not in e:
            continue
        ratio = f"{_num(e['ratio_to_pool'])}× the pool" if "ratio_to_pool" in e else "—"
        rows.append([f"{e['study']}, {e['particles']} x {e['iterations']}"
                     + (" (as written)" if e["full"] else ""), names[e["backend"]],
                     str(e["evaluations"]), _num(e["wall_s"]), ratio,
                     _num(e["evaluations_per_s"]), _num(1e3 * e["cpu_s_per_evaluation"]),
                     _num(e["efficiency"], 2),
                     "yes" if e["same_evaluations_on_both_backends"] else "**no**",
                     _num(e["best_error_mm"]) if e["best_ok"] else "none accepted",
                     _num(e["load_avg_1min"], 2)])
    return _rows(["study", "backend", "evaluations", "wall [s]", "wall ratio",
                  "evaluations / s", "CPU per evaluation [ms]", "efficiency",
                  "same evaluations on both", "best [mm]", "load average"], rows)


def flexible_workers(results: dict, suites: list[str]) -> str:
    """Issue 16 §4: workers to finish the concurrent study in 5 minutes (bench_flexible_scale)."""
    rows = [[str(e["evaluations"]), _num(e["budget_s"]),
             f"{_num(1e3 * e['cpu_s_per_evaluation'])} ms ({e['measured_on']})",
             _num(e["parallel_efficiency"], 2), _num(1e3 * e["dask_overhead_s_per_task"], 2),
             str(e["workers_local"]), str(e["workers_dask"])]
            for e in _suites(results, suites or ["flexible_scale"]) if "workers_local" in e]
    return _rows(["evaluations", "in [s]", "CPU per evaluation", "efficiency (pool of 2)",
                  "Dask overhead per task [ms]", "workers (local pool)", "workers (Dask)"],
                 rows)


def flexible_parallel(results: dict, suites: list[str]) -> str:
    """Seifried Sect. 6.5: the parallel flexible machine tool."""
    rows = []
    for e in _suites(results, suites or ["flexible_parallel"]):
        if "tool_error_max_mm" in e:
            rows.append([e["name"], f"tool error {_num(e['tool_error_max_mm'])} mm (plant "
                         f"simulation {_num(e['plant_simulation_tool_error_mm'])} mm), "
                         f"{_num(e['wall_time_s'])} s", f"≈ {_num(e['book_tool_error_mm'])} mm"])
        elif "stable" in e and "unstable" in e:
            rows.append([e["name"], f"{e['stable']} stable / {e['unstable']} unstable",
                         e["book"]])
        elif "ratio_dichotomy_over_bvp" in e:
            rows.append([e["name"], f"time ratio {_num(e['ratio_dichotomy_over_bvp'])}, "
                         f"largest relative difference "
                         f"{_num(e['max_eta_difference_relative'], 2)}", "—"])
        elif "ratio_stable_over_classical" in e:
            rows.append([e["name"], _num(e["ratio_stable_over_classical"]), "—"])
    return _rows(["figure", "ours", "book"], rows)


def flexible_closed_sampling(results: dict, suites: list[str]) -> str:
    """Issue 18 §1: fine samples of the closed machine tool, cost and accuracy against a
    reference projected at every sample (bench_flexible_closed_sampling)."""
    rows = ([e["label"], str(e["samples"]), str(e["nfev"]),
             _num(e["ratio"]) + "×" if "ratio" in e else "1× (" + _num(e["cpu_s"]) + " s CPU)",
             _num(e["max_error_of_peak"], 2), _num(e["closure_gap_m"], 2),
             _num(e.get("energy_error_of_range"), 2)]
            for e in _suites(results, suites or ["flexible_closed_sampling"]))
    return _rows(["samples of 0.3 s", "samples", "dynamics evaluations", "CPU / 0.01 s run",
                  "largest coordinate error / its peak", "closure gap [m]",
                  "energy error / its range"], rows)


def speed(results: dict, suites: list[str]) -> str:
    """The compiled simulator step against the reference path, same process (bench_speed)."""
    entries = _suites(results, suites or ["speed"])

    def opt(e: dict, key: str, digits: int = 2) -> str:
        return _num(e[key], digits) if key in e else "—"

    rows = [[e["name"], _num(e["baseline_sim_s_per_cpu_s"]), _num(e["sim_s_per_cpu_s"]),
             f"{e['speedup']:.1f}x", opt(e, "goal_sim_s_per_cpu_s"),
             f"{_num(e['baseline_time_us'])} / {_num(e['time_us'])}",
             opt(e, "time_over_whole_run", 3),
             opt(e, "max_residual"), opt(e, "energy_error_J"), opt(e, "load_average_1min")]
            for e in entries]
    return _rows(["case", "reference [sim s / CPU s]", "compiled [sim s / CPU s]",
                  "speed-up", "goal", "µs per step (reference / compiled)",
                  "compiled µs per step / whole run's", "max closure gap",
                  "energy error [J]", "load average"], rows)


def constrained_fd(results: dict, suites: list[str]) -> str:
    """One constrained forward-dynamics call against pin.constraintDynamics: the shipped loops
    and the n-link chain closed at its tip, then the log-log slopes (bench_constrained)."""
    entries = _suites(results, suites or ["constrained"])

    def target(e: dict) -> str:
        if "target_ratio" not in e:
            return "—"
        return f"≤ {_num(e['target_ratio'])}×" + ("" if e["meets_target"] else " (**missed**)")

    rows = [[e["name"].replace(" forward_dynamics", ""), str(e.get("n", "—")),
             _num(e["time_us"]), _num(e["baseline_time_us"]), _num(e["ratio"]), target(e)]
            for e in entries if "ratio" in e and e["name"].endswith("forward_dynamics")]
    for e in entries:
        if "slope" in e:
            ok = "" if e["meets_target"] else " (**missed**)"
            rows.append([e["name"], f"{e['n'][0]}-{e['n'][-1]}",
                         f"slope {_num(e['slope'])} (n ≥ 50: {_num(e['slope_n_ge_50'])})",
                         f"slope {_num(e['baseline_slope'])} "
                         f"(n ≥ 50: {_num(e['baseline_slope_n_ge_50'])})", "—",
                         f"slope ≤ {_num(e['target_slope'])}{ok}"])
    return _rows(["model", "n", "this [µs]", "pin.constraintDynamics [µs]", "ratio", "target"],
                 rows)


def design(results: dict, suites: list[str]) -> str:
    """Design-study throughput: backends against their baselines (bench_design)."""
    rows = [[e["name"], e["baseline"], _num(e["ratio"]), _num(e["evaluations_per_s"]),
             _num(e["parallel_efficiency"], 2) if "parallel_efficiency" in e else "—",
             f"{_num(e['baseline_time_us'] / 1e3)} / {_num(e['time_us'] / 1e3)}",
             _num(e.get("load_avg_1min"), 2)]
            for e in _suites(results, suites or ["design"]) if "ratio" in e]
    return _rows(["figure", "baseline", "time ratio", "evaluations / s", "parallel efficiency",
                  "ms per evaluation (baseline / this)", "load average"], rows)


def design_case1(results: dict, suites: list[str]) -> str:
    """The whole case-1 study on each backend, and the criterion's RK4 against DOP853
    (bench_design)."""
    entries = _by_name(_suites(results, suites or ["design"]))
    crit = entries.get("design_case1_criterion_rk4")
    rows = []
    if crit is not None:
        rows.append(["criterion (7.26), compiled RK4 vs DOP853, 60 designs in one process",
                     "—", "—", f"{_num(crit['baseline_time_us'] / 1e3)} → "
                     f"{_num(crit['time_us'] / 1e3)} ms CPU per evaluation "
                     f"({_num(1 / crit['ratio'], 3)}x faster)", "—", "—",
                     f"values within {_num(crit['max_relative_difference'], 2)} relative "
                     f"({crit['feasible']} feasible)", "—", _num(crit["load_avg_1min"], 2)])
    planar = entries.get("design_case1_zero_dynamics_planar")
    if planar is not None:
        rows.append(["zero-dynamics RK4 of the feasible ones, planar vs 6-component tree kernel",
                     "—", "—", f"{_num(planar['baseline_us_per_step'])} → "
                     f"{_num(planar['us_per_step'])} µs CPU per step "
                     f"({_num(1 / planar['ratio'], 3)}x faster)", "—", "—",
                     "integrals bit for bit the same: "
                     + ("yes" if planar["bitwise_equal_integrals"] else "**no**"), "—",
                     _num(planar["load_avg_1min"], 2)])
    for key, label in (("pool1", "local pool, 1 process"), ("pool2", "local pool, 2 processes"),
                       ("dask2", "Dask LocalCluster, 2 workers")):
        e = entries.get(f"design_case1_study_{key}")
        if e is None:
            continue
        goal = "—" if "meets_target" not in e else (
            f"≤ {_num(e['target_s'])} s: " + ("met" if e["meets_target"] else "**missed**"))
        cpu_ms = e.get("cpu_ms_per_evaluation")
        rows.append([f"case-1 study ({e['evaluations']} evaluations), {label}",
                     _num(e["wall_s"]), _num(e["evaluations_per_s"]),
                     _num(e["cpu_s_in_evaluations"])
                     + ("" if cpu_ms is None else f" ({_num(cpu_ms)} ms each)"),
                     _num(e["cpu_s_in_evaluations"] / e["workers"]),
                     _num(e.get("parallel_efficiency"), 2),
                     f"best {_num(e['best_criterion'])}, {e['feasible']} feasible, same on "
                     f"every backend: {'yes' if e['same_evaluations_on_every_backend'] else 'no'}",
                     goal, _num(e["load_avg_1min"], 2)])
    return _rows(["run", "wall [s]", "evaluations / s", "CPU in evaluations [s]",
                  "CPU / workers [s]", "parallel efficiency", "result", "goal", "load average"],
                 rows)


def design_workers(results: dict, suites: list[str]) -> str:
    """Workers to finish a study in one minute, from measured figures (bench_design)."""
    rows = [[e["problem"], str(e["evaluations"]),
             f"{_num(e['cpu_s_per_evaluation'] * 1e3)} ms ({e['sample']} evaluations)",
             _num(e["parallel_efficiency"], 2), _num(e["dask_overhead_s_per_task"] * 1e3, 2),
             str(e["workers_local"]), str(e["workers_dask"]), e["basis"]]
            for e in _suites(results, suites or ["design"]) if "workers_local" in e]
    return _rows(["study", "evaluations", "CPU per evaluation", "efficiency (case 1, 2 workers)",
                  "Dask overhead per design [ms]", "workers (local pool)", "workers (Dask)",
                  "basis"], rows)


def batch(results: dict, suites: list[str]) -> str:
    """simulate_batch against single simulate() calls; Simulator.step against the compiled
    step alone (bench_batch)."""
    rows = [[e["name"], e["baseline"], _num(e["ratio"]),
             f"{_num(e['baseline_time_us'])} / {_num(e['time_us'])}",
             _num(e.get("runs_per_s_per_core")),
             _num(e.get("simulated_s_per_wall_s_per_core")),
             "—" if "bitwise_equal_to_single_runs" not in e else
             ("yes" if e["bitwise_equal_to_single_runs"] else "**no**"),
             _num(e["load_avg_1min"], 2)]
            for e in _suites(results, suites or ["batch"])]
    return _rows(["figure", "baseline", "time ratio", "µs per run or call (baseline / this)",
                  "runs / s per core", "simulated s / wall s per core",
                  "bitwise equal to single runs", "load average"], rows)


def live_viewer(results: dict, suites: list[str]) -> str:
    """simulate --view: the viewed run against the run alone, frames delivered, delay to an
    HTTP client (bench_live_viewer)."""
    rows = [[e["name"], str(e["frames"]), _num(e["ratio"]),
             f"{_num(e['baseline_wall_s'])} / {_num(e['viewed_wall_s'])}",
             _num(e["simulated_s_per_wall_s"]),
             f"{_num(e['frames_produced_per_wall_s'])} / {_num(e['frames_delivered_per_wall_s'])}",
             f"{_num(e['delay_median_ms'])} / {_num(e['delay_max_ms'])}",
             _num(e["load_avg_1min"], 2)]
            for e in _suites(results, suites or ["live_viewer"])]
    return _rows(["run", "frames (30 fps)", "time ratio", "wall s (alone / viewed)",
                  "simulated s / wall s (alone)",
                  "frames / wall s (alone's rate / delivered while viewed)",
                  "delay sample to client, median / max [ms]", "load average"], rows)


def animation(results: dict, suites: list[str]) -> str:
    """The animation outputs of one result, timed against the simulate call that wrote it
    (bench_animation)."""
    rows = [[e["name"], str(e.get("frames", "–")),
             f"{_num(e['wall_s'])} s" + (f" ({_num(e['ms_per_frame'])} ms per frame)"
                                         if "ms_per_frame" in e else ""),
             _num(e["time_ratio"], 2), f"{e['bytes']:,}" if "bytes" in e else "–",
             _num(e["load_avg_1min"], 2)]
            for e in _suites(results, suites or ["animation"])]
    return _rows(["output", "frames", "time", "ratio to the simulate call", "bytes",
                  "load average"], rows)


def peers(results: dict, suites: list[str]) -> str:
    """The suite beside MuJoCo, Exudyn and Drake on the same mechanisms, same run (bench_peers)."""
    def row(e: dict) -> list[str]:
        robot = e["name"].split()[0]
        if "skipped" in e:
            return [robot, e["tool"], e["method"], e["skipped"], "—", "—", "—", "—"]
        return [robot, f"{e['tool']} {e['version']}", e["method"], _num(e["sim_s_per_cpu_s"]),
                _num(e["throughput_vs_suite"], 2) + "×", _num(e["max_closure_gap_m"], 2),
                _num(e["energy_error_J"], 2), _num(e.get("load_average_1min"), 2)]

    return _rows(["mechanism", "tool", "method", "sim s / CPU s", "throughput / suite's",
                  "max closure gap [m]", "energy error [J]", "load average"],
                 (row(e) for e in _suites(results, suites or ["peers"])))


def design_tracking(results: dict, suites: list[str]) -> str:
    """Fig. 7.8 of Seifried (2014): radial end-effector error of four concepts, and the
    feedforward work of both designs (bench_design_tracking)."""
    rows = []
    for e in _suites(results, suites or ["design_tracking"]):
        if "work_ratio" in e:
            rows.append([e["name"], f"{_num(e['work_optimum_J'])} J / {_num(e['work_initial_J'])}"
                         f" J = {_num(e['work_ratio'], 3)}", "—", e["book"]])
            continue
        fine = (f"; {_num(e['radial_error_max_mm_fine'], 2)} mm at {e['fine_rate_hz'] / 1e3:g} "
                "kHz" if "radial_error_max_mm_fine" in e else "")
        error = (f"{_num(e['radial_error_max_mm'], 3)} mm at {e['rate_hz'] / 1e3:g} kHz{fine}"
                 if e["success"] else f"failed: {e['message']}")
        book = e["book_mm"]
        book = book if "mm" in book or not any(c.isdigit() for c in book) else f"{book} mm"
        rows.append([e["name"], error, _num(e["passive_max_rad"], 3), book])
    return _rows(["concept", "max radial error (ours)", "max passive angle [rad]", "book"], rows)


def design_studies(results: dict, suites: list[str]) -> str:
    """The book's cases 2-4 run as printed, our best beside the printed optimum, both by the
    same criterion (bench_design_studies)."""
    def flag(ok: bool) -> str:
        return "" if ok else " (infeasible)"

    rows = [[e["name"], str(e["evaluations"]), _num(e["wall_s"]),
             _num(e["best_criterion"], 3) + flag(e["best_feasible"]),
             _num(e["printed_criterion"], 3) + flag(e["printed_feasible"]),
             "yes" if e["holds"] else "no", _num(e.get("load_average_1min"), 2)]
            for e in _suites(results, suites or ["design_studies"])]
    return _rows(["case", "evaluations", "wall [s], 2 workers", "our best criterion",
                  "printed optimum's criterion", "ours at least as good", "load average"], rows)


def ros_memory(results: dict, suites: list[str]) -> str:
    """Resident memory of the four nodes over a long 500 Hz loop (bench_ros_memory)."""
    def row(e: dict) -> list[str]:
        if "skipped" in e:
            return [e["name"], e["skipped"], "—", "—", "—", "—"]
        return [e["name"], _num(e["duration_s"] / 60.0, 2), _num(e["rss_mb_after_warmup"]),
                _num(e["rss_mb_end"]), _num(e["growth_mb_per_10min"], 2),
                "yes" if e["holds"] else "NO"]

    return _rows(["node", "minutes", "RSS after warm-up [MB]", "RSS at the end [MB]",
                  "growth [MB / 10 min]", "flat"],
                 (row(e) for e in _suites(results, suites or ["ros_memory"])))


def ros_launch(results: dict, suites: list[str]) -> str:
    """The lockstep bringups under the real launch: errors of the demo move over DDS beside
    the library run of the same loop (bench_ros_launch)."""
    def row(e: dict) -> list[str]:
        if "skipped" in e or "failed" in e:
            return [e["name"], "—", e.get("skipped") or "failed: " + e["failed"], "—", "—",
                    "—", "—", "—"]
        return [e["name"], e["law"], f"{_num(e['max_error'])} / {_num(e['end_error'])}",
                f"{_num(e['library_max'])} / {_num(e['library_end'])}",
                _num(e["t_last"]), _num(e["states_per_s"]), "yes" if e["clean"] else "NO",
                _num(e["load_average_1min"], 2)]

    rows = [row(e) for e in _suites(results, suites or ["ros_launch"])
            if "multiplier_min" not in e and e.get("robot") != "prr_surface"
            and not e.get("flexible") and not e.get("wallclock")]
    return _rows(["robot", "law", "DDS: max error over the move and hold / at the last state "
                  "recorded [rad or m]", "library, same loop to the same state",
                  "last state recorded [s after the start; move 2 s, hold 1 s]",
                  "states recorded per simulated s", "clean start and exit", "load average"],
                 rows)


def ros_launch_force(results: dict, suites: list[str]) -> str:
    """prr_surface's force control under the real launch, beside the library (bench_ros_launch)."""
    def row(e: dict) -> list[str]:
        if "failed" in e:
            return [e["name"], "failed: " + e["failed"], "—", "—", "—", "—"]
        return [e["law"] + f" ({e['direction']})",
                f"{e['multiplier_min']:.7g} to {e['multiplier_max']:.7g}",
                f"{e['library_multiplier_min']:.7g} to {e['library_multiplier_max']:.7g}",
                f"{_num(e['max_error'])} / {_num(e['end_error'])}",
                f"{_num(e['library_max'])} / {_num(e['library_end'])}",
                _num(e["load_average_1min"], 2)]

    rows = [row(e) for e in _suites(results, suites or ["ros_launch"])
            if ("multiplier_min" in e or e.get("robot") == "prr_surface")
            and not e.get("wallclock")]
    return _rows(["law (move)", "DDS: multiplier during the move and 1 s hold [N]",
                  "library, same sequence [N]", "DDS: max error / at the end [rad]",
                  "library [rad]", "load average"], rows)


def ros_launch_flexible(results: dict, suites: list[str]) -> str:
    """The flexible robots' lockstep bringups under the real launch: real-time factor, pairing
    without delay and the errors of the demo move over DDS beside the library run of the same
    loop (bench_ros_launch)."""
    def row(e: dict) -> list[str]:
        if "failed" in e:
            return [e["name"], "—", "failed: " + e["failed"], "—", "—", "—", "—", "—", "—"]
        return [e["name"], _num(e["move"]), _num(e["real_time_factor"], 2),
                f"{100 * e['paired']:.2f} %", f"{_num(e['max_error'])} / {_num(e['end_error'])}",
                f"{_num(e['library_max'])} / {_num(e['library_end'])}", _num(e["t_last"]),
                "yes" if e["clean"] else "NO", _num(e["load_average_1min"], 2)]

    rows = [row(e) for e in _suites(results, suites or ["ros_launch"])
            if e.get("flexible") and not e.get("wallclock")]
    return _rows(["robot", "largest joint move of the demo [rad or m]",
                  "real-time factor (lockstep over DDS)", "states paired without delay",
                  "DDS: max joint error over the move and hold / at the last state recorded "
                  "[rad or m]", "library, same loop to the same state",
                  "last state recorded [s after the start]", "clean start and exit",
                  "load average"], rows)


def ros_launch_wallclock(results: dict, suites: list[str]) -> str:
    """The wall-clock bringups under the real launch with the launch's true defaults: errors
    of the demo move against the reference started at the probe's wall time, the states'
    rate and the load they were measured at (bench_ros_launch, case group ``wallclock``).
    Until that group has been run the table says so in one row."""
    def row(e: dict) -> list[str]:
        if "failed" in e:
            return [e["name"], "—", "failed: " + e["failed"], "—", "—",
                    _num(e.get("load_average_1min"), 2), "—"]
        return [e["name"], e["law"], f"{_num(e['max_error'])} / {_num(e['end_error'])}",
                _num(e["states_per_s"]), "yes" if e["clean"] else "NO",
                _num(e["load_average_1min"], 2), _num(e["load_after"], 2)]

    header = ["robot", "law", "max error over the move and hold / at the end [rad or m]",
              "states recorded per wall-clock s", "clean start and exit",
              "load average before", "after"]
    rows = [row(e) for e in _suites(results, suites or ["ros_launch"]) if e.get("wallclock")]
    if not rows:
        rows = [["not measured yet", "—", "run `BENCH_ROS_LAUNCH_ONLY=wallclock python "
                 "bench/run.py --only ros_launch` on an idle machine", "—", "—", "—", "—"]]
    return _rows(header, rows)


def machine(results: dict, suites: list[str]) -> str:
    """When and where the figures were measured."""
    m = results.get("machine", {})
    return (f"*Figures of the `make bench` run of {results.get('generated', '?')} "
            f"(Python {m.get('python', '?')}, pinocchio {m.get('pinocchio', '?')}, "
            f"numpy {m.get('numpy', '?')}, {m.get('processor', '?')}), read from "
            f"`bench/results.json` when this page was built.*")


TABLES: dict[str, Callable[[dict, list[str]], str]] = {
    "ratios": ratios, "skipped": skipped, "simulate": simulate, "inversion": inversion,
    "scenarios": scenarios, "ros_loop": ros_loop, "release": release,
    "flexible_designs": flexible_designs, "flexible_parallel": flexible_parallel,
    "flexible_closed_sampling": flexible_closed_sampling,
    "flexible_output": flexible_output, "flexible_output_damping": flexible_output_damping,
    "flexible_output_cost": flexible_output_cost, "flexible_cart_output": flexible_cart_output,
    "flexible_cart_output_cost": flexible_cart_output_cost,
    "flexible_cart_readings": flexible_cart_readings,
    "flexible_shape": flexible_shape, "flexible_shape_cost": flexible_shape_cost,
    "flexible_cart_shape": flexible_cart_shape,
    "flexible_evaluation_parts": flexible_evaluation_parts,
    "flexible_backends": flexible_backends, "flexible_workers": flexible_workers,
    "speed": speed, "design": design, "peers": peers, "ros_memory": ros_memory,
    "constrained_fd": constrained_fd,
    "design_tracking": design_tracking, "design_studies": design_studies,
    "design_case1": design_case1, "design_workers": design_workers, "batch": batch,
    "live_viewer": live_viewer, "animation": animation,
    "ros_launch": ros_launch, "ros_launch_force": ros_launch_force,
    "ros_launch_flexible": ros_launch_flexible, "ros_launch_wallclock": ros_launch_wallclock,
    "machine": machine,
}


def table(results: dict, name: str, suites: list[str] | None = None) -> str:
    """The Markdown of table ``name`` over ``suites`` (each table has its default suites)."""
    if name not in TABLES:
        raise ReportError(f"unknown benchmark table {name!r}; expected one of {', '.join(TABLES)}")
    if name in ("ratios", "skipped") and not suites:
        raise ReportError(f"table {name!r} needs a list of suites, e.g. ratios rigid,constrained")
    try:
        return TABLES[name](results, list(suites or []))
    except KeyError as exc:
        raise ReportError(f"table {name!r}: an entry lacks the field {exc}") from None


#: a table kept in a page that is not built (README.md): opening marker, table, closing marker
BLOCK = re.compile(r"^(?P<open><!--\s*bench:(?P<table>\w+)(?:\s+(?P<suites>[\w,]+))?\s*-->)\n"
                   r"(?P<body>.*?)^(?P<close><!--\s*/bench:(?P=table)\s*-->)$", re.M | re.S)


def refresh(text: str, results: dict) -> str:
    """``text`` with the table between each opening and closing marker rebuilt from results."""
    def one(m: re.Match) -> str:
        suites = m["suites"].split(",") if m["suites"] else None
        return f"{m['open']}\n{table(results, m['table'], suites)}\n{m['close']}"

    return BLOCK.sub(one, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--refresh", metavar="PAGE", help="rewrite the marked tables of PAGE")
    parser.add_argument("tables", nargs="*", help="TABLE or TABLE:SUITE,SUITE (default: all)")
    args = parser.parse_args(argv)
    results = load(args.results)
    if args.refresh:
        page = Path(args.refresh)
        page.write_text(refresh(page.read_text(), results))
        return 0
    specs = args.tables or ["machine", "ratios:rigid,constrained,controllers,flexible,"
                            "elastic_joints", "simulate", "inversion", "scenarios", "ros_loop",
                            "release", "flexible_designs", "flexible_parallel", "speed", "design",
                            "peers", "ros_memory", "design_tracking", "design_studies",
                            "constrained_fd"]
    for spec in specs:
        name, _, suites = spec.partition(":")
        try:
            print(table(results, name, suites.split(",") if suites else None), end="\n\n")
        except ReportError as exc:
            print(f"report.py: {exc} (TABLE:SUITE,SUITE selects suites)", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
