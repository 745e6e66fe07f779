"""`multibody simulate` on a flexible model shows a progress bar over simulated time
(as on rigid models) unless --quiet."""

from multibody_control.cli import main


def test_flexible_simulate_progress_bar(capsys):
    argv = ["simulate", "flexible_manipulator", "--duration", "0.3", "--tau", "0.1", "0"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "simulate:" in err and "/0.3 s [" in err  # the tqdm bar over simulated time
    assert main(argv + ["--quiet"]) == 0
    assert "simulate:" not in capsys.readouterr().err
