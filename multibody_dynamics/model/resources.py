"""Where the shipped robot descriptions live.

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
    return share_dir() / "config" / "robots"


def shipped_robots() -> list[str]:
    """Names of the robots shipped with the package, sorted."""
    return sorted(p.stem for p in robots_dir().glob("*.yaml"))
