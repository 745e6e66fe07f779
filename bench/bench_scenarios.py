"""The shipped closed-loop scenarios (config/scenarios/run_*.yaml), full length, each with the
statement of its source checked on the result (``holds``); test/test_scenarios.py runs short
versions.  Every entry carries the summary figures and the wall time of the run (reference
and controller design included)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from multibody_control.scenarios import load_run_scenario, run_scenario, sample_reference

DIR = Path(__file__).resolve().parents[1] / "config" / "scenarios"


def _run(name, overrides=None, reference=None):
    sc = load_run_scenario(DIR / name, overrides)
    start = time.perf_counter()
    ref = reference if reference is not None else sample_reference(sc)
    res = run_scenario(sc, reference=ref)
    return res, ref, time.perf_counter() - start


def _entry(name, res, wall, claim, holds, **extra):
    m = res.metrics
    e = {"name": name, "success": res.success, "wall_s": round(wall, 3), "claim": claim,
         "holds": bool(holds and res.success),
         "joint_error_max": m["joint_error_max"], "joint_error_rms": m["joint_error_rms"],
         "joint_error_final": m["joint_error_final"],
         "u_peak": [float(x) for x in m["u_peak"]], "u_norm_mean": m["u_norm_mean"]}
    for k in ("task_error_max", "task_error_rms", "force_error_max", "residual_max",
              "analytic_deviation", "passive_torque_max"):
        if k in m:
            e[k] = m[k]
    e.update(extra)
    return e


def run() -> list[dict]:
    out = []
    ff, _, w1 = _run("run_prr_surface.yaml")
    free, _, w2 = _run("run_prr_surface.yaml",
                       {"controller": {"options": {"force_control": False}}})
    ok = (ff.metrics["force_error_max"] < 1e-6 and free.metrics["u_norm_mean"]
          < ff.metrics["u_norm_mean"] and ff.metrics["joint_error_final"]
          < 0.05 * ff.metrics["joint_error_max"])
    out.append(_entry("prr_surface force control (Aghili 2010)", ff, w1,
                      "tracking converges; lambda -> 50 N; ||u|| smaller with u_o = 0", ok,
                      u_norm_mean_without_force_control=free.metrics["u_norm_mean"],
                      lambda_final=float(ff.lam[-1, 0]),
                      lambda_final_without_force_control=float(free.lam[-1, 0])))
    for name in ("run_five_bar_pid.yaml", "run_slider_crank.yaml"):
        res, _, w = _run(name)
        e0 = float(np.max(np.abs(res.joint_error[0, res.controlled])))
        ok = res.metrics["analytic_deviation"] < 10 * e0 * 1e-3 and \
            res.metrics["passive_torque_max"] < 1e-12
        out.append(_entry(name[4:-5], res, w, "e'' + K_D e' + K_P e = 0 (Aghili 2005 eq. 47); "
                          "zero passive torque", ok))
    res, _, w = _run("run_arm7_computed_torque.yaml")
    out.append(_entry("arm7_computed_torque", res, w, "e'' + K_D e' + K_P e = 0",
                      res.metrics["analytic_deviation"] < 20 * 0.02 * 1e-3))
    lqr, ref, w = _run("run_passive_arm_lqr.yaml")
    pid, _, wp = _run("run_passive_arm_pid.yaml", reference=ref)
    dist, _, wd = _run("run_passive_arm_lqr_disturbed.yaml", reference=ref)
    # the same three without the initial error: the tracking error of the motion itself
    quiet = {k: _run(f"run_passive_arm_{k}.yaml", {"initial_error": None}, ref)[0]
             for k in ("lqr", "lqr_disturbed")}
    out.append(_entry("passive_arm_lqr (Seifried 4.2.7)", lqr, w,
                      "time-variant LQR recovers quickly from an initial error",
                      lqr.metrics["joint_error_final"] < 0.01 * lqr.metrics["joint_error_max"],
                      beta_error_rms=lqr.metrics["error_rms.beta"],
                      task_error_max_without_initial_error=quiet["lqr"].metrics["task_error_max"]))
    out.append(_entry("passive_arm_pid (Seifried 4.2.7)", pid, wp,
                      "PID alone: stronger vibration of the passive joint than LQR",
                      pid.metrics["error_rms.beta"] > 2 * lqr.metrics["error_rms.beta"],
                      beta_error_rms=pid.metrics["error_rms.beta"],
                      beta_error_rms_lqr=lqr.metrics["error_rms.beta"]))
    ratio_beta = dist.metrics["error_rms.beta"] / lqr.metrics["error_rms.beta"]
    # the book's error: end effector against the desired path (Γ approximation included),
    # without the initial error so that the recovery does not dominate
    ratio_path = (quiet["lqr_disturbed"].metrics["path_error_rms"]
                  / quiet["lqr"].metrics["path_error_rms"])
    ratio_path_max = quiet["lqr_disturbed"].metrics["path_error_max"] / \
        quiet["lqr"].metrics["path_error_max"]
    out.append(_entry("passive_arm_lqr_disturbed (Seifried 4.2.7)", dist, wd,
                      "with disturbances the LQR error about doubles", 1.4 < ratio_path < 3.0,
                      beta_error_rms=dist.metrics["error_rms.beta"],
                      beta_rms_ratio_to_nominal=ratio_beta,
                      path_error_rms_mm_without_initial_error=[
                          quiet[k].metrics["path_error_rms"] * 1e3
                          for k in ("lqr", "lqr_disturbed")],
                      path_error_rms_ratio_without_initial_error=ratio_path,
                      path_error_max_ratio_without_initial_error=ratio_path_max))
    # feedback linearization of a minimum-phase design: the output error follows the closed
    # form up to the zero-order hold (first order in dt: the deviation halves at twice the rate)
    fl, _, wf = _run("run_minphase_feedback_linearization.yaml")
    fl2, _, _ = _run("run_minphase_feedback_linearization.yaml", {"plant": {"rate": 2000.0}})
    e0 = 0.02  # rad | m, the scenario's initial error
    dev, dev2 = fl.metrics["analytic_deviation"], fl2.metrics["analytic_deviation"]
    beta = max(fl.metrics["error_max.beta1"], fl.metrics["error_max.beta2"])
    out.append(_entry("minphase_feedback_linearization (Seifried 3.1.3, 7.4)", fl, wf,
                      "output error e'' + K_D e' + K_P e = 0 up to the ZOH (first order in dt); "
                      "passive joints bounded (minimum phase)",
                      dev < 0.1 * e0 and 1.8 < dev / dev2 < 2.2 and beta < 0.1,
                      output_error_max=fl.metrics["output_error_max"],
                      analytic_deviation_2khz=dev2, passive_error_max=beta))
    return out
