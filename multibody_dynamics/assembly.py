"""Assembling closed loops from what the user knows.

A closed-loop model's coordinates must satisfy its closures, ``phi(q) = 0``. People know a
few of them (the motor angles of a parallel robot, the crank angle of a four-bar) and want
the rest solved, and they want to know which of the mechanism's assembly modes (elbow up or
down, open or crossed four-bar) they got. :func:`assemble` solves ``phi(q) = 0`` for the
coordinates not given, from several starts (the given guess first, then seeded random
ones), with scipy's Levenberg-Marquardt (trust-region reflective where there are fewer
closure rows than unknowns) in the tangent space of the configuration (``pin.integrate``),
then Newton steps to the tolerance. Every distinct solution found is reported.

*Assembly mode* label (chosen here, not from a source): when the given coordinates fix the
mechanism (as many independent closure rows as free coordinates), the solutions are isolated
and each is labelled by the sign of ``det(A_S,free)``, the closure Jacobian restricted to the
free coordinates and to a fixed set S of independent rows (``J+`` / ``J-``): it changes sign
only where the mechanism passes a singular configuration, so it separates the assembly modes
(open / crossed four-bar, the two elbow postures of a five-bar for given motor angles). The
signs of the free revolute joints' angles follow, as a description (``left_elbow-``); two
solutions with equal labels get ``#2``, ``#3``. When the given coordinates leave degrees of
freedom, the solutions form a continuum: the one closest to the guess is returned, alone.

A platform pose is given the same way, by frame coordinates (``"left_tip.x"``,
``"platform.y"``: the world position of a frame's origin along an axis [m]): each adds a
residual row ``p(q) - value`` (its Jacobian the frame's world-aligned linear rows) to the
closures the solver sees; mobility stays that of the closures alone.

Mobility (:func:`mobility`): with ``A(q)`` the closure Jacobian (m rows) of rank r, the
closed system has ``nv - r`` degrees of freedom and ``m - r`` redundant rows (a planar
four-bar closed by a 5-row revolute joint: 1 degree of freedom, 3 redundant rows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
import scipy.linalg
from scipy.optimize import least_squares

from .constraints import Constraints
from .errors import FrameNotFound, InputError
from .model import MultibodyModel

__all__ = ["AssemblyMode", "AssemblyResult", "assemble", "mobility"]

#: Singular values below RANK_RTOL * the largest count as zero in the mobility analysis.
RANK_RTOL = 1e-9


@dataclass(frozen=True)
class AssemblyMode:
    """One assembled configuration: ``q`` (nq,), its mode ``label``, its ``distance`` from the
    reference configuration (norm of ``pin.difference``, rad and m mixed), and ``det``, the
    sign of the closure Jacobian determinant over the free joints (0 where the solutions form
    a continuum)."""

    q: np.ndarray
    label: str
    distance: float
    det: int = 0


@dataclass(frozen=True)
class AssemblyResult:
    """Outcome of :func:`assemble`.

    Attributes
    ----------
    q : ndarray, (nq,)
        The chosen assembled configuration (the best attempt when not ``success``).
    success : bool
    message : str
    residual : float
        ``max |phi(q)|`` at ``q`` [m | rad].
    mode : str
        Assembly-mode label of ``q`` (see the module docstring).
    modes : tuple of AssemblyMode
        Every distinct solution found, the chosen one first, the others by distance.
    rank, dof, redundant : int
        Rank of the closure Jacobian at ``q``, degrees of freedom of the closed system
        (``nv - rank``) and redundant closure rows (``rows - rank``).
    starts, nfev : int
        Starts tried and residual evaluations spent.
    """

    q: np.ndarray
    success: bool
    message: str
    residual: float
    mode: str
    modes: tuple[AssemblyMode, ...]
    rank: int
    dof: int
    redundant: int
    starts: int
    nfev: int


def mobility(model: MultibodyModel, q, constraints: Constraints | None = None):
    """``(rank, dof, redundant)`` of the closures of ``model`` at ``q`` (see module doc)."""
    c = Constraints(model) if constraints is None else constraints
    if c.n_holonomic == 0:
        return 0, model.nv, 0
    A = c.holonomic_jacobian(q)
    s = np.linalg.svd(A, compute_uv=False)
    rank = int(np.sum(s > RANK_RTOL * max(s[0], 1e-300))) if s.size else 0
    return rank, model.nv - rank, A.shape[0] - rank


def _one_dof(pm: pin.Model):
    """Per velocity index: (q index, nq of the joint, kind) of 1-DoF joints, None otherwise."""
    out = [None] * pm.nv
    for jid in range(1, pm.njoints):
        j = pm.joints[jid]
        if j.nv == 1:
            name = j.shortname()
            kind = "prismatic" if "P" in name else "revolute"
            out[j.idx_v] = (j.idx_q, j.nq, kind)
    return out


def _set_coordinate(q, entry, value):
    iq, nq, _ = entry
    if nq == 1:
        q[iq] = value
    else:  # continuous joint: (cos, sin)
        q[iq:iq + 2] = (np.cos(value), np.sin(value))


def _angle(q, entry) -> float:
    iq, nq, _ = entry
    return float(q[iq]) if nq == 1 else float(np.arctan2(q[iq + 1], q[iq]))


def _given_number(model, name: str, value, unit: str) -> float:
    """``value`` of the given coordinate ``name`` as a finite float [``unit``], else an
    InputError naming it."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{model.name}: given: {name} = {value!r} is not a number "
                         f"[{unit}]") from None
    if not np.isfinite(number):
        raise InputError(f"{model.name}: given: {name} = {number} is not finite")
    return number


def _frame_targets(model, given):
    """``given`` split into joint values and frame-coordinate targets ``(frame id, axis,
    value)`` (names ``"<frame>.x|y|z"`` of a frame of the model that are no coordinate)."""
    joints, targets = {}, []
    pm = model.pin_model
    for name, value in (given or {}).items():
        frame, _, axis = str(name).rpartition(".")
        if (name in model.coordinate_names or axis not in ("x", "y", "z") or not frame
                or not pm.existFrame(frame)):
            joints[name] = value
            continue
        targets.append((pm.getFrameId(frame), "xyz".index(axis),
                        _given_number(model, name, value, "m")))
    return joints, tuple(targets)


class _WithTargets:
    """The closures ``c`` with frame-coordinate rows ``p_axis(q) - value`` appended: what
    :func:`_solve` and the mode labels use (``residual``, ``holonomic_jacobian``,
    ``residual_and_jacobian``, ``n_holonomic``), so that the joints solve for the pose."""

    def __init__(self, c: Constraints, pm: pin.Model, targets):
        self.c, self.pm, self.data, self.targets = c, pm, pm.createData(), tuple(targets)
        self.n_holonomic = c.n_holonomic + len(self.targets)

    def _rows(self, q) -> np.ndarray:
        pin.framesForwardKinematics(self.pm, self.data, q)
        return np.array([self.data.oMf[f].translation[a] - v for f, a, v in self.targets])

    def _jacobian(self, q) -> np.ndarray:
        pin.computeJointJacobians(self.pm, self.data, q)
        pin.updateFramePlacements(self.pm, self.data)
        return np.array([pin.getFrameJacobian(self.pm, self.data, f,
                                              pin.LOCAL_WORLD_ALIGNED)[a]
                         for f, a, _ in self.targets])

    def residual(self, q) -> np.ndarray:
        return np.concatenate([self.c.residual(q), self._rows(q)])

    def holonomic_jacobian(self, q) -> np.ndarray:
        return np.vstack([self.c.holonomic_jacobian(q), self._jacobian(q)])

    def residual_and_jacobian(self, q) -> tuple[np.ndarray, np.ndarray]:
        return self.residual(q), self.holonomic_jacobian(q)


def _check_given(model, given, joints):
    given = {} if given is None else dict(given)
    out = {}
    for name, value in given.items():
        if name not in model.coordinate_names:
            raise FrameNotFound(f"{model.name}: given: no joint named {name!r}; valid joints: "
                                f"{', '.join(model.coordinate_names)}, or a frame coordinate "
                                "such as <frame>.x [m]")
        iv = model.coordinate_names.index(name)
        if joints[iv] is None:
            raise InputError(f"{model.name}: given: {name!r} belongs to a joint with several "
                             "degrees of freedom; give 1-DoF joints only")
        out[iv] = _given_number(model, name, value, "rad | m")
    return out


def assemble(model: MultibodyModel, given: Mapping[str, float] | None = None, guess=None,
             branch: Mapping[str, int] | None = None, *, starts: int = 16, seed: int = 0,
             tol: float = 1e-10) -> AssemblyResult:
    """Solve the closures ``phi(q) = 0`` for the coordinates not ``given``.

    Parameters
    ----------
    model : MultibodyModel
    given : mapping of str to float, optional
        Values of 1-DoF joints, by coordinate name [rad | m] (continuous joints by angle);
        they stay fixed.  Frame coordinates ``"<frame>.x|y|z"`` [m] (e.g. a platform's or an
        end effector's position) are held too: the joints solve for them.
    guess : array_like, (nq,), optional
        Reference configuration: the first start, and the solution closest to it is chosen
        (default: the model's ``q_initial``: its ``initial_positions``, else ``q_rest``).
    branch : mapping of str to {+1, -1}, optional
        The assembly mode to pick: ``"J"`` for the sign of the Jacobian determinant, or free
        revolute joints by name for the sign of their angle (e.g. ``{"J": -1}``,
        ``{"left_elbow": +1}``); the closest solution that matches is chosen.
    starts : int
        Starts to try (the guess plus ``starts - 1`` seeded random ones) [>= 1].
    seed : int
        Seed of the random starts (the result is reproducible).
    tol : float
        Required ``max |phi|`` [m | rad].

    Returns
    -------
    AssemblyResult
        ``success`` False (with the smallest residual reached, or the modes found when none
        matches ``branch``) when no solution qualifies; misuse raises.

    Raises
    ------
    FrameNotFound, InputError
        Unknown joint names, non-numeric or non-finite values, bad ``starts``/``tol``.
    """
    if isinstance(starts, bool) or not isinstance(starts, (int, np.integer)) or starts < 1:
        raise InputError(f"starts: expected an integer >= 1, got {starts!r}")
    if not tol > 0:
        raise InputError(f"tol: expected a tolerance > 0 [m | rad], got {tol!r}")
    given, targets = _frame_targets(model, given)
    p = _Problem(model, given, guess, branch, tol, targets)
    if p.c.n_holonomic == 0:
        return AssemblyResult(p.q_ref, True, "no closure: nothing to assemble", 0.0, "", (),
                              0, model.nv, 0, 0, 0)
    if p.free.size == 0:
        res = p.residual(p.q_ref)
        msg = "every coordinate given" + ("" if res < tol else f": the loops do not close "
                                          f"(max |phi| = {res:.3g} m | rad)")
        return AssemblyResult(p.q_ref, res < tol, msg, res, p.label(p.q_ref, 0), (),
                              *mobility(model, p.q_ref, p.c), 0, 0)
    found, best_q, best_res, nfev = p.search(starts, seed)
    if not found:
        return AssemblyResult(
            best_q, False, f"the loops cannot close: smallest max |phi| = {best_res:.3g} m | rad "
            f"over {starts} starts (the links cannot reach, or the given values are out of "
            "reach)", best_res, "", (), *mobility(model, best_q, p.c), starts, nfev)
    modes = p.modes(found)
    wanted = [m for m in modes if p.matches(m)]
    chosen = wanted[0] if wanted else modes[0]
    others = tuple(m for m in modes if m is not chosen)
    if not wanted:
        msg = (f"no assembly with the branch {_branch_text(p.branch)}; found "
               f"{', '.join(m.label for m in modes)}")
    elif p.isolated:
        msg = f"assembled: {len(modes)} distinct solution(s) from {starts} starts"
    else:
        msg = (f"assembled: the solution closest to the guess; {p.free.size - len(p.rows)} free "
               "coordinate(s) left undetermined by the given ones (give them to choose)")
    return AssemblyResult(chosen.q, bool(wanted), msg, p.residual(chosen.q), chosen.label,
                          (chosen,) + others, *mobility(model, chosen.q, p.c), starts, nfev)


class _Problem:
    """The closures of ``model`` with some coordinates given: the checked arguments, the
    solver's starts, and the labels of the solutions (see :func:`assemble`)."""

    def __init__(self, model, given, guess, branch, tol, targets=()):
        self.model, self.pm, self.tol = model, model.pin_model, tol
        self.joints = _one_dof(self.pm)
        given_v = _check_given(model, given, self.joints)
        self.branch = {} if branch is None else dict(branch)
        for name, sign in self.branch.items():
            if sign not in (1, -1):
                raise InputError(f"branch: {name}: expected +1 or -1, got {sign!r}")
        q_ref = np.array(model.q_initial if guess is None else guess, dtype=float)
        if q_ref.shape != (model.nq,) or not np.all(np.isfinite(q_ref)):
            raise InputError(f"guess: expected {model.nq} finite numbers, got shape "
                             f"{q_ref.shape}")
        for iv, value in given_v.items():
            _set_coordinate(q_ref, self.joints[iv], value)
        self.q_ref = q_ref
        self.free = np.array([iv for iv in range(model.nv) if iv not in given_v], dtype=int)
        self.revolute_free = [iv for iv in self.free if self.joints[iv] is not None
                              and self.joints[iv][2] == "revolute"]
        names = model.coordinate_names
        bad = [n for n in self.branch if n != "J" and (
            n not in names or names.index(n) not in self.revolute_free)]
        if bad:
            raise InputError(f"branch: {bad[0]!r} is not a free revolute joint; expected 'J' or "
                             f"one of {[names[i] for i in self.revolute_free]}")
        self.c = Constraints(model)  # the closures: mobility
        # what the solver holds: the closures and the frame coordinates given
        self.cs = _WithTargets(self.c, self.pm, targets) if targets else self.c
        self.rows = None  # independent rows S of the determinant label (first solution)
        self.isolated = True

    def residual(self, q) -> float:
        return float(np.max(np.abs(self.cs.residual(q))))

    def distance(self, q1, q2) -> float:
        return _distance(self.pm, q1, q2, self.free, self.joints)

    def search(self, starts, seed):
        """Distinct solutions from the guess and seeded random starts (only the guess's when
        the given coordinates leave a continuum), the best attempt, and the evaluations."""
        rng = np.random.default_rng(seed)
        found: list[np.ndarray] = []
        best_q, best_res, nfev = self.q_ref, np.inf, 0
        for k in range(starts):
            q0 = self.q_ref.copy() if k == 0 else _random_start(self.pm, self.q_ref, self.free,
                                                               self.joints, rng)
            q, res, n = _solve(self.pm, self.cs, q0, self.free, self.tol)
            nfev += n
            if res < best_res:
                best_q, best_res = q, res
            if res >= self.tol:
                continue
            q = _wrap(q, self.q_ref, self.free, self.joints)
            if self.rows is None:
                A = self.cs.holonomic_jacobian(q)[:, self.free]
                rank = int(np.linalg.matrix_rank(A))
                self.isolated = rank == self.free.size
                self.rows = scipy.linalg.qr(A.T, pivoting=True)[2][:rank]
            if not any(self.distance(q, p) < 1e-6 for p in found):
                found.append(q)
            if not self.isolated and k == 0:
                break  # a continuum of solutions: the one reached from the guess
        if found and not self.isolated:  # the solution closest to the guess, alone
            found = sorted(found, key=lambda p: self.distance(self.q_ref, p))[:1]
        return found, best_q, best_res, nfev

    def modes(self, found) -> list[AssemblyMode]:
        """The solutions with their labels, closest to the guess first."""
        dets = [_det_sign(self.cs, q, self.rows, self.free) if self.isolated else 0
                for q in found]
        labels, seen = [], {}
        for q, det in zip(found, dets):
            lab = self.label(q, det) or "assembled"
            seen[lab] = seen.get(lab, 0) + 1
            labels.append(lab if seen[lab] == 1 else f"{lab} #{seen[lab]}")
        modes = [AssemblyMode(q, lab, self.distance(self.q_ref, q), det)
                 for q, lab, det in zip(found, labels, dets)]
        return sorted(modes, key=lambda m: m.distance)

    def label(self, q, det: int) -> str:
        signs = [f"{self.model.coordinate_names[iv]}"
                 f"{'+' if _angle(q, self.joints[iv]) >= 0 else '-'}"
                 for iv in self.revolute_free]
        return " ".join(([{1: "J+", -1: "J-"}[det]] if det else []) + signs)

    def matches(self, mode: AssemblyMode) -> bool:
        names = self.model.coordinate_names
        for name, sign in self.branch.items():
            got = mode.det if name == "J" else \
                (1 if _angle(mode.q, self.joints[names.index(name)]) >= 0 else -1)
            if got != sign:
                return False
        return True


def _branch_text(branch):
    return " ".join(f"{n}{'+' if s > 0 else '-'}" for n, s in branch.items())


def _random_start(pm, q_ref, free, joints, rng):
    dv = np.zeros(pm.nv)
    q0 = q_ref.copy()
    for iv in free:
        entry = joints[iv]
        if entry is None:
            dv[iv] = rng.normal(0.0, 0.3)
            continue
        iq, nq, kind = entry
        if kind == "revolute":
            _set_coordinate(q0, entry, rng.uniform(-np.pi, np.pi))
        else:
            lo, hi = pm.lowerPositionLimit[iq], pm.upperPositionLimit[iq]
            if np.isfinite(lo) and np.isfinite(hi) and hi - lo < 1e3:
                q0[iq] = rng.uniform(lo, hi)
            else:
                q0[iq] = q_ref[iq] + rng.uniform(-0.5, 0.5)
    return pin.integrate(pm, q0, dv)


def _solve(pm, c, q0, free, tol):
    """Levenberg-Marquardt (or TRF) on the free coordinates, then Newton to ``tol``."""
    m, n = c.n_holonomic, free.size
    dv = np.zeros(pm.nv)

    def q_of(x):
        dv[:] = 0.0
        dv[free] = x
        return pin.integrate(pm, q0, dv)

    def fun(x):
        return c.residual(q_of(x))

    def jac(x):
        dv[:] = 0.0
        dv[free] = x
        J = pin.dIntegrate(pm, q0, dv, pin.ArgumentPosition.ARG1)
        return c.holonomic_jacobian(q_of(x)) @ J[:, free]

    try:
        sol = least_squares(fun, np.zeros(n), jac=jac, method="lm" if m >= n else "trf",
                            xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=100 * (n + 1))
        q, nfev = q_of(sol.x), int(sol.nfev)
    except (ValueError, np.linalg.LinAlgError):
        return q0, np.inf, 1
    for _ in range(20):  # Newton polish on the free coordinates (quadratic near a solution)
        phi, A = c.residual_and_jacobian(q)
        nfev += 1
        res = float(np.max(np.abs(phi)))
        if res < tol or not np.isfinite(res):
            break
        step = np.zeros(pm.nv)
        step[free] = -np.linalg.lstsq(A[:, free], phi, rcond=None)[0]
        q = pin.integrate(pm, q, step)
    else:
        res = float(np.max(np.abs(c.residual(q))))
    return q, res, nfev


def _distance(pm, q1, q2, free, joints) -> float:
    """Norm of ``pin.difference(q1, q2)`` with free revolute angles compared modulo 2 pi."""
    d = pin.difference(pm, q1, q2)
    for iv in free:
        entry = joints[iv]
        if entry is not None and entry[2] == "revolute" and entry[1] == 1:
            d[iv] = (d[iv] + np.pi) % (2 * np.pi) - np.pi
    return float(np.linalg.norm(d))


def _det_sign(c, q, rows, free) -> int:
    A = c.holonomic_jacobian(q)[np.ix_(rows, free)]
    return 1 if np.linalg.det(A) >= 0 else -1


def _wrap(q, q_ref, free, joints):
    """Free revolute angles (nq = 1) moved by multiples of 2 pi to within pi of the reference
    (the same mechanism configuration)."""
    q = q.copy()
    for iv in free:
        entry = joints[iv]
        if entry is not None and entry[2] == "revolute" and entry[1] == 1:
            iq = entry[0]
            q[iq] = q_ref[iq] + (q[iq] - q_ref[iq] + np.pi) % (2 * np.pi) - np.pi
    return q
