"""The Gaussian elimination of the numba kernels.

The compiled kernels solve small dense systems ``A x = b`` inside their loops, where a call
into LAPACK would cost more than the solve: :mod:`multibody_dynamics.projection` (the
projected mass matrix of Aghili (2005) eqs. 22-29, the dependent accelerations of the
projected inverse dynamics), :mod:`multibody_dynamics.flexible.fast_servo` (the zero-dynamics
matrix ``M_ee - M_er Γ`` of Seifried (2014) (7.13)) and
:mod:`multibody_control.design.fast_zero` (``M_uu - M_ua Γ`` of (7.24)).  They share
:func:`gauss_solve`, compiled once by :func:`compiled_gauss_solve`.

Singularity rule (one for every caller): the elimination stops, returns False and leaves
``x`` untouched when a pivot (the entry of largest magnitude in its column, on or below the
diagonal, after the previous columns are eliminated) is not finite or not above ``tol`` in
magnitude.  ``tol = 0`` refuses exactly zero pivots only (the projection and the flexible
servo, whose matrices are positive definite or regular by construction); the zero dynamics
of the design criterion pass ``1e-13`` times the largest entry of the matrix, a relative
threshold.
"""

from __future__ import annotations

import numpy as np

__all__ = ["compiled_gauss_solve", "gauss_solve"]


def gauss_solve(A, b, x, tol):  # pragma: no cover - compiled by numba
    """Solve ``A x = b`` by Gaussian elimination with partial pivoting.

    Parameters
    ----------
    A : (n, n) float array
        The matrix; overwritten by the elimination.
    b : (n,) float array
        The right-hand side; overwritten.
    x : (n,) float array
        Receives the solution (may be a view into a larger buffer).
    tol : float
        Smallest accepted pivot magnitude (exclusive): a pivot ``p`` passes when
        ``|p| > tol`` and ``p`` is finite (see the module notes).

    Returns
    -------
    bool
        True when solved; False on a refused pivot, with ``x`` untouched.

    Notes
    -----
    The row of the pivot is the first of largest magnitude; a row whose factor is exactly zero
    is not updated; back substitution runs from the last row up, each sum in increasing column
    order.  The result is that of LAPACK's ``getrf``/``getrs`` up to round-off.
    """
    n = b.shape[0]
    for c in range(n):
        p = c
        big = abs(A[c, c])
        for r in range(c + 1, n):
            if abs(A[r, c]) > big:
                big = abs(A[r, c])
                p = r
        if not tol < big < np.inf:  # also refuses NaN
            return False
        if p != c:
            for k in range(n):
                A[c, k], A[p, k] = A[p, k], A[c, k]
            b[c], b[p] = b[p], b[c]
        for r in range(c + 1, n):
            f = A[r, c] / A[c, c]
            if f != 0.0:
                for k in range(c + 1, n):
                    A[r, k] -= f * A[c, k]
                b[r] -= f * b[c]
    for r in range(n - 1, -1, -1):
        s = b[r]
        for k in range(r + 1, n):
            s -= A[r, k] * x[k]
        x[r] = s / A[r, r]
    return True


_COMPILED: list = []  # [the compiled gauss_solve] or [None] without numba


def compiled_gauss_solve():
    """:func:`gauss_solve` compiled by numba (``njit(cache=True, nogil=True,
    inline="always")``: inlined into the kernels that call it, which is what the RK4 loop of
    :mod:`multibody_control.design.fast_zero` needs), or None when numba is not installed.

    A kernel that calls it binds this object to the global name it calls before that kernel
    is compiled.  numba's disk cache checks the caller's file only: clear ``__pycache__``
    after editing :func:`gauss_solve`.
    """
    if not _COMPILED:
        try:
            import numba
        except ImportError:
            _COMPILED.append(None)
        else:
            _COMPILED.append(numba.njit(cache=True, nogil=True, inline="always")(gauss_solve))
    return _COMPILED[0]
