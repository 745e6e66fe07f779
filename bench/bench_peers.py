"""The suite beside MuJoCo (RK4, Euler), Exudyn and Drake on the same closed loops, same run.

four_bar and slider_crank, 10 s of passive motion at a 1 ms fixed step, from the initial states
of ``bench_speed`` assembled by the suite (position and mass-metric velocity projection), in
every tool.  The peers' models are built from the loaded robot by ``bench/peer_models.py``.
Every figure is measured the same way for every tool, from its recorded joint trajectory
(every step):

- throughput: simulated seconds per second of CPU time of the simulation loop (model building
  excluded; best of eight rounds, the tools interleaved in each), and its ratio to the
  suite's run in the same process;
- closure gap: ``max |phi(q)|`` of the suite's own closure kinematics on the tool's q [m];
- energy error: ``max |E(q, v) - E(q0, v0)|`` with the suite's energy function [J].

The suite runs ``simulate`` with its compiled fixed step (``multibody_dynamics/fast_step.py``):
RK4, projection after every step.  MuJoCo: ``mujoco.rollout`` (its C loop), default soft
constraints (``solref``/``solimp``), and RK4 with the closures' ``solref`` at two steps.  Exudyn:
``ObjectKinematicTree`` (joint coordinates) with
closure constraints, generalized-alpha (index 3, full Newton, its default tolerances).  Drake:
discrete ``MultibodyPlant`` with SAP and ball constraints.  A peer that is not installed is an
entry ``skipped: not installed`` (``pip install -e '.[bench]'`` installs them).  Run with
``python bench/run.py --only peers``; ``python bench/report.py peers`` prints the table.
"""

from __future__ import annotations

import gc
import importlib.metadata
import importlib.util
import os
import time

import numpy as np
import pinocchio as pin

from bench import peer_models
from bench.bench_speed import _cases
from multibody_dynamics import RigidDynamics
from multibody_dynamics.constraints import Constraints
from multibody_dynamics.projection import ProjectedDynamics
from multibody_dynamics.simulate import SimulatorConfig, simulate

DURATION = 10.0  # [s]
DT = 1e-3        # [s]
# best of, the tools interleaved: eight, as the compiled path of bench_speed, since the shared
# machine's bursts move single figures by tens of per cent (every tool gets the same rounds)
ROUNDS = 8


def initial_state(model, q0, v0) -> tuple[np.ndarray, np.ndarray]:
    """The assembled state every tool starts from: q on phi = 0, v on A v = 0 (mass metric)."""
    pd = ProjectedDynamics(model)
    res = pd.project_position(np.asarray(q0, float))
    if not res.success:
        raise RuntimeError(f"{model.name}: initial state does not assemble: {res.message}")
    return res.q, pd.project_velocity(res.q, np.asarray(v0, float))


def line_coordinates(model, mech, q, v) -> tuple[np.ndarray, np.ndarray]:
    """Slider positions [m] and velocities [m/s] of the point-on-line closures at (q, v).

    ``s = d . (p_a - p_b)`` with ``d`` the line direction in the world; its rate
    ``(w_b x d) . (p_a - p_b) + d . (pdot_a - pdot_b)`` from pinocchio's frame velocities.
    """
    pm = model.pin_model
    data = pm.createData()
    pin.forwardKinematics(pm, data, q, v)
    pin.updateFramePlacements(pm, data)
    s, sd = [], []
    spec = {c.name: c for c in model.closures}
    for c in mech.closures:
        if c.kind != "line":
            continue
        fa, fb = pm.getFrameId(spec[c.name].frame_a), pm.getFrameId(spec[c.name].frame_b)
        oMa, oMb = data.oMf[fa], data.oMf[fb]
        d = oMb.rotation @ c.axis_b
        r = oMa.translation - oMb.translation
        world = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        va = pin.getFrameVelocity(pm, data, fa, world)
        vb = pin.getFrameVelocity(pm, data, fb, world)
        s.append(float(d @ r))
        sd.append(float(np.cross(vb.angular, d) @ r + d @ (va.linear - vb.linear)))
    return np.array(s), np.array(sd)


def measure(model, Q: np.ndarray, V: np.ndarray, e0: float) -> tuple[float, float]:
    """(max closure gap [m], max energy error [J]) of the samples Q (N, nq), V (N, nv)."""
    con, rd = Constraints(model), RigidDynamics(model)
    gap = max(float(np.max(np.abs(con.residual(q)))) for q in Q)
    energy = max(abs(rd.energy(q, v) - e0) for q, v in zip(Q, V))
    return gap, float(energy)


def _timed(fn):
    """(CPU time of the process [s], fn()) with the garbage collector off: on the shared
    machine the wall time mostly measures the wait for a core (bench_speed.TIMER); threads a
    tool starts are counted too."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        out = fn()
        return time.process_time() - t0, out
    finally:
        gc.enable()


def prepare_suite(model, mech, q, v):
    """The suite's compiled fixed step: RK4 1 ms, projection every step.

    Each ``prepare_*`` builds its tool's model and returns ``go() -> (wall [s], Q, V)``, one
    timed run with the joint trajectory (N, nq), (N, nv) in the suite's coordinates.
    """
    def go():
        wall, res = _timed(lambda: simulate(model, DURATION, q0=q, v0=v,
                                            config=SimulatorConfig(dt=DT)))
        if not res.success:
            raise RuntimeError(f"{model.name}: the suite's run failed: {res.message}")
        return wall, res.q, res.v

    simulate(model, 0.01, q0=q, v0=v)  # compile (or load the cache) outside the timed runs
    return go


def prepare_mujoco(model, mech, q, v, integrator, solref=None):
    """``mujoco.rollout`` (MuJoCo's own C loop, every step's state returned)."""
    import mujoco
    from mujoco import rollout

    mm = peer_models.mujoco_model(mech, integrator, DT, solref)
    ids = [mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_JOINT, lk.name) for lk in mech.links]
    qa, va = mm.jnt_qposadr[ids], mm.jnt_dofadr[ids]
    sl = [mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_JOINT, f"{c.name}_slide")
          for c in mech.closures if c.kind == "line"]
    s, sd = line_coordinates(model, mech, q, v)
    n = int(round(DURATION / DT))
    d = mujoco.MjData(mm)
    d.qpos[qa], d.qvel[va] = q, v
    d.qpos[mm.jnt_qposadr[sl]], d.qvel[mm.jnt_dofadr[sl]] = s, sd
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    x0 = np.empty(mujoco.mj_stateSize(mm, spec))
    mujoco.mj_getState(mm, d, x0, spec)
    # the full physics state starts with time, qpos, qvel
    if not (np.array_equal(x0[1:1 + mm.nq], d.qpos)
            and np.array_equal(x0[1 + mm.nq:1 + mm.nq + mm.nv], d.qvel)):
        raise RuntimeError("unexpected layout of MuJoCo's mjSTATE_FULLPHYSICS")

    def go():
        wall, X = _timed(lambda: rollout.rollout(mm, mujoco.MjData(mm), x0[None], nstep=n)[0][0])
        X = np.vstack([x0, X])
        Q, V = X[:, 1:1 + mm.nq], X[:, 1 + mm.nq:1 + mm.nq + mm.nv]
        return wall, Q[:, qa], V[:, va]

    return go


def prepare_exudyn(model, mech, q, v):
    import exudyn as exu
    from exudyn import itemInterface as ei

    n = int(round(DURATION / DT))

    def go():
        SC, mbs, node = peer_models.exudyn_system(mech, q, v)
        sq = mbs.AddSensor(ei.SensorNode(nodeNumber=node, storeInternal=True,
                                         outputVariableType=exu.OutputVariableType.Coordinates))
        sv = mbs.AddSensor(ei.SensorNode(nodeNumber=node, storeInternal=True,
                                         outputVariableType=exu.OutputVariableType.Coordinates_t))
        mbs.Assemble()
        ss = exu.SimulationSettings()
        ss.timeIntegration.numberOfSteps = n
        ss.timeIntegration.endTime = DURATION
        ss.timeIntegration.verboseMode = 0
        # full Newton: on these loops the default modified Newton takes about 7 iterations
        # per step and the whole run is about 1.8x slower (measured), for the same gap
        ss.timeIntegration.newton.useModifiedNewton = False
        ss.solution.file.write = False
        ss.solution.sensors.writePeriod = DT
        ss.show.computationTime = False
        ss.show.statistics = False
        # the solve alone is timed (model building excluded, as for the others)
        wall, ok = _timed(lambda: mbs.SolveDynamic(
            ss, solverType=exu.DynamicSolverType.GeneralizedAlpha))
        if not ok:
            raise RuntimeError(f"{model.name}: Exudyn's solver failed")
        return wall, mbs.GetSensorStoredData(sq)[:, 1:], mbs.GetSensorStoredData(sv)[:, 1:]

    return go


def prepare_drake(model, mech, q, v):
    from pydrake.systems.analysis import Simulator
    from pydrake.systems.primitives import LogVectorOutput

    builder, plant, joints = peer_models.drake_plant(mech, DT)
    logger = LogVectorOutput(plant.get_state_output_port(), builder, publish_period=DT)
    diagram = builder.Build()
    qi = [j.position_start() for j in joints]
    vi = [j.velocity_start() for j in joints]
    slides = [plant.GetJointByName(f"{c.name}_slide") for c in mech.closures if c.kind == "line"]
    s, sd = line_coordinates(model, mech, q, v)
    nq = plant.num_positions()

    def run():
        sim = Simulator(diagram)
        ctx = sim.get_mutable_context()
        pctx = plant.GetMyMutableContextFromRoot(ctx)
        x = np.zeros(plant.num_positions() + plant.num_velocities())
        x[qi], x[plant.num_positions() + np.array(vi)] = q, v
        for j, sj, sdj in zip(slides, s, sd):
            x[j.position_start()] = sj
            x[plant.num_positions() + j.velocity_start()] = sdj
        plant.SetPositionsAndVelocities(pctx, x)
        sim.Initialize()
        sim.AdvanceTo(DURATION)
        return logger.FindLog(ctx).data().T.copy()

    def go():
        wall, X = _timed(run)
        return wall, X[:, qi], X[:, nq + np.array(vi)]

    return go


#: (tool, method, distribution to report the version of, import name, prepare)
TOOLS = [
    ("multibody_suite", "RK4 + projection", "multibody_suite", "multibody_dynamics",
     prepare_suite),
    ("MuJoCo", "RK4", "mujoco", "mujoco",
     lambda m, mech, q, v: prepare_mujoco(m, mech, q, v, "RK4")),
    # the stiffest closure MuJoCo recommends: time constant two steps, critical damping
    ("MuJoCo", "RK4, solref 2 ms", "mujoco", "mujoco",
     lambda m, mech, q, v: prepare_mujoco(m, mech, q, v, "RK4", (2 * DT, 1.0))),
    ("MuJoCo", "semi-implicit Euler", "mujoco", "mujoco",
     lambda m, mech, q, v: prepare_mujoco(m, mech, q, v, "Euler")),
    ("Exudyn", "generalized-alpha", "exudyn", "exudyn", prepare_exudyn),
    ("Drake", "SAP (discrete)", "drake", "pydrake", prepare_drake),
]


def run_robot(robot, model, q0, v0) -> list[dict]:
    """Every tool on one robot: ``ROUNDS`` rounds, the tools interleaved in each (the machine's
    noise then falls on all of them), best wall time of each and the accuracy of that run (the
    runs of a tool are deterministic)."""
    q, v = initial_state(model, q0, v0)
    mech = peer_models.mechanism(model)
    e0 = RigidDynamics(model).energy(q, v)
    entries, runs = [], []
    for tool, method, dist, module, prepare in TOOLS:
        entry = {"name": f"{robot} {tool} {method}", "tool": tool, "method": method}
        entries.append(entry)
        if _installed(module):
            entry["version"] = _version(dist)
            runs.append((entry, prepare(model, mech, q, v)))
        else:
            entry["skipped"] = "not installed"
    best: dict[str, tuple] = {}
    for _ in range(ROUNDS):
        for entry, go in runs:
            wall, Q, V = go()
            if entry["name"] not in best or wall < best[entry["name"]][0]:
                best[entry["name"]] = (wall, Q, V)
    suite_rate = DURATION / best[entries[0]["name"]][0]
    for entry, _ in runs:
        wall, Q, V = best[entry["name"]]
        gap, energy = measure(model, Q, V, e0)
        entry.update({"sim_s_per_cpu_s": DURATION / wall, "cpu_s": wall,
                      "steps": int(round(DURATION / DT)), "samples": int(len(Q)),
                      "max_closure_gap_m": gap, "energy_error_J": energy,
                      "initial_energy_J": e0,
                      "throughput_vs_suite": DURATION / wall / suite_rate})
    return entries


def run() -> list[dict]:
    out = []
    for robot, model, q0, v0 in _cases():
        if model.closures:
            out += run_robot(robot, model, q0, v0)
    load = round(os.getloadavg()[0], 2)  # the shared machine's load during the run
    for e in out:
        e["load_average_1min"] = load
    return out


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    for e in run():
        print(e)
