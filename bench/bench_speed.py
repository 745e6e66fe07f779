"""Simulation throughput: the compiled fixed step against the reference path, same process.

Each entry runs the same simulation interleaved (reference, compiled four times, reference,
compiled four times; best of each): ``SimulatorConfig(compiled=False)`` (pinocchio and LAPACK
called from Python, the path before ``multibody_dynamics/fast_step.py``) and the default
compiled step.
``ratio`` is compiled time over reference time (lower is better), beside the
simulated seconds per second of both (CPU time of the process, :data:`TIMER`: the keys
``sim_s_per_cpu_s``) and the accuracy figures of the compiled run:
closure gap ``max |phi|`` [m | rad] and energy error ``max |E - E(0)|`` [J] (passive runs).

Cases (issue "simulation throughput"): four_bar and slider_crank 10 s passive, RK4 1 ms,
projection after every step, every step recorded (the default output), and the same with
output every 10 ms; arm7 (open chain) 10 s; the Simulator.step loop of the ROS simulator
node and the scenario runner (one call per step, 2 s), with ``time_over_whole_run`` its time
over that of ``simulate`` on the same 2 s (the whole-run kernel, same start, every step
recorded; the issue's goal: the same speed in every place that steps a plant); and the
plant of the shipped scenario ``run_slider_crank.yaml`` (no run scenario is shipped for
four_bar): the inputs of the runner's ``Simulator.step`` calls are recorded in a run, then
the same calls are replayed and timed alone (the controller's time excluded), with
``runner_compiled_step`` whether the runner's simulator took the compiled step.  Run with
``python bench/run.py --only speed``; ``python -m bench.bench_speed --table`` (or
``python bench/report.py speed``) prints the table of docs/performance.md from
bench/results.json.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path

import numpy as np

from multibody_dynamics import load_model
from multibody_dynamics.projection import ProjectedDynamics
from multibody_dynamics.simulate import Simulator, SimulatorConfig, simulate

RESULTS = Path(__file__).resolve().parent / "results.json"
#: goals of the issue, simulated s per s of the compiled path (measured in CPU time)
GOALS = {"four_bar": 90.0, "slider_crank": 90.0, "arm7": 200.0}


def _cases():
    fb = load_model("four_bar")
    q0 = ProjectedDynamics(fb).project_position(np.array([0.5, 0.3, 1.5])).q
    return [("four_bar", fb, q0, [3.0, 0.0, 0.0]),
            ("slider_crank", load_model("slider_crank"), [0.0, 0.0], [6.0, -12.0]),
            ("arm7", load_model("arm7"), None, None)]


#: the CPU time of this process: both paths are single-threaded, and on the shared 2-core
#: machine (load average about 10) the wall time of a run is mostly the wait for a core (a
#: four_bar step measured 29 us of wall time against 8.4 us of CPU time in the same run)
TIMER = time.process_time


def _best(fn, rounds=2, compiled_reps=4):
    """Interleaved best-of CPU times (:data:`TIMER`) of fn(compiled) for compiled = False,
    True: ``rounds`` rounds of one reference run and ``compiled_reps`` compiled runs (the
    compiled runs take tens of milliseconds, so more of them pick the quiet moments of a shared
    machine at little cost)."""
    best = {False: np.inf, True: np.inf}
    out = {}
    for _ in range(rounds):
        for compiled in (False, True):
            for _ in range(compiled_reps if compiled else 1):
                gc.collect()
                gc.disable()
                try:
                    t0 = TIMER()
                    out[compiled] = fn(compiled)
                    best[compiled] = min(best[compiled], TIMER() - t0)
                finally:
                    gc.enable()
    return best, out


def _simulate_entry(name, model, q0, v0, duration, output_dt):
    def run(compiled):
        return simulate(model, duration, q0=q0, v0=v0, output_dt=output_dt,
                        config=SimulatorConfig(dt=1e-3, compiled=compiled))

    best, out = _best(run)
    res, ref = out[True], out[False]
    label = "every step" if output_dt is None else f"every {output_dt * 1e3:g} ms"
    entry = {
        "name": f"{name} {duration:g} s rk4 1 ms, output {label}",
        "baseline": "reference path (compiled=False)",
        "ratio": best[True] / best[False],
        "time_us": best[True] / res.nsteps * 1e6,
        "baseline_time_us": best[False] / ref.nsteps * 1e6,
        "sim_s_per_cpu_s": duration / best[True],
        "baseline_sim_s_per_cpu_s": duration / best[False],
        "speedup": best[False] / best[True],
        "success": bool(res.success and ref.success),
        "max_residual": res.max_residual,
        "baseline_max_residual": ref.max_residual,
        "energy_error_J": float(np.max(np.abs(res.energy - res.energy[0]))),
        "baseline_energy_error_J": float(np.max(np.abs(ref.energy - ref.energy[0]))),
        "max_state_difference": float(np.max(np.abs(res.q[-1] - ref.q[-1]))),
    }
    if name in GOALS and output_dt is None:
        entry["goal_sim_s_per_cpu_s"] = GOALS[name]
    return entry


def _step_entry(name, model, q0, v0, duration=2.0):
    def run(compiled):
        sim = Simulator(model, SimulatorConfig(dt=1e-3, compiled=compiled))
        sim.reset(q0, v0)
        tau = np.zeros(model.nv)
        for _ in range(int(round(duration / 1e-3))):
            sim.step(tau)
        return sim

    best, out = _best(run)
    # the whole-run kernel over the same steps (same start, every step recorded), best of eight
    whole = np.inf
    for _ in range(8):
        t0 = TIMER()
        res = simulate(model, duration, q0=q0, v0=v0, config=SimulatorConfig(dt=1e-3))
        whole = min(whole, TIMER() - t0)
    return {
        "name": f"{name} Simulator.step loop {duration:g} s rk4 1 ms",
        "time_over_whole_run": best[True] / whole,
        "whole_run_time_us": whole / res.nsteps * 1e6,
        "whole_run_max_state_difference": float(np.max(np.abs(out[True].q - res.q[-1]))),
        "baseline": "reference path (compiled=False)",
        "ratio": best[True] / best[False],
        "time_us": best[True] / out[True].nsteps * 1e6,
        "baseline_time_us": best[False] / out[False].nsteps * 1e6,
        "sim_s_per_cpu_s": duration / best[True],
        "baseline_sim_s_per_cpu_s": duration / best[False],
        "speedup": best[False] / best[True],
        "max_state_difference": float(np.max(np.abs(out[True].q - out[False].q))),
    }


def _scenario_steps(scenario):
    """The plant of a run scenario, its simulator config, the state before its first step and
    the inputs of every ``Simulator.step`` call the scenario runner made, recorded by a
    subclass put in the runner's place; also whether the runner's simulator took the compiled
    step and its final state."""
    from multibody_control.scenarios import load_run_scenario, run_scenario
    from multibody_control.scenarios import run as runner

    seen = {"taus": []}

    class Recording(Simulator):
        def step(self, tau, dt=None):
            if not seen["taus"]:
                seen.update(sim=self, start=(self.q.copy(), self.v.copy(), self.t),
                            fast=self.fast_stepper() is not None)
            seen["taus"].append(np.array(tau, float))
            return super().step(tau, dt)

    sc = load_run_scenario(Path(__file__).resolve().parents[1] / "config" / "scenarios" /
                           scenario)
    runner.Simulator = Recording
    try:
        res = run_scenario(sc)
    finally:
        runner.Simulator = Simulator
    sim = seen["sim"]
    return sc, res, sim.model, sim.config, seen["start"], seen["taus"], seen["fast"], sim.q


def _scenario_entry(scenario, whole_run_us):
    """The plant stepping of a run scenario: its ``Simulator.step`` calls replayed (same plant,
    config, start state and inputs) on the reference and the compiled path, beside the
    whole-run kernel's us per step (``whole_run_us``) on that mechanism."""
    import dataclasses

    sc, res, plant, cfg, (q0, v0, t0), taus, fast, q_end = _scenario_steps(scenario)

    def run(compiled):
        sim = Simulator(plant, dataclasses.replace(cfg, compiled=compiled))
        sim.reset(q0, v0, t0)
        for tau in taus:
            sim.step(tau)
        return sim

    best, out = _best(run)
    n = len(taus)
    return {
        "name": f"{plant.name} scenario {scenario}: its {n} Simulator.step calls replayed",
        "baseline": "reference path (compiled=False)",
        "ratio": best[True] / best[False],
        "time_us": best[True] / n * 1e6,
        "baseline_time_us": best[False] / n * 1e6,
        "sim_s_per_cpu_s": n * cfg.dt / best[True],
        "baseline_sim_s_per_cpu_s": n * cfg.dt / best[False],
        "speedup": best[False] / best[True],
        "time_over_whole_run": best[True] / n * 1e6 / whole_run_us,
        "whole_run": "the 10 s passive whole run of this mechanism above (an input that "
                     "changes every step has no whole run)",
        "runner_compiled_step": bool(fast),
        "success": bool(res.success),
        # the replay reproduces the runner's plant: final state against the runner's
        "max_state_difference": float(np.max(np.abs(out[True].q - q_end))),
    }


def run() -> list[dict]:
    cases = _cases()
    for _, model, q0, v0 in cases:  # compile (or load the cache) outside the timed runs
        simulate(model, 0.01, q0=q0, v0=v0)
        Simulator(model).step(np.zeros(model.nv))
    out = []
    whole = {}
    for name, model, q0, v0 in cases:
        out.append(_simulate_entry(name, model, q0, v0, 10.0, None))
        whole[name] = out[-1]["time_us"]
        if name != "arm7":
            out.append(_simulate_entry(name, model, q0, v0, 10.0, 0.01))
    for name, model, q0, v0 in cases:
        out.append(_step_entry(name, model, q0, v0))
    out.append(_scenario_entry("run_slider_crank.yaml", whole["slider_crank"]))
    load = round(os.getloadavg()[0], 2)  # the shared machine's load during the run
    for e in out:
        e["load_average_1min"] = load
    return out


if __name__ == "__main__":
    if "--table" in sys.argv:  # the docs' table, from bench/results.json
        from bench import report

        print(report.table(report.load(RESULTS), "speed"))
    else:
        for e in run():
            print(e)
