"""Inversion scenario files: every shipped one validates; bad ones name the key."""

import textwrap
from pathlib import Path

import numpy as np
import pytest

from multibody_control.inversion.flexible_scenario import (
    is_flexible_scenario,
    load_flexible_scenario,
)
from multibody_control.inversion.scenario import (
    load_inversion_scenario,
    plot,
    run_inversion_scenario,
    summary,
    write_csv,
)
from multibody_dynamics.errors import InputError, MultibodyError

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "config" / "scenarios")
                   .glob("invert_*.yaml"))

GOOD = """\
robot: passive_arm_minphase
task:
  t0: 0.05
  tf: 1.05
  joints: {x: {start: -1.0, end: 1.0}}
  arcs: {tip: {center: [0.0, -1.5], radius: 1.0, start_deg: 180.0, end_deg: 0.0}}
method: ode
dt: 0.002
options: {t_end: 1.2, rtol: 1.0e-8, atol: 1.0e-10}
"""


def test_shipped_scenarios_exist_and_validate():
    assert len(SCENARIOS) >= 5
    for path in SCENARIOS:
        if is_flexible_scenario(path):  # flexible models: their own schema
            sc = load_flexible_scenario(path)  # one task coordinate per input (open or closed)
            assert len(sc.task.names) == sc.chain.nu
            continue
        sc = load_inversion_scenario(path)
        assert sc.output.m == sc.model.nu


def write(tmp_path, text):
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("change, words", [
    (("method: ode", "method: magic"), ["method", "magic"]),
    (("dt: 0.002", "dt: -1"), ["dt", "positive"]),
    (("  t0: 0.05", "  t0: 2.0"), ["task.tf", "tf > t0"]),
    (("joints: {x:", "joints: {z:"), ["task.joints.z", "unknown joint"]),
    (("arcs: {tip:", "arcs: {nib:"), ["nib"]),
    (("options: {", "options: {speed: 3, "), ["options.speed", "unknown key"]),
    (("robot: passive_arm_minphase", "robot: passive_arm_minphase\ncolour: red"), ["colour"]),
    (("radius: 1.0", "radius: -1.0"), ["radius", "positive"]),
])
def test_bad_scenarios_name_the_key(tmp_path, change, words):
    old, new = change
    assert old in GOOD
    with pytest.raises(MultibodyError) as err:
        load_inversion_scenario(write(tmp_path, GOOD.replace(old, new)))
    for w in words:
        assert w in str(err.value), str(err.value)


def test_task_must_match_the_inputs(tmp_path):
    text = GOOD.replace("  arcs: {tip: {center: [0.0, -1.5], radius: 1.0, start_deg: 180.0, "
                        "end_deg: 0.0}}\n", "")
    with pytest.raises(InputError, match="1 task coordinates .* 3 inputs"):
        load_inversion_scenario(write(tmp_path, text))


@pytest.mark.slow
def test_run_writes_csv_and_plot(tmp_path):
    sc = load_inversion_scenario(write(tmp_path, GOOD))
    result, ver, guess = run_inversion_scenario(sc)
    assert result.success and guess is None
    # open-loop check of the minimum-phase exact output at 2 ms sampling: measured ~1e-5 m
    assert ver.max_error < 1e-4
    csv = write_csv(result, sc.model, tmp_path / "r.csv")
    header = csv.read_text().splitlines()[0].split(",")
    assert header[:2] == ["t", "q.x"] and "u.F" in header and "y_d.2" in header
    data = np.loadtxt(csv, delimiter=",", skiprows=1)
    np.testing.assert_allclose(data[:, 0], result.t, atol=1e-9)  # written with 10 digits
    png = plot(result, sc.model, tmp_path / "r.png", verification=ver)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = summary(result, ver)
    assert "open-loop check" in text and "ode" in text and "warning" not in text
    # a successful inverse model whose end effector misses the path is flagged, not "ok"
    # alone (the shipped causal scenario: 365.8 mm open loop)
    from dataclasses import replace

    far = replace(ver, max_error=0.3658)
    assert "misses the desired path by 365.8 mm" in summary(result, far)
    assert "free parameters" in summary(replace(result, method="causal"), far)


@pytest.mark.slow
def test_cli_invert_and_analyze(tmp_path, capsys):
    from multibody_control.cli import main

    path = write(tmp_path, GOOD)
    assert main(["invert", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "open-loop check" in out and (tmp_path / "o" / "s.csv").is_file()
    assert (tmp_path / "o" / "s.png").is_file()
    assert main(["analyze", "passive_arm", "--gamma", "0", "0", "0.5"]) == 0
    assert "NON-minimum phase" in capsys.readouterr().out
    # bad input: one line on stderr, exit 2
    assert main(["analyze", "passive_arm", "--gamma", "0", "0.5"]) == 2
    assert main(["invert", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("multibody ") for line in err)


def test_cli_invert_unloadable_robot_names_the_scenario_file(tmp_path, capsys):
    """``multibody invert`` loads the scenario's robot first (to branch on what it has): a robot
    that does not load is one error line naming the scenario file and its ``robot`` key."""
    from multibody_control.cli import main

    path = write(tmp_path, GOOD.replace("robot: passive_arm_minphase", "robot: no_such_robot"))
    assert main(["invert", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert f"{path}: robot: unknown robot 'no_such_robot'" in err[0]


def test_cli_invert_dispatches_on_the_robot_capabilities(tmp_path, monkeypatch, capsys):
    """The route is chosen by what the loaded robot has (elastic coordinates, closures), not by
    the scenario file: a robot with elastic coordinates sends the file to the flexible loader,
    which refuses this rigid task (it has no line task for a flexible body)."""
    from multibody_control.cli import main
    from multibody_control.scenarios import schema
    from multibody_dynamics.robot import has_elastic_coordinates, load_robot

    flexible = load_robot("flexible_manipulator")
    assert has_elastic_coordinates(flexible)
    monkeypatch.setattr(schema, "scenario_robot", lambda path: flexible)
    path = write(tmp_path, GOOD)
    assert main(["invert", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: " in err and "passive_arm_minphase" in err  # the flexible loader's refusal
