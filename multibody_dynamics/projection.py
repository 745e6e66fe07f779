"""Projection-matrix constrained dynamics (Aghili 2005).

Aghili, F., "A unified approach for inverse and direct dynamics of constrained
multibody systems based on linear projection operator: applications to control
and simulation", IEEE T-RO 21(5), 2005.  Every equation of the source text was
lost in the OCR; the equations below follow the reconstruction in the project's
readings (docs/derivations.md, "Aghili (2005)"), checked numerically here against a minimum-norm
KKT solve, coordinate partitioning and pinocchio (``test/test_projection.py``).

Notation (``q`` (nq,), ``v``, ``a``, ``tau`` (nv,), ``A`` (m, nv)):

* constraint ``A(q) v = 0`` (11), on acceleration level ``A a + gamma = 0`` with our
  bias ``gamma = A' v`` (:mod:`.constraints`);
* ``P = I - A^+ A`` (15), the orthogonal projector onto null(A); ``C = -A^+ A'`` (16), so
  the term ``M C q'`` of (22) is ``-M A^+ gamma`` (sign checked numerically against KKT);
* equation of motion ``M a + h = tau + tau_s + f_c`` (19), ``f_c = A^T lambda``, where
  ``tau_s = -K (q - q_rest) - D v`` are the passive joints' springs and dampers
  (applied forces, :meth:`RigidDynamics.spring_forces`).

Velocity projection (:meth:`ProjectedDynamics.project_velocity`): in the mass metric by
default (the admissible velocity of least kinetic energy of the change, a constraint
impulse), or Aghili's Euclidean ``P v``; mass-matrix solves through
:func:`inverse_mass_product` (dense LAPACK Cholesky for small models, pinocchio's tree
algorithms from :data:`SPARSE_MASS_MIN_NV` coordinates on).

Direct dynamics (:meth:`ProjectedDynamics.forward_dynamics` and ``acceleration``) in Gauss's
form of eq. 22 (docs/performance.md): ``a = M^-1 (f + V_r mu)`` with ``V_r`` the retained right
singular vectors of ``A`` and ``(V_r^T M^-1 V_r) mu = V_r^T C v - V_r^T M^-1 f``, the unique
solution of eqs. 24, 27 and 29 alike (Theorem 2); ``M^-1`` by articulated-body solves
(O(n m + m^3), :class:`~multibody_dynamics.fast_step.TreeDynamics`) or a Cholesky of M.  The
variant's matrix as written: :meth:`ProjectedDynamics.acceleration_as_written`.

Rank decisions (eq. 70): ``A`` is decomposed by one SVD per call; singular values
below ``max(rank_atol, rank_rtol * sigma_max)`` are treated as zero, i.e. the
corresponding constraint directions are removed.  At the slider-crank singularity
q1 = +-pi/2 the single row of ``A`` vanishes and ``P = I``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from scipy.linalg import lapack

from .compiled_linalg import compiled_gauss_solve
from .compiled_linalg import gauss_solve as _gauss_solve
from .constraints import Constraints
from .errors import InputError, SolverError
from .model import MultibodyModel
from .rigid import RigidDynamics
from .validation import as_vector

_ND, _F8 = np.ndarray, np.dtype(float)
VARIANTS = ("eq24", "eq27", "eq29")
VELOCITY_METRICS = ("mass", "euclidean")
MASS_SOLVERS = ("auto", "dense", "sparse")
#: ``mass_solver="auto"`` uses pinocchio's tree algorithms from this many velocity coordinates
#: on (see :func:`inverse_mass_product` for the measurements behind it).
SPARSE_MASS_MIN_NV = 20
#: Newton projection: with ``||phi||_inf`` below ``position_tol``, one more Newton step is taken
#: while ``||A^+ phi||_inf >= NEWTON_STEP_FACTOR * position_tol``.  ``A^+ phi`` is the distance
#: to the manifold to first order, about ``||phi|| / sigma_min``: away from singular
#: configurations it is below the bound whenever phi is (four_bar, 10 s of the speed bench: no
#: extra iteration), near one it is not (slider-crank 1.6e-3 rad from q1 = pi/2: phi 6e-13 m,
#: but q 1.3e-9 rad off the branch; the next RK4 step followed the level set's turn and lost
#: 1e-8 J).
NEWTON_STEP_FACTOR = 10.0

#: ``mass_solver="auto"``: the direct dynamics' fast path uses articulated-body solves instead
#: of a dense Cholesky of M from this many velocity coordinates on (see ``bench/run.py --only
#: constrained``, the closed-chain scaling entries).
TREE_DYNAMICS_MIN_NV = 20


@dataclass(frozen=True)
class ProjectionSettings:
    """Settings of :class:`ProjectedDynamics`.

    Parameters
    ----------
    rank_atol : float
        Absolute threshold on the singular values of ``A`` [units of A: 1 for
        rotation rows, m/rad or m/m for position rows]; below it a direction is
        treated as removed (Aghili 2005 eq. 70).  The default keeps the
        slider-crank constraint down to about 3e-9 rad from its singularity.
    rank_rtol : float
        Relative threshold, times the largest singular value (guards against
        round-off of redundant rows, as ``numpy.linalg.pinv``).
    variant : str
        Mass matrix of the direct dynamics: ``"eq24"`` ``M_c = M + PM - (PM)^T``
        (positive definite, ``x^T M_c x = x^T M x``, but not symmetric; Theorem 2), ``"eq27"``
        ``P M P + (I-P) M (I-P)`` (symmetric), or ``"eq29"`` ``P M + alpha (I-P)``
        (not symmetric, cheapest).
    alpha : float
        Scale of ``(I-P)`` in variant ``"eq29"`` [kg | kg m^2], non-zero.
    position_tol : float
        Newton projection stops when ``||phi||_inf`` is below this [m | rad], after one more
        step if the Newton step ``||A^+ phi||_inf`` (the distance to the manifold) is still
        :data:`NEWTON_STEP_FACTOR` times larger (near a singular configuration).
    max_iter : int
        Newton iterations at most.
    consistency_tol : float
        Inverse dynamics report failure when the commanded motion violates
        ``A a + gamma = 0`` by more than this [m/s^2 | rad/s^2] (infinity norm).
    mass_solver : str
        How products ``M^-1 X`` are computed.  Mass-metric velocity projection: ``"dense"``
        (``crba`` + LAPACK Cholesky), ``"sparse"`` (pinocchio's tree algorithms: the
        tree-sparse Cholesky for one column, the articulated-body ``computeMinverse`` for
        several) or ``"auto"`` (dense below :data:`SPARSE_MASS_MIN_NV` velocity coordinates,
        sparse from there on; see :func:`inverse_mass_product`).  Direct dynamics
        (:meth:`ProjectedDynamics.forward_dynamics`): ``"dense"`` a Cholesky of M in the
        compiled kernel; otherwise articulated-body solves, compiled for trees of
        one-degree-of-freedom joints, by pinocchio's ``aba`` for other trees with ``"sparse"``
        or from :data:`TREE_DYNAMICS_MIN_NV` coordinates on with ``"auto"``.
    """

    rank_atol: float = 1e-9
    rank_rtol: float = 1e-10
    variant: str = "eq24"
    alpha: float = 1.0
    position_tol: float = 1e-12
    max_iter: int = 30
    consistency_tol: float = 1e-8
    mass_solver: str = "auto"

    def __post_init__(self):
        if not (self.rank_atol >= 0 and self.rank_rtol >= 0):
            raise InputError("rank_atol, rank_rtol: expected numbers >= 0, got "
                             f"{self.rank_atol}, {self.rank_rtol}")
        if self.variant not in VARIANTS:
            raise InputError(f"variant: expected one of {', '.join(VARIANTS)}, got "
                             f"{self.variant!r}")
        if not (np.isfinite(self.alpha) and self.alpha != 0):
            raise InputError(f"alpha: expected a finite non-zero number [kg], got {self.alpha}")
        if not self.position_tol > 0:
            raise InputError(f"position_tol: expected > 0, got {self.position_tol}")
        if not (isinstance(self.max_iter, int) and self.max_iter >= 1):
            raise InputError(f"max_iter: expected an integer >= 1, got {self.max_iter!r}")
        if self.mass_solver not in MASS_SOLVERS:
            raise InputError(f"mass_solver: expected one of {', '.join(MASS_SOLVERS)}, got "
                             f"{self.mass_solver!r}")


@dataclass(frozen=True)
class NullSpaceProjector:
    """Result of :func:`null_space_projector`.

    Attributes
    ----------
    P : (nv, nv)  orthogonal projector onto null(A) (Aghili 2005 eq. 15)
    A_pinv : (nv, m)  Moore-Penrose pseudo-inverse with the rank decision applied
    rank : int
    singular_values : (min(m, nv),)  all singular values of A, descending
    basis : (nv, rank)  orthonormal basis of the row space of A (``I - P = basis basis^T``)
    """

    P: np.ndarray
    A_pinv: np.ndarray
    rank: int
    singular_values: np.ndarray
    basis: np.ndarray


def null_space_projector(A, rank_atol: float = 1e-9,
                         rank_rtol: float = 1e-10) -> NullSpaceProjector:
    """``P = I - A^+ A`` (Aghili 2005 eq. 15) and ``A^+`` from one SVD.

    Singular values below ``max(rank_atol, rank_rtol * sigma_max)`` are zero (eq. 70):
    their directions are removed from the constraint.
    """
    A = np.asarray(A, float)
    if A.ndim != 2:
        raise InputError(f"A: expected a 2-D matrix, got shape {A.shape}")
    nv = A.shape[1]
    if A.shape[0] == 0:
        return NullSpaceProjector(np.eye(nv), np.zeros((nv, 0)), 0, np.zeros(0), np.zeros((nv, 0)))
    U, s, Vt, info = lapack.dgesvd(A, full_matrices=0)  # numpy's svd costs 3x more per call
    if info != 0:  # LAPACK did not converge: only with NaN/inf in A
        raise InputError(f"A: singular value decomposition failed (LAPACK info {info}); "
                         "A holds non-finite values?")
    tol = rank_rtol * s[0] if s.size else 0.0
    r = int((s > (tol if tol > rank_atol else rank_atol)).sum())
    V = Vt[:r].T
    A_pinv = (V / s[:r]) @ U[:, :r].T
    P = V @ -V.T  # I - V V^T without allocating an identity
    P.flat[:: nv + 1] += 1.0
    return NullSpaceProjector(P, A_pinv, r, s, V)


def constrained_mass_matrix(M, P, variant: str = "eq24", alpha: float = 1.0) -> np.ndarray:
    """Mass matrix of the projected direct dynamics.

    ``"eq24"``: ``M_c = M + P M - (P M)^T`` (Aghili 2005 eq. 24): M plus a skew-symmetric
    matrix, hence ``x^T M_c x = x^T M x > 0`` and M_c is non-singular whenever M is positive
    definite, for any orthogonal projector P, even for rank-deficient A (Theorem 2);
    ``"eq27"``: ``P M P + (I-P) M (I-P)``; ``"eq29"``: ``P M + alpha (I-P)``.
    """
    if variant == "eq24":
        PM = P @ M
        return M + PM - PM.T
    if variant == "eq27":
        Q = np.eye(P.shape[0]) - P
        return P @ M @ P + Q @ M @ Q
    if variant == "eq29":
        return P @ M + alpha * (np.eye(P.shape[0]) - P)
    raise InputError(f"variant: expected one of {', '.join(VARIANTS)}, got {variant!r}")


def projected_acceleration(M, f, A, gamma, settings: ProjectionSettings | None = None):
    """Kernel of the direct dynamics: ``a`` from ``M a = f + f_c``, ``A a + gamma = 0``.

    Aghili (2005) eq. 22 with (24), or (27)/(29) per ``settings.variant``::

        (24)  M_c a = P f + M C v,                 M_c = M + P M - (P M)^T
        (27)  (P M P + (I-P) M (I-P)) a = P f + (I - 2P) M C v
        (29)  (P M + alpha (I-P)) a = P f + alpha C v

    with ``f = tau + tau_s - h`` and ``C v = -A^+ gamma``.

    Returns
    -------
    a : (nv,)
    proj : NullSpaceProjector
    """
    s = settings or _DEFAULT
    proj = null_space_projector(A, s.rank_atol, s.rank_rtol)
    P = proj.P
    Cv = -(proj.A_pinv @ gamma)  # C q' with C = -A^+ A' (eq. 16)
    if s.variant == "eq24":
        PM = P @ M
        a = lapack.dgesv(M + PM - PM.T, P @ f + M @ Cv)[2]  # M_c = M + skew: not symmetric
    elif s.variant == "eq27":
        MCv = M @ Cv
        a = _solve_spd(constrained_mass_matrix(M, P, "eq27"), P @ f + MCv - 2.0 * (P @ MCv))
    else:
        Ma = constrained_mass_matrix(M, P, "eq29", s.alpha)
        a = lapack.dgesv(Ma, P @ f + s.alpha * Cv)[2]
    return a, proj


def inverse_mass_product(pm: pin.Model, data: pin.Data, q, X, method: str = "auto") -> np.ndarray:
    """``M(q)^-1 X`` without forming the inverse where that does not pay.

    Parameters
    ----------
    pm : pinocchio.Model
    data : pinocchio.Data
        Work space; its ``M`` (and ``Minv`` on the sparse path) is overwritten.
    q : (nq,)
    X : (nv,) or (nv, k)
        Right-hand side(s) [N m | N, or any unit per generalized force].
    method : str
        ``"dense"``: ``crba`` then LAPACK's Cholesky solve (``dposv``) of the dense M;
        ``"sparse"``: pinocchio's tree algorithms (Yesiloglu 2007 Ch. 3's O(n) factorization
        family): for one column of a shallow tree the tree-sparse Cholesky ``M = U D U^T``
        (``pin.cholesky.decompose`` after ``crba``, then ``pin.cholesky.solve``), otherwise
        the articulated-body inverse ``pin.computeMinverse`` (O(n^2)) times X (the Python
        binding of ``cholesky.solve`` takes one vector: a loop over columns costs about
        3.5 us per column, and on a long chain the factorization is dense work);
        ``"auto"``: dense below :data:`SPARSE_MASS_MIN_NV` velocity coordinates, sparse from
        there on.

    Returns
    -------
    Y : same shape as X, ``M Y = X``.

    Notes
    -----
    Measured in one process (``bench/run.py --only constrained``: best of interleaved
    repeats, 2 shared cores, pinocchio 4.1), time of the sparse path over the dense one, with
    the sparse time in brackets, for k = 1 and k = 3 columns:

    ============================  ===  ==============  ==============
    model                         nv   k = 1           k = 3
    ============================  ===  ==============  ==============
    slider_crank                   2   1.21 (3.7 us)   1.07 (3.4 us)
    five_bar                       4   1.17 (3.9 us)   1.06 (3.7 us)
    arm7 (open chain)              7   1.11 (4.8 us)   1.01 (4.6 us)
    dual_arm_load                  9   1.08 (5.1 us)   1.01 (5.1 us)
    15-link chain                 15   1.00 (7.5 us)   0.90 (7.1 us)
    30-link chain                 30   0.89 (13 us)    0.92 (14 us)
    pinocchio sample humanoid     34   0.78 (8.1 us)   0.81 (13 us)
    60-link chain                 60   0.62 (33 us)    0.66 (34 us)
    ============================  ===  ==============  ==============

    Up to the shipped models' size both paths cost a few microseconds, mostly Python call
    overhead (``crba`` 1 us, ``dposv`` 1-2 us), and the dense one is 0-20 % faster: the
    O(n) factorization does not pay there.  From 15-20 coordinates on the tree algorithms
    win (1.1-1.6 times faster at 30-60), so ``"auto"`` switches at
    :data:`SPARSE_MASS_MIN_NV` = 20.  (Before this function the simulator's mass-metric
    projection used scipy's ``cho_factor``/``cho_solve``, about 35 us of call overhead:
    ``project_velocity`` is now 2-2.4 times faster on five_bar, slider_crank, dual_arm_load.)
    """
    X = np.asarray(X, float)
    nv = pm.nv
    if X.shape[0] != nv or X.ndim > 2:
        raise InputError(f"X: expected shape ({nv},) or ({nv}, k), got {X.shape}")
    if method not in MASS_SOLVERS:
        raise InputError(f"method: expected one of {', '.join(MASS_SOLVERS)}, got {method!r}")
    if method == "auto":
        method = "sparse" if nv >= SPARSE_MASS_MIN_NV else "dense"
    if method == "dense":
        Y, info = lapack.dposv(pin.crba(pm, data, q), X)[1:]
        if info != 0:
            raise SolverError(f"mass matrix is not positive definite (LAPACK dposv info {info}); "
                              "check the inertias of the model")
        return Y
    if (X.ndim == 1 or X.shape[1] == 1) and _shallow_tree(pm):
        pin.crba(pm, data, q)
        pin.cholesky.decompose(pm, data)
        y = pin.cholesky.solve(pm, data, np.ascontiguousarray(X.reshape(nv)))
        return y if X.ndim == 1 else y.reshape(nv, 1)
    return pin.computeMinverse(pm, data, q) @ X


_SHALLOW: dict[int, tuple[pin.Model, bool]] = {}  # id(model) -> (model, shallow)


def _shallow_tree(pm: pin.Model) -> bool:
    """Whether the tree-sparse Cholesky is cheaper than ``computeMinverse`` for one column:
    its work grows as the sum over the velocity coordinates of their depth squared (the
    number of ancestor coordinates), the inverse's as nv^2 with a larger constant (measured
    ratio about 3: the humanoid, sum 2.4 nv^2, still favours Cholesky; a 30-link chain,
    sum 10 nv^2, does not)."""
    hit = _SHALLOW.get(id(pm))
    if hit is not None and hit[0] is pm:
        return hit[1]
    work = 0
    for j in range(1, pm.njoints):
        depth = sum(pm.joints[i].nv for i in pm.supports[j] if i > 0)  # ancestors and self
        work += pm.joints[j].nv * depth ** 2
    shallow = work <= 3 * pm.nv ** 2
    _SHALLOW[id(pm)] = (pm, shallow)
    return shallow


def _solve_spd(K, b):
    """Solve with a symmetric positive definite K by Cholesky (LAPACK, low call overhead);
    falls back to LU if K is not numerically positive definite (M itself singular)."""
    x, info = lapack.dposv(K, b)[1:]
    if info == 0:
        return x
    return np.linalg.solve(K, b)


_DEFAULT = ProjectionSettings()

#: Singular values of E V (entries of an orthonormal basis, so of order 1) below this are zero.
_PASSIVE_RANK_TOL = 1e-9


def _passive_rank(B: np.ndarray) -> tuple[int, np.ndarray]:
    """Rank and pseudo-inverse (same threshold) of B = E V, the passive rows of the row-space
    basis."""
    if B.size == 0:
        return 0, B.T.copy()
    U, s, Vt = np.linalg.svd(B, full_matrices=False)
    r = int(np.count_nonzero(s > _PASSIVE_RANK_TOL))
    return r, (Vt[:r].T / s[:r]) @ U[:, :r].T


@dataclass(frozen=True)
class ForwardDynamicsResult:
    """Constrained direct dynamics at one state (the scipy-style result).

    Attributes
    ----------
    a : (nv,) accelerations [rad/s^2 | m/s^2]
    f_c : (nv,) generalized constraint force (Aghili 2005 eq. 32) [N m | N]
    lam : (m,) minimum-norm multipliers, ``f_c = A^T lam`` (Remark 4)
    rank : int  rank of A after the threshold
    residual : float  ``||A a + gamma||_inf``; non-zero when a constraint direction was
        removed at a singularity (eq. 70) while its bias was not zero
    success : bool  all outputs finite
    message : str
    """

    a: np.ndarray
    f_c: np.ndarray
    lam: np.ndarray
    rank: int
    residual: float
    success: bool
    message: str


@dataclass(frozen=True)
class InverseDynamicsResult:
    """Actuation for a consistent motion (Aghili 2005 eqs. 45, 51, 59-62).

    Attributes
    ----------
    tau : (nv,) generalized actuation [N m | N]; zero on passive coordinates when
        ``success``
    f_c : (nv,) resulting constraint force, ``(I-P)(M a + h - tau_s - tau)`` (eq. 32)
    lam : (m,) minimum-norm multipliers of ``f_c``
    rank : int  rank of A
    residual : float  ``||A a + gamma||_inf`` of the commanded motion [m/s^2 | rad/s^2]
    passive_residual : float  largest |tau| on a passive coordinate [N m | N]
    success : bool; message : str
    """

    tau: np.ndarray
    f_c: np.ndarray
    lam: np.ndarray
    rank: int
    residual: float
    passive_residual: float
    success: bool
    message: str


@dataclass(frozen=True)
class CollocatedInverseDynamicsResult:
    """Inputs that give the actuated coordinates a measured acceleration, the passive ones
    following their own dynamics (:meth:`ProjectedDynamics.collocated_inverse_dynamics`).

    Attributes
    ----------
    u : (nu,) inputs [N m | N]
    tau : (nv,) generalized actuation ``B u`` [N m | N]; zero on passive coordinates
    a : (nv,) accelerations of the constrained motion under ``u`` [rad/s^2 | m/s^2]:
        ``B^T a`` is the commanded ``B^T a``, the passive components are the model's
    f_c : (nv,) generalized constraint force of that motion (Aghili 2005 eq. 32) [N m | N]
    lam : (m,) minimum-norm multipliers of ``f_c``
    rank : int  rank of A
    sigma_min : float  smallest singular value of ``[V, B]`` (V: orthonormal basis of the row
        space of A, B with unit columns); zero when an input acts only against the constraints
    success : bool; message : str
    """

    u: np.ndarray
    tau: np.ndarray
    a: np.ndarray
    f_c: np.ndarray
    lam: np.ndarray
    rank: int
    sigma_min: float
    success: bool
    message: str


@dataclass(frozen=True)
class ControllabilityResult:
    """Aghili (2005) eq. 64: can the actuated joints drive every admissible motion?

    Attributes
    ----------
    success : bool  ``rank[(I-S)(I-P)] == n - k``
    message : str
    rank : int  rank of ``(I-S)(I-P)``
    required_rank : int  ``n - k``, the number of passive coordinates
    constraint_rank : int  rank of A
    passive : tuple of str  names of the passive coordinates
    """

    success: bool
    message: str
    rank: int
    required_rank: int
    constraint_rank: int
    passive: tuple[str, ...]


@dataclass(frozen=True)
class ManifoldProjectionResult:
    """Newton-Raphson projection of q onto phi(q) = 0 (Aghili 2005 Sect. 6, eq. 39).

    Attributes
    ----------
    q : (nq,) projected configuration (the last iterate when not ``success``)
    success : bool; message : str
    iterations : int  Newton steps taken
    residual : float  ``||phi(q)||_inf`` at the returned q [m | rad]
    rank : int  rank of A at the returned q
    """

    q: np.ndarray
    success: bool
    message: str
    iterations: int
    residual: float
    rank: int


# -- fast path ------------------------------------------------------------------------------------
# ProjectedDynamics.acceleration/forward_dynamics spend their time in Python and numpy call
# overhead on tiny matrices (DESIGN.md Sect. 7).  When numba is available, one compiled kernel
# does the whole algebra after a single pinocchio pass (computeAllTerms: M, h, world joint
# Jacobians J and their time variation dJ) and one placement per closure frame.  The closure
# rows are written with world spatial quantities, V_rel = J diag(sel) v with sel = +1 on the
# joints that move frame a only, -1 on those that move frame b only (mathematically the same
# rows as Constraints, see _Closure):
#   position rows  A = w . (nu_r + omega_r x p_a),  w = R_b d (world direction of a row),
#                  gamma = w . (-omega_b x g + nu_r' + omega_r' x p_a + omega_r x v_a),
#                  g = nu_r + omega_r x p_a, (nu_r', omega_r') = dJ diag(sel) v;
#   rotation rows  A = G(R) R_b^T omega_r,
#                  gamma = G([w_r]x R) w_r + G(R) R_b^T (omega_r' - omega_b x omega_r),
#                  R = R_b^T R_a, w_r = R_b^T omega_r.
# The SVD of A is a one-sided Jacobi SVD (accurate to eps * sigma_max like LAPACK's), the solve an
# LU with partial pivoting; results equal the numpy path to round-off (checked in
# test/test_projection_fast.py and before every benchmark).
def _closure_rows(v, J, dJ, H, cl, cf, A, gamma, ws):  # pragma: no cover - numba  # noqa: C901
    """Fills the closure rows ``A`` (m, nv) and their bias ``gamma`` (m,) from the world joint
    Jacobians ``J``, their variation ``dJ`` and the frame placements ``H`` (see above); ``ws``
    (72,) scratch (no allocation here: the compiled simulator step calls this every stage).
    ``gamma`` of length 0: ``A`` only (the position projection; ``v`` and ``dJ`` not read).

    ``cl`` may carry a seventh column of flags per closure (``fast_step._Packed``; 0 or absent:
    none): 1, the tree moves in the world x-y plane, so the rows 2-4 of ``J`` and 2-5 of ``dJ``
    are zero and the velocity sums skip them; 2, its rotation rows are identically zero in that
    motion (set to zero, not computed).  The terms skipped are exact zeros: the rows equal those
    computed in full."""
    nv = J.shape[1]
    nc = cl.shape[0]
    bias = gamma.shape[0] > 0
    flagged = cl.shape[1] > 6
    # ws by flat index (slots: V_a 0, V_r 6, A_r 12, R 27, Rd 36, G 45, row-major 3 x 3): views
    # cut from it per call cost more than the arithmetic (compiled simulator step, four_bar)
    for c in range(nc):
        ia, ib, o, kp, nrot = cl[c, 0], cl[c, 1], cl[c, 2], cl[c, 3], cl[c, 4]
        flags = cl[c, 6] if flagged else 0
        # spatial velocities (world): relative, of a, angular of b; relative bias acceleration
        for i in range(6 if bias else 0):
            if flags & 1 and 1 < i < 5:  # out of the plane
                ws[i] = 0.0
                ws[6 + i] = 0.0
                ws[12 + i] = 0.0
                continue
            sa = 0.0
            sr = 0.0
            ar = 0.0
            for k in range(nv):
                s = cf[c, 90 + k]
                if s != 0.0:
                    sr += J[i, k] * s * v[k]
                    ar += dJ[i, k] * s * v[k]
                    if s > 0.0:
                        sa += J[i, k] * v[k]
            ws[i] = sa
            ws[6 + i] = sr
            ws[12 + i] = ar
        vr0, vr1, vr2, vr3, vr4, vr5 = ws[6], ws[7], ws[8], ws[9], ws[10], ws[11]
        ar0, ar1, ar2, ar3, ar4, ar5 = ws[12], ws[13], ws[14], ws[15], ws[16], ws[17]
        wb0, wb1, wb2 = ws[3] - vr3, ws[4] - vr4, ws[5] - vr5  # omega_b = omega_a - omega_r
        pa0, pa1, pa2 = H[ia, 0, 3], H[ia, 1, 3], H[ia, 2, 3]
        b0, b1, b2 = 0.0, 0.0, 0.0
        if kp and bias:
            # g = nu_r + omega_r x p_a; v_a = nu_a + omega_a x p_a
            g0 = vr0 + vr4 * pa2 - vr5 * pa1
            g1 = vr1 + vr5 * pa0 - vr3 * pa2
            g2 = vr2 + vr3 * pa1 - vr4 * pa0
            va0 = ws[0] + ws[4] * pa2 - ws[5] * pa1
            va1 = ws[1] + ws[5] * pa0 - ws[3] * pa2
            va2 = ws[2] + ws[3] * pa1 - ws[4] * pa0
            b0 = (-(wb1 * g2 - wb2 * g1) + ar0 + ar4 * pa2 - ar5 * pa1
                  + vr4 * va2 - vr5 * va1)
            b1 = (-(wb2 * g0 - wb0 * g2) + ar1 + ar5 * pa0 - ar3 * pa2
                  + vr5 * va0 - vr3 * va2)
            b2 = (-(wb0 * g1 - wb1 * g0) + ar2 + ar3 * pa1 - ar4 * pa0
                  + vr3 * va1 - vr4 * va0)
        if kp:
            for r in range(kp):
                w0 = (H[ib, 0, 0] * cf[c, 3 * r + 0] + H[ib, 0, 1] * cf[c, 3 * r + 1]
                      + H[ib, 0, 2] * cf[c, 3 * r + 2])
                w1 = (H[ib, 1, 0] * cf[c, 3 * r + 0] + H[ib, 1, 1] * cf[c, 3 * r + 1]
                      + H[ib, 1, 2] * cf[c, 3 * r + 2])
                w2 = (H[ib, 2, 0] * cf[c, 3 * r + 0] + H[ib, 2, 1] * cf[c, 3 * r + 1]
                      + H[ib, 2, 2] * cf[c, 3 * r + 2])
                for k in range(nv):
                    s = cf[c, 90 + k]
                    if s == 0.0:
                        A[o + r, k] = 0.0
                    else:
                        j0, j1, j2 = J[0, k], J[1, k], J[2, k]
                        j3, j4, j5 = J[3, k], J[4, k], J[5, k]
                        A[o + r, k] = s * (w0 * (j0 + j4 * pa2 - j5 * pa1)
                                           + w1 * (j1 + j5 * pa0 - j3 * pa2)
                                           + w2 * (j2 + j3 * pa1 - j4 * pa0))
                if bias:
                    gamma[o + r] = w0 * b0 + w1 * b1 + w2 * b2
        if nrot and flags & 2:  # identically zero in the plane
            for r in range(nrot):
                for k in range(nv):
                    A[o + kp + r, k] = 0.0
                if bias:
                    gamma[o + kp + r] = 0.0
        elif nrot:
            # R = R_b^T R_a; w_r = R_b^T omega_r; wrd = R_b^T (omega_r' - omega_b x omega_r)
            for i in range(3):
                for j in range(3):
                    ws[27 + 3 * i + j] = H[ib, 0, i] * H[ia, 0, j] + H[ib, 1, i] * H[ia, 1, j] + \
                        H[ib, 2, i] * H[ia, 2, j]
            wr0, wr1, wr2, wd0, wd1, wd2 = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
            if bias:
                x0 = ar3 - (wb1 * vr5 - wb2 * vr4)
                x1 = ar4 - (wb2 * vr3 - wb0 * vr5)
                x2 = ar5 - (wb0 * vr4 - wb1 * vr3)
                wr0 = H[ib, 0, 0] * vr3 + H[ib, 1, 0] * vr4 + H[ib, 2, 0] * vr5
                wr1 = H[ib, 0, 1] * vr3 + H[ib, 1, 1] * vr4 + H[ib, 2, 1] * vr5
                wr2 = H[ib, 0, 2] * vr3 + H[ib, 1, 2] * vr4 + H[ib, 2, 2] * vr5
                wd0 = H[ib, 0, 0] * x0 + H[ib, 1, 0] * x1 + H[ib, 2, 0] * x2
                wd1 = H[ib, 0, 1] * x0 + H[ib, 1, 1] * x1 + H[ib, 2, 1] * x2
                wd2 = H[ib, 0, 2] * x0 + H[ib, 1, 2] * x1 + H[ib, 2, 2] * x2
                for j in range(3):  # Rd = [w_r]x R
                    r0, r1, r2 = ws[27 + j], ws[30 + j], ws[33 + j]
                    ws[36 + j] = wr1 * r2 - wr2 * r1
                    ws[39 + j] = wr2 * r0 - wr0 * r2
                    ws[42 + j] = wr0 * r1 - wr1 * r0
            for r in range(nrot):
                for j in range(3):
                    sg = 0.0
                    sd = 0.0
                    for k in range(9):
                        sg += cf[c, 9 + 9 * (3 * r + j) + k] * ws[27 + k]
                        if bias:
                            sd += cf[c, 9 + 9 * (3 * r + j) + k] * ws[36 + k]
                    ws[45 + j] = sg
                    ws[48 + j] = sd
                G0, G1, G2, Gd0, Gd1, Gd2 = ws[45], ws[46], ws[47], ws[48], ws[49], ws[50]
                # G R_b^T
                t0 = G0 * H[ib, 0, 0] + G1 * H[ib, 0, 1] + G2 * H[ib, 0, 2]
                t1 = G0 * H[ib, 1, 0] + G1 * H[ib, 1, 1] + G2 * H[ib, 1, 2]
                t2 = G0 * H[ib, 2, 0] + G1 * H[ib, 2, 1] + G2 * H[ib, 2, 2]
                row = o + kp + r
                for k in range(nv):
                    s = cf[c, 90 + k]
                    if s == 0.0:
                        A[row, k] = 0.0
                    else:
                        A[row, k] = s * (t0 * J[3, k] + t1 * J[4, k] + t2 * J[5, k])
                if bias:
                    gamma[row] = (Gd0 * wr0 + Gd1 * wr1 + Gd2 * wr2
                                  + G0 * wd0 + G1 * wd1 + G2 * wd2)


def _projection_kernel(M, nle, tau, v, J, dJ, H, cl, cf, par):  # pragma: no cover - numba  # noqa: C901
    """Returns ``(a, f_c, lam, rank, residual)``; ``cl`` (nc, 6) ints [slot a, slot b, row
    offset, position rows, rotation rows, m], ``cf`` (nc, 90 + nv) [D (3x3), L_g (9x9), sel (nv)],
    ``par`` [rank_atol, rank_rtol, variant code, alpha]."""
    nv = M.shape[0]
    m = cl[0, 5]
    rank_atol, rank_rtol, variant, alpha = par[0], par[1], int(par[2]), par[3]
    A = np.empty((m, nv))
    gamma = np.empty(m)
    a = np.empty(nv)
    f_c = np.empty(nv)
    lam = np.empty(m)
    f = np.empty(nv)
    for k in range(nv):
        f[k] = tau[k] - nle[k]
    _closure_rows(v, J, dJ, H, cl, cf, A, gamma, np.empty(72))

    # one-sided Jacobi SVD of A^T (nv x m): B = A^T Q with orthogonal columns, A = Q Sigma V^T
    B, Q, norms, order, rank = _svd_rank(A, rank_rtol, rank_atol)
    # P = I - V_r V_r^T, A^+ = V_r S^-1 U_r^T
    P = np.eye(nv)
    Ap = np.zeros((nv, m))
    for ii in range(rank):
        j = order[ii]
        s = norms[j]
        for k in range(nv):
            vk = B[k, j] / s
            for l2 in range(nv):
                P[k, l2] -= vk * B[l2, j] / s
            for l2 in range(m):
                Ap[k, l2] += vk * Q[l2, j] / s
    # C v = -A^+ gamma (Aghili 2005 eq. 16); M C v
    Cv = np.zeros(nv)
    for k in range(nv):
        for l2 in range(m):
            Cv[k] -= Ap[k, l2] * gamma[l2]
    PM = np.zeros((nv, nv))
    for i in range(nv):
        for j in range(nv):
            sm = 0.0
            for k in range(nv):
                sm += P[i, k] * M[k, j]
            PM[i, j] = sm
    Pf = np.zeros(nv)
    MCv = np.zeros(nv)
    for i in range(nv):
        for k in range(nv):
            Pf[i] += P[i, k] * f[k]
            MCv[i] += M[i, k] * Cv[k]
    K = np.empty((nv, nv))
    rhs = np.empty(nv)
    if variant == 0:  # eq. 24
        for i in range(nv):
            for j in range(nv):
                K[i, j] = M[i, j] + PM[i, j] - PM[j, i]
            rhs[i] = Pf[i] + MCv[i]
    elif variant == 1:  # eq. 27: P M P + (I-P) M (I-P) = M - PM - MP + 2 PMP
        for i in range(nv):
            for j in range(nv):
                sm = 0.0
                for k in range(nv):
                    sm += PM[i, k] * P[k, j]
                K[i, j] = M[i, j] - PM[i, j] - PM[j, i] + 2.0 * sm
        for i in range(nv):
            sm = 0.0
            for k in range(nv):
                sm += P[i, k] * MCv[k]
            rhs[i] = Pf[i] + MCv[i] - 2.0 * sm
    else:  # eq. 29
        for i in range(nv):
            for j in range(nv):
                K[i, j] = PM[i, j] + alpha * ((1.0 if i == j else 0.0) - P[i, j])
            rhs[i] = Pf[i] + alpha * Cv[i]
    # LU with partial pivoting (M_c is positive definite, Theorem 2: no zero pivot; should one
    # occur, NaN marks the result as failed, as a division by the zero pivot did)
    if not _gauss_solve(K, rhs, a, 0.0):
        for i in range(nv):
            a[i] = np.nan
    # f_c = (I - P)(M a - f) (eq. 32); lam = (A^+)^T f_c; residual ||A a + gamma||_inf
    e = np.empty(nv)
    for i in range(nv):
        sm = -f[i]
        for k in range(nv):
            sm += M[i, k] * a[k]
        e[i] = sm
    for i in range(nv):
        sm = e[i]
        for k in range(nv):
            sm -= P[i, k] * e[k]
        f_c[i] = sm
    for l2 in range(m):
        sm = 0.0
        for k in range(nv):
            sm += Ap[k, l2] * f_c[k]
        lam[l2] = sm
    return a, f_c, lam, rank, _residual_inf(A, gamma, a)


def _constraint_basis(v, J, dJ, H, cl, cf, par, A, gamma, Vt, c, Ul,  # noqa: C901
                      wb):  # pragma: no cover - numba
    """Closure rows ``A`` (m, nv) and ``gamma`` (m,), their SVD and the rank decision of eq. 70;
    for the ``r`` retained directions (decreasing sigma): the rows ``Vt[:r]`` = ``V_r^T``, the
    projected bias ``c[:r] = V_r^T C v = -S_r^-1 U_r^T gamma`` (eq. 16) and ``Ul[:, :r] =
    U_r S_r^-1`` (``lam = Ul mu``).  ``wb`` scratch of ``72 + nv m + m^2 + m`` floats.  Returns r.

    The SVD is a one-sided Jacobi SVD of ``A^T`` (:func:`_jacobi_columns`) on the rows of A
    that are not exactly zero (3 of a revolute closure's 5 rows in a planar mechanism: their
    singular values are zero and never retained), as ``fast_step._svd``."""
    nv = J.shape[1]
    m = gamma.shape[0]
    _closure_rows(v, J, dJ, H, cl, cf, A, gamma, wb[:72])
    idx = np.empty(2 * m, np.int64)  # non-zero rows, then the retained columns by sigma
    sv = wb[72 + nv * m + m * m:72 + nv * m + m * m + m]
    B, Q, mz = _jacobi_nonzero_rows(A, wb[72:72 + nv * m], wb[72 + nv * m:72 + nv * m + m * m],
                                    idx, sv)
    smax = 0.0
    for j in range(mz):
        if sv[j] > smax:
            smax = sv[j]
    tol = par[1] * smax
    if tol < par[0]:
        tol = par[0]
    r = 0
    for j in range(mz):  # retained columns, then sorted by decreasing sigma (insertion)
        if sv[j] > tol:
            ii = r
            while ii > 0 and sv[idx[m + ii - 1]] < sv[j]:
                idx[m + ii] = idx[m + ii - 1]
                ii -= 1
            idx[m + ii] = j
            r += 1
    for l2 in range(m):
        for ii in range(r):
            Ul[l2, ii] = 0.0
    for ii in range(r):
        j = idx[m + ii]
        sj = sv[j]
        for k in range(nv):
            Vt[ii, k] = B[k, j] / sj
        sm = 0.0
        for i in range(mz):
            sm += Q[i, j] * gamma[idx[i]]
            Ul[idx[i], ii] = Q[i, j] / sj
        c[ii] = -sm / sj
    return r


def _nonzero_rows(A, rows):  # pragma: no cover - numba
    """The number ``mz`` of rows of A (m, n) that are not exactly zero (directions a closure
    type fixes in 3-D but a planar mechanism never moves), their indices into ``rows[:mz]``."""
    m, n = A.shape
    mz = 0
    for i in range(m):
        for k in range(n):
            if A[i, k] != 0.0:
                rows[mz] = i
                mz += 1
                break
    return mz


def _jacobi_rows(A, rows, mz, B, Q, sv):  # pragma: no cover - numba
    """One-sided Jacobi SVD of ``A_z^T`` (:func:`_jacobi_columns`), ``A_z`` the rows
    ``rows[:mz]`` of A (m, n), into the given views ``B = A_z^T Q`` (n, mz), its columns
    orthogonal, ``Q`` (mz, mz), and ``sv[:mz]`` the column norms (the non-zero singular
    values)."""
    n = A.shape[1]
    for c in range(mz):
        for k in range(n):
            B[k, c] = A[rows[c], k]
        for j in range(mz):
            Q[c, j] = 1.0 if c == j else 0.0
    _jacobi_columns(B, Q)
    for j in range(mz):
        sq = 0.0
        for k in range(n):
            sq += B[k, j] * B[k, j]
        sv[j] = np.sqrt(sq)


def _jacobi_nonzero_rows(A, bbuf, qbuf, rows, sv):  # pragma: no cover - numba
    """:func:`_jacobi_rows` on the rows of A (m, n) that are not exactly zero
    (:func:`_nonzero_rows`), the views ``B`` (n, mz) and ``Q`` (mz, mz) cut from the scratch
    ``bbuf`` (n m,) and ``qbuf`` (m^2,).  Returns ``(B, Q, mz)``."""
    n = A.shape[1]
    mz = _nonzero_rows(A, rows)
    B = bbuf[:n * mz].reshape((n, mz))
    Q = qbuf[:mz * mz].reshape((mz, mz))
    _jacobi_rows(A, rows, mz, B, Q, sv)
    return B, Q, mz


def _gauss_combine(Xt, Rt, c, Ul, A, gamma, r, out, ws):  # pragma: no cover - numba
    """The constrained solution from ``Xt[0] = M^-1 f`` and ``Xt[1:r+1] = (M^-1 V_r)^T`` (``Rt``
    rows 1.. hold ``V_r^T``): ``(V_r^T M^-1 V_r) mu = c - V_r^T M^-1 f``, ``a = M^-1 (f + V_r
    mu)``, ``f_c = V_r mu``, ``lam = U_r S_r^-1 mu``, written to ``out = [a, f_c, lam]``.
    Returns ``||A a + gamma||_inf`` (inf when a is not finite or the r x r system singular);
    ``ws`` scratch of at least ``r^2 + 2 r`` floats."""
    nv = Xt.shape[1]
    m = gamma.shape[0]
    K = ws[:r * r].reshape((r, r))
    rhs = ws[r * r:r * r + r]
    mu = ws[r * r + r:r * r + 2 * r]
    for i in range(r):
        mu[i] = 0.0
    for i1 in range(r):
        sm = c[i1]
        for k in range(nv):
            sm -= Rt[1 + i1, k] * Xt[0, k]
        rhs[i1] = sm
        for i2 in range(r):
            sm = 0.0
            for k in range(nv):
                sm += Rt[1 + i1, k] * Xt[1 + i2, k]
            K[i1, i2] = sm
    ok = r == 0 or _gauss_solve(K, rhs, mu, 0.0)  # K is positive definite when M is
    for k in range(nv):
        sa = Xt[0, k]
        sf = 0.0
        for ii in range(r):
            sa += Xt[1 + ii, k] * mu[ii]
            sf += Rt[1 + ii, k] * mu[ii]
        out[k] = sa if ok else np.nan
        out[nv + k] = sf
    for l2 in range(m):
        sm = 0.0
        for ii in range(r):
            sm += Ul[l2, ii] * mu[ii]
        out[2 * nv + l2] = sm
    return _residual_inf(A, gamma, out)


def _basis_kernel(v, J, dJ, H, cl, cf, par):  # pragma: no cover - numba
    """:func:`_constraint_basis` with its arrays allocated: ``(Rt, c, Ul, A, gamma, r)``, ``Rt``
    (m + 1, nv) with ``V_r^T`` in rows 1..r (row 0 is left for ``f``)."""
    nv = J.shape[1]
    m = cl[0, 5]
    A = np.empty((m, nv))
    gamma = np.empty(m)
    Rt = np.empty((m + 1, nv))
    c = np.empty(m)
    Ul = np.empty((m, m))
    wb = np.empty(72 + nv * m + m * m + m)  # _constraint_basis's scratch
    r = _constraint_basis(v, J, dJ, H, cl, cf, par, A, gamma, Rt[1:], c, Ul, wb)
    return Rt, c, Ul, A, gamma, r


def _combine_kernel(Xt, Rt, c, Ul, A, gamma, r):  # pragma: no cover - numba
    """:func:`_gauss_combine` into a new ``out`` (2 nv + m,): ``(out, residual)``."""
    out = np.empty(2 * Xt.shape[1] + gamma.shape[0])
    return out, _gauss_combine(Xt, Rt, c, Ul, A, gamma, r, out, np.empty(r * r + 2 * r))


def _dense_kernel(M, nle, tau, v, J, dJ, H, cl, cf, par):  # pragma: no cover - numba
    """The whole direct dynamics with a dense Cholesky of M (small models): ``(out, rank,
    residual)``, ``out = [a, f_c, lam]`` (2 nv + m,); NaN accelerations if M is not positive
    definite."""
    nv = M.shape[0]
    m = cl[0, 5]
    A = np.empty((m, nv))
    gamma = np.empty(m)
    Rt = np.empty((m + 1, nv))
    Xt = np.empty((m + 1, nv))
    c = np.empty(m)
    Ul = np.empty((m, m))
    L = np.empty((nv, nv))
    out = np.empty(2 * nv + m)
    for k in range(nv):
        Rt[0, k] = tau[k] - nle[k]
    wb = np.empty(72 + nv * m + m * m + m)  # _constraint_basis's scratch
    r = _constraint_basis(v, J, dJ, H, cl, cf, par, A, gamma, Rt[1:], c, Ul, wb)
    if _chol(M, L, nv):
        for i in range(r + 1):
            _chol_solve(L, Rt, i, Xt, i, nv)
    else:
        for i in range(r + 1):
            for k in range(nv):
                Xt[i, k] = np.nan
    return out, r, _gauss_combine(Xt, Rt, c, Ul, A, gamma, r, out, np.empty(r * r + 2 * r))


def _residual_inf(A, gamma, a):  # pragma: no cover - numba
    """``||A a + gamma||_inf`` over the m rows of A (m, nv) with ``a[:nv]``; inf if not finite."""
    res = 0.0
    for l2 in range(gamma.shape[0]):
        sm = gamma[l2]
        for k in range(A.shape[1]):
            sm += A[l2, k] * a[k]
        if abs(sm) > res or sm != sm:
            res = abs(sm) if sm == sm else np.inf
    return res


def _chol(M, L, n):  # pragma: no cover - numba
    """Cholesky ``M = L L^T`` of the leading n x n block into L (lower); False if that block
    is not positive definite."""
    for j in range(n):
        sm = M[j, j]
        for k in range(j):
            sm -= L[j, k] * L[j, k]
        if not sm > 0.0:
            return False
        d = np.sqrt(sm)
        L[j, j] = d
        for i in range(j + 1, n):
            s2 = M[i, j]
            for k in range(j):
                s2 -= L[i, k] * L[j, k]
            L[i, j] = s2 / d
    return True


def _chol_solve(L, b, ib, x, ix, n):  # pragma: no cover - numba
    """Row ``ix`` of x (2-D) = (L L^T)^-1 row ``ib`` of b (2-D), leading n x n block of L."""
    for i in range(n):
        sm = b[ib, i]
        for k in range(i):
            sm -= L[i, k] * x[ix, k]
        x[ix, i] = sm / L[i, i]
    for i in range(n - 1, -1, -1):
        sm = x[ix, i]
        for k in range(i + 1, n):
            sm -= L[k, i] * x[ix, k]
        x[ix, i] = sm / L[i, i]


def _svd_rank(A, rank_rtol, rank_atol):  # pragma: no cover - numba
    """SVD of A (m, nv) by one-sided Jacobi on A^T: ``B = A^T Q`` with orthogonal columns, their
    norms ``s`` (the singular values), ``order`` (decreasing s) and the numerical rank (s above
    ``max(rank_rtol * s_max, rank_atol)``); ``A = Q diag(s) V^T``, ``V[:, j] = B[:, j] / s_j``."""
    m, nv = A.shape
    B = A.T.copy()
    Q = np.eye(m)
    _jacobi_columns(B, Q)
    s = np.empty(m)
    for j in range(m):
        sq = 0.0
        for k in range(nv):
            sq += B[k, j] * B[k, j]
        s[j] = np.sqrt(sq)
    order = np.argsort(-s)
    tol = rank_rtol * s[order[0]]
    if tol < rank_atol:
        tol = rank_atol
    rank = 0
    for i in range(m):
        if s[order[i]] > tol:
            rank += 1
    return B, Q, s, order, rank


def _jacobi_columns(B, Q):  # pragma: no cover - numba
    """One-sided Jacobi: rotates the columns of B (n, p) in place until they are orthogonal,
    accumulating the rotations in Q (p, p) (start from the identity): ``B_in Q = B_out``."""
    n, p = B.shape
    eps = 2.220446049250313e-16
    for _sweep in range(60):
        rotated = False
        for i in range(p - 1):
            for j in range(i + 1, p):
                al = 0.0
                be = 0.0
                ga = 0.0
                for k in range(n):
                    al += B[k, i] * B[k, i]
                    be += B[k, j] * B[k, j]
                    ga += B[k, i] * B[k, j]
                if ga == 0.0 or abs(ga) <= eps * np.sqrt(al * be):
                    continue
                rotated = True
                ze = (be - al) / (2.0 * ga)
                t = (1.0 if ze >= 0.0 else -1.0) / (abs(ze) + np.sqrt(1.0 + ze * ze))
                cs = 1.0 / np.sqrt(1.0 + t * t)
                sn = cs * t
                for k in range(n):
                    bi, bj = B[k, i], B[k, j]
                    B[k, i] = cs * bi - sn * bj
                    B[k, j] = sn * bi + cs * bj
                for k in range(p):
                    qi, qj = Q[k, i], Q[k, j]
                    Q[k, i] = cs * qi - sn * qj
                    Q[k, j] = sn * qi + cs * qj
        if not rotated:
            break


def _inverse_dynamics_kernel(M, nle, tau_s, v, J, dJ, H, cl, cf, par, a, dep, passive,  # noqa: C901
                             f_cmd_lam, mode):  # pragma: no cover - numba
    """Projected inverse dynamics of a commanded motion (Aghili 2005 eqs. 45, 51, 59-62) for the
    controllers, after one ``computeAllTerms`` (M, nle, J, dJ) and the frame placements H.

    ``a`` (nv,) holds the commanded accelerations of the independent coordinates and zeros on
    ``dep`` (m,) (a square partition); the dependent ones are solved from ``A a + gamma = 0`` in
    place.  ``b = M a + nle - tau_s``; ``tau = P b`` (eq. 45), plus with ``mode`` 1 the force term
    ``(I-P) b - A^T f_cmd_lam`` (eq. 51), or with ``mode`` 2 the passive correction
    ``- V (E V)^+ E tau`` (eqs. 59-62, E the rows ``passive``).

    Returns ``(tau, f_c, lam, status, rank, passive_rank)``, status 0 ok, 1 ``A_d`` singular
    (or rank A < m), 2 ``E V`` rank deficient, 3 non-finite A or gamma.
    """
    nv = M.shape[0]
    m = cl[0, 5]
    rank_atol, rank_rtol = par[0], par[1]
    A = np.empty((m, nv))
    gamma = np.empty(m)
    tau = np.empty(nv)
    f_c = np.empty(nv)
    lam = np.zeros(m)
    _closure_rows(v, J, dJ, H, cl, cf, A, gamma, np.empty(72))
    for i in range(m):
        if not np.isfinite(gamma[i]):
            return tau, f_c, lam, 3, 0, 0
        for k in range(nv):
            if not np.isfinite(A[i, k]):
                return tau, f_c, lam, 3, 0, 0
    # dependent accelerations: A_d a_d = -(A a + gamma), LU with partial pivoting
    K = np.empty((m, m))
    rhs = np.empty(m)
    for i in range(m):
        sm = gamma[i]
        for k in range(nv):
            sm += A[i, k] * a[k]
        rhs[i] = -sm
        for j in range(m):
            K[i, j] = A[i, dep[j]]
    a_dep = np.empty(m)
    if not _gauss_solve(K, rhs, a_dep, 0.0):
        return tau, f_c, lam, 1, 0, 0
    for i in range(m):
        a[dep[i]] = a_dep[i]
    # b = M a + h - tau_s (rnea)
    b = np.empty(nv)
    for i in range(nv):
        sm = nle[i] - tau_s[i]
        for k in range(nv):
            sm += M[i, k] * a[k]
        b[i] = sm
    # SVD of A by one-sided Jacobi on A^T: A = Q diag(s) V^T, V[:, j] = B[:, j] / s_j
    B, Q, s, order, r = _svd_rank(A, rank_rtol, rank_atol)
    if r < m:
        return tau, f_c, lam, 1, r, 0
    V = np.empty((nv, r))
    sr = np.empty(r)
    for ii in range(r):
        j = order[ii]
        sr[ii] = s[j]
        for k in range(nv):
            V[k, ii] = B[k, j] / s[j]
    # f_perp = (I - P) b = V V^T b; tau = P b (eq. 45)
    c = np.zeros(r)
    for ii in range(r):
        for k in range(nv):
            c[ii] += V[k, ii] * b[k]
    for k in range(nv):
        sm = 0.0
        for ii in range(r):
            sm += V[k, ii] * c[ii]
        f_c[k] = sm
        tau[k] = b[k] - sm
    r2 = 0
    if mode == 1:  # eq. 51: tau += f_perp - A^T lam_cmd; f_c = (I - P) A^T lam_cmd
        fcmd = np.zeros(nv)
        for k in range(nv):
            for i in range(m):
                fcmd[k] += A[i, k] * f_cmd_lam[i]
            tau[k] += f_c[k] - fcmd[k]
        for ii in range(r):
            c[ii] = 0.0
            for k in range(nv):
                c[ii] += V[k, ii] * fcmd[k]
        for k in range(nv):
            sm = 0.0
            for ii in range(r):
                sm += V[k, ii] * c[ii]
            f_c[k] = sm
    elif mode == 2:  # eqs. 59-62: tau -= V (E V)^+ E tau; f_c = f_perp + that correction
        npas = passive.shape[0]
        B2 = np.empty((r, npas))  # (E V)^T
        for ii in range(r):
            for jj in range(npas):
                B2[ii, jj] = V[passive[jj], ii]
        Q2 = np.eye(npas)
        _jacobi_columns(B2, Q2)
        # E V = sum_j s2_j Q2[:, j] u_j^T with u_j = B2[:, j] / s2_j
        corr = np.zeros(r)
        for jj in range(npas):
            sq = 0.0
            for ii in range(r):
                sq += B2[ii, jj] * B2[ii, jj]
            s2 = np.sqrt(sq)
            if s2 > 1e-9:
                r2 += 1
                qt = 0.0
                for kk in range(npas):
                    qt += Q2[kk, jj] * tau[passive[kk]]
                for ii in range(r):
                    corr[ii] += B2[ii, jj] / s2 * qt / s2
        if r2 < npas:
            return tau, f_c, lam, 2, r, r2
        for k in range(nv):
            sm = 0.0
            for ii in range(r):
                sm += V[k, ii] * corr[ii]
            tau[k] -= sm
            f_c[k] += sm
    # minimum-norm multipliers (A^T)^+ f_c = Q S^-1 V^T f_c
    for ii in range(r):
        c[ii] = 0.0
        for k in range(nv):
            c[ii] += V[k, ii] * f_c[k]
        c[ii] /= sr[ii]
    for i in range(m):
        sm = 0.0
        for ii in range(r):
            sm += Q[i, order[ii]] * c[ii]
        lam[i] = sm
    return tau, f_c, lam, 0, r, r2


_KERNEL = []  # [(dense, basis, combine, as-written) kernels] once jitted; [None] without numba
_ID_KERNEL = []  # [compiled _inverse_dynamics_kernel] likewise


def _numba_jit():
    """numba.njit with the options of the kernels, or None; compiles the helpers first (the
    kernels resolve them as globals when they are compiled)."""
    global _closure_rows, _jacobi_columns, _gauss_solve, _svd_rank, _chol, _chol_solve
    global _constraint_basis, _gauss_combine, _jacobi_nonzero_rows, _residual_inf
    global _nonzero_rows, _jacobi_rows
    try:
        import numba
    except ImportError:  # the plain numpy path is used
        return None
    from .compile_notice import install

    install()  # a note while a first run compiles
    jit = numba.njit(cache=True, nogil=True)
    if not hasattr(_closure_rows, "py_func"):
        _closure_rows = jit(_closure_rows)
        _jacobi_columns = jit(_jacobi_columns)
        _svd_rank = jit(_svd_rank)  # after _jacobi_columns, which it calls
        _nonzero_rows = jit(_nonzero_rows)
        _jacobi_rows = jit(_jacobi_rows)  # after _jacobi_columns, which it calls
        _jacobi_nonzero_rows = jit(_jacobi_nonzero_rows)  # after both
        _residual_inf = jit(_residual_inf)
        _gauss_solve = compiled_gauss_solve()
        _chol = jit(_chol)
        _chol_solve = jit(_chol_solve)
        _constraint_basis = jit(_constraint_basis)  # after _closure_rows and _svd_rank
        _gauss_combine = jit(_gauss_combine)
    return jit


def _compiled_kernel():
    """The numba-compiled direct-dynamics kernels ``(_dense_kernel, _basis_kernel,
    _combine_kernel, _projection_kernel)``, or None when numba is not installed."""
    if not _KERNEL:
        jit = _numba_jit()
        _KERNEL.append(None if jit is None else (jit(_dense_kernel), jit(_basis_kernel),
                                                 jit(_combine_kernel), jit(_projection_kernel)))
    return _KERNEL[0]


def _compiled_inverse_kernel():
    """The numba-compiled :func:`_inverse_dynamics_kernel`, or None without numba."""
    if not _ID_KERNEL:
        jit = _numba_jit()
        _ID_KERNEL.append(None if jit is None else jit(_inverse_dynamics_kernel))
    return _ID_KERNEL[0]


class _FastPlan:
    """Per-object constant data of the fast path: frames, closure rows packed for the kernel,
    and views of the pinocchio Data arrays (updated in place by every pinocchio call)."""

    def __init__(self, constraints: Constraints, pm: pin.Model, data: pin.Data):
        closures = constraints._closures
        frames = sorted({c.fa for c in closures} | {c.fb for c in closures})
        slot = {f: i for i, f in enumerate(frames)}
        nc, nv = len(closures), pm.nv
        self.m = constraints.n_holonomic
        self.cl = np.zeros((nc, 6), np.int64)
        self.cf = np.zeros((nc, 90 + nv))
        for i, (c, o) in enumerate(zip(closures, constraints._offsets)):
            self.cl[i] = (slot[c.fa], slot[c.fb], o, c.kp, c.n_rot, self.m)
            D = np.zeros((3, 3))
            D[: c.kp] = c.D
            Lg = np.zeros((9, 9))
            if c.n_rot:
                Lg[: 3 * c.n_rot] = c.L_g
            self.cf[i, :9] = D.ravel()
            self.cf[i, 9:90] = Lg.ravel()
            self.cf[i, 90:] = self._support(pm, c.fa) - self._support(pm, c.fb)
        # frames on the universe (rails, surfaces) are placed once
        self.H = np.zeros((len(frames), 4, 4))
        pin.framesForwardKinematics(pm, data, pin.neutral(pm))
        self.moving = []
        for i, fid in enumerate(frames):
            self.H[i] = data.oMf[fid].homogeneous
            if pm.frames[fid].parentJoint != 0:
                self.moving.append((i, fid))
        self.M, self.nle, self.J, self.dJ = data.M, data.nle, data.J, data.dJ
        self.settings = None
        self.par = np.zeros(4)
        self.nv = nv
        self.tree = False  # direct dynamics by pinocchio's ABA (set by parameters)
        self.solver = "auto"
        self._unit = None

    def parameters(self, s: ProjectionSettings) -> np.ndarray:
        if s is not self.settings:
            self.par[:] = (s.rank_atol, s.rank_rtol, VARIANTS.index(s.variant), s.alpha)
            self.solver = s.mass_solver
            self.tree = s.mass_solver == "sparse" or (
                s.mass_solver == "auto" and self.nv >= TREE_DYNAMICS_MIN_NV)
            self.settings = s
        return self.par

    def unit_solver(self, pm: pin.Model):
        """``(model, data, zero velocity)`` with the gravity of ``pm`` removed: ``pin.aba`` on
        them gives ``M^-1 x``."""
        if self._unit is None:
            pm0 = pin.Model(pm)
            pm0.gravity = pin.Motion.Zero()
            self._unit = (pm0, pm0.createData(), np.zeros(pm.nv))
        return self._unit

    @staticmethod
    def _support(pm, frame):
        mask = np.zeros(pm.nv)
        for j in pm.supports[pm.frames[frame].parentJoint]:
            if j > 0:
                jm = pm.joints[j]
                mask[jm.idx_v:jm.idx_v + jm.nv] = 1.0
        return mask

class ProjectedDynamics:
    """Direct and inverse dynamics of a constrained model by the projection matrix P.

    Parameters
    ----------
    model : MultibodyModel
    constraints : Constraints, optional
        Default: ``Constraints(model)`` (the closures of the model YAML); pass one to
        add Pfaffian constraints.
    settings : ProjectionSettings, optional

    Notes
    -----
    The object owns two pinocchio ``Data`` (dynamics and constraints): one per thread.
    """

    def __init__(self, model: MultibodyModel, constraints: Constraints | None = None,
                 settings: ProjectionSettings | None = None):
        self.model = model
        self.constraints = constraints if constraints is not None else Constraints(model)
        self.settings = settings or ProjectionSettings()
        self._pm = model.pin_model
        self._data = self._pm.createData()
        self._rigid = RigidDynamics(model)
        self._springs = model.has_springs
        self._nq, self._nv = model.nq, model.nv
        self._eye = np.eye(model.nv)
        self._actuated_default = ~np.asarray(model.passive, bool)
        self._plan = None  # _FastPlan, built on the first call that can use the fast path
        self._kernel = None
        self._tree = None  # fast_step.TreeDynamics where the model is a tree of 1-dof joints
        self._ready_for = None  # the Constraints the plan was built for
        self._messages: dict[int, object] = {}  # forward_dynamics messages by rank; -1: m

    # -- argument checks ------------------------------------------------------------------
    def _q(self, q):
        if q.__class__ is _ND and q.dtype is _F8 and q.shape == (self._nq,):
            return q
        return as_vector(q, self._nq, "q")

    def _v(self, v, name):
        if v.__class__ is _ND and v.dtype is _F8 and v.shape == (self._nv,):
            return v
        return as_vector(v, self._nv, name)

    def _state(self, q, v, tau):
        """``(q, v, tau)`` checked (one call: the direct dynamics' few-microsecond path)."""
        sv = (self._nv,)
        if q.__class__ is _ND and v.__class__ is _ND and tau.__class__ is _ND and \
                q.dtype is _F8 and v.dtype is _F8 and tau.dtype is _F8 and \
                q.shape == (self._nq,) and v.shape == sv and tau.shape == sv:
            return q, v, tau
        return self._q(q), self._v(v, "v"), self._v(tau, "tau")

    def _applied(self, q, v, tau):
        """``f = tau + tau_s - h`` and M at (q, v)."""
        M = pin.crba(self._pm, self._data, q)
        h = pin.nonLinearEffects(self._pm, self._data, q, v)
        f = tau - h
        if self._springs:
            f += self._rigid.spring_forces(q, v)
        return M, f

    # -- direct dynamics ------------------------------------------------------------------------
    def acceleration(self, q, v, tau) -> np.ndarray:
        """Accelerations a (nv,) under actuation ``tau`` (Aghili 2005 eq. 22); the fast path."""
        q, v, tau = self._state(q, v, tau)
        if self._fast_ready():
            return self._fast(q, v, tau)[0][:self._nv]
        A, gamma = self.constraints.jacobian_and_bias(q, v)
        M, f = self._applied(q, v, tau)
        return projected_acceleration(M, f, A, gamma, self.settings)[0]

    def acceleration_as_written(self, q, v, tau) -> np.ndarray:
        """Accelerations a (nv,) by solving the linear system of ``settings.variant`` as
        written (eq. 24, 27 or 29: ``M_c a = ...``, dense LU, O(nv^3)), compiled where
        :meth:`acceleration` is; the simulator's reference path.

        Same solution as :meth:`acceleration` (the Gauss form) to round-off away from
        singular configurations; near one, the solve with ``M_c`` loses about
        ``eps / sigma_min^2`` in the accelerations (docs/performance.md).
        """
        q, v, tau = self._q(q), self._v(v, "v"), self._v(tau, "tau")
        if self._fast_ready():
            self._plan.parameters(self.settings)
            return self._kernel[3](*self._all_terms(q, v, tau), self._plan.par)[0]
        A, gamma = self.constraints.jacobian_and_bias(q, v)
        M, f = self._applied(q, v, tau)
        return projected_acceleration(M, f, A, gamma, self.settings)[0]

    def _fast_ready(self) -> bool:
        """Whether the compiled path applies: numba present, closures only (no Pfaffian rows)."""
        c = self.constraints
        if c is self._ready_for and not c._pfaffian:  # closures are fixed at construction
            return True
        if c._pfaffian or c.n_holonomic == 0 or type(c) is not Constraints:
            return False
        if self._plan is None or self._plan.m != c.n_holonomic or c is not self._ready_for:
            self._kernel = _compiled_kernel()
            if self._kernel is None:
                return False
            self._plan = _FastPlan(c, self._pm, self._data)
            from .fast_step import TreeDynamics  # deferred: fast_step imports this module

            self._tree = TreeDynamics.build(self)
            self._ready_for = c
        return True

    def _fast(self, q, v, tau):
        """``(out, rank, residual)``, ``out = [a, f_c, lam]`` (2 nv + m,), by the compiled
        kernels: after one pinocchio pass with a dense Cholesky of M (small models), or with
        articulated-body solves (:meth:`_fast_tree`)."""
        plan, tr = self._plan, self._tree
        par = plan.par if self.settings is plan.settings else plan.parameters(self.settings)
        if tr is not None and plan.solver != "dense":  # the call of TreeDynamics, inlined
            if self._springs:
                tau = tau + self._rigid.spring_forces(q, v)
            return tr.kernel(q, v, tau, tr.ic, tr.fc, par, tr.buf)
        if plan.tree:
            return self._fast_tree(q, v, tau, par)
        return self._kernel[0](*self._all_terms(q, v, tau), par)

    def _all_terms(self, q, v, tau):
        """The dense kernels' arguments but ``par``: one ``computeAllTerms``, the frames."""
        pm, data, plan = self._pm, self._data, self._plan
        pin.computeAllTerms(pm, data, q, v)  # M, h, J, dJ and the joint placements
        H = plan.H
        for i, fid in plan.moving:
            H[i] = pin.updateFramePlacement(pm, data, fid).homogeneous
        if self._springs:
            tau = tau + self._rigid.spring_forces(q, v)
        return plan.M, plan.nle, tau, v, plan.J, plan.dJ, H, plan.cl, plan.cf

    def _fast_tree(self, q, v, tau, par):
        """:meth:`_fast` in O(n m + m^3) for a tree of n bodies and m closure rows: the Gauss
        form of eq. 22 (``a = M^-1 (f + V_r mu)``, see :func:`_gauss_combine`) needs M only
        through ``M^-1 f`` and the r columns of ``M^-1 V_r``; each is one articulated-body
        pass (``pin.aba``, O(n); Featherstone 2008 Ch. 7, the factorization of M^-1 of
        Yesiloglu (2007) (3.38)), ``M^-1 f`` with the model's velocity and gravity, the columns
        on a copy of the model without gravity at zero velocity.  No n x n matrix is formed."""
        pm, data, plan = self._pm, self._data, self._plan
        pin.computeJointJacobiansTimeVariation(pm, data, q, v)  # J, dJ and the placements
        H = plan.H
        for i, fid in plan.moving:
            H[i] = pin.updateFramePlacement(pm, data, fid).homogeneous
        if self._springs:
            tau = tau + self._rigid.spring_forces(q, v)
        Rt, c, Ul, A, gamma, r = self._kernel[1](v, plan.J, plan.dJ, H, plan.cl, plan.cf, par)
        Xt = np.empty_like(Rt)
        Xt[0] = pin.aba(pm, data, q, v, tau)  # M^-1 (tau + tau_s - h)
        if r:
            pm0, data0, zero = plan.unit_solver(pm)
            for i in range(1, r + 1):
                Xt[i] = pin.aba(pm0, data0, q, zero, Rt[i])  # M^-1 V_r[:, i-1]
        out, residual = self._kernel[2](Xt, Rt, c, Ul, A, gamma, r)
        return out, r, residual

    def forward_dynamics(self, q, v, tau) -> np.ndarray:
        """Accelerations a (nv,) under actuation ``tau`` (nv,) (eq. 22): the
        :class:`~multibody_dynamics.protocols.Dynamics` convention, same as :meth:`acceleration`.
        The constraint force and multipliers: :meth:`forward_dynamics_result`."""
        return self.acceleration(q, v, tau)

    def forward_dynamics_result(self, q, v, tau) -> ForwardDynamicsResult:
        """Accelerations, constraint force (eq. 32) and minimum-norm multipliers.

        Parameters
        ----------
        q : (nq,); v : (nv,) [rad/s | m/s]; tau : (nv,) actuation [N m | N]
        """
        q, v, tau = self._state(q, v, tau)
        if self._fast_ready():
            out, rank, residual = self._fast(q, v, tau)
            nv, m = self._nv, self._plan.m
            a, f_c, lam = out[:nv], out[nv:2 * nv], out[2 * nv:]
            if residual < np.inf:  # a finite (else the kernel's residual is inf): a frozen
                # dataclass's __init__ (object.__setattr__ per field) costs as much as the
                # kernel, so the instance is filled directly, with the messages below (kept
                # per rank: a redundant closure set formats one on every call otherwise)
                msg = self._messages.get(rank)
                if msg is None or self._messages.get(-1) != m:
                    self._messages = {-1: m, rank: "ok" if rank == m else (
                        f"rank of A is {rank} < {m} rows: {m - rank} "
                        "redundant or removed constraint direction(s)")}
                    msg = self._messages[rank]
                res = object.__new__(ForwardDynamicsResult)
                res.__dict__.update({"a": a, "f_c": f_c, "lam": lam, "rank": rank,
                                     "residual": residual, "success": True, "message": msg})
                return res
        else:
            A, gamma = self.constraints.jacobian_and_bias(q, v)
            M, f = self._applied(q, v, tau)
            a, proj = projected_acceleration(M, f, A, gamma, self.settings)
            f_c = M @ a - f
            f_c -= proj.P @ f_c  # eq. 32: f_c = (I - P)(M a + h - tau - tau_s)
            lam = proj.A_pinv.T @ f_c  # (A^T)^+ = (A^+)^T
            m, rank = A.shape[0], proj.rank
            residual = float(np.max(np.abs(A @ a + gamma))) if m else 0.0
        ok = bool(np.isfinite(a).all())
        if not ok:
            msg = "non-finite accelerations (check q, v, tau and the mass matrix)"
        elif rank < m:
            msg = (f"rank of A is {rank} < {m} rows: "
                   f"{m - rank} redundant or removed constraint direction(s)")
        else:
            msg = "ok"
        return ForwardDynamicsResult(a, f_c, lam, rank, residual, ok, msg)

    def constraint_force(self, q, v, a, tau) -> tuple[np.ndarray, np.ndarray]:
        """``f_c = (I-P)(M a + h - tau - tau_s)`` (eq. 32) and ``lam = (A^T)^+ f_c``.

        ``f_c`` is unique even when ``lam`` is not (redundant constraints).
        """
        q, v = self._q(q), self._v(v, "v")
        a, tau = self._v(a, "a"), self._v(tau, "tau")
        A = self.constraints.jacobian(q)
        proj = null_space_projector(A, self.settings.rank_atol, self.settings.rank_rtol)
        M, f = self._applied(q, v, tau)
        f_c = M @ a - f
        f_c -= proj.P @ f_c
        return f_c, proj.A_pinv.T @ f_c

    # -- inverse dynamics ------------------------------------------------------------------------
    def _actuated(self, actuated):
        if actuated is None:
            return self._actuated_default
        mask = np.asarray(actuated)
        if mask.dtype != bool:  # names or indices
            idx = [self.model.joint_index(x) if isinstance(x, str)
                   else int(x) for x in mask.ravel()]
            mask = np.zeros(self._nv, bool)
            mask[idx] = True
        if mask.shape != (self._nv,):
            raise InputError(f"actuated: expected {self._nv} booleans or a list of joint names, "
                             f"got shape {mask.shape}")
        return mask

    def inverse_dynamics(self, q, v, a) -> np.ndarray:
        """Actuation tau (nv,) of the consistent motion ``a`` (nv,): ``tau`` of
        :meth:`inverse_dynamics_result` with the defaults (the model's passive coordinates
        unactuated), the :class:`~multibody_dynamics.protocols.Dynamics` convention."""
        return self.inverse_dynamics_result(q, v, a).tau

    def mass_matrix(self, q) -> np.ndarray:
        """Joint-space mass matrix M(q) (nv, nv) of the spanning tree (``crba``)."""
        return self._rigid.mass_matrix(self._q(q))

    def energy(self, q, v) -> float:
        """Total mechanical energy T + V (gravity and springs) [J]; the closures do no work."""
        return self._rigid.energy(self._q(q), self._v(v, "v"))

    def inverse_dynamics_result(self, q, v, a, actuated=None, lam_d=None
                                ) -> InverseDynamicsResult:
        """Minimum-norm actuation of a consistent motion, with passive joints and force control.

        ``tau_par = P (M a + h - tau_s)`` (eq. 45) is the minimum-norm torque that
        produces ``a``.  With passive coordinates (``S`` = diag(actuated)),
        eqs. 59-62 add a constraint-space correction::

            N = (I - S)(I - P),   tau = [I - (I - P) N^+ (I - S)] tau_par,

        which zeroes the passive torques without changing the motion and keeps the
        norm minimal among admissible torques.  With a desired multiplier ``lam_d``
        (eq. 51, only without passive joints), ``tau = tau_par + (I-P)(M a + h - tau_s)
        - f_cd`` with ``f_cd = A^T lam_d``, so that the constraint force equals ``f_cd``.

        Parameters
        ----------
        q : (nq,); v : (nv,); a : (nv,) commanded accelerations, ``A a + gamma = 0``
        actuated : (nv,) bool or list of joint names, optional
            Default: every coordinate that is not a passive joint of the model.
        lam_d : (m,), optional
            Desired constraint multipliers [N | N m]; see :meth:`allocate_constraint_force`.
        """
        q, v, a = self._q(q), self._v(v, "v"), self._v(a, "a")
        S = self._actuated(actuated)
        A, gamma = self.constraints.jacobian_and_bias(q, v)
        s = self.settings
        proj = null_space_projector(A, s.rank_atol, s.rank_rtol)
        M = pin.crba(self._pm, self._data, q)
        b = M @ a + pin.nonLinearEffects(self._pm, self._data, q, v)
        if self._springs:
            b -= self._rigid.spring_forces(q, v)
        tau = proj.P @ b  # eq. 45
        residual = float(np.max(np.abs(A @ a + gamma))) if A.shape[0] else 0.0
        messages = []
        ok = True
        if residual > s.consistency_tol:
            ok = False
            messages.append("the commanded acceleration violates A a + gamma = 0 by "
                            f"{residual:.3g} (> consistency_tol {s.consistency_tol:g}); torques "
                            "only reproduce its admissible part")
        passive = ~S
        if lam_d is not None:
            if np.any(passive):
                raise InputError("lam_d: constraint-force allocation needs every coordinate "
                                 "actuated; pass actuated=[...] or use allocate_constraint_force")
            lam_d = as_vector(lam_d, A.shape[0], "lam_d")
            tau += b - proj.P @ b - A.T @ lam_d  # eq. 51: tau_perp = (I-P) b - f_cd
        elif np.any(passive):
            # eqs. 59-62 with (I-P) = V V^T:  N = E^T (E V) V^T, N^+ = V (E V)^+ E, where E selects
            # the passive rows, so the correction is V (E V)^+ tau_par[passive].
            B = proj.basis[passive]
            rank_b, Bp = _passive_rank(B)
            tau -= proj.basis @ (Bp @ tau[passive])
            if rank_b < passive.sum():
                ok = False
                messages.append(self._controllability_message(rank_b, passive, proj.rank))
        f_c = b - tau
        f_c -= proj.P @ f_c
        lam = proj.A_pinv.T @ f_c
        passive_res = float(np.max(np.abs(tau[passive]))) if np.any(passive) else 0.0
        if not np.all(np.isfinite(tau)):
            ok = False
            messages.append("non-finite torques")
        return InverseDynamicsResult(tau, f_c, lam, proj.rank, residual, passive_res, ok,
                                     "; ".join(messages) or "ok")

    def allocate_constraint_force(self, q, lam_d) -> tuple[np.ndarray, np.ndarray]:
        """Desired constraint force ``f_cd = A^T lam_d`` (Aghili 2005 Sect. 7.3) and the
        multipliers that realize it, ``(A^T)^+ f_cd``.

        The two multipliers differ when ``lam_d`` has a component in null(A^T)
        (redundant rows): that component produces no force.
        """
        q = self._q(q)
        A = self.constraints.jacobian(q)
        lam_d = as_vector(lam_d, A.shape[0], "lam_d")
        proj = null_space_projector(A, self.settings.rank_atol, self.settings.rank_rtol)
        f_cd = A.T @ lam_d
        return f_cd, proj.A_pinv.T @ f_cd

    def controllability(self, q, actuated=None) -> ControllabilityResult:
        """Aghili (2005) eq. 64: ``rank[(I - S)(I - P)] = n - k`` at configuration q.

        With k actuated among n coordinates, the n - k passive coordinates must be held
        by constraint forces alone; otherwise some admissible motions cannot be produced.
        """
        q = self._q(q)
        S = self._actuated(actuated)
        passive = ~S
        A = self.constraints.jacobian(q)
        proj = null_space_projector(A, self.settings.rank_atol, self.settings.rank_rtol)
        # rank (I-S)(I-P) = rank of E V, with (I-P) = V V^T and E selecting the passive rows
        rank = _passive_rank(proj.basis[passive])[0]
        need = int(passive.sum())
        names = tuple(n for n, p in zip(self.model.coordinate_names, passive) if p)
        if rank == need:
            msg = (f"controllable: the constraint forces can balance every passive joint "
                   f"({', '.join(names) or 'none'}); rank[(I-S)(I-P)] = {rank} = n - k")
            return ControllabilityResult(True, msg, rank, need, proj.rank, names)
        return ControllabilityResult(False,
                                     self._controllability_message(rank, passive, proj.rank),
                                     rank, need, proj.rank, names)

    def _controllability_message(self, rank, passive, constraint_rank):
        names = [n for n, p in zip(self.model.coordinate_names, passive) if p]
        need = len(names)
        dof = self._nv - constraint_rank
        return ("not controllable here (Aghili 2005 eq. 64): the constraints can hold only "
                f"{rank} of the {need} passive joint(s) ({', '.join(names)}), rank[(I-S)(I-P)] = "
                f"{rank} "
                f"< n - k = {need}. The mechanism has {dof} degree(s) of freedom but only "
                f"{self._nv - need} actuated joint(s) act on them; actuate {need - rank} more "
                "joint(s), or move away from a singular configuration")

    def collocated_inverse_dynamics(self, q, v, a) -> CollocatedInverseDynamicsResult:
        """Inputs of an underactuated closed loop that reproduce the measured acceleration of
        its actuated coordinates, the passive ones following their own dynamics.

        Where the model has more passive coordinates than independent constraint rows, the
        constraint forces cannot hold every passive joint (Aghili 2005 eq. 64 fails at every
        configuration: dual_arm_load, 7 passive coordinates, 3 rows), so no torque produces an
        arbitrary admissible ``a`` and :meth:`inverse_dynamics_result` reports failure.  The
        collocated reading (Spong's partial feedback linearization, on the constrained motion)
        is well posed instead: find the accelerations ``a*``, constraint force
        ``f_c = V mu`` and inputs ``u`` with::

            M a* - V mu - B u = tau_s - h          (equation of motion, Aghili 2005 eq. 19)
            V^T a* = -V^T A^+ gamma                (A a* + gamma = 0 on the row space of A)
            B^T a* = B^T a                         (the actuated part of the measured motion)

        with ``V`` an orthonormal basis of the row space of A (redundant rows removed as in
        eq. 70).  With ``W = [V, B]`` it is solved in Gauss's form,
        ``(W^T M^-1 W) z = c - W^T M^-1 (tau_s - h)``, ``a* = M^-1 (tau_s - h + W z)``, ``z =
        (mu, u)``; it has a unique solution when ``W`` has full column rank (``M`` positive
        definite).  For a motion the model produced, ``u`` is the input that produced it.

        Parameters
        ----------
        q : (nq,); v : (nv,) admissible velocity; a : (nv,) measured accelerations (only
            ``B^T a`` is used) [rad/s^2 | m/s^2]
        """
        q, v, a = self._q(q), self._v(v, "v"), self._v(a, "a")
        B = self.model.B
        A, gamma = self.constraints.jacobian_and_bias(q, v)
        s = self.settings
        proj = null_space_projector(A, s.rank_atol, s.rank_rtol)
        V = proj.basis
        W = np.column_stack([V, B])
        norms = np.linalg.norm(W, axis=0)
        sv = np.linalg.svd(W / np.where(norms > 0, norms, 1.0), compute_uv=False)
        sigma_min = float(sv[-1]) if sv.size and norms.all() else 0.0
        M, f = self._applied(q, v, np.zeros(self._nv))  # f = tau_s - h
        c = np.concatenate([-(V.T @ (proj.A_pinv @ gamma)), B.T @ a])
        nu, r = B.shape[1], proj.rank
        if sigma_min <= _PASSIVE_RANK_TOL:
            names = [self.model.input_names[k] for k in range(nu)]
            msg = (f"inputs ({', '.join(names)}) cannot move the actuated coordinates "
                   f"independently of the constraints here (sigma_min [V, B] = {sigma_min:.2g}); "
                   "singular configuration?")
            nan = np.full(self._nv, np.nan)
            return CollocatedInverseDynamicsResult(np.full(nu, np.nan), nan, nan, nan,
                                                   np.full(A.shape[0], np.nan), r, sigma_min,
                                                   False, msg)
        try:
            L = np.linalg.cholesky(M)
        except np.linalg.LinAlgError:
            raise SolverError(f"mass matrix not positive definite at q = "
                              f"{np.round(q, 6).tolist()}") from None
        X = np.linalg.solve(L, np.column_stack([f, W]))  # L^-1 [f, W]
        Xf, Xw = X[:, 0], X[:, 1:]
        z = np.linalg.solve(Xw.T @ Xw, c - Xw.T @ Xf)
        a_star = np.linalg.solve(L.T, Xf + Xw @ z)
        u = z[r:]
        f_c = V @ z[:r]
        tau = B @ u
        ok = bool(np.all(np.isfinite(tau)) and np.all(np.isfinite(a_star)))
        return CollocatedInverseDynamicsResult(u, tau, a_star, f_c, proj.A_pinv.T @ f_c, r,
                                               sigma_min, ok, "ok" if ok else "non-finite inputs")

    # -- manifold projection -------------------------------------------------------------------
    def project_position(self, q, tol: float | None = None,
                         max_iter: int | None = None) -> ManifoldProjectionResult:
        """Newton-Raphson projection onto phi(q) = 0: ``q <- q (-) A^+ phi`` (Sect. 6, eq. 39),
        until ``||phi||_inf < tol``, then once more if ``||A^+ phi||_inf`` is still at least
        :data:`NEWTON_STEP_FACTOR` ``* tol`` (q far off a manifold near a singular configuration).

        The step is applied through ``pin.integrate`` (the manifold) and uses the
        holonomic rows only (Pfaffian rows have no position residual); the minimum-norm
        step converges quadratically to a nearby point of the manifold.

        Parameters
        ----------
        q : (nq,) initial configuration
        tol : float, optional  stop when ``||phi||_inf < tol`` [m | rad]
        max_iter : int, optional
        """
        q = self._q(q).copy()
        s = self.settings
        tol = s.position_tol if tol is None else float(tol)
        max_iter = s.max_iter if max_iter is None else int(max_iter)
        c = self.constraints
        if c.n_holonomic == 0:
            return ManifoldProjectionResult(q, True, "no closure: nothing to project", 0, 0.0, 0)
        it = 0
        phi, A = c.residual_and_jacobian(q)
        err = float(np.max(np.abs(phi)))
        proj = null_space_projector(A, s.rank_atol, s.rank_rtol)
        polished = False  # one step more below tol when q is still far off (NEWTON_STEP_FACTOR)
        while it < max_iter and np.isfinite(err):
            dq = proj.A_pinv @ phi
            if err < tol:
                if polished or not np.max(np.abs(dq)) >= NEWTON_STEP_FACTOR * tol:
                    break
                polished = True
            q = pin.integrate(self._pm, q, -dq)
            it += 1
            phi, A = c.residual_and_jacobian(q)
            err = float(np.max(np.abs(phi)))
            proj = null_space_projector(A, s.rank_atol, s.rank_rtol)
        if err < tol:
            return ManifoldProjectionResult(q, True, f"converged in {it} iteration(s)", it, err,
                                            proj.rank)
        why = "diverged (non-finite residual)" if not np.isfinite(err) else \
            f"no convergence in {max_iter} iterations"
        return ManifoldProjectionResult(
            q, False, f"{why}: ||phi|| = {err:.3g} >= tol {tol:g}; start closer to an assembled "
            "configuration", it, err, proj.rank)

    def project_velocity(self, q, v, metric: str = "mass") -> np.ndarray:
        """The admissible velocity (nv,) closest to v: projection of v onto null(A(q)).

        Parameters
        ----------
        q : (nq,)
        v : (nv,) [rad/s | m/s]
        metric : str
            ``"mass"`` (default): the M-orthogonal projection, the admissible velocity of
            least kinetic energy of the difference, ``argmin ½ (w - v)^T M (w - v)`` subject
            to ``A w = 0``::

                w = v - M^-1 B (B^T M^-1 B)^-1 B^T v,

            with B an orthonormal basis of the row space of A (the rank decision of eq. 70,
            so redundant rows are harmless).  The change ``w - v = M^-1 A^T mu`` is a
            constraint impulse: ``T(w) = T(v) - ½ (v - w)^T M (v - w) <= T(v)`` (the kinetic
            energy never increases; it changes to second order in the violation ``A v``), and
            the momentum of a free-floating system is kept.  ``M^-1 B`` per
            ``settings.mass_solver`` (:func:`inverse_mass_product`).
            ``"euclidean"``: Aghili's ``w = P v`` (eq. 15), which changes the kinetic energy
            to first order in the violation: on the slider-crank crossing its singularity
            (RK4, 0.5 ms) it lost 1.4e-5 of the energy per crossing, the mass metric 1.2e-11.

        Returns
        -------
        w : (nv,) with ``A w = 0`` to round-off.
        """
        q, v = self._q(q), self._v(v, "v")
        if metric not in VELOCITY_METRICS:
            raise InputError(f"metric: expected one of {', '.join(VELOCITY_METRICS)}, got "
                             f"{metric!r}")
        A = self.constraints.jacobian(q)
        proj = null_space_projector(A, self.settings.rank_atol, self.settings.rank_rtol)
        if metric == "euclidean":
            return proj.P @ v
        B = proj.basis
        if B.shape[1] == 0:
            return v.copy()
        MiB = inverse_mass_product(self._pm, self._data, q, B, self.settings.mass_solver)
        return v - MiB @ _solve_spd(B.T @ MiB, B.T @ v)

    def projector(self, q) -> NullSpaceProjector:
        """P, A^+ and the rank of A at q (eq. 15 with the threshold of eq. 70)."""
        A = self.constraints.jacobian(self._q(q))
        return null_space_projector(A, self.settings.rank_atol, self.settings.rank_rtol)
