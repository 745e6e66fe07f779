"""What the launch_testing files of test/launch/ share: the launch under test, a test node spun in
the test's thread, and the wait for the launched nodes to start.

``launch_test`` loads a test file by its path without putting its folder on ``sys.path``, so
each file inserts its own folder before importing this module (``import node_test_case``); that
works under ``launch_test`` run by hand and under ``test/test_launch_testing_runs.py``.  The
module is imported, not its names, so that launch_testing's loader (which collects every
``unittest.TestCase`` in a test file's namespace) does not collect :class:`NodeTestCase`.
"""

from __future__ import annotations

import os
import time
import unittest

import launch_testing.actions
import rclpy
from ament_index_python.packages import get_package_share_directory
from launch.actions import IncludeLaunchDescription
from launch.launch_description import LaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource

SHARE = get_package_share_directory("multibody_suite")


def include(launch_file: str, **arguments: str) -> LaunchDescription:
    """``launch/<launch_file>`` of the package with ``arguments`` (name: value), then
    ``ReadyToTest``: the description ``generate_test_description`` returns."""
    included = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(SHARE, "launch", launch_file)),
        launch_arguments=list(arguments.items()),
    )
    return LaunchDescription([included, launch_testing.actions.ReadyToTest()])


class NodeTestCase(unittest.TestCase):
    """A test class with one rclpy node, ``cls.node`` (named :attr:`NODE`), created before its
    tests and destroyed after them; a subclass's ``setUpClass`` calls this one first, then
    subscribes."""

    NODE = "launch_test"
    #: s of wall time allowed for the launched nodes to start (a loaded 2-core machine)
    TIMEOUT = 60.0

    @classmethod
    def setUpClass(cls):
        rclpy.init()
        cls.node = rclpy.create_node(cls.NODE)

    @classmethod
    def tearDownClass(cls):
        cls.node.destroy_node()
        rclpy.shutdown()

    def spin_until(self, predicate, timeout: float | None = None) -> bool:
        """Spin the test node until ``predicate()`` holds or ``timeout`` [s] (default
        :attr:`TIMEOUT`) has passed; the last value of ``predicate()``."""
        end = time.monotonic() + (self.TIMEOUT if timeout is None else timeout)
        while time.monotonic() < end and not predicate():
            rclpy.spin_once(self.node, timeout_sec=0.05)
        return predicate()

    def wait_for_startup(self, states: list, publisher, min_states: int = 1) -> None:
        """Fail unless, within :attr:`TIMEOUT`, ``states`` (the messages a /joint_states
        subscription appends to) holds ``min_states`` messages and ``publisher`` (e.g. of the
        controller's trajectory topic) has a subscriber."""
        self.assertTrue(self.spin_until(lambda: len(states) >= min_states
                                        and publisher.get_subscription_count() > 0),
                        "no /joint_states or no controller after start-up")
