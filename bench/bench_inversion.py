"""Seifried (2014) Table 5.3 and Sect. 5.3.2: feedforward methods on the two passive-joint arms.

CPU time of each method as a ratio to the ODE form (5.22) in the same run (the book:
index-1 1.14x, exact output by coordinate transformation 6.2x, backward Euler 1 ms 11.8x),
and the end-effector error of an open-loop forward simulation under the feedforward,
beside the book's numbers.  Also the non-minimum-phase design: stable inversion with the
linearly combined output (goal <= 3.5 s here; the book: 35 s with bvp5c, 3.2 mm) and with
the exact output started from it (goal <= 15x that; the book: 0.005 mm).
"""

from __future__ import annotations

import time

from multibody_control.inversion import invert
from multibody_control.inversion.methods import verify
from multibody_control.outputs import Output
from multibody_control.tasks import half_circle_task
from multibody_dynamics import load_model

GAMMA = [[0, 0], [0, 0], [2 / 3, 1 / 3]]  # eq. 5.23

# (label, output kind, method, options, book CPU s, book error mm)
TABLE_53 = [
    ("servo-constraint DAE index 2, Euler 1 ms", "exact", "index2_euler",
     {"euler_dt": 1e-3}, 33, 4.101),
    ("servo-constraint DAE index 2, Euler 0.1 ms", "exact", "index2_euler",
     {"euler_dt": 1e-4, "dt": 1e-4}, 347, 0.421),
    ("servo-constraint DAE index 1 (5.20)", "exact", "index1", {}, 3.2, 0.027),
    ("servo-constraint ODE (5.22)", "exact", "ode", {}, 2.8, 0.053),
    ("coordinate transformation, exact output", "exact", "classical", {}, 17.3, 0.053),
    ("coordinate transformation, combined output", "combined", "classical", {}, 2.3, 2.754),
]


def _run(model, task, kind, method, opts):
    out = (Output(model, ["x", "tip.x", "tip.y"]) if kind == "exact"
           else Output.combined(model, GAMMA))
    opts = dict(opts)
    dt = opts.pop("dt", 1e-3)
    start = time.process_time()
    res = invert(model, out, task, method, dt=dt, **opts)
    cpu = time.process_time() - start
    ver = verify(model, res, task, out) if res.success else None
    return res, ver, cpu


def run() -> list[dict]:
    task = half_circle_task()
    entries = []
    m = load_model("passive_arm_minphase")
    rows = []
    for label, kind, method, opts, book_cpu, book_err in TABLE_53:
        res, ver, cpu = _run(m, task, kind, method, opts)
        rows.append((label, res, ver, cpu, book_cpu, book_err, method))
    base = next(r for r in rows if r[6] == "ode")
    for label, res, ver, cpu, book_cpu, book_err, _ in rows:
        entries.append({
            "name": f"Table 5.3: {label}",
            "success": res.success,
            "cpu_s": round(cpu, 3),
            "ratio_to_ode": round(cpu / base[3], 3),
            "book_ratio_to_ode": round(book_cpu / 2.8, 2),
            "end_effector_error_mm": None if ver is None else float(f"{ver.max_error * 1e3:.4g}"),
            "book_error_mm": book_err,
        })
    m = load_model("passive_arm_nonminphase")
    comb, ver_c, cpu_c = _run(m, task, "combined", "stable", {})
    entries.append({
        "name": "Sect. 5.3.2 non-minimum phase, combined output, stable inversion",
        "success": comb.success, "message": comb.message, "cpu_s": round(cpu_c, 3),
        "goal_cpu_s": 3.5, "book_cpu_s": 35,
        "end_effector_error_mm": None if ver_c is None else float(f"{ver_c.max_error * 1e3:.4g}"),
        "book_error_mm": 3.2,
    })
    if comb.success:
        out = Output(m, ["x", "tip.x", "tip.y"])
        start = time.process_time()
        exact = invert(m, out, task, "stable", guess=comb.eta, t_start=float(comb.t[0]),
                       t_end=float(comb.t[-1]))
        cpu = time.process_time() - start
        ver = verify(m, exact, task, out) if exact.success else None
        entries.append({
            "name": "Sect. 5.3.2 non-minimum phase, exact output, stable inversion",
            "success": exact.success, "message": exact.message, "cpu_s": round(cpu, 3),
            "ratio_to_combined": round(cpu / cpu_c, 2), "goal_ratio": 15, "book_ratio": 15,
            "end_effector_error_mm": None if ver is None else float(f"{ver.max_error * 1e3:.4g}"),
            "book_error_mm": 0.005,
        })
    return entries
