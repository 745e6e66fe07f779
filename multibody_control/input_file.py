"""Time-varying inputs read from a CSV file: ``multibody simulate --tau-file FILE``.

The file has a header row and one row per sample: a column ``t`` [s] and one column per
input of the model, named as the model's inputs (``multibody check ROBOT`` lists them), bare
(``motor1``) or with the ``u.`` prefix of the result files (``u.motor1``) [N m | N].  The
feedforward written by ``multibody invert`` (and the input of ``multibody run``) can so be
replayed as it is: their other result columns (``q.``, ``v.``, ``y.`` ...) are skipped.

Between the samples the input is interpolated linearly (``hold="linear"``, the default) or
held at the last sample (``hold="zoh"``, zero-order hold: u(t) = u(t_k) for t_k <= t < t_k+1).
Everything is checked when the file is read, before the simulation starts: a missing file, a
column that is no input, a missing input, non-numeric or NaN/inf values, a time column that
does not strictly increase, a file that starts after 0 or ends before the duration.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from multibody_dynamics.errors import InputError

HOLDS = ("linear", "zoh")
#: result-file columns that are not inputs (skipped): a result CSV replays its ``u.`` columns
RESULT_PREFIXES = ("q.", "v.", "a.", "y.", "y_d.", "q_ref.", "e.", "lambda.")
RESULT_COLUMNS = ("residual", "energy", "task_error")


def _table(path: Path) -> tuple[list[str], np.ndarray]:
    if not path.is_file():
        raise InputError(f"--tau-file: {path}: file not found")
    with path.open(newline="") as fh:
        rows = [r for r in csv.reader(fh) if r]
    if len(rows) < 2:
        raise InputError(f"--tau-file: {path}: expected a header row (t, then the inputs) and "
                         "at least one sample")
    header = [h.strip() for h in rows[0]]
    for k, r in enumerate(rows[1:], start=2):
        if len(r) != len(header):
            raise InputError(f"--tau-file: {path}: line {k} has {len(r)} values, expected "
                             f"{len(header)} (the header's columns)")
    try:
        data = np.array([[float(x) for x in r] for r in rows[1:]], dtype=float)
    except ValueError as exc:
        raise InputError(f"--tau-file: {path}: non-numeric value ({exc})") from None
    return header, data


def _input_columns(path: Path, header: list[str], input_names) -> list[int]:
    """Column index of each input (in the model's order)."""
    wanted = {n: n for n in input_names} | {f"u.{n}": n for n in input_names}
    found: dict[str, int] = {}
    for i, h in enumerate(header):
        if h == "t" or h.startswith(RESULT_PREFIXES) or h in RESULT_COLUMNS:
            continue
        if h not in wanted:
            raise InputError(f"--tau-file: {path}: unknown column {h!r}; expected t and the "
                             f"inputs {', '.join(input_names)}")
        if wanted[h] in found:
            raise InputError(f"--tau-file: {path}: input {wanted[h]} given twice")
        found[wanted[h]] = i
    missing = [n for n in input_names if n not in found]
    if missing:
        raise InputError(f"--tau-file: {path}: missing input column(s) {', '.join(missing)}; "
                         f"expected t, {', '.join(input_names)}")
    return [found[n] for n in input_names]


def read_input_file(path: str | Path, input_names, duration: float, hold: str = "linear"):
    """Read and check an input file; return u(t) for t in [0, duration].

    Parameters
    ----------
    path : str or Path
        CSV with a column ``t`` [s] and one column per input (see the module notes).
    input_names : sequence of str
        The model's inputs, in the order of its input matrix B (nu,).
    duration : float
        Simulated time [s]: the file must cover [0, duration].
    hold : "linear" or "zoh"
        Interpolation between the samples.

    Returns
    -------
    callable
        ``u(t) -> (nu,)`` input values [N m | N].

    Raises
    ------
    InputError
        A one-line message naming the file and what is wrong (see the module notes).
    """
    if hold not in HOLDS:
        raise InputError(f"--tau-hold: expected one of {', '.join(HOLDS)}, got {hold!r}")
    path = Path(path)
    header, data = _table(path)
    if "t" not in header:
        raise InputError(f"--tau-file: {path}: missing column 't' (time, s)")
    cols = _input_columns(path, header, list(input_names))
    t = data[:, header.index("t")]
    u = data[:, cols]
    bad = ~np.isfinite(np.column_stack([t, u]))
    if bad.any():
        row, col = np.argwhere(bad)[0]
        name = "t" if col == 0 else header[cols[col - 1]]
        raise InputError(f"--tau-file: {path}: NaN or inf in column {name!r} (sample {row + 1}, "
                         f"line {row + 2}); expected finite numbers")
    if np.any(np.diff(t) <= 0):
        k = int(np.flatnonzero(np.diff(t) <= 0)[0])
        raise InputError(f"--tau-file: {path}: column 't' must strictly increase (t = "
                         f"{t[k]:g} s on line {k + 2}, then {t[k + 1]:g} s)")
    if t[0] > 0:
        raise InputError(f"--tau-file: {path}: starts at t = {t[0]:g} s; expected a first "
                         "sample at t <= 0")
    if t[-1] < duration - 1e-12 * max(1.0, duration):
        raise InputError(f"--tau-file: {path}: ends at t = {t[-1]:g} s, before the duration "
                         f"{duration:g} s; extend the file or shorten --duration")
    if hold == "zoh":
        def u_of_t(x):
            return u[max(int(np.searchsorted(t, x, side="right")) - 1, 0)]
    else:
        def u_of_t(x):
            return np.array([np.interp(x, t, c) for c in u.T])
    return u_of_t


__all__ = ["HOLDS", "read_input_file"]
