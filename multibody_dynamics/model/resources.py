"""Where the shipped robot descriptions live, and which schema each one uses.

Every shipped model is ``config/robots/<robot>.yaml``. Two schemas share that directory: a
file with a ``bodies`` list is a flexible model (loaded by
:func:`multibody_dynamics.flexible.loader.load_flexible_model`), every other file is a rigid
model (URDF + model YAML, loaded by :func:`multibody_dynamics.model.load_model`, which returns
pinocchio-backed models only). :func:`shipped_robots` lists the rigid models,
:func:`shipped_flexible_models` the flexible ones.

The package data (``urdf/``, ``config/``, ``launch/``) is found, in order, in:

1. ``$MULTIBODY_SUITE_SHARE`` (an explicit override, e.g. for tests);
2. the ament index of a ROS 2 install (``colcon build`` puts it in
   ``share/multibody_suite``);
3. the source tree this module was imported from (``pip install -e .``);
4. ``<sys.prefix>/share/multibody_suite`` (a plain ``pip install .``).
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import yaml

from ..yaml_io import load_yaml

PACKAGE = "multibody_suite"


def _candidates():
    env = os.environ.get("MULTIBODY_SUITE_SHARE")
    if env:
        yield Path(env)
    try:  # ament_index_python is present on ROS machines and with the ROS wheels
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        try:
            yield Path(get_package_share_directory(PACKAGE))
        except (PackageNotFoundError, OSError, ValueError):  # OSError: AMENT_PREFIX_PATH unset
            pass
    except ImportError:
        pass
    yield Path(__file__).resolve().parents[2]
    yield Path(sys.prefix) / "share" / PACKAGE


@functools.cache
def share_dir() -> Path:
    """Directory holding ``urdf/`` and ``config/robots/`` of the shipped robots."""
    for cand in _candidates():
        if (cand / "config" / "robots").is_dir():
            return cand
    raise FileNotFoundError(
        "multibody_suite data (config/robots) not found; set MULTIBODY_SUITE_SHARE to the "
        "directory that holds urdf/ and config/"
    )


def robots_dir() -> Path:
    """``config/robots`` of the package data: every shipped model, rigid and flexible."""
    return share_dir() / "config" / "robots"


#: Top-level keys that make a model YAML a flexible model (see the module docstring).
FLEXIBLE_KEYS = ("bodies",)


def flexible_schema_key(path: str | Path) -> str | None:
    """The key (``"bodies"``) that makes the model YAML at ``path`` a flexible
    model, or None for a rigid model. A missing, unreadable or malformed file gives None: the
    rigid loader then reports the problem with the file."""
    path = Path(path)
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        return None
    try:
        raw = load_yaml(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(raw, dict):
        return None
    return next((k for k in FLEXIBLE_KEYS if k in raw), None)


def is_flexible_file(path: str | Path) -> bool:
    """True when the model YAML at ``path`` has the flexible schema (a ``bodies`` list)."""
    return flexible_schema_key(path) is not None


def _shipped(flexible: bool) -> list[str]:
    return sorted(p.stem for p in robots_dir().glob("*.yaml") if is_flexible_file(p) == flexible)


def shipped_robots() -> list[str]:
    """Names of the shipped rigid robots (``config/robots/*.yaml`` of the rigid schema), sorted;
    each loads with :func:`~multibody_dynamics.model.load_model`."""
    return _shipped(flexible=False)


def shipped_flexible_models() -> list[str]:
    """Names of the shipped flexible models (``config/robots/*.yaml`` with ``bodies``),
    sorted; each loads with
    :func:`~multibody_dynamics.flexible.loader.load_flexible_model`."""
    return _shipped(flexible=True)
