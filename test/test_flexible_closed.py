"""Flexible multibody systems with kinematic loops (Seifried 2014 Sect. 2.2.5, 6.5).

Oracles: finite differences of the closure rows, the index-1 (Lagrange multiplier) form against
coordinate partitioning (2.150), energy conservation, the analytic motion of a rigid
parallelogram four-bar (a pendulum equation), and the published facts of Sect. 6.5.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from multibody_control.inversion.closed_flexible import ClosedOutputServo, invert_closed
from multibody_dynamics.errors import DimensionError, InputError, ModelError
from multibody_dynamics.flexible.closed import ClosedFlexibleChain, PlanarClosure
from multibody_dynamics.flexible.loader import beam_modal_data
from multibody_dynamics.flexible.system import ChainBody, FlexibleChain, FlexibleChainConfig
from multibody_dynamics.robot import load_robot

L, D = 0.5, 0.4  # m: crank/rocker and coupler length of the parallelogram
WIDTH, HEIGHT, RHO = 0.02, 0.01, 2700.0  # m, m, kg/m^3 (aluminium bars)
G = 9.81


def serial_links(lengths, E=7e10, rigid=False, modes=2, elements=8):
    """Serial chain of uniform bars from the world origin (revolute joints th1, th2, ...)."""
    bodies = []
    for k, ln in enumerate(lengths):
        name, joint = f"link{k + 1}", f"th{k + 1}"
        if rigid:
            m = RHO * WIDTH * HEIGHT * ln
            bodies.append(ChainBody(name, joint, mass=m, com=(ln / 2, 0.0),
                                    inertia=m * ln**2 / 12, distal=(ln, 0.0)))
        else:  # Euler-Bernoulli without rotary inertia: the rigid bar's m l^2 / 3 exactly
            data = beam_modal_data(ln, elements, WIDTH, HEIGHT, E, RHO, modes=modes,
                                   theory="euler-bernoulli")
            bodies.append(ChainBody(name, joint, modal_data=data))
    return FlexibleChain(FlexibleChainConfig(bodies, gravity=(0.0, -G), name="links"))


def parallelogram(**kw) -> ClosedFlexibleChain:
    """Crank (th1) - coupler - rocker, the rocker's end pinned at the world point (D, 0)."""
    chain = serial_links((L, D, L), **kw)
    return ClosedFlexibleChain(chain, [PlanarClosure("pin", "link3", point_b=(D, 0.0))],
                               independent=["th1"])


def assembled_state(system, th1, rng=None, elastic=0.0):
    q = np.zeros(system.nv)
    q[:3] = [th1, -th1, th1 + np.pi]  # the parallelogram branch
    if rng is not None:
        q[3:] = elastic * rng.standard_normal(system.nq_e)
    q = system.project_position(q, partitioned=True)
    v = np.zeros(system.nv) if rng is None else rng.standard_normal(system.nv)
    return q, system.project_velocity(q, v, partitioned=True)


@pytest.fixture(scope="module")
def tool():
    return load_robot("flexible_parallel_tool")


@pytest.fixture(scope="module")
def tool_state(tool):
    q = np.zeros(tool.nv)
    q[:4] = [0.0, 0.8, np.pi / 4, 2.4]  # long arm at 45 deg, cart 2 ahead (lambda)
    return tool.project_position(q, partitioned=True)


# ---------------------------------------------------------------- closure rows


@pytest.mark.parametrize("angle", [pytest.param(False, marks=pytest.mark.slow), True])
def test_constraint_jacobian_and_bias_match_finite_differences(rng, angle):
    chain = serial_links((L, D, L, 0.3))
    closure = PlanarClosure("cut", "link3", body_b="link4", node_b=4, angle=angle,
                            angle_offset=0.2)
    system = ClosedFlexibleChain(chain, [closure])
    assert system.nc == (3 if angle else 2)
    q = np.r_[rng.uniform(-1, 1, 4), 0.01 * rng.standard_normal(system.nq_e)]
    v = rng.standard_normal(system.nv)
    c, C, bias = system.constraint_terms(q, v)
    h = 1e-6
    fd = np.column_stack([(system.constraint_residual(q + h * e)
                           - system.constraint_residual(q - h * e)) / (2 * h)
                          for e in np.eye(system.nv)])
    # central differences of smooth rows: truncation ~h^2 times third derivatives
    np.testing.assert_allclose(C, fd, atol=1e-7)
    dC = (system.constraint_jacobian(q + h * v) - system.constraint_jacobian(q - h * v)) / (2 * h)
    np.testing.assert_allclose(bias, dC @ v, atol=1e-6 * np.abs(bias).max())
    # position rows agree with the chain's own point kinematics
    ra = chain.point_position(q, "link3")
    rb = chain.point_position(q, "link4", node=4)
    np.testing.assert_allclose(c[:2], ra - rb, atol=1e-15)


def test_kkt_equals_coordinate_partitioning(rng):
    system = parallelogram()
    q, v = assembled_state(system, -0.4, rng, elastic=0.01)
    u = rng.standard_normal(system.nu)
    res = system.forward_dynamics_result(q, v, u)
    a, lam = res.a, res.lam
    np.testing.assert_array_equal(system.forward_dynamics(q, v, u), a)  # the same solve
    a_min = system.minimal_forward_dynamics(q, v, u)
    # two linear solves of the same equations; accelerations ~1e5 from the random elastic rates
    np.testing.assert_allclose(a_min, a, atol=1e-9 * np.abs(a).max())
    _, C, bias = system.constraint_terms(q, v)
    np.testing.assert_allclose(C @ a, -bias, atol=1e-8 * np.abs(bias).max())
    # the multipliers are the reactions: M a + k + f_e - g - B u = C^T lam
    M, k, g, fe = system.chain.dynamics_terms(q, v)
    np.testing.assert_allclose(M @ a + k + fe - g - system.B @ u, C.T @ lam,
                               atol=1e-8 * np.abs(M @ a).max())
    np.testing.assert_array_equal(res.f_c, C.T @ lam)  # the same product
    assert res.residual < 1e-8 * np.abs(bias).max()  # as C a = -bias above


def test_projection_reaches_the_manifold(rng):
    system = parallelogram()
    q, v = assembled_state(system, -0.4, rng, elastic=0.01)
    bad = q + 1e-3 * rng.standard_normal(system.nv)
    for partitioned in (False, True):
        qp = system.project_position(bad, partitioned=partitioned)
        assert np.max(np.abs(system.constraint_residual(qp))) < 1e-12  # m, the tolerance
        vp = system.project_velocity(qp, v, partitioned=partitioned)
        assert np.max(np.abs(system.constraint_jacobian(qp) @ vp)) < 1e-10
    qp = system.project_position(bad, partitioned=True)
    np.testing.assert_array_equal(qp[system.idx_min], bad[system.idx_min])


# ---------------------------------------------------------------- simulation


@pytest.mark.slow
def test_simulation_keeps_the_loop_closed_and_conserves_energy(rng):
    system = parallelogram(modes=1)
    q, v = assembled_state(system, -0.4, rng, elastic=0.002)
    v *= 0.2
    t = np.linspace(0.0, 0.1, 21)
    sim = system.simulate(q, v, t, rtol=1e-10, atol=1e-12)
    assert sim.success, sim.message
    # drift of the index-1 form between two projections (5 ms): far below the projection tolerance
    assert sim.residual.max() < 1e-8
    energy = np.array([system.energy(qk, vk) for qk, vk in zip(sim.q, sim.v)])
    # undamped: only the integration and projection errors remain (energy ~0.1 J exchanged)
    assert np.ptp(energy) < 1e-7


def pendulum_oracle(th0, t):
    """Parallelogram of uniform bars: the coupler translates, (2 m L^2/3 + m_c L^2) th'' =
    -(m + m_c) g L cos th."""
    m, mc = RHO * WIDTH * HEIGHT * L, RHO * WIDTH * HEIGHT * D

    def rhs(_, x):
        return [x[1], -(m + mc) * G * L * np.cos(x[0]) / (2 * m * L**2 / 3 + mc * L**2)]

    return solve_ivp(rhs, (t[0], t[-1]), [th0, 0.0], t_eval=t, rtol=1e-12, atol=1e-12).y[0]


def test_rigid_parallelogram_matches_the_pendulum_equation():
    system = parallelogram(rigid=True)
    th0 = -0.3  # swings between -0.3 and -pi + 0.3: never through the collinear change points
    t = np.linspace(0.0, 1.0, 41)
    q, v = assembled_state(system, th0)
    sim = system.simulate(q, v, t)
    assert sim.success, sim.message
    # integration tolerance 1e-9 over 1 s
    np.testing.assert_allclose(sim.q[:, 0], pendulum_oracle(th0, t), atol=1e-7)
    np.testing.assert_allclose(sim.q[:, 0] + sim.q[:, 1], 0.0, atol=1e-9)  # coupler translates


@pytest.mark.slow
def test_stiff_flexible_parallelogram_tends_to_the_rigid_motion():
    th0, t = -0.3, np.linspace(0.0, 0.15, 7)
    ref = pendulum_oracle(th0, t)
    errors = []
    for E in (7e9, 7e10):
        system = parallelogram(E=E, modes=1)
        q, v = assembled_state(system, th0)
        sim = system.simulate(q, v, t, rtol=1e-8, atol=1e-10)
        assert sim.success, sim.message
        errors.append(np.abs(sim.q[:, 0] - ref).max())
    # static sag and vibration scale with 1/E: ten times stiffer, several times closer
    assert errors[1] < 1e-3  # rad
    assert errors[1] < 0.35 * errors[0]


# ---------------------------------------------------------------- machine tool (Sect. 6.5)


def test_parallel_tool_structure(tool, tool_state):
    assert tool.joint_names == ("s1", "s2", "alpha", "beta")
    assert (tool.nq_r, tool.nq_e, tool.nc, tool.dof, tool.nu) == (4, 18, 2, 20, 2)
    assert tool.independent == ("s1", "alpha")
    long_arm, short_arm = tool.chain.bodies[2].modal_data, tool.chain.bodies[3].modal_data
    np.testing.assert_allclose(long_arm.node_positions[-1, 0], 1.081, atol=1e-12)  # l_l [m]
    np.testing.assert_allclose(short_arm.node_positions[-1, 0], 0.560, atol=1e-12)  # l_s [m]
    # chord frame: the middle joint node has no transverse displacement in any mode
    mid = tool.closures[0].node_b
    np.testing.assert_allclose(long_arm.node_positions[mid, 0], 1.081 / 2, atol=1e-12)
    assert np.abs(long_arm.node_shapes[mid, 1]).max() < 1e-12
    # assembled lambda: tool point at 45 deg, 1.081 m from cart 1
    np.testing.assert_allclose(tool.chain.point_position(tool_state, "long_arm"),
                               1.081 * np.array([np.sqrt(0.5), np.sqrt(0.5)]), atol=1e-12)


def test_input_matrix_fills_when_a_dependent_joint_is_driven(rng):
    """Seifried's remark after (2.159): B̄̄_e may be full although B_e = 0 in the tree."""
    chain = serial_links((L, D, L))
    system = ClosedFlexibleChain(chain, [PlanarClosure("pin", "link3", point_b=(D, 0.0))],
                                 actuated=("th1", "th2"), independent=["th1"])
    q, v = assembled_state(system, -0.4, rng, elastic=0.01)
    _, _, _, fbar, Bbar = system.minimal_equations(q, v)
    ne = system.nq_e
    np.testing.assert_array_equal(system.B[system.nq_r:], 0.0)
    np.testing.assert_array_equal(Bbar[0], [1.0, Bbar[0, 1]])  # B̄_i = B_i + T_i^T B_d
    assert np.abs(Bbar[-ne:, 1]).max() > 1e-2  # the dependent th2 drives elastic rows
    np.testing.assert_array_equal(Bbar[-ne:, 0], 0.0)  # th1 is independent
    # K_ee and D_ee unchanged by the loop
    _, _, _, fe = system.chain.dynamics_terms(q, v)
    np.testing.assert_allclose(fbar[-ne:], fe[system.nq_r:], rtol=1e-14)


def test_parallel_tool_input_matrix(tool, tool_state):
    """With bending-only eigenmodes, a chord frame on the long arm and a tangent frame on the
    short arm, the elastic coordinates move the cut joint only across the short arm (absorbed by
    beta): T_e has no s2 row and B̄̄_e = T_e^T B_d vanishes at q_e = 0 (first order)."""
    _, _, _, _, Bbar = tool.minimal_equations(tool_state, np.zeros(tool.nv))
    assert np.abs(Bbar[-tool.nq_e:]).max() < 1e-10
    assert abs(Bbar[1, 1]) > 0.1  # B̄_r != I: cart 2's force acts on alpha (2.158)


def zero_dynamics_counts(tool, state, output):
    H, gamma = tool.outputs[output]
    servo = ClosedOutputServo(tool, H, gamma, guess=state[:tool.nq_r])
    Q, eta0 = servo.zero_dynamics_jacobian(H @ state[:tool.nq_r])
    lam = np.linalg.eigvals(Q)
    return int(np.sum(lam.real < 0)), int(np.sum(lam.real > 0)), lam, eta0


def test_parallel_tool_zero_dynamics(tool, tool_state):
    """Book: combined output non-minimum phase (7 stable / 29 unstable of 36); collocated
    output bounded internal dynamics. Our split of the 36 is 30 / 6 (closed.py docstring)."""
    for output in ("rigid", "collocated"):
        stable, unstable, lam, eta0 = zero_dynamics_counts(tool, tool_state, output)
        assert (stable, unstable) == (36, 0), output
        np.testing.assert_allclose(eta0, 0.0, atol=1e-12)  # horizontal: rest is undeformed
    stable, unstable, lam, _ = zero_dynamics_counts(tool, tool_state, "combined")
    assert stable + unstable == 36 == 2 * tool.nq_e  # the book's 7 + 29
    # non-minimum phase as in the book; our split (eigenmodes, chosen damping), pinned
    assert (stable, unstable) == (30, 6)
    real_unstable = np.sort(lam[(lam.real > 0) & (np.abs(lam.imag) < 1e-6)].real)
    np.testing.assert_allclose(real_unstable, [49.7, 377.8], rtol=2e-3)  # 1/s, bench figures
    assert np.min(np.abs(lam.real)) > 1e-3  # hyperbolic: stable inversion is defined


# ---------------------------------------------------------------- errors


def test_errors_name_what_was_wrong():
    chain = serial_links((L, D, L))
    with pytest.raises(ModelError, match="not a body"):
        ClosedFlexibleChain(chain, [PlanarClosure("pin", "nope", point_b=(D, 0.0))])
    with pytest.raises(ModelError, match="independent"):
        ClosedFlexibleChain(chain, [PlanarClosure("pin", "link3", point_b=(D, 0.0))],
                            independent=["th1", "th2"])
    with pytest.raises(InputError, match="point_b"):
        PlanarClosure("pin", "link3", point_b=(np.nan, 0.0))
    system = parallelogram()
    with pytest.raises(DimensionError, match="H_r must have shape"):
        ClosedOutputServo(system, np.eye(2))
    with pytest.raises(DimensionError, match=r"q must have shape \(9,\)"):
        system.constraint_residual(np.zeros(3))


# ---------------------------------------------------------------- inverse model and loading


def test_servo_inputs_reproduce_the_accelerations(tool, tool_state, rng):
    H, gamma = tool.outputs["combined"]
    servo = ClosedOutputServo(tool, H, gamma, guess=tool_state[:4])
    y = H @ tool_state[:4] + np.array([0.01, -0.02])
    qe, qed = 1e-3 * rng.standard_normal(tool.nq_e), 1e-2 * rng.standard_normal(tool.nq_e)
    yd, ydd = rng.standard_normal(2), rng.standard_normal(2)
    q, v = servo.state(y, yd, qe, qed)
    c, C, _ = tool.constraint_terms(q)
    assert np.max(np.abs(c)) < 1e-13  # m: on the loop
    np.testing.assert_allclose(C @ v, 0.0, atol=1e-12)
    np.testing.assert_allclose(H @ q[:4] + gamma @ q[4:], y, atol=1e-13)
    np.testing.assert_allclose(H @ v[:4] + gamma @ v[4:], yd, atol=1e-12)
    a, _, u = servo.solve(q, v, ydd)
    np.testing.assert_allclose(H @ a[:4] + gamma @ a[4:], ydd, atol=1e-9)
    # the plant driven by u has exactly these accelerations (index-1 form, other solve)
    np.testing.assert_allclose(tool.forward_dynamics(q, v, u), a, atol=1e-7 * np.abs(a).max())


@pytest.mark.slow
def test_stable_inversion_solves_the_internal_dynamics():
    """Dichotomy sweeps on a small tool model: η solves η' = f(t, η) with the stable part at
    rest at the start and the unstable part at rest at the end."""
    from multibody_control.inversion.desired import TabulatedOutput

    small = load_robot("flexible_parallel_tool",
                       parameters=dict(modes_long=3, modes_short=1, link_elements=6))
    q = np.zeros(small.nv)
    q[:4] = [0.0, 0.8, np.pi / 4, 2.4]
    q = small.project_position(q, partitioned=True)
    H, gamma = small.outputs["combined"]
    servo = ClosedOutputServo(small, H, gamma, guess=q[:4])
    t = np.linspace(-0.3, 0.6, 601)  # 1.5 ms; pre-actuation 0.3 s: slowest unstable zero ~50 1/s
    s = np.clip(t / 0.3, 0.0, 1.0)  # quintic rest-to-rest of s1 by 5 mm in 0.3 s
    prof = 10 * s**3 - 15 * s**4 + 6 * s**5
    dprof = (30 * s**2 - 60 * s**3 + 30 * s**4) / 0.3
    ddprof = (60 * s - 180 * s**2 + 120 * s**3) / 0.3**2
    y0 = H @ q[:4]
    y = y0 + np.outer(prof, [0.005, 0.0])
    ytraj = TabulatedOutput(t, y, np.outer(dprof, [0.005, 0.0]), np.outer(ddprof, [0.005, 0.0]))
    res = invert_closed(servo, ytraj, t, method="stable", tol=1e-12)
    assert res.success, res.message
    f = servo.internal_rhs_batch(*ytraj(t), res.eta)
    deta = np.gradient(res.eta, t, axis=0, edge_order=2)
    # second-order differences against the exact right-hand side, away from the jerk jumps of
    # the quintic at t = 0 and 0.3 s (there f' jumps and the difference quotient is O(h));
    # measured 3e-3 of max|f| at 1 ms and 6e-4 at 0.25 ms
    away = (np.abs(t) > 0.01) & (np.abs(t - 0.3) > 0.01)
    away[[0, -1]] = False
    np.testing.assert_allclose(deta[away], f[away], atol=1e-2 * np.abs(f).max())
    # the stable part starts at rest and the unstable part has decayed backwards by e^-15
    assert np.abs(res.eta[0]).max() < 1e-6 * np.abs(res.eta).max()
    y_model = res.q[:, :4] @ H.T + res.q[:, 4:] @ gamma.T
    np.testing.assert_allclose(y_model, y, atol=1e-12)  # m, rad: output reproduced exactly
    # classical inversion of this non-minimum-phase output leaves the same rest state and
    # blows up: the unstable zero dynamics are excited
    classical = invert_closed(servo, ytraj, t, method="classical")
    assert not classical.success or np.abs(classical.eta).max() > 10 * np.abs(res.eta).max()


def test_parallel_tool_ships_and_loads(tmp_path):
    from multibody_dynamics.flexible.loader import load_flexible_model, shipped_flexible_models

    assert "flexible_parallel_tool" in shipped_flexible_models()
    system = load_flexible_model("flexible_parallel_tool")
    assert isinstance(system, ClosedFlexibleChain)
    assert system.nv == system.nq_r + system.nq_e == 22
    assert system.name == "flexible_parallel_tool"
    summary = system.summary()
    assert "cut joint 'middle_joint'" in summary and "independent: s1, alpha" in summary
    # the file is data (test_flexible_model_schema.py); its errors name the file and the key
    from multibody_dynamics.model.resources import robots_dir

    shipped = robots_dir() / "flexible_parallel_tool.yaml"
    bad = tmp_path / "m.yaml"
    bad.write_text(shipped.read_text().replace("modes: 12", "modes: 0"))
    with pytest.raises(ModelError, match=r"m\.yaml: bodies\[2\]\.beam\.modes"):
        load_flexible_model(bad)
