"""Self-contained HTML animation: one file, three.js and the scene inlined, no network.

The page holds the vendored three.js bundle (``vendor/three.min.js``, MIT, rebuilt by
``tools/build_three_bundle.sh``), the player (``player.js``) and the scene as JSON.  It opens
offline in any browser with WebGL; ``#t=0.5`` at the end of its URL shows t = 0.5 s, paused.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from multibody_dynamics.errors import InputError

from .scene import Scene

_HERE = Path(__file__).resolve().parent

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="multibody_suite">
<title>{title}</title>
<style>
html, body {{ margin: 0; height: 100%; font: 13px sans-serif; color: #222; }}
body {{ display: flex; flex-direction: column; }}
#view {{ flex: 1; min-height: 0; position: relative; }}
#view canvas {{ display: block; }}
#head {{ position: absolute; top: 6px; left: 10px; pointer-events: none; }}
#title {{ font-weight: bold; }}
#info, #legend {{ font-size: 12px; color: #444; }}
#bar {{ display: flex; gap: 10px; align-items: center; padding: 6px 10px;
        border-top: 1px solid #ddd; background: #f2f2f2; }}
#slider {{ flex: 1; }}
#time {{ font-variant-numeric: tabular-nums; min-width: 8em; }}
</style></head>
<body>
<div id="view"><div id="head"><div id="title"></div><div id="info"></div>
<div id="legend"></div></div></div>
<div id="bar"><button id="play">pause</button>
<input id="slider" type="range" min="0" max="0" step="1" value="0">
<span id="time"></span>
<label>speed <select id="speed"><option value="0.1">0.1x</option>
<option value="0.25">0.25x</option><option value="0.5">0.5x</option>
<option value="1" selected>1x</option><option value="2">2x</option>
</select></label></div>
<script id="scene-data" type="application/json">{scene}</script>
<script>/* three.js r{three_revision} (MIT licence, https://threejs.org), bundled by
tools/build_three_bundle.sh */
{three}</script>
<script>{player}</script>
</body></html>
"""


def render_html(scene: Scene) -> str:
    """The page as a string (see the module notes)."""
    return render_page(scene.to_json())


def render_page(data: dict) -> str:
    """The page of a scene given as JSON-ready data (:meth:`Scene.to_json`, or the head of a
    live scene, :mod:`.live`)."""
    three = (_HERE / "vendor" / "three.min.js").read_text()
    player = (_HERE / "player.js").read_text()
    # JSON inside <script>: only "</" could end the element early
    try:  # allow_nan=False: the browser's JSON.parse rejects NaN, so refuse it here
        text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise InputError(f"{data.get('title')}: the scene has NaN or inf placements") from None
    text = text.replace("</", "<\\/")
    return _PAGE.format(title=html.escape(data.get("title") or "multibody animation"),
                        scene=text, three=three, player=player,
                        three_revision=_three_revision(three))


def _three_revision(js: str) -> str:
    import re

    m = re.search(r'="(\d{3})",', js)
    return m.group(1) if m else "?"


def write_html(scene: Scene, path: str | Path) -> Path:
    """Write the self-contained page to ``path``; returns the path."""
    path = Path(path)
    path.write_text(render_html(scene), encoding="utf-8")
    return path
