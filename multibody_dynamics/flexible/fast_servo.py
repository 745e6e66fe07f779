"""Compiled internal dynamics of a flexible chain with a combined output, and their integration.

For the output ``y = q_r + Γ q_e`` of a :class:`~.system.FlexibleChain` (Seifried (2014)
eq. 6.24, tangent frames, ``B = [I; 0]``) the internal states are ``η = (q_e, q_e')`` and the
servo-constraint ODE form (5.22) ``[M_e; I Γ] a = [(g - k - f_e)_e; y_d'']`` gives, with
``a_r = y_d'' - Γ a_e`` substituted in the elastic rows ``M_er a_r + M_ee a_e = (g - k -
f_e)_e``::

    (M_ee - M_er Γ) a_e = (g - k - f_e)_e - M_er y_d''

(the zero-dynamics matrix of (7.13)). ``y_d, y_d', y_d''`` come from the coefficients of a
piecewise quintic Hermite table (``multibody_control.inversion.desired.TabulatedOutput``:
per interval ``[y0, d0, a0/2, c3, c4, c5]``, end values held outside the grid, same binary
search and Horner order), so one call of :func:`_servo_rhs` does in compiled code what the
Python path does in about 40 numpy calls: the table look-up, ``q, v`` from ``y`` and ``η``,
``M, k, g, f_e`` (the chain's own kernel ``_chain_terms``) and the elimination above (partial
pivoting).

:func:`_integrate` is the classical inversion's forward integration in one call: the DOP853
pair of Dormand and Prince with its 7th-order dense output (Hairer, Norsett, Wanner, *Solving
Ordinary Differential Equations I*, Sect. II.10: the combined 5th/3rd-order error estimate,
step-size control with safety factor 0.9 and factor bounds [0.2, 10], the starting step of
Sect. II.4), with a terminal event located on the dense output. These are the choices
``scipy.integrate.solve_ivp(method="DOP853", t_eval=..., events=...)`` makes and the
coefficients are read from SciPy's table, so both take the same steps and differ by rounding
only, which ``test/test_flexible_fast_servo.py`` checks against the Python path.
"""
from __future__ import annotations

import numpy as np

from ..compiled_linalg import compiled_gauss_solve, gauss_solve
from .system import _chain_terms, _compiled_kernels

__all__ = ["dop853_tableau", "integrate_kernel", "scratch_size", "servo_kernel"]

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
    return OK if gauss_solve(A, b, out[ne:], 0.0) else SINGULAR


#: status codes of :func:`_integrate` besides OK and SINGULAR
EVENT, TOO_SMALL = 2, 3
_SAFETY, _MIN_FACTOR, _MAX_FACTOR = 0.9, 0.2, 10.0  # step-size control (as solve_ivp)


def _rms_scaled(x, scale):  # pragma: no cover - compiled by numba
    s = 0.0
    for i in range(x.shape[0]):
        s += (x[i] / scale[i]) ** 2
    return np.sqrt(s / x.shape[0])


def _dense(t, t_old, h, y_old, F, out):  # pragma: no cover - compiled by numba
    """The 7th-order dense output of the last step at ``t`` (coefficients ``F``)."""
    x = (t - t_old) / h
    nF = F.shape[0]
    for j in range(out.shape[0]):
        y = 0.0
        for i in range(nF):
            y += F[nF - 1 - i, j]
            y *= x if i % 2 == 0 else 1.0 - x
        out[j] = y + y_old[j]


def _watch_gap(y, watch, limit):  # pragma: no cover - compiled by numba
    m = 0.0
    for i in watch:
        m = max(m, abs(y[i]))
    return limit - m


def _stage(t, y, h, s, K, A, tmp):  # pragma: no cover - compiled by numba
    """``tmp = y + h sum_j<s A[s, j] K[j]``."""
    for i in range(y.shape[0]):
        d = 0.0
        for j in range(s):
            d += K[j, i] * A[s, j]
        tmp[i] = y[i] + d * h


def _initial_step(t, y, f, tb, tol, K, tmp, scale, model, info):  # pragma: no cover - numba
    """Starting step (Hairer, Norsett, Wanner Sect. II.4, error-estimator order 7, as
    solve_ivp); -1 when the model failed."""
    rtol, atol, max_step = tol[0], tol[1], tol[2]
    T, C, G, P, Ip, W, S = model
    n = y.shape[0]
    interval = abs(tb - t)
    for i in range(n):
        scale[i] = atol + abs(y[i]) * rtol
    d0, d1 = _rms_scaled(y, scale), _rms_scaled(f, scale)
    h0 = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
    h0 = min(h0, interval)
    for i in range(n):
        tmp[i] = y[i] + h0 * f[i]
    info[2] += 1
    if _servo_rhs(t + h0, tmp, T, C, G, P, Ip, W, S, K[1]):
        return -1.0
    for i in range(n):
        K[1, i] -= f[i]
    d2 = _rms_scaled(K[1], scale) / h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / 8.0)
    return min(100 * h0, h1, interval, max_step)


def _rk_stages(t, y, f, h, K, A, B, Cs, tmp, y_new, model, info):  # pragma: no cover - numba
    """One explicit Runge-Kutta step: the stages ``K[:ns + 1]`` (the last at ``y_new``, FSAL)
    and ``y_new``; SINGULAR if the model failed."""
    T, C, G, P, Ip, W, S = model
    ns = B.shape[0]
    K[0, :] = f
    for s in range(1, ns):
        _stage(t, y, h, s, K, A, tmp)
        info[2] += 1
        if _servo_rhs(t + Cs[s] * h, tmp, T, C, G, P, Ip, W, S, K[s]):
            return SINGULAR
    for i in range(y.shape[0]):
        d = 0.0
        for j in range(ns):
            d += K[j, i] * B[j]
        y_new[i] = y[i] + h * d
    info[2] += 1
    return _servo_rhs(t + h, y_new, T, C, G, P, Ip, W, S, K[ns])


def _error_norm(y, y_new, K, E3, E5, h, rtol, atol):  # pragma: no cover - compiled by numba
    """DOP853's error norm, the 5th-order estimate scaled by the 3rd-order one (Hairer,
    Norsett, Wanner Sect. II.10)."""
    n = y.shape[0]
    e5 = e3 = 0.0
    for i in range(n):
        sc = atol + max(abs(y[i]), abs(y_new[i])) * rtol
        a5 = a3 = 0.0
        for j in range(E5.shape[0]):
            a5 += K[j, i] * E5[j]
            a3 += K[j, i] * E3[j]
        e5 += (a5 / sc) ** 2
        e3 += (a3 / sc) ** 2
    if e5 == 0 and e3 == 0:
        return 0.0
    return abs(h) * e5 / np.sqrt((e5 + 0.01 * e3) * n)


def _step(t, y, f, h_abs, tb, tol, K, tab, tmp, y_new, model, info):  # pragma: no cover - numba
    """One accepted step (trial steps shrunk until the error norm is below 1):
    ``(status, t_new, h, h_abs)``
    with ``y_new`` and the stages in ``K``; status SINGULAR or TOO_SMALL on failure."""
    rtol, atol, max_step = tol[0], tol[1], tol[2]
    A, B, Cs, E3, E5 = tab[0], tab[1], tab[2], tab[3], tab[4]
    min_step = 10 * abs(np.nextafter(t, np.inf) - t)
    if h_abs > max_step:
        h_abs = max_step
    elif h_abs < min_step:
        h_abs = min_step
    rejected = False
    while True:
        if h_abs < min_step:
            return TOO_SMALL, t, 0.0, h_abs
        t_new = t + h_abs
        if t_new - tb > 0:
            t_new = tb
        h = t_new - t
        h_abs = abs(h)
        if _rk_stages(t, y, f, h, K, A, B, Cs, tmp, y_new, model, info):
            return SINGULAR, t, h, h_abs
        err = _error_norm(y, y_new, K, E3, E5, h, rtol, atol)
        if err < 1:
            fac = _MAX_FACTOR if err == 0 else _SAFETY * err ** (-1.0 / 8.0)
            if not fac < _MAX_FACTOR:
                fac = _MAX_FACTOR
            if rejected and not fac < 1.0:
                fac = 1.0
            return OK, t_new, h, h_abs * fac
        fac = _SAFETY * err ** (-1.0 / 8.0)  # NaN (a failed trial) shrinks by _MIN_FACTOR
        h_abs *= fac if fac > _MIN_FACTOR else _MIN_FACTOR
        rejected = True


def _dense_coefficients(t_old, y_old, y, f, h, K, tab, D, F, tmp, model,
                        info):  # pragma: no cover - compiled by numba
    """Dense output of the last step: the extra stages ``K[ns + 1:]`` and ``F`` (7, n)."""
    T, C, G, P, Ip, W, S = model
    A, B, Cs = tab[0], tab[1], tab[2]
    for s in range(B.shape[0] + 1, A.shape[0]):
        _stage(t_old, y_old, h, s, K, A, tmp)
        info[2] += 1
        if _servo_rhs(t_old + Cs[s] * h, tmp, T, C, G, P, Ip, W, S, K[s]):
            return SINGULAR
    for i in range(y.shape[0]):
        dy = y[i] - y_old[i]
        F[0, i] = dy
        F[1, i] = h * K[0, i] - dy
        F[2, i] = 2 * dy - h * (f[i] + K[0, i])
        for r in range(D.shape[0]):
            d = 0.0
            for j in range(A.shape[0]):
                d += D[r, j] * K[j, i]
            F[3 + r, i] = h * d
    return OK


def _locate_event(t_old, t, g, y_old, F, watch, limit, tmp):  # pragma: no cover - numba
    """The crossing of ``limit - max |η_watch| = 0`` in ``[t_old, t]`` on the dense output, by
    bisection to 4 eps (SciPy: ``brentq`` to the same tolerance); returns its right end."""
    lo, hi, glo = t_old, t, g
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if hi - lo <= 4 * 2.220446049250313e-16 * (1.0 + abs(mid)) or mid == lo or mid == hi:
            break
        _dense(mid, t_old, t - t_old, y_old, F, tmp)
        gm = _watch_gap(tmp, watch, limit)
        if (gm <= 0) == (glo <= 0):
            lo, glo = mid, gm
        else:
            hi = mid
    return hi


def _integrate(eta0, t_eval, tol, limit, watch, T, C, G, P, Ip, W, S,
               A, B, Cs, E3, E5, D, X, info):  # pragma: no cover - compiled by numba
    """DOP853 of ``η' = f(t, η)`` (:func:`_servo_rhs`) on ``t_eval`` as
    ``scipy.integrate.solve_ivp(method="DOP853", t_eval=..., events=...)`` does it (same
    tableau, initial step, step control, dense output, terminal event ``limit - max |η_watch|
    = 0``). ``tol = [rtol, atol, max_step]``. Fills ``X`` (N, n) and ``info = [rows, t_end,
    evaluations]``; returns OK, SINGULAR, EVENT or TOO_SMALL."""
    n, N = eta0.shape[0], t_eval.shape[0]
    model = (T, C, G, P, Ip, W, S)
    tab = (A, B, Cs, E3, E5)
    t, tb = t_eval[0], t_eval[N - 1]
    K = np.empty((A.shape[0], n))
    y, y_old, y_new, f = eta0.copy(), np.empty(n), np.empty(n), np.empty(n)
    tmp, scale = np.empty(n), np.empty(n)
    F = np.empty((3 + D.shape[0], n))
    info[0], info[1], info[2] = 0, t, 1
    if _servo_rhs(t, y, T, C, G, P, Ip, W, S, f):
        return SINGULAR
    h_abs = _initial_step(t, y, f, tb, tol, K, tmp, scale, model, info)
    if h_abs < 0:
        return SINGULAR
    g = _watch_gap(y, watch, limit)
    ie = 0  # next row of t_eval
    status = -1
    while status < 0:
        code, t_new, h, h_abs = _step(t, y, f, h_abs, tb, tol, K, tab, tmp, y_new, model, info)
        if code != OK:
            info[0], info[1] = ie, t
            return code
        t_old, t = t, t_new
        y_old[:] = y
        y[:] = y_new
        f[:] = K[B.shape[0]]
        if t - tb >= 0:
            status = OK
        t_stop = t
        g_new = _watch_gap(y, watch, limit)
        event = (g <= 0 and g_new >= 0) or (g >= 0 and g_new <= 0)
        if event or (ie < N and t_eval[ie] <= t):
            if _dense_coefficients(t_old, y_old, y, f, h, K, tab, D, F, tmp, model, info):
                info[0], info[1] = ie, t
                return SINGULAR
        if event:
            t_stop = _locate_event(t_old, t, g, y_old, F, watch, limit, tmp)
            status = EVENT
        g = g_new
        while ie < N and t_eval[ie] <= t_stop:
            _dense(t_eval[ie], t_old, t - t_old, y_old, F, X[ie])
            ie += 1
    info[0], info[1] = ie, t_stop
    return status


_KERNEL: list = []  # [(compiled _servo_rhs, compiled _integrate)] or [None] without numba
_JITTED = ("_chain_terms", "_lookup", "_rms_scaled", "_dense", "_watch_gap", "_stage",
           "_servo_rhs", "_initial_step", "_rk_stages", "_error_norm", "_step",
           "_dense_coefficients", "_locate_event", "_integrate")


def _compile():
    """Compile the kernels, cached on disk (numba ``cache=True``: a process loads them in a
    fraction of a second instead of compiling for seconds, which matters for pool workers).
    The module names are rebound to the compiled functions, so that the kernels call each
    other compiled. A changed callee in another file does not invalidate the cache of its
    caller (numba checks the caller's file only): clear ``__pycache__`` after editing
    ``system._chain_terms``."""
    import numba

    from ..compile_notice import install

    install()  # a note while a first run compiles
    jit = numba.njit(cache=True, nogil=True)
    names = globals()
    names["gauss_solve"] = compiled_gauss_solve()
    for name in _JITTED:
        names[name] = jit(names[name])
    return names["_servo_rhs"], names["_integrate"]


def servo_kernel():
    """The numba-compiled :func:`_servo_rhs`, or None when numba is not installed."""
    kernels = _kernels()
    return None if kernels is None else kernels[0]


def integrate_kernel():
    """The numba-compiled :func:`_integrate`, or None when numba is not installed."""
    kernels = _kernels()
    return None if kernels is None else kernels[1]


def _kernels():
    if not _KERNEL:
        _KERNEL.append(None if _compiled_kernels() is None else _compile())
    return _KERNEL[0]


def dop853_tableau():
    """``A (16, 16), B (12,), C (16,), E3 (13,), E5 (13,), D (4, 16)`` of DOP853 with its dense
    output (Hairer, Norsett, Wanner, *Solving ODEs I*, Sect. II.10), from SciPy's own table so
    that :func:`_integrate` steps as ``solve_ivp(method="DOP853")``."""
    from scipy.integrate._ivp import dop853_coefficients as c

    return (np.ascontiguousarray(c.A, float), np.ascontiguousarray(c.B, float),
            np.ascontiguousarray(c.C, float), np.ascontiguousarray(c.E3, float),
            np.ascontiguousarray(c.E5, float), np.ascontiguousarray(c.D, float))


def scratch_size(nr: int, ne: int) -> int:
    """Length of the scratch array ``S`` of :func:`_servo_rhs`."""
    return 2 * (nr + ne) + ne * (ne + 1) + nr

