"""Runs that cannot finish well are refused before any work: inversion motions whose samples
would not fit in memory (rigid, flexible and closed flexible scenarios), an MP4 animation
without ffmpeg, and the adaptive simulation's sample budget counted at its real interval; and
the default sampling of a flexible simulation, fine enough for its modes."""

import pytest

from multibody_control.cli import main
from multibody_dynamics.errors import InputError
from multibody_dynamics.model.resources import share_dir

SCENARIOS = share_dir() / "config" / "scenarios"


def _long(tmp_path, name, tf_line):
    """A copy of the shipped scenario ``name`` with the motion's end at 1e6 s."""
    text = (SCENARIOS / name).read_text()
    assert tf_line in text
    path = tmp_path / name
    path.write_text(text.replace(tf_line, "tf: 1.0e+6"))
    return path


def test_rigid_inversion_too_long_for_memory(tmp_path, capsys):
    """tf 1e6 s every 1 ms: 1e9 samples (it used to grow to 13 GB in 25 s), refused in one
    line before the inversion starts."""
    path = _long(tmp_path, "invert_passive_arm.yaml", "tf: 1.7")
    assert main(["invert", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert "1e+09 samples" in line and "raise dt or shorten the motion" in line
    assert not (tmp_path / "out").exists()


def test_flexible_inversion_too_long_for_memory(tmp_path):
    """The closed flexible loop's scenario (the parallel tool, dt 0.5 ms): 2e9 samples,
    refused when the scenario is read (it used to grow by gigabytes before any output)."""
    from multibody_control.inversion.flexible_scenario import load_flexible_scenario

    path = _long(tmp_path, "invert_flexible_parallel_tool.yaml", "tf: 1.0")
    with pytest.raises(InputError, match=r"task / dt: .*2e\+09 samples"):
        load_flexible_scenario(path)


def test_mp4_without_ffmpeg_is_refused_before_the_run(tmp_path, capsys, monkeypatch):
    """--animate x.mp4 with no ffmpeg (none on PATH, no imageio-ffmpeg wheel): one line before
    the simulation (it used to simulate and write the CSV, then fail)."""
    import shutil
    import sys

    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "ffmpeg"
                        else real(name, *a, **k))
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # import fails
    out = tmp_path / "s.csv"
    assert main(["simulate", "slider_crank", "--duration", "0.05", "--quiet", "--out", str(out),
                 "--animate", str(tmp_path / "a.mp4")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not out.exists()
    assert "--animate" in captured.err and "MP4 needs ffmpeg, which was not found" in captured.err


def test_adaptive_budget_counts_its_output_interval(capsys):
    """The adaptive mode records every 0.01 s by default: 1e6 s is 1e8 samples, and the message
    says so (it said every 0.001 s, 1e9 samples, the fixed step's count)."""
    assert main(["simulate", "passive_arm", "--duration", "1e6", "--rtol", "1e-6",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "every 0.01 s would record 1e+08 samples" in err


def test_flexible_simulation_samples_resolve_the_modes(tmp_path, capsys):
    """`simulate` of a flexible model samples its elastic coordinates finely enough to show the
    modes (flexible_manipulator: 27 to 134 Hz; the old default 0.01 s aliased them): linear
    interpolation between the written samples follows a 0.1 ms reference of the same DOP853
    run (dense output: the solver steps do not depend on the sampling) to within 10 % of the
    peak of each elastic coordinate, where 0.01 s samples miss by more than half of it."""
    import numpy as np

    from multibody_dynamics.flexible.simulation import simulate_flexible
    from multibody_dynamics.robot import load_robot

    out = tmp_path / "f.csv"
    assert main(["simulate", "flexible_manipulator", "--duration", "0.3", "--tau", "1", "0",
                 "--quiet", "--out", str(out)]) == 0
    assert "samples every 0.0005 s" in capsys.readouterr().out
    header = out.read_text().splitlines()[0].split(",")
    data = np.loadtxt(out, delimiter=",", skiprows=1)
    model = load_robot("flexible_manipulator")
    ref = simulate_flexible(model, 0.3, u=[1.0, 0.0], output_dt=1e-4)
    coarse = simulate_flexible(model, 0.3, u=[1.0, 0.0], output_dt=1e-2)
    fine_err, coarse_err = {}, {}
    for k, name in enumerate(ref.names):
        if "." not in name:
            continue
        peak = np.abs(ref.q[:, k]).max()
        fine = np.interp(ref.t, data[:, 0], data[:, header.index(f"q.{name}")])
        fine_err[name] = np.abs(fine - ref.q[:, k]).max() / peak
        old = np.interp(ref.t, coarse.t, coarse.q[:, k])
        coarse_err[name] = np.abs(old - ref.q[:, k]).max() / peak
    assert len(fine_err) == 4 and max(fine_err.values()) < 0.1, fine_err
    assert max(coarse_err.values()) > 0.5, coarse_err  # the second modes (111, 134 Hz)


def test_invert_flexible_too_long_for_memory(monkeypatch):
    """invert_flexible() called from Python: tf 1e6 s every 1 ms is 1e9 samples, refused in the
    scenario path's words before any work (no inverse kinematics, no model evaluation); the
    tabulated desired output counts at 1 ms even when dt is coarser."""
    from multibody_control.inversion import flexible
    from multibody_control.tasks import Task, TimeLaw, straight_line
    from multibody_dynamics.flexible.loader import load_flexible_model

    chain = load_flexible_model("flexible_manipulator")

    def no_work(*args, **kwargs):
        raise AssertionError("work started before the sample budget was checked")

    monkeypatch.setattr(flexible, "RigidInverseKinematics", no_work)
    monkeypatch.setattr(flexible, "FlexibleServo", no_work)
    task = Task(TimeLaw(0.2, 1.0e6, 5), (straight_line("arm2", (0.45, -0.1), (0.45, 0.1)),))
    for dt in (1e-3, 0.5):
        with pytest.raises(InputError) as caught:
            flexible.invert_flexible(chain, task, "rigid", dt=dt)
        (line,) = str(caught.value).splitlines()
        assert "task / dt: 0 .. 1e+06 s" in line and "1e+09 samples" in line
        assert "raise dt or shorten the motion" in line


def test_simulate_flexible_too_long_for_memory():
    """simulate_flexible() from Python: 1e6 s every 0.1 ms is 1e10 samples, refused in one line
    before the sample grid is built (it would take 80 GB)."""
    from multibody_dynamics.flexible.simulation import simulate_flexible
    from multibody_dynamics.robot import load_robot

    model = load_robot("flexible_manipulator")
    with pytest.raises(InputError) as caught:
        simulate_flexible(model, 1e6, output_dt=1e-4)
    (line,) = str(caught.value).splitlines()
    assert "simulate_flexible: duration / output_dt" in line and "1e+10 samples" in line
    assert "pass a larger output_dt or a shorter duration" in line


def test_flexible_simulate_budget_counts_a_given_output_dt(capsys):
    """`simulate` of a flexible model with --output-dt: the budget is checked at that interval
    too, in the command's words (only the default interval was checked)."""
    assert main(["simulate", "flexible_manipulator", "--duration", "1e6", "--output-dt", "1e-4",
                 "--quiet"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--duration / --output-dt: 1e+06 s every 0.0001 s would record 1e+10 samples" in line
