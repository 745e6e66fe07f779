"""Assembling closed loops from given joints: the solutions, their modes, the mobility."""

import numpy as np
import pinocchio as pin
import pytest

from multibody_control.cli import main
from multibody_dynamics.assembly import assemble, mobility
from multibody_dynamics.errors import FrameNotFound, InputError
from multibody_dynamics.model import load_model
from multibody_dynamics.model.resources import robots_dir, share_dir


def _position(model, q, frame):
    data = model.create_data()
    pin.framesForwardKinematics(model.pin_model, data, q)
    return data.oMf[model.frame_id(frame)].translation.copy()


def _mirror(p, x, y):
    """Reflection of point p across the line through x and y (in their common plane)."""
    d = (y - x) / np.linalg.norm(y - x)
    r = p - x
    return x + 2.0 * d * (d @ r) - r


def test_four_bar_two_modes_mirror_each_other(models):
    """A crank-rocker has two assemblies for a given crank angle: the coupler-rocker joint on
    either side of the line from the crank tip to the rocker pivot (plane geometry)."""
    model = models["four_bar"]
    result = assemble(model, {"crank": 0.3})
    assert result.success and len(result.modes) == 2
    assert {m.label.split()[0] for m in result.modes} == {"J+", "J-"}
    q1, q2 = (m.q for m in result.modes)
    assert q1[0] == q2[0] == 0.3  # the given joint stays as given
    a, d = _position(model, q1, "coupler"), _position(model, q1, "rocker")
    b1, b2 = _position(model, q1, "coupler_tip"), _position(model, q2, "coupler_tip")
    # 1e-9 m: both solutions close the loop to 1e-10 (the solver's tolerance) and better
    np.testing.assert_allclose(_mirror(b1, a, d), b2, atol=1e-9)
    assert result.residual < 1e-10
    sign = 1 if result.mode.startswith("J+") else -1
    other = assemble(model, {"crank": 0.3}, branch={"J": -sign})
    np.testing.assert_allclose(other.q, result.modes[1].q, atol=1e-12)


def test_five_bar_modes_and_branch(models):
    """Given both motor angles, the end effector is either intersection of the two circles
    about the elbows: the two solutions mirror each other across the elbow-elbow line."""
    model = models["five_bar"]
    given = {"left_motor": 2.0, "right_motor": 1.1}
    result = assemble(model, given)
    assert result.success and len(result.modes) == 2
    p1, p2 = (_position(model, m.q, "left_tip") for m in result.modes)
    e1, e2 = (_position(model, result.q, f) for f in ("left_elbow", "right_elbow"))
    np.testing.assert_allclose(_mirror(p1, e1, e2), p2, atol=1e-9)  # as above
    for mode in result.modes:
        np.testing.assert_allclose(_position(model, mode.q, "left_tip")[:2],
                                   _position(model, mode.q, "right_tip")[:2], atol=1e-10)
    sign = 1 if result.mode.startswith("J+") else -1
    picked = assemble(model, given, branch={"J": -sign})
    assert picked.success and picked.mode.startswith("J-" if sign > 0 else "J+")
    np.testing.assert_allclose(picked.q, result.modes[1].q, atol=1e-12)


def test_four_bar_that_cannot_reach_its_ground(tmp_path, capsys):
    """The shipped four-bar with its rocker pivot moved from 0.3 m to 2 m: crank 0.1 +
    coupler 0.35 + rocker 0.25 m cannot span it, so no configuration closes the loop."""
    urdf = (share_dir() / "urdf" / "four_bar.urdf").read_text()
    pivot = '<origin xyz="0.3 0 0" rpy="0 0 0"/>'
    assert urdf.count(pivot) == 1
    (tmp_path / "far.urdf").write_text(urdf.replace(pivot, '<origin xyz="2.0 0 0" rpy="0 0 0"/>'))
    yaml_text = (robots_dir() / "four_bar.yaml").read_text()
    path = tmp_path / "far.yaml"
    path.write_text(yaml_text.replace("urdf: ../../urdf/four_bar.urdf", "urdf: far.urdf"))
    result = assemble(load_model(path))
    assert not result.success and "cannot close" in result.message
    assert result.residual > 0.5  # at least the 1.3 m gap, resolved along some closure rows
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the loops cannot close" in err[0]


@pytest.mark.parametrize("robot, dof, redundant", [
    ("four_bar", 1, 3),  # planar loop closed by a 5-row revolute joint: 2 independent rows
    ("five_bar", 2, 0),
    ("slider_crank", 1, 0),
    ("prr_surface", 2, 0),
])
def test_mobility(models, robot, dof, redundant):
    model = models[robot]
    result = assemble(model)
    assert result.success
    assert (result.dof, result.redundant) == (dof, redundant)
    assert mobility(model, result.q)[1:] == (dof, redundant)


def test_underdetermined_gives_the_nearest_solution(models):
    model = models["five_bar"]
    result = assemble(model)  # no joint given: a 2-DoF continuum of assemblies
    assert result.success and len(result.modes) == 1 and "undetermined" in result.message


def test_bad_arguments(models):
    model = models["four_bar"]
    with pytest.raises(FrameNotFound, match="no joint named 'crnak'.*crank"):
        assemble(model, {"crnak": 0.3})
    with pytest.raises(InputError, match="not finite"):
        assemble(model, {"crank": np.nan})
    with pytest.raises(InputError, match="branch: 'crank' is not a free revolute joint"):
        assemble(model, {"crank": 0.3}, branch={"crank": 1})
    with pytest.raises(InputError, match="starts"):
        assemble(model, starts=0)


def test_cli_assemble_and_simulate_from_defaults(tmp_path, capsys):
    # the shipped loops simulate from their defaults (the start is assembled first)
    for robot in ("four_bar", "five_bar"):
        assert main(["simulate", robot, "--duration", "0.2", "--quiet"]) == 0
    out = tmp_path / "q.csv"
    assert main(["assemble", "five_bar", "--given", "left_motor=2.0", "right_motor=1.1",
                 "--branch", "J=-", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "chosen mode J-" in text and "other  mode J+" in text and "2 degree(s)" in text
    header, row = out.read_text().splitlines()
    assert header == "left_motor,left_elbow,right_motor,right_elbow"
    assert float(row.split(",")[0]) == 2.0
    assert main(["simulate", "five_bar", "--duration", "0.1", "--given", "left_motor=2.0",
                 "right_motor=1.1", "--branch", "J=-", "--out", str(tmp_path / "s.csv")]) == 0
    assert "start: assembled (J-" in capsys.readouterr().out
    assert main(["assemble", "four_bar", "--given", "crank"]) == 2
    assert "expected NAME=VALUE" in capsys.readouterr().err
