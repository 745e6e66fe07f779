"""The live viewer (``multibody simulate --view``): cost of streaming and delay to a client.

For each case, in one process: the simulation alone (baseline), then the same simulation
with the live viewer (frames picked at 30 fps of result time, placed by pinocchio, streamed
as Server-Sent Events by the viewer's HTTP server to an HTTP client reading ``/events`` in
another thread).  Reported: wall time of the viewed run against the baseline (ratio), the
frames delivered per wall second beside the frames the simulation produces per wall second
(its own speed times the frame rate), and the delay from the moment the frame's sample
reached the viewer (``on_sample``) to the client's receipt of the frame (median and max).
The browser's own parsing and drawing come on top (not measured here).  Run with
``python bench/run.py --only live_viewer``.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request

import numpy as np

from multibody_control.animation.live import LiveScene, LiveServer
from multibody_dynamics import load_model
from multibody_dynamics.simulate import SimulatorConfig, simulate

#: (robot, duration [s], v0, adaptive): fixed steps of 1 ms (compiled kernel, every step a
#: sample) and the adaptive integrator at rtol 1e-10 (samples every 10 ms), which is slower
CASES = [("slider_crank", 10.0, [12.0, -24.0], False), ("arm7", 20.0, None, False),
         ("slider_crank", 2.0, [12.0, -24.0], True)]
FPS = 30.0


def _client(url: str, out: list) -> None:
    with urllib.request.urlopen(url, timeout=120) as r:
        for raw in r:
            line = raw.decode()
            if line.startswith("data: "):
                out.append((time.perf_counter(), json.loads(line[6:])))


def _case(robot: str, duration: float, v0, adaptive: bool) -> dict:
    model = load_model(robot)
    v0 = None if v0 is None else np.array(v0)
    cfg = SimulatorConfig(rtol=1e-10, atol=1e-12) if adaptive else SimulatorConfig(dt=1e-3)
    simulate(model, 0.05, None, v0, config=cfg)  # warm-up (compiled kernel, caches)
    t0 = time.perf_counter()
    base = simulate(model, duration, None, v0, config=cfg)
    wall0 = time.perf_counter() - t0

    live = LiveScene(model, model.q_initial, duration, fps=FPS, max_frames=100000)
    server = LiveServer(live).start()
    got: list = []
    seen: dict = {}  # sample time -> when the viewer got it

    def on_sample(t, q):
        seen[float(t)] = time.perf_counter()
        live.add_sample(t, q)

    try:
        client = threading.Thread(target=_client, args=(server.url + "events", got))
        client.start()
        time.sleep(0.2)  # the client is connected before the run starts
        t0 = time.perf_counter()
        res = simulate(model, duration, None, v0, config=cfg, on_sample=on_sample)
        live.finish(res.message)
        wall = time.perf_counter() - t0
        client.join(timeout=60)
    finally:
        server.stop()
    frames = [(arrived, d) for arrived, d in got if "k" in d]
    delays = np.array([arrived - seen[float(live.times[d["k"]])] for arrived, d in frames])
    first, last = frames[0][0], frames[-1][0]
    return {
        "name": f"{robot} {duration:g} s, " + ("adaptive rtol 1e-10" if adaptive else
                                                 "fixed 1 ms"),
        "baseline": "the same simulation without the viewer",
        "success": bool(res.success and base.success),
        "samples": int(res.t.size),
        "frames": len(frames),
        "frames_equal_samples_picked": bool(len(frames) == len(live.times)),
        "baseline_wall_s": round(wall0, 4),
        "viewed_wall_s": round(wall, 4),
        "ratio": round(wall / wall0, 3),
        "time_us": round(wall * 1e6, 1), "baseline_time_us": round(wall0 * 1e6, 1),
        "simulated_s_per_wall_s": round(duration / wall0, 2),
        "frames_produced_per_wall_s": round(len(frames) / wall0, 1),
        "frames_delivered_per_wall_s": round(len(frames) / max(last - t0, 1e-9), 1),
        "delivery_span_s": round(last - first, 4),
        "delay_median_ms": round(1e3 * float(np.median(delays)), 3),
        "delay_max_ms": round(1e3 * float(delays.max()), 3),
        "load_avg_1min": round(os.getloadavg()[0], 2),
    }


def run() -> list[dict]:
    return [_case(*c) for c in CASES]


if __name__ == "__main__":
    for e in run():
        print(e)
