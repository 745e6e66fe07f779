"""Reading a result CSV of ``multibody simulate | run | invert`` for the animation.

The CSV gives the samples (``t``, ``q.<name>`` …; ``q_ref.<name>`` for ``run``, ``y_d.<k>``
for ``invert``); the sidecar ``<stem>.meta.json`` (:mod:`multibody_dynamics.result_meta`)
names the robot.  A CSV without sidecar (written before the sidecar existed) is matched to
the shipped robot whose coordinate names are exactly its ``q.`` columns, or takes
``robot=``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from multibody_dynamics.errors import InputError, ModelError
from multibody_dynamics.result_meta import read_result_meta


@dataclass(frozen=True)
class ResultSamples:
    """What the animation needs from one result file.

    Attributes
    ----------
    path : Path
    t : (N,) [s]
    columns : dict name -> (N,) array of every CSV column
    meta : dict  the sidecar (empty when there is none)
    dropped : int  samples left out because their configuration is NaN or inf
    """

    path: Path
    t: np.ndarray
    columns: dict
    meta: dict
    dropped: int = 0

    def block(self, prefix: str, names) -> np.ndarray | None:
        """(N, len(names)) of the columns ``<prefix>.<name>``, or None if any is missing."""
        keys = [f"{prefix}.{n}" for n in names]
        if not all(k in self.columns for k in keys):
            return None
        return np.column_stack([self.columns[k] for k in keys]) if keys else np.zeros(
            (self.t.size, 0))

    @property
    def q_names(self) -> list[str]:
        return [k[2:] for k in self.columns if k.startswith("q.")]


def read_result(path: str | Path) -> ResultSamples:
    """Read a result CSV (header row, then numbers) and its sidecar, or a result archive
    ``.npz`` (``--format npz``, :mod:`multibody_dynamics.result_npz`).

    Raises :class:`InputError` naming the file for a missing file, a missing ``t`` column,
    non-numeric values, no sample or a time column that does not increase.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: result file not found (expected the CSV written by "
                         "`multibody simulate --out`, `run` or `invert`)")
    meta = None
    if path.suffix.lower() == ".npz":  # --format npz: the columns and the sidecar inside
        from multibody_dynamics.result_npz import read_npz

        header, data, meta = read_npz(path)
        if data.shape[0] < 1:
            raise InputError(f"{path}: expected at least one sample")
    else:
        header, data = _read_csv(path)
    if data.ndim != 2 or data.shape[1] != len(header):
        raise InputError(f"{path}: every row needs {len(header)} values (the header's columns)")
    if "t" not in header:
        raise InputError(f"{path}: missing column 't' (time, s); expected a result CSV of "
                         "`multibody simulate`, `run` or `invert`")
    qcols = [i for i, h in enumerate(header) if h.startswith("q.")]
    finite = np.all(np.isfinite(data[:, qcols]), axis=1) if qcols else np.ones(len(data), bool)
    if qcols and not finite.any():
        raise InputError(f"{path}: every sample has a NaN or inf configuration; nothing to draw")
    dropped = int(np.sum(~finite))  # a run that failed may end in NaN: draw what it did
    data = data[finite]
    columns = {h: data[:, i] for i, h in enumerate(header)}
    t = columns["t"]
    if np.any(np.diff(t) < 0) or not np.all(np.isfinite(t)):
        raise InputError(f"{path}: column 't' must be finite and non-decreasing")
    if not any(h.startswith("q.") for h in header):
        raise InputError(f"{path}: no 'q.<joint>' column; expected the configuration samples")
    return ResultSamples(path, t, columns,
                         meta if meta is not None else read_result_meta(path) or {}, dropped)


def _read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    with path.open(newline="") as fh:
        rows = [r for r in csv.reader(fh) if r]
    if len(rows) < 2:
        raise InputError(f"{path}: expected a header row and at least one sample")
    header = [h.strip() for h in rows[0]]
    try:
        data = np.array([[float(x) for x in r] for r in rows[1:]], dtype=float)
    except ValueError as exc:
        raise InputError(f"{path}: non-numeric value ({exc}); expected a result CSV") from None
    return header, data


def _candidates_by_columns(names: list[str]) -> list[str]:
    from multibody_dynamics.model import load_model, shipped_robots

    from ..animation.scene import q_names

    found = []
    for robot in shipped_robots():
        try:
            m = load_model(robot)
        except ModelError:
            continue
        if set(names) in (set(q_names(m)), set(m.coordinate_names)):
            found.append(robot)
    return found


def resolve_robot(res: ResultSamples, robot: str | None = None):
    """The model of a result: ``robot`` if given, else the sidecar's, else the shipped robot
    whose coordinates are the CSV's ``q.`` columns.  Returns a rigid ``MultibodyModel`` or a
    flexible model (``multibody_dynamics.flexible.loader``)."""
    from multibody_dynamics.flexible.loader import is_flexible_model, load_flexible_model
    from multibody_dynamics.model import load_model

    if robot is None and res.meta:
        mp = res.meta.get("model_path")
        robot = mp if mp and Path(mp).is_file() else res.meta.get("robot")
    if robot is None:
        found = _candidates_by_columns(res.q_names)
        if len(found) != 1:
            why = (f"several shipped robots match its q columns ({', '.join(found)})" if found
                   else "no shipped robot has its q columns")
            raise InputError(f"{res.path}: no {res.path.stem}.meta.json beside it and {why}; "
                             "pass --robot NAME_OR_YAML")
        robot = found[0]
    if is_flexible_model(robot):
        return load_flexible_model(robot)
    return load_model(robot)
