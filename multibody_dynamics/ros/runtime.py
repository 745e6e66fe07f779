"""Node runtime helpers: throttled warnings and the ``main`` wrapper of every node."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from ..errors import MultibodyError


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
            message = f"{message} ({n} similar message(s) suppressed in the last {now - last:.1f} s)"
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


def run_node(node_cls: Callable[[], object], args: list[str] | None = None) -> int:
    """Initialize rclpy, build ``node_cls()``, spin until shutdown; return the exit code.

    Ctrl-C (``KeyboardInterrupt``) and a shutdown from outside
    (``ExternalShutdownException``, e.g. SIGINT/SIGTERM handled by rclpy) end
    with 0.  A node that cannot start (``MultibodyError``, ``ValueError``,
    ``FileNotFoundError`` raised by its constructor: bad parameters, unknown
    robot, unsupported model) logs one error line and ends with 1.
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException

    rclpy.init(args=args)
    node = None
    code = 0
    try:
        try:
            node = node_cls()
        except (MultibodyError, ValueError, FileNotFoundError) as exc:
            name = getattr(node_cls, "node_name", getattr(node_cls, "__name__", "node"))
            msg = " ".join(str(exc).split())
            rclpy.logging.get_logger(name).error(f"cannot start: {msg}")
            code = 1
        else:
            try:
                rclpy.spin(node)
            except Exception:
                # A signal shuts the context down asynchronously; a take or publish
                # interrupted by it raises from the C layer.  Only a live context's
                # error is a real one.
                if rclpy.ok():
                    raise
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return code


def main_for(node_cls) -> Callable[[list[str] | None], None]:
    """A console-script ``main(args=None)`` running ``node_cls`` (exit code from :func:`run_node`)."""

    def main(args: list[str] | None = None) -> None:
        sys.exit(run_node(node_cls, args))

    main.__doc__ = f"Run {getattr(node_cls, 'node_name', node_cls.__name__)}."
    return main
