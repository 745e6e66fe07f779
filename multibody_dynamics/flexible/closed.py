"""Planar flexible multibody systems with kinematic loops (Seifried 2014, Sect. 2.2.5, 6.5).

Closed-loop system
------------------
A loop is cut at a joint; the cut system is a :class:`~.system.FlexibleChain` (tree, relative
coordinates ``q = [q_r; q_e]``) and the cut joint becomes ``n_c`` loop-closing constraints
``c(q) = 0`` (Seifried eq. 2.42). :class:`PlanarClosure` describes one cut revolute joint: the
point ``a`` (a node of a flexible body, the distal point of a rigid one) coincides with point
``b`` of another body or with a fixed world point (2 rows, [m]); optionally the two frames keep
a constant relative angle (1 row, [rad]; a cut weld). With ``r, J, bias`` of a point (the
formulas of :meth:`FlexibleChain.point_kinematics`) and the angle ``theta_i + Psi_k q_e`` of a
node (body angle plus elastic slope)::

    c     = r_a - r_b                      (2.42)
    C     = dc/dq = J_a - J_b              (2.45), (nc, nv)
    c_tt  = C' v = bias_a - bias_b         (2.44): C a + c_tt = 0

Forward dynamics: the index-1 form (2.51) with Lagrange multipliers, optionally with
Baumgarte terms (``C a = -c_tt - 2 alpha C v - beta^2 c``)::

    [ M  -C^T ] [a]   [g - k - f_e + B u]
    [ C   0   ] [λ] = [-c_tt            ]

For simulation the positions and velocities are projected back on the constraint manifold
after every output step (Newton ``q <- q - C^+ c``, Aghili 2005 eq. 39; ``v <- v - C^+ C v``).

Coordinate partitioning (Seifried eqs. 2.144-2.159). With independent rigid coordinates
``q_i``, dependent ones ``q_d`` (``C_d`` regular) and the elastic ones ``q_e``::

    T_i = -C_d^-1 C_i,  T_e = -C_d^-1 C_e                        (2.147)
    J̄ = [[I, 0], [T_i, T_e], [0, I]],   γ = [0; -C_d^-1 c_tt; 0]   (2.148), (2.149)
    M̄ = J̄^T M J̄,  k̄ = J̄^T (k + M γ),  ḡ = J̄^T g,  B̄̄ = J̄^T B      (2.150)-(2.159)

Reading of the damaged print: the "2 M_id T_i" of (2.151)/(2.153) stands for
``M_id T_i + T_i^T M_id^T``; computing the products ``J̄^T M J̄`` directly avoids the question.
``f_e = [0; K_e q_e + D_e q_e']`` has non-zero rows only where ``J̄`` is the identity, hence
``J̄^T f_e = f_e`` restricted to ``[q_i; q_e]``: K_ee and D_ee are unchanged (the book's remark),
while the input matrix ``B̄̄_e = T_e^T B_d`` (2.159) fills as soon as a dependent coordinate is
actuated (the machine tool's second cart).

Parallel flexible machine tool (Sect. 6.5)
------------------------------------------
The lambda machine of Fig. 6.10 is data: ``config/robots/flexible_parallel_tool.yaml`` (the
numbers the book gives and the choices made here, its cut joint under ``closures:``, its
outputs under ``outputs:``, the changes studies make under ``parameters:``), loaded by
``load_robot("flexible_parallel_tool", parameters={"modes_long": 3, ...})``. Its outputs
``y = H_r q_r + Γ q_e`` (``ClosedFlexibleChain.outputs``: the book's linearly combined output
(6.39), or the collocated/rigid outputs with ``Γ = 0``) follow the rule of
:func:`~multibody_dynamics.flexible.output.chord_output`. Its inverse model
(``ClosedOutputServo``), the feedforward (``invert_closed``: classical or stable inversion),
the tracking simulation (``track_closed``), the test motion (``PARALLEL_TOOL_TASK``), its
rigid task path (``rigid_task_path``) and the tool error (``point_error``) are control and
live in :mod:`multibody_control.inversion.closed_flexible`. The former names of this module
(``flexible_parallel_tool``, ``parallel_tool_outputs``, ``PARALLEL_TOOL_OVERRIDES``,
``PARALLEL_TOOL_TASK``, ``rigid_task_path``, ``point_error``) still work with a
DeprecationWarning naming the new place; the moved ones are the objects of
``multibody_control``, imported only when an old name is used
(:func:`~multibody_dynamics.deprecation.forwarded`).

Results with the shipped parameters (``bench/bench_flexible_parallel.py``; tool point moved by
(+0.1, -0.1) m in 1 s from the 45 deg pose, the book's Fig. 6.11 being a plot only):

* zero dynamics, combined output (6.39): 36 eigenvalues (2 x 18 elastic coordinates, as the
  book's 7 + 29), **30 stable and 6 unstable** (real 49.7 and 378 1/s, two complex pairs near
  1350 +- 670j and 1880 +- 2430j 1/s): non-minimum phase as in the book, but not its split
  "7 stable / 29 unstable". Without damping our spectrum is 2 real pairs, 2 complex quadruplets
  and 12 imaginary pairs (modes that Γ does not touch, e.g. all short-arm modes); light
  Rayleigh damping moves the imaginary pairs to the left. The book's split needs most
  oscillatory zeros in the right half plane, which no positive damping gives; with the labels
  swapped (29 stable / 7 unstable) it is the split of our POD model (next item). The split is
  the same for every damping tried and for a tangent frame.
* POD shape functions (``bench/study_parallel_tool_pod.py``,
  :mod:`~multibody_dynamics.flexible.pod`, ``shape_vectors`` of
  :func:`~multibody_dynamics.flexible.loader.load_flexible_model`): 12 + 6 POD shapes from
  1 ms snapshots of the arms' deformation in a 24 + 12 bending-eigenmode simulation of the
  bench motion (the machine driven by the collocated feedforward), mass-weighted or
  Euclidean SVD: **29 stable / 7
  unstable** (a third unstable real zero near 3800 1/s); undamped 7 stable, 7 unstable, 22 on
  the imaginary axis. These are the book's counts with "left" and "right" swapped (as in its
  (3.86)), or its 7 "left" if the 22 undamped imaginary eigenvalues were counted as "right";
  no variant with positive damping has 29 unstable. The 7th pair hangs on the weakest
  long-arm POD shape (σ_12/σ_1 = 3e-11, mostly the 13th bending eigenmode: eigenmodes 1-11
  and 13 give the same split, ``test/test_flexible_pod.py``). Snapshot models with 20 + 10 or
  32 + 16 modes and a tighter integration give 29 / 7 as well; the under-resolved 16 + 8
  snapshot model, 11 long-arm shapes or POD on the short arm only give 30 / 6, and eigenmode
  models with more shapes have more unstable zeros (16 + 8: 40 / 8, 24 + 12: 60 / 12). The shape
  functions thus explain the count 7 (and 29 under the swap), not 29 unstable zeros. Tool
  errors of the POD model: 12.9 mm and 0.022 mm, as with eigenmodes (below).
* collocated output ``[s1, s2]`` and the book's "collocated" ``y = q_i = [s1, alpha]``
  (Γ = 0): all 36 eigenvalues stable (bounded internal dynamics, as the book says); the two
  have the same linearisation here because an elastic deflection of the short arm moves the
  cut joint across the arm, which beta absorbs at first order.
* tool-point error: classical inversion with ``y = [s1, alpha]`` 12.9 mm (book: about 12 mm);
  stable inversion with the combined output 0.022 mm (book: about 0.03 mm), the output itself
  reproduced to 1e-16.
* the input matrix: with bending-only eigenmodes, the chord frame and the tangent frame,
  ``B̄̄_e = T_e^T B_d`` vanishes at ``q_e = 0`` (it fills for other mechanisms, see the tests);
  the book states ``B̄_e != 0`` for its POD model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from scipy.integrate import solve_ivp

from ..deprecation import module_getattr
from ..errors import DimensionError, InputError, ModelError, SolverError
from ..interruptible import INTERRUPTS, reraise_unless_interrupt, solve_ivp_keeping
from ..model.config import YamlChecker

# re-exported for the imports written before the segmented arms moved to .segmented
from .segmented import ArmSegment as ArmSegment
from .segmented import LumpedMass as LumpedMass
from .segmented import segmented_arm_modal_data as segmented_arm_modal_data
from .simulation import ClosedSimulation
from .system import FlexibleChain, FlexibleChainConfig, _vector

__all__ = ["PlanarClosure", "ClosedFlexibleChain", "ClosedForwardDynamicsResult",
           "ClosedSimulation"]

# ============================================================================ closure rows
@dataclass(frozen=True)
class PlanarClosure:
    """One cut joint of a planar loop: point ``a`` coincides with point ``b`` (or the world).

    Parameters
    ----------
    name : str
        Name of the cut joint (for messages).
    body_a : str
        Body carrying point a.
    node_a : int or None
        Node of ``body_a``'s modal data (flexible bodies); ``None``: its distal point/node.
    body_b : str or None
        Body carrying point b; ``None``: point b is fixed in the world at ``point_b``.
    node_b : int or None
        As ``node_a`` for ``body_b``.
    point_b : tuple of float
        World point (2,) [m] when ``body_b`` is None.
    angle : bool
        Also keep the relative angle fixed (cut weld: 3 rows); default False (revolute, 2 rows).
    angle_offset : float
        Required ``(theta_a + psi_a) - (theta_b + psi_b)`` [rad] for the angle row (``theta_b +
        psi_b = 0`` for the world).
    """

    name: str
    body_a: str
    node_a: int | None = None
    body_b: str | None = None
    node_b: int | None = None
    point_b: tuple[float, float] = (0.0, 0.0)
    angle: bool = False
    angle_offset: float = 0.0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"closure name must be a non-empty string, got {self.name!r}")
        p = np.asarray(self.point_b, float)
        if p.shape != (2,) or not np.all(np.isfinite(p)):
            raise InputError(f"closure {self.name!r}: point_b must be 2 finite numbers [m], "
                             f"got {self.point_b!r}")
        object.__setattr__(self, "point_b", (float(p[0]), float(p[1])))
        if not np.isfinite(float(self.angle_offset)):
            raise InputError(f"closure {self.name!r}: angle_offset must be finite [rad]")

    @property
    def rows(self) -> int:
        """Number of constraint rows (2 or 3)."""
        return 3 if self.angle else 2


@dataclass(frozen=True)
class ClosedForwardDynamicsResult:
    """Forward dynamics of a closed flexible chain
    (:meth:`ClosedFlexibleChain.forward_dynamics_result`).

    Attributes
    ----------
    a : (nv,)  accelerations [m/s^2 | rad/s^2 | modal]
    lam : (nc,)  multipliers λ of (2.51) [N | N m]
    f_c : (nv,)  generalized cut-joint reaction ``C^T λ``:
        ``M a + k + f_e = g + tau + B u + f_c``
    residual : float  ``max |C a - rhs|`` of the constraint rows (the bias and Baumgarte terms
        on the right-hand side) [m/s^2 | rad/s^2]
    """

    a: np.ndarray
    lam: np.ndarray
    f_c: np.ndarray
    residual: float


class ClosedFlexibleChain:
    """A :class:`FlexibleChain` spanning tree closed by :class:`PlanarClosure` constraints.

    Parameters
    ----------
    chain : FlexibleChain
        The system with cut loops (tree); ``q = [q_r; q_e]`` as there.
    closures : sequence of PlanarClosure
    actuated : sequence of str, optional
        Joints driven by a motor force/torque; the input matrix ``B`` (nv, nu) has a unit
        column per actuated joint (collocated drives on the tree, Seifried remark after
        2.143). Default: every joint (the chain's ``B``).
    independent : sequence of str, optional
        Independent rigid coordinates ``q_i`` of the coordinate partitioning (2.144),
        ``nq_r - nc`` joint names; the other ``nc`` joints are ``q_d``. Default: chosen at the
        neutral configuration by a pivoted QR of ``C_r`` (a well-conditioned ``C_d``).
    name, description, source : str, optional
        Model name, one line, and where the data come from (defaults: the chain's).
    outputs : mapping, optional
        Named outputs ``y = H_r q_r + Γ q_e`` of the inverse models, ``{name: (H_r, Γ)}``
        with ``H_r`` (nu, nq_r) and ``Γ`` (nu, nq_e) (one row per input); a model file's
        ``outputs:`` (:func:`~multibody_dynamics.flexible.output.chord_output`). Default none.

    Attributes
    ----------
    nv, nq, nq_r, nq_e : int
        As the tree (the loops remove degrees of freedom, not coordinates).
    nc : int
        Number of constraint rows. ``dof = nv - nc`` degrees of freedom.
    nu : int; B : (nv, nu)
    idx_i, idx_d : ndarray of int
        Positions of q_i and q_d in q. ``idx_min = [idx_i, elastic]``: the minimal coordinates.
    outputs : dict
        ``{name: (H_r, Γ)}`` (read-only arrays), as given.
    """

    def __init__(self, chain: FlexibleChain, closures: Sequence[PlanarClosure],  # noqa: C901
                 actuated: Sequence[str] | None = None, independent: Sequence[str] | None = None,
                 name: str | None = None, description: str | None = None,
                 source: str | None = None,
                 outputs: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None):
        if not isinstance(chain, FlexibleChain):
            raise InputError(f"chain must be a FlexibleChain, got {type(chain).__name__}")
        closures = tuple(closures)
        if not closures or not all(isinstance(c, PlanarClosure) for c in closures):
            raise InputError("closures must be a non-empty sequence of PlanarClosure")
        self.chain = chain
        cfg = chain.config
        self.name = cfg.name if name is None else str(name)
        self.description = cfg.description if description is None else str(description)
        self.source = cfg.source if source is None else str(source)
        names = [b.name for b in chain.bodies]
        spec = []
        for c in closures:
            ends = []
            for body, node, key in ((c.body_a, c.node_a, "body_a"),
                                    (c.body_b, c.node_b, "body_b")):
                if body is None:
                    if key == "body_a":
                        raise ModelError(f"{self.name}: closure {c.name!r}: body_a is required")
                    ends.append(None)
                    continue
                if body not in names:
                    raise ModelError(f"{self.name}: closure {c.name!r}: {key} {body!r} is not a "
                                     f"body; bodies: {names}")
                i = names.index(body)
                b = chain.bodies[i]
                if b.flexible:
                    nn = b.modal_data.node_positions.shape[0]
                    k = b.distal_node if node is None else int(node)
                    if not -nn <= k < nn:
                        raise ModelError(f"{self.name}: closure {c.name!r}: node {k} of {body!r} "
                                         f"out of range [-{nn}, {nn})")
                    ends.append((i, k % nn))
                else:
                    if node is not None:
                        raise ModelError(f"{self.name}: closure {c.name!r}: {body!r} is rigid; "
                                         "its closure point is its distal point (node must be "
                                         f"None, got {node})")
                    ends.append((i, None))
            spec.append((ends[0], ends[1], np.array(c.point_b), c.angle, float(c.angle_offset)))
        self.closures = closures
        self._spec = spec
        self.nc = sum(c.rows for c in closures)
        self.nv = self.nq = chain.nv
        self.nq_r, self.nq_e = chain.nq_r, chain.nq_e
        self.joint_names = chain.joint_names
        self.coordinate_names = chain.coordinate_names
        if self.nc >= self.nq_r:
            raise ModelError(f"{self.name}: {self.nc} closure rows leave no rigid degree of "
                             f"freedom ({self.nq_r} joints)")
        if actuated is None:
            actuated = self.joint_names
        actuated = tuple(actuated)
        bad = [a for a in actuated if a not in self.joint_names]
        if bad or not actuated or len(set(actuated)) != len(actuated):
            raise ModelError(f"{self.name}: actuated must name distinct joints of "
                             f"{list(self.joint_names)}, got {list(actuated)}")
        self.actuated = actuated
        self.nu = len(actuated)
        self.B = np.zeros((self.nv, self.nu))
        for j, a in enumerate(actuated):
            self.B[self.joint_names.index(a), j] = 1.0
        self.B.setflags(write=False)
        if independent is None:
            Cr = self.constraint_jacobian(np.zeros(self.nv))[:, :self.nq_r]
            _, _, piv = scipy.linalg.qr(Cr, pivoting=True)
            dep = sorted(piv[:self.nc].tolist())
            independent = [self.joint_names[k] for k in range(self.nq_r) if k not in dep]
        independent = tuple(independent)
        if (len(independent) != self.nq_r - self.nc or len(set(independent)) != len(independent)
                or any(n not in self.joint_names for n in independent)):
            raise ModelError(f"{self.name}: independent must name {self.nq_r - self.nc} distinct "
                             f"joints of {list(self.joint_names)}, got {list(independent)}")
        self.independent = independent
        self.idx_i = np.array([self.joint_names.index(n) for n in independent], dtype=int)
        self.idx_d = np.array([k for k in range(self.nq_r) if k not in self.idx_i], dtype=int)
        self.idx_e = np.arange(self.nq_r, self.nv)
        self.idx_min = np.concatenate([self.idx_i, self.idx_e])
        self.outputs = self._checked_outputs(outputs or {})

    def _checked_outputs(self, outputs) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Read-only ``(H_r, Γ)`` copies of ``outputs`` with the shapes checked."""
        checked = {}
        for key, pair in outputs.items():
            if not isinstance(key, str) or not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise InputError(f"{self.name}: outputs must map names to (H_r, gamma) pairs, got "
                                 f"{key!r}: {type(pair).__name__}")
            H, g = (np.array(x, dtype=float) for x in pair)
            if H.shape != (self.nu, self.nq_r) or g.shape != (self.nu, self.nq_e):
                raise DimensionError(f"{self.name}: output {key!r}: expected H_r ({self.nu}, "
                                     f"{self.nq_r}) and gamma ({self.nu}, {self.nq_e}) (one row "
                                     f"per input), got {H.shape} and {g.shape}")
            H.setflags(write=False)
            g.setflags(write=False)
            checked[key] = (H, g)
        return checked

    # -- interface shared with FlexibleChain (loaders, CLI) -------------------------------
    @property
    def config(self) -> FlexibleChainConfig:
        """The tree's configuration (bodies, gravity, ``rigid_counterpart``)."""
        return self.chain.config

    def neutral(self) -> np.ndarray:
        """The tree's zero configuration q (nq,); like a rigid model's neutral configuration
        it need not close the loops (:meth:`project_position` assembles it)."""
        return self.chain.neutral()

    @property
    def input_names(self) -> tuple[str, ...]:
        """The actuated joints, in the order of ``u``."""
        return self.actuated

    @property
    def dof(self) -> int:
        """Degrees of freedom ``nv - nc``."""
        return self.nv - self.nc

    def summary(self) -> str:
        """Human-readable description: the tree, the cut joints, inputs and partitioning."""
        lines = [f"{self.name}: {self.description}" if self.description else self.name]
        if self.source:
            lines.append(f"  source: {self.source}")
        tree = self.chain.summary().splitlines() if hasattr(self.chain, "summary") else []
        lines += [f"  tree: {line.strip()}" for line in tree[1:] if not line.strip().startswith(
            "source:")]
        for c in self.closures:
            other = "world point " + str(list(c.point_b)) if c.body_b is None else \
                f"{c.body_b} node {c.node_b if c.node_b is not None else 'distal'}"
            lines.append(f"  cut joint {c.name!r}: {c.body_a} node "
                         f"{c.node_a if c.node_a is not None else 'distal'} = {other}"
                         f"{' (with angle)' if c.angle else ''}")
        lines.append(f"  {self.nc} closure rows, {self.dof} degrees of freedom; inputs: "
                     f"{', '.join(self.actuated)}; independent: {', '.join(self.independent)}")
        return "\n".join(lines)

    def _vec(self, x, name, n=None):
        return _vector(x, self.nv if n is None else n, name, finite=True)

    # -- constraint rows -----------------------------------------------------------------
    def _point(self, kin, end, q, v):
        """Position, J (2, nv), bias, angle, angle row (nv,), angle bias of a closure point."""
        i, node = end
        return self.chain._point_terms(kin, i, node, q, v)

    def constraint_terms(self, q, v=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Residual ``c`` (nc,) [m | rad], Jacobian ``C`` (nc, nv) and bias ``c_tt = C' v`` (nc,).

        Parameters
        ----------
        q, v : array_like, shape (nv,)
            Tree coordinates and velocities (``v`` default zero).
        """
        q = self._vec(q, "q")
        v = np.zeros(self.nv) if v is None else self._vec(v, "v")
        kin = self.chain._kinematics(q, v)
        c = np.empty(self.nc)
        C = np.empty((self.nc, self.nv))
        bias = np.empty(self.nc)
        row = 0
        for end_a, end_b, point_b, angle, offset in self._spec:
            ra, Ja, ba, tha, Jta, bta = self._point(kin, end_a, q, v)
            if end_b is None:
                rb, Jb, bb, thb, Jtb, btb = point_b, 0.0, 0.0, 0.0, 0.0, 0.0
            else:
                rb, Jb, bb, thb, Jtb, btb = self._point(kin, end_b, q, v)
            c[row:row + 2] = ra - rb
            C[row:row + 2] = Ja - Jb
            bias[row:row + 2] = ba - bb
            row += 2
            if angle:
                c[row] = tha - thb - offset
                C[row] = Jta - Jtb
                bias[row] = bta - btb  # node slopes are linear in q_e: no bias of their own
                row += 1
        return c, C, bias

    def constraint_residual(self, q) -> np.ndarray:
        """Loop-closing residual ``c(q)`` (nc,) [m | rad] (Seifried eq. 2.42)."""
        return self.constraint_terms(q)[0]

    def constraint_jacobian(self, q) -> np.ndarray:
        """``C = dc/dq`` (nc, nv) (eq. 2.45)."""
        return self.constraint_terms(q)[1]

    # -- dynamics ------------------------------------------------------------------------
    def forward_dynamics(self, q, v, u=None, tau=None, baumgarte: tuple[float, float] = (0.0, 0.0)
                         ) -> np.ndarray:
        """Accelerations ``a`` (nv,) of the closed system from the index-1 form (2.51): the
        :class:`~multibody_dynamics.protocols.Dynamics` convention.  The multipliers:
        :meth:`forward_dynamics_result` (same arguments).

        Parameters
        ----------
        q, v : array_like, shape (nv,)
        u : array_like, shape (nu,), optional
            Inputs of the actuated joints [N | N m].
        tau : array_like, shape (nv,), optional
            Further generalized forces.
        baumgarte : (alpha, beta)
            Stabilization ``c'' + 2 alpha c' + beta^2 c = 0`` [1/s, 1/s]; default none.

        Raises
        ------
        SolverError
            If ``[[M, -C^T], [C, 0]]`` is singular (redundant closures, a singular position).
        """
        q, v = self._vec(q, "q"), self._vec(v, "v")
        return self._kkt(q, v, self._applied(u, tau), baumgarte)[0]

    def forward_dynamics_result(self, q, v, u=None, tau=None,
                                baumgarte: tuple[float, float] = (0.0, 0.0)
                                ) -> ClosedForwardDynamicsResult:
        """Accelerations and cut-joint multipliers of the index-1 form (2.51).

        Arguments and errors as :meth:`forward_dynamics`; returns a
        :class:`ClosedForwardDynamicsResult` (``a``, ``lam``, ``f_c = C^T λ``, ``residual``).
        """
        q, v = self._vec(q, "q"), self._vec(v, "v")
        a, lam, C, rhs_c = self._kkt(q, v, self._applied(u, tau), baumgarte, terms=True)
        residual = float(np.max(np.abs(C @ a - rhs_c))) if self.nc else 0.0
        return ClosedForwardDynamicsResult(a, lam, C.T @ lam, residual)

    def _applied(self, u, tau) -> np.ndarray:
        """Generalized force ``tau + B u`` (nv,) [N | N m] of the optional inputs."""
        f = np.zeros(self.nv) if tau is None else self._vec(tau, "tau").copy()
        if u is not None:
            f += self.B @ self._vec(u, "u", self.nu)
        return f

    def inverse_dynamics(self, q, v, a) -> np.ndarray:
        """Minimum-norm generalized force ``tau = P (M a + k + f_e - g)`` (nv,) [N | N m] that
        produces the motion ``a`` (nv,) of the closed system, ``P = I - C^+ C``.

        The part of ``M a + k + f_e - g`` along the closure directions (range of ``C^T``) is
        carried by the cut-joint reactions ``C^T λ`` (2.51); the rest is the force to apply,
        as the projection form of Aghili (2005) eq. 45 states it for rigid loops.  For a motion
        that keeps the closures (``C a + bias = 0``), ``forward_dynamics(q, v, tau=tau)``
        returns ``a`` again; ``tau`` has elastic entries where the motion needs them.
        """
        q, v, a = self._vec(q, "q"), self._vec(v, "v"), self._vec(a, "a")
        M, k, g, fe = self.chain.dynamics_terms(q, v)
        C = self.constraint_jacobian(q)
        f = M @ a + k + fe - g
        return f - np.linalg.pinv(C) @ (C @ f)

    def mass_matrix(self, q) -> np.ndarray:
        """Mass matrix M(q) (nv, nv) of the spanning tree (Seifried eq. 2.139)."""
        return self.chain.mass_matrix(q)

    def _kkt(self, q, v, f, baumgarte=(0.0, 0.0), terms: bool = False):
        """``(a, λ)`` of (2.51) under the generalized force ``f`` (nv,); with ``terms`` also
        ``C`` and the right-hand side ``C a = rhs_c`` of the constraint rows."""
        M, k, g, fe = self.chain.dynamics_terms(q, v)
        c, C, bias = self.constraint_terms(q, v)
        rhs_c = -bias
        al, be = baumgarte
        if al or be:
            rhs_c = rhs_c - 2.0 * al * (C @ v) - be * be * c
        nv, nc = self.nv, self.nc
        K = np.zeros((nv + nc, nv + nc))
        K[:nv, :nv] = M
        K[:nv, nv:] = -C.T
        K[nv:, :nv] = C
        rhs = np.concatenate([f + g - k - fe, rhs_c])
        try:
            x = np.linalg.solve(K, rhs)
        except np.linalg.LinAlgError:
            raise SolverError(f"{self.name}: [[M, -C^T], [C, 0]] singular at q_r = "
                              f"{q[:self.nq_r].tolist()}: redundant closures or a singular "
                              "position of the loop") from None
        if terms:
            return x[:nv], x[nv:], C, rhs_c
        return x[:nv], x[nv:]

    def partition(self, q, v=None):
        """``J̄`` (nv, dof) and ``γ`` (nv,) of the coordinate partitioning (2.147)-(2.149).

        ``q' = J̄ z'`` and ``q'' = J̄ z'' + γ`` for the minimal velocities ``z' = q'[idx_min]``.

        Raises
        ------
        SolverError
            If ``C_d`` is singular here (choose other ``independent`` coordinates).
        """
        _, C, bias = self.constraint_terms(q, v)
        Cd = C[:, self.idx_d]
        try:
            lu = scipy.linalg.lu_factor(Cd, check_finite=False)
            if np.linalg.cond(Cd) > 1e12:
                raise np.linalg.LinAlgError
        except (np.linalg.LinAlgError, ValueError):
            raise SolverError(f"{self.name}: C_d singular for the dependent coordinates "
                              f"{[self.joint_names[k] for k in self.idx_d]} at q_r = "
                              f"{np.asarray(q)[:self.nq_r].tolist()}; choose other independent "
                              "coordinates") from None
        T = -scipy.linalg.lu_solve(lu, C[:, self.idx_min])  # [T_i, T_e] (2.147)
        Jbar = np.zeros((self.nv, self.dof))
        Jbar[self.idx_min, np.arange(self.dof)] = 1.0
        Jbar[self.idx_d] = T
        gamma = np.zeros(self.nv)
        gamma[self.idx_d] = -scipy.linalg.lu_solve(lu, bias)
        return Jbar, gamma

    def minimal_equations(self, q, v):
        """Terms of the minimal equations of motion (2.150): ``M̄ z'' + k̄ + f̄ = ḡ + B̄̄ u``.

        Returns
        -------
        Mbar : (dof, dof) ``J̄^T M J̄`` (2.151)-(2.153)
        kbar : (dof,) ``J̄^T (k + M γ)`` (2.154)-(2.155)
        gbar : (dof,) ``J̄^T g`` (2.156)-(2.157)
        fbar : (dof,) ``J̄^T f_e = [0; K_e q_e + D_e q_e']``
        Bbar : (dof, nu) ``J̄^T B`` (2.158)-(2.159): its elastic rows ``T_e^T B_d`` fill when a
            dependent coordinate is actuated.
        """
        q, v = self._vec(q, "q"), self._vec(v, "v")
        M, k, g, fe = self.chain.dynamics_terms(q, v)
        Jbar, gamma = self.partition(q, v)
        JT = Jbar.T
        return JT @ M @ Jbar, JT @ (k + M @ gamma), JT @ g, JT @ fe, JT @ self.B

    def minimal_forward_dynamics(self, q, v, u=None) -> np.ndarray:
        """Accelerations ``a`` (nv,) by coordinate partitioning: ``a = J̄ z'' + γ`` with z'' from
        (2.150) (``q``, ``v`` consistent with the loops)."""
        q, v = self._vec(q, "q"), self._vec(v, "v")
        Mbar, kbar, gbar, fbar, Bbar = self.minimal_equations(q, v)
        rhs = gbar - kbar - fbar
        if u is not None:
            rhs = rhs + Bbar @ self._vec(u, "u", self.nu)
        zdd = np.linalg.solve(Mbar, rhs)
        Jbar, gamma = self.partition(q, v)
        return Jbar @ zdd + gamma

    # -- projections ---------------------------------------------------------------------
    def project_position(self, q, tol: float = 1e-12, max_iter: int = 30,
                         partitioned: bool = False) -> np.ndarray:
        """Configuration on the loop manifold near ``q`` (nv,).

        ``partitioned=False``: minimum-norm Newton ``q <- q - C^+ c`` (Aghili 2005 eq. 39);
        ``partitioned=True``: only the dependent coordinates ``q_d`` move (Seifried's solution
        of ``c(q_i, q_d) = 0`` for ``q_d``).

        Raises
        ------
        SolverError
            If ``max|c|`` does not fall below ``tol`` [m | rad].
        """
        q = self._vec(q, "q").copy()
        for _ in range(max_iter):
            c, C, _ = self.constraint_terms(q)
            if np.max(np.abs(c)) < tol:
                return q
            if partitioned:
                q[self.idx_d] -= np.linalg.solve(C[:, self.idx_d], c)
            else:
                q -= np.linalg.lstsq(C, c, rcond=None)[0]
        c = self.constraint_residual(q)
        if np.max(np.abs(c)) < tol:
            return q
        raise SolverError(f"{self.name}: loop closure not reached in {max_iter} Newton steps "
                          f"(max |c| = {np.max(np.abs(c)):.3g}, tolerance {tol:g}); is the "
                          "configuration assemblable?")

    def project_velocity(self, q, v, partitioned: bool = False) -> np.ndarray:
        """Velocities (nv,) with ``C v = 0``: ``v - C^+ C v`` or, partitioned, new ``v_d``."""
        q, v = self._vec(q, "q"), self._vec(v, "v").copy()
        C = self.constraint_jacobian(q)
        if partitioned:
            v[self.idx_d] = -np.linalg.solve(C[:, self.idx_d],
                                             C[:, self.idx_min] @ v[self.idx_min])
            return v
        return v - np.linalg.lstsq(C, C @ v, rcond=None)[0]

    def energy(self, q, v) -> float:
        """Total mechanical energy [J] of the tree (the constraints do no work)."""
        return self.chain.energy(q, v)

    def simulate(self, q0, v0, t, u: Callable[[float], np.ndarray] | None = None,
                 rtol: float = 1e-9, atol: float = 1e-11, baumgarte=(0.0, 0.0),
                 project: bool = True, method: str = "DOP853",
                 feedback: Callable[[float, np.ndarray, np.ndarray], np.ndarray] | None = None,
                 max_step: float = np.inf, interrupted: list | None = None,
                 on_sample: Callable[[float, np.ndarray], None] | None = None,
                 projection_dt: float | None = None) -> ClosedSimulation:
        """Integrate the closed system over the sample times ``t`` (N,) [s].

        Between projection points the index-1 form is integrated (scipy ``method``, ``rtol``,
        ``atol``, ``max_step`` [s]); at each projection point the state is projected on the
        position and velocity manifolds (``project=True``), and the residual before the
        projection is recorded.  ``projection_dt`` [s] spaces the projection points: None
        (default) projects at every sample; a time projects at the last sample at most
        ``projection_dt`` after the previous projection point (at least the next sample) and
        at the end, and the samples in between are taken from the solver's dense output
        (``t_eval``, the method's own interpolant: DOP853's is of order 7) without projection,
        their residual ``max |c(q)|`` recorded as it is.  Fine samples (many per period of
        the stiffest mode) thus cost the integration of the coarse grid plus the energy and
        residual at each sample: a projection at every fine sample would restart the solver
        there (a first-step search and a step no longer than the sample interval each time),
        which made 0.1 ms samples of the machine tool several times as costly as 10 ms ones
        (``bench/bench_flexible_closed_sampling.py``). The drift the projection removes grows
        over a projection interval from the integration error alone (the index-1 form keeps
        ``c'' = 0``), so the unprojected samples stay about as close to the loop manifold as
        the state before each projection (their ``residual`` shows it).
        The inputs [N | N m] are ``u(t) + feedback(t, q, v)`` (each (nu,), default zero).
        ``q0, v0`` are projected first.  The result
        (:class:`~multibody_dynamics.flexible.simulation.ClosedSimulation`, a
        :class:`~multibody_dynamics.simulate.SimulationResult`) holds the energy and the
        generalized input ``B (u + feedback)`` at each sample besides the states.  With a list
        ``interrupted``, Ctrl-C ends the run keeping the samples computed before it (up to the
        solver step under way, :func:`~multibody_dynamics.interruptible.solve_ivp_keeping`)
        and appends the time [s] where it stopped to the list (without it, Ctrl-C raises as
        usual).  ``on_sample(t, q)`` (optional) is called with each sample as the result keeps
        it (``t`` [s], ``q`` (nv,)), once its interval is integrated and its projection point
        projected, e.g. to stream the run to the live viewer.
        """
        t = np.asarray(t, float)
        if t.ndim != 1 or t.size < 2 or np.any(np.diff(t) <= 0):
            raise InputError("t must be at least two increasing sample times [s]")
        if projection_dt is not None and not (np.isfinite(projection_dt) and projection_dt > 0):
            raise InputError(f"projection_dt: expected a positive time in s or None, got "
                             f"{projection_dt!r}")
        q = self.project_position(q0)
        v = self.project_velocity(q, self._vec(v0, "v0"))
        nv = self.nv
        zero_u = np.zeros(self.nu)
        ufun = (lambda _t: zero_u) if u is None else u
        nfev = 0

        def applied(tk, x):  # the generalized input B (u + feedback)
            uk = np.asarray(ufun(tk), float)
            if feedback is not None:
                uk = uk + feedback(tk, x[:nv], x[nv:])
            return self.B @ uk

        def rhs(tk, x):
            nonlocal nfev
            nfev += 1
            a, _ = self._kkt(x[:nv], x[nv:], applied(tk, x), baumgarte)
            return np.concatenate([x[nv:], a])

        Q, V, err = [q], [v], [0.0]
        hand = on_sample if on_sample is not None else (lambda tk, qk: None)
        hand(float(t[0]), q)
        start = time.perf_counter()
        ok, msg = True, "completed"
        k = 0  # the last projection point
        while k < t.size - 1:  # (1 + 1e-6): the round-off of sample times on a regular grid
            j = k + 1 if projection_dt is None else max(k + 1, int(np.searchsorted(
                t, t[k] + projection_dt * (1 + 1e-6), side="right")) - 1)
            try:
                sol, stopped = self._interval(rhs, t[k:j + 1], np.concatenate([q, v]), method,
                                              rtol, atol, max_step, interrupted is not None)
            except (SolverError, np.linalg.LinAlgError) as exc:
                ok, msg = False, f"failed at t = {t[k]:.4g} s: {exc}"
                break
            except INTERRUPTS as exc:
                reraise_unless_interrupt(exc)
                if interrupted is None:
                    raise
                interrupted.append(float(t[k]))
                ok, msg = False, f"interrupted at t = {t[k]:.6g} s"
                break
            n0 = len(Q)
            for x in sol.y.T:  # the samples reached; at j (when reached) the projection below
                q, v = x[:nv], x[nv:]
                err.append(float(np.max(np.abs(self.constraint_residual(q)))))
                Q.append(q)
                V.append(v)
            if project and stopped is None and sol.status == 0:  # t[j] reached
                q = self.project_position(q)
                v = self.project_velocity(q, v)
                Q[-1], V[-1] = q, v
            for i in range(n0, len(Q)):  # the samples as the result keeps them
                hand(float(t[i]), Q[i])
            if stopped is not None:
                interrupted.append(stopped)
                ok, msg = False, f"interrupted at t = {stopped:.6g} s"
                break
            if sol.status != 0:
                ok, msg = False, f"integration failed at t = {t[k]:.4g} s: {sol.message}"
                break
            k = j
        n = len(Q)
        Q, V = np.array(Q), np.array(V)
        energy = np.array([self.energy(qk, vk) for qk, vk in zip(Q, V)])
        tau = np.array([applied(tk, np.concatenate([qk, vk])) for tk, qk, vk in zip(t, Q, V)])
        return ClosedSimulation(
            t=t[:n], q=Q, v=V, tau=tau.reshape(n, nv), energy=energy, success=ok, message=msg,
            nsteps=0, wall_time=time.perf_counter() - start, names=self.coordinate_names,
            q_names=self.coordinate_names, lam=np.zeros((n, 0)), residual=np.array(err),
            velocity_residual=np.zeros(n), nrejected=None, nfev=nfev,
            mode="adaptive", name=self.name)

    @staticmethod
    def _interval(rhs, t, x0, method, rtol, atol, max_step, keeping):
        """``(sol, stopped)``: the integration of :meth:`simulate` from ``t[0]`` to ``t[-1]``
        with the samples ``t[1:]`` in ``sol.y`` (columns); ``keeping``: Ctrl-C ends it at the
        end of the solver step under way (``stopped`` its time [s], else None)."""
        one = t.size == 2  # one sample: the solver's last state, not its interpolant there
        options = dict(method=method, rtol=rtol, atol=atol, max_step=max_step,
                       t_eval=None if one else t[1:])
        if keeping:
            sol, stopped = solve_ivp_keeping(rhs, (t[0], t[-1]), x0, **options)
        else:
            sol, stopped = solve_ivp(rhs, (t[0], t[-1]), x0, **options), None
        sol.y = np.asarray(sol.y).reshape(x0.size, -1)  # scipy: [] when no sample was reached
        if one:  # every step is in sol.y; the sample is the last one, if reached
            sol.y = sol.y[:, -1:] if stopped is None and sol.status == 0 else sol.y[:, :0]
        return sol, stopped

    # -- task kinematics -----------------------------------------------------------------
    def rigid_task_kinematics(self, body: str, node: int | None, p, pd, pdd, guess):
        """Rigid coordinates putting a point of the undeformed system (``q_e = 0``) on a task.

        Solves ``[r(q_r) - p; c(q_r) = 0]`` (nq_r unknowns; the point and the loops must fix
        all rigid coordinates: ``2 + nc = nq_r``) by Newton from ``guess`` (nq_r,), then the
        velocities and accelerations from the same Jacobian. Returns ``q_r, q_r', q_r''``.
        """
        nr, nv = self.nq_r, self.nv
        if 2 + self.nc != nr:
            raise ModelError(f"{self.name}: a point and {self.nc} closure rows do not fix "
                             f"{nr} rigid coordinates")
        i = self.chain._body_index(body)
        b = self.chain.bodies[i]
        end = (i, (b.distal_node if node is None else node) if b.flexible else None)
        qr = np.asarray(guess, float).copy()

        def terms(qr, vr):
            q, v = np.zeros(nv), np.zeros(nv)
            q[:nr], v[:nr] = qr, vr
            kin = self.chain._kinematics(q, v)
            r, J, bias = self._point(kin, end, q, v)[:3]
            c, C, cb = self.constraint_terms(q, v)
            return (np.concatenate([r - p, c]), np.vstack([J[:, :nr], C[:, :nr]]),
                    np.concatenate([bias, cb]))

        for _ in range(50):
            res, A, _ = terms(qr, np.zeros(nr))
            if np.max(np.abs(res)) < 1e-13:
                break
            qr = qr - np.linalg.solve(A, res)
        else:
            raise SolverError(f"{self.name}: rigid inverse kinematics did not converge for the "
                              f"point {np.asarray(p).tolist()} m")
        _, A, _ = terms(qr, np.zeros(nr))
        rhs_v = np.concatenate([pd, np.zeros(self.nc)])
        vr = np.linalg.solve(A, rhs_v)
        _, _, bias = terms(qr, vr)
        ar = np.linalg.solve(A, np.concatenate([pdd, np.zeros(self.nc)]) - bias)
        return qr, vr, ar


# ============================================================================ former names
def _flexible_parallel_tool(backend: str = "auto", shape_vectors: dict | None = None,
                            **overrides) -> ClosedFlexibleChain:
    """The former builder: ``load_flexible_model("flexible_parallel_tool", backend,
    parameters=overrides, shape_vectors=shape_vectors)``."""
    from .loader import load_flexible_model

    return load_flexible_model("flexible_parallel_tool", backend, parameters=overrides,
                               shape_vectors=shape_vectors)


def _parallel_tool_outputs(
        system: ClosedFlexibleChain) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The former output rule: the model's ``outputs`` (``combined``, ``rigid``,
    ``collocated``)."""
    if not isinstance(system, ClosedFlexibleChain):
        raise InputError(f"system must be a ClosedFlexibleChain, got {type(system).__name__}")
    missing = sorted({"combined", "rigid", "collocated"} - set(system.outputs))
    if missing:
        raise ModelError(f"{system.name}: no outputs {missing} (the model file's outputs:)")
    return dict(system.outputs)


def _parallel_tool_overrides() -> dict[str, str]:
    """The former table of the machine tool's changes, ``{name: what it sets}``: the names the
    model file declares under ``parameters:``, each with the key paths it sets."""
    from .loader import _declared_parameters, resolve_flexible_path

    w = YamlChecker(resolve_flexible_path("flexible_parallel_tool"))
    declared = _declared_parameters(w, w.load("flexible model", "a mapping with 'parameters'"))
    return {name: ", ".join(".".join(parts) for parts in paths)
            for name, paths in declared.items()}


_CONTROL = "multibody_control.inversion.closed_flexible"
__getattr__ = module_getattr(__name__, deprecated={
    "flexible_parallel_tool": (
        "load_robot('flexible_parallel_tool', parameters={...}) (the changes the model file "
        "declares under parameters:)", lambda: _flexible_parallel_tool),
    "parallel_tool_outputs": ("the model's outputs (ClosedFlexibleChain.outputs, declared "
                              "under outputs: in its file)", lambda: _parallel_tool_outputs),
    "PARALLEL_TOOL_OVERRIDES": ("the parameters: section of config/robots/"
                                "flexible_parallel_tool.yaml", _parallel_tool_overrides),
    "PARALLEL_TOOL_TASK": f"{_CONTROL}.PARALLEL_TOOL_TASK",
    "rigid_task_path": f"{_CONTROL}.rigid_task_path",
    "point_error": f"{_CONTROL}.point_error",
})
