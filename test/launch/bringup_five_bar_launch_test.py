"""launch_testing: bringup.launch.py robot:=five_bar (closed loop) with its default law.

Run with ``launch_test`` (not collected by pytest: launch_testing's pytest plugin does not load
under pytest 9); ``test/test_launch_testing_runs.py`` runs it in a subprocess.  Checks that
/joint_states carries five_bar's four joints, that a trajectory naming only the two motors
(the independent coordinates of projected_inverse_dynamics) moves them, that dynamics_node
publishes the constraint forces of the loop, and that every process exits cleanly.
"""

import os
import sys
import time
import unittest

import launch_testing.asserts
import numpy as np
import rclpy
from builtin_interfaces.msg import Duration
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import node_test_case  # beside this file (see its docstring)

JOINTS = ["left_elbow", "left_motor", "right_elbow", "right_motor"]
MOVE = 0.1      # rad on each motor, reached in 1 s


def generate_test_description():
    return node_test_case.include("bringup.launch.py", robot="five_bar", sim="embedded",
                                  rviz="false")


class TestFiveBar(node_test_case.NodeTestCase):
    NODE = "test_five_bar"
    TIMEOUT = 60.0  # s: start-up of three nodes on a loaded 2-core machine

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.states, cls.forces = [], []
        cls.node.create_subscription(JointState, "/joint_states", cls.states.append, 100)
        cls.node.create_subscription(Float64MultiArray, "/dynamics_node/constraint_forces",
                                     cls.forces.append, 10)

    def test_tracks_motors_only_reference(self, proc_output):
        pub = self.node.create_publisher(JointTrajectory, "/controller_node/joint_trajectory", 1)
        self.wait_for_startup(self.states, pub)
        self.assertEqual(sorted(self.states[-1].name), JOINTS)
        index = {n: i for i, n in enumerate(self.states[-1].name)}
        q0 = np.array([self.states[-1].position[index[n]] for n in ("left_motor", "right_motor")])
        goal = q0 + [-MOVE, MOVE]
        msg = JointTrajectory(joint_names=["left_motor", "right_motor"])
        msg.points = [JointTrajectoryPoint(positions=goal.tolist(), velocities=[0.0, 0.0],
                                           time_from_start=Duration(sec=1))]
        pub.publish(msg)
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            rclpy.spin_once(self.node, timeout_sec=0.05)
        last = self.states[-1]
        q = np.array([last.position[index[n]] for n in ("left_motor", "right_motor")])
        # 2 s after a 1 s move: e'' + 20 e' + 100 e = 0 has settled to < 1e-6 of the step;
        # 5 mrad leaves room for DDS delays on a loaded machine
        np.testing.assert_allclose(q, goal, atol=5e-3)

    def test_constraint_forces(self, proc_output):
        self.assertTrue(self.spin_until(lambda: len(self.forces) > 0),
                        "dynamics_node published no ~/constraint_forces")
        self.assertEqual(len(self.forces[-1].data), 4)
        self.assertTrue(np.all(np.isfinite(self.forces[-1].data)))


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_exit_codes(self, proc_info):
        # SIGINT from launch: 0 from a node that handles it, -2 from one killed by it
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2])
