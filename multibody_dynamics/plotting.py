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
