"""Seifried (2014) Fig. 7.8: the case-1 optimum and the initial design of the manipulator with
two passive joints tracking the half circle of Sect. 4.2.7 under four control concepts
(multibody_control.design.tracking), with the radial end-effector error beside the book's
figure, and the feedforward work of both designs; then the robustness test of case 4
(Sect. 7.4.4: the Table 7.6 optimum, nominal and with the book's uncertainties)."""

from __future__ import annotations

import os
import time

from multibody_control.design.tracking import case4_robustness, fig_7_8


def run() -> list[dict]:
    start = time.perf_counter()
    out = fig_7_8()
    out[-1:-1] = case4_robustness()
    wall = time.perf_counter() - start
    for e in out:
        e["load_average_1min"] = round(os.getloadavg()[0], 2)
    out[-1]["wall_s_all"] = round(wall, 1)
    return out
