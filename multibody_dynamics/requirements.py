"""Requirements analysis: joint reaction loads along a motion (NASA CR-165977 App. B).

For every moving joint and sample, the full reaction wrench in the joint frame
(3 forces + 3 torques, see :meth:`RigidDynamics.reaction_wrenches`); its axis
component is what the actuator must supply, the other five load the structure
(bearings, gearbox, link).  The result holds the time histories and a peak table
and writes CSV and PNG.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import InputError
from .model import MultibodyModel
from .rigid import Payload, RigidDynamics
from .validation import as_matrix, as_vector, require_finite

COMPONENTS = ("fx", "fy", "fz", "tx", "ty", "tz")


@dataclass(frozen=True)
class RequirementsResult:
    """Reaction-load histories.

    Attributes
    ----------
    t : (N,) [s]
    joint_names : tuple of str (one per moving joint)
    wrenches : (N, njoints, 6)
        [fx, fy, fz (N), tx, ty, tz (N m)] in each joint frame, applied by the parent on the child.
    tau : (N, nv)
        Actuator loads [N | N m] (springs of passive joints subtracted).
    passive_effort : float
        Largest |tau| on a passive joint [N | N m]: non-zero means the motion
        cannot be produced by the actuators alone.
    """

    t: np.ndarray
    joint_names: tuple[str, ...]
    wrenches: np.ndarray
    tau: np.ndarray
    passive_effort: float

    def columns(self) -> list[str]:
        return ["t"] + [f"{j}.{c}" for j in self.joint_names for c in COMPONENTS]

    def table(self) -> np.ndarray:
        """(N, 1 + 6 njoints) array in the order of :meth:`columns`."""
        return np.column_stack([self.t, self.wrenches.reshape(len(self.t), -1)])

    def peaks(self) -> list[dict]:
        """Per joint: peak |value| of each component, of the force and torque norms, and when."""
        rows = []
        for j, name in enumerate(self.joint_names):
            w = self.wrenches[:, j, :]
            fn, tn = np.linalg.norm(w[:, :3], axis=1), np.linalg.norm(w[:, 3:], axis=1)
            row = {"joint": name,
                   **{c: float(np.max(np.abs(w[:, k]))) for k, c in enumerate(COMPONENTS)}}
            row.update(force=float(fn.max()), t_force=float(self.t[fn.argmax()]),
                       torque=float(tn.max()), t_torque=float(self.t[tn.argmax()]))
            rows.append(row)
        return rows

    def format_peaks(self) -> str:
        head = (f"{'joint':14s}" + "".join(f"{c:>10s}" for c in COMPONENTS)
                + f"{'|f| max':>10s}{'at s':>7s}{'|t| max':>10s}{'at s':>7s}")
        lines = ["peak joint reaction loads (N, N m; joint frames)", head, "-" * len(head)]
        for r in self.peaks():
            lines.append(f"{r['joint']:14s}" + "".join(f"{r[c]:10.2f}" for c in COMPONENTS)
                         + f"{r['force']:10.2f}{r['t_force']:7.2f}"
                         f"{r['torque']:10.2f}{r['t_torque']:7.2f}")
        if self.passive_effort > 1e-9:
            lines.append(f"note: passive joints would need up to {self.passive_effort:.3g} N m; "
                         "this motion is not reachable by the actuators alone")
        return "\n".join(lines)

    def to_csv(self, path: str | Path) -> Path:
        path = Path(path)
        with path.open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(self.columns())
            writer.writerows(np.round(self.table(), 9).tolist())
        return path

    def plot(self, path: str | Path, title: str = "") -> Path:
        """Force and torque components per joint over time, one row per joint."""
        from .plotting import save_figure, subplots

        n = len(self.joint_names)
        fig, axes = subplots(n, 2, figsize=(11, 1.6 * n + 1.0), sharex=True, squeeze=False)
        for j, name in enumerate(self.joint_names):
            for side, (sl, unit) in enumerate(((slice(0, 3), "N"), (slice(3, 6), "N m"))):
                ax = axes[j, side]
                for k, comp in zip(range(sl.start, sl.stop), COMPONENTS[sl]):
                    ax.plot(self.t, self.wrenches[:, j, k], label=comp, lw=1.2)
                ax.set_ylabel(f"{name}\n[{unit}]", fontsize=8)
                ax.grid(alpha=0.3)
                if j == 0:
                    ax.legend(ncol=3, fontsize=8, loc="upper right")
                    ax.set_title(("force" if side == 0 else "torque") + " on child, joint frame",
                                 fontsize=9)
        for ax in axes[-1]:
            ax.set_xlabel("t [s]")
        fig.suptitle(title or "joint reaction loads")
        return save_figure(fig, path)


def requirements_analysis(model: MultibodyModel, t, q, v, a, payload: Payload | None = None,
                          progress: bool = False) -> RequirementsResult:
    """Reaction wrenches of every joint along a sampled motion.

    Parameters
    ----------
    model : MultibodyModel
        An open-chain model (closures need the constrained dynamics).
    t : (N,) [s], increasing
    q : (N, nq), v : (N, nv), a : (N, nv)
    payload : Payload, optional
    progress : bool
        Show a progress bar on stderr.
    """
    if model.closures:
        raise InputError(
            f"{model.name}: requirements analysis of a model with loop closures "
            f"({', '.join(c.name for c in model.closures)}) needs the constraint forces; "
            "use an open-chain model"
        )
    t = require_finite(as_vector(t, np.size(t), "t"), "t")
    n = t.size
    if n < 1 or np.any(np.diff(t) <= 0):
        raise InputError("t: expected strictly increasing sample times")
    q = require_finite(as_matrix(q, (n, model.nq), "q"), "q")
    v = require_finite(as_matrix(v, (n, model.nv), "v"), "v")
    a = require_finite(as_matrix(a, (n, model.nv), "a"), "a")
    dyn = RigidDynamics(model)
    wrenches = np.empty((n, model.pin_model.njoints - 1, 6))
    tau = np.empty((n, model.nv))
    steps = range(n)
    if progress:
        from tqdm import tqdm

        steps = tqdm(steps, desc="requirements", unit="sample", leave=False)
    for k in steps:
        wrenches[k], tau[k] = dyn.reaction_wrenches(q[k], v[k], a[k], payload)
    passive = float(np.max(np.abs(tau[:, model.passive]))) if model.passive.any() else 0.0
    return RequirementsResult(t, model.joint_names, wrenches, tau, passive)
