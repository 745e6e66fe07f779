"""Batch simulation and the per-call cost of ``Simulator.step`` (issue "simulation throughput").

* ``batch_<model>``: ``BATCH_RUNS`` simulations of ``BATCH_DURATION`` s from different initial
  velocities (RK4, 1 ms, samples every 10 ms) by one :func:`multibody_dynamics.batch
  .simulate_batch` call against the same runs as separate :func:`~multibody_dynamics.simulate
  .simulate` calls (the baseline), interleaved, best of ``ROUNDS``; runs per second and
  simulated seconds per wall second on the one core the batch uses.
* ``step_<model>``: one ``Simulator.step(tau)`` (the call of the ROS simulator node and the
  scenario runner: argument check of ``tau``, the compiled step, the state update) against
  one ``FastStepper.step`` (the compiled step alone), ``STEP_CALLS`` calls each, interleaved,
  best of ``ROUNDS``.

four_bar (closed loop, projection after every step) and passive_arm2 (open chain with
springs).  Run with ``python bench/run.py --only batch``.
"""

from __future__ import annotations

import os
import time

import numpy as np

from multibody_dynamics import load_model
from multibody_dynamics.batch import simulate_batch
from multibody_dynamics.projection import ProjectedDynamics
from multibody_dynamics.simulate import Simulator, SimulatorConfig, simulate

BATCH_RUNS = 20
BATCH_DURATION = 0.5
STEP_CALLS = 2000
ROUNDS = 3
CFG = SimulatorConfig(dt=1e-3)


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _cases():
    fb = load_model("four_bar")
    q_fb = ProjectedDynamics(fb).project_position(np.array([0.5, 0.3, 1.5])).q
    arm = load_model("passive_arm2")
    return [("four_bar", fb, q_fb), ("passive_arm2", arm, arm.q_rest + 0.05)]


def _best(fns: dict, rounds: int) -> dict:
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[key] = min(best[key], time.perf_counter() - start)
    return best


def _batch(name, model, q0) -> dict:
    rng = np.random.default_rng(4)
    v0 = rng.normal(scale=1.0, size=(BATCH_RUNS, model.nv))

    def singles():
        return [simulate(model, BATCH_DURATION, q0=q0, v0=v, config=CFG, output_dt=0.01)
                for v in v0]

    def batch():
        return simulate_batch(model, BATCH_DURATION, q0=q0, v0=v0, config=CFG, output_dt=0.01)

    singles(), batch()  # compiled kernels loaded
    t = _best({"singles": singles, "batch": batch}, ROUNDS)
    result = batch()
    same = all(np.array_equal(a.q, b.q) for a, b in zip(result.results, singles()))
    n = BATCH_RUNS
    return {"name": f"batch_{name}", "baseline": f"{n} simulate() calls", "runs": n,
            "ratio": t["batch"] / t["singles"], "time_us": 1e6 * t["batch"] / n,
            "baseline_time_us": 1e6 * t["singles"] / n, "runs_per_s_per_core": n / t["batch"],
            "simulated_s_per_wall_s_per_core": n * BATCH_DURATION / t["batch"],
            "bitwise_equal_to_single_runs": same, "all_succeeded": bool(result.success.all()),
            "load_avg_1min": _load()}


def _step(name, model, q0) -> dict:
    sim = Simulator(model, CFG)
    sim.reset(q0)
    fast = sim.fast_stepper()
    tau = np.zeros(model.nv)
    q, v = sim.q.copy(), sim.v.copy()

    def public():
        sim.reset(q0)
        for _ in range(STEP_CALLS):
            sim.step(tau)

    def compiled():
        qq, vv, t = q, v, 0.0
        for _ in range(STEP_CALLS):
            _, qq, vv, _, _ = fast.step(qq, vv, tau, t, CFG.dt)
            t += CFG.dt

    public(), compiled()
    t = _best({"public": public, "compiled": compiled}, ROUNDS)
    return {"name": f"step_{name}", "baseline": "FastStepper.step (compiled step alone)",
            "ratio": t["public"] / t["compiled"], "time_us": 1e6 * t["public"] / STEP_CALLS,
            "baseline_time_us": 1e6 * t["compiled"] / STEP_CALLS,
            "compiled_path": fast is not None, "load_avg_1min": _load()}


def run() -> list:
    entries = []
    for name, model, q0 in _cases():
        entries.append(_batch(name, model, q0))
        entries.append(_step(name, model, q0))
    return entries
