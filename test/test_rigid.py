"""Open-chain rigid dynamics (RigidDynamics) against closed forms, energy and self-consistency.

Oracles: the closed-form equations of motion printed in Seifried (2014) Sect. 2.3
(cart double pendulum) and the mass matrix derived in docs/derivations.md for the PRR arm
(Aghili 2010 Sect. 5); forward/inverse dynamics round trips; the energy balance
dE/dt = v . tau - v . D v obtained by finite differences along the flow and by a
fine simulation.
"""

import numpy as np
import pinocchio as pin
import pytest
from conftest import OPEN_CHAIN, ROBOTS, random_state
from scipy.integrate import cumulative_simpson

from multibody_dynamics.errors import DimensionError, MultibodyError
from multibody_dynamics.model import load_model
from multibody_dynamics.rigid import RigidDynamics
from multibody_dynamics.simulate import SimulatorConfig, simulate

SPRUNG = [r for r in OPEN_CHAIN if load_model(r).has_springs]


# ---------------------------------------------------------------- closed forms
def seifried_cart_double_pendulum(q, v, Mc, M, I3, length, g):
    """Seifried (2014) Sect. 2.3: M(q), k(q, v), g(q) of the rigid cart manipulator.

    q = [x, alpha, beta] (alpha absolute from hanging down, beta relative);
    EoM M q'' + k = g + u.
    """
    l = length  # noqa: E741 -- the book's symbol
    _, al, be = q
    _, da, db = v
    s_ab, c_ab = np.sin(al + be), np.cos(al + be)
    m12 = 0.5 * l * M * (3 * np.cos(al) + c_ab)
    m13 = 0.5 * l * M * c_ab
    m22 = 2 * I3 + 1.5 * l**2 * M + l**2 * M * np.cos(be)
    m23 = I3 + 0.25 * l**2 * M * (1 + 2 * np.cos(be))
    m33 = I3 + 0.25 * l**2 * M
    mass = np.array([[2 * M + Mc, m12, m13], [m12, m22, m23], [m13, m23, m33]])
    k = np.array([
        -0.5 * l * M * (2 * da * db * s_ab + db**2 * s_ab + da**2 * (3 * np.sin(al) + s_ab)),
        -0.5 * db * (2 * da + db) * l**2 * M * np.sin(be),
        0.5 * da**2 * l**2 * M * np.sin(be),
    ])
    grav = np.array([0.0, -0.5 * g * l * M * (3 * np.sin(al) + s_ab), -0.5 * g * l * M * s_ab])
    return mass, k, grav


def test_cart_double_pendulum_matches_seifried(models, rng):
    model = models["cart_double_pendulum"]
    pm = model.pin_model
    Mc, M = pm.inertias[1].mass, pm.inertias[2].mass
    assert pm.inertias[3].mass == M  # two identical homogeneous links, as in the book
    I3 = pm.inertias[2].inertia[2, 2]  # about the CoM, normal to the plane of motion
    g = -model.gravity[1]  # the book's gravity acts along -e2
    assert g > 0 and np.allclose(model.gravity[[0, 2]], 0.0)
    dyn = RigidDynamics(model)
    for _ in range(20):
        q = rng.uniform(-np.pi, np.pi, 3)
        v = rng.uniform(-3, 3, 3)
        mass, k, grav = seifried_cart_double_pendulum(q, v, Mc, M, I3, 1.0, g)
        # Both sides are exact expressions evaluated in double precision; entries are O(1..100),
        # so 1e-12 relative (plus 1e-12 absolute for entries that vanish) is round-off only.
        np.testing.assert_allclose(dyn.mass_matrix(q), mass, rtol=1e-12, atol=1e-12)
        # h = k - g: the book's applied forces g sit on the right-hand side
        np.testing.assert_allclose(dyn.nonlinear_effects(q, v), k - grav, rtol=1e-12, atol=1e-12)
        # gravity_forces is the holding torque, i.e. minus the book's applied gravity force
        np.testing.assert_allclose(dyn.gravity_forces(q), -grav, rtol=1e-12, atol=1e-12)


def test_prr_surface_mass_matrix_matches_notes(models, rng):
    model = models["prr_surface"]
    pm = model.pin_model
    m = pm.inertias[1].mass
    # docs/derivations.md: m for all three
    np.testing.assert_allclose([pm.inertias[j].mass for j in (2, 3)], m)
    l = 1.0  # noqa: E741 -- the link length of the docs/derivations.md formula
    dyn = RigidDynamics(model)
    for _ in range(20):
        q = rng.uniform(-np.pi, np.pi, 3)
        c2, c3, c23 = np.cos(q[1]), np.cos(q[2]), np.cos(q[1] + q[2])
        expected = m * np.array([
            [3.0, l * (1.5 * c2 + 0.5 * c23), 0.5 * l * c23],
            [l * (1.5 * c2 + 0.5 * c23), l**2 * (5 / 3 + c3), l**2 * (1 / 3 + 0.5 * c3)],
            [0.5 * l * c23, l**2 * (1 / 3 + 0.5 * c3), l**2 / 3],
        ])
        # the URDF prints the rods' I = m l^2 / 12 to 10 significant digits (0.4166666667),
        # an error of 3.3e-11 kg m^2 per rod; 2e-10 covers both rods, nothing else differs
        np.testing.assert_allclose(dyn.mass_matrix(q), expected, rtol=0, atol=2e-10)


# ---------------------------------------------------------------- consistency, every open chain
@pytest.mark.parametrize("name", OPEN_CHAIN)
def test_forward_inverse_round_trip(models, rng, name):
    model = models[name]
    dyn = RigidDynamics(model)
    for _ in range(10):
        q, v, a = random_state(model, rng, scale=2.0)
        tau = dyn.inverse_dynamics(q, v, a)
        # ABA(RNEA(a)) == a: two O(n) recursions; M has condition numbers up to ~1e4 on these
        # robots, so 1e-9 (relative to accelerations of order 1) leaves room for round-off.
        np.testing.assert_allclose(dyn.forward_dynamics(q, v, tau), a, rtol=1e-9, atol=1e-9)
        # and M a + h - tau_s == tau from the separately computed terms
        rebuilt = dyn.mass_matrix(q) @ a + dyn.nonlinear_effects(q, v) - dyn.spring_forces(q, v)
        # round-off of O(100) terms
        np.testing.assert_allclose(rebuilt, tau, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", OPEN_CHAIN)
def test_kinetic_energy_is_quadratic_form(models, rng, name):
    model = models[name]
    dyn = RigidDynamics(model)
    for _ in range(5):
        q, v, _ = random_state(model, rng, scale=2.0)
        expected = 0.5 * v @ dyn.mass_matrix(q) @ v
        # round-off
        assert dyn.kinetic_energy(q, v) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("name", SPRUNG)
def test_passive_springs_and_dampers(models, rng, name):
    model = models[name]
    dyn = RigidDynamics(model)
    K, D = model.stiffness, model.damping
    assert model.nq == model.nv  # revolute/prismatic only: q index == v index below
    for i in np.flatnonzero(K + D):
        delta = 0.3
        q = model.q_rest.copy()
        q[i] += delta
        rest = np.zeros(model.nv)
        expected = np.zeros(model.nv)
        expected[i] = -K[i] * delta
        np.testing.assert_allclose(dyn.spring_forces(q, rest), expected, rtol=1e-14, atol=1e-14)
        omega = np.zeros(model.nv)
        omega[i] = 2.0
        expected[i] = -D[i] * 2.0
        np.testing.assert_allclose(dyn.spring_forces(model.q_rest, omega), expected,
                                   rtol=1e-14, atol=1e-14)  # exact arithmetic
        # released at rest with no actuation: M a = -g(q) - K delta e_i; the spring part alone
        # accelerates the joint back towards rest (M^-1 is positive definite)
        a = dyn.forward_dynamics(q, rest, np.zeros(model.nv))
        a_gravity = np.linalg.solve(dyn.mass_matrix(q), -dyn.gravity_forces(q))
        a_spring = a - a_gravity
        assert K[i] == 0 or a_spring[i] * delta < 0
        tau_s = np.zeros(model.nv)
        tau_s[i] = -K[i] * delta
        # M a_spring == tau_s: a linear solve on M (cond <= 1e4), relative round-off ~1e-12
        np.testing.assert_allclose(dyn.mass_matrix(q) @ a_spring, tau_s, rtol=1e-9, atol=1e-9)
        # the potential energy carries 1/2 K delta^2 on top of gravity
        pot_gravity = float(pin.computePotentialEnergy(model.pin_model, model.create_data(), q))
        assert dyn.potential_energy(q) - pot_gravity == pytest.approx(0.5 * K[i] * delta**2,
                                                                      rel=1e-12)


@pytest.mark.parametrize("name", OPEN_CHAIN)
def test_energy_rate_along_the_flow(models, rng, name):
    """dE/dt = v . tau - v . D v, by a central difference of E along (q', v') = (v, a)."""
    model = models[name]
    dyn = RigidDynamics(model)
    pm = model.pin_model
    eps = 1e-5  # central difference: truncation ~eps^2 E''' and round-off ~1e-16 E / eps
    for _ in range(5):
        q, v, _ = random_state(model, rng, scale=1.5)
        tau = model.B @ rng.uniform(-5, 5, model.nu)
        a = dyn.forward_dynamics(q, v, tau)

        def energy(s, q=q, v=v, a=a):
            return dyn.energy(pin.integrate(pm, q, s * v), v + s * a)

        rate = (energy(eps) - energy(-eps)) / (2 * eps)
        power = v @ tau - v @ (model.damping * v)
        scale = 1.0 + abs(v @ tau) + abs(v @ dyn.gravity_forces(q)) + dyn.kinetic_energy(q, a)
        # measured <= 3e-10 of the power flows involved (truncation eps^2 dominated);
        # tolerance 1e-8 of them
        assert abs(rate - power) < 1e-8 * scale, (rate, power)


@pytest.mark.parametrize("name", ["arm7", "passive_arm"])
def test_energy_balance_in_simulation(models, rng, name):
    """E(T) - E(0) = int_0^T (v . tau - v . D v) dt along an RK4 simulation (dt = 1e-4 s)."""
    model = models[name]
    q0, v0, _ = random_state(model, rng, scale=1.0)
    tau = model.B @ rng.uniform(-3, 3, model.nu)
    cfg = SimulatorConfig(dt=1e-4, method="rk4")
    res = simulate(model, 0.2, q0=q0, v0=v0, tau=tau, config=cfg)
    assert res.success, res.message
    power = res.v @ tau - np.einsum("ij,j,ij->i", res.v, model.damping, res.v)
    # Simpson, not the trapezoid rule: the passive spring's ~25 rad/s oscillation makes the
    # trapezoid error dt^2 T max|P''| / 12 about 5e-8 of the energy scale
    supplied = cumulative_simpson(power, x=res.t, initial=0.0)
    drift = res.energy - res.energy[0] - supplied
    scale = np.max(np.abs(res.energy - res.energy[0])) + np.max(np.abs(supplied)) + 1.0
    # RK4 (local error dt^5) and Simpson (dt^4) at dt = 1e-4 s: measured <= 7e-12 of the energy
    # scale over several seeds; 1e-9 leaves a factor above 100
    assert np.max(np.abs(drift)) < 1e-9 * scale, np.max(np.abs(drift))


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("name", ["arm7", "passive_arm"])
def test_wrong_shapes_are_rejected(models, name):
    model = models[name]
    dyn = RigidDynamics(model)
    nq, nv = model.nq, model.nv
    q, v = model.neutral(), np.zeros(nv)
    cases = [
        (lambda: dyn.mass_matrix(np.zeros(nq + 1)), "q", f"({nq},)"),
        (lambda: dyn.nonlinear_effects(q, np.zeros(nv - 1)), "v", f"({nv},)"),
        (lambda: dyn.inverse_dynamics(q, v, np.zeros(nv + 2)), "a", f"({nv},)"),
        (lambda: dyn.forward_dynamics(q, v, np.zeros((1, nv))), "tau", f"({nv},)"),
        (lambda: dyn.kinetic_energy(q, [1.0]), "v", f"({nv},)"),
        (lambda: dyn.spring_forces(np.zeros(2), v), "q", f"({nq},)"),
        (lambda: dyn.reaction_wrenches(q, v, "abc"), "a", f"{nv}"),
    ]
    for call, arg, shape in cases:
        with pytest.raises(DimensionError) as err:
            call()
        msg = str(err.value)
        assert msg.startswith(f"{arg}:") and shape in msg, msg
        assert isinstance(err.value, MultibodyError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize("method", [
    "mass_matrix", "inverse_dynamics", "forward_dynamics", "nonlinear_effects",
    "reaction_wrenches"])
def test_column_vectors_are_rejected(models, method):
    """House style: 1-D arrays, never column vectors, at every public entry point."""
    model = models["arm7"]  # no springs: the path where nothing but pinocchio sees q
    dyn = RigidDynamics(model)
    q, v = model.neutral()[:, None], np.zeros(model.nv)
    args = {"mass_matrix": (q,), "nonlinear_effects": (q, v)}.get(method, (q, v, v))
    with pytest.raises(DimensionError, match=rf"^q: .*\({model.nq},\)"):
        getattr(dyn, method)(*args)


def test_every_shipped_robot_is_checked():
    # the parametrized tests above must not silently lose robots
    assert set(OPEN_CHAIN) <= set(ROBOTS) and {"arm7", "cart_double_pendulum"} <= set(OPEN_CHAIN)
