"""Continuous joints (pinocchio's (cos, sin) pair, nq = nv + 1 per joint) given by angle on
the command line (--q0, --q) and in trajectory CSVs, checked against pinocchio directly."""

import csv
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from multibody_control.cli import main
from multibody_dynamics.errors import InputError
from multibody_dynamics.model import load_model
from multibody_dynamics.model.joint_angles import JointAngles, configuration_from_values

URDF = """<?xml version="1.0"?>
<robot name="wheel_arm">
  <link name="base"/>
  <link name="link1">
    <inertial><origin xyz="0.25 0 0"/><mass value="1.0"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial>
  </link>
  <link name="link2">
    <inertial><origin xyz="0.2 0 0"/><mass value="0.5"/>
      <inertia ixx="0.005" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>
  </link>
  <joint name="shoulder" type="continuous">
    <parent link="base"/><child link="link1"/><axis xyz="0 1 0"/>
  </joint>
  <joint name="elbow" type="revolute">
    <parent link="link1"/><child link="link2"/><origin xyz="0.5 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" effort="10" velocity="5"/>
  </joint>
</robot>
"""


@pytest.fixture
def urdf(tmp_path):
    path = tmp_path / "wheel_arm.urdf"
    path.write_text(URDF)
    return str(path)


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_joint_angles_round_trip(urdf):
    model = load_model(urdf)
    assert (model.nq, model.nv) == (3, 2)
    maps = JointAngles(model)
    q = maps.configuration([2.5, -0.4])
    np.testing.assert_allclose(q, [np.cos(2.5), np.sin(2.5), -0.4], atol=1e-15)
    # pinocchio's own map from the neutral configuration gives the same angles
    np.testing.assert_allclose(maps.angles(q), pin.difference(model.pin_model,
                                                              pin.neutral(model.pin_model), q),
                               atol=1e-14)


def test_configuration_from_values_errors(urdf):
    model = load_model(urdf)
    with pytest.raises(InputError, match=r"expected 2 values \(shoulder, elbow"):
        configuration_from_values(model, [0.1], "--q0")
    with pytest.raises(InputError, match="unit pair"):
        configuration_from_values(model, [0.3, 0.2, 0.1], "--q0")
    np.testing.assert_array_equal(configuration_from_values(model, [0.6, 0.8, 0.1], "--q0"),
                                  [0.6, 0.8, 0.1])


def test_simulate_q0_takes_angles(urdf, tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["simulate", urdf, "--duration", "0.01", "--q0", "0.3", "0.2", "--quiet",
                 "--out", str(out)]) == 0
    first = _rows(out)[0]
    q = [float(first[k]) for k in ("q.shoulder.0", "q.shoulder.1", "q.elbow")]
    np.testing.assert_allclose(q, [np.cos(0.3), np.sin(0.3), 0.2], atol=1e-12)
    # the energy at the start is pinocchio's potential energy at (cos 0.3, sin 0.3, 0.2)
    pm = load_model(urdf).pin_model
    e0 = pin.computePotentialEnergy(pm, pm.createData(), np.array(q))
    assert float(first["energy"]) == pytest.approx(e0, abs=1e-9)


def test_simulate_q0_wrong_count_names_coordinates(urdf, capsys):
    assert main(["simulate", urdf, "--duration", "0.01", "--q0", "0.3", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "expected 2 values (shoulder, elbow" in err and err.count("\n") == 1
    assert main(["simulate", urdf, "--duration", "0.01", "--q0", "0.3", "0.2", "0.1",
                 "--quiet"]) == 2
    assert "unit pair" in capsys.readouterr().err


def test_requirements_csv_with_angles(urdf, tmp_path):
    t = np.linspace(0.0, 1.0, 21)
    traj = tmp_path / "traj.csv"
    traj.write_text("t,q.shoulder,q.elbow\n" + "".join(
        f"{x:.17g},{0.5 * x * x:.17g},{0.3 * x:.17g}\n" for x in t))
    assert main(["requirements", urdf, str(traj), "--out", str(tmp_path / "req"),
                 "--quiet"]) == 0
    row = _rows(tmp_path / "req" / "wheel_arm_requirements.csv")[10]  # t = 0.5 s
    # joint torques about the axes are the inverse dynamics at the exact state:
    # shoulder angle t^2/2 (v = t, a = 1), elbow 0.3 t (v = 0.3, a = 0)
    x = float(row["t"])
    pm = load_model(urdf).pin_model
    q = np.array([np.cos(x * x / 2), np.sin(x * x / 2), 0.3 * x])
    tau = pin.rnea(pm, pm.createData(), q, np.array([x, 0.3]), np.array([1.0, 0.0]))
    # tolerance: the CSV keeps 9 decimals, and a and v come from differentiating samples
    # 0.05 s apart (exact for these polynomials up to rounding)
    got = [abs(float(row["shoulder.ty"])), abs(float(row["elbow.ty"]))]
    np.testing.assert_allclose(got, np.abs(tau), rtol=1e-6, atol=1e-6)


def test_analyze_refuses_continuous_joints(urdf, capsys):
    # the output analysis works on q as coordinates: refused up front, one line
    assert main(["analyze", urdf, "--output", "link2.x,link2.z"]) == 2
    err = capsys.readouterr().err
    assert "nq=3, nv=2" in err and "nq == nv" in err and err.count("\n") == 1


@pytest.fixture
def four_bar_continuous(tmp_path):
    """The shipped four-bar with its crank a continuous joint (same mechanism)."""
    root = Path(__file__).resolve().parents[1]
    urdf = (root / "urdf" / "four_bar.urdf").read_text()
    old = '<joint name="crank" type="revolute">'
    assert urdf.count(old) == 1
    (tmp_path / "four_bar_c.urdf").write_text(urdf.replace(
        old, '<joint name="crank" type="continuous">'))
    yaml = (root / "config" / "robots" / "four_bar.yaml").read_text()
    assert "urdf: ../../urdf/four_bar.urdf" in yaml
    path = tmp_path / "four_bar_c.yaml"
    path.write_text(yaml.replace("urdf: ../../urdf/four_bar.urdf", "urdf: four_bar_c.urdf")
                    .replace("name: four_bar", "name: four_bar_c"))
    return str(path)


def test_assemble_given_continuous_crank_matches_revolute(four_bar_continuous, tmp_path):
    assert load_model(four_bar_continuous).nq == 4
    rows = {}
    for name, robot in (("c", four_bar_continuous), ("r", "four_bar")):
        out = tmp_path / f"{name}.csv"
        assert main(["assemble", robot, "--given", "crank=2.5", "--branch", "J=-",
                     "--out", str(out)]) == 0
        rows[name] = _rows(out)[0]
    # one value per joint, the crank held at its angle; the same mechanism as with a
    # revolute crank (the printed CSV used to hold cos/sin under the joint names)
    assert float(rows["c"]["crank"]) == pytest.approx(2.5, abs=1e-12)
    for joint in ("coupler", "rocker"):
        assert float(rows["c"][joint]) == pytest.approx(float(rows["r"][joint]), abs=1e-8)
