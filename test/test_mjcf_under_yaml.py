"""An MJCF file under a wrapping model YAML: the MJCF's actuators (gear, gain, servo terms,
limits) stay unless the YAML defines the inputs itself (``actuation.matrix``);
``actuation.inputs`` selects actuators by name, ``passive_joints`` leaves a joint's out.
Checked against MuJoCo on the MJCF with the same actuators."""

import re
from pathlib import Path

import numpy as np
import pytest

from multibody_dynamics.errors import ModelError
from multibody_dynamics.model.actuator_limits import actuation_force
from multibody_dynamics.rigid import RigidDynamics
from multibody_dynamics.robot import load_robot

DATA = Path(__file__).parent / "data" / "mjcf"
SERVOS = DATA / "servos.xml"
LIMITS = DATA / "limits.xml"


def _mujoco():
    return pytest.importorskip("mujoco", reason="mujoco (the `test` extra) is not installed")


def _yaml(tmp_path, xml, body=""):
    path = tmp_path / "model.yaml"
    path.write_text(f"name: wrapped\nurdf: {xml}\ngravity: [0.0, 0.0, -9.81]\n{body}")
    return path


def _without(tmp_path, xml, actuators):
    """The MJCF file with the named actuators removed (MuJoCo's model of the selection)."""
    text = xml.read_text()
    for name in actuators:
        text, n = re.subn(rf'<(\w+) name="{name}"[^>]*/>', "", text, flags=re.S)
        assert n == 1, name
    path = tmp_path / f"reduced_{xml.name}"
    path.write_text(text)
    return path


def _check_against_mujoco(model, mujoco_xml, rng, n=10):
    """Input force plus springs and dampers equal MuJoCo's actuator plus passive forces at
    random states and controls (beyond the ranges); returns how many samples hit a limit."""
    mj = _mujoco()
    mm = mj.MjModel.from_xml_path(str(mujoco_xml))
    assert mm.nu == model.nu
    dyn, d = RigidDynamics(model), mj.MjData(mm)
    clipped = 0
    for _ in range(n):
        q, v, u = (rng.uniform(-1, 1, model.nq), rng.uniform(-3, 3, model.nv),
                   rng.uniform(-3, 3, model.nu))
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, u
        mj.mj_forward(mm, d)
        expected = d.qfrc_actuator + d.qfrc_passive
        # forces of a few N to a few hundred: round-off
        np.testing.assert_allclose(actuation_force(model, q, v, u) + dyn.spring_forces(q, v),
                                   expected, rtol=0, atol=1e-11)
        clipped += not np.allclose(model.B @ u + dyn.spring_forces(q, v), expected, atol=1e-6)
    return clipped


def test_yaml_without_actuation_keeps_the_mjcf_actuators(tmp_path, rng):
    """No ``actuation:``: the inputs, gears, gains and servo terms of the plain MJCF file."""
    plain = load_robot(SERVOS)
    model = load_robot(_yaml(tmp_path, SERVOS))
    assert model.input_names == plain.input_names == ("m1", "p2", "p3", "v3", "g5")
    np.testing.assert_array_equal(model.B, plain.B)
    np.testing.assert_array_equal(model.stiffness, plain.stiffness)
    np.testing.assert_array_equal(model.damping, plain.damping)
    _check_against_mujoco(model, SERVOS, rng, n=3)


def test_actuation_inputs_select_mjcf_actuators(tmp_path, rng):
    """``actuation.inputs`` names the actuators kept, with their gear, gain, servo terms and
    limits; a joint no kept actuator drives is passive with the MJCF joint's spring: MuJoCo's
    forces of the file without the other actuators."""
    model = load_robot(_yaml(tmp_path, LIMITS, "actuation: {inputs: [v3, p2, m4]}\n"))
    assert model.input_names == ("v3", "p2", "m4")
    assert model.passive_joint_names == ("j1", "j5")
    assert model.actuator_limits is not None and model.actuator_limits.names == model.input_names
    assert any("not used" in n and "m1, p3, m5" in n for n in model.notes)
    assert any(n.startswith("servo actuator(s)") and n.endswith(": j2, s3") for n in model.notes)
    # the order of the inputs differs from the file's: MuJoCo's ctrl is in file order
    reduced = load_robot(_without(tmp_path, LIMITS, ["m1", "p3", "m5"]))
    assert reduced.input_names == ("p2", "v3", "m4")
    order = [reduced.input_names.index(n) for n in model.input_names]
    np.testing.assert_array_equal(model.B, reduced.B[:, order])
    assert _check_against_mujoco(reduced, _without(tmp_path, LIMITS, ["m1", "p3", "m5"]),
                                 rng) >= 5
    q, v, u = rng.uniform(-1, 1, 5), rng.uniform(-3, 3, 5), rng.uniform(-3, 3, 3)
    np.testing.assert_array_equal(actuation_force(model, q, v, u),
                                  actuation_force(reduced, q, v, u[np.argsort(order)]))
    np.testing.assert_array_equal(model.stiffness, reduced.stiffness)


def test_passive_joints_leave_out_their_actuators(tmp_path):
    """A joint the YAML lists as passive loses its MJCF actuators and takes the YAML's
    spring; the other actuators stay."""
    model = load_robot(_yaml(tmp_path, SERVOS, "passive_joints: {s3: {stiffness: 5.0}}\n"))
    assert model.input_names == ("m1", "p2", "g5")
    i = model.joint_index("s3")
    assert model.passive[i] and model.stiffness[i] == 5.0 and model.damping[i] == 0.0
    plain = load_robot(SERVOS)
    j = model.joint_index("j2")
    assert model.stiffness[j] == plain.stiffness[j] == 1.5 ** 2 * 50  # gear^2 kp


def test_actuation_matrix_replaces_the_mjcf_actuators(tmp_path):
    """An explicit ``actuation.matrix``: the YAML's inputs only (no gear, gain, servo term or
    limit of the MJCF), and a note says so."""
    model = load_robot(_yaml(tmp_path, LIMITS, "actuation: {inputs: [a, b, c, d, e], matrix: "
                             "[[1,0,0,0,0],[0,1,0,0,0],[0,0,1,0,0],[0,0,0,1,0],[0,0,0,0,1]]}\n"))
    assert model.input_names == ("a", "b", "c", "d", "e")
    np.testing.assert_array_equal(model.B, np.eye(5))
    assert not np.any(model.stiffness) and not np.any(model.damping)
    assert model.actuator_limits is None
    assert any("actuation.matrix given" in n for n in model.notes)
    assert not any(n.startswith("servo actuator(s)") for n in model.notes)


@pytest.mark.parametrize("body, expected", [
    ("actuation: {inputs: [p2, nope]}\n",
     r"actuation.inputs\[1\]: 'nope' is not an actuator of servos.xml; expected one of: m1, "
     r"p2, p3, v3, g5"),
    ("passive_joints: {j2: {}}\nactuation: {inputs: [p2]}\n",
     r"actuation.inputs\[0\]: actuator 'p2' drives 'j2', which passive_joints lists"),
])
def test_bad_selection_is_refused(tmp_path, body, expected):
    with pytest.raises(ModelError, match=expected) as caught:
        load_robot(_yaml(tmp_path, SERVOS, body))
    assert "\n" not in str(caught.value)
