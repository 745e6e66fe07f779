"""Write config/bringup/<robot>.yaml: the defaults bringup.launch.py starts each robot with.

    python tools/make_bringup.py
    python tools/make_bringup.py --measure   # the library figures of the lockstep robots

Per shipped rigid robot (docs/ros-launch.md):

* ``law``: the control law that fits it (computed torque for a fully actuated open chain,
  projected inverse dynamics with passive joints for a closed loop whose actuated joints are
  its independent coordinates or that is fully actuated, feedback linearization of the
  actuated joints for the Seifried passive arms (the collocated output: its zero dynamics are
  the spring-damped passive joints with the actuated ones held) and for dual_arm_load (through
  its constrained dynamics: the only model-based law of the library that takes it, see
  ``LOCKSTEP``), joint PD otherwise (two_wheeled_cart: no model-based law takes it).  The
  passive joints of passive_arm2, passive_arm4, passive_arm_minphase and
  passive_arm_nonminphase are stiff (400-900 N m/rad on links of about 0.02 kg m^2, modes
  near 140-200 rad/s), and the exact cancellation of feedback linearization does not survive
  a loop delay of a period or two (a wall-clock loop over DDS: passive_arm4 drifted 0.34 rad
  and passive_arm2 ended 0.029 rad from the goal); their loop runs in lockstep on simulated
  time (``LOCKSTEP``), without delay, and each file carries the library figures
  (:func:`library_demo`);
* ``controller_node``: controller_node parameters per law.  Error-dynamics laws (computed
  torque, projected inverse dynamics, feedback linearization): kp = 100 1/s^2, kd = 20 1/s
  (critical damping at
  10 rad/s, as config/scenarios/run_*.yaml).  pd / pid: per input kp = w^2 M, kd = 2 w M with
  w = 20 rad/s and M = 1 / (M^-1)_jj the free inertia of its coordinate at the initial
  configuration, so kd dt / M = 0.08 at 500 Hz (multibody_control.controllers.sampled);
* ``simulator_node.initial_positions``: an assembled configuration (closed loops: Newton
  projection of a guess, residual < 1e-10);
* ``demo``: the reference the launch test sends: a rest-to-rest move of the named joints (the
  independent joints of a closed loop) by the given offsets [rad | m] in ``duration`` s.

Per shipped flexible model (no URDF; docs/ros-launch.md "Flexible robots"):

* ``law: pd`` on the joints (collocated feedback; controller_node runs pd / pid only on a
  flexible model's joint view);
* the loop in lockstep on simulated time (``use_sim_time: true``; simulator_node ``realtime:
  false``, ``lockstep: true``; controller_node ``timing: state``, both at ``RATE`` Hz): the
  command computed from the state at t_k acts over [t_k, t_k + dt], the library's
  zero-order-hold loop without delay.  The arms are undamped: the joint PD of the open chains
  is stable without delay and unstable with one or two periods of it (the spectral radii of
  the linearized sampled loop are written beside the gains), so a wall-clock loop over DDS is
  not used even where the plant steps faster than real time;
* gains of an open chain from its joint view's inertia ``M_r`` (the joint rows and columns of
  the mass matrix, elastic coordinates held) at the initial configuration: a joint whose hub is
  light against its arm (free inertia, elastic coordinates free, below ``LIGHT`` x ``M_r``)
  gets ``kp = w^2 M_r``, ``kd = 2 z w M_r`` with the (w, z) of ``W_GRID`` x ``Z_GRID`` whose
  sampled loop (``multibody_control.controllers.sampled.linear_loop_radius``, the
  linearization at the initial configuration, no delay) has the smallest spectral radius (the
  best damped slowest mode); any other joint (a carriage) the rigid rule w = ``OMEGA``,
  critical damping.  Closed loop: the plant check of the machine tool's scenario
  (``multibody_control.inversion.closed_flexible.track_closed``): ``kp = m w^2``, ``kd =
  2 m w`` with ``m`` the actuated body's mass and ``w = 2 pi 10 Hz``;
* ``simulator_node.initial_positions``: every coordinate (joints, then elastic), at rest and
  undeformed; closed loop: the neutral configuration projected onto the loops.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from multibody_control.controllers.sampled import (  # noqa: E402
    input_inertias,
    linear_loop_radius,
)
from multibody_dynamics.flexible.loader import load_flexible_model  # noqa: E402
from multibody_dynamics.model import load_model, shipped_robots  # noqa: E402
from multibody_dynamics.model.resources import shipped_flexible_models  # noqa: E402
from multibody_dynamics.projection import ProjectedDynamics  # noqa: E402

OMEGA = 20.0           # rad/s, joint PD bandwidth (critical damping)
KP_ED, KD_ED = 100.0, 20.0   # 1/s^2, 1/s: error dynamics of the model-based laws
#: guesses of an assembled configuration (rad | m), projected onto the constraints
GUESS = {
    "slider_crank": [0.7, -1.3],
    "four_bar": [0.5, 0.3, 1.5],
    "five_bar": [2.260904311, -1.549961486, 0.880688343, 1.549961486],
    "prr_surface": [0.0, 1.33, -2.64],
}
#: law and demo move (joint -> offset) per robot; independent joints for closed loops
PLAN = {
    "arm7": ("computed_torque", {"joint1": 0.2, "joint2": 0.2, "joint4": -0.2, "joint7": 0.3}),
    "cart_double_pendulum": ("computed_torque", {"x": 0.1, "alpha": 0.2, "beta": -0.2}),
    "dual_arm_load": ("feedback_linearization", {"arm1_joint2": 0.1, "arm2_joint3": -0.1}),
    "five_bar": ("projected_inverse_dynamics", {"left_motor": -0.1, "right_motor": 0.1}),
    "four_bar": ("projected_inverse_dynamics", {"crank": 0.2}),
    "passive_arm": ("feedback_linearization", {"x": 0.1, "alpha1": 0.2, "alpha2": 0.2}),
    "passive_arm_minphase": ("feedback_linearization", {"x": 0.1, "alpha1": 0.2, "alpha2": 0.2}),
    "passive_arm_nonminphase": ("feedback_linearization",
                                {"x": 0.1, "alpha1": 0.2, "alpha2": 0.2}),
    "passive_arm2": ("feedback_linearization", {"x": 0.1, "alpha1": 0.2, "alpha2": 0.2}),
    "passive_arm4": ("feedback_linearization", {"x": 0.1, "alpha1": 0.2, "alpha2": 0.2}),
    "prr_surface": ("projected_inverse_dynamics", {"q2": 0.1, "q3": -0.1}),
    "slider_crank": ("projected_inverse_dynamics", {"crank": 0.2}),
    "two_wheeled_cart": ("pd", {"left_wheel": 1.0, "right_wheel": 1.0}),
}
INDEPENDENT = {"prr_surface": ["q2", "q3"]}
#: fully actuated closed loops that also get a quasi_velocity entry (Aghili 2010's example)
QUASI_VELOCITY = ("prr_surface",)
#: pd gains (kp, kd) that replace the mass-matrix rule.  The Seifried passive arms: with the
#: passive elbow swinging, the rule's gains (kd = 2 w M per joint) are stable with one control
#: period of delay but diverge from two periods (4 ms) on in a library simulation of the loop
#: (tools' docstring); these gains, those of test_ros_inverter.py (N/m | N m/rad,
#: N s/m | N m s/rad), keep the tracking error below 0.1 rad up to 5 periods (10 ms) of delay.
PD_GAINS = {name: ([400.0, 400.0, 100.0], [40.0, 40.0, 2.0])
            for name in ("passive_arm", "passive_arm_minphase", "passive_arm_nonminphase",
                         "passive_arm2", "passive_arm4")}  # Ch. 7 arms: same cart and drives
DURATION = 2.0  # s of the demo move
#: Rigid robots whose default loop runs in lockstep on simulated time, as the flexible ones
#: (use_sim_time; simulator realtime false, lockstep; controller timing state; both at
#: LOCKSTEP_RATE): the stiff Seifried arms under feedback linearization, which needs the
#: loop without delay.  ``--measure`` (:func:`measure_lockstep`) prints the library figures of
#: the demo move, max error of the moved joints over move + 1 s hold / at the end [rad | m]:
#: feedback linearization with 0 / 1 / 2 periods of delay, then the joint PD without delay --
#: passive_arm_minphase 0.0012 / 0.00042; 0.0039 / 0.0012; 0.0091 / 0.00088; pd 0.16 / 0.071;
#: passive_arm_nonminphase 0.0023 / 9e-05; 0.011 / 0.0049; 0.034 / 0.034; pd 0.16 / 0.046;
#: passive_arm2 0.0023 / 7.1e-05; 0.011 / 0.0051; 0.034 / 0.034; pd 0.16 / 0.046;
#: passive_arm4 0.02 / 0.012; 0.087 / 0.001; 0.19 / 0.12; pd 0.15 / 0.1.
#: Projected inverse dynamics of the actuated joints (passive joints free, Aghili 2005 Sect.
#: 7.4), kp 100, kd 20, is nearly insensitive to the delay: passive_arm2 0.0148 / 2.8e-4,
#: 0.0148 / 2.8e-4, 0.0148 / 2.6e-4; passive_arm4 0.0373 / 2.1e-5 at 0, 1 and 2 periods: it
#: is offered as controller:=projected_inverse_dynamics (the law for a loop with delay, e.g.
#: hardware), feedback linearization stays the default (closer during the move without delay).
#: dual_arm_load (2 motors, 6 degrees of freedom beyond the grasp) is refused by projected
#: inverse dynamics (Aghili 2005 eq. 64), quasi_velocity (every coordinate actuated) and, before
#: it took closed loops, feedback linearization; the latter through the constrained direct
#: dynamics (multibody_control/controllers/feedback_linearization.py) tracks the two motor
#: joints with its exact error dynamics while the base, the free and the elastic joints move
#: freely (they settle: |v| < 1e-4 rad/s 10 s after the move in a library run).  --measure:
#: dual_arm_load 1.9e-05 / 1.6e-06; 5.7e-05 / 4.9e-06; 9.6e-05 / 8.5e-06; pd 0.039 / 0.039
#: (the joint PD ends 0.039 rad off on arm2_joint3: kp = 2.2 N m/rad against the elastic
#: joints and the grasp; 0.039 after a 3 s hold too).  It is not sensitive to delay: it runs
#: in lockstep so that the DDS run is the library's loop and is checked against it.
LOCKSTEP = ("passive_arm_minphase", "passive_arm_nonminphase", "passive_arm2", "passive_arm4",
            "dual_arm_load")
LOCKSTEP_RATE = 1000.0  # Hz

# -- flexible models ---------------------------------------------------------------------------
RATE = 1000.0  # Hz: simulator step and control rate of the lockstep loop
LIGHT = 0.1    # free / rigid inertia below which a joint's hub counts as light (PD from the grid)
W_GRID = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0)  # rad/s
Z_GRID = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0)                  # damping ratios
W_CLOSED = 2.0 * np.pi * 10.0  # rad/s: track_closed's default frequency of 10 Hz
#: demo moves (joint -> offset [rad | m], duration [s]).  The cart manipulator moves its cart
#: only: its arms hang in equilibrium under gravity, which the joint PD does not compensate.
#: The machine tool moves both carts together (the mechanism translates: alpha and beta stay),
#: briefly: its plant steps at about 0.08 x real time.
FLEX_PLAN = {
    "flexible_manipulator": ({"alpha": 0.2, "beta": 0.2}, 2.0),
    "flexible_manipulator_book": ({"alpha": 0.2, "beta": 0.2}, 2.0),
    "flexible_cart_manipulator": ({"x": 0.1}, 2.0),
    "flexible_cart_manipulator_design": ({"s": 0.1}, 2.0),
    "flexible_parallel_tool": ({"s1": 0.005, "s2": 0.005}, 0.3),
}


def _fmt(values, digits: int = 6) -> str:
    # a decimal point in every entry: ROS parameters are typed, [0, 1] is an integer array
    return "[" + ", ".join(_float(f"{float(v):.{digits}g}") for v in values) + "]"


def _float(text: str) -> str:
    return text if any(c in text for c in ".en") else text + ".0"


def initial_positions(name: str, model) -> np.ndarray:
    """The start of ``name`` (nq,): its guess (or rest), projected onto its loops."""
    q0 = np.array(GUESS.get(name, model.q_rest), float)
    if model.closures:
        res = ProjectedDynamics(model).project_position(q0)
        assert res.success, (name, res.message)
        q0 = res.q
    return q0


def pd_gains(name: str, model, q0):
    """(kp (nu,), kd (nu,), inertia (nu,), the rule in words) of the joint PD at ``q0``."""
    inertia = input_inertias(model, q0)
    kp, kd = OMEGA ** 2 * inertia, 2.0 * OMEGA * inertia
    rule = f"w = {OMEGA:g} rad/s: kp = w^2 M, kd = 2 w M"
    if name in PD_GAINS:
        kp, kd = (np.array(x) for x in PD_GAINS[name])
        rule = "gains of test_ros_inverter.py (tools/make_bringup.py PD_GAINS), not w^2 M"
    return kp, kd, inertia, rule


def robot_file(name: str) -> str:
    model = load_model(name)
    q0 = initial_positions(name, model)
    kp, kd, inertia, rule = pd_gains(name, model, q0)
    law, move = PLAN[name]
    lines = [
        f"# bringup.launch.py defaults of {name}: generated by tools/make_bringup.py (see its",
        "# docstring and docs/ros-launch.md); edit the tool, not this file.",
        f"law: {law}                 # controller:= default for this robot",
        "controller_node:            # parameters per law, over config/controller_node.yaml",
    ]
    lockstep = name in LOCKSTEP
    timing = f", timing: state, rate_hz: {LOCKSTEP_RATE}" if lockstep else ""
    if lockstep:
        lines[3:3] = ["use_sim_time: true      # every node on the simulator's /clock (lockstep)"]
        why = ("the DDS run is the library's loop" if model.closures else
               "feedback linearization needs the loop without delay")
        lines += [f"  # lockstep on simulated time: {why} (library figures:",
                  "  # python tools/make_bringup.py --measure; docs/ros-launch.md)"]
    if law == "feedback_linearization":  # the collocated output: the actuated joints
        lines.append(f"  {law}: {{kp: [{KP_ED}], kd: [{KD_ED}]{timing}}}   # 1/s^2, 1/s; output: "
                     "the actuated joints")
    if lockstep and not model.closures:  # the delay-tolerant alternative
        # (controller:=projected_inverse_dynamics; refused on dual_arm_load, eq. 64)
        lines.append(f"  projected_inverse_dynamics: {{kp: [{KP_ED}], kd: [{KD_ED}]{timing}}}"
                     "   # 1/s^2, 1/s; the actuated joints, passive ones free")
    if law in ("computed_torque", "projected_inverse_dynamics"):
        extra = ""
        if name in INDEPENDENT:
            extra = ", independent: [" + ", ".join(INDEPENDENT[name]) + "]"
        lines.append(f"  {law}: {{kp: [{KP_ED}], kd: [{KD_ED}]{extra}}}   # 1/s^2, 1/s")
        if name in QUASI_VELOCITY:  # controller:=quasi_velocity, the same theta
            lines.append(f"  quasi_velocity: {{kp: [{KP_ED}], kd: [{KD_ED}]{extra}}}   # 1/s^2, "
                         "1/s (Aghili 2010)")
    lines += [
        f"  # {rule}; M = {_fmt(inertia)} kg m^2 | kg"
        f" ({', '.join(model.input_names)})",
        f"  pd: {{kp: {_fmt(kp)}, kd: {_fmt(kd)}{timing}}}",
        f"  pid: {{kp: {_fmt(kp)}, kd: {_fmt(kd)}, ki: {_fmt(0.5 * kp)},"
        f" integral_limit: {_fmt(np.maximum(10.0 * kp * 0.05, 1e-3))}{timing}}}",
        "simulator_node:",
    ]
    if lockstep:
        lines += [f"  rate_hz: {LOCKSTEP_RATE}", "  realtime: false", "  lockstep: true",
                  "  lockstep_timeout: 1.0   # s of wall time: a stalled controller, not a slow "
                  "step"]
    lines += [
        f"  initial_positions: {_fmt(q0, 10)}   # {', '.join(model.coordinate_names)}",
        "demo:                       # the reference the launch test sends (rest to rest)",
        f"  duration: {DURATION}",
        "  move: {" + ", ".join(f"{k}: {v:g}" for k, v in move.items()) + "}",
    ]
    return "\n".join(lines) + "\n"


def library_demo(model, law: str, kp, kd, q0, move: dict, rate: float, delay: int = 0,
                 hold: float = 1.0) -> tuple[float, float]:
    """The demo move run in the library: ``law`` (gains ``kp``, ``kd``; feedback linearization
    of the actuated joints) on :class:`~multibody_dynamics.simulate.Simulator` at ``rate`` [Hz],
    the command computed from the state at the start of a step and applied ``delay`` steps
    later (0: the lockstep loop), from ``q0`` (nq,) at rest, a rest-to-rest move by ``move``
    (joint -> offset) in ``DURATION`` s, then ``hold`` s.

    Returns (largest error of the moved joints over the run, their error at the end)
    [rad | m]; (inf, inf) when the run diverges (an error beyond 10)."""
    from multibody_control.controllers import Reference, make_controller
    from multibody_control.outputs import Output
    from multibody_control.trajectories import rest_to_rest
    from multibody_dynamics.simulate import Simulator, SimulatorConfig

    names = list(model.coordinate_names)
    q1 = np.array(q0, float)
    for name, offset in move.items():
        q1[names.index(name)] += offset
    moved = [names.index(n) for n in move]
    extra = {"output": Output.collocated(model).names} if law == "feedback_linearization" else {}
    ctl = make_controller(law, model, kp, kd, **extra)
    sim = Simulator(model, SimulatorConfig(dt=1.0 / rate))
    sim.reset(np.array(q0, float))
    pending: list = []
    worst = 0.0
    while sim.t < DURATION + hold - 0.5 / rate:
        ref = rest_to_rest(np.array([sim.t]), q0, q1, 0.0, DURATION)
        u = ctl.step(sim.t, sim.q, sim.v, Reference(ref.q[0], ref.v[0], ref.a[0]))
        pending = pending or [u] * delay  # the plant holds the first command meanwhile
        pending.append(u)
        sim.step(model.B @ pending.pop(0))
        ref_q = rest_to_rest(np.array([sim.t]), q0, q1, 0.0, DURATION).q[0]
        err = float(np.max(np.abs(sim.q[moved] - ref_q[moved])))
        if not err < 10.0:
            return float("inf"), float("inf")
        worst = max(worst, err)
    return worst, float(np.max(np.abs(sim.q[moved] - q1[moved])))


def library_force_demo(lambda_d: float, lead: float, hold: float) -> dict:
    """prr_surface's force-control demo of the launch test (test/launch_helpers.py
    run_force_control_demo) in the library loop without delay: :class:`Simulator` at
    ``LOCKSTEP_RATE`` from the initial positions at rest; quasi_velocity (Aghili 2010) with
    ``force_control`` and the desired multiplier ``lambda_d`` [N] holds ``lead`` s, makes the
    demo move of theta = (q2, q3) in ``DURATION`` s and holds ``hold`` s; then projected inverse
    dynamics (Aghili 2005 eqs. 45-54), force control kept, the same back.  Gains of the file
    (kp 100 1/s^2, kd 20 1/s), the command computed from the state at the start of each step.

    Returns per law a dict: ``multiplier_min``, ``multiplier_max`` (of the surface multiplier
    the plant samples after each step, as simulator_node publishes it, from 0.1 s into the
    lead on) [N], ``max_error`` (of theta over the move and hold), ``end_error`` [rad].
    """
    from multibody_control.controllers import Reference, make_controller
    from multibody_control.trajectories import rest_to_rest
    from multibody_dynamics.simulate import Simulator, SimulatorConfig

    name = "prr_surface"
    model = load_model(name)
    q = initial_positions(name, model)
    names = list(model.coordinate_names)
    move = PLAN[name][1]
    idx = [names.index(n) for n in move]
    dt = 1.0 / LOCKSTEP_RATE
    sim = Simulator(model, SimulatorConfig(dt=dt))
    sim.reset(q)
    lam_d = np.array([lambda_d])
    out = {}
    for sign, law in ((1.0, "quasi_velocity"), (-1.0, "projected_inverse_dynamics")):
        ctl = make_controller(law, model, KP_ED, KD_ED, independent=tuple(INDEPENDENT[name]),
                              force_control=True)
        q_start = sim.q.copy()
        q_goal = q_start.copy()
        q_goal[idx] += [sign * move[n] for n in move]
        t0 = sim.t + lead
        t_end = t0 + DURATION + hold
        lam, worst = [], 0.0
        t_first = sim.t + 0.1
        while sim.t < t_end - 0.5 * dt:
            ref = rest_to_rest(np.array([sim.t]), q_start, q_goal, t0, t0 + DURATION)
            u = ctl.step(sim.t, sim.q, sim.v, Reference(ref.q[0], ref.v[0], ref.a[0], None,
                                                        lam_d))
            tau = model.B @ u
            sim.step(tau)
            if sim.t >= t_first:
                lam.append(float(sim.sample(tau)[0][0]))
            if sim.t >= t0:
                ref_q = rest_to_rest(np.array([sim.t]), q_start, q_goal, t0, t0 + DURATION).q[0]
                worst = max(worst, float(np.max(np.abs(sim.q[idx] - ref_q[idx]))))
        out[law] = {"multiplier_min": min(lam), "multiplier_max": max(lam),
                    "max_error": worst,
                    "end_error": float(np.max(np.abs(sim.q[idx] - q_goal[idx])))}
    return out


def measure_lockstep() -> list[str]:
    """Lines of the library figures of the ``LOCKSTEP`` robots (``--measure``): the demo move
    at ``LOCKSTEP_RATE`` under feedback linearization with 0 / 1 / 2 periods of delay and
    under their joint PD without delay (:func:`library_demo`; about 15 s a robot), from the
    initial positions of their files."""
    out = []
    for name in LOCKSTEP:
        model = load_model(name)
        q0 = initial_positions(name, model)
        move = PLAN[name][1]
        kp, kd = pd_gains(name, model, q0)[:2]
        fl = [library_demo(model, "feedback_linearization", KP_ED, KD_ED, q0, move,
                           LOCKSTEP_RATE, d) for d in (0, 1, 2)]
        pd = library_demo(model, "pd", tuple(kp), tuple(kd), q0, move, LOCKSTEP_RATE)
        out.append(f"{name}: feedback_linearization delay 0 / 1 / 2: "
                   + "; ".join(f"{a:.2g} / {b:.2g}" for a, b in fl)
                   + f"; pd delay 0: {pd[0]:.2g} / {pd[1]:.2g}  (max / end, rad | m)")
    return out


def _free_inertia(M, i: int, held) -> float:
    """1 / (M_S^-1)_ii over the coordinates not ``held`` (input_inertias' rule)."""
    keep = [k for k in range(M.shape[0]) if k == i or k not in held]
    return 1.0 / np.linalg.inv(M[np.ix_(keep, keep)])[keep.index(i), keep.index(i)]


def open_chain_gains(system, q0):
    """Gains of an open flexible chain (all joints driven, ``B = [I; 0]``) at ``q0`` (nv,),
    see the module docstring: (kp (nq_r,) [N m/rad | N/m], kd (nq_r,) [N m s/rad | N s/m],
    M_r (nq_r,) [kg m^2 | kg], the rule in words, spectral radii of the loop at 0, 1, 2
    periods of delay)."""
    nr, dt = system.nq_r, 1.0 / RATE
    M = system.mass_matrix(q0)
    joints = list(range(nr))
    rigid = np.array([_free_inertia(M[:nr, :nr], j, joints) for j in joints])
    free = np.array([_free_inertia(M, j, joints) for j in joints])
    light = free < LIGHT * rigid
    lin = system.linearize(q0, np.zeros(system.nv))

    def gains(w, z):
        wj = np.where(light, w, OMEGA)
        zj = np.where(light, z, 1.0)
        return wj * wj * rigid, 2.0 * zj * wj * rigid

    best = min((linear_loop_radius(lin.A, lin.B, *gains(w, z), dt), w, z)
               for w in W_GRID for z in Z_GRID)
    _, w, z = best
    kp, kd = gains(w, z)
    radii = [linear_loop_radius(lin.A, lin.B, kp, kd, dt, delay=d) for d in (0, 1, 2)]
    names = [n for n, is_light in zip(system.joint_names, light) if is_light]
    rule = (f"light hubs ({', '.join(names)}): w = {w:g} rad/s, z = {z:g} (grid); others "
            f"w = {OMEGA:g} rad/s, z = 1; kp = w^2 M_r, kd = 2 z w M_r")
    return kp, kd, rigid, rule, radii


def closed_gains(system):
    """(kp, kd, m) of the closed flexible loop: track_closed's K_P = m w^2, K_D = 2 m w."""
    bodies = {b.joint: b for b in system.chain.bodies}
    m = np.array([bodies[a].mass if bodies[a].joint_type == "prismatic" else bodies[a].inertia
                  for a in system.actuated], float)
    return m * W_CLOSED ** 2, 2.0 * m * W_CLOSED, m


def flexible_file(name: str) -> str:
    system = load_flexible_model(name)
    move, duration = FLEX_PLAN[name]
    closed = hasattr(system, "actuated")
    if closed:
        q0 = system.project_position(system.neutral())
        q0[np.abs(q0) < 1e-12] = 0.0  # round-off of the projection (machine-dependent digits)
        kp, kd, m = closed_gains(system)
        lines_gain = [f"  # track_closed's plant check: kp = m w^2, kd = 2 m w, w = 2 pi 10 Hz, "
                      f"m = {_fmt(m)} kg ({', '.join(system.actuated)})"]
    else:
        q0 = np.zeros(system.nv)
        kp, kd, rigid, rule, radii = open_chain_gains(system, q0)
        lines_gain = [
            f"  # {rule}; M_r = {_fmt(rigid)} kg m^2 | kg ({', '.join(system.joint_names)})",
            f"  # spectral radius of the linearized loop at {RATE:g} Hz with 0 / 1 / 2 periods "
            f"of delay: {' / '.join(f'{r:.4f}' for r in radii)}",
        ]
    timing = f"timing: state, rate_hz: {RATE}"
    lines = [
        f"# bringup.launch.py defaults of {name}: generated by tools/make_bringup.py (see its",
        "# docstring and docs/ros-launch.md); edit the tool, not this file.",
        "# A flexible model: no URDF (no robot_state_publisher, RViz, Gazebo or ros2_control,",
        "# no dynamics_node); the loop runs in lockstep on simulated time.",
        "law: pd                 # controller:= default for this robot",
        "use_sim_time: true      # every node on the simulator's /clock",
        "controller_node:        # parameters per law, over config/controller_node.yaml",
        *lines_gain,
        f"  pd: {{kp: {_fmt(kp)}, kd: {_fmt(kd)}, {timing}}}",
        f"  pid: {{kp: {_fmt(kp)}, kd: {_fmt(kd)}, ki: {_fmt(0.5 * kp)},"
        f" integral_limit: {_fmt(np.maximum(10.0 * kp * 0.05, 1e-3))}, {timing}}}",
        "simulator_node:",
        f"  rate_hz: {RATE}",
        "  realtime: false",
        "  lockstep: true",
        "  lockstep_timeout: 1.0   # s of wall time: a stalled controller, not a slow step",
        f"  initial_positions: {_fmt(q0, 10)}",
        f"  # {', '.join(system.coordinate_names)}",
        "demo:                   # the reference the launch test sends (rest to rest)",
        f"  duration: {duration}",
        "  move: {" + ", ".join(f"{k}: {v:g}" for k, v in move.items()) + "}",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    if "--measure" in sys.argv[1:]:
        print("\n".join(measure_lockstep()))
        return 0
    out = ROOT / "config" / "bringup"
    out.mkdir(exist_ok=True)
    for name in shipped_flexible_models():
        (out / f"{name}.yaml").write_text(flexible_file(name))
        print(f"wrote config/bringup/{name}.yaml")
    for name in shipped_robots():
        (out / f"{name}.yaml").write_text(robot_file(name))
        print(f"wrote config/bringup/{name}.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
