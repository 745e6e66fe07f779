"""Standard output that outlives its reader: ``multibody simulate ... --out r.csv | head``.

When the program reading the output exits early (``head``, ``grep -m1``, a closed viewer),
the next write to stdout raises ``BrokenPipeError``.  Raised from a ``print`` of the summary,
it stopped the command before its result files were written (``simulate --out r.csv | head
-1`` wrote no ``r.csv`` and ended "error: [Errno 32] Broken pipe").  Inside
:func:`pipe_safe_stdout` the writes that find the pipe closed are dropped and the command
goes on; at the end the closed descriptor is pointed at ``os.devnull`` so that the
interpreter's last flush is quiet (the way the Python documentation recommends for SIGPIPE,
library reference, ``signal``: "Note on SIGPIPE").
"""

from __future__ import annotations

import contextlib
import os
import sys


class _PipeSafe:
    """A text stream forwarding to ``stream`` until the reader of its pipe has gone."""

    def __init__(self, stream):
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self.gone = True
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self.gone = True

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def pipe_safe_stdout():
    """``sys.stdout`` wrapped in :class:`_PipeSafe` for the duration of the block."""
    original = sys.stdout
    safe = _PipeSafe(original)
    sys.stdout = safe
    try:
        yield safe
    finally:
        safe.flush()
        sys.stdout = original
        if safe.gone:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, original.fileno())
                os.close(devnull)
