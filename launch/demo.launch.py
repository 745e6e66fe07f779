"""Two robots tracking on the embedded simulator: arm7 (serial) and five_bar (closed loop).

    ros2 launch multibody_suite demo.launch.py [rviz:=false] [with_inverter:=true]

Each robot runs in its own namespace (``/arm7``, ``/five_bar``) with robot_state_publisher
(frames prefixed ``<namespace>/``, placed side by side under ``world`` by a static
transform), ``simulator_node`` and ``controller_node``, which tracks the reference it is
sent (``/<robot>/controller_node/joint_trajectory`` or the FollowJointTrajectory action)
and holds the start until then.  With ``with_inverter:=true`` each open-chain robot (arm7)
also gets an ``inverter_node``: desired outputs sent to
``/<robot>/inverter_node/output_trajectory`` are inverted and the joint trajectory with its
feedforward goes (latched) to that robot's controller.  five_bar starts in an assembled
configuration (end
effector at (0, 0.35) m), since its spring rest (all zero) violates the loop closure.

The suite's nodes are required: if one ends while the launch runs, the launch shuts down.
robot_state_publisher, static_transform_publisher and rviz2 are optional: a missing package
is reported and left out before any process starts (docs/ros-launch.md).

Parameters come from ``config/<node>.yaml``, read here and passed as dictionaries: the
files key their parameters by the bare node name, which only matches a node in the root
namespace.  Absolute topic names are remapped into the namespace so that the two plants
stay apart whichever form a node uses.
"""

import os

import yaml
from ament_index_python.packages import get_package_share_directory
from launch.actions import GroupAction, OpaqueFunction
from launch.conditions import IfCondition
from launch.launch_description import LaunchDescription
from launch.substitutions import Command, FindExecutable, LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node, PushRosNamespace
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from multibody_dynamics.ros.launch_support import (
    flag_argument,
    flag_value,
    optional_node,
    rviz_node,
    shutdown_on_exit,
)

PACKAGE = "multibody_suite"
# (robot = namespace, x offset of its world frame [m], initial_positions [rad] or None,
#  controller_node parameter overrides, inverter_node with with_inverter:=true)
ROBOTS = [
    ("arm7", -0.6, None, {}, True),
    # left_motor, left_elbow, right_motor, right_elbow: closure residual below 1e-10 m.
    # Projected inverse dynamics with the passive elbows (Aghili 2005 Sect. 7.4), as
    # config/bringup/five_bar.yaml: e'' + 20 e' + 100 e = 0 on the motors; a trajectory may
    # name the two motors only.
    ("five_bar", 0.6, [2.260904311, -1.549961486, 0.880688343, 1.549961486],
     {"law": "projected_inverse_dynamics", "kp": [100.0], "kd": [20.0]},
     False),  # closed loop: no inverter
]
REMAP = [
    ("/joint_states", "joint_states"),
    ("/effort_controller/commands", "effort_controller/commands"),
]


def node_parameters(share, node, **overrides):
    """``<node>: ros__parameters:`` of config/<node>.yaml, updated with ``overrides``."""
    with open(os.path.join(share, "config", f"{node}.yaml")) as f:
        params = dict(yaml.safe_load(f)[node]["ros__parameters"])
    params.update(overrides)
    return params


def _robot_actions(share, robot, x, q0, controller, inverter):
    xacro_file = PathJoinSubstitution([FindPackageShare(PACKAGE), "urdf", f"{robot}.urdf.xacro"])
    description = ParameterValue(
        Command([PathJoinSubstitution([FindExecutable(name="xacro")]), " ", xacro_file,
                 " sim:=embedded"]),
        value_type=str,
    )
    simulator = node_parameters(share, "simulator_node", robot=robot)
    if q0 is not None:
        simulator["initial_positions"] = q0
    nodes = [
        PushRosNamespace(robot),
        *optional_node(
            "robot_state_publisher", f"no TF frames of {robot}",
            executable="robot_state_publisher",
            output="screen",
            parameters=[{"robot_description": description, "frame_prefix": f"{robot}/"}],
        ),
        Node(
            package=PACKAGE,
            executable="simulator_node",
            name="simulator_node",
            output="screen",
            parameters=[simulator],
            remappings=REMAP,
            on_exit=shutdown_on_exit(),
        ),
        Node(
            package=PACKAGE,
            executable="controller_node",
            name="controller_node",
            output="screen",
            parameters=[node_parameters(share, "controller_node", robot=robot, **controller)],
            remappings=REMAP,
            on_exit=shutdown_on_exit(),
        ),
    ]
    if inverter:
        nodes.append(Node(
            package=PACKAGE,
            executable="inverter_node",
            name="inverter_node",
            output="screen",
            parameters=[node_parameters(share, "inverter_node", robot=robot)],
            # its latched result is the controller's reference (both in the namespace)
            remappings=[("~/joint_trajectory", "controller_node/joint_trajectory")],
            condition=IfCondition(LaunchConfiguration("with_inverter")),
            on_exit=shutdown_on_exit(),
        ))
    return [
        GroupAction(nodes),
        *optional_node(
            "tf2_ros", f"no world -> {robot}/world transform",
            executable="static_transform_publisher",
            name=f"{robot}_world",
            arguments=["--x", str(x), "--frame-id", "world", "--child-frame-id", f"{robot}/world"],
            output="log",
        ),
    ]


def _setup(context):
    share = get_package_share_directory(PACKAGE)
    actions = []
    if flag_value(context, "rviz"):
        # decided here, before any process starts (a missing rviz2 used to be found after the
        # suite's nodes had started, and the failed launch left them running)
        actions += rviz_node("demo.rviz")
    for robot, x, q0, controller, inverter in ROBOTS:
        actions += _robot_actions(share, robot, x, q0, controller, inverter)
    return actions


def generate_launch_description():
    return LaunchDescription([
        flag_argument(
            "rviz", True,
            description="Start RViz with config/rviz/demo.rviz (both robots, fixed frame world).",
        ),
        flag_argument(
            "with_inverter", False,
            description="Also start inverter_node for the open-chain robot (arm7): desired "
            "outputs on /arm7/inverter_node/output_trajectory are inverted and sent, with their "
            "feedforward, to /arm7/controller_node/joint_trajectory (latched).",
        ),
        OpaqueFunction(function=_setup),
    ])
