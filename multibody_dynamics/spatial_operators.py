"""Spatial-operator factorization of the mass matrix and of its inverse (Yeşiloğlu 2007 Ch. 3).

For a tree of bodies (a serial arm, several arms on a mobile base) the generalized mass
matrix is ``𝓜 = Hᵀ Φᵀ M Φ H`` (2.24, 3.28): ``H`` stacks the joints' motion subspaces,
``Φ = (I - E_φ)⁻¹`` propagates spatial velocities from each body to its children, ``M`` is
block-diagonal in the bodies' spatial inertias. With the articulated-body inertias
``𝓘_AB`` (3.1)-(3.2), ``D = Hᵀ 𝓘_AB H`` (3.14), ``K = D⁻¹ Hᵀ 𝓘_AB E_φ`` (3.16),
``E_ψ = (I - H D⁻¹ Hᵀ 𝓘_AB) E_φ`` (3.18) and ``Ψ = (I - E_ψ)⁻¹`` (3.21):

* ``𝓜 = (I + K Φ H)ᵀ D (I + K Φ H)`` (3.34), an LDLᵀ factorization whose factor
  ``I + K Φ H`` is unit block-triangular in the joint order;
* ``𝓜⁻¹ = (I - K Ψ H) D⁻¹ (I - K Ψ H)ᵀ`` (3.38), with ``(I + K Φ H)⁻¹ = I - K Ψ H`` (3.35).

Readings chosen here:

* Every spatial quantity is expressed in the world frame at the world origin (pinocchio's
  ``WORLD`` convention, linear part first). Then ``Φ_{k,parent}`` is the identity: the
  operator identities are frame-independent, and this choice removes the ``L̃`` transforms.
* The thesis builds ``𝓘_AB`` per arm and places the base inertia ``M_b`` alone in its
  block (3.3), which is wrong for a mobile base (the two identities then fail; checked in
  NOTES). Here the recursion (3.1) runs over the whole tree, summing ``Ψᵀ 𝓘_AB Ψ`` over all
  children of a body: the base block becomes ``M_b + Σ_arms Ψ_{1,0}ᵀ 𝓘_AB,1 Ψ_{1,0}``, the
  corrected form, and both identities hold (tested on the floating dual-arm model).

:class:`SpatialOperators` forms the operators as dense matrices at a configuration (for
the identities and for teaching: O(n²) memory); :func:`inverse_mass_apply` computes
``𝓜⁻¹ f`` with the O(n) sweeps that (3.38) implies (tip-to-base, then base-to-tip), without
forming any matrix. In Python the sweeps cost per body what pinocchio's compiled ABA costs
for the whole tree: these functions document and check the factorization, and the compiled
constrained direct dynamics use the same factors (``fast_step._abi_factor`` and
``_abi_solve``: ``D`` and the two sweeps of (3.38) for several right-hand sides at once).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from .validation import as_vector

__all__ = ["SpatialOperators", "inverse_mass_apply", "spatial_operators"]

_WORLD = pin.ReferenceFrame.WORLD


def _world_terms(pm: pin.Model, data: pin.Data, q):
    """Per joint k >= 1: its motion subspace S_k (6, nv_k) and its body's spatial inertia
    (6, 6), both in the world frame at the world origin."""
    pin.forwardKinematics(pm, data, q)
    pin.computeJointJacobians(pm, data, q)
    S, inertia = [None], [None]
    for k in range(1, pm.njoints):
        j = pm.joints[k]
        J = pin.getJointJacobian(pm, data, k, _WORLD)
        S.append(J[:, j.idx_v:j.idx_v + j.nv].copy())
        inertia.append(data.oMi[k].act(pm.inertias[k]).matrix())
    return S, inertia


def _articulated(pm: pin.Model, S, inertia):
    """Articulated-body inertias 𝓘_AB,k and D_k = S_kᵀ 𝓘_AB,k S_k (3.1), (3.2), (3.14), from
    the tips to the root; a body's children all add to it (the corrected base block)."""
    IA = [None] + [inertia[k].copy() for k in range(1, pm.njoints)]
    D = [None] * pm.njoints
    for k in range(pm.njoints - 1, 0, -1):  # children have larger indices than parents
        U = IA[k] @ S[k]
        D[k] = S[k].T @ U
        p = pm.parents[k]
        if p > 0:
            # Ψᵀ 𝓘_AB Ψ with Ψ = I - S D⁻¹ Sᵀ 𝓘_AB (Φ = I at the world origin)
            IA[p] += IA[k] - U @ np.linalg.solve(D[k], U.T)
    return IA, D


@dataclass(frozen=True)
class SpatialOperators:
    """The operators of Yeşiloğlu (2007) Ch. 3 at one configuration, as dense matrices.

    Body blocks are 6 rows each, in pinocchio's joint order (body k = joint k+1); joint
    blocks follow the velocity order ``v``.

    Attributes
    ----------
    H : (6 nb, nv)   motion subspaces (block diagonal)
    M : (6 nb, 6 nb) spatial inertias (block diagonal)
    E_phi, Phi : (6 nb, 6 nb)  adjacent-link and full propagation operators (3.8)-(3.11)
    I_AB : (6 nb, 6 nb) articulated-body inertias (block diagonal)
    D : (nv, nv)     ``Hᵀ 𝓘_AB H`` (block diagonal) (3.14)
    K : (nv, 6 nb)   ``D⁻¹ Hᵀ 𝓘_AB E_φ`` (3.16)
    E_psi, Psi : (6 nb, 6 nb)  (3.18), (3.21)
    """

    H: np.ndarray
    M: np.ndarray
    E_phi: np.ndarray
    Phi: np.ndarray
    I_AB: np.ndarray
    D: np.ndarray
    K: np.ndarray
    E_psi: np.ndarray
    Psi: np.ndarray

    @property
    def mass_matrix(self) -> np.ndarray:
        """``Hᵀ Φᵀ M Φ H`` (3.28), (nv, nv)."""
        PH = self.Phi @ self.H
        return PH.T @ self.M @ PH

    @property
    def factor(self) -> np.ndarray:
        """``L = I + K Φ H`` (nv, nv), unit block lower-triangular: ``𝓜 = Lᵀ D L`` (3.34)."""
        return np.eye(self.D.shape[0]) + self.K @ self.Phi @ self.H

    @property
    def inverse_factor(self) -> np.ndarray:
        """``I - K Ψ H`` (nv, nv) = ``L⁻¹`` (3.35): ``𝓜⁻¹ = L⁻¹ D⁻¹ L⁻ᵀ`` (3.38)."""
        return np.eye(self.D.shape[0]) - self.K @ self.Psi @ self.H


def spatial_operators(pm: pin.Model, q, data: pin.Data | None = None) -> SpatialOperators:
    """Form the operators of the tree ``pm`` at ``q`` (nq,) (see :class:`SpatialOperators`)."""
    q = as_vector(q, pm.nq, "q")
    data = pm.createData() if data is None else data
    S, inertia = _world_terms(pm, data, q)
    IA, Dk = _articulated(pm, S, inertia)
    nb, nv = pm.njoints - 1, pm.nv
    H = np.zeros((6 * nb, nv))
    M = np.zeros((6 * nb, 6 * nb))
    I_AB = np.zeros((6 * nb, 6 * nb))
    E_phi = np.zeros((6 * nb, 6 * nb))
    D = np.zeros((nv, nv))
    for k in range(1, pm.njoints):
        b, j = slice(6 * (k - 1), 6 * k), pm.joints[k]
        jv = slice(j.idx_v, j.idx_v + j.nv)
        H[b, jv] = S[k]
        M[b, b] = inertia[k]
        I_AB[b, b] = IA[k]
        D[jv, jv] = Dk[k]
        p = pm.parents[k]
        if p > 0:
            E_phi[b, slice(6 * (p - 1), 6 * p)] = np.eye(6)
    eye = np.eye(6 * nb)
    Phi = np.linalg.inv(eye - E_phi)  # nilpotent E_φ: exact, (3.11)
    K = np.linalg.solve(D, H.T @ I_AB @ E_phi)
    E_psi = (eye - H @ np.linalg.solve(D, H.T @ I_AB)) @ E_phi
    Psi = np.linalg.inv(eye - E_psi)
    return SpatialOperators(H, M, E_phi, Phi, I_AB, D, K, E_psi, Psi)


def inverse_mass_apply(pm: pin.Model, q, f, data: pin.Data | None = None) -> np.ndarray:
    """``𝓜(q)⁻¹ f`` by the O(n) sweeps of (3.38), no matrix formed.

    ``(I - K Ψ H)ᵀ f`` is a tip-to-base sweep of the articulated forces, ``D⁻¹`` is per
    joint, ``(I - K Ψ H)`` a base-to-tip sweep of the accelerations: Featherstone's
    articulated-body algorithm without velocity terms, in world coordinates.

    Parameters
    ----------
    pm : pinocchio.Model
    q : (nq,)
    f : (nv,) generalized force [N | N m]

    Returns
    -------
    (nv,) generalized acceleration [m/s² | rad/s²]
    """
    q = as_vector(q, pm.nq, "q")
    f = as_vector(f, pm.nv, "f")
    data = pm.createData() if data is None else data
    S, inertia = _world_terms(pm, data, q)
    IA, D = _articulated(pm, S, inertia)
    nj = pm.njoints
    bias = [np.zeros(6) for _ in range(nj)]  # articulated bias force of each body
    u = [None] * nj
    for k in range(nj - 1, 0, -1):
        j = pm.joints[k]
        u[k] = f[j.idx_v:j.idx_v + j.nv] - S[k].T @ bias[k]
        p = pm.parents[k]
        if p > 0:
            U = IA[k] @ S[k]
            bias[p] += bias[k] + U @ np.linalg.solve(D[k], u[k])
    a = np.zeros(pm.nv)
    acc = [np.zeros(6) for _ in range(nj)]
    for k in range(1, nj):
        j = pm.joints[k]
        ap = acc[pm.parents[k]]
        dd = np.linalg.solve(D[k], u[k] - S[k].T @ IA[k] @ ap)
        a[j.idx_v:j.idx_v + j.nv] = dd
        acc[k] = ap + S[k] @ dd
    return a
