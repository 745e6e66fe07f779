"""GIF (and MP4) of a scene, rendered without a display (matplotlib Agg, mplot3d).

The same :class:`~.scene.Scene` as the HTML page: boxes, cylinders and spheres as shaded
polygons, closure segments and paths as lines, seen from the page's initial viewpoint.
Frames are written by Pillow (GIF) or piped as raw RGB to ffmpeg (MP4): a system ffmpeg on
``PATH``, else the static binary of the ``imageio-ffmpeg`` wheel (the ``video`` extra).

Every polygon handed to matplotlib is a quadrilateral (cylinder caps are split into quads):
``Poly3DCollection`` pads a ragged list of polygons into an uninitialised array before it
projects them, and the garbage in the padding overflowed in the projection (a RuntimeWarning
on every frame of robots drawn with capsules, e.g. URDFs with meshes).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from multibody_dynamics.errors import InputError

from .scene import CLOSURE_COLOR, Scene

_UNIT_BOX = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)])
_BOX_FACES = [[0, 1, 3, 2], [4, 5, 7, 6], [0, 1, 5, 4], [2, 3, 7, 6], [0, 2, 6, 4], [1, 3, 7, 5]]


def _rot(qxyzw: np.ndarray) -> np.ndarray:
    """Rotation matrices ((..., 3, 3)) of unit quaternions ``qxyzw`` ((..., 4), x y z w)."""
    x, y, z, w = np.moveaxis(np.asarray(qxyzw, dtype=float), -1, 0)
    return np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w),
                               2 * (x * z + y * w)], axis=-1),
                     np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z),
                               2 * (y * z - x * w)], axis=-1),
                     np.stack([2 * (x * z - y * w), 2 * (y * z + x * w),
                               1 - 2 * (x * x + y * y)], axis=-1)], axis=-2)


def _cap_quads(ring: np.ndarray) -> list[np.ndarray]:
    """The disc bounded by ``ring`` ((n, 3), n even, counter-clockwise) as n/2 quads
    (centre, three consecutive ring points): convex, covering the disc exactly."""
    n = len(ring)
    c = ring.mean(axis=0)
    return [np.array([c, ring[i], ring[i + 1], ring[(i + 2) % n]]) for i in range(0, n, 2)]


def _local_faces(kind: str, dims, n: int = 14) -> np.ndarray:
    """Quads ((F, 4, 3) [m]) of one primitive in its own frame; ``n`` (even) segments around
    a cylinder."""
    if kind == "box":
        v = _UNIT_BOX * np.asarray(dims)
        faces = [v[f] for f in _BOX_FACES]
    elif kind == "cylinder":
        r, L = dims
        a = np.linspace(0, 2 * np.pi, n, endpoint=False)
        ring = np.column_stack([r * np.cos(a), r * np.sin(a), np.zeros(n)])
        bot, top = ring - [0, 0, L / 2], ring + [0, 0, L / 2]
        faces = [np.array([bot[i], bot[(i + 1) % n], top[(i + 1) % n], top[i]]) for i in range(n)]
        faces += _cap_quads(bot) + _cap_quads(top)
    else:  # sphere: a coarse UV sphere
        r = dims[0]
        th = np.linspace(0, np.pi, 7)
        ph = np.linspace(0, 2 * np.pi, 11)
        P = r * np.stack([np.outer(np.sin(th), np.cos(ph)), np.outer(np.sin(th), np.sin(ph)),
                          np.outer(np.cos(th), np.ones_like(ph))], axis=-1)
        faces = [np.array([P[i, j], P[i, j + 1], P[i + 1, j + 1], P[i + 1, j]])
                 for i in range(6) for j in range(10)]
    return np.array(faces, dtype=float).reshape(-1, 4, 3)


def _shape_faces(kind: str, dims, pose: np.ndarray, n: int = 14) -> list[np.ndarray]:
    """World-coordinate quads ((4, 3) each) of one primitive at ``pose`` (position,
    quaternion xyzw)."""
    return list(_local_faces(kind, dims, n) @ _rot(pose[3:]).T + pose[:3])


def _shade(colors: np.ndarray, faces: np.ndarray, light: np.ndarray) -> np.ndarray:
    """Face colours ((P, 3) RGB in [0, 1]): the base ``colors`` (P, 3) dimmed to 55 % where
    the face (quads ``faces`` (P, 4, 3)) is edge-on to the unit ``light`` direction, full
    where it faces it (either side); degenerate faces at 55 %."""
    nrm = np.cross(faces[:, 1] - faces[:, 0], faces[:, 2] - faces[:, 0])
    nn = np.linalg.norm(nrm, axis=1)
    cos = np.abs(nrm @ light) / np.where(nn > 0, nn, 1.0)
    return np.clip(colors * (0.55 + 0.45 * cos)[:, None], 0, 1)


class _Renderer:
    """One matplotlib figure redrawn per frame."""

    def __init__(self, scene: Scene, size: tuple[int, int], dpi: int):
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # no display, no pyplot
        from matplotlib.figure import Figure

        self.scene = scene
        self.fig = Figure(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi)
        FigureCanvasAgg(self.fig)
        # polygons depth-sorted among themselves; lines (paths, closures) drawn over them,
        # as on the HTML page
        self.ax = self.fig.add_axes((0, 0, 1, 0.92), projection="3d", computed_zorder=False)
        lo, hi = scene.bounds()
        c, r = 0.5 * (lo + hi), 0.5 * float(np.max(hi - lo))
        self.limits = [(c[i] - r, c[i] + r) for i in range(3)]
        eye, up = scene.view()
        # matplotlib's camera is z-up: elevation and azimuth of the eye direction
        self.elev = float(np.degrees(np.arcsin(np.clip(eye[2], -1, 1))))
        self.azim = float(np.degrees(np.arctan2(eye[1], eye[0])))
        self.light = eye + 0.5 * up
        self.light /= np.linalg.norm(self.light)

        self._faces_of_shapes()
        self._setup()

    def _setup(self):
        """Axes, static paths and the artists updated per frame (built once)."""
        from mpl_toolkits.mplot3d.art3d import Poly3DCollection

        s, ax = self.scene, self.ax
        ax.set_axis_off()
        for i, (a, b) in enumerate(self.limits):
            (ax.set_xlim, ax.set_ylim, ax.set_zlim)[i](a, b)
        ax.set_box_aspect((1, 1, 1), zoom=1.6)
        ax.view_init(elev=self.elev, azim=self.azim)
        ax.set_proj_type("persp", focal_length=0.4)
        self.polys = Poly3DCollection([], edgecolors="none", zorder=1)
        ax.add_collection3d(self.polys)
        for p in s.paths:
            P = p["points"]
            ax.plot(P[:, 0], P[:, 1], P[:, 2], color=p["color"], lw=1.0,
                    ls="--" if p["dashed"] else "-", label=p["name"], zorder=3)
        self.segs = [ax.plot([], [], [], color=CLOSURE_COLOR, lw=1.2, zorder=2)[0]
                     for _ in range(s.segments.shape[1])]
        self.title = self.fig.suptitle("", fontsize=8, y=0.99)
        if s.paths:
            ax.legend(loc="lower left", fontsize=7, frameon=False)

    def _faces_of_shapes(self):
        """All shapes' quads in their own frames ((P, 4, 3)), the shape each belongs to
        ((P,) index) and its base colour ((P, 3) RGB)."""
        from matplotlib.colors import to_rgb

        local = [_local_faces(sh.kind, sh.dims) for sh in self.scene.shapes]
        self.local = np.concatenate(local) if local else np.zeros((0, 4, 3))
        self.owner = np.repeat(np.arange(len(local)), [len(f) for f in local])
        self.base = np.array([to_rgb(sh.color) for sh in self.scene.shapes]).reshape(-1, 3)[
            self.owner]

    def draw(self, f: int):
        s = self.scene
        pose = s.poses[f][self.owner]  # (P, 7): each quad's shape placement
        faces = np.einsum("pij,pvj->pvi", _rot(pose[:, 3:]), self.local) + pose[:, None, :3]
        # one (P, 4, 3) array: matplotlib keeps it as it is (a ragged list would be padded)
        self.polys.set_verts(faces)
        self.polys.set_facecolor(_shade(self.base, faces, self.light))
        for line, (a, b) in zip(self.segs, s.segments[f]):
            line.set_data_3d(*np.column_stack([a, b]))
        self.title.set_text(f"{s.title}\nt = {s.t[f]:.3f} s")

    def rgb(self) -> np.ndarray:
        self.fig.canvas.draw()
        return np.asarray(self.fig.canvas.buffer_rgba())[:, :, :3].copy()


def render_frames(scene: Scene, size=(480, 400), dpi: int = 80, frames=None):
    """Yield (H, W, 3) uint8 images of the scene's frames (all, or the given indices)."""
    r = _Renderer(scene, size, dpi)
    for f in range(scene.t.size) if frames is None else frames:
        r.draw(f)
        yield r.rgb()


def write_gif(scene: Scene, path: str | Path, size=(480, 400), dpi: int = 80) -> Path:
    """Write an animated GIF (Pillow) of all frames, played at the scene's own rate; loops."""
    from PIL import Image

    path = Path(path)
    images = [Image.fromarray(a).convert("P", palette=Image.Palette.ADAPTIVE, colors=128)
              for a in render_frames(scene, size, dpi)]
    dt = float(np.median(np.diff(scene.t))) if scene.t.size > 1 else 0.1
    images[0].save(path, save_all=True, append_images=images[1:], loop=0,
                   duration=max(20, int(round(1000 * dt))), optimize=False, disposal=1)
    return path


def find_ffmpeg() -> str | None:
    """Path of an ffmpeg executable: ``ffmpeg`` on ``PATH``, else the static binary of the
    ``imageio-ffmpeg`` wheel (``pip install 'multibody_suite[video]'``), else None."""
    exe = shutil.which("ffmpeg")
    if exe is not None:
        return exe
    try:
        import imageio_ffmpeg
    except ImportError:
        return None
    try:
        return imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError:  # a wheel without a binary for this platform
        return None


def require_ffmpeg(path) -> str:
    """:func:`find_ffmpeg`, or :class:`InputError` naming ``path`` and both ways to get one."""
    exe = find_ffmpeg()
    if exe is None:
        raise InputError(f"{path}: MP4 needs ffmpeg, which was not found: install ffmpeg on "
                         "PATH (apt-get install ffmpeg) or the imageio-ffmpeg wheel (pip install "
                         "imageio-ffmpeg); or write a .gif or .html instead")
    return exe


def write_mp4(scene: Scene, path: str | Path, size=(480, 400), dpi: int = 80) -> Path:
    """Write an MP4 (H.264, yuv420p, frame sizes padded to even) of all frames at the scene's
    own rate, through :func:`find_ffmpeg`'s ffmpeg; :class:`InputError` when there is none
    or ffmpeg fails."""
    ffmpeg = require_ffmpeg(path)
    path = Path(path)
    dt = float(np.median(np.diff(scene.t))) if scene.t.size > 1 else 0.1
    frames = render_frames(scene, size, dpi)
    first = next(frames)
    h, w = first.shape[:2]
    cmd = [ffmpeg, "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24",
           "-s", f"{w}x{h}", "-r", f"{1 / dt:g}", "-i", "-", "-vf",
           "pad=ceil(iw/2)*2:ceil(ih/2)*2",
           "-pix_fmt", "yuv420p", "-vcodec", "libx264", str(path)]
    with tempfile.TemporaryFile() as log, \
            subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=log) as proc:
        assert proc.stdin is not None
        try:
            proc.stdin.write(first.tobytes())
            for img in frames:
                proc.stdin.write(img.tobytes())
            proc.stdin.close()
        except BrokenPipeError:  # ffmpeg stopped reading: its message says why
            pass
        if proc.wait() != 0:
            log.seek(0)
            err = log.read().decode(errors="replace").strip().splitlines()
            why = f": {err[-1]}" if err else ""
            raise InputError(f"{path}: ffmpeg ({ffmpeg}) failed with exit {proc.returncode}{why}")
    return path
