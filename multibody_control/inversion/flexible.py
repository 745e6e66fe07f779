"""Feedforward control of planar flexible manipulators (Seifried 2014 Ch. 6, Sect. 6.4).

The end effector of a :class:`~multibody_dynamics.flexible.system.FlexibleChain` follows a
task (e.g. :func:`~multibody_control.tasks.straight_line`); four feedforward designs are
available through :func:`invert_flexible`, each returning an
:class:`~multibody_control.inversion.result.InversionResult` whose ``q`` holds the reference
of every coordinate (joint angles and elastic coordinates) and ``u`` the joint torques:

``"rigid"``
    Rigid-body inverse kinematics of the task with the arms undeformed (the geometric
    approximation ``r_ap(y)`` of (6.30) with the total arm lengths) and inverse dynamics of the
    rigid system, ``u = (M a + k - g)_r`` at ``q_e = 0`` (Sect. 4.1.1).
``"collocated"``
    Exact inversion for the collocated output ``y = q_r`` (Sect. 6.2): the same joint
    trajectory, with the elastic coordinates integrated forward as internal dynamics (bounded
    for this output) and the joint torques from the full model.
``"quasi_static"``
    Quasi-static deformation compensation (Sect. 6.1): about the rigid reference ``q_d0`` the
    residual of the equations of motion ``R(q, v, a) = M a + k + f_e - g - B u_d`` is
    linearized; its elastic rows give ``q_e,d = -G_ee^-1 h_e`` (6.6), the end-effector
    deviation they cause is compensated by ``q~_r = -J_r^-1 J_e q_e,d`` (6.9), ``q_r,d =
    q_r,d0 + q~_r`` (6.10), and the feedforward is ``u_d + Δu_d`` with ``Δu_d = B_r^-1 (G_rr
    q~_r + G_re q_e,d + h_r)`` (6.11). ``G`` is ``∂R/∂q`` (central differences, the stiffness
    ``K_e`` included); ``h_r = 0`` because ``u_d`` is the rigid inverse dynamics of ``q_d0``.
    The velocities and accelerations of the corrected reference (used by the feedback) are
    numerical derivatives, as the book notes.
``"stable"``
    Stable inversion for the linearly combined output ``y = q_r + Γ q_e`` (Sect. 6.3,
    Γ from (6.34)-(6.37) by default): internal states ``η = (q_e, q_e')``, servo-constraint
    ODE form (5.22) ``[M_e; I Γ] a = [(g - k - f_e)_e; y_d'']``, and the two-point boundary
    value problem on the extended interval of :func:`~multibody_control.inversion.methods.invert`
    (same solver, boundary conditions on the stable/unstable eigenspaces, pre-/post-actuation
    from the zero-dynamics eigenvalues). ``y_d`` comes from the rigid inverse kinematics, as
    the book does.
``"classical"``
    Classical inversion (Def. 3.6) for the same combined output: the internal dynamics are
    integrated forward from the rest equilibrium, as for ``"collocated"``; bounded only for a
    minimum-phase Γ (the output design of Sect. 7.3, eqs. 7.12-7.17).

:func:`track_flexible` checks a design the way Sect. 6.4.1 does: the plant is simulated with
the feedforward plus a stiff PD law on the joint angles around the design's joint reference
(the book's "PID controllers tuned so that the joint trajectories are tracked exactly"), and
the end-effector error against the task is reported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from scipy.integrate import solve_ivp

from multibody_dynamics.errors import DimensionError, InputError, MultibodyError, SolverError
from multibody_dynamics.flexible.output import chain_combined_output
from multibody_dynamics.flexible.servo import ElasticServo
from multibody_dynamics.flexible.simulation import FlexibleSimulation
from multibody_dynamics.flexible.system import FlexibleChain
from multibody_dynamics.interruptible import INTERRUPTS, interrupt_in, reraise_unless_interrupt
from multibody_dynamics.validation import check_motion_sampled, check_sample_budget

from ..tasks import Task
from .desired import TabulatedOutput
from .internal import INTERRUPTED, decay_time, integrate_forward, record, solve_stable, time_grid
from .result import InversionInterrupted, InversionResult

FLEXIBLE_METHODS = ("rigid", "collocated", "quasi_static", "stable", "classical")


class FlexibleServo(ElasticServo):
    """Inverse model of a flexible chain with the output ``y = q_r + Γ q_e`` (Seifried 6.24).

    The interface is the one :func:`~multibody_control.inversion.internal.solve_stable` uses with
    :class:`~multibody_control.inversion.servo.ServoConstraints`: internal states
    ``η = (q_e, q_e')``, ``internal_rhs_batch``, ``reconstruct``, ``equilibrium``,
    ``zero_dynamics_jacobian``.

    Parameters
    ----------
    chain : FlexibleChain
        Tangent frames, so that the drives act on the joint coordinates only (``B = [I; 0]``).
    gamma : array_like, shape (nq_r, nq_e)
        Weights of the elastic coordinates in the output [rad per unit q_e]; zeros give the
        collocated output.
    """

    def __init__(self, chain: FlexibleChain, gamma):
        if not isinstance(chain, FlexibleChain):
            raise InputError(f"chain must be a FlexibleChain, got {type(chain).__name__}")
        nr, ne = chain.nq_r, chain.nq_e
        gamma = np.asarray(gamma, float)
        if gamma.shape != (nr, ne):
            raise DimensionError(f"gamma must have shape ({nr}, {ne}) (joints x elastic "
                                 f"coordinates of {chain.config.name}), got {gamma.shape}")
        if not np.all(np.isfinite(gamma)):
            raise InputError("gamma must be finite")
        if ne == 0:
            raise InputError(f"{chain.config.name} has no elastic coordinates: use the rigid "
                             "inverse dynamics")
        self.chain, self.gamma = chain, gamma
        self.nr, self.nu_int = nr, ne
        self.H = np.hstack([np.eye(nr), gamma])
        self.iu = np.arange(nr, nr + ne)
        self.counters = {"dynamics": 0}
        self.on_evaluate = None

    def assemble(self, y, qe) -> np.ndarray:
        """``q = [y - Γ q_e; q_e]`` (also velocities and accelerations: the map is linear)."""
        return np.concatenate([y - self.gamma @ qe, qe])

    def accelerations(self, q, v, ydd) -> np.ndarray:
        """``a`` from ``[M_e; H] a = [(g - k - f_e)_e; y_d'']`` (5.22 with ``D^T = [0 I]``)."""
        self.counters["dynamics"] += 1
        if self.on_evaluate is not None:
            self.on_evaluate(1)
        M, k, g, fe = self.chain.dynamics_terms(q, v)
        nr = self.nr
        A = np.vstack([M[nr:], self.H])
        b = np.concatenate([(g - k - fe)[nr:], ydd])
        try:
            return np.linalg.solve(A, b)
        except np.linalg.LinAlgError:
            raise SolverError("decoupling matrix singular: the output y = q_r + Γ q_e does not "
                              "have relative degree 2 here; change Γ") from None

    def internal_rhs_function(self, ytraj, compiled: bool = True):
        """``f(t, η) -> η'`` for :func:`scipy.integrate.solve_ivp`, the same numbers as
        ``lambda t, e: self.internal_rhs(t, e, ytraj)`` (to rounding).

        With a :class:`~.desired.TabulatedOutput` and the chain's compiled backend, one call is
        one compiled kernel (:mod:`multibody_dynamics.flexible.fast_servo`: table look-up, model
        terms, ``(M_ee - M_er Γ) a_e = (g - k - f_e)_e - M_er y_d''``) instead of about 40
        numpy calls; otherwise (or with ``compiled=False``) the Python path. Counts
        ``counters["dynamics"]`` either way.

        Raises
        ------
        SolverError
            From ``f``: ``M_ee - M_er Γ`` singular (the output loses relative degree 2) or
            the state not finite.
        """
        from multibody_dynamics.flexible.fast_servo import scratch_size, servo_kernel

        kernel = servo_kernel() if compiled and self.chain.backend == "numba" else None
        if kernel is None or not isinstance(ytraj, TabulatedOutput):
            return lambda t, eta: self.internal_rhs(t, eta, ytraj)
        ch, ne = self.chain, self.nu_int
        T, C, G = ytraj.t, np.ascontiguousarray(ytraj.coef), np.ascontiguousarray(self.gamma)
        W, S = np.zeros_like(ch._W), np.zeros(scratch_size(self.nr, ne))

        def rhs(t, eta):
            self.counters["dynamics"] += 1
            if self.on_evaluate is not None:
                self.on_evaluate(1)
            out = np.empty(2 * ne)
            if kernel(float(t), np.asarray(eta, float), T, C, G, ch._P, ch._I, W, S, out):
                raise SolverError("decoupling matrix singular: the output y = q_r + Γ q_e does "
                                  "not have relative degree 2 here; change Γ")
            return out

        return rhs

    def integrate_internal(self, ytraj, eta0, t_out, rtol: float, atol: float,
                           max_step: float, limit: float, compiled: bool = True):
        """Classical inversion: the internal dynamics from ``eta0`` (2 nq_e,) on ``t_out`` (N,)
        [s], as :func:`~.internal.integrate_forward` with :meth:`internal_rhs_function` (DOP853,
        ``rtol``, ``atol``, ``max_step`` [s], stopped when an elastic coordinate reaches
        ``limit``): returns ``(eta (N', 2 nq_e), completed, message)``.

        With a :class:`~.desired.TabulatedOutput` and the compiled backend the whole
        integration is one compiled call (:mod:`multibody_dynamics.flexible.fast_servo`:
        SciPy's DOP853 tableau, initial step, step control, dense output and terminal event,
        so the same steps as SciPy up to rounding); otherwise (or with ``compiled=False``)
        SciPy's ``solve_ivp``.

        Raises
        ------
        SolverError
            ``M_ee - M_er Γ`` singular on the way (the output loses relative degree 2).
        """
        from multibody_dynamics.flexible import fast_servo as fs

        ne = self.nu_int
        kernel = fs.integrate_kernel() if compiled and self.chain.backend == "numba" else None
        if kernel is None or not isinstance(ytraj, TabulatedOutput):
            return integrate_forward(self.internal_rhs_function(ytraj, compiled), eta0, t_out,
                                     rtol, atol, max_step, limit, np.arange(ne))
        ch = self.chain
        t_out = np.ascontiguousarray(t_out, float)
        X, info = np.zeros((len(t_out), 2 * ne)), np.zeros(3)
        status = kernel(np.array(eta0, float), t_out, np.array([rtol, atol, max_step], float),
                        float(limit), np.arange(ne), ytraj.t, np.ascontiguousarray(ytraj.coef),
                        np.ascontiguousarray(self.gamma), ch._P, ch._I, np.zeros_like(ch._W),
                        np.zeros(fs.scratch_size(self.nr, ne)), *fs.dop853_tableau(), X, info)
        n, t_end = int(info[0]), float(info[1])
        self.counters["dynamics"] += int(info[2])
        if self.on_evaluate is not None:
            self.on_evaluate(int(info[2]))
        if status == fs.SINGULAR:
            raise SolverError("decoupling matrix singular: the output y = q_r + Γ q_e does not "
                              "have relative degree 2 here; change Γ")
        if status == fs.EVENT:
            return X[:n], False, (f"internal dynamics diverge: a passive coordinate reached "
                                  f"{limit:g} at t = {t_end:.4g} s")
        if status == fs.TOO_SMALL:
            return X[:n], False, (f"integration failed at t = {t_out[max(n - 1, 0)]:.4g} s: "
                                  "Required step size is less than spacing between numbers.")
        return X[:n], True, "completed"

    def inputs(self, q, v, a) -> np.ndarray:
        """Joint torques ``u = (M a + k + f_e - g)_r`` (B_r = I, B_e = 0)."""
        M, k, g, fe = self.chain.dynamics_terms(q, v)
        return (M @ a + k + fe - g)[:self.nr]

    def state(self, y, yd, qe, qed):
        """``q, v`` from the output, its rate and the elastic state."""
        return self.assemble(y, qe), self.assemble(yd, qed)

    def solve(self, q, v, ydd):
        """``a``, no reactions (open chain), ``u``."""
        a = self.accelerations(q, v, ydd)
        return a, None, self.inputs(q, v, a)

    def decoupling_determinant(self, q) -> float:
        """``det(M_ee - M_er Γ)`` at ``q``: zero exactly where the system of :meth:`accelerations`
        is singular (``det [M_er M_ee; I Γ] = ±det(M_ee - M_er Γ)``), i.e. where the output
        loses relative degree 2 and the zero dynamics ``(M_ee - M_er Γ) q_e'' = ...`` are
        singular [kg m^2 units of M_ee]."""
        M = self.chain.mass_matrix(q)
        nr = self.nr
        return float(np.linalg.det(M[nr:, nr:] - M[nr:, :nr] @ self.gamma))

    def _rest_residual(self, y, qe):
        """Elastic rows of the statics, ``(f_e - g)_e`` at rest: ``K_e q_e = g_e`` at
        equilibrium."""
        _, _, g, fe = self.chain.dynamics_terms(self.assemble(y, qe), np.zeros(self.chain.nv))
        return (fe - g)[self.nr:]


class RigidInverseKinematics:
    """``y_d(t), y_d', y_d''`` of the joints making the undeformed chain follow a task.

    The end point of body ``frame`` (the task's frame, default the chain's end effector) at
    ``q_e = 0`` is ``r_ap(y)``, the rigid forward kinematics with the total arm lengths (6.30).
    Task coordinates that are joint names of the chain (a cart ``"s"``, Seifried (2014)
    Sect. 7.5.2) are prescribed as given; the two frame coordinates are solved for the other
    joints by Newton iterations from ``guess`` (joint values; it selects the elbow branch),
    warm-started from the previous sample.
    """

    def __init__(self, chain: FlexibleChain, task: Task, guess=None):
        names = task.names
        if len(names) != chain.nq_r:
            raise InputError(f"task has {len(names)} coordinates ({', '.join(names)}) but "
                             f"{chain.config.name} has {chain.nq_r} joints")
        joints = list(chain.joint_names)
        fixed = [n for n in names if n in joints]
        pointwise = [n for n in names if n not in joints]
        frames = {n.rsplit(".", 1)[0] for n in pointwise}
        axes = [n.rsplit(".", 1)[-1] for n in pointwise]
        if len(frames) != 1 or axes != ["x", "y"]:
            raise InputError(f"task coordinates must be '<body>.x', '<body>.y' of one body of "
                             f"{chain.config.name} (and joint names {joints} to prescribe), got "
                             f"{list(names)}")
        self.chain, self.task = chain, task
        self.body = chain._body_index(frames.pop())
        self._task_fixed = np.array([names.index(n) for n in fixed], int)
        self._task_point = np.array([names.index(n) for n in pointwise], int)
        self._fixed = np.array([joints.index(n) for n in fixed], int)
        self._free = np.array([i for i in range(chain.nq_r) if joints[i] not in fixed], int)
        self.qr = (np.full(chain.nq_r, 0.5) if guess is None
                   else np.asarray(guess, float).reshape(chain.nq_r).copy())

    def _point(self, qr, vr):
        ch = self.chain
        q, v = np.zeros(ch.nv), np.zeros(ch.nv)
        q[:ch.nq_r], v[:ch.nq_r] = qr, vr
        r, J, bias = ch.point_kinematics(q, v, self.body)
        return r, J[:, :ch.nq_r], bias

    def __call__(self, t):
        task = self.task(float(t))
        (p, pd, pdd), (s, sd, sdd) = ([x[self._task_point] for x in task],
                                      [x[self._task_fixed] for x in task])
        fx, fr = self._fixed, self._free
        qr = self.qr.copy()
        qr[fx] = s
        zero = np.zeros_like(qr)
        for _ in range(50):
            r, J, _ = self._point(qr, zero)
            if np.max(np.abs(r - p)) < 1e-13:
                break
            qr[fr] -= np.linalg.solve(J[:, fr], r - p)
        else:
            raise SolverError(f"rigid inverse kinematics did not converge at t = {t:g} s "
                              f"(target {p.tolist()} m): is it within reach?")
        self.qr = qr
        _, J, _ = self._point(qr, zero)
        if np.linalg.cond(J[:, fr]) > 1e8:
            raise SolverError(f"rigid inverse kinematics singular at t = {t:g} s (arm stretched "
                              "or folded): choose a path away from the workspace boundary")
        vr = np.zeros_like(qr)
        vr[fx] = sd
        vr[fr] = np.linalg.solve(J[:, fr], pd - J[:, fx] @ sd)
        _, _, bias = self._point(qr, vr)
        ar = np.zeros_like(qr)
        ar[fx] = sdd
        ar[fr] = np.linalg.solve(J[:, fr], pdd - bias - J[:, fx] @ sdd)
        return qr.copy(), vr, ar

    def sample(self, t):
        rows = [self(tk) for tk in np.asarray(t, float)]
        return tuple(np.array([r[k] for r in rows]) for k in range(3))

    def tabulate(self, t_grid) -> TabulatedOutput:
        return TabulatedOutput(np.asarray(t_grid, float), *self.sample(t_grid))


def invert_flexible(chain: FlexibleChain, task: Task, method: str = "stable", *, gamma=None,  # noqa: C901
                    dt: float = 1e-3, t_end: float | None = None, decay_tol: float = 1e-6,
                    bvp_tol: float = 1e-6, max_nodes: int = 100000, guess=None,
                    ik_guess=None, check_decoupling: bool = True,
                    progress: bool = False) -> InversionResult:
    """Feedforward for the end effector of ``chain`` to follow ``task`` (module docstring).

    Parameters
    ----------
    chain : FlexibleChain
    task : Task
        End-effector path of one body ('<body>.x', '<body>.y') with its time law.
    method : {"rigid", "collocated", "quasi_static", "stable", "classical"}
    gamma : (nq_r, nq_e), optional
        Output weights for ``"stable"`` and ``"classical"``; default Γ of eqs. (6.34)-(6.37)
        (:func:`~multibody_dynamics.flexible.output.chain_combined_output`).
    dt : float
        Sample spacing of the result [s].
    t_end : float, optional
        End of the result [s]; default ``tf + t_post`` for ``"stable"`` (also the earliest end
        it accepts), ``tf + 0.3`` s otherwise.
    decay_tol, bvp_tol, max_nodes, guess
        As in :func:`~multibody_control.inversion.methods.invert`.
    ik_guess : (nq_r,), optional
        Joint angles near the first point of the path (elbow branch); default 0.5 rad each.
    check_decoupling : bool
        ``"stable"`` without ``guess`` only: before the boundary value problem, evaluate
        ``det(M_ee - M_er Γ)`` (:meth:`FlexibleServo.decoupling_determinant`) along the
        quasi-static deformation, which the exact solution stays close to (Sect. 6.4.1); if it
        changes sign there, the output loses relative degree 2 on the path, the inverse model is
        singular and the design fails at once with that diagnosis instead of after a long
        diverging solve (measured: 53 s to 6 min on ``flexible_manipulator_book`` with the Γ of
        (6.34)-(6.37)). ``False`` skips the check.
    progress : bool
        Live count of model evaluations on stderr (tqdm) for the long methods.

    Raises
    ------
    InputError
        ``method`` unknown, ``dt`` not positive, or a motion whose samples would not fit in
        memory (at least ``min(0, t0) .. t_end`` every ``min(dt, 1 ms)``, more than
        :data:`~multibody_dynamics.validation.MAX_SAMPLES`), before any work.
    InversionInterrupted
        On Ctrl-C, with the samples completed before (the forward integration of
        ``"classical"`` and ``"collocated"`` up to the solver step under way; the motion
        reconstructed after the boundary value problem of ``"stable"``; none otherwise).
    """
    if method not in FLEXIBLE_METHODS:
        raise InputError(f"method: expected one of {', '.join(FLEXIBLE_METHODS)}, got {method!r}")
    if not dt > 0:
        raise InputError(f"dt: expected a positive sample spacing in s, got {dt}")
    t0, tf = task.law.t0, task.law.tf
    _check_samples(t0, tf, dt, t_end)
    start = time.perf_counter()
    nr, ne = chain.nq_r, chain.nq_e
    ik = RigidInverseKinematics(chain, task, ik_guess)
    if gamma is None:
        gamma = (chain_combined_output(chain) if method in ("stable", "classical")
                 else np.zeros((nr, ne)))
    if method not in ("stable", "classical"):
        gamma = np.zeros((nr, ne))
    servo = FlexibleServo(chain, gamma)
    names = tuple(chain.joint_names)
    lam0 = np.zeros(0)
    t_pre = t_post = 0.0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(desc=f"{method} inversion", unit=" evaluations", leave=False, mininterval=0.5)
        servo.on_evaluate = bar.update
    try:
        y0, yf = ik(t0)[0], ik(tf)[0]
        eta0, etaf = servo.equilibrium(y0), servo.equilibrium(yf)
        Q0, _ = servo.zero_dynamics_jacobian(y0, eta0)
        Qf, _ = servo.zero_dynamics_jacobian(yf, etaf)
        lam0, lamf = np.linalg.eigvals(Q0), np.linalg.eigvals(Qf)
        if method == "stable":
            if np.any(np.abs(lam0.real) < 1e-9) or np.any(np.abs(lamf.real) < 1e-9):
                raise SolverError("zero dynamics not hyperbolic for this Γ (eigenvalue on the "
                                  f"imaginary axis: {np.round(lam0, 3).tolist()} 1/s): stable "
                                  "inversion is not defined; use 'collocated' or change Γ")
            t_pre = decay_time(lam0[lam0.real > 0], decay_tol)
            t_post = min(decay_time(lamf[lamf.real < 0], decay_tol), 5.0)
        ta = min(0.0, t0 - t_pre)
        tb = (tf + (t_post if method == "stable" else 0.3)) if t_end is None else float(t_end)
        if method == "stable":
            tb = max(tb, tf + t_post)  # the end condition needs the stable modes decayed
        if not tb > tf:
            raise InputError(f"t_end = {tb} s must be after the motion's end tf = {tf} s")
        t_out = time_grid(ta, tb, dt, (t0, tf))
        grid = np.unique(np.concatenate([np.arange(ta, tb + dt, min(dt, 1e-3)), [t0, tf]]))
        ytraj = ik.tabulate(grid)
        if method == "stable":
            # the quasi-static deformation is close to the exact one (Sect. 6.4.1)
            if guess is None:
                guess = _quasi_static_guess(chain, ik.body, servo, ytraj, t_out, t0, tf)
                if check_decoupling:
                    _check_decoupling(servo, ytraj, t_out, guess)
            try:
                # resolve the fastest zero-dynamics mode on the first mesh: a coarser one lets
                # the collocation Newton steps run away (measured: 300 nodes fail, 2 per time
                # constant converge)
                fastest = float(np.max(np.abs(np.concatenate([lam0, lamf]).real)))
                nodes = int(np.clip(2.0 * fastest * (t_out[-1] - t_out[0]), 300, len(t_out)))
                eta, status, msg = solve_stable(servo, ytraj, t_out, eta0, etaf, Q0, Qf,
                                                max_nodes, bvp_tol, guess, 0,
                                                initial_nodes=nodes)
            except SolverError as exc:
                raise SolverError(f"boundary value problem diverged ({exc}); try another Γ "
                                  "(the book had to change Γ_21, Γ_22 of (6.38), its 'Γ_3, "
                                  "Γ_4', to 13.375, 92.5) or a slower "
                                  "trajectory") from None
            t_out, q, v, a, u, eta, status, msg = record(servo, ytraj, t_out, eta, status, msg)
        elif method in ("collocated", "classical"):
            # the compiled right-hand side under scipy's loop, which Ctrl-C can stop keeping
            # the samples so far (design studies take the fully compiled integrate_internal)
            eta, status, msg = integrate_forward(servo.internal_rhs_function(ytraj), eta0, t_out,
                                                 1e-9, 1e-12, 10 * dt, 1e3, np.arange(ne),
                                                 interruptible=True)
            t_out, q, v, a, u, eta, status, msg = record(servo, ytraj, t_out[:len(eta)], eta,
                                                         status, msg)
        else:
            y, yd, ydd = ytraj(t_out)
            zeros = np.zeros((len(t_out), ne))
            q, v, a = (np.hstack([x, zeros]) for x in (y, yd, ydd))
            u = np.array([servo.inputs(*x) for x in zip(q, v, a)])
            status, msg = True, "rigid-body inverse kinematics and dynamics"
            if method == "quasi_static":
                q, u = _quasi_static(chain, ik.body, q, v, a, u, servo.counters)
                v, a = _derivatives(t_out, q)
                msg = "quasi-static deformation compensation (6.6)-(6.11)"
            eta = np.hstack([q[:, nr:], v[:, nr:]])
    except (MultibodyError, np.linalg.LinAlgError, *INTERRUPTS) as exc:
        if isinstance(exc, INTERRUPTS):
            reraise_unless_interrupt(exc)
        if isinstance(exc, np.linalg.LinAlgError):
            exc = SolverError(f"{method} inversion: singular linear system ({exc}): the path "
                              "passes a singular configuration or the stiffness is singular")
        stopped = interrupt_in(exc)  # outside the stages that keep samples
        empty = np.zeros((0, chain.nv))
        failed = InversionResult(
            np.zeros(0), empty, empty, empty, np.zeros((0, nr)), np.zeros((0, nr)),
            np.zeros((0, nr)), np.zeros((0, 2 * ne)), np.inf, t0, tf, t_pre, t_post, lam0,
            False, f"{INTERRUPTED} before any sample was complete" if stopped else str(exc),
            method, servo.counters["dynamics"], time.perf_counter() - start, names,
            tuple(f"y{k + 1}" for k in range(nr)))
        if stopped:
            raise InversionInterrupted(failed) from None
        return failed
    finally:
        if bar is not None:
            bar.close()
    y_des = ytraj(t_out)[0]
    y = q[:, :nr] + q[:, nr:] @ servo.gamma.T
    # the inverse model's own output error; for quasi-static compensation this is the joint
    # correction q~_r of (6.9) (its output is y = q_r, deliberately off the rigid y_d)
    err = float(np.max(np.abs(y - y_des)))
    if status and not np.all(np.isfinite(u)):
        status, msg = False, "the feedforward contains NaN/inf"
    result = InversionResult(t_out, q, v, a, u, y_des, y, eta, err, t0, tf, t_pre, t_post,
                             lam0, bool(status), msg, method, servo.counters["dynamics"],
                             time.perf_counter() - start, names,
                             tuple(f"y{k + 1}" for k in range(nr)))
    if msg.startswith(INTERRUPTED):  # Ctrl-C: the caller writes the samples kept
        raise InversionInterrupted(result)
    return result


def _check_samples(t0: float, tf: float, dt: float, t_end: float | None) -> None:
    """Refuse, before any work, a ``dt`` not shorter than the motion ``t0 .. tf``, and a
    motion whose samples would not fit in memory, as the
    scenario path does: the grids of :func:`invert_flexible` run at least from ``min(0, t0)``
    to ``t_end`` (default ``tf``; the pre- and post-actuation add to it) every ``min(dt, 1 ms)``
    (the output every ``dt``, the tabulated desired output every 1 ms at most)."""
    check_motion_sampled(t0, tf, dt, "invert_flexible: task / dt")
    lo, hi = min(0.0, t0), tf if t_end is None else max(tf, float(t_end))
    step = min(dt, 1e-3)
    if hi - lo > step:  # shorter intervals are the method's own errors
        check_sample_budget(hi - lo, step, f"invert_flexible: task / dt: {lo:g} .. {hi:g} s",
                            "raise dt or shorten the motion")


def _quasi_static(chain, body, q0, v0, a0, u0, counters, step=1e-6):
    """Corrected references ``q_d = [q_r,d0 + q~_r; q_e,d]`` and ``u_d + Δu_d`` (6.5)-(6.11);
    ``counters["dynamics"]`` counts the model evaluations (1 + 2 nv a sample)."""
    nr, nv = chain.nq_r, chain.nv
    q_out, u_out = q0.copy(), u0.copy()
    eye = np.eye(nv)
    for k, (q, v, a, u) in enumerate(zip(q0, v0, a0, u0)):
        def residual(x, v=v, a=a, u=u):
            M, kk, g, fe = chain.dynamics_terms(x, v)
            r = M @ a + kk + fe - g
            r[:nr] -= u
            return r

        h = residual(q)  # h_r = 0 up to rounding: u_d is the rigid inverse dynamics of q_d0
        G = np.column_stack([(residual(q + step * e) - residual(q - step * e)) / (2 * step)
                             for e in eye])
        counters["dynamics"] += 1 + 2 * nv
        qe = -np.linalg.solve(G[nr:, nr:], h[nr:])  # (6.6)
        _, J, _ = chain.point_kinematics(q, np.zeros(nv), body)
        dqr = -np.linalg.solve(J[:, :nr], J[:, nr:] @ qe)  # (6.9)
        q_out[k, :nr] += dqr  # (6.10)
        q_out[k, nr:] = qe
        u_out[k] += G[:nr, :nr] @ dqr + G[:nr, nr:] @ qe + h[:nr]  # (6.11), B_r = I
    return q_out, u_out


def _quasi_static_guess(chain, body, servo, ytraj, t, t0, tf):
    """η on ``t`` from the quasi-static deformation (6.6), zero outside the motion."""
    nr = chain.nq_r
    y, yd, ydd = ytraj(t)
    zeros = np.zeros((len(t), chain.nq_e))
    q0, v0, a0 = (np.hstack([x, zeros]) for x in (y, yd, ydd))
    u0 = np.array([servo.inputs(*x) for x in zip(q0, v0, a0)])
    q, _ = _quasi_static(chain, body, q0, v0, a0, u0, servo.counters)
    qe = q[:, nr:]
    return np.hstack([qe, np.gradient(qe, t, axis=0, edge_order=2)])


def _check_decoupling(servo, ytraj, t, guess):
    """Raise if ``det(M_ee - M_er Γ)`` changes sign along the guess ``η`` on ``t`` (see
    ``check_decoupling`` of :func:`invert_flexible`)."""
    n = servo.nu_int
    y = ytraj(t)[0]
    det = np.array([servo.decoupling_determinant(servo.assemble(yk, ek[:n]))
                    for yk, ek in zip(y, guess)])
    rest = servo.decoupling_determinant(servo.assemble(y[0], np.zeros(n)))
    flips = np.flatnonzero(np.sign(det[1:]) != np.sign(det[:-1]))
    if flips.size:
        raise SolverError(
            "the output y = q_r + Γ q_e loses relative degree 2 on this motion: det(M_ee - M_er "
            f"Γ) = {rest:.3g} at rest changes sign along the quasi-static deformation (first at "
            f"t = {t[flips[0] + 1]:.3f} s, range {det.min():.3g} to {det.max():.3g}), so the zero "
            "dynamics are singular on the path and the boundary value problem has no solution "
            "to converge to; change Γ (Seifried Sect. 6.4 changed Γ_21, Γ_22 of (6.38) to "
            "13.375, 92.5) or pass check_decoupling=False to try anyway")


def _derivatives(t, q):
    """Velocities and accelerations of sampled references (second-order differences)."""
    v = np.gradient(q, t, axis=0, edge_order=2)
    a = np.gradient(v, t, axis=0, edge_order=2)
    return v, a


@dataclass(frozen=True)
class TrackingResult(FlexibleSimulation):
    """Simulated plant under feedforward plus joint PD (Seifried Sect. 6.4.1 check): a
    :class:`~multibody_dynamics.flexible.simulation.FlexibleSimulation` (so a
    :class:`~multibody_dynamics.simulate.SimulationResult`: ``t``, ``q``, ``v``, ``tau`` the
    generalized input ``B u`` at the samples, ``energy``, ``nfev``, summary, CSV, plot) with
    the tracking errors.

    Attributes
    ----------
    error : (N,) end-effector distance from the task [m]
    max_error : float [m] over the whole run; max_error_motion : float [m] until tf
    joint_error : float, max |q_r - q_r,ref| [rad]
    """

    error: np.ndarray = field(default_factory=lambda: np.zeros(0))
    max_error: float = np.nan
    max_error_motion: float = np.nan
    joint_error: float = np.nan


def track_flexible(chain: FlexibleChain, result: InversionResult, task: Task, *,
                   frequency: float = 10.0, damping: float = 1.0, t_end: float | None = None,
                   dt: float = 1e-3, rtol: float = 1e-8, atol: float = 1e-10) -> TrackingResult:
    """Simulate ``chain`` with ``result.u`` plus PD on the joints around ``result.q[:, :nq_r]``.

    The gains place the rigid joint dynamics at ``frequency`` [Hz] with relative ``damping``:
    ``K_P = M_rr ω²``, ``K_D = 2 ζ ω M_rr`` with ``M_rr`` the joint block of the mass matrix at
    the start (a collocated PD law: it cannot destabilise the elastic modes).
    """
    if not result.success:
        raise InputError(f"the {result.method} inversion failed ({result.message}): nothing to "
                         "track")
    if not frequency > 0 or not damping > 0:
        raise InputError(f"frequency and damping must be positive, got {frequency}, {damping}")
    nr, nv = chain.nq_r, chain.nv
    t_ref = result.t
    u_of_t = result.u_interpolant()
    from scipy.interpolate import CubicSpline

    ref = CubicSpline(t_ref, result.q[:, :nr], axis=0)
    dref = CubicSpline(t_ref, result.v[:, :nr], axis=0)
    x0 = np.concatenate([result.q[0], result.v[0]])
    w = 2 * np.pi * frequency
    Mrr = chain.mass_matrix(result.q[0])[:nr, :nr]
    Kp, Kd = Mrr * w * w, Mrr * 2 * damping * w
    tb = t_ref[-1] if t_end is None else min(float(t_end), t_ref[-1])
    t_eval = time_grid(t_ref[0], tb, dt, (result.t0, result.tf))

    def rhs(t, x):
        q, v = x[:nv], x[nv:]
        u = u_of_t(t) + Kp @ (ref(t) - q[:nr]) + Kd @ (dref(t) - v[:nr])
        a = chain._forward(q, v, chain.generalized_forces(u))
        # a rejected trial step may reach absurd deformations: NaN makes DOP853 shrink the step
        return np.concatenate([v, np.full(nv, np.nan) if a is None else a])

    start = time.perf_counter()
    sol = solve_ivp(rhs, (t_eval[0], t_eval[-1]), x0, method="DOP853", t_eval=t_eval,
                    rtol=rtol, atol=atol, max_step=10 * dt)
    if sol.status != 0:
        raise SolverError(f"simulation of the tracking failed at t = {sol.t[-1]:.4g} s: "
                          f"{sol.message}")
    q, v = sol.y[:nv].T, sol.y[nv:].T
    ik_body = RigidInverseKinematics(chain, task).body
    p_des = task(sol.t)[0]
    p = np.array([chain.point_position(qk, ik_body) for qk in q])
    err = np.linalg.norm(p - p_des, axis=1)
    during = sol.t <= result.tf + 1e-12
    u = np.array([u_of_t(tk) + Kp @ (ref(tk) - qk[:nr]) + Kd @ (dref(tk) - vk[:nr])
                  for tk, qk, vk in zip(sol.t, q, v)])
    return TrackingResult(
        t=sol.t, q=q, v=v, tau=u @ chain.B.T, energy=np.array([chain.energy(qk, vk)
                                                               for qk, vk in zip(q, v)]),
        success=True, message=f"completed (DOP853, rtol {rtol:g}, atol {atol:g})", nsteps=0,
        wall_time=time.perf_counter() - start, names=chain.coordinate_names,
        q_names=chain.coordinate_names, lam=np.zeros((sol.t.size, 0)),
        residual=np.zeros(sol.t.size), velocity_residual=np.zeros(sol.t.size), nrejected=None,
        nfev=int(sol.nfev), mode="adaptive", name=chain.config.name, error=err,
        max_error=float(err.max()), max_error_motion=float(err[during].max()),
        joint_error=float(np.max(np.abs(q[:, :nr] - ref(sol.t)))))
