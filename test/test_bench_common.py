"""The bench's shared study set-up (bench/common.py) and the cluster-size formula of
bench/bench_flexible_scale.py: no study is run."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # bench/ is a folder of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench.bench_flexible_scale import workers_needed  # noqa: E402
from bench.common import bench_study, selected  # noqa: E402

STUDY = ROOT / "config" / "designs" / "flexible_manipulator_book_output.yaml"


def test_bench_study_full_or_reduced(monkeypatch):
    monkeypatch.delenv("BENCH_X", raising=False)
    monkeypatch.setenv("BENCH_X_PARTICLES", "7")
    study, full = bench_study(STUDY, "BENCH_X", 30, 10)
    assert not full and study.name == "flexible_manipulator_book_output_reduced"
    assert (study.optimizer.particles, study.optimizer.iterations) == (7, 10)
    study, _ = bench_study(STUDY, "BENCH_X", 30, 10, {"damping": 0.05}, tag="z5")
    assert study.name.endswith("_z5_reduced") and study.options["damping"] == 0.05
    monkeypatch.setenv("BENCH_X", "full")  # the file as written: 100 x 20
    study, full = bench_study(STUDY, "BENCH_X", 30, 10)
    assert full and (study.optimizer.particles, study.optimizer.iterations) == (100, 20)


def test_selected_names_checked(monkeypatch):
    monkeypatch.setenv("BENCH_Y", "b, a")
    assert selected("BENCH_Y", ("a", "b", "c")) == ("b", "a")
    monkeypatch.setenv("BENCH_Y", "")
    assert selected("BENCH_Y", ("a", "b")) == ("a", "b")
    monkeypatch.setenv("BENCH_Y", "a,d")
    with pytest.raises(ValueError, match="BENCH_Y: unknown d"):
        selected("BENCH_Y", ("a", "b"))


def test_workers_formula():
    # bench_design's formula with a 5-minute budget, by hand: c = 0.05 s, efficiency 0.5,
    # Dask 10 s slower on 400 evaluations -> o = 2 * 10 / 400 = 0.05 s per task and worker;
    # local ceil(6300 * 0.05 / 0.5 / 300) = ceil(2.1) = 3,
    # Dask ceil(6300 * (0.1 + 0.05) / 300) = ceil(3.15) = 4
    pool = {"cpu_s_per_evaluation": 0.05, "efficiency": 0.5, "evaluations": 400,
            "wall_s": 10.0, "particles": 40, "iterations": 10, "full": False}
    out = workers_needed(pool, {"wall_s": 20.0})
    assert out["dask_overhead_s_per_task"] == pytest.approx(0.05)
    assert (out["workers_local"], out["workers_dask"]) == (3, 4)
    # Dask faster than the pool: no negative overhead
    assert workers_needed(pool, {"wall_s": 5.0})["workers_dask"] == 3
