"""A failed run keeps its samples as a partial result, marked so in the sidecar, and the
messages of `assemble`/`check` name what to type: the accepted values of --given and --branch,
and the robot as the user gave it."""

import json

from multibody_control.cli import main
from multibody_dynamics.model.resources import share_dir


def test_failed_simulation_is_a_marked_partial_result(tmp_path, capsys):
    """A force of 1e14 N on the cart: the first step exceeds the speed bound (diverged, exit
    1); the CSV holds the samples before it and its sidecar says partial, with the cause."""
    out = tmp_path / "d.csv"
    assert main(["simulate", "passive_arm", "--tau", "1e14", "0", "0", "--duration", "1",
                 "--quiet", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "multibody simulate: failed: diverged at t = " in err
    assert f"partial result written to {out}" in err
    meta = json.loads((tmp_path / "d.meta.json").read_text())
    assert meta["partial"] is True and meta["message"].startswith("failed: diverged")
    assert len(out.read_text().splitlines()) >= 2  # header and the start sample


def test_given_and_branch_values_name_what_is_expected(capsys):
    assert main(["assemble", "four_bar", "--given", "crank=abc"]) == 2
    assert "--given: 'crank=abc': expected a number [rad | m]" in capsys.readouterr().err
    assert main(["assemble", "five_bar", "--branch", "left_elbow=2"]) == 2
    assert "--branch: 'left_elbow=2': expected + or -" in capsys.readouterr().err


def test_check_names_the_robot_as_given(capsys):
    """A model loaded from a file is named after the file's model, which is no shipped robot:
    the `assemble` hint repeats the path (it said `multibody assemble four_bar_mjcf`)."""
    path = share_dir() / "config" / "robots" / "mjcf" / "four_bar.xml"
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"`multibody assemble {path}` lists the modes" in out
