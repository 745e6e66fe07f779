"""Planar chains of rigid and flexible bodies (Seifried 2014, eqs. 2.131-2.143).

Oracles: Lagrange's equations (k(q, v) from the mass matrix by finite differences), the potential
energy, the compiled kernel against the numpy reference built on FlexibleBody2D, the rigid
pinocchio model cart_double_pendulum (rigid limit), energy conservation, and the book's
qualitative result for the flexible cart manipulator (Sect. 2.3, Figs. 2.11-2.12).
"""

import dataclasses

import numpy as np
import pinocchio as pin
import pytest
import yaml
from scipy.integrate import solve_ivp

from multibody_dynamics.errors import DimensionError, InputError, ModelError
from multibody_dynamics.flexible.loader import (
    beam_modal_data,
    is_flexible_model,
    load_flexible_model,
    read_flexible_config,
    shipped_flexible_models,
)
from multibody_dynamics.flexible.sid import save_modal_data
from multibody_dynamics.flexible.system import ChainBody, FlexibleChain, FlexibleChainConfig
from multibody_dynamics.model import load_model, share_dir, shipped_robots
from multibody_dynamics.model.resources import robots_dir

# soft beams (first modes 3-40 rad/s) so that every coupling term is large and explicit
# integration is cheap; an axial-soft section couples axial and bending through I1, Cr1
SOFT = dict(length=0.8, elements=6, width=0.02, height=0.01, E=2e8, rho=2700.0, modes=2,
            theory="euler-bernoulli")


@pytest.fixture(scope="module")
def soft():
    return beam_modal_data(**SOFT)


def general_chain(data, **options):
    """Cart, flexible link, rigid link, prismatic slider on it, flexible link; plus a rigid
    branch on the first flexible link (tree): every joint kind and parent kind."""
    bodies = [
        ChainBody("cart", "x", "prismatic", axis=(1.0, 0.2), mass=0.5, inertia=0.01),
        ChainBody("l1", "a1", angle=-np.pi / 2, modal_data=data),
        ChainBody("r2", "a2", mass=0.3, com=(0.2, 0.05), inertia=0.004, distal=(0.4, 0.02)),
        ChainBody("s3", "d3", "prismatic", axis=(1.0, 0.0), angle=0.3, mass=0.2,
                  com=(0.05, 0.0), inertia=0.001, distal=(0.1, 0.0)),
        ChainBody("l4", "a4", modal_data=data),
        ChainBody("branch", "b5", parent=1, mass=0.1, com=(0.1, 0.0), inertia=0.0005),
    ]
    return FlexibleChainConfig(bodies, gravity=(0.3, -9.81), **options)


OPTIONS = [dict(), dict(geometric_stiffening=True), dict(second_order_inertia=False)]


def random_state(chain, rng, qe_scale=0.02):
    q = np.r_[rng.uniform(-1, 1, chain.nq_r), qe_scale * rng.standard_normal(chain.nq_e)]
    v = np.r_[rng.uniform(-1, 1, chain.nq_r), rng.standard_normal(chain.nq_e)]
    return q, v


@pytest.mark.parametrize("options", OPTIONS)
def test_coriolis_vector_follows_from_mass_matrix(soft, options, rng):
    """k(q, v) = M'(q) v - 1/2 d(v^T M v)/dq (q' = v): checks the convective accelerations of
    the recursive kinematics (2.134) and the gyroscopic terms (2.140) against (2.139)."""
    chain = FlexibleChain(general_chain(soft, **options))
    n = chain.nv
    for _ in range(3):
        q, v = random_state(chain, rng)
        eps = 1e-6
        mdot, grad = np.zeros((n, n)), np.zeros(n)
        for j in range(n):
            e = np.zeros(n)
            e[j] = eps
            mp, mm = chain.mass_matrix(q + e), chain.mass_matrix(q - e)
            mdot += v[j] * (mp - mm) / (2 * eps)
            grad[j] = 0.5 * v @ (mp - mm) @ v / (2 * eps)
        expected = mdot @ v - grad
        # central differences: truncation ~eps^2 |M'''|, rounding ~1e-16 |M| / eps ~ 1e-10
        # relative to the largest term
        np.testing.assert_allclose(chain.nonlinear_effects(q, v), expected,
                                   atol=1e-7 * np.abs(expected).max())


def test_gravity_and_elastic_forces_are_minus_potential_gradient(soft, rng):
    chain = FlexibleChain(general_chain(soft))
    q, _ = random_state(chain, rng)
    n = chain.nv
    grad = np.zeros(n)
    for j in range(n):
        e = np.zeros(n)
        e[j] = 1e-6
        grad[j] = (chain.potential_energy(q + e) - chain.potential_energy(q - e)) / 2e-6
    forces = chain.gravity_forces(q) - chain.elastic_forces(q, np.zeros(n))
    # central difference of a smooth potential: ~1e-9 relative
    np.testing.assert_allclose(forces, -grad, atol=1e-7 * np.abs(grad).max())


@pytest.mark.parametrize("options", OPTIONS)
def test_compiled_kernel_matches_numpy_reference(soft, options, rng):
    cfg = general_chain(soft, **options)
    fast, ref = FlexibleChain(cfg), FlexibleChain(cfg, backend="numpy")
    if fast.backend != "numba":
        pytest.skip("numba not installed")
    for _ in range(3):
        # millimetre deformations: the stiffened and first-order inertias lose definiteness at
        # centimetre ones on these soft beams (see test_flexible_body.py)
        q, v = random_state(fast, rng, qe_scale=0.002)
        u = rng.standard_normal(fast.nu)
        # same algebra in another order: round-off only
        for name in ("mass_matrix", "gravity_forces"):
            np.testing.assert_allclose(getattr(fast, name)(q), getattr(ref, name)(q),
                                       rtol=1e-12, atol=1e-12)
        for name in ("nonlinear_effects", "elastic_forces"):
            np.testing.assert_allclose(getattr(fast, name)(q, v), getattr(ref, name)(q, v),
                                       rtol=1e-12, atol=1e-12)
        a_fast, a_ref = fast.forward_dynamics(q, v, u), ref.forward_dynamics(q, v, u)
        # Cholesky vs LU on a matrix with condition ~1e4: ~1e-12 relative
        np.testing.assert_allclose(a_fast, a_ref, atol=1e-10 * np.abs(a_ref).max())


def test_forward_dynamics_solves_equations_of_motion(soft, rng):
    chain = FlexibleChain(general_chain(soft))
    q, v = random_state(chain, rng)
    u = rng.standard_normal(chain.nu)
    a = chain.forward_dynamics(q, v, u)
    lhs = chain.mass_matrix(q) @ a + chain.nonlinear_effects(q, v) + chain.elastic_forces(q, v)
    rhs = chain.gravity_forces(q) + chain.B @ u
    np.testing.assert_allclose(lhs, rhs, atol=1e-10 * np.abs(rhs).max())  # round-off
    np.testing.assert_array_equal(chain.B[chain.nq_r:], 0.0)  # tangent frames: B_e = 0


def test_undamped_chain_conserves_energy(soft):
    chain = FlexibleChain(general_chain(soft))
    q0 = np.r_[0.1, 0.8, -0.5, 0.05, 0.4, 0.3, np.zeros(chain.nq_e)]
    sol = solve_ivp(chain.ode(), (0.0, 1.5), np.r_[q0, np.zeros(chain.nv)], method="DOP853",
                    rtol=1e-11, atol=1e-11)
    assert sol.success
    energy = [chain.energy(x[:chain.nv], x[chain.nv:]) for x in sol.y.T]
    scale = np.ptp([chain.kinetic_energy(x[:chain.nv], x[chain.nv:]) for x in sol.y.T])
    # DOP853 at 1e-11: the drift stays at the 1e-9 level of the exchanged kinetic energy
    assert np.abs(np.array(energy) - energy[0]).max() < 1e-8 * scale
    assert np.abs(sol.y[chain.nq_r:chain.nv]).max() > 1e-3  # the links did deform


# ---------------------------------------------------------------- rigid limit


@pytest.fixture(scope="module")
def cart_models():
    return load_flexible_model("flexible_cart_manipulator"), load_model("cart_double_pendulum")


def stiff_variant(chain, factor):
    """The same chain with every elastic stiffness multiplied by ``factor`` (inertia kept)."""
    bodies = []
    for b in chain.bodies:
        if b.flexible:
            data = dataclasses.replace(b.modal_data, Ke=factor * b.modal_data.Ke)
            b = dataclasses.replace(b, modal_data=data)
        bodies.append(b)
    return FlexibleChain(dataclasses.replace(chain.config, bodies=bodies))


def test_rigid_limit_terms_equal_pinocchio(cart_models, rng):
    """At q_e = 0, q_e' = 0 the rigid block of M, k and g equal the rigid model's (same masses,
    inertias: Timoshenko beams with rotary inertia give m (l^2 + e^2)/12 like the URDF)."""
    flex, rigid = cart_models
    pm, data = rigid.pin_model, rigid.create_data()
    for _ in range(5):
        qr, vr = rng.uniform(-np.pi, np.pi, 3), rng.uniform(-2, 2, 3)
        q, v = np.r_[qr, np.zeros(4)], np.r_[vr, np.zeros(4)]
        nr = flex.nq_r
        # beam integrals by Gauss quadrature: exact up to round-off
        np.testing.assert_allclose(flex.mass_matrix(q)[:nr, :nr], pin.crba(pm, data, qr),
                                   atol=1e-12)
        g_pin = pin.computeGeneralizedGravity(pm, data, qr)
        np.testing.assert_allclose(flex.gravity_forces(q)[:nr], -g_pin, atol=1e-12)
        c_pin = pin.nonLinearEffects(pm, data, qr, vr) - g_pin
        np.testing.assert_allclose(flex.nonlinear_effects(q, v)[:nr], c_pin, atol=1e-12)


@pytest.mark.slow
def test_rigid_limit_motion(cart_models):
    """With the stiffness scaled by k the joint motion converges to the rigid one like 1/k
    (the quasi-static deflection under gravity and inertia ~ g / omega_1^2). Measured over 1 s:
    2.6e-3 rad (k = 1), 2.4e-5 (k = 1e2), 2.6e-6 (1e3), 2.4e-7 (1e4); two points keep it fast."""
    flex, rigid = cart_models
    pm, data = rigid.pin_model, rigid.create_data()
    q0, t_end = np.array([0.0, 0.6, -0.4]), 1.0
    t = np.linspace(0.0, t_end, 21)

    def rigid_rhs(_, x):
        return np.r_[x[3:], pin.aba(pm, data, x[:3], x[3:], np.zeros(3))]

    sr = solve_ivp(rigid_rhs, (0, t_end), np.r_[q0, np.zeros(3)], method="DOP853", rtol=1e-10,
                   atol=1e-10, t_eval=t)
    err = []
    for factor in (1.0, 1e2):
        chain = stiff_variant(flex, factor)
        sf = solve_ivp(chain.ode(), (0, t_end), np.r_[q0, np.zeros(11)], method="DOP853",
                       rtol=1e-9, atol=1e-9, t_eval=t)
        assert sr.success and sf.success
        err.append(np.abs(sf.y[:3] - sr.y[:3]).max())
    assert err[0] > 1e-3  # the real links do differ visibly from the rigid model
    # first-order convergence in 1/k, with 2x margin for the higher-order terms
    assert err[1] < 2.0 * err[0] / 1e2 and err[1] < 5e-5, err


# ---------------------------------------------------------------- the book's example


def release_run(flex, rigid, t_end, rtol=1e-9):
    """Released at alpha = pi, beta = 0.01 rad (link 2 tilted 0.01 rad from the upward
    vertical), motors off, undeformed and at rest (the book gives no numbers)."""
    pm, data = rigid.pin_model, rigid.create_data()
    q0 = np.array([0.0, np.pi, 0.01])
    t = np.linspace(0.0, t_end, int(round(100 * t_end)) + 1)

    def rigid_rhs(_, x):
        return np.r_[x[3:], pin.aba(pm, data, x[:3], x[3:], np.zeros(3))]

    sr = solve_ivp(rigid_rhs, (0, t_end), np.r_[q0, np.zeros(3)], method="DOP853", rtol=rtol,
                   atol=rtol, t_eval=t)
    sf = solve_ivp(flex.ode(), (0, t_end), np.r_[q0, np.zeros(11)], method="DOP853", rtol=rtol,
                   atol=rtol, t_eval=t)
    assert sr.success and sf.success
    return t, sr.y, sf.y


def test_flexible_cart_manipulator_released_near_upright(cart_models):
    """Seifried (2014) Sect. 2.3: rigid and flexible joint trajectories agree at first and
    diverge after about 2-3 s; link 1's elastic coordinates dominate link 2's and the first
    coordinate of each link dominates the second (Figs. 2.11, 2.12). bench_flexible.py runs the
    longer version."""
    flex, rigid = cart_models
    t, yr, yf = release_run(flex, rigid, 3.0)
    diff = np.abs(yr[:3] - yf[:3]).max(axis=0)
    assert diff[t <= 1.0].max() < 0.01  # "initially the influence ... is very small"
    t_div = t[np.argmax(diff > 0.1)]  # 0.1 rad: a clearly visible difference in Fig. 2.12
    assert diff.max() > 0.1 and 2.0 <= t_div <= 3.0, t_div
    amp = np.abs(yf[3:7]).max(axis=1)  # [link1 e1, e2, link2 e1, e2]
    assert amp[0] > 1.5 * amp[2] and amp[1] > amp[3]
    assert amp[0] > 5 * amp[1] and amp[2] > 5 * amp[3]
    energy = [flex.energy(x[:7], x[7:]) for x in yf.T[[0, -1]]]
    assert abs(energy[1] - energy[0]) < 1e-6  # J; the motion exchanges ~5 J


# ---------------------------------------------------------------- loading and validation


#: The shipped flexible models, declared in config/robots/ next to the rigid robots.
FLEXIBLE = ["flexible_cart_manipulator", "flexible_manipulator", "flexible_parallel_tool"]


def test_shipped_flexible_models_load():
    assert set(FLEXIBLE) <= set(shipped_flexible_models())
    for name in shipped_flexible_models():
        chain = load_flexible_model(name)
        assert chain.config.name == name
        assert chain.nv == chain.nq_r + chain.nq_e
        if chain.config.rigid_counterpart:
            rigid = load_model(chain.config.rigid_counterpart)
            assert rigid.nv == chain.nq_r


def test_one_directory_two_schemas():
    """config/robots/ holds every shipped model; the schema (a 'bodies' list) puts each file in
    exactly one listing."""
    files = {p.stem: p for p in robots_dir().glob("*.yaml")}
    rigid, flexible = shipped_robots(), shipped_flexible_models()
    assert not set(rigid) & set(flexible)
    assert sorted(rigid + flexible) == sorted(files)
    assert set(FLEXIBLE) <= set(flexible)
    assert {"arm7", "cart_double_pendulum", "five_bar"} <= set(rigid)
    for name, path in files.items():
        raw = yaml.safe_load(path.read_text())
        assert isinstance(raw, dict) and raw.get("name") == name, path
        flexible_schema = "bodies" in raw
        assert flexible_schema == (name in flexible) == is_flexible_model(name), name
    assert not (share_dir() / "config" / "flexible").exists()  # the old folder is gone


@pytest.mark.parametrize("name", FLEXIBLE)
def test_load_model_names_the_flexible_loader(name):
    for robot in (name, robots_dir() / f"{name}.yaml"):
        with pytest.raises(ModelError) as info:
            load_model(robot)
        msg = str(info.value)
        assert name in msg and "is a flexible model" in msg, msg
        assert "multibody_dynamics.flexible.loader.load_flexible_model" in msg, msg


@pytest.mark.parametrize("name", ["arm7", "cart_double_pendulum", "five_bar"])
def test_load_flexible_model_names_the_rigid_loader(name):
    for robot in (name, robots_dir() / f"{name}.yaml"):
        with pytest.raises(ModelError) as info:
            load_flexible_model(robot)
        msg = str(info.value)
        assert name in msg and "is a rigid model" in msg, msg
        assert "multibody_dynamics.model.load_model" in msg, msg
        assert "load_flexible_model" not in msg, msg


def test_cart_manipulator_structure(cart_models):
    flex, _ = cart_models
    assert flex.coordinate_names == ("x", "alpha", "beta", "link1.e1", "link1.e2", "link2.e1",
                                     "link2.e2")
    # tip of the undeformed arm hanging down at zero angles
    np.testing.assert_allclose(flex.point_position(np.zeros(7), "link2"), [0.0, -2.0],
                               atol=1e-15)
    freq = np.sqrt(np.diag(flex.bodies[1].modal_data.Ke))
    # clamped-free aluminium 1 m x 10 mm: 1.875^2 sqrt(EI / (rho A l^4)) = 51.7 rad/s (EB);
    # Timoshenko with rotary inertia is a little lower
    np.testing.assert_allclose(freq[0], 51.7, rtol=2e-3)


def test_modal_data_file_route(tmp_path, soft):
    save_modal_data(tmp_path / "link.npz", soft)
    (tmp_path / "m.yaml").write_text(
        "name: m\nbodies:\n  - name: l\n    joint: {name: a}\n    modal_data: link.npz\n")
    chain = load_flexible_model(tmp_path / "m.yaml")
    assert chain.nq_e == 2 and chain.nq_r == 1


BASE = "name: m\nbodies:\n  - name: c\n    joint: {name: x, type: prismatic}\n"


@pytest.mark.parametrize("body, words", [
    ("", ["empty file"]),
    ("name: m\n", ["bodies", "missing"]),
    (BASE + "    rigid: {mass: -1}\n", ["bodies[0].rigid.mass", "> 0"]),
    (BASE + "    rigid: {mass: 1}\n    beam: {}\n", ["exactly one of"]),
    (BASE + "    rigid: {mass: 1, colour: red}\n", ["bodies[0].rigid.colour", "unknown key"]),
    (BASE.replace("prismatic", "helical") + "    rigid: {mass: 1}\n", ["joint.type"]),
    (BASE + "    rigid: {mass: 1}\n  - name: d\n    joint: {name: y, parent: e}\n"
            "    rigid: {mass: 1}\n", ["bodies[1].joint.parent", "unknown"]),
    (BASE + "    rigid: {mass: 1}\n  - name: d\n    joint: {name: x}\n    rigid: {mass: 1}\n",
     ["duplicate joint"]),
    (BASE + "    beam: {length: 1, elements: 4, modes: 2, section: {width: 0.01, height: 0.01},"
            " material: {E: seventy, rho: 2700}}\n", ["material.E", "expected a number"]),
    (BASE + "    beam: {length: 1, elements: 4, modes: 2, section: {width: 0.01},"
            " material: {E: 7.0e+10, rho: 2700}}\n", ["section.height", "missing"]),
    (BASE + "    rigid: {mass: 1}\ngravity: [0, 0, -9.81]\n", ["gravity", "2 numbers"]),
])
def test_bad_flexible_models_are_rejected(tmp_path, body, words):
    path = tmp_path / "m.yaml"
    path.write_text(body)
    with pytest.raises(ModelError) as info:
        read_flexible_config(path)
    for word in [str(path)] + words:
        assert word in str(info.value)


def test_input_validation(soft):
    chain = FlexibleChain(general_chain(soft))
    with pytest.raises(DimensionError, match=rf"\({chain.nv},\)"):
        chain.mass_matrix(np.zeros(3))
    with pytest.raises(DimensionError, match=rf"\({chain.nu},\)"):
        chain.forward_dynamics(np.zeros(chain.nv), np.zeros(chain.nv), u=np.zeros(2))
    with pytest.raises(InputError, match="backend"):
        FlexibleChain(general_chain(soft), backend="fortran")
    with pytest.raises(InputError, match="mass"):
        ChainBody("r", "j")
    with pytest.raises(InputError, match="parent"):
        FlexibleChainConfig([ChainBody("r", "j", parent=0, mass=1.0)])
    with pytest.raises(ModelError, match="bodies"):
        chain.point_position(np.zeros(chain.nv), "nope")


def test_linearization_matches_finite_differences_of_forward_dynamics(soft, rng):
    chain = FlexibleChain(general_chain(soft))
    q, v = random_state(chain, rng)
    u = rng.standard_normal(chain.nu)
    lin = chain.linearize(q, v, u)
    nv = chain.nv

    def f(x, du=None):
        du = np.zeros(chain.nu) if du is None else du
        return np.r_[x[nv:], chain.forward_dynamics(x[:nv], x[nv:], u + du)]

    x0, h = np.r_[q, v], 1e-6
    A = np.column_stack([(f(x0 + h * e) - f(x0 - h * e)) / (2 * h) for e in np.eye(2 * nv)])
    B = np.column_stack([(f(x0, h * e) - f(x0, -h * e)) / (2 * h) for e in np.eye(chain.nu)])
    # two central-difference routes (inverse-dynamics residual vs forward dynamics): their
    # O(h^2) truncation and rounding errors, ~1e-7 of the largest entry here
    np.testing.assert_allclose(lin.A, A, atol=1e-6 * np.abs(A).max())
    np.testing.assert_allclose(lin.B, B, atol=1e-7 * np.abs(B).max())
    np.testing.assert_allclose(chain.inverse_dynamics(q, v, lin.a)[:chain.nu], u, atol=1e-10)
    Phi, Theta = lin.discretize(1e-3)
    assert Phi.shape == (2 * nv, 2 * nv) and Theta.shape == (2 * nv, chain.nu)


@pytest.mark.slow
def test_cli_simulates_flexible_models(tmp_path, capsys):
    from multibody_control.cli import main

    csv = tmp_path / "run.csv"
    # released near upright, motors off: energy is conserved (undamped) to the integrator's
    # tolerance (rtol 1e-8 over 0.3 s: measured 1e-11 relative)
    assert main(["simulate", "flexible_cart_manipulator", "--duration", "0.3", "--q0", "0", "3.1",
                 "0.01", "0", "0", "0", "0", "--out", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "ok: completed" in out and "link1.e1" in out
    data = np.genfromtxt(csv, delimiter=",", names=True)
    assert data["t"][-1] == pytest.approx(0.3)
    assert np.ptp(data["energy"]) < 1e-8 * np.abs(data["energy"]).max()
    assert main(["simulate", "flexible_manipulator", "--duration", "0.1", "--tau", "0.1"]) == 2
    assert "--tau: flexible_manipulator is a flexible model: expected 2 joint inputs" in \
        capsys.readouterr().err
    # a run shorter than the output spacing still ends at its duration
    assert main(["simulate", "flexible_manipulator", "--duration", "0.004",
                 "--out", str(csv)]) == 0
    assert np.genfromtxt(csv, delimiter=",", names=True)["t"][-1] == pytest.approx(0.004)
    capsys.readouterr()
    # a closed loop: projected on the closure every 10 ms, sampled every 0.1 ms between
    assert main(["simulate", "flexible_parallel_tool", "--duration", "0.02",
                 "--tau", "1", "0"]) == 0
    out = capsys.readouterr().out
    assert "flexible_parallel_tool: ok" in out and "short_arm.e6" in out
