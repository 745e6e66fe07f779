"""A one-line note on an interactive stderr while numba compiles the kernels for long.

The compiled kernels (:mod:`multibody_dynamics.fast_step`, the projection, the flexible
chains) are compiled by numba on their first call and cached on disk (``cache=True``).  The
first run after an install or an update compiles them: measured 48 s of wall time for
``multibody simulate slider_crank --duration 1`` with an empty cache on this project's 2-core
machine under load, against 2 s with the cache; during that time the progress bar of the run
stands at 0 %.  :func:`install` registers a listener of numba's compile events (numba's
documented event API, ``numba.core.event.register``) that says what is going on when a compilation
lasts longer than :data:`DELAY`; a cached kernel loads without a compile event, so a warm
run prints nothing.  The note goes to stderr only when it is a terminal: captured or piped
output (tests, scripts reading the CLI's output) stays as it was.
"""

from __future__ import annotations

import sys
import threading

DELAY = 2.0  # s a compilation runs before the note is printed
MESSAGE = ("compiling the numerical kernels with numba (after an install or an update, up to a "
           "minute; later runs load them from the cache) ...")

_state: dict = {"installed": False, "depth": 0, "timer": None, "said": False}


def _say() -> None:
    """Print :data:`MESSAGE` once per process, above any progress bar, if stderr is a
    terminal."""
    if _state["said"]:
        return
    _state["said"] = True
    stream = sys.stderr
    if not getattr(stream, "isatty", lambda: False)():
        return
    from tqdm import tqdm

    tqdm.write(MESSAGE, file=stream)


def install() -> None:
    """Register the compile listener once per process (nothing without numba)."""
    if _state["installed"]:
        return
    try:
        from numba.core import event
    except ImportError:
        return

    class _Listener(event.Listener):
        """Starts a timer at the outermost compilation, stops it at its end (compilations
        nest: a kernel compiles the functions it calls; numba compiles under one lock)."""

        def on_start(self, ev):
            _state["depth"] += 1
            if _state["depth"] == 1 and not _state["said"]:
                timer = threading.Timer(DELAY, _say)
                timer.daemon = True
                timer.start()
                _state["timer"] = timer

        def on_end(self, ev):
            _state["depth"] = max(0, _state["depth"] - 1)
            if _state["depth"] == 0 and _state["timer"] is not None:
                _state["timer"].cancel()
                _state["timer"] = None

    event.register("numba:compile", _Listener())
    _state["installed"] = True
