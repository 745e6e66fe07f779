"""Figures written to PNG files, without a display (matplotlib's Agg backend).

matplotlib is imported on first use only, so that the dynamics stay importable (and fast to
import in nodes) without it.
"""

from __future__ import annotations

from pathlib import Path


def subplots(*args, **kwargs):
    """``matplotlib.pyplot.subplots`` on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_figure(fig, path) -> Path:
    """Lay out ``fig``, write it to ``path`` (PNG, 110 dpi), close it; returns the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


_PREFIXES = {-15: "f", -12: "p", -9: "n", -6: "\N{MICRO SIGN}", -3: "m", 0: "", 3: "k", 6: "M"}


def engineering_scale(values, unit: str) -> tuple[float, str]:
    """Factor and unit label that bring ``values`` to 1..1000 (``(1e9, "nJ")`` for values of a
    few 1e-8 J), so that an axis needs neither matplotlib's offset nor its ``1e-8`` corner
    label."""
    import numpy as np

    peak = float(np.max(np.abs(values))) if np.size(values) else 0.0
    if not np.isfinite(peak) or peak == 0.0:
        return 1.0, unit
    e = int(np.clip(3 * np.floor(np.log10(peak) / 3), -15, 6))
    return 10.0 ** -e, _PREFIXES[e] + unit


def plain_axis(ax) -> None:
    """No offset (``+3.178``) and no scientific corner label on the y axis."""
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)


def legend_outside(ax, **kwargs):
    """Legend to the right of the axes, off the data."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                     fontsize=7, frameon=False, **kwargs)


def wrap_angle(x):
    """Angles wrapped to (-pi, pi] [rad], NaN at the first sample after each wrap (so a line
    plot breaks there instead of drawing the jump); same length as ``x``."""
    import numpy as np

    y = np.angle(np.exp(1j * np.asarray(x, float)))
    jump = np.abs(np.diff(y)) > np.pi
    y = y.copy()
    y[1:][jump] = np.nan  # one missing point per wrap: the line breaks there
    return y
