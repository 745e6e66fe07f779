"""Design studies on Dask: a LocalCluster (``--workers``), and a cluster started from the command
line (``dask scheduler`` + two ``dask worker`` processes on 127.0.0.1) joined with
``--scheduler``, one of whose workers is killed in the middle of a study.

Oracle: the same study run in this process; the records must be identical, value for value
(the problems are pure and the swarm is seeded, so a resubmitted evaluation changes nothing).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from multibody_control.cli import main
from multibody_control.design.study import run_study, study_from_mapping

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 60.0  # s, for the scheduler file and the workers on a busy 2-core machine


def table(result):
    return [(r.iteration, r.particle, *r.x.tolist(), r.evaluation.value, r.evaluation.ok,
             r.evaluation.message) for r in result.records]


def sphere(cost=0.0, **options):
    return study_from_mapping({"problem": "sphere", "options": {"dim": 3, "cost": cost,
                                                                **options},
                               "optimizer": {"particles": 8, "iterations": 4, "seed": 11}},
                              name="sphere_dask")


def test_local_cluster_gives_the_in_process_result_failures_included():
    # x0 > 0.6 raises inside evaluate on the Dask worker: ok=False records, same as here
    study = sphere(raise_above=0.6)
    reference = run_study(study, kind="inprocess", progress=False)
    assert any(not r.evaluation.ok for r in reference.records)
    result = run_study(study, kind="dask", workers=2, progress=False)
    assert result.executor["kind"] == "dask" and result.executor["cluster"] == "LocalCluster"
    assert result.executor["workers"] == 2
    assert table(result) == table(reference)
    assert all("RuntimeError: sphere: deliberate failure" in r.evaluation.message
               for r in result.records if not r.evaluation.ok)


def _dask(*args) -> list[str]:
    exe = Path(sys.executable).parent / "dask"
    return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "dask", *args]


@pytest.fixture
def cli_cluster(tmp_path):
    """``dask scheduler`` and two ``dask worker`` processes (no nanny: killing one is losing
    it) on 127.0.0.1; everything is stopped in the finalizer."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        "OPENBLAS_NUM_THREADS": "1"}
    scheduler_file = tmp_path / "scheduler.json"
    procs = {}
    logs = []

    def start(name, args):
        log = open(tmp_path / f"{name}.log", "wb")
        logs.append(log)
        procs[name] = subprocess.Popen(args, env=env, cwd=ROOT, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)

    try:
        start("scheduler", _dask("scheduler", "--host", "127.0.0.1", "--port", "0",
                                 "--no-dashboard", "--scheduler-file", str(scheduler_file)))
        deadline = time.monotonic() + START_TIMEOUT
        while not scheduler_file.exists() or not scheduler_file.read_text().strip():
            assert procs["scheduler"].poll() is None, "dask scheduler exited"
            assert time.monotonic() < deadline, "dask scheduler did not start in time"
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        for name in ("w1", "w2"):
            start(name, _dask("worker", "--scheduler-file", str(scheduler_file), "--nthreads",
                              "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
                              "--name", name, "--death-timeout", "60"))
        from distributed import Client

        with Client(address, timeout=START_TIMEOUT) as client:
            client.wait_for_workers(2, timeout=START_TIMEOUT)
        yield address, procs
    finally:
        # workers first (a worker whose scheduler is gone waits for it), then the scheduler;
        # SIGTERM, then SIGKILL
        for name in sorted(procs, key=lambda n: n == "scheduler"):
            proc = procs[name]
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for log in logs:
            log.close()


@pytest.mark.slow
def test_cluster_from_the_command_line_survives_a_killed_worker(cli_cluster, tmp_path, capsys):
    address, procs = cli_cluster
    # 8 particles x 4 iterations at 20 ms of CPU each: >= 0.08 s per iteration on two workers,
    # so a kill 0.05 s after the first iteration falls into the second or third
    study = sphere(cost=0.02)
    reference = run_study(study, kind="inprocess", progress=False)

    # the command joins the cluster and gives the in-process result
    path = tmp_path / "sphere.yaml"
    path.write_text(json.dumps({"problem": "sphere", "options": {"dim": 3, "cost": 0.02},
                                "optimizer": {"particles": 8, "iterations": 4, "seed": 11}}))
    assert main(["design", str(path), "--scheduler", address, "--out", str(tmp_path / "o"),
                 "--quiet"]) == 0
    saved = json.loads((tmp_path / "o" / "result.json").read_text())
    assert saved["executor"] == {"kind": "dask", "workers": 2, "scheduler": address,
                                 "cluster": "external"}
    best = min((r for r in reference.records), key=lambda r: r.evaluation.value)
    assert saved["best"]["criterion"] == best.evaluation.value
    capsys.readouterr()

    # kill worker w1 with SIGKILL in the middle of the second iteration
    killed = threading.Event()
    times = {}

    def kill_soon(k, records):
        times[k] = time.monotonic()
        if k == 1:
            def kill():
                times["kill"] = time.monotonic()
                os.kill(procs["w1"].pid, signal.SIGKILL)
                killed.set()
            threading.Timer(0.05, kill).start()

    result = run_study(study, kind="dask", scheduler=address, progress=False,
                       on_iteration=kill_soon)
    assert killed.is_set()
    assert times[1] < times["kill"] < times[4]  # while the swarm's evaluations were running
    assert procs["w1"].wait(timeout=10) == -signal.SIGKILL
    assert result.executor["workers"] == 1  # the scheduler saw the loss
    assert table(result) == table(reference)
    assert all(r.evaluation.ok for r in result.records)
