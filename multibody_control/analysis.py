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
                tag = "stable" if lam.real < 0 else ("UNSTABLE" if lam.real > 0 else "marginal")
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
        if np.any(np.abs(lam.real) < 1e-9):
            mp, msg = None, "an eigenvalue lies on the imaginary axis: not hyperbolic"
        elif np.all(lam.real < 0):
            mp, msg = True, ("minimum phase: the internal dynamics are stable; classical "
                             "inversion (forward integration) applies")
        else:
            nu = int(np.sum(lam.real > 0))
            mp, msg = False, (f"NON-minimum phase: {nu} unstable zero-dynamics eigenvalue(s); "
                              "use stable inversion (pre-/post-actuation)")
    return OutputAnalysis(output.names, q, alpha, cond, rel, lam, mp, msg)


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


def analyze_closed_output(model: MultibodyModel, output: Output, q_guess=None,
                          singular_cond: float = 1e12) -> OutputAnalysis:
    """Decoupling matrix of ``output`` of a closed loop at an assembled configuration.

    The loop is assembled with the actuated joints of ``q_guess`` (nq,) held (default: the
    assembly nearest to the model's start configuration) and :func:`closed_decoupling` gives alpha.  Only closed loops with as
    many inputs as degrees of freedom are analysed (all the shipped ones): they have no
    internal dynamics.  Zero dynamics of underactuated closed loops are not computed.

    Raises
    ------
    InputError
        If the loop has more degrees of freedom than inputs.
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
    if res.dof != model.nu:
        raise InputError(f"{model.name}: the closed loop has {res.dof} degree(s) of freedom "
                         f"and {model.nu} input(s); analyze supports closed loops with as many "
                         "inputs as degrees of freedom (zero dynamics of underactuated closed "
                         "loops are not computed)")
    alpha, _ = closed_decoupling(model, output, res.q)
    cond = float(np.linalg.cond(alpha))
    if cond < singular_cond:
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


def passive_link_criterion(gamma: float, inertia: float, mass: float, com: float,
                           length_before: float) -> float:
    """Seifried (2014) eq. 7.5: a2 = (1 - Gamma)(I2 + m2 s2^2) - l1 m2 s2 Gamma.

    For a passive link (mass m2 [kg], inertia I2 about its centre of gravity [kg m^2],
    centre of gravity s2 [m] from the passive joint) behind a link of length l1 [m] and the
    combined output y = alpha + Gamma beta, the zero dynamics a2 beta'' + d beta' + c beta = 0
    are stable iff a2 > 0 (with a spring c > 0 and damper d >= 0).
    """
    return (1.0 - gamma) * (inertia + mass * com**2) - length_before * mass * com * gamma
