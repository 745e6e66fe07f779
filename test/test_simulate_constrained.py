"""Constrained simulation: projected dynamics (Aghili 2005) with manifold projection.

Oracles: energy conservation of unactuated, undamped mechanisms; the energy balance
E(T) - E(0) = int (v . tau - v . D v) dt otherwise; conservation of the momentum of a
free-floating system under internal forces only; the closed-form surface reaction of the
PRR arm at rest; pinocchio's aba for the unchanged open-chain path.
"""

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from scipy.integrate import cumulative_simpson

from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import SolverError
from multibody_dynamics.projection import ProjectedDynamics
from multibody_dynamics.rolling import (
    TWO_WHEELED_CART_RADIUS,
    model_constraints,
    pfaffian_residual,
)
from multibody_dynamics.simulate import ExternalWrench, Simulator, SimulatorConfig, simulate

ROOT = Path(__file__).resolve().parents[1]
GUESS = {"four_bar": [0.5, 0.3, 1.5], "five_bar": [2.0, -1.2, 1.1, 1.2],
         "prr_surface": [-0.5, 0.3, 0.2]}


def assembled_q(model, guess):
    res = ProjectedDynamics(model).project_position(np.asarray(guess, float))
    assert res.success, res.message
    return res.q


def energy_balance_error(res, model):
    """max |E(t) - E(0) - W_in(t) + int_0^t v . D v dt| [J].

    The input is held over each output interval (a ramp too, when every step is an output
    sample), so its work is exactly sum tau_k . (q_{k+1} - q_k) (nq = nv here); the damper's
    dissipation by Simpson's rule.
    """
    work = np.concatenate([[0.0],
                           np.cumsum(np.einsum("ij,ij->i", res.tau[:-1], np.diff(res.q, axis=0)))])
    dissipated = cumulative_simpson(np.einsum("ij,j,ij->i", res.v, model.damping, res.v), x=res.t,
                                    initial=0.0)
    return float(np.max(np.abs(res.energy - res.energy[0] - work + dissipated)))


# ------------------------------------------------------------------ open chain unchanged
def test_open_chain_is_plain_rk4_with_aba(models, rng):
    """The open-chain reference path is still RK4 around pinocchio's aba, bit for bit (the
    compiled step, an implementation of its own, is checked against this path in
    test_fast_step.py)."""
    model = models["arm7"]
    pm, data = model.pin_model, model.create_data()
    q, v = pin.randomConfiguration(pm), rng.normal(size=model.nv)
    tau = rng.normal(size=model.nv)
    sim = Simulator(model, SimulatorConfig(dt=1e-3, compiled=False))
    assert not sim.constrained
    sim.reset(q, v)
    h = 1e-3
    for _ in range(5):
        a1 = pin.aba(pm, data, q, v, tau)
        q2, v2 = pin.integrate(pm, q, 0.5 * h * v), v + 0.5 * h * a1
        a2 = pin.aba(pm, data, q2, v2, tau)
        q3, v3 = pin.integrate(pm, q, 0.5 * h * v2), v + 0.5 * h * a2
        a3 = pin.aba(pm, data, q3, v3, tau)
        q4, v4 = pin.integrate(pm, q, h * v3), v + h * a3
        a4 = pin.aba(pm, data, q4, v4, tau)
        q = pin.integrate(pm, q, h / 6 * (v + 2 * v2 + 2 * v3 + v4))
        v = v + h / 6 * (a1 + 2 * a2 + 2 * a3 + a4)
        sim.step(tau)
    # same operations in the same order: equal to round-off
    np.testing.assert_allclose(sim.q, q, rtol=0, atol=1e-14)
    np.testing.assert_allclose(sim.v, v, rtol=0, atol=1e-12)
    res = simulate(model, 0.01, q0=q, tau=tau)
    assert res.success and res.lam.shape == (res.t.size, 0) and res.max_residual == 0.0


# ------------------------------------------------------------------ slider-crank singularities
def test_slider_crank_through_singularities():
    """Unactuated, horizontal, undamped: the crank passes q1 = pi/2 and 3pi/2 (A = 0 there)."""
    from multibody_dynamics.model import load_model

    model = load_model("slider_crank")
    res = simulate(model, 1.5, q0=[0.0, 0.0], v0=[6.0, -12.0], config=SimulatorConfig(dt=1e-3))
    assert res.success, res.message
    q1 = res.q[:, 0]
    assert q1.max() > 1.5 * np.pi  # both singular configurations crossed
    # the crank is carried through, not reflected: it keeps turning the same way
    assert np.all(np.diff(q1) > 0)
    # projection tolerance 1e-12 after every step; the task's bound is 1e-9 m
    assert res.max_residual < 1e-9
    # RK4 at 1 ms with the mass-metric velocity projection: measured 2e-10 over 1.5 s (the
    # Euclidean P v gives 8e-7 here, 1.4e-5 at 0.5 ms); the task's bound 1e-6
    assert res.energy_drift < 1e-6, res.energy_drift
    assert res.lam.shape == (res.t.size, 1) and res.lam_labels == ("slider.n",)


# ------------------------------------------------------------------ four-bar and five-bar
@pytest.mark.parametrize("name,v0", [("four_bar", [3.0, 0.0, 0.0]),
                                     ("five_bar", [2.0, 0.0, -1.0, 0.0])])
def test_unactuated_closed_loop_conserves_energy(models, name, v0):
    model = models[name]
    res = simulate(model, 0.6, q0=assembled_q(model, GUESS[name]), v0=v0,
                   config=SimulatorConfig(dt=1e-3))
    assert res.success, res.message
    # Newton stops below 1e-12; the redundant revolute closure converges to the same level
    assert res.max_residual < 1e-11
    assert res.max_velocity_residual < 1e-12  # v is projected onto null(A) after every step
    # RK4 at 1 ms: measured 3e-9 (four_bar under gravity) and 1e-14 (five_bar); bound 1e-7
    assert res.energy_drift < 1e-7, res.energy_drift


@pytest.mark.parametrize("name", ["four_bar", "five_bar"])
def test_actuated_closed_loop_energy_balance(models, name, rng):
    model = models[name]
    tau = model.B @ rng.uniform(-0.2, 0.2, model.nu)
    res = simulate(model, 0.5, q0=assembled_q(model, GUESS[name]), tau=tau,
                   config=SimulatorConfig(dt=5e-4))
    assert res.success, res.message
    assert res.max_residual < 1e-11
    scale = float(np.max(np.abs(res.energy - res.energy[0]))) + 1e-3
    # constraint forces do no work: the actuators' work is all the energy change; Simpson and
    # RK4 errors at 0.5 ms are far below 1e-6 of the change
    assert energy_balance_error(res, model) < 1e-6 * scale


def test_adaptive_matches_fixed_step(models):
    model = models["four_bar"]
    q0 = assembled_q(model, GUESS["four_bar"])
    fixed = simulate(model, 0.3, q0=q0, v0=[3.0, 0, 0], config=SimulatorConfig(dt=2.5e-4),
                     output_dt=0.01)
    adaptive = simulate(model, 0.3, q0=q0, v0=[3.0, 0, 0],
                        config=SimulatorConfig(rtol=1e-10, atol=1e-12), output_dt=0.01)
    assert adaptive.success, adaptive.message
    assert adaptive.mode == "adaptive" and adaptive.nrejected is not None
    assert adaptive.t.size == fixed.t.size == 31
    # two converged integrators: RK4 at 0.25 ms has about 1e-10 rad error here
    np.testing.assert_allclose(adaptive.q, fixed.q, atol=1e-8)
    assert adaptive.max_residual < 1e-11 and adaptive.energy_drift < 1e-8


# ------------------------------------------------------------------ contact force (prr_surface)
def rest_torques(model, q, force):
    """Torques that hold the PRR arm at rest with base force ``force`` [N]: the surface takes
    the rest of the weight, lam = m_total g - force (closed form, first row of A is 1)."""
    c = Constraints(model)
    A = c.jacobian(q)[0]
    g = pin.computeGeneralizedGravity(model.pin_model, model.create_data(), q)
    lam = (g[0] - force) / A[0]
    return g - A * lam, lam


def test_prr_surface_reaction_at_rest(models):
    model = models["prr_surface"]
    q = assembled_q(model, GUESS["prr_surface"])
    tau, lam = rest_torques(model, q, 100.0)
    # 15 kg on a vertical prismatic joint: the surface carries 147.15 N - 100 N
    np.testing.assert_allclose(lam, 15 * 9.81 - 100.0, rtol=1e-12)
    res = simulate(model, 0.5, q0=q, tau=tau, config=SimulatorConfig(dt=1e-3), output_dt=0.05)
    assert res.success, res.message
    np.testing.assert_allclose(res.q, np.tile(q, (res.t.size, 1)), atol=1e-12)  # stays at rest
    # the multiplier history equals the closed form to round-off of M_c's solve
    np.testing.assert_allclose(res.lam[:, 0], lam, rtol=1e-9)


def test_prr_surface_external_wrench_adds_to_reaction(models):
    model = models["prr_surface"]
    q = assembled_q(model, GUESS["prr_surface"])
    tau, lam = rest_torques(model, q, 100.0)
    push = ExternalWrench("tip", [0.0, -30.0, 0.0, 0.0, 0.0, 0.0])  # 30 N down on the tip
    res = simulate(model, 0.2, q0=q, tau=tau, wrenches=[push], output_dt=0.05)
    assert res.success, res.message
    np.testing.assert_allclose(res.q[-1], q, atol=1e-12)  # the surface takes the push
    np.testing.assert_allclose(res.lam[:, 0], lam + 30.0, rtol=1e-9)


# ------------------------------------------------------------------ dual arm with a common load
def dual_arm_ramp(model, peak=(0.3, -0.2), t_ramp=5.0):
    def tau(t, q, v):
        u = np.asarray(peak) * (t / t_ramp) if t < t_ramp else np.zeros(2)
        return model.B @ u
    return tau


def momentum(model, q, v):
    """Planar momentum (p_x, p_y, L_z about the world origin) of the whole system."""
    data = model.create_data()
    h = pin.computeCentroidalMomentum(model.pin_model, data, q, v)
    com = data.com[0]
    return np.array([h.linear[0], h.linear[1], h.angular[2]
                     + com[0] * h.linear[1] - com[1] * h.linear[0]])


def test_dual_arm_load(models):
    """Yesiloglu App. A: ramp torques, elastic and free joints, floating base, no gravity."""
    model = models["dual_arm_load"]
    v0 = np.zeros(model.nv)
    res = simulate(model, 2.0, v0=v0, tau=dual_arm_ramp(model), config=SimulatorConfig(dt=2e-3))
    assert res.success, res.message
    assert res.lam_labels == ("grasp.t1", "grasp.t2", "grasp.rn")
    assert res.max_residual < 1e-11  # Newton tolerance 1e-12 after every step
    # internal forces only (motors, springs, dampers, grasp): momentum stays zero; RK4 and the
    # projections keep it to round-off of the momenta (~1e-3 kg m/s here)
    P = np.array([momentum(model, q, v) for q, v in zip(res.q, res.v)])
    assert np.max(np.abs(P)) < 1e-10, np.max(np.abs(P))
    assert np.max(np.abs(res.v)) > 1e-3  # it did move
    scale = float(np.max(np.abs(res.energy))) + 1e-6
    # bound 1e-6 of the energy scale; Simpson on the damper and RK4 at 2 ms are far below
    assert energy_balance_error(res, model) < 1e-6 * scale


# ------------------------------------------------------------------ rolling without slipping
def test_two_wheeled_cart_no_slip(models):
    model = models["two_wheeled_cart"]
    c = model_constraints(model)
    assert c.labels == ("left.longitudinal", "right.longitudinal", "axle.lateral")
    tau = model.B @ np.array([0.3, -0.1])
    res = simulate(model, 2.0, v0=[0.5, 0.0, 0.0, 5.0, 5.0], tau=tau, constraints=c,
                   config=SimulatorConfig(dt=1e-3), output_dt=0.01)
    assert res.success, res.message
    rows = np.array([pfaffian_residual(c, q, v) for q, v in zip(res.q, res.v)])
    # velocity projection after every step: each no-slip row at round-off (m/s)
    assert np.max(np.abs(rows)) < 1e-12, np.max(np.abs(rows), axis=0)
    assert abs(res.q[-1, 2]) > 0.5  # it turned
    scale = float(np.max(np.abs(res.energy - res.energy[0]))) + 1e-3
    # rolling constraint forces do no work
    assert energy_balance_error(res, model) < 1e-6 * scale


def test_cart_wheel_radius_matches_urdf():
    root = ET.parse(ROOT / "urdf" / "two_wheeled_cart.urdf").getroot()
    radii = {float(c.get("radius")) for c in root.iter("cylinder")}
    assert radii == {TWO_WHEELED_CART_RADIUS}


# ------------------------------------------------------------------ failures are reported
def test_divergence_is_reported_and_samples_kept(models):
    model = models["four_bar"]
    cfg = SimulatorConfig(dt=1e-3, max_speed=4.0)
    res = simulate(model, 1.0, q0=assembled_q(model, GUESS["four_bar"]),
                   tau=[2.0, 0, 0], config=cfg)
    assert not res.success and "max_speed" in res.message
    assert 1 < res.t.size < 1001 and np.all(np.isfinite(res.q))


def test_initial_projection_failure_is_reported(models):
    model = models["four_bar"]
    cfg = SimulatorConfig(max_newton_iter=1)
    res = simulate(model, 0.1, q0=[0.5, 2.0, -1.0], config=cfg)
    assert not res.success and "initial state" in res.message
    assert res.t.size == 1
    with pytest.raises(SolverError, match="initial state"):
        Simulator(model, cfg).reset([0.5, 2.0, -1.0])


def test_nan_input_is_reported(models):
    model = models["slider_crank"]
    res = simulate(model, 0.1, tau=lambda t, q, v: np.full(2, np.nan if t > 0.05 else 0.0))
    assert not res.success and "NaN" in res.message
    assert res.t[-1] == pytest.approx(0.05, abs=2e-3)
