"""Closed-loop scenarios: a YAML file -> reference, controller, perturbed plant -> run, summary,
CSV, PNG (the ``multibody run`` command).

Schema (every key validated; unknown keys and wrong types are errors naming the key)::

    description: free text
    robot: prr_surface              # shipped name or model-YAML path (relative to this file)
    duration: 10.0                  # s, simulated time from the start of the reference
    task_frame: tip                 # frame of the task-space error (default: the model's
                                    #   end effector; null: no task-space error)
    reference:                      # exactly one of joints, sines, inversion, file
      joints:                       # rest-to-rest polynomial in joint coordinates
        t0: 0.0                     #   s
        tf: 1.0                     #   s
        order: 5                    #   3, 5, 7, 9
        start: {q1: 0.0, ...}       #   rad | m; open chains: unnamed coordinates stay at
        end: {q1: 0.5, ...}         #   the rest configuration; closed loops: name the
                                    #   independent ones, the others are solved from phi = 0
      sines:                        # y_i(t) = offset + amplitude sin(2 pi frequency t + phase)
        tip.x: {offset: 0.5, amplitude: 0.3, frequency: 0.3, phase: 0.0}
        q2 + q3: {...}              #   rows as in inversion outputs (joint sums, frame.x|y|z);
                                    #   with the closures they fix q (square system)
      inversion: {task: ..., output: ..., method: stable, dt: 0.001, options: ...}
                                    # the keys of an inversion scenario (invert_*.yaml, without
                                    # robot); its t, q, v, a and feedforward u are the reference,
                                    # starting at the first sample (pre-actuation included)
      file: motion.csv              # a joint trajectory CSV (relative to this file): t [s],
                                    # q.<joint> for every joint, v./a. optional (else from a
                                    # smoothing spline), covering [0, duration]; open chains
                                    # with nq == nv; quintic Hermite between the samples
      guess: {q2: 1.3, q3: 4.0}     # start of the assembly Newton iterations (closed loops)
      lambda_d: [50.0]              # N | N m, desired constraint multipliers (force control)
    controller:
      law: pd | pid | computed_torque | projected_inverse_dynamics | tv_lqr | quasi_velocity
           | feedback_linearization
      kp: 3.0                       # scalar or list; units as in make_controller
      kd: 5.0
      ki: 0.0                       # pid only
      integral_limit: .inf          # pid only
      effort_limit: .inf            # controller output saturation [N | N m]
      options: {...}                # law-specific: projected_inverse_dynamics: independent,
                                    # force_control, force_kp, force_ki, force_integral_limit;
                                    # tv_lqr: R, terminal, interpolation; computed_torque:
                                    # add_feedforward; feedback_linearization: output (rows,
                                    # one per input; default: the inversion reference's output)
    plant:
      rate: 1000.0                  # Hz, control rate; the input is held between samples (ZOH)
      substeps: 1                   # simulator steps per control period
      method: rk4                   # rk4 | semi_implicit_euler
      max_speed: 1.0e4              # rad/s | m/s, above: diverged
      effort_limit: [50, 20, 20]    # actuator limits |u| [N | N m], scalar or one per input
      disturbances:                 # the plant is a perturbed copy of the model (the
        link: beta                  #   controller keeps the nominal one); body of this joint
        mass: 0.05                  #   (default: the last joint); relative changes:
        inertia: 0.05               #   mass, rotational inertia about the CoM,
        com: 0.05                   #   CoM position in the body frame,
        stiffness: 0.15             #   every spring,
        damping: -1.0               #   every damper (-1: removed)
      noise: {q: 1.0e-4, v: 1.0e-3, seed: 1}   # std of the measurement noise [rad | m],
                                    #   [rad/s | m/s], Gaussian, seeded
    initial_error:                  # added to the reference's start state (closed loops:
      q: {x: 0.05}                  #   on the named coordinates; the others are assembled)
      v: {}

The run (:func:`run_scenario`) samples the reference at the control instants, calls the
controller with the (noisy) measured state, clips the input to the actuator limits, holds it
over the period and steps the embedded :class:`~multibody_dynamics.simulate.Simulator`.
Divergence (NaN, ``|v| > max_speed``, a failed projection) ends the run with
``success = False`` and the simulator's message.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin

from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import InputError, MultibodyError, SolverError
from multibody_dynamics.interruptible import INTERRUPTS, reraise_unless_interrupt
from multibody_dynamics.model import MultibodyModel, load_model
from multibody_dynamics.simulate import METHODS as SIM_METHODS
from multibody_dynamics.simulate import Simulator, SimulatorConfig
from multibody_dynamics.validation import check_sample_budget

from ..controllers import LAWS, Controller, Reference, TrajectoryInterpolator, make_controller
from ..controllers.base import gain_vector
from ..outputs import Output
from ..trajectories import read_trajectory_csv, rest_to_rest
from .inversion import inversion_scenario_from_mapping, run_inversion_scenario
from .schema import err as _err
from .schema import gain as _gain
from .schema import integer as _integer
from .schema import mapping as _mapping
from .schema import merge as _merge
from .schema import number as _number
from .schema import read_scenario_of_kind, robot_path, time_law

_TOP = {"description", "robot", "duration", "task_frame", "reference", "controller", "plant",
        "initial_error"}
_REFERENCE = {"joints", "sines", "inversion", "file", "guess", "lambda_d"}
_JOINTS = {"t0", "tf", "order", "start", "end"}
_SINE = {"offset", "amplitude", "frequency", "phase"}
_CONTROLLER = {"law", "kp", "kd", "ki", "integral_limit", "effort_limit", "options"}
_OPTIONS = {
    "pd": set(), "pid": set(), "computed_torque": {"add_feedforward"},
    "projected_inverse_dynamics": {"independent", "force_control", "force_kp", "force_ki",
                                   "force_integral_limit"},
    "tv_lqr": {"R", "terminal", "interpolation"},
    "quasi_velocity": {"independent", "force_control"},
    "feedback_linearization": {"output"},
}
_PLANT = {"rate", "substeps", "method", "max_speed", "effort_limit", "disturbances", "noise"}
_DISTURBANCES = {"link", "mass", "inertia", "com", "stiffness", "damping"}
_NOISE = {"q", "v", "seed"}
_INITIAL = {"q", "v"}
#: the keys where .inf is a value (no limit); every other number is finite
_LIMITS = ("integral_limit", "effort_limit", "force_integral_limit")
#: laws whose closed loop obeys e'' + K_D e' + K_P e = 0 with an exact model
_EXACT_LAWS = ("computed_torque", "projected_inverse_dynamics")


# -- validation helpers --------------------------------------------------------------------------
def _tracked_output(where, model, rows, inversion) -> tuple[str, ...]:
    """The output rows feedback_linearization tracks: ``controller.options.output``, else the
    output of the inversion reference (the output it was inverted for), checked on ``model``:
    one row per input."""
    if rows is None:
        if inversion is None:
            raise _err(where, "controller.options.output", "missing; feedback_linearization "
                       "needs the output rows it linearizes (one per input, e.g. ['x', "
                       "'tip.x', 'tip.y']), or an inversion reference whose output it tracks")
        rows = tuple(inversion.output.names)
    try:
        out = Output(model, list(rows))
    except InputError as exc:
        raise _err(where, "controller.options.output", str(exc)) from None
    if out.m != model.nu:
        raise _err(where, "controller.options.output", f"{out.m} rows for {model.nu} inputs "
                   f"({', '.join(model.input_names)}); expected one row per input")
    return tuple(rows)


def _coordinates(where, key, value, model) -> dict[str, float]:
    value = _mapping(where, key, value or {})
    out = {}
    for name, x in value.items():
        if name not in model.coordinate_names:
            raise _err(where, f"{key}.{name}", "unknown joint; expected one of "
                       f"{', '.join(model.coordinate_names)}")
        out[name] = _number(where, f"{key}.{name}", x)
    return out


# -- the scenario ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Disturbances:
    """Relative parameter changes of the plant (0: none; damping -1: removed)."""

    link: str | None = None
    mass: float = 0.0
    inertia: float = 0.0
    com: float = 0.0
    stiffness: float = 0.0
    damping: float = 0.0

    @property
    def any(self) -> bool:
        return any((self.mass, self.inertia, self.com, self.stiffness, self.damping))


@dataclass(frozen=True)
class RunScenario:
    """A validated closed-loop scenario (see the module docstring for the schema)."""

    path: Path | None
    model: MultibodyModel
    duration: float
    task_frame: str | None
    reference: dict
    controller: dict
    rate: float
    substeps: int
    method: str
    max_speed: float
    effort_limit: np.ndarray | None
    disturbances: Disturbances
    noise_q: float
    noise_v: float
    noise_seed: int
    initial_q: dict
    initial_v: dict
    description: str = ""

    @property
    def dt(self) -> float:
        """Control period [s]."""
        return 1.0 / self.rate


def _reference_file(where, value, model: MultibodyModel, path: Path | None, duration: float):
    """``reference.file``: the joint trajectory CSV, read and checked (a SampledTrajectory)."""
    key = "reference.file"
    if not isinstance(value, str):
        raise _err(where, key, f"expected the path of a trajectory CSV, got {value!r}")
    file = Path(value)
    if not file.is_absolute() and path is not None:
        file = Path(path).parent / file
    if model.closures or model.nq != model.nv:
        raise _err(where, key, f"open chains with nq == nv only; {model.name} has "
                   + ("loop closures" if model.closures else f"nq = {model.nq}, nv = {model.nv}")
                   + " (use reference.joints or reference.sines)")
    try:
        traj = read_trajectory_csv(file, model.coordinate_names)
    except InputError as exc:
        raise _err(where, key, str(exc)) from None
    if traj.t[0] > 0 or traj.t[-1] < duration - 1e-9:
        raise _err(where, key, f"{file}: covers t = {traj.t[0]:g} s to {traj.t[-1]:g} s; "
                   f"expected at least 0 s to the duration {duration:g} s")
    return traj


def load_run_scenario(path: str | Path, overrides: dict | None = None) -> RunScenario:
    """Read and validate a closed-loop scenario YAML.

    ``overrides`` is merged into the file's mapping (nested keys merge) before validation:
    shorter test versions, parameter studies.
    """
    path = Path(path)
    raw = _mapping(path, "", read_scenario_of_kind(path, "run"), _TOP)
    if overrides:
        raw = _mapping(path, "", _merge(raw, overrides), _TOP)
    return scenario_from_mapping(raw, path)


def scenario_from_mapping(raw: dict, path: Path | None = None) -> RunScenario:  # noqa: C901
    """Validate a scenario given as a mapping (``path`` labels errors, resolves robot paths)."""
    where = path or "scenario"
    raw = _mapping(where, "", raw, _TOP)
    for req in ("robot", "duration", "reference", "controller"):
        if req not in raw:
            raise _err(where, req, "missing")
    robot = raw["robot"]
    if isinstance(robot, MultibodyModel):  # from Python: a loaded model, e.g. a built design
        model = robot
    elif not isinstance(robot, str):
        raise _err(where, "robot", f"expected a robot name or a path, got {robot!r}")
    else:
        model = load_model(robot_path(robot, path))
    duration = _number(where, "duration", raw["duration"], positive=True)
    task_frame = raw.get("task_frame", model.end_effector)
    if task_frame is not None:
        if not isinstance(task_frame, str):
            raise _err(where, "task_frame", f"expected a frame name or null, got {task_frame!r}")
        try:
            model.frame_id(task_frame)
        except MultibodyError as exc:
            raise _err(where, "task_frame", str(exc)) from None

    ref = dict(_mapping(where, "reference", raw["reference"], _REFERENCE))
    kinds = [k for k in ("joints", "sines", "inversion", "file") if k in ref]
    if len(kinds) != 1:
        raise _err(where, "reference", "expected exactly one of joints, sines, inversion, file, "
                   f"got {', '.join(kinds) or 'none'}")
    if "file" in ref:
        ref["file"] = _reference_file(where, ref["file"], model, path, duration)
    elif "joints" in ref:
        j = _mapping(where, "reference.joints", ref["joints"], _JOINTS)
        law = time_law(where, j, "reference.joints")
        for req in ("start", "end"):
            if req not in j:
                raise _err(where, f"reference.joints.{req}", "missing")
        start = _coordinates(where, "reference.joints.start", j["start"], model)
        end = _coordinates(where, "reference.joints.end", j["end"], model)
        if set(start) != set(end):
            raise _err(where, "reference.joints.end", f"expected the joints of start "
                       f"({', '.join(start)}), got {', '.join(end)}")
        if not start:
            raise _err(where, "reference.joints.start", "expected at least one joint")
        if model.nq != model.nv:
            raise _err(where, "reference.joints", f"needs nq == nv; {model.name} has nq = "
                       f"{model.nq}, nv = {model.nv}")
        ref["joints"] = {"t0": law.t0, "tf": law.tf, "order": law.order, "start": start,
                         "end": end}
    elif "sines" in ref:
        s = _mapping(where, "reference.sines", ref["sines"])
        if not s:
            raise _err(where, "reference.sines", "expected at least one output row")
        rows = {}
        for row, spec in s.items():
            key = f"reference.sines.{row}"
            spec = _mapping(where, key, spec, _SINE)
            rows[str(row)] = tuple(_number(where, f"{key}.{k}", spec.get(k, 0.0))
                                   for k in ("offset", "amplitude", "frequency", "phase"))
        try:
            Output(model, list(rows))
        except MultibodyError as exc:
            raise _err(where, "reference.sines", str(exc)) from None
        ref["sines"] = rows
    else:
        inv = _mapping(where, "reference.inversion", ref["inversion"])
        ref["inversion"] = inversion_scenario_from_mapping(
            inv, model, path, where=f"{where}: reference.inversion")
    ref["guess"] = _coordinates(where, "reference.guess", ref.get("guess"), model)
    if ref.get("lambda_d") is not None:
        lam = ref["lambda_d"]
        if not isinstance(lam, list):
            raise _err(where, "reference.lambda_d", f"expected a list of multipliers [N | N m], "
                       f"got {lam!r}")
        ref["lambda_d"] = np.array([_number(where, f"reference.lambda_d[{i}]", x)
                                    for i, x in enumerate(lam)])
        m = Constraints(model).n_rows if model.closures else 0
        if ref["lambda_d"].size != m:
            raise _err(where, "reference.lambda_d", f"expected {m} values (one per constraint "
                       f"row of {model.name}), got {ref['lambda_d'].size}")

    c = dict(_mapping(where, "controller", raw["controller"], _CONTROLLER))
    law = c.get("law")
    if not isinstance(law, str) or law not in _OPTIONS:
        supported = [x for x in LAWS if x in _OPTIONS]
        raise _err(where, "controller.law", f"expected one of {', '.join(supported)}, got {law!r}")
    for k in ("kp", "kd", "ki", "integral_limit", "effort_limit"):
        if k in c:
            c[k] = _gain(where, f"controller.{k}", c[k], infinite=k in _LIMITS)
    if "ki" in c and law != "pid":
        raise _err(where, "controller.ki", f"only the pid law has an integral gain, not {law}")
    options = dict(_mapping(where, "controller.options", c.get("options") or {}, _OPTIONS[law]))
    for k, v in options.items():
        key = f"controller.options.{k}"
        if k in ("force_control", "add_feedforward"):
            if not isinstance(v, bool):
                raise _err(where, key, f"expected true or false, got {v!r}")
        elif k == "independent":
            if not (isinstance(v, list) and all(isinstance(n, str) for n in v)):
                raise _err(where, key, f"expected a list of joint names, got {v!r}")
            for n in v:
                if n not in model.coordinate_names:
                    raise _err(where, key, f"unknown joint {n!r}; expected one of "
                               f"{', '.join(model.coordinate_names)}")
            options[k] = tuple(v)
        elif k == "output":
            if not (isinstance(v, list) and v and all(isinstance(r, str) for r in v)):
                raise _err(where, key, "expected a list of output rows, one per input (e.g. "
                           f"['x', 'tip.x', 'tip.y']), got {v!r}")
            options[k] = tuple(v)
        elif k == "interpolation":
            if not isinstance(v, str):
                raise _err(where, key, f"expected 'hold' or 'linear', got {v!r}")
        elif k == "terminal" and v is None:
            pass
        elif isinstance(v, list) and v and isinstance(v[0], list):
            options[k] = tuple(tuple(_number(where, key, x) for x in row) for row in v)
        else:
            options[k] = _gain(where, key, v, infinite=k in _LIMITS)
    if law == "tv_lqr" and "inversion" not in ref:
        raise _err(where, "controller.law", "tv_lqr needs an inversion reference (the nominal "
                   "motion and feedforward it is designed along)")
    if law == "feedback_linearization":
        options["output"] = _tracked_output(where, model, options.get("output"),
                                            ref.get("inversion"))
    if options.get("force_control") and ref.get("lambda_d") is None:
        raise _err(where, "reference.lambda_d", "missing; force_control needs the desired "
                   "multipliers")
    c["options"] = options
    c["law"] = law

    p = _mapping(where, "plant", raw.get("plant") or {}, _PLANT)
    rate = _number(where, "plant.rate", p.get("rate", 1000.0), positive=True)
    check_sample_budget(duration, 1.0 / rate, f"{where}: duration / plant.rate",
                        "lower plant.rate or shorten duration")
    substeps = _integer(where, "plant.substeps", p.get("substeps", 1))
    method = p.get("method", "rk4")
    if not isinstance(method, str) or method not in SIM_METHODS:
        raise _err(where, "plant.method", f"expected one of {', '.join(SIM_METHODS)}, got "
                   f"{method!r}")
    max_speed = _number(where, "plant.max_speed", p.get("max_speed", 1e4), positive=True,
                        infinite=True)
    limit = None
    if p.get("effort_limit") is not None:
        lim = _gain(where, "plant.effort_limit", p["effort_limit"], infinite=True)
        limit = np.broadcast_to(np.asarray(lim, float), (model.nu,)).copy() \
            if np.ndim(lim) == 0 or len(lim) == model.nu else None
        if limit is None:
            raise _err(where, "plant.effort_limit", f"expected a scalar or {model.nu} values "
                       f"({', '.join(model.input_names)}), got {len(lim)}")
        if np.any(limit <= 0):
            raise _err(where, "plant.effort_limit", f"expected values > 0, got {limit.tolist()}")
    d = _mapping(where, "plant.disturbances", p.get("disturbances") or {}, _DISTURBANCES)
    link = d.get("link")
    if link is not None and link not in model.joint_names:
        raise _err(where, "plant.disturbances.link", f"unknown joint {link!r}; expected one of "
                   f"{', '.join(model.joint_names)}")
    dist = Disturbances(link, *(_number(where, f"plant.disturbances.{k}", d.get(k, 0.0),
                                        minimum=-1.0)
                                for k in ("mass", "inertia", "com", "stiffness", "damping")))
    if dist.mass <= -1.0:
        raise _err(where, "plant.disturbances.mass", "expected > -1 (a positive mass)")
    n = _mapping(where, "plant.noise", p.get("noise") or {}, _NOISE)
    noise_q = _number(where, "plant.noise.q", n.get("q", 0.0), minimum=0.0)
    noise_v = _number(where, "plant.noise.v", n.get("v", 0.0), minimum=0.0)
    seed = _integer(where, "plant.noise.seed", n.get("seed", 0), minimum=0)

    ie = _mapping(where, "initial_error", raw.get("initial_error") or {}, _INITIAL)
    iq = _coordinates(where, "initial_error.q", ie.get("q"), model)
    iv = _coordinates(where, "initial_error.v", ie.get("v"), model)
    desc = raw.get("description", "")
    if not isinstance(desc, str):
        raise _err(where, "description", f"expected text, got {desc!r}")
    sc = RunScenario(path, model, duration, task_frame, ref, c, rate, substeps, method,
                     max_speed, limit, dist, noise_q, noise_v, seed, iq, iv, desc)
    build_controller(sc, None)  # the law's own checks of the gains, before any reference work
    return sc


# -- plant ----------------------------------------------------------------------------------------
def perturbed_model(model: MultibodyModel, disturbances: Disturbances) -> MultibodyModel:
    """A copy of ``model`` with the parameter changes of ``disturbances`` (the controller keeps
    the nominal model).

    The body moved by joint ``disturbances.link`` (default: the last joint; fixed children are
    part of it, as pinocchio merges them) gets mass ``m (1 + mass)``, CoM ``c (1 + com)`` in its
    frame and rotational inertia about the CoM ``I_c (1 + inertia)``; every spring constant is
    scaled by ``1 + stiffness`` and every damper by ``1 + damping``.
    """
    if not disturbances.any:
        return model
    pm = pin.Model(model.pin_model)
    jid = pm.getJointId(disturbances.link) if disturbances.link else pm.njoints - 1
    old = pm.inertias[jid]
    pm.inertias[jid] = pin.Inertia(old.mass * (1.0 + disturbances.mass),
                                   old.lever * (1.0 + disturbances.com),
                                   old.inertia * (1.0 + disturbances.inertia))
    stiffness = np.asarray(model.stiffness, float) * (1.0 + disturbances.stiffness)
    damping = np.asarray(model.damping, float) * (1.0 + disturbances.damping)
    for arr in (stiffness, damping):
        arr.setflags(write=False)
    return dataclasses.replace(model, pin_model=pm, stiffness=stiffness, damping=damping,
                               name=f"{model.name} (perturbed)")


# -- reference ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SampledReference:
    """The reference at the control instants: t (N,), q (N, nq), v, a (N, nv), u_ff (N, nu) or
    None, lambda_d (m,) or None; ``trajectory`` is the inversion result, if any."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    u_ff: np.ndarray | None
    lambda_d: np.ndarray | None
    trajectory: object = None

    def at(self, k: int) -> Reference:
        u = None if self.u_ff is None else self.u_ff[k]
        return Reference(self.q[k], self.v[k], self.a[k], u, self.lambda_d)


def _complete(model, output: Output, y, yd, ydd, q_guess, what: str):
    """Joint trajectory (q, v, a) of an output trajectory y (N, m) with the closures: Newton on
    [h(q) - y; phi(q)] = 0 (warm-started sample to sample), then [H; A] v = [y'; 0] and
    [H; A] a = [y'' - h_bar; -A' v]."""
    cons = Constraints(model) if model.closures else None
    n = y.shape[0]
    nv = model.nv
    Q, V, A_ = np.empty((n, model.nq)), np.empty((n, nv)), np.empty((n, nv))
    q = np.array(q_guess, float)
    for k in range(n):
        for _ in range(50):
            r = output.value(q) - y[k]
            J = output.jacobian(q)
            if cons is not None and cons.n_holonomic:
                phi, Ah = cons.residual_and_jacobian(q)
                r, J = np.concatenate([r, phi]), np.vstack([J, Ah])
            if np.max(np.abs(r)) < 1e-12:
                break
            q = pin.integrate(model.pin_model, q, -np.linalg.lstsq(J, r, rcond=None)[0])
        else:
            raise SolverError(f"{what}: no configuration reaches the reference at sample {k} "
                              f"(residual {np.max(np.abs(r)):.3g}); give reference.guess")
        H = output.jacobian(q)
        if cons is not None:
            Ac = cons.jacobian(q)
            K = np.vstack([H, Ac])
            if np.linalg.matrix_rank(K) < nv:
                raise SolverError(f"{what}: the {output.m} reference rows and the closures do "
                                  f"not fix the motion at sample {k} (rank "
                                  f"{np.linalg.matrix_rank(K)} < nv = {nv}): a singular "
                                  "configuration, or too few rows")
            v = np.linalg.lstsq(K, np.concatenate([yd[k], np.zeros(Ac.shape[0])]), rcond=None)[0]
            _, gamma = cons.jacobian_and_bias(q, v)
            rhs = np.concatenate([ydd[k] - output.bias(q, v), -gamma])
            a = np.linalg.lstsq(K, rhs, rcond=None)[0]
        else:
            if np.linalg.matrix_rank(H) < nv:
                raise SolverError(f"{what}: {output.m} rows do not fix the {nv} coordinates")
            v = np.linalg.solve(H, yd[k])
            a = np.linalg.solve(H, ydd[k] - output.bias(q, v))
        Q[k], V[k], A_[k] = q, v, a
    return Q, V, A_


def sample_reference(sc: RunScenario, progress: bool = False) -> SampledReference:
    """The reference at the control instants of the run (and the inversion result, if any)."""
    model, ref = sc.model, sc.reference
    n = int(round(sc.duration * sc.rate))
    lam_d = ref.get("lambda_d")
    guess = model.q_initial.copy()
    for name, x in ref["guess"].items():
        guess[model.pin_model.joints[model.pin_model.getJointId(name)].idx_q] = x
    if "inversion" in ref:
        inv = dataclasses.replace(ref["inversion"], verify=False)
        res, _, _ = run_inversion_scenario(inv, progress=progress)
        if not res.success:
            raise SolverError(f"reference.inversion: {res.message}")
        t = res.t[0] + sc.dt * np.arange(n + 1)
        # quintic Hermite through (q, v, a), feedforward linear (the JointTrajectory rules)
        interp = TrajectoryInterpolator(res.t, res.q, res.v, res.a)
        Q, V, A_ = (np.empty((n + 1, d)) for d in (model.nq, model.nv, model.nv))
        for k, tk in enumerate(t):
            Q[k], V[k], A_[k], _ = interp.sample(tk)
        U = np.column_stack([np.interp(t, res.t, c) for c in res.u.T])
        return SampledReference(t, Q, V, A_, U, lam_d, res)
    t = sc.dt * np.arange(n + 1)
    if "file" in ref:  # quintic Hermite through the file's (q, v, a)
        tr = ref["file"]
        interp = TrajectoryInterpolator(tr.t, tr.q, tr.v, tr.a)
        Q, V, A_ = (np.empty((n + 1, model.nv)) for _ in range(3))
        for k, tk in enumerate(t):
            Q[k], V[k], A_[k], _ = interp.sample(tk)
        return SampledReference(t, Q, V, A_, None, lam_d)
    if "joints" in ref:
        j = ref["joints"]
        names = list(j["start"])
        traj = rest_to_rest(t, [j["start"][x] for x in names], [j["end"][x] for x in names],
                            j["t0"], j["tf"], j["order"])
        if not model.closures:
            idx = [model.joint_index(x) for x in names]
            Q = np.tile(model.q_initial, (t.size, 1))
            V, A_ = np.zeros((t.size, model.nv)), np.zeros((t.size, model.nv))
            Q[:, idx], V[:, idx], A_[:, idx] = traj.q, traj.v, traj.a
            return SampledReference(t, Q, V, A_, None, lam_d)
        for x in names:
            guess[model.joint_index(x)] = j["start"][x]
        output = Output(model, names)
        y, yd, ydd = traj.q, traj.v, traj.a
    else:
        rows = ref["sines"]
        output = Output(model, list(rows))
        p = np.array(list(rows.values()))  # (m, 4): offset, amplitude, frequency, phase
        w = 2 * np.pi * p[:, 2]
        arg = np.outer(t, w) + p[:, 3]
        y = p[:, 0] + p[:, 1] * np.sin(arg)
        yd = p[:, 1] * w * np.cos(arg)
        ydd = -p[:, 1] * w**2 * np.sin(arg)
    Q, V, A_ = _complete(model, output, y, yd, ydd, guess, "reference")
    return SampledReference(t, Q, V, A_, None, lam_d)


def _initial_state(sc: RunScenario, ref: SampledReference):
    """Reference start plus the initial error; closed loops: the unnamed coordinates are
    re-assembled (Newton on phi = 0) and their velocities solved from A v = 0."""
    model = sc.model
    dq, dv = np.zeros(model.nv), np.zeros(model.nv)
    for name, x in sc.initial_q.items():
        dq[model.joint_index(name)] = x
    for name, x in sc.initial_v.items():
        dv[model.joint_index(name)] = x
    q = pin.integrate(model.pin_model, ref.q[0], dq)
    v = ref.v[0] + dv
    if not model.closures:
        return q, v
    cons = Constraints(model)
    fixed = np.zeros(model.nv, bool)
    fixed[[model.joint_index(n) for n in {**sc.initial_q, **sc.initial_v}]] = True
    free = ~fixed
    for _ in range(50):
        phi, A = cons.residual_and_jacobian(q)
        if np.max(np.abs(phi)) < 1e-13:
            break
        step = np.zeros(model.nv)
        step[free] = np.linalg.lstsq(A[:, free], phi, rcond=None)[0]
        q = pin.integrate(model.pin_model, q, -step)
    else:
        raise SolverError("initial_error: the loop does not close with these offsets "
                          f"(residual {np.max(np.abs(phi)):.3g}); make them smaller")
    A = cons.jacobian(q)
    v[free] = -np.linalg.lstsq(A[:, free], A[:, fixed] @ v[fixed], rcond=None)[0]
    return q, v


def build_controller(sc: RunScenario,
                     ref: SampledReference | None) -> Controller | None:
    """The scenario's controller; with ``ref`` None (before the reference is computed) the
    controller of a law that needs no reference, or None for ``tv_lqr`` once its gains'
    counts (one per coordinate) are checked, so that a wrong gain fails before the work.

    Raises
    ------
    InputError
        The law refuses the gains or options; the message names the scenario file.
    """
    c = sc.controller
    kw = {k: c[k] for k in ("ki", "integral_limit", "effort_limit") if k in c}
    options = dict(c["options"])
    try:
        if c["law"] == "tv_lqr":
            if ref is None:
                for k, default in (("kp", 100.0), ("kd", 20.0)):
                    gain_vector(c.get(k, default), sc.model.nv, k, positive=False,
                                per="coordinate")
                return None
            options.setdefault("dt", sc.dt)
            options["trajectory"] = ref.trajectory
        return make_controller(c["law"], sc.model, c.get("kp", 100.0), c.get("kd", 20.0),
                               **kw, **options)
    except (MultibodyError, ValueError) as exc:
        raise InputError(f"{sc.path or 'scenario'}: controller: {exc}") from None


# -- run ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunResult:
    """Samples and summary of a closed-loop run.

    Attributes
    ----------
    t : (N,) [s]; q : (N, nq); v : (N, nv) plant state; q_ref, v_ref : the reference
    u : (N, nu) input applied from each sample on [N | N m] (after the actuator limits)
    joint_error : (N, nv) ``q_ref (-) q`` [rad | m]
    task_error : (N,) distance of the task frame from its reference position [m] (empty
        without a task frame)
    lam : (N, m) constraint multipliers of the plant [N | N m]; residual : (N,) max |phi|
    analytic_error : (N, k) or None  solution of e'' + K_D e' + K_P e = 0 on the controlled
        coordinates (computed torque, projected inverse dynamics)
    controlled : (k,) indices of the coordinates the law's error dynamics act on
    passive_torque : float  largest generalized force on a passive coordinate [N m | N]
    success, message : outcome (the simulator's message when it diverged)
    wall_time : [s]
    interrupted : bool  Ctrl-C stopped the run: the samples before it are kept
    """

    scenario: RunScenario
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    q_ref: np.ndarray
    v_ref: np.ndarray
    u: np.ndarray
    joint_error: np.ndarray
    task_error: np.ndarray
    lam: np.ndarray
    lam_labels: tuple[str, ...]
    residual: np.ndarray
    analytic_error: np.ndarray | None
    controlled: np.ndarray
    passive_torque: float
    success: bool
    message: str
    wall_time: float
    metrics: dict = field(default_factory=dict)
    #: feedback_linearization: (N, m) output error y(q_ref) - y(q) of its output rows, whose
    #: closed form ``analytic_error`` then is
    output_error: np.ndarray | None = None
    interrupted: bool = False


def error_dynamics_solution(t, e0, de0, kp, kd) -> np.ndarray:
    """e(t) (N, k) of e'' + kd e' + kp e = 0 from e(0) = e0, e'(0) = de0, per coordinate
    (Aghili 2005 eq. 47), via the 2x2 matrix exponential."""
    from scipy.linalg import expm

    t = np.asarray(t, float)
    e0, de0 = np.atleast_1d(e0), np.atleast_1d(de0)
    kp = np.broadcast_to(np.asarray(kp, float), e0.shape)
    kd = np.broadcast_to(np.asarray(kd, float), e0.shape)
    out = np.empty((t.size, e0.size))
    for i in range(e0.size):
        F = np.array([[0.0, 1.0], [-kp[i], -kd[i]]])
        h = t[1] - t[0] if t.size > 1 else 0.0
        step = expm(F * h)
        x = expm(F * t[0]) @ np.array([e0[i], de0[i]]) if t[0] else np.array([e0[i], de0[i]])
        for k in range(t.size):
            out[k, i] = x[0]
            x = step @ x
    return out


def _frame_positions(model, frame, Q):
    data = model.create_data()
    fid = model.frame_id(frame)
    out = np.empty((Q.shape[0], 3))
    for k, q in enumerate(Q):
        pin.framesForwardKinematics(model.pin_model, data, q)
        out[k] = data.oMf[fid].translation
    return out


def run_scenario(sc: RunScenario, progress: bool = False,  # noqa: C901
                 reference: SampledReference | None = None,
                 on_sample: Callable[[float, np.ndarray], None] | None = None) -> RunResult:
    """Run the closed loop (see the module docstring); never raises on divergence.

    Ctrl-C during the control periods returns the samples completed so far with
    ``interrupted`` True (``success`` False); before the first period it propagates.

    ``on_sample(t, q)`` (optional) is called with each sample ``t`` [s], ``q`` (nq,) of the
    result once it is certain to be kept: sample ``k`` at the start of period ``k + 1``, the
    last one after the loop (e.g. to stream the motion to the live viewer,
    :mod:`multibody_control.animation.live`).  The samples it sees are those of the result.
    """
    model = sc.model
    ref = reference if reference is not None else sample_reference(sc, progress)
    ctl = build_controller(sc, ref)
    plant = perturbed_model(model, sc.disturbances)
    q0, v0 = _initial_state(sc, ref)
    sim_cfg = SimulatorConfig(dt=sc.dt / sc.substeps, method=sc.method, max_speed=sc.max_speed)
    sim = Simulator(plant, sim_cfg)
    start = time.perf_counter()
    sim.reset(q0, v0, t=float(ref.t[0]))
    n = ref.t.size - 1
    B = np.asarray(model.B, float)
    limits = getattr(plant, "actuator_limits", None)  # the plant's physics, as MuJoCo's
    m = sim.constraints.n_rows if sim.constrained else 0
    labels = sim.constraints.labels if sim.constrained else ()
    T, Qs, Vs = np.empty(n + 1), np.empty((n + 1, model.nq)), np.empty((n + 1, model.nv))
    U, L, R = np.zeros((n + 1, model.nu)), np.zeros((n + 1, m)), np.zeros(n + 1)
    rng = np.random.default_rng(sc.noise_seed)
    noisy = sc.noise_q > 0 or sc.noise_v > 0
    opts = sc.controller["options"]
    force_feedback = opts.get("force_control") and (np.any(np.asarray(opts.get("force_kp", 0)))
                                                    or np.any(np.asarray(opts.get("force_ki", 0))))
    passive = np.asarray(model.passive, bool)
    passive_torque = 0.0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n, desc="run", unit="step", leave=False)
    success, message, k = True, f"completed {n} control periods of {sc.dt:g} s", 0
    tau_prev = None
    interrupted = False
    passed = -1  # the last sample handed to on_sample
    try:
        for k in range(n + 1):
            if on_sample is not None and k:  # sample k - 1 is kept from here on
                on_sample(T[k - 1], Qs[k - 1])
                passed = k - 1
            T[k], Qs[k], Vs[k] = sim.t, sim.q, sim.v
            qm, vm = sim.q, sim.v
            if noisy:
                qm = pin.integrate(model.pin_model, qm, sc.noise_q * rng.standard_normal(model.nv))
                vm = vm + sc.noise_v * rng.standard_normal(model.nv)
            r = ref.at(k)
            try:
                if force_feedback:
                    lam = None if tau_prev is None else sim.constraint_forces(tau_prev).lam
                    u = ctl.step(sim.t, qm, vm, r, lam=lam)
                else:
                    u = ctl.step(sim.t, qm, vm, r)
            except MultibodyError as exc:
                success, message = False, f"controller failed at t = {sim.t:.6g} s: {exc}"
                break
            if sc.effort_limit is not None:
                u = np.clip(u, -sc.effort_limit, sc.effort_limit)
            if limits is not None:  # an MJCF model's actuator limits, as MuJoCo applies them
                u = limits.clamp(u)
                tau = limits.force(sim.q, sim.v, u)
            else:
                tau = B @ u
            U[k] = u
            if hasattr(ctl, "tau_generalized") and passive.any():
                passive_torque = max(passive_torque,
                                     float(np.max(np.abs(ctl.tau_generalized[passive]))))
            if m:
                lam_k, R[k], _ = sim.sample(tau)
                L[k] = lam_k
            if k == n:
                break
            try:
                for _ in range(sc.substeps):
                    sim.step(tau)
            except MultibodyError as exc:
                success, message = False, str(exc)
                break
            tau_prev = tau
            if not (np.all(np.isfinite(sim.q)) and np.all(np.isfinite(sim.v))):
                success, message = False, f"state became NaN/inf at t = {sim.t:.6g} s"
                break
            if np.max(np.abs(sim.v)) > sc.max_speed:
                success, message = False, (f"diverged at t = {sim.t:.6g} s: |v| > "
                                           f"{sc.max_speed:g} (plant.max_speed)")
                break
            if bar is not None:
                bar.update(1)
    except INTERRUPTS as exc:  # Ctrl-C: keep the samples completed before the current one
        reraise_unless_interrupt(exc)
        if k == 0:
            raise
        k -= 1
        interrupted, success = True, False
        message = (f"interrupted (Ctrl-C) after t = {T[k]:.6g} s; the {k + 1} samples "
                   "recorded until then are kept")
    finally:
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - start
    N = k + 1
    if on_sample is not None and passed < k:  # the last sample kept (a Ctrl-C may have landed
        on_sample(T[k], Qs[k])  # in the call that was passing it)
    # on failure the last recorded sample is the one that failed to advance: keep it
    T, Qs, Vs, U, L, R = T[:N], Qs[:N], Vs[:N], U[:N], L[:N], R[:N]
    Qr, Vr = ref.q[:N], ref.v[:N]
    err = np.array([pin.difference(model.pin_model, q, qr) for q, qr in zip(Qs, Qr)])
    task = np.zeros(0)
    if sc.task_frame is not None:
        task = np.linalg.norm(_frame_positions(model, sc.task_frame, Qs)
                              - _frame_positions(model, sc.task_frame, Qr), axis=1)
    controlled = np.asarray(getattr(ctl, "independent", None) if
                            getattr(ctl, "independent", None) is not None else
                            np.arange(model.nv), int)
    analytic = output_err = None
    if sc.controller["law"] in _EXACT_LAWS:
        e0 = err[0, controlled]
        de0 = (Vr[0] - Vs[0])[controlled]
        analytic = error_dynamics_solution(T - T[0], e0, de0, ctl.kp, ctl.kd)
    elif sc.controller["law"] == "feedback_linearization":
        out = ctl.output
        output_err = np.array([out.value(qr) - out.value(q) for q, qr in zip(Qs, Qr)])
        de0 = out.jacobian(Qr[0]) @ Vr[0] - out.jacobian(Qs[0]) @ Vs[0]
        analytic = error_dynamics_solution(T - T[0], output_err[0], de0, ctl.kp, ctl.kd)
    res = RunResult(sc, T, Qs, Vs, Qr, Vr, U, err, task, L, labels, R, analytic, controlled,
                    passive_torque, success, message, wall, output_error=output_err,
                    interrupted=interrupted)
    res.metrics.update(_metrics(res, ref))
    return res


def _rms(x):
    return float(np.sqrt(np.mean(np.square(x)))) if x.size else 0.0


def _path_error(res: RunResult) -> np.ndarray | None:
    """Distance [m] of the task frame from the inversion task's desired path, from t0 on.

    Only for references from an inversion whose task moves the task frame in the plane
    ('<frame>.x', '<frame>.y'): this is the end-effector error Seifried reports (Sect. 4.2.7),
    which includes the output approximation (e.g. the combined output's Γ), whereas the task
    error above measures the plant against the inverse model's own motion. The start of the
    motion t0 excludes the recovery from an initial error during pre-actuation.
    """
    sc = res.scenario
    inv = sc.reference.get("inversion") if isinstance(sc.reference, dict) else None
    if inv is None or sc.task_frame is None:
        return None
    names = list(inv.task.names)
    keys = [f"{sc.task_frame}.x", f"{sc.task_frame}.y"]
    if not all(k in names for k in keys):
        return None
    sel = res.t >= inv.task.law.t0
    if not sel.any():
        return None
    desired = inv.task(res.t[sel])[0][:, [names.index(k) for k in keys]]
    reached = _frame_positions(sc.model, sc.task_frame, res.q[sel])[:, :2]
    return np.linalg.norm(reached - desired, axis=1)


def _metrics(res: RunResult, ref: SampledReference) -> dict:
    """The summary figures (keys documented in :func:`summary_table`)."""
    model = res.scenario.model
    enorm = np.linalg.norm(res.joint_error, axis=1)
    mt = {
        "joint_error_max": float(np.max(np.abs(res.joint_error))),
        "joint_error_rms": _rms(enorm),
        "joint_error_final": float(np.max(np.abs(res.joint_error[-1]))),
        "u_peak": np.max(np.abs(res.u), axis=0),
        "u_norm_mean": float(np.mean(np.linalg.norm(res.u, axis=1))),
        "residual_max": float(np.max(res.residual)) if res.residual.size else 0.0,
        "passive_torque_max": res.passive_torque,
    }
    for i, name in enumerate(model.coordinate_names):
        mt[f"error_max.{name}"] = float(np.max(np.abs(res.joint_error[:, i])))
        mt[f"error_rms.{name}"] = _rms(res.joint_error[:, i])
    if res.task_error.size:
        mt["task_error_max"] = float(np.max(res.task_error))
        mt["task_error_rms"] = _rms(res.task_error)
        mt["task_error_final"] = float(res.task_error[-1])
    path = _path_error(res)
    if path is not None:
        mt["path_error_max"] = float(np.max(path))
        mt["path_error_rms"] = _rms(path)
    if ref.lambda_d is not None and res.lam.size:
        dl = res.lam - ref.lambda_d
        mt["force_error_max"] = float(np.max(np.abs(dl)))
        mt["force_error_final"] = float(np.max(np.abs(dl[-1])))
    if res.output_error is not None:
        mt["output_error_max"] = float(np.max(np.abs(res.output_error)))
        mt["analytic_deviation"] = float(np.max(np.abs(res.output_error - res.analytic_error)))
    elif res.analytic_error is not None:
        mt["analytic_deviation"] = float(np.max(np.abs(res.joint_error[:, res.controlled]
                                                       - res.analytic_error)))
    return mt


__all__ = ["Disturbances", "RunResult", "RunScenario", "SampledReference", "build_controller",
           "error_dynamics_solution", "load_run_scenario", "perturbed_model", "run_scenario",
           "sample_reference", "scenario_from_mapping"]
