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


def test_angle_chart_model_has_the_same_dynamics(urdf):
    """The revolute twin of a continuous joint: pinocchio's mass matrix, bias forces and frame
    placements of the original (cos, sin) model at the same angles, to the last bit."""
    from multibody_dynamics.model.joint_angles import angle_chart_model

    model = load_model(urdf)
    twin = angle_chart_model(model)
    assert (twin.nq, twin.nv) == (2, 2) and twin.coordinate_names == model.coordinate_names
    maps, rng = JointAngles(model), np.random.default_rng(3)
    pm, tm = model.pin_model, twin.pin_model
    d, e = pm.createData(), tm.createData()
    for _ in range(5):
        x, v = rng.uniform(-3, 3, 2), rng.uniform(-2, 2, 2)
        q = maps.configuration(x)
        np.testing.assert_array_equal(pin.crba(tm, e, x), pin.crba(pm, d, q))
        np.testing.assert_array_equal(pin.nonLinearEffects(tm, e, x, v),
                                      pin.nonLinearEffects(pm, d, q, v))
        pin.framesForwardKinematics(pm, d, q)
        pin.framesForwardKinematics(tm, e, x)
        for k in range(pm.nframes):
            np.testing.assert_allclose(e.oMf[k].homogeneous, d.oMf[k].homogeneous, rtol=0,
                                       atol=1e-15)


def test_analyze_continuous_joints_by_angle(urdf, capsys):
    """`analyze` on a model with a continuous joint (nq 3, nv 2): the decoupling matrix is
    H M^-1 B of the original (cos, sin) model, here written out with pinocchio directly."""
    assert main(["analyze", urdf, "--output", "shoulder,elbow", "--q", "2.5", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "continuous joint(s) taken by angle: shoulder" in out
    assert "configuration     q = [2.5, 0.3]" in out and "relative degree   {2, 2}" in out
    pm = load_model(urdf).pin_model
    M = pin.crba(pm, pm.createData(), np.array([np.cos(2.5), np.sin(2.5), 0.3]))
    alpha = np.linalg.inv(np.triu(M) + np.triu(M, 1).T)  # H = I, B = I: fully actuated
    lines = out.splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith("decoupling matrix"))
    printed = np.array([[float(x) for x in lines[k + 1 + r].split()] for r in range(2)])
    np.testing.assert_allclose(printed, alpha, rtol=5e-4)  # printed with 4 digits


def test_zero_dynamics_with_a_continuous_joint(urdf, tmp_path):
    """A passive spring elbow behind a continuous, actuated shoulder, output the shoulder
    angle: the zero-dynamics eigenvalues of the analysis equal those of the elbow's equation
    with the shoulder held, linearized by finite differences of pinocchio's inverse dynamics
    on the original (cos, sin) model."""
    from multibody_control.analysis import analyze_output
    from multibody_control.outputs import Output
    from multibody_dynamics.model.joint_angles import angle_chart_model

    yml = tmp_path / "wheel_arm.yaml"
    yml.write_text(f"name: wheel_arm\nurdf: {urdf}\n"
                   "passive_joints: {elbow: {stiffness: 20.0, damping: 0.3, rest: 0.2}}\n")
    model = load_model(yml)
    assert (model.nq, model.nv, model.nu) == (3, 2, 1)
    twin = angle_chart_model(model)
    res = analyze_output(twin, Output(twin, ["shoulder"]), q_guess=np.array([0.7, 0.0]))
    theta, beta = res.q
    assert abs(theta - 0.7) < 1e-12
    pm = model.pin_model
    data = pm.createData()

    def elbow_accel(b, bd):  # M22 b'' = -(h2 + k (b - rest) + d b') with the shoulder held
        q = np.array([np.cos(theta), np.sin(theta), b])
        M = pin.crba(pm, data, q)
        h = pin.rnea(pm, data, q, np.array([0.0, bd]), np.zeros(2))
        return -(h[1] + 20.0 * (b - 0.2) + 0.3 * bd) / M[1, 1]

    assert abs(elbow_accel(beta, 0.0)) < 1e-9  # the analysis sits at the equilibrium
    eps = 1e-6
    Q = np.array([[0.0, 1.0],
                  [(elbow_accel(beta + eps, 0) - elbow_accel(beta - eps, 0)) / (2 * eps),
                   (elbow_accel(beta, eps) - elbow_accel(beta, -eps)) / (2 * eps)]])
    expected = np.sort_complex(np.linalg.eigvals(Q))
    # central differences (step 1e-6) on both sides: agreement to ~1e-6 of |lambda| ~ 10
    np.testing.assert_allclose(np.sort_complex(res.eigenvalues), expected, rtol=1e-5)
    assert res.minimum_phase is True


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


def test_analyze_closed_loop_with_continuous_crank(four_bar_continuous):
    """The four-bar with a continuous crank analyses as the shipped revolute one: the same
    assembled configuration and closure-consistent decoupling matrix."""
    from multibody_control.analysis import analyze_output
    from multibody_control.outputs import Output
    from multibody_dynamics.model.joint_angles import angle_chart_model

    twin = angle_chart_model(load_model(four_bar_continuous))
    shipped = load_model("four_bar")
    q = np.array([0.4, 0.0, 0.0])  # the crank held at 0.4 rad, the rest assembled
    got = analyze_output(twin, Output(twin, ["coupler"]), q_guess=q)
    ref = analyze_output(shipped, Output(shipped, ["coupler"]), q_guess=q)
    # the same algorithm on models with identical dynamics: round-off only
    np.testing.assert_allclose(got.q, ref.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.decoupling, ref.decoupling, rtol=1e-12, atol=1e-12)
    assert got.relative_degree == ref.relative_degree == (2,)
