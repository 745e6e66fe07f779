"""Animations of results: self-contained HTML (three.js inlined), GIF, MP4 (with ffmpeg).

``scene_from_result(csv)`` reads a result of ``multibody simulate | run | invert`` and builds
the :class:`~.scene.Scene`; :func:`~.html.write_html` and :func:`~.gif.write_gif` draw it.
The ``multibody animate`` command and the ``--animate FILE`` option are in
``multibody_control.animate_cli``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from multibody_dynamics.errors import InputError

from .gif import write_gif, write_mp4
from .html import render_html, write_html
from .scene import Scene, build_scene, configurations, frame_times, path_of
from .source import ResultSamples, read_result, resolve_robot

__all__ = ["Scene", "ResultSamples", "build_scene", "read_result", "render_html",
           "resolve_robot", "scene_from_result", "write_gif", "write_html", "write_mp4"]


def _frame_outputs(outputs) -> str | None:
    """The frame whose world coordinates the outputs are (``["tip.x", "tip.y"]`` -> "tip")."""
    frames = {o.rsplit(".", 1)[0] for o in outputs if o.rsplit(".", 1)[-1] in ("x", "y", "z")}
    plain = all("." in o and o.rsplit(".", 1)[-1] in ("x", "y", "z") for o in outputs)
    return frames.pop() if outputs and plain and len(frames) == 1 else None


def _task_path(model, q, res, scenario: Path, ee: str | None):
    """(frame, (N, 3) desired path) from the task of the inversion scenario that wrote the
    result (its frame coordinates such as ``tip.x``, ``tip.z`` at the result's times), or
    None when the scenario is gone or its task names no frame."""
    if not scenario.is_file():
        return None
    from ..inversion.scenario import load_inversion_scenario

    return task_path(model, q, res.t, load_inversion_scenario(scenario).task, ee)


def task_path(model, q: np.ndarray, t: np.ndarray, task, ee: str | None):
    """(frame, (N, 3) desired path [m]) of an inversion ``task`` at the times ``t`` (N,):
    its coordinates of ``ee`` (else of the first frame it names, such as ``tip.x``), the
    others those of the configurations ``q`` (N, nq); None when it names no frame."""
    frames = [n.rsplit(".", 1)[0] for n in task.names if "." in n]
    if not frames:
        return None
    frame = ee if ee in frames else frames[0]
    values = task(t)[0]
    desired = path_of(model, q, frame)  # coordinates the task leaves free stay as they are
    for i, n in enumerate(task.names):
        if n.startswith(frame + ".") and n[-1] in "xyz":
            desired[:, "xyz".index(n[-1])] = values[:, i]
    return frame, desired


def scene_from_result(path: str | Path, robot: str | None = None, fps: float = 30.0,
                      max_frames: int | None = None, deformation_scale: float | None = None
                      ) -> Scene:
    """Scene of a result CSV (see :mod:`.source` for how the robot is found).

    Parameters
    ----------
    path : result CSV of ``multibody simulate --out``, ``run`` or ``invert``
    robot : shipped robot name or model YAML path; overrides the sidecar
    fps : frames per second of result time [1/s]; samples are picked, never interpolated
    max_frames : cap on the number of frames (spread over the whole result)
    deformation_scale : flexible models: factor on the elastic deformation (default: chosen
        so that the largest deflection shows as 10 % of the link length, never below 1)
    """
    res = read_result(path)
    model = resolve_robot(res, robot)
    frames = frame_times(res.t, fps, max_frames)
    kind = res.meta.get("kind", "result")
    if not hasattr(model, "pin_model"):  # a flexible model
        from .flexible import flexible_scene

        return flexible_scene(model, res, frames, deformation_scale)
    q = configurations(model, res)
    if q is None:
        raise InputError(f"{res.path}: the q columns ({', '.join(res.q_names)}) are not the "
                         f"coordinates of {model.name} ({', '.join(model.coordinate_names)}); "
                         "pass --robot with the right model")
    ee = res.meta.get("task_frame") or model.end_effector
    desired = None
    q_ref = configurations(model, res, "q_ref")
    outputs = res.meta.get("outputs") or []
    frame = _frame_outputs(outputs)
    if q_ref is not None and ee:
        desired = path_of(model, q_ref, ee)
    elif frame is not None and all(f"y_d.{i}" in res.columns for i in range(len(outputs))):
        ee = frame
        desired = path_of(model, q, frame)  # coordinates not in the output stay as they are
        for i, o in enumerate(outputs):
            desired[:, "xyz".index(o[-1])] = res.columns[f"y_d.{i}"]
    elif res.meta.get("kind") == "invert" and res.meta.get("scenario"):
        found = _task_path(model, q, res, Path(res.meta["scenario"]), ee)
        if found is not None:
            ee, desired = found
    title = f"{model.name}: {kind} ({res.path.name})"
    scene = build_scene(model, q, res.t, frames, desired=desired, ee_frame=ee, title=title)
    closed = f", {len(model.closures)} closure(s) drawn closed" if model.closures else ""
    scene.info = (f"{scene.t.size} frames at {fps:g} fps of result time, "
                  f"t = {res.t[0]:.3g} to {res.t[-1]:.3g} s{closed}")
    if res.dropped:
        scene.info += f"; {res.dropped} samples with NaN configurations left out"
    return scene

