"""The O(n m + m^3) direct dynamics of ProjectedDynamics (articulated-body solves, Gauss form).

Oracles independent of the code under test: pinocchio's ``computeMinverse`` for the
articulated-body solves, the minimum-norm solution of the saddle-point (KKT) system by
``numpy.linalg.lstsq``, pinocchio's ABA where the constraint vanishes, and
``pin.constraintDynamics`` on the same chain closed by a 3-D point.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from conftest import ASSEMBLY_GUESS

from multibody_dynamics import fast_step
from multibody_dynamics.constrained_baselines import KKTDynamics, PinocchioConstraintDynamics
from multibody_dynamics.projection import ProjectedDynamics, ProjectionSettings

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("closed_chain", ROOT / "bench" / "closed_chain.py")
closed_chain = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(closed_chain)


def kkt_min_norm(pd, q, v, tau):
    """(a, lam) of the minimum-norm least-squares solution of [[M, A^T], [A, 0]] [a; -lam] =
    [f; -gamma] (redundant rows make the matrix singular; a is unique, lam the least-norm)."""
    K, rhs = KKTDynamics(pd.model, pd.constraints).kkt_system(q, v, tau)
    x = np.linalg.lstsq(K, rhs, rcond=1e-12)[0]
    return x[:pd.model.nv], -x[pd.model.nv:]


def state(pd, q_guess, rng):
    q = pd.project_position(np.asarray(q_guess, float)).q
    v = pd.project_velocity(q, rng.normal(size=pd.model.nv))
    return q, v, rng.normal(size=pd.model.nv)


@pytest.mark.parametrize("robot", ["arm7", "dual_arm_load", "five_bar"])
def test_articulated_body_solves_equal_pinocchio_minverse(models, rng, robot):
    pm = models[robot].pin_model
    ji, jf = fast_step.pack_tree(pm)
    assert fast_step._compiled_fd() is not None
    n = pm.nv
    q = pin.neutral(pm) + rng.uniform(-1, 1, n)
    v = np.zeros(n)
    J, X, W = np.zeros((6, n)), np.zeros((n, 12)), np.zeros((n, 34))
    fast_step._terms(q, v, ji, jf, np.zeros(3), np.zeros(0, np.int64), np.zeros((0, 12)),
                     np.zeros((0, 0)), np.zeros(n), J, np.zeros((6, n)), np.zeros((0, 4, 4)), X,
                     0, W)
    IA, U, D = np.zeros((n, 6, 6)), np.zeros((n, 6)), np.zeros(n)
    assert fast_step._abi_factor(ji, J, W, IA, U, D)
    Rt = rng.normal(size=(3, n))
    Xt = np.zeros((3, n))
    fast_step._abi_solve(ji, J, U, D, Rt, Xt, 3, np.zeros((n, 6, 3)))
    expected = pin.computeMinverse(pm, pm.createData(), q) @ Rt.T
    # round-off of two O(n) sweeps against pinocchio's M^-1: 1e-12 relative
    np.testing.assert_allclose(Xt.T, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("robot", list(ASSEMBLY_GUESS))
def test_tree_path_equals_kkt_on_shipped_loops(models, rng, robot):
    pd = ProjectedDynamics(models[robot])
    for _ in range(3):
        q, v, tau = state(pd, ASSEMBLY_GUESS[robot], rng)
        res = pd.forward_dynamics_result(q, v, tau)
        assert pd._tree is not None and res.success
        a, lam = kkt_min_norm(pd, q, v, tau)
        # two solution methods of the same equations, well conditioned: 1e-10 relative
        np.testing.assert_allclose(res.a, a, rtol=0, atol=1e-10 * max(1.0, np.abs(a).max()))
        np.testing.assert_allclose(res.lam, lam, rtol=0, atol=1e-10 * max(1.0, np.abs(lam).max()))
        dense = ProjectedDynamics(models[robot], settings=ProjectionSettings(mass_solver="dense"))
        rd = dense.forward_dynamics_result(q, v, tau)
        # Cholesky of M against articulated-body solves: round-off, 1e-12 relative
        for x, y in ((res.a, rd.a), (res.f_c, rd.f_c), (res.lam, rd.lam)):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-12 * max(1.0, np.abs(y).max()))


@pytest.mark.parametrize("n", [5, 10, 20, 50, 100, pytest.param(200, marks=pytest.mark.slow)])
def test_redundant_closure_of_an_n_link_chain(tmp_path, rng, n):
    """Planar point + 3-D revolute closure at the tip: 7 rows of rank 2 at every n."""
    model = closed_chain.closed_chain_model(n, tmp_path, "redundant")
    pd = ProjectedDynamics(model)
    q, v, tau = state(pd, closed_chain.zigzag(n), rng)
    res = pd.forward_dynamics_result(q, v, tau)
    assert pd._tree is not None
    assert res.success and res.rank == 2 and len(res.lam) == 7 and "redundant" in res.message
    scale = max(1.0, np.abs(res.a).max())
    # the defining equations with pinocchio's M and h: A a + gamma = 0, P (M a - f) = 0, and the
    # multipliers as numpy's pseudo-inverse gives them, lam = (A^T)^+ (M a - f).  cond(M) grows
    # to about 2e9 at n = 200 (measured residuals 2e-10 and 3e-12): 1e-8 and 1e-10 relative
    pm = model.pin_model
    data = pm.createData()
    M = pin.crba(pm, data, q)
    f = tau - pin.nonLinearEffects(pm, data, q, v)
    A, gamma = pd.constraints.jacobian_and_bias(q, v)
    assert np.abs(A @ res.a + gamma).max() < 1e-8 * scale
    P = np.eye(n) - np.linalg.pinv(A, rcond=1e-10) @ A
    assert np.abs(P @ (M @ res.a - f)).max() < 1e-10 * np.abs(f).max()
    lam = np.linalg.pinv(A.T, rcond=1e-10) @ (M @ res.a - f)
    np.testing.assert_allclose(res.lam, lam, rtol=0, atol=1e-8 * max(1.0, np.abs(lam).max()))
    if n <= 20:  # the KKT matrix's conditioning: lstsq is a fair oracle on short chains only
        a, lam = kkt_min_norm(pd, q, v, tau)
        np.testing.assert_allclose(res.a, a, rtol=0, atol=1e-9 * scale)
        np.testing.assert_allclose(res.lam, lam, rtol=0, atol=1e-9 * max(1.0, np.abs(lam).max()))
    # pinocchio on the same chain closed by a 3-D point (rows of rank 2 as well); its proximal
    # iterations stop at an absolute accuracy of 1e-12 on the constraint (measured 3e-11
    # relative at n = 200): 1e-8 relative
    base = PinocchioConstraintDynamics(closed_chain.closed_chain_model(n, tmp_path, "spherical"))
    np.testing.assert_allclose(res.a, base.acceleration(q, v, tau), rtol=0, atol=1e-8 * scale)
    # same answer as the dense path (Cholesky of M), measured 3e-11 relative at n = 200
    dense = ProjectedDynamics(model, settings=ProjectionSettings(mass_solver="dense"))
    np.testing.assert_allclose(res.a, dense.acceleration(q, v, tau), rtol=0, atol=1e-9 * scale)


def test_tree_path_at_and_near_the_slider_crank_singularity(models):
    model = models["slider_crank"]
    pd = ProjectedDynamics(model)
    v, tau = np.array([1.0, 0.5]), np.array([0.2, 0.0])
    q = np.array([np.pi / 2, np.pi])
    res = pd.forward_dynamics_result(q, v, tau)
    assert pd._tree is not None
    # the single row of A vanishes: rank 0, P = I, the open-chain dynamics (pinocchio's ABA)
    assert res.rank == 0 and res.success and "removed" in res.message
    a_free = pin.aba(model.pin_model, model.pin_model.createData(), q, v, tau)
    np.testing.assert_allclose(res.a, a_free, rtol=1e-12)
    np.testing.assert_array_equal(res.f_c, 0.0)
    # 1e-4 rad away (sigma about 1e-4): the constraint holds and KKT agrees
    q = pd.project_position(np.array([np.pi / 2 - 1e-4, np.pi + 2e-4])).q
    v = pd.project_velocity(q, v)
    res = pd.forward_dynamics_result(q, v, tau)
    a, _ = kkt_min_norm(pd, q, v, tau)
    assert res.rank == 1 and res.residual < 1e-10
    # the KKT solve loses about eps / sigma^2 ~ 1e-8 here
    np.testing.assert_allclose(res.a, a, rtol=0, atol=1e-7 * np.abs(a).max())


def test_general_trees_use_pinocchio_aba(models, rng):
    """mass_solver="sparse" on a model whose tree the compiled kernel cannot take uses
    pinocchio's ABA for M^-1 f and M^-1 V_r; same results as the dense path."""
    pd = ProjectedDynamics(models["five_bar"], settings=ProjectionSettings(mass_solver="sparse"))
    dense = ProjectedDynamics(models["five_bar"], settings=ProjectionSettings(mass_solver="dense"))
    q, v, tau = state(pd, ASSEMBLY_GUESS["five_bar"], rng)
    pd.forward_dynamics_result(q, v, tau)
    pd._tree = None  # as for a model with other joints than 1-dof revolute/prismatic
    res, rd = pd.forward_dynamics_result(q, v, tau), dense.forward_dynamics_result(q, v, tau)
    for x, y in ((res.a, rd.a), (res.f_c, rd.f_c), (res.lam, rd.lam)):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-12 * max(1.0, np.abs(y).max()))
    assert res.rank == rd.rank
