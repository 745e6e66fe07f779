"""Causal inversion with free trajectory parameters (Seifried 2014 eqs. 3.77-3.82, 4.129-4.135).

Reference problem: the Sect. 4.2.7 arm (Table 4.2) with the linearly combined output
y = [x, alpha1, alpha2 + beta/2] (non-minimum phase: zero-dynamics eigenvalues -24.8 and
+28.3 1/s), the half circle in 1.0 s as in test_inversion.py, sampled every 2 ms.
Oracles: the start and end equilibria (causality, rest at tf), open-loop forward
simulation of the plant under the feedforward, the shape functions' boundary values, and
the book's own route to the same parameters (eq. 3.82 as a boundary value problem with
unknown parameters, solved by collocation: scipy's solve_bvp in place of bvp4c).
"""

import numpy as np
import pytest

from multibody_control.inversion import invert
from multibody_control.inversion.causal import CausalInversionResult, ShapedOutput
from multibody_control.inversion.methods import verify
from multibody_control.outputs import Output
from multibody_control.tasks import half_circle_task
from multibody_dynamics.errors import InputError

GAMMA_427 = [[0.0], [0.0], [0.5]]  # Seifried Sect. 4.2.7: y3 = alpha2 + beta/2


def fast_task():
    """The Sect. 4.2.7 half circle in 1.0 s (t0 = 0.05 s), as in test_inversion.py."""
    return half_circle_task(t0=0.05, tf=1.05)


@pytest.fixture(scope="module")
def causal_427(models):
    m = models["passive_arm"]
    task = fast_task()
    out = Output.combined(m, GAMMA_427)
    return m, task, out, invert(m, out, task, "causal", dt=2e-3)


def test_causal_result_reports_the_solution(causal_427):
    m, task, out, r = causal_427
    assert r.success, r.message
    assert isinstance(r, CausalInversionResult) and r.method == "causal"
    assert r.free_parameters.shape == (2,)  # default: one per internal state (beta, beta')
    assert r.free_rows == ("alpha2 + 0.5*beta",) * 2  # default: the last output row
    assert "converged" in r.message and r.iterations > 0 and r.segments >= 1
    assert r.t_pre == 0.0 and r.t_post == 0.0


def test_causal_starts_at_rest_without_pre_actuation(causal_427):
    """eta(t0) = eta0 exactly: nothing moves and the input is constant up to t0."""
    m, task, out, r = causal_427
    t0 = task.law.t0
    before = r.t <= t0
    assert r.t[0] < t0 and before.sum() > 2
    np.testing.assert_array_equal(r.eta[before], 0.0)  # the spring's rest, no pre-actuation
    # the same equilibrium input at every sample up to t0 (the modified output's velocity
    # and acceleration vanish at t0 as well): equal to round-off
    np.testing.assert_allclose(r.u[before], np.tile(r.u[0], (before.sum(), 1)), rtol=0,
                               atol=1e-9 * np.abs(r.u).max())
    np.testing.assert_allclose(r.v[before], 0.0, atol=1e-12)


def test_causal_ends_at_rest_at_tf(causal_427):
    """The forward solution lands on the equilibrium at tf: no post-actuation."""
    m, task, out, r = causal_427
    tf = task.law.tf
    # Newton runs to round-off (measured ~1e-13 rad, rad/s); 1e-8 is the default end_tol
    assert r.end_state_error < 1e-8 and r.unstable_end_error < 1e-8 and r.max_defect < 1e-8
    after = r.t >= tf
    # eta is held at etaf after tf, so the input is constant there; the sample at tf comes
    # from the shooting solution, off by the end-state error times a gain ~1e2 N/rad
    np.testing.assert_allclose(r.u[after], np.tile(r.u[-1], (after.sum(), 1)), rtol=0,
                               atol=1e-6 * np.abs(r.u).max())
    np.testing.assert_allclose(r.v[after], 0.0, atol=1e-6)
    # bounded but not trivial internal motion during [t0, tf]
    assert 1e-3 < np.abs(r.eta[:, 0]).max() < 1.0


def test_causal_feedforward_reproduces_its_output_open_loop(causal_427):
    m, task, out, r = causal_427
    ver = verify(m, r, task, out)
    # the open-loop plant reproduces the *modified* output: u sampled at 2 ms and
    # re-interpolated by cubic splines, measured ~1e-7 rad; 1e-5 as in the stable test
    assert ver.success and ver.output_error < 1e-5, ver.output_error
    # and comes to rest: at tf the state is the final equilibrium up to the same error
    k = np.searchsorted(ver.t, task.law.tf)
    assert np.abs(ver.v[k:]).max() < 1e-4, np.abs(ver.v[k:]).max()


def test_modified_output_returns_to_the_nominal_end_point(causal_427):
    m, task, out, r = causal_427
    t0, tf = task.law.t0, task.law.tf
    outside = (r.t <= t0) | (r.t >= tf)
    # the shape functions vanish outside (t0, tf): exactly the nominal output there
    np.testing.assert_allclose(r.y_desired[outside], r.y_nominal[outside], atol=1e-14)
    # the plant reaches the nominal end point (servo-constraints solved exactly)
    np.testing.assert_allclose(r.y[-1], r.y_nominal[-1], atol=1e-10)
    dev = np.abs(r.y_desired - r.y_nominal)
    assert r.output_deviation == pytest.approx(dev.max())
    assert r.output_deviation > 1e-2  # the price of causality: the output deviates ...
    np.testing.assert_array_equal(dev[:, :2], 0.0)  # ... only in the row carrying w


def test_shape_functions_vanish_with_two_derivatives():
    """phi_j, phi_j', phi_j'' are zero at t0 and tf; phi_0(mid) = 1 (w_0 = mid deviation)."""
    zero = np.zeros(2)
    sh = ShapedOutput(lambda t: (zero, zero, zero), 0.2, 1.7, [0, 1, 0, 1], [0, 0, 1, 1], 2)
    for b in sh.basis([0.1, 0.2, 1.7, 2.0]):
        np.testing.assert_allclose(b, 0.0, atol=1e-12)
    assert sh.basis(0.95)[0][0, 0] == pytest.approx(1.0)
    # derivatives against central differences (h = 1e-6 s: error ~1e-9 relative)
    t, h = np.array([0.5, 1.1]), 1e-6
    b, bd, bdd = sh.basis(t)
    np.testing.assert_allclose(bd, (sh.basis(t + h)[0] - sh.basis(t - h)[0]) / (2 * h),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(bdd, (sh.basis(t + h)[1] - sh.basis(t - h)[1]) / (2 * h),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_parameters_agree_with_the_book_bvp_with_unknown_parameters(causal_427):
    """eq. 3.82 solved as the book does (collocation, eta(t0) = eta0, eta(tf) = etaf,
    w unknown): the same w as the multiple-shooting Newton iteration."""
    from scipy.integrate import solve_bvp

    from multibody_control.inversion.desired import DesiredOutput
    from multibody_control.inversion.servo import ServoConstraints

    m, task, out, r = causal_427
    t0, tf = task.law.t0, task.law.tf
    servo = ServoConstraints(m, out)
    grid = np.unique(np.append(np.arange(t0, tf, 1e-3), tf))
    shaped = ShapedOutput(DesiredOutput(m, out, task).tabulate(grid), t0, tf, [2, 2], [0, 1], 3)

    def fun(t, x, p):
        y = shaped.nominal(t)
        dy = shaped.deviation(t, p)
        return servo.internal_rhs_batch(*(a + b for a, b in zip(y, dy)), x.T).T

    def bc(xa, xb, p):
        return np.concatenate([xa, xb])  # eta0 = etaf = 0: the spring's rest

    mesh = np.linspace(t0, tf, 200)
    sol = solve_bvp(fun, bc, mesh, np.zeros((2, mesh.size)), p=np.zeros(2), tol=1e-6,
                    max_nodes=20000)
    assert sol.success, sol.message
    # collocation residual tolerance 1e-6 against shooting at rtol 1e-9: measured 1e-6
    np.testing.assert_allclose(sol.p, r.free_parameters, rtol=1e-4, atol=1e-5)


def test_classical_inversion_of_the_nominal_output_diverges(causal_427):
    """Why causal inversion is needed: forward integration of the unmodified problem."""
    m, task, out, r = causal_427
    cl = invert(m, out, task, "classical", dt=2e-3)
    assert not cl.success and "non-minimum phase" in cl.message and "causal" in cl.message
    # it runs away early in the motion (the integrator stalls where the decoupling matrix
    # becomes singular): measured beta = 0.71 rad at 0.166 s, where the causal solution
    # has -0.06 rad
    k = cl.t.size
    assert cl.t[-1] < 0.5 * (task.law.t0 + task.law.tf)
    np.testing.assert_array_equal(cl.t, r.t[:k])
    assert abs(cl.eta[-1, 0]) > 5 * abs(r.eta[k - 1, 0])


@pytest.mark.slow
def test_causal_failures_are_named(causal_427):
    m, task, out, _ = causal_427
    # single shooting: exp(28 * 1.0) amplification, the internal dynamics run away
    single = invert(m, out, task, "causal", dt=2e-3, segments=1)
    assert not single.success and "diverge" in single.message and "segments" in single.message
    # an end tolerance below round-off cannot be met: reported, with the parameters reached
    strict = invert(m, out, task, "causal", dt=2e-3, end_tol=1e-17)
    assert not strict.success and "did not converge" in strict.message
    assert strict.free_parameters.shape == (2,) and strict.end_state_error < 1e-8


@pytest.mark.parametrize("kwargs, words", [
    ({"n_free": 1}, ["n_free", ">= 2"]),
    ({"n_free": 2.5}, ["n_free"]),
    ({"free_rows": ["beta"]}, ["free_rows", "'beta'", "alpha1"]),
    ({"free_rows": [2, 2]}, ["free_rows", "distinct"]),
    ({"segments": 0}, ["segments", "positive"]),
    ({"end_tol": 0.0}, ["end_tol"]),
    ({"t_start": 0.5}, ["t_start", "whole motion"]),
])
def test_bad_options_raise(causal_427, kwargs, words):
    m, task, out, _ = causal_427
    with pytest.raises(InputError) as err:
        invert(m, out, task, "causal", dt=2e-3, **kwargs)
    for w in words:
        assert w in str(err.value), str(err.value)


def test_scenario_accepts_the_causal_options(tmp_path):
    from pathlib import Path

    from multibody_control.inversion.scenario import load_inversion_scenario

    shipped = Path(__file__).resolve().parents[1] / "config" / "scenarios"
    sc = load_inversion_scenario(shipped / "invert_passive_arm_causal.yaml")
    assert sc.method == "causal"
    assert sc.options == {"n_free": 2, "free_rows": ["alpha2 + 0.5*beta"]}
    text = (shipped / "invert_passive_arm_causal.yaml").read_text()
    for old, new, key in (("n_free: 2", "n_free: 1.5", "options.n_free"),
                          ("free_rows: [alpha2 + 0.5*beta]", "free_rows: [beta]",
                           "options.free_rows")):
        path = tmp_path / "bad.yaml"
        path.write_text(text.replace(old, new))
        with pytest.raises(InputError, match=key):
            load_inversion_scenario(path)


def test_fully_actuated_causal_is_classical(models):
    """No internal dynamics: nothing to shoot for, the nominal output and classical u."""
    from multibody_control.tasks import Task, TimeLaw, linear_move

    m = models["arm7"]
    task = Task(TimeLaw(0.1, 0.6), tuple(linear_move(n, 0.0, 0.2) for n in m.coordinate_names))
    r = invert(m, Output.collocated(m), task, "causal", dt=0.01)
    c = invert(m, Output.collocated(m), task, "classical", dt=0.01)
    assert r.success and r.free_parameters.size == 0 and r.output_deviation == 0.0
    # same samples and the same inverse dynamics: equal to round-off
    np.testing.assert_allclose(r.u, c.u, rtol=0, atol=1e-9 * np.abs(c.u).max())
