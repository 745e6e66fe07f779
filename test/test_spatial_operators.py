"""Yeşiloğlu (2007) Ch. 3: the articulated-body factorization of the mass matrix (3.34) and
of its inverse (3.38), checked against pinocchio's CRBA and computeMinverse."""

import numpy as np
import pinocchio as pin
import pytest

from multibody_dynamics.errors import DimensionError
from multibody_dynamics.model import load_model
from multibody_dynamics.spatial_operators import inverse_mass_apply, spatial_operators


def _full(X):
    return np.triu(X) + np.triu(X, 1).T  # pinocchio fills the upper triangle


def _trees():
    return {
        "manipulator": pin.buildSampleModelManipulator(),
        # free flyer, spherical joints, branches
        "humanoid": pin.buildSampleModelHumanoid(),
        "arm7": load_model("arm7").pin_model,
        "dual_arm_load": load_model("dual_arm_load").pin_model,  # two arms on a mobile base
        "cart_double_pendulum": load_model("cart_double_pendulum").pin_model,
    }


TREES = _trees()


@pytest.mark.parametrize("name", sorted(TREES))
def test_factorization_and_inverse_match_pinocchio(name, rng):
    pm = TREES[name]
    data = pm.createData()
    for _ in range(3):
        q = pin.integrate(pm, pin.neutral(pm), rng.uniform(-np.pi, np.pi, pm.nv))
        ops = spatial_operators(pm, q)
        M = _full(pin.crba(pm, data, q))
        Minv = _full(pin.computeMinverse(pm, data, q))
        L, Li = ops.factor, ops.inverse_factor
        # round-off of products of O(1) matrices: 1e-12 relative to the largest entry
        tol = 1e-12 * np.abs(M).max()
        np.testing.assert_allclose(ops.mass_matrix, M, atol=tol)  # (3.28)
        np.testing.assert_allclose(L.T @ ops.D @ L, M, atol=tol)  # (3.34)
        np.testing.assert_allclose(L @ Li, np.eye(pm.nv), atol=1e-12)  # (3.35)
        # two computations of M^-1 differ by about eps * cond(M) relative to |M^-1|
        # (perturbation bound); 100 eps for the sums over the tree
        tol_inv = 1e-14 * np.linalg.cond(M) * np.abs(Minv).max()
        np.testing.assert_allclose(Li @ np.linalg.solve(ops.D, Li.T), Minv, atol=tol_inv)  # (3.38)
        assert np.all(np.triu(L, 1) == 0.0)  # unit lower block-triangular in the joint order
        f = rng.normal(size=pm.nv)
        np.testing.assert_allclose(inverse_mass_apply(pm, q, f), Minv @ f,
                                   atol=tol_inv * np.abs(f).sum())


def test_printed_base_block_fails_on_a_mobile_base():
    """(3.3) puts the base's own inertia M_b alone in the base block of 𝓘_AB; with two arms
    on the base the factorization (3.34) then misses the arms' articulated inertias. The
    corrected block M_b + Σ Ψᵀ 𝓘_AB,1 Ψ (NOTES, Yeşiloğlu 2007) restores it."""
    pm = TREES["dual_arm_load"]
    q = np.array([0.1, -0.2, 0.3, 0.4, -0.5, 0.6, -0.7, 0.8, -0.9])
    ops = spatial_operators(pm, q)
    M = _full(pin.crba(pm, pm.createData(), q))
    base = pm.getJointId("base_theta")
    b = slice(6 * (base - 1), 6 * base)
    printed = ops.I_AB.copy()
    printed[b, b] = ops.M[b, b]  # M_b alone, as printed
    D = ops.H.T @ printed @ ops.H
    K = np.linalg.solve(D, ops.H.T @ printed @ ops.E_phi)
    L = np.eye(pm.nv) + K @ ops.Phi @ ops.H
    assert np.abs(L.T @ D @ L - M).max() > 1e-3 * np.abs(M).max()
    assert np.abs(ops.factor.T @ ops.D @ ops.factor - M).max() < 1e-12 * np.abs(M).max()


def test_bad_arguments():
    pm = TREES["manipulator"]
    with pytest.raises(DimensionError, match="q"):
        spatial_operators(pm, np.zeros(pm.nq + 1))
    with pytest.raises(DimensionError, match="f"):
        inverse_mass_apply(pm, pin.neutral(pm), np.zeros(2))
