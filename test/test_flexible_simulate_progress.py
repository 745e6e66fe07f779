"""`multibody simulate` on a flexible model and the long stages of a closed flexible
inversion (the machine tool) show progress bars on stderr unless --quiet."""

from multibody_control.cli import main


def test_flexible_simulate_progress_bar(capsys):
    argv = ["simulate", "flexible_manipulator", "--duration", "0.3", "--tau", "0.1", "0"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "simulate:" in err and "/0.3 s [" in err  # the tqdm bar over simulated time
    assert main(argv + ["--quiet"]) == 0
    assert "simulate:" not in capsys.readouterr().err


def test_closed_flexible_inversion_stages_show_progress(tmp_path, capsys):
    # the reduced machine tool of test_flexible_scenario_closed: both designs, plant check
    from test_flexible_scenario_closed import SMALL, SMALL_ROBOT

    from multibody_control.inversion.flexible_scenario import (
        load_flexible_scenario,
        run_flexible_scenario,
    )

    (tmp_path / "small_tool.yaml").write_text(SMALL_ROBOT)
    (tmp_path / "small.yaml").write_text(SMALL)
    stages = []  # the library reports its stage lines to the callback, never to stdout
    runs = run_flexible_scenario(load_flexible_scenario(tmp_path / "small.yaml"),
                                 progress=stages.append)
    assert all(d.result.success for d in runs.values())
    assert stages[0].startswith("rigid task path:"), stages
    assert [line.split(":")[0] for line in stages[1:]] == list(runs), stages
    captured = capsys.readouterr()
    assert captured.out == "", captured.out
    err = captured.err
    # classical: internal dynamics integrated over simulated time; stable: sweeps; both:
    # reconstruction of the samples and the plant simulation
    for label in ("internal dynamics:", "stable inversion:", "reconstruct:",
                  "plant simulation:"):
        assert label in err, label
