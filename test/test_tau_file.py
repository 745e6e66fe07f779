"""``multibody simulate --tau-file``: a time-varying input replayed from a CSV file."""

import numpy as np
import pytest

from multibody_control.cli import main
from multibody_control.input_file import read_input_file
from multibody_dynamics.errors import InputError

NAMES = ("F", "T1", "T2")  # passive_arm's inputs (cart force, two joint torques)


def _write(path, text):
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text, words", [
    ("t,F,T1,T2,T3\n0,0,0,0,0\n1,0,0,0,0\n", ["unknown column 'T3'", "F, T1, T2"]),
    ("t,F,T1\n0,0,0\n1,0,0\n", ["missing input column(s) T2"]),
    ("F,T1,T2\n0,0,0\n", ["missing column 't'"]),
    ("t,F,T1,T2\n0,0,0,0\n0.5,0,0,0\n0.4,0,0,0\n1,0,0,0\n", ["strictly increase", "line 3"]),
    ("t,F,T1,T2\n0,0,0,0\n0.5,0,nan,0\n1,0,0,0\n", ["NaN or inf in column 'T1'", "line 3"]),
    ("t,F,T1,T2\n0,0,0,0\n0.25,0,0,0\n", ["ends at t = 0.25 s", "duration 0.5 s"]),
    ("t,F,T1,T2\n0.1,0,0,0\n1,0,0,0\n", ["starts at t = 0.1 s"]),
    ("t,F,T1,T2\n0,0,0,0\n1,0,x,0\n", ["non-numeric value"]),
    ("t,F,T1,T2\n0,0,0\n1,0,0,0\n", ["line 2 has 3 values"]),
    ("t,F,u.F,T1,T2\n0,0,0,0,0\n1,0,0,0,0\n", ["input F given twice"]),
])
def test_bad_files_are_refused_up_front(tmp_path, capsys, text, words):
    path = _write(tmp_path / "u.csv", text)
    code = main(["simulate", "passive_arm", "--duration", "0.5", "--quiet", "--tau-file", path,
                 "--out", str(tmp_path / "out.csv")])
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before the simulation
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("multibody simulate: error: --tau-file: "), err
    for w in words:
        assert w in err[0], err[0]
    assert not (tmp_path / "out.csv").exists()


def test_missing_file_and_tau_with_tau_file(tmp_path, capsys):
    assert main(["simulate", "passive_arm", "--quiet", "--tau-file",
                 str(tmp_path / "no.csv")]) == 2
    err = capsys.readouterr().err
    assert "--tau-file" in err and "not found" in err
    path = _write(tmp_path / "u.csv", "t,F,T1,T2\n0,0,0,0\n1,0,0,0\n")
    assert main(["simulate", "passive_arm", "--quiet", "--tau-file", path, "--tau", "0", "0",
                 "0"]) == 2
    assert "not both" in capsys.readouterr().err


def test_hold_values(tmp_path):
    path = _write(tmp_path / "u.csv", "t,u.T2,F,T1\n-1,0,0,0\n0,1,10,100\n0.5,3,20,300\n")
    lin = read_input_file(path, NAMES, 0.5)
    zoh = read_input_file(path, NAMES, 0.5, hold="zoh")
    # columns in the model's order whatever the file's; u. prefix accepted
    np.testing.assert_allclose(lin(0.0), [10, 100, 1])
    np.testing.assert_allclose(lin(0.25), [15, 200, 2])  # midway: the mean
    np.testing.assert_allclose(zoh(0.25), [10, 100, 1])  # held from t = 0
    np.testing.assert_allclose(zoh(0.5), [20, 300, 3])
    np.testing.assert_allclose(zoh(-0.5), [0, 0, 0])


def test_replay_matches_the_input_function(tmp_path, capsys):
    """A ramp u(t) = a + b t given by two samples: linear hold reproduces it exactly, so the
    replayed simulation equals the library's simulation with u(t) given as a function."""
    from multibody_dynamics.model import load_model
    from multibody_dynamics.simulate import simulate

    a, b = np.array([1.0, 0.5, -0.2]), np.array([-2.0, 0.3, 0.4])
    path = _write(tmp_path / "u.csv", "t,F,T1,T2\n" + "\n".join(
        ",".join(repr(float(x)) for x in [t, *(a + b * t)]) for t in (0.0, 0.3)) + "\n")
    out = tmp_path / "sim.csv"
    assert main(["simulate", "passive_arm", "--duration", "0.3", "--quiet", "--tau-file", path,
                 "--out", str(out)]) == 0
    header = out.read_text().splitlines()[0].split(",")
    data = np.loadtxt(out, delimiter=",", skiprows=1)
    model = load_model("passive_arm")
    ref = simulate(model, 0.3, tau=lambda t, q, v: model.B @ (a + b * t))
    q = data[:, [header.index(f"q.{n}") for n in model.coordinate_names]]
    assert q.shape == ref.q.shape
    # the CSV has 10 significant digits
    np.testing.assert_allclose(q, ref.q, rtol=1e-9, atol=1e-12)
    # and the input moved the arm differently from no input at all
    rest = simulate(model, 0.3)
    assert np.max(np.abs(ref.q[-1] - rest.q[-1])) > 1e-3


def test_unknown_hold(tmp_path):
    path = _write(tmp_path / "u.csv", "t,F,T1,T2\n0,0,0,0\n1,0,0,0\n")
    with pytest.raises(InputError, match="--tau-hold: expected one of linear, zoh"):
        read_input_file(path, NAMES, 0.5, hold="cubic")
