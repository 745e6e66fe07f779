"""Joint and output trajectories: rest-to-rest polynomials, sampling, CSV input.

Trajectories are sample-first: ``t`` (N,), ``q`` (N, n).
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from math import comb
from pathlib import Path

import numpy as np

from multibody_dynamics.errors import InputError
from multibody_dynamics.validation import as_vector


@dataclass(frozen=True)
class SampledTrajectory:
    """Positions and their first two derivatives at sample times.

    Attributes
    ----------
    t : (N,) [s]
    q, v, a : (N, n) position, velocity, acceleration
    names : tuple of str, length n
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    names: tuple[str, ...] = ()


@functools.cache
def _profile_coefficients(order: int, derivatives: int) -> tuple[np.ndarray, ...]:
    """Monomial coefficients (highest power first, for np.polyval) of p and its derivatives."""
    k = (order - 1) // 2
    # p(s) = s^(k+1) * sum_j C(k+j, j) (1-s)^j  (smoothstep family), expanded into monomials.
    coef = np.zeros(order + 1)
    for j in range(k + 1):
        c = comb(k + j, j)
        for i in range(j + 1):  # (1-s)^j
            coef[k + 1 + i] += c * comb(j, i) * (-1) ** i
    poly = np.polynomial.Polynomial(coef)
    return tuple(poly.deriv(d).coef[::-1].copy() for d in range(derivatives + 1))


def rest_to_rest_profile(s, order: int = 5, derivatives: int = 2) -> np.ndarray:
    """Normalized rest-to-rest polynomial p(s), s in [0, 1], and its derivatives in s.

    The polynomial of odd ``order`` = 2k+1 goes from 0 to 1 with its first k
    derivatives zero at both ends (order 5: velocity and acceleration; order 7:
    also jerk).  Returns shape (derivatives + 1, len(s)).
    """
    if order not in (3, 5, 7, 9):
        raise InputError(f"order: expected 3, 5, 7 or 9, got {order}")
    s = np.clip(np.atleast_1d(np.asarray(s, float)), 0.0, 1.0)
    return np.array([np.polyval(c, s) for c in _profile_coefficients(order, derivatives)])


def rest_to_rest(t, q0, q1, t0: float, tf: float, order: int = 5) -> SampledTrajectory:
    """Rest-to-rest motion from ``q0`` at ``t0`` to ``q1`` at ``tf`` (held outside), sampled at
    ``t``."""
    q0 = np.atleast_1d(np.asarray(q0, float))
    q1 = as_vector(q1, q0.size, "q1")
    if not tf > t0:
        raise InputError(f"rest_to_rest: expected tf > t0, got t0={t0}, tf={tf}")
    t = np.asarray(t, float)
    T = tf - t0
    p = rest_to_rest_profile((t - t0) / T, order)
    inside = ((t > t0) & (t < tf)).astype(float)
    d = q1 - q0
    q = q0 + np.outer(p[0], d)
    v = np.outer(p[1] * inside / T, d)
    a = np.outer(p[2] * inside / T**2, d)
    return SampledTrajectory(t, q, v, a)


def differentiate(t, q, smoothing: float = 0.0):
    """Velocity and acceleration of sampled positions by a quintic smoothing spline (scipy).

    ``smoothing`` is FITPACK's smoothing factor s (sum of squared residuals allowed, in the
    positions' units squared): 0 interpolates (exact data: errors ~1e-7 relative at 5 ms
    sampling), a positive value smooths measured, noisy data.  Quintic, so that the
    acceleration is smooth and not forced to zero at the ends.
    """
    from scipy.interpolate import UnivariateSpline

    if t.size < 6:
        raise InputError(f"trajectory: need at least 6 samples to differentiate, got {t.size}")
    if not smoothing >= 0:
        raise InputError(f"smoothing: expected a factor >= 0, got {smoothing}")
    v = np.empty_like(q)
    a = np.empty_like(q)
    for j in range(q.shape[1]):
        spl = UnivariateSpline(t, q[:, j], k=5, s=smoothing)
        v[:, j] = spl.derivative(1)(t)
        a[:, j] = spl.derivative(2)(t)
    return v, a


def read_trajectory_csv(path: str | Path, names, smoothing: float = 0.0) -> SampledTrajectory:
    """Read a joint trajectory CSV with columns ``t``, ``q.<name>``… (``v.``/``a.`` optional).

    Missing velocities/accelerations are obtained by differentiating a quintic smoothing
    spline of the positions (``smoothing``: see :func:`differentiate`).  Errors name the
    file and the column.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: trajectory file not found")
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    if len(rows) < 2:
        raise InputError(f"{path}: expected a header row and at least one sample")
    header = [h.strip() for h in rows[0]]
    try:
        data = np.array([[float(x) for x in r] for r in rows[1:] if r], dtype=float)
    except ValueError as exc:
        raise InputError(f"{path}: non-numeric value ({exc})") from None
    if data.ndim != 2 or data.shape[1] != len(header):
        raise InputError(f"{path}: every row needs {len(header)} values (the header's columns)")
    col = {h: i for i, h in enumerate(header)}
    if "t" not in col:
        raise InputError(f"{path}: missing column 't' (time, s)")
    t = data[:, col["t"]]
    if np.any(~np.isfinite(data)):
        raise InputError(f"{path}: NaN or inf values")
    if np.any(np.diff(t) <= 0):
        raise InputError(f"{path}: column 't' must be strictly increasing")
    missing = [f"q.{n}" for n in names if f"q.{n}" not in col]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}; expected t, "
                         + ", ".join(f"q.{n}" for n in names))
    known = {"t"} | {f"{p}.{n}" for p in "qva" for n in names}
    extra = [h for h in header if h not in known]
    if extra:
        raise InputError(f"{path}: unknown column(s) {', '.join(extra)}")
    q = data[:, [col[f"q.{n}"] for n in names]]

    def block(prefix):
        keys = [f"{prefix}.{n}" for n in names]
        present = [k in col for k in keys]
        if any(present) and not all(present):
            raise InputError(f"{path}: give all or none of the {prefix}.<joint> columns")
        return data[:, [col[k] for k in keys]] if all(present) else None

    v, a = block("v"), block("a")
    if v is None or a is None:
        try:
            v_s, a_s = differentiate(t, q, smoothing)
        except InputError as exc:  # too few samples: name the file and the way out
            raise InputError(f"{path}: {exc}; or give the v.<joint> and a.<joint> "
                             "columns") from None
        v = v_s if v is None else v
        a = a_s if a is None else a
    return SampledTrajectory(t, q, v, a, tuple(names))
