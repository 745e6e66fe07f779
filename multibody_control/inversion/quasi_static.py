"""Quasi-static deformation compensation for rigid models with elastic passive joints.

Seifried (2014) Sect. 6.1, eqs. (6.3)-(6.11), with the passive spring joints in the role of
the elastic coordinates (the book: "can be applied to systems with both flexible bodies and
flexible joints in a straightforward way"; the flexible-body version is
:func:`multibody_control.inversion.flexible.invert_flexible`, method ``"quasi_static"``):

1. rigid inverse kinematics of the task with the passive joints at their spring rest, and the
   inverse dynamics of that rigid system (passive joints locked): ``q_d0``, ``u_d``;
2. about ``q_d0`` the residual ``R(q) = M a_d0 + h - tau_s - B u_d`` is linearised
   (``G = ∂R/∂q``, central differences; the springs enter through ``tau_s``), and its passive
   rows give the quasi-static deflection ``q_u,d = -G_uu^-1 h_u`` (6.6);
3. the task deviation this deflection causes is compensated on the actuated joints,
   ``q~_a = -J_a^-1 J_u q_u,d`` (6.9), with ``J`` the task coordinates' Jacobian;
4. feedforward ``u_d + Δu_d``, ``Δu_d = B_a^-1 (G_aa q~_a + G_au q_u,d + h_a)`` (6.11).

The corrected joint reference needs a feedback law to be tracked (the book: "a feedback
controller is necessary even in the case of no disturbances"); its velocities and
accelerations are numerical derivatives of the samples.
"""

from __future__ import annotations

import time

import numpy as np

from multibody_dynamics.errors import InputError, MultibodyError
from multibody_dynamics.model import MultibodyModel
from multibody_dynamics.rigid import RigidDynamics

from ..outputs import Output
from ..tasks import Task
from .desired import DesiredOutput
from .internal import Problem, time_grid
from .result import InversionResult


def invert_quasi_static(model: MultibodyModel, task: Task, *, dt: float = 1e-3,
                        t_start: float | None = None, t_end: float | None = None,
                        ik_guess=None, step: float = 1e-6, exact_kinematics: bool = True,
                        compensate: bool = True):
    """Quasi-static compensation along ``task`` (module docstring); an ``InversionResult``.

    Parameters
    ----------
    exact_kinematics : bool
        Solve the task for the actuated joints with the passive joints at their quasi-static
        deflection by Newton, started from the linear correction (6.9) (default), instead of
        keeping (6.9) alone: on ``passive_arm_minphase`` (deflections up to 0.23 rad) the
        linear correction leaves 8.5 mm on the half circle, the Newton solve 1e-13 m.
    compensate : bool
        False gives the uncompensated rigid design (passive joints at rest, locked-joint
        inverse dynamics), the baseline the compensation is compared with.

    The result's output is the task itself: ``y_desired`` the task coordinates, ``y`` those
    reached by the reference ``q``; ``eta`` the passive deflection and its rate.

    Raises
    ------
    InputError
        The model has closures or passive joints without springs (nothing quasi-static to
        compensate: the deflection of a free joint is not determined by the loads).
    """
    if model.closures:
        raise InputError(f"{model.name}: quasi-static compensation needs an open chain")
    if model.nq != model.nv:
        raise InputError(f"{model.name}: quasi-static compensation needs nq == nv (1-DoF joints), "
                         f"got nq = {model.nq}, nv = {model.nv}")
    iu = np.flatnonzero(model.passive)
    ia = np.flatnonzero(~model.passive)
    if iu.size == 0 or np.any(model.stiffness[iu] <= 0):
        raise InputError(f"{model.name}: quasi-static compensation needs elastic passive joints "
                         "(stiffness > 0 in the model YAML); use method 'classical' or 'stable'")
    start = time.perf_counter()
    t0, tf = task.law.t0, task.law.tf
    ta = min(0.0, t0) if t_start is None else float(t_start)
    tb = tf + 0.5 if t_end is None else float(t_end)
    if not tb > ta:
        raise InputError(f"t_end = {tb} s must be after t_start = {ta} s")
    t = time_grid(ta, tb, dt, (t0, tf))
    task_map = Output(model, task.names)
    joints = Output(model, [model.coordinate_names[i] for i in ia])
    rigid = DesiredOutput(model, joints, task, guess=ik_guess)
    dyn = RigidDynamics(model)
    Ba = model.B[ia]
    n = len(t)
    q = np.tile(model.q_rest, (n, 1)).astype(float)
    u = np.zeros((n, model.nu))
    eye = np.eye(model.nv)
    message = ("quasi-static deformation compensation (6.6)-(6.11)" if compensate
               else "rigid design: passive joints at rest and locked")
    success = True
    k = nfev = 0  # nfev: inverse-dynamics evaluations
    try:
        for k, tk in enumerate(t):
            qa, va, aa = rigid(tk)
            q0 = model.q_rest.astype(float).copy()
            q0[ia] = qa
            v0, a0 = np.zeros(model.nv), np.zeros(model.nv)
            v0[ia], a0[ia] = va, aa
            ud = np.linalg.solve(Ba, dyn.inverse_dynamics(q0, v0, a0)[ia])  # passive locked
            nfev += 1

            def residual(x, v0=v0, a0=a0, ud=ud):
                return dyn.inverse_dynamics(x, v0, a0) - model.B @ ud

            if not compensate:
                q[k], u[k] = q0, ud
                continue
            h = residual(q0)
            G = np.column_stack([(residual(q0 + step * e) - residual(q0 - step * e)) / (2 * step)
                                 for e in eye])
            nfev += 1 + 2 * len(eye)
            qu = -np.linalg.solve(G[np.ix_(iu, iu)], h[iu])  # (6.6)
            J = task_map.jacobian(q0)
            dqa = -np.linalg.solve(J[:, ia], J[:, iu] @ qu)  # (6.9)
            q[k, ia] = qa + dqa  # (6.10)
            q[k, iu] = model.q_rest[iu] + qu
            if exact_kinematics:
                q[k] = task_map.solve(q[k], ia, task(tk)[0], tol=1e-12)
                dqa = q[k, ia] - qa
            u[k] = ud + np.linalg.solve(Ba, G[np.ix_(ia, ia)] @ dqa
                                        + G[np.ix_(ia, iu)] @ qu + h[ia])
    except (MultibodyError, np.linalg.LinAlgError) as exc:
        success = False
        message = f"quasi-static compensation failed at t = {t[k]:.4g} s: {exc}"
        if isinstance(exc, np.linalg.LinAlgError):
            message += " (singular stiffness or task Jacobian)"
        t, q, u = t[:k], q[:k], u[:k]
    if len(t) >= 3:
        v = np.gradient(q, t, axis=0, edge_order=2)
        a = np.gradient(v, t, axis=0, edge_order=2)
    else:
        v = a = np.zeros_like(q)
        if success:
            success, message = False, ("quasi-static compensation: fewer than 3 samples; "
                                       "lower dt")
    y_des = task(t)[0] if len(t) else np.zeros((0, len(task.names)))
    y = np.array([task_map.value(x) for x in q]) if len(t) else y_des
    eta = np.hstack([q[:, iu], v[:, iu]])
    err = float(np.max(np.abs(y - y_des))) if len(t) else np.inf
    return InversionResult(t, q, v, a, u, y_des, y, eta, err, t0, tf, 0.0, 0.0, np.zeros(0),
                           success, message, "quasi_static" if compensate else "rigid", nfev,
                           time.perf_counter() - start,
                           model.input_names, tuple(task.names))


def solve_quasi_static(problem: Problem, options) -> InversionResult:
    """Method ``"quasi_static"`` of :data:`~.methods.METHODS`: :func:`invert_quasi_static` with
    the fields of a :class:`~.methods.QuasiStaticOptions` (the output is not used: the task
    is the output)."""
    return invert_quasi_static(problem.model, problem.task, dt=options.dt,
                               t_start=options.t_start, t_end=options.t_end,
                               ik_guess=options.ik_guess,
                               exact_kinematics=options.exact_kinematics,
                               compensate=options.compensate)
