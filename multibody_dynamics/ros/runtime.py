"""Node runtime helpers: throttled warnings and the ``main`` wrapper of every node."""

from __future__ import annotations

import gc
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from ..errors import MultibodyError
from .exit_log import ENDING as _ENDING
from .exit_log import LOG_LOCK as _LOG_LOCK
from .exit_log import ExitSafeLogger, ExitSafeLogging, exit_logger  # noqa: F401 (the nodes')


class StartupError(MultibodyError, RuntimeError):
    """A node cannot start with its parameters/model (the message says why); exit non-zero."""


class Throttle:
    """Rate-limited logging by key, on a monotonic (wall) clock.

    The first report of a key is logged at once; repeats within ``period`` are
    counted and the count is added to the next report.  The clock is monotonic
    so that throttling also works while simulated time is paused or runs fast.

    Parameters
    ----------
    logger : rclpy logger (``node.get_logger()``)
    period : float
        Minimum time between two reports of the same key [s].
    """

    def __init__(self, logger, period: float = 2.0, clock: Callable[[], float] = time.monotonic):
        self._logger = logger
        self.period = float(period)
        self._clock = clock
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self.counts: dict[str, int] = {}

    def _due(self, key: str, message: str) -> str | None:
        """The message to log now (with the count of suppressed repeats), or None."""
        self.counts[key] = self.counts.get(key, 0) + 1
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.period:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return None
        self._last[key] = now
        n = self._suppressed.pop(key, 0)
        if n:
            message = (f"{message} ({n} similar message(s) suppressed in the last "
                       f"{now - last:.1f} s)")
        return message

    # one call site per severity: rclpy refuses a call site whose severity changes
    def warn(self, key: str, message: str) -> bool:
        """Log a warning under ``key`` unless one was logged less than ``period`` ago."""
        text = self._due(key, message)
        if text is not None:
            self._logger.warning(text)
        return text is not None

    def error(self, key: str, message: str) -> bool:
        text = self._due(key, message)
        if text is not None:
            self._logger.error(text)
        return text is not None

    def info(self, key: str, message: str) -> bool:
        text = self._due(key, message)
        if text is not None:
            self._logger.info(text)
        return text is not None

    def reset(self, key: str) -> None:
        """Forget ``key`` (the next report is logged at once)."""
        self._last.pop(key, None)
        self._suppressed.pop(key, None)


#: How a node runs its periodic step (read-only parameter ``timing``): ``timer`` -- an rclpy
#: timer on the executor, which then also takes the incoming messages; ``paced`` (default) --
#: a :class:`PacedLoop` thread of its own at absolute wall-clock deadlines that takes its fast
#: topic itself (:class:`PolledSubscription`; the executor keeps the rest).  ``paced`` needs a
#: wall-clock period: the simulator uses it with ``realtime: true``, the controller without
#: ``use_sim_time`` (else both keep the timer).  Measured in one run (bench_ros_loop, arm7
#: and five_bar at 250 Hz-1 kHz): paced had 0.53-0.72 of the timer's p99 period error of
#: /joint_states and held the rate (1 kHz: 996-997 Hz against 918-970 Hz) at about half the
#: CPU per period, hence the default.
TIMINGS = ("timer", "paced")
DEFAULT_TIMING = "paced"
PR_SET_TIMERSLACK = 29  # linux/prctl.h
#: s a node waits at exit, once asked, for a thread of its own to end its current step or job
#: before the node is destroyed and rclpy shut down.  A thread still running when the process
#: exits can be inside compiled code (a numba compilation on a first step, pinocchio, LAPACK)
#: while the exit's C++ static destructors and atexit handlers tear that code's state down:
#: simulator_node ended with SIGSEGV or SIGABRT (an LLVM assertion) in 2 of 58 SIGINT
#: shutdowns on the loaded 2-core machine, each after its stepping thread had not ended within
#: the one period + 1 s it was given then.  A first step that compiles (an empty numba cache)
#: can take longer than any wait a launch allows (it sends SIGTERM 5 s after SIGINT, SIGKILL 5 s
#: later), so a thread still running after this ends with the process without the exit's
#: clean-up (:func:`run_node`: ``os._exit`` once the node is destroyed and rclpy shut down).
EXIT_JOIN = 3.0
#: The nodes' own threads that did not end within EXIT_JOIN (:meth:`PacedLoop.stop_at_exit`,
#: :func:`join_worker`): only these make :func:`run_node` end the process with ``os._exit``.
#: Other threads of the process (a test runner's, a library's) are not the node's to judge.
_STUCK: list[threading.Thread] = []


def set_timer_slack(ns: int) -> bool:
    """Set the calling thread's timer slack to ``ns`` nanoseconds; whether it was set.

    Linux lets a sleeping thread wake up to the timer slack late (default 50 us, so that
    wake-ups can be merged); a loop paced at 1 kHz wants its deadline to the microsecond.
    ``prctl(PR_SET_TIMERSLACK)`` acts on the calling thread only.  Elsewhere: False.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(max(int(ns), 1)), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def set_fifo_priority(priority: int) -> str | None:
    """Give the calling thread real-time ``SCHED_FIFO`` scheduling at ``priority`` (1-99).

    What ros2_control's controller manager does for its update thread (priority 50 by
    default): a FIFO thread that wakes up takes the CPU from every normal thread at once,
    so its period does not wait for the scheduler's time slices of other processes.  The
    thread must sleep most of a period (a paced loop does).  Needs ``CAP_SYS_NICE`` or an
    ``rtprio`` limit (``/etc/security/limits.conf``: ``@realtime - rtprio 99``).

    Returns None when set, else the reason it was refused.
    """
    import os

    if not 1 <= int(priority) <= 99:
        return f"priority {priority}: expected 1..99"
    if not hasattr(os, "sched_setscheduler"):
        return "this platform has no sched_setscheduler"
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(priority)))
    except OSError as exc:
        return (f"SCHED_FIFO priority {priority} refused ({exc.strerror}); give the user an "
                "rtprio limit or CAP_SYS_NICE")
    return None


class PacedLoop:
    """Call ``step()`` from a thread of its own every ``period`` seconds of wall-clock time.

    The deadlines are absolute (``time.perf_counter``: ``t0 + k period``), so the time a
    step takes does not stretch the period; the thread sleeps with a timer slack of
    ``slack_ns``.  A late step runs at once; when a whole period or more was missed (a
    step or the machine stalled), the missed deadlines are skipped, exactly as an rcl
    timer skips them: steps never run back to back to catch up.  A simulator paced by a
    catching-up loop would advance its time in bursts that its controller, which sees a
    burst of states at once, cannot follow (the command delay in steps grows with the
    burst).

    Parameters
    ----------
    step : callable()
        The periodic work.  It must catch its own errors; an exception that escapes goes to
        ``on_error`` (returning False ends the loop); without ``on_error`` it ends the loop.
    period : float
        Step period [s] (> 0).
    name : str
        Thread name.
    on_error : callable(Exception) -> bool, optional
    slack_ns : int
        Timer slack of the thread [ns].
    priority : int
        0: the thread keeps the normal scheduling; 1-99: it asks for ``SCHED_FIFO`` at this
        priority (:func:`set_fifo_priority`); when refused, ``priority_error`` says why and
        the loop runs with the normal scheduling.

    Attributes
    ----------
    steps : int  steps run
    skipped : int  deadlines skipped because they were missed by a whole period or more

    :meth:`timing_stats` summarizes the last :data:`STATS_WINDOW` steps: how late each started
    after its deadline (wake-up latency) and how long it took.
    """

    #: steps kept for :meth:`timing_stats` (a ring buffer)
    STATS_WINDOW = 4096

    def __init__(self, step: Callable[[], object], period: float, name: str = "paced_loop",
                 on_error: Callable[[Exception], bool] | None = None, slack_ns: int = 1000,
                 priority: int = 0):
        if not period > 0:
            raise ValueError(f"PacedLoop: period must be > 0 s, got {period!r}")
        self._step = step
        self._period = float(period)
        self._on_error = on_error
        self.slack_ns = int(slack_ns)
        self.priority = int(priority)
        self.priority_error: str | None = None
        self._started = threading.Event()
        self._restart = True
        self._stop = threading.Event()
        self.steps = 0
        self.skipped = 0
        self._late = [0.0] * self.STATS_WINDOW
        self._took = [0.0] * self.STATS_WINDOW
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def period(self) -> float:
        return self._period

    def set_period(self, period: float) -> None:
        """A new period [s]; the next deadline is one new period from now."""
        if not period > 0:
            raise ValueError(f"PacedLoop: period must be > 0 s, got {period!r}")
        self._period = float(period)
        self._restart = True

    def start(self) -> PacedLoop:
        """Start the thread; returns once it has set its timer slack and priority."""
        self._thread.start()
        self._started.wait(5.0)
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the thread to end and wait for it; whether it ended (not from the thread itself)."""
        self._stop.set()
        if self._thread is threading.current_thread() or not self._thread.is_alive():
            return not self._thread.is_alive()
        self._thread.join(self._period + 1.0 if timeout is None else timeout)
        return not self._thread.is_alive()

    def stop_at_exit(self, log, what: str) -> bool:
        """:meth:`stop` at the node's exit: when the thread does not end within one period +
        1 s, say so on ``log`` and wait up to :data:`EXIT_JOIN` s for it to end its step (the
        caller destroys the node and shuts rclpy down after this); whether it ended."""
        if self.stop():
            return True
        log.warning(f"the {what} did not end within one period + 1 s; waiting up to "
                    f"{EXIT_JOIN:g} s for its step to end")
        if self.stop(EXIT_JOIN):
            return True
        log.warning(f"the {what} did not end within {EXIT_JOIN:g} s more; the process ends "
                    "with it, without the exit's clean-up (os._exit)")
        _STUCK.append(self._thread)
        return False

    def timing_stats(self) -> dict[str, float]:
        """p50, p99 and max [ms] of the wake-up lateness (start of a step after its deadline)
        and of the step duration over the last :data:`STATS_WINDOW` steps ({} before one)."""
        import numpy as np

        n = min(self.steps, self.STATS_WINDOW)
        if n == 0:
            return {}
        out = {}
        for key, values in (("late", self._late), ("step", self._took)):
            ms = np.asarray(values[:n]) * 1e3
            out.update({f"{key}_p50_ms": float(np.percentile(ms, 50)),
                        f"{key}_p99_ms": float(np.percentile(ms, 99)),
                        f"{key}_max_ms": float(ms.max())})
        return out

    def describe(self) -> str:
        """One line for the log: steps, skipped periods and :meth:`timing_stats`."""
        text = f"{self.steps} steps, {self.skipped} missed periods skipped"
        st = self.timing_stats()
        if st:
            text += (f"; start after the deadline p50 {st['late_p50_ms']:.3f} / p99 "
                     f"{st['late_p99_ms']:.3f} / max {st['late_max_ms']:.3f} ms, step p50 "
                     f"{st['step_p50_ms']:.3f} / p99 {st['step_p99_ms']:.3f} ms (last "
                     f"{min(self.steps, self.STATS_WINDOW)} steps)")
        return text

    def _run(self):
        set_timer_slack(self.slack_ns)
        self.priority_error = set_fifo_priority(self.priority) if self.priority else None
        self._started.set()
        clock, sleep, stop = time.perf_counter, time.sleep, self._stop
        deadline = 0.0
        while not stop.is_set():
            period = self._period
            if self._restart:
                self._restart = False
                deadline = clock() + period
            delay = deadline - clock()
            if delay > 0:
                sleep(min(delay, 0.25))  # bounded: a stop request is seen within 0.25 s
                continue
            now = clock()
            try:
                self._step()
            except Exception as exc:
                if self._on_error is None or not self._on_error(exc):
                    return
            k = self.steps % self.STATS_WINDOW
            self._late[k] = now - deadline
            self._took[k] = clock() - now
            self.steps += 1
            deadline += period
            if deadline < now:  # missed by a whole period or more: skip, never catch up
                missed = math.ceil((now - deadline) / period)
                deadline += missed * period
                self.skipped += missed


def join_worker(thread: threading.Thread | None, log, what: str) -> bool:
    """Wait up to :data:`EXIT_JOIN` s for a worker ``thread`` already asked to stop (at the
    node's exit, before the node is destroyed); whether it ended."""
    if thread is None or thread is threading.current_thread() or not thread.is_alive():
        return True
    thread.join(1.0)
    if thread.is_alive():
        log.warning(f"waiting up to {EXIT_JOIN:g} s for the {what} to end its current job")
        thread.join(EXIT_JOIN)
    if thread.is_alive():
        log.warning(f"the {what} did not end within {EXIT_JOIN:g} s more; the process ends "
                    "with it, without the exit's clean-up (os._exit)")
        _STUCK.append(thread)
        return False
    return True


def _polled_group():
    """A callback group no executor runs: its entities are taken by their owner."""
    from rclpy.callback_groups import CallbackGroup

    class PolledCallbackGroup(CallbackGroup):
        def can_execute(self, entity) -> bool:
            return False

        def beginning_execution(self, entity) -> bool:
            return False

        def ending_execution(self, entity) -> None:
            pass

    return PolledCallbackGroup()


class PolledSubscription:
    """A subscription that the paced loop takes itself, without an executor wake-up per message.

    A node stepping in a :class:`PacedLoop` at 1 kHz receives a message every period on its
    fast topic (the simulator its commands, the controller ``/joint_states``).  Taken by
    the executor, each one costs a wake-up of the executor's thread, a wait set rebuilt in
    Python and a switch of the interpreter lock to and from the paced thread: measured on
    arm7 at 1 kHz, the executor's share of a node's CPU was about three quarters.  Here the
    subscription sits in a callback group whose ``can_execute`` is False (so the
    SingleThreadedExecutor leaves it out of its wait set) and :meth:`drain`, called by the
    paced step before it steps, takes what arrived since the last period with rcl's take
    (the call the executor makes) and hands each message to ``callback`` in the paced
    thread.  Its QoS depth bounds what a late period can find queued.  With ``with_info``
    the callback also gets the message info (a dict with the DDS ``source_timestamp`` and
    ``received_timestamp`` [ns]).  With ``serialized`` the messages are taken in their
    serialized form and read by :func:`.cdr.reader` (for ``JointState`` and
    ``Float64MultiArray`` a read-only view with the message's attributes, at a third of the
    cost of rclpy's conversion to a Python message; other types: the Python message).

    The events executor (``--executor events``) dispatches from C++ without asking the
    callback group, so with it the nodes keep executor subscriptions.
    """

    def __init__(self, node, msg_type, topic: str, callback: Callable[..., object], qos,
                 with_info: bool = False, serialized: bool = False):
        self._callback = callback
        self._with_info = bool(with_info)
        self._read = None
        if serialized:
            from .cdr import reader

            self._read = reader(msg_type)
        self.subscription = node.create_subscription(msg_type, topic, callback, qos,
                                                     callback_group=_polled_group())
        self.taken = 0

    def drain(self, limit: int = 1000) -> int:
        """Take up to ``limit`` queued messages, oldest first, calling back each; how many."""
        sub, read = self.subscription, self._read
        handle, msg_type, raw = sub.handle, sub.msg_type, sub.raw or read is not None
        n = 0
        while n < limit:
            with handle:
                taken = handle.take_message(msg_type, raw)
            if taken is None:
                break
            n += 1
            msg = taken[0] if read is None else read(taken[0])
            if self._with_info:
                self._callback(msg, taken[1])
            else:
                self._callback(msg)
        self.taken += n
        return n


#: Executors a node can spin in (``--executor`` / parameter ``executor``):
#: ``single_threaded`` -- rclpy's SingleThreadedExecutor (a wait set rebuilt in Python on every
#: wake-up); ``events`` -- rclpy.experimental.EventsExecutor (rclpy >= 9: callbacks dispatched
#: from a C++ event queue, no per-wake-up wait set).
EXECUTORS = ("single_threaded", "events")
DEFAULT_EXECUTOR = "single_threaded"
EXECUTOR_OPTION = "--executor"


def events_executor_available() -> bool:
    """Whether this rclpy has ``rclpy.experimental.EventsExecutor``."""
    try:
        from rclpy.experimental import EventsExecutor  # noqa: F401
    except ImportError:
        return False
    return True


def make_executor(kind: str, context=None):
    """A new executor of kind ``kind`` (one of :data:`EXECUTORS`) on ``context``.

    Raises
    ------
    StartupError
        Unknown kind, or ``events`` with an rclpy that has no EventsExecutor.
    """
    if kind == "single_threaded":
        from rclpy.executors import SingleThreadedExecutor

        return SingleThreadedExecutor(context=context)
    if kind == "events":
        try:
            from rclpy.experimental import EventsExecutor
        except ImportError:
            raise StartupError("executor events: this rclpy has no "
                               "rclpy.experimental.EventsExecutor; use single_threaded") from None
        return EventsExecutor(context=context)
    raise StartupError(f"executor: expected one of {', '.join(EXECUTORS)}, got {kind!r}")


def split_executor_option(args: list[str]) -> tuple[str | None, list[str]]:
    """``(kind or None, args without it)`` for ``--executor KIND`` / ``--executor=KIND``.

    Only the part before ``--ros-args`` is searched (after it everything belongs to ROS).

    Raises
    ------
    StartupError
        The option without a value or with a value not in :data:`EXECUTORS`.
    """
    args = list(args)
    end = args.index("--ros-args") if "--ros-args" in args else len(args)
    kind, rest, i = None, [], 0
    while i < end:
        a = args[i]
        if a == EXECUTOR_OPTION:
            if i + 1 >= end:
                raise StartupError(f"{EXECUTOR_OPTION}: expected one of {', '.join(EXECUTORS)}")
            kind, i = args[i + 1], i + 2
            continue
        if a.startswith(EXECUTOR_OPTION + "="):
            kind = a.split("=", 1)[1]
        else:
            rest.append(a)
        i += 1
    if kind is not None and kind not in EXECUTORS:
        raise StartupError(f"{EXECUTOR_OPTION}: expected one of {', '.join(EXECUTORS)}, "
                           f"got {kind!r}")
    return kind, rest + args[end:]


def spin(executor, kind: str, context=None) -> None:
    """Spin ``executor`` (of kind ``kind``) until its context shuts down or a stop signal
    came (:class:`SignalStop`: the flag is set and the node's guard condition triggered).

    ``spin_once`` in a loop, as rclpy's ``Executor.spin`` does.  The EventsExecutor of the
    rclpy 9.1.2 wheels dispatches nothing in ``spin()`` and ``spin_until_future_complete()``
    (measured: no timer callback in 3 s, SIGINT ignored), while ``spin_once(timeout_sec)``
    works (1 kHz timer: 4654 callbacks in 4.8 s, the SingleThreadedExecutor 4693); it is given
    a timeout, so the stop flag is seen within 0.5 s even if it cannot be woken.  A context
    shut down from outside raises ``ExternalShutdownException`` as in ``spin()``.
    """
    import rclpy

    timeout = 0.5 if kind == "events" else None
    while rclpy.ok(context=context) and not _STOP.is_set():
        executor.spin_once(timeout_sec=timeout)


#: set when SIGINT or SIGTERM asks the node of :func:`run_node` to stop (:class:`SignalStop`)
_STOP = threading.Event()


class SignalStop:
    """SIGINT and SIGTERM of a process running :func:`run_node` on its main thread: they end
    the spin; ``run_node`` then ends the node in order and shuts the context down last.

    rclpy's own handlers shut every context down from a C++ thread of their own, at any moment
    relative to what the node's threads do, so a line logged at that instant could still go to
    the dead ``/rosout`` publisher; with these (rclpy initialized without its handlers) the
    context is shut down only by ``run_node``, after it has set the ending flag under the
    logging lock (:mod:`.exit_log`).

    The signals are taken by Python's C-level handler, which writes their number to a pipe
    (``signal.set_wakeup_fd``); a thread of this class reads it at once (the main thread may
    be waiting in the executor, where Python handlers do not run), sets the stop flag and
    triggers a guard condition of the node (:meth:`watch_node`), which ends the executor's
    wait.  :meth:`close` restores the former wake-up descriptor and ends the
    thread.  Main thread only (``signal`` refuses others).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self._guard = None
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)
        self._old_fd = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        for sig in self.SIGNALS:
            signal.signal(sig, _noted)  # the thread acts; the Python-level handler does not
        self._thread = threading.Thread(target=self._watch, name="signal_stop", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while True:
            try:
                data = os.read(self._r, 64)
            except OSError:
                return
            if not data:  # the write end closed: close()
                return
            if any(b in (int(sig) for sig in self.SIGNALS) for b in data):
                _STOP.set()
                self._wake()

    def watch_node(self, node) -> None:
        """Wake ``node``'s executor on a stop signal: a guard condition of the node (an
        executor's own ``wake`` only rebuilds its wait set, ``spin_once`` waits on)."""
        self._guard = node.create_guard_condition(lambda: None)
        if _STOP.is_set():
            self._wake()

    def _wake(self) -> None:
        guard = getattr(self, "_guard", None)
        if guard is not None:
            try:
                guard.trigger()
            except Exception:  # the node already destroyed: its spin is over
                pass

    def close(self) -> None:
        """Restore the former wake-up descriptor; end the thread (the handlers stay as the
        caller left them: ignored during the clean-up)."""
        try:
            signal.set_wakeup_fd(self._old_fd)
        except ValueError:
            pass
        os.close(self._w)
        self._thread.join(1.0)
        os.close(self._r)


def _noted(signum, frame) -> None:
    """Python-level handler of the stop signals: :class:`SignalStop`'s thread has acted."""


def node_executor(node, default: str = DEFAULT_EXECUTOR) -> str:
    """The executor ``node`` spins in: its read-only parameter ``executor``.

    Declares the parameter with the default ``default`` (one of :data:`EXECUTORS`) unless
    ``node`` already has it; a start-up override (``-p executor:=KIND``) wins over the
    default.  The nodes call it first in their constructor with the ``executor`` keyword
    argument :func:`run_node` gives them, and keep the answer when what they build depends
    on it (a :class:`PolledSubscription` needs an executor that honours callback groups).

    Parameters
    ----------
    node : rclpy.node.Node
        The node.
    default : str
        Default of the parameter (used only when it is declared here).

    Returns
    -------
    str
        The parameter's value.
    """
    from .parameters import ParameterSet, ParameterSpec

    if not node.has_parameter("executor"):
        spec = ParameterSpec("executor", default, "executor the node spins in "
                             "(start-up only; the --executor command-line option sets the "
                             "default)", choices=EXECUTORS, read_only=True)
        ParameterSet(node, (spec,))
    return node.get_parameter("executor").value


def run_node(node_cls: Callable[..., object], args: list[str] | None = None,
             executor: str | None = None, *, exiting: bool = False) -> int:
    """Initialize rclpy, build ``node_cls(executor=default)``, spin until shutdown; return the
    exit code.

    The node spins in the executor named by its ``executor`` parameter (read-only, one of
    :data:`EXECUTORS`, declared by :func:`node_executor`); its default is ``executor``, else the
    command-line option ``--executor KIND`` (before ``--ros-args``), else
    :data:`DEFAULT_EXECUTOR`, handed to the node class as its ``executor`` keyword argument.

    Once the node is built, the objects made so far are frozen (``gc.freeze``) so that the
    garbage collector, which runs in whichever thread allocates (the paced loop too), no
    longer walks them.

    SIGINT and SIGTERM end the spin (:class:`SignalStop`, on the main thread; elsewhere
    rclpy's handlers shut the context down); then the ending flag is set under the logging
    lock, the node's threads are stopped, the node destroyed and rclpy shut down, in this
    order, so that no line goes to the dead ``/rosout`` (:mod:`.exit_log`).  A stop signal,
    ``KeyboardInterrupt`` and a shutdown from outside (``ExternalShutdownException``) end
    with 0.  A node that cannot start (``MultibodyError``, ``ValueError``,
    ``FileNotFoundError`` raised by its constructor: bad parameters, unknown
    robot, unsupported model, an executor this rclpy lacks) logs one error line and
    ends with 1.

    SIGINT and SIGTERM are ignored during the clean-up (a second Ctrl-C: no traceback).  On
    return their former handlers are restored, so that a program or test that runs nodes in
    its own process can still be interrupted and its child processes do not inherit the
    ignored signals (a process pool's ``terminate`` is a SIGTERM); with ``exiting`` (the
    console scripts, :func:`main_for`, whose process ends next) they stay ignored.
    """
    handlers = {sig: signal.getsignal(sig) for sig in _STOP_SIGNALS} \
        if threading.current_thread() is threading.main_thread() else {}
    try:
        return _run_node(node_cls, args, executor)
    finally:
        if not exiting:
            for sig, handler in handlers.items():
                if handler is not None:  # None: set outside Python, nothing to restore
                    signal.signal(sig, handler)


def _run_node(node_cls, args, executor) -> int:
    """:func:`run_node` apart from restoring the signal handlers."""
    import rclpy
    from rclpy.executors import ExternalShutdownException

    name = getattr(node_cls, "node_name", getattr(node_cls, "__name__", "node"))
    argv = list(sys.argv if args is None else args)
    try:
        cli_kind, argv = split_executor_option(argv)
    except StartupError as exc:
        rclpy.logging.get_logger(name).error(f"cannot start: {exc}")
        return 1
    default = executor or cli_kind or DEFAULT_EXECUTOR
    _ENDING.clear()
    _STOP.clear()
    stopper = None
    if threading.current_thread() is threading.main_thread():
        from rclpy.signals import SignalHandlerOptions

        stopper = SignalStop()  # before init: a signal from now on ends the spin at its start
        try:
            rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
        except BaseException:
            stopper.close()
            raise
    else:  # signals are the main thread's: rclpy's handlers
        rclpy.init(args=argv)
    node = None
    spinner = None
    code = 0
    try:
        try:
            node = node_cls(executor=default)
            kind = node_executor(node, default)
            spinner = make_executor(kind)
            if stopper is not None:
                stopper.watch_node(node)
        except (MultibodyError, ValueError, FileNotFoundError) as exc:
            msg = " ".join(str(exc).split())
            rclpy.logging.get_logger(name).error(f"cannot start: {msg}")
            code = 1
        else:
            if kind != DEFAULT_EXECUTOR:
                node.get_logger().info(f"spinning in the {kind} executor")
            # what start-up made (modules, model, messages) lives as long as the node: out of
            # the collector's reach, a full collection during the loop takes 0.15 ms, not
            # the 34 ms measured with them (controller_node, arm7)
            gc.collect()
            gc.freeze()
            try:
                spinner.add_node(node)
                spin(spinner, kind)
            except Exception:
                # A signal shuts the context down asynchronously; a take or publish
                # interrupted by it raises from the C layer.  Only a live context's
                # error is a real one.
                if rclpy.ok():
                    raise
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        with _LOG_LOCK:  # no line is between its check and /rosout (exit_log)
            _ENDING.set()  # the exit's lines, the threads' too, to the console only
        _ignore_stop_signals()  # a second Ctrl-C during the clean-up: no traceback
        if stopper is not None:
            stopper.close()
        if spinner is not None:
            try:
                spinner.shutdown()
            except Exception:  # a context already shut down by the signal
                pass
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
        _exit_if_threads_run(code)
        # the node is gone and its threads ended: a later node of this process (run_node
        # called again, as tests and embedding programs do) logs through rosout again
        _ENDING.clear()
    return code


def _exit_if_threads_run(code: int) -> None:
    """End the process now (``os._exit``, after flushing the output) when a node's own thread
    that did not end at its exit (:data:`_STUCK`) still runs: the normal exit's static
    destructors and atexit handlers would tear down the state of the compiled code it may be
    in (SIGSEGV, SIGABRT; EXIT_JOIN).  Threads the node did not start never end the process
    (``run_node`` is also called inside test runners and other programs)."""
    running = [t.name for t in _STUCK if t.is_alive()]
    if not running:
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    try:  # what the C layer (rcutils' console output) still buffers
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass
    os._exit(code)


#: the signals that end a node (:class:`SignalStop`), ignored during its clean-up
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _ignore_stop_signals() -> None:
    """SIGINT and SIGTERM ignored from here on (main thread only): the node is ending."""
    if threading.current_thread() is threading.main_thread():
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def main_for(node_cls) -> Callable[[list[str] | None], None]:
    """A console-script ``main(args=None)`` running ``node_cls`` (exit code from :func:`run_node`).

    ``args`` (default ``sys.argv``) may hold ``--executor single_threaded|events`` before
    ``--ros-args``.
    """

    def main(args: list[str] | None = None) -> None:
        sys.exit(run_node(node_cls, args, exiting=True))

    main.__doc__ = f"Run {getattr(node_cls, 'node_name', node_cls.__name__)}."
    return main


class SolveWorker:
    """One thread that solves, off the executor, the latest job submitted to it.

    The nodes that run long solves (inverter_node's inversions, controller_node's tv_lqr
    Riccati recursions) hand them to this thread so that the executor keeps taking parameters,
    states and messages. A job submitted while another waits replaces it (only the latest
    waiting request is kept); one submitted while a job runs waits for it. Every submission and
    every :meth:`cancel` raises :attr:`generation`, so that ``solve`` can tell whether its job
    was superseded while it ran (:meth:`is_current`); an exception escaping ``solve`` goes to
    ``on_error`` and the thread goes on.

    Parameters
    ----------
    solve : callable(job, generation)
        The work, called in the thread with the job and the generation it was submitted as.
    name : str
        Thread name.
    on_error : callable(job, Exception, float)
        Called in the thread with an exception that escaped ``solve`` and the wall time the
        solve ran [s].
    switch_interval : float, optional
        [s] While ``solve`` runs, the interpreter's thread switch interval is at most this
        (``sys.setswitchinterval``): a solve in Python-level numpy hands the GIL back to the
        executor thread within it instead of the default 5 ms. None: unchanged.
    """

    def __init__(self, solve: Callable, *, name: str, on_error: Callable,
                 switch_interval: float | None = None):
        self._solve, self._on_error = solve, on_error
        self._switch_interval = switch_interval
        self.lock = threading.Condition()  # also guards what a solve hands to the node
        self.generation = 0
        self._pending: tuple[object, int] | None = None
        self._running: tuple[object, float] | None = None
        self._stop = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job) -> tuple[int, object | None, object | None]:
        """Queue ``job``; (its generation, the waiting job it replaced or None, the running job
        or None)."""
        with self.lock:
            self.generation += 1
            replaced = self._pending[0] if self._pending is not None else None
            self._pending = (job, self.generation)
            self.lock.notify()
            return self.generation, replaced, (self._running or (None,))[0]

    def cancel(self) -> int:
        """Drop the waiting job and mark a running one superseded; the new generation."""
        with self.lock:
            self.generation += 1
            self._pending = None
            return self.generation

    def is_current(self, generation: int) -> bool:
        """Whether nothing was submitted or cancelled since the job of ``generation``."""
        with self.lock:
            return generation == self.generation

    def running(self) -> tuple[object, float] | None:
        """(the job being solved, its start on ``time.monotonic``) or None."""
        with self.lock:
            return self._running

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called (a solve ending after it publishes nothing)."""
        return self._stop

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def stop(self, timeout: float = 1.0) -> bool:
        """End the thread after the running solve (if any; waiting jobs are dropped) and wait
        up to ``timeout`` s for it; whether it ended."""
        with self.lock:
            self._stop = True
            self._pending = None
            self.lock.notify_all()
        if self._thread is threading.current_thread():
            return False
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            with self.lock:
                while self._pending is None and not self._stop:
                    self.lock.wait()
                if self._stop:
                    return
                (job, generation), self._pending = self._pending, None
                self._running = (job, time.monotonic())
            interval = sys.getswitchinterval()
            if self._switch_interval is not None:
                sys.setswitchinterval(min(interval, self._switch_interval))
            wall = time.perf_counter()
            try:
                self._solve(job, generation)
            except Exception as exc:  # noqa: BLE001 - the thread must survive any solve
                self._on_error(job, exc, time.perf_counter() - wall)
            finally:
                sys.setswitchinterval(interval)
                with self.lock:
                    self._running = None
