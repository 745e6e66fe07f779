"""The sampled-loop stability check of controller_node's gains
(multibody_control.controllers.sampled)."""

import numpy as np
import pytest
from scipy.signal import cont2discrete

from multibody_control.controllers.sampled import (
    input_inertias,
    linear_loop_radius,
    sampled_radius,
    unstable_gains,
)
from multibody_dynamics.model import load_model


def _radius_scipy(kp, kd, m, dt):
    """The same loop built independently: scipy's zero-order-hold discretization of the double
    integrator m x'' = u, closed with u_{k+1} = -kp x_k - kd v_k (one period of delay)."""
    A = np.array([[0.0, 1.0], [0.0, 0.0]])
    B = np.array([[0.0], [1.0 / m]])
    Ad, Bd, *_ = cont2discrete((A, B, np.eye(2), np.zeros((2, 1))), dt, method="zoh")
    loop = np.zeros((3, 3))
    loop[:2, :2], loop[:2, 2:] = Ad, Bd
    loop[2, :2] = [-kp, -kd]
    return np.max(np.abs(np.linalg.eigvals(loop)))


@pytest.mark.parametrize("kp, kd, m, dt", [
    (100.0, 20.0, 1.0, 0.002), (100.0, 20.0, 2.4e-4, 0.002), (0.1, 0.02, 2.4e-4, 0.01),
    (400.0, 40.0, 14.2, 0.004), (0.0, 0.0, 1.0, 0.001),
])
def test_radius_matches_zoh_discretization(kp, kd, m, dt):
    assert sampled_radius(kp, kd, m, dt) == pytest.approx(_radius_scipy(kp, kd, m, dt), rel=1e-9)


def test_free_inertia_does_not_exceed_the_diagonal():
    """The inertia with the passive joints free is at most the diagonal entry (equal for a
    joint with no passive coordinate coupled to it) and positive."""
    import pinocchio as pin

    for name in ("arm7", "passive_arm", "five_bar", "two_wheeled_cart"):
        model = load_model(name)
        M = pin.crba(model.pin_model, model.pin_model.createData(), model.q_rest)
        M = np.triu(M) + np.triu(M, 1).T
        B = np.asarray(model.B, float)
        diag = np.array([M[i, i] for i in np.argmax(np.abs(B), axis=0)])
        inertia = input_inertias(model)
        assert np.all(inertia > 0) and np.all(inertia <= diag * (1 + 1e-12)), name
    # arm7 has no passive joint: the diagonal itself (joint 7: 2.4e-4 kg m^2, its rotor)
    arm = load_model("arm7")
    assert input_inertias(arm)[6] == pytest.approx(2.4e-4, rel=0.01)


def test_refuses_the_default_pd_gains_on_arm7_and_accepts_the_bringup_ones():
    from pathlib import Path

    import yaml

    arm = load_model("arm7")
    inertia = input_inertias(arm)
    bad = unstable_gains(100.0, 20.0, inertia, 0.002, arm.input_names)
    assert any(b.startswith("joint7 ") and "kd*dt/M = 167" in b for b in bad), bad
    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "bringup"
                          / "arm7.yaml").read_text())
    for law in ("pd", "pid"):
        g = cfg["controller_node"][law]
        assert unstable_gains(g["kp"], g["kd"], inertia, 0.002, arm.input_names) == []


@pytest.mark.parametrize("kp, kd, m, dt", [
    (100.0, 20.0, 1.0, 0.002), (100.0, 20.0, 2.4e-4, 0.002), (0.5, 0.01, 5e-4, 0.001),
])
def test_linear_loop_radius_of_one_inertia(kp, kd, m, dt):
    """One inertia: with one period of delay it is the loop of sampled_radius; without delay
    the closed loop Ad - Bd K of scipy's zero-order-hold discretization."""
    A = np.array([[0.0, 1.0], [0.0, 0.0]])
    B = np.array([[0.0], [1.0 / m]])
    assert linear_loop_radius(A, B, kp, kd, dt, delay=1) == pytest.approx(
        _radius_scipy(kp, kd, m, dt), rel=1e-9)
    Ad, Bd, *_ = cont2discrete((A, B, np.eye(2), np.zeros((2, 1))), dt, method="zoh")
    direct = np.max(np.abs(np.linalg.eigvals(Ad - Bd @ np.array([[kp, kd]]))))
    assert linear_loop_radius(A, B, kp, kd, dt, delay=0) == pytest.approx(direct, rel=1e-9)


def test_linear_loop_radius_two_joints_decoupled():
    """Two uncoupled inertias: the radius of the pair is the larger of the two loops."""
    m = np.array([1.0, 2.4e-4])
    A = np.zeros((4, 4))
    A[:2, 2:] = np.eye(2)
    B = np.zeros((4, 2))
    B[2:] = np.diag(1.0 / m)
    kp, kd, dt = np.array([100.0, 0.1]), np.array([20.0, 0.02]), 0.002
    both = linear_loop_radius(A, B, kp, kd, dt, delay=1)
    assert both == pytest.approx(max(sampled_radius(p, d, mm, dt) for p, d, mm in zip(kp, kd, m)),
                                 rel=1e-9)
