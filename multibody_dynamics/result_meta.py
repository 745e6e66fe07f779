"""What a result CSV cannot say: the robot it belongs to, in a JSON file beside it.

``multibody simulate --out run.csv`` writes ``run.csv`` and ``run.meta.json``; ``run`` and
``invert`` do the same for each CSV they write.  The CSV itself is unchanged (its first row is
the header, every other row numbers), so existing readers keep working; readers that want the
model (``multibody animate``) read the sidecar with :func:`read_result_meta`.

The sidecar holds::

    {"format": "multibody_result", "version": 1, "kind": "simulate" | "run" | "invert",
     "robot": "<shipped name>", "model_path": "<absolute model file path or null>",
     "flexible": false, ...command-specific keys (end_effector, outputs)}

and, for a result cut short by Ctrl-C (:func:`mark_partial`), ``"partial": true`` and the
``"message"`` saying where it stopped.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import InputError

FORMAT = "multibody_result"
VERSION = 1


def meta_path(csv_path: str | Path) -> Path:
    """``results/run.csv`` -> ``results/run.meta.json``."""
    p = Path(csv_path)
    return p.with_name(p.stem + ".meta.json") if p.suffix == ".csv" else p.with_name(
        p.name + ".meta.json")


def write_result_meta(csv_path: str | Path, kind: str, robot: str, model_path=None,
                      flexible: bool = False, **extra) -> Path:
    """Write the sidecar of ``csv_path`` (see the module notes); returns its path.

    Parameters
    ----------
    kind : "simulate", "run" or "invert"
    robot : model name (a shipped robot's name loads it)
    model_path : path of the model YAML, stored absolute (loads a model that is not shipped)
    extra : JSON-serializable command-specific keys
    """
    data = {"format": FORMAT, "version": VERSION, "kind": kind, "robot": robot,
            "model_path": None if model_path is None else str(Path(model_path).resolve()),
            "flexible": bool(flexible), **extra}
    path = meta_path(csv_path)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def write_model_meta(csv_path: str | Path, kind: str, model, **extra) -> Path:
    """:func:`write_result_meta` for a loaded rigid ``MultibodyModel`` (a model loaded from
    a plain URDF or MJCF file, without a model YAML, is found again by that file)."""
    source = model.config_path or (model.urdf_path if Path(model.urdf_path).is_file() else None)
    return write_result_meta(csv_path, kind, model.name, source, False,
                             end_effector=model.end_effector, **extra)


def mark_partial(csv_path: str | Path, message: str) -> Path:
    """Mark the result ``csv_path`` as partial (Ctrl-C or a failure stopped the computation):
    its sidecar gets ``"partial": true`` and ``"message"``; returns the sidecar's path."""
    path = meta_path(csv_path)
    data = json.loads(path.read_text()) if path.is_file() else {"format": FORMAT,
                                                                "version": VERSION}
    data.update(partial=True, message=" ".join(message.split()))
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def read_result_meta(csv_path: str | Path) -> dict | None:
    """The sidecar of ``csv_path`` as a dict, or None when there is none.

    Raises :class:`InputError` when the sidecar exists but is not one of ours.
    """
    path = meta_path(csv_path)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"{path}: expected a JSON object with \"format\": \"{FORMAT}\"")
    return data
