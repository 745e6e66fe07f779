"""Every shipped model loads; every malformed description is rejected with a clear error."""

import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import ROBOTS

from multibody_dynamics.errors import FrameNotFound, ModelError
from multibody_dynamics.model import load_model, share_dir

# robot: (nq, nu, passive joints, closures) from the source documents / docs/derivations.md
EXPECTED = {
    "cart_double_pendulum": (3, 3, (), 0),
    "passive_arm": (4, 3, ("beta",), 0),
    "passive_arm_minphase": (5, 3, ("beta1", "beta2"), 0),
    "passive_arm_nonminphase": (5, 3, ("beta1", "beta2"), 0),
    "slider_crank": (2, 1, ("rod",), 1),
    "prr_surface": (3, 3, (), 1),
    "four_bar": (3, 1, ("coupler", "rocker"), 1),
    "five_bar": (4, 2, ("left_elbow", "right_elbow"), 1),
    "arm7": (7, 7, (), 0),
}


def test_every_required_robot_ships():
    assert set(EXPECTED) <= set(ROBOTS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_model_structure(models, name):
    m = models[name]
    nq, nu, passive, nclos = EXPECTED[name]
    assert (m.nq, m.nu, m.passive_joint_names, len(m.closures)) == (nq, nu, passive, nclos)
    # the actuation map selects exactly the non-passive coordinates
    np.testing.assert_array_equal(m.B[m.passive], 0.0)
    assert np.linalg.matrix_rank(m.B) == nu


def test_seifried_parameters(models):
    """Table 4.2 and Tables 5.1/5.2 values end up in the pinocchio model (exact up to print)."""
    pa = models["passive_arm"].pin_model
    masses = [pa.inertias[j].mass for j in range(1, pa.njoints)]
    np.testing.assert_allclose(masses, [3.0, 6.875, 3.438, 3.438])
    np.testing.assert_allclose(pa.inertias[2].inertia[2, 2], 0.5743)
    i = models["passive_arm"].joint_index("beta")
    assert models["passive_arm"].stiffness[i] == 50.0 and models["passive_arm"].damping[i] == 0.25
    nm = models["passive_arm_nonminphase"].pin_model
    np.testing.assert_allclose(nm.inertias[5].lever, [0, -0.287, 0])  # s4 of Table 5.2
    np.testing.assert_allclose(nm.inertias[5].mass, 8.292)


# ---------------------------------------------------------------- bad input
@pytest.fixture
def robot_dir(tmp_path):
    """A copy of passive_arm's files in a temporary directory, to break."""
    shutil.copy(share_dir() / "urdf" / "passive_arm.urdf", tmp_path / "arm.urdf")
    return tmp_path


def write_yaml(folder: Path, body: str) -> Path:
    path = folder / "robot.yaml"
    path.write_text(textwrap.dedent(body))
    return path


BASE = """\
name: arm
urdf: arm.urdf
"""


def test_valid_copy_loads(robot_dir):
    m = load_model(write_yaml(robot_dir, BASE + "passive_joints:\n  beta: {stiffness: 5}\n"))
    assert m.passive_joint_names == ("beta",)


@pytest.mark.parametrize("body, words", [
    ("", ["empty file"]),
    ("name: [unclosed", ["malformed YAML"]),
    (BASE + "colour: red\n", ["colour", "unknown key"]),
    ("urdf: arm.urdf\n", ["name", "missing"]),
    (BASE.replace("arm.urdf", "nowhere.urdf"), ["nowhere.urdf", "not found"]),
    (BASE + "gravity: [0, 0]\n", ["gravity", "3 numbers"]),
    (BASE + "passive_joints:\n  elbow: {}\n", ["passive_joints.elbow", "unknown joint", "alpha1"]),
    (BASE + "passive_joints:\n  beta: {stiffness: -1}\n",
     ["passive_joints.beta.stiffness", ">= 0"]),
    (BASE + "actuation:\n  matrix: [[1, 0], [0, 1]]\n", ["actuation.matrix", "expected 4 rows"]),
    (BASE + "actuation:\n  inputs: [F, T1]\n", ["actuation.inputs", "expected 4 names"]),
    (BASE + "closures:\n  - {type: revolute, frame_a: tip, frame_b: link3, axis: [0, 0, 1]}\n",
     ["closures[0]", "same body"]),
    (BASE + "closures:\n  - {type: hinge, frame_a: tip, frame_b: cart}\n",
     ["closures[0].type", "hinge"]),
    (BASE + "closures:\n  - {type: revolute, frame_a: tip, frame_b: cart}\n",
     ["closures[0].axis", "missing"]),
    (BASE + "closures:\n  - {type: spherical, frame_a: nib, frame_b: cart}\n",
     ["closures[0].frame_a", "unknown frame", "nib"]),
    (BASE + "end_effector: hand\n", ["end_effector", "hand"]),
])
def test_bad_yaml(robot_dir, body, words):
    path = write_yaml(robot_dir, body)
    with pytest.raises(ModelError) as err:
        load_model(path)
    msg = str(err.value)
    assert str(path.name) in msg or "arm.urdf" in msg or "nowhere.urdf" in msg
    for w in words:
        assert w in msg, msg


@pytest.mark.parametrize("old, new, words", [
    ('<mass value="6.875"/>', '<mass value="-6.875"/>', ["link1", "mass must be positive"]),
    ('<mass value="6.875"/>', '<mass value="0"/>', ["link1", "mass must be positive"]),
    ('ixx="0.5743"', 'ixx="-0.5743"', ["link1", "positive definite"]),
    ('ixx="0.5743"', 'ixx="0.001"', ["link1", "triangle inequality"]),
    ('<mass value="6.875"/>', '<mass value="heavy"/>', ["link1", "must be a number"]),
    ("</robot>", "", ["malformed XML"]),
])
def test_bad_urdf(robot_dir, old, new, words):
    urdf = robot_dir / "arm.urdf"
    text = urdf.read_text()
    assert old in text
    urdf.write_text(text.replace(old, new, 1))
    with pytest.raises(ModelError) as err:
        load_model(write_yaml(robot_dir, BASE))
    assert "arm.urdf" in str(err.value)
    for w in words:
        assert w in str(err.value), str(err.value)


def test_massless_moving_body_is_rejected(tmp_path):
    (tmp_path / "r.urdf").write_text(textwrap.dedent("""\
        <robot name="r"><link name="world"/><link name="a"/>
          <joint name="j" type="revolute"><parent link="world"/><child link="a"/>
            <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
        </robot>"""))
    with pytest.raises(ModelError, match="mass matrix is singular.*joint.*j"):
        load_model(write_yaml(tmp_path, "name: r\nurdf: r.urdf\n"))


def test_unknown_robot_lists_shipped():
    with pytest.raises(ModelError, match="arm7"):
        load_model("no_such_robot")


def test_frame_lookup_lists_valid_names(models):
    with pytest.raises(FrameNotFound, match="tool0"):
        models["arm7"].frame_id("gripper")
    with pytest.raises(FrameNotFound, match="joint1"):
        models["arm7"].joint_index("joint9")


def test_cli_models_and_check(capsys):
    from multibody_control.cli import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    # one folder, one table (load_robot): a row per model, rigid and flexible, with its
    # number of elastic coordinates ('-' for a rigid model)
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:] if line.strip()}
    assert out.splitlines()[0].split()[:6] == ["robot", "nq", "nv", "nu", "elastic", "closures"]
    for name in EXPECTED:
        assert rows[name][4] == "-"
    # elastic coordinates: 2 modes per link / arm, 12 + 6 modes in the machine tool
    for name, n_elastic in (("flexible_cart_manipulator", "4"), ("flexible_manipulator", "4"),
                            ("flexible_parallel_tool", "18"),
                            ("flexible_cart_manipulator_design", "4")):
        assert rows[name][4] == n_elastic
    assert main(["check", "five_bar"]) == 0
    assert "end_effector planar_revolute" in capsys.readouterr().out
    assert main(["check", "no_such_robot"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown robot" in err[0]
    # a rigid-only command given a flexible model names the flexible loader (one line, exit 2)
    assert main(["analyze", "flexible_manipulator"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a flexible model" in err[0] and "load_flexible_model" in err[0]


def test_cli_version(capsys):
    from importlib.metadata import version

    from multibody_control.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"multibody {version('multibody_suite')}"
