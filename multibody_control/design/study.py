"""Design studies: a study file -> particle swarm over a design problem -> result, CSV, plots.

Study file schema (``config/designs/*.yaml``; every key validated by the scenario schema checker
:mod:`multibody_control.scenarios.schema`, so that unknown keys, wrong types, NaN and ±inf are
errors naming the file and the key in the words of every other YAML file of the suite)::

    description: free text
    problem: passive_arm2_case1     # a registered design problem (problem.get_problem)
    options: {...}                  # keyword options of that problem
    bounds:                         # optional: narrower bounds than the problem's own,
      m_a2: [0.0, 5.0]              #   [lower, upper] per named design variable
    optimizer:                      # optimizer.SwarmSettings
      particles: 100                #   designs per iteration
      iterations: 22                #   swarm iterations, the initial sample included
      seed: 1                       #   same seed, same result (any executor, any workers)
      w: 0.9                        #   eq. 7.11 weights (initial values if adaptive)
      c1: 2.0
      c2: 2.0
      adaptive: true
      max_velocity_rate: 0.2
      initial_velocity: random      #   random | zero
      perturb_best: true
      violation: eigenvalues  #   info key ranking infeasible designs (see SwarmSettings)
    reference:                      # optional: a published design to compare with
      source: Seifried (2014) Table 7.3
      parameters: {m_a2: 1.2, ...}  #   every design variable
      criterion: 0.0123             #   optional: the published criterion

A run (:func:`run_study`) asks the swarm for an iteration's designs, evaluates them through an
executor (:mod:`.executors`), tells the swarm the criteria, and after every iteration writes a
checkpoint (``checkpoint.pkl``: the swarm with its random state and every evaluation so far;
temporary file + rename, so a crash leaves the previous one whole). ``resume=True`` continues
from it; the result is the same as that of an uninterrupted run. Outputs in the study's
directory: ``result.json``, ``evaluations.csv``, ``convergence.png`` and, where the problem
offers ``plot_design(ax, x)`` / ``plot_response(ax, x)``, ``design.png`` / ``response.png``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
import os
import pickle
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from multibody_dynamics.errors import InputError
from multibody_dynamics.interruptible import INTERRUPTS, reraise_unless_interrupt
from multibody_dynamics.yaml_io import number_problem

from ..scenarios import schema
from .executors import StudyExecutor, evaluate_batch, open_executor
from .optimizer import ParticleSwarm, SwarmSettings
from .problem import DesignProblem, Evaluation, check_design_vector, get_problem

__all__ = ["CHECKPOINT", "OUTPUTS", "EvaluationRecord", "Study", "StudyInterrupted",
           "StudyResult", "check_output", "evaluate_one", "load_study", "run_study",
           "stability_violation", "study_from_mapping", "write_plots"]

_TOP = {"description", "problem", "options", "bounds", "optimizer", "reference"}
_REFERENCE = {"source", "parameters", "criterion"}
_SETTINGS = {f.name: f.type for f in fields(SwarmSettings)}
#: the least value of the integer settings (SwarmSettings checks the rest)
_SETTING_MINIMA = {"particles": 1, "iterations": 1, "seed": 0}
CHECKPOINT = "checkpoint.pkl"
RESULT = "result.json"
EVALUATIONS = "evaluations.csv"
#: every file a study writes in its directory
OUTPUTS = (RESULT, EVALUATIONS, CHECKPOINT, "convergence.png", "design.png", "response.png")
_CHECKPOINT_FORMAT = 1
_LOG = logging.getLogger(__name__)


# -- the study file ------------------------------------------------------------------------------
# checked by the scenario schema checker, so that a value gets the same answer in every YAML kind
err = schema.err


@dataclass(frozen=True)
class Study:
    """A validated study (see the module docstring for the file schema).

    Attributes
    ----------
    name : str
        The file's stem (default output directory name).
    problem : str
        Registered problem name.
    options : dict
        The problem's options.
    names : tuple of str
        Design variables.
    lower, upper : ndarray, shape (n,)
        The search box: the problem's bounds, narrowed by the file's ``bounds``.
    optimizer : SwarmSettings
        Swarm settings.
    """

    name: str
    problem: str
    options: dict
    names: tuple
    lower: np.ndarray
    upper: np.ndarray
    optimizer: SwarmSettings
    description: str = ""
    reference: dict | None = None
    path: Path | None = None
    _problem: DesignProblem | None = field(default=None, repr=False, compare=False)

    def make_problem(self) -> DesignProblem:
        """The design problem (built once per study object)."""
        return self._problem if self._problem is not None else get_problem(self.problem,
                                                                             **self.options)

    def with_seed(self, seed: int | None) -> Study:
        """This study with another swarm seed (None: unchanged)."""
        if seed is None:
            return self
        settings = SwarmSettings(**{**self.optimizer.as_dict(), "seed": seed})
        return Study(**{**{f.name: getattr(self, f.name) for f in fields(self)},
                        "optimizer": settings})

    @property
    def bounds(self) -> dict[str, list[float]]:
        """``{name: [lower, upper]}``."""
        return {n: [float(lo), float(hi)] for n, lo, hi in zip(self.names, self.lower,
                                                               self.upper)}

    def fingerprint(self) -> str:
        """Hash of everything that fixes the run but the iteration count (what a checkpoint
        must match to be resumed)."""
        settings = {k: v for k, v in self.optimizer.as_dict().items() if k != "iterations"}
        text = json.dumps({"problem": self.problem, "options": self.options,
                           "bounds": self.bounds, "optimizer": settings}, sort_keys=True,
                          default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_study(path: str | Path) -> Study:
    """Read and validate a study file; InputError naming the file and the key otherwise."""
    path = Path(path)
    return study_from_mapping(schema.read_scenario_file(path, "study"), path)


def study_from_mapping(raw, path: str | Path | None = None, name: str | None = None) -> Study:
    """Validate a study given as a mapping (the content of a study file).

    ``path`` names the source in error messages; the problem is built here, so that bad options
    and bad bounds are reported before any work starts.
    """
    where = str(path) if path is not None else "study"
    problem_name, description, options = _study_header(where, raw)
    settings = _swarm_settings(where, raw.get("optimizer") or {})
    problem = _make_problem(where, problem_name, options)
    names, lower, upper = _problem_bounds(where, problem_name, problem)
    _narrow_bounds(where, raw.get("bounds") or {}, names, lower, upper)
    reference = raw.get("reference")
    if reference is not None:
        reference = _reference(where, reference, names, lower, upper)
    return Study(name=name or (Path(path).stem if path is not None else problem_name),
                 problem=problem_name, options=dict(options), names=names, lower=lower,
                 upper=upper, optimizer=settings, description=description,
                 reference=reference, path=Path(path) if path is not None else None,
                 _problem=problem)


def _study_header(where, raw) -> tuple[str, str, dict]:
    """The file's top level: known keys only; the problem name, description and options."""
    schema.mapping(where, "", raw, _TOP)
    if "problem" not in raw:
        raise err(where, "problem", "missing (the name of a registered design problem)")
    problem_name = schema.text(where, "problem", raw["problem"])
    description = schema.text(where, "description", raw.get("description", ""))
    options = raw.get("options") or {}
    if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
        raise err(where, "options", f"expected a mapping of option names, got {options!r}")
    return problem_name, description, options


def _swarm_settings(where, optimizer) -> SwarmSettings:
    """The ``optimizer`` section: known keys of the expected types, then SwarmSettings' checks."""
    schema.mapping(where, "optimizer", optimizer, _SETTINGS)
    checked = {name: _setting(where, name, value) for name, value in optimizer.items()}
    try:
        return SwarmSettings(**checked)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None


def _setting(where, name: str, value):
    """One swarm setting checked against the type of its SwarmSettings field."""
    key, kind = f"optimizer.{name}", _SETTINGS[name]
    if kind == "int":
        return schema.integer(where, key, value, minimum=_SETTING_MINIMA[name])
    if kind == "float":
        return schema.number(where, key, value, minimum=0.0)
    if kind == "bool":
        return schema.flag(where, key, value)
    return schema.text(where, key, value, nullable=kind == "str | None")


def _make_problem(where, problem_name: str, options: dict) -> DesignProblem:
    """The registered problem built with ``options`` (its errors named ``problem``/``options``)."""
    try:
        return get_problem(problem_name, **options)
    except InputError as exc:
        key = "problem" if "unknown design problem" in str(exc) else "options"
        raise err(where, key, " ".join(str(exc).split())) from None
    except TypeError as exc:  # an option the problem does not take
        raise err(where, "options", f"{problem_name}: {' '.join(str(exc).split())}") from None


def _narrow_bounds(where, bounds, names: tuple, lower: np.ndarray, upper: np.ndarray) -> None:
    """The ``bounds`` section: narrow ``lower``/``upper`` in place, inside the problem's box."""
    if not isinstance(bounds, dict):
        raise err(where, "bounds", f"expected a mapping name: [lower, upper], got {bounds!r}")
    for key, pair in bounds.items():
        if key not in names:
            raise err(where, f"bounds.{key}", "unknown design variable; expected one of "
                      f"{', '.join(names)}")
        i = names.index(key)
        if not (isinstance(pair, list) and len(pair) == 2):
            raise err(where, f"bounds.{key}", f"expected [lower, upper] (two finite numbers), "
                      f"got {pair!r}")
        lo, hi = (schema.number(where, f"bounds.{key}[{j}]", v) for j, v in enumerate(pair))
        if not lo < hi:
            raise err(where, f"bounds.{key}", f"expected lower < upper, got [{lo:g}, {hi:g}]")
        if lo < lower[i] or hi > upper[i]:
            raise err(where, f"bounds.{key}", f"[{lo:g}, {hi:g}] is outside the problem's "
                      f"bounds [{lower[i]:g}, {upper[i]:g}]")
        lower[i], upper[i] = lo, hi


def _problem_bounds(where, name, problem) -> tuple[tuple, np.ndarray, np.ndarray]:
    """The problem's names and bounds after checking them (a problem's own error is named)."""
    names = tuple(getattr(problem, "names", ()))
    if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise err(where, "problem", f"{name}: expected distinct design variable names, got "
                   f"{names!r}")
    lower = np.asarray(problem.lower, dtype=float).copy()
    upper = np.asarray(problem.upper, dtype=float).copy()
    if lower.shape != (len(names),) or upper.shape != (len(names),):
        raise err(where, "problem", f"{name}: expected bounds of shape ({len(names)},), got "
                   f"{lower.shape} and {upper.shape}")
    for n, lo, hi in zip(names, lower, upper):
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise err(where, "problem", f"{name}: bounds of {n!r}: expected finite lower < "
                       f"upper, got [{lo:g}, {hi:g}]")
    return names, lower, upper


def _reference(where, reference, names, lower, upper) -> dict:
    schema.mapping(where, "reference", reference, _REFERENCE)
    source = schema.text(where, "reference.source", reference.get("source", ""))
    params = reference.get("parameters")
    if not isinstance(params, dict):
        raise err(where, "reference.parameters", f"expected a mapping name: value, got "
                  f"{params!r}")
    missing = [n for n in names if n not in params]
    if missing:
        raise err(where, f"reference.parameters.{missing[0]}", "missing")
    for key, value in params.items():
        if key not in names:
            raise err(where, f"reference.parameters.{key}", "unknown design variable; "
                      f"expected one of {', '.join(names)}")
        schema.number(where, f"reference.parameters.{key}", value)
    criterion = reference.get("criterion")
    if criterion is not None:
        criterion = schema.number(where, "reference.criterion", criterion)
    return {"source": source, "parameters": {n: float(params[n]) for n in names},
            "criterion": criterion}


# -- records and result --------------------------------------------------------------------------
@dataclass(frozen=True)
class EvaluationRecord:
    """One evaluated design: where the swarm asked for it and what it gave.

    ``seconds`` is the CPU time of the evaluation in its worker.
    """

    iteration: int  # 1-based; 1 is the initial sample
    particle: int  # index in the swarm, 0-based
    x: np.ndarray
    evaluation: Evaluation
    seconds: float = 0.0


@dataclass(frozen=True)
class StudyResult:
    """What a study found (``result.json`` holds the same).

    Attributes
    ----------
    best : EvaluationRecord or None
        The best feasible (``ok``) evaluation, first found on ties; if none is feasible, the
        lowest criterion of all (``best.evaluation.ok`` is then False).
    records : list of EvaluationRecord
        Every evaluation, in (iteration, particle) order.
    complete : bool
        All iterations done (False after ``stop_after``).
    history : list of float
        Best feasible criterion after each iteration (``inf`` before the first).
    """

    study: Study
    best: EvaluationRecord | None
    records: list
    iterations_done: int
    complete: bool
    history: list
    wall_time: float
    run_wall_time: float
    run_evaluations: int
    executor: dict
    out: Path | None = None

    @property
    def parameters(self) -> dict[str, float]:
        """Best design by name."""
        return {n: float(v) for n, v in zip(self.study.names, self.best.x)}

    @property
    def evaluations_per_second(self) -> float:
        """Evaluations per wall-clock second in this run (resumed runs: their own part)."""
        return self.run_evaluations / self.run_wall_time if self.run_wall_time > 0 else 0.0


def stability_violation(eigenvalues) -> float:
    """How far a set of eigenvalues is from all lying in the open left half-plane.

    ``sum over Re(lambda) >= 0 of min(r, 1/r)``, ``r = Re(lambda) * 1 s``: each unstable
    eigenvalue counts at most 1, and its share vanishes both where it crosses the imaginary
    axis (r -> 0) and where it crosses through infinity (r -> inf; the zero dynamics of a
    passive link lose an eigenvalue to infinity where the leading coefficient a2 of
    Seifried (2014) eq. 7.5 changes sign), so that the measure falls toward either kind of
    stability boundary. (``max Re(lambda)`` alone grows toward the second kind and leads a
    swarm away from the feasible designs.)

    Parameters
    ----------
    eigenvalues : sequence of complex or of [re, im]
        The eigenvalues [1/s] (``Evaluation.info['eigenvalues']`` format).
    """
    re = np.array([complex(*e).real if isinstance(e, (list, tuple)) else complex(e).real
                   for e in eigenvalues], dtype=float)
    unstable = re[re >= 0]
    if np.isnan(re).any():
        return math.inf
    with np.errstate(divide="ignore"):
        return float(np.sum(np.minimum(unstable, 1.0 / unstable)))


def _violation(evaluation: Evaluation, key: str | None) -> float:
    """The swarm's constraint violation of one evaluation (see ``SwarmSettings.violation``).

    0 when ``ok``; for an infeasible design ``max(info[key], 0)`` when that is a number,
    :func:`stability_violation` of it when it is a list of eigenvalues, ``inf`` when the
    evaluation carries no such entry (it raised, its worker died); 0 for every design when
    ``key`` is None (the penalty alone ranks them).
    """
    if evaluation.ok or key is None:
        return 0.0
    value = evaluation.info.get(key)
    if number_problem(value, infinite=True) is None:  # a number, inf included, not NaN
        return max(float(value), 0.0)
    if isinstance(value, (list, tuple)):
        try:
            return stability_violation(value)
        except (TypeError, ValueError):
            return math.inf
    return math.inf


def _best(records) -> EvaluationRecord | None:
    best = None
    for r in records:
        key = (not r.evaluation.ok, r.evaluation.value)
        if best is None or key < (not best.evaluation.ok, best.evaluation.value):
            best = r
    return best


def _history(records, iterations_done) -> list[float]:
    out, best = [], math.inf
    by_iteration: dict[int, list] = {}
    for r in records:
        by_iteration.setdefault(r.iteration, []).append(r)
    for k in range(1, iterations_done + 1):
        for r in by_iteration.get(k, ()):
            if r.evaluation.ok and r.evaluation.value < best:
                best = r.evaluation.value
        out.append(best)
    return out


# -- outputs --------------------------------------------------------------------------------------
def check_output(out: str | Path, resume: bool = False, overwrite: bool = False) -> Path:
    """Check a study's output directory before any work starts; create it.

    Raises
    ------
    InputError
        ``out`` is a file, not writable, holds a study's outputs while neither ``resume`` nor
        ``overwrite`` is set, or has no checkpoint to resume.
    """
    out = Path(out)
    if resume and overwrite:
        raise InputError("resume and overwrite exclude each other")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a directory")
    existing = [name for name in OUTPUTS if (out / name).exists()]
    if resume:
        if not (out / CHECKPOINT).is_file():
            raise InputError(f"--out {out}: no {CHECKPOINT} to resume from")
    elif existing and not overwrite:
        raise InputError(f"--out {out}: already holds a study ({', '.join(existing)}); pass "
                         "--resume to continue it or --overwrite to replace it")
    for name in OUTPUTS:
        if (out / name).is_dir():
            raise InputError(f"--out {out}: {name} is a directory, expected a file or nothing")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise InputError(f"--out {out}: not writable ({exc.strerror or exc})") from None
    if overwrite:
        for name in existing:
            (out / name).unlink()
    return out


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, flush it to disk, rename it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _jsonable(value):
    """Plain JSON: numpy to Python, non-finite floats to strings ('inf', '-inf', 'nan')."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    return value


def _versions() -> dict:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for dist in ("multibody_suite", "numpy", "pymoo", "dask", "distributed", "pin"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _evaluation_dict(evaluation: Evaluation) -> dict:
    return {"criterion": evaluation.value, "ok": evaluation.ok, "message": evaluation.message,
            "info": evaluation.info}


def result_dict(result: StudyResult) -> dict:
    """The content of ``result.json``."""
    study, best = result.study, result.best
    records = result.records
    out = {
        "study": str(study.path) if study.path else None,
        "name": study.name,
        "description": study.description,
        "problem": study.problem,
        "options": study.options,
        "complete": result.complete,
        "iterations_done": result.iterations_done,
        "iterations": study.optimizer.iterations,
        "particles": study.optimizer.particles,
        "seed": study.optimizer.seed,
        "best": None,
        "evaluations": len(records),
        "failed": sum(not r.evaluation.ok for r in records),
        "wall_time_s": result.wall_time,
        "run_wall_time_s": result.run_wall_time,
        "run_evaluations": result.run_evaluations,
        "evaluations_per_second": result.evaluations_per_second,
        "executor": result.executor,
        "workers": result.executor.get("workers"),
        "bounds": study.bounds,
        "optimizer": study.optimizer.as_dict(),
        "history": result.history,
        "reference": study.reference,
        "versions": _versions(),
        "fingerprint": study.fingerprint(),
    }
    if best is not None:
        out["best"] = {"parameters": result.parameters, **_evaluation_dict(best.evaluation),
                       "min_phase": best.evaluation.info.get("min_phase"),
                       "iteration": best.iteration, "particle": best.particle}
    return _jsonable(out)


def _csv_text(study: Study, records) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["iteration", "particle", *study.names, "value", "ok", "message", "seconds"])
    for r in records:
        writer.writerow([r.iteration, r.particle, *(repr(float(v)) for v in r.x),
                         repr(float(r.evaluation.value)), int(r.evaluation.ok),
                         r.evaluation.message, f"{r.seconds:.6f}"])
    return buf.getvalue()


def write_plots(result: StudyResult, out: Path,
                problem: DesignProblem | None = None) -> tuple[list, list]:
    """Write ``convergence.png`` and the problem's ``design.png`` / ``response.png``.

    Returns the paths written and the ``(file name, message)`` of each of the problem's own
    plots that failed: those are reported, never raised (the study's numbers are written).
    """
    from multibody_dynamics.plotting import save_figure, subplots

    written, failures = [], []
    fig, ax = subplots(figsize=(7, 4.2))
    its = np.array([r.iteration for r in result.records])
    vals = np.array([r.evaluation.value for r in result.records], dtype=float)
    ok = np.array([r.evaluation.ok for r in result.records], dtype=bool)
    ax.plot(its[ok], vals[ok], ".", color="0.7", ms=3, label="feasible evaluations")
    history = np.array(result.history, dtype=float)
    shown = np.isfinite(history)
    ax.step(np.arange(1, len(history) + 1)[shown], history[shown], where="post", color="C0",
            lw=2, label="best so far")
    if ok.any() and np.all(vals[ok] > 0):
        ax.set_yscale("log")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("iteration")
    ax.set_ylabel("criterion")
    nfail = int((~ok).sum())
    ax.set_title(f"{result.study.name}: {len(vals)} evaluations, {nfail} infeasible or failed")
    ax.legend()
    written.append(save_figure(fig, out / "convergence.png"))
    if result.best is not None and problem is not None:
        for method, name in (("plot_design", "design.png"), ("plot_response", "response.png")):
            fn = getattr(problem, method, None)
            if fn is None:
                continue
            fig, ax = subplots(figsize=(7, 4.2))
            try:
                fn(ax, result.best.x)
            except Exception as exc:  # noqa: BLE001 - a plot must not lose the result
                import matplotlib.pyplot as plt

                plt.close(fig)
                failures.append((name, f"{type(exc).__name__}: {exc}"))
                continue
            written.append(save_figure(fig, out / name))
    return written, failures


def write_outputs(result: StudyResult, out: Path) -> None:
    """``result.json`` and ``evaluations.csv`` (atomically)."""
    _atomic_write(out / RESULT, (json.dumps(result_dict(result), indent=2) + "\n").encode())
    _atomic_write(out / EVALUATIONS, _csv_text(result.study, result.records).encode())


class _Progress:
    """Progress bar callback: evaluations done, iteration, best feasible criterion so far."""

    def __init__(self, bar, iterations: int, best: EvaluationRecord | None):
        self.bar, self.iterations, self.iteration = bar, iterations, 0
        self.best = best.evaluation.value if best is not None and best.evaluation.ok \
            else math.inf

    def __call__(self, row: int, evaluation: Evaluation) -> None:
        if evaluation.ok:
            self.best = min(self.best, evaluation.value)
        if self.bar is not None:
            self.bar.set_postfix_str(f"it {self.iteration}/{self.iterations} best "
                                     f"{self.best:.6g}", refresh=False)
            self.bar.update(1)


class StudyInterrupted(KeyboardInterrupt):
    """Ctrl-C during a study; ``result`` holds the iterations done (all checkpointed)."""

    def __init__(self, result: StudyResult):
        super().__init__(f"interrupted after {result.iterations_done} iteration(s)")
        self.result = result


# -- the run --------------------------------------------------------------------------------------
def _load_checkpoint(out: Path, study: Study) -> dict:
    path = out / CHECKPOINT
    try:
        with path.open("rb") as f:
            state = pickle.load(f)
    except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint is the same user error
        raise InputError(f"{path}: unreadable checkpoint ({type(exc).__name__}: {exc})") \
            from None
    if not isinstance(state, dict) or state.get("format") != _CHECKPOINT_FORMAT:
        raise InputError(f"{path}: not a study checkpoint of format {_CHECKPOINT_FORMAT}")
    if state["fingerprint"] != study.fingerprint():
        raise InputError(f"{path}: belongs to another study (problem, options, bounds or "
                         f"optimizer settings differ; seed there {state['seed']}, here "
                         f"{study.optimizer.seed})")
    return state


def _save_checkpoint(out: Path, study: Study, swarm, records, wall_time) -> None:
    state = {"format": _CHECKPOINT_FORMAT, "fingerprint": study.fingerprint(),
             "seed": study.optimizer.seed, "swarm": swarm, "records": records,
             "wall_time": wall_time}
    _atomic_write(out / CHECKPOINT, pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))


def run_study(study: Study, out: str | Path | None = None, *,
              executor: StudyExecutor | None = None, kind: str = "pool",
              workers: int | None = None, scheduler: str | None = None, resume: bool = False,
              overwrite: bool = False, stop_after: int | None = None, progress: bool = True,
              plots: bool = True,
              on_iteration: Callable[[int, list], None] | None = None) -> StudyResult:
    """Run (or continue) a study.

    Parameters
    ----------
    study : Study
        From :func:`load_study` (``study.with_seed(s)`` for another seed).
    out : path, optional
        Output directory (checked before anything runs, see :func:`check_output`); None: no
        files, no checkpoint (the result is only returned).
    executor : StudyExecutor, optional
        An open backend to use (left open). Otherwise one is opened from ``kind``, ``workers``,
        ``scheduler`` (see :func:`~.executors.open_executor`) and closed at the end.
    resume : bool
        Continue from ``out/checkpoint.pkl`` (it must be of this study and seed).
    overwrite : bool
        Replace the outputs of an earlier study in ``out``.
    stop_after : int, optional
        Stop after this many iterations of this run (continue later with ``resume``).
    progress : bool
        tqdm progress bar on stderr (evaluations, evaluations per second, iteration, best).
    plots : bool
        Write the PNGs at the end.
    on_iteration : callable, optional
        ``on_iteration(k, records)`` after iteration ``k`` (1-based) is checkpointed.

    Returns
    -------
    StudyResult
    """
    if stop_after is not None and (isinstance(stop_after, bool) or not isinstance(stop_after,
                                                                                   int)
                                   or stop_after < 1):
        raise InputError(f"stop_after: expected a positive integer, got {stop_after!r}")
    if out is None and resume:
        raise InputError("resume needs the output directory that holds the checkpoint")
    out = check_output(out, resume, overwrite) if out is not None else None
    problem = study.make_problem()
    settings = study.optimizer
    swarm, records, wall_before = _initial_state(study, out, resume)

    own = executor is None
    backend = open_executor(kind, workers, scheduler) if own else executor
    start = time.perf_counter()
    run_evaluations = 0
    bar = None
    interrupted = False
    try:
        description = backend.describe()
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=settings.particles * settings.iterations, initial=len(records),
                       unit="eval", desc=study.name, dynamic_ncols=True, file=sys.stderr)
        tick = _Progress(bar, settings.iterations, _best(records))
        done_here = 0
        while swarm.iteration < settings.iterations and (stop_after is None
                                                         or done_here < stop_after):
            k = swarm.iteration
            new = _iterate(swarm, problem, backend, tick, settings.violation)
            records = records + new
            run_evaluations += len(new)
            done_here += 1
            if out is not None:
                _save_checkpoint(out, study, swarm, records,
                                 wall_before + time.perf_counter() - start)
            if on_iteration is not None:
                on_iteration(k + 1, records)
        description = backend.describe()
    except INTERRUPTS as exc:  # the iterations done are checkpointed: report them, then stop
        reraise_unless_interrupt(exc)
        interrupted = True
    finally:
        if bar is not None:
            bar.close()
        if own:
            backend.close()
    run_wall = time.perf_counter() - start
    result = StudyResult(study=study, best=_best(records), records=records,
                         iterations_done=swarm.iteration,
                         complete=swarm.iteration >= settings.iterations,
                         history=_history(records, swarm.iteration),
                         wall_time=wall_before + run_wall, run_wall_time=run_wall,
                         run_evaluations=run_evaluations, executor=description, out=out)
    if out is not None:
        _write_study_outputs(result, out, problem, interrupted, plots)
    return result


def _initial_state(study: Study, out: Path | None, resume: bool):
    """``(swarm, records, wall_time)``: from the checkpoint in ``out`` or a new swarm."""
    if resume:
        state = _load_checkpoint(out, study)
        return state["swarm"], state["records"], state["wall_time"]
    return ParticleSwarm(study.lower, study.upper, study.optimizer), [], 0.0


def _iterate(swarm, problem: DesignProblem, backend: StudyExecutor, tick: _Progress,
             violation: str | None) -> list[EvaluationRecord]:
    """One swarm iteration: ask for its designs, evaluate them on ``backend``, tell the criteria.

    Returns the iteration's records (1-based iteration number, particle index).
    """
    k = swarm.iteration
    X = swarm.ask()
    for x in X:  # the swarm's designs must lie in the box
        check_design_vector(problem, x)
    tick.iteration = k + 1
    outcomes = evaluate_batch(backend, problem, X, on_done=tick)
    new = [EvaluationRecord(k + 1, i, X[i].copy(), ev, sec)
           for i, (ev, sec) in enumerate(outcomes)]
    swarm.tell([r.evaluation.value for r in new],
               [_violation(r.evaluation, violation) for r in new])
    return new


def _write_study_outputs(result: StudyResult, out: Path, problem: DesignProblem,
                         interrupted: bool, plots: bool) -> None:
    """``result.json`` and ``evaluations.csv``; then StudyInterrupted, or the plots.

    A plot that fails is a warning of this module's logger (the numbers are written already;
    without a logging set-up, Python prints it on stderr).
    """
    write_outputs(result, out)
    if interrupted:
        raise StudyInterrupted(result)
    if plots and result.records:
        _, failures = write_plots(result, out, problem)
        for name, message in failures:
            _LOG.warning("multibody design: warning: %s not written: %s", name, message)


def evaluate_one(study: Study, params: dict[str, float]) -> tuple[np.ndarray, Evaluation]:
    """Evaluate one design given by name (every design variable; bounds are the problem's).

    Raises
    ------
    InputError
        A name is unknown or missing, or a value is outside the problem's bounds.
    """
    problem = study.make_problem()
    unknown = sorted(set(params) - set(study.names))
    if unknown:
        raise InputError(f"--params {unknown[0]}: unknown design variable; expected one of "
                         f"{', '.join(study.names)}")
    missing = [n for n in study.names if n not in params]
    if missing:
        raise InputError(f"--params: missing {', '.join(missing)} (give every design variable "
                         "as name=value)")
    x = check_design_vector(problem, [params[n] for n in study.names])
    return x, problem.evaluate(x)
