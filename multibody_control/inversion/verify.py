"""Open-loop check of a feedforward: the plant simulated under ``result.u`` (:func:`verify`).

Imports within the package: :mod:`.result`, :mod:`.desired`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp

from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import InputError
from multibody_dynamics.model import MultibodyModel
from multibody_dynamics.projection import ProjectedDynamics
from multibody_dynamics.rigid import RigidDynamics

from ..outputs import Output
from ..tasks import Task
from .desired import end_effector_error
from .result import InversionResult


@dataclass(frozen=True)
class VerificationResult:
    """Open-loop forward simulation of the plant under a feedforward.

    Attributes
    ----------
    t : (N,) [s]; q : (N, nq); v : (N, nv)
    end_effector_error : (N,) [m] distance between reached and desired task frame points
    max_error : float [m]
    output_error : float, max |h(q) - y_d|
    success : bool; message : str
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    end_effector_error: np.ndarray
    max_error: float
    output_error: float
    success: bool
    message: str


def verify(model: MultibodyModel, result: InversionResult, task: Task,
           output: Output | None = None,
           rtol: float = 1e-10, atol: float = 1e-12) -> VerificationResult:
    """Simulate the plant open loop with ``result.u`` from the result's first state.

    The feedforward is interpolated by cubic splines through its samples, broken at t0 and
    tf (:meth:`InversionResult.u_interpolant`); the plant
    M a + h = B u + tau_s is integrated with DOP853 at tight tolerances, so that the
    error measures the feedforward, not the check.  Models with loop closures integrate the
    projected dynamics instead (:func:`_verify_closed_loop`); a joint task there has no
    end-effector point, its ``end_effector_error`` is NaN.
    """
    if not result.success or result.t.size < 2:
        raise InputError(f"cannot verify a failed inversion: {result.message}")
    if model.closures:
        return _verify_closed_loop(model, result, task, output, rtol, atol)
    sol, t, q, v = _open_loop(model, result, RigidDynamics(model).forward_dynamics, rtol, atol)
    ee = end_effector_error(model, task, t, q)
    return VerificationResult(t, q, v, ee, float(ee.max()), _output_error(output, result, q),
                              sol.status == 0, sol.message)


def _open_loop(model, result, acceleration, rtol, atol):
    """The feedforward ``result.u`` applied open loop from the first state: ``q' = v``,
    ``v' = acceleration(q, v, B u(t))`` with DOP853, sampled at ``result.t``; returns
    ``(sol, t, q, v)``."""
    u_spline = result.u_interpolant()
    B, nq = model.B, model.nq

    def rhs(t, x):
        return np.concatenate([x[nq:], acceleration(x[:nq], x[nq:], B @ u_spline(t))])

    x0 = np.concatenate([result.q[0], result.v[0]])
    sol = solve_ivp(rhs, (result.t[0], result.t[-1]), x0, method="DOP853", t_eval=result.t,
                    rtol=rtol, atol=atol)
    return sol, sol.t, sol.y[:nq].T, sol.y[nq:].T


def _output_error(output, result, q) -> float:
    """``max |y(q) - y_desired|`` over the samples (inf without an output)."""
    if output is None:
        return np.inf
    return float(np.max(np.abs(np.array([output.value(qk) for qk in q])
                               - result.y_desired[: len(q)])))


def _verify_closed_loop(model, result, task, output, rtol, atol):
    """:func:`verify` for models with loop closures: the projected dynamics (Aghili 2005
    eq. 22, ``A a + gamma = 0`` enforced on acceleration level) integrated with DOP853.

    No position projection: at these tolerances the closure drift stays at the integration
    error (reported in the message), and the motion is not altered by the check.
    """
    if model.nq != model.nv:
        raise InputError(f"verify: {model.name} has loop closures and nq = {model.nq} != nv = "
                         f"{model.nv}; the open-loop check of closed loops integrates q' = v and "
                         "needs nq == nv (use multibody_dynamics.simulate)")
    cons = Constraints(model)
    pd = ProjectedDynamics(model, cons)
    sol, t, q, v = _open_loop(model, result, pd.acceleration, rtol, atol)
    drift = max((float(np.max(np.abs(cons.residual(qk)))) for qk in q), default=0.0)
    if any("." in n and n.split(".")[0] not in model.coordinate_names for n in task.names):
        ee = end_effector_error(model, task, t, q)
        max_ee = float(ee.max())
    else:  # a joint task: no end-effector point to measure
        ee, max_ee = np.full(t.size, np.nan), np.nan
    msg = f"{sol.message} (projected dynamics; closure drift {drift:.3g})"
    return VerificationResult(t, q, v, ee, max_ee, _output_error(output, result, q),
                              sol.status == 0, msg)
