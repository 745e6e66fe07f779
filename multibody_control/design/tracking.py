"""The optimized design tested by simulation: Seifried (2014) Sect. 7.4.3, Fig. 7.8.

The end effector of the manipulator with two passive joints (``passive_arm2``) follows the
half circle of Sect. 4.2.7 (centre (0, -1.5) m, radius 1 m, cart from -1 m to 1 m, motion
from t0 = 0.2 s to tf = 1.7 s, 5th-order polynomials) under four control concepts:

1. the optimized design of case 1 (Table 7.3) with feedback linearization of the exact output
   y = [x, r_tip] (book: radial error below 0.002 mm);
2. the same design with feedback linearization of the linearly combined output
   y = q_a + Γ q_u of the design criterion (eq. 5.23; the approximated end-effector point,
   book: about 2.5 mm);
3. the initial design (Table 7.1) with feedback linearization of a relocated output,
   Γ1 = 0.570, Γ2 = 0.333, which the book finds minimum phase (book: nearly 20 mm);
4. the initial design with stable inversion of the combined output as feedforward and a PID
   controller on the actuated coordinates (Sect. 4.2.5; book: about 2.5 mm, like 2).

Each is a closed-loop run (:func:`~multibody_control.scenarios.run_scenario`) whose reference
is the inversion of that output along the task (classical for the minimum-phase ones, stable
for 4), started on the reference without initial error. The figure is the radial error
| |r_tip - c| - R | over [t0, tf].

Not printed in the book, chosen: the feedback-linearization gains (critical damping at 20
rad/s: kp = 400 1/s^2, kd = 40 1/s), the PID gains (kp = 1000 N/m | N m/rad, kd = 100,
ki = 1000; with 400, 80, 400 as in run_passive_arm_pid.yaml the error is 3.5 instead of 3.2 mm),
the control rate (1 kHz, zero-order hold) and the inversion step (1 ms). The book's
feedback linearization is continuous in time; with the zero-order hold the exact-output error
is first order in the control period, so :func:`fig_7_8` also runs that case at 20 kHz. Which index of
"mechanical energy" the book compares is not stated; :func:`fig_7_8` reports the actuators'
positive work of the feedforward of both designs along the task: classical inversion of
the exact output on the optimum, stable inversion of the combined output on the initial design
(the route the book takes for it; the stable inversion of the exact output does not find the
initial configuration of the initial design here).
"""

from __future__ import annotations

import numpy as np

from multibody_dynamics.model import load_model

from ..scenarios import _frame_positions, run_scenario, sample_reference, scenario_from_mapping
from .problem import get_problem
from .problems import PRINTED_OPTIMA

__all__ = ["CASES", "HALF_CIRCLE", "feedforward_work", "fig_7_8", "radial_error", "track"]

CENTER, RADIUS = np.array([0.0, -1.5]), 1.0   # m, Sect. 4.2.7
HALF_CIRCLE = {
    "t0": 0.2, "tf": 1.7, "order": 5,
    "joints": {"x": {"start": -1.0, "end": 1.0}},
    "arcs": {"tip": {"center": CENTER.tolist(), "radius": RADIUS, "start_deg": 180.0,
                     "end_deg": 0.0}},
}
COMBINED = [[0.0, 0.0], [0.0, 0.0], [2.0 / 3.0, 1.0 / 3.0]]   # eq. 5.23 (links of 1/3 m)
RELOCATED = [[0.0, 0.0], [0.0, 0.0], [0.570, 0.333]]          # Sect. 7.4.3, initial design
FL = {"law": "feedback_linearization", "kp": 400.0, "kd": 40.0}
PID = {"law": "pid", "kp": 1000.0, "kd": 100.0, "ki": 1000.0}
DURATION = 2.0     # s: the motion ends at 1.7 s
#: name: (design, output Gamma or None for the exact output, inversion method, controller,
#: the book's radial error [mm] as printed in Sect. 7.4.3)
CASES = {
    "optimized design, exact output, feedback linearization":
        ("optimum", None, "classical", FL, "< 0.002"),
    "optimized design, combined output, feedback linearization":
        ("optimum", COMBINED, "classical", FL, "about 2.5"),
    "initial design, relocated output, feedback linearization":
        ("initial", RELOCATED, "classical", FL, "nearly 20"),
    "initial design, stable inversion + PID":
        ("initial", COMBINED, "stable", PID, "about 2.5"),
}


def radial_error(model, t, Q, t0: float = HALF_CIRCLE["t0"],
                 tf: float = HALF_CIRCLE["tf"]) -> np.ndarray:
    """| |r_tip - c| - R | [m] of the states ``Q`` (N, nq) at times ``t`` in [t0, tf]."""
    t = np.asarray(t)
    sel = (t >= t0) & (t <= tf)
    tip = _frame_positions(model, "tip", np.asarray(Q)[sel])[:, :2]
    return np.abs(np.linalg.norm(tip - CENTER, axis=1) - RADIUS)


def _scenario(model, gamma, method: str, controller: dict, rate: float):
    inversion = {"task": HALF_CIRCLE, "method": method, "dt": 0.001}
    if gamma is not None:
        inversion["output"] = {"gamma": gamma}
    raw = {"robot": model, "duration": DURATION, "reference": {"inversion": inversion},
           "controller": dict(controller), "plant": {"rate": rate}}
    return scenario_from_mapping(raw)


def track(model, gamma, method: str, controller: dict, rate: float = 1000.0):
    """The closed-loop run of ``model`` on the half circle: inversion of the output (``gamma``
    of y = q_a + Γ q_u, or None for the exact output) by ``method`` as reference, the
    ``controller`` mapping of a run scenario; returns the RunResult."""
    return run_scenario(_scenario(model, gamma, method, controller, rate))


def feedforward_work(model, gamma, method: str, rate: float = 1000.0) -> float:
    """Positive work of the actuators [J] in the inversion of the half circle for the output
    ``gamma`` (None: exact) by ``method``: the integral of max(u . B^T v, 0) along the inverse
    model's motion."""
    ref = sample_reference(_scenario(model, gamma, method, FL, rate))
    power = np.einsum("ij,ij->i", ref.u_ff, ref.v @ np.asarray(model.B, float))
    return float(np.trapezoid(np.maximum(power, 0.0), ref.t))


def _model(design: str):
    """The case-1 optimum (built right before its run: the parametric model is changed in
    place by every build) or the initial design."""
    if design == "initial":
        return load_model("passive_arm2")
    problem = get_problem("passive_arm2_case1")
    return problem.build(np.array(PRINTED_OPTIMA["passive_arm2_case1"]))[0].model


def fig_7_8(rate: float = 1000.0, fine_rate: float | None = 20000.0) -> list[dict]:
    """The four concepts of Fig. 7.8 and the feedforward work of both designs: entries with
    the radial error [mm], the largest passive-joint angle [rad] and the book's figure; the
    exact-output case also at ``fine_rate`` [Hz] (None: not run)."""
    out = []
    for name, (design, gamma, method, ctl, book) in CASES.items():
        model = _model(design)
        res = track(model, gamma, method, ctl, rate)
        passive = [model.coordinate_names.index(n) for n in model.passive_joint_names]
        entry = {"name": name, "success": res.success, "message": res.message,
                 "radial_error_max_mm": float(radial_error(model, res.t, res.q).max() * 1e3),
                 "passive_max_rad": float(np.max(np.abs(res.q[:, passive]))),
                 "book_mm": book, "rate_hz": rate}
        if gamma is None and fine_rate:
            fine = track(_model(design), gamma, method, ctl, fine_rate)
            entry["fine_rate_hz"] = fine_rate
            entry["radial_error_max_mm_fine"] = float(
                radial_error(fine.scenario.model, fine.t, fine.q).max() * 1e3)
        out.append(entry)
    work = {design: feedforward_work(_model(design), gamma, method, rate)
            for design, gamma, method in (("optimum", None, "classical"),
                                          ("initial", COMBINED, "stable"))}
    out.append({"name": "feedforward positive work, optimized / initial design",
                "work_optimum_J": work["optimum"], "work_initial_J": work["initial"],
                "work_ratio": work["optimum"] / work["initial"], "book": "+15 % energy (case 1)"})
    return out
