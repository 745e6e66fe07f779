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
1 s with a quintic rest-to-rest law (peak acceleration 1.6 m/s^2). Run ``python -m bench.bench_flexible_parallel``.
"""

from __future__ import annotations

import time

import numpy as np

from multibody_control.inversion.desired import TabulatedOutput
from multibody_control.tasks import Task, TimeLaw, straight_line
from multibody_dynamics.flexible.closed import (
    ClosedOutputServo,
    flexible_parallel_tool,
    invert_closed,
    parallel_tool_outputs,
)

T0, TF = 0.0, 1.0  # s: motion
T_PRE, T_POST = 0.3, 0.3  # s: pre-/post-actuation (slowest unstable zero ~50 1/s: e^-15)
DT = 2e-4  # s: grid of the inverse models (fastest zero-dynamics eigenvalue ~4200 1/s)
START = np.array([1.081, 1.081]) * np.sqrt(0.5)  # m: tool point, long arm at 45 deg
MOVE = np.array([0.1, -0.1])  # m
Q_GUESS = np.array([0.0, 0.8, np.pi / 4, 2.4])  # s1, s2, alpha, beta: the lambda branch


def task() -> Task:
    return Task(TimeLaw(T0, TF, 5), (straight_line("long_arm", START, START + MOVE),))


def desired_outputs(system, H_r, t):
    """``y_d = H_r q_r`` of the undeformed machine on the task (rigid inverse kinematics)."""
    p, pd, pdd = task()(t)
    guess = Q_GUESS.copy()
    ys = []
    for k in range(t.size):
        qr, vr, ar = system.rigid_task_kinematics("long_arm", None, p[k], pd[k], pdd[k], guess)
        guess = qr
        ys.append((H_r @ qr, H_r @ vr, H_r @ ar))
    y, yd, ydd = (np.array([r[j] for r in ys]) for j in range(3))
    return TabulatedOutput(t, y, yd, ydd)


def tool_error(system, result):
    """Distance [m] of the tool point of the inverse model's q from the task, per sample."""
    p = task()(result.t)[0]
    r = np.array([system.chain.point_position(q, "long_arm") for q in result.q])
    return np.linalg.norm(r - p, axis=1)


def plant_error(system, result, frequency=10.0):
    """Simulate the closed plant from the inverse model's first state with its feedforward
    plus a collocated PD law on the carts around the cart reference (the book's joint
    controllers), ``K_P = m_c w^2``, ``K_D = 2 m_c w`` at ``frequency`` [Hz]; return the max
    tool error [m] and the simulation (1 ms samples)."""
    from scipy.interpolate import CubicSpline

    t = result.t
    uff = CubicSpline(t, result.u, axis=0)
    sref = CubicSpline(t, result.q[:, :2], axis=0)
    vref = CubicSpline(t, result.v[:, :2], axis=0)
    w = 2 * np.pi * frequency
    mc = system.chain.bodies[0].mass
    kp, kd = mc * w * w, 2 * mc * w

    def feedback(tk, q, v):
        return kp * (sref(tk) - q[:2]) + kd * (vref(tk) - v[:2])

    ts = t[::5]
    sim = system.simulate(result.q[0], result.v[0], ts, u=uff, feedback=feedback, rtol=1e-8,
                          atol=1e-10)
    p = task()(sim.t)[0]
    r = np.array([system.chain.point_position(q, "long_arm") for q in sim.q])
    return float(np.linalg.norm(r - p, axis=1).max()), sim


def eigen_split(system, output, q_r):
    H, gamma = parallel_tool_outputs(system)[output]
    servo = ClosedOutputServo(system, H, gamma, guess=q_r)
    Q, _ = servo.zero_dynamics_jacobian(H @ q_r)
    lam = np.linalg.eigvals(Q)
    real = np.abs(lam.imag) < 1e-9 * np.abs(lam).max()
    return {"stable": int(np.sum(lam.real < 0)), "unstable": int(np.sum(lam.real > 0)),
            "real_unstable_1_per_s": sorted(float(x) for x in lam[real & (lam.real > 0)].real),
            "slowest_stable_real_part_1_per_s": float(-np.max(lam.real[lam.real < 0]))}


def bvp_cross_check() -> dict:
    """Reduced tool (3 + 1 modes): the dichotomy sweeps of ``invert_closed`` against the
    project's collocation driver ``multibody_control.inversion.methods._stable`` (scipy
    ``solve_bvp``) on the same servo, 5 mm cart move in 0.3 s."""
    from multibody_control.inversion.methods import _stable

    small = flexible_parallel_tool(modes_long=3, modes_short=1, link_elements=6)
    q = np.zeros(small.nv)
    q[:4] = Q_GUESS
    q = small.project_position(q, partitioned=True)
    H, gamma = parallel_tool_outputs(small)["combined"]
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
    eta, ok, msg = _stable(servo, ytraj, t, eta0, etaf, Q0, Qf, 100000, 1e-6, None, 0,
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
    system = flexible_parallel_tool()
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
    t = np.arange(T0 - T_PRE, TF + T_POST + DT / 2, DT)
    outs = parallel_tool_outputs(system)
    results = {}
    for output, method in (("rigid", "classical"), ("combined", "stable")):
        H, gamma = outs[output]
        servo = ClosedOutputServo(system, H, gamma, guess=q[:4])
        ytraj = desired_outputs(system, H, t)
        res = invert_closed(servo, ytraj, t, method=method)
        err = tool_error(system, res)
        y = res.q[:, :system.nq_r] @ H.T + res.q[:, system.nq_r:] @ gamma.T
        results[output] = res
        sim_err, sim = plant_error(system, res)
        entries.append({
            "name": f"{method} inversion, {output} output",
            "success": res.success, "message": res.message,
            "tool_error_max_mm": 1e3 * float(err.max()),
            "tool_error_during_motion_mm": 1e3 * float(err[(res.t >= T0) & (res.t <= TF)].max()),
            "output_error_max": float(np.max(np.abs(y - ytraj(res.t)[0]))),
            "input_max_N": float(np.max(np.abs(res.u))),
            "evaluations": res.evaluations, "iterations": res.iterations,
            "wall_time_s": res.wall_time,
            "plant_simulation_tool_error_mm": 1e3 * sim_err,
            "plant_simulation_success": sim.success,
            "plant_simulation_wall_time_s": sim.wall_time,
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
