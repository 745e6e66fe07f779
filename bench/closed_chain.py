"""An n-link planar chain closed at its tip, written as URDF + model YAML (the scaling bench).

Revolute joints about z, links 0.3 m long along x with 1 kg bars, gravity along -y; the tip
is closed to a world anchor placed where the tip is at ``q0`` (a zig-zag, away from the
straight singular pose).  ``closure`` picks the closure set: ``"point"`` (planar point, 2
rows), ``"redundant"`` (the planar point plus a 3-D revolute closure at the same point: 7
rows of rank 2, as in ``test/test_projection_random.py``) or ``"spherical"`` (a 3-D point,
the mechanism ``pin.constraintDynamics`` can take: 3 rows of rank 2).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import yaml

from multibody_dynamics.model import load_model

_ROOT = Path(__file__).resolve().parents[1]
LENGTH, MASS = 0.3, 1.0
CLOSURES = {
    "point": [{"name": "point", "type": "planar_revolute", "frame_a": "tip", "frame_b": "anchor"}],
    "redundant": [{"name": "point", "type": "planar_revolute", "frame_a": "tip",
                   "frame_b": "anchor"},
                  {"name": "pin", "type": "revolute", "frame_a": "tip", "frame_b": "anchor",
                   "axis": [0, 0, 1]}],
    "spherical": [{"name": "loop", "type": "spherical", "frame_a": "tip", "frame_b": "anchor"}],
}


def _make_robots():
    path = _ROOT / "tools" / "make_robots.py"
    spec = importlib.util.spec_from_file_location("make_robots", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def zigzag(n: int) -> np.ndarray:
    """A configuration (n,) [rad] of the open chain whose tip becomes the anchor: alternating
    bends of +-0.6 rad after a first joint at 0.3 rad, so no two neighbours are aligned."""
    q = np.where(np.arange(n) % 2 == 0, 0.6, -0.6)
    q[0] = 0.3
    return q


def closed_chain_model(n: int, folder: Path, closure: str = "point"):
    """The n-link chain closed at its tip (see the module docstring); files go to ``folder``."""
    mr = _make_robots()
    u = mr.Urdf(f"chain{n}", f"{n}-link planar chain closed at its tip")
    parent, x0 = "world", 0.0
    for i in range(n):
        u.link(f"l{i}", MASS, com=(LENGTH / 2, 0, 0),
               inertia=mr.bar_inertia(MASS, LENGTH, 0.03, 0.02, axis="x"),
               box=(LENGTH, 0.03, 0.02), box_origin=(LENGTH / 2, 0, 0))
        u.joint(f"j{i}", "revolute", parent, f"l{i}", xyz=(x0, 0, 0),
                limit=(-4 * math.pi, 4 * math.pi, 10.0, 10.0))
        parent, x0 = f"l{i}", LENGTH
    u.frame("tip", parent, (x0, 0, 0))
    ang = np.cumsum(zigzag(n))
    u.frame("anchor", "world", (LENGTH * np.cos(ang).sum(), LENGTH * np.sin(ang).sum(), 0.0))
    folder = Path(folder)
    (folder / f"chain{n}.urdf").write_text(u.text())
    path = folder / f"chain{n}_{closure}.yaml"
    path.write_text(yaml.safe_dump({"name": f"chain{n}_{closure}", "urdf": f"chain{n}.urdf",
                                    "gravity": [0.0, -9.81, 0.0],
                                    "closures": CLOSURES[closure]}))
    return load_model(path)
