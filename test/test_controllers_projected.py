"""Projected inverse-dynamics control with force control and passive joints (Aghili 2005 Sect. 7).

Closed loops run on the constrained :class:`Simulator` (projection dynamics, manifold
projection after every step) with the input held over each step (ZOH).
"""

import numpy as np
import pytest

from multibody_control.controllers import (
    LAWS,
    ProjectedInverseDynamicsConfig,
    ProjectedInverseDynamicsController,
    Reference,
    make_controller,
)
from multibody_dynamics.errors import DimensionError, InputError, ModelError
from multibody_dynamics.projection import ProjectedDynamics
from multibody_dynamics.simulate import ExternalWrench, Simulator, SimulatorConfig

W = 10.0  # rad/s: closed-loop natural frequency, critical damping kp = W^2, kd = 2 W
GUESS = {"five_bar": [2.0, -1.2, 1.1, 1.2], "slider_crank": [0.5, -1.0],
         "prr_surface": [-0.5, 0.3, 0.2]}


def sine_reference(model, ind, q_guess, amp, omega, lambda_d=None):
    """theta_d = theta0 + amp sin(omega t) on the independent coordinates; the dependent
    entries of the reference are not used by the law (left at the guess)."""
    q_guess = np.asarray(q_guess, float)
    amp, omega = np.asarray(amp, float), np.asarray(omega, float)
    theta0 = q_guess[ind]

    def ref(t):
        q, v, a = q_guess.copy(), np.zeros(model.nv), np.zeros(model.nv)
        q[ind] = theta0 + amp * np.sin(omega * t)
        v[ind] = amp * omega * np.cos(omega * t)
        a[ind] = -amp * omega**2 * np.sin(omega * t)
        return Reference(q, v, a, lambda_d=lambda_d)

    return ref


def closed_loop(model, ctl, ref, e0, duration, dt, wrenches=(), measure=False):
    """Start with theta = theta_d(0) - e0 and theta' = theta_d'(0) (assembled); returns
    t (N,), theta error (N, k), measured lambda (N, m), |tau| (N,), passive residual (N,)."""
    ind = ctl.independent
    q_start = ref(0.0).q.copy()
    q_start[ind] -= e0
    q0 = ctl.assemble(q_start)
    v0 = ctl.dependent_velocity(q0, ref(0.0).v[ind])
    sim = Simulator(model, SimulatorConfig(dt=dt), wrenches=wrenches)
    sim.reset(q0, v0)
    np.testing.assert_allclose(sim.q[ind], q_start[ind], atol=1e-12)  # already assembled
    ts, errs, lams, norms, passive = [], [], [], [], []
    tau_prev = None
    for _ in range(int(round(duration / dt))):
        lam = sim.constraint_forces(tau_prev).lam if (measure and tau_prev is not None) else None
        u = ctl.step(sim.t, sim.q, sim.v, ref(sim.t), lam=lam)
        tau = ctl.tau(u)
        lams.append(sim.constraint_forces(tau).lam.copy())
        norms.append(np.linalg.norm(tau))
        passive.append(ctl.passive_residual)
        sim.step(tau)
        tau_prev = tau
        ts.append(sim.t)
        errs.append(ref(sim.t).q[ind] - sim.q[ind])
    return (np.array(ts), np.array(errs), np.array(lams), np.array(norms), np.array(passive))


@pytest.mark.parametrize("robot,amp", [pytest.param("five_bar", 0.2, marks=pytest.mark.slow),
                                      ("slider_crank", 0.3)])
def test_error_follows_the_linear_error_dynamics(models, robot, amp):
    """e'' + kd e' + kp e = 0 (Aghili 2005 eq. 47): from e(0) = e0, e'(0) = 0 with critical
    damping, e(t) = e0 (1 + W t) exp(-W t)."""
    model = models[robot]
    ctl = ProjectedInverseDynamicsController(model, ProjectedInverseDynamicsConfig(kp=W**2,
                                                                                   kd=2 * W))
    np.testing.assert_array_equal(ctl.independent, np.flatnonzero(~model.passive))  # actuated
    ref = sine_reference(model, ctl.independent, GUESS[robot], amp, 2.0)
    e0 = np.array([0.05, -0.05])[: ctl.independent.size]
    deviation = {}
    for dt in (2e-3, 1e-3):
        ctl.reset()
        t, err, _, _, passive = closed_loop(model, ctl, ref, e0, 0.8, dt)
        predicted = np.outer((1 + W * t) * np.exp(-W * t), e0)
        deviation[dt] = np.max(np.abs(err - predicted))
        # passive joints get zero torque (eqs. 59-62): round-off of an O(1e-3 N m) torque
        assert np.max(passive) < 1e-15
    # The only deviation from eq. 47 is the zero-order hold: the commanded acceleration is held
    # over dt, i.e. delayed by dt/2 on average, which perturbs e by O(W |e0| dt) (measured
    # 0.2 W |e0| dt); allowed: W |e0| dt, and first-order convergence in dt.
    bound = W * np.max(np.abs(e0)) * 1e-3
    assert deviation[1e-3] < bound, deviation
    assert 1.8 < deviation[2e-3] / deviation[1e-3] < 2.2, deviation


def test_passive_joints_get_exactly_zero_input_and_motion_is_unchanged(models, rng):
    """Eqs. 59-62: the passive correction lies in the constraint space, so the motion (and
    the acceleration from the forward dynamics) is that of tau_par (eq. 45)."""
    model = models["five_bar"]
    ctl = ProjectedInverseDynamicsController(model)
    dyn = ProjectedDynamics(model)
    q = ctl.assemble(np.array(GUESS["five_bar"]))
    v = ctl.dependent_velocity(q, rng.uniform(-1, 1, 2))
    ref = Reference(q + 0.02, v + 0.1, rng.uniform(-1, 1, model.nv))
    u = ctl.step(0.0, q, v, ref)
    tau = ctl.tau(u)
    assert np.all(tau[model.passive] == 0.0)  # exactly: B has zero rows there
    np.testing.assert_allclose(ctl.tau_generalized, tau, atol=1e-15)  # nothing was dropped
    # the plant reproduces the commanded J a + J' theta' (round-off of the projection solve)
    np.testing.assert_allclose(dyn.forward_dynamics_result(q, v, tau).a, ctl.a, atol=1e-9)
    # the same torque as ProjectedDynamics.inverse_dynamics for the same motion
    np.testing.assert_allclose(tau, dyn.inverse_dynamics_result(q, v, ctl.a).tau, atol=1e-12)


class TestForceControl:
    """prr_surface (Aghili 2010 Sect. 5): the tip slides on a surface; desired force 50 N."""

    LAMBDA_D = np.array([50.0])  # N, multiplier of the surface row (world y)

    def run(self, model, disturbance=0.0, **force):
        cfg = ProjectedInverseDynamicsConfig(kp=W**2, kd=2 * W, independent=("q2", "q3"),
                                             **force)
        ctl = ProjectedInverseDynamicsController(model, cfg)
        ref = sine_reference(model, ctl.independent, GUESS["prr_surface"], [0.2, 0.1],
                             [2.0, 3.0], self.LAMBDA_D)
        # a vertical force on the tip: A^T w, in the constraint space, moves nothing but
        # changes the contact force by -w (the kind of error force feedback must remove)
        wrenches = [ExternalWrench("tip", [0.0, disturbance, 0.0, 0.0, 0.0, 0.0])] \
            if disturbance else ()
        return closed_loop(model, ctl, ref, np.array([0.03, -0.03]), 0.8, 1e-3, wrenches,
                           measure=True)

    def test_desired_force_tracked(self, models):
        model = models["prr_surface"]
        _, err_free, lam_free, norm_free, _ = self.run(model)
        _, err_ff, lam_ff, norm_ff, _ = self.run(model, force_control=True)
        # without force control the contact force is what the motion needs (63-77 N here)
        assert np.min(np.abs(lam_free - self.LAMBDA_D)) > 10.0
        # with it, eq. 51 sets it algebraically: exact at every sample up to round-off
        np.testing.assert_allclose(lam_ff, np.broadcast_to(self.LAMBDA_D, lam_ff.shape),
                                   rtol=1e-9)
        # minimum-norm actuation is smaller (Aghili 2010: ||u|| smaller with u_o = 0)
        assert np.mean(norm_free) < np.mean(norm_ff)
        # motion and force are decoupled: the same motion error, up to the ZOH leak of the held
        # constraint-space torque into the motion (O(dt), measured 1.5e-5 rad)
        np.testing.assert_allclose(err_ff, err_free, atol=1e-4)

    def test_force_feedback_removes_a_disturbance(self, models):
        model = models["prr_surface"]
        _, err_ff, lam_ff, _, _ = self.run(model, -20.0, force_control=True)
        _, err_pi, lam_pi, _, _ = self.run(model, -20.0, force_control=True, force_kp=0.5,
                                           force_ki=50.0)
        # feedforward alone: offset by the disturbance
        np.testing.assert_allclose(lam_ff[-1], self.LAMBDA_D + 20.0, rtol=1e-9)
        # PI on the measured multiplier: the constant offset decays at ~ ki / (1 + kp) = 33/s;
        # what remains comes from the one-step measurement delay while the force needed by the
        # motion changes (measured 1.3e-3 N after 0.8 s, i.e. 1e-4 of the 20 N offset)
        assert abs(lam_pi[-1, 0] - 50.0) < 1e-2
        assert np.max(np.abs(lam_pi[-100:, 0] - 50.0)) < 5e-2  # settled over the last 0.1 s
        np.testing.assert_allclose(err_pi, err_ff, atol=1e-4)  # motion unaffected (ZOH leak)

    def test_force_control_needs_lambda_d(self, models):
        model = models["prr_surface"]
        ctl = ProjectedInverseDynamicsController(
            model, ProjectedInverseDynamicsConfig(independent=("q2", "q3"), force_control=True))
        q = ctl.assemble(np.array(GUESS["prr_surface"]))
        with pytest.raises(InputError, match="lambda_d"):
            ctl.step(0.0, q, np.zeros(3), Reference.hold(model, q))


def test_config_validation(models):
    with pytest.raises(InputError, match="kp: expected values > 0"):
        ProjectedInverseDynamicsConfig(kp=0.0)
    with pytest.raises(InputError, match="force_ki: expected values >= 0"):
        ProjectedInverseDynamicsConfig(force_ki=-1.0)
    with pytest.raises(InputError, match="independent"):
        ProjectedInverseDynamicsConfig(independent=("q2", "q2"))
    with pytest.raises(DimensionError, match="kd: expected a scalar or 2 values"):
        ProjectedInverseDynamicsController(models["five_bar"],
                                           ProjectedInverseDynamicsConfig(kd=(1.0, 2.0, 3.0)))
    with pytest.raises(DimensionError, match="force_kp: expected a scalar or 1 values"):
        ProjectedInverseDynamicsController(models["prr_surface"], ProjectedInverseDynamicsConfig(
            force_control=True, force_kp=(1.0, 2.0)))
    with pytest.raises(ModelError, match="passive joints"):
        ProjectedInverseDynamicsController(models["five_bar"],
                                           ProjectedInverseDynamicsConfig(force_control=True))
    assert "projected_inverse_dynamics" in LAWS
    ctl = make_controller("projected_inverse_dynamics", models["slider_crank"], 25.0, 10.0)
    assert isinstance(ctl, ProjectedInverseDynamicsController)


@pytest.mark.parametrize("robot,force", [("five_bar", False), ("slider_crank", False),
                                         ("prr_surface", False), ("prr_surface", True)])
def test_compiled_step_matches_numpy_path(models, rng, robot, force):
    """The compiled step (one computeAllTerms + kernel) equals the numpy path to round-off on
    random assembled states, with passive joints and with force control (PI on lambda)."""
    pytest.importorskip("numba")
    model = models[robot]
    cfg = ProjectedInverseDynamicsConfig(
        kp=W**2, kd=2 * W, independent=("q2", "q3") if robot == "prr_surface" else None,
        force_control=force, force_kp=0.5 if force else 0.0, force_ki=50.0 if force else 0.0)
    fast = ProjectedInverseDynamicsController(model, cfg)
    slow = ProjectedInverseDynamicsController(model, cfg)
    slow.use_fast_path = False
    ind = fast.independent
    assert fast._fast_ready()
    m = fast.constraints.n_rows
    for i in range(20):
        q = np.array(GUESS[robot], float)
        q[ind] += rng.uniform(-0.3, 0.3, ind.size)
        q = fast.assemble(q)
        v = fast.dependent_velocity(q, rng.uniform(-2, 2, ind.size))
        ref = Reference(q + rng.uniform(-0.05, 0.05, model.nq),
                        v + rng.uniform(-0.5, 0.5, model.nv),
                        rng.uniform(-3, 3, model.nv),
                        lambda_d=rng.uniform(-50, 50, m) if force else None)
        lam = rng.uniform(-50, 50, m) if force and i else None
        u_fast = fast.step(1e-3 * i, q, v, ref, lam=lam)
        u_slow = slow.step(1e-3 * i, q, v, ref, lam=lam)
        for x, y in ((u_fast, u_slow), (fast.tau_generalized, slow.tau_generalized),
                     (fast.a, slow.a), (fast.f_c, slow.f_c), (fast.lam, slow.lam),
                     (fast.integral, slow.integral)):
            scale = max(np.max(np.abs(y)), 1.0)
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-12 * scale)
