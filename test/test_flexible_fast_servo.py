"""Compiled internal dynamics of the flexible output designs
(multibody_dynamics.flexible.fast_servo).

Oracle: the Python path of the same inverse model (``FlexibleServo.internal_rhs``: numpy table
look-up, the chain's ``dynamics_terms`` and a 7 x 7 ``numpy.linalg.solve`` of (5.22)), which the
kernel replaces by a 4 x 4 elimination of ``(M_ee - M_er Γ) a_e = (g - k - f_e)_e - M_er
y_d''``; SciPy's ``solve_ivp`` (DOP853) for the compiled integrator, which must take the very
same steps (equal evaluation counts); and ``FlexibleChain.point_position`` (numpy kinematics)
for the batched positions.
"""

from __future__ import annotations

import numpy as np
import pytest

from multibody_control.design.flexible_cart_output import (
    BOOK_DGAMMA_732,
    FlexibleCartOutputProblem,
)
from multibody_control.design.flexible_output import FlexibleOutputProblem
from multibody_dynamics.errors import DimensionError, SolverError
from multibody_dynamics.flexible.system import FlexibleChain

# a minimum-phase Γ of the book problem's box at 2 % damping (test_flexible_output_design.py)
X_MINPHASE = np.array([24.2708, 38.5894, 15.5218, 85.2406, 26.4482, 47.3300])

CASES = [(FlexibleOutputProblem, X_MINPHASE), (FlexibleCartOutputProblem, BOOK_DGAMMA_732)]


@pytest.fixture(scope="module", params=CASES, ids=["book", "cart"])
def case(request):
    cls, x = request.param
    return cls(), x


def test_compiled_rhs_matches_python_path(case):
    problem, x = case
    m, servo = problem.model(), problem.servo(x)
    assert m.chain.backend == "numba"
    fast = servo.internal_rhs_function(m.ytraj)
    slow = servo.internal_rhs_function(m.ytraj, compiled=False)
    rng = np.random.default_rng(7)
    # before, on and after the table (held end values outside), states up to 1e-2
    times = np.concatenate([rng.uniform(m.t[0] - 0.1, m.t[-1] + 0.1, 40), m.t[:3], m.t[-2:]])
    for t in times:
        eta = 1e-2 * rng.standard_normal(2 * servo.nu_int)
        ref = servo.internal_rhs(t, eta, m.ytraj)
        # rounding only: two eliminations of a system with cond ~1e3-1e4 (measured 4e-13)
        np.testing.assert_allclose(fast(t, eta), ref, rtol=0, atol=1e-10 * np.abs(ref).max())
        np.testing.assert_array_equal(slow(t, eta), ref)
    before = servo.counters["dynamics"]
    fast(m.t[5], np.zeros(2 * servo.nu_int))
    assert servo.counters["dynamics"] == before + 1


def test_compiled_rhs_refuses_a_non_finite_state(case):
    problem, x = case
    m, servo = problem.model(), problem.servo(x)
    eta = np.full(2 * servo.nu_int, np.nan)
    with pytest.raises(SolverError, match="relative degree 2"):
        servo.internal_rhs_function(m.ytraj)(m.t[0], eta)


def test_untabulated_output_takes_the_python_path(case):
    problem, x = case
    m, servo = problem.model(), problem.servo(x)

    def ytraj(t):  # a plain callable: the kernel needs the table's coefficients
        return m.ytraj(t)

    eta = np.linspace(-1e-3, 1e-3, 2 * servo.nu_int)
    np.testing.assert_array_equal(servo.internal_rhs_function(ytraj)(0.7, eta),
                                  servo.internal_rhs(0.7, eta, m.ytraj))


def _integrate(problem, x, compiled, limit=None):
    m, servo = problem.model(), problem.servo(x)
    eta0 = servo.equilibrium(m.y[0])
    out = servo.integrate_internal(m.ytraj, eta0, m.t, problem.rtol, 1e-3 * problem.rtol,
                                   10 * problem.dt, problem.limit if limit is None else limit,
                                   compiled)
    return (*out, servo.counters["dynamics"])


def test_compiled_integration_takes_scipys_steps(case):
    problem, x = case
    eta, ok, msg, nfev = _integrate(problem, x, True)
    ref, ok_ref, msg_ref, nfev_ref = _integrate(problem, x, False)
    assert ok and ok_ref and msg == msg_ref == "completed"
    # same tableau, initial step and step control: the same number of model evaluations
    # (scipy: 12 per step, 3 more per dense output, 2 to start; 7523 for the cart here)
    assert nfev == nfev_ref
    assert eta.shape == ref.shape == (len(problem.model().t), 2 * problem.servo(x).nu_int)
    # right-hand sides equal to ~1e-13 (relative), propagated over ~600-1200 steps: measured
    # 2e-10 of the largest state; 1e-8 is still 10x below the integration's rtol of 1e-7
    np.testing.assert_allclose(eta, ref, rtol=0, atol=1e-8 * np.abs(ref).max())


def test_compiled_integration_stops_where_scipy_does():
    # the terminal event (an elastic coordinate reaches `limit`): same rows, same message
    problem = FlexibleOutputProblem()
    eta, ok, msg, nfev = _integrate(problem, X_MINPHASE, True, limit=1e-7)
    ref, ok_ref, msg_ref, nfev_ref = _integrate(problem, X_MINPHASE, False, limit=1e-7)
    assert not ok and not ok_ref and "diverge" in msg
    assert msg == msg_ref and nfev == nfev_ref and eta.shape == ref.shape


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_point_positions_match_point_position(case, backend):
    problem, _ = case
    m = problem.model()
    chain = FlexibleChain(m.chain.config, backend=backend)
    rng = np.random.default_rng(3)
    Q = np.column_stack([m.y[::10], 1e-2 * rng.standard_normal((len(m.y[::10]), chain.nq_e))])
    for body in range(chain.nq_r):
        ref = np.array([chain.point_position(q, body) for q in Q])
        # same kinematics, other summation order: rounding of positions of ~1 m
        np.testing.assert_allclose(chain.point_positions(Q, body), ref, rtol=0, atol=1e-14)
    with pytest.raises(DimensionError, match="Q must have shape"):
        chain.point_positions(Q[:, :3], m.body)


def test_criterion_unchanged_by_the_compiled_path(case):
    # the design criterion (7.16)-(7.17) with the compiled integration and with SciPy's on
    # the Python internal dynamics (the implementation before the kernels): the same steps
    # on right-hand sides equal to ~1e-13 (relative), so the max errors agree far below the
    # integration tolerance rtol = 1e-7 (measured 1e-13 relative; printed criterion values
    # before/after: book problem 0.27251944032 mm, cart (7.32) 7.5623124743 mm)
    problem, x = case
    fast = problem.evaluate(x)
    slow_problem = type(problem)()
    slow_problem.compiled = False
    slow = slow_problem.evaluate(x)
    assert fast.ok and slow.ok, (fast.message, slow.message)
    np.testing.assert_allclose(fast.value, slow.value, rtol=1e-8)
    assert fast.info["spectral_abscissa"] == slow.info["spectral_abscissa"]
