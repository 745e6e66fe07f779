"""Output paths, run sizes and inputs that would give a silently wrong result are checked
before any work starts: one line, exit 2."""

import pytest
from conftest import compiled_ctrl_c

from multibody_control.cli import main
from multibody_dynamics.errors import InputError
from multibody_dynamics.model.resources import share_dir


@pytest.mark.parametrize("argv, words", [
    (["simulate", "slider_crank", "--duration", "0.1", "--out", "{tmp}"],
     ["--out", "is a directory"]),
    (["simulate", "slider_crank", "--duration", "0.1", "--out", "{tmp}/no/such/x.csv"],
     ["--out", "does not exist"]),
    (["simulate", "slider_crank", "--duration", "0.1", "--out", "/proc/x.csv"],
     ["--out", "cannot write"]),
    (["simulate", "slider_crank", "--duration", "0.1", "--plot", "/proc/x.png"],
     ["--plot", "cannot write"]),
    (["requirements", "arm7", "demo", "--out", "/proc/req"], ["--out", "cannot write"]),
    (["requirements", "arm7", "demo", "--out", "{tmp}/file.txt"],
     ["--out", "exists and is not a directory"]),
    (["requirements", "arm7", "demo", "--out", "{tmp}/file.txt/sub"],
     ["--out", "file.txt is not a directory"]),
    (["simulate", "slider_crank", "--duration", "0.1", "--dt", "0.5"],
     ["--dt", "longer than the duration"]),
    (["simulate", "arm7", "--duration", "1e6"], ["1e+09 samples", "--output-dt"]),
    (["assemble", "five_bar", "--out", "{tmp}"], ["--out", "is a directory"]),
    # these used to run and write NaN loads, ignore the com, or read '+*alpha1' as '+alpha1'
    (["requirements", "arm7", "demo", "--payload-mass", "2", "--payload-force", "nan", "0", "0",
      "--out", "{tmp}/r"], ["payload force", "finite"]),
    (["requirements", "arm7", "demo", "--payload-com", "0", "0", "0.05", "--out", "{tmp}/r"],
     ["--payload-com", "without --payload-mass"]),
    (["requirements", "arm7", "demo", "--payload-mass", "1", "--payload-force-point", "0", "0",
      "0", "--out", "{tmp}/r"], ["--payload-force-point", "without --payload-force"]),
    (["analyze", "passive_arm", "--output", "x +* alpha1, alpha1, alpha2 + 0.5*beta"],
     ["cannot read term '+*alpha1'"]),
])
def test_refused_before_the_work(tmp_path, capsys, argv, words):
    (tmp_path / "file.txt").write_text("x")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv + ["--quiet"] if argv[0] == "simulate" else argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing was computed
    err = captured.err.strip().splitlines()
    assert len(err) == 1, err
    for w in words:
        assert w in err[0], err[0]


def test_run_scenario_too_long_for_memory(tmp_path):
    from multibody_control.scenarios import load_run_scenario

    src = share_dir() / "config" / "scenarios" / "run_slider_crank.yaml"
    text = src.read_text()
    assert "duration: 1.5" in text
    path = tmp_path / "long.yaml"
    path.write_text(text.replace("duration: 1.5", "duration: 1.0e+6"))
    with pytest.raises(InputError, match="1e\\+09 samples.*lower plant.rate or shorten duration"):
        load_run_scenario(path)


def test_writable_outputs_pass(tmp_path, capsys):
    out = tmp_path / "new" / "req"  # the command makes the directories it writes to
    assert main(["requirements", "arm7", "demo", "--out", str(out), "--quiet"]) == 0
    assert (out / "arm7_requirements.csv").is_file()


def test_animation_outputs_checked_first(tmp_path, capsys):
    code = main(["simulate", "slider_crank", "--duration", "0.1", "--quiet",
                 "--out", str(tmp_path / "s.csv"), "--animate", str(tmp_path / "a.html"),
                 "--animate", "/proc/a.gif"])
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--animate: cannot write to /proc/a.gif" in captured.err
    assert not (tmp_path / "s.csv").exists()


def test_projected_initial_velocity_is_reported(capsys):
    assert main(["simulate", "slider_crank", "--duration", "0.05", "--quiet", "--v0", "1",
                 "1"]) == 0
    out = capsys.readouterr().out
    assert "note: --v0 was projected onto the closures" in out
    assert main(["simulate", "slider_crank", "--duration", "0.05", "--quiet", "--v0", "1",
                 "-2"]) == 0  # at the rest configuration A = [2l, l]: A v = 0 already
    assert "projected" not in capsys.readouterr().out


@pytest.mark.parametrize("argv, expected", [
    # five_bar at rest without gravity in its plane: no energy at all
    (["five_bar"], "(zero energy throughout: no relative drift)"),
    # passive_arm's spring joint has a damper (0.25 N m s/rad)
    (["passive_arm", "--v0", "0", "0", "0", "1"], "(inputs or dampers do work"),
    (["arm7", "--tau", "1", "0", "0", "0", "0", "0", "0"], "(inputs or dampers do work"),
    (["arm7"], "relative drift"),
])
def test_energy_line_says_what_it_measures(capsys, argv, expected):
    assert main(["simulate", *argv, "--duration", "0.05", "--quiet"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("energy"))
    assert expected in line and "max |E - E(0)| = " in line


def test_ctrl_c_inside_a_compiled_call_is_an_interrupt(tmp_path, capsys, monkeypatch):
    """A SIGINT that lands inside a numba kernel surfaces as SystemError (its cause the
    KeyboardInterrupt): simulate keeps the samples as for a plain Ctrl-C, the command exits
    130; a SystemError of another cause stays an error."""
    import numpy as np

    from multibody_dynamics.interruptible import interrupt_in
    from multibody_dynamics.model import load_model
    from multibody_dynamics.simulate import SimulationInterrupted, simulate

    wrapped = compiled_ctrl_c()
    assert interrupt_in(wrapped) and interrupt_in(KeyboardInterrupt())
    assert not interrupt_in(SystemError("other")) and not interrupt_in(ValueError("x"))
    other = SystemError("other")
    other.__cause__ = ValueError("x")
    assert not interrupt_in(other)

    def tau(t, q, v):
        if t > 0.05:
            raise wrapped
        return np.zeros(7)

    with pytest.raises(SimulationInterrupted) as info:
        simulate(load_model("arm7"), 1.0, tau=tau)
    assert 0.049 < info.value.result.t[-1] <= 0.051

    def broken(t, q, v):
        raise other

    with pytest.raises(SystemError):
        simulate(load_model("arm7"), 1.0, tau=broken)

    import multibody_dynamics.simulate as sim_module

    def raising(*args, **kwargs):
        raise wrapped

    monkeypatch.setattr(sim_module, "simulate", raising)
    out = tmp_path / "x.csv"
    assert main(["simulate", "arm7", "--duration", "1", "--quiet", "--out", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_ctrl_c_keeps_the_samples(tmp_path, capsys, monkeypatch):
    """An interrupt during the run: the library raises SimulationInterrupted carrying the
    samples so far, the command writes them and exits 130."""
    import numpy as np

    from multibody_dynamics.model import load_model
    from multibody_dynamics.simulate import SimulationInterrupted, simulate

    def tau(t, q, v):
        if t > 0.05:
            raise KeyboardInterrupt
        return np.zeros(7)

    with pytest.raises(SimulationInterrupted) as info:
        simulate(load_model("arm7"), 1.0, tau=tau)
    partial = info.value.result
    assert not partial.success and "interrupted at t = 0.05" in partial.message
    assert 0.049 < partial.t[-1] <= 0.051 and partial.q.shape == (partial.t.size, 7)

    import multibody_dynamics.simulate as sim_module

    real = sim_module.simulate

    def interrupted_simulate(model, duration, q0, v0, _tau, *args, **kwargs):
        return real(model, duration, q0, v0, tau, *args, **kwargs)  # the CLI's call, our input

    monkeypatch.setattr(sim_module, "simulate", interrupted_simulate)
    out = tmp_path / "partial.csv"
    assert main(["simulate", "arm7", "--duration", "1", "--quiet", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and f"partial result written to {out}" in err
    rows = out.read_text().splitlines()
    assert len(rows) - 1 == partial.t.size  # header + the samples up to the interrupt
