"""Compiled right-hand side of the internal dynamics of a flexible chain with a combined output.

For the output ``y = q_r + Γ q_e`` of a :class:`~.system.FlexibleChain` (Seifried (2014)
eq. 6.24, tangent frames, ``B = [I; 0]``) the internal states are ``η = (q_e, q_e')`` and the
servo-constraint ODE form (5.22) ``[M_e; I Γ] a = [(g - k - f_e)_e; y_d'']`` gives, with
``a_r = y_d'' - Γ a_e`` substituted in the elastic rows ``M_er a_r + M_ee a_e = (g - k -
f_e)_e``::

    (M_ee - M_er Γ) a_e = (g - k - f_e)_e - M_er y_d''

(the zero-dynamics matrix of (7.13)). ``y_d, y_d', y_d''`` come from the coefficients of a
piecewise quintic Hermite table (``multibody_control.inversion.desired.TabulatedOutput``:
per interval ``[y0, d0, a0/2, c3, c4, c5]``, end values held outside the grid, same binary
search and Horner order), so one call of :func:`servo_rhs` does in compiled code what the
Python path does in about 40 numpy calls: the table look-up, ``q, v`` from ``y`` and ``η``,
``M, k, g, f_e`` (the chain's own kernel ``_chain_terms``) and the elimination above (partial
pivoting). The numbers agree with the Python path to rounding (``test/test_flexible_fast_servo.py``).
"""

from __future__ import annotations

import numpy as np

from .system import _chain_terms, _compiled_kernels

__all__ = ["scratch_size", "servo_kernel"]

#: status codes of the kernel
OK, SINGULAR = 0, 1


def _lookup(t, eta, T, C, G, q, v, ydd):  # pragma: no cover - compiled by numba
    """``q, v`` (nv,) of ``y = q_r + Γ q_e`` and ``y_d''`` (nr,) at time ``t`` from the table."""
    nr, ne = G.shape[0], G.shape[1]
    n = T.shape[0]
    lo, hi = 0, n
    while lo < hi:  # searchsorted(side="right"): the interval with T[i] <= t < T[i + 1]
        mid = (lo + hi) // 2
        if T[mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    i = min(max(lo - 1, 0), n - 2)
    outside = t < T[0] or t > T[n - 1]  # at rest outside the grid
    x = min(max(t, T[0]), T[n - 1]) - T[i]
    for j in range(nr):
        c0, c1, c2, c3, c4, c5 = C[i, 0, j], C[i, 1, j], C[i, 2, j], C[i, 3, j], C[i, 4, j], \
            C[i, 5, j]
        y = ((((c5 * x + c4) * x + c3) * x + c2) * x + c1) * x + c0
        yd = (((5 * c5 * x + 4 * c4) * x + 3 * c3) * x + 2 * c2) * x + c1
        ya = ((20 * c5 * x + 12 * c4) * x + 6 * c3) * x + 2 * c2
        if outside:
            yd = 0.0
            ya = 0.0
        for m in range(ne):
            y -= G[j, m] * eta[m]
            yd -= G[j, m] * eta[ne + m]
        q[j], v[j], ydd[j] = y, yd, ya
    for m in range(ne):
        q[nr + m] = eta[m]
        v[nr + m] = eta[ne + m]


def _gauss(A, b, x):  # pragma: no cover - compiled by numba
    """``x = A^-1 b`` by Gaussian elimination with partial pivoting (A, b overwritten);
    returns :data:`SINGULAR` on a zero or non-finite pivot."""
    n = b.shape[0]
    for c in range(n):
        p = c
        for r in range(c + 1, n):
            if abs(A[r, c]) > abs(A[p, c]):
                p = r
        if A[p, c] == 0.0 or not np.isfinite(A[p, c]):
            return SINGULAR
        if p != c:
            for k in range(n):
                A[c, k], A[p, k] = A[p, k], A[c, k]
            b[c], b[p] = b[p], b[c]
        for r in range(c + 1, n):
            f = A[r, c] / A[c, c]
            for k in range(c, n):
                A[r, k] -= f * A[c, k]
            b[r] -= f * b[c]
    for r in range(n - 1, -1, -1):
        s = b[r]
        for k in range(r + 1, n):
            s -= A[r, k] * x[k]
        x[r] = s / A[r, r]
    return OK


def _servo_rhs(t, eta, T, C, G, P, Ip, W, S, out):  # pragma: no cover - compiled by numba
    """``out = η'`` at time ``t``; returns :data:`SINGULAR` when ``M_ee - M_er Γ`` is singular.

    ``T`` (N,) table times, ``C`` (N - 1, 6, nr) coefficients, ``G`` (nr, ne) Γ, ``P``, ``Ip``,
    ``W`` the chain's packed data and workspace, ``S`` scratch of :func:`scratch_size`.
    """
    nr, ne = G.shape[0], G.shape[1]
    nv = nr + ne
    q = S[:nv]
    v = S[nv:2 * nv]
    A = S[2 * nv:2 * nv + ne * ne].reshape((ne, ne))
    b = S[2 * nv + ne * ne:2 * nv + ne * ne + ne]
    ydd = S[2 * nv + ne * ne + ne:2 * nv + ne * ne + ne + nr]
    _lookup(t, eta, T, C, G, q, v, ydd)
    _chain_terms(q, v, P, Ip, W)
    M = W[:nv * nv].reshape((nv, nv))
    kv = W[nv * nv:nv * nv + nv]
    gv = W[nv * nv + nv:nv * nv + 2 * nv]
    fv = W[nv * nv + 2 * nv:nv * nv + 3 * nv]
    for r in range(ne):  # (M_ee - M_er Γ) a_e = (g - k - f_e)_e - M_er y_d''
        s = gv[nr + r] - kv[nr + r] - fv[nr + r]
        for j in range(nr):
            s -= M[nr + r, j] * ydd[j]
        b[r] = s
        for c in range(ne):
            s = M[nr + r, nr + c]
            for j in range(nr):
                s -= M[nr + r, j] * G[j, c]
            A[r, c] = s
    for m in range(ne):
        out[m] = eta[ne + m]
    return _gauss(A, b, out[ne:])


_KERNEL = []  # [compiled _servo_rhs] or [None] without numba


def servo_kernel():
    """The numba-compiled :func:`_servo_rhs`, or None when numba is not installed."""
    if not _KERNEL:
        kernels = _compiled_kernels()
        if kernels is None:
            _KERNEL.append(None)
        else:
            import numba

            # the servo kernel calls the compiled kernels through the global names
            glb = dict(_servo_rhs.__globals__)
            glb["_chain_terms"] = kernels[0]
            glb["_lookup"] = numba.njit(cache=False, nogil=True)(_lookup)
            glb["_gauss"] = numba.njit(cache=False, nogil=True)(_gauss)
            fn = type(_servo_rhs)(_servo_rhs.__code__, glb, "_servo_rhs")
            _KERNEL.append(numba.njit(cache=False, nogil=True)(fn))
    return _KERNEL[0]


def scratch_size(nr: int, ne: int) -> int:
    """Length of the scratch array ``S`` of :func:`_servo_rhs`."""
    return 2 * (nr + ne) + ne * (ne + 1) + nr

