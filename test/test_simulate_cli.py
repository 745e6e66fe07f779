"""`multibody simulate`: CSV columns, summary, PNG, and one-line exit-2 errors."""

import csv

import numpy as np
import pytest

from multibody_control.cli import main


@pytest.mark.slow
def test_simulate_slider_crank_csv_and_plot(tmp_path, capsys):
    out, png = tmp_path / "sc.csv", tmp_path / "sc.png"
    rc = main(["simulate", "slider_crank", "--duration", "0.2", "--v0", "6", "-12", "--quiet",
               "--out", str(out), "--plot", str(png)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "accepted" in text and "max |phi|" in text and "relative drift" in text
    assert "simulated s per wall s" in text
    with out.open() as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["t", "q.crank", "q.rod", "v.crank", "v.rod", "lambda.slider.n", "residual",
                       "velocity_residual", "energy"]
    data = np.array(rows[1:], float)
    assert data.shape == (201, 9)
    assert np.max(data[:, 6]) < 1e-12  # projected after every step (tolerance 1e-12 m)
    assert png.stat().st_size > 10_000


def test_simulate_adaptive_and_pfaffian(tmp_path, capsys):
    out = tmp_path / "cart.csv"
    rc = main(["simulate", "two_wheeled_cart", "--duration", "0.2", "--rtol", "1e-8",
               "--v0", "0.5", "0", "0", "5", "5", "--tau", "0.2", "-0.1",
               "--quiet", "--out", str(out)])
    assert rc == 0
    assert "adaptive" in capsys.readouterr().out
    header = out.read_text().splitlines()[0].split(",")
    assert "lambda.axle.lateral" in header and "velocity_residual" in header


@pytest.mark.parametrize("branch", ["continue", "free"])
def test_simulate_singular_branch(branch, capsys):
    rc = main(["simulate", "slider_crank", "--duration", "1", "--rtol", "1e-10", "--atol", "1e-12",
               "--v0", "6", "-12", "--singular-branch", branch, "--quiet"])
    assert rc == 0
    text = capsys.readouterr().out
    # the crossing of q1 = pi/2 near t = 0.4 s is bridged only with "continue"
    assert ("singular configuration(s) bridged" in text) == (branch == "continue")


@pytest.mark.parametrize("argv,needle", [
    (["simulate", "slider_crank", "--rtol", "1e-8", "--singular-branch", "back"],
     "--singular-branch"),
    (["simulate", "slider_crank", "--q0", "1", "2", "3"], "--q0: expected 2 values"),
    (["simulate", "slider_crank", "--duration", "-1"], "--duration"),
    (["simulate", "no_such_robot"], "unknown robot"),
    (["simulate", "five_bar", "--tau", "1", "2", "3"], "--tau"),
    (["simulate", "slider_crank", "--dt", "1e-3", "--rtol", "1e-6"], "not allowed with"),
])
def test_simulate_bad_input_exits_2(argv, needle, capsys):
    with pytest.raises(SystemExit) as exc:
        rc = main(argv + ["--quiet"])
        raise SystemExit(rc)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err
