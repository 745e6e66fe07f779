"""``multibody design``: run a design study, or evaluate one design of it.

Hooked into :func:`multibody_control.cli.build_parser` by :func:`add_parser`; :func:`run`
returns the exit status (0, 1 when no feasible design was found, 2 for bad input through the
main command's error handling, 130 when interrupted).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from multibody_dynamics.errors import InputError

__all__ = ["add_parser", "run"]

DEFAULT_OUT = "design_output"


def _params(values) -> dict[str, float]:
    out = {}
    for item in values or ():
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise InputError(f"--params {item!r}: expected name=value")
        try:
            out[name.strip()] = float(text)
        except ValueError:
            raise InputError(f"--params {name}: expected a number, got {text!r}") from None
    return out


def _integer_at_least(minimum: int, what: str):
    """argparse type: an integer >= ``minimum`` (``what`` names the expectation)."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return convert


_positive_int = _integer_at_least(1, "a positive integer")
_seed = _integer_at_least(0, "an integer >= 0")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``design`` subcommand to the ``multibody`` command's subparsers."""
    p = subparsers.add_parser(
        "design",
        help="optimal system design by particle swarm (Seifried 2014 Ch. 7) on any executor",
        description="Run a design study (config/designs/*.yaml): a seeded particle swarm "
        "(pymoo) over a registered design problem, evaluations in a local process pool "
        "(default: one process per core), in this process, or on Dask (--workers N starts a "
        "local cluster, --scheduler joins a running one).  A checkpoint after every "
        "iteration: --resume continues a stopped study to the same result.  Writes "
        "DIR/result.json, DIR/evaluations.csv, DIR/convergence.png and the problem's "
        "design.png / response.png.  With --evaluate, evaluates one design (--params).  Exit "
        "status 1 when no feasible design was found.",
    )
    p.add_argument("study", nargs="?", help="study YAML")
    p.add_argument("--evaluate", metavar="STUDY.yaml",
                   help="evaluate one design of this study (--params, default: the study's "
                   "reference design) instead of running the study")
    p.add_argument("--params", nargs="+", metavar="NAME=VALUE",
                   help="with --evaluate: the design, every variable by name")
    p.add_argument("--out", metavar="DIR",
                   help=f"output directory (default: {DEFAULT_OUT}/<study name>)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=_positive_int, metavar="N",
                       help="number of workers: a Dask LocalCluster of N processes (with "
                       "--executor pool: N pool processes)")
    where.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                       help="join a running Dask scheduler (dask scheduler / dask worker, or "
                       "dask-jobqueue) and evaluate on its workers")
    p.add_argument("--executor", choices=("pool", "inprocess", "dask"),
                   help="where evaluations run (default: pool; dask with --workers or "
                   "--scheduler)")
    p.add_argument("--seed", type=_seed, metavar="S", help="override the study's optimizer.seed")
    p.add_argument("--resume", action="store_true",
                   help="continue the study from DIR/checkpoint.pkl")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier study's outputs in DIR")
    p.add_argument("--stop-after", type=_positive_int, metavar="K",
                   help="stop after K iterations of this run (continue with --resume)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    return p


def _kind(args) -> str:
    if args.executor is not None:
        if args.scheduler is not None and args.executor != "dask":
            raise InputError(f"--scheduler needs the dask executor, not --executor "
                             f"{args.executor}")
        if args.workers is not None and args.executor == "inprocess" and args.workers != 1:
            raise InputError("--executor inprocess has one worker; drop --workers")
        return args.executor
    return "dask" if (args.workers is not None or args.scheduler is not None) else "pool"


def _format(value: float) -> str:
    return f"{value:.6g}" if math.isfinite(value) else str(value)


def run(args) -> int:
    """Run the ``design`` subcommand for parsed ``args``."""
    from .study import StudyInterrupted, evaluate_one, load_study, run_study

    if (args.study is None) == (args.evaluate is None):
        raise InputError("give either a study file to run or --evaluate STUDY.yaml")
    if args.evaluate is not None:
        return _evaluate(args, load_study(args.evaluate), evaluate_one)
    if args.params:
        raise InputError("--params goes with --evaluate")
    study = load_study(args.study).with_seed(args.seed)
    kind = _kind(args)
    out = Path(args.out) if args.out else Path(DEFAULT_OUT) / study.name
    try:
        result = run_study(study, out, kind=kind, workers=args.workers,
                           scheduler=args.scheduler, resume=args.resume,
                           overwrite=args.overwrite, stop_after=args.stop_after,
                           progress=not args.quiet)
    except StudyInterrupted as exc:
        r = exc.result
        print(f"multibody design: interrupted after iteration {r.iterations_done} of "
              f"{study.optimizer.iterations} ({len(r.records)} evaluations kept in {out}); "
              "continue with --resume", file=sys.stderr)
        return 130
    _print_summary(result)
    return 0 if result.best is not None and result.best.evaluation.ok else 1


def _print_summary(result) -> None:
    study, best = result.study, result.best
    failed = sum(not r.evaluation.ok for r in result.records)
    state = "done" if result.complete else f"stopped after iteration {result.iterations_done}"
    ex = result.executor
    where = ex["kind"] + (f", {ex.get('cluster')} {ex.get('scheduler')}" if ex["kind"] == "dask"
                          else "")
    print(f"{study.name}: {study.problem}, {state}: {len(result.records)} evaluations "
          f"({failed} infeasible or failed) in {result.wall_time:.1f} s; this run "
          f"{result.evaluations_per_second:.1f} evaluations/s on {ex['workers']} worker(s) "
          f"({where}); seed {study.optimizer.seed}")
    if best is None:
        print("no evaluation")
        return
    label = "best design" if best.evaluation.ok else "no feasible design; lowest criterion"
    print(f"{label}: criterion {_format(best.evaluation.value)} (iteration "
          f"{best.iteration}, particle {best.particle})"
          + (f": {best.evaluation.message}" if best.evaluation.message else ""))
    width = max(len(n) for n in study.names)
    ref = study.reference["parameters"] if study.reference else None
    for name, value, lo, hi in zip(study.names, best.x, study.lower, study.upper):
        extra = f"   reference {ref[name]:.6g}" if ref else ""
        print(f"  {name:{width}s} = {value:12.6g}   in [{lo:g}, {hi:g}]{extra}")
    if best.evaluation.info:
        print("  info: " + json.dumps(best.evaluation.info, default=str)[:400])
    if result.out is not None:
        print(f"wrote {result.out}/result.json, evaluations.csv, convergence.png")


def _evaluate(args, study, evaluate_one) -> int:
    if args.resume or args.overwrite or args.stop_after or args.workers or args.scheduler \
            or args.executor:
        raise InputError("--evaluate runs one design here: --resume, --overwrite, "
                         "--stop-after, --workers, --scheduler and --executor do not apply")
    params = _params(args.params)
    source = "given design"
    if not params:
        if study.reference is None:
            raise InputError(f"{study.path}: no reference design; give --params name=value "
                             f"for {', '.join(study.names)}")
        params = study.reference["parameters"]
        source = f"reference design ({study.reference['source'] or 'study file'})"
    x, evaluation = evaluate_one(study, params)
    print(f"{study.name}: {study.problem}, {source}")
    for name, value in zip(study.names, x):
        print(f"  {name} = {value:.6g}")
    status = "ok" if evaluation.ok else "not ok"
    print(f"criterion {_format(evaluation.value)} ({status})"
          + (f": {evaluation.message}" if evaluation.message else ""))
    if evaluation.info:
        print("info: " + json.dumps(evaluation.info, default=str))
    if args.out:
        _write_evaluation(Path(args.out), study, x, evaluation)
    return 0 if evaluation.ok else 1


def _write_evaluation(out: Path, study, x, evaluation) -> None:
    from multibody_dynamics.plotting import save_figure, subplots

    from .study import _jsonable

    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    doc = {"study": str(study.path), "problem": study.problem, "options": study.options,
           "parameters": dict(zip(study.names, x)), "criterion": evaluation.value,
           "ok": evaluation.ok, "message": evaluation.message, "info": evaluation.info}
    (out / "evaluation.json").write_text(json.dumps(_jsonable(doc), indent=2) + "\n")
    problem = study.make_problem()
    written = ["evaluation.json"]
    for method, name in (("plot_design", "design.png"), ("plot_response", "response.png")):
        fn = getattr(problem, method, None)
        if fn is None:
            continue
        fig, ax = subplots(figsize=(7, 4.2))
        fn(ax, x)
        save_figure(fig, out / name)
        written.append(name)
    print(f"wrote {out}/: {', '.join(written)}")
