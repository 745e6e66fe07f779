"""Modal reduction of a supported beam: fixed-base eigenmodes and Craig-Bampton static modes.

The Ritz approach of the floating frame of reference, ``u = Phi q_e`` (Seifried 2014,
eq. 2.94), needs shape functions that are compatible with the reference frame. For a tangent
frame clamped at the beam's root these are the modes of the clamped beam: the eigenvectors of
``K phi = omega^2 M phi`` on the free dofs, mass-normalised (``phi^T M phi = 1``), so that
``M_e = I`` and ``K_e = diag(omega^2)`` (Seifried 2014, remark after eq. 2.125).

Optional static (constraint) modes after Craig and Bampton (1968): for a set of interface dofs
``b`` (e.g. the tip, where a joint of a later system attaches) the normal modes are computed with
``b`` held fixed as well, and each static mode is the deflection ``[I; -K_ii^{-1} K_ib]`` for a
unit displacement of one interface dof with the interior dofs ``i`` unloaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..errors import InputError, SolverError
from .beam import BeamModel

__all__ = ["ModalBasis", "clamped_modes"]


@dataclass(frozen=True)
class ModalBasis:
    """Reduced elastic model ``M_e q_e'' + D_e q_e' + K_e q_e = Phi^T f``.

    Attributes
    ----------
    beam : BeamModel
        The finite element model the basis was computed from.
    Phi : ndarray, shape (ndof, nq)
        Shape vectors on all beam dofs (zeros at the supports), columns: normal modes first,
        then static modes. Units: m (or rad) per unit ``q_e``.
    Me, Ke, De : ndarray, shape (nq, nq)
        Modal mass [kg], stiffness [N/m] and damping [N s/m] matrices ``Phi^T (M, K, D) Phi``
        (for mass-normalised modes ``q_e`` has unit sqrt(kg) m and Me is dimensionless).
    frequencies : ndarray, shape (nq,)
        ``sqrt`` of the eigenvalues of ``(Ke, Me)`` [rad/s].
    kinds : tuple of str
        ``"normal"`` or ``"static"`` per column (before any orthonormalisation).
    """

    beam: BeamModel
    Phi: np.ndarray
    Me: np.ndarray
    Ke: np.ndarray
    De: np.ndarray
    frequencies: np.ndarray
    kinds: tuple[str, ...]

    @property
    def n_modes(self) -> int:
        """Number of elastic coordinates nq."""
        return self.Phi.shape[1]


def clamped_modes(
    beam: BeamModel,
    n_modes: int,
    static_dofs: Sequence[int] = (),
    orthonormalize: bool = True,
) -> ModalBasis:
    """Fixed-base (clamped-interface) modes of a supported beam, optionally with static modes.

    Parameters
    ----------
    beam : BeamModel
        Assembled beam; its supports define the fixed base (normally ``left="clamped"``).
    n_modes : int
        Number of normal modes kept (lowest frequencies), >= 1 (or 0 with static modes).
    static_dofs : sequence of int, optional
        Global dof indices (see :meth:`BeamModel.dof`) of Craig-Bampton interface dofs. Each
        adds one static constraint mode; the normal modes are then computed with these dofs
        fixed.
    orthonormalize : bool, optional
        With static modes, re-diagonalise the reduced pair ``(Ke, Me)`` so the final basis is
        again mass-normalised with ``Ke`` diagonal (the span is unchanged). Default True.

    Returns
    -------
    ModalBasis

    Raises
    ------
    InputError
        Bad ``n_modes`` or ``static_dofs``.
    SolverError
        If the supported beam still has rigid-body modes (zero frequency) in the basis.
    """
    if isinstance(n_modes, bool) or not isinstance(n_modes, (int, np.integer)) or n_modes < 0:
        raise InputError(f"n_modes must be a non-negative integer, got {n_modes!r}")
    free = beam.free_dofs
    static = np.array(sorted(set(int(d) for d in static_dofs)), dtype=int)
    bad = [d for d in static if d not in set(free.tolist())]
    if bad:
        raise InputError(f"static_dofs {bad} are supported or out of range 0..{beam.ndof - 1}")
    if n_modes + static.size == 0:
        raise InputError("need at least one mode: n_modes >= 1 or some static_dofs")
    interior = np.setdiff1d(free, static)
    if n_modes > interior.size:
        raise InputError(f"n_modes must be <= {interior.size} (interior dofs), got {n_modes}")

    M, K, D = beam.M, beam.K, beam.D
    if not (np.all(np.isfinite(M)) and np.all(np.isfinite(K))):
        raise InputError("the beam's mass or stiffness matrix overflows (not finite): check "
                         "the lengths, section and material for absurd values")
    ii = np.ix_(interior, interior)
    columns, kinds = [], []
    if n_modes:
        lam, vec = scipy.linalg.eigh(K[ii], M[ii], subset_by_index=[0, n_modes - 1])
        phi = np.zeros((beam.ndof, n_modes))
        phi[interior] = vec  # eigh returns M-normalised vectors
        # fix the sign so each mode's largest displacement is positive (reproducible files)
        idx = np.argmax(np.abs(phi), axis=0)
        phi *= np.sign(phi[idx, np.arange(n_modes)])
        columns.append(phi)
        kinds += ["normal"] * n_modes
    if static.size:
        psi = np.zeros((beam.ndof, static.size))
        psi[static, np.arange(static.size)] = 1.0
        psi[interior] = -np.linalg.solve(K[ii], K[np.ix_(interior, static)])
        columns.append(psi)
        kinds += ["static"] * static.size
    Phi = np.hstack(columns)
    Me, Ke = Phi.T @ M @ Phi, Phi.T @ K @ Phi
    if static.size and orthonormalize:
        lam, T = scipy.linalg.eigh(Ke, Me)
        Phi = Phi @ T
        Me, Ke = Phi.T @ M @ Phi, Phi.T @ K @ Phi
    Me, Ke = 0.5 * (Me + Me.T), 0.5 * (Ke + Ke.T)
    De = Phi.T @ D @ Phi
    De = 0.5 * (De + De.T)
    lam = scipy.linalg.eigh(Ke, Me, eigvals_only=True)
    if lam.min() <= 1e-10 * max(lam.max(), 1.0):
        raise SolverError(
            "the supported beam has a rigid-body mode in the basis (zero frequency); "
            "clamp it (left='clamped') for a tangent-frame body"
        )
    return ModalBasis(beam, Phi, Me, Ke, De, np.sqrt(lam), tuple(kinds))
