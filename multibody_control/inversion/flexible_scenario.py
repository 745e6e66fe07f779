"""Inversion scenarios of flexible manipulators: YAML -> feedforward designs -> tracking check.

``multibody invert`` dispatches here when the scenario's robot is a flexible model (a
``config/robots/`` file with a ``bodies`` list). Schema (every key validated; unknown keys are
errors naming the key)::

    robot: flexible_manipulator     # shipped flexible model or a flexible-model YAML path
    task:
      t0: 0.2                       # s
      tf: 1.2                       # s
      order: 5                      # rest-to-rest polynomial order (3, 5, 7, 9)
      lines:                        # one body's end point on a straight line (chain x-y plane)
        arm2: {start: [0.45, -0.10], end: [0.45, 0.10]}
    method: stable                  # rigid | collocated | quasi_static | stable
    compare: [rigid, quasi_static]  # further designs run and tracked for the summary table
    output: {gamma: [[...], [...]]} # stable only: Γ (nq_r x nq_e); default (6.34)-(6.37)
    ik_guess: [-0.5, 1.5]           # rad, joint angles near the path start (elbow branch)
    dt: 0.001                       # s, sample spacing
    options: {decay_tol: 1.0e-6, bvp_tol: 1.0e-6, max_nodes: 100000, t_end: null}
    tracking: {frequency: 10.0, damping: 1.0, t_end: 1.5}   # joint PD of the check [Hz, -, s]
    verify: true                    # simulate each design with the joint PD (Sect. 6.4.1)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from multibody_dynamics.errors import ModelError, MultibodyError
from multibody_dynamics.flexible.loader import is_flexible_model, load_flexible_model
from multibody_dynamics.flexible.system import FlexibleChain

from ..tasks import Task, straight_line
from .flexible import FLEXIBLE_METHODS, TrackingResult, invert_flexible, track_flexible
from .methods import InversionResult
from .scenario import _err, _mapping, _number, read_scenario_file, time_law, xy

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
    path = Path(path)
    raw = read_scenario_file(path)
    robot = raw.get("robot") if isinstance(raw, dict) else None
    if not isinstance(robot, str):
        return False
    if robot.endswith((".yaml", ".yml")) and not Path(robot).is_absolute():
        robot = str(path.parent / robot)
    return is_flexible_model(robot)


def load_flexible_scenario(path: str | Path) -> FlexibleInversionScenario:
    """Read and validate a flexible inversion scenario (schema in the module docstring)."""
    path = Path(path)
    raw = _mapping(path, "", read_scenario_file(path), _TOP)
    for key in ("robot", "task"):
        if key not in raw:
            raise _err(path, key, "missing")
    robot = str(raw["robot"])
    if robot.endswith((".yaml", ".yml")) and not Path(robot).is_absolute():
        robot = str(path.parent / robot)
    try:
        chain = load_flexible_model(robot)
    except ModelError as exc:
        raise _err(path, "robot", str(exc)) from None
    if not isinstance(chain, FlexibleChain):
        raise _err(path, "robot", f"{robot} has kinematic loops: its feedforward is computed with "
                   "multibody_dynamics.flexible.closed (invert_closed), not by a scenario file; "
                   "expected an open flexible chain")
    t = _mapping(path, "task", raw["task"], _TASK)
    law = time_law(path, t)
    if "lines" not in t:
        raise _err(path, "task.lines", "missing")
    lines = t["lines"]
    if not isinstance(lines, dict) or len(lines) != 1:
        raise _err(path, "task.lines", "expected one body with {start: [x, y], end: [x, y]}")
    (body, spec), = lines.items()
    names = [b.name for b in chain.bodies]
    if body not in names:
        raise _err(path, f"task.lines.{body}", f"unknown body; expected one of {', '.join(names)}")
    spec = _mapping(path, f"task.lines.{body}", spec, {"start", "end"})
    ends = [xy(path, f"task.lines.{body}.{k}", spec.get(k)) for k in ("start", "end")]
    task = Task(law, (straight_line(body, *ends),))

    method = raw.get("method", "stable")
    compare = raw.get("compare") or []
    if not isinstance(compare, list):
        raise _err(path, "compare", f"expected a list of methods, got {compare!r}")
    for key, m in [("method", method)] + [(f"compare[{i}]", c) for i, c in enumerate(compare)]:
        if m not in FLEXIBLE_METHODS:
            raise _err(path, key, f"expected one of {', '.join(FLEXIBLE_METHODS)}, got {m!r}")
    methods = tuple(dict.fromkeys([method, *compare]))
    out = _mapping(path, "output", raw.get("output") or {}, {"gamma"})
    gamma = None
    if out.get("gamma") is not None:
        gamma = np.asarray(out["gamma"], float) if isinstance(out["gamma"], list) else None
        if gamma is None or gamma.shape != (chain.nq_r, chain.nq_e) or not np.all(np.isfinite(gamma)):
            raise _err(path, "output.gamma", f"expected a finite {chain.nq_r} x {chain.nq_e} "
                       f"matrix (joints x elastic coordinates), got {out['gamma']!r}")
    guess = raw.get("ik_guess")
    if guess is not None:
        if not isinstance(guess, list) or len(guess) != chain.nq_r:
            raise _err(path, "ik_guess", f"expected {chain.nq_r} joint angles [rad], got {guess!r}")
        guess = np.array([_number(path, "ik_guess", g) for g in guess])
    dt = _number(path, "dt", raw.get("dt", 1e-3), positive=True)
    options = dict(_mapping(path, "options", raw.get("options") or {}, _OPTIONS))
    for k, v in options.items():
        if v is not None:
            options[k] = int(_number(path, f"options.{k}", v, True)) if k == "max_nodes" else \
                _number(path, f"options.{k}", v, True)
    tracking = dict(_mapping(path, "tracking", raw.get("tracking") or {}, _TRACKING))
    for k, v in tracking.items():
        tracking[k] = None if v is None else _number(path, f"tracking.{k}", v, True)
    verify = raw.get("verify", True)
    if not isinstance(verify, bool):
        raise _err(path, "verify", f"expected true or false, got {verify!r}")
    return FlexibleInversionScenario(path, chain, task, methods, gamma, guess, dt, options,
                                     tracking, verify, str(raw.get("description", "")))


def run_flexible_scenario(sc: FlexibleInversionScenario, progress: bool = False):
    """Every design of the scenario and its tracking check: ``{method: (result, tracking)}``.

    A failed design keeps its result (``success=False``, the message) and ``None`` tracking.
    """
    out: dict[str, tuple[InversionResult, TrackingResult | None]] = {}
    options = dict(sc.options)
    if options.get("t_end") is None and sc.tracking.get("t_end") is not None:
        options["t_end"] = sc.tracking["t_end"]  # every design over the whole check
    for method in sc.methods:
        result = invert_flexible(sc.chain, sc.task, method, gamma=sc.gamma, dt=sc.dt,
                                 ik_guess=sc.ik_guess, progress=progress, **options)
        track = None
        if sc.verify and result.success:
            try:
                track = track_flexible(sc.chain, result, sc.task, dt=sc.dt, **sc.tracking)
            except MultibodyError as exc:  # keep the design, say why it has no tracking check
                result = replace(result, message=f"{result.message}; tracking check failed: {exc}")
        out[method] = (result, track)
    return out


def flexible_summary(sc: FlexibleInversionScenario, runs) -> str:
    lines = [f"{'design':14s} {'status':8s} {'max error':>12s} {'until tf':>12s} {'peak |u|':>18s}"
             f" {'cpu':>8s}  message"]
    for method, (res, track) in runs.items():
        err = "-" if track is None else f"{track.max_error * 1e3:9.4g} mm"
        during = "-" if track is None else f"{track.max_error_motion * 1e3:9.4g} mm"
        peak = "-" if not res.success else ", ".join(f"{v:.3g}" for v in np.abs(res.u).max(axis=0))
        lines.append(f"{method:14s} {'ok' if res.success else 'FAILED':8s} {err:>12s} {during:>12s} "
                     f"{peak:>18s} {res.wall_time:7.3g}s  {res.message}")
    first = runs[sc.methods[0]][0]
    if first.eigenvalues.size:
        lam = ", ".join(f"{z.real:.4g}{z.imag:+.4g}j" if abs(z.imag) > 1e-9 else f"{z.real:.4g}"
                        for z in first.eigenvalues)
        lines.append(f"zero dynamics ({sc.methods[0]} output) eigenvalues [{lam}] 1/s")
    lines.append("end-effector error: simulated plant, feedforward + joint PD "
                 f"({sc.tracking.get('frequency') or 10.0:g} Hz), against the task")
    return "\n".join(lines)


def write_flexible_csv(sc: FlexibleInversionScenario, result: InversionResult,
                       track: TrackingResult | None, path: str | Path) -> Path:
    """``t, q.*, v.*, u.*`` of the design, and the tracked end-effector error [m] (NaN if none)."""
    path = Path(path)
    names = sc.chain.coordinate_names
    err = (np.interp(result.t, track.t, track.error, left=np.nan, right=np.nan)
           if track is not None else np.full(result.t.size, np.nan))
    cols = (["t"] + [f"q.{n}" for n in names] + [f"v.{n}" for n in names]
            + [f"u.{n}" for n in sc.chain.joint_names] + ["tracking_error"])
    np.savetxt(path, np.column_stack([result.t, result.q, result.v, result.u, err]), delimiter=",",
               header=",".join(cols), comments="", fmt="%.10g")
    return path


def plot_flexible(sc: FlexibleInversionScenario, runs, path: str | Path) -> Path:
    """End-effector error of every design (log scale), elastic coordinates, feedforward."""
    from multibody_dynamics.plotting import save_figure, subplots

    fig, axes = subplots(3, 1, figsize=(9, 9), sharex=True)
    for method, (_, track) in runs.items():
        if track is not None:
            axes[0].semilogy(track.t, np.maximum(track.error, 1e-9) * 1e3, lw=1.2, label=method)
    axes[0].set_ylabel("end-effector error [mm]")
    res, track = runs[sc.methods[0]]
    if res.success:
        nr = sc.chain.nq_r
        for k, name in enumerate(sc.chain.coordinate_names[nr:]):
            line, = axes[1].plot(res.t, res.q[:, nr + k], lw=1.2, label=f"{name} (inverse model)")
            if track is not None:
                axes[1].plot(track.t, track.q[:, nr + k], ":", color=line.get_color(), lw=1)
        for k, name in enumerate(sc.chain.joint_names):
            axes[2].plot(res.t, res.u[:, k], lw=1.2, label=name)
    axes[1].set_ylabel(f"q_e ({sc.methods[0]};\ndotted: simulated)")
    axes[2].set_ylabel("feedforward [N m]")
    for ax in axes:
        ax.axvspan(sc.task.law.t0, sc.task.law.tf, color="0.93")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper right", ncol=2)
    axes[-1].set_xlabel("t [s] (shaded: motion)")
    fig.suptitle(sc.description or f"{sc.chain.config.name}: feedforward designs")
    return save_figure(fig, path)
