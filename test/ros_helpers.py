"""Helpers for the node tests: nodes as real processes over DDS, and an in-test probe node.

``MULTIBODY_TEST_EXECUTOR`` (single_threaded | events) selects the nodes' executor,
``MULTIBODY_TEST_TIMING`` (timer | paced) the ``timing`` of simulator_node and controller_node.

Isolation: every test run uses its own ``ROS_DOMAIN_ID`` (100 + pid % 100) and
localhost-only discovery (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` for
Iron and later, ``ROS_LOCALHOST_ONLY=1`` for Humble), so parallel runs and
other ROS graphs on the machine do not interfere.

The fixtures are imported by the test modules (``from ros_helpers import ...``);
``pytest.importorskip("rclpy")`` there skips them cleanly without ROS 2.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

DOMAIN_ID = 100 + os.getpid() % 100
#: ``MULTIBODY_TEST_EXECUTOR=events`` runs every started node in that executor
#: (``--executor``, multibody_dynamics/ros/runtime.py); unset: the nodes' default
EXECUTOR = os.environ.get("MULTIBODY_TEST_EXECUTOR", "")
#: ``MULTIBODY_TEST_TIMING=timer|paced`` sets the parameter ``timing`` of every started
#: simulator_node and controller_node (unset: the nodes' default)
TIMING = os.environ.get("MULTIBODY_TEST_TIMING", "")
TIMED_NODES = ("simulator_node", "controller_node")
STARTUP_TIMEOUT = 30.0   # s; generous: node start imports pinocchio + rclpy on a loaded 2-core box
STOP_TIMEOUT = 10.0      # s between SIGINT and SIGKILL
#: controller_node's log line of a started trajectory; group 1: its start on the node clock [s]
TRAJECTORY_START = re.compile(r"trajectory accepted: .* from t = ([0-9.eE+-]+) s")

ROS_ENV = {
    "ROS_DOMAIN_ID": str(DOMAIN_ID),
    "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
    "ROS_LOCALHOST_ONLY": "1",
    "RCUTILS_LOGGING_BUFFERED_STREAM": "0",   # logs reach the file at once
    "RCUTILS_COLORIZED_OUTPUT": "0",
    "PYTHONUNBUFFERED": "1",
}


def ros_environment() -> dict[str, str]:
    env = dict(os.environ)
    env.update(ROS_ENV)
    return env


def node_command(executable: str) -> list[str]:
    """The console script ``executable`` next to this Python, else ``python -m <module>``."""
    script = shutil.which(executable, path=str(Path(sys.executable).parent))
    if script:
        return [script]
    module = {
        "simulator_node": "multibody_dynamics.ros.simulator_node",
        "dynamics_node": "multibody_dynamics.ros.dynamics_node",
        "controller_node": "multibody_control.ros.controller_node",
        "inverter_node": "multibody_control.ros.inverter_node",
    }[executable]
    return [sys.executable, "-m", module]


def _param(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_param(v) for v in value) + "]"
    return str(value)


def _die_with_parent():
    """In the child: ask Linux to send SIGTERM when the test process dies, so that a test run
    killed from outside (SIGKILL, CI time-out) leaves no node behind."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class LoggedProcess:
    """A subprocess in a session of its own whose output (stdout and stderr) goes to a log file.

    The one process wrapper of the tests: :class:`NodeProcess` (a node) and
    ``launch_helpers.LaunchProcess`` (a launch) add how they start and stop.  ``alive`` is a
    property; ``wait`` returns the exit code, or None when the process is still running after
    ``timeout``.
    """

    def __init__(self, args: list[str], log_path: Path, env: dict[str, str], **popen):
        self.args = args
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True, **popen)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None if the process still runs after ``timeout`` [s]."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


class NodeProcess(LoggedProcess):
    """A node started as a subprocess with its output in a log file."""

    def __init__(self, executable: str, params: dict, log_dir: Path, remap: dict | None = None):
        self.name = executable
        log_path = log_dir / f"{executable}-{len(list(log_dir.glob(executable + '*')))}.log"
        args = node_command(executable) + (["--executor", EXECUTOR] if EXECUTOR else [])
        args += ["--ros-args"]
        if TIMING and executable in TIMED_NODES and "timing" not in params:
            params = {"timing": TIMING, **params}
        for key, value in params.items():
            args += ["-p", f"{key}:={_param(value)}"]
        for old, new in (remap or {}).items():
            args += ["-r", f"{old}:={new}"]
        super().__init__(args, log_path, ros_environment(), preexec_fn=_die_with_parent)

    def pause(self) -> None:
        """Freeze the process (SIGSTOP): its executor and its DDS threads stop."""
        if self.alive:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused process run on (SIGCONT)."""
        if self.alive:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> int | None:
        """SIGINT (a clean rclpy shutdown), then SIGKILL after STOP_TIMEOUT."""
        if self.alive:
            self.resume()  # a paused process would not handle the SIGINT
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT)
        self._log.close()
        return self.proc.returncode


@pytest.fixture
def launch(tmp_path):
    """``launch(executable, remap=None, **params) -> NodeProcess``; every process is stopped at
    teardown.  ``remap`` maps topic names (``{"~/joint_trajectory": "/x"}``).

    The logs are printed at teardown: pytest shows them when the test failed.
    """
    procs: list[NodeProcess] = []

    def start(executable: str, remap: dict | None = None, **params) -> NodeProcess:
        p = NodeProcess(executable, params, tmp_path, remap)
        procs.append(p)
        return p

    yield start
    for p in reversed(procs):
        code = p.stop()
        print(f"----- {p.name} (exit {code}): {' '.join(p.args)}\n{p.log()}")


class Probe:
    """An rclpy node of the test process, spun in a background thread.

    Subscriptions record their messages in lists (appended from the spin thread).
    """

    def __init__(self, rclpy, context):
        from rclpy.executors import SingleThreadedExecutor

        self.rclpy = rclpy
        self.context = context
        self.node = rclpy.create_node(f"test_probe_{os.getpid()}", context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self.lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self):
        while not self._stop and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # shutting down
                if self._stop or not self.context.ok():
                    return
                raise

    def record(self, msg_type, topic: str, depth: int = 100, latched: bool = False,
               timed: bool = False) -> list:
        """The messages of ``topic`` as they arrive; ``latched``: the reader of a latched topic
        (depth 1, reliable, transient local: it gets the last message sent before it joined);
        ``timed``: ``(time.monotonic() at receipt, message)`` pairs instead."""
        qos = depth
        if latched:
            from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

            qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
        messages: list = []

        def callback(msg):
            with self.lock:
                messages.append((time.monotonic(), msg) if timed else msg)

        self.node.create_subscription(msg_type, topic, callback, qos)
        return messages

    def publisher(self, msg_type, topic: str, depth: int = 10):
        return self.node.create_publisher(msg_type, topic, depth)

    def wait_for(self, predicate, timeout: float, what: str, nodes=()):
        """Poll ``predicate()`` until true; fail naming ``what`` (and dead nodes) otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            dead = [p.name for p in nodes if not p.alive]
            if dead:
                pytest.fail(f"node(s) {', '.join(dead)} died while waiting for {what}")
            time.sleep(0.02)
        pytest.fail(f"timed out after {timeout:g} s waiting for {what}")

    def call(self, client, request, timeout: float, attempt: float = 3.0):
        """Call a service and wait for the response (the spin thread completes the future).

        A request sent right after discovery can lose its response (the server
        has not yet matched the client's response reader), so the call is
        repeated every ``attempt`` seconds until ``timeout``: use it for
        idempotent requests.
        """
        deadline = time.monotonic() + timeout
        if not client.wait_for_service(timeout_sec=timeout):
            pytest.fail(f"service {client.srv_name} not available after {timeout:g} s")
        while time.monotonic() < deadline:
            future = client.call_async(request)
            retry = min(time.monotonic() + attempt, deadline)
            while not future.done() and time.monotonic() < retry:
                time.sleep(0.02)
            if future.done():
                return future.result()
            client.remove_pending_request(future)
        pytest.fail(f"no response from {client.srv_name} within {timeout:g} s")

    def close(self):
        self._stop = True
        self._thread.join(timeout=5.0)
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()


@contextlib.contextmanager
def own_context(monkeypatch):
    """``(rclpy, context)``: an rclpy context of its own in the test's isolated ROS domain
    (:data:`ROS_ENV` set in the environment, domain :data:`DOMAIN_ID`), shut down on exit."""
    rclpy = pytest.importorskip("rclpy")
    for key, value in ROS_ENV.items():
        monkeypatch.setenv(key, value)
    context = rclpy.context.Context()
    rclpy.init(context=context, domain_id=DOMAIN_ID)
    try:
        yield rclpy, context
    finally:
        rclpy.try_shutdown(context=context)


@pytest.fixture
def probe(monkeypatch):
    """A :class:`Probe` in the test's isolated ROS domain (own rclpy context)."""
    with own_context(monkeypatch) as (rclpy, context):
        p = Probe(rclpy, context)
        try:
            yield p
        finally:
            p.close()


def start_loop(launch, probe, robot: str, rate: float, controller: dict, simulator: dict,
               depth: int = 1000):
    """Start a sim-time closed loop of ``robot`` and wait until it runs and takes trajectories.

    ``controller_node`` (``use_sim_time``, ``controller`` parameters) first, then
    ``simulator_node`` publishing /clock in real time (``simulator`` parameters), both at
    ``rate``; returns ``(states, commands, nodes, trajectory_publisher)``: the recorded
    /joint_states and commands, the two node processes and a publisher on the controller's
    ``~/joint_trajectory`` that the controller has discovered.
    """
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory

    states = probe.record(JointState, "/joint_states", depth=depth)
    commands = probe.record(Float64MultiArray, "/effort_controller/commands", depth=depth)
    ctl = launch("controller_node", robot=robot, use_sim_time=True, rate_hz=rate, **controller)
    sim = launch("simulator_node", robot=robot, rate_hz=rate, publish_clock=True, realtime=True,
                 **simulator)
    nodes = (ctl, sim)
    probe.wait_for(lambda: len(commands) > 20 and len(states) > 20, 60.0,
                   "commands from controller_node and states from simulator_node", nodes)
    pub = probe.publisher(JointTrajectory, "/controller_node/joint_trajectory")
    probe.wait_for(lambda: pub.get_subscription_count() > 0, 30.0,
                   "controller_node to discover the trajectory publisher", nodes)
    return states, commands, nodes, pub


def start_late_controller(launch, probe, inv, states, robot: str, rate: float, topic: str,
                          q0, simulator: dict | None = None, **controller):
    """controller_node after inverter_node ``inv``, then simulator_node: the latched loop.

    The controller (``use_sim_time``, remapped to the inverter's latched ``topic``,
    ``controller`` parameters) starts first and receives the trajectory before any state;
    the simulator starts last from ``q0`` (a use_sim_time controller started after a running
    simulator_node stalls in rclpy's wait; started before, it works).  The probe must see the
    states from the start of the motion, which the controller starts at its first tick with
    a state.  DDS discovery matches the new simulator with each other participant 0-5 s
    after its launch, in any order: measured under load, the probe matched it after the
    controller in 7 of 10 runs and then missed 0.6-1.5 s of the motion, or all of it (timer
    and paced stepping alike).  So the controller is frozen (SIGSTOP, DDS threads included)
    until the probe receives the simulator's states (``states``, recorded by the caller).

    ``simulator``: further simulator parameters (``realtime: False`` for a plant slower than
    real time: it then steps as fast as it can and the loop follows its /clock).

    Returns ``(start, nodes)``: the trajectory's start on the node clock, read from the
    controller's log, and (simulator, inverter, controller).
    """
    ctl = launch("controller_node", remap={"~/joint_trajectory": topic}, robot=robot,
                 use_sim_time=True, rate_hz=rate, **controller)
    probe.wait_for(lambda: "trajectory received before the first /joint_states" in ctl.log(),
                   60.0, "controller_node to receive the latched trajectory", (inv, ctl))
    ctl.pause()
    sim = launch("simulator_node", robot=robot, rate_hz=rate, publish_clock=True,
                 **{"realtime": True, "initial_positions": list(q0), **(simulator or {})})
    nodes = (sim, inv, ctl)
    try:
        probe.wait_for(lambda: len(states) > 0, 60.0, "the first state from simulator_node",
                       nodes)
    finally:
        ctl.resume()
    probe.wait_for(lambda: TRAJECTORY_START.search(ctl.log()), 60.0, "controller_node to start "
                   "the latched trajectory", nodes)
    return float(TRAJECTORY_START.search(ctl.log()).group(1)), nodes


def all_finite(messages, field) -> bool:
    """Every value of ``field`` of every message is finite."""
    return all(np.all(np.isfinite(getattr(m, field))) for m in list(messages))


def tracking_errors(states, names, interp, start, t_lo, t_hi, n_effort=None):
    """Max joint error [rad | m] against ``interp`` of every recorded JointState whose stamp lies
    in ``[t_lo, t_hi]`` of trajectory time (``start`` [s] is time zero), and those times.

    The in-test subscriber drops messages when the 2 cores are busy (seen: 73 and 134 of 375),
    so coverage is required rather than a count (:func:`recorded_positions`: at least 30
    samples and no gap longer than 0.4 s in the window, so that a 1 s rest-to-rest motion is
    sampled in every phase, both ends included). ``n_effort``: keep only states with that many
    efforts (the plant's, not a probe's).
    """
    times, positions = recorded_positions(states, names, start, t_lo, t_hi, n_effort)
    errors = [np.max(np.abs(q - interp.sample(tk)[0])) for tk, q in zip(times, positions)]
    return np.array(errors), times


def recorded_positions(states, names, start, t_lo, t_hi, n_effort=None):
    """Times (trajectory time: ``start`` [s] is zero) and positions of ``names`` (in that order)
    of every recorded JointState whose stamp lies in ``[t_lo, t_hi]`` (and, with ``n_effort``,
    that carries that many efforts); at least 30 samples and no gap over 0.4 s are required.

    For quantities computed from the whole recorded state, e.g. a flexible robot's end
    effector from its joints and elastic coordinates.
    """
    from multibody_dynamics.ros.conversions import stamp_to_sec

    times, rows = [], []
    for m in list(states):
        tk = stamp_to_sec(m.header.stamp) - start
        if t_lo <= tk <= t_hi and (n_effort is None or len(m.effort) == n_effort):
            rows.append(np.asarray(m.position)[[m.name.index(n) for n in names]])
            times.append(tk)
    gaps = np.diff(np.concatenate([[t_lo], np.sort(times), [t_hi]]))
    assert len(times) >= 30 and gaps.max() < 0.4, (
        f"joint states do not cover the motion: {len(times)} samples, largest gap "
        f"{gaps.max():.3f} s")
    return np.array(times), np.array(rows)
