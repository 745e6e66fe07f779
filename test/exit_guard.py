"""What a test run leaves behind when pytest ends, and a guard against hanging on it.

After its summary, the pytest process still joins every non-daemon thread (thread pools
included: an rclpy ``MultiThreadedExecutor`` never shut down, a process pool's manager thread
waiting for its workers) and every non-daemon ``multiprocessing`` child.  Any of them blocked
for good keeps the run from exiting, with every test passed and nothing printed.

:func:`report` names the leftovers (threads with their stacks, child processes) on stderr as
soon as the session ends; :func:`guard` then watches the exit: if the process is still there
after ``grace`` seconds it prints every thread's stack, kills the leftover child processes
(which frees a pool manager waiting on them) and, if that is not enough either, ends the
process with pytest's own exit status.  A run whose tests all passed thus never turns into a
time-out, and the print says what held it.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback

#: multiprocessing's helper processes: they end by themselves when their parent does
_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def _children() -> list[tuple[int, str]]:
    """(pid, command line) of this process's live child processes, from /proc, but
    multiprocessing's helpers."""
    me, found = os.getpid(), []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            if ppid != me or stat[stat.rindex(")") + 2] == "Z":
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError, IndexError):
            continue
        if not any(h in cmd for h in _HELPERS):
            found.append((pid, cmd[:200]))
    return found


def _state(pid: int) -> str:
    """The process's state and signal masks (hexadecimal, /proc/PID/status), or why not."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
    except OSError as exc:
        return f"no /proc entry ({exc.strerror})"
    return ", ".join(f"{k} {fields[k].strip()}" for k in ("State", "PPid", "SigBlk", "SigIgn",
                                                            "SigCgt") if k in fields)


def _threads() -> list[threading.Thread]:
    """The live non-daemon threads other than the main one (what the exit joins)."""
    return [t for t in threading.enumerate()
            if t is not threading.main_thread() and not t.daemon and t.is_alive()]


def report(stream=None) -> bool:
    """Write what the run left behind on ``stream`` (stderr); True if anything."""
    stream = stream or sys.stderr
    threads, children = _threads(), _children()
    if not threads and not children and not multiprocessing.active_children():
        return False
    frames = sys._current_frames()
    lines = ["", "exit_guard: the test run left behind:"]
    for t in threads:
        lines.append(f"  thread {t.name!r} (non-daemon), at:")
        frame = frames.get(t.ident)
        if frame is not None:
            lines += ["    " + s.rstrip().replace("\n", "\n    ")
                      for s in traceback.format_stack(frame)[-6:]]
    lines += [f"  child process {pid}: {cmd}" for pid, cmd in children]
    for child in multiprocessing.active_children():  # a pool's workers: the forkserver's
        lines.append(f"  multiprocessing child {child.name} pid {child.pid}: {_state(child.pid)}")
    stream.write("\n".join(lines) + "\n")
    stream.flush()
    return True


def _kill_children() -> None:
    for child in multiprocessing.active_children():
        child.kill()
    for pid, _ in _children():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def guard(status: int, grace: float = 60.0) -> threading.Thread:
    """Watch the exit of a process whose tests ended with ``status``: after ``grace`` s, print
    every stack and kill the leftover child processes; after another ``grace`` s, end with
    ``status`` (after ``3 grace`` s, whatever holds the interpreter: status 1)."""

    def watch():
        time.sleep(grace)
        sys.stderr.write(f"\nexit_guard: the process has not exited {grace:.0f} s after the "
                         "test session ended; stacks of every thread:\n")
        faulthandler.dump_traceback(sys.stderr, all_threads=True)
        report()
        sys.stderr.write("exit_guard: killing the leftover child processes\n")
        sys.stderr.flush()
        _kill_children()
        time.sleep(grace)
        sys.stderr.write(f"exit_guard: still not exited; ending with pytest's status {status}\n")
        faulthandler.dump_traceback(sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(status)

    # the last resort, without the GIL (a C call holding it would stop the watcher): stacks
    # and exit status 1
    faulthandler.dump_traceback_later(3 * grace, exit=True)
    watcher = threading.Thread(target=watch, name="exit_guard", daemon=True)
    watcher.start()
    return watcher
