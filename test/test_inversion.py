"""Output analysis and inverse models of underactuated systems (Seifried 2014 Ch. 3-5, 7).

Oracles: the closed-form zero dynamics of a passive link (eq. 7.5), the book's statements on
which designs are minimum phase, agreement between independent formulations (coordinate
transformation, ODE form, index-1 form), and open-loop forward simulation of the plant
under the computed feedforward.  The full-length reproductions of Table 5.3 run in
`make bench` (bench/bench_inversion.py); the tests use a shorter task to stay fast.
"""

import numpy as np
import pytest

from multibody_control.analysis import analyze_output, passive_link_criterion
from multibody_control.inversion import invert
from multibody_control.inversion.methods import verify
from multibody_control.outputs import Output
from multibody_control.tasks import half_circle_task

GAMMA_427 = [[0.0], [0.0], [0.5]]  # Seifried Sect. 4.2.7: y3 = alpha2 + beta/2
GAMMA_523 = [[0, 0], [0, 0], [2 / 3, 1 / 3]]  # eq. 5.23


def fast_task():
    """The Sect. 4.2.7 half circle, in 1.0 s instead of 1.5 s, to keep the tests short."""
    return half_circle_task(t0=0.05, tf=1.05)


# ------------------------------------------------------------------ analysis
def test_passive_arm_zero_dynamics_closed_form(models):
    """Linearized zero dynamics a2 b'' + d b' + c b = 0 with a2 from eq. 7.5 (Table 4.2 data)."""
    m = models["passive_arm"]
    res = analyze_output(m, Output.combined(m, GAMMA_427))
    a2 = passive_link_criterion(0.5, inertia=0.0723, mass=3.438, com=0.25, length_before=0.5)
    c, d = 50.0, 0.25
    expected = np.roots([a2, d, c])
    # the analysis differentiates numerically (central step 1e-6): 1e-6 relative is ample
    np.testing.assert_allclose(np.sort(res.eigenvalues.real), np.sort(expected.real), rtol=1e-6)
    assert a2 < 0 and res.minimum_phase is False
    assert res.relative_degree == (2, 2, 2)


def test_which_gamma_makes_the_427_arm_non_minimum_phase(models):
    """eq. 7.5: minimum phase iff Gamma < (I + m s^2) / (I + m s^2 + l m s) = 0.4006."""
    m = models["passive_arm"]
    crit = (0.0723 + 3.438 * 0.25**2) / (0.0723 + 3.438 * 0.25**2 + 0.5 * 3.438 * 0.25)
    for gamma, expected in ((0.3, True), (crit - 0.01, True), (crit + 0.01, False), (0.5, False)):
        assert analyze_output(m, Output.combined(m, [[0], [0], [gamma]])).minimum_phase is expected


@pytest.mark.parametrize("name, minimum_phase", [("passive_arm_minphase", True),
                                                 ("passive_arm_nonminphase", False)])
def test_tables_51_52(models, name, minimum_phase):
    """Seifried Sect. 5.3: the Table 5.1 design is minimum phase, the Table 5.2 one is not,
    for the end-effector output and for its linearly combined approximation (5.23)."""
    m = models[name]
    for out in (Output(m, ["x", "tip.x", "tip.y"]), Output.combined(m, GAMMA_523)):
        assert analyze_output(m, out).minimum_phase is minimum_phase


def test_fully_actuated_and_singular_outputs(models):
    m = models["arm7"]
    assert analyze_output(m, Output.collocated(m)).minimum_phase is None
    pa = models["passive_arm"]
    res = analyze_output(pa, Output(pa, ["x", "alpha1", "alpha1"]))
    assert res.relative_degree is None and "singular" in res.message


# ------------------------------------------------------------------ inversion
@pytest.fixture(scope="module")
def minphase_runs(models):
    m = models["passive_arm_minphase"]
    task = fast_task()
    exact = Output(m, ["x", "tip.x", "tip.y"])
    runs = {meth: invert(m, exact, task, meth, dt=1e-3, rtol=1e-8, atol=1e-10, t_end=1.2)
            for meth in ("classical", "ode", "index1")}
    return m, task, exact, runs


@pytest.mark.slow
def test_formulations_agree(minphase_runs):
    """Coordinate transformation, ODE form (5.22) and index-1 form (5.20): same feedforward."""
    m, task, exact, runs = minphase_runs
    ref = runs["classical"]
    assert all(r.success for r in runs.values()), [r.message for r in runs.values()]
    scale = np.abs(ref.u).max()
    for meth in ("ode", "index1"):
        # integrator tolerance rtol 1e-8 on internal states of ~0.2 rad: 1e-6 of the peak input
        np.testing.assert_allclose(runs[meth].u, ref.u, rtol=0, atol=1e-6 * scale)
        assert runs[meth].output_error < 1e-7  # servo-constraint drift stays negligible


@pytest.mark.slow
def test_feedforward_reproduces_the_output_open_loop(minphase_runs):
    """The plant driven open loop by u reaches the end-effector path (exact output)."""
    m, task, exact, runs = minphase_runs
    ver = verify(m, runs["ode"], task, exact)
    # sampled at 1 ms and re-interpolated by cubic splines: measured 2e-7 m; 1e-5 m bound
    assert ver.success and ver.max_error < 1e-5, ver.max_error


@pytest.mark.slow
def test_backward_euler_damps_the_internal_dynamics(models):
    """Index-2 DAE with backward Euler: much larger error than the ODE form, shrinking with h."""
    m = models["passive_arm_minphase"]
    task = fast_task()
    exact = Output(m, ["x", "tip.x", "tip.y"])
    errs = {}
    for h in (2e-3, 5e-4):
        r = invert(m, exact, task, "index2_euler", euler_dt=h, dt=h, t_end=1.2)
        errs[h] = verify(m, r, task, exact).max_error
    assert errs[2e-3] > 1e-3 and errs[5e-4] < errs[2e-3] / 2, errs


def test_classical_inversion_of_non_minimum_phase_fails_clearly(models):
    m = models["passive_arm"]
    r = invert(m, Output.combined(m, GAMMA_427), fast_task(), "classical")
    assert not r.success and "non-minimum phase" in r.message and "stable" in r.message


@pytest.fixture(scope="module")
def stable_427(models):
    m = models["passive_arm"]
    task = fast_task()
    out = Output.combined(m, GAMMA_427)
    return m, task, out, invert(m, out, task, "stable", dt=2e-3)


def test_stable_inversion_427(stable_427):
    """Sect. 4.2.7: bounded solution with pre-/post-actuation; output reproduced exactly;
    the end-effector error comes only from the Gamma approximation."""
    m, task, out, r = stable_427
    assert r.success, r.message
    assert r.t[0] < task.law.t0 - 0.3 and r.t[-1] > task.law.tf + 0.3  # pre- and post-actuation
    pre = r.t < task.law.t0
    assert np.abs(r.eta[pre, 0]).max() > 1e-3  # the passive joint moves before t0 (pre-actuation)
    ver = verify(m, r, task, out)
    assert ver.output_error < 1e-5, ver.output_error  # output reproduced (rad)
    # Two equal links 0.5 m with relative angle beta: the chord approximation misses the tip by
    # (l2 + l3)(1 - cos(beta/2)) ~ beta^2/8 m, radially; tangential terms are third order.
    beta_max = np.abs(r.q[:, 3]).max()
    np.testing.assert_allclose(ver.max_error, beta_max**2 / 8, rtol=0.05)


def test_stable_inversion_failures_are_named(models, stable_427):
    m, task, out, r = stable_427
    short = invert(m, out, task, "stable", t_start=task.law.t0)
    assert not short.success and "pre-actuation needs" in short.message
    nodes = invert(m, out, task, "stable", dt=2e-3, max_nodes=20)
    assert not nodes.success and "did not converge" in nodes.message
    singular = invert(m, Output(m, ["x", "alpha1", "alpha1"]), task, "classical")
    assert not singular.success and "singular" in singular.message


def test_fully_actuated_inversion_is_inverse_dynamics(models):
    """No internal dynamics: q = y_d and u = rnea(q_d, v_d, a_d) of the analytic trajectory."""
    from multibody_control.tasks import Task, TimeLaw, linear_move
    from multibody_control.trajectories import rest_to_rest
    from multibody_dynamics import RigidDynamics

    m = models["arm7"]
    q1 = 0.3 * (-1.0) ** np.arange(1, 8)
    task = Task(TimeLaw(0.1, 1.1), tuple(linear_move(n, 0.0, g)
                                         for n, g in zip(m.coordinate_names, q1)))
    r = invert(m, Output.collocated(m), task, "classical", dt=0.01)
    assert r.success and r.eta.shape[1] == 0
    ref = rest_to_rest(r.t, np.zeros(7), q1, 0.1, 1.1)
    dyn = RigidDynamics(m)
    u = np.array([dyn.inverse_dynamics(q, v, a) for q, v, a in zip(ref.q, ref.v, ref.a)])
    # the desired output is tabulated and interpolated (quintic Hermite, exact at the
    # samples): agreement to round-off at the samples
    np.testing.assert_allclose(r.q, ref.q, atol=1e-12)
    np.testing.assert_allclose(r.u, u, atol=1e-9 * np.abs(u).max())


@pytest.mark.slow
def test_closed_loop_inversion_five_bar(models):
    """Fully actuated closed loop: motors prescribed, elbows follow the closure; the projected
    minimum-norm actuation, applied open loop to the constrained simulator, reproduces it."""
    from multibody_control.tasks import Task, TimeLaw, linear_move
    from multibody_dynamics.simulate import SimulatorConfig, simulate

    m = models["five_bar"]
    task = Task(TimeLaw(0.1, 0.6), (linear_move("left_motor", 2.0, 2.3),
                                    linear_move("right_motor", 1.1, 0.9)))
    r = invert(m, Output(m, ["left_motor", "right_motor"]), task, "classical", dt=1e-3,
               ik_guess=[2.0, -1.2, 1.1, 1.2], t_end=0.7)
    assert r.success, r.message
    assert r.output_error < 1e-12
    u_of_t = r.u_interpolant()
    sim = simulate(m, 0.69, q0=r.q[0], v0=r.v[0], tau=lambda t, q, v: m.B @ u_of_t(t),
                   config=SimulatorConfig(dt=2e-4))
    assert sim.success, sim.message
    err = np.abs(np.interp(r.t, sim.t, sim.q[:, 0]) - r.q[:, 0])[r.t < 0.69].max()
    # the input is held over each 0.2 ms step (first-order error): measured 1.1e-4 rad
    assert err < 5e-4, err


@pytest.mark.parametrize("expr, coefficients", [
    ("q2 + q3", [0, 1, 1]), ("q2 - q3", [0, 1, -1]), ("-q2+2.5*q3", [0, -1, 2.5]),
    ("1e-3*q2 + q3", [0, 1e-3, 1]), ("2*q2 - 1.5e+1*q3", [0, 2, -15]), ("q1", [1, 0, 0]),
])
def test_output_rows_parse(models, expr, coefficients):
    np.testing.assert_array_equal(Output(models["prr_surface"], [expr])._S[0], coefficients)


@pytest.mark.parametrize("expr, words", [("q2 + foo", "unknown joint 'foo'"),
                                         ("q2 ++ q3", "cannot read term")])
def test_output_rows_errors(models, expr, words):
    from multibody_dynamics.errors import InputError

    with pytest.raises(InputError, match=words):
        Output(models["prr_surface"], [expr])
