"""``multibody simulate ... --view`` and ``multibody run ... --view``: watch a simulation or a
closed-loop run live in the browser (and the result of ``invert`` served the same way once
written).

Hooked into :func:`multibody_control.cli.build_parser` by :func:`add_option` after the
other options of ``simulate`` (it wraps the command).  Before the run it builds the scene's
static part, starts the viewer's HTTP server on 127.0.0.1 (a free port, or ``--view-port``)
and prints its URL; the simulator passes each sample to the viewer
(:mod:`multibody_control.animation.live`); after the run the server stays up ``--view-keep``
seconds (Ctrl-C stops it sooner).  A Ctrl-C during the run ends it as without ``--view``
(the samples computed are written, marked partial) and stops the server at once.  Flexible
models are drawn with their deformation (``--deformation-scale``, else the factor of the
quasi-static deflection at the start).

``run ... --view`` takes the port before the command, serves the page once the scenario's
reference is sampled (:func:`run_scene`: the desired path is known then) and streams the
closed loop's samples (``run_scenario(..., on_sample=...)``).  ``invert ... --view`` takes
the port before the command (a port in use fails before any work) and streams the open-loop
check of a rigid inversion as it integrates (:func:`check_scene`); the inversion itself is
not streamed, and without a check (flexible models, ``verify: false``) the page of the result
is served once it is written.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from multibody_dynamics.errors import InputError

DEFAULT_KEEP = 300.0  # s the page is served after the run (it keeps its frames once loaded)


def add_option(choices: dict) -> None:
    """Add ``--view``, ``--view-port``, ``--view-keep`` and ``--no-browser`` to simulate (live)
    and to run and invert (the result's page served when written)."""
    for name in ("simulate", "run", "invert"):
        _add(choices[name], name)


def _add(p, name: str) -> None:
    g = p.add_argument_group("live viewer")
    g.add_argument("--view", action="store_true",
                   help="watch the run live: serve the animation page on http://127.0.0.1 "
                   "and stream the frames (--fps, --max-frames) while the simulation computes "
                   "them" if name == "simulate" else
                   "watch the run live: serve the animation page on http://127.0.0.1 once "
                   "the reference is sampled and stream the frames (--fps, --max-frames) while "
                   "the closed loop computes them" if name == "run" else
                   "rigid models: watch the open-loop check (the plant under the feedforward) "
                   "live on http://127.0.0.1 as it integrates; otherwise (no check, flexible "
                   "models) serve the result's page once it is written")
    g.add_argument("--view-port", type=int, default=0, metavar="PORT",
                   help="TCP port of the live viewer (default: a free one)")
    g.add_argument("--view-keep", type=float, default=DEFAULT_KEEP, metavar="S",
                   help="keep serving the page S seconds after the run (default: %(default)g; "
                   "Ctrl-C stops sooner)")
    g.add_argument("--no-browser", action="store_true",
                   help="with --view: print the URL only, do not open a browser")
    func = p.get_default("func")
    wrap = {"simulate": _with_view, "run": _with_run_view}.get(name)
    p.set_defaults(func=wrap(func) if wrap else _with_page(func, name))


def _check(args) -> None:
    """The viewer's options, before anything is loaded."""
    if not 0 <= args.view_port <= 65535:
        raise InputError(f"--view-port: expected a TCP port in 1-65535 (0: a free one), got "
                         f"{args.view_port}")
    if not (np.isfinite(args.view_keep) and args.view_keep >= 0):
        raise InputError(f"--view-keep: expected a time >= 0 in s, got {args.view_keep:g}")
    scale = getattr(args, "deformation_scale", None)
    if scale is not None and not (np.isfinite(scale) and scale > 0):
        raise InputError(f"--deformation-scale: expected a positive factor, got {scale:g}")
    if not (args.fps > 0):
        raise InputError(f"--fps: expected a positive frame rate [1/s], got {args.fps:g}")
    if args.max_frames < 2:
        raise InputError(f"--max-frames: expected at least 2, got {args.max_frames}")
    if getattr(args, "duration", None) is not None and not (
            np.isfinite(args.duration) and args.duration > 0):
        raise InputError(f"--duration: expected a positive time in s, got {args.duration:g}")


def start_viewer(args):
    """``(live scene, running server)`` for ``simulate args``; InputError for a port that
    cannot be used, before the run.  A flexible model is drawn with ``--deformation-scale``,
    else with the factor of its static deflection at the start
    (:func:`~.animation.flexible.static_deformation_scale`), printed."""
    from multibody_dynamics.robot import has_elastic_coordinates, load_robot

    from .animation.live import LiveScene, LiveServer

    model = load_robot(args.robot)
    title = f"{model.name}: simulate (live)"
    scale = None
    if has_elastic_coordinates(model) or not hasattr(model, "pin_model"):
        from .animation.flexible import static_deformation_scale

        chain = getattr(model, "chain", model)
        q0 = chain.neutral() if args.q0 is None or len(args.q0) != model.nv else np.asarray(
            args.q0, float)
        scale = args.deformation_scale
        if scale is None:
            tau = args.tau if args.tau is not None and len(args.tau) == model.nu else None
            scale = static_deformation_scale(model, q0, tau)
            print(f"live viewer: elastic deformation drawn x{scale:g} (from the static "
                  "deflection at the start; --deformation-scale to choose)", flush=True)
        title += f", deformation x{scale:g}"
    else:
        q0 = model.q_initial
        if args.q0 is not None and len(args.q0) == model.nq:
            q0 = np.asarray(args.q0, float)
    live = LiveScene(model, q0, args.duration, fps=args.fps, max_frames=args.max_frames,
                     title=title, deformation_scale=scale)
    return live, LiveServer(live, args.view_port).start()


def _serve(server, args, rc: int) -> int:
    """Serve ``--view-keep`` seconds after the command (Ctrl-C stops sooner); returns rc."""
    print(f"live viewer: serving {server.url} for {args.view_keep:g} s more (Ctrl-C stops)",
          flush=True)
    try:
        time.sleep(args.view_keep)
    except KeyboardInterrupt:
        print("live viewer: stopped", file=sys.stderr)
    return rc


def _open(server, args) -> None:
    print(f"live viewer: {server.url}", flush=True)
    if not args.no_browser:
        import webbrowser

        webbrowser.open(server.url)


def check_scene(sc, result, fps: float = 30.0, max_frames: int = 600):
    """The live scene of the open-loop check of the inversion ``result`` (InversionResult) of
    the scenario ``sc`` (InversionScenario): frames over the result's time span, the task
    frame's path and, dashed, the task's desired path."""
    from .animation import task_path
    from .animation.live import LiveScene

    model = sc.model
    found = task_path(model, result.q, result.t, sc.task, model.end_effector)
    ee, desired = found if found is not None else (model.end_effector, None)
    return LiveScene(model, result.q[0], float(result.t[-1] - result.t[0]), fps=fps,
                     max_frames=max_frames, ee_frame=ee, desired=desired,
                     title=f"{model.name}: invert, open-loop check under the feedforward "
                     "(live)")


def _with_page(func, command: str):
    """invert --view: the port is taken before the command; the open-loop check of a rigid
    inversion is streamed as it integrates (:func:`check_scene`), else the page of the result
    the command writes (:func:`~.animate_cli.written_results`, the main one) is served after
    it."""
    def wrapped(args) -> int:
        if not args.view:
            return func(args)
        _check(args)
        from .animate_cli import written_results
        from .animation import render_html, scene_from_result
        from .animation.live import LiveServer

        server = LiveServer(None, args.view_port).start()
        scenes: list = []

        args.on_verify = _attacher(server, scenes, args, check_scene)
        try:
            start = time.time() - 1.0  # file times may be coarser than the clock
            rc = _stream(func, args, server, scenes)  # served here when streamed
            if scenes:
                return rc
            results = written_results(command, args, since=start)
            if rc == 130 or not results:
                if not results:
                    print(f"multibody {command}: --view: no result file was written, nothing "
                          "to show", file=sys.stderr)
                return rc
            scene = scene_from_result(results[0], fps=args.fps, max_frames=args.max_frames,
                                      deformation_scale=args.deformation_scale)
            server.page = render_html(scene)
            _open(server, args)
            return _serve(server, args, rc)
        finally:
            server.stop()

    wrapped.__doc__ = func.__doc__
    return wrapped


def _stream(func, args, server, scenes: list) -> int:
    """Run the command ``func(args)`` whose samples go to the live scene (``scenes``: the one
    scene, or empty until the command has made it), end the stream with its outcome, then
    serve ``--view-keep`` s (not after Ctrl-C: exit 130 at once)."""
    rc = 130
    try:
        rc = func(args)
    finally:
        for live in scenes:
            live.finish("completed" if rc == 0 else f"ended early (exit status {rc})")
    if rc == 130 or not scenes:  # Ctrl-C during the run: stop now
        return rc
    print(f"live viewer: {len(scenes[0].frames)} frames", flush=True)
    return _serve(server, args, rc)


def _with_view(func):
    def wrapped(args) -> int:
        if not args.view:
            return func(args)
        _check(args)
        live, server = start_viewer(args)
        try:
            _open(server, args)
            args.on_sample = live.add_sample
            return _stream(func, args, server, [live])
        finally:
            server.stop()

    wrapped.__doc__ = func.__doc__
    return wrapped


def run_scene(sc, ref, fps: float = 30.0, max_frames: int = 600):
    """The live scene of the closed-loop run ``sc`` (a RunScenario) whose reference ``ref``
    (SampledReference) is sampled: frames over the reference's time span, the task frame's
    path and, dashed, the path the reference gives it."""
    from .animation.live import LiveScene
    from .animation.scene import path_of

    model = sc.model
    ee = sc.task_frame or model.end_effector
    return LiveScene(model, ref.q[0], float(ref.t[-1] - ref.t[0]), fps=fps,
                     max_frames=max_frames, title=f"{model.name}: run (live)", ee_frame=ee,
                     desired=path_of(model, ref.q, ee) if ee else None)


def _attacher(server, scenes: list, args, make):
    """The command's callback once its samples can be streamed: builds the live scene
    ``make(*what, fps=..., max_frames=...)`` from what the command hands over, serves it,
    keeps it in ``scenes``, opens the browser (unless ``--no-browser``) and returns the
    scene's ``add_sample`` for the command to pass its samples to."""
    def attach(*what):
        live = make(*what, fps=args.fps, max_frames=args.max_frames)
        server.attach(live)
        scenes.append(live)
        _open(server, args)
        return live.add_sample
    return attach


def _with_run_view(func):
    """run --view: the port is taken before the command; once the reference is sampled the
    page is served and the closed loop's samples are streamed as it computes them."""
    def wrapped(args) -> int:
        if not args.view:
            return func(args)
        _check(args)
        from .animation.live import LiveServer

        server = LiveServer(None, args.view_port).start()  # 503 until the reference is known
        scenes: list = []

        args.on_reference = _attacher(server, scenes, args, run_scene)
        try:
            return _stream(func, args, server, scenes)
        finally:
            server.stop()

    wrapped.__doc__ = func.__doc__
    return wrapped
