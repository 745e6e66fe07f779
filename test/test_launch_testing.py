"""launch_testing: bringup.launch.py sim:=embedded robot:=arm7 runs and closes the loop.

Needs a ROS 2 install with launch_testing and launch_ros, and multibody_suite in the ament
index (``colcon build``; ``colcon test`` runs this file).  Without them the module is
skipped at collection: the ROS wheels of the venv have rclpy but no launch.

The processes are the real ones: robot_state_publisher, simulator_node, dynamics_node and
controller_node.  The test checks that /joint_states carries arm7's seven joints, that the
controller writes seven finite efforts on /effort_controller/commands, that
robot_description is published, and that everything exits cleanly on shutdown.
"""

import math
import os
import time
import unittest

import pytest

pytest.importorskip("launch_testing")
pytest.importorskip("launch_testing.actions")
pytest.importorskip("launch_ros")
pytest.importorskip("launch.actions")  # the repo's launch/ folder alone is not `launch`

import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
import rclpy  # noqa: E402
from ament_index_python.packages import (  # noqa: E402
    PackageNotFoundError,
    get_package_share_directory,
)
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description import LaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, String  # noqa: E402

try:
    SHARE = get_package_share_directory("multibody_suite")
except (PackageNotFoundError, LookupError, ValueError):
    pytest.skip("multibody_suite is not in the ament index (run colcon build)",
                allow_module_level=True)

JOINTS = [f"joint{k}" for k in range(1, 8)]
TIMEOUT = 30.0  # s, start-up of four processes and the first messages, generous for CI


@pytest.mark.launch_test
def generate_test_description():
    bringup = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(SHARE, "launch", "bringup.launch.py")),
        launch_arguments=[("robot", "arm7"), ("sim", "embedded"), ("rviz", "false")],
    )
    return LaunchDescription([bringup, launch_testing.actions.ReadyToTest()])


def _wait_for(node, topic, msg_type, predicate=lambda m: True, qos=10):
    received = []
    sub = node.create_subscription(msg_type, topic, received.append, qos)
    try:
        end = time.monotonic() + TIMEOUT
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
            hits = [m for m in received if predicate(m)]
            if hits:
                return hits[-1]
        return None
    finally:
        node.destroy_subscription(sub)


class TestBringupEmbedded(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rclpy.init()

    @classmethod
    def tearDownClass(cls):
        rclpy.shutdown()

    def setUp(self):
        self.node = rclpy.create_node("test_bringup_embedded")

    def tearDown(self):
        self.node.destroy_node()

    def test_joint_states(self, proc_output):
        msg = _wait_for(self.node, "/joint_states", JointState, lambda m: len(m.name) == 7)
        self.assertIsNotNone(msg, "no /joint_states with arm7's 7 joints")
        self.assertEqual(sorted(msg.name), JOINTS)
        self.assertEqual(len(msg.position), 7)
        self.assertTrue(all(math.isfinite(x) for x in [*msg.position, *msg.velocity]))

    def test_effort_commands(self, proc_output):
        msg = _wait_for(self.node, "/effort_controller/commands", Float64MultiArray,
                        lambda m: len(m.data) > 0)
        self.assertIsNotNone(msg, "controller_node published no effort command")
        self.assertEqual(len(msg.data), 7)
        self.assertTrue(all(math.isfinite(x) for x in msg.data))

    def test_robot_description(self, proc_output):
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        msg = _wait_for(self.node, "/robot_description", String, qos=latched)
        self.assertIsNotNone(msg, "robot_state_publisher published no robot_description")
        self.assertIn('<robot name="arm7"', msg.data)
        self.assertIn("<ros2_control", msg.data)

    def test_nodes_running(self, proc_output):
        end = time.monotonic() + TIMEOUT
        wanted = {"simulator_node", "controller_node", "dynamics_node", "robot_state_publisher"}
        names = set()
        while time.monotonic() < end and not wanted <= names:
            rclpy.spin_once(self.node, timeout_sec=0.2)
            names = set(self.node.get_node_names())
        self.assertLessEqual(wanted, names)


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_exit_codes(self, proc_info):
        # SIGINT from launch: 0 from a node that handles it, -2 from one killed by it
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2])
