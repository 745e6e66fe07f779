"""``multibody animate RESULT`` and the ``--animate FILE`` option of simulate, run, invert.

Hooked into :func:`multibody_control.cli.build_parser` by :func:`add_parser` (the
subcommand) and :func:`add_option` (the option on the three commands that write results).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from multibody_dynamics.errors import InputError

SUFFIXES = (".html", ".gif", ".mp4")
GIF_FPS = 15.0  # GIF frame delays are whole hundredths of a second; browsers slow < 20 ms
COMMANDS = ("simulate", "run", "invert")


def add_parser(sub) -> None:
    """Add the ``animate`` subcommand to the ``multibody`` subparsers."""
    p = sub.add_parser(
        "animate",
        help="animate a result of simulate/run/invert: self-contained HTML, GIF or MP4",
        description="3-D animation of a result CSV of `multibody simulate --out`, `run` or "
        "`invert` (the robot is read from the <stem>.meta.json beside it, or --robot): links "
        "from the URDF geometry, loops drawn closed, end-effector and desired paths; the HTML "
        "page works offline (three.js inlined) with a time slider and play/pause, #t=0.5 at "
        "the end of its URL shows t = 0.5 s.  The output format follows the suffix of --out.",
    )
    p.add_argument("result", help="result CSV (t, q.<joint>...) or .npz archive (--format npz)")
    p.add_argument("--out", "-o", action="append", metavar="FILE",
                   help="FILE.html, FILE.gif or FILE.mp4 (MP4: ffmpeg on PATH or the "
                   "imageio-ffmpeg wheel); repeat for several (default: the result's name "
                   "with .html)")
    _common_options(p)
    p.add_argument("--robot", help="shipped robot name or model YAML path (default: the "
                   "sidecar's, else the shipped robot whose coordinates are the q columns)")
    p.add_argument("--view", action="store_true",
                   help="also open the HTML page in the default web browser")
    p.set_defaults(func=run, outputs={"out": "file"})


def _common_options(p) -> None:
    p.add_argument("--fps", type=float, default=30.0, metavar="F",
                   help="frames per second of result time (default: %(default)s; GIF and MP4 at "
                   f"most {GIF_FPS:g})")
    p.add_argument("--max-frames", type=int, default=600, metavar="N",
                   help="at most N frames over the whole result (default: %(default)s)")
    p.add_argument("--deformation-scale", type=float, metavar="S",
                   help="flexible models: factor on the elastic deflection (default: automatic, "
                   "shown on the page)")


def add_option(choices: dict) -> None:
    """Add ``--animate FILE`` to simulate, run and invert (``choices``: the subparsers by
    name) and animate their result after they have written it."""
    for name in COMMANDS:
        p = choices[name]
        g = p.add_argument_group("animation")
        g.add_argument("--animate", action="append", metavar="FILE",
                       help="also write an animation of the result: FILE.html (offline page), "
                       "FILE.gif or FILE.mp4; repeat for several" + (
                           " (without --out the samples go to FILE's name with .csv)"
                           if name == "simulate" else ""))
        _common_options(g)
        p.set_defaults(func=_with_animation(p.get_default("func"), name),
                       outputs={**(p.get_default("outputs") or {}), "animate": "file"})


def _check_outputs(outputs, what: str) -> None:
    """Each animation file's suffix, and ffmpeg for an MP4, before any work starts."""
    for out in outputs:
        suffix = Path(out).suffix.lower()
        if suffix not in SUFFIXES:
            raise InputError(f"{what}: {out!r}: expected a file name ending in "
                             f"{', '.join(SUFFIXES)}")
        if suffix == ".mp4":
            from .animation.gif import require_ffmpeg

            require_ffmpeg(f"{what}: {out}")


def _check_numbers(args) -> None:
    if not (args.fps > 0):
        raise InputError(f"--fps: expected a positive frame rate [1/s], got {args.fps:g}")
    if args.max_frames < 2:
        raise InputError(f"--max-frames: expected at least 2, got {args.max_frames}")
    if args.deformation_scale is not None and not (args.deformation_scale > 0):
        raise InputError("--deformation-scale: expected a positive factor, got "
                         f"{args.deformation_scale:g}")


def _with_animation(func, command: str):
    def wrapped(args) -> int:
        if args.animate:
            _check_outputs(args.animate, "--animate")
            _check_numbers(args)
            if command == "simulate" and not args.out:
                args.out = str(Path(args.animate[0]).with_suffix(".csv"))
        start = time.time() - 1.0  # file times may be coarser than the clock
        rc = func(args)
        results = written_results(command, args, since=start) if (
            args.animate or command != "simulate") else []
        if command != "simulate":
            _note_scenario(results, args.scenario)
        if not args.animate:
            return rc
        if not results:
            print(f"multibody {command}: --animate: no result file was written, nothing to "
                  "animate", file=sys.stderr)
            return rc or 1
        render(results[0], args.animate, fps=args.fps, max_frames=args.max_frames,
               deformation_scale=args.deformation_scale)
        return rc

    wrapped.__doc__ = func.__doc__
    return wrapped


def _note_scenario(results, scenario) -> None:
    """Add the scenario file to the sidecars of ``results`` (the animation reads the desired
    task path from it)."""
    from multibody_dynamics.result_meta import meta_path

    for csv_path in results:
        mp = meta_path(csv_path)
        if mp.is_file():
            data = json.loads(mp.read_text())
            data["scenario"] = str(Path(scenario).resolve())
            mp.write_text(json.dumps(data, indent=1) + "\n")


def written_results(command: str, args, since: float = 0.0) -> list[Path]:
    """The result CSVs ``command`` wrote for ``args`` (modified after ``since``, a
    ``time.time()``), in the order written: the main one first."""
    if command == "simulate":
        candidates = [Path(args.out)]
    else:
        out, stem = Path(args.out), Path(args.scenario).stem
        # rigid: <stem>.csv; flexible inversions: <stem>.<design>.csv, the scenario's own
        # design written first
        candidates = [out / f"{stem}.csv", *out.glob(f"{stem}.*.csv")]
    fresh = [p for p in candidates if p.is_file() and p.stat().st_mtime >= since]
    return sorted(fresh, key=lambda p: p.stat().st_mtime_ns)


def render(result, outputs, robot=None, fps: float = 30.0, max_frames: int = 600,
           deformation_scale=None, view: bool = False) -> list[Path]:
    """Write the animations of ``result`` to ``outputs`` (format by suffix); returns them."""
    from .animation import scene_from_result, write_gif, write_html, write_mp4

    scene = scene_from_result(result, robot=robot, fps=fps, max_frames=max_frames,
                              deformation_scale=deformation_scale)
    written = []
    for out in outputs:
        out = Path(out)
        suffix = out.suffix.lower()
        if suffix == ".html":
            write_html(scene, out)
            frames = scene.t.size
        else:
            step = max(1, int(round(fps / GIF_FPS))) if fps > GIF_FPS else 1
            sub = scene.subsample(step)
            (write_gif if suffix == ".gif" else write_mp4)(sub, out)
            frames = sub.t.size
        print(f"wrote {out} ({frames} frames, {out.stat().st_size / 1024:.0f} KB)")
        written.append(out)
    if view:
        import webbrowser

        html = next((w for w in written if w.suffix.lower() == ".html"), None)
        if html is None:
            import tempfile

            html = write_html(scene, Path(tempfile.mkdtemp(prefix="multibody_")) / "view.html")
            print(f"wrote {html}")
        webbrowser.open(html.resolve().as_uri())
    return written


def run(args) -> int:
    """``multibody animate``."""
    outputs = args.out or [str(Path(args.result).with_suffix(".html"))]
    _check_outputs(outputs, "--out")
    _check_numbers(args)
    render(args.result, outputs, robot=args.robot, fps=args.fps, max_frames=args.max_frames,
           deformation_scale=args.deformation_scale, view=args.view)
    return 0
