"""Cost of the animation outputs (``multibody animate``, ``--animate``): scene, HTML, GIF, MP4.

A slider-crank result, ``simulate slider_crank --duration 2 --v0 12 -24`` (2001 samples), is
written once; in the same process each output of ``animate`` is then timed against that
simulate call (the baseline, run after a warm-up so that the compiled kernels are loaded and
the CLI's imports done), with the output's size.  The same GIF step for the Kinova arm of
example-robot-data (87 shapes, capsules for its meshes) shows how the renderer scales with
the drawn shapes.  ``python bench/run.py --only animation``.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from multibody_control.animation import scene_from_result, write_gif, write_html
from multibody_control.animation.gif import find_ffmpeg, write_mp4
from multibody_control.cli import main as cli

SIMULATE = ["simulate", "slider_crank", "--duration", "2", "--v0", "12", "-24", "--quiet"]


def _timed(func):
    t0 = time.perf_counter()
    out = func()
    return out, time.perf_counter() - t0


def _kinova_urdf() -> Path | None:
    """The Kinova URDF of the example-robot-data wheel (installed by the test extra)."""
    import sysconfig

    for key in ("purelib", "platlib"):
        path = (Path(sysconfig.get_paths()[key]) / "cmeel.prefix" / "share" / "example-robot-data"
                / "robots" / "kinova_description" / "robots" / "kinova.urdf")
        if path.is_file():
            return path
    return None


def _entry(name, wall, base, frames=None, nbytes=None, **extra) -> dict:
    e = {"name": name, "wall_s": wall, "baseline": "the simulate call that wrote the result",
         "baseline_wall_s": base, "time_ratio": wall / base, "load_avg_1min": os.getloadavg()[0]}
    if frames is not None:
        e["frames"] = frames
        e["ms_per_frame"] = 1e3 * wall / frames
    if nbytes is not None:
        e["bytes"] = nbytes
    e.update(extra)
    return e


def run() -> list[dict]:
    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "sc.csv"
        cli([*SIMULATE, "--out", str(csv)])  # warm-up: imports, compiled kernels
        rc, base = _timed(lambda: cli([*SIMULATE, "--out", str(csv)]))
        assert rc == 0
        import mpl_toolkits.mplot3d  # noqa: F401  (imported before the GIF timing)

        scene, wall = _timed(lambda: scene_from_result(csv, fps=30.0))
        entries.append(_entry("slider_crank: scene, 30 fps (pinocchio placements)", wall, base,
                              frames=int(scene.t.size)))
        page, wall = _timed(lambda: write_html(scene, Path(tmp) / "sc.html"))
        entries.append(_entry("slider_crank: HTML page", wall, base,
                              nbytes=page.stat().st_size))
        half = scene_from_result(csv, fps=15.0)
        gif, wall = _timed(lambda: write_gif(half, Path(tmp) / "sc.gif"))
        entries.append(_entry("slider_crank: GIF 480 x 400, 15 fps", wall, base,
                              frames=int(half.t.size), nbytes=gif.stat().st_size))
        if find_ffmpeg() is not None:
            mp4, wall = _timed(lambda: write_mp4(half, Path(tmp) / "sc.mp4"))
            entries.append(_entry("slider_crank: MP4 480 x 400, 15 fps (H.264)", wall, base,
                                  frames=int(half.t.size), nbytes=mp4.stat().st_size))
        urdf = _kinova_urdf()
        if urdf is not None:
            kcsv = Path(tmp) / "kinova.csv"
            assert cli(["simulate", str(urdf), "--duration", "1", "--quiet",
                        "--out", str(kcsv)]) == 0
            k = scene_from_result(kcsv, fps=15.0)
            gif, wall = _timed(lambda: write_gif(k, Path(tmp) / "k.gif"))
            entries.append(_entry(f"kinova ({len(k.shapes)} shapes): GIF 480 x 400, 15 fps",
                                  wall, base, frames=int(k.t.size), nbytes=gif.stat().st_size))
    return entries
