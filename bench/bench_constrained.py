"""Projection forward dynamics (Aghili 2005) against pin.constraintDynamics, per call.

pinocchio has no revolute, planar or point-on-line closure, so the baseline is
``pin.constraintDynamics`` on the same kinematic tree closed by a 3-D point (spherical)
constraint between the same two frames, as ``test/test_projection.py`` does: the same
mechanism for the planar four-bar and five-bar (3 rows of rank 2); for the slider-crank the
point constraint also pins the slider (a locked mechanism, same tree and solver cost).
Before timing, the fast path is checked against the plain numpy implementation
(:func:`projected_acceleration`, eq. 32 for f_c, ``(A^+)^T f_c`` for lam).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import yaml

from multibody_dynamics.constrained_baselines import PinocchioConstraintDynamics
from multibody_dynamics.model import load_model
from multibody_dynamics.model.resources import share_dir
from multibody_dynamics.projection import ProjectedDynamics, projected_acceleration

from .common import ratio_entry

TARGET = 3.0  # issue "Closed loops" section 6: <= 3x pin.constraintDynamics (stretch 1.5x)
CASES = {  # robot: (closure frames, a configuration near the manifold)
    "four_bar": (("coupler_tip", "rocker_tip"), [0.5, 0.3, 1.5]),
    "slider_crank": (("slider_pin", "slider_rail"), [0.7, -1.3]),
    "five_bar": (("left_tip", "right_tip"), [2.0, -1.2, 1.1, 1.2]),
}
IDENTITY_RTOL = 1e-12


def _point_closure_model(robot, frames, folder: Path):
    base = load_model(robot)
    path = folder / f"{robot}_point.yaml"
    path.write_text(yaml.safe_dump({
        "name": f"{robot}_point", "urdf": str(share_dir() / "urdf" / f"{robot}.urdf"),
        "gravity": [float(x) for x in base.pin_model.gravity.linear],
        "closures": [{"name": "loop", "type": "spherical", "frame_a": frames[0],
                      "frame_b": frames[1]}]}))
    return load_model(path)


def _check_identity(pd: ProjectedDynamics, q, v, tau) -> float:
    """Largest relative difference of (a, f_c, lam) between the fast and the numpy path."""
    res = pd.forward_dynamics(q, v, tau)
    A, gamma = pd.constraints.jacobian_and_bias(q, v)
    M, f = pd._applied(q, v, tau)
    a, proj = projected_acceleration(M, f, A, gamma, pd.settings)
    f_c = M @ a - f
    f_c -= proj.P @ f_c
    lam = proj.A_pinv.T @ f_c
    err = max(float(np.max(np.abs(x - y)) / max(1.0, float(np.max(np.abs(y)))))
              for x, y in ((res.a, a), (res.f_c, f_c), (res.lam, lam)))
    if err > IDENTITY_RTOL or res.rank != proj.rank:
        raise AssertionError(f"{pd.model.name}: fast path differs from the numpy path by {err:.3g}")
    return err


def _entries(robot, frames, guess, rng, folder: Path) -> list[dict]:
    model = load_model(robot)
    pd = ProjectedDynamics(model)
    q = pd.project_position(np.array(guess, float)).q
    v = pd.project_velocity(q, rng.normal(size=model.nv))
    tau = rng.normal(size=model.nv)
    err = _check_identity(pd, q, v, tau)
    base = PinocchioConstraintDynamics(_point_closure_model(robot, frames, folder))
    base.acceleration(q, v, tau)
    baseline = "pin.constraintDynamics (3-D point closure)"
    fd = ratio_entry(f"{robot} forward_dynamics", lambda: pd.forward_dynamics(q, v, tau),
                     lambda: base.acceleration(q, v, tau), baseline, TARGET)
    fd["max_rel_diff_vs_numpy_path"] = err
    acc = ratio_entry(f"{robot} acceleration", lambda: pd.acceleration(q, v, tau),
                      lambda: base.acceleration(q, v, tau), baseline, TARGET)
    return [fd, acc]


def run() -> list[dict]:
    rng = np.random.default_rng(0)
    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        for robot, (frames, guess) in CASES.items():
            entries += _entries(robot, frames, guess, rng, Path(tmp))
    return entries
