"""The one Gaussian elimination of the numba kernels (multibody_dynamics.compiled_linalg).

Oracle: ``numpy.linalg.solve`` (LAPACK ``gesv``, also LU with partial pivoting) on random
systems; the singular cases against the documented rule (a pivot not finite or not above
``tol`` in magnitude: False, ``x`` untouched).
"""

import numpy as np
import pytest

from multibody_dynamics.compiled_linalg import compiled_gauss_solve, gauss_solve

numba = pytest.importorskip("numba")


@pytest.fixture(scope="module", params=["compiled", "python"])
def solve(request):
    return compiled_gauss_solve() if request.param == "compiled" else gauss_solve


@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_equals_numpy_solve(solve, n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        A = rng.normal(size=(n, n))
        if n > 1:
            A[0, 0] = 0.0  # the first column needs a row exchange
        b = rng.normal(size=n)
        x = np.full(n, np.nan)
        assert solve(A.copy(), b.copy(), x, 0.0)
        ref = np.linalg.solve(A, b)
        # two LU solves of the same system: round-off, cond(A) eps |x|
        tol = 1e3 * np.finfo(float).eps * np.linalg.cond(A) * max(1.0, np.abs(ref).max())
        np.testing.assert_allclose(x, ref, rtol=0, atol=tol)


def test_writes_into_a_view(solve):
    A = np.array([[0.0, 2.0], [3.0, 1.0]])
    buf = np.zeros(6)
    assert solve(A, np.array([4.0, 5.0]), buf[2:4], 0.0)
    # 2 y = 4, 3 x + y = 5: x = 1, y = 2 exactly
    np.testing.assert_array_equal(buf, [0.0, 0.0, 1.0, 2.0, 0.0, 0.0])


@pytest.mark.parametrize("where,bad", [((0, 1), "zero column"), ((0, 0), np.nan),
                                       ((1, 0), np.inf)])
def test_a_refused_pivot_leaves_x_untouched(solve, where, bad):
    A = np.array([[1.0, 2.0, 0.5], [2.0, 4.0, 1.0], [0.0, 1.0, 3.0]])
    if isinstance(bad, str):
        A[:, where[1]] = 0.0  # singular: the second pivot is exactly zero
    else:
        A[where] = bad  # not finite: refused as a pivot
    x = np.full(3, 7.0)
    assert not solve(A, np.ones(3), x, 0.0)
    np.testing.assert_array_equal(x, 7.0)


def test_relative_threshold(solve):
    eps = 1e-14
    A = np.array([[1.0, 0.0], [0.0, eps]])
    x = np.zeros(2)
    # pivot 1e-14 < 1e-13 * max|A| = 1e-13: refused; accepted with the exact-zero rule
    assert not solve(A.copy(), np.ones(2), x, 1e-13 * 1.0)
    np.testing.assert_array_equal(x, 0.0)
    assert solve(A.copy(), np.ones(2), x, 0.0)
    np.testing.assert_allclose(x, [1.0, 1.0 / eps], rtol=1e-15)


def test_every_kernel_uses_it():
    """The compiled kernels call this one elimination, bound before they compile."""
    from multibody_control.design import fast_zero
    from multibody_dynamics import fast_step, projection
    from multibody_dynamics.flexible import fast_servo

    compiled = compiled_gauss_solve()
    assert projection._numba_jit() is not None and projection._gauss_solve is compiled
    assert fast_step._compiled() is not None and fast_step._gauss_solve is compiled
    if fast_servo._kernels() is not None:
        assert fast_servo.gauss_solve is compiled
    if fast_zero._kernel() is not None:
        assert fast_zero.gauss_solve is compiled
