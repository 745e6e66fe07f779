"""Open-loop check of a feedforward: the plant simulated under ``result.u`` (:func:`verify`),
with the model's actuator limits applied as ``simulate`` and ``run`` apply them.

Imports within the package: :mod:`.result`, :mod:`.desired`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.integrate import solve_ivp

from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import InputError
from multibody_dynamics.interruptible import solve_ivp_streaming
from multibody_dynamics.model import MultibodyModel
from multibody_dynamics.model.actuator_limits import LimitExcess, actuation_force, limit_excess
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
        (NaN for a task of joint coordinates only)
    max_error : float [m] (NaN for a joint task)
    output_error : float, max |h(q) - y_d|
    success : bool; message : str
    limit_excess : tuple of LimitExcess
        The actuator limits (MJCF ``ctrlrange``, ``forcerange``, ``actuatorfrcrange``) that
        the feedforward exceeds along the inversion's motion; empty when it stays within them
        or the model has none.  When not empty, the simulated response is that of the
        limited input.
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    end_effector_error: np.ndarray
    max_error: float
    output_error: float
    success: bool
    message: str
    limit_excess: tuple[LimitExcess, ...] = ()


def verify(model: MultibodyModel, result: InversionResult, task: Task,
           output: Output | None = None,
           rtol: float = 1e-10, atol: float = 1e-12,
           on_sample: Callable[[float, np.ndarray], None] | None = None) -> VerificationResult:
    """Simulate the plant open loop with ``result.u`` from the result's first state.

    The feedforward is interpolated by cubic splines through its samples, broken at t0 and
    tf (:meth:`InversionResult.u_interpolant`); the plant
    M a + h = B u + tau_s is integrated with DOP853 at tight tolerances, so that the
    error measures the feedforward, not the check.  Models with loop closures integrate the
    projected dynamics instead (:func:`_verify_closed_loop`).  A task of joint coordinates
    only has no end-effector point: its ``end_effector_error`` is NaN (``output_error``
    measures it).

    A model with MuJoCo actuator limits (an MJCF's ``ctrlrange``, ``forcerange``,
    ``actuatorfrcrange``; ``model.actuator_limits``) is driven as ``simulate`` and ``run``
    drive it: ``B u`` is replaced by the limited force of
    :func:`~multibody_dynamics.model.actuator_limits.actuation_force` at every evaluation, so
    the response is that of the input the actuators can give.  The limits the feedforward
    exceeds along the inversion's own motion (its ``q``, ``v``) are listed in
    ``limit_excess`` (:func:`~multibody_dynamics.model.actuator_limits.limit_excess`): which
    limit, how far, when.  ``result`` itself is not changed: the feedforward stays the
    unlimited inverse input.

    ``on_sample(t, q)`` (optional) receives the check's samples (``t`` [s], ``q`` (nq,)) as
    it integrates (:func:`~multibody_dynamics.interruptible.solve_ivp_streaming`), e.g. for
    the live viewer; the result is the same.
    """
    if not result.success or result.t.size < 2:
        raise InputError(f"cannot verify a failed inversion: {result.message}")
    if model.closures:
        return _verify_closed_loop(model, result, task, output, rtol, atol, on_sample)
    sol, t, q, v = _open_loop(model, result, RigidDynamics(model).forward_dynamics, rtol, atol,
                              on_sample)
    ee, max_ee = _end_effector(model, task, t, q)
    return VerificationResult(t, q, v, ee, max_ee, _output_error(output, result, q),
                              sol.status == 0, sol.message, _excess(model, result))


def _end_effector(model, task, t, q) -> tuple[np.ndarray, float]:
    """``(end_effector_error, max_error)`` [m]; NaN for a task of joint coordinates only (it
    has no end-effector point to measure)."""
    if any("." in n and n.split(".")[0] not in model.coordinate_names for n in task.names):
        ee = end_effector_error(model, task, t, q)
        return ee, float(ee.max())
    return np.full(np.asarray(t).size, np.nan), np.nan


def _excess(model, result) -> tuple[LimitExcess, ...]:
    """The actuator limits ``result.u`` exceeds at the inversion's own samples (none without
    limits)."""
    limits = getattr(model, "actuator_limits", None)
    if limits is None:
        return ()
    names = model.coordinate_names if len(model.coordinate_names) == model.nv else None
    return limit_excess(limits, result.t, result.q, result.v, result.u, names)


def _open_loop(model, result, acceleration, rtol, atol, on_sample=None):
    """The feedforward ``result.u`` applied open loop from the first state: ``q' = v``,
    ``v' = acceleration(q, v, tau(t))`` with DOP853, sampled at ``result.t``; ``tau`` is
    ``B u(t)``, or the limited force of ``actuation_force`` when the model has actuator
    limits; returns ``(sol, t, q, v)``.  ``on_sample(t, q)``: the samples as they come."""
    u_spline = result.u_interpolant()
    nq = model.nq

    def rhs(t, x):
        q, v = x[:nq], x[nq:]
        return np.concatenate([v, acceleration(q, v, actuation_force(model, q, v,
                                                                     u_spline(t)))])

    x0 = np.concatenate([result.q[0], result.v[0]])
    if on_sample is None:
        sol = solve_ivp(rhs, (result.t[0], result.t[-1]), x0, method="DOP853",
                        t_eval=result.t, rtol=rtol, atol=atol)
    else:
        sol = solve_ivp_streaming(rhs, (result.t[0], result.t[-1]), x0, method="DOP853",
                                  t_eval=result.t, rtol=rtol, atol=atol,
                                  on_sample=lambda t, x: on_sample(t, x[:nq]))
    return sol, sol.t, sol.y[:nq].T, sol.y[nq:].T


def _output_error(output, result, q) -> float:
    """``max |y(q) - y_desired|`` over the samples (inf without an output)."""
    if output is None:
        return np.inf
    return float(np.max(np.abs(np.array([output.value(qk) for qk in q])
                               - result.y_desired[: len(q)])))


def _verify_closed_loop(model, result, task, output, rtol, atol, on_sample=None):
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
    sol, t, q, v = _open_loop(model, result, pd.acceleration, rtol, atol, on_sample)
    drift = max((float(np.max(np.abs(cons.residual(qk)))) for qk in q), default=0.0)
    ee, max_ee = _end_effector(model, task, t, q)
    msg = f"{sol.message} (projected dynamics; closure drift {drift:.3g})"
    return VerificationResult(t, q, v, ee, max_ee, _output_error(output, result, q),
                              sol.status == 0, msg, _excess(model, result))
