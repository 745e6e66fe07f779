"""`invert` on a model with a continuous joint (pinocchio's (cos, sin) pair): the inversion runs
on the revolute twin (q by angle, the same dynamics), its result columns are angles, and
`animate` reads them back onto the (cos, sin) model."""

import numpy as np
from numpy.polynomial import Polynomial as P

from multibody_control.cli import main

# a rotor about the vertical axis: gravity along the axis, no torque from it; izz 0.25 kg m^2
ROTOR = """<?xml version="1.0"?>
<robot name="rotor">
  <link name="base"/>
  <link name="disc">
    <inertial><origin xyz="0 0 0"/><mass value="2.0"/>
      <inertia ixx="0.13" ixy="0" ixz="0" iyy="0.13" iyz="0" izz="0.25"/></inertial>
    <visual><geometry><cylinder radius="0.5" length="0.05"/></geometry></visual>
  </link>
  <joint name="spin" type="continuous">
    <parent link="base"/><child link="disc"/><axis xyz="0 0 1"/>
  </joint>
</robot>
"""
SCENARIO = """robot: {urdf}
task: {{t0: 0.0, tf: 1.0, order: 5, joints: {{spin: {{start: 0.0, end: 4.0}}}}}}
method: classical
dt: 0.01
"""


def test_invert_a_continuous_joint_by_angle(tmp_path, capsys):
    """spin 0 -> 4 rad (past pi: the angle, not a wrapped pair) by the order-5 law
    q_d = 4 (10 s^3 - 15 s^4 + 6 s^5): the feedforward is izz q_d'' = 0.25 q_d'' (it used to be
    refused: "linear outputs need nq == nv"), the CSV holds the angle, and the animation
    reads it."""
    urdf = tmp_path / "rotor.urdf"
    urdf.write_text(ROTOR)
    path = tmp_path / "spin.yaml"
    path.write_text(SCENARIO.format(urdf=urdf))
    out = tmp_path / "out"
    assert main(["invert", str(path), "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "output error" in text
    csv = out / "spin.csv"
    header = csv.read_text().splitlines()[0].split(",")
    assert "q.spin" in header and "q.spin.0" not in header
    data = np.loadtxt(csv, delimiter=",", skiprows=1)
    t, q, u = (data[:, header.index(c)] for c in ("t", "q.spin", "u.spin"))
    q_d = 4 * P([0, 0, 0, 10, -15, 6])
    motion = t <= 1.0
    # inverse dynamics of one rigid body: round-off, and 10 digits in the CSV
    np.testing.assert_allclose(q[motion], q_d(t[motion]), rtol=0, atol=1e-9)
    np.testing.assert_allclose(u[motion], 0.25 * q_d.deriv(2)(t[motion]), rtol=0, atol=1e-9)
    assert q.max() > np.pi  # an angle, not a wrapped value
    assert main(["animate", str(csv), "--out", str(tmp_path / "a.gif"),
                 "--max-frames", "3"]) == 0
    from multibody_control.animation.scene import configurations
    from multibody_control.animation.source import read_result
    from multibody_dynamics.model import load_model

    pairs = configurations(load_model(str(urdf)), read_result(csv))
    np.testing.assert_allclose(pairs, np.c_[np.cos(q), np.sin(q)], atol=1e-9)
