"""Bézier shape design of flexible arms (Seifried 2014 Sects. 7.4.1.2, 7.5.1.2).

* ``rebuild``: one rebuild of both arms of ``flexible_manipulator_book`` from a design vector
  (element sections, FE matrices, clamped modes, modal data, chain, modal damping) against the
  plain build of the same model from its file (:func:`load_flexible_model`: YAML, FE, modes,
  modal data, chain), interleaved in this run; its parts for one arm; and one 100-element
  link of ``flexible_cart_manipulator`` against that model's plain build;
* ``evaluation``: one evaluation of the ``flexible_arm_shape`` criterion (rebuild + classical
  inversion of the Sect. 6.4 line with ``y = q_r``) against the rebuild alone;
* ``study``: the swarm of config/designs/flexible_manipulator_book_shape.yaml on a local pool
  of 2 (:func:`bench.common.bench_study`: reduced by default, ``BENCH_FLEXSHAPE_PARTICLES`` x
  ``..._ITERATIONS``, 16 x 5; ``BENCH_FLEXSHAPE=full`` runs the file as written, 160 x 45).
  The study directory keeps ``design.png`` (the contours, as Fig. 7.14) and ``response.png``
  (the error, as Fig. 7.15);
* ``contours_729``: the book's printed design (7.29) for the Sect. 7.5.2 cart manipulator's two
  aluminium arms (1 m, 60 mm thick), drawn with :func:`plot_arm_contours` (Fig. 7.14) into
  ``design_output/bench_flexible_shape/flexible_shape_729.png``; its mass against the initial
  10 mm arms.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bench.common import bench_study, ratio_entry, run_bench_study, study_fields

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "design_output" / "bench_flexible_shape"  # ignored by git
STUDY = HERE.parent / "config" / "designs" / "flexible_manipulator_book_shape.yaml"
ROBOT = "flexible_manipulator_book"


def _rebuild() -> list:
    from multibody_control.design.flexible_shape import FlexibleShapeProblem
    from multibody_dynamics.flexible.beam import assemble_beam
    from multibody_dynamics.flexible.loader import load_flexible_model
    from multibody_dynamics.flexible.modal import clamped_modes
    from multibody_dynamics.flexible.output import arm_modal_data

    p = FlexibleShapeProblem(robot=ROBOT)
    m = p.model()
    x = p.initial * np.array([1.5, 1.2, 0.8, 0.5, 1.3, 1.0, 0.7, 0.5])
    entries = [ratio_entry("flexshape_rebuild_both_arms", lambda: p.chain_of(*p.heights(x)),
                           lambda: load_flexible_model(ROBOT),
                           "load_flexible_model (YAML + FE + modes + SID + chain)",
                           number=5, repeat=3)]
    arm = m.arms["arm1"]
    b = m.builders["arm1"]
    h = x[:4]
    cfg = b.beam_config(h)
    beam = assemble_beam(cfg)
    basis = clamped_modes(beam, arm.modes)
    parts = {"sections": lambda: b.beam_config(h), "fe_matrices": lambda: assemble_beam(cfg),
             "modes": lambda: clamped_modes(beam, arm.modes),
             "modal_data": lambda: arm_modal_data(basis, arm.proximal, arm.distal)}
    whole = ratio_entry("flexshape_rebuild_arm1", lambda: b.modal_data(h),
                        lambda: load_flexible_model(ROBOT), "load_flexible_model", number=5,
                        repeat=3)
    row = {"name": "flexshape_rebuild_parts_arm1", "elements": arm.elements,
           "theory": arm.theory, "whole_ms": whole["time_us"] * 1e-3}
    for k, fn in parts.items():
        t = time.perf_counter()
        for _ in range(20):
            fn()
        row[f"{k}_ms"] = (time.perf_counter() - t) / 20 * 1e3
    entries += [whole, row]
    # arms of 100 Timoshenko elements: the Sect. 2.3 cart manipulator's 1 m aluminium links
    from multibody_dynamics.flexible.shape import BezierArmBuilder, arms_from_model

    cart = "flexible_cart_manipulator"
    link = BezierArmBuilder(arms_from_model(cart, ["link1"])["link1"])
    hc = [0.0129, 0.0104, 0.0221, 0.0053]  # Seifried (2014) (7.29), arm 1 [m]
    entries.append(ratio_entry("flexshape_rebuild_cart_link1", lambda: link.modal_data(hc),
                               lambda: load_flexible_model(cart),
                               f"load_flexible_model({cart}) (2 links)", number=3, repeat=3))
    return entries


def _evaluation() -> dict:
    from multibody_control.design.flexible_shape import FlexibleShapeProblem

    p = FlexibleShapeProblem(robot=ROBOT)
    x = p.initial * np.array([1.5, 1.2, 0.8, 0.5, 1.3, 1.0, 0.7, 0.5])
    p.evaluate(x)  # warm
    ev_t, rb_t = float("inf"), float("inf")
    for k in range(3):
        t = time.perf_counter()
        ev = p.evaluate(x * (1 + 1e-9 * (k + 1)))  # a new design each time: no cached chain
        ev_t = min(ev_t, time.perf_counter() - t)
        t = time.perf_counter()
        p.chain_of(*p.heights(x))  # not p.chain: it caches the last design
        rb_t = min(rb_t, time.perf_counter() - t)
    init = p.evaluate(p.initial)
    return {"name": "flexshape_evaluation_cost", "evaluation_s": ev_t, "rebuild_s": rb_t,
            "rebuild_share": rb_t / ev_t, "initial_max_error_mm": init.info["max_error_mm"],
            "sample_max_error_mm": ev.info["max_error_mm"]}


def _study() -> dict:
    study, full = bench_study(STUDY, "BENCH_FLEXSHAPE", 16, 5)
    out = OUT / study.name
    result = run_bench_study(study, out, plots=True)
    best = result.best
    problem = study.make_problem()
    init = problem.evaluate(problem.initial)
    return {"name": "flexshape_study_pool2", **study_fields(study, result, full),
            "failed": sum(not r.evaluation.ok for r in result.records),
            "initial_max_error_mm": init.info["max_error_mm"],
            "best_max_error_mm": best.evaluation.info.get("max_error_mm"),
            "best_heights_mm": best.evaluation.info.get("heights_mm"),
            "best_frequencies_hz": best.evaluation.info.get("frequencies_hz"),
            "initial_frequencies_hz": init.info.get("frequencies_hz"),
            "mass_kg": best.evaluation.info.get("mass"),
            "out": str(out.relative_to(HERE.parent))}


def _contours_729() -> dict:
    from multibody_control.design.flexible_shape import BOOK_SHAPE_729, plot_arm_contours
    from multibody_dynamics.flexible.shape import BezierArm, total_mass
    from multibody_dynamics.plotting import save_figure, subplots

    # Sect. 7.5.2: aluminium arms of 1 m, initial section 10 mm x 60 mm
    arms = {f"arm{k}": BezierArm(length=1.0, width=0.06, heights=[0.01] * 4, E=7.0e10,
                                 rho=2700.0, nu=0.33, name=f"arm{k}") for k in (1, 2)}
    heights = {"arm1": BOOK_SHAPE_729[:4], "arm2": BOOK_SHAPE_729[4:]}
    OUT.mkdir(parents=True, exist_ok=True)
    fig, ax = subplots(figsize=(7, 3.6))
    plot_arm_contours(ax, arms, heights)
    ax.set_title("Seifried (2014) eq. (7.29): shape-optimized arms (Fig. 7.14)")
    path = save_figure(fig, OUT / "flexible_shape_729.png")
    m0 = total_mass(list(arms.values()), [a.heights for a in arms.values()])
    m = total_mass(list(arms.values()), list(heights.values()))
    return {"name": "flexshape_book_729_contours",
            "figure": str(Path(path).relative_to(HERE.parent)),
            "mass_ratio": m / m0, "initial_mass_kg": m0}


def run() -> list:
    entries = _rebuild()
    entries.append(_evaluation())
    entries.append(_contours_729())
    entries.append(_study())
    return entries
