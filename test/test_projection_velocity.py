"""Velocity projection onto null(A): mass metric (default) and Euclidean, and the M^-1 X paths.

Oracles: the kinetic-energy-closest admissible velocity from a minimum-norm KKT solve,
Pythagoras in the mass metric (the kinetic energy never increases), Aghili's ``P v`` for the
Euclidean metric, ``M Y = X`` for the dense and the tree-sparse mass solves.
"""

import numpy as np
import pinocchio as pin
import pytest
from conftest import ASSEMBLY_GUESS
from hypothesis import given, settings
from hypothesis import strategies as st

from multibody_dynamics.errors import InputError
from multibody_dynamics.projection import (
    SPARSE_MASS_MIN_NV,
    ProjectedDynamics,
    ProjectionSettings,
    inverse_mass_product,
    null_space_projector,
)
from multibody_dynamics.simulate import Simulator, SimulatorConfig

# dual_arm_load: floating base, 3-row planar weld, q = 0 assembled; four_bar: 3 rows of rank 2
ROBOTS = [*ASSEMBLY_GUESS, "dual_arm_load"]


def assembled_q(pd, robot, rng):
    guess = np.zeros(pd.model.nq) if robot == "dual_arm_load" else np.array(ASSEMBLY_GUESS[robot])
    res = pd.project_position(guess + 0.2 * rng.normal(size=pd.model.nq))
    assert res.success, res.message
    return res.q


def kkt_projection(M, A, v):
    """argmin ½ (w - v)^T M (w - v) s.t. A w = 0: ``[[M, A^T], [A, 0]] [w; mu] = [M v; 0]``,
    minimum-norm least squares (redundant rows of A make the KKT matrix singular)."""
    nv, m = M.shape[0], A.shape[0]
    K = np.block([[M, A.T], [A, np.zeros((m, m))]])
    return np.linalg.lstsq(K, np.concatenate([M @ v, np.zeros(m)]), rcond=None)[0][:nv]


def kinetic(M, v):
    return 0.5 * v @ M @ v


@pytest.mark.parametrize("robot", ROBOTS)
def test_mass_projection_is_the_kinetic_energy_closest_velocity(models, rng, robot):
    model = models[robot]
    pd = ProjectedDynamics(model)
    for _ in range(3):
        q = assembled_q(pd, robot, rng)
        v = rng.normal(size=model.nv)
        w = pd.project_velocity(q, v)  # default metric: mass
        M = pin.crba(model.pin_model, model.create_data(), q)
        A = pd.constraints.jacobian(q)
        w_kkt = kkt_projection(M, A, v)
        # two solves of the same well-posed problem: round-off times cond(KKT) ~ 1e3..1e5
        np.testing.assert_allclose(w, w_kkt, rtol=0, atol=1e-10 * max(1.0, np.abs(v).max()))
        np.testing.assert_allclose(A @ w, 0.0, atol=1e-13 * max(1.0, np.abs(v).max()))
        # Pythagoras in the M metric: T(v) = T(w) + T(v - w), so T never increases
        np.testing.assert_allclose(kinetic(M, v), kinetic(M, w) + kinetic(M, v - w),
                                   rtol=1e-12)
        assert kinetic(M, w) <= kinetic(M, v) * (1 + 1e-14)
        # the change is a constraint impulse: M (v - w) lies in the row space of A
        proj = null_space_projector(A)
        np.testing.assert_allclose(proj.P @ (M @ (v - w)), 0.0,
                                   atol=1e-12 * max(1.0, np.abs(M @ (v - w)).max()))
        # idempotent; admissible velocities are left alone (round-off of the M^-1 B solve)
        np.testing.assert_allclose(pd.project_velocity(q, w), w, rtol=0, atol=1e-13 * scale(w))


def scale(x):
    return max(1.0, float(np.max(np.abs(x))))


@pytest.mark.parametrize("robot", ROBOTS)
def test_euclidean_metric_is_aghili_pv(models, rng, robot):
    model = models[robot]
    pd = ProjectedDynamics(model)
    q = assembled_q(pd, robot, rng)
    v = rng.normal(size=model.nv)
    P = null_space_projector(pd.constraints.jacobian(q)).P
    np.testing.assert_allclose(pd.project_velocity(q, v, metric="euclidean"), P @ v, rtol=0,
                               atol=1e-15 * scale(v))  # the same product


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-50.0, 50.0), min_size=9, max_size=9),
       st.integers(0, 2 ** 31 - 1))
def test_mass_projection_never_increases_kinetic_energy(v, seed):
    """Hypothesis over velocities and configurations of the floating dual-arm system."""
    from multibody_dynamics.model import load_model

    model = load_model("dual_arm_load")
    pd = ProjectedDynamics(model)
    q = pd.project_position(0.3 * np.random.default_rng(seed).normal(size=model.nq)).q
    v = np.array(v)
    w = pd.project_velocity(q, v)
    M = pin.crba(model.pin_model, model.create_data(), q)
    # round-off of T ~ eps * |v|^2 * |M|
    assert kinetic(M, w) <= kinetic(M, v) + 1e-13 * (1.0 + v @ v) * np.abs(M).max()


@pytest.mark.parametrize("robot", ["five_bar", "dual_arm_load"])
def test_dense_and_sparse_mass_solvers_agree(models, rng, robot):
    model = models[robot]
    w = {}
    for solver in ("dense", "sparse", "auto"):
        pd = ProjectedDynamics(model, settings=ProjectionSettings(mass_solver=solver))
        q = assembled_q(pd, robot, np.random.default_rng(7))
        w[solver] = pd.project_velocity(q, np.random.default_rng(8).normal(size=model.nv))
    np.testing.assert_allclose(w["sparse"], w["dense"], rtol=0, atol=1e-12)  # round-off
    np.testing.assert_array_equal(w["auto"], w["dense"])  # nv < SPARSE_MASS_MIN_NV: dense


def _chain(n):
    model, parent = pin.Model(), 0
    for i in range(n):
        joint = pin.JointModelRZ() if i % 2 else pin.JointModelRY()
        parent = model.addJoint(parent, joint,
                                pin.SE3(np.eye(3), np.array([0.0, 0.0, 0.3])), f"j{i}")
        model.appendBodyToJoint(parent,
                                pin.Inertia.FromBox(1.0, 0.05, 0.05, 0.3), pin.SE3.Identity())
    return model


@pytest.mark.parametrize("name", ["arm7", "dual_arm_load", "humanoid", "chain30"])
def test_inverse_mass_product(models, rng, name):
    """Dense, tree-sparse Cholesky (one column of a shallow tree) and computeMinverse."""
    pm = {"humanoid": pin.buildSampleModelHumanoid, "chain30": lambda: _chain(30)}.get(
        name, lambda: models[name].pin_model)()
    data = pm.createData()
    q = pin.integrate(pm, pin.neutral(pm), rng.uniform(-1.0, 1.0, pm.nv))
    M = pin.crba(pm, data, q).copy()
    for X in (rng.normal(size=pm.nv), rng.normal(size=(pm.nv, 1)), rng.normal(size=(pm.nv, 3))):
        for method in ("dense", "sparse", "auto"):
            Y = inverse_mass_product(pm, data, q, X, method)
            assert Y.shape == X.shape
            # backward error of a Cholesky / ABA solve: round-off times |M| |Y|
            np.testing.assert_allclose(M @ Y, X, rtol=0,
                                       atol=1e-13 * np.abs(M).max() * np.abs(Y).max() * pm.nv)
    assert (pm.nv >= SPARSE_MASS_MIN_NV) == (name in ("humanoid", "chain30"))


def test_bad_options_name_what_was_expected(models):
    pd = ProjectedDynamics(models["slider_crank"])
    with pytest.raises(InputError, match="metric: expected one of mass, euclidean, got 'l2'"):
        pd.project_velocity([0.7, -1.4], [1.0, 0.0], metric="l2")
    with pytest.raises(InputError, match="mass_solver: expected one of auto, dense, sparse"):
        ProjectionSettings(mass_solver="lu")
    pm = models["arm7"].pin_model
    with pytest.raises(InputError, match=r"X: expected shape \(7,\) or \(7, k\)"):
        inverse_mass_product(pm, pm.createData(), pin.neutral(pm), np.ones(3))
    with pytest.raises(InputError, match="method: expected one of auto, dense, sparse"):
        inverse_mass_product(pm, pm.createData(), pin.neutral(pm), np.ones(7), "inv")
    with pytest.raises(InputError, match="velocity_metric: expected one of mass, euclidean"):
        SimulatorConfig(velocity_metric="l2")


@pytest.mark.parametrize("metric", ["mass", "euclidean"])
def test_simulator_uses_project_velocity(models, rng, metric):
    model = models["five_bar"]
    sim = Simulator(model, SimulatorConfig(velocity_metric=metric))
    v = rng.normal(size=model.nv)
    sim.reset(ASSEMBLY_GUESS["five_bar"], v)
    np.testing.assert_array_equal(sim.v, sim.projected.project_velocity(sim.q, v, metric))


def test_mass_metric_keeps_energy_through_singularities(models):
    """Slider-crank through q1 = +-pi/2: the Euclidean P v loses energy to first order.

    Measured at 1 ms over 1.5 s (three crossings): drift 2.0e-10 J (mass), 9.6e-9 J
    (euclidean); the largest one-step change 3.3e-12 J (mass: RK4's own, away from the
    crossings) against 2.9e-9 J (euclidean, at a crossing).  The drifts were 2e-10 and 7.6e-7 J
    while the Newton projection stopped at ``|phi| < position_tol`` with q still 1e-9 rad off
    the branch near the crossing (3.9e-7 J in the step at t = 1.21 s; projection
    NEWTON_STEP_FACTOR), so the first-order loss is compared step by step.
    """
    from multibody_dynamics.simulate import simulate

    model = models["slider_crank"]
    res = {m: simulate(model, 1.5, q0=[0.0, 0.0], v0=[6.0, -12.0],
                       config=SimulatorConfig(dt=1e-3, velocity_metric=m))
           for m in ("mass", "euclidean")}
    drift = {m: r.energy_drift for m, r in res.items()}
    step = {m: np.max(np.abs(np.diff(r.energy))) for m, r in res.items()}
    assert drift["mass"] < 1e-8 and drift["euclidean"] > 10 * drift["mass"], drift
    assert step["euclidean"] > 100 * step["mass"], step
