"""The ``multibody`` command.

Every subcommand has ``--help``.  Bad input ends with exit code 2 and a
one-line message on stderr (never a traceback); ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from multibody_dynamics.errors import MultibodyError

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's own convention)
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def _robot_arg(p):
    p.add_argument("robot", help="shipped robot name (see `multibody models`) or path to a model YAML")


def cmd_models(args) -> int:
    from multibody_dynamics.model import load_model, shipped_robots

    rows = []
    for name in shipped_robots():
        m = load_model(name)
        closures = ", ".join(f"{c.name} ({c.type}, {c.rows} rows)" for c in m.closures) or "-"
        rows.append((name, str(m.nq), str(m.nv), str(m.nu), closures,
                     ", ".join(m.passive_joint_names) or "-", m.description))
    head = ("robot", "nq", "nv", "nu", "closures", "passive joints", "description")
    widths = [max(len(r[k]) for r in rows + [head]) for k in range(len(head) - 1)]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    from multibody_dynamics.flexible.loader import load_flexible_model, shipped_flexible_models

    flexible = shipped_flexible_models()
    if flexible:
        print("\nflexible models (config/robots/ files with 'bodies' or 'builder'; Python: "
              "multibody_dynamics.flexible.loader.load_flexible_model)")
        for name in flexible:
            chain = load_flexible_model(name)
            print(f"  {name}: nq={chain.nq} ({chain.nq_r} rigid + {chain.nq_e} elastic), "
                  f"inputs={chain.nu}; {chain.config.description}")
    return 0


def cmd_check(args) -> int:
    from multibody_dynamics.flexible.loader import load_flexible_model
    from multibody_dynamics.model import load_model

    if _is_flexible_robot(args.robot):
        chain = load_flexible_model(args.robot)
        print(chain.summary())
        print("ok: flexible model loaded and validated")
        return 0
    model = load_model(args.robot)
    print(model.summary())
    print("ok: model loaded and validated")
    return 0


def demo_motion(model, duration: float = 2.0, rate: float = 200.0):
    """Built-in rest-to-rest motion (quintic, ``duration`` s, 0.25 s of rest at each end)."""
    from .trajectories import rest_to_rest

    t = np.arange(0.0, duration + 0.5 + 0.5 / rate, 1.0 / rate)
    q0 = model.q_rest.copy()
    pm = model.pin_model
    step = np.zeros(model.nv)
    for jid in range(1, pm.njoints):
        j = pm.joints[jid]
        if j.nv != 1 or j.nq != 1:
            continue
        prismatic = "P" in j.shortname()
        lo, hi = pm.lowerPositionLimit[j.idx_q], pm.upperPositionLimit[j.idx_q]
        span = min(hi - lo, 0.6 if prismatic else 2.0) if np.isfinite(hi - lo) else 1.0
        step[j.idx_v] = 0.4 * span * (1 if j.idx_v % 2 == 0 else -1)
    return rest_to_rest(t, q0, q0 + step, 0.25, 0.25 + duration, order=5)


def _payload(args, model):
    from multibody_dynamics.rigid import Payload

    given = any(x is not None for x in (args.payload_mass, args.payload_com, args.payload_force,
                                        args.payload_torque))
    if not given:
        return None
    return Payload(
        mass=args.payload_mass or 0.0,
        com=tuple(args.payload_com or (0, 0, 0)),
        force=tuple(args.payload_force or (0, 0, 0)),
        force_point=tuple(args.payload_force_point) if args.payload_force_point else None,
        torque=tuple(args.payload_torque or (0, 0, 0)),
    )


def cmd_requirements(args) -> int:
    from multibody_dynamics.model import load_model
    from multibody_dynamics.requirements import requirements_analysis

    from .trajectories import read_trajectory_csv

    model = load_model(args.robot)
    if args.trajectory == "demo":
        traj = demo_motion(model)
    else:
        traj = read_trajectory_csv(args.trajectory, model.coordinate_names)
    payload = _payload(args, model)
    result = requirements_analysis(model, traj.t, traj.q, traj.v, traj.a, payload,
                                   progress=not args.quiet)
    print(f"{model.name}: {traj.t.size} samples, {traj.t[0]:.3g} s to {traj.t[-1]:.3g} s"
          + (f", payload {payload.mass:g} kg" if payload else ""))
    print(result.format_peaks())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = result.to_csv(out / f"{model.name}_requirements.csv")
    png_path = result.plot(out / f"{model.name}_requirements.png",
                           title=f"{model.name}: joint reaction loads")
    print(f"wrote {csv_path}\nwrote {png_path}")
    return 0


def _constant_input(model, values):
    """--tau: nu input values (tau = B u, in the order of the model's inputs) or nv
    generalized forces; nu is tried first."""
    if values is None:
        return np.zeros(model.nv)
    u = np.asarray(values, float)
    if u.size == model.nu:
        return model.B @ u
    if u.size == model.nv:
        return u
    raise MultibodyError(f"--tau: expected {model.nu} input values ({', '.join(model.input_names)}) "
                         f"or {model.nv} generalized forces, got {u.size}")


def cmd_simulate(args) -> int:
    from multibody_dynamics.model import load_model
    from multibody_dynamics.rolling import model_constraints
    from multibody_dynamics.simulate import SimulatorConfig, simulate

    if not (np.isfinite(args.duration) and args.duration > 0):
        raise MultibodyError(f"--duration: expected a positive time in s, got {args.duration:g}")
    if _is_flexible_robot(args.robot):
        return _simulate_flexible(args)
    model = load_model(args.robot)
    q0 = v0 = None
    if args.q0 is not None:
        if len(args.q0) != model.nq:
            raise MultibodyError(f"--q0: expected {model.nq} values (one per configuration "
                                 f"coordinate), got {len(args.q0)}")
        q0 = np.array(args.q0, float)
    if args.v0 is not None:
        if len(args.v0) != model.nv:
            raise MultibodyError(f"--v0: expected {model.nv} values ({', '.join(model.coordinate_names)}), "
                                 f"got {len(args.v0)}")
        v0 = np.array(args.v0, float)
    tau = _constant_input(model, args.tau)
    if args.rtol is not None:
        config = SimulatorConfig(rtol=args.rtol, atol=args.atol, position_tol=args.position_tol,
                                 singular_branch=args.singular_branch)
    else:
        config = SimulatorConfig(dt=args.dt, method=args.method, position_tol=args.position_tol,
                                 singular_branch=args.singular_branch)
    result = simulate(model, args.duration, q0, v0, tau, config, progress=not args.quiet,
                      constraints=model_constraints(model), output_dt=args.output_dt)
    print(f"{model.name}: {result.summary()}")
    if args.out:
        print(f"wrote {result.to_csv(args.out)}")
    if args.plot:
        print(f"wrote {result.plot(args.plot, title=f'{model.name}: simulation')}")
    return 0 if result.success else 1


def _simulate_flexible(args) -> int:
    from multibody_dynamics.flexible.loader import load_flexible_model
    from multibody_dynamics.flexible.simulation import simulate_flexible

    model = load_flexible_model(args.robot)
    for flag, value, n in (("--q0", args.q0, model.nv), ("--v0", args.v0, model.nv),
                           ("--tau", args.tau, model.nu)):
        if value is not None and len(value) != n:
            what = "joint inputs" if flag == "--tau" else "values (joints, then elastic coordinates)"
            raise MultibodyError(f"{flag}: {model.config.name} is a flexible model: expected {n} "
                                 f"{what}, got {len(value)}")
    print("flexible model: adaptive DOP853 (default rtol 1e-8); --dt, --method, --position-tol "
          "and --singular-branch apply to rigid models")
    result = simulate_flexible(model, args.duration, args.q0, args.v0, args.tau,
                               rtol=1e-8 if args.rtol is None else args.rtol, atol=args.atol,
                               output_dt=1e-2 if args.output_dt is None else args.output_dt)
    print(f"{result.name}: {result.summary()}")
    if args.out:
        print(f"wrote {result.to_csv(args.out)}")
    if args.plot:
        print(f"wrote {result.plot(args.plot)}")
    return 0 if result.success else 1


def _is_flexible_robot(robot: str) -> bool:
    from multibody_dynamics.flexible.loader import is_flexible_model

    return is_flexible_model(robot)


def _output_from_spec(model, spec: str, gamma):
    from .outputs import Output

    if gamma is not None:
        return Output.combined(model, gamma)
    if spec in (None, "collocated"):
        return Output.collocated(model)
    return Output(model, [row.strip() for row in spec.split(",")])


def cmd_analyze(args) -> int:
    from multibody_dynamics.model import load_model

    from .analysis import analyze_output

    model = load_model(args.robot)
    gamma = None
    if args.gamma is not None:
        gamma = np.array(args.gamma, float)
    output = _output_from_spec(model, args.output, gamma)
    if args.q is not None and len(args.q) != model.nq:
        raise MultibodyError(f"--q: expected {model.nq} values ({', '.join(model.coordinate_names)}), "
                             f"got {len(args.q)}")
    res = analyze_output(model, output, q_guess=None if args.q is None else np.array(args.q, float))
    print(f"{model.name}")
    print(res.format())
    return 0


def cmd_invert(args) -> int:
    from pathlib import Path

    from .inversion import flexible_scenario as fs
    from .inversion.scenario import (
        load_inversion_scenario,
        plot,
        run_inversion_scenario,
        summary,
        write_csv,
    )

    if fs.is_flexible_scenario(args.scenario):
        return _invert_flexible(args, fs)
    from .inversion.methods import METHODS

    sc = load_inversion_scenario(args.scenario)
    if args.method is not None and args.method not in METHODS:
        raise MultibodyError(f"--method: {sc.model.name} is a rigid model: expected one of "
                             f"{', '.join(METHODS)}, got {args.method!r}")
    if sc.combined_gamma is not None:
        print("initial guess: inversion with the linearly combined output first")
    result, ver, _ = run_inversion_scenario(sc, method=args.method, progress=not args.quiet)
    print(f"{sc.model.name}: {sc.description or Path(args.scenario).name}")
    print(summary(result, ver))
    if result.success:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stem = Path(args.scenario).stem
        print(f"wrote {write_csv(result, sc.model, out / f'{stem}.csv')}")
        print(f"wrote {plot(result, sc.model, out / f'{stem}.png', verification=ver)}")
    return 0 if result.success else 1


def _invert_flexible(args, fs) -> int:
    from dataclasses import replace

    from .inversion.flexible import FLEXIBLE_METHODS

    sc = fs.load_flexible_scenario(args.scenario)
    if isinstance(sc, fs.ClosedInversionScenario):
        return _invert_closed(args, fs, sc)
    if args.method is not None:
        if args.method not in FLEXIBLE_METHODS:
            raise MultibodyError(f"--method: {sc.chain.config.name} is a flexible model: expected "
                                 f"one of {', '.join(FLEXIBLE_METHODS)}, got {args.method!r}")
        sc = replace(sc, methods=(args.method,))
    runs = fs.run_flexible_scenario(sc, progress=not args.quiet)
    print(f"{sc.chain.config.name}: {sc.description or Path(args.scenario).name}")
    print(fs.flexible_summary(sc, runs))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(args.scenario).stem
    for method, (res, track) in runs.items():
        if res.success:
            print(f"wrote {fs.write_flexible_csv(sc, res, track, out / f'{stem}.{method}.csv')}")
    print(f"wrote {fs.plot_flexible(sc, runs, out / f'{stem}.png')}")
    return 0 if runs[sc.methods[0]][0].success else 1


def _invert_closed(args, fs, sc) -> int:
    from dataclasses import replace

    if args.method is not None:
        if args.method not in fs.CLOSED_METHODS:
            raise MultibodyError(f"--method: {sc.system.name} is a closed flexible model: expected "
                                 f"one of {', '.join(fs.CLOSED_METHODS)}, got {args.method!r}")
        sc = replace(sc, designs=(replace(sc.designs[0], method=args.method),))
    runs = fs.run_flexible_scenario(sc, progress=not args.quiet)
    print(f"{sc.system.name}: {sc.description or Path(args.scenario).name}")
    print(fs.flexible_summary(sc, runs))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(args.scenario).stem
    for d in runs.values():
        if d.result.t.size:
            name = f"{d.spec.method}_{d.spec.output}" + ("_gamma" if d.spec.gamma is not None else "")
            print(f"wrote {fs.write_closed_csv(sc, d, out / f'{stem}.{name}.csv')}")
    print(f"wrote {fs.plot_flexible(sc, runs, out / f'{stem}.png')}")
    return 0 if runs[sc.designs[0].label].result.success else 1


def cmd_run(args) -> int:
    from .scenarios import load_run_scenario, plot, run_scenario, summary_table, write_csv

    overrides = None
    if args.duration is not None:
        overrides = {"duration": args.duration}
    sc = load_run_scenario(args.scenario, overrides)
    result = run_scenario(sc, progress=not args.quiet)
    print(f"{sc.model.name}: {sc.description or Path(args.scenario).name}")
    print(summary_table(result))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(args.scenario).stem
    print(f"wrote {write_csv(result, out / f'{stem}.csv')}")
    print(f"wrote {plot(result, out / f'{stem}.png')}")
    if not result.success:
        print(f"multibody run: diverged: {result.message}", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="multibody", description="Dynamics and control of closed-loop, "
                     "underactuated and flexible robots.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("models", help="list the shipped robots (rigid and flexible)")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser("check", help="load and validate a model, print its summary")
    _robot_arg(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser(
        "requirements",
        help="joint reaction loads (3 forces + 3 torques per joint) along a motion",
        description="Requirements analysis (NASA CR-165977 App. B): prints the peak table, "
        "writes <robot>_requirements.csv (columns t, <joint>.fx ... <joint>.tz) and a PNG plot.",
    )
    _robot_arg(p)
    p.add_argument("trajectory", help="CSV with columns t, q.<joint>... (v.<joint>, a.<joint> "
                   "optional) or 'demo' for a built-in rest-to-rest motion")
    p.add_argument("--payload-mass", type=float, metavar="KG", help="held payload mass [kg]")
    p.add_argument("--payload-com", type=float, nargs=3, metavar=("X", "Y", "Z"),
                   help="payload centre of mass in the end-effector frame [m]")
    p.add_argument("--payload-force", type=float, nargs=3, metavar=("FX", "FY", "FZ"),
                   help="external force on the payload, world axes [N]")
    p.add_argument("--payload-force-point", type=float, nargs=3, metavar=("X", "Y", "Z"),
                   help="where the force acts, end-effector frame [m] (default: the payload CoM)")
    p.add_argument("--payload-torque", type=float, nargs=3, metavar=("TX", "TY", "TZ"),
                   help="external torque on the payload, world axes [N m]")
    p.add_argument("--out", default="requirements_output", help="output directory (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_requirements)

    p = sub.add_parser(
        "simulate",
        help="simulate a robot (closed loops and rolling contacts included) from an initial state",
        description="Forward simulation with a constant input: projected constrained dynamics "
        "(Aghili 2005) with Newton projection of the state onto the constraint manifold after "
        "every step (fixed steps) or at every output sample (adaptive, --rtol).  Prints a "
        "summary; --out writes a CSV (t, q.<joint>, v.<joint>, lambda.<row>, residual [m | rad], "
        "energy [J]), --plot a PNG.  Exit status 1 when the run fails (NaN, divergence, "
        "projection).",
    )
    _robot_arg(p)
    p.add_argument("--duration", type=float, default=1.0, metavar="S",
                   help="simulated time [s] (default: %(default)s)")
    step = p.add_mutually_exclusive_group()
    step.add_argument("--dt", type=float, default=1e-3, metavar="S",
                      help="fixed step [s] (default: %(default)s)")
    step.add_argument("--rtol", type=float, metavar="R",
                      help="adaptive mode (scipy DOP853) with this relative tolerance")
    p.add_argument("--atol", type=float, default=1e-10, metavar="A",
                   help="absolute tolerance of the adaptive mode (default: %(default)s)")
    p.add_argument("--method", choices=("rk4", "semi_implicit_euler"), default="rk4",
                   help="fixed-step method (default: %(default)s)")
    p.add_argument("--output-dt", type=float, metavar="S",
                   help="interval of the output samples [s] (default: every step; adaptive 0.01)")
    p.add_argument("--position-tol", type=float, default=1e-12, metavar="TOL",
                   help="Newton projection tolerance on |phi| [m | rad] (default: %(default)s)")
    p.add_argument("--singular-branch", choices=("continue", "free"), default="continue",
                   help="adaptive mode, where the constraint Jacobian loses rank (slider-crank at "
                   "q1 = +-pi/2): 'continue' keeps the velocity through the singular "
                   "configuration (bridged by one RK4 step), 'free' leaves the branch to the "
                   "integrator (default: %(default)s; fixed steps continue either way)")
    p.add_argument("--q0", type=float, nargs="+", metavar="Q",
                   help="initial configuration (nq values; default: rest); projected onto the "
                   "constraint manifold first")
    p.add_argument("--v0", type=float, nargs="+", metavar="V",
                   help="initial velocity (nv values; default: 0); projected onto null(A)")
    p.add_argument("--tau", type=float, nargs="+", metavar="U",
                   help="constant input: nu values (tau = B u) or nv generalized forces [N m | N]; "
                   "flexible models: nu joint inputs")
    p.add_argument("--out", metavar="FILE.csv", help="write the samples as CSV")
    p.add_argument("--plot", metavar="FILE.png", help="write positions, residual, energy drift")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser(
        "analyze",
        help="relative degree, decoupling matrix and zero dynamics of an output",
        description="Output analysis (Seifried 2014 Ch. 3-4): decoupling matrix alpha = H M^-1 B "
        "and its condition, vector relative degree, eigenvalues of the linearized zero dynamics "
        "at the equilibrium for the output of the start configuration, minimum phase yes/no.",
    )
    _robot_arg(p)
    p.add_argument("--output", default="collocated", metavar="SPEC",
                   help="'collocated' (y = q_a), or comma-separated rows: joint names, sums like "
                   "'alpha2 + 0.5*beta', frame coordinates like 'tip.x' (default: %(default)s)")
    p.add_argument("--gamma", type=float, nargs="+", metavar="G",
                   help="linearly combined output y = q_a + Gamma q_u: Gamma row by row "
                   "(n_actuated x n_passive values); overrides --output")
    p.add_argument("--q", type=float, nargs="+", metavar="Q",
                   help="start configuration that fixes the analysed output value and branch "
                   "(default: rest with actuated revolute joints at +0.5 rad)")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser(
        "invert",
        help="feedforward for a desired output trajectory (servo-constraints, stable inversion)",
        description="Inverse model of an inversion scenario (config/scenarios/invert_*.yaml): "
        "prints a summary, verifies the feedforward by an open-loop simulation, writes "
        "<scenario>.csv (t, q, v, u, y, y_d) and <scenario>.png (output, joints, feedforward, "
        "internal states; pre/post-actuation shaded).  Exit status 1 when the inversion fails.",
    )
    p.add_argument("scenario", help="inversion scenario YAML")
    p.add_argument("--method",
                   help="override the scenario's method (rigid models: classical, ode, index1, "
                   "index2_euler, stable, causal, quasi_static; flexible models: rigid, collocated, "
                   "quasi_static, stable; closed flexible models: classical, stable)")
    p.add_argument("--out", default="inversion_output", help="output directory (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_invert)

    p = sub.add_parser(
        "run",
        help="closed-loop scenario: reference, controller, perturbed plant (run_*.yaml)",
        description="Run a closed-loop scenario (config/scenarios/run_*.yaml): the reference "
        "(rest-to-rest joints, sinusoidal outputs or an inversion), the controller, and the "
        "embedded simulator as plant at the control rate with zero-order hold (parameter "
        "disturbances, measurement noise, actuator limits).  Prints the summary table (joint "
        "and task-space error, peak actuation, constraint-force error, constraint residual), "
        "writes <scenario>.csv and <scenario>.png.  Exit status 1 when the run diverges.",
    )
    p.add_argument("scenario", help="closed-loop scenario YAML")
    p.add_argument("--duration", type=float, metavar="S", help="override the scenario's duration [s]")
    p.add_argument("--out", default="run_output", help="output directory (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_run)

    from .design.design_cli import add_parser as add_design_parser

    add_design_parser(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (MultibodyError, FileNotFoundError, ValueError) as exc:
        if args.debug:
            raise
        msg = " ".join(str(exc).split())
        print(f"multibody {args.command}: error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("multibody: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
