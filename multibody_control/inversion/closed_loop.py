"""Inversion of fully actuated models with loop closures (Aghili 2005 Sect. 7).

A fully actuated closed loop (as many task rows as the closures leave degrees of freedom) has
no internal dynamics: every method of :func:`~multibody_control.inversion.methods.invert`
lands here, in :func:`invert_closed_loop`.  Imports within the package: :mod:`.result`,
:mod:`.internal` (the time grid).
"""

from __future__ import annotations

import time

import numpy as np
import pinocchio as pin
from scipy.linalg import qr

from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import InputError
from multibody_dynamics.interruptible import INTERRUPTS, reraise_unless_interrupt
from multibody_dynamics.projection import ProjectedDynamics

from ..outputs import Output
from .internal import time_grid
from .result import InversionInterrupted, InversionResult

#: Relative threshold (smallest / largest singular value) below which the stacked Jacobian
#: [A; H] or the closure Jacobian's passive columns count as rank-deficient in
#: :func:`invert_closed_loop`: the feedforward there is ~1/threshold times its typical size.
_CLOSED_LOOP_SINGULAR_RTOL = 1e-6


def invert_closed_loop(model, output, task, method, dt, t_start, t_end, ik_guess, start,
                       progress=False):
    """Fully actuated closed loops: closures and task solved together (Aghili 2005 Sect. 7).

    At every sample the configuration solves the combined position problem ::

        phi(q) = 0,   h_t(q) = p_d(t)

    (closure residual and task map h_t: joint coordinates such as the five-bar's motors, or
    frame coordinates such as ``'tip.x'``, ``'tip.y'``) by Newton's method on the manifold
    (damped least squares, :func:`_assemble_closed_loop`), warm-started from the previous
    sample with the second-order prediction ``q (+) (v dt + a dt^2 / 2)``; ``ik_guess``
    starts the first solve and so selects the branch (assembly and working mode).  With
    ``K = [A; H_t]`` (closure Jacobian over the task Jacobian)::

        K v = [0; p_d'],   K a = [-gamma; p_d'' - H_t' v],

    solved with the pseudo-inverse of K (redundant closure rows are consistent), and the
    actuation is the projection method's minimum-norm inverse dynamics with zero effort on
    the passive joints (:meth:`ProjectedDynamics.inverse_dynamics_result`, eqs. 45, 59-62).  The
    output y = h(q) is evaluated on the solution: when its rows are the task coordinates
    y_d is the task itself, otherwise (e.g. the motors of a frame-path task) y_d = h(q).
    The ``method`` does not matter: a fully actuated closed loop has no internal dynamics.

    Singular configurations end the inversion with ``success=False``, a message naming the
    time and the cause, and the samples computed before.  Checked in this order, each by a
    relative smallest singular value below ``_CLOSED_LOOP_SINGULAR_RTOL`` (the sample is at
    the singularity) or a determinant changing sign from the previous sample (the path
    crosses it in between):

    * the passive columns A_p of A: the constraint forces cannot hold the passive joints
      (Aghili 2005 eq. 64) and the feedforward is unbounded -- a parallel (direct-kinematic)
      singularity, e.g. the five-bar's distal links aligned, or the slider-crank at
      q1 = +-pi/2 where its constraint row vanishes (eq. 70).  For a joint task on the
      actuated coordinates det K = +-det A_p, so this is where K loses rank for such tasks;
    * K = [A; H_t]: the task and the closures do not fix the velocities -- an
      inverse-kinematic (serial) singularity, e.g. a five-bar leg stretched or folded at the
      boundary of the workspace, the slider-crank at its dead centres.

    Determinants are taken of square matrices: the closure rows independent at the first
    sample (pivoted QR of A^T), stacked over the task rows for K; both relative singular
    values are scaled by the largest singular value of K.

    ``progress`` shows a bar of the samples on stderr.  Ctrl-C raises
    :class:`.result.InversionInterrupted` carrying the samples solved before.
    """
    t0, tf = task.law.t0, task.law.tf
    pm, nv = model.pin_model, model.nv
    exact = tuple(output.names) == tuple(task.names)
    task_map = output if exact else Output(model, task.names)
    cons = Constraints(model)
    pd = ProjectedDynamics(model, cons)
    passive = np.asarray(model.passive, bool)
    ta = min(0.0, t0) if t_start is None else t_start
    tb = tf + 0.5 if t_end is None else t_end
    if not tb > ta:
        raise InputError(f"t_end = {tb} s must be after t_start = {ta} s")
    t_out = time_grid(ta, tb, dt, (t0, tf))
    p, pd_, pdd = task(t_out)
    n = t_out.size
    q = np.empty((n, model.nq))
    v, a = np.zeros((n, nv)), np.zeros((n, nv))
    u = np.zeros((n, model.nu))
    qk = _start_guess(model, ik_guess)
    B_pinv = np.linalg.pinv(model.B)
    rows = sign_k = sign_p = None
    worst_k = worst_p = np.inf
    iterations = [0, 0]  # Newton iterations from ik_guess, most at a later sample

    def stop(k, why):
        """Result with the samples before k, ``success=False`` and ``why``."""
        y = np.array([output.value(x) for x in q[:k]]).reshape(k, output.m)
        y_des = p[:k] if exact else y
        err = float(np.max(np.abs(y - y_des))) if k else np.inf
        return InversionResult(t_out[:k], q[:k], v[:k], a[:k], u[:k], y_des, y,
                               np.zeros((k, 0)), err, t0, tf, 0.0, 0.0, np.zeros(0), False,
                               f"t = {t_out[k]:.4g} s: {why}; the {k} samples before are kept",
                               method, k, time.perf_counter() - start, model.input_names,
                               output.names)

    from tqdm import tqdm

    bar = tqdm(total=n, desc="closed-loop inversion", unit="sample", leave=False,
               mininterval=0.5, disable=not progress)
    k = 0
    try:
        for k in range(n):
            if k:  # second-order prediction from the previous sample
                h = t_out[k] - t_out[k - 1]
                qk = pin.integrate(pm, q[k - 1], h * v[k - 1] + 0.5 * h * h * a[k - 1])
            qk, K, res, its = _assemble_closed_loop(cons, task_map, qk, p[k],
                                                    100 if k == 0 else 30)
            if k == 0 and res > 1e-10 and ik_guess is None:  # e.g. a singular default start
                qk, K, res, its = _retry_assembled(model, cons, task_map, task, p[0],
                                                   (qk, K, res, its))
            iterations[bool(k)] = max(iterations[bool(k)], its)
            if res > 1e-10:
                want = ", ".join(f"{name} = {x:.6g}" for name, x in zip(task.names, p[k]))
                return stop(k, f"the closures and the task ({want}) cannot be met together "
                               f"(residual {res:.3g} after {its} Newton iterations): out of reach "
                               "(outside the workspace) or at a singular configuration"
                               + ("" if k else "; give ik_guess near the start"))
            A = K[: cons.n_holonomic]
            if k == 0:
                rank_a = int(np.linalg.matrix_rank(A)) if A.size else 0
                dof = nv - rank_a
                if task_map.m != dof:
                    raise InputError(f"{model.name} has loop closures: its closures leave "
                                     f"{dof} degrees of freedom at the start (nv = {nv}, rank A "
                                     f"= {rank_a}); the task prescribes {task_map.m} "
                                     f"({', '.join(task.names)}); the inverse model needs as "
                                     "many (underactuated closed loops are not supported)")
                if passive.sum() > rank_a:
                    raise InputError(f"{model.name}: {int(passive.sum())} passive joints but "
                                     f"only {rank_a} independent closure rows to hold them; the "
                                     "inverse model of underactuated closed loops is not "
                                     "supported")
                rows = np.sort(qr(A.T, pivoting=True)[2][:rank_a]) if rank_a else np.zeros(0, int)
            U, s, Vt = np.linalg.svd(K, full_matrices=False)
            cond_k = s[-1] / s[0] if s.size == nv and s[0] > 0 else 0.0
            Ksq = np.vstack([A[rows], K[cons.n_holonomic:]])
            Ap = A[rows][:, passive]
            sig_p = np.linalg.svd(Ap, compute_uv=False) if Ap.size else np.ones(1)
            cond_p = (sig_p[-1] / s[0] if sig_p.size == Ap.shape[1] and s[0] > 0 else 0.0) \
                if Ap.size else 1.0
            worst_k, worst_p = min(worst_k, cond_k), min(worst_p, cond_p)
            new_k = np.sign(np.linalg.det(Ksq)) if Ksq.shape[0] == nv else 0.0
            new_p = np.sign(np.linalg.det(Ap)) if Ap.size and Ap.shape[0] == Ap.shape[1] else 0.0
            between = "" if k == 0 else f"between t = {t_out[k - 1]:.4g} s and {t_out[k]:.4g} s "
            # the passive block first: for a joint task on the actuated coordinates
            # det K = +-det A_p, and its loss of rank is a parallel singularity, not a serial one
            if cond_p < _CLOSED_LOOP_SINGULAR_RTOL or (k and new_p * sign_p < 0):
                how = (f"the closure Jacobian's passive columns lose rank (sigma_min / "
                       f"sigma_max = {cond_p:.3g})" if cond_p < _CLOSED_LOOP_SINGULAR_RTOL else
                       f"the determinant of the closure Jacobian's passive columns changes sign "
                       f"{between}(the path crosses a singular configuration)")
                names = ", ".join(np.asarray(model.coordinate_names)[passive])
                return stop(k, f"parallel (direct-kinematic) singularity: {how}; the constraint "
                               f"forces cannot hold the passive joints ({names}), Aghili (2005) "
                               "eq. 64: the feedforward is unbounded")
            if cond_k < _CLOSED_LOOP_SINGULAR_RTOL or (k and new_k * sign_k < 0):
                how = (f"[A; H] loses rank (sigma_min / sigma_max = {cond_k:.3g})"
                       if cond_k < _CLOSED_LOOP_SINGULAR_RTOL else
                       f"det [A; H] changes sign {between}(the path crosses a singular "
                       "configuration)")
                return stop(k, f"inverse-kinematic (serial) singularity: {how}; the task "
                               f"({', '.join(task.names)}) and the closures do not fix the joint "
                               "velocities (for an end-effector path: a leg stretched or folded, "
                               "the workspace boundary)")
            sign_k, sign_p = new_k, new_p
            K_pinv = (Vt.T / s) @ U.T
            v[k] = K_pinv @ np.concatenate([np.zeros(A.shape[0]), pd_[k]])
            gamma = cons.bias(qk, v[k])
            a[k] = K_pinv @ np.concatenate([-gamma[: A.shape[0]],
                                            pdd[k] - task_map.bias(qk, v[k])])
            ires = pd.inverse_dynamics_result(qk, v[k], a[k])
            q[k] = qk
            if not ires.success:
                return stop(k, ires.message)
            u[k] = B_pinv @ ires.tau
            if bar is not None:
                bar.update(1)
    except INTERRUPTS as exc:  # Ctrl-C: the samples before the current one are complete
        reraise_unless_interrupt(exc)
        raise InversionInterrupted(stop(k, "interrupted (Ctrl-C)")) from None
    finally:
        bar.close()
    y = np.array([output.value(x) for x in q])
    y_des = p if exact else y
    msg = (f"closed loop: closures and task solved together at {n} samples (Newton: "
           f"{iterations[0]} iterations from ik_guess, then at most {iterations[1]} a sample), "
           f"inverted by projection (method {method!r} irrelevant: no internal dynamics); "
           f"smallest sigma_min/sigma_max of [A; H] {worst_k:.3g}, of A's passive columns "
           f"{worst_p:.3g}")
    return InversionResult(t_out, q, v, a, u, y_des, y, np.zeros((n, 0)),
                           float(np.max(np.abs(y - y_des))), t0, tf, 0.0, 0.0, np.zeros(0), True,
                           msg, method, n, time.perf_counter() - start, model.input_names,
                           output.names)


def _start_guess(model, ik_guess) -> np.ndarray:
    """(nq,) start of the first Newton solve: ``ik_guess`` (checked), else the model's default
    start (``q_initial``: its ``initial_positions``, else the rest configuration)."""
    if ik_guess is None:
        return np.array(getattr(model, "q_initial", model.q_rest), float)
    qk = np.array(ik_guess, float)
    if qk.shape != (model.nq,):
        raise InputError(f"ik_guess: expected shape ({model.nq},) = "
                         f"({', '.join(model.coordinate_names)}), got {qk.shape}")
    return qk


def _retry_assembled(model, cons, task_map, task, p0, first):
    """The first solve again from an assembled start, when Newton from the default start did
    not converge (a start where [A; H] is singular, such as a four-bar drawn straight, gives
    Newton no direction): the closures assembled by Levenberg-Marquardt from several starts
    (:func:`multibody_dynamics.assembly.assemble`) with the task's joint coordinates at the
    first sample held, the mode nearest the default start.  Returns the better of the two
    solves, ``(q, K, residual, iterations)``."""
    from multibody_dynamics.assembly import assemble

    given = {n: float(x) for n, x in zip(task.names, p0) if n in model.coordinate_names}
    try:
        start = assemble(model, given)
    except InputError:  # e.g. a joint of several coordinates: keep the first answer
        return first
    if not start.success:
        return first
    second = _assemble_closed_loop(cons, task_map, start.q, p0, 100)
    return second if second[2] < first[2] else first


def _assemble_closed_loop(cons, task_map, q, p, max_iter, tol=1e-12):
    """Newton on [phi(q); h_t(q) - p] = 0 over all coordinates, updates by ``pin.integrate``.

    Damped least squares (a tiny fixed damping relative to ||K||^2): well defined where the
    start is singular or closure rows are redundant, quadratic convergence near the answer.
    Stops below ``tol`` [m | rad], after ``max_iter`` steps, or when a step falls below
    round-off of the kinematics.

    Returns
    -------
    q : (nq,) the last iterate; K : (m_c + m_t, nv) [A; H_t] at q
    residual : float, ||[phi; h_t - p]||_inf at q [m | rad]; iterations : int
    """
    pm = cons.model.pin_model
    stalled = False
    for it in range(max_iter + 1):
        phi, A = cons.residual_and_jacobian(q)
        r = np.concatenate([phi, task_map.value(q) - p])
        K = np.vstack([A, task_map.jacobian(q)])
        res = float(np.max(np.abs(r)))
        if res < tol or it == max_iter or stalled:
            return q, K, res, it
        KtK = K.T @ K
        step = np.linalg.solve(KtK + 1e-14 * max(np.trace(KtK), 1.0) * np.eye(KtK.shape[0]),
                               K.T @ r)
        q = pin.integrate(pm, q, -step)
        stalled = bool(np.max(np.abs(step)) < 1e-15)
    raise AssertionError("unreachable")  # pragma: no cover


