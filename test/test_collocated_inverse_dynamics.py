"""Collocated inverse dynamics of an underactuated closed loop (dual_arm_load: 7 passive
coordinates, 3 closure rows, 2 inputs), the torques dynamics_node publishes for it.

Checked against formulations that do not share its code: the motion comes from the KKT
saddle-point direct dynamics (:class:`KKTDynamics`), the equation of motion is re-evaluated
with pinocchio's recursive Newton-Euler (``rnea``, not the ``crba`` mass matrix the method
uses), and the constraint with the raw Jacobian ``A`` (not its orthonormal row basis).
"""

import numpy as np
import pinocchio as pin
import pytest

from multibody_dynamics.constrained_baselines import KKTDynamics
from multibody_dynamics.constraints import Constraints
from multibody_dynamics.model import load_model
from multibody_dynamics.projection import ProjectedDynamics
from multibody_dynamics.rigid import RigidDynamics

# dual_arm_load's accelerations under inputs of a few N m are O(1-100) rad/s^2 and M spans
# 1e-2 .. 50 kg (m^2); the two formulations agree to a few condition numbers times eps.
TOL = 1e-8


@pytest.fixture(scope="module")
def dual():
    model = load_model("dual_arm_load")
    return model, ProjectedDynamics(model)


def _state(pd, seed):
    """An assembled configuration near q = 0 and an admissible velocity."""
    rng = np.random.default_rng(seed)
    model = pd.model
    q = pd.project_position(0.2 * rng.standard_normal(model.nq)).q
    v = pd.project_velocity(q, rng.standard_normal(model.nv))
    A, _ = pd.constraints.jacobian_and_bias(q, v)
    assert np.abs(A @ v).max() < 1e-9 and np.abs(pd.constraints.residual(q)).max() < 1e-9
    return q, v


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_the_input_that_produced_the_motion(dual, seed):
    """The plant (KKT direct dynamics) moves under known inputs; the collocated inverse
    dynamics of that acceleration returns those inputs and the same acceleration."""
    model, pd = dual
    q, v = _state(pd, seed)
    u_true = np.random.default_rng(10 + seed).uniform(-5.0, 5.0, model.nu)
    a_plant = KKTDynamics(model).forward_dynamics_result(q, v, model.B @ u_true).a
    res = pd.collocated_inverse_dynamics(q, v, a_plant)
    assert res.success, res.message
    np.testing.assert_allclose(res.u, u_true, rtol=0, atol=TOL * 10)
    np.testing.assert_allclose(res.a, a_plant, rtol=0, atol=TOL * max(1, np.abs(a_plant).max()))
    passive = np.asarray(model.passive, bool)
    assert np.all(res.tau[passive] == 0.0)


def test_satisfies_the_equations_of_motion(dual):
    """For an arbitrary measured acceleration (not one the model produced): the returned
    motion obeys M a + h - tau_s = B u + A^T lam (rnea), A a + gamma = 0, and the actuated
    coordinates get the measured acceleration."""
    model, pd = dual
    q, v = _state(pd, 3)
    a_meas = np.random.default_rng(4).standard_normal(model.nv) * 10.0
    res = pd.collocated_inverse_dynamics(q, v, a_meas)
    assert res.success, res.message
    data = model.pin_model.createData()
    lhs = pin.rnea(model.pin_model, data, q, v, res.a) - RigidDynamics(model).spring_forces(q, v)
    A, gamma = Constraints(model).jacobian_and_bias(q, v)
    np.testing.assert_allclose(lhs, model.B @ res.u + A.T @ res.lam, rtol=0, atol=TOL)
    np.testing.assert_allclose(A @ res.a + gamma, 0.0, rtol=0, atol=TOL)
    np.testing.assert_allclose(model.B.T @ res.a, model.B.T @ a_meas, rtol=0, atol=TOL)
    # the minimum-norm constrained inverse dynamics has no answer here (eq. 64)
    assert not pd.inverse_dynamics_result(q, v, res.a).success


def test_input_locked_by_a_constraint_is_reported(dual):
    """A constraint row along an actuated coordinate leaves that input acting only against
    the constraint: no torque moves it, reported, nothing finite claimed."""
    model, _ = dual
    k = model.coordinate_names.index("arm1_joint2")
    cons = Constraints(model)
    row = np.zeros((1, model.nv))
    row[0, k] = 1.0
    cons.add_pfaffian("lock", 1, lambda q, v: (row, np.zeros(1)))
    pd = ProjectedDynamics(model, cons)
    res = pd.collocated_inverse_dynamics(np.zeros(model.nq), np.zeros(model.nv),
                                         np.zeros(model.nv))
    assert not res.success and res.sigma_min < 1e-9
    assert "T1" in res.message and "singular" in res.message
    assert not np.any(np.isfinite(res.tau))


def test_dynamics_node_loads_of_dual_arm_load(dual):
    """dynamics_node's compute function: dual_arm_load takes the collocated path, publishes the
    plant's input as its inverse-dynamics torque with no problem to warn about; four_bar and
    five_bar keep Aghili's minimum-norm path."""
    pytest.importorskip("rclpy")
    from multibody_dynamics.ros.dynamics_node import closed_loop_loads, underactuated_closed_loop

    model, pd = dual
    assert underactuated_closed_loop(pd)
    for name in ("four_bar", "five_bar", "slider_crank"):
        assert not underactuated_closed_loop(ProjectedDynamics(load_model(name))), name
    q, v = _state(pd, 5)
    u_true = np.array([2.0, -1.5])
    a_plant = KKTDynamics(model).forward_dynamics_result(q, v, model.B @ u_true).a
    # a measured acceleration: the plant's, with noise on the passive coordinates, which the
    # collocated torques do not use
    passive = np.asarray(model.passive, bool)
    a_meas = a_plant + passive * np.random.default_rng(6).standard_normal(model.nv)
    loads = closed_loop_loads(pd, q, v, a_meas, collocated=True)
    assert loads.problem == ""
    np.testing.assert_allclose(loads.tau, model.B @ u_true, rtol=0, atol=TOL * 10)
    # at rest: no gravity, so the holding inputs are the springs' pull on the actuated
    # joints through the loop; the motors then stay still for an instant (KKT plant)
    a_rest = KKTDynamics(model).forward_dynamics_result(q, np.zeros(model.nv), loads.gravity).a
    np.testing.assert_allclose(model.B.T @ a_rest, 0.0, rtol=0, atol=TOL)
    assert loads.lam.shape == (pd.constraints.n_rows,)
    assert "not controllable" in closed_loop_loads(pd, q, v, a_meas, collocated=False).problem
