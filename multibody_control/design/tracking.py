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
is first order in the control period, so :func:`fig_7_8` also runs that case at 20 kHz. Which index
of "mechanical energy" the book compares is not stated; :func:`fig_7_8` reports the actuators'
positive work of the feedforward of both designs along the task: classical inversion of
the exact output on the optimum, stable inversion of the combined output on the initial design
(the route the book takes for it; the stable inversion of the exact output does not find the
initial configuration of the initial design here).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from multibody_dynamics.errors import ModelError
from multibody_dynamics.model import load_model

from ..scenarios import _frame_positions, run_scenario, sample_reference, scenario_from_mapping
from .problem import get_problem
from .problems import PRINTED_OPTIMA

__all__ = ["CASES", "HALF_CIRCLE", "ROBUSTNESS", "case4_robustness", "feedforward_work", "fig_7_8",
           "load_disturbance", "radial_error", "track"]

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


def _scenario(model, gamma, method: str, controller: dict, rate: float, plant: dict | None = None):
    inversion = {"task": HALF_CIRCLE, "method": method, "dt": 0.001}
    if gamma is not None:
        inversion["output"] = {"gamma": gamma}
    raw = {"robot": model, "duration": DURATION, "reference": {"inversion": inversion},
           "controller": dict(controller), "plant": {"rate": rate, **(plant or {})}}
    return scenario_from_mapping(raw)


def track(model, gamma, method: str, controller: dict, rate: float = 1000.0,
          plant: dict | None = None):
    """The closed-loop run of ``model`` on the half circle: inversion of the output (``gamma``
    of y = q_a + Γ q_u, or None for the exact output) by ``method`` as reference, the
    ``controller`` mapping of a run scenario, ``plant`` further keys of the scenario's
    ``plant`` mapping (disturbances, noise); returns the RunResult."""
    return run_scenario(_scenario(model, gamma, method, controller, rate, plant))


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


#: Sect. 7.4.4, case 4: the load of Table 7.2 (6 kg, 0.0147 kg m^2 at the tip) and the
#: uncertainties of the robustness test as printed (load mass +10 %, springs +15 %, dampers
#: -30 %, white measurement noise on all coordinates).  Not printed, chosen: the noise
#: (standard deviations 1e-5 rad | m and 1e-4 rad/s | m/s; the error is insensitive to it, see
#: docs/design.md), the load's inertia scaled with its mass, the gains and the control rate.
ROBUSTNESS = {"load_mass": 6.0, "load_inertia": 0.0147, "load_fraction": 0.10,
              "stiffness": 0.15, "damping": -0.30, "noise_q": 1e-5, "noise_v": 1e-4}
#: feedback-linearization gains of the robustness test: critical damping at 60 rad/s (the gains
#: of Fig. 7.8, 20 rad/s, are run beside them)
FL_STIFF = {"law": "feedback_linearization", "kp": 3600.0, "kd": 120.0}


def load_disturbance(model, fraction: float, load_mass: float, load_inertia: float,
                     frame: str = "tip") -> dict:
    """The relative changes (``mass``, ``com``, ``inertia`` of a run scenario's
    ``plant.disturbances``) of the last body of ``model`` when the point load of mass
    ``load_mass`` [kg] and rotational inertia ``load_inertia`` [kg m^2] about the plane normal,
    merged into that body at ``frame``, grows by ``fraction``.

    Exact for a planar arm moving about z: the added load is a point mass with inertia
    ``fraction * load_inertia`` on the body's z axis at the frame; the body's CoM must stay on
    the line of its old CoM (true when the load sits on the link axis, as here), else a
    ModelError, because the scenario's CoM change is a scale of the lever.
    """
    pm = model.pin_model
    old = pm.inertias[pm.njoints - 1]
    at = pm.frames[pm.getFrameId(frame)].placement.translation
    extra = pin.Inertia(fraction * load_mass, at, np.diag([0.0, 0.0, fraction * load_inertia]))
    new = old + extra
    c_old, c_new = np.asarray(old.lever), np.asarray(new.lever)
    if np.linalg.norm(np.cross(c_old, c_new)) > 1e-12 * max(1.0, float(c_old @ c_old)):
        raise ModelError(f"load_disturbance: the load at frame {frame!r} moves the CoM of the "
                         "last body off its line; a relative CoM change cannot describe it")
    return {"mass": new.mass / old.mass - 1.0,
            "com": float(np.linalg.norm(c_new) / np.linalg.norm(c_old)) - 1.0,
            "inertia": float(new.inertia[2, 2] / old.inertia[2, 2]) - 1.0}


def case4_robustness(rate: float = 1000.0, controllers: tuple = (FL_STIFF, FL)) -> list[dict]:
    """Seifried (2014) Sect. 7.4.4, case 4: the printed optimum of Table 7.6 on the half circle
    with feedback linearization of the exact end-effector output, nominal and with the
    uncertainties of :data:`ROBUSTNESS` (book: a negligible error nominally, 0.338 mm with the
    uncertainties, internal dynamics bounded).  With the first controller: a nominal run and a
    perturbed run without the noise; then a perturbed run with noise per controller; entries as
    :func:`fig_7_8`'s."""
    problem = get_problem("passive_arm4_case4")
    model = problem.build(np.array(PRINTED_OPTIMA["passive_arm4_case4"]))[0].model
    r = ROBUSTNESS
    dist = load_disturbance(model, r["load_fraction"], r["load_mass"], r["load_inertia"])
    dist.update(stiffness=r["stiffness"], damping=r["damping"])
    perturbed = {"disturbances": dist,
                 "noise": {"q": r["noise_q"], "v": r["noise_v"], "seed": 1}}
    quiet = {"disturbances": dist}
    what = "load +10 %, springs +15 %, dampers -30 %"
    runs = [("nominal", controllers[0], None, "negligible"),
            (f"{what}, no noise", controllers[0], quiet, "0.338 mm, with noise")]
    runs += [(f"{what}, noise", ctl, perturbed, "0.338") for ctl in controllers]
    passive = [model.coordinate_names.index(n) for n in model.passive_joint_names]
    out = []
    for what, ctl, plant, book in runs:
        res = track(model, None, "classical", ctl, rate, plant)
        out.append({"name": f"case 4 optimum, exact output, feedback linearization "
                            f"(kp {ctl['kp']:g}, kd {ctl['kd']:g}), {what}",
                    "success": res.success, "message": res.message,
                    "radial_error_max_mm": float(radial_error(model, res.t, res.q).max() * 1e3),
                    "passive_max_rad": float(np.max(np.abs(res.q[:, passive]))),
                    "book_mm": book, "rate_hz": rate})
    return out
