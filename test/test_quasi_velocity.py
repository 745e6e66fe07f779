"""Quasi-velocity formulation (Aghili 2010) against the projection method and closed forms."""

import numpy as np
import pinocchio as pin
import pytest
from conftest import ASSEMBLY_GUESS, assembled

from multibody_dynamics.errors import InputError, SolverError
from multibody_dynamics.projection import ProjectedDynamics
from multibody_dynamics.quasi_velocity import (
    QuasiVelocityDynamics,
    QuasiVelocitySettings,
    align_basis,
    basis_derivative,
    cholesky_factor,
    constrained_quasi_velocity,
    quasi_velocity_terms,
)

GUESS = ASSEMBLY_GUESS
CLOSED = list(GUESS)
# Accelerations of the light mechanisms reach ~1e3 under unit torques; two formulations
# differ by a few condition numbers of M (and of Lambda) times machine epsilon.
RTOL = 1e-9


def scale(x):
    return max(1.0, float(np.max(np.abs(x))))




def matrices(model, q, v, tau):
    data = model.create_data()
    pm = model.pin_model
    M = pin.crba(pm, data, q).copy()
    C = pin.computeCoriolisMatrix(pm, data, q, v).copy()
    f = tau - pin.computeGeneralizedGravity(pm, data, q)
    return M, C, f


# -- unconstrained terms --------------------------------------------------------------------------
@pytest.mark.parametrize("robot", ["arm7", "prr_surface", "five_bar"])
def test_gamma_skew_and_equation_of_motion(models, rng, robot):
    """Gamma skew-symmetric, nu^T Gamma nu = 0 (13), and (7a) reproduces pinocchio's ABA."""
    model = models[robot]
    qd = QuasiVelocityDynamics(model)
    for _ in range(3):
        q = pin.randomConfiguration(model.pin_model, -np.ones(model.nq), np.ones(model.nq))
        v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
        t = qd.terms(q, v, tau)
        g = scale(t.Gamma)
        np.testing.assert_allclose(t.Gamma + t.Gamma.T, 0.0, atol=1e-13 * g)  # round-off
        assert abs(t.nu @ t.Gamma @ t.nu) < 1e-13 * g * (t.nu @ t.nu)
        np.testing.assert_allclose(t.W @ t.W.T, pin.crba(model.pin_model, model.create_data(), q),
                                   atol=1e-13 * scale(t.W) ** 2)
        # nu' = W'^T v + W^T a  =>  a = W^-T (nu' - W'^T v)
        a = np.linalg.solve(t.W.T, t.nu_dot - t.W_dot.T @ v)
        a_ref = pin.aba(model.pin_model, model.create_data(), q, v, tau)
        np.testing.assert_allclose(a, a_ref, atol=1e-10 * scale(a_ref))  # cond(M) * eps


def test_w_dot_is_the_derivative_of_the_cholesky_factor(models, rng):
    model = models["arm7"]
    qd = QuasiVelocityDynamics(model)
    q = pin.randomConfiguration(model.pin_model, -np.ones(7), np.ones(7))
    v = rng.normal(size=7)
    h = 1e-6
    W = [qd.terms(pin.integrate(model.pin_model, q, s * h * v), v).W for s in (1, -1)]
    fd = (W[0] - W[1]) / (2 * h)
    # central difference: O(h^2) truncation plus eps/h round-off, entries of order one
    np.testing.assert_allclose(qd.terms(q, v).W_dot, fd, atol=1e-7 * scale(fd))


@pytest.mark.parametrize("robot", ["arm7", "four_bar"])
def test_kinetic_energy(models, rng, robot):
    """T = 1/2 ||nu||^2 (12)."""
    model = models[robot]
    qd = QuasiVelocityDynamics(model)
    q = pin.randomConfiguration(model.pin_model, -np.ones(model.nq), np.ones(model.nq))
    v = rng.normal(size=model.nv)
    T = pin.computeKineticEnergy(model.pin_model, model.create_data(), q, v)
    assert qd.kinetic_energy(q, v) == pytest.approx(T, rel=1e-13)  # round-off
    assert 0.5 * qd.terms(q, v).nu @ qd.terms(q, v).nu == pytest.approx(T, rel=1e-13)


def test_cholesky_of_an_indefinite_matrix_fails():
    with pytest.raises(SolverError, match="not positive definite"):
        cholesky_factor(np.diag([1.0, -1.0]))
    with pytest.raises(InputError, match="rank_atol"):
        QuasiVelocitySettings(rank_atol=-1.0)


# -- constrained: agreement with the projection method --------------------------------------------
@pytest.mark.parametrize("robot", CLOSED)
def test_forward_dynamics_equals_projection(models, rng, robot):
    """Accelerations equal ProjectedDynamics; lam (33) equals its minimum-norm multiplier.

    The multiplier sets {lam0 + null(A^T)} are the same for A and Lambda = A W^-T, so the
    minimum-norm multipliers agree also for the redundant four-bar closure (rank 2 of 5).
    """
    model = models[robot]
    pd, qd = ProjectedDynamics(model), QuasiVelocityDynamics(model)
    for _ in range(3):
        q, v, tau = assembled(model, rng, GUESS[robot])
        p, r = pd.forward_dynamics_result(q, v, tau), qd.forward_dynamics_result(q, v, tau)
        assert r.success and r.rank == p.rank, r.message
        s = scale(p.a)
        np.testing.assert_allclose(r.a, p.a, rtol=0, atol=RTOL * s)
        np.testing.assert_allclose(r.lam, p.lam, rtol=0, atol=RTOL * s * scale(p.lam))
        assert r.residual < RTOL * s
        # reduced coordinates: v = W^-T V2 nu_r (27) for an admissible v
        np.testing.assert_allclose(np.linalg.solve(r.W.T, r.V2 @ r.nu_r), v, atol=1e-12 * scale(v))
        # ||u||^2 = ||u_r||^2 + ||u_o||^2 (V orthogonal)
        assert r.u @ r.u == pytest.approx(r.u_r @ r.u_r + r.u_o @ r.u_o, rel=1e-12)
        np.testing.assert_allclose(r.Gamma_r, -r.Gamma_r.T, atol=1e-12 * scale(r.Gamma))


def test_redundant_closure_reports_rank(models, rng):
    model = models["four_bar"]
    q, v, tau = assembled(model, rng, GUESS["four_bar"])
    r = QuasiVelocityDynamics(model).forward_dynamics_result(q, v, tau)
    assert r.rank == 2 and r.V2.shape == (3, 1) and r.U1.shape == (5, 2)
    assert "redundant" in r.message
    # minimum norm: lam has no component in null(Lambda^T)
    null_lt = np.linalg.svd(r.Lambda.T)[2][2:].T
    np.testing.assert_allclose(null_lt.T @ r.lam, 0.0, atol=1e-12 * scale(r.lam))


@pytest.mark.parametrize("robot", ["five_bar", "prr_surface", "four_bar"])
def test_zero_u_o_gives_the_weighted_minimum_norm_actuation(models, rng, robot):
    """u_o = 0: the actuation of least f^T M^-1 f among those that produce the motion."""
    model = models[robot]
    pd, qd = ProjectedDynamics(model), QuasiVelocityDynamics(model)
    q, v, tau0 = assembled(model, rng, GUESS[robot])
    a = pd.forward_dynamics_result(q, v, tau0).a
    res = qd.inverse_dynamics_result(q, v, a)
    tau, red = res.tau, res.reduction
    s = scale(a)
    np.testing.assert_allclose(red.a, a, atol=RTOL * s)
    np.testing.assert_allclose(pd.forward_dynamics_result(q, v, tau).a, a, atol=RTOL * s)
    np.testing.assert_allclose(red.u_o, 0.0, atol=1e-10 * scale(red.u))  # as commanded
    # closed form: f_w = (I - A^T (A M^-1 A^T)^+ A M^-1) f for any admissible f
    M, _, _ = matrices(model, q, v, tau)
    g = pin.computeGeneralizedGravity(model.pin_model, model.create_data(), q)
    A = pd.constraints.jacobian(q)
    f_any = tau0 - g
    Mi = np.linalg.inv(M)
    f_w = f_any - A.T @ (np.linalg.pinv(A @ Mi @ A.T) @ (A @ Mi @ f_any))
    np.testing.assert_allclose(tau - g, f_w, atol=1e-9 * scale(f_w))  # pinv and inv of M
    cost = (tau - g) @ Mi @ (tau - g)
    for _ in range(5):
        alt = tau - g + A.T @ rng.normal(size=A.shape[0])
        assert alt @ Mi @ alt >= cost - 1e-12 * cost


def test_u_o_sets_the_constraint_force(models, rng):
    """Eq. (33): lam = U1 S^-1 (Gamma_o nu_r - u_o), and u_o leaves the motion unchanged."""
    model = models["five_bar"]
    pd, qd = ProjectedDynamics(model), QuasiVelocityDynamics(model)
    q, v, tau0 = assembled(model, rng, GUESS["five_bar"])
    a = pd.forward_dynamics_result(q, v, tau0).a
    u_o = np.array([0.3, -0.7])
    res = qd.inverse_dynamics_result(q, v, a, u_o=u_o)
    tau, red = res.tau, res.reduction
    np.testing.assert_allclose(red.a, a, atol=RTOL * scale(a))
    np.testing.assert_allclose(red.u_o, u_o, atol=1e-12)  # round-off of V1^T W^-1 W V1
    lam = red.U1 @ ((red.Gamma_o_nu_r - u_o) / red.S)
    np.testing.assert_allclose(red.lam, lam, atol=1e-12 * scale(lam))
    np.testing.assert_allclose(pd.forward_dynamics_result(q, v, tau).lam,
                               red.lam, atol=1e-9 * scale(lam))
    # actuation() reproduces the same torque from (u_o, u_r)
    np.testing.assert_allclose(qd.actuation(q, v, red.u_o, red.u_r, red), tau,
                               atol=1e-12 * scale(tau))


# -- gauge invariance (Sect. 4.3) -----------------------------------------------------------------
def test_gauge_invariance_prismatic_in_millimetres(models, rng):
    """q = T q~ with q~_1 in mm: motion, quasi-quantities and lam are unchanged."""
    model = models["prr_surface"]
    qd = QuasiVelocityDynamics(model)
    q, v, tau = assembled(model, rng, GUESS["prr_surface"])
    M, C, f = matrices(model, q, v, tau)
    A, gamma = qd.constraints.jacobian_and_bias(q, v)
    T = np.diag([1e-3, 1.0, 1.0])  # m per mm on the prismatic coordinate
    Ti = np.linalg.inv(T)
    ref = constrained_quasi_velocity(M, C, f, v, A, gamma)
    new = constrained_quasi_velocity(T @ M @ T, T @ C @ T, T @ f, Ti @ v, A @ T, gamma,
                                     basis=ref.V2)
    s = scale(ref.a)
    np.testing.assert_allclose(T @ new.a, ref.a, atol=1e-12 * s)  # a = T a~
    for name in ("nu", "u", "nu_r", "u_r", "u_o", "lam", "nu_r_dot", "Gamma_o_nu_r"):
        x, y = getattr(ref, name), getattr(new, name)
        np.testing.assert_allclose(y, x, atol=1e-12 * scale(x), err_msg=name)
    np.testing.assert_allclose(new.Lambda, ref.Lambda, atol=1e-13)
    np.testing.assert_allclose(new.W, T @ ref.W, atol=1e-13 * scale(ref.W))


# -- null-space basis along a trajectory ----------------------------------------------------------
def test_align_basis_removes_sign_flips_and_rotations(rng):
    V = np.linalg.qr(rng.normal(size=(5, 3)))[0]
    R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    np.testing.assert_allclose(align_basis(V @ R, V), V, atol=1e-14)
    np.testing.assert_allclose(align_basis(-V, V), V, atol=1e-15)
    with pytest.raises(InputError, match="basis"):
        align_basis(V, V[:, :2])


def test_reduced_motion_equation_along_a_trajectory(models, rng):
    """(31a): d/dt (V2^T W^T v) = u_r - Gamma_r nu_r with a Procrustes-aligned basis.

    The aligned bases at t +- h make V2^T V2' = 0 at t, so the central difference of nu_r
    must equal nu_r_dot of the default (basis_rate=None) reduction.
    """
    model = models["five_bar"]
    pm = model.pin_model
    qd = QuasiVelocityDynamics(model)
    q, v, tau = assembled(model, rng, GUESS["five_bar"])
    r0 = qd.forward_dynamics_result(q, v, tau)
    h = 1e-5
    nu_r = []
    for sgn in (1.0, -1.0):
        qh = pin.integrate(pm, q, sgn * h * v + 0.5 * h * h * r0.a)
        vh = v + sgn * h * r0.a
        rh = qd.reduce(qh, vh, basis=r0.V2)
        nu_r.append(rh.V2.T @ (rh.W.T @ vh))
    fd = (nu_r[0] - nu_r[1]) / (2 * h)
    # O(h^2) truncation (third derivatives ~1e3..1e4 here) plus eps/h round-off
    np.testing.assert_allclose(fd, r0.nu_r_dot, atol=1e-5 * scale(r0.nu_r_dot))
    # a basis rotating in time: Gamma_r picks up V2^T V2'
    rate = basis_derivative(r0.V2, -r0.V2, 1.0)
    np.testing.assert_allclose(rate, 0.0, atol=1e-15)  # a sign flip is not a motion


# -- Aghili (2010) Sect. 5: PRR arm on a surface --------------------------------------------------
def test_prr_surface_example(models, rng):
    """A(q) = [1, l(c23 + c2), l c23] and the derived mass matrix, m = 5 kg, l = 1 m."""
    model = models["prr_surface"]
    qd = QuasiVelocityDynamics(model)
    m, ell = 5.0, 1.0  # kg, m
    for _ in range(3):
        q = rng.uniform(-1, 1, 3)
        c2, c3, c23 = np.cos(q[1]), np.cos(q[2]), np.cos(q[1] + q[2])
        A = qd.constraints.jacobian(q)
        np.testing.assert_allclose(A, [[1.0, ell * (c23 + c2), ell * c23]], atol=1e-14)
        M_ref = m * np.array([
            [3.0, ell * (1.5 * c2 + 0.5 * c23), 0.5 * ell * c23],
            [ell * (1.5 * c2 + 0.5 * c23), ell * ell * (5 / 3 + c3),
             ell * ell * (1 / 3 + 0.5 * c3)],
            [0.5 * ell * c23, ell * ell * (1 / 3 + 0.5 * c3), ell * ell / 3],
        ])
        # URDF inertias are rounded to 10 digits
        np.testing.assert_allclose(pin.crba(model.pin_model, model.create_data(), q), M_ref,
                                   atol=1e-8)
    q, v, tau = assembled(model, rng, GUESS["prr_surface"])
    r = qd.forward_dynamics_result(q, v, tau)
    assert r.rank == 1 and r.nu_r.shape == (2,)  # two degrees of freedom on the surface
    np.testing.assert_allclose(r.Lambda, qd.constraints.jacobian(q) @ np.linalg.inv(r.W.T),
                               atol=1e-13)  # round-off of one triangular solve


def test_unconstrained_model_reduces_to_the_full_space(models, rng):
    model = models["arm7"]
    qd = QuasiVelocityDynamics(model)
    q = pin.randomConfiguration(model.pin_model, -np.ones(7), np.ones(7))
    v, tau = rng.normal(size=7), rng.normal(size=7)
    r = qd.forward_dynamics_result(q, v, tau)
    assert r.rank == 0 and r.lam.shape == (0,) and r.V2.shape == (7, 7)
    a_ref = pin.aba(model.pin_model, model.create_data(), q, v, tau)
    np.testing.assert_allclose(r.a, a_ref, atol=1e-10 * scale(a_ref))


def test_kernel_checks_shapes():
    M = np.eye(2)
    with pytest.raises(ValueError, match="C"):
        quasi_velocity_terms(M, np.eye(3), np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match="gamma"):
        constrained_quasi_velocity(M, np.zeros((2, 2)), np.zeros(2), np.zeros(2),
                                   np.ones((1, 2)), np.zeros(2))
