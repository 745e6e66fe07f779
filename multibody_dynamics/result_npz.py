"""Result files as NumPy ``.npz`` archives (``--format npz`` of simulate, run and invert).

A result CSV (header row ``t, q.<joint>, ...``, one row per sample) and its sidecar
(:mod:`.result_meta`) become one archive readable by ``numpy.load`` without pickles::

    r = numpy.load("run.npz")
    r["t"], r["q.crank"]          # every column under its CSV name, (N,) float
    r["data"]                     # (N, ncol) all columns, in the order of r["columns"]
    r["columns"], r["units"]      # (ncol,) str: the names and SI units of the columns
    json.loads(str(r["meta"]))    # the sidecar: robot, kind, partial ...

Units: ``t`` s; ``q.``, ``q_ref.``, ``e.`` rad or m by joint type (``1`` for the cos/sin
coordinates of continuous joints, ``rad | m`` when the model is not known); ``v.`` rad/s or
m/s; ``u.`` N m | N; ``lambda.`` N | N m; ``residual`` m | rad; ``velocity_residual``
m/s | rad/s; ``energy`` J; ``task_error`` m; ``y.``/``y_d.`` the output's (m for frame
coordinates, rad | m for joint combinations); the joint reaction loads of ``requirements``
``<joint>.fx|fy|fz`` N and ``<joint>.tx|ty|tz`` N m; other columns ``""``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from .errors import InputError
from .result_meta import read_result_meta

_FIXED = {"t": "s", "residual": "m | rad", "velocity_residual": "m/s | rad/s", "energy": "J",
          "task_error": "m"}


def _joint_units(meta: dict) -> dict[str, str]:
    """Coordinate name -> "rad" | "m" | "1" from the rigid model of the sidecar ({} if none)."""
    if not meta or meta.get("flexible"):
        return {}
    try:
        from .model import load_model

        model = load_model(meta.get("model_path") or meta.get("robot"))
    except Exception:  # noqa: BLE001 - units are a courtesy: the generic ones then
        return {}
    pm = model.pin_model
    units = {}
    for jid in range(1, pm.njoints):
        j, name = pm.joints[jid], pm.names[jid]
        if j.nv != 1:
            continue
        unit = "m" if "P" in j.shortname() else "rad"
        units[name] = unit
        if j.nq == 2:  # continuous joint: q is (cos, sin)
            units[f"{name}.0"] = units[f"{name}.1"] = "1"
    return units


def column_unit(column: str, joints: dict[str, str]) -> str:
    """SI unit of a result column (see the module notes); ``joints`` from the model."""
    if column in _FIXED:
        return _FIXED[column]
    prefix, _, name = column.partition(".")
    if prefix in ("q", "q_ref", "e"):
        return joints.get(name, "rad | m")
    if prefix == "v":
        unit = joints.get(name)
        return f"{unit}/s" if unit in ("rad", "m") else "rad/s | m/s"
    if prefix == "u":
        return "N m | N"
    if prefix == "lambda":
        return "N | N m"
    if prefix in ("y", "y_d"):
        return "m | rad"
    if name in ("fx", "fy", "fz"):  # requirements: <joint>.fx ... <joint>.tz
        return "N"
    if name in ("tx", "ty", "tz"):
        return "N m"
    return ""


def _read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    with path.open(newline="") as fh:
        rows = [r for r in csv.reader(fh) if r]
    if not rows:
        raise InputError(f"{path}: empty result file")
    header = [h.strip() for h in rows[0]]
    data = np.array([[float(x) for x in r] for r in rows[1:]], float).reshape(-1, len(header))
    return header, data


def write_npz(csv_path: str | Path, npz_path: str | Path | None = None) -> Path:
    """Write the result ``csv_path`` (and its sidecar) as ``npz_path`` (default: the CSV's
    name with ``.npz``); returns its path.  See the module notes for the keys."""
    csv_path = Path(csv_path)
    npz_path = csv_path.with_suffix(".npz") if npz_path is None else Path(npz_path)
    header, data = _read_csv(csv_path)
    meta = read_result_meta(csv_path) or {}
    joints = _joint_units(meta)
    arrays = {name: data[:, i] for i, name in enumerate(header)}
    clash = {"data", "columns", "units", "meta"} & set(arrays)
    if clash:
        raise InputError(f"{csv_path}: column(s) {', '.join(sorted(clash))} clash with the "
                         "archive's own keys")
    with npz_path.open("wb") as fh:
        np.savez_compressed(fh, data=data, columns=np.array(header, str),
                            units=np.array([column_unit(h, joints) for h in header], str),
                            meta=np.array(json.dumps(meta)), **arrays)
    return npz_path


def read_npz(path: str | Path) -> tuple[list[str], np.ndarray, dict]:
    """``(columns, data (N, ncol), meta)`` of a result archive written by :func:`write_npz`.

    Raises :class:`InputError` when the file is not such an archive.
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as r:
            columns = [str(c) for c in r["columns"]]
            data = np.asarray(r["data"], float)
            meta = json.loads(str(r["meta"]))
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"{path}: not a result archive of multibody_suite (expected the keys "
                         f"data, columns, units, meta; {exc})") from None
    if data.ndim != 2 or data.shape[1] != len(columns):
        raise InputError(f"{path}: 'data' has {data.shape} values for {len(columns)} columns")
    return columns, data, meta if isinstance(meta, dict) else {}


__all__ = ["column_unit", "read_npz", "write_npz"]
