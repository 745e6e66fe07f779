"""The simulate plot: wrapped crank angle, slider position, no empty panel, plain energy axis,
legends off the data."""

import numpy as np
import pytest

from multibody_control.cli import main


def _inside(ax, legend) -> bool:
    a, b = ax.get_window_extent(), legend.get_window_extent()
    return b.x0 < a.x1 and b.x1 > a.x0 and b.y0 < a.y1 and b.y1 > a.y0


def test_slider_crank_plot(figures, tmp_path):
    rc = main(["simulate", "slider_crank", "--duration", "1", "--v0", "12", "-12", "--quiet",
               "--output-dt", "0.005", "--plot", str(tmp_path / "sc.png")])
    assert rc == 0
    (fig,) = figures
    axes = fig.axes
    assert [a.get_ylabel().split("\n")[0] for a in axes] == [
        "q [rad | m]", "slider_pin", "residual", "E(t) - E(0) [nJ]"]
    crank = axes[0].get_lines()[0].get_ydata()
    finite = crank[np.isfinite(crank)]
    assert finite.max() <= np.pi and finite.min() >= -np.pi  # wrapped
    assert np.sum(~np.isfinite(crank)) >= 1  # the crank (12 rad/s for 1 s) passed +-pi
    x = axes[1].get_lines()[0].get_ydata()
    # slider x = l cos q1 + l cos(q1 + q2) with l = 0.3 m: 0.6 m stretched (t = 0), and the
    # crank makes about two turns in 1 s, so the slider reaches near -0.6 m; 1e-3 m: the
    # samples are 5 ms apart
    assert x[0] == pytest.approx(0.6, abs=1e-9)
    assert x.min() == pytest.approx(-0.6, abs=1e-3)
    assert axes[-1].yaxis.get_offset_text().get_text() == ""  # no offset, no 1e-8 corner
    for ax in axes:
        if ax.get_legend() is not None:
            assert not _inside(ax, ax.get_legend())


def test_open_chain_plot_has_no_empty_constraint_panel(figures, tmp_path):
    rc = main(["simulate", "cart_double_pendulum", "--duration", "0.3", "--v0", "0", "2", "0",
               "--quiet", "--plot", str(tmp_path / "p.png")])
    assert rc == 0
    (fig,) = figures
    labels = [a.get_ylabel().split("\n")[0] for a in fig.axes]
    assert "residual" not in labels
    assert all("no constraints" not in t.get_text() for a in fig.axes for t in a.texts)
