"""The per-step API (``Simulator.step``, used by the scenario runner and simulator_node)
against the whole-run compiled kernel of ``simulate``.

Both call the same compiled fixed step (multibody_dynamics/fast_step.py: ``_step_entry`` one
step per call, ``_run_entry`` a whole run), so with the same settings and a held input the
states after N steps must agree to round-off; the independent check of the step itself against
pinocchio and the reference path is test_fast_step.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from multibody_dynamics import load_model
from multibody_dynamics.errors import DimensionError, InputError
from multibody_dynamics.projection import ProjectedDynamics
from multibody_dynamics.simulate import Simulator, SimulatorConfig, simulate

pytest.importorskip("numba")


def _case(name):
    model = load_model(name)
    if name == "four_bar":  # the state of the speed bench
        q0 = ProjectedDynamics(model).project_position(np.array([0.5, 0.3, 1.5])).q
        return model, q0, np.array([3.0, 0.0, 0.0])
    if name == "slider_crank":
        return model, np.array([0.0, 0.0]), np.array([6.0, -12.0])
    return model, model.q_initial.copy(), np.linspace(-1.0, 1.0, model.nv)  # arm7 moving


@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "arm7"])
def test_step_loop_matches_whole_run(name):
    model, q0, v0 = _case(name)
    n = 300
    res = simulate(model, n * 1e-3, q0=q0, v0=v0, config=SimulatorConfig(dt=1e-3))
    sim = Simulator(model, SimulatorConfig(dt=1e-3))
    assert sim.fast_stepper() is not None  # the compiled path is the one under test
    sim.reset(q0, v0)
    tau = np.zeros(model.nv)  # the held input of simulate without u
    for _ in range(n):
        q, v = sim.step(tau)
    assert res.success and res.nsteps == n == sim.nsteps
    # the same compiled arithmetic in both (bit-identical when measured); 1e-12 [rad | m],
    # 1e-11 [rad/s | m/s] (|v| up to 12 rad/s) allow round-off from a reordering only
    np.testing.assert_allclose(q, res.q[-1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(v, res.v[-1], rtol=0, atol=1e-11)
    assert sim.t == pytest.approx(n * 1e-3, abs=1e-12)


def test_step_returns_new_arrays_and_checks_tau():
    model, q0, v0 = _case("four_bar")
    sim = Simulator(model, SimulatorConfig(dt=1e-3))
    sim.reset(q0, v0)
    q1, v1 = sim.step(np.zeros(3))
    q1_kept = q1.copy()
    q2, _ = sim.step(np.zeros(3))
    assert q2 is not q1 and np.array_equal(q1, q1_kept)  # a held sample is not overwritten
    # non-contiguous and list inputs give the same step as a contiguous array
    a, b = Simulator(model), Simulator(model)
    a.reset(q0, v0)
    b.reset(q0, v0)
    wide = np.zeros((3, 2))
    wide[:, 0] = [0.5, 0.0, 0.0]
    assert np.array_equal(a.step(wide[:, 0])[0], b.step([0.5, 0.0, 0.0])[0])
    before = (sim.q.copy(), sim.v.copy(), sim.t, sim.nsteps)
    with pytest.raises(InputError, match="tau"):
        sim.step(np.array([0.0, np.nan, 0.0]))
    with pytest.raises(DimensionError, match=r"tau: expected shape \(3,\)"):
        sim.step(np.zeros(2))
    # a rejected input leaves the state as it was
    assert np.array_equal(sim.q, before[0]) and np.array_equal(sim.v, before[1])
    assert (sim.t, sim.nsteps) == before[2:]


@pytest.mark.parametrize("name", ["four_bar", "arm7"])
def test_simulator_node_plant_takes_the_compiled_step(name):
    """simulator_node steps ``robot_stepper(model, SimulatorConfig(dt=1/rate_hz, method))``
    with one ``step(tau)`` per tick: that plant must be the compiled one."""
    from multibody_dynamics.robot import load_robot, robot_stepper

    sim = robot_stepper(load_robot(name), SimulatorConfig(dt=1.0 / 500.0, method="rk4"))
    assert isinstance(sim, Simulator) and sim.fast_stepper() is not None
