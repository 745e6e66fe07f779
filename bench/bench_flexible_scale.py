"""Speed and scale of the flexible design studies (Seifried (2014) Sect. 7.3-7.5; issue 16 §4).

* ``parts``: one evaluation of each flexible problem, as its study file sets it up (book output
  design, book shape design, cart output design, cart shape design with the collocated output,
  cart serial and concurrent shape + output designs), and its parts, in CPU seconds of this
  process (best of :data:`REPEAT`, each repeat a new design 1e-9 relative away so that no
  per-design cache answers): the FE rebuild of the arms (element sections and FE matrices),
  the modal reduction (clamped eigenmodes), the modal data (SID), the chain (rebuilt chain with
  modal damping; Γ0 of the shaped arms for the combined outputs), the zero dynamics (step 1:
  servo, linearization, eigenvalues), the inversion (classical, compiled forward integration of
  the internal dynamics) and the criterion (positions of the end point, error (7.16)-(7.17)).
  The parts are timed by the library calls the evaluation makes, one at a time; their sum
  beside the whole evaluation shows that nothing is left out. A serial design builds its
  fixed arms once per process (no rebuild per evaluation), an output design its model once.
* ``dask``: the concurrent cart study and the book output study on a local pool of 2 and on a
  2-worker Dask LocalCluster in this run, both backends started and warmed up (the problem's
  model built in every worker) before either is timed: wall time, evaluations per second,
  efficiency = CPU seconds in the evaluations / (workers x wall) (the share of the workers'
  time spent evaluating; on this shared machine the other users' load lowers it), and whether
  both backends gave the same evaluations. Reduced swarms by default
  (:func:`bench.common.bench_study`, ``BENCH_FLEXSCALE_PARTICLES`` x ``..._ITERATIONS``,
  40 x 10); ``BENCH_FLEXSCALE=full`` runs the files as written (140 x 45 and 100 x 20).
* ``workers_5min``: the workers that finish the concurrent study as written (140 x 45 = 6300
  evaluations) in 5 minutes, by the formula of ``bench/bench_design.py``:
  ``N = ceil(E (c / efficiency) / T)`` for a local pool and ``ceil(E (c / efficiency + o) / T)``
  for Dask, with c the mean CPU seconds per evaluation of the concurrent study run here, the
  pool's efficiency at 2 workers and o the Dask overhead per task and worker
  (``2 (wall_dask - wall_pool) / evaluations``, 0 if Dask was faster); and once more with c
  and the efficiency of the full concurrent swarm (140 x 45 on a pool of 2, suite
  ``flexible_cart_shape``, its last complete run in bench/results.json) where there is one.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from bench.common import (
    bench_study,
    load_avg,
    per_call,
    previous_entries,
    run_bench_study,
    study_fields,
)

DESIGNS = Path(__file__).resolve().parent.parent / "config" / "designs"
REPEAT = 5
BUDGET_S = 300.0          # issue 16 §4: the concurrent study in 5 minutes
CONCURRENT_EVALUATIONS = 140 * 45   # Seifried (2014) Sect. 7.5.2.3: 140 particles x 45 iterations
WORKERS = 2


def _cpu(fn, repeat: int = REPEAT) -> float:
    """Best CPU time [s] of one call of ``fn`` (this thread)."""
    return per_call(fn, number=1, repeat=repeat, timer=time.thread_time)


def _study_problem(name: str):
    from multibody_control.design.study import load_study

    return load_study(DESIGNS / f"{name}.yaml").make_problem()


def _first_minimum_phase(problem, n: int = 400, seed: int = 0) -> np.ndarray:
    """The first design of a fixed random sample of the box that passes step 1 and step 2."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        x = problem.lower + (problem.upper - problem.lower) * rng.random(len(problem.names))
        if problem.evaluate(x).ok:
            return x
    raise RuntimeError(f"{problem!r}: no accepted design in {n} random ones")


def _cases() -> list:
    """(key, label, problem, design) of every flexible problem timed."""
    from multibody_control.design.flexible_cart_output import BOOK_DGAMMA_732
    from multibody_control.design.flexible_cart_shape import BOOK_PC_737
    from multibody_control.design.flexible_shape import BOOK_SHAPE_729

    book_output = _study_problem("flexible_manipulator_book_output")
    book_shape = _study_problem("flexible_manipulator_book_shape")
    return [
        ("book_output", "book output design (Sect. 7.3.2), a minimum-phase Γ of the box",
         book_output, _first_minimum_phase(book_output)),
        ("book_shape", "book shape design (Sect. 7.5.1.2 route), collocated output",
         book_shape, book_shape.initial * np.array([1.5, 1.2, 0.8, 0.5, 1.3, 1.0, 0.7, 0.5])),
        ("cart_output", "cart output design (Sect. 7.5.2.2), ΔΓ (7.32)",
         _study_problem("flexible_cart_manipulator_output"), BOOK_DGAMMA_732),
        ("cart_shape", "cart shape design, collocated output, heights (7.29)",
         _study_problem("flexible_cart_manipulator_shape"), BOOK_SHAPE_729),
        ("cart_serial", "cart serial design: arms (7.29) fixed, ΔΓ of (7.37)",
         _study_problem("flexible_cart_manipulator_serial"), BOOK_PC_737[8:]),
        ("cart_concurrent", "cart concurrent design (7.37), 14 variables",
         _study_problem("flexible_cart_manipulator_concurrent"), BOOK_PC_737),
    ]


def _rebuild_parts(problem, x) -> dict:
    """CPU seconds of the rebuild's parts for the design ``x`` (summed over the arms), and the
    rebuilt chain; {} for a problem whose arms are not rebuilt per evaluation."""
    from multibody_control.design.flexible_shape import FlexibleShapeProblem
    from multibody_dynamics.flexible.beam import assemble_beam
    from multibody_dynamics.flexible.damping import with_modal_damping
    from multibody_dynamics.flexible.modal import clamped_modes
    from multibody_dynamics.flexible.output import arm_modal_data, chain_combined_output
    from multibody_dynamics.flexible.shape import rebuild_chain
    from multibody_dynamics.flexible.sid import modal_data_from_beam

    shape = problem if isinstance(problem, FlexibleShapeProblem) else getattr(problem, "shape",
                                                                               None)
    if shape is None or getattr(problem, "fixed", None) is not None:
        return {}
    m = shape.model()
    heights, _ = problem.heights(x)
    out = dict.fromkeys(("fe_rebuild", "modal_reduction", "sid"), 0.0)
    data = {}
    for name, h in heights.items():
        arm, b = m.arms[name], m.builders[name]
        beam = assemble_beam(b.beam_config(h))
        basis = clamped_modes(beam, arm.modes)

        def sid(basis=basis, arm=arm):
            if arm.proximal is None and arm.distal is None:
                return modal_data_from_beam(basis)
            return arm_modal_data(basis, arm.proximal, arm.distal)

        out["fe_rebuild"] += _cpu(lambda b=b, h=h: assemble_beam(b.beam_config(h)))
        out["modal_reduction"] += _cpu(lambda beam=beam, arm=arm: clamped_modes(beam, arm.modes))
        out["sid"] += _cpu(sid)
        data[name] = sid()
    combined = shape is not problem  # a combined output: Γ0 of the shaped arms too

    def chain():
        c = rebuild_chain(m.base.config, data)
        c = type(c)(with_modal_damping(c.config, shape.damping))
        if combined:
            chain_combined_output(c)
        return c

    out["chain"] = _cpu(chain)
    return out


def _inversion_parts(problem, x) -> dict:
    """CPU seconds of step 1 (where the problem has it), the classical inversion and the
    criterion of ``x`` (the chain of ``x`` built and cached before)."""
    from multibody_control.design.flexible_shape import FlexibleShapeProblem
    from multibody_control.inversion.flexible import FlexibleServo

    out = {}
    problem.evaluate(x)  # the chain of x built (and cached where the problem caches it)
    if isinstance(problem, FlexibleShapeProblem):  # collocated output: no step 1
        chain, _ = problem.chain(x)
        s = FlexibleServo(chain, np.zeros((chain.nq_r, chain.nq_e)))
    else:
        out["zero_dynamics"] = _cpu(lambda: problem.zero_dynamics(x))
        s = problem.servo(x)
    m, ne = problem.model(), s.nu_int

    def invert():
        return s.integrate_internal(m.ytraj, s.equilibrium(m.y[0]), m.t, problem.rtol,
                                    1e-3 * problem.rtol, 10 * problem.dt, problem.limit)

    eta, ok, _ = invert()
    if not ok:
        raise RuntimeError(f"{problem!r}: the inversion of the timed design failed")

    def criterion():
        n = len(eta)
        q = np.hstack([m.y[:n] - eta[:, :ne] @ s.gamma.T, eta[:, :ne]])
        return float(np.linalg.norm(m.r_d[:n] - s.chain.point_positions(q, m.body), axis=1).max())

    out["inversion"] = _cpu(invert)
    out["criterion"] = _cpu(criterion)
    return out


def _parts() -> list:
    entries = []
    for key, label, problem, x in _cases():
        ev = problem.evaluate(x)  # warm: model built, kernels compiled
        if not ev.ok:
            raise RuntimeError(f"{key}: the timed design is rejected ({ev.message})")
        designs = iter([x * (1 + 1e-9 * k) for k in range(1, 100)])
        whole = _cpu(lambda p=problem, d=designs: p.evaluate(next(d)))
        parts = {**_rebuild_parts(problem, x), **_inversion_parts(problem, x)}
        entries.append({"name": f"flexscale_parts_{key}", "problem": key, "label": label,
                        "evaluation_cpu_s": whole, **{f"{k}_cpu_s": v for k, v in parts.items()},
                        "sum_of_parts_cpu_s": sum(parts.values()),
                        "criterion_mm": 1e3 * ev.value, "load_avg_1min": load_avg()})
    return entries


#: studies on both backends: (key, study file, reduced particles, reduced iterations)
BACKEND_STUDIES = (("cart_concurrent", "flexible_cart_manipulator_concurrent", 40, 10),
                   ("book_output", "flexible_manipulator_book_output", 40, 10))


def _on_backends(key: str, file: str, particles: int, iterations: int) -> list:
    from multibody_control.design.executors import evaluate_batch, open_executor

    study, full = bench_study(DESIGNS / f"{file}.yaml", "BENCH_FLEXSCALE", particles,
                              iterations)
    problem = study.make_problem()
    rng = np.random.default_rng(1)
    X = study.lower + (study.upper - study.lower) * rng.random((4 * WORKERS, len(study.names)))
    backends = {"pool2": open_executor("pool", WORKERS), "dask2": open_executor("dask", WORKERS)}
    results = {}
    try:
        for backend in backends.values():  # processes started, the model built in each
            evaluate_batch(backend, problem, X)
        for label, backend in backends.items():
            results[label] = run_bench_study(study, executor=backend)
    finally:
        for backend in backends.values():
            backend.close()
    same = len({tuple(r.evaluation.value for r in res.records) for res in results.values()}) == 1
    entries = []
    for label, result in results.items():
        f = study_fields(study, result, full)
        best = result.best
        entries.append({"name": f"flexscale_{key}_{label}", "study": key, "backend": label,
                        "workers": WORKERS, **f,
                        "efficiency": f["cpu_s_in_evaluations"] / (WORKERS * f["wall_s"]),
                        "best_ok": bool(best is not None and best.evaluation.ok),
                        "best_error_mm": 1e3 * best.evaluation.value
                        if best is not None and best.evaluation.ok else None,
                        "same_evaluations_on_both_backends": same})
    pool, dask = entries
    dask["ratio_to_pool"] = dask["wall_s"] / pool["wall_s"]
    return entries


def workers_needed(pool: dict, dask: dict, evaluations: int = CONCURRENT_EVALUATIONS,
                   budget_s: float = BUDGET_S) -> dict:
    """Workers to finish ``evaluations`` in ``budget_s`` from the two backends' measured runs
    of one study (the formula of bench/bench_design.py, module docstring)."""
    c = pool["cpu_s_per_evaluation"]
    efficiency = min(pool["efficiency"], 1.0)
    overhead = max(0.0, WORKERS * (dask["wall_s"] - pool["wall_s"]) / pool["evaluations"])
    return {"evaluations": evaluations, "budget_s": budget_s, "cpu_s_per_evaluation": c,
            "parallel_efficiency": efficiency, "dask_overhead_s_per_task": overhead,
            "workers_local": math.ceil(evaluations * c / efficiency / budget_s),
            "workers_dask": math.ceil(evaluations * (c / efficiency + overhead) / budget_s),
            "measured_on": f"{pool['particles']} x {pool['iterations']} swarm "
                           f"({pool['evaluations']} evaluations)", "full": pool["full"]}


def _from_full_swarm(pool: dict, dask: dict) -> list:
    """The estimate again from the full concurrent swarm of suite ``flexible_cart_shape`` (its
    last run in bench/results.json, on a pool of 2, if complete): its CPU per evaluation and
    efficiency, with the Dask overhead per task measured here."""
    full = previous_entries("flexible_cart_shape", ["cartshape_study_concurrent"])
    if not full or not full[0].get("full") or not full[0].get("complete"):
        return []
    e = full[0]
    swarm = {**e, "efficiency": e["cpu_s_in_evaluations"] / (WORKERS * e["wall_s"])}
    overhead = max(0.0, WORKERS * (dask["wall_s"] - pool["wall_s"]) / pool["evaluations"])
    # the Dask run of the same swarm, had it the overhead measured here
    as_dask = {"wall_s": swarm["wall_s"] + overhead * swarm["evaluations"] / WORKERS}
    return [{"name": "flexscale_workers_5min_cart_concurrent_full_swarm",
             **workers_needed(swarm, as_dask), "load_avg_1min": e.get("load_avg_1min")}]


def run() -> list:
    entries = _parts()
    for spec in BACKEND_STUDIES:
        pool, dask = _on_backends(*spec)
        entries += [pool, dask]
        if spec[0] == "cart_concurrent":
            entries.append({"name": "flexscale_workers_5min_cart_concurrent",
                            **workers_needed(pool, dask), "load_avg_1min": load_avg()})
            entries += _from_full_swarm(pool, dask)
    return entries


if __name__ == "__main__":  # pragma: no cover
    for e in run():
        print(e)
