"""Inversion scenarios of flexible manipulators: YAML -> feedforward designs -> tracking check.

``multibody invert`` dispatches here when the scenario's robot is a flexible model (a
``config/robots/`` file with a ``bodies`` list). Schema (every key validated; unknown keys are
errors naming the key)::

    description: free text
    robot: flexible_manipulator     # shipped flexible model or a flexible-model YAML path
    task:
      t0: 0.2                       # s
      tf: 1.2                       # s
      order: 5                      # rest-to-rest polynomial order (3, 5, 7, 9)
      lines:                        # one body's end point on a straight line (chain x-y plane)
        arm2: {start: [0.45, -0.10], end: [0.45, 0.10]}
    method: stable                  # rigid | collocated | quasi_static | stable | classical
    compare: [rigid, quasi_static]  # further designs run and tracked for the summary table
    output: {gamma: [[...], [...]]} # stable, classical: Γ (nq_r x nq_e); default (6.34)-(6.37)
    ik_guess: [-0.5, 1.5]           # rad, joint angles near the path start (elbow branch)
    dt: 0.001                       # s, sample spacing
    options: {decay_tol: 1.0e-6, bvp_tol: 1.0e-6, max_nodes: 100000, t_end: null}
    tracking: {frequency: 10.0, damping: 1.0, t_end: 1.5}   # joint PD of the check [Hz, -, s]
    verify: true                    # simulate each design with the joint PD (Sect. 6.4.1)

Closed flexible loops (a model with ``closures:``, e.g. ``flexible_parallel_tool``, Seifried
Sect. 6.5) take the same top-level keys with these meanings::

    robot: flexible_parallel_tool
    task:                           # as above; the line's body is the tool arm (its tip)
      t0: 0.0
      tf: 1.0
      order: 5
      lines:
        long_arm: {start: [0.7643825, 0.7643825], end: [0.8643825, 0.6643825]}
    method: stable                  # classical | stable (invert_closed)
    output: combined                # collocated (y = [s1, alpha], Γ = 0, the book's name)
                                    # | actuated (y = [s1, s2], Γ = 0) | combined ((6.39), Γ of
                                    # the model's outputs); or {name: combined, gamma: [[..],[..]]}
                                    # with a given Γ (nu x nq_e) replacing the rule's
    compare:                        # further designs, each {method: ..., output: ...}
      - {method: classical, output: collocated}
    ik_guess: [0.0, 0.8, 0.785, 2.4]   # [s1, s2, alpha, beta] near the start (loop branch)
    dt: 5.0e-4                      # s, grid of the inverse models
    options: {t_pre: 0.3, t_post: 0.3, tol: 1.0e-10, max_iter: 60, rtol: 1.0e-8, atol: 1.0e-10}
    tracking: {frequency: 10.0, damping: 1.0, sample: 0.001}  # cart PD [Hz, -], output step [s]
    verify: true                    # simulate the closed plant with feedforward + cart PD

The pipeline (:func:`parallel_tool_task`, :func:`closed_task_path`, :func:`closed_output`,
:func:`run_closed_design`) is the one of ``bench/bench_flexible_parallel.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from multibody_dynamics.errors import InputError, ModelError, MultibodyError
from multibody_dynamics.flexible.closed import ClosedFlexibleChain, ClosedSimulation
from multibody_dynamics.flexible.loader import is_flexible_model, load_flexible_model
from multibody_dynamics.flexible.system import FlexibleChain
from multibody_dynamics.interruptible import INTERRUPTS, reraise_unless_interrupt

from ..inversion.closed_flexible import (
    PARALLEL_TOOL_TASK,
    ClosedInversion,
    ClosedOutputServo,
    invert_closed,
    point_error,
    rigid_task_path,
    track_closed,
)
from ..inversion.desired import TabulatedOutput
from ..inversion.flexible import (
    FLEXIBLE_METHODS,
    TrackingResult,
    invert_flexible,
    track_flexible,
)
from ..inversion.result import InversionInterrupted, InversionResult
from ..tasks import Task, TimeLaw, straight_line
from .schema import err as _err
from .schema import flag as _flag
from .schema import integer as _integer
from .schema import mapping as _mapping
from .schema import matrix as _matrix
from .schema import number as _number
from .schema import read_scenario_file, robot_path, scenario_robot_path, time_law, xy

_TOP = {"robot", "task", "method", "compare", "output", "ik_guess", "dt", "options", "tracking",
        "verify", "description"}
_TASK = {"t0", "tf", "order", "lines"}
_OPTIONS = {"decay_tol", "bvp_tol", "max_nodes", "t_end"}
_TRACKING = {"frequency", "damping", "t_end"}


@dataclass(frozen=True)
class FlexibleInversionScenario:
    path: Path
    chain: FlexibleChain
    task: Task
    methods: tuple[str, ...]  # the scenario's method first, then the comparisons
    gamma: np.ndarray | None
    ik_guess: np.ndarray | None
    dt: float
    options: dict
    tracking: dict
    verify: bool
    description: str = ""


def is_flexible_scenario(path: str | Path) -> bool:
    """True when the scenario's ``robot`` names a flexible model (shipped or a flexible YAML)."""
    robot = scenario_robot_path(path)
    return robot is not None and is_flexible_model(robot)


def load_flexible_scenario(path: str | Path):  # noqa: C901
    """Read and validate a flexible inversion scenario (schema in the module docstring): a
    :class:`FlexibleInversionScenario`, or a :class:`ClosedInversionScenario` for a closed
    flexible model."""
    path = Path(path)
    raw = _mapping(path, "", read_scenario_file(path), _TOP)
    for key in ("robot", "task"):
        if key not in raw:
            raise _err(path, key, "missing")
    robot = robot_path(str(raw["robot"]), path)
    try:
        chain = load_flexible_model(robot)
    except ModelError as exc:
        raise _err(path, "robot", str(exc)) from None
    if isinstance(chain, ClosedFlexibleChain):
        return _load_closed(path, raw, chain)
    if not isinstance(chain, FlexibleChain):
        raise _err(path, "robot", f"{robot}: expected a flexible chain or closed flexible model, "
                   f"got {type(chain).__name__}")
    task = _line_task(path, raw["task"], [b.name for b in chain.bodies])

    method = raw.get("method", "stable")
    compare = raw.get("compare") or []
    if not isinstance(compare, list):
        raise _err(path, "compare", f"expected a list of methods, got {compare!r}")
    for key, m in [("method", method)] + [(f"compare[{i}]", c) for i, c in enumerate(compare)]:
        if not isinstance(m, str) or m not in FLEXIBLE_METHODS:
            raise _err(path, key, f"expected one of {', '.join(FLEXIBLE_METHODS)}, got {m!r}")
    methods = tuple(dict.fromkeys([method, *compare]))
    out = _mapping(path, "output", raw.get("output") or {}, {"gamma"})
    gamma = None
    if out.get("gamma") is not None:
        gamma = _matrix(path, "output.gamma", out["gamma"], (chain.nq_r, chain.nq_e),
                        "joints x elastic coordinates")
    guess = raw.get("ik_guess")
    if guess is not None:
        if not isinstance(guess, list) or len(guess) != chain.nq_r:
            raise _err(path, "ik_guess",
                       f"expected {chain.nq_r} joint angles [rad], got {guess!r}")
        guess = np.array([_number(path, "ik_guess", g) for g in guess])
    dt = _number(path, "dt", raw.get("dt", 1e-3), positive=True)
    _check_samples(path, task, dt)
    options = dict(_mapping(path, "options", raw.get("options") or {}, _OPTIONS))
    for k, v in options.items():
        if v is not None:
            options[k] = int(_number(path, f"options.{k}", v, positive=True)) \
                if k == "max_nodes" else _number(path, f"options.{k}", v, positive=True)
    tracking = dict(_mapping(path, "tracking", raw.get("tracking") or {}, _TRACKING))
    for k, v in tracking.items():
        tracking[k] = None if v is None else _number(path, f"tracking.{k}", v,
                                                              positive=True)
    verify = _flag(path, "verify", raw.get("verify", True))
    return FlexibleInversionScenario(path, chain, task, methods, gamma, guess, dt, options,
                                     tracking, verify, str(raw.get("description", "")))


def _line_task(path, raw, names) -> Task:
    t = _mapping(path, "task", raw, _TASK)
    law = time_law(path, t)
    if "lines" not in t:
        raise _err(path, "task.lines", "missing")
    lines = t["lines"]
    if not isinstance(lines, dict) or len(lines) != 1:
        raise _err(path, "task.lines", "expected one body with {start: [x, y], end: [x, y]}")
    (body, spec), = lines.items()
    if body not in names:
        raise _err(path, f"task.lines.{body}", f"unknown body; expected one of {', '.join(names)}")
    spec = _mapping(path, f"task.lines.{body}", spec, {"start", "end"})
    ends = [xy(path, f"task.lines.{body}.{k}", spec.get(k)) for k in ("start", "end")]
    return Task(law, (straight_line(body, *ends),))


def run_flexible_scenario(sc, progress: bool | Callable[[str], None] = False):
    """Every design of the scenario and its tracking check: ``{method: (result, tracking)}``
    (a closed model: ``{label: ClosedDesign}``, see :func:`run_closed_scenario`).

    ``progress``: tqdm bars of the long stages on stderr when true; a callable also receives
    the stage lines of a closed model (:func:`run_closed_scenario`).

    A failed design keeps its result (``success=False``, the message) and ``None`` tracking.
    Ctrl-C raises :class:`FlexibleScenarioInterrupted` with the designs done and the samples
    of the one under way (open chains).
    """
    if isinstance(sc, ClosedInversionScenario):
        return run_closed_scenario(sc, progress)
    progress = bool(progress)
    out: dict[str, tuple[InversionResult, TrackingResult | None]] = {}
    options = dict(sc.options)
    if options.get("t_end") is None and sc.tracking.get("t_end") is not None:
        options["t_end"] = sc.tracking["t_end"]  # every design over the whole check
    for method in sc.methods:
        try:
            result = invert_flexible(sc.chain, sc.task, method, gamma=sc.gamma, dt=sc.dt,
                                     ik_guess=sc.ik_guess, progress=progress, **options)
        except InversionInterrupted as exc:
            out[method] = (exc.result, None)
            raise FlexibleScenarioInterrupted(out, method) from None
        track = None
        if sc.verify and result.success:
            try:
                track = track_flexible(sc.chain, result, sc.task, dt=sc.dt, **sc.tracking)
            except MultibodyError as exc:  # keep the design, say why it has no tracking check
                result = replace(result, message=f"{result.message}; tracking check failed: {exc}")
            except INTERRUPTS as exc:  # the design is complete, its check is not
                reraise_unless_interrupt(exc)
                out[method] = (replace(result, success=False, message=(
                    "the tracking check was interrupted (Ctrl-C); the inversion's "
                    f"{result.t.size} samples are complete, unverified")), None)
                raise FlexibleScenarioInterrupted(out, method) from None
        out[method] = (result, track)
    return out


class FlexibleScenarioInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_flexible_scenario` (open chain): still an interrupt for the
    caller, carrying ``runs`` (``{method: (result, tracking)}`` of the designs done and, last,
    the partial result of ``method``, the design under way)."""

    def __init__(self, runs: dict, method: str):
        super().__init__(runs[method][0].message)
        self.runs, self.method = runs, method


# ============================================================================ closed loops
CLOSED_METHODS = ("classical", "stable")
#: Scenario output names -> names of the model's ``outputs`` (its file's ``outputs:``; the book
#: calls ``y = [s1, alpha]`` collocated, the model's ``"collocated"`` is the actuated pair
#: ``[s1, s2]``).
CLOSED_OUTPUTS = {"collocated": "rigid", "actuated": "collocated", "combined": "combined"}
#: Seifried (2014) Sect. 6.5: tool-point error [mm] of the designs the book reports.
BOOK_TOOL_ERROR_MM = {("classical", "collocated"): 12.0, ("stable", "combined"): 0.03}
BOOK_ZERO_DYNAMICS = {"combined": "7 stable / 29 unstable", "collocated": "bounded",
                      "actuated": "bounded"}
_CLOSED_OPTIONS = {"t_pre", "t_post", "tol", "max_iter", "rtol", "atol"}
_CLOSED_TRACKING = {"frequency", "damping", "sample"}
_CLOSED_DEFAULTS = {"t_pre": PARALLEL_TOOL_TASK["t_pre"], "t_post": PARALLEL_TOOL_TASK["t_post"],
                    "tol": 1e-10, "max_iter": 60, "rtol": 1e-8, "atol": 1e-10}


@dataclass(frozen=True)
class ClosedDesignSpec:
    """One feedforward design of a closed scenario: method, output name, given Γ (or None)."""

    method: str
    output: str
    gamma: np.ndarray | None = None

    @property
    def label(self) -> str:
        return f"{self.method}/{self.output}" + ("(Γ given)" if self.gamma is not None else "")


@dataclass(frozen=True)
class ClosedInversionScenario:
    path: Path
    system: ClosedFlexibleChain
    task: Task
    body: str
    designs: tuple[ClosedDesignSpec, ...]  # the scenario's design first, then the comparisons
    ik_guess: np.ndarray
    dt: float
    options: dict
    tracking: dict
    verify: bool
    description: str = ""

    @property
    def chain(self):  # the name the CLI prints (``sc.chain.config.name``)
        return self.system


@dataclass(frozen=True)
class ClosedDesign:
    """Result of :func:`run_closed_design`.

    Attributes
    ----------
    spec : ClosedDesignSpec; result : ClosedInversion
    tool_error : (N,) [m] distance of the inverse model's tool point from the task
    output_error : float, max |y(q) - y_d| of the inverse model
    eigenvalues : (2 nq_e,) zero dynamics at the start [1/s]
    tracking : ClosedSimulation or None (feedforward + PD on the actuated joints)
    tracking_error : (M,) [m] or None, tool error of the simulation
    """

    spec: ClosedDesignSpec
    result: ClosedInversion
    tool_error: np.ndarray
    output_error: float
    eigenvalues: np.ndarray
    tracking: ClosedSimulation | None = None
    tracking_error: np.ndarray | None = None

    def during_motion(self, task: Task) -> float:
        """Max tool error [m] of the inverse model between the task's t0 and tf."""
        t = self.result.t[:self.tool_error.size]
        inside = (t >= task.law.t0) & (t <= task.law.tf)
        return float(self.tool_error[inside].max()) if inside.any() else float("nan")


def parallel_tool_task(t0: float | None = None, tf: float | None = None,
                       order: int | None = None) -> Task:
    """The machine tool's test motion
    :data:`~multibody_control.inversion.closed_flexible.PARALLEL_TOOL_TASK`
    as a :class:`Task` (times and order may be changed)."""
    d = PARALLEL_TOOL_TASK
    law = TimeLaw(d["t0"] if t0 is None else t0, d["tf"] if tf is None else tf,
                  d["order"] if order is None else order)
    start = np.asarray(d["start"], float)
    return Task(law, (straight_line(d["body"], start, start + np.asarray(d["move"])),))


def task_body(task: Task) -> str:
    """The body whose end point a one-line task moves (``"long_arm"`` for ``long_arm.x``)."""
    names = task.names
    if len(task.components) != 1 or len(names) != 2:
        raise InputError(f"expected a task with one planar point path, got components {names}")
    return names[0].split(".")[0]


def closed_grid(task: Task, dt: float, t_pre: float, t_post: float) -> np.ndarray:
    """Sample times [s] from ``t0 - t_pre`` to ``tf + t_post`` with spacing ``dt``."""
    return np.arange(task.law.t0 - t_pre, task.law.tf + t_post + dt / 2, dt)


def closed_task_path(system: ClosedFlexibleChain, task: Task, t, guess=None):
    """``q_r, q_r', q_r''`` (each (N, nq_r)) of the undeformed system on the task at ``t``
    (:func:`~multibody_control.inversion.closed_flexible.rigid_task_path`)."""
    guess = PARALLEL_TOOL_TASK["guess"] if guess is None else guess
    p, pd, pdd = task(np.asarray(t, float))
    return rigid_task_path(system, task_body(task), p, pd, pdd, guess)


def closed_task_outputs(t, path, H_r) -> TabulatedOutput:
    """``y_d = H_r q_r`` (and rates) of a rigid task path (:func:`closed_task_path`) on ``t``."""
    H_r = np.asarray(H_r, float)
    return TabulatedOutput(np.asarray(t, float), *(x @ H_r.T for x in path))


def closed_output(system: ClosedFlexibleChain, name: str, gamma=None):
    """``(H_r, Γ)`` of a scenario output name (:data:`CLOSED_OUTPUTS`); a given ``gamma``
    replaces the rule's Γ."""
    if name not in CLOSED_OUTPUTS:
        raise InputError(f"output: expected one of {', '.join(CLOSED_OUTPUTS)}, got {name!r}")
    H, g = system.outputs[CLOSED_OUTPUTS[name]]
    return H, (g if gamma is None else np.asarray(gamma, float))


def closed_zero_dynamics(system: ClosedFlexibleChain, H_r, gamma, q_r) -> np.ndarray:
    """Eigenvalues [1/s] of the zero dynamics of output ``(H_r, Γ)`` at rest at ``q_r``."""
    servo = ClosedOutputServo(system, H_r, gamma, guess=q_r)
    Q, _ = servo.zero_dynamics_jacobian(np.asarray(H_r) @ np.asarray(q_r))
    return np.linalg.eigvals(Q)


def run_closed_design(system: ClosedFlexibleChain, task: Task, t, spec: ClosedDesignSpec,
                      path=None, guess=None, verify: bool = True, tracking: dict | None = None,
                      zero_dynamics: bool = True, tol: float = 1e-10, max_iter: int = 60,
                      rtol: float = 1e-8, atol: float = 1e-10,
                      progress: bool = False) -> ClosedDesign:
    """One design: output ``(H_r, Γ)``, ``y_d`` from the rigid task path, :func:`invert_closed`,
    the tool error of the inverse model and (``verify``) of the closed plant simulated with
    the feedforward plus the PD law of :func:`track_closed` (``tracking``: ``frequency`` [Hz],
    ``damping``, ``every`` samples). ``path`` reuses a :func:`closed_task_path` on ``t``;
    ``progress`` shows tqdm bars of the long stages on stderr.

    Ctrl-C in the inversion or in the check raises :class:`ClosedDesignInterrupted` with the
    design as far as it got: the inverse model's samples complete before the interrupt
    (:func:`invert_closed`), or all of them and the check's samples before the one under way
    (``success`` False, "unverified").  Elsewhere (zero dynamics) it interrupts as usual."""
    t = np.asarray(t, float)
    path = closed_task_path(system, task, t, guess) if path is None else path
    H, gamma = closed_output(system, spec.output, spec.gamma)
    q_r0 = path[0][0]
    eig = closed_zero_dynamics(system, H, gamma, q_r0) if zero_dynamics else np.zeros(0)
    servo = ClosedOutputServo(system, H, gamma, guess=q_r0)
    ytraj = closed_task_outputs(t, path, H)
    stopped = None
    try:
        res = invert_closed(servo, ytraj, t, method=spec.method, tol=tol, max_iter=max_iter,
                            rtol=rtol, atol=atol, progress=progress)
    except InversionInterrupted as exc:  # the samples complete before Ctrl-C
        res, stopped = exc.result, exc.result.message
    body = task_body(task)
    n = res.t.size
    err = point_error(system, res.q, body, task(res.t)[0]) if n else np.zeros(0)
    nr = system.nq_r
    y = res.q[:, :nr] @ H.T + res.q[:, nr:] @ gamma.T
    out_err = float(np.max(np.abs(y - ytraj(res.t)[0]))) if n else float("nan")
    sim = sim_err = None
    if verify and res.success:
        checked: list = []
        sim = track_closed(system, res, rtol=rtol, atol=atol, progress=progress,
                           interrupted=checked, **(tracking or {}))
        sim_err = point_error(system, sim.q, body, task(sim.t)[0]) if sim.t.size else None
        if checked:  # the inverse model is complete, its check is not
            stopped = (f"the tracking check was interrupted (Ctrl-C) at t = {checked[0]:.6g} s;"
                       f" the inversion's {n} samples are complete, unverified")
            res = replace(res, success=False, message=stopped)
    design = ClosedDesign(spec, res, err, out_err, eig, sim, sim_err)
    if stopped is not None:
        raise ClosedDesignInterrupted(design)
    return design


class ClosedDesignInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_closed_design`: still an interrupt for the caller, carrying the
    partial :class:`ClosedDesign` (``result.success`` False, its message says what is kept)
    as ``design``."""

    def __init__(self, design: ClosedDesign):
        super().__init__(design.result.message)
        self.design = design


def _closed_output_spec(path, key, raw, system, method):
    gamma = None
    if isinstance(raw, dict):
        raw = _mapping(path, key, raw, {"name", "gamma"})
        if "name" not in raw:
            raise _err(path, f"{key}.name",
                       f"missing; expected one of {', '.join(CLOSED_OUTPUTS)}")
        if raw.get("gamma") is not None:
            gamma = _matrix(path, f"{key}.gamma", raw["gamma"], (system.nu, system.nq_e),
                            "outputs x elastic coordinates")
        key, raw = f"{key}.name", raw["name"]
    if not isinstance(raw, str) or raw not in CLOSED_OUTPUTS:
        raise _err(path, key, f"expected one of {', '.join(CLOSED_OUTPUTS)} (or a mapping "
                   f"{{name: ..., gamma: [[...]]}}), got {raw!r}")
    return ClosedDesignSpec(method, raw, gamma)


def _closed_method(path, key, m):
    if not isinstance(m, str) or m not in CLOSED_METHODS:
        raise _err(path, key, f"expected one of {', '.join(CLOSED_METHODS)} (closed flexible "
                   f"model), got {m!r}")
    return m


def _load_closed(path: Path, raw: dict, system: ClosedFlexibleChain) -> ClosedInversionScenario:  # noqa: C901
    missing = sorted(set(CLOSED_OUTPUTS.values()) - set(system.outputs))
    if missing:
        raise _err(path, "robot", f"closed models in scenario files: the parallel machine tool "
                   f"(joints s1, s2, alpha); {system.name}: no outputs {missing} (the model "
                   "file's outputs:)")
    task = _line_task(path, raw["task"], [b.name for b in system.chain.bodies])
    method = _closed_method(path, "method", raw.get("method", "stable"))
    first = _closed_output_spec(path, "output", raw.get("output", "combined"), system, method)
    designs = [first]
    compare = raw.get("compare") or []
    if not isinstance(compare, list):
        raise _err(path, "compare", "expected a list of designs {method: ..., output: ...}, got "
                   f"{compare!r}")
    for i, c in enumerate(compare):
        key = f"compare[{i}]"
        c = _mapping(path, key, c, {"method", "output"})
        m = _closed_method(path, f"{key}.method", c.get("method", method))
        designs.append(_closed_output_spec(path, f"{key}.output", c.get("output", first.output),
                                           system, m))
    unique = {}
    for d in designs:
        unique.setdefault(d.label, d)
    guess = raw.get("ik_guess", list(PARALLEL_TOOL_TASK["guess"]))
    if not isinstance(guess, list) or len(guess) != system.nq_r:
        raise _err(path, "ik_guess", f"expected {system.nq_r} rigid coordinates "
                   f"{list(system.joint_names)} [m, rad], got {guess!r}")
    guess = np.array([_number(path, "ik_guess", g) for g in guess])
    dt = _number(path, "dt", raw.get("dt", 5e-4), positive=True)
    options = dict(_CLOSED_DEFAULTS)
    for k, v in _mapping(path, "options", raw.get("options") or {}, _CLOSED_OPTIONS).items():
        if v is None:
            continue
        if k == "max_iter":
            options[k] = _integer(path, "options.max_iter", v)
        else:
            options[k] = _number(path, f"options.{k}", v, positive=k not in ("t_pre", "t_post"))
            if options[k] < 0:
                raise _err(path, f"options.{k}", f"expected a number >= 0 [s], got {v!r}")
    stable = any(d.method == "stable" for d in designs)
    if stable and min(options["t_pre"], options["t_post"]) <= 0:
        raise _err(path, "options.t_pre", "stable inversion needs t_pre > 0 and t_post > 0 [s] "
                   "(pre- and post-actuation)")
    tracking = {"frequency": 10.0, "damping": 1.0, "sample": 1e-3}
    for k, v in _mapping(path, "tracking", raw.get("tracking") or {}, _CLOSED_TRACKING).items():
        if v is not None:
            tracking[k] = _number(path, f"tracking.{k}", v, positive=k != "damping")
            if tracking[k] < 0:
                raise _err(path, f"tracking.{k}", f"expected a number >= 0, got {v!r}")
    _check_samples(path, task, dt, options["t_pre"], options["t_post"])
    verify = _flag(path, "verify", raw.get("verify", True))
    return ClosedInversionScenario(path, system, task, task_body(task), tuple(unique.values()),
                                   guess, dt, options, tracking, verify,
                                   str(raw.get("description", "")))


def run_closed_scenario(sc: ClosedInversionScenario,
                        progress: bool | Callable[[str], None] = False):
    """Every design of a closed scenario: ``{label: ClosedDesign}`` (one rigid task path).

    ``progress``: False, quiet; True, tqdm bars of the long stages on stderr; a callable,
    the bars and one line per finished stage (the rigid task path, then each design with its
    message and wall time [s]) passed to it.

    Ctrl-C raises :class:`ClosedScenarioInterrupted` with the designs completed before and,
    last, what was kept of the design under way (:class:`ClosedDesignInterrupted`).
    """
    import time

    say = progress if callable(progress) else None
    progress = bool(progress)
    opts = dict(sc.options)
    t = closed_grid(sc.task, sc.dt, opts.pop("t_pre"), opts.pop("t_post"))
    start = time.perf_counter()
    path = closed_task_path(sc.system, sc.task, t, sc.ik_guess)
    if say is not None:
        say(f"rigid task path: {t.size} samples, {time.perf_counter() - start:.1f} s")
    tracking = {"frequency": sc.tracking["frequency"], "damping": sc.tracking["damping"],
                "every": max(1, int(round(sc.tracking["sample"] / sc.dt)))}
    out = {}
    for spec in sc.designs:
        start = time.perf_counter()
        try:
            d = run_closed_design(sc.system, sc.task, t, spec, path=path, verify=sc.verify,
                                  tracking=tracking, progress=progress, **opts)
        except ClosedDesignInterrupted as exc:  # the designs before, and this one's samples
            out[spec.label] = exc.design
            raise ClosedScenarioInterrupted(out, spec.label) from None
        except INTERRUPTS as exc:  # the designs before are complete: hand them over
            reraise_unless_interrupt(exc)
            raise ClosedScenarioInterrupted(out, spec.label) from None
        except MultibodyError as exc:  # keep going; the summary says why
            empty, none = np.zeros((0, sc.system.nv)), np.zeros((0, sc.system.nu))
            res = ClosedInversion(
                t=t[:0], q=empty, v=empty, a=empty, u=none, y_desired=none, y=none,
                eta=np.zeros((0, 2 * sc.system.nq_e)), output_error=np.inf, t0=float(t[0]),
                tf=float(t[-1]), t_pre=0.0, t_post=0.0, eigenvalues=np.zeros(0), success=False,
                message=f"failed: {exc}", method=spec.method, nfev=0,
                wall_time=time.perf_counter() - start, input_names=tuple(sc.system.actuated))
            d = ClosedDesign(spec, res, np.zeros(0), float("nan"), np.zeros(0))
        out[spec.label] = d
        if say is not None:
            say(f"{spec.label}: {d.result.message} ({time.perf_counter() - start:.1f} s)")
    return out


class ClosedScenarioInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_closed_scenario`: still an interrupt for the caller, carrying
    ``runs`` (``{label: ClosedDesign}`` of the designs completed and, when something of it was
    kept, last, the partial design ``label`` under way) and ``label``."""

    def __init__(self, runs: dict, label: str):
        partial = runs.get(label)
        done = len(runs) - (partial is not None)
        kept = ("" if partial is None else
                f"; of {label}: {' '.join(partial.result.message.split())}")
        super().__init__(f"interrupted (Ctrl-C) during the design {label}; the {done} "
                         f"design(s) before are complete{kept}")
        self.runs, self.label = runs, label

    @property
    def partial(self) -> ClosedDesign | None:
        """What was kept of the design under way (None: nothing)."""
        return self.runs.get(self.label)


def _check_samples(path, task: Task, dt: float, t_pre: float = 0.0, t_post: float = 0.0) -> None:
    """Refuse a ``dt`` not shorter than the motion ``t0 .. tf``, and a motion whose samples
    would not fit in memory, before any work: the grids of
    the flexible inversions and their tracking checks run from ``min(0, t0 - t_pre)`` to
    ``tf + t_post`` every ``min(dt, 1 ms)`` (at least; a stable design adds its own
    pre- and post-actuation)."""
    from multibody_dynamics.validation import check_motion_sampled, check_sample_budget

    check_motion_sampled(task.law.t0, task.law.tf, dt, f"{path}: task / dt")
    lo, hi = min(0.0, task.law.t0 - t_pre), task.law.tf + t_post
    step = min(dt, 1e-3)
    if hi - lo > step:
        check_sample_budget(hi - lo, step, f"{path}: task / dt", "raise dt or shorten the motion")
