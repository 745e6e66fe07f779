"""The test run's exit guard (exit_guard.py): a process held at exit by a blocked thread or a
child process that ignores SIGTERM ends with the status it was given, and says what held it."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_HELD = '''
import multiprocessing, signal, sys, threading, time
sys.path.insert(0, {here!r})
import exit_guard

def stubborn():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=stubborn)
    child.start()  # non-daemon: multiprocessing joins it at exit
    threading.Thread(target=threading.Event().wait, name="blocked").start()
    time.sleep(0.5)
    assert exit_guard.report()
    exit_guard.guard(3, grace={grace})
'''


def test_a_process_held_at_exit_is_reported_and_ends_with_the_given_status(tmp_path):
    script = tmp_path / "held.py"
    script.write_text(_HELD.format(here=str(HERE), grace=1.0))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "thread 'blocked' (non-daemon)" in proc.stderr
    assert "child process" in proc.stderr and "has not exited 1 s after" in proc.stderr


def test_nothing_is_reported_when_nothing_is_left(tmp_path):
    script = tmp_path / "clean.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(HERE)!r})\nimport exit_guard\n"
                      "assert not exit_guard.report()\nexit_guard.guard(3, grace=5.0)\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and "exit_guard" not in proc.stderr, proc.stderr
