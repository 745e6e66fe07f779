"""Modal structural damping of flexible bodies.

Seifried (2014) gives its flexible bodies a damping matrix ``D_e`` (eqs. 2.123-2.125, Rayleigh
damping ``D_e = alpha M_e + beta K_e`` as one choice) but prints no value for the Sect. 6.4
manipulator. Modal damping sets the same damping ratio ``zeta`` on every retained mode of a
body: with the eigenvectors ``Phi`` of ``K_e phi = omega^2 M_e phi``, mass-normalised
(``Phi^T M_e Phi = I``),

    D_e = M_e Phi diag(2 zeta omega_i) Phi^T M_e,

so that ``Phi^T D_e Phi = diag(2 zeta omega_i)`` and each clamped mode decays with
``exp(-zeta omega_i t)``. Unlike Rayleigh damping it needs one number and does not
over-damp the higher modes.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.linalg import eigh

from ..errors import InputError
from .system import FlexibleChainConfig

__all__ = ["check_damping_ratio", "modal_damping_matrix", "with_modal_damping"]


def check_damping_ratio(zeta) -> float:
    """``zeta`` as a float after checking it is a damping ratio in [0, 1) (InputError)."""
    try:
        z = float(zeta)
    except (TypeError, ValueError):
        raise InputError(f"modal damping ratio: expected a number in [0, 1), "
                         f"got {zeta!r}") from None
    if not (np.isfinite(z) and 0.0 <= z < 1.0):
        raise InputError(f"modal damping ratio: expected a number in [0, 1), got {zeta!r}")
    return z


def modal_damping_matrix(Me, Ke, zeta: float) -> np.ndarray:
    """``D_e`` (n, n) giving every mode of ``(M_e, K_e)`` the damping ratio ``zeta``.

    Parameters
    ----------
    Me, Ke : array_like, shape (n, n)
        Symmetric elastic mass [kg] and stiffness [N/m] matrices of one body (``M_e``
        positive definite, ``K_e`` positive semi-definite), in its elastic coordinates.
    zeta : float
        Modal damping ratio in [0, 1) (0.02 = 2 % of critical damping).

    Returns
    -------
    ndarray, shape (n, n)
        ``M_e Phi diag(2 zeta omega_i) Phi^T M_e`` [N s/m] (module docstring), symmetric
        positive semi-definite.
    """
    z = check_damping_ratio(zeta)
    Me, Ke = np.asarray(Me, float), np.asarray(Ke, float)
    w2, Phi = eigh(Ke, Me)  # mass-normalised: Phi^T Me Phi = I
    omega = np.sqrt(np.clip(w2, 0.0, None))
    MP = Me @ Phi
    D = MP @ np.diag(2.0 * z * omega) @ MP.T
    return 0.5 * (D + D.T)


def with_modal_damping(config: FlexibleChainConfig, zeta: float) -> FlexibleChainConfig:
    """A copy of ``config`` whose flexible bodies have modal damping ``zeta`` (replacing the
    ``D_e`` they had, e.g. Rayleigh damping from the model file); rigid bodies unchanged.

    Raises
    ------
    InputError
        ``zeta`` is not a number in [0, 1).
    """
    z = check_damping_ratio(zeta)
    bodies = []
    for b in config.bodies:
        if b.flexible:
            d = b.modal_data
            b = dataclasses.replace(b, modal_data=dataclasses.replace(
                d, De=modal_damping_matrix(d.Me, d.Ke, z)))
        bodies.append(b)
    return dataclasses.replace(config, bodies=tuple(bodies))
