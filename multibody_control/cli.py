"""The ``multibody`` command.

Every subcommand has ``--help``.  Bad input ends with exit code 2 and a
one-line message on stderr (never a traceback); ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from multibody_dynamics.errors import MultibodyError

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's own convention)
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


def _robot_arg(p):
    p.add_argument("robot",
                   help="shipped robot name (see `multibody models`) or path to a model YAML")


def cmd_models(args) -> int:
    from multibody_dynamics.robot import has_elastic_coordinates, load_robot, shipped_models

    rows = []
    for name in shipped_models():
        m = load_robot(name)
        closures = ", ".join(f"{c.name} ({getattr(c, 'type', 'planar')}, {c.rows} rows)"
                             for c in m.closures) or "-"
        rigid = m.coordinate_names[:m.nv - m.nq_e]  # unactuated joints: zero rows of B
        passive = [n for n, row in zip(rigid, m.B) if not np.any(row)]
        elastic = f"{m.nq_e}" if has_elastic_coordinates(m) else "-"
        rows.append((name, str(m.nq), str(m.nv), str(m.nu), elastic, closures,
                     ", ".join(passive) or "-", m.description))
    head = ("robot", "nq", "nv", "nu", "elastic", "closures", "passive joints", "description")
    widths = [max(len(r[k]) for r in rows + [head]) for k in range(len(head) - 1)]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    return 0


def cmd_check(args) -> int:
    import shlex

    from multibody_dynamics.robot import has_elastic_coordinates, load_robot

    robot = load_robot(args.robot)
    print(robot.summary())
    if robot.closures and not has_elastic_coordinates(robot):
        from multibody_dynamics.assembly import assemble

        result = assemble(robot)
        if not result.success:
            raise MultibodyError(f"{robot.name}: {result.message}")
        print(f"mobility     {result.dof} degree(s) of freedom (nv {robot.nv} - rank "
              f"{result.rank} of the closure Jacobian), {result.redundant} redundant row(s)")
        print(f"assembles    yes: nearest to the start configuration, max |phi| "
              f"{result.residual:.1e} (`multibody assemble {shlex.quote(str(args.robot))}` "
              "lists the modes)")  # as given: a file's model name is no shipped robot
    kind = "flexible model" if has_elastic_coordinates(robot) else "model"
    print(f"ok: {kind} loaded and validated")
    return 0


def demo_motion(model, duration: float = 2.0, rate: float = 200.0):
    """Built-in rest-to-rest motion (quintic, ``duration`` s, 0.25 s of rest at each end).

    Every 1-DoF joint (continuous joints included) moves by 40 % of its range (at most
    2 rad or 0.6 m, 1 rad without limits), alternating in sign; configurations follow from
    ``pin.integrate`` so that (cos, sin) pairs stay on the unit circle.
    """
    import pinocchio as pin

    from .trajectories import SampledTrajectory, rest_to_rest

    t = np.arange(0.0, duration + 0.5 + 0.5 / rate, 1.0 / rate)
    q0 = model.q_initial.copy()
    pm = model.pin_model
    step = np.zeros(model.nv)
    for jid in range(1, pm.njoints):
        j = pm.joints[jid]
        if j.nv != 1:
            continue
        if j.nq == 1:
            prismatic = "P" in j.shortname()
            lo, hi = pm.lowerPositionLimit[j.idx_q], pm.upperPositionLimit[j.idx_q]
            span = min(hi - lo, 0.6 if prismatic else 2.0) if np.isfinite(hi - lo) else 1.0
        else:  # continuous (cos, sin): no range
            span = 1.0
        step[j.idx_v] = 0.4 * span * (1 if j.idx_v % 2 == 0 else -1)
    motion = rest_to_rest(t, np.zeros(model.nv), step, 0.25, 0.25 + duration, order=5)
    q = np.array([pin.integrate(pm, q0, dq) for dq in motion.q])
    return SampledTrajectory(t, q, motion.v, motion.a)


def _payload(args, model):
    from multibody_dynamics.rigid import Payload

    given = any(x is not None for x in (args.payload_mass, args.payload_com, args.payload_force,
                                        args.payload_torque))
    if not given:
        if args.payload_frame is not None:
            raise MultibodyError("--payload-frame: has no effect without --payload-mass, "
                                 "--payload-force or --payload-torque")
        return None
    if args.payload_com is not None and not args.payload_mass and args.payload_force is None:
        raise MultibodyError("--payload-com: has no effect without --payload-mass (or a "
                             "--payload-force acting there); give the payload's mass in kg")
    if args.payload_force_point is not None and args.payload_force is None:
        raise MultibodyError("--payload-force-point: has no effect without --payload-force")
    if args.payload_frame is None and model.end_effector is None:
        raise MultibodyError(f"--payload-*: {model.name} has no end effector to hold the payload "
                             "(a plain URDF names none); pass --payload-frame FRAME or set "
                             "end_effector in a model YAML")
    if args.payload_frame is not None:
        model.frame_id(args.payload_frame)  # an unknown frame fails now, listing the frames
    return Payload(
        frame=args.payload_frame,
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
        if model.nq != model.nv:  # the CSV gives continuous joints by angle
            from dataclasses import replace

            from multibody_dynamics.model.joint_angles import JointAngles

            traj = replace(traj, q=JointAngles(model).configuration(traj.q))
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
    if not np.all(np.isfinite(u)):
        raise MultibodyError(f"--tau: values must be finite, got {u.tolist()}")
    if u.size == model.nu and getattr(model, "actuator_limits", None) is not None:
        from multibody_dynamics.model.actuator_limits import actuation_force

        return lambda t, q, v: actuation_force(model, q, v, u)  # MuJoCo's limits (MJCF)
    if u.size == model.nu:
        return model.B @ u
    if u.size == model.nv:
        return u
    raise MultibodyError(f"--tau: expected {model.nu} input values "
                         f"({', '.join(model.input_names)}) or {model.nv} generalized forces, got "
                         f"{u.size}")


def _simulate_input(model, args):
    """The input of ``simulate``: --tau (constant, (nv,)) or --tau-file (callable
    tau(t, q, v) = B u(t), :mod:`.input_file`)."""
    if args.tau_file is None:
        return _constant_input(model, args.tau)
    if args.tau is not None:
        raise MultibodyError("--tau and --tau-file: give a constant input or a file, not both")
    from .input_file import read_input_file

    u_of_t = read_input_file(args.tau_file, model.input_names, args.duration, args.tau_hold)
    if getattr(model, "actuator_limits", None) is not None:
        from multibody_dynamics.model.actuator_limits import actuation_force

        return lambda t, q, v: actuation_force(model, q, v, u_of_t(t))  # MuJoCo's limits
    B = np.asarray(model.B, float)
    return lambda t, q, v: B @ u_of_t(t)


def _pairs(values, flag: str, convert) -> dict:
    """``["a=1", "b=2"]`` -> ``{"a": convert("1"), ...}``; one-line errors naming the flag."""
    out = {}
    for item in values or ():
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise MultibodyError(f"{flag}: expected NAME=VALUE, got {item!r}")
        if name in out:
            raise MultibodyError(f"{flag}: {name} given twice")
        try:
            out[name] = convert(raw)
        except ValueError:
            expected = ("+ or - (the sign of the branch)" if convert is _sign
                        else "a number [rad | m]")
            raise MultibodyError(f"{flag}: {item!r}: expected {expected}") from None
    return out


def _sign(raw: str) -> int:
    if raw in ("+", "+1", "1"):
        return 1
    if raw in ("-", "-1"):
        return -1
    raise ValueError(raw)


def _assemble(model, args, quiet: bool = False):
    """Assembled start of a closed-loop model from ``--given``/``--branch`` (CLI commands)."""
    from multibody_dynamics.assembly import assemble

    given = _pairs(getattr(args, "given", None), "--given", float)
    branch = _pairs(getattr(args, "branch", None), "--branch", _sign)
    result = assemble(model, given, branch=branch)
    if not result.success:
        raise MultibodyError(f"{model.name}: cannot assemble a start: {result.message}")
    if not quiet:
        q = ", ".join(f"{n}={x:.6g}" for n, x in zip(model.coordinate_names,
                                                      _joint_values(model, result.q)))
        print(f"start: assembled ({result.mode}; max |phi| {result.residual:.1e}): {q}")
    return result


def _joint_values(model, q) -> np.ndarray:
    """One value per coordinate name (nv,) of ``q`` (nq,): continuous joints as angles [rad]
    in (-pi, pi] (pinocchio's difference from the neutral configuration)."""
    import pinocchio as pin

    pm = model.pin_model
    return pin.difference(pm, pin.neutral(pm), np.asarray(q, float))


def cmd_assemble(args) -> int:
    from multibody_dynamics.model import load_model

    model = load_model(args.robot)
    if not model.closures:
        raise MultibodyError(f"{model.name} has no loop closures: every configuration is "
                             "assembled")
    from multibody_dynamics.assembly import assemble

    result = assemble(model, _pairs(args.given, "--given", float),
                      branch=_pairs(args.branch, "--branch", _sign), starts=args.starts,
                      seed=args.seed)
    print(f"{model.name}: {result.message}")
    print(f"mobility     {result.dof} degree(s) of freedom (nv {model.nv} - rank {result.rank}), "
          f"{result.redundant} redundant closure row(s)")
    if not result.modes:
        return 1
    width = max(len(n) for n in model.coordinate_names)
    for k, mode in enumerate(result.modes):
        head = "chosen" if k == 0 and result.success else "other"
        print(f"{head:6s} mode {mode.label}  (distance from the guess {mode.distance:.3g})")
        if k == 0 or args.all:
            for n, x in zip(model.coordinate_names, _joint_values(model, mode.q)):
                print(f"    {n.ljust(width)}  {x: .9f}")
    if args.out and result.success:
        path = Path(args.out)
        path.write_text(",".join(model.coordinate_names) + "\n"
                        + ",".join(repr(float(x)) for x in _joint_values(model, result.q))
                        + "\n")
        print(f"wrote {path}")
    return 0 if result.success else 1


def _check_run_length(args) -> None:
    """--duration, --dt and --output-dt of ``simulate``, before anything is loaded."""
    from multibody_dynamics.validation import check_sample_budget

    if not (np.isfinite(args.duration) and args.duration > 0):
        raise MultibodyError(f"--duration: expected a positive time in s, got {args.duration:g}")
    # the interval the run records: --output-dt, else every fixed step, else the adaptive
    # mode's default 0.01 s (multibody_dynamics.simulate)
    step = args.output_dt or (args.dt if args.rtol is None else 1e-2)
    check_sample_budget(args.duration, step, "--duration / --dt" if args.rtol is None and not
                        args.output_dt else "--duration / --output-dt", "pass a larger "
                        "--output-dt or a shorter --duration")
    if args.rtol is None and args.dt > args.duration:
        raise MultibodyError(f"--dt: the step {args.dt:g} s is longer than --duration "
                             f"{args.duration:g} s")


def _simulation_start(model, args):
    """``(q0, v0)`` of ``simulate`` from --q0 / --given / --branch and --v0 (None: default);
    a closed loop without --q0 starts assembled."""
    q0 = v0 = None
    actuated = [n for n, p in zip(model.coordinate_names, model.passive) if not p]
    if (args.q0 is not None and model.closures and len(args.q0) == len(actuated) < model.nv
            and not args.given):  # the actuated joints only: the rest solved by assembly
        args.given = [f"{n}={x!r}" for n, x in zip(actuated, args.q0)]
        args.q0 = None
    if args.q0 is not None:
        from multibody_dynamics.model.joint_angles import configuration_from_values

        try:
            q0 = configuration_from_values(model, args.q0, "--q0")
        except MultibodyError as exc:
            if not model.closures:
                raise
            raise MultibodyError(f"{exc}; or the {len(actuated)} actuated joint(s) "
                                 f"({', '.join(actuated)}) alone, the rest assembled (or "
                                 "--given NAME=VALUE)") from None
        if args.given or args.branch:
            raise MultibodyError("--q0 and --given/--branch: give the full start or the known "
                                 "coordinates, not both")
        args.q0_asked = q0  # compared with the start the closures admitted
    elif model.closures:
        q0 = _assemble(model, args, quiet=args.quiet).q
    elif args.given or args.branch:
        raise MultibodyError(f"--given/--branch: {model.name} has no loop closures; use --q0")
    if args.v0 is not None:
        if len(args.v0) != model.nv:
            raise MultibodyError(f"--v0: expected {model.nv} values "
                                 f"({', '.join(model.coordinate_names)}), got {len(args.v0)}")
        v0 = np.array(args.v0, float)
    return q0, v0


def cmd_simulate(args) -> int:
    from multibody_dynamics.robot import has_elastic_coordinates, load_robot
    from multibody_dynamics.simulate import SimulationInterrupted

    _check_run_length(args)
    robot = load_robot(args.robot)
    # the plant's integrator: adaptive DOP853 with elastic coordinates, else the rigid
    # simulator; the inputs are checked before the run, whose result (one SimulationResult)
    # is written the same way
    run, v0 = (_flexible_run(args, robot) if has_elastic_coordinates(robot)
               else _rigid_run(args, robot))
    interrupted = False
    try:
        result = run()
    except SimulationInterrupted as exc:  # Ctrl-C: report and write what was computed
        result, interrupted = exc.result, True
    return _write_simulation(args, robot, result, interrupted, v0)


def _rigid_run(args, model):
    """``(run, v0)``: the rigid simulation of ``args`` as a call, and the start velocity."""
    from multibody_dynamics.rolling import model_constraints
    from multibody_dynamics.simulate import SimulatorConfig, simulate

    tau = _simulate_input(model, args)  # before the start: a bad input file fails at once
    q0, v0 = _simulation_start(model, args)
    if args.rtol is not None:
        config = SimulatorConfig(rtol=args.rtol, atol=args.atol, position_tol=args.position_tol,
                                 singular_branch=args.singular_branch)
    else:
        config = SimulatorConfig(dt=args.dt, method=args.method, position_tol=args.position_tol,
                                 singular_branch=args.singular_branch)
    from .simulate_notes_cli import note_stiff_springs

    note_stiff_springs(model, q0, config)
    return (lambda: simulate(model, args.duration, q0, v0, tau, config, progress=not args.quiet,
                             constraints=model_constraints(model), output_dt=args.output_dt,
                             on_sample=getattr(args, "on_sample", None)),  # simulate --view
            v0)


def _flexible_run(args, model):
    """``(run, None)``: the flexible simulation of ``args`` as a call."""
    from multibody_dynamics.flexible.simulation import simulate_flexible
    from multibody_dynamics.validation import check_sample_budget

    if args.tau_file is not None:
        raise MultibodyError("--tau-file: replays inputs on rigid models; flexible models take "
                             "a constant --tau")
    for flag, value, n in (("--q0", args.q0, model.nv), ("--v0", args.v0, model.nv),
                           ("--tau", args.tau, model.nu)):
        if value is not None and len(value) != n:
            what = ("joint inputs" if flag == "--tau"
                    else "values (joints, then elastic coordinates)")
            raise MultibodyError(f"{flag}: {model.name} is a flexible model: expected {n} "
                                 f"{what}, got {len(value)}")
    print("flexible model: adaptive DOP853 (default rtol 1e-8); --dt, --method, --position-tol "
          "and --singular-branch apply to rigid models")
    output_dt = args.output_dt
    why = None
    if output_dt is None:
        output_dt, why = _flexible_output_dt(model)
        output_dt = min(output_dt, args.duration)
    if output_dt < args.duration:  # a longer --output-dt records the start and the end
        check_sample_budget(args.duration, output_dt, "--duration / --output-dt",
                            "pass a larger --output-dt or a shorter --duration")
    if why is not None:
        print(f"samples every {output_dt:g} s ({why}; --output-dt to change)")
    return (lambda: simulate_flexible(
        model, args.duration, args.q0, args.v0, args.tau,
        rtol=1e-8 if args.rtol is None else args.rtol, atol=args.atol,
        output_dt=output_dt, progress=not args.quiet,
        on_sample=getattr(args, "on_sample", None)), None)  # simulate --view


def _flexible_output_dt(model) -> tuple[float, str]:
    """Default sample interval [s] of a flexible simulation and why: at least 10 samples per
    period of the stiffest mode (linearized at rest,
    :func:`~multibody_dynamics.flexible.stepper.highest_frequency`), rounded down to 1, 2 or 5
    times a power of ten, at most 0.01 s, so that the recorded elastic coordinates do not alias
    the modes.  A closed loop takes the stiffest mode of its spanning tree at the assembled
    neutral configuration: the loop's modes are those of the tree restricted to the
    constraints' tangent space, whose highest frequency is at most the tree's (interlacing of
    the restricted eigenproblem); its samples between projections come from the solver's
    dense output (:data:`~multibody_dynamics.flexible.simulation.PROJECTION_DT`)."""
    from multibody_dynamics.flexible.stepper import highest_frequency
    from multibody_dynamics.flexible.system import FlexibleChain

    if isinstance(model, FlexibleChain):
        f_max = highest_frequency(model) / (2 * np.pi)
    else:
        q = model.project_position(model.chain.neutral())
        f_max = highest_frequency(model.chain, q) / (2 * np.pi)
    if not f_max * 10 * 1e-2 > 1:
        return 1e-2, f"stiffest mode {f_max:.3g} Hz"
    raw = 1.0 / (10 * f_max)
    decade = 10.0 ** np.floor(np.log10(raw))
    step = max(m for m in (1.0, 2.0, 5.0) if m * decade <= raw * (1 + 1e-12)) * decade
    return float(step), f"10 or more per period of the stiffest mode, {f_max:.4g} Hz"


def _write_simulation(args, robot, result, interrupted: bool, v0=None) -> int:
    """Summary, CSV with its sidecar, plot of any plant's SimulationResult; exit status.
    ``v0``: the start velocity asked for, compared with the one the closures admitted."""
    from multibody_dynamics.robot import has_elastic_coordinates

    dissipative = bool(np.any(getattr(robot, "damping", 0.0)))
    print(f"{robot.name}: {result.summary(dissipative=dissipative)}")
    if v0 is not None and result.v.shape[0] and not np.allclose(result.v[0], v0, rtol=0,
                                                                 atol=1e-12):
        print(f"note: --v0 was projected onto the closures (A v = 0): used "
              f"{np.array2string(result.v[0], precision=6)} instead of "
              f"{np.array2string(v0, precision=6)}")
    from .simulate_notes_cli import note_projected_start

    note_projected_start(args, robot, result)
    if args.out and result.t.size:
        written = result.to_csv(args.out)
        if not getattr(args, "csv_intermediate", False):  # --out X.npz: only X.npz is kept
            print(f"wrote {written}")
        if has_elastic_coordinates(robot):
            from multibody_dynamics.flexible.loader import resolve_flexible_path
            from multibody_dynamics.result_meta import write_result_meta

            write_result_meta(args.out, "simulate", robot.name,
                              resolve_flexible_path(args.robot), flexible=True)
        else:
            from multibody_dynamics.result_meta import write_model_meta

            write_model_meta(args.out, "simulate", robot)  # the robot, for `multibody animate`
    if args.plot and result.t.size:
        print(f"wrote {result.plot(args.plot, title=f'{robot.name}: simulation', model=robot)}")
    if interrupted:  # the samples kept are marked partial
        return _interrupted("simulate", args.out if args.out and result.t.size else None,
                            result.message)
    if not result.success:  # the samples up to the failure, marked partial too
        return _failed("simulate", args.out if args.out and result.t.size else None,
                       result.message)
    return 0


def _output_from_spec(model, spec: str, gamma):
    from .outputs import Output

    if gamma is not None:
        return Output.combined(model, gamma)
    if spec in (None, "collocated"):
        return Output.collocated(model)
    return Output(model, [row.strip() for row in spec.split(",")])


def cmd_analyze(args) -> int:
    from multibody_dynamics.model import load_model
    from multibody_dynamics.model.joint_angles import (
        JointAngles,
        angle_chart_model,
        configuration_from_values,
    )

    from .analysis import analyze_output

    model = load_model(args.robot)
    q_guess = None
    if args.q is not None:
        q_guess = configuration_from_values(model, args.q, "--q")
    if model.nq != model.nv:  # outputs and servo-constraints take q as coordinates
        try:
            chart = angle_chart_model(model)
        except MultibodyError as exc:
            raise MultibodyError(f"analyze supports joints with one velocity coordinate "
                                 f"(continuous joints by angle): {exc}") from None
        if q_guess is not None:
            q_guess = JointAngles(model).angles(q_guess)
        model = chart
    gamma = None
    if args.gamma is not None:
        gamma = np.array(args.gamma, float)
    output = _output_from_spec(model, args.output, gamma)
    res = analyze_output(model, output, q_guess=q_guess)
    print(f"{model.name}")
    if model.notes and model.notes[-1].startswith("continuous joint(s) taken by angle"):
        print(model.notes[-1] + " (q below in angles)")
    print(res.format())
    return 0


def cmd_invert(args) -> int:
    from pathlib import Path

    from multibody_dynamics.robot import has_closures, has_elastic_coordinates

    from .inversion import flexible_scenario as fs
    from .inversion.result import InversionInterrupted
    from .inversion.scenario import (
        load_inversion_scenario,
        run_inversion_scenario,
        summary,
    )
    from .scenarios.schema import scenario_robot

    robot = scenario_robot(args.scenario)  # None: no robot key, the loader below says so
    if robot is not None and has_elastic_coordinates(robot):
        sc = fs.load_flexible_scenario(args.scenario)
        return _invert_closed(args, fs, sc) if has_closures(robot) else \
            _invert_flexible(args, fs, sc)
    from .inversion.methods import METHODS

    sc = load_inversion_scenario(args.scenario)
    if args.method is not None and args.method not in METHODS:
        raise MultibodyError(f"--method: {sc.model.name} is a rigid model: expected one of "
                             f"{', '.join(METHODS)}, got {args.method!r}")
    if sc.combined_gamma is not None:
        print("initial guess: inversion with the linearly combined output first")
    try:
        result, ver, _ = run_inversion_scenario(
            sc, method=args.method, progress=not args.quiet,
            on_verify=getattr(args, "on_verify", None))  # invert --view (view_cli)
    except InversionInterrupted as exc:  # Ctrl-C: write the samples computed so far
        return _write_interrupted_inversion(args, sc, exc.result)
    print(f"{sc.model.name}: {sc.description or Path(args.scenario).name}")
    print(summary(result, ver))
    if not (result.success or result.t.size):  # a solver failure is a result (exit 1), bad
        return _failed("invert", None, result.message)  # input an exception (exit 2)
    csv_path = _write_inversion(args, sc, result, ver)
    # a failure keeps the samples before it, marked partial
    return 0 if result.success else _failed("invert", csv_path, result.message)


def _write_inversion(args, sc, result, ver=None) -> Path:
    """Write a rigid inversion's CSV (returned) and plot to ``--out``, named after the
    scenario."""
    from .inversion.scenario import plot, write_csv

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(args.scenario).stem
    csv_path = write_csv(result, sc.model, out / f"{stem}.csv")
    print(f"wrote {csv_path}")
    print(f"wrote {plot(result, sc.model, out / f'{stem}.png', verification=ver)}")
    return csv_path


def _write_interrupted_inversion(args, sc, result) -> int:
    csv_path = _write_inversion(args, sc, result) if result.t.size else None
    return _interrupted("invert", csv_path, result.message)


def _invert_flexible(args, fs, sc) -> int:
    from dataclasses import replace

    from .inversion.flexible import FLEXIBLE_METHODS

    if args.method is not None:
        if args.method not in FLEXIBLE_METHODS:
            raise MultibodyError(f"--method: {sc.chain.config.name} is a flexible model: expected "
                                 f"one of {', '.join(FLEXIBLE_METHODS)}, got {args.method!r}")
        sc = replace(sc, methods=(args.method,))
    stopped = None
    try:
        runs = fs.run_flexible_scenario(sc, progress=not args.quiet)
    except fs.FlexibleScenarioInterrupted as exc:  # Ctrl-C: write the designs and samples kept
        runs, stopped = exc.runs, exc.method
    print(f"{sc.chain.config.name}: {sc.description or Path(args.scenario).name}")
    print(fs.flexible_summary(sc, runs))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(args.scenario).stem
    partial, failed = None, []
    for method, (res, track) in runs.items():
        if res.success or res.t.size:  # a failed or interrupted method's samples, kept
            path = fs.write_flexible_csv(sc, res, track, out / f'{stem}.{method}.csv')
            print(f"wrote {path}")
            if method == stopped:
                partial = path
            elif not res.success:
                failed.append((path, res.message))
    if stopped is not None:
        return _interrupted("invert", partial, runs[stopped][0].message)
    print(f"wrote {fs.plot_flexible(sc, runs, out / f'{stem}.png')}")
    return _failed_designs(failed, runs[sc.methods[0]][0].success)


def _invert_closed(args, fs, sc) -> int:
    from dataclasses import replace

    if args.method is not None:
        if args.method not in fs.CLOSED_METHODS:
            raise MultibodyError(f"--method: {sc.system.name} is a closed flexible model: "
                                 f"expected one of {', '.join(fs.CLOSED_METHODS)}, got "
                                 f"{args.method!r}")
        sc = replace(sc, designs=(replace(sc.designs[0], method=args.method),))
    stopped = None
    try:  # stage lines as they finish, bars on stderr
        runs = fs.run_flexible_scenario(
            sc, progress=False if args.quiet else (lambda line: print(line, flush=True)))
    except fs.ClosedScenarioInterrupted as exc:  # Ctrl-C: write the designs and samples kept
        runs, stopped = exc.runs, exc
    print(f"{sc.system.name}: {sc.description or Path(args.scenario).name}")
    if runs:
        print(fs.flexible_summary(sc, runs))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(args.scenario).stem
    partial, failed = None, []
    for label, d in runs.items():
        if d.result.t.size:
            suffix = "_gamma" if d.spec.gamma is not None else ""
            name = f"{d.spec.method}_{d.spec.output}{suffix}"
            path = fs.write_closed_csv(sc, d, out / f'{stem}.{name}.csv')
            print(f"wrote {path}")
            if stopped is not None and label == stopped.label:
                partial = path
            elif not d.result.success:
                failed.append((path, d.result.message))
    if stopped is not None:  # only the design under way is marked partial
        return _interrupted("invert", partial, str(stopped))
    print(f"wrote {fs.plot_flexible(sc, runs, out / f'{stem}.png')}")
    return _failed_designs(failed, runs[sc.designs[0].label].result.success)


def _failed_designs(failed: list, first_ok: bool) -> int:
    """Mark each failed design's written samples ``(csv path, message)`` partial (saying so on
    stderr); exit status 0 when the scenario's first design succeeded, else 1."""
    for path, message in failed:
        _failed("invert", path, message)
    return 0 if first_ok else 1


def cmd_run(args) -> int:
    from .scenarios import load_run_scenario, plot, run_scenario, summary_table, write_csv
    from .scenarios.run import sample_reference

    overrides = None
    if args.duration is not None:
        overrides = {"duration": args.duration}
    sc = load_run_scenario(args.scenario, overrides)
    ref = sample_reference(sc, progress=not args.quiet)
    watch = getattr(args, "on_reference", None)  # run --view: the live viewer (view_cli)
    result = run_scenario(sc, progress=not args.quiet, reference=ref,
                          on_sample=watch(sc, ref) if watch is not None else None)
    print(f"{sc.model.name}: {sc.description or Path(args.scenario).name}")
    print(summary_table(result))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(args.scenario).stem
    print(f"wrote {write_csv(result, out / f'{stem}.csv')}")
    print(f"wrote {plot(result, out / f'{stem}.png')}")
    if result.interrupted:
        return _interrupted("run", out / f"{stem}.csv", result.message)
    if not result.success:
        return _failed("run", out / f"{stem}.csv", f"diverged: {result.message}")
    return 0


def _failed(command: str, csv_path, message: str) -> int:
    """A run that failed (divergence, NaN, projection): mark the samples written to
    ``csv_path`` before the failure as a partial result (None: nothing written), say so on
    stderr; exit status 1."""
    from multibody_dynamics.result_meta import mark_partial

    message = " ".join(message.split())
    if csv_path is not None:
        mark_partial(csv_path, f"failed: {message}")
    kept = f"; partial result written to {csv_path}" if csv_path is not None else ""
    print(f"multibody {command}: failed: {message}{kept}", file=sys.stderr)
    return 1


def _interrupted(command: str, csv_path, message: str) -> int:
    """Ctrl-C: mark the partial result written to ``csv_path`` (None: nothing to write),
    say so on stderr; exit status 130 (128 + SIGINT)."""
    from multibody_dynamics.result_meta import mark_partial

    if csv_path is not None:
        mark_partial(csv_path, message)
    kept = f"; partial result written to {csv_path}" if csv_path is not None else ""
    print(f"multibody {command}: interrupted: {' '.join(message.split())}{kept}",
          file=sys.stderr)
    return 130


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("multibody_suite")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="multibody", description="Dynamics and control of closed-loop, "
                     "underactuated and flexible robots.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser(
        "models", help="list the shipped robots (rigid and flexible)",
        description="List every shipped robot (config/robots/*.yaml) with one line each: its "
        "configuration and velocity sizes nq, nv, the number of inputs nu, elastic coordinates, "
        "loop closures (type and rows), passive joints and a description.  Any command that "
        "takes ROBOT accepts these names, or the path of your own model YAML (see "
        "docs/getting-started.md and examples/).")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser("assemble", help="solve a closed loop for the joints not given; list "
                       "the assembly modes and the mobility",
                       description="Assemble a closed-loop model: the joints given with --given "
                       "are held, the others solved from the loop closures (Levenberg-Marquardt "
                       "from several starts).  Prints the mobility (degrees of freedom, redundant "
                       "closure rows), the chosen assembly mode and the other modes found; --out "
                       "writes the chosen configuration as one CSV row.  Exit status 1 when the "
                       "loop cannot close.")
    _robot_arg(p)
    p.add_argument("--given", nargs="+", metavar="NAME=VALUE",
                   help="known joint values [rad | m] (e.g. left_motor=2.0 right_motor=1.1) "
                   "or frame coordinates, a platform pose [m] (e.g. left_tip.x=0.1 "
                   "left_tip.y=0.35)")
    p.add_argument("--branch", nargs="+", metavar="NAME=SIGN",
                   help="mode to choose: J=+|- (sign of the closure Jacobian determinant over "
                        "the free joints) or JOINT=+|- (sign of a free joint's angle)")
    p.add_argument("--starts", type=int, default=16, metavar="N",
                   help="starts of the solver: the rest configuration, then random ones")
    p.add_argument("--seed", type=int, default=0, help="seed of the random starts")
    p.add_argument("--all", action="store_true", help="print every mode's coordinates")
    p.add_argument("--out", metavar="FILE.csv", help="write the chosen configuration (one row)")
    p.set_defaults(func=cmd_assemble, outputs={"out": "file"})

    p = sub.add_parser("check", help="load and validate a model, print its summary",
                       description="Load a shipped robot or a model YAML (rigid or flexible), "
                       "validate it and print its summary (coordinates, inputs, passive and "
                       "elastic joints, closures); closed loops also get their mobility and "
                       "whether they assemble.  Exit status 2 with a one-line error when the "
                       "model is invalid.")
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
    p.add_argument("--payload-frame", metavar="FRAME",
                   help="frame holding the payload (default: the model's end_effector)")
    p.add_argument("--out", default="requirements_output",
                   help="output directory (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_requirements, outputs={"out": "dir"})

    p = sub.add_parser(
        "simulate",
        help="simulate a robot (closed loops and rolling contacts included) from an initial state",
        description="Forward simulation with a constant input (--tau) or one replayed from a "
        "file (--tau-file): projected constrained dynamics (Aghili 2005) with Newton "
        "projection of the state onto the constraint manifold after every step (fixed steps) "
        "or at every output sample (adaptive, --rtol).  Prints a summary; --out writes a CSV "
        "(t, q.<joint>, v.<joint>, lambda.<row>, residual [m | rad], energy [J]), --plot a PNG. "
        " Exit status 1 when the run fails (NaN, divergence, projection).",
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
                   help="interval of the output samples [s] (default: every step; adaptive 0.01; "
                   "flexible models: 10 or more per period of the stiffest mode, at most 0.01)")
    p.add_argument("--position-tol", type=float, default=1e-12, metavar="TOL",
                   help="Newton projection tolerance on |phi| [m | rad] (default: %(default)s)")
    p.add_argument("--singular-branch", choices=("continue", "free"), default="continue",
                   help="adaptive mode, where the constraint Jacobian loses rank (slider-crank at "
                   "q1 = +-pi/2): 'continue' keeps the velocity through the singular "
                   "configuration (bridged by one RK4 step), 'free' leaves the branch to the "
                   "integrator (default: %(default)s; fixed steps continue either way)")
    p.add_argument("--q0", type=float, nargs="+", metavar="Q",
                   help="initial configuration: one value per joint [rad | m] (continuous "
                   "joints as angles; their nq cos/sin entries are accepted too; default: rest); "
                   "projected onto the constraint manifold first; closed loops also take the "
                   "actuated joints alone, the rest assembled as with --given")
    p.add_argument("--given", nargs="+", metavar="NAME=VALUE",
                   help="closed loops: start from these joint values [rad | m] or frame "
                        "coordinates (left_tip.x=0.1) [m], the others assembled (default "
                        "without --q0: the assembly closest to the rest configuration)")
    p.add_argument("--branch", nargs="+", metavar="NAME=SIGN",
                   help="assembly mode of the start: J=+|- (sign of the closure Jacobian "
                        "determinant) or JOINT=+|- (sign of a free joint's angle)")
    p.add_argument("--v0", type=float, nargs="+", metavar="V",
                   help="initial velocity (nv values; default: 0); projected onto null(A)")
    p.add_argument("--tau", type=float, nargs="+", metavar="U",
                   help="constant input: nu values (tau = B u) or nv generalized forces [N m | "
                   "N]; flexible models: nu joint inputs")
    p.add_argument("--tau-file", metavar="FILE.csv",
                   help="time-varying input: CSV with a column t [s] and one per input named as "
                   "the model's inputs (or u.<input>, e.g. an invert result); must cover "
                   "[0, duration]")
    p.add_argument("--tau-hold", choices=("linear", "zoh"), default="linear",
                   help="--tau-file between its samples: linear interpolation or zero-order "
                   "hold (default: %(default)s)")
    p.add_argument("--out", metavar="FILE.csv", help="write the samples as CSV")
    p.add_argument("--plot", metavar="FILE.png", help="write positions, residual, energy drift")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_simulate, outputs={"out": "file", "plot": "image"})

    p = sub.add_parser(
        "analyze",
        help="relative degree, decoupling matrix and zero dynamics of an output",
        description="Output analysis (Seifried 2014 Ch. 3-4): decoupling matrix alpha = H M^-1 B "
        "and its condition, vector relative degree, eigenvalues of the linearized zero dynamics "
        "at the equilibrium for the output of the start configuration, minimum phase yes/no.  "
        "Closed loops: assembled near the start (--q), alpha = H N (N^T M N)^-1 N^T B with N "
        "a basis of the admissible velocities; loops with as many inputs as degrees of freedom "
        "only (no internal dynamics).",
    )
    _robot_arg(p)
    p.add_argument("--output", default="collocated", metavar="SPEC",
                   help="'collocated' (y = q_a), or comma-separated rows: joint names, sums like "
                   "'alpha2 + 0.5*beta', frame coordinates like 'tip.x' (default: %(default)s)")
    p.add_argument("--gamma", type=float, nargs="+", metavar="G",
                   help="linearly combined output y = q_a + Gamma q_u: Gamma row by row "
                   "(n_actuated x n_passive values); overrides --output")
    p.add_argument("--q", type=float, nargs="+", metavar="Q",
                   help="start configuration that fixes the analysed output value and branch: "
                   "one value per joint, continuous joints as angles (default: rest with "
                   "actuated revolute joints at +0.5 rad)")
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
                   "index2_euler, stable, causal, quasi_static; flexible models: rigid, "
                   "collocated, quasi_static, stable, classical; closed flexible models: "
                   "classical, stable)")
    p.add_argument("--out", default="inversion_output",
                   help="output directory (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_invert, outputs={"out": "dir"})

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
    p.add_argument("--duration", type=float, metavar="S",
                   help="override the scenario's duration [s]")
    p.add_argument("--out", default="run_output", help="output directory (default: %(default)s)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_run, outputs={"out": "dir"})

    from . import animate_cli  # `multibody animate` and --animate FILE on simulate/run/invert
    animate_cli.add_parser(sub)
    animate_cli.add_option(sub.choices)
    from . import result_format_cli  # --format csv|npz|both on simulate/run/invert

    result_format_cli.add_option(sub.choices)
    from . import view_cli  # simulate --view: the live viewer

    view_cli.add_option(sub.choices)

    from .design.design_cli import add_parser as add_design_parser

    add_design_parser(sub)
    return parser


def _check_outputs(args) -> None:
    """Every output path of the command, checked before any work: a path that cannot be
    written fails now, not after a long computation (and nothing is created)."""
    for dest, kind in getattr(args, "outputs", {}).items():
        values = getattr(args, dest, None)
        for value in values if isinstance(values, list) else [values]:
            if value is not None:
                _check_output(f"--{dest.replace('_', '-')}", value, kind)


def _check_output(flag: str, value, kind: str) -> None:
    """One output path: ``kind`` "file" (its folder must exist), "image" (a file whose
    suffix is a format matplotlib writes) or "dir" (made later by the command: its nearest
    existing ancestor must be a folder). A probe file is created and removed there, which
    catches read-only and special places such as /proc."""
    path = Path(value)
    if kind == "image":
        from matplotlib.backend_bases import FigureCanvasBase

        formats = sorted(FigureCanvasBase.get_supported_filetypes())
        if path.suffix[1:].lower() not in formats:
            raise MultibodyError(f"{flag}: {value!r}: expected a file name ending in "
                                 f"{', '.join('.' + f for f in formats)}")
        kind = "file"
    if kind == "dir":
        if path.exists() and not path.is_dir():
            raise MultibodyError(f"{flag}: {value} exists and is not a directory")
        folder = path.absolute()
        while not folder.exists():
            folder = folder.parent
        if not folder.is_dir():
            raise MultibodyError(f"{flag}: {folder} is not a directory")
    else:
        if path.is_dir():
            raise MultibodyError(f"{flag}: {value} is a directory; expected a file path")
        if path.exists() and not path.is_file():
            raise MultibodyError(f"{flag}: {value} is not a regular file")
        folder = path.parent
        if not folder.is_dir():
            raise MultibodyError(f"{flag}: the directory {folder} does not exist")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise MultibodyError(f"{flag}: cannot write to {value} ({exc.strerror})") from None


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from .pipe_safe import pipe_safe_stdout

    try:
        _check_outputs(args)
        with pipe_safe_stdout():  # `multibody ... | head`: the reader's exit stops no work
            return args.func(args)
    except (MultibodyError, OSError, ValueError) as exc:  # OSError: e.g. a full disk
        if args.debug:
            raise
        msg = " ".join(str(exc).split())
        print(f"multibody {args.command}: error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (KeyboardInterrupt, SystemError) as exc:  # interruptible.INTERRUPTS, imported late:
        from multibody_dynamics.interruptible import reraise_unless_interrupt  # fast start-up

        reraise_unless_interrupt(exc)
        print("multibody: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
