"""The nodes' loggers at exit: never through a dead ``/rosout`` publisher.

rcl prints "Failed to publish log message to rosout: publisher's context is invalid" when a
node's line goes to ``/rosout`` after its context was shut down.  Two rules keep the suite's
lines away from it:

* once the process is ending (:data:`ENDING`, set by :func:`~.runtime.run_node` when it leaves
  the spin) or the context is gone, a node's lines go to a console-only logger
  (:func:`exit_logger`);
* the check and the line are one step: :class:`ExitSafeLogger` holds :data:`LOG_LOCK` across
  both, and :func:`~.runtime.run_node` sets :data:`ENDING` under the same lock and shuts the
  context down after it.  With its own SIGINT/SIGTERM handling (``run_node`` on the main
  thread) nothing else shuts the context down, so no line can be between its check and its
  publication when the context goes.

The module holds nothing but these, so that rclpy's call-site bookkeeping can skip its frames
(it is registered in ``rclpy.impl.rcutils_logger._internal_callers``, the list rclpy keeps for
such wrappers): a line is attributed to the node's code that logged it, as with rclpy's logger.
"""

from __future__ import annotations

import os
import threading

#: set by :func:`~.runtime.run_node` once the process is ending (the spin is over, by a signal
#: or otherwise): from then on a node's lines go to the console only (:func:`exit_logger`)
ENDING = threading.Event()
#: held by :class:`ExitSafeLogger` from its check to the end of the line, and by ``run_node``
#: while it sets :data:`ENDING`
LOG_LOCK = threading.RLock()


def _register_with_rclpy() -> None:
    try:
        from rclpy.impl import rcutils_logger
    except ImportError:  # no rclpy: nothing to register with
        return
    callers = getattr(rcutils_logger, "_internal_callers", None)
    path = os.path.realpath(__file__)
    if isinstance(callers, list) and path not in callers:
        callers.append(path)


_register_with_rclpy()


def exit_logger(node):
    """The logger for a node's lines at its exit: ``node.get_logger()`` (rclpy's) while its
    context is valid and the process is not ending; once :func:`~.runtime.run_node` has left
    the spin, or after the context was shut down, a logger of the same name plus ``.exit``
    that only writes to the console, since the node's own logger would also try the
    ``/rosout`` publisher of the dead context.
    """
    import rclpy
    from rclpy.node import Node

    logger = Node.get_logger(node)  # its name stays readable after destroy_node
    if not ENDING.is_set() and rclpy.ok(context=node.context):
        return logger
    return rclpy.logging.get_logger(f"{logger.name}.exit")


class ExitSafeLogger:
    """A node's logger that is :func:`exit_logger` at each line: rclpy's logger of the node
    while the node runs, the console-only ``.exit`` logger once the process ends or the
    context is gone.  What a node's threads (paced loop, workers) log between the signal and
    their stop then never reaches the dead ``/rosout`` publisher.

    The logging methods choose the logger and write the line under :data:`LOG_LOCK`; other
    attributes are those of the logger chosen at the access.
    """

    __slots__ = ("_node",)

    def __init__(self, node):
        self._node = node

    def debug(self, message, **kwargs):
        with LOG_LOCK:
            return exit_logger(self._node).debug(message, **kwargs)

    def info(self, message, **kwargs):
        with LOG_LOCK:
            return exit_logger(self._node).info(message, **kwargs)

    def warning(self, message, **kwargs):
        with LOG_LOCK:
            return exit_logger(self._node).warning(message, **kwargs)

    def warn(self, message, **kwargs):
        with LOG_LOCK:
            return exit_logger(self._node).warning(message, **kwargs)

    def error(self, message, **kwargs):
        with LOG_LOCK:
            return exit_logger(self._node).error(message, **kwargs)

    def fatal(self, message, **kwargs):
        with LOG_LOCK:
            return exit_logger(self._node).fatal(message, **kwargs)

    def __getattr__(self, name: str):
        return getattr(exit_logger(self._node), name)


class ExitSafeLogging:
    """Mixin for the suite's nodes (before ``rclpy.node.Node`` in the bases):
    ``get_logger()`` returns an :class:`ExitSafeLogger` of the node."""

    def get_logger(self):
        logger = self.__dict__.get("_exit_safe_logger")
        if logger is None:
            logger = self.__dict__["_exit_safe_logger"] = ExitSafeLogger(self)
        return logger
