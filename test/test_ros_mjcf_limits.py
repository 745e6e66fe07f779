"""simulator_node on an MJCF model with actuator limits: a command beyond ``ctrlrange`` is
saturated there with a warning, and the applied effort is MuJoCo's (gear times the clipped
ctrl), the real node over DDS."""

from __future__ import annotations

import pytest
import ros_helpers

rclpy = pytest.importorskip("rclpy")

from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

launch = ros_helpers.launch  # fixtures
probe = ros_helpers.probe

HINGE = """<mujoco model="hinge">
  <option gravity="0 0 0"/>
  <worldbody><body name="b"><joint name="j" type="hinge" axis="0 0 1"/>
    <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.25"/></body></worldbody>
  <actuator><motor name="m" joint="j" gear="2" ctrlrange="-1 0.5" forcerange="-0.75 0.75"/>
  </actuator>
</mujoco>"""


def test_simulator_applies_the_mjcf_limits(launch, probe, tmp_path):
    """ctrl 5 on a motor with gear 2, ctrlrange [-1, 0.5] and forcerange +-0.75: saturated at
    0.5 (the warning names the input and the range), so the force is min(0.5, 0.75) = 0.5 and
    the joint effort 1.0 N m; ctrl -5: clipped at -1, then the force at -0.75: -1.5 N m."""
    path = tmp_path / "hinge.xml"
    path.write_text(HINGE)
    sim = launch("simulator_node", robot=str(path), rate_hz=200.0)
    states = probe.record(JointState, "/joint_states")
    pub = probe.publisher(Float64MultiArray, "/effort_controller/commands")
    probe.wait_for(lambda: pub.get_subscription_count() > 0, 30.0, "discovery", [sim])
    for ctrl, effort in ((5.0, 1.0), (-5.0, -1.5)):
        def applied(ctrl=ctrl, effort=effort):
            pub.publish(Float64MultiArray(data=[ctrl]))
            return any(m.effort and m.effort[0] == pytest.approx(effort, abs=1e-12)
                       for m in list(states))

        probe.wait_for(applied, 60.0, f"the effort {effort} N m of ctrl {ctrl}", [sim])
    assert "command saturated at the MJCF ctrlrange: m = 5 beyond [-1, 0.5]" in sim.log()
    # never the unclipped 2 * 5 = 10 N m, nor the ctrl-clipped -2 N m past the forcerange
    assert all(abs(m.effort[0]) <= 1.5 + 1e-12 for m in list(states) if m.effort)
