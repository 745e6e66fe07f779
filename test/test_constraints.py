"""Closure kinematics: residual, Jacobian and bias of every closure type (constraints.py)."""

import numpy as np
import pinocchio as pin
import pytest

from multibody_dynamics.constraints import Constraints, closure_rows
from multibody_dynamics.errors import DimensionError, ModelError
from multibody_dynamics.model.config import CLOSURE_ROWS, ClosureSpec
from multibody_dynamics.projection import ProjectedDynamics

CLOSED = ["slider_crank", "four_bar", "five_bar", "prr_surface"]

#: Rough assembly guesses; the Newton projection finishes them.
GUESS = {
    "slider_crank": [0.7, -1.3],
    "four_bar": [0.5, 0.3, 1.5],
    "five_bar": [2.0, -1.2, 1.1, 1.2],
    "prr_surface": [-0.5, 0.3, 0.2],
}

# Central differences with step 1e-6: truncation ~1e-12, round-off ~1e-16/1e-6 = 1e-10 on
# quantities of order one; 1e-7 leaves margin for derivatives up to ~100.
FD_STEP = 1e-6
FD_TOL = 1e-7


def spatial_spec(ctype):
    """A closure of type ``ctype`` between two moving bodies of arm7 (every row non-trivial)."""
    return ClosureSpec("c", ctype, "tool0", "link3", axis=(0.6, 0.8, 0.0), normal=(0.0, 0.0, 1.0))


def fd_velocity(c, pm, q, v, h=FD_STEP):
    """d/dt phi(q(t)) along q(t) = q (+) t v, central differences on the manifold."""
    return (c.residual(pin.integrate(pm, q, h * v))
            - c.residual(pin.integrate(pm, q, -h * v))) / (2 * h)


def fd_acceleration(c, pm, q, v, a, h=1e-5):
    """d/dt [A(q(t)) v(t)] with q(t) = q (+) (t v + t^2 a / 2), v(t) = v + t a, at t = 0."""
    def Av(t):
        return c.jacobian(pin.integrate(pm, q, t * v + 0.5 * t * t * a)) @ (v + t * a)
    return (Av(h) - Av(-h)) / (2 * h)


@pytest.mark.parametrize("ctype", list(CLOSURE_ROWS))
def test_rows_and_labels(models, ctype):
    c = Constraints(models["arm7"], [spatial_spec(ctype)])
    assert c.n_rows == c.n_holonomic == CLOSURE_ROWS[ctype]
    assert len(c.labels) == CLOSURE_ROWS[ctype] and all(lab.startswith("c.") for lab in c.labels)
    assert c.jacobian(models["arm7"].neutral()).shape == (CLOSURE_ROWS[ctype], 7)


@pytest.mark.parametrize("ctype", list(CLOSURE_ROWS))
def test_jacobian_and_bias_against_finite_differences(models, rng, ctype):
    model = models["arm7"]
    pm = model.pin_model
    c = Constraints(model, [spatial_spec(ctype)])
    for _ in range(3):
        q = pin.randomConfiguration(pm, -np.ones(7), np.ones(7))
        v, a = rng.normal(size=7), rng.normal(size=7)
        A = c.jacobian(q)
        np.testing.assert_allclose(A @ v, fd_velocity(c, pm, q, v), atol=FD_TOL)
        gamma = c.bias(q, v)
        # step 1e-5 on a second derivative: truncation ~1e-10, round-off ~1e-11
        np.testing.assert_allclose(A @ a + gamma, fd_acceleration(c, pm, q, v, a), atol=1e-7)
        A2, g2 = c.jacobian_and_bias(q, v)
        # same arithmetic along another call path: equal to round-off
        np.testing.assert_allclose(A2, A, atol=1e-14)
        np.testing.assert_allclose(g2, gamma, atol=1e-13)


@pytest.mark.parametrize("robot", CLOSED)
def test_shipped_closures_against_finite_differences(models, rng, robot):
    """Includes closures to a world-fixed frame (slider rail, surface)."""
    model = models[robot]
    pm = model.pin_model
    c = Constraints(model)
    q = model.neutral() + rng.uniform(-1, 1, model.nq)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    np.testing.assert_allclose(c.jacobian(q) @ v, fd_velocity(c, pm, q, v), atol=FD_TOL)
    np.testing.assert_allclose(c.jacobian(q) @ a + c.bias(q, v), fd_acceleration(c, pm, q, v, a),
                               atol=1e-7)  # as in the spatial test


@pytest.mark.parametrize("robot", CLOSED)
def test_residual_zero_at_assembled_configuration(models, robot):
    model = models[robot]
    pd = ProjectedDynamics(model)
    res = pd.project_position(np.array(GUESS[robot], float))
    assert res.success, res.message
    assert 0 <= res.iterations <= 8  # quadratic convergence from a rough guess
    phi = pd.constraints.residual(res.q)
    # the Newton tolerance (1e-12) plus one residual evaluation in round-off
    np.testing.assert_allclose(phi, 0.0, atol=1e-12)

    # the geometry, independently of the residual's definition
    data = model.create_data()
    pin.framesForwardKinematics(model.pin_model, data, res.q)
    spec = model.closures[0]
    pa = data.oMf[model.frame_id(spec.frame_a)].translation
    pb = data.oMf[model.frame_id(spec.frame_b)].translation
    if spec.type in ("revolute", "planar_revolute"):
        np.testing.assert_allclose(pa, pb, atol=1e-12)  # m; the joint centres coincide
    else:  # point_on_line: the slider pin / tip on the x axis of the world
        assert abs(pa[1] - pb[1]) < 1e-12  # m


def test_residual_units_and_planar_angle(models):
    """planar_weld's angle row is sin(theta_a - theta_b): q_crank + q_coupler - q_rocker here."""
    model = models["four_bar"]
    spec = ClosureSpec("w", "planar_weld", "coupler_tip", "rocker_tip", normal=(0.0, 0.0, 1.0))
    c = Constraints(model, [spec])
    q = np.array([0.3, 0.9, -0.4])
    assert c.labels == ("w.t1", "w.t2", "w.rn")
    np.testing.assert_allclose(c.residual(q)[2], np.sin(0.3 + 0.9 + 0.4), rtol=1e-14)  # round-off
    # position rows: the offset of the two tips resolved in rocker_tip axes [m]
    data = model.create_data()
    pin.framesForwardKinematics(model.pin_model, data, q)
    oMa, oMb = data.oMf[model.frame_id("coupler_tip")], data.oMf[model.frame_id("rocker_tip")]
    r = oMb.rotation.T @ (oMa.translation - oMb.translation)
    rows = closure_rows(spec)
    np.testing.assert_allclose(c.residual(q)[:2], rows.pos_dirs @ r, atol=1e-15)  # round-off


def test_weld_rotation_residual_is_rotation_vector_to_first_order(models):
    model = models["arm7"]
    pm = model.pin_model
    spec = ClosureSpec("w", "weld", "tool0", "link3")
    c = Constraints(model, [spec])
    data = model.create_data()
    q = pin.randomConfiguration(pm, -np.ones(7), np.ones(7))
    pin.framesForwardKinematics(pm, data, q)
    R = data.oMf[model.frame_id("link3")].rotation.T @ data.oMf[model.frame_id("tool0")].rotation
    # 1/2 vex(R - R^T) = sin(theta) * axis of R (module docstring)
    theta_axis = pin.log3(R)
    theta = np.linalg.norm(theta_axis)
    np.testing.assert_allclose(c.residual(q)[3:], np.sin(theta) * theta_axis / theta, atol=1e-14)


def test_four_bar_revolute_closure_is_redundant(models):
    """Five rows for a planar loop: rank 2, not an error (the projection handles it)."""
    model = models["four_bar"]
    c = Constraints(model)
    assert c.n_rows == 5
    assert c.labels == tuple(f"coupler_rocker.{s}" for s in ("x", "y", "z", "r1", "r2"))
    pd = ProjectedDynamics(model)
    q = pd.project_position(np.array(GUESS["four_bar"])).q
    A = c.jacobian(q)
    assert np.linalg.matrix_rank(A) == 2
    assert pd.projector(q).rank == 2
    # the out-of-plane rows vanish identically for a planar mechanism (exact zeros)
    assert np.all(A[2:] == 0.0)


@pytest.mark.slow
def test_pfaffian_rows(models, rng):
    """A Pfaffian constraint carrying the slider-crank's own rows gives the same dynamics."""
    model = models["slider_crank"]
    holo = Constraints(model)
    ref = Constraints(model)
    pf = Constraints(model, closures=())
    pf.add_pfaffian("slider_vel", 1, lambda q, v: ref.jacobian_and_bias(q, v), labels=["vy"])
    assert pf.n_holonomic == 0 and pf.n_rows == 1 and pf.labels == ("vy",)
    assert pf.residual(model.neutral()).shape == (0,)
    q, v = np.array([0.7, -1.4]), rng.normal(size=2)
    np.testing.assert_allclose(pf.jacobian(q), holo.jacobian(q), atol=0)  # same numbers
    np.testing.assert_allclose(pf.bias(q, v), holo.bias(q, v), atol=0)
    tau = rng.normal(size=2)
    a_h = ProjectedDynamics(model, holo).acceleration(q, v, tau)
    a_p = ProjectedDynamics(model, pf).acceleration(q, v, tau)
    np.testing.assert_allclose(a_p, a_h, rtol=1e-13)  # identical algebra, round-off only

    both = Constraints(model)
    both.add_pfaffian("extra", 1, lambda q, v: (np.array([[1.0, 0.0]]), np.zeros(1)))
    assert both.labels == ("slider.n", "extra.0") and both.n_holonomic == 1
    assert both.jacobian(q).shape == (2, 2)

    bad = Constraints(model, closures=())
    bad.add_pfaffian("bad", 1, lambda q, v: (np.zeros((2, 2)), np.zeros(2)))
    with pytest.raises(DimensionError, match=r"expected \(1, 2\)"):
        bad.jacobian(q)
    with pytest.raises(DimensionError, match="positive integer"):
        bad.add_pfaffian("x", 0, lambda q, v: None)


def test_bad_input(models):
    model = models["slider_crank"]
    with pytest.raises(ModelError, match="unknown type"):
        Constraints(model, [ClosureSpec("c", "hinge", "slider_pin", "slider_rail")])
    with pytest.raises(ModelError, match="needs an axis"):
        Constraints(model, [ClosureSpec("c", "revolute", "slider_pin", "slider_rail")])
    with pytest.raises(DimensionError, match=r"expected shape \(2,\)"):
        Constraints(model).residual(np.zeros(3))
