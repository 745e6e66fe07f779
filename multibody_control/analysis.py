"""Output analysis of underactuated multibody systems (Seifried 2014 Ch. 3, 4, 7).

For an output y = h(q) with as many rows as inputs: the decoupling matrix
alpha = H M^-1 B (eq. 4.29) and its conditioning, the vector relative degree
({2, ..., 2} when alpha is nonsingular), the equilibrium of the internal dynamics at
a constant output, the linearized zero dynamics Q (eq. 3.70) and its eigenvalues, and
whether the system is minimum phase (Def. 3.5: all eigenvalues in the open left half
plane; the printed (3.86) says right, an erratum).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from multibody_dynamics.assembly import RANK_RTOL
from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import InputError, SolverError
from multibody_dynamics.model import MultibodyModel
from multibody_dynamics.rigid import RigidDynamics

from .inversion.servo import ServoConstraints
from .outputs import Output, bent_guess


@dataclass(frozen=True)
class OutputAnalysis:
    """Result of :func:`analyze_output`.

    Attributes
    ----------
    output_names : tuple of str
    q : (nq,) configuration analysed (an equilibrium of the internal dynamics)
    decoupling : (m, m) alpha = H M^-1 B (closed loops: :func:`closed_decoupling`);
        decoupling_cond : its 2-norm condition number
    relative_degree : tuple of int, or None when alpha is singular (not well defined)
    eigenvalues : (2 n_u,) of the linearized zero dynamics [1/s]
    minimum_phase : bool or None (None: a fully actuated system has no zero dynamics,
        or an eigenvalue lies on the imaginary axis)
    message : str, one sentence for a user
    closed : bool, True for a closed loop (alpha from :func:`closed_decoupling`)
    """

    output_names: tuple[str, ...]
    q: np.ndarray
    decoupling: np.ndarray
    decoupling_cond: float
    relative_degree: tuple[int, ...] | None
    eigenvalues: np.ndarray
    minimum_phase: bool | None
    message: str
    closed: bool = False  # alpha of a closed loop: H N (N^T M N)^-1 N^T B

    def format(self) -> str:
        formula = ("H N (N^T M N)^-1 N^T B, N a basis of null(A) (closure-consistent)"
                   if self.closed else "H M^-1 B")
        lines = [f"output            y = [{', '.join(self.output_names)}]",
                 f"configuration     q = {np.round(self.q, 4).tolist()}"
                 + (" (assembled)" if self.closed else ""),
                 f"decoupling matrix alpha = {formula}:"]
        lines += ["    " + "  ".join(f"{x:11.4g}" for x in row) for row in self.decoupling]
        lines.append(f"cond(alpha)       {self.decoupling_cond:.4g}")
        rd = "{" + ", ".join(map(str, self.relative_degree)) + "}" if self.relative_degree \
            else "not defined (alpha singular)"
        lines.append(f"relative degree   {rd}")
        if self.eigenvalues.size:
            lines.append("zero dynamics eigenvalues [1/s]:")
            for lam in sorted(self.eigenvalues, key=lambda z: (z.real, z.imag)):
                tag = ("marginal" if abs(lam.real) < 1e-9 else
                       "stable" if lam.real < 0 else "UNSTABLE")
                lines.append(f"    {lam.real:12.5g} {lam.imag:+12.5g}j   {tag}")
        lines.append(self.message)
        return "\n".join(lines)


def analyze_output(model: MultibodyModel, output: Output, y=None, q_guess=None,
                   singular_cond: float = 1e12) -> OutputAnalysis:
    """Relative degree, decoupling matrix and zero dynamics of ``output``.

    Parameters
    ----------
    y : (m,), optional
        Constant output at which the zero dynamics are linearized (default: the output of
        ``q_guess``, itself defaulting to the spring rest configuration with the actuated
        revolute joints bent by 0.5 rad).
    """
    if output.m != model.nu:
        raise InputError(f"output has {output.m} rows but {model.name} has {model.nu} inputs; "
                         "the analysis needs a square system")
    if model.closures:
        return analyze_closed_output(model, output, q_guess, singular_cond)
    q0 = bent_guess(model) if q_guess is None else np.asarray(q_guess, float)
    y = output.value(q0) if y is None else np.asarray(y, float)
    if y.shape != (output.m,):
        raise InputError(f"y: expected {output.m} values, got shape {y.shape}")
    dyn = RigidDynamics(model)

    def decoupling(q):
        alpha = output.jacobian(q) @ np.linalg.solve(dyn.mass_matrix(q), model.B)
        return alpha, float(np.linalg.cond(alpha))

    alpha, cond = decoupling(q0)
    q = q0
    n_internal = int(model.passive.sum())
    if cond < singular_cond:  # move to the equilibrium of the internal dynamics at y
        servo = ServoConstraints(model, output)
        servo._qa_guess = q0[servo.ia]
        eta0 = servo.equilibrium(y)
        q = servo.solve_positions(y, eta0[: servo.nu_int])
        alpha, cond = decoupling(q)
    rel = tuple([2] * output.m) if cond < singular_cond else None
    if n_internal == 0:
        lam = np.zeros(0, complex)
        mp, msg = None, "fully actuated: no internal dynamics, the inverse model is algebraic"
    elif rel is None:
        lam = np.zeros(0, complex)
        mp, msg = None, ("the decoupling matrix is singular: this output cannot be inverted "
                         "with relative degree 2; choose another output")
    else:
        Q, _ = servo.zero_dynamics_jacobian(y, eta0)
        lam = np.linalg.eigvals(Q)
        mp, msg = _phase(lam)
    return OutputAnalysis(output.names, q, alpha, cond, rel, lam, mp, msg)


def _phase(lam: np.ndarray) -> tuple[bool | None, str]:
    """(minimum phase?, message) of zero-dynamics eigenvalues ``lam`` (Def. 3.5)."""
    if np.any(np.abs(lam.real) < 1e-9):
        return None, "an eigenvalue lies on the imaginary axis: not hyperbolic"
    if np.all(lam.real < 0):
        return True, ("minimum phase: the internal dynamics are stable; classical "
                      "inversion (forward integration) applies")
    nu = int(np.sum(lam.real > 0))
    return False, (f"NON-minimum phase: {nu} unstable zero-dynamics eigenvalue(s); "
                   "use stable inversion (pre-/post-actuation)")


def closed_decoupling(model: MultibodyModel, output: Output, q,
                      constraints: Constraints | None = None) -> tuple[np.ndarray, int]:
    """Closure-consistent decoupling matrix of a closed loop at an assembled ``q``.

    With the closure Jacobian A (r, nv) at ``q`` and an orthonormal basis N (nv, f) of
    null(A) (the admissible velocities v = N w, f degrees of freedom; redundant rows of A
    are harmless), the dynamics M v' + h = B u + A^T lambda projected onto the independent
    velocities w are (N^T M N) w' = N^T (B u - h) - N^T M N' w (the projection of Aghili
    (2005) used by :class:`~multibody_dynamics.projection.ProjectedDynamics`), and
    y'' = H N w' + (terms free of u), so

        alpha = H N (N^T M N)^-1 N^T B   (m, nu),

    the closed-loop counterpart of Seifried (2014) eq. 4.29 (alpha = H M^-1 B of a tree).

    Returns
    -------
    alpha : (m, nu) ndarray [output unit / (s^2 input unit)]
    dof : int
        f, the degrees of freedom of the closed system at ``q``.
    """
    c = Constraints(model) if constraints is None else constraints
    A = c.holonomic_jacobian(q)
    _, s, vt = np.linalg.svd(A)
    rank = int(np.sum(s > RANK_RTOL * max(s[0], 1e-300))) if s.size else 0
    N = vt[rank:].T
    M = RigidDynamics(model).mass_matrix(q)
    alpha = output.jacobian(q) @ N @ np.linalg.solve(N.T @ M @ N, N.T @ model.B)
    return alpha, N.shape[1]


def _closure_rank_drop(model: MultibodyModel, q, tol: float = 1e-8) -> float | None:
    """The smallest singular value of the closure Jacobian ``A(q)`` kept as a rank direction
    (relative rank test, as :func:`closed_decoupling`), divided by the size of ``A`` at the
    model's rest configuration and at ``q`` (the larger largest singular value), when below
    ``tol``: at a singular configuration of the loop (slider_crank at crank = pi/2, rod = -pi,
    where ``A`` vanishes) the relative test keeps round-off as a row and the null-space basis
    ``N`` is arbitrary (alpha 8.84 there, 32.7 at 1e-8 rad from it).  None otherwise."""
    c = Constraints(model)
    s = np.linalg.svd(c.holonomic_jacobian(q), compute_uv=False)
    if not s.size:
        return None
    scale = max(float(s[0]), float(np.linalg.norm(c.holonomic_jacobian(model.q_rest), 2)))
    kept = s[s > RANK_RTOL * max(s[0], 1e-300)]
    if scale <= 0 or not kept.size:
        return None
    ratio = float(kept[-1]) / scale
    return ratio if ratio < tol else None


def analyze_closed_output(model: MultibodyModel, output: Output, q_guess=None,
                          singular_cond: float = 1e12) -> OutputAnalysis:
    """Decoupling matrix of ``output`` of a closed loop at an assembled configuration.

    The loop is assembled with the actuated joints of ``q_guess`` (nq,) held (default: the
    assembly nearest to the model's start configuration) and :func:`closed_decoupling` gives
    alpha.  Closed loops with as
    many inputs as degrees of freedom (all the shipped ones but ``dual_arm_load``) have no
    internal dynamics; with more degrees of freedom than inputs the zero dynamics are
    linearized at the rest point of the internal dynamics with the output held at its value
    at the assembly (:class:`_ClosedZeroDynamics`).

    Raises
    ------
    InputError
        If the loop has fewer degrees of freedom than inputs.
    SolverError
        If the loop cannot be assembled (with the actuated joints of ``q_guess``).
    """
    from multibody_dynamics.assembly import assemble

    given = None
    if q_guess is not None:  # the actuated joints of q_guess are held, the others solved
        q_guess = np.asarray(q_guess, float)
        pm = model.pin_model
        angles = pin.difference(pm, pin.neutral(pm), q_guess)
        given = {n: float(x) for n, x, p in zip(model.coordinate_names, angles, model.passive)
                 if not p}
    res = assemble(model, given, guess=q_guess)
    if not res.success:
        raise SolverError(f"{model.name}: cannot assemble the loop at the start configuration: "
                          f"{res.message}")
    if res.dof < model.nu:
        raise InputError(f"{model.name}: the closed loop has {res.dof} degree(s) of freedom "
                         f"and {model.nu} input(s); analyze needs at least as many degrees of "
                         "freedom as inputs")
    if res.dof > model.nu:
        return _underactuated_closed(model, output, res.q, res.dof, singular_cond)
    alpha, _ = closed_decoupling(model, output, res.q)
    cond = float(np.linalg.cond(alpha))
    drop = _closure_rank_drop(model, res.q)
    if drop is not None:  # the retained rows of A are round-off: N and alpha are arbitrary
        rel = None
        msg = (f"the loop is at a singular configuration here (the closure Jacobian's smallest "
               f"retained singular value is {drop:.1e} of its size elsewhere): the "
               "closure-consistent decoupling matrix is not defined; choose a configuration "
               "away from it")
    elif cond < singular_cond:
        rel: tuple[int, ...] | None = tuple([2] * output.m)
        msg = (f"closed loop ({res.dof} degree(s) of freedom, all actuated): no internal "
               "dynamics, the inverse model is algebraic")
    else:
        rel = None
        msg = ("the closure-consistent decoupling matrix is singular at this configuration "
               "(an output or actuator singularity of the loop); choose another output or "
               "configuration")
    return OutputAnalysis(output.names, res.q, alpha, cond, rel, np.zeros(0, complex), None,
                          msg, closed=True)


class _ClosedZeroDynamics:
    """The internal dynamics of a closed loop whose output is held at ``y*`` (the output of
    the assembled ``q_start``), in a local chart, for :func:`_underactuated_closed`.

    The motion keeping ``phi(q) = 0`` and ``y(q) = y*`` has ``f - m`` degrees of freedom (f of
    the loop, m outputs).  With Z (nv, f - m) an orthonormal basis of null([A; H]) at the
    equilibrium q*, the chart is ``q(z) = P(q* + Z z)`` (``+`` through ``pin.integrate``, P a
    Newton projection onto {phi = 0, y = y*} with minimum-norm corrections) and the
    velocities ``v = (I - J^+ J) Z zeta``.  The accelerations solve the constrained inverse
    system (Seifried (2014) eq. 5.11 with the closure rows of Aghili (2005) eq. 3)

        M a - A^T lambda - B u = tau_s - h,   A a = 0,   H a = 0,

    the bias terms A' v and H' v being quadratic in v, so zero in the linearization at rest.
    The internal dynamics are z' = zeta, zeta' = Z^T a (to first order at (q*, 0)).
    """

    def __init__(self, model: MultibodyModel, output: Output, q_start: np.ndarray,
                 constraints: Constraints):
        self.model, self.output, self.c = model, output, constraints
        self.dyn = RigidDynamics(model)
        self.y_star = output.value(q_start)
        self.q_eq = self.project(q_start)
        self.Z = self._null(self.q_eq)

    def stacked(self, q):
        return np.vstack([self.c.holonomic_jacobian(q), self.output.jacobian(q)])

    def _null(self, q):
        _, s, vt = np.linalg.svd(self.stacked(q))
        rank = int(np.sum(s > RANK_RTOL * max(s[0], 1e-300))) if s.size else 0
        return vt[rank:].T

    def project(self, q):
        pm = self.model.pin_model
        for _ in range(50):
            r = np.concatenate([self.c.residual(q)[:self.c.n_holonomic],
                                self.output.value(q) - self.y_star])
            if np.max(np.abs(r)) < 1e-13:
                return q
            q = pin.integrate(pm, q, -np.linalg.lstsq(self.stacked(q), r, rcond=None)[0])
        raise SolverError(f"{self.model.name}: cannot hold the output at {self.y_star} on the "
                          "loop near this configuration")

    def chart(self, z):
        return self.project(pin.integrate(self.model.pin_model, self.q_eq, self.Z @ z))

    def accel(self, z, zeta):
        q = self.chart(z)
        J = self.stacked(q)
        v = self.Z @ zeta - np.linalg.pinv(J) @ (J @ (self.Z @ zeta))
        A, H, B = self.c.holonomic_jacobian(q), self.output.jacobian(q), self.model.B
        nv, r, nu = self.model.nv, A.shape[0], B.shape[1]
        K = np.zeros((nv + r + H.shape[0], nv + r + nu))
        K[:nv, :nv] = self.dyn.mass_matrix(q)
        K[:nv, nv:nv + r], K[:nv, nv + r:] = -A.T, -B
        K[nv:nv + r, :nv], K[nv + r:, :nv] = A, H
        rhs = np.zeros(K.shape[0])
        rhs[:nv] = -self.dyn.inverse_dynamics(q, v, np.zeros(nv))  # tau_s - h
        # lstsq: redundant closure rows leave lambda free, a and u are unique
        return self.Z.T @ np.linalg.lstsq(K, rhs, rcond=None)[0][:nv]

    def equilibrium(self, step=1e-6, max_step=0.2):
        """Move q_eq to the rest point of the internal dynamics: Newton on Z^T a = 0 (central
        differences), steps limited to ``max_step`` [rad | m], the chart re-centred at each
        iterate (it is only local)."""
        n = self.Z.shape[1]
        zero = np.zeros(n)
        for _ in range(50):
            F = self.accel(zero, zero)
            if np.max(np.abs(F)) < 1e-9:
                return
            D = np.column_stack([(self.accel(e, zero) - self.accel(-e, zero)) / (2 * step)
                                 for e in np.eye(n) * step])
            dz = -np.linalg.lstsq(D, F, rcond=None)[0]
            dz *= min(1.0, max_step / max(np.max(np.abs(dz)), 1e-300))
            self.q_eq = self.chart(dz)
            self.Z = self._null(self.q_eq)
        raise SolverError(f"{self.model.name}: no rest point of the internal dynamics found "
                          f"with the output held at {np.round(self.y_star, 6)}")

    def jacobian(self, step=1e-6) -> np.ndarray:
        """Q (2 n, 2 n) of the linearized internal dynamics at (q_eq, 0), central differences."""
        n = self.Z.shape[1]
        zero = np.zeros(n)
        dz = np.column_stack([(self.accel(e, zero) - self.accel(-e, zero)) / (2 * step)
                              for e in np.eye(n) * step])
        dzeta = np.column_stack([(self.accel(zero, e) - self.accel(zero, -e)) / (2 * step)
                                 for e in np.eye(n) * step])
        return np.block([[np.zeros((n, n)), np.eye(n)], [dz, dzeta]])


def _underactuated_closed(model: MultibodyModel, output: Output, q_start: np.ndarray,
                          dof: int, singular_cond: float) -> OutputAnalysis:
    """Decoupling matrix and zero dynamics of a closed loop with more degrees of freedom
    than inputs (:class:`_ClosedZeroDynamics`), at the rest point of its internal dynamics
    with the output held at its value at ``q_start``."""
    c = Constraints(model)
    alpha, _ = closed_decoupling(model, output, q_start, c)
    cond = float(np.linalg.cond(alpha))
    if not cond < singular_cond:
        return OutputAnalysis(output.names, q_start, alpha, cond, None, np.zeros(0, complex),
                              None, "the closure-consistent decoupling matrix is singular at "
                              "this configuration; choose another output or configuration",
                              closed=True)
    zd = _ClosedZeroDynamics(model, output, q_start, c)
    if zd.Z.shape[1] != dof - output.m:
        raise SolverError(f"{model.name}: the output rows are not independent on the loop "
                          f"({zd.Z.shape[1]} internal degrees of freedom, expected "
                          f"{dof - output.m})")
    zd.equilibrium()
    alpha, _ = closed_decoupling(model, output, zd.q_eq, c)
    cond = float(np.linalg.cond(alpha))
    lam = np.linalg.eigvals(zd.jacobian())
    mp, msg = _phase(lam)
    msg = (f"closed loop ({dof} degrees of freedom, {model.nu} input(s): {dof - output.m} "
           f"internal); {msg}")
    return OutputAnalysis(output.names, zd.q_eq, alpha, cond, tuple([2] * output.m), lam, mp,
                          msg, closed=True)


def passive_link_criterion(gamma: float, inertia: float, mass: float, com: float,
                           length_before: float) -> float:
    """Seifried (2014) eq. 7.5: a2 = (1 - Gamma)(I2 + m2 s2^2) - l1 m2 s2 Gamma.

    For a passive link (mass m2 [kg], inertia I2 about its centre of gravity [kg m^2],
    centre of gravity s2 [m] from the passive joint) behind a link of length l1 [m] and the
    combined output y = alpha + Gamma beta, the zero dynamics a2 beta'' + d beta' + c beta = 0
    are stable iff a2 > 0 (with a spring c > 0 and damper d >= 0).
    """
    return (1.0 - gamma) * (inertia + mass * com**2) - length_before * mass * com * gamma
