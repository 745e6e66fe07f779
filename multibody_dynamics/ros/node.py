"""What every node of the suite starts with: its name, its executor choice and its throttle."""

from __future__ import annotations

from rclpy.node import Node

from .runtime import DEFAULT_EXECUTOR, ExitSafeLogging, Throttle, node_executor


class MultibodyNode(ExitSafeLogging, Node):
    """An rclpy node named ``node_name`` that knows the executor it spins in.

    Parameters
    ----------
    executor : str
        Default of the read-only parameter ``executor`` (one of
        :data:`~multibody_dynamics.ros.runtime.EXECUTORS`): :func:`~.runtime.run_node` passes
        the ``--executor`` choice here, so each node gets its own; ``-p executor:=KIND``
        still overrides it.
    **kwargs
        Passed on to :class:`rclpy.node.Node` (``context``, ``parameter_overrides``, ...).

    Attributes
    ----------
    executor_kind : str
        The value of the ``executor`` parameter (declared first, before the node's own).
    throttle : Throttle
        Rate-limited warnings and errors on the node's logger.
    """

    node_name = "multibody_node"

    def __init__(self, *, executor: str = DEFAULT_EXECUTOR, **kwargs):
        super().__init__(self.node_name, **kwargs)
        self.executor_kind = node_executor(self, executor)
        self.throttle = Throttle(self.get_logger())
