"""Parallel flexible machine tool (Seifried 2014 Sect. 6.5): zero dynamics and inversion.

Entries: the zero-dynamics eigenvalue split for the combined output (6.39) and the collocated
outputs (book: 7 stable / 29 unstable for the combined output), the end-effector error of the
classical inversion with the collocated output ``y = [s1, alpha]`` (book: about 12 mm) and of
the stable inversion with the combined output (book: about 0.03 mm) — from the inverse model
and from a simulation of the closed plant driven by the feedforward plus a PD law on the carts
— a cross-check of the dichotomy sweeps against the collocation driver ``_stable`` on a reduced
model, and timings as ratios (stable / classical, dichotomy / BVP; same run). About 7 minutes
on one core. The split with POD shape functions instead of eigenmodes (29 stable / 7 unstable)
is studied in ``bench/study_parallel_tool_pod.py`` (not part of ``make bench``, about 3 min).

The book's test trajectory (Fig. 6.11) is only plotted; chosen here: the tool point moves on a
straight line from (0.7644, 0.7644) m (long arm at 45 deg, cart 1 at 0) by (+0.1, -0.1) m in
1 s with a quintic rest-to-rest law (peak acceleration 1.6 m/s^2). Run ``python -m
bench.bench_flexible_parallel``.
"""

from __future__ import annotations

import time

import numpy as np

from multibody_control.inversion.closed_flexible import (
    PARALLEL_TOOL_TASK,
    ClosedOutputServo,
    invert_closed,
    point_error,
    track_closed,
)
from multibody_control.inversion.desired import TabulatedOutput
from multibody_control.inversion.flexible_scenario import (
    ClosedDesignSpec,
    closed_grid,
    closed_task_outputs,
    closed_task_path,
    closed_zero_dynamics,
    parallel_tool_task,
    run_closed_design,
)
from multibody_control.inversion.internal import solve_stable
from multibody_control.tasks import TimeLaw
from multibody_dynamics.robot import load_robot

# the task, grid and branch are the library's (PARALLEL_TOOL_TASK; the scenario
# config/scenarios/invert_flexible_parallel_tool.yaml runs the same pipeline on a 0.5 ms grid)
T0, TF = PARALLEL_TOOL_TASK["t0"], PARALLEL_TOOL_TASK["tf"]  # s: motion
T_PRE, T_POST = PARALLEL_TOOL_TASK["t_pre"], PARALLEL_TOOL_TASK["t_post"]  # s: pre-/post-actuation
DT = 2e-4  # s: grid of the inverse models (fastest zero-dynamics eigenvalue ~4200 1/s)
START = np.asarray(PARALLEL_TOOL_TASK["start"])  # m: tool point, long arm at 45 deg
MOVE = np.asarray(PARALLEL_TOOL_TASK["move"])  # m
Q_GUESS = np.asarray(PARALLEL_TOOL_TASK["guess"])  # s1, s2, alpha, beta: the lambda branch


def task():
    return parallel_tool_task()


def desired_outputs(system, H_r, t):
    """``y_d = H_r q_r`` of the undeformed machine on the task (rigid inverse kinematics)."""
    return closed_task_outputs(t, closed_task_path(system, task(), t, Q_GUESS), H_r)


def tool_error(system, result):
    """Distance [m] of the tool point of the inverse model's q from the task, per sample."""
    return point_error(system, result.q, "long_arm", task()(result.t)[0])


def plant_error(system, result, frequency=10.0):
    """Closed plant with the feedforward plus the cart PD law at ``frequency`` [Hz]
    (:func:`track_closed`, 1 ms samples); the max tool error [m] and the simulation."""
    sim = track_closed(system, result, frequency=frequency, every=5)
    return float(point_error(system, sim.q, "long_arm", task()(sim.t)[0]).max()), sim


def eigen_split(system, output, q_r):
    H, gamma = system.outputs[output]
    lam = closed_zero_dynamics(system, H, gamma, q_r)
    real = np.abs(lam.imag) < 1e-9 * np.abs(lam).max()
    return {"stable": int(np.sum(lam.real < 0)), "unstable": int(np.sum(lam.real > 0)),
            "real_unstable_1_per_s": sorted(float(x) for x in lam[real & (lam.real > 0)].real),
            "slowest_stable_real_part_1_per_s": float(-np.max(lam.real[lam.real < 0]))}


def bvp_cross_check() -> dict:
    """Reduced tool (3 + 1 modes): the dichotomy sweeps of ``invert_closed`` against the
    project's collocation driver ``multibody_control.inversion.internal.solve_stable`` (scipy
    ``solve_bvp``) on the same servo, 5 mm cart move in 0.3 s."""
    small = load_robot("flexible_parallel_tool",
                       parameters=dict(modes_long=3, modes_short=1, link_elements=6))
    q = np.zeros(small.nv)
    q[:4] = Q_GUESS
    q = small.project_position(q, partitioned=True)
    H, gamma = small.outputs["combined"]
    servo = ClosedOutputServo(small, H, gamma, guess=q[:4])
    t = np.linspace(-0.3, 0.6, 601)
    law = TimeLaw(0.0, 0.3, 5)
    s, sd, sdd = law(t)
    step = np.array([0.005, 0.0])
    ytraj = TabulatedOutput(t, H @ q[:4] + np.outer(s, step), np.outer(sd, step),
                            np.outer(sdd, step))
    res = invert_closed(servo, ytraj, t, method="stable", tol=1e-12)
    y = ytraj(t)[0]
    eta0, etaf = servo.equilibrium(y[0]), servo.equilibrium(y[-1])
    Q0, _ = servo.zero_dynamics_jacobian(y[0], eta0)
    Qf, _ = servo.zero_dynamics_jacobian(y[-1], etaf)
    start = time.perf_counter()
    eta, ok, msg = solve_stable(servo, ytraj, t, eta0, etaf, Q0, Qf, 100000, 1e-6, None, 0,
                           initial_nodes=600)
    bvp_time = time.perf_counter() - start
    return {"name": "stable inversion: dichotomy sweeps vs solve_bvp (_stable), reduced tool",
            "bvp_success": bool(ok), "bvp_message": msg,
            "max_eta_difference_relative": float(np.abs(eta - res.eta).max()
                                                 / np.abs(res.eta).max()),
            "ratio_dichotomy_over_bvp": res.wall_time / bvp_time,
            "dichotomy_time_s": res.wall_time, "bvp_time_s": bvp_time}


def run() -> list[dict]:
    start = time.perf_counter()
    system = load_robot("flexible_parallel_tool")
    build = time.perf_counter() - start
    q = np.zeros(system.nv)
    q[:4] = Q_GUESS
    q = system.project_position(q, partitioned=True)
    entries = [{"name": "flexible_parallel_tool model", "nq_r": system.nq_r,
                "nq_e": system.nq_e, "closure_rows": system.nc, "build_time_s": build}]
    for output, book in (("combined", "7 stable / 29 unstable"), ("rigid", "bounded"),
                         ("collocated", "bounded")):
        entries.append({"name": f"zero dynamics, {output} output", "book": book,
                        **eigen_split(system, output, q[:4])})
    t = closed_grid(task(), DT, T_PRE, T_POST)
    path = closed_task_path(system, task(), t, Q_GUESS)
    results = {}
    # the book's collocated output y = [s1, alpha] is "rigid" in the model's outputs and
    # "collocated" in scenario files (closed_output)
    for output, method in (("rigid", "classical"), ("combined", "stable")):
        name = "collocated" if output == "rigid" else output
        d = run_closed_design(system, task(), t, ClosedDesignSpec(method, name), path=path,
                              tracking={"every": 5}, zero_dynamics=False)
        res, err = d.result, d.tool_error
        results[output] = res
        entries.append({
            "name": f"{method} inversion, {output} output",
            "success": res.success, "message": res.message,
            "tool_error_max_mm": 1e3 * float(err.max()),
            "tool_error_during_motion_mm": 1e3 * d.during_motion(task()),
            "output_error_max": d.output_error,
            "input_max_N": float(np.max(np.abs(res.u))),
            "evaluations": res.nfev, "iterations": res.iterations,
            "wall_time_s": res.wall_time,
            "plant_simulation_tool_error_mm": 1e3 * float(d.tracking_error.max()),
            "plant_simulation_success": d.tracking.success,
            "plant_simulation_wall_time_s": d.tracking.wall_time,
            "book_tool_error_mm": 12.0 if output == "rigid" else 0.03,
        })
    entries.append(bvp_cross_check())
    base = results["rigid"].wall_time
    entries.append({"name": "stable inversion time / classical inversion time",
                    "ratio_stable_over_classical": results["combined"].wall_time / base,
                    "classical_time_s": base, "stable_time_s": results["combined"].wall_time})
    return entries


if __name__ == "__main__":  # pragma: no cover
    for e in run():
        print(e)
