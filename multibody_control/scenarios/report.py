"""Reports of the scenario runs: the summaries ``multibody run`` and ``multibody invert`` print,
the CSV files (with their result sidecar, :mod:`multibody_dynamics.result_meta`) and the PNG
plots, for every scenario kind (summary, CSV, plot):

- closed loop (``run_*.yaml``): :func:`run_summary`, :func:`write_run_csv`, :func:`plot_run`;
- inversion of a rigid or closed-loop robot: :func:`inversion_summary`,
  :func:`write_inversion_csv`, :func:`plot_inversion`;
- inversion of a flexible chain: :func:`flexible_summary`, :func:`write_flexible_csv`,
  :func:`plot_flexible`;
- inversion of a closed flexible robot: :func:`closed_summary`, :func:`write_closed_csv`,
  :func:`plot_closed` (:func:`flexible_summary` and :func:`plot_flexible` dispatch to them).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from multibody_dynamics.model import MultibodyModel
from multibody_dynamics.result_meta import write_model_meta, write_result_meta

from ..inversion.flexible import TrackingResult
from ..inversion.result import InversionResult
from ..inversion.verify import VerificationResult
from .flexible import (
    BOOK_TOOL_ERROR_MM,
    BOOK_ZERO_DYNAMICS,
    ClosedDesign,
    ClosedInversionScenario,
    FlexibleInversionScenario,
)
from .run import RunResult
from .schema import read_scenario_file

__all__ = ["LARGE_END_EFFECTOR_ERROR", "closed_summary", "flexible_summary",
           "inversion_summary", "plot_closed", "plot_flexible", "plot_inversion", "plot_run",
           "run_summary", "write_closed_csv", "write_flexible_csv", "write_inversion_csv",
           "write_run_csv"]


# -- closed-loop runs -----------------------------------------------------------------------------


def run_summary(res: RunResult) -> str:
    """The summary printed by ``multibody run``: one quantity per line with its unit."""
    sc, mt = res.scenario, res.metrics
    model = sc.model
    outcome = "ok" if res.success else ("INTERRUPTED" if res.interrupted else "DIVERGED")
    rows = [("outcome", outcome, res.message),
            ("simulated", f"{res.t[-1] - res.t[0]:.4g}", f"s in {res.wall_time:.3g} s wall, "
             f"control {sc.rate:g} Hz (ZOH), {sc.substeps} substep(s)"),
            ("joint error max", f"{mt['joint_error_max']:.4g}", "rad | m (largest coordinate)"),
            ("joint error rms", f"{mt['joint_error_rms']:.4g}", "rad | m (2-norm over joints)"),
            ("joint error final", f"{mt['joint_error_final']:.4g}", "rad | m")]
    for name in model.coordinate_names:
        rows.append((f"  {name}", f"{mt[f'error_max.{name}']:.4g}",
                     f"max; rms {mt[f'error_rms.{name}']:.4g}"))
    if "output_error_max" in mt:
        rows.append(("output error max", f"{mt['output_error_max']:.4g}",
                     "rad | m (y(q_ref) - y(q), the rows feedback_linearization tracks)"))
    if "task_error_max" in mt:
        rows += [("task error max", f"{mt['task_error_max'] * 1e3:.4g}", f"mm ({sc.task_frame})"),
                 ("task error rms", f"{mt['task_error_rms'] * 1e3:.4g}", "mm"),
                 ("task error final", f"{mt['task_error_final'] * 1e3:.4g}", "mm")]
    if "path_error_max" in mt:
        rows += [("path error max", f"{mt['path_error_max'] * 1e3:.4g}",
                  "mm (task frame vs the desired path, t >= t0)"),
                 ("path error rms", f"{mt['path_error_rms'] * 1e3:.4g}", "mm")]
    for name, val in zip(model.input_names, mt["u_peak"]):
        rows.append((f"peak |u| {name}", f"{val:.4g}", "N | N m"))
    rows.append(("mean |u|", f"{mt['u_norm_mean']:.4g}", "N | N m (2-norm)"))
    if "force_error_max" in mt:
        rows += [("force error max", f"{mt['force_error_max']:.4g}", "N | N m"),
                 ("force error final", f"{mt['force_error_final']:.4g}", "N | N m"),
                 ("lambda final", ", ".join(f"{x:.4g}" for x in res.lam[-1]),
                  f"N | N m (desired {', '.join(f'{x:g}' for x in sc.reference['lambda_d'])})")]
    if res.lam_labels:
        rows.append(("constraint residual", f"{mt['residual_max']:.3g}", "m | rad (max |phi|)"))
    if model.passive.any() and "passive_torque_max" in mt and sc.controller["law"] == \
            "projected_inverse_dynamics":
        rows.append(("passive torque max", f"{mt['passive_torque_max']:.3g}", "N m | N"))
    if "analytic_deviation" in mt:
        rows.append(("vs e''+Kd e'+Kp e=0", f"{mt['analytic_deviation']:.3g}",
                     "rad | m (max deviation from the analytic error)"))
    w = max(len(r[0]) for r in rows)
    v = max(len(r[1]) for r in rows)
    return "\n".join(f"{a.ljust(w)}  {b.rjust(v)}  {c}" for a, b, c in rows)


def write_run_csv(res: RunResult, path: str | Path) -> Path:
    """t, q.*, q_ref.*, v.*, u.*, e.*, task_error, lambda.*, residual (SI units)."""
    model = res.scenario.model
    names = model.coordinate_names
    cols = (["t"] + [f"q.{n}" for n in names] + [f"q_ref.{n}" for n in names]
            + [f"v.{n}" for n in names] + [f"u.{n}" for n in model.input_names]
            + [f"e.{n}" for n in names])
    parts = [res.t[:, None], res.q, res.q_ref, res.v, res.u, res.joint_error]
    if res.task_error.size:
        cols.append("task_error")
        parts.append(res.task_error[:, None])
    cols += [f"lambda.{lab}" for lab in res.lam_labels] + ["residual"]
    parts += [res.lam, res.residual[:, None]]
    path = Path(path)
    np.savetxt(path, np.hstack(parts), delimiter=",", header=",".join(cols), comments="",
               fmt="%.10g")
    write_model_meta(path, "run", model, task_frame=res.scenario.task_frame)
    return path


def plot_run(res: RunResult, path: str | Path, title: str = "") -> Path:
    """PNG: joint errors (analytic error dynamics dashed), task error, inputs, multipliers;
    a panel only for what the run has (no task error without a task frame, no multipliers
    without constraints), legends right of the axes, off the data."""
    from multibody_dynamics.plotting import legend_outside, save_figure, subplots

    model = res.scenario.model
    names = ["joint"] + (["task"] if res.task_error.size else []) + ["input"] + (
        ["lambda"] if res.lam_labels else [])
    fig, axes = subplots(len(names), 1, figsize=(10, 2.5 * len(names)), sharex=True,
                         squeeze=False)
    ax = dict(zip(names, axes[:, 0]))
    t = res.t
    for i, name in enumerate(model.coordinate_names):
        ax["joint"].plot(t, res.joint_error[:, i], lw=1.1, label=name)
    if res.output_error is not None:  # feedback_linearization: its output rows instead
        ax["joint"].cla()
        for j, name in enumerate(res.scenario.controller["options"]["output"]):
            ax["joint"].plot(t, res.output_error[:, j], lw=1.1, label=name)
    if res.analytic_error is not None:
        for j in range(res.analytic_error.shape[1]):
            ax["joint"].plot(t, res.analytic_error[:, j], "k--", lw=0.8)
    ax["joint"].set_ylabel("output error\ny(q_ref) - y(q) [rad | m]"
                           if res.output_error is not None else "joint error\nq_ref - q [rad | m]")
    if "task" in ax:
        ax["task"].plot(t, res.task_error * 1e3, lw=1.1, label=res.scenario.task_frame)
        ax["task"].set_ylabel("task error [mm]")
    for i, name in enumerate(model.input_names):
        ax["input"].plot(t, res.u[:, i], lw=1.1, label=name)
    ax["input"].set_ylabel("input u [N | N m]")
    if "lambda" in ax:
        for i, lab in enumerate(res.lam_labels):
            ax["lambda"].plot(t, res.lam[:, i], lw=1.1, label=lab)
        for x in res.scenario.reference.get("lambda_d") or ():
            ax["lambda"].axhline(x, color="k", ls="--", lw=0.8)
        ax["lambda"].set_ylabel("multipliers [N | N m]")
    for a in ax.values():
        a.grid(alpha=0.3)
        if a.get_legend_handles_labels()[0]:
            legend_outside(a)
    axes[-1, 0].set_xlabel("t [s]")
    status = "" if res.success else (f" (INTERRUPTED: {res.message})" if res.interrupted else
                                     f" (DIVERGED: {res.message})")
    fig.suptitle((title or f"{model.name}: {res.scenario.controller['law']}") + status,
                 fontsize=10)
    return save_figure(fig, path)


# -- inversions of rigid models -------------------------------------------------------------------


#: Open-loop end-effector error [m] above which a successful inversion is flagged: the
#: inverse models of the shipped scenarios reach the path within a few mm (Seifried Sect.
#: 4.2.7: about 3 mm from the Γ approximation), so 10 mm means another motion, not round-off.
LARGE_END_EFFECTOR_ERROR = 0.01

#: The same threshold for a task of joint coordinates, which has no end-effector point: the
#: largest open-loop output error [rad | m].
LARGE_OUTPUT_ERROR = 0.01


def write_inversion_csv(result: InversionResult, model: MultibodyModel, path: str | Path) -> Path:
    """t, q.*, v.*, u.*, y.*, y_d.* of an inversion (SI units)."""
    path = Path(path)
    cols = (["t"] + [f"q.{n}" for n in model.coordinate_names] + [f"v.{n}" for n in
            model.coordinate_names] + [f"u.{n}" for n in model.input_names]
            + [f"y.{i}" for i in range(result.y.shape[1])]
            + [f"y_d.{i}" for i in range(result.y.shape[1])])
    data = np.column_stack([result.t, result.q, result.v, result.u, result.y, result.y_desired])
    header = ",".join(cols)
    np.savetxt(path, data, delimiter=",", header=header, comments="", fmt="%.10g")
    write_model_meta(path, "invert", model, outputs=list(result.output_names))
    return path


def plot_inversion(result: InversionResult, model: MultibodyModel, path: str | Path,
                   title: str = "", verification: VerificationResult | None = None) -> Path:
    """Output vs desired, joint motion, feedforward, internal states (a panel only when the model
    has them or the check draws there); pre/post-actuation shaded; legends right of the axes,
    off the data."""
    from multibody_dynamics.plotting import save_figure, subplots

    nu = result.eta.shape[1] // 2
    passive = nu == 0 and bool(model.closures) and model.nq == model.nv and any(model.passive)
    ee = verification is not None and not np.all(np.isnan(verification.end_effector_error))
    panels = 4 if nu or passive or ee else 3  # no empty internal-state panel
    fig, axes = subplots(panels, 1, figsize=(10, 2.5 * panels), sharex=True)
    t = result.t

    causal = result.method == "causal"  # at rest outside [t0, tf]: no pre-/post-actuation
    at_rest = causal or bool(model.closures)  # closed loops: no internal dynamics either

    def shade(ax):
        if t[0] < result.t0:
            ax.axvspan(t[0], result.t0, color="0.9", label="rest" if at_rest else "pre-actuation")
        if t[-1] > result.tf:  # "rest" once in the legend
            ax.axvspan(result.tf, t[-1], color="0.95", label="post-actuation" if not at_rest
                       else "_rest" if t[0] < result.t0 else "rest")

    y_nominal = getattr(result, "y_nominal", None)  # causal inversion: before modification
    for k, name in enumerate(result.output_names):
        axes[0].plot(t, result.y_desired[:, k], "k--", lw=1)
        if y_nominal is not None and y_nominal.shape == result.y.shape:
            axes[0].plot(t, y_nominal[:, k], "k:", lw=0.8)
        axes[0].plot(t, result.y[:, k], lw=1.2, label=name)
    axes[0].set_ylabel("output y\n(-- desired" + (", : nominal)" if causal else ")"))
    for k, name in enumerate(model.coordinate_names):
        axes[1].plot(t, result.q[:, k], lw=1.2, label=name)
    axes[1].set_ylabel("q [m, rad]")
    colors = {}
    for k, name in enumerate(model.input_names):
        colors[name] = axes[2].plot(t, result.u[:, k], lw=1.2, label=name)[0].get_color()
    axes[2].set_ylabel("feedforward u\n[N, N m]")
    for k in range(nu):
        axes[3].plot(t, result.eta[:, k], lw=1.2, label=model.passive_joint_names[k])
    if panels == 4:
        axes[3].set_ylabel("internal states\nq_u [rad]")
    if passive:  # passive joints follow the closures
        for k in np.flatnonzero(model.passive):
            axes[3].plot(t, result.q[:, k], lw=1.2, label=model.coordinate_names[k])
        axes[3].set_ylabel("passive joints (closures)\nq_u [rad]")
    if verification is not None:
        _plot_check(axes, verification, colors)
    for ax in axes:
        shade(ax)
        ax.grid(alpha=0.3)
    _legends(axes, ee)
    axes[-1].set_xlabel("t [s]")
    fig.suptitle(title or f"{model.name}: {result.method} inversion")
    return save_figure(fig, path)


def _legends(axes, ee: bool) -> None:
    """Legends right of the axes, off the data; the bottom one past the end-effector error's
    own axis (``ee``)."""
    from multibody_dynamics.plotting import legend_outside

    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            legend_outside(ax)
    if ee and axes[3].get_legend() is not None:
        axes[3].get_legend().set_bbox_to_anchor((1.12, 1.0))


def _plot_check(axes, verification: VerificationResult, colors: dict) -> None:
    """The open-loop check on the inversion's plot: the end-effector error (dotted, own axis)
    or, for a joint task, the simulated joints (dotted over the planned ones); the actuator
    ranges the feedforward leaves (dashed, in the input's colour)."""
    if np.all(np.isnan(verification.end_effector_error)):  # a joint task: no end effector
        for k in range(verification.q.shape[1]):
            axes[1].plot(verification.t, verification.q[:, k], ":", lw=1.2,
                         color=axes[1].lines[k].get_color() if k < len(axes[1].lines) else "k")
        axes[1].plot([], [], "k:", lw=1.2, label="open-loop check")
    else:
        ax2 = axes[3].twinx()
        ax2.plot(verification.t, verification.end_effector_error * 1e3, "r:", lw=1)
        ax2.set_ylabel("open-loop end-effector\nerror [mm] (dotted)", color="r")
    for e in verification.limit_excess:
        if e.limit == "ctrlrange":
            for bound in (e.lower, e.upper):
                if np.isfinite(bound):
                    axes[2].axhline(bound, ls="--", lw=0.8, color=colors.get(e.name, "k"))
            axes[2].plot([], [], "--", lw=0.8, color=colors.get(e.name, "k"),
                         label=f"{e.name} ctrlrange")


def inversion_summary(result: InversionResult, verification: VerificationResult | None) -> str:
    """The summary printed by ``multibody invert``: outcome, zero dynamics, errors, cost."""
    lam = ", ".join(f"{z.real:.4g}{z.imag:+.4g}j" if abs(z.imag) > 1e-9 else f"{z.real:.4g}"
                    for z in result.eigenvalues)
    lines = [
        f"method            {result.method}: {'ok' if result.success else 'FAILED'} - "
        f"{result.message}",
        f"output            y = [{', '.join(result.output_names)}]",
        f"zero dynamics     eigenvalues [{lam}] 1/s",
    ]
    if result.t.size:
        lines += [
            f"interval          {result.t[0]:.4g} s .. {result.t[-1]:.4g} s (motion {result.t0:g} "
            f".. {result.tf:g} s; pre-actuation {result.t_pre:.3g} s, post {result.t_post:.3g} s)",
            f"output error      {result.output_error:.3g} (inverse model)",
            "peak feedforward  " + ", ".join(f"{n} {v:.4g}" for n, v in
                                              zip(result.input_names,
                                                  np.abs(result.u).max(axis=0))),
        ]
    lines.append(f"cpu time          {result.wall_time:.3g} s, {result.nfev} dynamics evaluations")
    if result.method == "quasi_static":
        lines.append("open-loop check   not run: the compensated reference is for a feedback law "
                     "(Seifried Sect. 6.1); run it closed loop with `multibody run`")
    if verification is not None:
        ee = ("- (a joint task)" if np.isnan(verification.max_error) else
              f"{verification.max_error * 1e3:.4g} mm")
        lines.append(f"open-loop check   end-effector error {ee}, output error "
                     f"{verification.output_error:.3g}")
        if result.success and verification.max_error > LARGE_END_EFFECTOR_ERROR:
            why = (" (the causal route shapes the output with its free parameters: a different "
                   "motion by design; compare the stable inversion)"
                   if result.method == "causal" else "")
            lines.append(f"warning           the end effector misses the desired path by "
                         f"{verification.max_error * 1e3:.4g} mm although the inversion "
                         f"succeeded{why}")
        if (result.success and np.isnan(verification.max_error)
                and verification.output_error > LARGE_OUTPUT_ERROR):
            lines.append(f"warning           the open-loop output leaves the desired one by "
                         f"{verification.output_error:.4g} rad | m although the inversion "
                         "succeeded (an open-loop unstable plant or a limited input: track it "
                         "with feedback, `multibody run`)")
        lines += _limit_lines(verification)
    return "\n".join(lines)


def _limit_lines(verification: VerificationResult) -> list[str]:
    """The summary's lines on actuator limits the feedforward exceeds (none when within)."""
    excess = verification.limit_excess
    if not excess:
        return []
    lines = [f"warning           the feedforward exceeds {len(excess)} actuator limit"
             f"{'s' if len(excess) > 1 else ''}; the open-loop check simulated the limited "
             "input (the feedforward written is the unlimited inverse input):"]
    lines += [f"  actuator limit  {e.describe()}" for e in excess]
    return lines


# -- flexible and closed flexible inversions ------------------------------------------------------


def flexible_summary(sc, runs) -> str:
    """The design table printed by ``multibody invert`` for a flexible scenario."""
    if isinstance(sc, ClosedInversionScenario):
        return closed_summary(sc, runs)
    lines = [f"{'design':14s} {'status':8s} {'max error':>12s} {'until tf':>12s} {'peak |u|':>18s}"
             f" {'cpu':>8s}  message"]
    for method, (res, track) in runs.items():
        err = "-" if track is None else f"{track.max_error * 1e3:9.4g} mm"
        during = "-" if track is None else f"{track.max_error_motion * 1e3:9.4g} mm"
        peak = "-" if not res.success else ", ".join(f"{v:.3g}" for v in np.abs(res.u).max(axis=0))
        lines.append(f"{method:14s} {'ok' if res.success else 'FAILED':8s} {err:>12s} "
                     f"{during:>12s} {peak:>18s} {res.wall_time:7.3g}s  {res.message}")
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
    _write_meta(sc, path, sc.chain.config.name)
    return path


def _write_meta(sc, csv_path: Path, name: str) -> None:
    """The result sidecar (``multibody animate``): the model's name and, when the scenario
    gives the model as a YAML path, that path."""
    robot = str(read_scenario_file(sc.path).get("robot", ""))
    model_path = None
    if robot.endswith((".yaml", ".yml")):
        model_path = robot if Path(robot).is_absolute() else Path(sc.path).parent / robot
    write_result_meta(csv_path, "invert", name, model_path, flexible=True)


def _save_designs_figure(fig, axes, sc, title: str, path: str | Path, **legend) -> Path:
    """The common end of the design plots: the motion [t0, tf] of the task shaded, grids,
    legends where there are labelled lines, the time label, the scenario's description as the
    title (else ``title``); saved to ``path``."""
    from multibody_dynamics.plotting import save_figure

    for ax in axes:
        ax.axvspan(sc.task.law.t0, sc.task.law.tf, color="0.93")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right", **legend)
    axes[-1].set_xlabel("t [s] (shaded: motion)")
    fig.suptitle(sc.description or title)
    return save_figure(fig, path)


def plot_flexible(sc, runs, path: str | Path) -> Path:
    """End-effector error of every design (log scale), elastic coordinates, feedforward."""
    if isinstance(sc, ClosedInversionScenario):
        return plot_closed(sc, runs, path)
    from multibody_dynamics.plotting import subplots

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
    return _save_designs_figure(fig, axes, sc, f"{sc.chain.config.name}: feedforward designs",
                                path, fontsize=7, ncol=2)


def _split(lam) -> str:
    return f"{int(np.sum(lam.real < 0))} stable / {int(np.sum(lam.real > 0))} unstable"


def closed_summary(sc: ClosedInversionScenario, runs) -> str:
    f = sc.tracking["frequency"]
    lines = [f"{'design':22s} {'status':7s} {'tool error':>12s} {'until tf':>12s} "
             f"{'simulated':>12s} {'book':>9s} {'peak |u| [N]':>14s} {'cpu':>7s}  message"]
    for label, d in runs.items():
        res = d.result
        ok = res.success and d.tool_error.size
        err = f"{d.tool_error.max() * 1e3:9.4g} mm" if ok else "-"
        during = f"{d.during_motion(sc.task) * 1e3:9.4g} mm" if ok else "-"
        sim = "-" if d.tracking_error is None else f"{d.tracking_error.max() * 1e3:9.4g} mm"
        book = BOOK_TOOL_ERROR_MM.get((d.spec.method, d.spec.output)) \
            if d.spec.gamma is None else None
        book = "-" if book is None else f"~{book:g} mm"
        peak = ", ".join(f"{v:.3g}" for v in np.abs(res.u).max(axis=0)) if ok else "-"
        cpu = res.wall_time + (d.tracking.wall_time if d.tracking is not None else 0.0)
        lines.append(f"{label:22s} {'ok' if res.success else 'FAILED':7s} {err:>12s} {during:>12s}"
                     f" {sim:>12s} {book:>9s} {peak:>14s} {cpu:6.3g}s  {res.message}")
    seen = set()
    for d in runs.values():
        lam = d.eigenvalues
        key = (d.spec.output, d.spec.gamma is None)
        if not lam.size or key in seen:
            continue
        seen.add(key)
        un = lam[lam.real > 0]
        desc = ", ".join(f"{z.real:.4g}{z.imag:+.4g}j" if abs(z.imag) > 1e-9 * abs(z) else
                         f"{z.real:.4g}" for z in un[np.argsort(np.abs(un))])
        book = BOOK_ZERO_DYNAMICS.get(d.spec.output) if d.spec.gamma is None else None
        lines.append(f"zero dynamics ({d.spec.output} output, at the start): {_split(lam)}"
                     + (f" (book: {book})" if book else "")
                     + (f"; unstable [{desc}] 1/s" if desc else ""))
    worst = max((d.output_error for d in runs.values() if np.isfinite(d.output_error)),
                default=float("nan"))
    lines.append(f"tool error: distance of the tool point ({sc.body} tip) from the task; inverse "
                 "model (max, and until tf), and simulated closed plant with feedforward + cart "
                 f"PD ({f:g} Hz){'' if sc.verify else ' (verify: false, not simulated)'}; "
                 f"output reproduced to {worst:.2g}")
    return "\n".join(lines)


def write_closed_csv(sc: ClosedInversionScenario, design: ClosedDesign, path: str | Path) -> Path:
    """``t, q.*, v.*, u.*`` of the design, the inverse model's tool error [m] and the simulated
    one (NaN without a simulation)."""
    path = Path(path)
    res = design.result
    names = sc.system.coordinate_names
    sim = (np.interp(res.t, design.tracking.t, design.tracking_error, left=np.nan, right=np.nan)
           if design.tracking is not None else np.full(res.t.size, np.nan))
    cols = (["t"] + [f"q.{n}" for n in names] + [f"v.{n}" for n in names]
            + [f"u.{n}" for n in sc.system.actuated] + ["tool_error", "tracking_error"])
    np.savetxt(path, np.column_stack([res.t, res.q, res.v, res.u, design.tool_error, sim]),
               delimiter=",", header=",".join(cols), comments="", fmt="%.10g")
    _write_meta(sc, path, sc.system.name)
    return path


def plot_closed(sc: ClosedInversionScenario, runs, path: str | Path) -> Path:
    """Tool error of every design (inverse model solid, simulated dotted; log scale), the
    elastic coordinates and the feedforward of the scenario's design."""
    from multibody_dynamics.plotting import subplots

    fig, axes = subplots(3, 1, figsize=(9, 9), sharex=True)
    for label, d in runs.items():
        if d.tool_error.size:
            line, = axes[0].semilogy(d.result.t, np.maximum(d.tool_error, 1e-9) * 1e3, lw=1.2,
                                     label=label)
            if d.tracking is not None:
                axes[0].semilogy(d.tracking.t, np.maximum(d.tracking_error, 1e-9) * 1e3, ":",
                                 color=line.get_color(), lw=1)
    axes[0].set_ylabel("tool error [mm]\n(dotted: simulated)")
    d = runs[sc.designs[0].label]
    res = d.result
    if res.t.size:
        nr = sc.system.nq_r
        for k, name in enumerate(sc.system.coordinate_names[nr:]):
            axes[1].plot(res.t, res.q[:, nr + k], lw=0.8, label=name)
        for k, name in enumerate(sc.system.actuated):
            axes[2].plot(res.t, res.u[:, k], lw=1.2, label=name)
    axes[1].set_ylabel(f"q_e ({sc.designs[0].label})")
    axes[2].set_ylabel("feedforward [N]")
    return _save_designs_figure(fig, axes, sc, f"{sc.system.name}: feedforward designs", path,
                                fontsize=6, ncol=3)
