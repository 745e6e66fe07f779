"""The peers' models of bench/bench_peers.py are the suite's mechanisms (bench/peer_models.py).

At one configuration that is *not* assembled (so that the closure points are told apart) each
peer's mass matrix, its gravity and velocity-product forces, and the world positions of the
two points of every closure equal the suite's (pinocchio's ``crba``, ``nonLinearEffects`` and
frame placements).  The peers are optional (the ``bench`` extra): a missing one skips.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

from bench import peer_models
from multibody_dynamics import load_model
from multibody_dynamics.errors import ModelError

ROBOTS = ["four_bar", "slider_crank"]
# five_bar: a planar_revolute closure (not in the bench); "rotated": the same mechanism with
# every link frame turned about its joint axis, so that no placement is the identity
MODELS = [*ROBOTS, "five_bar", "four_bar rotated", "slider_crank rotated"]
# Same numbers read from the same model, summed in another order: round-off only.
RTOL, ATOL = 1e-12, 1e-12


def _rotated(mech, seed=5):
    """``mech`` with link frame i turned by Rz(theta_i) about its joint axis (z): the same
    bodies at the same q, every placement, centre of mass, inertia and closure point
    re-expressed in the turned frames."""
    rng = np.random.default_rng(seed)
    R = {0: np.eye(3)}
    for lk in mech.links:
        assert np.allclose(lk.axis, [0, 0, 1])
        R[lk.index] = pin.exp3(np.array([0.0, 0.0, rng.uniform(-np.pi, np.pi)]))
    links = tuple(replace(
        lk, placement=pin.SE3(R[lk.parent].T @ lk.placement.rotation @ R[lk.index],
                              R[lk.parent].T @ lk.placement.translation),
        com=R[lk.index].T @ lk.com, inertia=R[lk.index].T @ lk.inertia @ R[lk.index])
        for lk in mech.links)
    closures = tuple(replace(
        c, p_a=R[c.link_a].T @ c.p_a, p_b=R[c.link_b].T @ c.p_b, R_b=R[c.link_b].T @ c.R_b,
        normal_link_b=R[c.link_b].T @ c.normal_link_b) for c in mech.closures)
    return replace(mech, links=links, closures=closures)


def _mech(case):
    robot, _, variant = case.partition(" ")
    model = load_model(robot)
    mech = peer_models.mechanism(model)
    return model, (_rotated(mech) if variant == "rotated" else mech)


def _state(model, seed=3):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.5, 1.5, model.nq), rng.uniform(-2.0, 2.0, model.nv)


def _reference(model, q, v):
    """pinocchio's M, h(q, v) and the world positions of each closure's two frames."""
    pm = model.pin_model
    data = pm.createData()
    M = pin.crba(pm, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    h = pin.nonLinearEffects(pm, data, q, v)
    pin.framesForwardKinematics(pm, data, q)
    points = [(data.oMf[pm.getFrameId(c.frame_a)].translation.copy(),
               data.oMf[pm.getFrameId(c.frame_b)].translation.copy()) for c in model.closures]
    return M, h, points


def test_mechanism_reads_the_model():
    model = load_model("four_bar")
    mech = peer_models.mechanism(model)
    pm = model.pin_model
    assert [lk.name for lk in mech.links] == list(pm.names[1:])
    # masses from the URDF through pinocchio, not retyped: 0.157, 0.5495, 0.3925 kg
    np.testing.assert_allclose([lk.mass for lk in mech.links],
                               [pm.inertias[i].mass for i in range(1, pm.njoints)], rtol=0)
    np.testing.assert_allclose(mech.normal, [0, 0, 1], atol=1e-15)
    assert [c.kind for c in mech.closures] == ["point"]
    assert [c.kind for c in peer_models.mechanism(load_model("slider_crank")).closures] == \
        ["line"]


def test_non_planar_model_is_refused():
    with pytest.raises(ModelError, match="planar|revolute"):
        peer_models.mechanism(load_model("arm7"))


@pytest.mark.parametrize("case", MODELS)
def test_mujoco_model_is_the_suites(case):
    mujoco = pytest.importorskip("mujoco")
    model, mech = _mech(case)
    q, v = _state(model)
    M_ref, h_ref, points = _reference(model, q, v)
    mm = peer_models.mujoco_model(mech)
    d = mujoco.MjData(mm)
    ids = [mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_JOINT, lk.name) for lk in mech.links]
    qa, va = mm.jnt_qposadr[ids], mm.jnt_dofadr[ids]
    d.qpos[qa], d.qvel[va] = q, v
    mujoco.mj_forward(mm, d)
    M = np.zeros((mm.nv, mm.nv))
    mujoco.mj_fullM(mm, d, M)
    np.testing.assert_allclose(M[np.ix_(va, va)], M_ref, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(d.qfrc_bias[va], h_ref, rtol=RTOL, atol=ATOL)
    for c, (pa, pb) in zip(model.closures, points):
        site_a = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_SITE, f"{c.name}_a")
        np.testing.assert_allclose(d.site_xpos[site_a], pa, atol=ATOL)
        if c.type == "point_on_line":  # the slider sits on the line through frame_b
            site_b = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_SITE, f"{c.name}_b")
            np.testing.assert_allclose(np.cross(d.site_xpos[site_b] - pb, c.axis), 0, atol=ATOL)
        else:
            site_b = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_SITE, f"{c.name}_b")
            np.testing.assert_allclose(d.site_xpos[site_b], pb, atol=ATOL)


@pytest.mark.parametrize("case", MODELS)
def test_exudyn_model_is_the_suites(case):
    exu = pytest.importorskip("exudyn")
    model, mech = _mech(case)
    q, v = _state(model)
    M_ref, _, points = _reference(model, q, v)
    _, mbs, _ = peer_models.exudyn_system(mech, q, v)
    M = np.asarray(mbs.ComputeLinearizedSystem()[0])  # ODE2 mass matrix, constraints aside
    np.testing.assert_allclose(M, M_ref, rtol=RTOL, atol=ATOL)
    # markers in closure order: frame_b then frame_a of each closure
    pos = [np.asarray(mbs.GetMarkerOutput(k, exu.OutputVariableType.Position))
           for k in range(2 * len(points))]
    for k, (pa, pb) in enumerate(points):
        np.testing.assert_allclose(pos[2 * k], pb, atol=ATOL)
        np.testing.assert_allclose(pos[2 * k + 1], pa, atol=ATOL)


@pytest.mark.parametrize("case", MODELS)
def test_drake_model_is_the_suites(case):
    pytest.importorskip("pydrake")
    from pydrake.multibody.tree import JacobianWrtVariable  # noqa: F401  (API present)

    model, mech = _mech(case)
    q, v = _state(model)
    M_ref, h_ref, points = _reference(model, q, v)
    builder, plant, joints = peer_models.drake_plant(mech)
    ctx = plant.CreateDefaultContext()
    qi = [j.position_start() for j in joints]
    vi = [j.velocity_start() for j in joints]
    x = np.zeros(plant.num_positions() + plant.num_velocities())
    x[qi], x[plant.num_positions() + np.array(vi)] = q, v
    plant.SetPositionsAndVelocities(ctx, x)
    M = plant.CalcMassMatrix(ctx)
    np.testing.assert_allclose(M[np.ix_(vi, vi)], M_ref, rtol=RTOL, atol=ATOL)
    # Drake's bias term is C(q, v) v without gravity; gravity enters as a generalized force
    h = plant.CalcBiasTerm(ctx) - plant.CalcGravityGeneralizedForces(ctx)
    np.testing.assert_allclose(h[vi], h_ref, rtol=RTOL, atol=ATOL)
    world = plant.world_frame()
    for c, (pa, pb) in zip(mech.closures, points):
        body_a = plant.GetBodyByName(f"{mech.links[c.link_a - 1].name}_body")
        p = plant.CalcPointsPositions(ctx, body_a.body_frame(), c.p_a, world).ravel()
        np.testing.assert_allclose(p, pa, atol=ATOL)
        if c.kind == "point":
            body_b = plant.GetBodyByName(f"{mech.links[c.link_b - 1].name}_body")
            p = plant.CalcPointsPositions(ctx, body_b.body_frame(), c.p_b, world).ravel()
            np.testing.assert_allclose(p, pb, atol=ATOL)


def test_bench_runs_all_tools_and_records_a_missing_peer(monkeypatch):
    """bench_peers.run() end to end on 0.05 s, Drake reported as not installed."""
    pytest.importorskip("mujoco")
    pytest.importorskip("exudyn")
    from bench import bench_peers, report

    monkeypatch.setattr(bench_peers, "DURATION", 0.05)
    monkeypatch.setattr(bench_peers, "ROUNDS", 1)
    real = bench_peers._installed
    monkeypatch.setattr(bench_peers, "_installed", lambda m: m != "pydrake" and real(m))
    entries = bench_peers.run()
    by = {e["name"]: e for e in entries}
    assert set(by) == {f"{r} {t}" for r in ROBOTS for t in (
        "multibody_suite RK4 + projection", "MuJoCo RK4", "MuJoCo RK4, solref 2 ms",
        "MuJoCo semi-implicit Euler",
        "Exudyn generalized-alpha", "Drake SAP (discrete)")}
    for r in ROBOTS:
        assert by[f"{r} Drake SAP (discrete)"]["skipped"] == "not installed"
        suite = by[f"{r} multibody_suite RK4 + projection"]
        assert suite["steps"] == 50 and suite["samples"] == 51
        # the suite projects every step (tolerance 1e-12 m); Exudyn solves its index-3
        # constraints by Newton: both close the loop to round-off, MuJoCo's soft ones do not
        assert suite["max_closure_gap_m"] < 1e-10
        assert by[f"{r} Exudyn generalized-alpha"]["max_closure_gap_m"] < 1e-9
        assert by[f"{r} MuJoCo RK4"]["max_closure_gap_m"] > 1e-9
        for e in (suite, by[f"{r} MuJoCo RK4"], by[f"{r} Exudyn generalized-alpha"]):
            # 50 steps of a 0.5-1.2 J mechanism: every tool keeps its energy within 5 %
            assert e["energy_error_J"] < 0.05 * e["initial_energy_J"], e["name"]
    table = report.table({"suites": {"peers": entries}}, "peers")
    assert "| four_bar | Drake | SAP (discrete) | not installed |" in table
