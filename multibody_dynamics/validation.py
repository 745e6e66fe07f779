"""Argument checks shared by the public API.

The checks are cheap on the fast path (an ``ndarray`` of float64 with the right
shape passes after three attribute comparisons) because the dynamics calls sit
in 1 kHz control loops; anything else is converted once or rejected with a
message that names the argument and the expected shape.
"""

from __future__ import annotations

import numpy as np

from .errors import DimensionError, InputError

_F8 = np.dtype(float)


def as_vector(x, n: int, name: str) -> np.ndarray:
    """Return ``x`` as a float64 array of shape ``(n,)`` or raise :class:`DimensionError`."""
    if x.__class__ is np.ndarray and x.dtype is _F8 and x.shape == (n,):
        return x
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DimensionError(f"{name}: expected {n} numbers, got {x!r} ({exc})") from None
    if arr.shape != (n,):
        raise DimensionError(f"{name}: expected shape ({n},), got {arr.shape}")
    return arr


def as_matrix(x, shape: tuple[int | None, int | None], name: str) -> np.ndarray:
    """Return ``x`` as a 2-D float64 array; ``None`` in ``shape`` accepts any size on that axis."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DimensionError(f"{name}: expected a numeric matrix ({exc})") from None
    want = tuple("N" if s is None else s for s in shape)
    if arr.ndim != 2 or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
        raise DimensionError(f"{name}: expected shape {want}, got {arr.shape}")
    return arr


def require_finite(x: np.ndarray, name: str) -> np.ndarray:
    """Raise :class:`InputError` naming ``name`` if ``x`` holds NaN or inf."""
    if not np.all(np.isfinite(x)):
        bad = np.flatnonzero(~np.isfinite(np.ravel(x)))
        raise InputError(f"{name}: non-finite value(s) at flat index {bad[:5].tolist()}")
    return x


#: Samples one recorded run may hold (states, inputs and diagnostics, of the order of 1 kB
#: a sample with the Python objects around them: about 5 GB), checked before a run starts.
MAX_SAMPLES = 5_000_000


def check_sample_budget(duration: float, interval: float, what: str,
                        hint: str = "sample less often or shorten the run") -> int:
    """Number of samples of a run of ``duration`` [s] recorded every ``interval`` [s].

    Raises
    ------
    InputError
        ``interval`` larger than ``duration`` (the run would record nothing), or more samples
        than :data:`MAX_SAMPLES` (they would not fit in memory): the message names ``what``
        and says what to change (``hint``).
    """
    if not interval > 0 or not duration > 0:
        raise InputError(f"{what}: expected a positive duration and sampling interval, got "
                         f"{duration!r} s and {interval!r} s")
    if interval > duration:
        raise InputError(f"{what}: the step or sampling interval {interval:g} s is longer than "
                         f"the duration {duration:g} s")
    n = duration / interval + 1.0  # a float: 1e300 s would overflow an int
    if not n <= MAX_SAMPLES:
        raise InputError(f"{what}: {duration:g} s every {interval:g} s would record {n:.3g} "
                         f"samples (at most {MAX_SAMPLES:.0e} fit in memory); {hint}")
    return int(n)


def check_motion_sampled(t0: float, tf: float, dt: float, what: str) -> None:
    """Refuse a sample interval ``dt`` [s] that is not shorter than the motion ``t0 .. tf``
    [s]: the result would hold no sample inside the motion (e.g. ``dt: 5`` for a 1.5 s
    motion gave four samples and an end-effector error of metres).

    Raises
    ------
    InputError
        ``dt >= tf - t0``; the message names ``what`` and the motion's length.
    """
    if not dt < tf - t0:
        raise InputError(f"{what}: the sample interval {dt:g} s is not shorter than the motion "
                         f"{t0:g} .. {tf:g} s; expected dt < {tf - t0:g} s")
