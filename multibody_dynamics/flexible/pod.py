"""Proper orthogonal decomposition (POD) of deformation snapshots: shape functions for the Ritz
approach ``u = Phi q_e`` (Seifried 2014 Sect. 2.2.2; the book's machine tool of Sect. 6.5 uses
POD shapes computed with MatMorembs, Fehr and Eberhard 2011).

Given ``N`` snapshots of a body's nodal displacements ``X = [x_1 ... x_N]`` (ndof, N) — e.g. the
deformation of each arm during a simulation of the whole system with a fine model — POD keeps
the ``n`` directions that capture most of ``sum_k ||x_k||_W^2``: with an inner product
``<a, b>_W = a^T W b`` (``W`` = FE mass matrix: kinetic-energy norm, unit-consistent across
translation and rotation dofs; ``W = I``: plain Euclidean norm of the nodal values) and
``W = L L^T`` (Cholesky), the SVD ``L^T X = U S V^T`` gives the shapes ``Phi = L^-T U[:, :n]``,
W-orthonormal (``Phi^T W Phi = I``), ordered by the singular values ``S`` (the "energy" of the
snapshots along each shape is ``S^2``). The snapshots are not mean-centred (deformations are
measured from the undeformed body).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from ..errors import DimensionError, InputError

__all__ = ["PODBasis", "pod_basis"]


@dataclass(frozen=True)
class PODBasis:
    """Result of :func:`pod_basis`.

    Attributes
    ----------
    shapes : ndarray, shape (ndof, n)
        POD shapes, W-orthonormal (``shapes^T W shapes = I``), largest entry of each positive.
    singular_values : ndarray, shape (min(ndof, N),)
        All singular values of ``L^T X``, descending [unit of the snapshots x sqrt(W)].
    captured : float
        Fraction of the snapshot energy ``sum S^2`` captured by the ``n`` kept shapes, in [0, 1].
    """

    shapes: np.ndarray
    singular_values: np.ndarray
    captured: float

    @property
    def n(self) -> int:
        """Number of kept shapes."""
        return self.shapes.shape[1]


def pod_basis(snapshots, n: int, weight=None, rank_tol: float = 1e-10) -> PODBasis:
    """POD shapes of the columns of ``snapshots`` (see the module docstring).

    Parameters
    ----------
    snapshots : array_like, shape (ndof, N)
        One deformation per column (e.g. nodal displacements [m, rad]).
    n : int
        Number of shapes kept, ``1 <= n <= min(ndof, N)``.
    weight : array_like, shape (ndof, ndof), optional
        Symmetric positive definite inner-product matrix W (e.g. the FE mass matrix);
        default the identity.
    rank_tol : float
        Kept singular values must exceed ``rank_tol`` times the largest: the snapshots must
        span ``n`` directions.

    Returns
    -------
    PODBasis

    Raises
    ------
    DimensionError
        Wrong shapes. ``InputError``: bad ``n``, non-finite data, W not positive definite, or
        snapshots of rank < ``n``.
    """
    X = np.asarray(snapshots, float)
    if X.ndim != 2:
        raise DimensionError(f"snapshots must be a 2-D array (ndof, N), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise InputError("snapshots must be finite")
    ndof, nsnap = X.shape
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= min(X.shape):
        raise InputError(f"n must be an integer in [1, {min(X.shape)}], got {n!r}")
    if weight is None:
        L = None
        Y = X
    else:
        W = np.asarray(weight, float)
        if W.shape != (ndof, ndof):
            raise DimensionError(f"weight must have shape ({ndof}, {ndof}), got {W.shape}")
        try:
            L = np.linalg.cholesky(0.5 * (W + W.T))
        except np.linalg.LinAlgError:
            raise InputError("weight must be symmetric positive definite") from None
        Y = L.T @ X
    U, S, _ = np.linalg.svd(Y, full_matrices=False)
    if S[0] == 0.0 or S[n - 1] <= rank_tol * S[0]:
        raise InputError(f"the snapshots span fewer than n = {n} directions (singular values "
                         f"{S[:n + 1].tolist()})")
    shapes = U[:, :n] if L is None else scipy.linalg.solve_triangular(L.T, U[:, :n], lower=False)
    idx = np.argmax(np.abs(shapes), axis=0)
    shapes = shapes * np.sign(shapes[idx, np.arange(n)])
    energy = S**2
    return PODBasis(shapes, S, float(energy[:n].sum() / energy.sum()))
