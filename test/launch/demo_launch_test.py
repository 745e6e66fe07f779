"""launch_testing: demo.launch.py (arm7 and five_bar side by side, each in its namespace).

Run with ``launch_test``; ``test/test_launch_testing_runs.py`` runs it in a subprocess.  Checks
that each namespace has its own plant (/arm7/joint_states with 7 joints, /five_bar/joint_states
with 4) and its own controller (finite efforts on <ns>/effort_controller/commands, 7 and 2), and
that every process exits cleanly.  rviz2, robot_state_publisher and static_transform_publisher
are left out with a warning where they are not installed.
"""

import os
import sys
import unittest

import launch_testing.asserts
import numpy as np
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import node_test_case  # beside this file (see its docstring)

EXPECTED = {"arm7": (7, 7), "five_bar": (4, 2)}  # (joints, efforts)


def generate_test_description():
    return node_test_case.include("demo.launch.py", rviz="false")


class TestDemo(node_test_case.NodeTestCase):
    NODE = "test_demo"
    TIMEOUT = 60.0  # s: start-up of four nodes on a loaded 2-core machine

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.states = {ns: [] for ns in EXPECTED}
        cls.commands = {ns: [] for ns in EXPECTED}
        for ns in EXPECTED:
            cls.node.create_subscription(JointState, f"/{ns}/joint_states",
                                         cls.states[ns].append, 10)
            cls.node.create_subscription(Float64MultiArray, f"/{ns}/effort_controller/commands",
                                         cls.commands[ns].append, 10)

    def test_both_loops_run(self, proc_output):
        self.spin_until(lambda: all(self.states[ns] and self.commands[ns] for ns in EXPECTED))
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
