"""Compiled fixed-step RK4 of the nonlinear zero dynamics (7.24) for the criterion (7.26).

The attenuation criterion of Seifried (2014) eq. 7.26 integrates the nonlinear zero dynamics
of ``y = q_a + Gamma q_u`` (eq. 7.24, our signs ``M a + h = B u + tau_s``)::

    [M_uu(q) - M_ua(q) Gamma] q_u'' = (tau_s - h)_u(q, q'),   q = q_e + T q_u,  q' = T q_u',

with the integrals ``int q_u,i^2 dt`` appended to the state, ``z = [q_u, q_u', integrals]``
(``3 n_u``).  The reference (:func:`~.criteria.attenuation` with ``method="dop853"``) calls
pinocchio's ``crba`` and ``nonLinearEffects`` from Python for each of about 2300 right-hand
sides (scipy's DOP853 at rtol 1e-6); here the whole run is one numba kernel on the tree
dynamics of :func:`multibody_dynamics.fast_step.compiled_terms` (checked against pinocchio
there) with classical RK4 at a fixed step.  A tree that moves in the ``x-y`` plane (the arms
of Seifried (2014) Sect. 7.4.3, horizontal) runs on the planar twin of those recursions,
:func:`multibody_dynamics.fast_planar.planar_terms`, for the passive rows only: the same
integrals bit for bit on the case-1 designs measured (bench ``design_case1_zero_dynamics_planar``,
``test_planar_dynamics_give_the_general_kernels_criterion``) in about half the time per step
(most of the rest is the RK4 stages, the projection on ``T`` and the ``n_u x n_u`` solve).

Step size: ``h = omega_h / max |lambda|`` from the eigenvalues ``lambda`` of the linearized
zero dynamics (7.25) that step 1 of the criterion computes anyway.  For the lightly damped
oscillations of these designs the RK4 amplitude error per step is about ``(omega h)^6 / 144``,
so over ``t1`` the relative error of the integrals is at most about
``t1 omega (omega h)^5 / 144`` (less in practice: the integrals gather most of their value
early, while the amplitude is large).  Designs whose two zero-dynamics frequencies are close
(e.g. 54.5 and 49.0 1/s near case 1's optimum: the modes exchange energy, so phase errors
matter) are the hardest; the error there falls as about ``omega_h^4.4``.  Measured relative
errors against a tight DOP853 run (rtol 1e-10, atol 1e-14) on the four printed optima and the
two hardest of 60 designs around case 1's optimum: DOP853 at rtol 1e-6 (the reference)
4e-7 to 6.4e-5; RK4 at ``omega_h`` 0.15: up to 5.4e-4; 0.1: 9.0e-5; **0.08 (the default):
3.4e-5**; 0.06: 9.9e-6.  ``test/test_design_fast_zero.py`` checks the printed designs against
the reference and the hardest design against the tight run.

A run stops with a status (the criterion then gets the penalty) when the state leaves
``|z| <= bound`` (the design "blew up", as the reference's terminal event), is not finite, or
``M_uu - M_ua Gamma`` is singular (pivot below ``1e-13`` of its largest entry).
"""

from __future__ import annotations

import math

import numpy as np

from multibody_dynamics.compiled_linalg import compiled_gauss_solve, gauss_solve
from multibody_dynamics.errors import InputError
from multibody_dynamics.fast_planar import PLANAR_WORK, pack_planar, planar_terms, wanted_rows
from multibody_dynamics.fast_step import compiled_terms, pack_tree
from multibody_dynamics.model import MultibodyModel

__all__ = ["OK", "SINGULAR", "UNBOUNDED", "CompiledZeroDynamics", "rk4_steps"]

#: status of a run: completed, left the bound (or not finite), singular decoupling matrix
OK, UNBOUNDED, SINGULAR = 0, 1, 2


def _rhs(z, dz, n, q_eq, T, iu, spring, planar, rows, ji, jf, g, fi, ff, M, nle, J, dJ, H, X,
         W, q, v, Mz, b):  # pragma: no cover - numba
    """dz of the augmented zero dynamics at z; False when M_uu - M_ua Gamma is singular.
    ``planar``: ``(ji, jf)`` are :func:`~multibody_dynamics.fast_planar.pack_planar`'s, ``W``
    its work space and ``rows`` its rows wanted (the passive joints'), else
    :func:`~multibody_dynamics.fast_step.pack_tree`'s."""
    nv = q.shape[0]
    for i in range(nv):
        s = q_eq[i]
        t = 0.0
        for k in range(n):
            s += T[i, k] * z[k]
            t += T[i, k] * z[n + k]
        q[i] = s
        v[i] = t
    if planar:  # only the passive rows and what they need
        _planar(q, v, ji, jf, g, M, nle, W, rows)
    else:
        _terms(q, v, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, 1, W)
    big = 0.0
    for r in range(n):
        row = iu[r]
        b[r] = (-spring[0, row] * (q[row] - spring[2, row]) - spring[1, row] * v[row]
                - nle[row])
        for c in range(n):
            s = 0.0
            for i in range(nv):
                s += M[row, i] * T[i, c]
            Mz[r, c] = s
            if abs(s) > big:
                big = abs(s)
    if not gauss_solve(Mz, b, dz[n:2 * n], 1e-13 * big):
        return False
    for k in range(n):
        dz[k] = z[n + k]
        dz[2 * n + k] = z[k] * z[k]
    return True


def _rk4(z, h, nsteps, bound, n, q_eq, T, iu, spring, planar, rows, ji, jf, g, fi, ff, buf,
         resp):  # pragma: no cover - numba
    """``nsteps`` RK4 steps of ``h`` from ``z`` (3 n, updated in place); ``resp`` (nsteps + 1,
    n) or (0, n) receives q_u at every step; ``planar`` selects the tree dynamics (see
    :func:`_rhs`).  Returns ``(status, steps done)``."""
    nv = q_eq.shape[0]
    m = 3 * n
    o = 0
    M = buf[o:o + nv * nv].reshape((nv, nv))
    o += nv * nv
    nle = buf[o:o + nv]
    o += nv
    J = buf[o:o + 6 * nv].reshape((6, nv))
    o += 6 * nv
    dJ = buf[o:o + 6 * nv].reshape((6, nv))
    o += 6 * nv
    X = buf[o:o + 12 * nv].reshape((nv, 12))
    o += 12 * nv
    wcols = PLANAR_WORK if planar else 34
    W = buf[o:o + wcols * nv].reshape((nv, wcols))
    o += 34 * nv
    q = buf[o:o + nv]
    o += nv
    v = buf[o:o + nv]
    o += nv
    Mz = buf[o:o + n * n].reshape((n, n))
    o += n * n
    b = buf[o:o + n]
    o += n
    k = buf[o:o + 5 * m].reshape((5, m))  # k1..k4 and the stage state
    H = np.zeros((0, 4, 4))
    keep = resp.shape[0] > 0
    if keep:
        for i in range(n):
            resp[0, i] = z[i]
    for step in range(nsteps):
        for s in range(4):
            if s == 0:
                for i in range(m):
                    k[4, i] = z[i]
            else:
                c = h if s == 3 else 0.5 * h
                for i in range(m):
                    k[4, i] = z[i] + c * k[s - 1, i]
            if not _rhs(k[4], k[s], n, q_eq, T, iu, spring, planar, rows, ji, jf, g, fi, ff, M,
                        nle, J, dJ, H, X, W, q, v, Mz, b):
                return SINGULAR, step
        top = 0.0
        for i in range(m):
            z[i] += h / 6.0 * (k[0, i] + 2.0 * k[1, i] + 2.0 * k[2, i] + k[3, i])
            if i < 2 * n:
                a = abs(z[i])
                if not a <= top:  # NaN too
                    top = a if a == a else np.inf
        if not top <= bound:
            return UNBOUNDED, step + 1
        if keep:
            for i in range(n):
                resp[step + 1, i] = z[i]
    return OK, nsteps


_KERNEL: list = []  # [compiled _rk4] or [None] without numba
# the compiled tree dynamics, set before _rk4 is compiled (globals of _rhs)
_terms = None
_planar = None


def _kernel():
    """The compiled :func:`_rk4`, or None when numba is not installed.

    Both tree dynamics are inlined into the right-hand side (a call passing their fifteen
    arrays cost about 15 % of a step).  numba's cache of :func:`_rk4` is keyed on this file
    only: after a change of :mod:`multibody_dynamics.fast_step` or
    :mod:`multibody_dynamics.fast_planar`, touch this file.
    """
    if not _KERNEL:
        terms, planar = compiled_terms(), planar_terms()
        if terms is None or planar is None:
            _KERNEL.append(None)
        else:
            import numba

            jit = numba.njit(cache=True, nogil=True)
            inline = numba.njit(cache=True, nogil=True, inline="always")
            global _rhs, _rk4, _terms, _planar, gauss_solve
            _terms, _planar = inline(terms.py_func), inline(planar.py_func)
            gauss_solve = compiled_gauss_solve()
            _rhs = inline(_rhs)
            _rk4 = jit(_rk4)
            _KERNEL.append(_rk4)
    return _KERNEL[0]


def rk4_steps(t1: float, eigenvalues, omega_h: float = 0.08, min_steps: int = 100) -> int:
    """Number of fixed RK4 steps over ``t1`` [s] with ``h max|lambda| <= omega_h``.

    Parameters
    ----------
    t1 : float
        Final time [s].
    eigenvalues : (k,) complex
        Of the linearized zero dynamics [1/s] (:func:`~.criteria.linear_zero_dynamics`).
    omega_h : float
        ``h max |lambda|`` [-] (module notes: relative error about ``t1 omega omega_h^5 / 144``).
    min_steps : int
        Lower bound on the number of steps.
    """
    if not (math.isfinite(omega_h) and 0 < omega_h <= 1):
        raise InputError(f"omega_h: expected a step h max|lambda| in (0, 1], got {omega_h!r}")
    lam = np.asarray(eigenvalues)
    radius = float(np.max(np.abs(lam))) if lam.size else 0.0
    if not math.isfinite(radius):
        raise InputError(f"eigenvalues: expected finite values, got max |lambda| = {radius}")
    return max(int(min_steps), int(math.ceil(t1 * radius / omega_h)))


class CompiledZeroDynamics:
    """The augmented zero dynamics of ``y = q_a + Gamma q_u`` of one model state, packed for
    the compiled RK4 (module notes).

    Parameters
    ----------
    model : MultibodyModel
        Its current parameters are packed (a parametric model changed in place needs a new
        object after each change).
    T : (nv, n_u)
        ``q = q_e + T q_u`` (:func:`~.criteria.combined_output_selection`).
    q_eq : (nq,)
        The equilibrium (constant output) [rad, m].
    bound : float
        ``|q_u|`` [rad] or ``|q_u'|`` [rad/s] beyond which a run stops as unbounded.

    Notes
    -----
    :meth:`available` is False (and :meth:`integrate` must not be called) when numba is not
    installed or the tree has a joint the kernel does not handle
    (:func:`multibody_dynamics.fast_step.pack_tree`); callers then use the reference.
    """

    def __init__(self, model: MultibodyModel, T, q_eq, bound: float = 1e3):
        self.n = int(T.shape[1])
        self.kernel = _kernel()
        self.tree, self.planar = None, False
        if self.kernel is not None:  # the planar dynamics where they apply (5x less work)
            self.tree = pack_planar(model.pin_model)
            self.planar = self.tree is not None
            if not self.planar:
                self.tree = pack_tree(model.pin_model)
        if not self.available:
            return
        nv = model.nv
        self.T = np.ascontiguousarray(T, dtype=float)
        self.iu = np.flatnonzero(model.passive).astype(np.int64)
        self.q_eq = np.asarray(q_eq, dtype=float).copy()
        zero = np.zeros(nv)
        K = np.asarray(model.stiffness, float) if model.has_springs else zero
        D = np.asarray(model.damping, float) if model.has_springs else zero
        self.spring = np.vstack([K, D, np.asarray(model.q_rest, float)])
        self.g = np.array(model.pin_model.gravity.linear, float)
        self.fi, self.ff = np.zeros(0, np.int64), np.zeros((0, 12))
        # the planar kernel's rows wanted: the passive joints' (and those below them)
        self.rows = wanted_rows(self.tree[0], self.iu)
        n = self.n
        self.buf = np.zeros(nv * nv + 61 * nv + n * n + 16 * n)
        self.bound = float(bound)

    @property
    def available(self) -> bool:
        """The compiled kernel applies to this model."""
        return self.tree is not None

    def integrate(self, q_u0, v_u0, t1: float, nsteps: int, keep_response: bool = False):
        """RK4 of the augmented zero dynamics from ``q_u(0) = q_u0``, ``q_u'(0) = v_u0``.

        Returns
        -------
        status : int
            :data:`OK`, :data:`UNBOUNDED` or :data:`SINGULAR`.
        t : float
            Time reached [s].
        z : (3 n_u,)
            ``[q_u, q_u', int q_u^2 dt]`` at ``t``.
        response : (steps + 1, n_u)
            q_u at every step when ``keep_response``, else (0, n_u).
        """
        n = self.n
        z = np.concatenate([np.asarray(q_u0, float), np.asarray(v_u0, float), np.zeros(n)])
        h = t1 / nsteps
        resp = np.zeros((nsteps + 1 if keep_response else 0, n))
        ji, jf = self.tree
        status, done = self.kernel(z, h, int(nsteps), self.bound, n, self.q_eq, self.T,
                                   self.iu, self.spring, self.planar, self.rows, ji, jf,
                                   self.g, self.fi, self.ff, self.buf, resp)
        return int(status), done * h, z, resp[:done + 1] if keep_response else resp
