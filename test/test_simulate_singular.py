"""Branch choice at singular configurations (``SimulatorConfig.singular_branch``).

The slider-crank (equal crank and rod, Aghili 2005 Sect. 8) has a constraint row that
vanishes at q1 = +-pi/2, where the branch ``q2 = -2 q1`` (slider moving) crosses the folded
branch ``q2 = pi`` (slider at the crank pivot).  Oracles: the fixed-step mode (projection
after every step, steps much longer than the ambiguous region) against the adaptive mode with
``"continue"``; the crank velocity keeps its sign; energy conservation (horizontal plane,
unactuated, undamped).
"""

import numpy as np
import pytest

from multibody_dynamics.errors import InputError
from multibody_dynamics.simulate import SimulatorConfig, simulate

FIXED = SimulatorConfig(dt=1e-3)
ADAPTIVE = SimulatorConfig(rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="module")
def slider_crank():
    from multibody_dynamics.model import load_model

    return load_model("slider_crank")


def turns(res):
    return float(res.q[-1, 0] - res.q[0, 0]) / (2 * np.pi)


@pytest.mark.parametrize("v0", [[6.0, -12.0], [12.0, -12.0], [12.0, -24.0]])
@pytest.mark.slow
def test_adaptive_continues_like_fixed_steps(slider_crank, v0):
    """10 s through 12-31 singular configurations; before, the adaptive mode reversed the crank
    (0.1, -0.08 and 0.6 turns instead of 6.2, 15.5 and 12.4)."""
    fixed = simulate(slider_crank, 10.0, q0=[0.0, 0.0], v0=v0, config=FIXED, output_dt=0.01)
    adaptive = simulate(slider_crank, 10.0, q0=[0.0, 0.0], v0=v0, config=ADAPTIVE,
                        output_dt=0.01)
    assert fixed.success and adaptive.success, (fixed.message, adaptive.message)
    crossings = int(np.floor((fixed.q[-1, 0] - np.pi / 2) / np.pi)) + 1
    assert crossings >= 12
    assert adaptive.nsingular >= 1  # the bridge was exercised (long steps jump the others)
    # same number of crank turns: measured 6.2071, 15.4651, 12.3648 in both modes
    assert abs(turns(adaptive) - turns(fixed)) < 1e-4, (turns(adaptive), turns(fixed))
    # the same trajectory: RK4 at 1 ms is the less accurate one (about 1e-6 rad after 10 s)
    np.testing.assert_allclose(adaptive.q, fixed.q, rtol=0, atol=1e-4)
    # the crank never reverses
    assert np.all(np.diff(adaptive.q[:, 0]) * np.sign(v0[0]) > 0)
    # energy: measured 2e-10, 5e-10, 8e-10 (adaptive) and 2e-10, 2e-8, 6e-9 (fixed, 1 ms)
    assert adaptive.energy_drift < 1e-8, adaptive.energy_drift
    assert fixed.energy_drift < 1e-7, fixed.energy_drift
    assert adaptive.max_residual < 1e-10  # projected at every sample and every bridge


@pytest.mark.parametrize("rtol,output_dt", [(1e-6, 0.01), (1e-10, 0.5), (1e-8, 2e-4)])
@pytest.mark.slow
def test_continue_is_robust_to_tolerance_and_sampling(slider_crank, rtol, output_dt):
    """Long solver steps (output_dt 0.5 s), loose tolerance, and samples inside the bridge
    steps (output_dt 0.2 ms: samples interpolated within the bridge)."""
    duration = 1.5 if output_dt < 1e-3 else 10.0  # 1.5 s: 2 bridges, 7-8 samples inside each
    fixed = simulate(slider_crank, duration, q0=[0.0, 0.0], v0=[6.0, -12.0],
                     config=SimulatorConfig(dt=5e-4), output_dt=0.01)
    res = simulate(slider_crank, duration, q0=[0.0, 0.0], v0=[6.0, -12.0],
                   config=SimulatorConfig(rtol=rtol, atol=1e-2 * rtol), output_dt=output_dt)
    assert res.success, res.message
    assert abs(turns(res) - turns(fixed)) < 1e-4
    assert res.energy_drift < 1e-7, res.energy_drift  # measured 2e-10 .. 2e-8
    # every sample, interpolated ones included, is on the manifold (Hermite interpolation of
    # an RK4 step of about 1 ms: far below the projection tolerance of the task, 1e-9 m)
    assert res.max_residual < 1e-9, res.max_residual
    assert np.all(np.diff(res.t) > 0) and res.t[-1] == pytest.approx(duration)


@pytest.mark.slow
def test_continue_under_torque_and_from_the_singular_configuration(slider_crank):
    for kwargs in ({"q0": [0.0, 0.0], "tau": [0.05, 0.0]},  # accelerated through 3 crossings
                   {"q0": [np.pi / 2, -np.pi], "v0": [6.0, -12.0]}):  # starts on the crossing
        fixed = simulate(slider_crank, 4.0, config=SimulatorConfig(dt=5e-4), output_dt=0.01,
                         **kwargs)
        adaptive = simulate(slider_crank, 4.0, config=ADAPTIVE, output_dt=0.01, **kwargs)
        assert fixed.success and adaptive.success
        assert abs(turns(adaptive) - turns(fixed)) < 1e-4, (kwargs, turns(adaptive), turns(fixed))
        assert turns(fixed) > 1.0


@pytest.mark.slow
def test_free_branch_also_conserves_energy(slider_crank):
    """``"free"``: whatever the integrator does (measured here: the crank turns back after
    0.1 turn); both continuations satisfy the constraint and conserve energy."""
    res = simulate(slider_crank, 10.0, q0=[0.0, 0.0], v0=[6.0, -12.0],
                   config=SimulatorConfig(rtol=1e-10, atol=1e-12, singular_branch="free"),
                   output_dt=0.01)
    assert res.success and res.nsingular == 0
    assert res.energy_drift < 1e-6 and res.max_residual < 1e-10  # measured 7e-8, 2e-15


def test_other_models_unchanged(models):
    """No singular configuration on the way: "continue" and "free" give the same samples."""
    from multibody_dynamics.projection import ProjectedDynamics

    model = models["four_bar"]
    q0 = ProjectedDynamics(model).project_position(np.array([0.5, 0.3, 1.5])).q
    runs = [simulate(model, 0.3, q0=q0, v0=[3.0, 0, 0], output_dt=0.01,
                     config=SimulatorConfig(rtol=1e-10, atol=1e-12, singular_branch=b))
            for b in ("continue", "free")]
    assert runs[0].nsingular == 0
    np.testing.assert_array_equal(runs[0].q, runs[1].q)


def test_summary_reports_bridges(slider_crank):
    res = simulate(slider_crank, 1.0, q0=[0.0, 0.0], v0=[6.0, -12.0], config=ADAPTIVE)
    assert res.nsingular >= 1 and "singular configuration(s) bridged" in res.summary()


@pytest.mark.parametrize("kwargs,needle", [
    ({"singular_branch": "reverse"}, "singular_branch: expected one of continue, free, got "
                                     "'reverse'"),
    ({"singular_tol": 0.0}, "singular_tol: expected a positive"),
    ({"singular_tol": float("nan")}, "singular_tol"),
])
def test_bad_options(kwargs, needle):
    with pytest.raises(InputError, match=needle):
        SimulatorConfig(**kwargs)
