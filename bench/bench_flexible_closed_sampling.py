"""Fine samples of a closed flexible loop (issue 18 §1): the parallel machine tool
(``flexible_parallel_tool``, stiffest mode 668 Hz) simulated 0.3 s from a deflected start
(the first two modes of each arm at 2e-3 sqrt(kg) m) under 2 N on the first cart.

Three runs of :func:`~multibody_dynamics.flexible.simulation.simulate_flexible` /
:meth:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain.simulate` at DOP853, rtol 1e-8:

* ``coarse``: samples every 0.01 s, projected at each (the former default; the baseline);
* ``dense``: samples every 0.1 ms (10 or more per period of the stiffest mode), projected
  every 10 ms, the samples between from the solver's dense output (the default now);
* ``projected``: samples every 0.1 ms projected at each (the former way to sample finely).

Cost: CPU seconds of this process, best of :data:`ROUNDS` interleaved rounds, as ratios to
``coarse``. Accuracy against a reference projected at every 0.1 ms sample at rtol 1e-11:
the largest error of a coordinate as a fraction of its peak (over the coordinates the motion
moves by more than 1e-9), the closure gap ``max |c(q)|`` at the samples [m], the energy
difference as a fraction of the energy's range; for ``coarse``, its samples linearly
interpolated onto the reference's (what a plot of them shows).
"""

from __future__ import annotations

import time

import numpy as np

from bench.common import load_avg

DURATION = 0.3
U = (2.0, 0.0)
DEFLECTED = ("long_arm.e1", "long_arm.e2", "short_arm.e1", "short_arm.e2")
ROUNDS = 2


def _start(model) -> np.ndarray:
    q0 = model.chain.neutral()
    names = list(model.coordinate_names)
    for name in DEFLECTED:
        q0[names.index(name)] = 2e-3
    return q0


def _accuracy(run, ref, interpolate: bool = False) -> dict:
    """Errors of ``run`` against ``ref`` (see the module docstring)."""
    q = (np.column_stack([np.interp(ref.t, run.t, run.q[:, k]) for k in range(ref.q.shape[1])])
         if interpolate else run.q)
    worst = max(float(np.max(np.abs(q[:, k] - ref.q[:, k])) / np.max(np.abs(ref.q[:, k])))
                for k in range(ref.q.shape[1]) if np.max(np.abs(ref.q[:, k])) > 1e-9)
    out = {"max_error_of_peak": worst, "closure_gap_m": float(np.max(run.residual))}
    if not interpolate:
        out["energy_error_of_range"] = float(np.max(np.abs(run.energy - ref.energy))
                                             / np.ptp(ref.energy))
    return out


def run() -> list[dict]:
    from multibody_dynamics.flexible.simulation import simulate_flexible
    from multibody_dynamics.robot import load_robot

    model = load_robot("flexible_parallel_tool")
    q0 = _start(model)
    u = np.array(U)

    def coarse():
        return simulate_flexible(model, DURATION, q0=q0, u=U, output_dt=1e-2)

    def dense():
        return simulate_flexible(model, DURATION, q0=q0, u=U, output_dt=1e-4)

    t = np.unique(np.r_[np.arange(0.0, DURATION, 1e-4), DURATION])
    start = coarse()

    def projected():
        return model.simulate(start.q[0], start.v[0], t, u=lambda s: u, rtol=1e-8, atol=1e-10)

    best, results = {}, {}
    for _ in range(ROUNDS):
        for name, fn in (("coarse", coarse), ("dense", dense), ("projected", projected)):
            c0 = time.process_time()
            results[name] = fn()
            best[name] = min(best.get(name, np.inf), time.process_time() - c0)
    ref = model.simulate(start.q[0], start.v[0], t, u=lambda s: u, rtol=1e-11, atol=1e-13)
    entries = []
    for name, label in (("dense", "0.1 ms samples, projected every 10 ms (dense output)"),
                        ("projected", "0.1 ms samples, projected at each")):
        res = results[name]
        entries.append({
            "name": f"closed_sampling_{name}", "label": label,
            "baseline": "0.01 s samples, projected at each", "ratio": best[name] / best["coarse"],
            "time_us": best[name] * 1e6, "baseline_time_us": best["coarse"] * 1e6,
            "samples": int(res.t.size), "nfev": int(res.nfev),
            "baseline_nfev": int(results["coarse"].nfev), **_accuracy(res, ref),
            "load_avg": load_avg()})
    entries.append({"name": "closed_sampling_coarse",
                    "label": "0.01 s samples, projected at each (linearly interpolated)",
                    "samples": int(results["coarse"].t.size),
                    "nfev": int(results["coarse"].nfev),
                    "cpu_s": best["coarse"], **_accuracy(results["coarse"], ref, True)})
    return entries
