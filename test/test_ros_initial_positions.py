"""simulator_node without its ``initial_positions`` parameter starts at the model YAML's
``initial_positions`` (a closed loop: assembled), the real node over DDS."""

from __future__ import annotations

import numpy as np
import pytest
import ros_helpers

rclpy = pytest.importorskip("rclpy")

from sensor_msgs.msg import JointState  # noqa: E402

from multibody_dynamics.model.resources import share_dir  # noqa: E402
from multibody_dynamics.robot import load_robot  # noqa: E402

launch = ros_helpers.launch  # fixtures
probe = ros_helpers.probe


def test_simulator_node_starts_at_the_model_initial_positions(launch, probe, tmp_path):
    path = tmp_path / "four_bar_started.yaml"
    path.write_text(f"name: four_bar_started\nurdf: {share_dir() / 'urdf' / 'four_bar.urdf'}\n"
                    "gravity: [0.0, -9.81, 0.0]\npassive_joints: {coupler: {}, rocker: {}}\n"
                    "initial_positions: {crank: 1.0}\nclosures:\n  - {name: loop, type: "
                    "revolute, frame_a: coupler_tip, frame_b: rocker_tip, axis: [0, 0, 1]}\n")
    model = load_robot(path)
    sim = launch("simulator_node", robot=str(path), rate_hz=200.0)
    states = probe.record(JointState, "/joint_states", depth=100)
    probe.wait_for(lambda: len(states) > 3, 60.0, "joint states", [sim])
    msg = states[-1]
    q = np.array([msg.position[list(msg.name).index(n)] for n in model.coordinate_names])
    # held (braked) at the start until a command arrives: the assembled start itself, up to
    # the Newton tolerance of the projection at reset
    np.testing.assert_allclose(q, model.q_initial, rtol=0, atol=1e-9)
    assert q[0] == pytest.approx(1.0, abs=1e-12)
