"""Results as NumPy archives: ``--format npz|both`` of simulate, run and invert, and
``simulate --out FILE.npz``; read by ``numpy.load`` (no pickles) and ``multibody animate``."""

import json

import numpy as np
import pytest

from multibody_control.cli import main
from multibody_dynamics.model.resources import share_dir

SCENARIOS = share_dir() / "config" / "scenarios"


def _csv(path):
    with open(path) as fh:
        header = fh.readline().strip().split(",")
    return header, np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


def test_simulate_npz_equals_the_csv(tmp_path, capsys):
    argv = ["simulate", "passive_arm", "--duration", "0.2", "--quiet", "--tau", "1", "0.5",
            "-0.2"]
    assert main([*argv, "--out", str(tmp_path / "a.csv")]) == 0
    assert main([*argv, "--out", str(tmp_path / "b.npz")]) == 0
    out = capsys.readouterr().out
    assert f"wrote {tmp_path / 'b.npz'}" in out
    # only the archive is left (no CSV, no sidecar, no hidden file)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "a.meta.json", "b.npz"]
    header, data = _csv(tmp_path / "a.csv")
    with np.load(tmp_path / "b.npz", allow_pickle=False) as r:
        assert list(r["columns"]) == header
        np.testing.assert_array_equal(r["data"], data)  # the CSV's numbers, unchanged
        np.testing.assert_array_equal(r["q.beta"], data[:, header.index("q.beta")])
        units = dict(zip(r["columns"], r["units"]))
        meta = json.loads(str(r["meta"]))
    # passive_arm: cart x prismatic, alpha1, alpha2, beta revolute (Seifried 2014 Table 4.2)
    assert units["t"] == "s" and units["q.x"] == "m" and units["q.beta"] == "rad"
    assert units["v.x"] == "m/s" and units["v.alpha1"] == "rad/s" and units["energy"] == "J"
    assert meta["robot"] == "passive_arm" and meta["kind"] == "simulate"


def test_run_both_and_animate_the_archive(tmp_path, capsys):
    scenario = str(SCENARIOS / "run_slider_crank.yaml")
    assert main(["run", scenario, "--duration", "0.1", "--quiet", "--format", "both",
                 "--out", str(tmp_path)]) == 0
    header, data = _csv(tmp_path / "run_slider_crank.csv")
    with np.load(tmp_path / "run_slider_crank.npz", allow_pickle=False) as r:
        np.testing.assert_array_equal(r["data"], data)
        units = dict(zip(r["columns"], r["units"]))
        assert json.loads(str(r["meta"]))["kind"] == "run"
    assert all(units[c] for c in header), units  # every column has its unit
    assert {units[c] for c in header if c.startswith("u.")} == {"N m | N"}
    # `multibody animate` reads the archive (robot from the meta inside)
    (tmp_path / "run_slider_crank.csv").unlink()
    (tmp_path / "run_slider_crank.meta.json").unlink()
    capsys.readouterr()
    assert main(["animate", str(tmp_path / "run_slider_crank.npz"), "--out",
                 str(tmp_path / "a.html"), "--max-frames", "5"]) == 0
    assert (tmp_path / "a.html").stat().st_size > 10000


def test_invert_npz_only(tmp_path, capsys):
    assert main(["invert", str(SCENARIOS / "invert_five_bar_path.yaml"), "--quiet",
                 "--format", "npz", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["invert_five_bar_path.npz",
                                                          "invert_five_bar_path.png"]
    with np.load(tmp_path / "invert_five_bar_path.npz", allow_pickle=False) as r:
        cols = list(r["columns"])
        assert {"t", "q.left_motor", "u.left_motor", "y.0", "y_d.0"} <= set(cols)
        assert r["data"].shape == (r["t"].size, len(cols))
        np.testing.assert_allclose(r["y.0"], r["y_d.0"], atol=1e-9)  # on the desired path


def test_csv_format_with_npz_out_is_refused(tmp_path, capsys):
    assert main(["simulate", "arm7", "--duration", "0.01", "--quiet", "--format", "csv",
                 "--out", str(tmp_path / "x.npz")]) == 2
    assert "--format csv" in capsys.readouterr().err


def test_not_an_archive(tmp_path):
    from multibody_dynamics.errors import InputError
    from multibody_dynamics.result_npz import read_npz

    np.savez(tmp_path / "x.npz", a=np.zeros(3))
    with pytest.raises(InputError, match="not a result archive"):
        read_npz(tmp_path / "x.npz")


def test_requirements_npz(tmp_path, capsys):
    assert main(["requirements", "arm7", "demo", "--quiet", "--format", "both", "--out",
                 str(tmp_path)]) == 0
    header, data = _csv(tmp_path / "arm7_requirements.csv")
    with np.load(tmp_path / "arm7_requirements.npz", allow_pickle=False) as r:
        np.testing.assert_array_equal(r["data"], data)
        units = dict(zip(r["columns"], r["units"]))
    assert units["t"] == "s" and units["joint3.fy"] == "N" and units["joint7.tz"] == "N m"
    assert all(units[c] for c in header)
