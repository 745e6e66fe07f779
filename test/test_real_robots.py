"""Real robots from pinocchio's example-robot-data package, loaded from their plain URDFs
(no model YAML): check, simulate and requirements run on each.

UR5 and Panda have frame-only links of zero mass (loaded as pinocchio does, with a note);
the Kinova arm has continuous joints (q holds cos/sin pairs, nq = 9 > nv = 6)."""

import re
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from multibody_control.cli import main
from multibody_dynamics.robot import load_robot


def _robots_dir() -> Path | None:
    # the wheel installs its data under the cmeel prefix of site-packages
    for key in ("purelib", "platlib"):
        d = Path(sysconfig.get_paths()[key]) / "cmeel.prefix" / "share" / "example-robot-data"
        if (d / "robots").is_dir():
            return d / "robots"
    return None


ROBOTS = _robots_dir()
pytestmark = pytest.mark.skipif(ROBOTS is None, reason="example-robot-data is not installed "
                                "(pip install example-robot-data; it is in the test extra)")

# (URDF, nq, nv, frame-only links) as the files declare them
CASES = {
    "ur5": ("ur_description/urdf/ur5_robot.urdf", 6, 6, 3),
    "panda": ("panda_description/urdf/panda.urdf", 9, 9, 2),
    "kinova": ("kinova_description/robots/kinova.urdf", 9, 6, None),
    "z1": ("z1_description/urdf/z1.urdf", 7, 7, None),
    "xarm7": ("xarm_description/urdf/xarm7.urdf", 7, 7, None),
    "double_pendulum": ("double_pendulum_description/urdf/double_pendulum.urdf", 2, 2, None),
}


@pytest.mark.parametrize("robot", sorted(CASES))
def test_real_robot_check_simulate_requirements(robot, tmp_path, capsys):
    rel, nq, nv, massless = CASES[robot]
    urdf = ROBOTS / rel
    model = load_robot(urdf)
    assert (model.nq, model.nv, model.nu) == (nq, nv, nv)  # fully actuated by default
    assert not model.closures and np.allclose(model.gravity, [0, 0, -9.81])
    assert any(note.startswith("no model YAML") for note in model.notes)
    if massless:
        assert any(f"{massless} frame-only link(s)" in note for note in model.notes)

    assert main(["check", str(urdf)]) == 0
    assert "ok: model loaded and validated" in capsys.readouterr().out

    out = tmp_path / "sim.csv"
    assert main(["simulate", str(urdf), "--duration", "0.5", "--out", str(out)]) == 0
    data = np.genfromtxt(out, delimiter=",", names=True)
    assert np.all(np.isfinite(data.view((float, len(data.dtype.names)))))
    energy = data["energy"]
    # passive motion under gravity: energy is conserved; the bound is the default adaptive
    # integrator's tolerance over 0.5 s (measured drifts 1e-14 to 7e-6)
    assert abs(energy[-1] - energy[0]) <= 1e-4 * max(1.0, abs(energy[0]))

    assert main(["requirements", str(urdf), "demo", "--out", str(tmp_path / "req")]) == 0
    (csv,) = (tmp_path / "req").glob("*_requirements.csv")
    req = np.genfromtxt(csv, delimiter=",", skip_header=1)
    assert req.shape[1] == 1 + 6 * (model.pin_model.njoints - 1) and np.all(np.isfinite(req))
    capsys.readouterr()


def test_zero_mass_with_inertia_is_refused(tmp_path):
    from multibody_dynamics.errors import ModelError

    urdf = (ROBOTS / CASES["double_pendulum"][0]).read_text()
    bad = tmp_path / "bad.urdf"
    bad.write_text(re.sub(r'<mass\s+value="[^"]*"', '<mass value="0.0"', urdf, count=1))
    assert bad.read_text() != urdf
    with pytest.raises(ModelError, match="mass must be positive .kg. for a body with a rotational "
                       "inertia, got 0"):
        load_robot(bad)
