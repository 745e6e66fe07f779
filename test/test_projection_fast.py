"""The compiled fast path of ProjectedDynamics equals the plain numpy implementation."""

import numpy as np
import pytest
from conftest import ASSEMBLY_GUESS

from multibody_dynamics.projection import (
    VARIANTS,
    ProjectedDynamics,
    ProjectionSettings,
    projected_acceleration,
)

GUESS = ASSEMBLY_GUESS


def reference(pd, q, v, tau):
    """Accelerations, constraint force and multipliers by the numpy path (eqs. 22-24, 32)."""
    A, gamma = pd.constraints.jacobian_and_bias(q, v)
    M, f = pd._applied(q, v, tau)
    a, proj = projected_acceleration(M, f, A, gamma, pd.settings)
    f_c = M @ a - f
    f_c -= proj.P @ f_c
    return a, f_c, proj.A_pinv.T @ f_c, proj.rank


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("robot", list(GUESS))
def test_fast_path_equals_numpy_path(models, rng, robot, variant):
    model = models[robot]
    pd = ProjectedDynamics(model, settings=ProjectionSettings(variant=variant, alpha=0.05))
    for i in range(6):
        q = pd.project_position(np.array(GUESS[robot]) + 0.3 * rng.normal(size=model.nq)).q
        v = rng.normal(size=model.nv)  # also inadmissible velocities: the bias terms matter
        if i % 2:
            v = pd.project_velocity(q, v)
        tau = rng.normal(size=model.nv)
        res = pd.forward_dynamics_result(q, v, tau)
        a, f_c, lam, rank = reference(pd, q, v, tau)
        assert res.rank == rank
        # identical up to round-off (Jacobi SVD and LU vs LAPACK): 1e-12 relative
        for x, y in ((res.a, a), (res.f_c, f_c), (res.lam, lam)):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-12 * max(1.0, np.abs(y).max()))
        np.testing.assert_array_equal(pd.acceleration(q, v, tau), res.a)


def test_fast_path_at_the_slider_crank_singularity(models):
    pd = ProjectedDynamics(models["slider_crank"])
    q, v, tau = np.array([np.pi / 2, np.pi]), np.array([1.0, 0.5]), np.array([0.2, 0.0])
    res = pd.forward_dynamics_result(q, v, tau)
    a, f_c, _, rank = reference(pd, q, v, tau)
    assert res.rank == rank == 0 and res.success and "removed" in res.message
    np.testing.assert_allclose(res.a, a, rtol=1e-12)
    np.testing.assert_array_equal(res.f_c, 0.0)


def test_pfaffian_rows_use_the_numpy_path(models, rng):
    model = models["five_bar"]
    pd = ProjectedDynamics(model)
    q = pd.project_position(np.array(GUESS["five_bar"])).q
    pd.constraints.add_pfaffian("lock", 1, lambda q, v: (np.eye(4)[[0]], np.zeros(1)))
    res = pd.forward_dynamics_result(q, np.zeros(4), np.ones(4))
    assert res.rank == 3 and abs(res.a[0]) < 1e-12
