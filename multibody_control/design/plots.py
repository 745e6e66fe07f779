"""Drawings of arm designs (Seifried (2014) Figs. 7.7, 7.9, 7.10); matplotlib only when called."""

from __future__ import annotations

import math

from .models import ArmLayout, LinkParameters

#: Balancing masses are drawn as steel discs 50 mm thick: area proportional to mass.
_DISC_DENSITY, _DISC_THICKNESS = 7850.0, 0.05  # kg/m^3, m


def _disc_radius(mass: float) -> float:
    return math.sqrt(max(mass, 0.0) / (math.pi * _DISC_DENSITY * _DISC_THICKNESS))


def draw_arm(ax, layout: ArmLayout, links: tuple[LinkParameters, ...], passive=()):
    """Draw the stretched arm to scale on ``ax``: cart at the origin, links along +x.

    Parameters
    ----------
    ax : matplotlib Axes
    layout : ArmLayout
    links : LinkParameters per link, in chain order (from ``ParametricArm.apply``).
    passive : link names whose proximal joint is passive (drawn hollow).
    """
    from matplotlib.patches import Circle, Rectangle

    ax.add_patch(Rectangle((-0.1, -0.05), 0.2, 0.1, facecolor="0.6", edgecolor="k"))
    x0 = 0.0
    for k, p in enumerate(links):
        color = f"C{k % 10}"
        ax.add_patch(Rectangle((x0 + p.bar_start, -p.width / 2), p.bar_end - p.bar_start, p.width,
                               facecolor=color, edgecolor="k", alpha=0.6, label=p.name))
        ax.add_patch(Circle((x0, 0.0), 0.012, facecolor="w" if p.name in passive else "k",
                            edgecolor="k", zorder=5))
        b = p.balancing
        if b is not None and b.mass > 0:
            if b.offset > 0:
                r = _disc_radius(b.mass / 2)
                for side in (1, -1):
                    ax.plot([x0 + b.position] * 2, [0, side * b.offset], color="k", lw=0.8)
                    ax.add_patch(Circle((x0 + b.position, side * b.offset), r, facecolor="0.2",
                                        edgecolor="k", zorder=4))
            else:
                ax.add_patch(Circle((x0 + b.position, 0.0), _disc_radius(b.mass),
                                    facecolor="0.2", edgecolor="k", zorder=4))
        x0 += p.length
    edge = math.sqrt(6 * layout.load_inertia / layout.load_mass)  # cube with the tabled I
    ax.add_patch(Rectangle((x0 - edge / 2, -edge / 2), edge, edge, facecolor="0.3",
                           edgecolor="k", zorder=3))
    ax.set_aspect("equal")
    ax.autoscale_view()
    ax.set_xlabel("along the arm [m]")
    ax.set_ylabel("[m]")
