"""The result every inversion method returns, and the result of a failed one.

:class:`InversionResult` is the frozen, sample-first record the methods of
:func:`~multibody_control.inversion.methods.invert` (and
:func:`~multibody_control.inversion.flexible.invert_flexible`) return, successful or not;
:meth:`InversionResult.failure` builds the empty result of a solve that stopped before it
produced samples.  This module imports nothing else of the package: every other module of
:mod:`multibody_control.inversion` may import it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.interpolate import CubicSpline


@dataclass(frozen=True)
class InversionResult:
    """Feedforward and the motion it produces, sample-first.

    Attributes
    ----------
    t : (N,) [s]; q : (N, nq); v, a : (N, nv); u : (N, nu) feedforward input
    y_desired, y : (N, m) desired output and the output of q
    eta : (N, 2 n_u) internal states (passive coordinates and velocities)
    output_error : float, max |y - y_desired| over the samples (the servo-constraint
        residual of the inverse model; inf when there are no samples)
    t0, tf : the task's motion interval; t_pre, t_post : pre-/post-actuation lengths [s]
    eigenvalues : zero-dynamics eigenvalues at the start (1/s)
    success : bool; message : str; method : str
    nfev : int (evaluations of the inverse dynamics); wall_time : float [s]
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    u: np.ndarray
    y_desired: np.ndarray
    y: np.ndarray
    eta: np.ndarray
    output_error: float
    t0: float
    tf: float
    t_pre: float
    t_post: float
    eigenvalues: np.ndarray
    success: bool
    message: str
    method: str
    nfev: int
    wall_time: float
    input_names: tuple[str, ...] = field(default=())
    output_names: tuple[str, ...] = field(default=())

    @classmethod
    def failure(cls, model, output, method: str, message: str, *, start: float, t0: float,
                tf: float, t_pre: float = 0.0, t_post: float = 0.0, eigenvalues=None,
                nfev: int = 0, **extra):
        """Result of a solve that stopped before producing samples: ``success=False``.

        Parameters
        ----------
        model : MultibodyModel
            Gives the array widths (nq, nv, nu, passive joints) and the input names.
        output : Output
            Gives the output width and names.
        method, message : str
            The method asked for and why it failed.
        start : float
            ``time.perf_counter()`` at the start of the solve [s] (for ``wall_time``).
        t0, tf, t_pre, t_post : float
            The task's motion interval and the pre-/post-actuation found so far [s].
        eigenvalues : (k,) complex, optional
            Zero-dynamics eigenvalues when known (default none).
        nfev : int
            Inverse-dynamics evaluations spent before the failure.
        **extra
            Further fields of a subclass (e.g. :class:`.causal.CausalInversionResult`).
        """
        e2 = np.zeros((0, model.nv))
        return cls(np.zeros(0), np.zeros((0, model.nq)), e2, e2, np.zeros((0, model.nu)),
                   np.zeros((0, output.m)), np.zeros((0, output.m)),
                   np.zeros((0, 2 * int(np.sum(model.passive)))), np.inf, t0, tf, t_pre, t_post,
                   np.zeros(0) if eigenvalues is None else eigenvalues, False, message, method,
                   int(nfev), time.perf_counter() - start, tuple(model.input_names),
                   tuple(output.names), **extra)

    def u_interpolant(self):
        """Callable u(t): cubic splines through the samples, broken at t0 and tf.

        The feedforward has kinks where the desired jerk jumps (t0, tf); one spline per
        smooth piece keeps the interpolation error O(h^4) instead of O(h^2) there.
        """
        t, u = self.t, self.u
        cuts = [t[0]] + [b for b in (self.t0, self.tf) if t[0] < b < t[-1]] + [t[-1]]
        pieces = []
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            sel = (t >= lo - 1e-12) & (t <= hi + 1e-12)
            pieces.append((lo, hi, CubicSpline(t[sel], u[sel], axis=0) if sel.sum() > 2
                           else (lambda x, tt=t[sel], uu=u[sel]: np.array(
                               [np.interp(x, tt, c) for c in uu.T]).T)))
        bounds = np.array([p[1] for p in pieces])

        def u_of_t(x):
            x = float(np.clip(x, t[0], t[-1]))
            lo, hi, spline = pieces[min(int(np.searchsorted(bounds, x)), len(pieces) - 1)]
            return spline(x)

        return u_of_t


class InversionInterrupted(KeyboardInterrupt):
    """Ctrl-C during an inversion or its open-loop check: still an interrupt for the caller,
    carrying the partial :class:`InversionResult` (``success`` False; the samples computed
    before, all of them when the check was interrupted) as ``result``."""

    def __init__(self, result: InversionResult):
        super().__init__(result.message)
        self.result = result
