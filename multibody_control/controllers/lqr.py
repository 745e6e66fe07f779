"""Time-variant LQR feedback along a trajectory (Seifried 2014 Sect. 4.2.7, eq. 4.128).

The nominal motion (t, q, v, u) -- typically the feedforward of an inversion -- is resampled at
the control period ``dt``, the model is linearized at every sample and discretized with a
zero-order hold (:meth:`multibody_dynamics.linearize.Linearizer.along`, NASA CR-165977
eq. C-122)::

    x(k+1) = Phi_k x(k) + Theta_k du(k),   x = [dq; dv] (dq = q (-) q_ref, tangent space),

and the finite-horizon discrete Riccati recursion runs backwards once, at construction::

    S_N = Q_f
    K_k = (R + Theta_k^T S_k+1 Theta_k)^-1 Theta_k^T S_k+1 Phi_k
    S_k = Q + Phi_k^T S_k+1 (Phi_k - Theta_k K_k).

The terminal weight defaults to the solution of the discrete algebraic Riccati equation at
the last sample, so the recursion is stationary at the end and the gain held after the
horizon is the infinite-horizon gain of the final rest point.  ``step`` is a table lookup
and one matrix-vector product::

    u = u_ff + K_k (x_ref - x),   k = floor((t - t_0) / dt)   (or linear between k and k+1),

with ``x_ref - x = [q_ref (-) q; v_ref - v]`` and ``u_ff`` the reference's feedforward.
Before the first sample the first gain is used, after the last one the last gain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from scipy.linalg import solve_discrete_are

from multibody_dynamics.errors import DimensionError, InputError, SolverError
from multibody_dynamics.linearize import Linearizer
from multibody_dynamics.validation import as_matrix, require_finite

from .base import Controller, ControllerConfig, check_gain_config, gain_vector
from .reference import Reference

_ND, _F8 = np.ndarray, np.dtype(float)
INTERPOLATIONS = ("hold", "linear")


def _weight(value, n: int, name: str, definite: bool) -> np.ndarray:
    """A weight as (n, n): scalar, n diagonal values or a symmetric matrix; checked for
    positive (semi-)definiteness."""
    arr = np.asarray(value, float)
    if arr.ndim <= 1:
        W = np.diag(gain_vector(arr, n, name, positive=definite))
    else:
        if arr.shape != (n, n):
            raise DimensionError(f"{name}: expected a scalar, {n} values or a ({n}, {n}) matrix, "
                                 f"got shape {arr.shape}")
        require_finite(arr, name)
        if not np.allclose(arr, arr.T, rtol=1e-12, atol=1e-12 * np.max(np.abs(arr))):
            raise InputError(f"{name}: expected a symmetric matrix")
        W = 0.5 * (arr + arr.T)
        lo = np.linalg.eigvalsh(W)[0]
        if (definite and lo <= 0) or (not definite and lo < -1e-12 * max(1.0, np.max(np.abs(W)))):
            kind = "positive definite" if definite else "positive semi-definite"
            raise InputError(f"{name}: expected a {kind} matrix, smallest eigenvalue {lo:.3g}")
    return W


@dataclass(frozen=True)
class LQRConfig(ControllerConfig):
    """Settings of :class:`TimeVariantLQRController`.

    Parameters
    ----------
    dt : float
        Control period [s] (> 0): the discretization step of the design, and the spacing
        of the gain table.
    Q : float, sequence or matrix
        State weight of x = [dq; dv] (2 nv): a scalar, 2 nv diagonal values, or a symmetric
        positive semi-definite (2 nv, 2 nv) matrix [units: 1/rad^2, s^2/rad^2 ...].
    R : float, sequence or matrix
        Input weight (nu): scalar, nu values or a positive definite (nu, nu) matrix
        [1/N^2 | 1/(N m)^2].
    terminal : None, float, sequence or matrix
        Terminal weight Q_f (2 nv); None: the discrete algebraic Riccati solution at the last
        sample (falls back to Q when it has none).
    interpolation : str
        ``"hold"`` (gain of the sample at or before t) or ``"linear"`` (between two samples).
    effort_limit : float or sequence
        Output saturation |u| [N | N m] (> 0; inf: none).
    """

    dt: float = 1e-3
    Q: float | tuple = 1.0
    R: float | tuple = 1.0
    terminal: float | tuple | None = None
    interpolation: str = "hold"
    effort_limit: float | tuple = float("inf")

    def __post_init__(self):
        if not (isinstance(self.dt, (int, float)) and np.isfinite(self.dt) and self.dt > 0):
            raise InputError(f"dt: expected a positive control period in s, got {self.dt!r}")
        if self.interpolation not in INTERPOLATIONS:
            raise InputError(f"interpolation: expected one of {', '.join(INTERPOLATIONS)}, got "
                             f"{self.interpolation!r}")
        for name in ("Q", "R", "terminal"):
            val = getattr(self, name)
            if val is None:
                continue
            arr = np.asarray(val, float)
            if arr.ndim > 2:
                raise DimensionError(f"{name}: expected a scalar, a sequence or a matrix, got "
                                     f"shape {arr.shape}")
            if np.any(~np.isfinite(arr)):
                raise InputError(f"{name}: non-finite value(s)")
            if arr.ndim <= 1 and np.any(arr < 0) or (name == "R" and arr.ndim <= 1
                                                      and np.any(arr <= 0)):
                bound = "> 0" if name == "R" else ">= 0"
                raise InputError(f"{name}: expected diagonal values {bound}, got {arr.tolist()}")
            # hashable, immutable storage of matrices
            object.__setattr__(self, name, float(arr) if arr.ndim == 0 else
                               tuple(map(tuple, arr.tolist())) if arr.ndim == 2 else
                               tuple(arr.tolist()))
        object.__setattr__(self, "effort_limit", check_gain_config(self.effort_limit,
                                                                   "effort_limit"))


@dataclass(frozen=True)
class LQRDesign:
    """The precomputed gain table.

    Attributes
    ----------
    t : (N,) sample times [s], spacing ``dt``
    K : (N, nu, 2 nv) gains; K[N-1] is the gain of the terminal weight
    S : (N, 2 nv, 2 nv) cost-to-go matrices
    q, v, u : (N, nq), (N, nv), (N, nu) the resampled nominal motion
    closed_loop_radius : (N - 1,) spectral radius of Phi_k - Theta_k K_k (diagnostic)
    """

    t: np.ndarray
    K: np.ndarray
    S: np.ndarray
    q: np.ndarray
    v: np.ndarray
    u: np.ndarray
    closed_loop_radius: np.ndarray


class TimeVariantLQRController(Controller):
    """Time-variant LQR along a nominal motion, gains precomputed once.

    Parameters
    ----------
    model : MultibodyModel  (open chain: the linearization has no loop closures)
    config : LQRConfig
    t : (N,) increasing times [s] of the nominal motion (N >= 2)
    q : (N, nq); v : (N, nv); u : (N, nu)
        Nominal motion and feedforward (e.g. an :class:`~multibody_control.inversion.
        InversionResult`'s fields), resampled linearly at ``config.dt``.
    """

    config_type = LQRConfig

    def __init__(self, model, config: LQRConfig | None = None, *, t, q, v, u):
        super().__init__(model, config or LQRConfig())
        c = self.config
        nv, nu = model.nv, model.nu
        self.Q = _weight(c.Q, 2 * nv, "Q", definite=False)
        self.R = _weight(c.R, nu, "R", definite=True)
        self.Qf = None if c.terminal is None else _weight(c.terminal, 2 * nv, "terminal", False)
        self.effort_limit = gain_vector(c.effort_limit, nu, "effort_limit")
        self._limited = bool(np.any(np.isfinite(self.effort_limit)))
        self.design = self._design(t, q, v, u)
        self._t0 = float(self.design.t[0])
        self._inv_dt = 1.0 / c.dt
        self._K = np.ascontiguousarray(self.design.K)
        self._last = self._K.shape[0] - 1
        self._linear = c.interpolation == "linear"
        self._pm = model.pin_model
        self._nq, self._nv = model.nq, nv
        self._euclidean = model.nq == nv
        self._x = np.zeros(2 * nv)

    @classmethod
    def from_inversion(cls, model, result, config: LQRConfig | None = None):
        """Build from an :class:`~multibody_control.inversion.InversionResult`."""
        if not result.success:
            raise InputError(f"cannot design along a failed inversion: {result.message}")
        return cls(model, config, t=result.t, q=result.q, v=result.v, u=result.u)

    # -- design ---------------------------------------------------------------------------
    def _resample(self, t, q, v, u):
        model, dt = self.model, self.config.dt
        t = require_finite(np.asarray(t, float), "t")
        if t.ndim != 1 or t.size < 2:
            raise DimensionError(f"t: expected shape (N,) with N >= 2, got {t.shape}")
        if np.any(np.diff(t) <= 0):
            raise InputError("t: expected strictly increasing times")
        n = t.size
        q = require_finite(as_matrix(q, (n, model.nq), "q"), "q")
        v = require_finite(as_matrix(v, (n, model.nv), "v"), "v")
        u = require_finite(as_matrix(u, (n, model.nu), "u"), "u")
        steps = int(np.floor((t[-1] - t[0]) / dt + 1e-9))
        if steps < 1:
            raise InputError(f"t: the motion lasts {t[-1] - t[0]:g} s, shorter than dt = {dt:g} s")
        grid = t[0] + dt * np.arange(steps + 1)
        k = np.clip(np.searchsorted(t, grid, side="right") - 1, 0, n - 2)
        s = ((grid - t[k]) / (t[k + 1] - t[k]))[:, None]
        if model.nq == model.nv:
            qg = (1 - s) * q[k] + s * q[k + 1]
        else:
            qg = np.array([pin.interpolate(model.pin_model, q[i], q[i + 1], float(si))
                           for i, si in zip(k, s[:, 0])])
        return grid, qg, (1 - s) * v[k] + s * v[k + 1], (1 - s) * u[k] + s * u[k + 1]

    def _design(self, t, q, v, u) -> LQRDesign:
        grid, qg, vg, ug = self._resample(t, q, v, u)
        lin = Linearizer(self.model).along(grid, qg, vg, ug)
        Phi, Theta = lin.Phi, lin.Theta
        n = grid.size
        nx, nu = 2 * self.model.nv, self.model.nu
        Q, R = self.Q, self.R
        Qf = self.Qf
        if Qf is None:
            from multibody_dynamics.linearize import discretize_zoh

            Pf, Tf = discretize_zoh(lin.A[-1], lin.B[-1], self.config.dt)
            try:
                Qf = solve_discrete_are(Pf, Tf, Q, R)
            except (np.linalg.LinAlgError, ValueError):
                Qf = Q.copy()  # not stabilizable/detectable at the end: plain terminal weight
        K = np.empty((n, nu, nx))
        S = np.empty((n, nx, nx))
        radius = np.empty(n - 1)
        S[-1] = Qf
        Pf, Tf = (Phi[-1], Theta[-1])
        K[-1] = np.linalg.solve(R + Tf.T @ Qf @ Tf, Tf.T @ Qf @ Pf)
        for k in range(n - 2, -1, -1):
            Sn = S[k + 1]
            Ph, Th = Phi[k], Theta[k]
            StP = Sn @ Ph
            G = R + Th.T @ Sn @ Th
            try:
                Kk = np.linalg.solve(G, Th.T @ StP)
            except np.linalg.LinAlgError:
                raise SolverError(f"time-variant LQR: R + Theta^T S Theta singular at t = "
                                  f"{grid[k]:.6g} s") from None
            Sk = Q + Ph.T @ (StP - Sn @ Th @ Kk)
            S[k] = 0.5 * (Sk + Sk.T)
            K[k] = Kk
            radius[k] = np.max(np.abs(np.linalg.eigvals(Ph - Th @ Kk)))
        if not np.all(np.isfinite(K)):
            raise SolverError("time-variant LQR: non-finite gains (check Q, R and the motion)")
        return LQRDesign(grid, K, S, qg, vg, ug, radius)

    # -- the law -------------------------------------------------------------------------------
    def gain(self, t: float) -> np.ndarray:
        """K (nu, 2 nv) at time t [s] (table lookup, see ``config.interpolation``)."""
        x = (float(t) - self._t0) * self._inv_dt
        if x <= 0.0:
            return self._K[0]
        k = int(x)
        if k >= self._last:
            return self._K[self._last]
        if self._linear:
            s = x - k
            return (1.0 - s) * self._K[k] + s * self._K[k + 1]
        return self._K[k]

    def step(self, t, q, v, reference: Reference) -> np.ndarray:
        """u = u_ff + K(t) (x_ref - x) (nu,) [N | N m] for the state (q (nq,), v (nv,))."""
        if not (q.__class__ is _ND and q.dtype is _F8 and q.shape == (self._nq,)):
            q, v = self._state(q, v)
        elif not (v.__class__ is _ND and v.dtype is _F8 and v.shape == (self._nv,)):
            q, v = self._state(q, v)
        x, nv = self._x, self._nv
        if self._euclidean:
            np.subtract(reference.q, q, out=x[:nv])
        else:
            x[:nv] = pin.difference(self._pm, q, reference.q)
        np.subtract(reference.v, v, out=x[nv:])
        u = self.gain(t) @ x
        if reference.u_ff is not None:
            u += reference.u_ff
        if self._limited:
            np.clip(u, -self.effort_limit, self.effort_limit, out=u)
        return u


__all__ = ["INTERPOLATIONS", "LQRConfig", "LQRDesign", "TimeVariantLQRController"]
