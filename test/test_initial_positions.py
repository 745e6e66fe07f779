"""``initial_positions`` of a model YAML: the default start of every command and of the
simulator, assembled for a closed loop, refused with the key named when it cannot be."""

from pathlib import Path

import numpy as np
import pytest

from multibody_control.cli import demo_motion, main
from multibody_control.scenarios import load_run_scenario, sample_reference
from multibody_dynamics.assembly import assemble
from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import ModelError
from multibody_dynamics.model.resources import robots_dir, share_dir
from multibody_dynamics.robot import load_robot
from multibody_dynamics.simulate import Simulator

FOUR_BAR = """\
name: four_bar_started
urdf: {urdf}
gravity: [0.0, -9.81, 0.0]
passive_joints: {{coupler: {{}}, rocker: {{}}}}
closures:
  - {{name: loop, type: revolute, frame_a: coupler_tip, frame_b: rocker_tip, axis: [0, 0, 1]}}
"""
ARM = """\
name: passive_arm_started
urdf: {urdf}
passive_joints: {{beta: {{stiffness: 50.0}}}}
"""


def _write(tmp_path, template, initial, name="robot.yaml", urdf="four_bar"):
    text = template.format(urdf=share_dir() / "urdf" / f"{urdf}.urdf")
    if initial is not None:
        text += f"initial_positions: {initial}\n"
    path = tmp_path / name
    path.write_text(text)
    return path


def _first_row(csv: Path) -> dict:
    header = csv.read_text().splitlines()[0].split(",")
    return dict(zip(header, np.loadtxt(csv, delimiter=",", skiprows=1)[0]))


def test_open_chain_start(tmp_path, capsys):
    """An open chain starts at the listed values (the others at rest) in simulate, the
    built-in requirements motion, the simulator, and a run scenario's unreferenced joints."""
    path = _write(tmp_path, ARM, "{alpha: 0.7}", urdf="cart_double_pendulum")
    model = load_robot(path)
    assert model.coordinate_names == ("x", "alpha", "beta")
    start = [0.0, 0.7, 0.0]
    np.testing.assert_array_equal(model.q_initial, start)
    np.testing.assert_array_equal(model.q_rest, [0.0, 0.0, 0.0])  # springs are not moved
    assert "initial      alpha=0.7 (initial_positions)" in model.summary()

    sim = Simulator(model)
    sim.reset()  # what simulator_node does when its initial_positions parameter is empty
    np.testing.assert_array_equal(sim.q, start)
    np.testing.assert_array_equal(demo_motion(model).q[0], start)  # requirements' demo

    csv = tmp_path / "sim.csv"
    assert main(["simulate", str(path), "--duration", "0.01", "--quiet", "--out",
                 str(csv)]) == 0
    row = _first_row(csv)
    assert [row["q.x"], row["q.alpha"], row["q.beta"]] == start

    scenario = tmp_path / "run.yaml"
    scenario.write_text(f"robot: {path}\nduration: 0.1\nreference:\n  joints: {{t0: 0.0, "
                        "tf: 0.1, order: 5, start: {x: 0.0}, end: {x: 0.1}}\n"
                        "controller: {law: pid, kp: 10.0, kd: 1.0}\n")
    ref = sample_reference(load_run_scenario(scenario))
    np.testing.assert_array_equal(ref.q[:, 1], 0.7)  # a joint the reference leaves alone
    capsys.readouterr()


def test_closed_loop_start_is_assembled(tmp_path, capsys):
    """A four-bar given only its crank angle starts assembled at it in check, simulate,
    assemble and the simulator."""
    path = _write(tmp_path, FOUR_BAR, "{crank: 1.0}")
    model = load_robot(path)
    q = model.q_initial
    assert q[0] == 1.0
    # the closure holds at the start: the Newton tolerance of the assembly (1e-10)
    assert np.abs(Constraints(model).residual(q)).max() < 1e-10
    # the crank-rocker's other mode at crank = 1 differs: the start is one of the two
    # solutions the assembly finds from its defaults, the one nearest the rest configuration
    modes = assemble(load_robot("four_bar"), {"crank": 1.0}).modes
    assert any(np.allclose(m.q, q, atol=1e-9) for m in modes)

    sim = Simulator(model, constraints=Constraints(model))
    sim.reset()
    np.testing.assert_allclose(sim.q, q, rtol=0, atol=1e-12)  # projected: already on it
    np.testing.assert_allclose(assemble(model).q, q, rtol=0, atol=1e-12)

    assert main(["check", str(path)]) == 0
    assert "-> assembled crank=1," in capsys.readouterr().out
    csv = tmp_path / "sim.csv"
    assert main(["simulate", str(path), "--duration", "0.01", "--quiet", "--out",
                 str(csv)]) == 0
    row = _first_row(csv)
    np.testing.assert_allclose([row["q.crank"], row["q.coupler"], row["q.rocker"]], q,
                               rtol=0, atol=1e-12)
    capsys.readouterr()


def test_rounded_full_start_is_projected(tmp_path):
    """Every coordinate listed, rounded to 4 digits: projected onto the loop (moving them by
    less than the rounding)."""
    exact = load_robot(_write(tmp_path, FOUR_BAR, "{crank: 1.0}", "exact.yaml")).q_initial
    listed = [round(float(x), 4) for x in exact]
    crank, coupler, rocker = listed
    path = _write(tmp_path, FOUR_BAR, f"{{crank: {crank}, coupler: {coupler}, rocker: {rocker}}}")
    model = load_robot(path)
    assert np.abs(Constraints(model).residual(model.q_initial)).max() < 1e-10
    assert np.abs(model.q_initial - listed).max() < 1e-4


@pytest.mark.parametrize("initial, expected", [
    ("{elbow: 0.3}", r"initial_positions\.elbow: unknown joint 'elbow'; expected one of: "
                     "crank, coupler, rocker"),
    ("{crank: fast}", r"initial_positions\.crank: expected a number, got 'fast'"),
    ("[0.1, 0.2]", "initial_positions: expected a mapping of joint name to position"),
    # three values that no four-bar configuration has (the coupler folded back)
    ("{crank: 0.0, coupler: 0.0, rocker: 0.0}",
     "initial_positions: the loops cannot be assembled with these values"),
])
def test_bad_initial_positions_are_refused(tmp_path, initial, expected, capsys):
    path = _write(tmp_path, FOUR_BAR, initial)
    with pytest.raises(ModelError, match=expected) as info:
        load_robot(path)
    assert str(path) in str(info.value)
    assert main(["simulate", str(path), "--duration", "0.01", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "initial_positions" in err


def test_mjcf_tree_under_a_model_yaml(tmp_path):
    """A model YAML may name an MJCF file as its tree: its equalities stay closures, the
    YAML says the rest (here passive joints and the start)."""
    mjcf = robots_dir() / "mjcf" / "four_bar.xml"
    path = tmp_path / "fb.yaml"
    path.write_text(f"name: fb\nurdf: {mjcf}\ngravity: [0.0, -9.81, 0.0]\n"
                    "passive_joints: {coupler: {}, rocker: {}}\n"
                    "initial_positions: {crank: 1.0}\n")
    model = load_robot(path)
    assert [c.name for c in model.closures] == ["coupler_rocker"]
    assert model.input_names == ("crank",)
    reference = load_robot(_write(tmp_path, FOUR_BAR, "{crank: 1.0}"))
    # the same loop closed by a 3-row connect instead of the 5-row revolute closure: the same
    # assembled start to the assembly's tolerance
    np.testing.assert_allclose(model.q_initial, reference.q_initial, rtol=0, atol=1e-9)
