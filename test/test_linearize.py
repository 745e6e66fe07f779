"""Linearization (Seifried 2014 eq. 2.41, NASA CR-165977 C-83) and ZOH discretization (C-122).

Oracles: central finite differences of the nonlinear forward dynamics on the
manifold (q perturbed with pin.integrate), a tight-tolerance solve_ivp of the
linear ODE over one step, and expm of A k dt for powers of Phi.
"""

import numpy as np
import pinocchio as pin
import pytest
from conftest import random_state
from scipy.integrate import solve_ivp
from scipy.linalg import expm

from multibody_control.trajectories import rest_to_rest
from multibody_dynamics.errors import DimensionError, InputError, MultibodyError
from multibody_dynamics.linearize import (
    Linearizer,
    discretize_zoh,
    linearize,
    linearize_trajectory,
)
from multibody_dynamics.rigid import RigidDynamics

ROBOTS = ["arm7", "passive_arm", "cart_double_pendulum"]


def fd_jacobians(model, q, v, u, eps):
    """Central differences of a = FD(q (+) dq, v + dv, B (u + du)) in x = [dq; dv] and du."""
    dyn, pm, nv = RigidDynamics(model), model.pin_model, model.nv

    def accel(x, du):
        return dyn.forward_dynamics(pin.integrate(pm, q, x[:nv]), v + x[nv:], model.B @ (u + du))

    x0, du0 = np.zeros(2 * nv), np.zeros(model.nu)
    Jx = np.column_stack([(accel(e, du0) - accel(-e, du0)) / (2 * eps)
                          for e in eps * np.eye(2 * nv)])
    Ju = np.column_stack([(accel(x0, e) - accel(x0, -e)) / (2 * eps)
                          for e in eps * np.eye(model.nu)])
    return Jx, Ju


@pytest.mark.parametrize("name", ROBOTS)
def test_linearization_matches_finite_differences(models, rng, name):
    model = models[name]
    nv = model.nv
    lin_obj = Linearizer(model)
    for _ in range(3):
        q, v, _ = random_state(model, rng, scale=1.5)
        u = rng.uniform(-10, 10, model.nu)
        lin = lin_obj.linearize(q, v, u)
        assert lin.A.shape == (2 * nv, 2 * nv) and lin.B.shape == (2 * nv, model.nu)
        np.testing.assert_array_equal(lin.A[:nv], np.hstack([np.zeros((nv, nv)), np.eye(nv)]))
        np.testing.assert_array_equal(lin.B[:nv], 0.0)
        Jx, Ju = fd_jacobians(model, q, v, u, eps=1e-5)
        # central difference with step 1e-5: truncation eps^2 |a'''| / 6 and round-off
        # 1e-16 |a| / eps; measured <= 1e-9 of max|A| (70..1100 1/s^2 on these robots),
        # tolerance 1e-7 of it
        scale = np.abs(lin.A).max()
        np.testing.assert_allclose(lin.A[nv:], Jx, rtol=0, atol=1e-7 * scale)
        np.testing.assert_allclose(lin.B[nv:], Ju, rtol=0, atol=1e-7 * np.abs(lin.B).max())
        # second-order form: M [A21 A22] = -[K C], M B2 = Bu (one linear solve: round-off)
        np.testing.assert_allclose(lin.M @ lin.A[nv:, :nv], -lin.K, rtol=0,
                                   atol=1e-10 * np.abs(lin.K).max())
        np.testing.assert_allclose(lin.M @ lin.A[nv:, nv:], -lin.C, rtol=0,
                                   atol=1e-10 * (1 + np.abs(lin.C).max()))
        np.testing.assert_allclose(lin.M @ lin.B[nv:], model.B, rtol=0, atol=1e-10)
        np.testing.assert_allclose(lin.M, RigidDynamics(model).mass_matrix(q), rtol=0,
                                   atol=1e-12)  # the same CRBA, symmetrized
        np.testing.assert_allclose(lin.a, RigidDynamics(model).forward_dynamics(q, v, model.B @ u),
                                   rtol=1e-12, atol=1e-12)


def test_spring_and_damper_enter_stiffness_and_damping(models):
    """passive_arm, horizontal plane, at rest at the spring rest: K and C are the spring's."""
    model = models["passive_arm"]
    i = model.joint_index("beta")
    lin = linearize(model, model.q_rest, np.zeros(model.nv))
    # at rest in a horizontal plane nothing but the spring stiffens and the damper damps
    expected_K = np.zeros((model.nv, model.nv))
    expected_K[i, i] = model.stiffness[i]
    np.testing.assert_allclose(lin.K, expected_K, rtol=0, atol=1e-12)  # exact up to round-off
    np.testing.assert_allclose(lin.C, np.diag(model.damping), rtol=0, atol=1e-12)
    # the cart and the two actuated links are free (zero eigenvalues), the passive mode damped
    assert np.all(np.linalg.eigvals(lin.A).real <= 1e-12)  # damped or neutral, never unstable


def test_hanging_pendulum_frequencies(models):
    """cart_double_pendulum hanging at rest, cart and link torques free: small oscillations.

    det(K - w^2 M) = 0 gives the pendulum frequencies; the linear model's eigenvalues are
    +-i w (no damping), an independent check of K = d(g-load)/dq against the eigenproblem.
    """
    model = models["cart_double_pendulum"]
    lin = linearize(model, model.neutral(), np.zeros(3))
    w2 = np.sort(np.linalg.eigvals(np.linalg.solve(lin.M, lin.K)).real)
    assert abs(w2[0]) < 1e-9 and np.all(w2[1:] > 0)  # the cart is free: one zero frequency
    eig = np.linalg.eigvals(lin.A)
    np.testing.assert_allclose(np.sort(np.abs(eig.imag))[2:], np.repeat(np.sqrt(w2[1:]), 2),
                               rtol=1e-9)  # eigen-solvers on a 6x6, round-off
    # no damping: real parts vanish; the cart's double zero eigenvalue (a Jordan block) may
    # split by ~sqrt(eps |A|) ~ 1e-7 in an eigen-solver, hence 1e-6 (measured exactly 0)
    np.testing.assert_allclose(eig.real, 0.0, atol=1e-6)


# ---------------------------------------------------------------- discretization
@pytest.mark.parametrize("name", ROBOTS)
def test_zoh_matches_fine_integration(models, rng, name):
    model = models[name]
    q, v, _ = random_state(model, rng)
    lin = linearize(model, q, v, rng.uniform(-5, 5, model.nu))
    dt = 0.01
    Phi, Theta = lin.discretize(dt)
    x0 = rng.uniform(-1, 1, 2 * model.nv)
    du = rng.uniform(-1, 1, model.nu)
    sol = solve_ivp(lambda t, x: lin.A @ x + lin.B @ du, (0.0, dt), x0, method="DOP853",
                    rtol=1e-12, atol=1e-13)
    assert sol.success
    # integrator tolerances 1e-12 relative / 1e-13 absolute on a state of O(1..10);
    # measured <= 7e-14, tolerance 1e-10
    np.testing.assert_allclose(Phi @ x0 + Theta @ du, sol.y[:, -1], rtol=0, atol=1e-10)
    for k in (1, 3, 10):
        np.testing.assert_allclose(np.linalg.matrix_power(Phi, k), expm(lin.A * k * dt),
                                   rtol=0, atol=1e-11 * k)  # measured <= 7e-14; grows with k


def test_zoh_of_a_double_integrator():
    """x'' = u: Phi = [[1, dt], [0, 1]], Theta = [dt^2/2, dt] (A singular: Van Loan still
    works)."""
    A = np.array([[0.0, 1.0], [0.0, 0.0]])
    B = np.array([[0.0], [1.0]])
    Phi, Theta = discretize_zoh(A, B, 0.1)
    np.testing.assert_allclose(Phi, [[1.0, 0.1], [0.0, 1.0]], rtol=0, atol=1e-15)  # exact series
    np.testing.assert_allclose(Theta, [[0.005], [0.1]], rtol=0, atol=1e-15)


def test_trajectory_linearization(models):
    model = models["passive_arm"]
    t = np.linspace(0.0, 0.5, 6)
    q0 = model.q_rest
    traj = rest_to_rest(t, q0, q0 + np.array([0.2, 0.5, -0.4, 0.0]), 0.0, 0.5)
    u = np.column_stack([np.linspace(0, 1, 6)] * model.nu)
    res = linearize_trajectory(model, t, traj.q, traj.v, u)
    n, nv, nu = t.size, model.nv, model.nu
    assert res.A.shape == (n, 2 * nv, 2 * nv) and res.B.shape == (n, 2 * nv, nu)
    assert res.M.shape == res.C.shape == res.K.shape == (n, nv, nv)
    assert res.Phi.shape == (n - 1, 2 * nv, 2 * nv) and res.Theta.shape == (n - 1, 2 * nv, nu)
    for k in (0, 3, n - 1):
        single = linearize(model, traj.q[k], traj.v[k], u[k])
        np.testing.assert_array_equal(res.A[k], single.A)  # the same computation
        np.testing.assert_array_equal(res.K[k], single.K)
        if k < n - 1:
            Phi, Theta = discretize_zoh(single.A, single.B, t[k + 1] - t[k])
            np.testing.assert_array_equal(res.Phi[k], Phi)
            np.testing.assert_array_equal(res.Theta[k], Theta)


# ---------------------------------------------------------------- bad input
def test_bad_input_is_rejected(models):
    model = models["passive_arm"]
    q, v, u = model.neutral(), np.zeros(model.nv), np.zeros(model.nu)
    lz = Linearizer(model)
    cases = [
        (lambda: lz.linearize(q[:-1], v), DimensionError, ["q", f"({model.nq},)"]),
        (lambda: lz.linearize(q, v, np.zeros(model.nu + 1)), DimensionError,
         ["u", f"({model.nu},)"]),
        (lambda: lz.linearize(q, np.full(model.nv, np.nan)), InputError, ["v", "non-finite"]),
        (lambda: discretize_zoh(np.eye(2), np.ones((2, 1)), 0.0), InputError, ["dt", "positive"]),
        (lambda: discretize_zoh(np.eye(2), np.ones((2, 1)), -1e-3), InputError, ["dt"]),
        (lambda: discretize_zoh(np.eye(2), np.ones((2, 1)), "fast"), InputError, ["dt"]),
        (lambda: discretize_zoh(np.ones((2, 3)), np.ones((2, 1)), 0.1),
         DimensionError, ["A", "square"]),
        (lambda: discretize_zoh(np.eye(2), np.ones(2), 0.1), DimensionError, ["B", "(2, m)"]),
        (lambda: discretize_zoh(np.eye(2), np.ones((3, 1)), 0.1), DimensionError, ["B", "(2,"]),
        (lambda: lz.along([0.0, 0.1, 0.1], np.tile(q, (3, 1)), np.zeros((3, model.nv))),
         InputError, ["t", "increasing"]),
        (lambda: lz.along([0.0], q[None], v[None]), InputError, ["t", "at least 2"]),
        (lambda: lz.along([0.0, 0.1], np.tile(q, (3, 1)), np.zeros((2, model.nv))),
         DimensionError, ["q", f"(2, {model.nq})"]),
        (lambda: lz.along([0.0, 0.1], np.tile(q, (2, 1)), np.zeros((2, model.nv)), u),
         DimensionError, ["u", f"(2, {model.nu})"]),
        (lambda: lz.along(np.zeros((2, 1)), np.tile(q, (2, 1)), np.zeros((2, model.nv))),
         DimensionError, ["t", "(N,)"]),
    ]
    for call, error, words in cases:
        with pytest.raises(error) as err:
            call()
        assert isinstance(err.value, MultibodyError) and isinstance(err.value, ValueError)
        assert all(w in str(err.value) for w in words), str(err.value)


def test_closed_loop_models_are_refused(models):
    with pytest.raises(InputError, match="closure"):
        Linearizer(models["four_bar"])
