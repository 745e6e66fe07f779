"""Live viewer: the player page served over local HTTP while a simulation or a closed-loop run
computes its samples.

:class:`LiveScene` takes the samples of a run as they are recorded
(``simulate(..., on_sample=live.add_sample)``, the same in ``run_scenario``) and picks the
frames exactly as :func:`~.scene.frame_times` does for a finished result: frame ``k`` is the
last sample at or before ``t0 + k (duration / (n - 1))`` (``1 / fps`` unless ``max_frames``
spreads them), never interpolated.  Its placements come from the same :func:`~.scene.rig` and
:func:`~.scene.frame_poses` as the static page's.

:class:`LiveServer` (stdlib ``http.server`` in a thread, bound to 127.0.0.1) serves

* ``/``: the player page (:func:`~.html.render_page`) with the scene's static part: shapes,
  camera, title; no frame yet;
* ``/events``: the frames as Server-Sent Events (``id`` = frame index, ``data`` = JSON
  ``{"k", "t", "pose", "seg", "ee"}``), from the first one (or after the ``Last-Event-ID``
  a reconnecting browser sends), then an ``end`` event with the run's outcome; the stream
  closes after it.

The camera is fitted before the motion is known: to the shapes over 40 configurations about
the start (every velocity coordinate moved by up to pi rad, prismatic ones by up to 0.5 m;
a flexible model's joints so, its deformation as at the start), which covers what a
revolute chain can reach; the end-effector path grows by one point per frame.  Flexible
models are placed by :class:`~.flexible.FlexibleDrawing` (as on the static page) with a
deformation factor fixed before the run.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pinocchio as pin

from multibody_dynamics.errors import InputError

from .flexible import FlexibleDrawing
from .html import render_page
from .scene import DESIRED_COLOR, PATH_COLOR, Scene, _robot_scale, _thin, frame_poses, rig

_TOL = 1e-12  # as frame_times: a sample within 1e-12 s after a frame time still counts


def _workspace(model, q0: np.ndarray, n: int = 40, seed: int = 0) -> np.ndarray:
    """(n + 1, nq) configurations about ``q0``: q0 and ``q0 (+) dv`` for random ``dv``, each
    revolute coordinate in [-pi, pi] rad, prismatic ones in [-0.5, 0.5] m."""
    pm = model.pin_model
    rng = np.random.default_rng(seed)
    span = np.full(pm.nv, np.pi)
    for jid in range(1, pm.njoints):
        name = pm.joints[jid].shortname()
        if name.startswith("JointModelP") and not name.startswith("JointModelPlanar"):
            j = pm.joints[jid]
            span[j.idx_v:j.idx_v + j.nv] = 0.5
    qs = [q0] + [pin.integrate(pm, q0, rng.uniform(-1, 1, pm.nv) * span) for _ in range(n)]
    return np.array(qs)


class LiveScene:
    """Frames of a run, picked from its samples while it runs (thread-safe).

    Parameters
    ----------
    model : MultibodyModel (rigid), or a flexible model (FlexibleChain, ClosedFlexibleChain:
        drawn by :class:`~.flexible.FlexibleDrawing`, its deformation ``deformation_scale``
        times its size)
    q0 : (nq,) a configuration near the start (the camera is fitted about it)
    duration : planned length of the run [s] (the frame times, as for the finished result)
    fps : frames per second of result time [1/s]; max_frames : cap on the frame count
    title : page title; ee_frame : frame whose path is drawn (default the model's end effector)
    desired : (P, 3) desired path of that frame [m], known before the run (``run``: the
        reference's), drawn dashed from the start; optional
    deformation_scale : flexible models: factor on the elastic coordinates in the drawing
        (default 1); the run is not known yet, so it cannot be fitted to it as the static
        page's is
    """

    def __init__(self, model, q0, duration: float, fps: float = 30.0, max_frames: int = 600,
                 title: str = "", ee_frame: str | None = None,
                 desired: np.ndarray | None = None, deformation_scale: float | None = None):
        if not (np.isfinite(fps) and fps > 0):
            raise InputError(f"fps: expected a positive frame rate [1/s], got {fps}")
        if not (np.isfinite(duration) and duration > 0):
            raise InputError(f"duration: expected a positive time in s, got {duration}")
        self.model = model
        self.duration, self.fps = float(duration), float(fps)
        n = int(np.floor(self.duration * fps + 1e-9)) + 1
        self.n_frames = max(2, min(n, max_frames))
        q0 = np.asarray(q0, float)
        self.flexible = None if hasattr(model, "pin_model") else FlexibleDrawing(
            model, 1.0 if deformation_scale is None else deformation_scale)
        if self.flexible is None:
            self._rigid(model, q0, ee_frame)
        else:
            self._flexible(q0)
        self.title = title or f"{self.name}: simulate (live)"
        self.paths = [] if desired is None else [
            {"name": "desired path", "color": DESIRED_COLOR, "dashed": True,
             "points": np.round(_thin(np.asarray(desired, float)), 5).reshape(-1).tolist()}]
        self.frames: list[str] = []  # JSON text of each frame, in order
        self.times: list[float] = []
        self.emitted_at: list[float] = []  # time.perf_counter() when each frame was ready
        self.ended: str | None = None  # the outcome once the run has ended
        self.dropped = 0
        self._grid: np.ndarray | None = None
        self._last: tuple[float, np.ndarray] | None = None
        self._due = -np.inf  # a sample after this time [s] passes the next frame time
        self._cond = threading.Condition()

    def _rigid(self, model, q0: np.ndarray, ee_frame: str | None) -> None:
        """Shapes, camera and end effector of a rigid model (see the module notes)."""
        self.pm, self.name = model.pin_model, model.name
        self.data = self.pm.createData()
        qs = _workspace(model, q0)
        self.scale = _robot_scale(self.pm, self.data, qs, np.arange(len(qs)))
        self.shapes, self.placements, self.closures = rig(model, self.scale)
        self.ee = ee_frame or model.end_effector
        self.ee_id = model.frame_id(self.ee) if self.ee else None
        self.ee_label = self.ee if self.ee_id is not None else None
        self._reach = Scene(t=np.zeros(len(qs)), shapes=self.shapes,
                            poses=np.array([self._poses(q)[0] for q in qs]),
                            segments=np.zeros((len(qs), 0, 2, 3)), scale=self.scale)
        self.nseg = sum(2 if self._rail(c) else 1 for c, _, _ in self.closures)

    def _flexible(self, q0: np.ndarray, n: int = 40, seed: int = 0) -> None:
        """Shapes, camera and end effector of a flexible model: the camera fitted to the
        drawing at ``q0`` and ``n`` configurations with each joint moved by up to pi rad
        (prismatic ones 0.5 m), the deformation as at ``q0``."""
        d = self.flexible
        self.name, self.shapes, self.scale = d.name, d.shapes, d.reach
        self.nseg = len(d.closures)
        self.ee_label = None if d.ee is None else f"{d.ee} tip"
        span = np.array([np.pi if b.joint_type == "revolute" else 0.5 for b in d.chain.bodies])
        rng = np.random.default_rng(seed)
        qs = [q0] + [np.r_[q0[:span.size] + rng.uniform(-1, 1, span.size) * span,
                           q0[span.size:]] for _ in range(n)]
        self._reach = Scene(t=np.zeros(len(qs)), shapes=self.shapes,
                            poses=np.array([d.frame(q)[0] for q in qs]),
                            segments=np.zeros((len(qs), 0, 2, 3)), scale=self.scale,
                            deformation_scale=d.s)

    @staticmethod
    def _rail(c) -> bool:
        return c.axis is not None and c.type in ("point_on_line", "prismatic", "line", "slider")

    def _poses(self, q: np.ndarray):
        return frame_poses(self.pm, self.data, self.placements, self.closures, q)

    def head(self) -> dict:
        """The static part as the page's scene JSON: shapes, camera, no frame yet."""
        data = self._reach.to_json()
        data.update(title=self.title, t=[], poses=[], segments=[], paths=self.paths,
                    info=f"live: waiting for the first sample ({self.fps:g} fps of result time)")
        data["live"] = {"events": "/events", "nseg": self.nseg, "capacity": self.n_frames + 1,
                        "ee": self.ee_label,
                        "ee_color": PATH_COLOR, "fps": self.fps}
        return data

    def frame(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Poses (S, 7), segments (K, 2, 3) [m] and end-effector position (3,) at ``q``.

        The segments are each closure's gap (frame a to frame b) and, for closures with an
        axis, the stretch of that axis through frame b from the frame a's point +- 0.15 of
        the robot's size (the static page spans the whole run's range instead).  A flexible
        model's are its closures' two points (:meth:`.flexible.FlexibleDrawing.frame`), its
        end effector's position the true (unscaled) one."""
        if self.flexible is not None:
            poses, segs = self.flexible.frame(q)
            return poses, segs, self.flexible.ee_point(q)
        poses, gap = self._poses(q)
        segs = []
        for (c, _, _), (a, b, R) in zip(self.closures, gap):
            segs.append([a, b])
            if self._rail(c):
                axis = np.asarray(c.axis, float) / np.linalg.norm(c.axis)
                s = float(axis @ (R.T @ (a - b)))
                lo, hi = min(s, 0.0) - 0.15 * self.scale, max(s, 0.0) + 0.15 * self.scale
                segs.append([b + R @ axis * lo, b + R @ axis * hi])
        ee = None
        if self.ee_id is not None:
            ee = self.data.oMf[self.ee_id].translation.copy()
        return poses, np.array(segs, float).reshape(-1, 2, 3), ee

    def _emit(self, t: float, q: np.ndarray) -> None:
        if not np.all(np.isfinite(q)):
            self.dropped += 1
            return
        poses, segs, ee = self.frame(q)
        k = len(self.frames)
        text = json.dumps({"k": k, "t": round(float(t), 6),
                           "pose": np.round(poses, 5).reshape(-1).tolist(),
                           "seg": np.round(segs, 5).reshape(-1).tolist(),
                           "ee": None if ee is None else np.round(ee, 5).tolist()},
                          separators=(",", ":"), allow_nan=False)
        with self._cond:
            self.frames.append(text)
            self.times.append(float(t))
            self.emitted_at.append(time.perf_counter())
            self._cond.notify_all()

    def add_sample(self, t: float, q: np.ndarray) -> None:
        """One sample of the run (the simulator's ``on_sample``; ``q`` is not modified later):
        emits the frames whose time it has passed (each the sample before it).  A frame
        whose sample has NaN or inf is left out (counted in ``dropped``)."""
        t = float(t)
        if t <= self._due:  # the common case: no frame time passed, keep the sample
            self._last = (t, q)
            return
        if self._grid is None:
            self._grid = np.linspace(t, t + self.duration, self.n_frames)
            self._next = 0
        # the last frame is the last sample, whenever the run ends (as for the finished
        # result, whose frame times end at its last sample): emitted by finish()
        while self._next < self._grid.size - 1 and self._grid[self._next] + _TOL < t:
            if self._last is not None:
                self._emit(*self._last)
            self._next += 1
        self._due = (float(self._grid[self._next]) + _TOL if self._next < self._grid.size - 1
                     else np.inf)
        self._last = (t, q)

    def finish(self, outcome: str = "completed") -> None:
        """The run has ended: the frames still due (the last sample's), then the end event.
        A run that ended early (failure, Ctrl-C) ends with its last sample's frame; the
        static page of such a result spreads its frames over the shorter run instead."""
        if self._last is not None and self._grid is not None:
            t = self._last[0]
            # a run that reached its end: the frames due up to it are its last sample (frame
            # times in (previous sample, last sample]); one that ended early ends with a
            # single frame of its last sample, like the static page (whose frame times span
            # the samples there are)
            if t >= self._grid[-1] - 1e-9:
                while self._next < self._grid.size - 1:
                    self._emit(*self._last)
                    self._next += 1
            self._emit(*self._last)
            self._next = self._grid.size
        with self._cond:
            self.ended = outcome
            self._cond.notify_all()

    def wait(self, k: int, timeout: float) -> tuple[list[str], bool]:
        """The frames from index ``k`` (waiting up to ``timeout`` s for one), and whether the
        run has ended."""
        with self._cond:
            if k >= len(self.frames) and self.ended is None:
                self._cond.wait(timeout)
            return self.frames[k:], self.ended is not None

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


class _Handler(BaseHTTPRequestHandler):
    server: LiveServer

    def log_message(self, format, *args) -> None:  # noqa: A002  quiet: no line per request
        pass

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        path = self.path.split("?", 1)[0]
        if path in ("/", "/index.html") and self.server.page is None:
            self.send_error(503, "the result is still being computed; reload when the "
                            "command has written it")
        elif path in ("/", "/index.html"):
            body = self.server.page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif path == "/events" and self.server.live is not None:
            self._events()
        else:
            self.send_error(404, "not found: the live viewer serves / and /events")

    def _events(self) -> None:
        live = self.server.live
        last = self.headers.get("Last-Event-ID")
        k = int(last) + 1 if last and last.strip().isdigit() else 0
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        with self.server.lock:
            self.server.streams += 1
        try:
            while True:  # after the run's end, the frames left and the end event still go
                frames, ended = live.wait(k, 0.5)
                if frames:
                    self.wfile.write("".join(f"id: {k + i}\ndata: {f}\n\n"
                                             for i, f in enumerate(frames)).encode())
                    self.wfile.flush()
                    k += len(frames)
                elif ended:
                    end = json.dumps({"frames": k, "outcome": live.ended})
                    self.wfile.write(f"event: end\ndata: {end}\n\n".encode())
                    self.wfile.flush()
                    return
                elif self.server.closing:
                    return
        except (BrokenPipeError, ConnectionResetError):  # the page was closed
            return
        finally:
            with self.server.lock:
                self.server.streams -= 1


class LiveServer(ThreadingHTTPServer):
    """The live viewer's HTTP server on 127.0.0.1 (see the module notes); started in a
    daemon thread by :meth:`start`, stopped by :meth:`stop`.

    Parameters
    ----------
    live : LiveScene, or None to serve a finished result's page (``page``, set when it is
        ready) without an event stream
    port : TCP port, 0 for a free one chosen by the system

    Raises
    ------
    InputError
        ``port`` outside 0-65535, or already in use, before anything is served.
    """

    daemon_threads = True
    allow_reuse_address = False  # a port in use is an error, not shared

    def __init__(self, live: LiveScene | None, port: int = 0):
        if not 0 <= int(port) <= 65535:
            raise InputError(f"--view-port: expected a TCP port in 1-65535 (0: a free one), "
                             f"got {port}")
        self.live = live
        self.closing = False
        self.streams = 0  # event streams being served (changed by the handler threads)
        self.lock = threading.Lock()
        self.page: str | None = None if live is None else render_page(live.head())
        try:
            super().__init__(("127.0.0.1", int(port)), _Handler)
        except OSError as exc:
            raise InputError(f"--view-port: cannot listen on 127.0.0.1:{port} ({exc.strerror}); "
                             "choose another port or leave --view-port out") from None
        self._thread: threading.Thread | None = None

    def attach(self, live: LiveScene) -> None:
        """Serve ``live`` from now on (a server started with None while the run's reference
        was being computed: its page answered 503 until then)."""
        self.live = live
        self.page = render_page(live.head())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"

    def start(self) -> LiveServer:
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="multibody-live-viewer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket.  Open event streams first send what they
        have not yet sent (all of it, and the end event, once the run has ended); up to 2 s."""
        self.closing = True
        if self.live is not None:
            self.live.wake()
        deadline = time.perf_counter() + 2.0
        while self.streams > 0 and time.perf_counter() < deadline:
            time.sleep(0.01)
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=2.0)
        self.server_close()
