"""controller_node + simulator_node over DDS on this machine: achieved loop rate and jitter.

For arm7 at 250 Hz, 500 Hz and 1 kHz (both nodes at the same rate, wall-clock paced,
computed torque holding the start position), measured for ``WINDOW`` seconds once the
loop runs:

* ``/joint_states`` period from the simulator's header stamps (its publish instants) and
  ``/<controller>/commands`` period from the DDS source timestamps of the messages (the
  controller's publish instants; the message has no stamp): p50 and p99 [ms], the achieved
  rate, and the p99 of |period - 1/rate| (goal: <= 0.2 ms at 1 kHz); and for both the DDS
  delivery time to the probe (received - source timestamp), p50 and p99.  The probe takes
  its messages in batches every ``DRAIN_PERIOD`` from subscriptions no executor runs
  (``PolledSubscription``), so that it costs the nodes little CPU;
* the CPU time of each node per period (all its threads, from /proc), and the share of a
  period spent in the library: the control law's ``step`` and the
  simulator's ``Simulator.step`` (rk4) timed in-process on the same model, divided by the
  nominal period (the rest of a cycle is rclpy, message conversion and DDS).

The executors (``--executor single_threaded|events``, multibody_dynamics/ros/runtime.py) are
compared on arm7 at 500 Hz and 1 kHz: both nodes in the same executor, the two executors
alternating in the same run, and the ratios events / single_threaded of the achieved rate
and of the p99 period error.  ``BENCH_ROS_LOOP_ONLY=executors`` measures only that.

The stepping (parameter ``timing`` of both nodes: ``timer``, an rclpy timer on the executor,
or ``paced``, a thread of their own at absolute wall-clock deadlines while the executor only
receives) is compared the same way at 250 Hz, 500 Hz and 1 kHz, both nodes in the default
executor, ``timer`` and ``paced`` alternating in the same run ``REPEATS`` times, with the
ratios paced / timer; ``BENCH_ROS_LOOP_ONLY=timings`` measures only that,
``BENCH_ROS_LOOP_ROBOTS=arm7,five_bar`` selects the robots (default: arm7).

Beside every measured window runs the machine's floor (:func:`floor_loop`): a third process
pacing an empty step with the same PacedLoop and priority; its p99 period error is what this
machine's wake-ups allow in that window, and ``*_p99_error_over_floor`` is each topic's over
it.  On this shared 2-core VM the floor moves between 0.06 and 1.2 ms within minutes.

The same for five_bar (closed loop: the simulator projects onto the constraint manifold
after every step) with a joint PD on the two motors.  The machine load (1-minute load
average, CPU count) is recorded with every entry: the figures are those of a shared machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from multibody_control.controllers import Reference, make_controller
from multibody_dynamics import load_model
from multibody_dynamics.simulate import Simulator, SimulatorConfig

from .common import per_call

RATES = tuple(float(r) for r in os.environ.get("BENCH_ROS_LOOP_RATES", "250,500,1000").split(","))
WINDOW = 5.0            # s of steady loop measured per rate
STARTUP_TIMEOUT = 60.0  # s
GOAL_P99_ERROR_MS = 0.2
# (robot, law, start configuration, kp, kd): arm7 with the ROS examples' law; five_bar with a
# PD sized for its 0.8 kg of links (stable with the zero-order hold down to 250 Hz)
CASES = (
    ("arm7", "computed_torque", [0.2, 0.5, -0.3, -1.2, 0.2, 0.9, 0.3], 100.0, 20.0),
    ("five_bar", "pd", [2.0, -1.2, 1.1, 1.2], 1.0, 0.05),
)
DOMAIN_ID = 200 + os.getpid() % 30
#: executor comparison (runtime.EXECUTORS): arm7 at these rates, each executor REPEATS times
EXECUTORS = ("single_threaded", "events")
EXECUTOR_RATES = (500.0, 1000.0)
REPEATS = int(os.environ.get("BENCH_ROS_LOOP_REPEATS", "2"))
DRAIN_PERIOD = 0.01  # s between two takes of the probe


def _env() -> dict:
    env = dict(os.environ)
    env.update({"ROS_DOMAIN_ID": str(DOMAIN_ID), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
                "ROS_LOCALHOST_ONLY": "1", "RCUTILS_LOGGING_BUFFERED_STREAM": "0"})
    return env


def _start(executable: str, params: dict, log: Path,
           executor: str = "single_threaded") -> subprocess.Popen:
    """Start a node of the suite (a console script next to this Python) with ``params``."""
    exe = Path(sys.executable).parent / executable
    args = [str(exe), "--executor", executor, "--ros-args"]
    for k, v in params.items():
        v = "true" if v is True else "false" if v is False else (
            "[" + ",".join(map(repr, v)) + "]" if isinstance(v, list) else repr(v)
            if isinstance(v, float) else str(v))
        args += ["-p", f"{k}:={v}"]
    return subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT, env=_env(),
                            start_new_session=True)


def _stop(proc: subprocess.Popen):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10.0)


def _stats(periods_s: np.ndarray, nominal: float) -> dict:
    ms = periods_s * 1e3
    return {"p50_ms": round(float(np.percentile(ms, 50)), 4),
            "p99_ms": round(float(np.percentile(ms, 99)), 4),
            "max_ms": round(float(ms.max()), 3),
            "p99_error_ms": round(float(np.percentile(np.abs(ms - nominal * 1e3), 99)), 4),
            "rate_hz": round(float(1.0 / periods_s.mean()), 1)}


def _measure(rate: float, logdir: Path, robot, law, q0, kp, kd,
             kind: str = "single_threaded", timing: str | None = None) -> dict:
    """One run of both nodes; ``timing`` is a key of :data:`TIMING_PARAMETERS` or None."""
    import rclpy
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from multibody_dynamics.ros.conversions import stamp_to_sec
    from multibody_dynamics.ros.runtime import PolledSubscription

    context = rclpy.context.Context()
    rclpy.init(context=context, domain_id=DOMAIN_ID)
    node = rclpy.create_node(f"bench_probe_{os.getpid()}", context=context)
    # the probe takes its messages in batches every DRAIN_PERIOD (no executor wake-up per
    # message: at 1 kHz a per-message probe took half a core from the nodes it measures);
    # the periods come from the publishers' instants, so the batching does not enter them
    stamps, states_info, commands_info = [], [], []

    def on_state(msg, info):
        stamps.append(stamp_to_sec(msg.header.stamp))
        states_info.append((info["source_timestamp"], info["received_timestamp"]))

    qos = QoSProfile(depth=1000)
    subs = (PolledSubscription(node, JointState, "/joint_states", on_state, qos, with_info=True),
            PolledSubscription(node, Float64MultiArray, "/effort_controller/commands",
                               lambda m, info: commands_info.append(
                                   (info["source_timestamp"], info["received_timestamp"])),
                               qos, with_info=True))
    stop = threading.Event()

    def drain():
        while not stop.is_set() and context.ok():
            for sub in subs:
                sub.drain()
            time.sleep(DRAIN_PERIOD)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    # the controller first, as in the tests
    extra = {} if timing is None else TIMING_PARAMETERS[timing]
    tag = f"{robot}_{rate:g}_{kind}_{timing or 'default'}"
    ctl = _start("controller_node", {"robot": robot, "rate_hz": rate, "law": law, "kp": [kp],
                                     "kd": [kd], **extra},
                 logdir / f"controller_{tag}.log", kind)
    sim = _start("simulator_node", {"robot": robot, "rate_hz": rate, "realtime": True,
                                    "initial_positions": q0, **extra},
                 logdir / f"simulator_{tag}.log", kind)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while (len(stamps) < 50 or len(commands_info) < 50) and time.monotonic() < deadline:
            time.sleep(0.05)
        if len(stamps) < 50 or len(commands_info) < 50:
            return {"error": f"loop did not start within {STARTUP_TIMEOUT:g} s "
                             f"({len(stamps)} states, {len(commands_info)} commands)"}
        time.sleep(1.0)  # settle
        floor = _start_floor(rate, extra.get("thread_priority", 0))
        n_s, n_c = len(stamps), len(commands_info)
        cpu0, wall0 = (_cpu_seconds(sim.pid), _cpu_seconds(ctl.pid)), time.perf_counter()
        time.sleep(WINDOW)
        cpu1, wall1 = (_cpu_seconds(sim.pid), _cpu_seconds(ctl.pid)), time.perf_counter()
        floor_stats = _floor_result(floor)
        js = np.diff(np.array(stamps[n_s:]))
        st = np.array(states_info[n_s:], float) * 1e-9
        cm = np.array(commands_info[n_c:], float) * 1e-9
    finally:
        _stop(sim)
        _stop(ctl)
        stop.set()
        thread.join(5.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    states = {**_stats(js, 1.0 / rate), **_latency(st)}
    # CPU of each node per period (all its threads: executor, stepping, DDS) [us]
    cpu = {f"{name}_cpu_per_period_us": round((b - a) / ((wall1 - wall0) * rate) * 1e6, 1)
           for name, a, b in zip(("simulator", "controller"), cpu0, cpu1)}
    out = {"joint_states": states, "commands": {**_stats(np.diff(cm[:, 0]), 1.0 / rate),
                                                **_latency(cm)}, **cpu,
           "machine_floor": floor_stats}
    if "p99_error_ms" in floor_stats:  # the nodes' p99 period error over the floor's, same window
        for topic in ("joint_states", "commands"):
            out[f"{topic}_p99_error_over_floor"] = round(
                out[topic]["p99_error_ms"] / max(floor_stats["p99_error_ms"], 1e-6), 2)
    return out


# -- the machine's own floor: an empty paced loop beside the nodes ----------------------------

def _start_floor(rate: float, priority: int) -> subprocess.Popen:
    """A process pacing an empty step at ``rate`` for ``WINDOW`` s (same PacedLoop, same
    priority as the nodes): what this machine's wake-ups allow at this moment."""
    code = ("import json, sys; from bench.bench_ros_loop import floor_loop; "
            f"print(json.dumps(floor_loop({rate!r}, {int(priority)}, {WINDOW!r})))")
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            cwd=str(Path(__file__).resolve().parent.parent))


def _floor_result(proc: subprocess.Popen) -> dict:
    import json

    try:
        out, _ = proc.communicate(timeout=WINDOW + 30.0)
        return json.loads(out.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        proc.kill()
        return {"error": f"floor probe failed: {type(exc).__name__}: {exc}"}


def floor_loop(rate: float, priority: int, seconds: float) -> dict:
    """Period statistics (as for the topics) of a :class:`PacedLoop` whose step only reads the
    clock, run for ``seconds``: the wake-up jitter of this machine, no ROS, no work."""
    from multibody_dynamics.ros.runtime import PacedLoop

    instants = []
    loop = PacedLoop(lambda: instants.append(time.perf_counter()), 1.0 / rate,
                     name="floor", priority=priority).start()
    time.sleep(seconds)
    loop.stop()
    out = _stats(np.diff(np.array(instants)), 1.0 / rate)
    if loop.priority_error:
        out["priority_error"] = loop.priority_error
    return out


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far [s] (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _latency(info: np.ndarray) -> dict:
    """DDS delivery time (received - source timestamp) p50 and p99 [ms]."""
    lat = (info[:, 1] - info[:, 0]) * 1e3
    return {"latency_p50_ms": round(float(np.percentile(lat, 50)), 4),
            "latency_p99_ms": round(float(np.percentile(lat, 99)), 4)}


def _library_times(rate: float, robot, law, q0, kp, kd) -> tuple[float, float]:
    from multibody_dynamics.rolling import model_constraints

    model = load_model(robot)
    ctl = make_controller(law, model, kp, kd)
    sim = Simulator(model, SimulatorConfig(dt=1.0 / rate), constraints=model_constraints(model))
    sim.reset(np.array(q0))  # assembled for a closed loop
    q = sim.q
    ref = Reference.hold(model, q + 0.01)
    tau = np.zeros(model.nv)
    t_ctl = per_call(lambda: ctl.step(0.0, q, np.zeros(model.nv), ref), number=500, repeat=5)
    t_sim = per_call(lambda: sim.step(tau), number=500, repeat=5)
    return t_ctl, t_sim


def _median_runs(out: list, label: str, key: str, runs: dict, **extra) -> dict:
    """Per setting of ``runs`` (setting -> measurements): append to ``out`` the run with the
    median p99 period error of the states, with every run's rate, p99 error and load (or the
    last failed run when none succeeded); return setting -> that median run."""
    best = {}
    for setting, measured in runs.items():
        ok = sorted((m for m in measured if "joint_states" in m),
                    key=lambda m: m["joint_states"]["p99_error_ms"])
        if not ok:
            out.append({"name": f"{label} {setting}", **measured[-1]})
            continue
        best[setting] = ok[len(ok) // 2]
        out.append({"name": f"{label} {setting}", key: setting, "repeats": len(ok),
                    **extra, **best[setting],
                    "rates_all": [m["joint_states"]["rate_hz"] for m in ok],
                    "p99_error_all_ms": [m["joint_states"]["p99_error_ms"] for m in ok],
                    "loads_all": [m["load_1min"] for m in ok]})
    return best


def _ratios(name: str, run: dict, baseline: dict) -> dict:
    """``run`` over ``baseline`` (same benchmark run): achieved rates and p99 period errors."""
    entry = {"name": name}
    for topic in ("joint_states", "commands"):
        entry[f"{topic}_rate_ratio"] = round(run[topic]["rate_hz"] / baseline[topic]["rate_hz"], 3)
        entry[f"{topic}_p99_error_ratio"] = round(
            run[topic]["p99_error_ms"] / max(baseline[topic]["p99_error_ms"], 1e-6), 3)
    return entry


def compare_executors(logdir: Path) -> list[dict]:
    """arm7 at EXECUTOR_RATES with both nodes in each executor, alternating, ``REPEATS`` times.

    One entry per rate and executor (the run with the median p99 period error of the
    states), then one ratio entry per rate: events / single_threaded of the achieved rates
    and of the p99 period errors (same run, the baseline is single_threaded).
    """
    robot, law, q0, kp, kd = CASES[0]
    out = []
    for rate in EXECUTOR_RATES:
        runs = {ex: [] for ex in EXECUTORS}
        for _ in range(REPEATS):
            for ex in EXECUTORS:
                m = _measure(rate, logdir, robot, law, q0, kp, kd, ex)
                m["load_1min"] = round(os.getloadavg()[0], 2)
                runs[ex].append(m)
        best = _median_runs(out, f"{robot} {rate:g} Hz", "executor", runs)
        if len(best) == 2:
            out.append(_ratios(f"{robot} {rate:g} Hz events / single_threaded",
                               best["events"], best["single_threaded"]))
    return out


#: node parameters of each compared stepping: the rclpy timer, the paced thread, and the paced
#: thread with SCHED_FIFO priority 50 (ros2_control's default thread_priority)
TIMING_PARAMETERS = {"timer": {"timing": "timer"}, "paced": {"timing": "paced"},
                     "paced_fifo": {"timing": "paced", "thread_priority": 50}}
TIMINGS = tuple(os.environ.get("BENCH_ROS_LOOP_TIMINGS", ",".join(TIMING_PARAMETERS)).split(","))


def compare_timings(logdir: Path, robots=None) -> list[dict]:
    """Both nodes with each of :data:`TIMINGS` in turn, alternating ``REPEATS`` times per rate.

    One entry per robot, rate and timing (the run with the median p99 period error of the
    states, with the library share of the period and the load before and after every run),
    then one ratio entry per robot, rate and timing other than timer: its achieved rates and
    p99 period errors over the timer's (same run, the baseline is timer).
    """
    names = robots or os.environ.get("BENCH_ROS_LOOP_ROBOTS", "arm7").split(",")
    out = []
    for case in (c for c in CASES if c[0] in names):
        robot = case[0]
        for rate in RATES:
            t_ctl, t_sim = _library_times(rate, *case)
            share = {"law_step_us": round(t_ctl * 1e6, 1), "sim_step_us": round(t_sim * 1e6, 1),
                     "library_share": round((t_ctl + t_sim) * rate, 3)}
            runs = {tm: [] for tm in TIMINGS}
            for _ in range(REPEATS):
                for tm in TIMINGS:
                    load = os.getloadavg()[0]
                    m = _measure(rate, logdir, *case, timing=tm)
                    m["load_1min"] = [round(load, 2), round(os.getloadavg()[0], 2)]
                    runs[tm].append(m)
            best = _median_runs(out, f"{robot} {rate:g} Hz", "timing", runs,
                                cpus=os.cpu_count(), **share)
            for tm in (t for t in TIMINGS if t != "timer" and t in best and "timer" in best):
                out.append(_ratios(f"{robot} {rate:g} Hz {tm} / timer", best[tm], best["timer"]))
    return out


def run() -> list[dict]:
    logdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_ros_loop_{os.getpid()}"
    logdir.mkdir(parents=True, exist_ok=True)
    out = []
    only = os.environ.get("BENCH_ROS_LOOP_ONLY")
    if only == "executors":
        return compare_executors(logdir)
    if only == "timings":
        return compare_timings(logdir)
    for case in CASES:
        robot = case[0]
        for rate in RATES:
            load = os.getloadavg()[0]
            m = _measure(rate, logdir, *case)
            t_ctl, t_sim = _library_times(rate, *case)
            period = 1.0 / rate
            entry = {"name": f"{robot} {rate:g} Hz", "load_1min": round(load, 2),
                     "cpus": os.cpu_count(), **m,
                     "law_step_us": round(t_ctl * 1e6, 1), "sim_step_us": round(t_sim * 1e6, 1),
                     "law_share": round(t_ctl / period, 3), "sim_share": round(t_sim / period, 3)}
            if "joint_states" in m and rate == 1000.0 and robot == "arm7":
                entry["goal_p99_error_ms"] = GOAL_P99_ERROR_MS
                entry["meets_goal"] = bool(max(m["joint_states"]["p99_error_ms"],
                                               m["commands"]["p99_error_ms"]) <= GOAL_P99_ERROR_MS)
            out.append(entry)
    return out + compare_executors(logdir) + compare_timings(logdir)
