"""Loop-closure and contact constraints: residual phi(q), Jacobian A(q), bias gamma(q, v).

Every closure of the model YAML (:data:`~multibody_dynamics.model.config.CLOSURE_ROWS`)
joins a frame ``a`` to a frame ``b``.  With the placements ``oMa = (R_a, p_a)`` and
``oMb = (R_b, p_b)`` from pinocchio, the rows are of two kinds:

* **position rows** ``phi = w . R_b^T (p_a - p_b)`` [m]: the position of the origin of
  ``a`` relative to ``b``, resolved along a unit vector ``w`` fixed in ``b``;
* **rotation rows** [rad, to first order], built from dot products
  ``(R_a u) . (R_b w)`` of unit vectors ``u`` fixed in ``a`` and ``w`` fixed in ``b``:

  - "relative angle about ``w``" (weld, prismatic, planar types): with ``(t1, t2, w)`` a
    right-handed orthonormal triple, ``phi = 1/2 [(R_a t1).(R_b t2) - (R_a t2).(R_b t1)]``,
    i.e. ``w . vex(R - R^T) / 2`` with ``R = R_b^T R_a``: ``sin(theta)`` for a rotation by
    ``theta`` about ``w``, the rotation vector to first order;
  - "axis tilt" (revolute, axis ``k`` completed to a right-handed ``(n1, n2, k)``):
    ``phi = [-(R_a k).(R_b n2), (R_a k).(R_b n1)]``, the tilt of frame ``a``'s axis
    about ``n1`` and ``n2``; it does not depend on the free rotation about ``k``.

  This reading (rather than ``log3(R_b^T R_a)``) is chosen because its Jacobian and
  bias are exact, short closed forms everywhere, not only on the manifold; the price
  is spurious zeros at relative rotations of pi, far from any assembled configuration.

Conventions: ``axis`` and ``normal`` are given in frame ``b``; **the same coordinates
are used in frame** ``a`` (frames of a rotational closure are aligned when the
mechanism is assembled, as URDF joint frames are).  The planar types act in the
plane with normal ``normal`` (default z of ``b``).

Velocity and acceleration level: ``phi' = A(q) v`` and ``phi'' = A a + gamma`` with
``gamma = A'(q, v) v`` (the *bias*), so the constraint on accelerations reads
``A a + gamma = 0``.  Both are computed from frame Jacobians in
``LOCAL_WORLD_ALIGNED`` (world axes, frame origin) and from classical frame
accelerations of ``forwardKinematics(q, v, 0)``.

Non-integrable (Pfaffian) velocity constraints ``A_p(q) v = 0`` (rolling without
slipping) are added with :meth:`Constraints.add_pfaffian`; they contribute rows to
``A`` and ``gamma`` but none to the residual.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .errors import DimensionError, ModelError
from .model import MultibodyModel
from .model.config import CLOSURE_ROWS, ClosureSpec
from .validation import as_vector

_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
_ND, _F8 = np.ndarray, np.dtype(float)

#: A Pfaffian constraint: ``fn(q, v) -> (A_p, gamma_p)`` with ``A_p`` (rows, nv) and
#: ``gamma_p = A_p'(q, v) v`` (rows,).  ``v`` may be zero when only ``A_p`` is needed.
PfaffianFunction = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _complete_basis(k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors (n1, n2) with (n1, n2, k) right-handed orthonormal."""
    e = np.eye(3)[int(np.argmin(np.abs(k)))]  # the basis vector least aligned with k
    n1 = e - (e @ k) * k
    n1 /= np.linalg.norm(n1)
    return n1, np.cross(k, n1)


def _angle_row(w: np.ndarray):
    """Terms (coef, u in a, w in b) of the relative-angle row about unit ``w``."""
    t1, t2 = _complete_basis(w)
    return [(0.5, t1, t2), (-0.5, t2, t1)]


@dataclass(frozen=True)
class _Rows:
    """The rows of one closure, in a form evaluated with vector algebra."""

    pos_dirs: np.ndarray  # (kp, 3) unit vectors in b
    rot_coef: np.ndarray  # (nt,)
    rot_u: np.ndarray  # (3, nt) unit vectors in a
    rot_w: np.ndarray  # (3, nt) unit vectors in b
    rot_row: np.ndarray  # (nt,) row index (within the rotation rows) of each term
    n_rot: int
    labels: tuple[str, ...]


def closure_rows(spec: ClosureSpec) -> _Rows:
    """Directions and dot-product terms that define the rows of ``spec`` (module docstring)."""
    ctype = spec.type
    if ctype not in CLOSURE_ROWS:
        raise ModelError(f"closure {spec.name!r}: unknown type {ctype!r}; expected one of "
                         f"{', '.join(CLOSURE_ROWS)}")
    eye = np.eye(3)
    axis = None if spec.axis is None else np.asarray(spec.axis, float)
    normal = np.array(spec.normal if spec.normal is not None else (0.0, 0.0, 1.0), float)
    normal /= np.linalg.norm(normal)
    if axis is not None:
        axis = axis / np.linalg.norm(axis)
    if ctype in ("revolute", "prismatic", "planar_prismatic", "point_on_line") and axis is None:
        raise ModelError(f"closure {spec.name!r}: type {ctype!r} needs an axis")

    pos, pos_lab, terms, rot_lab = [], [], [], []
    if ctype in ("weld", "revolute", "spherical"):
        pos, pos_lab = list(eye), ["x", "y", "z"]
    elif ctype == "prismatic":
        n1, n2 = _complete_basis(axis)
        pos, pos_lab = [n1, n2], ["n1", "n2"]
    elif ctype == "point_on_plane":
        pos, pos_lab = [normal], ["n"]
    elif ctype in ("planar_weld", "planar_revolute"):
        t1, t2 = _complete_basis(normal)
        pos, pos_lab = [t1, t2], ["t1", "t2"]
    elif ctype in ("planar_prismatic", "point_on_line"):
        pos, pos_lab = [np.cross(normal, axis)], ["n"]

    if ctype in ("weld", "prismatic"):
        terms = [_angle_row(e) for e in eye]
        rot_lab = ["rx", "ry", "rz"]
    elif ctype == "revolute":
        n1, n2 = _complete_basis(axis)
        terms = [[(-1.0, axis, n2)], [(1.0, axis, n1)]]
        rot_lab = ["r1", "r2"]
    elif ctype in ("planar_weld", "planar_prismatic"):
        terms = [_angle_row(normal)]
        rot_lab = ["rn"]

    flat = [(i, c, u, w) for i, row in enumerate(terms) for c, u, w in row]
    rows = _Rows(
        pos_dirs=np.array(pos, float).reshape(-1, 3),
        rot_coef=np.array([t[1] for t in flat], float),
        rot_u=np.array([t[2] for t in flat], float).reshape(-1, 3).T.copy(),
        rot_w=np.array([t[3] for t in flat], float).reshape(-1, 3).T.copy(),
        rot_row=np.array([t[0] for t in flat], int),
        n_rot=len(terms),
        labels=tuple(f"{spec.name}.{s}" for s in pos_lab + rot_lab),
    )
    assert len(rows.labels) == CLOSURE_ROWS[ctype], (ctype, rows.labels)
    return rows


class _Closure:
    """One closure bound to a pinocchio model: frame ids and its rows as linear maps.

    Everything is evaluated in the axes of frame ``b`` with ``R = R_b^T R_a``,
    ``d = p_a - p_b`` and the relative angular velocity ``w_r = R_b^T (w_a - w_b)``:

    * position rows ``phi = D R_b^T d``; ``phi' = D R_b^T (v_a - v_b + d x w_b)``;
    * rotation rows ``phi = L_phi vec(R)``; with ``R' = [w_r]x R``, each term
      ``c w.R u`` has ``d/dt = c (R u x w) . w_r``, so ``phi' = G(R) w_r`` with ``G``
      linear in ``R`` (``vec(G) = L_g vec(R)``), and
      ``phi'' = G([w_r]x R) w_r + G(R) w_r'``, ``w_r' = R_b^T (w_a x w_b + alpha_a - alpha_b)``.
    """

    def __init__(self, spec: ClosureSpec, frame_id: Callable[[str], int]):
        self.spec = spec
        self.fa = frame_id(spec.frame_a)
        self.fb = frame_id(spec.frame_b)
        r = closure_rows(spec)
        self.labels = r.labels
        self.m = len(r.labels)
        self.kp = r.pos_dirs.shape[0]
        self.D = r.pos_dirs
        self.n_rot = r.n_rot
        if r.n_rot:
            self.L_phi = np.zeros((r.n_rot, 9))
            self.L_g = np.zeros((3 * r.n_rot, 9))
            # entry k = 3 i + j (vec of R, row-major) of a term c (w . R u): c w_i u_j in
            # L_phi; c u_j (e_i x w) in the three rows of L_g (d/dt of w . R u is
            # (R u x w) . w_r)
            for row, c, u, w in zip(r.rot_row, r.rot_coef, r.rot_u.T, r.rot_w.T):
                self.L_phi[row] += c * np.outer(w, u).ravel()
                ew = np.cross(np.eye(3), w)  # row i: e_i x w
                self.L_g[3 * row:3 * row + 3] += c * np.einsum("ia,j->aij", ew, u).reshape(3, 9)

    def _G(self, R):
        return (self.L_g @ R.ravel()).reshape(self.n_rot, 3)

    def residual(self, oMa: pin.SE3, oMb: pin.SE3, out: np.ndarray):
        Rb = oMb.rotation
        if self.kp:
            out[: self.kp] = self.D @ (Rb.T @ (oMa.translation - oMb.translation))
        if self.n_rot:
            out[self.kp:] = self.L_phi @ (Rb.T @ oMa.rotation).ravel()

    def jacobian(self, oMa, oMb, Ja, Jb, out: np.ndarray):
        """Rows of A, the exact time derivative of the residual, into ``out`` (m, nv)."""
        Rbt = oMb.rotation.T
        if self.kp:
            d = oMa.translation - oMb.translation
            out[: self.kp] = (self.D @ Rbt) @ (Ja[:3] - Jb[:3] + pin.skew(d) @ Jb[3:])
        if self.n_rot:
            out[self.kp:] = self._G(Rbt @ oMa.rotation) @ (Rbt @ (Ja[3:] - Jb[3:]))

    def bias(self, oMa, oMb, va, vb, aa, ab, out: np.ndarray):
        """gamma = A' v from LWA frame velocities ``va``, ``vb`` (6,) [linear; angular] and
        classical accelerations at a = 0, ``aa``, ``ab`` (6,), into ``out`` (m,)."""
        Rbt = oMb.rotation.T
        wb = vb[3:]
        if self.kp:
            d = oMa.translation - oMb.translation
            u = va[:3] - vb[:3]
            Swb = pin.skew(wb)
            # r'' = R_b^T (u' - 2 w_b x u - w_b x (d x w_b) + d x alpha_b), u' = a_a - a_b at a = 0
            acc = aa[:3] - ab[:3] - 2.0 * (Swb @ u) + Swb @ (Swb @ d) + pin.skew(d) @ ab[3:]
            out[: self.kp] = self.D @ (Rbt @ acc)
        if self.n_rot:
            wa = va[3:]
            R = Rbt @ oMa.rotation
            wr = Rbt @ (wa - wb)
            wr_dot = Rbt @ (pin.skew(wa) @ wb + aa[3:] - ab[3:])
            out[self.kp:] = self._G(pin.skew(wr) @ R) @ wr + self._G(R) @ wr_dot


@dataclass(frozen=True)
class _Pfaffian:
    name: str
    rows: int
    fn: PfaffianFunction
    labels: tuple[str, ...]


class Constraints:
    """All closures of a model, stacked: ``phi(q)``, ``A(q)`` and ``gamma(q, v)``.

    Rows are ordered as the closures of the model (holonomic rows first, see
    :attr:`labels`), followed by the Pfaffian rows added with :meth:`add_pfaffian`.
    The object owns one pinocchio ``Data``: create one per thread.

    Parameters
    ----------
    model : MultibodyModel
    closures : sequence of ClosureSpec, optional
        Closures to use instead of ``model.closures`` (e.g. to study one closure type).

    Examples
    --------
    >>> from multibody_dynamics import load_model
    >>> c = Constraints(load_model("slider_crank"))
    >>> c.labels
    ('slider.n',)
    """

    def __init__(self, model: MultibodyModel, closures=None):
        self.model = model
        self._pm = model.pin_model
        self._data = self._pm.createData()
        self._nq, self._nv = model.nq, model.nv
        specs = tuple(model.closures if closures is None else closures)
        self._closures = [_Closure(s, model.frame_id) for s in specs]
        self._offsets = np.cumsum([0] + [c.m for c in self._closures])
        self._frames = sorted({c.fa for c in self._closures} | {c.fb for c in self._closures})
        slot = {f: i for i, f in enumerate(self._frames)}
        # (closure, row offset, slot of frame a, slot of frame b): the per-call loop
        self._plan = [(c, int(o), slot[c.fa], slot[c.fb])
                      for c, o in zip(self._closures, self._offsets)]
        self._pfaffian: list[_Pfaffian] = []
        self._zero_v = np.zeros(self._nv)

    # -- sizes and labels -------------------------------------------------------------
    @property
    def closures(self) -> tuple[ClosureSpec, ...]:
        return tuple(c.spec for c in self._closures)

    @property
    def n_holonomic(self) -> int:
        """Number of rows with a position residual (the closures)."""
        return int(self._offsets[-1])

    @property
    def n_rows(self) -> int:
        """Total number of rows m of ``A`` (closures and Pfaffian constraints)."""
        return self.n_holonomic + sum(p.rows for p in self._pfaffian)

    @property
    def labels(self) -> tuple[str, ...]:
        """One label per row, ``<closure>.<direction>`` (x, y, z, n, t1, rx, r1, ...)."""
        out = [lab for c in self._closures for lab in c.labels]
        return tuple(out + [lab for p in self._pfaffian for lab in p.labels])

    @property
    def data(self) -> pin.Data:
        return self._data

    def add_pfaffian(self, name: str, rows: int, fn: PfaffianFunction, labels=None) -> None:
        """Add a velocity constraint ``A_p(q) v = 0`` that need not be integrable.

        Parameters
        ----------
        name : str
            Used in the row labels.
        rows : int
            Number of rows of ``A_p``.
        fn : callable ``fn(q, v) -> (A_p, gamma_p)``
            ``A_p`` (rows, nv) and ``gamma_p = A_p'(q, v) v`` (rows,) [same units as
            ``A_p v`` per second], so that ``A_p a + gamma_p = 0`` on acceleration
            level.  ``v`` is zero when only ``A_p`` is requested.
        labels : sequence of str, optional
            One per row (default ``<name>.0``, ``<name>.1``, ...).
        """
        if not isinstance(rows, (int, np.integer)) or rows < 1:
            raise DimensionError(f"pfaffian {name!r}: rows: expected a positive integer, got "
                                 f"{rows!r}")
        if not callable(fn):
            raise DimensionError(f"pfaffian {name!r}: fn: expected a callable "
                                 "fn(q, v) -> (A, gamma)")
        labels = tuple(f"{name}.{i}" for i in range(rows)) if labels is None else tuple(labels)
        if len(labels) != rows:
            raise DimensionError(f"pfaffian {name!r}: labels: expected {rows} labels, got "
                                 f"{len(labels)}")
        self._pfaffian.append(_Pfaffian(name, int(rows), fn, labels))

    # -- argument checks ---------------------------------------------------------------
    def _q(self, q):
        if q.__class__ is _ND and q.dtype is _F8 and q.shape == (self._nq,):
            return q
        return as_vector(q, self._nq, "q")

    def _v(self, v):
        if v.__class__ is _ND and v.dtype is _F8 and v.shape == (self._nv,):
            return v
        return as_vector(v, self._nv, "v")

    def _placements(self):
        pm, data = self._pm, self._data
        return [pin.updateFramePlacement(pm, data, f) for f in self._frames]

    # -- public evaluation ---------------------------------------------------------------
    def residual(self, q) -> np.ndarray:
        """Closure residual phi(q), (n_holonomic,) [m | rad]; zero on the manifold."""
        q = self._q(q)
        pin.forwardKinematics(self._pm, self._data, q)
        oMf = self._placements()
        out = np.empty(self.n_holonomic)
        for c, o, ia, ib in self._plan:
            c.residual(oMf[ia], oMf[ib], out[o:o + c.m])
        return out

    def jacobian(self, q) -> np.ndarray:
        """Constraint Jacobian A(q), (n_rows, nv): ``phi' = A v`` (Pfaffian rows included)."""
        q = self._q(q)
        pin.computeJointJacobians(self._pm, self._data, q)
        A = np.empty((self.n_rows, self._nv))
        self._fill_jacobian(A)
        if self._pfaffian:
            self._fill_pfaffian(q, self._zero_v, A, None)
        return A

    def bias(self, q, v) -> np.ndarray:
        """gamma = A'(q, v) v, (n_rows,), so that ``A a + gamma = 0`` [m/s^2 | rad/s^2]."""
        q, v = self._q(q), self._v(v)
        pin.forwardKinematics(self._pm, self._data, q, v, self._zero_v)
        gamma = np.empty(self.n_rows)
        self._fill_bias(gamma)
        if self._pfaffian:
            self._fill_pfaffian(q, v, None, gamma)
        return gamma

    def jacobian_and_bias(self, q, v) -> tuple[np.ndarray, np.ndarray]:
        """``(A, gamma)`` from a single kinematics pass (what the dynamics need)."""
        q, v = self._q(q), self._v(v)
        pm, data = self._pm, self._data
        pin.forwardKinematics(pm, data, q, v, self._zero_v)
        pin.computeJointJacobians(pm, data)
        A = np.empty((self.n_rows, self._nv))
        gamma = np.empty(self.n_rows)
        oMf = self._fill_jacobian(A)
        self._fill_bias(gamma, oMf)
        if self._pfaffian:
            self._fill_pfaffian(q, v, A, gamma)
        return A, gamma

    def holonomic_jacobian(self, q) -> np.ndarray:
        """Rows of A that belong to the residual, (n_holonomic, nv) (for Newton on phi)."""
        q = self._q(q)
        pin.computeJointJacobians(self._pm, self._data, q)
        A = np.empty((self.n_holonomic, self._nv))
        self._fill_jacobian(A)
        return A

    def residual_and_jacobian(self, q) -> tuple[np.ndarray, np.ndarray]:
        """``(phi, A_h)`` of the holonomic rows from one kinematics pass."""
        q = self._q(q)
        pin.computeJointJacobians(self._pm, self._data, q)
        A = np.empty((self.n_holonomic, self._nv))
        oMf = self._fill_jacobian(A)
        phi = np.empty(self.n_holonomic)
        for c, o, ia, ib in self._plan:
            c.residual(oMf[ia], oMf[ib], phi[o:o + c.m])
        return phi, A

    # -- internals ---------------------------------------------------------------------
    def _fill_jacobian(self, A):
        pm, data = self._pm, self._data
        oMf = self._placements()
        jac = [pin.getFrameJacobian(pm, data, f, _LWA) for f in self._frames]
        for c, o, ia, ib in self._plan:
            c.jacobian(oMf[ia], oMf[ib], jac[ia], jac[ib], A[o:o + c.m])
        return oMf

    def _fill_bias(self, gamma, oMf=None):
        pm, data = self._pm, self._data
        if oMf is None:
            oMf = self._placements()
        vel = [pin.getFrameVelocity(pm, data, f, _LWA).vector for f in self._frames]
        acc = [pin.getFrameClassicalAcceleration(pm, data, f, _LWA).vector for f in self._frames]
        for c, o, ia, ib in self._plan:
            c.bias(oMf[ia], oMf[ib], vel[ia], vel[ib], acc[ia], acc[ib], gamma[o:o + c.m])

    def _fill_pfaffian(self, q, v, A, gamma):
        o = self.n_holonomic
        for p in self._pfaffian:
            Ap, gp = p.fn(q, v)
            Ap = np.asarray(Ap, float)
            if Ap.shape != (p.rows, self._nv):
                raise DimensionError(f"pfaffian {p.name!r}: fn returned A of shape {Ap.shape}; "
                                     f"expected ({p.rows}, {self._nv})")
            if A is not None:
                A[o:o + p.rows] = Ap
            if gamma is not None:
                gamma[o:o + p.rows] = as_vector(gp, p.rows, f"pfaffian {p.name!r} gamma")
            o += p.rows
