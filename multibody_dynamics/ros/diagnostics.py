"""``/diagnostics`` of the nodes: one ``diagnostic_msgs/DiagnosticStatus`` per node and period.

What ``diagnostic_updater`` does for C++ nodes and what ``rqt_robot_monitor`` and the
diagnostic aggregator read: a ``diagnostic_msgs/DiagnosticArray`` on ``/diagnostics`` every
``diagnostic_updater.period`` seconds (the updater's own parameter name, default 1 s, wall
clock), its status named ``<node name>: <task>``, ``hardware_id`` the robot, a level
(OK / WARN / ERROR), a one-line message and the values as key/value strings.

``diagnostic_msgs`` is optional: without it (a ROS install without the package, or no
``ros-diagnostic-msgs`` wheel) the nodes log once that ``/diagnostics`` is off and keep their
labelled ``Float64MultiArray`` topics, which carry the numbers either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rclpy.clock import Clock, ClockType

from .parameters import ParameterSet, ParameterSpec

LEVELS = ("ok", "warn", "error")
PERIOD_PARAMETER = "diagnostic_updater.period"


def diagnostics_available() -> bool:
    """Whether ``diagnostic_msgs`` can be imported."""
    try:
        import diagnostic_msgs.msg  # noqa: F401
    except ImportError:
        return False
    return True


def format_value(value) -> str:
    """A diagnostic value as text: floats with 6 significant digits, the rest as ``str``."""
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    return str(value)


class NodeDiagnostics:
    """Publish ``collect()`` of ``node`` on ``/diagnostics`` every ``diagnostic_updater.period`` s.

    Parameters
    ----------
    node : rclpy Node
        Declares the read-only parameter ``diagnostic_updater.period`` [s] on it (0 turns
        ``/diagnostics`` off).
    task : str
        The status is named ``<node name>: <task>``.
    hardware_id : str
        The robot.
    collect : callable() -> (level, message, values)
        ``level`` one of :data:`LEVELS`, ``message`` one line, ``values`` a dict of name ->
        value (formatted by :func:`format_value`).  It runs on the executor; an exception
        becomes an ERROR status naming it (the node keeps running).

    Attributes
    ----------
    enabled : bool
        False when diagnostic_msgs is missing or the period is 0.
    published : int
        Arrays published so far.
    """

    def __init__(self, node, task: str, hardware_id: str,
                 collect: Callable[[], tuple[str, str, dict]]):
        spec = ParameterSpec(PERIOD_PARAMETER, 1.0, "period of the /diagnostics status "
                             "(wall clock); 0 turns /diagnostics off", unit="s",
                             range=(0.0, 3600.0), read_only=True)
        period = ParameterSet(node, (spec,))[PERIOD_PARAMETER]
        self._node = node
        self._collect = collect
        self.published = 0
        self.enabled = False
        if period <= 0:
            return
        if not diagnostics_available():
            node.get_logger().info("diagnostic_msgs is not installed: no /diagnostics (the "
                                   "labelled Float64MultiArray topics carry the numbers)")
            return
        from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

        self._types = (DiagnosticArray, DiagnosticStatus, KeyValue)
        self._level = {"ok": DiagnosticStatus.OK, "warn": DiagnosticStatus.WARN,
                       "error": DiagnosticStatus.ERROR}
        self._name = f"{node.get_name()}: {task}"
        self._hardware_id = hardware_id
        self._pub = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._timer = node.create_timer(period, self.publish,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.enabled = True

    def status(self):
        """The current ``DiagnosticStatus`` (from ``collect()``)."""
        DiagnosticArray, DiagnosticStatus, KeyValue = self._types
        try:
            level, message, values = self._collect()
            if level not in self._level:
                raise ValueError(f"level {level!r}: expected one of {', '.join(LEVELS)}")
        except Exception as exc:  # a diagnostic must never take the node down
            level, values = "error", {}
            message = f"diagnostics failed: {type(exc).__name__}: {exc}"
        return DiagnosticStatus(
            level=self._level[level], name=self._name, message=str(message),
            hardware_id=self._hardware_id,
            values=[KeyValue(key=str(k), value=format_value(v)) for k, v in values.items()])

    def publish(self):
        DiagnosticArray = self._types[0]
        msg = DiagnosticArray(status=[self.status()])
        msg.header.stamp = self._node.get_clock().now().to_msg()
        self._pub.publish(msg)
        self.published += 1
