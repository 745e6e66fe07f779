"""examples/: every command of examples/README.md and every script runs, with sane output."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from multibody_control.cli import main
from multibody_dynamics.model.resources import share_dir

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _commands() -> list[list[str]]:
    text = (EXAMPLES / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = [ln for b in blocks for ln in b.splitlines() if ln.startswith("multibody ")]
    return [shlex.split(ln, comments=True)[1:] for ln in lines]


def _csv(path):
    with open(path) as fh:
        header = fh.readline().strip().split(",")
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return {h: data[:, i] for i, h in enumerate(header)}


def _script(name, *args, cwd=None):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                          text=True, env=env, timeout=300, cwd=cwd)


def test_readme_commands_run(tmp_path, monkeypatch, capsys):
    commands = _commands()
    assert len(commands) >= 7 and {c[0] for c in commands} >= {"run", "requirements", "check",
                                                              "invert", "simulate", "animate"}
    (tmp_path / "examples").symlink_to(EXAMPLES)  # the README's relative paths, outputs here
    monkeypatch.chdir(tmp_path)
    for argv in commands:
        argv = [*argv, "--quiet"] if argv[0] in ("run", "requirements", "invert",
                                                 "simulate") else argv
        assert main(argv) == 0, f"multibody {' '.join(argv)}: {capsys.readouterr().err}"
    out = capsys.readouterr().out
    assert "ok: model loaded and validated" in out and "minimum phase: the internal" in out
    out_dir = tmp_path / "out"
    # tracking along motion.csv: the initial error of 0.02 rad decays (critically damped)
    run = _csv(out_dir / "run_arm7_motion.csv")
    assert np.max(np.abs(run["e.joint2"][-100:])) < 1e-4 < np.max(np.abs(run["e.joint2"]))
    loads = _csv(out_dir / "arm7_requirements.csv")
    assert loads["t"].size == 251 and np.all(np.isfinite(np.column_stack(list(loads.values()))))
    # the replayed feedforward moves the shoulder as the inversion said: 0 -> 0.6 rad, within
    # 5 mrad (linear interpolation of the 1 ms feedforward samples, RK4 at 1 ms)
    inv, replay = _csv(out_dir / "invert_swing.csv"), _csv(out_dir / "replay.csv")
    n = replay["t"].size
    np.testing.assert_allclose(replay["t"], inv["t"][:n], atol=1e-9)
    assert abs(inv["q.shoulder"][n - 1] - 0.6) < 1e-9
    assert np.max(np.abs(replay["q.shoulder"] - inv["q.shoulder"][:n])) < 5e-3
    assert np.max(np.abs(replay["q.elbow"])) > 0.01  # the elbow does swing behind
    assert (out_dir / "replay.html").stat().st_size > 10000


def test_file_reference_is_the_built_in_motion(tmp_path, capsys):
    """run_arm7_motion.yaml (reference from motion.csv) and the shipped
    run_arm7_computed_torque.yaml (the same quintic as a joints reference, same gains and
    initial error) give the same closed loop: quintic Hermite through exact samples of a
    quintic reproduces it (to the file's 10 digits)."""
    scenarios = share_dir() / "config" / "scenarios"
    assert main(["run", str(EXAMPLES / "run_arm7_motion.yaml"), "--quiet", "--out",
                 str(tmp_path / "a")]) == 0
    assert main(["run", str(scenarios / "run_arm7_computed_torque.yaml"), "--quiet", "--out",
                 str(tmp_path / "b")]) == 0
    a = _csv(tmp_path / "a" / "run_arm7_motion.csv")
    b = _csv(tmp_path / "b" / "run_arm7_computed_torque.csv")
    assert set(a) == set(b)
    # The file has 10 significant digits: positions rounded by ~5e-11 rad become, through the
    # quintic Hermite over 10 ms steps, acceleration errors ~100 * 5e-11 / 0.01^2 = 5e-5
    # rad/s^2 (measured 5.6e-5), and computed torque turns them into torque errors of about
    # M * 5e-5 (measured 4.6e-6 N m); the motion itself agrees to 1e-6 of its size.
    for key in a:
        tol = 1e-4 if key.startswith("u.") else 1e-6 * max(1.0, float(np.max(np.abs(b[key]))))
        np.testing.assert_allclose(a[key], b[key], rtol=0, atol=tol, err_msg=key)


@pytest.mark.parametrize("reference, words", [
    ({"file": "no_such.csv"}, ["reference.file", "not found"]),
    ({"file": "short.csv"}, ["reference.file", "covers t = 0 s to 1 s", "duration 2.5 s"]),
])
def test_file_reference_errors(tmp_path, reference, words):
    from multibody_control.scenarios import load_run_scenario
    from multibody_dynamics.errors import InputError

    lines = (EXAMPLES / "motion.csv").read_text().splitlines()
    (tmp_path / "short.csv").write_text("\n".join(lines[:102]) + "\n")  # t = 0 .. 1 s
    text = (EXAMPLES / "run_arm7_motion.yaml").read_text()
    path = tmp_path / "s.yaml"
    path.write_text(text.replace("file: motion.csv", f"file: {reference['file']}"))
    with pytest.raises(InputError) as info:
        load_run_scenario(path)
    for w in words:
        assert w in str(info.value), str(info.value)


def test_file_reference_refused_for_closed_loops(tmp_path):
    from multibody_control.scenarios import scenario_from_mapping
    from multibody_dynamics.errors import InputError

    raw = {"robot": "five_bar", "duration": 1.0, "reference": {"file": "x.csv"},
           "controller": {"law": "pd", "kp": 1.0, "kd": 1.0}}
    with pytest.raises(InputError, match="reference.file: open chains with nq == nv only"):
        scenario_from_mapping(raw)


def test_readme_quickstart_script():
    r = _script("readme_quickstart.py")
    assert r.returncode == 0, r.stderr[-3000:]
    # README.md: "non-minimum phase: eigenvalues -24.8, +28.3" for y = [x, alpha1,
    # alpha2 + beta/2] of the passive arm
    assert "NON-minimum phase" in r.stdout
    eig = [float(x) for x in re.findall(r"^\s+([-+]?\d+\.\d+)\s+[-+]\d", r.stdout, re.M)]
    assert any(abs(x + 24.8) < 0.05 for x in eig) and any(abs(x - 28.3) < 0.05 for x in eig)
    assert "stable inversion: ok" in r.stdout


def test_make_motion_writes_the_shipped_file(tmp_path):
    r = _script("make_motion.py", str(tmp_path / "m.csv"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "m.csv").read_text() == (EXAMPLES / "motion.csv").read_text()


def test_every_script_is_tested():
    tested = {"readme_quickstart.py", "make_motion.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested
