"""Memory of the four nodes over a long closed loop: does any node grow?

arm7 at 500 Hz on the wall clock: simulator_node, controller_node (computed torque),
dynamics_node and inverter_node run for ``BENCH_ROS_MEMORY_S`` seconds (default 600). The
bench process sends controller_node a rest-to-rest trajectory every ``MOVE_PERIOD`` s (back
and forth between two configurations) and inverter_node an output trajectory every
``REQUEST_PERIOD`` s, so that every message path runs, and samples the resident set size
(VmRSS, /proc) of each node every ``SAMPLE_PERIOD`` s.

Per node: RSS after the warm-up (``WARMUP`` s: imports, first solves, DDS discovery) and at
the end [MB], and the growth over the measured span from a least-squares line through the
samples after the warm-up, scaled to 10 minutes [MB / 10 min]. ``holds``: every node grows by
less than ``GROWTH_LIMIT_MB`` per 10 minutes (an allocator's noise; a leak of one message per
period at 500 Hz would be tens of MB).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np

from multibody_control.trajectories import rest_to_rest
from multibody_dynamics import load_model

from .bench_ros_loop import _env, _start, _stop

DURATION = float(os.environ.get("BENCH_ROS_MEMORY_S", "600"))
RATE = 500.0            # Hz, simulator and controller
WARMUP = 60.0           # s before the first sample that counts
SAMPLE_PERIOD = 5.0     # s
MOVE_PERIOD = 2.0       # s between two trajectories to controller_node
REQUEST_PERIOD = 20.0   # s between two inversion requests
GROWTH_LIMIT_MB = 2.0   # per 10 minutes
Q_A = np.array([0.2, 0.5, -0.3, -1.2, 0.2, 0.9, 0.3])
Q_B = Q_A + 0.3 * np.array([1, -1, 1, -1, 1, -1, 1])
NODES = {
    "simulator_node": {"robot": "arm7", "rate_hz": RATE, "initial_positions": Q_A.tolist()},
    "controller_node": {"robot": "arm7", "rate_hz": RATE, "law": "computed_torque"},
    "dynamics_node": {"robot": "arm7"},
    "inverter_node": {"robot": "arm7"},
}


def rss_mb(pid: int) -> float:
    """Resident set size of process ``pid`` [MB] (Linux /proc; NaN elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _trajectory(names, q0, q1, duration=1.0):
    from multibody_dynamics.ros.conversions import trajectory_msg

    t = np.linspace(0.0, duration, 21)
    wp = rest_to_rest(t, q0, q1, 0.0, duration)
    return trajectory_msg(names, t, wp.q, wp.v, wp.a)


def _loop(procs: dict, names) -> dict[str, list[tuple[float, float]]]:
    """Drive the nodes for DURATION s; the (time, RSS) samples of each node."""
    import rclpy
    from trajectory_msgs.msg import JointTrajectory

    os.environ.update(_env())
    rclpy.init()
    node = rclpy.create_node("bench_ros_memory")
    to_ctl = node.create_publisher(JointTrajectory, "/controller_node/joint_trajectory", 10)
    to_inv = node.create_publisher(JointTrajectory, "/inverter_node/output_trajectory", 10)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in procs}
    start = time.monotonic()
    next_move = next_request = next_sample = start + 5.0
    forth = True
    try:
        while (now := time.monotonic()) - start < DURATION:
            rclpy.spin_once(node, timeout_sec=0.05)
            if now >= next_move:
                q0, q1 = (Q_A, Q_B) if forth else (Q_B, Q_A)
                to_ctl.publish(_trajectory(names, q0, q1))
                forth, next_move = not forth, next_move + MOVE_PERIOD
            if now >= next_request:
                to_inv.publish(_trajectory(names, Q_A, Q_B))
                next_request += REQUEST_PERIOD
            if now >= next_sample:
                for name, proc in procs.items():
                    samples[name].append((now - start, rss_mb(proc.pid)))
                next_sample += SAMPLE_PERIOD
    finally:
        node.destroy_node()
        rclpy.shutdown()
    return samples


def run() -> list[dict]:
    names = load_model("arm7").coordinate_names
    logdir = Path(tempfile.mkdtemp(prefix="bench_ros_memory_"))
    procs = {name: _start(name, params, logdir / f"{name}.log") for name, params in NODES.items()}
    try:
        samples = _loop(procs, names)
        alive = {name: proc.poll() is None for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            _stop(proc)
    out = []
    for name, rows in samples.items():
        arr = np.array([r for r in rows if r[0] >= WARMUP and np.isfinite(r[1])])
        if arr.shape[0] < 3:
            why = "the node died" if not alive[name] else (
                f"only {arr.shape[0]} samples after the {WARMUP:g} s warm-up "
                f"(BENCH_ROS_MEMORY_S={DURATION:g})")
            out.append({"name": name, "skipped": why, "holds": False})
            continue
        slope = float(np.polyfit(arr[:, 0], arr[:, 1], 1)[0])  # MB/s
        growth = slope * 600.0
        out.append({"name": name, "duration_s": DURATION, "rate_hz": RATE,
                    "rss_mb_after_warmup": round(float(arr[0, 1]), 2),
                    "rss_mb_end": round(float(arr[-1, 1]), 2),
                    "rss_mb_max": round(float(arr[:, 1].max()), 2),
                    "growth_mb_per_10min": round(growth, 3), "alive": alive[name],
                    "holds": bool(alive[name] and growth < GROWTH_LIMIT_MB),
                    "load_average": round(os.getloadavg()[0], 2)})
    return out
