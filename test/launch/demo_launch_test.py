"""launch_testing: demo.launch.py (arm7 and five_bar side by side, each in its namespace).

Run with ``launch_test``; ``test/test_launch_testing_runs.py`` runs it in a subprocess.  Checks
that each namespace has its own plant (/arm7/joint_states with 7 joints, /five_bar/joint_states
with 4) and its own controller (finite efforts on <ns>/effort_controller/commands, 7 and 2), and
that every process exits cleanly.  rviz2, robot_state_publisher and static_transform_publisher
are left out with a warning where they are not installed.
"""

import os
import time
import unittest

import launch_testing.actions
import launch_testing.asserts
import numpy as np
import rclpy
from ament_index_python.packages import get_package_share_directory
from launch.actions import IncludeLaunchDescription
from launch.launch_description import LaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

SHARE = get_package_share_directory("multibody_suite")
TIMEOUT = 60.0  # s: start-up of four nodes on a loaded 2-core machine
EXPECTED = {"arm7": (7, 7), "five_bar": (4, 2)}  # (joints, efforts)


def generate_test_description():
    demo = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(SHARE, "launch", "demo.launch.py")),
        launch_arguments=[("rviz", "false")],
    )
    return LaunchDescription([demo, launch_testing.actions.ReadyToTest()])


class TestDemo(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rclpy.init()
        cls.node = rclpy.create_node("test_demo")
        cls.states = {ns: [] for ns in EXPECTED}
        cls.commands = {ns: [] for ns in EXPECTED}
        for ns in EXPECTED:
            cls.node.create_subscription(JointState, f"/{ns}/joint_states",
                                         cls.states[ns].append, 10)
            cls.node.create_subscription(Float64MultiArray, f"/{ns}/effort_controller/commands",
                                         cls.commands[ns].append, 10)

    @classmethod
    def tearDownClass(cls):
        cls.node.destroy_node()
        rclpy.shutdown()

    def test_both_loops_run(self, proc_output):
        end = time.monotonic() + TIMEOUT
        while time.monotonic() < end and not all(
                self.states[ns] and self.commands[ns] for ns in EXPECTED):
            rclpy.spin_once(self.node, timeout_sec=0.05)
        for ns, (joints, efforts) in EXPECTED.items():
            self.assertTrue(self.states[ns], f"no /{ns}/joint_states")
            self.assertTrue(self.commands[ns], f"no /{ns}/effort_controller/commands")
            self.assertEqual(len(self.states[ns][-1].name), joints)
            self.assertEqual(len(self.commands[ns][-1].data), efforts)
            self.assertTrue(np.all(np.isfinite(self.commands[ns][-1].data)))


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_exit_codes(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2])
