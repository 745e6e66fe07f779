"""simulate_batch: K simulations in one call equal K single simulate() calls bitwise.

Oracle: multibody_dynamics.simulate.simulate with the same arguments, one run at a time (a
fresh Simulator per run); the batch shares one simulator, so any state it carried over from
one run to the next would show as a difference.
"""

import numpy as np
import pytest

from multibody_dynamics import load_model
from multibody_dynamics.batch import simulate_batch
from multibody_dynamics.errors import DimensionError, InputError
from multibody_dynamics.projection import ProjectedDynamics
from multibody_dynamics.simulate import SimulatorConfig, simulate

CFG = SimulatorConfig(dt=1e-3)


def _assert_same(batch, singles):
    assert len(batch.results) == len(singles)
    for got, want in zip(batch.results, singles):
        assert got.success == want.success and got.message == want.message
        for name in ("t", "q", "v", "energy", "lam", "residual", "tau"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)


def test_closed_loop_initial_states_equal_single_runs():
    model = load_model("four_bar")
    q0 = ProjectedDynamics(model).project_position(np.array([0.5, 0.3, 1.5])).q
    rng = np.random.default_rng(1)
    v0 = rng.normal(scale=2.0, size=(3, model.nv))  # projected onto null(A) by each run
    batch = simulate_batch(model, 0.2, q0=q0, v0=v0, config=CFG, output_dt=0.01)
    singles = [simulate(model, 0.2, q0=q0, v0=v, config=CFG, output_dt=0.01) for v in v0]
    _assert_same(batch, singles)
    assert batch.success.all() and batch.stacked("q").shape == (3, 21, model.nq)
    # the runs differ: the batch did not just repeat one
    assert np.ptp(batch.final_q, axis=0).max() > 1e-3


def test_open_chain_inputs_and_shared_state_equal_single_runs():
    model = load_model("passive_arm2")
    rng = np.random.default_rng(2)
    tau = rng.normal(size=(4, model.nv))
    q0 = model.q_rest + 0.05
    batch = simulate_batch(model, 0.1, q0=q0, tau=tau, config=CFG)
    _assert_same(batch, [simulate(model, 0.1, q0=q0, tau=u, config=CFG) for u in tau])


def test_feedback_law_shared_by_every_run():
    model = load_model("passive_arm2")
    q0 = np.array([model.q_rest + d for d in (0.0, 0.02, -0.03)])

    def law(t, q, v):
        return -5.0 * v

    batch = simulate_batch(model, 0.05, q0=q0, tau=law, config=CFG)
    _assert_same(batch, [simulate(model, 0.05, q0=q, tau=law, config=CFG) for q in q0])


def test_parameter_sets_through_prepare():
    """K masses of the last link set in place; each run equals a run of a model loaded with
    that mass."""
    masses = [1.0, 2.5, 4.0]
    model = load_model("passive_arm2")
    jid = model.pin_model.njoints - 1

    def prepare(m, k):
        inertia = m.pin_model.inertias[jid]
        inertia.mass = masses[k]
        m.pin_model.inertias[jid] = inertia

    q0 = model.q_rest + 0.1
    batch = simulate_batch(model, 0.1, q0=q0, runs=3, prepare=prepare, config=CFG)
    singles = []
    for k in range(3):
        fresh = load_model("passive_arm2")
        prepare(fresh, k)
        singles.append(simulate(fresh, 0.1, q0=q0, config=CFG))
    _assert_same(batch, singles)
    assert np.ptp(batch.final_q, axis=0).max() > 1e-6  # the masses changed the motion


def test_throughput_is_reported_per_core():
    model = load_model("passive_arm2")
    batch = simulate_batch(model, 0.05, runs=2, config=CFG)
    tp = batch.throughput()
    assert tp["runs"] == 2 and tp["cores"] == 1
    assert tp["runs_per_s_per_core"] == pytest.approx(2 / batch.wall_time)
    assert tp["simulated_s_per_wall_s_per_core"] == pytest.approx(0.1 / batch.wall_time)


def test_bad_arguments_are_named_before_any_run():
    model = load_model("four_bar")
    calls = []

    def prepare(m, k):
        calls.append(k)

    with pytest.raises(DimensionError, match="number of runs differs"):
        simulate_batch(model, 0.1, q0=np.zeros((2, model.nq)), v0=np.zeros((3, model.nv)))
    with pytest.raises(DimensionError, match=rf"v0: expected \({model.nv},\)"):
        simulate_batch(model, 0.1, v0=np.zeros((2, model.nv + 1)))
    with pytest.raises(InputError, match=r"q0: expected finite values, got NaN/inf in runs \[1\]"):
        q = np.zeros((2, model.nq))
        q[1, 0] = np.nan
        simulate_batch(model, 0.1, q0=q, prepare=prepare)
    with pytest.raises(InputError, match="give K runs"):
        simulate_batch(model, 0.1)
    with pytest.raises(InputError, match="duration"):
        simulate_batch(model, -1.0, runs=2)
    with pytest.raises(InputError, match="runs"):
        simulate_batch(model, 0.1, runs=0)
    assert calls == []  # nothing ran


def test_monte_carlo_over_a_process_pool_equals_single_runs():
    """The design executors' local pool (2 processes, 3 chunks): the runs come back in order,
    each bitwise the single simulate() call."""
    from multibody_control.design.executors import open_executor
    from multibody_control.design.montecarlo import monte_carlo

    model = load_model("passive_arm2")
    rng = np.random.default_rng(6)
    v0 = rng.normal(size=(5, model.nv))
    with open_executor("pool", 2) as backend:
        mc = monte_carlo("passive_arm2", 0.05, v0=v0, config=CFG, backend=backend, chunks=3)
    local = monte_carlo("passive_arm2", 0.05, v0=v0, config=CFG)  # in this process
    singles = [simulate(model, 0.05, v0=v, config=CFG) for v in v0]
    _assert_same(mc, singles)
    _assert_same(local, singles)
    tp = mc.throughput()
    assert tp["runs"] == 5 and tp["workers"] == 2 and tp["runs_per_s_per_worker"] > 0
    with pytest.raises(InputError, match="callable"):
        monte_carlo("passive_arm2", 0.05, runs=2, tau=lambda t, q, v: 0 * v)
    with pytest.raises(DimensionError, match="v0"):
        monte_carlo("passive_arm2", 0.05, v0=np.zeros((2, 3)))
