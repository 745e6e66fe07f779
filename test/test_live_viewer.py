"""Live viewer (``multibody simulate --view``): the frames streamed while a simulation runs are
the static page's frames of the same result, and headless Chromium draws the live page."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from multibody_control.animation.live import LiveScene, LiveServer
from multibody_control.animation.scene import LINK_COLORS, build_scene, frame_times
from multibody_control.cli import main
from multibody_dynamics.errors import InputError
from multibody_dynamics.model import load_model
from multibody_dynamics.simulate import simulate

ROOT = Path(__file__).resolve().parents[1]


def _read_events(url: str, out: list, timeout: float = 60.0) -> None:
    """Server-Sent Events of ``url`` into ``out`` as (arrival time, event, data dict)."""
    event = "message"
    with urllib.request.urlopen(url, timeout=timeout) as r:
        for raw in r:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                out.append((time.perf_counter(), event, json.loads(line[6:])))
                event = "message"


def _interrupt_viewed_run(cmd: list, out) -> None:
    """Run the viewed command ``cmd`` (writing the CSV ``out``), send SIGINT once five events
    have reached a client: exit 130, the partial CSV kept and marked so, and the stream ended
    with the run, its last frame the last sample written."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        url = proc.stdout.readline().split()[-1]
        assert url.startswith("http://127.0.0.1:")
        got: list = []
        client = threading.Thread(target=_read_events, args=(url + "events", got))
        client.start()
        deadline = time.perf_counter() + 30
        while len(got) < 5 and time.perf_counter() < deadline:
            time.sleep(0.02)
        assert len(got) >= 5 and not out.exists()  # frames stream, the run is under way
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        client.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "partial result written to" in err
    assert json.loads(out.with_suffix(".meta.json").read_text())["partial"] is True
    t_last = np.loadtxt(out, delimiter=",", skiprows=1)[-1, 0]
    assert 0 < t_last < 100
    assert got[-1][1] == "end" and "130" in got[-1][2]["outcome"]
    frames = [d for _, e, d in got if e == "message"]
    assert abs(frames[-1]["t"] - t_last) < 1e-6


def test_stream_delivers_the_static_scene_frames_in_order_during_the_run():
    model = load_model("slider_crank")
    live = LiveScene(model, model.q_initial, 1.0, fps=30.0)
    server = LiveServer(live).start()
    got: list = []
    seen_during_run = []
    try:
        client = threading.Thread(target=_read_events, args=(server.url + "events", got))
        client.start()

        def on_sample(t, q):  # the simulator's callback, seen from the test: frames arrive
            live.add_sample(t, q)  # at the client before the run has ended
            if abs(t - 0.5) < 1e-9:
                deadline = time.perf_counter() + 10.0
                while not got and time.perf_counter() < deadline:
                    time.sleep(0.01)
                seen_during_run.append(len(got))

        res = simulate(model, 1.0, None, np.array([12.0, -24.0]), on_sample=on_sample)
        live.finish(res.message)
        client.join(timeout=30)
        assert not client.is_alive()
    finally:
        server.stop()
    assert res.success and res.t.size == 1001
    assert seen_during_run and seen_during_run[0] > 0  # frames delivered while it ran
    frames = [d for _, e, d in got if e == "message"]
    assert [e for _, e, _ in got][-1] == "end" and len(frames) == 31
    assert [d["k"] for d in frames] == list(range(31))
    # the static page's scene of the same samples (picked by frame_times, placed by
    # build_scene): same sample times and the same placements (both rounded to 0.01 mm)
    static = build_scene(model, res.q, res.t, frame_times(res.t, 30.0, 600))
    np.testing.assert_array_equal([d["t"] for d in frames], np.round(static.t, 6))
    poses = np.array([d["pose"] for d in frames])
    np.testing.assert_array_equal(poses, np.round(static.poses, 5).reshape(31, -1))
    # the cut joint's segment (slider pin to the rail's frame) is the static one too, and the
    # pin stays on the rail y = 0 (point_on_line closure; 1e-5 m: the streamed rounding)
    seg = np.array([d["seg"] for d in frames]).reshape(31, -1, 2, 3)
    assert seg.shape[1] == 2  # the gap and the rail
    np.testing.assert_allclose(seg[:, 0], static.segments[:, 0], atol=1e-5)
    assert np.abs(seg[:, 0, 0, 1]).max() < 1e-5


def test_port_errors_before_any_work(capsys, tmp_path):
    model = load_model("slider_crank")
    live = LiveScene(model, model.q_initial, 0.1)
    with pytest.raises(InputError, match="--view-port: expected a TCP port"):
        LiveServer(live, 70000)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(InputError, match=f"cannot listen on 127.0.0.1:{port}"):
            LiveServer(live, port)
        # the command: exit 2 with a one-line message, and no result written
        assert main(["simulate", "slider_crank", "--duration", "0.1", "--view", "--no-browser",
                     "--view-port", str(port), "--out", "x_never.csv"]) == 2
        err = capsys.readouterr().err.strip()
        assert "cannot listen" in err and len(err.splitlines()) == 1
        # run and invert take the port before their work too: nothing written
        assert main(["run", str(ROOT / "config/scenarios/run_slider_crank.yaml"), "--out",
                     str(tmp_path / "never"), "--view", "--no-browser", "--view-port",
                     str(port)]) == 2
        assert "cannot listen" in capsys.readouterr().err
        assert not (tmp_path / "never").exists()
    assert main(["simulate", "slider_crank", "--duration", "0.1", "--view", "--no-browser",
                 "--view-port", "-1"]) == 2
    assert "--view-port: expected a TCP port" in capsys.readouterr().err


def test_live_page_in_headless_chromium_draws_the_robot(tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium not installed (Debian: apt-get install chromium; .ci/run does "
                    "it in CI)")
    cmd = [sys.executable, "-m", "multibody_control.cli", "simulate", "slider_crank",
           "--duration", "0.5", "--v0", "12", "-24", "--out", str(tmp_path / "sc.csv"),
           "--quiet", "--view", "--no-browser", "--view-keep", "60"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        url = None
        for line in proc.stdout:  # the URL is printed before the run
            if line.startswith("live viewer: http"):
                url = line.split()[2]
                break
        assert url is not None
        png = tmp_path / "live.png"
        # the page is opened while the server streams (the run is short: likely after it has
        # ended); virtual time lets the event stream deliver before the screenshot
        shot = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--use-gl=angle",
                "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--hide-scrollbars",
                f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
                f"--screenshot={png}", "--window-size=640,480", url]
        subprocess.run(shot, capture_output=True, timeout=90, check=False)
        dom = subprocess.run([*shot[:-3], "--dump-dom", url], capture_output=True,
                             text=True, timeout=90, check=False).stdout
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    if not png.is_file():
        pytest.skip("chromium ran but wrote no screenshot (no WebGL/swiftshader here?)")
    # the page received every frame of the run (0.5 s at 30 fps: 16) and the end of the stream
    assert 'data-frames="16"' in dom and 'data-live="ended"' in dom, dom[-300:]
    from PIL import Image
    from test_animation import _hue_mask

    img = np.asarray(Image.open(png).convert("RGB"))[:-60]  # without the control bar
    # crank and rod drawn (their link colours on screen; an empty canvas has none): at least
    # 60 pixels each (the live camera frames the robot's reach, so they are smaller than on
    # the static page, ~90 x 5 px here)
    for color in LINK_COLORS[:2]:
        assert _hue_mask(img, color).sum() > 60, color


@pytest.mark.parametrize("robot, duration, fps, max_frames", [
    ("slider_crank", 2.55, 30.0, 600),  # 76.5 frame intervals: spread over the run
    ("arm7", 20.0, 30.0, 600),  # capped: 600 frames over 20 s
])
def test_picked_frames_are_the_static_ones(robot, duration, fps, max_frames):
    model = load_model(robot)
    v0 = np.array([12.0, -24.0]) if robot == "slider_crank" else None
    res = simulate(model, duration, None, v0)
    live = LiveScene(model, res.q[0], duration, fps=fps, max_frames=max_frames)
    for t, q in zip(res.t, res.q):  # as the simulator's on_sample passes them
        live.add_sample(t, q)
    live.finish()
    static = build_scene(model, res.q, res.t, frame_times(res.t, fps, max_frames))
    assert len(live.frames) == static.t.size
    np.testing.assert_array_equal(live.times, static.t)
    poses = np.array([json.loads(f)["pose"] for f in live.frames])
    np.testing.assert_array_equal(poses, np.round(static.poses, 5).reshape(static.t.size, -1))


def test_ctrl_c_during_the_viewed_run_keeps_the_samples_and_ends_the_stream(tmp_path):

    out = tmp_path / "sc.csv"
    # adaptive at rtol 1e-10: about 15 simulated s per wall s here, so 100 s is still running
    # when the first frames have arrived
    cmd = [sys.executable, "-m", "multibody_control.cli", "simulate", "slider_crank",
           "--duration", "100", "--v0", "12", "-24", "--rtol", "1e-10", "--out", str(out),
           "--quiet", "--view", "--no-browser"]
    _interrupt_viewed_run(cmd, out)


def test_run_stream_delivers_the_static_scene_frames_and_the_desired_path(tmp_path):
    from multibody_control.animation import scene_from_result
    from multibody_control.scenarios import load_run_scenario, run_scenario, write_csv
    from multibody_control.scenarios.run import sample_reference
    from multibody_control.view_cli import run_scene

    # arm7 computed torque, 0.4 s of it (400 control periods; the rest-to-rest reference
    # starts at 0.25 s, so the arm moves in the frames)
    sc = load_run_scenario(ROOT / "config/scenarios/run_arm7_computed_torque.yaml",
                           {"duration": 0.4})
    ref = sample_reference(sc)
    live = run_scene(sc, ref)
    server = LiveServer(None).start()  # as `run --view`: the port first, the scene later
    got: list = []
    seen_during_run = []
    try:
        with pytest.raises(urllib.error.HTTPError, match="503"):
            urllib.request.urlopen(server.url, timeout=10)
        server.attach(live)
        client = threading.Thread(target=_read_events, args=(server.url + "events", got))
        client.start()

        def on_sample(t, q):  # frames arrive at the client before the run has ended
            live.add_sample(t, q)
            if abs(t - 0.2) < 1e-9:
                deadline = time.perf_counter() + 10.0
                while not got and time.perf_counter() < deadline:
                    time.sleep(0.01)
                seen_during_run.append(len(got))

        res = run_scenario(sc, reference=ref, on_sample=on_sample)
        live.finish("completed")
        client.join(timeout=30)
        assert not client.is_alive()
        page = urllib.request.urlopen(server.url, timeout=10).read().decode()
    finally:
        server.stop()
    assert res.success and res.t.size == 401
    assert seen_during_run and seen_during_run[0] > 0
    frames = [d for _, e, d in got if e == "message"]
    assert [e for _, e, _ in got][-1] == "end" and len(frames) == 13  # 0.4 s at 30 fps
    # the static page's frames of the same result (frame_times picks, build_scene places)
    static = build_scene(sc.model, res.q, res.t, frame_times(res.t, 30.0, 600))
    np.testing.assert_array_equal([d["t"] for d in frames], np.round(static.t, 6))
    np.testing.assert_array_equal(np.array([d["pose"] for d in frames]),
                                  np.round(static.poses, 5).reshape(13, -1))
    # the desired path on the live page is the static page's of the written result (the
    # reference's task-frame path); 2e-5 m: both rounded to 1e-5 m, the CSV to 10 digits
    static_page = scene_from_result(write_csv(res, tmp_path / "r.csv"))
    want = next(p["points"] for p in static_page.paths if p["name"] == "desired path")
    head = live.head()
    got_path = next(p["points"] for p in head["paths"] if p["name"] == "desired path")
    assert '"desired path"' in page
    np.testing.assert_allclose(np.reshape(got_path, (-1, 3)), want, atol=2e-5)
    assert np.ptp(want, axis=0).max() > 2e-3  # the reference moves the tool (3 mm by 0.4 s)


def test_ctrl_c_during_the_viewed_run_scenario_keeps_samples_and_ends_the_stream(tmp_path):

    # arm7 computed torque for 100 s (about 3000 control periods per wall s here): still
    # running when the first frames have arrived
    cmd = [sys.executable, "-m", "multibody_control.cli", "run",
           str(ROOT / "config/scenarios/run_arm7_computed_torque.yaml"), "--duration", "100",
           "--out", str(tmp_path), "--quiet", "--view", "--no-browser"]
    _interrupt_viewed_run(cmd, tmp_path / "run_arm7_computed_torque.csv")


def test_flexible_stream_frames_are_the_static_pages_with_the_deformation(capsys):
    from multibody_control.animation.flexible import flexible_scene
    from multibody_control.animation.source import ResultSamples
    from multibody_dynamics.flexible.loader import load_flexible_model
    from multibody_dynamics.flexible.simulation import simulate_flexible

    bent = {}
    for name, u in (("flexible_manipulator", [1.0, 0.5]), ("flexible_parallel_tool", None)):
        model = load_flexible_model(name)
        chain = getattr(model, "chain", model)
        live = LiveScene(model, chain.neutral(), 0.3, fps=30.0, deformation_scale=20.0)
        res = simulate_flexible(model, 0.3, u=u, output_dt=1e-3 if u else 1e-2,
                                on_sample=live.add_sample)
        live.finish()
        cols = {"t": res.t, **{f"q.{n}": res.q[:, i] for i, n in enumerate(res.names)}}
        samples = ResultSamples(ROOT / f"{name}.csv", res.t, cols, {})
        static = flexible_scene(model, samples, frame_times(res.t, 30.0, 600), 20.0)
        assert len(live.frames) == static.t.size == 10  # 0.3 s at 30 fps
        frames = [json.loads(f) for f in live.frames]
        np.testing.assert_array_equal([d["t"] for d in frames], np.round(static.t, 6))
        np.testing.assert_array_equal(np.array([d["pose"] for d in frames]),
                                      np.round(static.poses, 5).reshape(10, -1))
        np.testing.assert_array_equal(np.array([d["seg"] for d in frames]),
                                      np.round(static.segments, 5).reshape(10, -1))
        assert live.head()["deformation_scale"] == 20.0
        # the drawn beam of the first flexible link: angle [rad] between its first and last
        # cylinder in the last frame (0 for a straight beam)
        beam = [i for i, sh in enumerate(live.shapes) if sh.kind == "cylinder"
                and sh.name == next(b.name for b in chain.bodies if b.flexible)]
        quat = np.array(frames[-1]["pose"]).reshape(-1, 7)[[beam[0], beam[-1]], 3:]
        bent[name] = 2 * np.arccos(min(1.0, abs(float(quat[0] @ quat[1]))))
    # the open chain under these torques bends its first link, drawn x20 (0.62 rad between
    # the beam's ends here); the parallel tool at rest does not bend (round-off only)
    assert bent["flexible_manipulator"] > 0.1 and bent["flexible_parallel_tool"] < 1e-3
    # the command: the flexible chain is streamed instead of refused
    assert main(["simulate", "flexible_manipulator", "--duration", "0.2", "--tau", "1", "0.5",
                 "--quiet", "--view", "--no-browser", "--view-keep", "0"]) == 0
    out = capsys.readouterr().out
    assert "live viewer: elastic deformation drawn x2" in out and "live viewer: 7 frames" in out


def test_solve_ivp_streaming_passes_the_samples_as_it_goes():
    from scipy.integrate import solve_ivp

    from multibody_dynamics.interruptible import solve_ivp_keeping

    calls = [0]

    def f(t, y):  # harmonic oscillator, 1 rad/s
        calls[0] += 1
        return [y[1], -y[0]]

    t_eval = np.linspace(0, 20, 201)
    seen = []
    sol, stopped = solve_ivp_keeping(f, (0, 20), [1.0, 0.0], method="DOP853", t_eval=t_eval,
                                     rtol=1e-10, atol=1e-12, on_sample=lambda t, y: seen.append(
                                         (t, y.copy(), calls[0])))
    n_stream = calls[0]
    calls[0] = 0
    ref = solve_ivp(f, (0, 20), [1.0, 0.0], method="DOP853", t_eval=t_eval, rtol=1e-10,
                    atol=1e-12)
    assert stopped is None and n_stream == calls[0] == sol.nfev  # no extra evaluation
    np.testing.assert_array_equal(sol.y, ref.y)  # the integration is unchanged
    np.testing.assert_array_equal([t for t, _, _ in seen], t_eval)
    np.testing.assert_array_equal(np.array([y for _, y, _ in seen]).T, sol.y)
    # passed while integrating: the sample at t = 10 s came before half of the evaluations
    # were done (of 20 s at a near-constant step)
    assert seen[100][2] < 0.6 * sol.nfev
    # closed form; 1e-8: 20 s at rtol 1e-10 (the error grows with the periods)
    np.testing.assert_allclose(sol.y[0], np.cos(t_eval), atol=1e-8)


def test_invert_streams_the_open_loop_check(tmp_path):
    from multibody_control.animation import scene_from_result
    from multibody_control.inversion.scenario import (
        load_inversion_scenario,
        run_inversion_scenario,
        write_csv,
    )
    from multibody_control.view_cli import check_scene

    sc = load_inversion_scenario(ROOT / "config/scenarios/invert_five_bar_path.yaml")
    scenes = []

    def on_verify(sc_, result):  # as `invert --view`: the scene once the inversion is done
        scenes.append(check_scene(sc_, result))
        return scenes[0].add_sample

    result, ver, _ = run_inversion_scenario(sc, on_verify=on_verify)
    live = scenes[0]
    live.finish()
    assert ver is not None and ver.success
    # the frames are the static scene of the check's samples (frame_times + build_scene)
    static = build_scene(sc.model, ver.q, ver.t, frame_times(ver.t, 30.0, 600))
    assert len(live.frames) == static.t.size == 31  # the 1 s path at 30 fps
    frames = [json.loads(f) for f in live.frames]
    np.testing.assert_array_equal([d["t"] for d in frames], np.round(static.t, 6))
    np.testing.assert_array_equal(np.array([d["pose"] for d in frames]),
                                  np.round(static.poses, 5).reshape(31, -1))
    # the desired path is the static page's of the written result (its y_d); 2e-5 m: both
    # rounded to 1e-5 m, the CSV to its digits
    page = scene_from_result(write_csv(result, sc.model, tmp_path / "inv.csv"))
    want = next(p["points"] for p in page.paths if p["name"] == "desired path")
    got = next(p["points"] for p in live.head()["paths"] if p["name"] == "desired path")
    np.testing.assert_allclose(np.reshape(got, (-1, 3)), want, atol=2e-5)
    # it is the scenario's line from (-0.05, 0.30) m to (0.08, 0.38) m
    # (config/scenarios/invert_five_bar_path.yaml), to the same 2e-5 m
    ends = np.reshape(got, (-1, 3))[[0, -1], :2]
    np.testing.assert_allclose(ends, [[-0.05, 0.30], [0.08, 0.38]], atol=2e-5)
