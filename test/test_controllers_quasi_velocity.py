"""Quasi-velocity tracking and force control (Aghili 2010 eqs. 37-47) on prr_surface (Sect. 5).

The book's example: K_p = 3 I, K_d = 5 I, lambda_d = 50 N, theta1d = 0.3 sin(0.6 pi t) + 0.5 m
(tip x) and theta2d = (pi/6) sin(pi t) + pi/12 rad (link-2 orientation ``q2 + q3 - 3 pi/2``),
mapped to the joints as in config/scenarios/run_prr_surface.yaml: ``q2 + q3 = theta2d - pi/2``,
``q2 = arccos(theta1d - cos(q2 + q3))`` (branch q2 > 0), derivatives by the chain rule.  The
controller's minimal coordinates are theta = (q2, q3) (K_p acts on their errors).  Not in the
book, chosen: gravity of the model YAML (-9.81 m/s^2 along y), initial error +0.1 rad on q2,
-0.1 rad on q3, 3 s (the reference stays in the workspace up to 7.36 s).

Closed loops run on the constrained :class:`Simulator` (RK4, manifold projection) with the
input held over each step (ZOH).
"""

import numpy as np
import pinocchio as pin
import pytest

from multibody_control.controllers import (
    LAWS,
    ProjectedInverseDynamicsConfig,
    ProjectedInverseDynamicsController,
    QuasiVelocityConfig,
    QuasiVelocityController,
    Reference,
    make_controller,
)
from multibody_control.controllers.quasi_velocity import quasi_velocity_law
from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import DimensionError, InputError, ModelError
from multibody_dynamics.simulate import Simulator, SimulatorConfig

KP, KD = 3.0, 5.0  # 1/s, Aghili 2010 Sect. 5
LAMBDA_D = np.array([50.0])  # N, multiplier of the surface row
E0 = np.array([0.1, -0.1])  # rad, initial error on (q2, q3)
IND = ("q2", "q3")


def book_reference(t, lambda_d=None):
    """Aghili's theta_d(t) mapped to (q2, q3) with velocity and acceleration; q1 unused."""
    w1, w2 = 0.6 * np.pi, np.pi
    x, xd, xdd = 0.3 * np.sin(w1 * t) + 0.5, 0.3 * w1 * np.cos(w1 * t), \
        -0.3 * w1**2 * np.sin(w1 * t)
    a2 = np.pi / 6
    ph = a2 * np.sin(w2 * t) + np.pi / 12 - np.pi / 2  # q2 + q3
    phd, phdd = a2 * w2 * np.cos(w2 * t), -a2 * w2**2 * np.sin(w2 * t)
    c = x - np.cos(ph)  # cos q2
    cd = xd + np.sin(ph) * phd
    cdd = xdd + np.cos(ph) * phd**2 + np.sin(ph) * phdd
    q2 = np.arccos(c)
    q2d = -cd / np.sin(q2)
    q2dd = -(cdd + np.cos(q2) * q2d**2) / np.sin(q2)
    return Reference(np.array([0.0, q2, ph - q2]), np.array([0.0, q2d, phd - q2d]),
                     np.array([0.0, q2dd, phdd - q2dd]), lambda_d=lambda_d)


def closed_loop(model, force_control, eps0_zero, duration, dt):
    """Closed loop from theta = theta_d(0) + E0; theta'(0) = theta_d'(0) - K_p E0 makes
    eps(0) = 0, theta'(0) = theta_d'(0) does not.  Returns t, theta~ (N, 2), ||eps|| (N,),
    plant lambda (N, 1), commanded lambda (N, 1), ||u|| = sqrt(||u_r||^2 + ||u_o||^2) (N,)."""
    ctl = QuasiVelocityController(model, QuasiVelocityConfig(
        kp=KP, kd=KD, independent=IND, force_control=force_control))
    helper = ProjectedInverseDynamicsController(  # assembly of consistent initial states
        model, ProjectedInverseDynamicsConfig(independent=IND))
    ind = ctl.independent
    r0 = book_reference(0.0)
    q_start = r0.q.copy()
    q_start[ind] += E0
    q0 = helper.assemble(q_start)
    v0 = helper.dependent_velocity(q0, r0.v[ind] - (KP * E0 if eps0_zero else 0.0))
    sim = Simulator(model, SimulatorConfig(dt=dt))
    sim.reset(q0, v0)
    out = {k: [] for k in ("t", "err", "eps", "lam", "lam_cmd", "u")}
    for _ in range(int(round(duration / dt))):
        ref = book_reference(sim.t, LAMBDA_D)
        tau = ctl.tau(ctl.step(sim.t, sim.q, sim.v, ref))
        out["t"].append(sim.t)
        out["err"].append(ctl.theta_err.copy())
        out["eps"].append(np.linalg.norm(ctl.eps))
        out["lam"].append(sim.constraint_forces(tau).lam.copy())
        out["lam_cmd"].append(ctl.lam.copy())
        out["u"].append(np.hypot(np.linalg.norm(ctl.u_r), np.linalg.norm(ctl.u_o)))
        sim.step(tau)
    return {k: np.array(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def runs(models):
    """The book's example from eps(0) = 0, with u_o = 0 and with force control (eq. 47)."""
    model = models["prr_surface"]
    return {force: closed_loop(model, force, True, 3.0, 2e-3) for force in (False, True)}


@pytest.mark.slow
def test_eps_decays_at_rate_kd_and_tracking_converges(models):
    """Exact closed loop: eps' = -(Gamma_r + K_d) eps with Gamma_r skew, so for K_d = 5 I
    ||eps(t)|| = ||eps0|| e^{-5 t}; then theta~ -> 0."""
    model = models["prr_surface"]
    dev = {}
    for dt in (2e-3, 1e-3):
        r = closed_loop(model, False, False, 1.5, dt)
        assert r["eps"][0] > 0.5  # eps0 = B^-1 K_p E0 (measured 0.77 sqrt(J))
        dev[dt] = np.max(np.abs(r["eps"] - r["eps"][0] * np.exp(-KD * r["t"])))
    # the only deviation is the zero-order hold of the input: with the book's low gain K_d the
    # held u_r leaves eps ~ u_r' dt / (2 K_d) (measured 1.5e-2 and 6.5e-3 sqrt(J), i.e. 2 %
    # and 0.8 % of eps0 at 2 and 1 ms): first order in dt (measured ratio 2.25)
    assert dev[1e-3] < 0.015 * r["eps"][0], dev
    assert 1.8 < dev[2e-3] / dev[1e-3] < 2.6, dev


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.slow
def test_theta_error_is_exponential_from_eps0_zero(runs, force):
    """From eps(0) = 0: theta~ = E0 e^{-K_p t} (eq. 37 with eps = 0), with or without u_o."""
    r = runs[force]
    predicted = np.outer(np.exp(-KP * r["t"]), E0)
    # ZOH: eps stays O(dt), theta~ ~ B eps / K_p (measured |theta~ - predicted| 1.9e-3 rad
    # without and 1.7e-3 with force control at 2 ms, half that at 1 ms)
    np.testing.assert_allclose(r["err"], predicted, atol=4e-3)
    # converged: the last second is within that ZOH band (measured 2.0e-3 and 1.5e-3 rad),
    # 50x below E0 = 0.1 rad
    assert np.max(np.abs(r["err"][-500:])) < 4e-3


@pytest.mark.slow
def test_force_control_sets_lambda_and_u_o_zero_minimizes_u(runs):
    free, ff = runs[False], runs[True]
    # (47) sets the multiplier algebraically: the plant's lambda is 50 N at every sample,
    # up to the round-off of two different constrained-dynamics solutions
    np.testing.assert_allclose(ff["lam"][:, 0], 50.0, rtol=1e-9)
    # the command's own multiplier (33) agrees with the plant (exact model)
    np.testing.assert_allclose(free["lam_cmd"], free["lam"], atol=1e-9)
    # with u_o = 0 the contact force is what the motion needs (measured -13..14 N here)
    assert np.min(np.abs(free["lam"][:, 0] - 50.0)) > 20.0
    # ||u||^2 = ||u_r||^2 + ||u_o||^2: u_o = 0 is the least actuation for the motion
    # (measured mean 8.5 against 26.3 sqrt(J)/s, smaller at every sample)
    assert np.all(free["u"] < ff["u"])
    assert np.mean(free["u"]) < 0.5 * np.mean(ff["u"])
    # motion and force are decoupled: the same motion error up to the ZOH leak of the held
    # constraint-space force into the moving null space (measured 1.8e-3 rad at 2 ms,
    # 0.9e-3 at 1 ms)
    np.testing.assert_allclose(ff["err"], free["err"], atol=4e-3)


@pytest.mark.parametrize("independent", [("q2", "q3"), ("q1", "q2")])
def test_gauge_invariance_under_a_unit_change_of_the_prismatic_joint(models, rng,
                                                                     independent):
    """Sect. 4.3: q1 in mm instead of m (q = T q~, T = diag(1e-3, 1, 1)): M~ = T M T,
    C~ = T C T, A~ = A T, v~ = T^-1 v; the law gives the same u_r, u_o, lambda and
    f~ = T f, with the same gains (no weighting matrix)."""
    model = models["prr_surface"]
    helper = ProjectedInverseDynamicsController(
        model, ProjectedInverseDynamicsConfig(independent=IND))
    q = helper.assemble(np.array([-0.5, 1.0, -2.0]) + 0.1 * rng.uniform(-1, 1, 3))
    v = helper.dependent_velocity(q, rng.uniform(-1, 1, 2))
    pm, data = model.pin_model, model.pin_model.createData()
    M = pin.crba(pm, data, q).copy()
    C = pin.computeCoriolisMatrix(pm, data, q, v).copy()
    cons = Constraints(model)
    A = cons.jacobian(q)
    h = 1e-6
    A_dot = (cons.jacobian(q + h * v) - cons.jacobian(q - h * v)) / (2 * h)
    ind = [model.joint_index(n) for n in independent]
    J = np.eye(3)[ind]
    err, thd, thdd = rng.uniform(-0.1, 0.1, 2), rng.uniform(-1, 1, 2), rng.uniform(-1, 1, 2)
    kp, kd = np.array([3.0, 4.0]), np.array([5.0, 6.0])
    T = np.diag([1e-3, 1.0, 1.0])
    Ti = np.linalg.inv(T)
    Tth = T[np.ix_(ind, ind)]
    Tthi = np.linalg.inv(Tth)
    for lam_d in (None, LAMBDA_D):
        a = quasi_velocity_law(M, C, v, A, A_dot, J, err, thd, thdd, kp, kd, lam_d)
        b = quasi_velocity_law(T @ M @ T, T @ C @ T, Ti @ v, A @ T, A_dot @ T, J, Tthi @ err,
                               Tthi @ thd, Tthi @ thdd, kp, kd, lam_d)
        # the SVD basis may differ by a rotation: compare basis-free quantities
        np.testing.assert_allclose(b.f, T @ a.f, rtol=1e-9, atol=1e-9)  # condition ~1e6
        np.testing.assert_allclose(b.lam, a.lam, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(np.linalg.norm(b.eps), np.linalg.norm(a.eps), rtol=1e-9)
        np.testing.assert_allclose(np.linalg.norm(b.u_r), np.linalg.norm(a.u_r), rtol=1e-9)
        np.testing.assert_allclose(np.abs(b.u_o), np.abs(a.u_o), rtol=1e-9, atol=1e-12)
        if lam_d is not None:
            np.testing.assert_allclose(a.lam, lam_d, rtol=1e-12)  # eq. 47 sets it exactly


def test_config_and_model_errors(models):
    with pytest.raises(InputError, match="kp: expected values > 0"):
        QuasiVelocityConfig(kp=0.0)
    with pytest.raises(InputError, match="kd: expected values > 0"):
        QuasiVelocityConfig(kd=(1.0, -1.0))
    with pytest.raises(InputError, match="independent"):
        QuasiVelocityConfig(independent=("q2", "q2"))
    with pytest.raises(InputError, match="force_control"):
        QuasiVelocityConfig(force_control="yes")
    with pytest.raises(DimensionError, match="kd: expected a scalar or 2 values"):
        QuasiVelocityController(models["prr_surface"], QuasiVelocityConfig(kd=(1.0, 2.0, 3.0)))
    with pytest.raises(ModelError, match="passive joints"):
        QuasiVelocityController(models["five_bar"])
    with pytest.raises(ModelError, match="force control needs constraints"):
        QuasiVelocityController(models["arm7"], QuasiVelocityConfig(force_control=True))
    model = models["prr_surface"]
    ctl = QuasiVelocityController(model, QuasiVelocityConfig(force_control=True))
    q = ProjectedInverseDynamicsController(model, ProjectedInverseDynamicsConfig(
        independent=IND)).assemble(np.array([-0.5, 1.0, -2.0]))
    with pytest.raises(InputError, match="lambda_d"):
        ctl.step(0.0, q, np.zeros(3), Reference.hold(model, q))
    assert "quasi_velocity" in LAWS
    ctl = make_controller("quasi_velocity", model, 3.0, 5.0, independent=["q2", "q3"])
    assert isinstance(ctl, QuasiVelocityController)
    u = ctl.step(0.0, q, np.zeros(3), Reference.hold(model, q))
    assert u.shape == (3,) and np.all(np.isfinite(u))


def test_default_partition_and_open_chain(models):
    """Without ``independent``: pivoted QR of A at the first step (prr: q1 dependent); an
    open chain is the unconstrained law (theta = q, B = W^-T)."""
    model = models["prr_surface"]
    q = ProjectedInverseDynamicsController(model, ProjectedInverseDynamicsConfig(
        independent=IND)).assemble(np.array([-0.5, 1.0, -2.0]))
    ctl = QuasiVelocityController(model)
    ctl.step(0.0, q, np.zeros(3), Reference.hold(model, q))
    assert ctl.independent.size == 2
    arm = models["arm7"]
    ctl = QuasiVelocityController(arm, QuasiVelocityConfig(kp=2.0, kd=4.0))
    q = arm.neutral()
    u = ctl.step(0.0, q, np.zeros(arm.nv), Reference.hold(arm, q))
    # at rest on the reference: u is gravity compensation (u_r = 0)
    np.testing.assert_allclose(ctl.u_r, 0.0, atol=1e-12)
    np.testing.assert_allclose(ctl.tau(u), pin.computeGeneralizedGravity(
        arm.pin_model, arm.pin_model.createData(), q), atol=1e-10)
