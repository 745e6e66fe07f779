"""The design study engine: swarm, executors, checkpoint and resume, failures, study files, CLI.

Oracles: the analytic ``sphere`` problem (minimum 0 at x = center, closed form), runs of the
same seed on other executors or without interruption (their records must be identical, value
for value: the problems are pure and the swarm is seeded), and the study files' own keys.
"""

from __future__ import annotations

import csv
import json
import math
import os
import pickle
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import pytest

from multibody_control.cli import main
from multibody_control.design.executors import (
    MIN_CHUNK,
    InProcessExecutor,
    chunks,
    evaluate_batch,
    open_executor,
)
from multibody_control.design.optimizer import ParticleSwarm, SwarmSettings
from multibody_control.design.problem import Evaluation, get_problem
from multibody_control.design.study import (
    CHECKPOINT,
    _atomic_write,
    _violation,
    evaluate_one,
    load_study,
    run_study,
    stability_violation,
    study_from_mapping,
)
from multibody_dynamics.errors import InputError

SPHERE = {"problem": "sphere", "options": {"dim": 3, "center": 0.3},
          "optimizer": {"particles": 8, "iterations": 4, "seed": 5}}


def sphere_study(**changes):
    raw = json.loads(json.dumps(SPHERE))
    for key, value in changes.items():
        if isinstance(value, dict):
            raw.setdefault(key, {}).update(value)
        else:
            raw[key] = value
    return study_from_mapping(raw, name="sphere_test")


def table(result):
    """Every evaluation as comparable rows (iteration, particle, x..., value, ok, message)."""
    return [(r.iteration, r.particle, *r.x.tolist(), r.evaluation.value, r.evaluation.ok,
             r.evaluation.message) for r in result.records]


def write_study(path, raw):
    import yaml

    path.write_text(yaml.safe_dump(raw))
    return path


# -- the swarm ------------------------------------------------------------------------------------
def test_swarm_finds_the_sphere_minimum():
    # f = |x - 0.3|^2 on [-1, 1]^3, minimum 0 at 0.3 (closed form). 20 particles x 30
    # iterations: the best must be within 1e-2 of the centre (f < 1e-4) - loose enough for
    # any seed of a working swarm, far below the f ~ 0.1 of a random sample of 600 points.
    study = sphere_study(optimizer={"particles": 20, "iterations": 30})
    result = run_study(study, kind="inprocess", progress=False)
    assert result.best.evaluation.ok
    assert result.best.evaluation.value < 1e-4
    np.testing.assert_allclose(result.best.x, 0.3, atol=1e-2)
    assert len(result.records) == 600
    # history is the running minimum of the feasible values
    values = np.array([r.evaluation.value for r in result.records]).reshape(30, 20)
    np.testing.assert_array_equal(result.history, np.minimum.accumulate(values.min(axis=1)))


def test_swarm_is_seeded_and_stays_in_bounds():
    lower, upper = np.array([-1.0, 0.0]), np.array([1.0, 5.0])

    def designs(seed):
        swarm = ParticleSwarm(lower, upper, SwarmSettings(particles=6, seed=seed))
        out = []
        for _ in range(5):
            X = swarm.ask()
            assert np.all(X >= lower) and np.all(X <= upper)
            np.testing.assert_array_equal(swarm.ask(), X)  # asking twice: same designs
            out.append(X)
            swarm.tell(np.sum(X ** 2, axis=1))
        return np.array(out)

    np.testing.assert_array_equal(designs(3), designs(3))
    assert not np.array_equal(designs(3), designs(4))


def test_swarm_settings_are_checked():
    with pytest.raises(InputError, match="optimizer.particles"):
        SwarmSettings(particles=0)
    with pytest.raises(InputError, match="optimizer.initial_velocity"):
        SwarmSettings(initial_velocity="fast")
    with pytest.raises(InputError, match="swarm bounds"):
        ParticleSwarm([0.0, 1.0], [1.0, 1.0], SwarmSettings())


def test_stability_violation_falls_toward_both_stability_boundaries():
    # sum over Re(lambda) >= 0 of min(r, 1/r): by hand for these sets
    assert stability_violation([[-1.0, 0.0], [-0.1, 5.0]]) == 0.0
    assert stability_violation([[2.0, 3.0], [2.0, -3.0], [-4.0, 0.0]]) == 1.0  # 2 x min(2, 1/2)
    assert stability_violation([1e6 + 0j]) == pytest.approx(1e-6, rel=1e-12)  # near infinity
    assert stability_violation([[1e-6, 0.0]]) == pytest.approx(1e-6, rel=1e-12)  # near zero
    assert stability_violation([[1.0, 0.0]]) == 1.0  # the farthest from both


def test_violation_leads_the_swarm_to_a_small_feasible_region():
    # Feasible only within 0.15 of the centre (0.2 % of the box): ranked by the flat penalty,
    # the swarm has nothing to follow; ranked by the distance to the ball (info['violation'],
    # 0 inside), it finds the ball and its centre.
    options = {"feasible_radius": 0.15}
    optimizer = {"particles": 12, "iterations": 12}
    guided = run_study(sphere_study(options=options, optimizer={**optimizer,
                                                                "violation": "violation"}),
                       kind="inprocess", progress=False)
    flat = run_study(sphere_study(options=options, optimizer=optimizer), kind="inprocess",
                     progress=False)
    count = [sum(r.evaluation.ok for r in res.records) for res in (guided, flat)]
    assert guided.best.evaluation.ok and count[0] > count[1]
    assert guided.best.evaluation.value < 0.15 ** 2
    assert _violation(guided.records[0].evaluation, None) == 0.0  # no key: penalty alone
    failed = Evaluation(1e6, ok=False, message="raised")
    assert _violation(failed, "violation") == math.inf  # no measure: worst of all


# -- executors and failures -----------------------------------------------------------------------
def test_same_seed_same_result_in_process_and_pool():
    study = sphere_study()
    reference = run_study(study, kind="inprocess", progress=False)
    pooled = run_study(study, kind="pool", workers=2, progress=False)
    assert pooled.executor == {"kind": "pool", "workers": 2}
    assert table(pooled) == table(reference)


def test_infeasible_and_raising_designs_are_records_not_crashes():
    # x0 > 0.5 infeasible: ok=False with the problem's penalty, and the study goes on
    study = sphere_study(options={"infeasible_above": 0.5, "penalty": 1e3})
    result = run_study(study, kind="inprocess", progress=False)
    bad = [r for r in result.records if r.x[0] > 0.5]
    assert bad and all(not r.evaluation.ok and r.evaluation.value == 1e3
                       and r.evaluation.message.startswith("infeasible") for r in bad)
    assert result.best.evaluation.ok and result.best.x[0] <= 0.5

    problem = get_problem("sphere", dim=2, raise_above=0.0)
    with InProcessExecutor() as ex:
        assert ex.submit(pow, 2, 3).result() == 8
    with open_executor("inprocess") as backend:
        out = evaluate_batch(backend, problem, np.array([[-0.5, 0.0], [0.5, 0.0]]))
    assert out[0][0].ok and out[0][0].value == pytest.approx(0.8 ** 2 + 0.3 ** 2, rel=1e-15)
    failed = out[1][0]
    assert not failed.ok and failed.value == problem.penalty
    assert "RuntimeError: sphere: deliberate failure at x0 = 0.5" in failed.message

    class NoPenalty:  # a problem without a penalty: a failure is worse than anything
        names, lower, upper = ("a",), np.zeros(1), np.ones(1)

        def evaluate(self, x):
            raise ZeroDivisionError("bug")

    with open_executor("inprocess") as backend:
        (failed, seconds), = evaluate_batch(backend, NoPenalty(), np.array([[0.5]]))
    assert math.isinf(failed.value)
    assert failed.message == "evaluation raised ZeroDivisionError: bug"


def test_a_design_that_kills_its_pool_process_is_failed_alone():
    # The pool breaks when a process dies; the lost evaluations are resubmitted and the design
    # that kills its process every time ends as ok=False while its neighbours are evaluated.
    X = np.array([[-0.5, 0.1], [0.95, 0.0], [0.2, -0.3], [0.1, 0.4]])
    problem = get_problem("sphere", dim=2, crash_above=0.9)
    with open_executor("pool", workers=2) as backend:
        out = evaluate_batch(backend, problem, X)
        restarts = backend.restarts
    assert [ev.ok for ev, _ in out] == [True, False, True, True]
    assert "worker process died" in out[1][0].message
    for (ev, _), x in zip(out, X):
        if ev.ok:
            assert ev.value == pytest.approx(np.sum((x - 0.3) ** 2), rel=1e-15)
    assert restarts >= 2  # it was lost in parallel, then alone


def _blas_threads() -> list:
    from threadpoolctl import threadpool_info

    return [info["num_threads"] for info in threadpool_info()]


def test_pool_processes_run_one_blas_thread_each(monkeypatch):
    # N pool processes on N cores with the BLAS default of one thread per core oversubscribe
    # them (about 3x the CPU per flexible design evaluation on a pool of 2): each process is
    # limited to one thread, whatever the environment says
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    with open_executor("pool", workers=2) as backend:
        threads = [backend.executor.submit(_blas_threads).result() for _ in range(4)]
    assert all(t and set(t) == {1} for t in threads), threads


def test_chunks_cover_every_row_once_in_shrinking_pieces():
    rows = list(range(100))
    cut = chunks(rows, workers=2)
    assert [i for c in cut for i in c] == rows
    sizes = [len(c) for c in cut]
    assert sizes[0] == 25  # a quarter of the designs: half a worker's share
    assert sizes == sorted(sizes, reverse=True)
    assert min(sizes[:-1]) >= MIN_CHUNK
    assert len(cut) <= 14  # a swarm iteration of 100 designs: about a dozen tasks, not 100
    assert chunks([], 2) == [] and chunks([7], 4) == [[7]]


def test_chunked_pool_gives_the_per_design_results_failures_included():
    # rows 1 and 4 raise, row 2 kills its process: each fails alone, its chunk-mates do not
    X = np.array([[-0.5, 0.1], [0.7, 0.0], [0.95, 0.2], [0.2, -0.3], [0.8, 0.4], [0.1, 0.4],
                  [0.0, 0.0], [-0.2, 0.6]])
    problem = get_problem("sphere", dim=2, raise_above=0.6, crash_above=0.9)
    with open_executor("pool", workers=2) as backend:
        single = evaluate_batch(backend, problem, X, chunked=False)
        chunked = evaluate_batch(backend, problem, X, chunked=True)
    assert [ev for ev, _ in chunked] == [ev for ev, _ in single]
    assert [ev.ok for ev, _ in chunked] == [True, False, False, True, False, True, True, True]
    assert "deliberate failure" in chunked[1][0].message
    assert "worker process died" in chunked[2][0].message
    for (ev, _), x in zip(chunked, X):
        if ev.ok:
            assert ev.value == pytest.approx(np.sum((x - 0.3) ** 2), rel=1e-15)


def test_a_cancelled_evaluation_stops_the_study_instead_of_failing_the_design():
    from concurrent.futures import Future

    from multibody_control.design.executors import ExecutorError

    class Gone(InProcessExecutor):  # what a client that lost its scheduler hands back
        def submit(self, fn, /, *args, **kwargs):
            future = Future()
            future.cancel()
            return future

    with open_executor("inprocess") as backend:
        backend.executor = Gone()
        with pytest.raises(ExecutorError, match="continue with --resume"):
            evaluate_batch(backend, get_problem("sphere", dim=2), np.zeros((3, 2)))


# -- checkpoint and resume ------------------------------------------------------------------------
def test_resume_gives_the_uninterrupted_result(tmp_path):
    study = sphere_study(optimizer={"iterations": 6})
    whole = run_study(study, kind="inprocess", progress=False)
    seen = []
    first = run_study(study, tmp_path / "s", kind="inprocess", progress=False, stop_after=2,
                      on_iteration=lambda k, recs: seen.append((k, len(recs))))
    assert seen == [(1, 8), (2, 16)] and not first.complete
    saved = json.loads((tmp_path / "s" / "result.json").read_text())
    assert saved["complete"] is False and saved["iterations_done"] == 2
    with pytest.raises(InputError, match="already holds a study"):
        run_study(study, tmp_path / "s", kind="inprocess", progress=False)
    with pytest.raises(InputError, match="belongs to another study"):
        run_study(study.with_seed(6), tmp_path / "s", kind="inprocess", progress=False,
                  resume=True)
    second = run_study(study, tmp_path / "s", kind="pool", workers=2, progress=False,
                       resume=True)
    assert second.complete and second.run_evaluations == 32
    assert table(second) == table(whole)
    assert second.best.evaluation.value == whole.best.evaluation.value


def test_checkpoint_is_written_atomically(tmp_path, monkeypatch):
    path = tmp_path / CHECKPOINT
    _atomic_write(path, b"old")

    def fail(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="disk full"):
        _atomic_write(path, b"new")
    assert path.read_bytes() == b"old"  # the previous checkpoint is whole
    assert os.listdir(tmp_path) == [CHECKPOINT]  # no temporary file left behind


def test_checkpoint_holds_every_evaluation(tmp_path):
    study = sphere_study()
    result = run_study(study, tmp_path / "s", kind="inprocess", progress=False, stop_after=3)
    with open(tmp_path / "s" / CHECKPOINT, "rb") as f:
        state = pickle.load(f)
    assert state["swarm"].iteration == 3
    assert [(r.iteration, r.particle) for r in state["records"]] == \
        [(r.iteration, r.particle) for r in result.records]


# -- study files ----------------------------------------------------------------------------------
@pytest.mark.parametrize("change, key", [
    ({"optimiser": {}}, "optimiser"),
    ({"optimizer": {"particles": 8, "iterations": 4, "sede": 1}}, "optimizer.sede"),
    ({"optimizer": {"particles": "ten"}}, "optimizer.particles"),
    ({"optimizer": {"adaptive": "yes"}}, "optimizer.adaptive"),
    ({"optimizer": {"w": -1.0}}, "optimizer.w"),
    ({"problem": "no_such_problem"}, "problem"),
    ({"problem": 3}, "problem"),
    ({"options": {"dim": 3, "colour": 1}}, "options"),
    ({"options": {"dim": 3, "lower": 1.0, "upper": -1.0}}, "options"),
    ({"bounds": {"x7": [0.0, 1.0]}}, "bounds.x7"),
    ({"bounds": {"x0": [0.5, 0.2]}}, "bounds.x0"),
    ({"bounds": {"x0": [-2.0, 0.2]}}, "bounds.x0"),
    ({"bounds": {"x1": 0.5}}, "bounds.x1"),
    ({"reference": {"parameters": {"x0": 0.1}}}, "reference.parameters.x1"),
])
def test_bad_study_files_give_one_line_errors_naming_the_key(tmp_path, capsys, change, key):
    raw = json.loads(json.dumps(SPHERE))
    raw.update(change)
    path = write_study(tmp_path / "bad.yaml", raw)
    assert main(["design", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert str(path) in err and f": {key}:" in err, err
    assert not (tmp_path / "out").exists()  # nothing started


def test_problem_bounds_are_checked(tmp_path):
    class Bad:
        names = ("a", "b")
        lower = np.array([0.0, 1.0])
        upper = np.array([1.0, 1.0])

    from multibody_control.design import problem as registry

    registry.register_problem("bad_bounds_test")(Bad)
    try:
        with pytest.raises(InputError, match=r"problem: bad_bounds_test: bounds of 'b'"):
            study_from_mapping({"problem": "bad_bounds_test"}, "bad.yaml")
    finally:
        del registry.PROBLEMS["bad_bounds_test"]


def test_output_directory_is_checked_before_the_study(tmp_path):
    study = sphere_study()
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is not a directory"):
        run_study(study, tmp_path / "file", kind="inprocess", progress=False)
    with pytest.raises(InputError, match="no checkpoint.pkl to resume"):
        run_study(study, tmp_path / "empty", kind="inprocess", progress=False, resume=True)
    run_study(study, tmp_path / "s", kind="inprocess", progress=False, plots=False)
    again = run_study(study, tmp_path / "s", kind="inprocess", progress=False, overwrite=True,
                      plots=False)
    assert again.complete


# -- the command ----------------------------------------------------------------------------------
def test_cli_end_to_end(tmp_path, capsys):
    raw = json.loads(json.dumps(SPHERE))
    raw["options"]["infeasible_above"] = 0.7
    path = write_study(tmp_path / "sphere.yaml", raw)
    out = tmp_path / "out"
    args = ["design", str(path), "--out", str(out), "--executor", "inprocess", "--quiet"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "best design: criterion" in printed
    for name in ("result.json", "evaluations.csv", "convergence.png", "design.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "convergence.png").read_bytes()[:4] == b"\x89PNG"
    result = json.loads((out / "result.json").read_text())
    with open(out / "evaluations.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == result["evaluations"] == 32
    assert list(rows[0])[:5] == ["iteration", "particle", "x0", "x1", "x2"]
    ok_rows = [r for r in rows if r["ok"] == "1"]
    best_row = min(ok_rows, key=lambda r: float(r["value"]))
    assert result["best"]["criterion"] == float(best_row["value"])
    assert result["best"]["parameters"] == {n: float(best_row[n]) for n in ("x0", "x1", "x2")}
    x = np.array([float(best_row[n]) for n in ("x0", "x1", "x2")])
    assert float(best_row["value"]) == pytest.approx(np.sum((x - 0.3) ** 2), rel=1e-15)
    assert result["failed"] == sum(r["ok"] == "0" for r in rows) > 0
    assert all("infeasible" in r["message"] for r in rows if r["ok"] == "0")
    assert result["seed"] == 5 and result["workers"] == 1
    assert result["versions"]["pymoo"]

    # an existing result is refused, then --seed + --overwrite replaces it
    assert main(args) == 2
    assert "already holds a study" in capsys.readouterr().err
    assert main(args + ["--seed", "9", "--overwrite"]) == 0
    assert json.loads((out / "result.json").read_text())["seed"] == 9

    # stop, then resume to the uninterrupted result
    out2 = tmp_path / "out2"
    args2 = ["design", str(path), "--out", str(out2), "--executor", "inprocess", "--quiet",
             "--seed", "9"]
    assert main(args2 + ["--stop-after", "1"]) == 0
    assert main(args2 + ["--resume"]) == 0
    a = [r[:-1] for r in csv.reader(open(out / "evaluations.csv"))]  # without CPU seconds
    b = [r[:-1] for r in csv.reader(open(out2 / "evaluations.csv"))]
    assert a == b


def test_cli_evaluates_one_design(tmp_path, capsys):
    path = write_study(tmp_path / "sphere.yaml", SPHERE)
    assert main(["design", "--evaluate", str(path), "--params", "x0=0.1", "x1=0.3",
                 "x2=0.5", "--out", str(tmp_path / "one")]) == 0
    printed = capsys.readouterr().out
    assert "criterion 0.08 (ok)" in printed  # (0.1-0.3)^2 + 0 + (0.5-0.3)^2
    doc = json.loads((tmp_path / "one" / "evaluation.json").read_text())
    assert doc["criterion"] == pytest.approx(0.08, rel=1e-12)
    assert (tmp_path / "one" / "design.png").exists()
    assert main(["design", "--evaluate", str(path), "--params", "x0=0.1"]) == 2
    assert "missing x1, x2" in capsys.readouterr().err
    assert main(["design", "--evaluate", str(path), "--params", "x0=0.1", "x1=3", "x2=0"]) == 2
    assert "'x1' = 3 is outside its bounds" in capsys.readouterr().err
    with pytest.raises(InputError, match="unknown design variable"):
        evaluate_one(load_study(path), {"x0": 0.0, "x1": 0.0, "x2": 0.0, "y": 1.0})


def test_shipped_study_files_load_and_name_the_book_designs():
    # The studies of Seifried (2014) Sect. 7.4.3; their reference designs are the printed
    # optima (Tables 7.3-7.6), which must lie in the bounds of the problems.
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "config" / "designs"
    swarms = {"passive_arm2_case1": (100, 22), "passive_arm4_case4": (300, 10)}  # as printed
    for name in ("passive_arm2_case1", "passive_arm2_case2", "passive_arm2_case3",
                 "passive_arm4_case4"):
        study = load_study(folder / f"{name}.yaml")
        assert study.problem == name
        ref = np.array([study.reference["parameters"][n] for n in study.names])
        assert np.all(ref >= study.lower) and np.all(ref <= study.upper)
        if name in swarms:
            assert (study.optimizer.particles, study.optimizer.iterations) == swarms[name]


def test_pool_workers_can_be_terminated_whatever_sigterm_state_they_inherit():
    # a broken pool ends its workers with terminate() and waits for them: a worker that
    # inherited an ignored SIGTERM (as from a forkserver started while it was ignored) would
    # block that wait, and the caller's exit, for good
    import signal

    from multibody_control.design.executors import _terminable

    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        _terminable()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    finally:
        signal.signal(signal.SIGTERM, before)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _stubborn_task() -> None:  # a worker that would outlive terminate(): SIGTERM ignored
    import signal
    import time

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)


def _dying_task() -> None:
    import time

    time.sleep(0.5)  # the stubborn task is running by then
    os._exit(3)


def test_a_broken_pool_is_ended_even_with_a_process_terminate_cannot_end():
    # a process left in a broken pool (Python 3.11 can start one while the pool breaks, after
    # the others were terminated) held the pool's manager thread, and the exit, for good
    with open_executor("pool", workers=2) as backend:
        pool = backend.executor
        manager = pool._executor_manager_thread
        stubborn = pool.submit(_stubborn_task)
        with pytest.raises(BrokenProcessPool):
            pool.submit(_dying_task).result(timeout=30)
        with pytest.raises(BrokenProcessPool):
            stubborn.result(timeout=30)
        backend.restart()
        manager.join(timeout=10)
        assert not manager.is_alive()
        assert backend.executor.submit(os.getpid).result(timeout=30) > 0
