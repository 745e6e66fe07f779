"""Inversion scenarios: a YAML file -> model, output, task, method -> feedforward, CSV, PNG.

Schema (every key validated; unknown keys are errors naming the key)::

    description: free text
    robot: passive_arm              # shipped name or model-YAML path (relative to this file)
    task:
      t0: 0.2                       # s, start of the motion
      tf: 1.7                       # s, end of the motion
      order: 5                      # rest-to-rest polynomial order (3, 5, 7, 9)
      joints:                       # joint coordinates moving linearly in the time law
        x: {start: -1.0, end: 1.0}  # m or rad
      arcs:                         # frame origins on circular arcs (world x-y plane)
        tip: {center: [0.0, -1.5], radius: 1.0, start_deg: 180.0, end_deg: 0.0}
      lines:                        # frame origins on straight lines (world x-y plane)
        tool: {start: [0.5, 0.0], end: [0.7, 0.0]}
    output:                         # default: the task coordinates themselves (exact output)
      gamma: [[0.0], [0.0], [0.5]]  # linearly combined y = q_a + Gamma q_u (n_a x n_u), or
      rows: [x, tip.x, tip.y]       # explicit rows (joint sums or frame.x|y|z)
    method: stable                  # classical | ode | index1 | index2_euler | stable | causal |
                                    # quasi_static (elastic passive joints; needs feedback)
    dt: 0.001                       # s, sample spacing of the result
    initial_guess: combined         # stable inversion of an exact output: start the BVP from
      # the solution for this Gamma (the `combined_gamma` key), as the book recommends
    combined_gamma: [[0, 0], [0, 0], [0.6667, 0.3333]]
    ik_guess: {left_motor: 2.0, left_elbow: -1.2}  # rad | m, start of the inverse kinematics
      # (selects the branch: elbow up/down, a closed loop's assembly mode); unnamed
      # coordinates at the spring rest; or a list of all nq values.  Closed-loop robots:
      # the closures and the task are solved together, the task may name frame
      # coordinates (end-effector paths); verify integrates the projected dynamics.
    options: {decay_tol: 1.0e-6, bvp_tol: 1.0e-6, rtol: 1.0e-9, atol: 1.0e-11,
              t_start: null, t_end: null, euler_dt: null, max_nodes: 100000,
              n_free: null, free_rows: null, segments: null, end_tol: 1.0e-8}
      # causal only: number of free trajectory parameters, the output rows (names or
      # indices) carrying them, shooting segments, accepted end-state error
    verify: true                    # simulate the plant open loop with the feedforward
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from multibody_dynamics.errors import InputError
from multibody_dynamics.interruptible import INTERRUPTS, reraise_unless_interrupt
from multibody_dynamics.model import MultibodyModel, load_model

from ..inversion.methods import METHODS, invert
from ..inversion.result import InversionInterrupted, InversionResult
from ..inversion.verify import VerificationResult, verify
from ..outputs import Output
from ..tasks import Task, circular_arc, linear_move, straight_line
from .schema import err as _err
from .schema import flag as _flag
from .schema import mapping as _mapping
from .schema import matrix as _matrix
from .schema import named as _named
from .schema import number as _number
from .schema import read_scenario_of_kind, robot_path, time_law, xy

_TOP = {"robot", "task", "output", "method", "dt", "options", "verify", "initial_guess",
        "combined_gamma", "description", "ik_guess"}
_TASK = {"t0", "tf", "order", "joints", "arcs", "lines"}
_OPTIONS = {"decay_tol", "bvp_tol", "rtol", "atol", "t_start", "t_end", "euler_dt", "max_nodes",
            "max_step", "eta_limit", "n_free", "free_rows", "segments", "end_tol"}
_COUNT_OPTIONS = {"n_free", "segments"}


@dataclass(frozen=True)
class InversionScenario:
    path: Path | None
    model: MultibodyModel
    task: Task
    output: Output
    method: str
    dt: float
    options: dict
    verify: bool
    combined_gamma: np.ndarray | None
    description: str = ""
    ik_guess: np.ndarray | None = None


def load_inversion_scenario(path: str | Path) -> InversionScenario:
    """Read and validate an inversion scenario YAML."""
    path = Path(path)
    raw = _mapping(path, "", read_scenario_of_kind(path, "inversion"), _TOP)
    if "robot" not in raw:
        raise _err(path, "robot", "missing")
    model = _by_angle(path, load_model(robot_path(str(raw["robot"]), path)))
    rest = {k: v for k, v in raw.items() if k != "robot"}
    return inversion_scenario_from_mapping(rest, model, path)


def _by_angle(path: Path, model: MultibodyModel) -> MultibodyModel:
    """The model an inversion runs on: with continuous joints, its twin with revolute joints
    (:func:`~multibody_dynamics.model.joint_angles.angle_chart_model`: the same dynamics, q by
    angle), since outputs and servo-constraints take q as coordinates; the task, ``ik_guess``
    and the result's ``q.<joint>`` columns are then angles [rad]."""
    if model.nq == model.nv:
        return model
    from multibody_dynamics.errors import MultibodyError
    from multibody_dynamics.model.joint_angles import angle_chart_model

    try:
        return angle_chart_model(model)
    except MultibodyError as exc:
        raise _err(path, "robot", f"the inversion supports joints with one velocity coordinate "
                   f"(continuous joints by angle): {exc}") from None


def inversion_scenario_from_mapping(raw: dict, model: MultibodyModel, path: Path | None = None,  # noqa: C901
                                    where: str | None = None) -> InversionScenario:
    """Validate the inversion keys of a scenario (all of :func:`load_inversion_scenario`'s but
    ``robot``) given as a mapping, for ``model``.

    ``where`` prefixes the error messages (default: ``path``), e.g. ``"run.yaml: reference.
    inversion"`` when the keys are embedded in a closed-loop scenario
    (:mod:`multibody_control.scenarios.run`).
    """
    path = Path(path) if path is not None else None
    here = where if where is not None else path
    raw = _mapping(here, "", raw or {}, _TOP - {"robot"})
    if "task" not in raw:
        raise _err(here, "task", "missing")
    file_path, path = path, here  # below, ``path`` only labels the error messages

    t = _mapping(path, "task", raw["task"], _TASK)
    law = time_law(path, t)
    comps = []
    for name, spec in _named(path, "task.joints", t.get("joints")).items():
        spec = _mapping(path, f"task.joints.{name}", spec, {"start", "end"})
        if name not in model.coordinate_names:
            raise _err(path, f"task.joints.{name}", f"unknown joint; expected one of "
                       f"{', '.join(model.coordinate_names)}")
        comps.append(linear_move(name,
                                 _number(path, f"task.joints.{name}.start", spec.get("start")),
                                 _number(path, f"task.joints.{name}.end", spec.get("end"))))
    for name, spec in _named(path, "task.arcs", t.get("arcs")).items():
        key = f"task.arcs.{name}"
        spec = _mapping(path, key, spec, {"center", "radius", "start_deg", "end_deg"})
        model.frame_id(name)
        center = xy(path, f"{key}.center", spec.get("center"))
        radius = _number(path, f"{key}.radius", spec.get("radius"), positive=True)
        comps.append(circular_arc(name, center, radius,
                                  _number(path, f"{key}.start_deg", spec.get("start_deg")),
                                  _number(path, f"{key}.end_deg", spec.get("end_deg"))))
    for name, spec in _named(path, "task.lines", t.get("lines")).items():
        key = f"task.lines.{name}"
        spec = _mapping(path, key, spec, {"start", "end"})
        model.frame_id(name)
        comps.append(straight_line(name, *(xy(path, f"{key}.{k}", spec.get(k))
                                           for k in ("start", "end"))))
    if not comps:
        raise _err(path, "task", "expected at least one of joints, arcs, lines")
    task = Task(law, tuple(comps))
    if len(task.names) != model.nu:
        raise _err(path, "task", f"{len(task.names)} task coordinates ({', '.join(task.names)}) "
                   f"but {model.name} has {model.nu} inputs; the inverse model needs as many")

    out_spec = _mapping(path, "output", raw.get("output") or {}, {"gamma", "rows"})
    if "gamma" in out_spec and "rows" in out_spec:
        raise _err(path, "output", "give either gamma or rows, not both")
    try:
        if "gamma" in out_spec:
            output = Output.combined(model, out_spec["gamma"])
        else:
            output = Output(model, out_spec.get("rows", task.names))
    except InputError as exc:
        raise _err(path, "output", str(exc)) from None

    method = raw.get("method", "stable")
    if not isinstance(method, str) or method not in METHODS:
        raise _err(path, "method", f"expected one of {', '.join(METHODS)}, got {method!r}")
    dt = _number(path, "dt", raw.get("dt", 1e-3), positive=True)
    options = dict(_mapping(path, "options", raw.get("options") or {}, _OPTIONS))
    for k, v in options.items():
        if v is None:
            continue
        if k == "free_rows":
            rows = v if isinstance(v, list) else [v]
            bad = [r for r in rows if r not in output.names and not (
                isinstance(r, int) and not isinstance(r, bool) and 0 <= r < output.m)]
            if not rows or bad:
                raise _err(path, "options.free_rows", f"expected output rows (names "
                           f"{', '.join(output.names)} or indices 0..{output.m - 1}), got {v!r}")
            options[k] = rows
        elif k == "max_nodes":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 1 \
                    or not float(v).is_integer():
                raise _err(path, f"options.{k}", f"expected a positive integer, got {v!r}")
            options[k] = int(v)
        elif k in _COUNT_OPTIONS:
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise _err(path, f"options.{k}", f"expected a positive integer, got {v!r}")
        else:
            options[k] = _number(path, f"options.{k}", v)
    guess = raw.get("initial_guess")
    gamma = None
    if guess is not None:
        if guess != "combined":
            raise _err(path, "initial_guess", f"expected 'combined', got {guess!r}")
        if "combined_gamma" not in raw:
            raise _err(path, "combined_gamma", "missing; initial_guess: combined needs it")
        gamma = _matrix(path, "combined_gamma", raw["combined_gamma"])
    ik_guess = None
    spec = raw.get("ik_guess")
    if isinstance(spec, list):  # all coordinates, as in the flexible scenarios
        if len(spec) != model.nq:
            raise _err(path, "ik_guess", f"expected {model.nq} values ("
                       f"{', '.join(model.coordinate_names)}) or a mapping joint: value, got "
                       f"{spec!r}")
        ik_guess = np.array([_number(path, "ik_guess", x) for x in spec])
    elif spec is not None:
        spec = _mapping(path, "ik_guess", spec, model.coordinate_names)
        ik_guess = model.q_rest.copy()
        pm = model.pin_model
        for name, value in spec.items():
            ik_guess[pm.joints[pm.getJointId(name)].idx_q] = _number(path,
                                                                     f"ik_guess.{name}", value)
    verify_flag = _flag(path, "verify", raw.get("verify", True))
    return InversionScenario(file_path, model, task, output, method, dt, options,
                             verify_flag, gamma, str(raw.get("description", "")), ik_guess)


def run_inversion_scenario(sc: InversionScenario, method: str | None = None,
                           progress: bool = False, on_verify=None
                           ) -> tuple[InversionResult, VerificationResult | None,
                                      InversionResult | None]:
    """Invert (after the combined-output guess when asked) and verify open loop.

    Returns the result, its open-loop verification (None when not asked or failed) and the
    combined-output result used as initial guess (None when not used).  Ctrl-C raises
    :class:`.result.InversionInterrupted` with the samples computed so far.
    ``on_verify(sc, result)`` (optional) is called before the open-loop check (only when
    it runs) and returns the ``on_sample(t, q)`` that receives the check's samples as it
    integrates (the live viewer), or None.
    """
    method = method or sc.method
    guess_result = None
    options = dict(sc.options)
    if sc.combined_gamma is not None:
        comb = Output.combined(sc.model, sc.combined_gamma)
        guess_result = invert(sc.model, comb, sc.task, method, dt=sc.dt, progress=progress,
                              ik_guess=sc.ik_guess, **options)
        if not guess_result.success:
            return guess_result, None, guess_result
        for key, value in (("t_start", guess_result.t[0]), ("t_end", guess_result.t[-1])):
            if options.get(key) is None:  # solve on the interval of the guess
                options[key] = float(value)
    result = invert(sc.model, sc.output, sc.task, method, dt=sc.dt, progress=progress,
                    guess=guess_result.eta if guess_result is not None else None,
                    ik_guess=sc.ik_guess, **options)
    # quasi-static compensation is a reference for a feedback law (Seifried Sect. 6.1): an
    # open-loop check says nothing about it (run it closed loop with `multibody run`)
    open_loop = method != "quasi_static"
    try:
        ver = None
        if sc.verify and result.success and open_loop:
            ver = verify(sc.model, result, sc.task, sc.output,
                         on_sample=on_verify(sc, result) if on_verify is not None else None)
    except INTERRUPTS as exc:  # Ctrl-C in the check: the inversion itself is complete
        reraise_unless_interrupt(exc)
        raise InversionInterrupted(replace(
            result, success=False, message="the open-loop verification was interrupted "
            f"(Ctrl-C); the inversion's {result.t.size} samples are complete, unverified")) \
            from None
    return result, ver, guess_result


