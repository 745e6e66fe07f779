"""Elastic joints in Yeşiloğlu's reduced form (multibody_dynamics.elastic_joints).

Oracles: the Schur-complement identity M_* = ((M^-1)_ll)^-1 with pinocchio's own M^-1
(Yeşiloğlu 2007 eq. 4.23); scipy's solve_ivp on the frozen linear ODE; a solve_ivp of
pinocchio's aba driven by computed torques (from M^-1, not from the partition) so that the
actuated joints follow the prescribed motion; explicit Euler for the stability contrast.
"""

import numpy as np
import pinocchio as pin
import pytest
from conftest import random_state
from scipy.integrate import solve_ivp

from multibody_dynamics import DimensionError, FrameNotFound, InputError, RigidDynamics, load_model
from multibody_dynamics.elastic_joints import ElasticJoints, ElasticJointsConfig, expm_step

ELASTIC_ROBOTS = ["passive_arm", "passive_arm_minphase"]  # shipped, with spring stiffness


@pytest.fixture(scope="module")
def elastic():
    return {name: ElasticJoints(load_model(name)) for name in ELASTIC_ROBOTS}


def smooth_motion(t):
    """Prescribed (x, alpha1, alpha2) of the passive arms: rest-to-motion cosines [m | rad]."""
    amp, w = np.array([0.3, 0.5, 0.4]), np.array([2.0, 3.0, 2.5])
    return amp * (1 - np.cos(w * t)), amp * w * np.sin(w * t), amp * w**2 * np.cos(w * t)


def computed_torque_reference(ej, motion, t_eval):
    """Elastic states from solve_ivp of pinocchio's aba, the actuated torques computed so that
    the actuated accelerations equal the prescribed ones: tau_r solves
    (M^-1)_rr tau_r = a_r - (M^-1 (tau_s - h))_r, with M^-1 from pinocchio (computeMinverse),
    independent of the partition/Schur complement under test."""
    m, rd = ej.model, RigidDynamics(ej.spring_model)
    pm, data = m.pin_model, m.pin_model.createData()
    r, e, ne = ej.iv_rigid, ej.iv_elastic, ej.ne

    def state(t, y):
        q, v = np.zeros(m.nq), np.zeros(m.nv)
        q[ej.iq_rigid], v[r], a_r = motion(t)
        q[ej.iq_elastic], v[e] = y[:ne], y[ne:]
        return q, v, a_r

    def torque(q, v, a_r):
        Mi = pin.computeMinverse(pm, data, q)
        Mi = np.triu(Mi) + np.triu(Mi, 1).T  # pinocchio fills the upper triangle
        f0 = rd.spring_forces(q, v) - pin.nonLinearEffects(pm, data, q, v)
        tau = np.zeros(m.nv)
        tau[r] = np.linalg.solve(Mi[np.ix_(r, r)], a_r - (Mi @ f0)[r])
        return tau

    def rhs(t, y):
        q, v, a_r = state(t, y)
        a = rd.forward_dynamics(q, v, torque(q, v, a_r))
        return np.concatenate([v[e], a[e]])

    sol = solve_ivp(rhs, (t_eval[0], t_eval[-1]), np.zeros(2 * ne), method="DOP853",
                    rtol=1e-11, atol=1e-12, t_eval=t_eval)
    assert sol.success, sol.message
    q, v, a_r = state(t_eval[-1], sol.y[:, -1])
    # the computed torque really makes aba follow the prescribed motion (round-off: 1e-10)
    np.testing.assert_allclose(rd.forward_dynamics(q, v, torque(q, v, a_r))[r], a_r, atol=1e-10)
    taus = np.array([torque(*state(t, y)) for t, y in zip(sol.t, sol.y.T)])
    return sol.y[:ne].T, sol.y[ne:].T, taus


# (1) the reduced mass matrix ------------------------------------------------------------------
@pytest.mark.parametrize("robot", ELASTIC_ROBOTS)
def test_reduced_mass_matrix_is_inverse_of_elastic_block_of_Minv(elastic, robot, rng):
    ej = elastic[robot]
    m = ej.model
    data = m.pin_model.createData()
    e = ej.iv_elastic
    for _ in range(20):
        q, v, _ = random_state(m, rng)
        M_star = ej.reduced_mass_matrix(q)
        Minv = pin.computeMinverse(m.pin_model, data, q)
        Minv = np.triu(Minv) + np.triu(Minv, 1).T
        # two different pinocchio algorithms (CRBA + Cholesky Schur complement vs the
        # articulated-body M^-1); cond(M) <= ~1e3 here; measured 1.5e-14 relative: 1e-12
        np.testing.assert_allclose(M_star, np.linalg.inv(Minv[np.ix_(e, e)]), rtol=1e-12,
                                   atol=1e-12 * np.abs(M_star).max())
        np.testing.assert_allclose(M_star, M_star.T, atol=1e-14 * np.abs(M_star).max())


@pytest.mark.parametrize("robot", ELASTIC_ROBOTS)
def test_reduced_forward_and_inverse_dynamics_match_full_model(elastic, robot, rng):
    ej = elastic[robot]
    m = ej.model
    rd = RigidDynamics(ej.spring_model)
    for _ in range(10):
        q, v, a = random_state(m, rng)
        tau = m.B @ rng.normal(size=m.nu)
        acc = ej.forward_dynamics(q, v, tau)
        ref = rd.forward_dynamics(q, v, tau)
        # eqs. 4.6-4.11 vs aba: round-off amplified by cond(M) (~1e3); measured 1e-14 of the
        # scale: 1e-11
        np.testing.assert_allclose(acc, ref, atol=1e-11 * max(1.0, np.abs(ref).max()))
        # the reduced equation reproduces the elastic accelerations of the full model
        eq = ej.reduced_equation(q, v, tau=tau)
        np.testing.assert_allclose(eq.acceleration(), ref[ej.iv_elastic],
                                   atol=1e-11 * max(1.0, np.abs(ref).max()))
        # motion-driven: the drive torques (eq. 4.4) make the full model do the same motion,
        # with zero load on the elastic joints (round-off of rnea/aba: 1e-9)
        a_r = a[ej.iv_rigid]
        acc, tau_drive = ej.motion_dynamics(q, v, a_r)
        np.testing.assert_allclose(acc[ej.iv_rigid], a_r, rtol=0, atol=0)
        np.testing.assert_allclose(rd.forward_dynamics(q, v, tau_drive), acc,
                                   atol=1e-9 * max(1.0, np.abs(acc).max()))
        np.testing.assert_allclose(ej.inverse_dynamics(q, v, acc)[ej.iv_elastic], 0.0,
                                   atol=1e-9 * max(1.0, np.abs(tau_drive).max()))


# (2) the expm step against solve_ivp -------------------------------------------------------------
@pytest.mark.parametrize("h", [1e-3, 0.05, 0.5])
def test_expm_step_equals_solve_ivp_of_frozen_linear_ode(elastic, rng, h):
    ej = elastic["passive_arm_minphase"]
    q, _, _ = random_state(ej.model, rng)
    M = ej.reduced_mass_matrix(q)
    K, D = ej.stiffness, ej.damping
    f = rng.normal(size=ej.ne) * 10.0
    theta0, dtheta0 = rng.normal(size=ej.ne) * 0.1, rng.normal(size=ej.ne)
    theta, dtheta = expm_step(M, D, K, f, theta0, dtheta0, h)

    def rhs(t, y):
        return np.concatenate([y[ej.ne:], np.linalg.solve(M, f - D * y[ej.ne:] - K * y[:ej.ne])])

    sol = solve_ivp(rhs, (0.0, h), np.concatenate([theta0, dtheta0]), method="DOP853",
                    rtol=1e-13, atol=1e-14)
    # expm is exact to round-off; DOP853 at rtol 1e-13 is the looser of the two: 1e-10
    np.testing.assert_allclose(theta, sol.y[:ej.ne, -1], atol=1e-10)
    np.testing.assert_allclose(dtheta, sol.y[ej.ne:, -1],
                               atol=1e-10 * max(1.0, np.abs(dtheta).max()))


def test_step_at_rest_equals_solve_ivp_of_frozen_system(elastic, rng):
    """At v = 0 in the horizontal plane C_* = 0, so the full step (elastic coordinates by
    expm, rigid coordinates integrated along them, eq. 4.6) must equal solve_ivp of the
    frozen linear system for all coordinates."""
    ej = elastic["passive_arm_minphase"]
    m, r, e, ne, nr = ej.model, ej.iv_rigid, ej.iv_elastic, ej.ne, ej.nr
    q, _, _ = random_state(m, rng)
    v = np.zeros(m.nv)
    tau = m.B @ rng.normal(size=m.nu)
    eq = ej.reduced_equation(q, v, tau=tau)
    np.testing.assert_allclose(eq.bias, 0.0, atol=1e-12)  # horizontal plane, at rest
    h = 0.02
    q1, v1 = ej.step(q, v, h, tau=tau)

    def rhs(t, y):  # y = [q_r, q_e, v_r, v_e], frozen coefficients
        theta = y[nr:nr + ne] - ej.model.q_rest[e]
        dd = np.linalg.solve(eq.M, eq.force - eq.damping * y[nr + ne + nr:] - eq.stiffness * theta)
        return np.concatenate([y[nr + ne:], eq.a_rigid0 - eq.G @ dd, dd])

    y0 = np.concatenate([q[r], q[e], v[r], v[e]])
    sol = solve_ivp(rhs, (0.0, h), y0, method="DOP853", rtol=1e-13, atol=1e-14)
    y1 = sol.y[:, -1]
    # same frozen system, exact vs DOP853 at rtol 1e-13: 1e-10
    np.testing.assert_allclose(np.concatenate([q1[r], q1[e]]), y1[:nr + ne], atol=1e-10)
    np.testing.assert_allclose(np.concatenate([v1[r], v1[e]]), y1[nr + ne:], atol=1e-9)


# (3) convergence to the full forward dynamics ----------------------------------------------------
def test_prescribed_motion_converges_first_order_to_computed_torque_aba(elastic):
    ej = elastic["passive_arm_minphase"]
    e = ej.iv_elastic
    T = 1.0
    t_out = np.linspace(0.0, T, 11)
    theta_ref, dtheta_ref, tau_ref = computed_torque_reference(ej, smooth_motion, t_out)
    assert np.abs(theta_ref).max() > 0.1  # the springs really deflect (~0.28 rad)
    errs, tau_errs, mid_errs = [], [], []
    for h in (0.02, 0.01, 0.005):
        res = ej.simulate(T, h, motion=smooth_motion, output_dt=0.1)
        assert res.success, res.message
        np.testing.assert_allclose(res.t, t_out, atol=1e-12)
        errs.append(np.abs(res.q[:, e] - theta_ref).max())
        tau_errs.append(np.abs(res.tau - tau_ref).max())
        # elastic torques are eq. 4.3 at the samples (q_rest = 0; same arithmetic: 1e-12)
        np.testing.assert_allclose(res.tau_elastic, -ej.damping * res.v[:, e]
                                   - ej.stiffness * res.q[:, e], atol=1e-12)
        mid = ej.simulate(T, h, motion=smooth_motion, output_dt=0.1, scheme="midpoint")
        mid_errs.append(np.abs(mid.q[:, e] - theta_ref).max())
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    # measured: errors 6.1e-3, 3.0e-3, 1.5e-3 rad (max over 0..1 s of a ~0.28 rad deflection);
    # orders 1.000, 1.001: coefficients frozen at the step start make a first-order method;
    # accept 0.9..1.3
    assert np.all((orders > 0.9) & (orders < 1.3)), (errs, orders)
    assert errs[-1] < 2e-3, errs
    # the drive torques (eq. 4.4) converge to the computed torques of the reference
    # (measured 10.0, 5.0, 2.5 N m against a 376 N m peak: order 1.0)
    tau_orders = np.log2(np.array(tau_errs[:-1]) / np.array(tau_errs[1:]))
    assert np.all(tau_orders > 0.9), (tau_errs, tau_orders)
    # scheme="midpoint" (coefficients frozen at a predicted midpoint): measured 8.9e-5, 2.2e-5,
    # 5.6e-6 rad, order 1.99, 2.00; accept 1.8..2.3
    mid_orders = np.log2(np.array(mid_errs[:-1]) / np.array(mid_errs[1:]))
    assert np.all((mid_orders > 1.8) & (mid_orders < 2.3)), (mid_errs, mid_orders)


def test_torque_driven_converges_to_full_forward_dynamics(elastic):
    ej = elastic["passive_arm"]
    m = ej.model
    rd = RigidDynamics(ej.spring_model)
    T, every = 0.6, 0.1
    t_out = np.linspace(0.0, T, 7)

    def u(t):  # piecewise constant over 0.1 s: exactly representable by all the step sizes
        k = np.floor(t / every + 1e-9)
        return m.B @ np.array([2.0 * np.cos(k), 1.5 * np.sin(0.7 * k), 0.5])

    ref = np.empty((t_out.size, 2 * m.nv))
    y = np.zeros(2 * m.nv)
    ref[0] = y
    for i in range(t_out.size - 1):  # one solve_ivp per constant-input interval
        tau = u(t_out[i])
        sol = solve_ivp(lambda t, y, tau=tau: np.concatenate(
            [y[m.nv:], rd.forward_dynamics(y[:m.nv], y[m.nv:], tau)]), (t_out[i], t_out[i + 1]),
            y, method="DOP853", rtol=1e-11, atol=1e-12)
        y = ref[i + 1] = sol.y[:, -1]
    errs, mid_errs = [], []
    for h in (0.01, 0.005, 0.0025):
        for scheme, out in (("start", errs), ("midpoint", mid_errs)):
            res = ej.simulate(T, h, tau=lambda t, q, v: u(t), output_dt=every, scheme=scheme)
            assert res.success, res.message
            out.append(max(np.abs(res.q - ref[:, :m.nv]).max(),
                           np.abs(res.v - ref[:, m.nv:]).max()))
    mid_orders = np.log2(np.array(mid_errs[:-1]) / np.array(mid_errs[1:]))
    # exponential midpoint: second order; accept 1.8..2.3
    assert np.all((mid_orders > 1.8) & (mid_orders < 2.3)), (mid_errs, mid_orders)
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    # frozen coefficients: first order (measured errors 2.6e-4, 1.3e-4, 6.6e-5; orders 0.99,
    # 1.00); accept 0.9..1.3
    assert np.all((orders > 0.9) & (orders < 1.3)), (errs, orders)


def test_linearization_uses_the_elastic_springs():
    """Linearization goes through the project's Linearizer on ``spring_model``: at rest in the
    horizontal plane the stiffness matrix is exactly diag(0, 0, 0, L_s)."""
    ej = ElasticJoints(load_model("passive_arm"), ElasticJointsConfig(stiffness=(123.0,)))
    lin = ej.linearize(np.zeros(4), np.zeros(4))
    np.testing.assert_allclose(lin.K, np.diag([0.0, 0.0, 0.0, 123.0]), atol=1e-12)
    np.testing.assert_allclose(lin.C[3, 3], ej.damping[0], atol=1e-12)


# (4) unconditional stability -----------------------------------------------------------------
def test_expm_step_stable_for_stiff_spring_where_explicit_euler_blows_up():
    stiff = 1e6  # N m/rad: omega ~ 2e3 rad/s, omega h ~ 20 at h = 10 ms
    ej = ElasticJoints(load_model("passive_arm"), ElasticJointsConfig(stiffness=(stiff,)))
    h, n = 0.01, 50
    res = ej.simulate(n * h, h, motion=smooth_motion)
    assert res.success, res.message
    theta = res.q[:, ej.iv_elastic]
    # bounded: the deflection is of the order of the quasi-static M3 a_r / L_s, ~1e-5 rad
    # (measured max 1.9e-5 rad); allow 1e-4
    assert np.abs(theta).max() < 1e-4, np.abs(theta).max()

    # explicit Euler of the same motion-driven model, same h: |1 + i omega h| ~ 19 per step
    # (measured |theta| = 6 rad after 5 steps, 4e7 rad after 10)
    q, v = res.q[0].copy(), res.v[0].copy()
    r, e = ej.iv_rigid, ej.iv_elastic
    growth = []
    with np.errstate(all="ignore"):
        for k in range(n):
            a, _ = ej.motion_dynamics(q, v, smooth_motion(k * h)[2])
            q[e], v[e] = q[e] + h * v[e], v[e] + h * a[e]
            q[ej.iq_rigid], v[r], _ = smooth_motion((k + 1) * h)
            growth.append(np.abs(q[e]).max())
            if not np.isfinite(growth[-1]) or growth[-1] > 1e6:
                break
    assert growth[-1] > 1e6 or not np.isfinite(growth[-1]), growth[-5:]

    # spectral radius of the transition matrix <= 1 for any step (damping >= 0)
    M = ej.reduced_mass_matrix(res.q[-1])
    for step in (1e-4, 1e-2, 1.0, 100.0):
        Phi = np.column_stack([np.concatenate(expm_step(M, ej.damping, ej.stiffness, [0.0],
                                                        col[:1], col[1:], step))
                               for col in np.eye(2)])
        # round-off of expm: 1e-9
        assert np.abs(np.linalg.eigvals(Phi)).max() <= 1.0 + 1e-9, step


# (5) errors ------------------------------------------------------------------------------
@pytest.mark.parametrize("robot, match", [
    ("cart_double_pendulum", "no passive joint"),
    ("two_wheeled_cart", "no spring"),
    ("four_bar", "open chains"),
])
def test_model_without_elastic_joints_is_rejected(robot, match):
    with pytest.raises(InputError, match=match):
        ElasticJoints(load_model(robot))


@pytest.mark.parametrize("config, error, match", [
    (ElasticJointsConfig(stiffness=(0.0,)), InputError, "stiffness"),
    (ElasticJointsConfig(stiffness=(-5.0,)), InputError, "stiffness"),
    (ElasticJointsConfig(stiffness=(1.0, 2.0)), DimensionError, "expected 1 value"),
    (ElasticJointsConfig(damping=(-0.1,)), InputError, "damping"),
    (ElasticJointsConfig(joints=("alpha1",)), InputError, "actuated"),
    (ElasticJointsConfig(joints=("nope",)), FrameNotFound, "valid joints"),
])
def test_bad_configuration(config, error, match):
    with pytest.raises(error, match=match):
        ElasticJoints(load_model("passive_arm"), config)


def test_springless_passive_joint_is_not_elastic():
    with pytest.raises(InputError, match="stiffness"):
        ElasticJoints(load_model("two_wheeled_cart"),
                      ElasticJointsConfig(joints=("chassis_theta",)))


def test_bad_arguments(elastic):
    ej = elastic["passive_arm"]
    q, v, tau = np.zeros(4), np.zeros(4), np.zeros(4)
    with pytest.raises(DimensionError, match=r"q: expected shape \(4,\)"):
        ej.forward_dynamics(np.zeros(3), v, tau)
    with pytest.raises(DimensionError, match="tau"):
        ej.forward_dynamics(q, v, np.zeros((4, 1)))
    with pytest.raises(DimensionError, match="a_rigid"):
        ej.motion_dynamics(q, v, np.zeros(4))
    with pytest.raises(InputError, match="exactly one"):
        ej.reduced_equation(q, v, tau=tau, a_rigid=np.zeros(3))
    with pytest.raises(InputError, match="h"):
        ej.step(q, v, 0.0, tau=tau)
    with pytest.raises(InputError, match="at most one"):
        ej.simulate(0.1, 0.01, tau=tau, motion=smooth_motion)
    with pytest.raises(DimensionError, match="q_r"):
        ej.simulate(0.1, 0.01, motion=lambda t: (np.zeros(2), np.zeros(3), np.zeros(3)))
    with pytest.raises(DimensionError, match="square"):
        expm_step(np.ones((2, 3)), [0.0], [1.0], [0.0], [0.0], [0.0], 0.1)
    with pytest.raises(DimensionError, match="stiffness"):
        expm_step(np.eye(2), [0.0, 0.0], [1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], 0.1)


def test_step_schemes_agree_to_second_order(elastic, rng):
    """One step of the two schemes from the same state differ by O(h^2) (local error of the
    first-order scheme), checked by halving h."""
    ej = elastic["passive_arm"]
    q, v, _ = random_state(ej.model, rng, scale=0.5)
    tau = ej.model.B @ rng.normal(size=ej.model.nu)
    diffs = []
    for h in (4e-3, 2e-3, 1e-3):
        q1, v1 = ej.step(q, v, h, tau=tau)
        q2, v2 = ej.step(q, v, h, tau=tau, scheme="midpoint")
        diffs.append(np.abs(v1 - v2).max())
    ratios = np.array(diffs[:-1]) / np.array(diffs[1:])
    # velocity difference ~ h^2: ratio 4 per halving; accept 3.5..4.5
    assert np.all((ratios > 3.5) & (ratios < 4.5)), (diffs, ratios)
    with pytest.raises(InputError, match="scheme"):
        ej.step(q, v, 1e-3, tau=tau, scheme="rk4")
