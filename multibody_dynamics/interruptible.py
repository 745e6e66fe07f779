"""``scipy.integrate.solve_ivp`` that keeps its samples when Ctrl-C arrives.

A ``KeyboardInterrupt`` raised inside ``solve_ivp`` unwinds through it and loses every sample
it had computed: they live in local variables of the solver loop.  :func:`solve_ivp_keeping`
instead defers the first SIGINT while the integration runs: the handler sets a flag, and a
terminal event ends the integration at the end of the step under way, so the solver returns
its samples up to there the ordinary way (``status`` 1).  A second Ctrl-C interrupts at once,
as usual.  Outside the main thread (where Python delivers signals) it is plain ``solve_ivp``.
"""

from __future__ import annotations

import signal
import threading

import numpy as np
from scipy.integrate import solve_ivp

__all__ = ["INTERRUPTS", "interrupt_in", "reraise_unless_interrupt", "solve_ivp_keeping",
           "solve_ivp_streaming"]

#: The exception types a Ctrl-C can arrive as (see :func:`interrupt_in`): catch these, then
#: call :func:`reraise_unless_interrupt` to let every other ``SystemError`` through.
INTERRUPTS = (KeyboardInterrupt, SystemError)


def interrupt_in(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C: a ``KeyboardInterrupt``, or the ``SystemError`` a compiled
    function raises when the KeyboardInterrupt was set while it ran (a numba dispatcher:
    "returned a result with an exception set", the KeyboardInterrupt as its cause).  Any other
    exception is not."""
    for _ in range(8):  # the chain is one or two links long
        if isinstance(exc, KeyboardInterrupt):
            return True
        if not isinstance(exc, SystemError):
            return False
        nxt = exc.__cause__ or exc.__context__
        if nxt is None:
            return False
        exc = nxt
    return False


def reraise_unless_interrupt(exc: BaseException) -> None:
    """Raise ``exc`` again unless it is a Ctrl-C (:func:`interrupt_in`); the ``except
    INTERRUPTS`` handlers that keep partial results call it first."""
    if not interrupt_in(exc):
        raise exc


def _streaming(method, t_eval: np.ndarray, on_sample, sent: list):
    """The solver class ``method`` (a scipy name such as "DOP853", or an ``OdeSolver``
    subclass) made to pass the ``t_eval`` samples of each step to ``on_sample(t, y)`` when the
    next step starts, from the same interpolant ``solve_ivp`` evaluates them with (cached, so
    no extra evaluation of ``fun``); the integration is unchanged.  ``sent[0]`` counts the
    samples passed (forward integration only)."""
    import scipy.integrate

    base = getattr(scipy.integrate, method) if isinstance(method, str) else method

    class Streaming(base):
        _dense = None

        def dense_output(self):  # solve_ivp asks again for the interpolant of this step
            key = (self.t_old, self.t)
            if self._dense is None or self._dense[0] != key:
                self._dense = (key, super().dense_output())
            return self._dense[1]

        def step(self):
            if self.t_old is not None:  # the samples of the step that has ended
                j = int(np.searchsorted(t_eval, self.t, side="right"))
                if j > sent[0]:
                    ts = t_eval[sent[0]:j]
                    ys = self.dense_output()(ts)
                    for i, ti in enumerate(ts):
                        on_sample(float(ti), ys[:, i])
                    sent[0] = j
            return super().step()

    Streaming.__name__ = f"Streaming{base.__name__}"
    return Streaming


def _rest(sol, sent: int, on_sample) -> None:
    """The samples of ``sol`` from index ``sent`` on (the last step's) to ``on_sample``."""
    for i in range(sent, sol.t.size):
        on_sample(float(sol.t[i]), sol.y[:, i])


def solve_ivp_streaming(fun, t_span, y0, *, on_sample, **options):
    """``solve_ivp(fun, t_span, y0, **options)`` that passes each ``t_eval`` sample to
    ``on_sample(t, y)`` as the integration goes (as :func:`solve_ivp_keeping` does with
    ``on_sample``), Ctrl-C raising as usual.  Returns ``sol``, unchanged by the streaming."""
    sent = [0]
    options["method"] = _streaming(options.get("method", "RK45"),
                                   np.asarray(options["t_eval"], float), on_sample, sent)
    sol = solve_ivp(fun, t_span, y0, **options)
    _rest(sol, sent[0], on_sample)
    return sol


def solve_ivp_keeping(fun, t_span, y0, *, events=None, on_sample=None, **options):
    """``solve_ivp(fun, t_span, y0, events=events, **options)``; Ctrl-C ends it, samples kept.

    Parameters
    ----------
    fun, t_span, y0, **options
        As for :func:`scipy.integrate.solve_ivp` (``t_eval``, ``method``, ``rtol``, ...).
    events : callable or list of callables, optional
        The caller's events; their indices in ``sol.t_events`` are unchanged (the interrupt
        event is appended after them).
    on_sample : callable ``on_sample(t, y)``, optional
        Called with each ``t_eval`` sample (``t`` [s], ``y`` (n,)) as the integration goes:
        those of a step when the next step starts, the last step's after the integration;
        the values are those of the returned ``sol`` (same interpolant).  Needs ``t_eval``
        and ``t_span`` forward.  An exception it raises ends the integration.

    Returns
    -------
    sol : OdeResult
        As ``solve_ivp`` returns it; after Ctrl-C, ``status`` 1 and the samples (``t_eval``
        points or steps) up to the end of the step that was under way.
    interrupted : float or None
        The time [s] at which Ctrl-C stopped the integration, None when it was not
        interrupted.

    Raises
    ------
    KeyboardInterrupt
        On a second Ctrl-C during the same integration.
    """
    if on_sample is not None:
        sent = [0]
        options["method"] = _streaming(options.get("method", "RK45"),
                                       np.asarray(options["t_eval"], float), on_sample, sent)
        sol, stopped = solve_ivp_keeping(fun, t_span, y0, events=events, **options)
        _rest(sol, sent[0], on_sample)
        return sol, stopped
    if threading.current_thread() is not threading.main_thread():
        return solve_ivp(fun, t_span, y0, events=events, **options), None
    state = {"requested": False, "t_stop": None}

    def on_sigint(signum, frame):
        if state["requested"]:  # second Ctrl-C: do not wait for the step to end
            raise KeyboardInterrupt
        state["requested"] = True

    def stop(t, y):
        # +1 until Ctrl-C; then t_stop - t, zero at the end of the step where it was seen, so
        # that the solver's root finding places the terminal event exactly there
        if not state["requested"]:
            return 1.0
        if state["t_stop"] is None:
            state["t_stop"] = float(t)
        return state["t_stop"] - float(t)

    stop.terminal = True
    caller = [] if events is None else (list(events) if isinstance(events, (list, tuple))
                                        else [events])
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        sol = solve_ivp(fun, t_span, y0, events=[*caller, stop], **options)
    finally:
        signal.signal(signal.SIGINT, previous)
    sol.t_events = None if events is None else sol.t_events[:-1]
    sol.y_events = None if events is None else sol.y_events[:-1]
    if not state["requested"]:
        return sol, None
    # Ctrl-C after the last step's event check: every sample is there, the run still counts
    # as interrupted
    return sol, state["t_stop"] if state["t_stop"] is not None else float(sol.t[-1])
