"""One planar flexible body in the floating frame of reference formulation.

Coordinates ``q = [x, y, theta, q_e]`` (nq + 3,): position [m] of the reference frame K_R's
origin and its angle [rad] in the inertial plane, then the elastic coordinates. Velocities
``v = [x', y', theta', q_e']``: the frame velocity is inertial, so ``q' = v`` (the angle is a
plain scalar in the plane; no manifold integration is needed).

The reference frame is a tangent frame: the modes are those of a beam clamped at the frame
origin (:func:`~multibody_dynamics.flexible.modal.clamped_modes`), so a joint at the origin acts
on the rigid coordinates only.

Equations of motion (Seifried 2014, eq. 2.130, projected on ``q``)::

    M(q) v' + k(q, v) + f_e(q, v) = g(q) + tau

* ``M = T^T Mbar T`` with the body mass matrix ``Mbar`` of eq. (2.110)-(2.116) in K_R and
  ``T = blockdiag(S^T, 1, I)`` mapping ``v`` to ``z_II`` (eq. 2.99); ``S`` rotates K_R to the
  inertial frame. Because the reference acceleration in K_R is ``S^T r''``, ``z_III = T v'``.
* ``k = T^T h_omega`` (eqs. 2.117-2.122, planar, with the errata: (2.118) carries ``m``,
  (2.119) reads ``G_r omega``, the ``O_e^k`` of (2.122) has its sign reversed -- see
  :mod:`~multibody_dynamics.flexible.sid`)::

      h_t = -w^2 m c(q_e) + 2 w J Ct^T q_e'
      h_r = w dI_zz/dt = w (I1 + 2 Me q_e) . q_e'
      h_e = w^2 o_e(q_e) + w G_e q_e' = -w^2 (I1/2 + Me q_e) + 2 w Cr1 q_e'

* ``f_e = [0; K_e q_e + D_e q_e']`` (eqs. 2.123-2.125, linear part).
* ``g = [m g0; (J m c)^T S^T g0; Ct S^T g0]`` (eq. 2.126) for the gravity vector ``g0``.

Options: ``second_order_inertia=False`` keeps only the first-order Taylor terms of (2.128)
(and, consistently, drops ``Me q_e`` from ``h_r`` and ``o_e``). ``geometric_stiffening=True``
adds the centrifugal part of the nonlinear stiffness (2.125) through the kinetic energy term
``-1/2 w^2 q_e^T Komega q_e`` (axial foreshortening): ``I_zz -= q^T Komega q``,
``h_r -= 2 w q^T Komega q'``, ``h_e += w^2 Komega q``. Derived from one Lagrangian, both
options keep the model conservative. Foreshortening under translational acceleration or
gravity along the beam is not included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DimensionError, InputError
from .sid import ModalData

__all__ = ["FlexibleBodyConfig", "FlexibleBody2D"]

#: The planar cross-product matrix (rotation by +90 degrees), shared by the planar modules.
_J = np.array([[0.0, -1.0], [1.0, 0.0]])


def _rot(theta: float) -> np.ndarray:
    """The planar rotation matrix (2, 2) of ``theta`` [rad]."""
    c, s = np.cos(theta), np.sin(theta)
    return np.array([[c, -s], [s, c]])



def _gravity(value, n: int) -> tuple[float, ...]:
    """``value`` as ``n`` floats, the gravity of a planar (2) or spatial (3) body config
    [m/s^2]; InputError unless it is ``n`` finite numbers."""
    try:
        g = np.asarray(value, float)
    except (TypeError, ValueError):
        g = np.full(0, np.nan)
    if g.shape != (n,) or not np.all(np.isfinite(g)):
        raise InputError(f"gravity must be {n} finite numbers [m/s^2], got {value!r}")
    return tuple(float(x) for x in g)

@dataclass(frozen=True)
class FlexibleBodyConfig:
    """Options of a planar floating-frame body.

    Parameters
    ----------
    gravity : tuple of float
        Gravity acceleration (2,) in the inertial frame [m/s^2]. Default (0, -9.81).
    geometric_stiffening : bool
        Add the centrifugal geometric stiffness (``Komega`` of the modal data). Default False.
    second_order_inertia : bool
        Keep the exact quadratic term ``q_e^T Me q_e`` of the inertia. Default True.
    """

    gravity: tuple[float, float] = (0.0, -9.81)
    geometric_stiffening: bool = False
    second_order_inertia: bool = True

    def __post_init__(self):
        object.__setattr__(self, "gravity", _gravity(self.gravity, 2))


class _FloatingFrame:
    """What the planar :class:`FlexibleBody2D` and the spatial ``FlexibleBody3D`` share: the
    elastic forces, energies, node positions and the check of applied forces, written once.

    A subclass sets ``_NR`` (position coordinates, 2 or 3), ``_QE`` and ``_VE`` (index of the
    first elastic coordinate in ``q`` and in ``v``), ``nq`` and ``nv``, keeps its data and
    options with :meth:`_keep` (``data``, ``config``, ``_g0``), and defines
    ``_split(q, v=None)`` (validated arrays) and ``_orientation(q)`` (the rotation ``S`` from
    the body frame K_R to the inertial frame, of a validated ``q``).
    """

    _NR: int
    _QE: int
    _VE: int
    data: Any  # ModalData or ModalData3D
    config: Any  # FlexibleBodyConfig or FlexibleBody3DConfig
    nq: int
    nv: int
    _g0: np.ndarray

    def _keep(self, data, data_type: type, config, config_type: type) -> None:
        """Check and keep ``data`` (a ``data_type``) and ``config`` (a ``config_type``, its
        default when None) and the gravity vector; InputError naming the argument otherwise."""
        if not isinstance(data, data_type):
            raise InputError(f"data must be a {data_type.__name__}, got {type(data).__name__}")
        config = config_type() if config is None else config
        if not isinstance(config, config_type):
            raise InputError(f"config must be a {config_type.__name__}, got "
                             f"{type(config).__name__}")
        self.data, self.config = data, config
        self._g0 = np.array(config.gravity)

    def _split(self, q, v=None):
        raise NotImplementedError

    def _orientation(self, q) -> np.ndarray:
        raise NotImplementedError

    def mass_matrix(self, q) -> np.ndarray:
        raise NotImplementedError

    def _applied(self, tau) -> np.ndarray:
        """``tau`` as a float array of shape (nv,) (DimensionError otherwise)."""
        tau = np.asarray(tau, float)
        if tau.shape != (self.nv,):
            raise DimensionError(f"tau must have shape ({self.nv},), got {tau.shape}")
        return tau

    def elastic_forces(self, q, v) -> np.ndarray:
        """Internal elastic and damping forces ``[0; Ke q_e + De q_e']`` (nv,) (eq. 2.123)."""
        q, v = self._split(q, v)
        out = np.zeros(self.nv)
        out[self._VE:] = self.data.Ke @ q[self._QE:] + self.data.De @ v[self._VE:]
        return out

    def kinetic_energy(self, q, v) -> float:
        """``1/2 v^T M(q) v`` [J]."""
        q, v = self._split(q, v)
        return 0.5 * v @ self.mass_matrix(q) @ v

    def potential_energy(self, q) -> float:
        """Gravity plus elastic potential ``-g0^T (m r + S m c) + 1/2 q_e^T Ke q_e`` [J]."""
        q, _ = self._split(q)
        d, nr, qe = self.data, self._NR, q[self._QE:]
        mc = self._orientation(q) @ d.first_moment(qe)
        return -self._g0 @ (d.mass * q[:nr] + mc) + 0.5 * qe @ d.Ke @ qe

    def energy(self, q, v) -> float:
        """Total mechanical energy [J]."""
        return self.kinetic_energy(q, v) + self.potential_energy(q)

    def node_position(self, q, node: int) -> np.ndarray:
        """Inertial position (2,) planar or (3,) spatial [m] of a node of the modal data
        (linear in ``q_e``)."""
        q, _ = self._split(q)
        d, nr = self.data, self._NR
        nn = d.node_positions.shape[0]
        if isinstance(node, bool) or not isinstance(node, (int, np.integer)) \
                or not -nn <= node < nn:
            raise InputError(f"node must be an integer in [-{nn}, {nn}), got {node!r}")
        r = d.node_positions[node] + d.node_shapes[node, :nr] @ q[self._QE:]
        return q[:nr] + self._orientation(q) @ r


class FlexibleBody2D(_FloatingFrame):
    """Planar floating-frame flexible body built from :class:`ModalData`.

    Parameters
    ----------
    data : ModalData
        Mass integrals, stiffness and damping of the body.
    config : FlexibleBodyConfig, optional
    """

    _NR, _QE, _VE = 2, 3, 3

    def __init__(self, data: ModalData, config: FlexibleBodyConfig | None = None):
        self._keep(data, ModalData, config, FlexibleBodyConfig)
        self.nq_e = data.nq
        self.nv = self.nq = 3 + data.nq

    # -- helpers -------------------------------------------------------------------------
    def _split(self, q, v=None):
        q = np.asarray(q, float)
        if q.shape != (self.nq,):
            raise DimensionError(f"q must have shape ({self.nq},), got {q.shape}")
        if v is None:
            return q, None
        v = np.asarray(v, float)
        if v.shape != (self.nv,):
            raise DimensionError(f"v must have shape ({self.nv},), got {v.shape}")
        return q, v

    def _orientation(self, q) -> np.ndarray:
        return _rot(q[2])

    def _izz(self, qe):
        d = self.data
        izz = d.inertia(qe, self.config.second_order_inertia)
        if self.config.geometric_stiffening:
            izz -= qe @ d.Komega @ qe
        return izz

    # -- dynamics ------------------------------------------------------------------------
    def mass_matrix(self, q) -> np.ndarray:
        """Generalized mass matrix M(q) (nv, nv) [kg, kg m, kg m^2] (Seifried eq. 2.110)."""
        q, _ = self._split(q)
        d, qe = self.data, q[3:]
        S = _rot(q[2])
        M = np.empty((self.nv, self.nv))
        M[:2, :2] = d.mass * np.eye(2)
        M[:2, 2] = S @ _J @ d.first_moment(qe)
        M[:2, 3:] = S @ d.Ct.T
        M[2, 2] = self._izz(qe)
        M[2, 3:] = d.Cr(qe)
        M[3:, 3:] = d.Me
        M[2:, :2] = M[:2, 2:].T
        M[3:, 2] = M[2, 3:]
        return M

    def nonlinear_effects(self, q, v) -> np.ndarray:
        """Centrifugal and Coriolis forces ``k(q, v) = T^T h_omega`` (nv,) (eqs. 2.117-2.122)."""
        q, v = self._split(q, v)
        d, cfg = self.data, self.config
        qe, dqe, w = q[3:], v[3:], v[2]
        S = _rot(q[2])
        second = cfg.second_order_inertia
        h_t = -(w**2) * d.first_moment(qe) + 2.0 * w * _J @ (d.Ct.T @ dqe)
        di = d.I1 + 2.0 * d.Me @ qe if second else d.I1
        h_r = w * (di @ dqe)
        h_e = w**2 * d.centrifugal(qe, second) + w * (d.Ge @ dqe)
        if cfg.geometric_stiffening:
            h_r -= 2.0 * w * (qe @ d.Komega @ dqe)
            h_e = h_e + w**2 * (d.Komega @ qe)
        return np.concatenate([S @ h_t, [h_r], h_e])

    def gravity_forces(self, q) -> np.ndarray:
        """Generalized gravity forces g(q) (nv,) [N, N m] (eq. 2.126), applied-force sign."""
        q, _ = self._split(q)
        d = self.data
        g_r = _rot(q[2]).T @ self._g0
        return np.concatenate([
            d.mass * self._g0, [(_J @ d.first_moment(q[3:])) @ g_r], d.Ct @ g_r,
        ])

    def forward_dynamics(self, q, v, tau=None) -> np.ndarray:
        """Accelerations ``v'`` (nv,) from ``M v' = g + tau - k - f_e``.

        Parameters
        ----------
        q, v : array_like, shape (nv,)
        tau : array_like, shape (nv,), optional
            Generalized applied forces [N, N m, N per unit q_e]; zero by default.
        """
        q, v = self._split(q, v)
        M, rhs = self._terms(q, v)
        if tau is not None:
            rhs = rhs + self._applied(tau)
        return np.linalg.solve(M, rhs)

    def _terms(self, q, v):
        """``M(q)`` and ``g - k - f_e`` in one pass (the same algebra as the public methods,
        written without per-call validation because integrators call it thousands of times)."""
        d, cfg = self.data, self.config
        qe, dqe, w = q[3:], v[3:], v[2]
        c, s = np.cos(q[2]), np.sin(q[2])
        S = np.array([[c, -s], [s, c]])
        mc = d.mc0 + d.Ct.T @ qe
        jmc = np.array([-mc[1], mc[0]])
        ctd = d.Ct.T @ dqe
        meq = d.Me @ qe
        izz = d.I0 + d.I1 @ qe
        di = d.I1
        ce = -0.5 * d.I1
        if cfg.second_order_inertia:
            izz += qe @ meq
            di = di + 2.0 * meq
            ce = ce - meq
        h_r = w * (di @ dqe)
        h_e = w * w * ce + (2.0 * w) * (d.Cr1 @ dqe)
        if cfg.geometric_stiffening:
            kq = d.Komega @ qe
            izz -= qe @ kq
            h_r -= 2.0 * w * (kq @ dqe)
            h_e += w * w * kq
        M = np.empty((self.nv, self.nv))
        M[:2, :2] = [[d.mass, 0.0], [0.0, d.mass]]
        M[:2, 2] = S @ jmc
        M[:2, 3:] = S @ d.Ct.T
        M[2, 2] = izz
        M[2, 3:] = d.Cr0 + d.Cr1 @ qe
        M[3:, 3:] = d.Me
        M[2:, :2] = M[:2, 2:].T
        M[3:, 2] = M[2, 3:]
        h_t = -(w * w) * mc + (2.0 * w) * np.array([-ctd[1], ctd[0]])
        g_r = S.T @ self._g0
        rhs = np.empty(self.nv)
        rhs[:2] = d.mass * self._g0 - S @ h_t
        rhs[2] = jmc @ g_r - h_r
        rhs[3:] = d.Ct @ g_r - h_e - d.Ke @ qe - d.De @ dqe
        return M, rhs

