"""Animation of results: the result sidecar, the scene's placements, GIF frames, and the
self-contained HTML page opened in headless Chromium (skipped where Chromium is absent)."""

import csv
import json
import shutil
import subprocess

import numpy as np
import pytest

from multibody_control.animation import scene_from_result, write_gif, write_html, write_mp4
from multibody_control.animation.scene import LINK_COLORS
from multibody_control.cli import main


@pytest.fixture(scope="module")
def slider_crank_result(tmp_path_factory):
    """A 0.6 s slider-crank run from `multibody simulate` (crank spun at 6 rad/s)."""
    out = tmp_path_factory.mktemp("anim") / "sc.csv"
    rc = main(["simulate", "slider_crank", "--duration", "0.6", "--v0", "6", "-12", "--quiet",
               "--out", str(out), "--output-dt", "0.01"])
    assert rc == 0
    return out


def test_simulate_writes_sidecar_and_keeps_csv(slider_crank_result):
    meta = json.loads(slider_crank_result.with_name("sc.meta.json").read_text())
    assert meta["robot"] == "slider_crank" and meta["kind"] == "simulate"
    assert meta["end_effector"] == "slider_pin"
    with slider_crank_result.open() as fh:
        rows = list(csv.reader(fh))
    # the CSV is as before: one header row, then numbers only (np.loadtxt(skiprows=1) readers)
    assert rows[0][:3] == ["t", "q.crank", "q.rod"]
    np.loadtxt(slider_crank_result, delimiter=",", skiprows=1)


def test_scene_places_links_by_closed_form_and_closes_the_loop(slider_crank_result):
    scene = scene_from_result(slider_crank_result, fps=50)
    data = np.loadtxt(slider_crank_result, delimiter=",", skiprows=1)
    t, q1, q2 = data[:, 0], data[:, 1], data[:, 2]
    assert scene.t.size == 31  # 0.6 s at 50 frames per second, both ends included
    k = np.searchsorted(t, scene.t)
    np.testing.assert_allclose(t[k], scene.t)
    names = [(s.role, s.name, s.kind) for s in scene.shapes]
    crank = names.index(("link", "crank_link", "box"))
    rod = names.index(("link", "rod_link", "box"))
    L = 0.3  # link length [m] (urdf/slider_crank.urdf), box centred at L/2 on each link
    c1, s1 = np.cos(q1[k]), np.sin(q1[k])
    c12, s12 = np.cos(q1[k] + q2[k]), np.sin(q1[k] + q2[k])
    # closed-form planar kinematics, independent of pinocchio; 1e-9 m: the scene rounds
    # (to 0.01 mm) only in to_json, so here the agreement is to round-off
    np.testing.assert_allclose(scene.poses[:, crank, :2],
                               np.column_stack([L / 2 * c1, L / 2 * s1]),
                               atol=1e-9)
    np.testing.assert_allclose(scene.poses[:, rod, :2],
                               np.column_stack([L * c1 + L / 2 * c12, L * s1 + L / 2 * s12]),
                               atol=1e-9)
    # the cut joint's two frames: the slider pin stays on the rail (y = 0) in every frame,
    # to the simulator's projection tolerance (1e-12 m) plus the CSV's 10 significant digits
    pin_a = [i for i, s in enumerate(scene.shapes) if s.role == "closure"][0]
    assert np.max(np.abs(scene.poses[:, pin_a, 1])) < 1e-9
    assert scene.segments.shape == (31, 2, 2, 3)  # the pin-rail segment and the rail
    assert [p["name"] for p in scene.paths] == ["slider_pin path"]


def test_gif_frames_differ(slider_crank_result, tmp_path):
    from PIL import Image, ImageSequence

    scene = scene_from_result(slider_crank_result, fps=10)
    path = write_gif(scene, tmp_path / "sc.gif", size=(240, 200))
    with Image.open(path) as im:
        frames = [np.asarray(f.convert("RGB"), dtype=int) for f in ImageSequence.Iterator(im)]
    assert len(frames) == scene.t.size == 7
    assert frames[0].shape == (200, 240, 3)
    changed = np.any(frames[0] != frames[3], axis=2).mean()
    assert changed > 0.005  # the crank turned by 1.8 rad: at least 0.5 % of the pixels change


def test_html_is_self_contained(slider_crank_result, tmp_path):
    path = write_html(scene_from_result(slider_crank_result), tmp_path / "sc.html")
    text = path.read_text()
    assert "<script src" not in text and "<link" not in text and "import(" not in text
    assert "SPDX-License-Identifier: MIT" in text  # three.js licence kept with its code
    assert 300_000 < path.stat().st_size < 1_500_000


def test_animate_command_errors_and_inference(slider_crank_result, tmp_path, capsys):
    assert main(["animate", str(slider_crank_result), "--out", str(tmp_path / "a.png")]) == 2
    err = capsys.readouterr().err
    assert "expected a file name ending in .html, .gif, .mp4" in err and "\n" == err[-1]
    # without the sidecar the robot is found from the q columns (crank, rod: slider_crank only)
    bare = tmp_path / "bare.csv"
    shutil.copy(slider_crank_result, bare)
    assert main(["animate", str(bare), "--fps", "10"]) == 0
    assert "bare.html (7 frames" in capsys.readouterr().out
    assert main(["animate", str(tmp_path / "missing.csv")]) == 2
    assert "result file not found" in capsys.readouterr().err


def test_invert_desired_path_is_the_scenario_line(tmp_path, capsys):
    rc = main(["invert", "config/scenarios/invert_five_bar_path.yaml", "--out", str(tmp_path),
               "--quiet", "--animate", str(tmp_path / "fb.html")])
    assert rc == 0
    assert "fb.html" in capsys.readouterr().out
    scene = scene_from_result(tmp_path / "invert_five_bar_path.csv")
    desired = {p["name"]: p["points"] for p in scene.paths}["desired path"]
    # config/scenarios/invert_five_bar_path.yaml: left_tip from (-0.05, 0.30) to (0.08, 0.38) m;
    # the CSV keeps 10 significant digits
    np.testing.assert_allclose(desired[0, :2], [-0.05, 0.30], atol=1e-9)
    np.testing.assert_allclose(desired[-1, :2], [0.08, 0.38], atol=1e-9)
    # outputs that are not frame coordinates (a combined output): the desired path comes
    # from the scenario's task, whose file the sidecar names; same line, 1e-12 m (evaluated,
    # not read back from the CSV)
    meta_file = tmp_path / "invert_five_bar_path.meta.json"
    meta = json.loads(meta_file.read_text())
    assert meta["scenario"].endswith("config/scenarios/invert_five_bar_path.yaml")
    meta["outputs"] = ["left_motor", "right_motor"]
    meta_file.write_text(json.dumps(meta))
    scene = scene_from_result(tmp_path / "invert_five_bar_path.csv")
    desired = {p["name"]: p["points"] for p in scene.paths}["desired path"]
    np.testing.assert_allclose(desired[0, :2], [-0.05, 0.30], atol=1e-12)
    np.testing.assert_allclose(desired[-1, :2], [0.08, 0.38], atol=1e-12)


def _hue_mask(img: np.ndarray, color: str, tol_deg: float = 12.0) -> np.ndarray:
    """Pixels of the hue of ``color`` (shaded by the lights), saturated enough not to be grey."""
    from matplotlib.colors import rgb_to_hsv, to_rgb

    hsv = rgb_to_hsv(img[:, :, :3] / 255.0)
    h0 = rgb_to_hsv(np.array(to_rgb(color)))[0]
    dh = np.abs((hsv[:, :, 0] - h0 + 0.5) % 1.0 - 0.5) * 360
    return (dh < tol_deg) & (hsv[:, :, 1] > 0.35) & (hsv[:, :, 2] > 0.2)


def _screenshot(chromium, page, png, hashes):
    """One headless Chromium screenshot of ``page`` opened at each URL hash of ``hashes``,
    side by side (one 640 x 480 iframe each: one browser start for all instants); the 3-D
    views, (420, 640, 3) each."""
    frames = "".join(
        f'<iframe src="{page.name}#{h}" style="position:absolute;top:0;left:{640 * i}px;'
        'width:640px;height:480px;border:0"></iframe>' for i, h in enumerate(hashes))
    wrapper = page.with_name(f"{png.stem}_wrapper.html")
    wrapper.write_text('<!doctype html><html><body style="margin:0;overflow:hidden">'
                       f"{frames}</body></html>")
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--use-gl=angle",
           "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--hide-scrollbars",
           f"--user-data-dir={png.parent / ('profile_' + png.stem)}",
           f"--screenshot={png}", f"--window-size={640 * len(hashes)},480", wrapper.as_uri()]
    try:
        subprocess.run(cmd, capture_output=True, timeout=90, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chromium did not finish the screenshot of {page.name} in 90 s")
    if not png.is_file():
        pytest.skip("chromium ran but wrote no screenshot (no WebGL/swiftshader here?)")
    from PIL import Image

    # the 3-D view only: the control bar at the bottom (~40 px) has a blue slider of its own
    img = np.asarray(Image.open(png).convert("RGB"))[:-60]
    return [img[:, 640 * i:640 * (i + 1)] for i in range(len(hashes))]


def test_html_in_headless_chromium_shows_the_robot_moving(slider_crank_result, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (Debian: apt-get install chromium; .ci/run does "
                    "it in CI)")
    page = write_html(scene_from_result(slider_crank_result), tmp_path / "sc.html")
    a, b = _screenshot(chromium, page, tmp_path / "shots.png", ["t=0", "t=0.3"])
    assert a.shape == b.shape == (420, 640, 3)
    # the links' colours (the first two of the palette: crank, rod) are on screen at both
    # instants: at least 150 pixels each (a 0.3 m x 0.02 m bar is ~200 x 8 px at this size)
    for img in (a, b):
        for color in LINK_COLORS[:2]:
            assert _hue_mask(img, color).sum() > 150, color
    # and the robot moved between them (the crank turned by 1.8 rad)
    moved = _hue_mask(a, LINK_COLORS[0]) != _hue_mask(b, LINK_COLORS[0])
    assert moved.sum() > 300


def test_flexible_scene_scales_the_deflection(tmp_path):
    from multibody_dynamics.flexible.loader import load_flexible_model

    out = tmp_path / "flex.csv"
    rc = main(["simulate", "flexible_cart_manipulator", "--duration", "0.2", "--tau", "5", "0",
               "0", "--quiet", "--out", str(out)])
    assert rc == 0
    chain = load_flexible_model("flexible_cart_manipulator")
    q = np.loadtxt(out, delimiter=",", skiprows=1)[:, 1:1 + chain.nq]

    def link1_tip(scale):
        scene = scene_from_result(out, fps=25, deformation_scale=scale)
        k = [i for i, s in enumerate(scene.shapes) if s.name == "link1" and s.kind == "sphere"]
        return scene, scene.poses[:, k[0], :3]

    scene1, tip1 = link1_tip(1.0)
    frames = np.searchsorted(np.loadtxt(out, delimiter=",", skiprows=1)[:, 0], scene1.t)
    # at scale 1 the drawn tip is the model's own distal point (Ritz: P + Phi q_e)
    expected = np.array([chain.point_position(q[k], "link1") for k in frames])
    np.testing.assert_allclose(tip1[:, :2], expected, atol=1e-9)  # round-off only
    assert scene1.deformation_scale == 1.0
    # link1 hangs on the rigid cart, so its frame does not depend on q_e: the drawn
    # deflection grows linearly with the factor
    _, tip0 = link1_tip(1e-12)
    _, tip50 = link1_tip(50.0)
    assert np.max(np.abs(tip1 - tip0)) > 1e-6  # the link does bend under the cart's push
    np.testing.assert_allclose(tip50 - tip0, 50.0 * (tip1 - tip0), atol=1e-9)
    # the automatic factor is a 1-2-5 number > 1 for this small deflection, shown in the title
    auto = scene_from_result(out, fps=25)
    assert auto.deformation_scale > 1 and f"deformation x{auto.deformation_scale:g}" in auto.title


def test_simulate_animate_without_out_keeps_the_samples(tmp_path, capsys):
    gif = tmp_path / "spin.gif"
    rc = main(["simulate", "slider_crank", "--duration", "0.2", "--v0", "6", "-12", "--quiet",
               "--output-dt", "0.02", "--animate", str(gif), "--fps", "10"])
    assert rc == 0
    out = capsys.readouterr().out
    # the samples go beside the animation, with their sidecar, so it can be redrawn later
    assert (tmp_path / "spin.csv").is_file() and (tmp_path / "spin.meta.json").is_file()
    assert f"wrote {gif} (3 frames" in out  # 0.2 s at 10 fps: t = 0, 0.1, 0.2
    # a bad suffix is refused before the simulation runs
    assert main(["simulate", "slider_crank", "--animate", str(tmp_path / "x.avi")]) == 2
    assert "expected a file name ending in .html, .gif, .mp4" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_mp4_decodes_to_the_frames_written(slider_crank_result, tmp_path):
    imageio_ffmpeg = pytest.importorskip(
        "imageio_ffmpeg", reason="imageio-ffmpeg (the video extra, in the test extra) is not "
        "installed")
    scene = scene_from_result(slider_crank_result, fps=10)
    path = write_mp4(scene, tmp_path / "sc.mp4", size=(240, 200))
    # decoded back by ffmpeg through imageio-ffmpeg's reader (rgb24 frames)
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    frames = [np.frombuffer(b, np.uint8).reshape(200, 240, 3).astype(int) for b in reader]
    assert tuple(meta["size"]) == (240, 200) and meta["fps"] == pytest.approx(10)
    assert len(frames) == scene.t.size == 7  # 0.6 s at 10 fps, both ends included
    # the crank turned by 1.8 rad between frames 0 and 3: at least 0.5 % of the pixels
    # change by more than the H.264 quantisation noise (30 of 255 in some channel)
    changed = np.any(np.abs(frames[0] - frames[3]) > 30, axis=2).mean()
    assert changed > 0.005


def test_ffmpeg_is_the_systems_else_the_wheels_else_a_clear_refusal(
        slider_crank_result, tmp_path, capsys, monkeypatch):
    import sys

    from multibody_control.animation import gif

    imageio_ffmpeg = pytest.importorskip(
        "imageio_ffmpeg", reason="imageio-ffmpeg (the video extra, in the test extra) is not "
        "installed")

    monkeypatch.setattr(gif.shutil, "which", lambda name: "/opt/x/ffmpeg")
    assert gif.find_ffmpeg() == "/opt/x/ffmpeg"  # a system ffmpeg on PATH comes first
    monkeypatch.setattr(gif.shutil, "which", lambda name: None)
    assert gif.find_ffmpeg() == imageio_ffmpeg.get_ffmpeg_exe()
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # the wheel not installed
    assert gif.find_ffmpeg() is None
    out = tmp_path / "a.mp4"
    assert main(["animate", str(slider_crank_result), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "MP4 needs ffmpeg, which was not found" in err and err.count("\n") == 1
    assert "apt-get install ffmpeg" in err and "pip install imageio-ffmpeg" in err
    assert not out.exists()


def test_capsule_robot_gif_raises_no_warning(tmp_path):
    """A robot drawn with capsules (URDF meshes: the Kinova arm of example-robot-data)."""
    import sysconfig
    import warnings
    from pathlib import Path

    from multibody_control.animation.gif import _shape_faces

    # the root cause: every polygon is a quad (cylinder caps were 14-gons, and matplotlib
    # padded the ragged list with uninitialised memory that overflowed in its projection)
    pose = np.r_[0.1, 0.2, 0.3, 0.0, 0.0, np.sin(0.3), np.cos(0.3)]
    for kind, dims in (("box", (0.1, 0.2, 0.3)), ("cylinder", (0.02, 0.3)), ("sphere", (0.05,))):
        assert {f.shape for f in _shape_faces(kind, dims, pose)} == {(4, 3)}, kind
    robots = [Path(sysconfig.get_paths()[k]) / "cmeel.prefix" / "share" / "example-robot-data"
              / "robots" for k in ("purelib", "platlib")]
    urdf = next((r / "kinova_description/robots/kinova.urdf" for r in robots
                 if (r / "kinova_description/robots/kinova.urdf").is_file()), None)
    if urdf is None:
        pytest.skip("example-robot-data is not installed (it is in the test extra)")
    out = tmp_path / "kinova.csv"
    assert main(["simulate", str(urdf), "--duration", "0.3", "--output-dt", "0.05", "--quiet",
                 "--out", str(out)]) == 0
    scene = scene_from_result(out, fps=20)
    assert any(s.kind == "cylinder" for s in scene.shapes)  # capsules, from its meshes
    # recorded rather than raised: a warning inside matplotlib's draw must still be seen.
    # Before the quads, the overflow depended on the padding's leftover memory: it came in 2
    # of 3 runs of this test (7 frames), the shape check above in every run
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_gif(scene, tmp_path / "kinova.gif", size=(160, 140))
    assert [str(w.message) for w in caught] == []


def test_closed_flexible_loop_is_drawn_closed_at_true_scale(tmp_path):
    from multibody_dynamics.flexible.loader import load_flexible_model
    from multibody_dynamics.result_meta import write_result_meta

    tool = load_flexible_model("flexible_parallel_tool")
    rows = []
    for k, s1 in enumerate((0.0, 0.05, 0.1)):
        q = np.zeros(tool.nv)
        q[:4] = (s1, 0.79, 0.785, 2.39)  # an assembled lambda configuration, then projected
        # the short arm's first mode, growing (it moves the arm's distal node, the cut joint;
        # the long arm's modes leave its node 19, the other side of the cut, in place)
        q[tool.coordinate_names.index("short_arm.e1")] = 1e-3 * (k + 1)
        q = tool.project_position(q, partitioned=True)
        rows.append(np.r_[0.1 * k, q])
    out = tmp_path / "tool.csv"
    np.savetxt(out, np.array(rows), delimiter=",", comments="",
               header=",".join(["t"] + [f"q.{n}" for n in tool.coordinate_names]))
    write_result_meta(out, "simulate", "flexible_parallel_tool", flexible=True)
    true = scene_from_result(out, fps=10, deformation_scale=1.0)
    gap = np.linalg.norm(true.segments[:, 0, 0] - true.segments[:, 0, 1], axis=1)
    assert true.segments.shape == (3, 1, 2, 3)
    # the cut joint's two points coincide: 1e-9 m covers the projection (1e-12) and the
    # CSV's 10 significant digits
    assert np.max(gap) < 1e-9
    assert np.max(np.abs(true.poses[:, :, 2])) < 1e-12  # a planar model, drawn at z = 0
    # exaggerated, the drawn loop opens (the docs say so): the gap grows with the deflection
    big = scene_from_result(out, fps=10, deformation_scale=30.0)
    gap30 = np.linalg.norm(big.segments[:, 0, 0] - big.segments[:, 0, 1], axis=1)
    # both carts are rigid and the long arm's node 19 does not move with its modes, so the
    # gap is the extra (30 - 1) times the short arm's distal deflection Phi q_e (to round-off)
    arm = next(b for b in tool.chain.bodies if b.name == "short_arm")
    phi = arm.modal_data.node_shapes[arm.distal_node, :2, 0]
    # rtol 1e-6: q_e goes through the CSV with 10 significant digits
    np.testing.assert_allclose(gap30, 29.0 * np.linalg.norm(phi) * 1e-3 * np.arange(1, 4),
                               rtol=1e-6)


def test_nan_samples_of_a_failed_run_are_left_out(slider_crank_result, tmp_path):
    bad = tmp_path / "failed.csv"
    lines = slider_crank_result.read_text().splitlines()
    ncol = len(lines[0].split(","))
    bad.write_text("\n".join(lines + [",".join(["0.61"] + ["nan"] * (ncol - 1))]) + "\n")
    shutil.copy(slider_crank_result.with_name("sc.meta.json"), tmp_path / "failed.meta.json")
    scene = scene_from_result(bad, fps=10)
    assert scene.t[-1] == pytest.approx(0.6) and "1 samples with NaN" in scene.info
    text = write_html(scene, tmp_path / "failed.html").read_text()
    blob = text.split('type="application/json">')[1].split("</script>")[0]
    # what the browser's JSON.parse accepts: no NaN / Infinity constants
    data = json.loads(blob, parse_constant=lambda c: pytest.fail(f"{c} in the scene JSON"))
    assert len(data["t"]) == scene.t.size


def test_mesh_link_is_drawn_as_a_capsule_to_its_child_joint(tmp_path):
    from pathlib import Path

    from multibody_control.animation import build_scene
    from multibody_dynamics.model import load_model

    root = Path(__file__).resolve().parents[1]
    urdf = (root / "urdf" / "slider_crank.urdf").read_text()
    box = '<geometry><box size="0.3 0.02 0.01"/></geometry>'
    assert urdf.count(box) == 2
    # the crank's visual becomes a mesh (not loaded): drawn from its frame to the rod joint
    (tmp_path / "sc.urdf").write_text(
        urdf.replace(box, '<geometry><mesh filename="package://x/crank.stl"/></geometry>', 1))
    cfg = (root / "config" / "robots" / "slider_crank.yaml").read_text()
    (tmp_path / "sc.yaml").write_text(cfg.replace("../../urdf/slider_crank.urdf", "sc.urdf"))
    model = load_model(tmp_path / "sc.yaml")
    q1 = np.array([0.0, 0.7])
    q = np.column_stack([q1, -2 * q1])  # slider on the rail: q2 = -2 q1
    scene = build_scene(model, q, np.array([0.0, 1.0]))
    crank = [(i, s) for i, s in enumerate(scene.shapes) if s.name == "crank_link"]
    kinds = sorted(s.kind for _, s in crank)
    assert kinds == ["cylinder", "sphere", "sphere"]
    i, cyl = next((i, s) for i, s in crank if s.kind == "cylinder")
    assert cyl.dims[1] == pytest.approx(0.3)  # to the rod joint, 0.3 m along the crank
    np.testing.assert_allclose(scene.poses[:, i, :2],
                               0.15 * np.column_stack([np.cos(q1), np.sin(q1)]), atol=1e-12)


def test_flexible_inversion_desired_path_is_the_scenario_line():
    from pathlib import Path

    from multibody_control.animation.flexible import _task_path
    from multibody_control.animation.source import ResultSamples

    root = Path(__file__).resolve().parents[1]
    t = np.array([0.0, 0.2, 0.7, 1.2, 1.5])
    res = ResultSamples(Path("x.csv"), t, {"t": t}, {
        "kind": "invert",
        "scenario": str(root / "config" / "scenarios" / "invert_flexible_manipulator.yaml")})
    desired = _task_path(res)
    # config/scenarios/invert_flexible_manipulator.yaml: arm2 tip from (0.45, -0.10) m to
    # (0.45, 0.10) m between 0.2 s and 1.2 s, at rest outside; exact to round-off
    np.testing.assert_allclose(desired[[0, 1]], [[0.45, -0.10, 0.0]] * 2, atol=1e-12)
    np.testing.assert_allclose(desired[[3, 4]], [[0.45, 0.10, 0.0]] * 2, atol=1e-12)
    np.testing.assert_allclose(desired[2], [0.45, 0.0, 0.0], atol=1e-12)  # symmetric time law
