"""Control laws and reference interpolation (library only, no ROS)."""

import numpy as np
import pytest

from multibody_control.controllers import (
    ComputedTorqueConfig,
    ComputedTorqueController,
    PDConfig,
    PDController,
    Reference,
    TrajectoryInterpolator,
    inputs_from_generalized,
    make_controller,
)
from multibody_control.trajectories import rest_to_rest
from multibody_dynamics.errors import DimensionError, InputError, ModelError
from multibody_dynamics.rigid import RigidDynamics
from multibody_dynamics.simulate import Simulator, SimulatorConfig

Q0 = np.array([0.2, 0.4, -0.3, -0.6, 0.2, 0.5, 0.0])
Q1 = Q0 + 0.3 * np.array([1, -1, 1, -1, 1, -1, 1])
W = 10.0  # rad/s, closed-loop natural frequency


def run(model, controller, q0, reference, duration, dt=1e-3):
    """Closed loop with the Simulator (ZOH); returns t (N,), q (N, nq) after each step."""
    sim = Simulator(model, SimulatorConfig(dt=dt))
    sim.reset(q0)
    ts, qs = [], []
    for _ in range(int(round(duration / dt))):
        u = controller.step(sim.t, sim.q, sim.v, reference(sim.t))
        sim.step(controller.tau(u))
        ts.append(sim.t)
        qs.append(sim.q.copy())
    return np.array(ts), np.array(qs)


def test_computed_torque_error_follows_pd_error_dynamics(models):
    """From an initial error e0 at rest, e(t) = e0 (1 + w t) exp(-w t) (critical damping).

    With an exact model, computed torque leaves e'' + kd e' + kp e = 0 (Siciliano
    et al. 2009 eq. 8.57) whatever the motion; here along a rest-to-rest motion.
    """
    model = models["arm7"]
    wp = rest_to_rest(np.arange(0.0, 2.01, 0.1), Q0, Q1, 0.2, 1.7)
    interp = TrajectoryInterpolator(wp.t, wp.q, wp.v, wp.a)

    def reference(t):
        return Reference(*interp.sample(t)[:3])

    e0 = 0.05 * np.array([1, -1, 1, 1, -1, 1, -1])
    ctl = ComputedTorqueController(model, ComputedTorqueConfig(kp=W**2, kd=2 * W))
    t, q = run(model, ctl, Q0 - e0, reference, 2.0)
    err = np.array([interp.sample(tk)[0] for tk in t]) - q
    predicted = np.outer((1 + W * t) * np.exp(-W * t), e0)
    # zero-order hold over dt = 1 ms perturbs the continuous error dynamics by O(dt):
    # measured 1.7e-4 rad, i.e. 0.35 % of |e0|; 1 % of |e0| allowed
    np.testing.assert_allclose(err, predicted, atol=0.01 * np.max(np.abs(e0)))
    assert np.max(np.abs(err[-1])) < 1e-4  # converged onto the motion (e0 e^-20 * 21 ~ 2e-9)


def scaled_gains(model, q):
    """kp = w^2 M_ii, kd = 2 w M_ii: per-joint gains for similar bandwidth on light and heavy
    joints."""
    m = np.diag(RigidDynamics(model).mass_matrix(q))
    return tuple(W**2 * m), tuple(2 * W * m)


def test_pd_with_gravity_feedforward_reaches_setpoint(models):
    model = models["arm7"]
    kp, kd = scaled_gains(model, Q1)
    g = RigidDynamics(model).gravity_forces(Q1)
    ref = Reference(Q1, np.zeros(7), np.zeros(7), u_ff=g)
    _, q = run(model, PDController(model, PDConfig(kp, kd)), Q0, lambda t: ref, 3.0)
    # exponential convergence, slowest mode ~ exp(-5 t): 3 s leaves ~1e-6 of the 0.3 rad step
    np.testing.assert_allclose(q[-1], Q1, atol=1e-5)


def test_pid_removes_the_offset_of_pd_without_feedforward(models):
    model = models["arm7"]
    kp, kd = scaled_gains(model, Q1)
    ref = Reference.hold(model, Q1)
    _, q_pd = run(model, PDController(model, PDConfig(kp, kd)), Q0, lambda t: ref, 3.0)
    ki = tuple(3 * np.array(kp))
    _, q_pid = run(model, PDController(model, PDConfig(kp, kd, ki)), Q0, lambda t: ref, 6.0)
    offset_pd = np.max(np.abs(q_pd[-1] - Q1))
    offset_pid = np.max(np.abs(q_pid[-1] - Q1))
    assert offset_pd > 0.05          # gravity / kp: a large steady-state error
    assert offset_pid < 1e-3 * offset_pd * 10  # the integral removes it (measured 2.3e-4 rad)


def test_pid_anti_windup(models):
    """Saturated output: the integrator does not wind further, and |ki I| <= integral_limit."""
    model = models["arm7"]
    ctl = PDController(model, PDConfig(kp=1.0, kd=1.0, ki=10.0, integral_limit=2.0,
                                       effort_limit=0.5))
    ref = Reference.hold(model, Q1)
    q, v = Q0.copy(), np.zeros(7)
    outputs = [ctl.step(0.01 * k, q, v, ref) for k in range(200)]
    assert np.all(np.abs(outputs) <= 0.5 + 1e-12)
    # e = 0.3 rad: kp e = 0.3 < 0.5, so the integral grows until the output saturates, then stops
    assert np.all(np.abs(ctl.ki * ctl.integral) <= 2.0 + 1e-12)
    frozen = ctl.integral.copy()
    ctl.step(2.0, q, v, ref)
    np.testing.assert_array_equal(ctl.integral, frozen)
    ctl.reset()
    np.testing.assert_array_equal(ctl.integral, 0.0)


def test_gain_validation(models):
    arm, passive = models["arm7"], models["passive_arm"]
    with pytest.raises(InputError, match="kp: expected values > 0"):
        PDConfig(kp=-1.0)
    with pytest.raises(InputError, match="ki: expected values >= 0"):
        PDConfig(ki=[1.0, -2.0])
    with pytest.raises(InputError, match="kd"):
        ComputedTorqueConfig(kd=float("nan"))
    with pytest.raises(DimensionError, match="expected a scalar or 7 values"):
        PDController(arm, PDConfig(kp=(1.0, 2.0)))
    with pytest.raises(DimensionError, match="expected a scalar or 3 values"):
        PDController(passive, PDConfig(kd=(1.0, 2.0, 3.0, 4.0)))
    with pytest.raises(ModelError, match="fully actuated.*beta"):
        ComputedTorqueController(passive)
    with pytest.raises(ValueError, match="law: expected one of"):
        make_controller("lqr", arm, 1.0, 1.0)
    with pytest.raises(InputError, match="expected a PDConfig"):
        PDController(arm, ComputedTorqueConfig())


def test_pd_on_underactuated_model_uses_actuated_errors(models):
    """PD acts on B^T e: errors of the passive joint produce no input."""
    model = models["passive_arm"]
    ctl = PDController(model, PDConfig(kp=10.0, kd=1.0))
    q = model.q_rest.copy()
    ref_q = q.copy()
    ref_q[model.joint_index("beta")] += 0.5
    u = ctl.step(0.0, q, np.zeros(model.nv), Reference.hold(model, ref_q))
    np.testing.assert_array_equal(u, np.zeros(model.nu))
    assert u.shape == (model.nu,)


def test_inputs_from_generalized(models):
    model = models["passive_arm"]
    tau = np.zeros(model.nv)
    tau[model.passive] = 1.0
    with pytest.raises(InputError, match="not producible.*beta"):
        inputs_from_generalized(model, tau)
    tau = np.arange(model.nv, dtype=float) * ~model.passive
    np.testing.assert_allclose(model.B @ inputs_from_generalized(model, tau), tau)


class TestInterpolator:
    t = np.array([0.0, 0.3, 0.7, 1.0])

    def test_quintic_reproduces_rest_to_rest_exactly(self):
        wp = rest_to_rest(self.t, [0.0, 1.0], [1.0, -1.0], 0.0, 1.0)
        interp = TrajectoryInterpolator(wp.t, wp.q, wp.v, wp.a)
        assert interp.kind == "quintic"
        tf = np.linspace(0.0, 1.0, 101)
        exact = rest_to_rest(tf, [0.0, 1.0], [1.0, -1.0], 0.0, 1.0)
        got = np.array([np.concatenate(interp.sample(t)[:3]) for t in tf])
        # a quintic through its own q, v, a at the knots is reproduced up to rounding
        np.testing.assert_allclose(got[:, :2], exact.q, atol=1e-12)
        np.testing.assert_allclose(got[:, 2:4], exact.v, atol=1e-11)
        np.testing.assert_allclose(got[:, 4:], exact.a, atol=1e-9)

    def test_cubic_reproduces_a_cubic(self, rng):
        c = rng.normal(size=4)
        p = np.polynomial.Polynomial(c)
        interp = TrajectoryInterpolator(self.t, p(self.t)[:, None], p.deriv()(self.t)[:, None])
        assert interp.kind == "cubic"
        for t in rng.uniform(0, 1, 20):
            q, v, a, e = interp.sample(t)
            np.testing.assert_allclose([q[0], v[0], a[0]], [p(t), p.deriv()(t), p.deriv(2)(t)],
                                       atol=1e-12)  # exact up to rounding
            assert e is None

    def test_linear_and_hold_outside(self):
        interp = TrajectoryInterpolator([1.0, 2.0], [[0.0], [2.0]], effort=[[1.0], [3.0]])
        assert interp.kind == "linear"
        q, v, a, e = interp.sample(1.25)
        np.testing.assert_allclose([q[0], v[0], a[0], e[0]], [0.5, 2.0, 0.0, 1.5])
        np.testing.assert_allclose(interp.sample(0.0)[0], [0.0])      # first point held before
        q, v, _, e = interp.sample(5.0)                                 # last point at rest after
        np.testing.assert_allclose([q[0], v[0], e[0]], [2.0, 0.0, 3.0])

    def test_validation(self):
        with pytest.raises(InputError, match="strictly increasing"):
            TrajectoryInterpolator([0.0, 1.0, 1.0], np.zeros((3, 2)))
        with pytest.raises(InputError, match="need velocities"):
            TrajectoryInterpolator([0.0, 1.0], np.zeros((2, 2)), accelerations=np.zeros((2, 2)))
        with pytest.raises(DimensionError, match="velocities"):
            TrajectoryInterpolator([0.0, 1.0], np.zeros((2, 2)), np.zeros((2, 3)))
        with pytest.raises(InputError, match="positions"):
            TrajectoryInterpolator([0.0, 1.0], [[0.0], [np.nan]])

    def test_reference_checked(self, models):
        model = models["arm7"]
        with pytest.raises(DimensionError, match=r"reference.v: expected shape \(7,\)"):
            Reference(Q0, np.zeros(6), np.zeros(7)).checked(model)
        with pytest.raises(InputError, match="reference.q"):
            Reference(np.full(7, np.nan), np.zeros(7), np.zeros(7)).checked(model)
