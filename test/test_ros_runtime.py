"""The nodes' stepping machinery: PacedLoop, SCHED_FIFO priority, PolledSubscription, and the
SolveWorker thread of the nodes that solve off the executor (inverter_node, controller_node).

PacedLoop, SolveWorker and the priority need no ROS; the polled subscription runs over DDS in one
process (its own rclpy context in the test run's isolated domain, as the ``probe`` fixture does).
"""

import os
import sys
import threading
import time
from pathlib import Path

import pytest
import ros_helpers
from ros_helpers import own_context

from multibody_dynamics.ros.runtime import PacedLoop, join_worker, set_fifo_priority


def _wait(predicate, timeout):
    end = time.monotonic() + timeout
    while not predicate() and time.monotonic() < end:
        time.sleep(0.005)
    return predicate()


def test_paced_loop_keeps_absolute_deadlines_and_skips_missed_periods():
    period = 0.01
    calls = []

    def step():
        calls.append(time.perf_counter())
        if len(calls) == 5:
            time.sleep(3.5 * period)  # a stall of more than a whole period

    loop = PacedLoop(step, period, name="test_loop").start()
    try:
        assert _wait(lambda: len(calls) >= 20, 5.0), f"{len(calls)} steps in 5 s"
    finally:
        assert loop.stop()
    # the stall: the late step runs at once, the next one rejoins the grid of absolute
    # deadlines (4 periods after the stalled one), the missed deadlines are skipped
    assert calls[5] - calls[4] > 3.0 * period
    assert abs(calls[6] - calls[4] - 4.0 * period) < 0.3 * period, calls[4:7]
    assert loop.skipped >= 2
    # no burst afterwards: every later period is a whole one (a catching-up loop would give
    # ~0 gaps); 0.5 period is far below one and far above a back-to-back call on any machine
    after = [b - a for a, b in zip(calls[6:19], calls[7:20])]
    assert min(after) > 0.5 * period, after
    # the statistics see the stall: one step took 3.5 periods, the next started that late
    st = loop.timing_stats()
    assert st["step_max_ms"] > 3.0 * period * 1e3 and st["late_max_ms"] > 2.0 * period * 1e3
    assert 0.0 <= st["late_p50_ms"] < st["late_max_ms"]
    assert f"{loop.steps} steps, {loop.skipped} missed periods skipped" in loop.describe()
    assert PacedLoop(step, period).timing_stats() == {}  # nothing before the first step


def test_paced_loop_errors_go_to_on_error_and_bad_period_is_refused():
    seen = []

    def step():
        raise RuntimeError("boom")

    loop = PacedLoop(step, 0.005, on_error=lambda exc: seen.append(str(exc)) or len(seen) < 3)
    loop.start()
    assert _wait(lambda: not loop.running, 5.0)
    assert seen == ["boom"] * 3  # the loop ended when on_error returned False
    with pytest.raises(ValueError, match="period must be > 0"):
        PacedLoop(lambda: None, 0.0)
    with pytest.raises(ValueError, match="period must be > 0"):
        loop.set_period(-1.0)


class _Log:
    def __init__(self):
        self.lines = []

    def warning(self, text):
        self.lines.append(("warning", text))

    def error(self, text):
        self.lines.append(("error", text))


def test_threads_end_their_step_before_the_node_exits():
    """A step longer than one period + 1 s (a first step that compiles, on a loaded machine)
    is waited for at exit: a thread still inside compiled code when the process exits crashed
    simulator_node (SIGSEGV / SIGABRT, runtime.EXIT_JOIN)."""
    period, in_step, done = 0.01, threading.Event(), []

    def step():
        if not done:
            in_step.set()
            time.sleep(2.5)  # longer than twice the period + 1 s that stop() waits
            done.append(time.monotonic())

    loop = PacedLoop(step, period, name="slow_step").start()
    assert in_step.wait(5.0)
    log = _Log()
    assert not loop.stop()  # the plain stop gives up after one period + 1 s ...
    assert loop.stop_at_exit(log, "stepping thread")  # ... the exit waits for the step
    assert not loop.running and done
    assert log.lines and log.lines[0][0] == "warning" and "waiting up to" in log.lines[0][1]
    # a worker busy with a job when asked to stop: waited for, with a warning
    worker = threading.Thread(target=time.sleep, args=(1.5,))
    worker.start()
    log = _Log()
    assert join_worker(worker, log, "inversion thread") and not worker.is_alive()
    assert [k for k, _ in log.lines] == ["warning"]
    assert join_worker(None, log, "no thread")


def test_a_thread_that_does_not_end_ends_with_the_process_without_the_exit_clean_up():
    """runtime._exit_if_threads_run: with a node's thread still running after its join (a
    first step compiling for longer than EXIT_JOIN) the process ends at once with the node's
    exit code, its output flushed, and neither atexit handlers nor the interpreter's
    finalization run (the C++ static destructors they trigger are what crashed under a
    running thread).  A thread the node did not give up on (a test runner's, a library's)
    leaves the process alone: run_node runs inside pytest too."""
    import subprocess

    script = (
        "import atexit, sys, threading, time\n"
        "from multibody_dynamics.ros import runtime\n"
        "from multibody_dynamics.ros.runtime import _exit_if_threads_run, join_worker\n"
        "atexit.register(lambda: print('atexit ran', flush=True))\n"
        "other = threading.Thread(target=time.sleep, args=(60,), daemon=True)\n"
        "other.start()\n"
        "_exit_if_threads_run(0)  # not the node's thread: nothing happens\n"
        "stuck = threading.Thread(target=time.sleep, args=(60,), daemon=True)\n"
        "stuck.start()\n"
        "runtime.EXIT_JOIN = 0.1\n"
        "class Log:\n    def warning(self, text):\n        pass\n"
        "assert not join_worker(stuck, Log(), 'worker')\n"
        "print('buffered line', end='')\n"
        "_exit_if_threads_run(3)\n"
        "print('not reached')\n")
    root = str(Path(__file__).resolve().parents[1])  # this tree's runtime, not an installed one
    env = {**os.environ, "PYTHONUNBUFFERED": "0",
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 3, out.stderr
    assert out.stdout == "buffered line"  # flushed; no atexit, nothing after
    assert time.monotonic() - t0 < 30.0  # did not wait for the 60 s thread
    script = script.replace("stuck.start()\n", "").replace(
        "assert not join_worker(stuck", "assert join_worker(stuck")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 0 and "not reached" in out.stdout and "atexit ran" in out.stdout


def test_fifo_priority_is_set_or_refused_with_a_reason():
    assert "expected 1..99" in set_fifo_priority(0)
    assert "expected 1..99" in set_fifo_priority(100)
    result = {}

    def probe():  # a thread of its own: the policy is per thread
        result["error"] = set_fifo_priority(10)
        if hasattr(os, "sched_getscheduler"):
            result["policy"] = os.sched_getscheduler(0)

    t = threading.Thread(target=probe)
    t.start()
    t.join(5.0)
    if result["error"] is None:
        assert result["policy"] == os.SCHED_FIFO
    else:  # an unprivileged user: the reason names the remedy
        assert "refused" in result["error"] or "no sched_setscheduler" in result["error"]
        assert sys.platform != "linux" or "rtprio" in result["error"]
    # the caller's own scheduling is untouched
    if hasattr(os, "sched_getscheduler"):
        assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_paced_loop_reports_a_refused_priority():
    loop = PacedLoop(lambda: None, 0.01, priority=10).start()
    try:
        assert loop.priority_error is None or "refused" in loop.priority_error
    finally:
        loop.stop()


@pytest.fixture
def ros_pair(monkeypatch):
    with own_context(monkeypatch) as (rclpy, context):
        pub_node = rclpy.create_node("polled_pub", context=context, enable_rosout=False,
                                     start_parameter_services=False)
        sub_node = rclpy.create_node("polled_sub", context=context, enable_rosout=False,
                                     start_parameter_services=False)
        try:
            yield rclpy, context, pub_node, sub_node
        finally:
            pub_node.destroy_node()
            sub_node.destroy_node()


def test_polled_subscription_is_taken_by_its_owner_not_the_executor(ros_pair):
    """The executor spinning the node never runs the polled callback; ``drain`` takes every
    queued message in order, with the DDS timestamps when asked."""
    rclpy, context, pub_node, sub_node = ros_pair
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile
    from std_msgs.msg import Float64MultiArray

    from multibody_dynamics.ros.runtime import PolledSubscription

    threads, got = [], []

    def on_message(msg, info):
        threads.append(threading.current_thread().name)
        got.append((msg.data[0], info["source_timestamp"], info["received_timestamp"]))

    polled = PolledSubscription(sub_node, Float64MultiArray, "/polled_test", on_message,
                                QoSProfile(depth=100), with_info=True)
    other = []
    sub_node.create_subscription(Float64MultiArray, "/polled_test",
                                 lambda m: other.append(m.data[0]), QoSProfile(depth=100))
    pub = pub_node.create_publisher(Float64MultiArray, "/polled_test", QoSProfile(depth=100))
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(sub_node)
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.02)

    spinner = threading.Thread(target=spin, name="executor", daemon=True)
    spinner.start()
    try:
        assert _wait(lambda: pub.get_subscription_count() >= 2, 10.0), "no DDS match in 10 s"
        for i in range(20):
            pub.publish(Float64MultiArray(data=[float(i)]))
            time.sleep(0.002)
        # the executor's own subscription on the same topic proves the messages arrived
        assert _wait(lambda: len(other) == 20, 10.0), f"{len(other)} of 20 reached the executor"
        assert got == []  # the executor ran nothing of the polled subscription
        n = polled.drain()
    finally:
        stop.set()
        spinner.join(5.0)
        executor.shutdown(timeout_sec=1.0)
    assert n == 20 and polled.taken == 20
    assert [g[0] for g in got] == [float(i) for i in range(20)]
    assert set(threads) == {threading.current_thread().name}
    sources = [g[1] for g in got]
    assert sources == sorted(sources) and all(g[2] >= g[1] for g in got)
    assert polled.drain() == 0  # nothing left


def test_serialized_loop_messages_over_dds(ros_pair):
    """JointStates published serialized (PatchedMessage) and as Python messages arrive alike at
    a serialized PolledSubscription (views) and at an ordinary subscription (messages)."""
    rclpy, context, pub_node, sub_node = ros_pair
    import numpy as np
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import JointState

    from multibody_dynamics.ros.cdr import JointStateView, PatchedMessage
    from multibody_dynamics.ros.runtime import PolledSubscription

    views, messages = [], []
    polled = PolledSubscription(sub_node, JointState, "/serialized_test", views.append,
                                QoSProfile(depth=100), serialized=True)
    plain = sub_node.create_subscription(JointState, "/serialized_test", messages.append,
                                         QoSProfile(depth=100))
    pub = pub_node.create_publisher(JointState, "/serialized_test", QoSProfile(depth=100))
    names = ["shoulder", "elbow", "w"]
    writer = PatchedMessage(JointState(name=names, position=[0.0] * 3, velocity=[0.0] * 3,
                                       effort=[0.0] * 3), ("position", "velocity", "effort"),
                            "header.stamp")
    rng = np.random.default_rng(5)
    sent = [rng.normal(size=(3, 3)) for _ in range(10)]
    assert _wait(lambda: pub.get_subscription_count() >= 2, 10.0), "no DDS match in 10 s"
    for k, (p, v, e) in enumerate(sent):
        if k % 2:  # every other one as a Python message
            msg = JointState(name=names, position=p.tolist(), velocity=v.tolist(),
                             effort=e.tolist())
            msg.header.stamp.sec, msg.header.stamp.nanosec = k, 1000 * k
            pub.publish(msg)
        else:
            pub.publish(writer.serialize(p, v, e, stamp=(k, 1000 * k)))
        time.sleep(0.002)

    executor = SingleThreadedExecutor(context=context)
    executor.add_node(sub_node)

    def spin_until_all():
        executor.spin_once(timeout_sec=0.05)
        polled.drain()
        return len(views) == len(messages) == 10

    try:
        assert _wait(spin_until_all, 10.0), f"{len(views)} views, {len(messages)} messages of 10"
    finally:
        executor.shutdown(timeout_sec=1.0)
    assert all(isinstance(view, JointStateView) for view in views)
    for k, (view, msg, arrays) in enumerate(zip(views, messages, sent)):
        for got in (view, msg):
            assert (got.header.stamp.sec, got.header.stamp.nanosec) == (k, 1000 * k)
            assert list(got.name) == names
            np.testing.assert_array_equal(
                np.array([got.position, got.velocity, got.effort]), arrays)
    sub_node.destroy_subscription(plain)


def test_solve_worker_keeps_the_latest_request_and_survives_errors():
    """A job submitted while another runs waits; a newer submission replaces a waiting one (it
    is never solved); a solve learns it was superseded; an error goes to on_error and the
    thread goes on; stop ends the thread."""
    from multibody_dynamics.ros.runtime import SolveWorker

    gate, solved, errors, current = threading.Event(), [], [], {}

    def solve(job, generation):
        if job == "first":
            assert gate.wait(10.0)
        if job == "bad":
            raise RuntimeError("no convergence")
        current[job] = worker.is_current(generation)
        solved.append(job)

    worker = SolveWorker(solve, name="test_worker",
                         on_error=lambda job, exc, wall: errors.append((job, str(exc), wall)))
    gen, replaced, running = worker.submit("first")
    assert gen == 1 and replaced is None and running is None
    assert _wait(lambda: worker.running() is not None, 5.0)
    assert worker.running()[0] == "first"
    _, replaced, running = worker.submit("second")
    assert replaced is None and running == "first"
    _, replaced, _ = worker.submit("third")
    assert replaced == "second"  # only the latest waiting request is kept
    gate.set()
    assert _wait(lambda: solved == ["first", "third"], 10.0), solved
    assert current == {"first": False, "third": True}  # "first" was superseded while it ran
    worker.submit("bad")
    assert _wait(lambda: len(errors) == 1, 10.0)
    assert errors[0][:2] == ("bad", "no convergence") and errors[0][2] >= 0.0
    worker.submit("after")  # the thread survived the error
    assert _wait(lambda: solved[-1:] == ["after"], 10.0)
    gen = worker.cancel()
    assert not worker.is_current(gen - 1) and worker.is_current(gen)
    assert worker.stop() and not worker.thread.is_alive()  # idle: ends at once


#: a node whose thread logs through its logger without pause until the node is destroyed
_CHATTY = '''
import sys, threading
from rclpy.node import Node
from multibody_dynamics.ros import runtime

class Chatty(runtime.ExitSafeLogging, Node):
    def __init__(self, executor=None):
        super().__init__("chatty")
        self.lines, self._run = 0, True
        self._thread = threading.Thread(target=self._loop)
        self._thread.start()
        self.get_logger().info("chatty up")

    def _loop(self):
        log = self.get_logger()  # held, as a node's thread or Throttle holds it
        while self._run:
            log.info("x")
            self.lines += 1

    def destroy_node(self):
        self._run = False
        self._thread.join()
        self.get_logger().info(f"chatty logged {self.lines} lines")
        return super().destroy_node()

sys.exit(runtime.run_node(Chatty, args=["chatty"]))
'''


@pytest.mark.ros
def test_a_line_logged_as_sigint_arrives_never_meets_the_dead_rosout(tmp_path):
    """A node thread logging without pause when SIGINT or SIGTERM arrives: not one line goes to
    the /rosout publisher of a context already shut down ("Failed to publish log message to
    rosout: publisher's context is invalid", which rcl prints on stderr), and the node ends with
    exit 0.  With rclpy's own signal handlers (the context shut down by its signal thread while
    the node's thread logs) the message came in 6 of 6 SIGINT and 2 of 3 SIGTERM runs of this
    script here (one of them also exited non-zero); run_node's own handling (runtime.SignalStop,
    exit_log) shuts the context down only after the ending flag is set under the logging lock:
    0 of 6 and 0 of 4."""
    import signal
    import subprocess

    root = str(Path(__file__).resolve().parents[1])
    env = {**ros_helpers.ros_environment(),
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    script = tmp_path / "chatty.py"
    script.write_text(_CHATTY)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGINT):
        out = tmp_path / "out.txt"
        with out.open("w") as f:
            proc = subprocess.Popen([sys.executable, str(script)], stdout=f,
                                    stderr=subprocess.STDOUT, env=env)
            try:
                deadline = time.monotonic() + 60.0
                while "chatty up" not in out.read_text() and time.monotonic() < deadline:
                    assert proc.poll() is None, out.read_text()[-3000:]
                    time.sleep(0.05)
                time.sleep(0.3)
                proc.send_signal(sig)
                code = proc.wait(30.0)
            finally:
                if proc.poll() is None:
                    proc.kill()
        text = out.read_text()
        assert "chatty logged" in text, text[-3000:]
        assert "Failed to publish log message to rosout" not in text, text[-3000:]
        assert code == 0, text[-3000:]
