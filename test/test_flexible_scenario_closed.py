"""Inversion scenarios of the closed flexible machine tool (Seifried 2014 Sect. 6.5).

The shipped scenario (config/scenarios/invert_flexible_parallel_tool.yaml, about 80 s) is
only loaded here; a reduced tool (3 + 1 modes, 6 elements per link) on a short, small move runs
both designs, the plant check, the CSV/plot and the CLI in a few seconds. The full-size numbers
(12.9 mm, 0.022 mm) are checked by ``bench/bench_flexible_parallel.py``.
"""

from pathlib import Path

import numpy as np
import pytest

from multibody_control.cli import main
from multibody_control.inversion.closed_flexible import PARALLEL_TOOL_TASK
from multibody_control.inversion.flexible_scenario import (
    ClosedInversionScenario,
    closed_output,
    flexible_summary,
    is_flexible_scenario,
    load_flexible_scenario,
    parallel_tool_task,
    run_flexible_scenario,
)
from multibody_dynamics.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "config" / "scenarios" / "invert_flexible_parallel_tool.yaml"

# the shipped machine tool with 3 + 1 modes and 6 elements per link (the model file edited)
SMALL_ROBOT = (ROOT / "config" / "robots" / "flexible_parallel_tool.yaml").read_text().replace(
    "name: flexible_parallel_tool", "name: small_tool").replace("modes: 12", "modes: 3").replace(
    "modes: 6", "modes: 1").replace("elements: 16", "elements: 6")

# 5 mm of the bench's diagonal move in 0.2 s, 2 ms grid, 0.05 s pre-/post-actuation
SMALL = """\
description: reduced machine tool, short move
robot: small_tool.yaml
task:
  t0: 0.0
  tf: 0.2
  order: 5
  lines:
    long_arm: {start: [0.7643824305, 0.7643824305], end: [0.7693824305, 0.7593824305]}
method: classical
output: collocated
compare:
  - {method: stable, output: combined}
ik_guess: [0.0, 0.8, 0.7853981634, 2.4]
dt: 2.0e-3
options: {t_pre: 0.05, t_post: 0.05}
tracking: {frequency: 10.0, damping: 1.0, sample: 0.004}
verify: true
"""


@pytest.fixture
def small(tmp_path):
    assert SMALL_ROBOT.count("elements: 6,") == 3 and "modes: 3" in SMALL_ROBOT
    (tmp_path / "small_tool.yaml").write_text(SMALL_ROBOT)
    path = tmp_path / "small.yaml"
    path.write_text(SMALL)
    return path


def test_shipped_scenario_is_the_bench_task():
    assert is_flexible_scenario(SHIPPED)
    sc = load_flexible_scenario(SHIPPED)
    assert isinstance(sc, ClosedInversionScenario)
    assert sc.system.name == "flexible_parallel_tool" and sc.body == "long_arm"
    assert [(d.method, d.output) for d in sc.designs] == [("stable", "combined"),
                                                          ("classical", "collocated")]
    assert sc.verify and sc.dt == 5e-4 and sc.options["t_pre"] == sc.options["t_post"] == 0.3
    t = np.linspace(-0.1, 1.1, 25)
    for a, b in zip(sc.task(t), parallel_tool_task()(t)):
        np.testing.assert_allclose(a, b, atol=1e-9)
    np.testing.assert_allclose(sc.ik_guess, PARALLEL_TOOL_TASK["guess"], atol=1e-9)
    # scenario output names -> the library's outputs (the book's collocated is y = [s1, alpha])
    outs = sc.system.outputs
    for name, key in (("collocated", "rigid"), ("combined", "combined"),
                      ("actuated", "collocated")):
        for a, b in zip(closed_output(sc.system, name), outs[key]):
            np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_small_tool_runs_both_designs_and_the_plant_check(small):
    sc = load_flexible_scenario(small)
    runs = run_flexible_scenario(sc)
    assert list(runs) == ["classical/collocated", "stable/combined"]
    for d in runs.values():
        assert d.result.success, d.result.message
        assert d.output_error < 1e-9
        assert d.tracking is not None and d.tracking.success
        # the plant with the feedforward and the cart PD follows the inverse model
        assert abs(d.tracking_error.max() - d.tool_error.max()) < 0.2 * d.tool_error.max() + 1e-6
    classical, stable = runs["classical/collocated"], runs["stable/combined"]
    assert stable.tool_error.max() < 0.2 * classical.tool_error.max()
    assert np.all(stable.eigenvalues.real != 0) and np.any(stable.eigenvalues.real > 0)
    assert np.all(classical.eigenvalues.real < 0)  # collocated: bounded internal dynamics
    text = flexible_summary(sc, runs)
    assert "~12 mm" in text and "~0.03 mm" in text
    assert "book: 7 stable / 29 unstable" in text


@pytest.mark.slow
def test_cli_writes_csv_and_plot(small, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["invert", str(small), "--method", "classical", "--out", str(out),
                 "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "small_tool: reduced machine tool" in text and "classical/collocated" in text
    csv = out / "small.classical_collocated.csv"
    header = csv.read_text().splitlines()[0].split(",")
    assert header[:3] == ["t", "q.s1", "q.s2"] and header[-2:] == ["tool_error", "tracking_error"]
    data = np.loadtxt(csv, delimiter=",", skiprows=1)
    assert data.shape[1] == len(header) and np.all(np.isfinite(data[:, -2]))
    assert (out / "small.png").stat().st_size > 10_000
    assert main(["invert", str(small), "--method", "rigid", "--quiet"]) == 2
    assert "closed flexible model: expected one of classical, stable" in capsys.readouterr().err


@pytest.mark.parametrize("change, words", [
    (("method: classical", "method: rigid"), ["method", "classical, stable", "'rigid'"]),
    (("output: collocated", "output: tip"), ["output", "collocated, actuated, combined", "tip"]),
    (("output: collocated", "output: {name: combined, gamma: [[1, 2]]}"),
     ["output.gamma", "2 x 4"]),
    (("output: collocated", "output: {kind: combined}"), ["output.kind", "unknown key"]),
    (("{method: stable, output: combined}", "{method: stable, outputs: combined}"),
     ["compare[0].outputs", "unknown key"]),
    (("{method: stable, output: combined}", "{method: exact}"), ["compare[0].method", "exact"]),
    (("options: {t_pre: 0.05", "options: {decay_tol: 1.0e-6, t_pre: 0.05"),
     ["options.decay_tol", "unknown key"]),
    (("options: {t_pre: 0.05", "options: {t_pre: 0"),
     ["options.t_pre", "pre- and post-actuation"]),
    (("tracking: {", "tracking: {t_end: 2, "), ["tracking.t_end", "unknown key"]),
    (("ik_guess: [0.0, 0.8,", "ik_guess: [0.8,"), ["ik_guess", "4 rigid coordinates"]),
    (("long_arm: {start", "arm2: {start"), ["task.lines.arm2", "unknown body"]),
    (("dt: 2.0e-3", "dt: -1"), ["dt", "positive"]),
    (("verify: true", "verify: maybe"), ["verify"]),
    (("description:", "pre_actuation: 1\ndescription:"), ["pre_actuation", "unknown key"]),
])
def test_bad_closed_scenarios_name_the_key(small, change, words):
    text = small.read_text()
    assert change[0] in text
    small.write_text(text.replace(*change))
    with pytest.raises(InputError) as err:
        load_flexible_scenario(small)
    assert all(w in str(err.value) for w in words), str(err.value)
