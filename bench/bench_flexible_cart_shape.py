"""Shape design of the flexible cart manipulator, and shape + output combined (Seifried (2014)
Sect. 7.5.2.1, 7.5.2.3).

* ``printed``: the book's printed designs evaluated with our code on
  ``flexible_cart_manipulator_design`` (2 % modal damping, as the study files): the initial
  10 mm arms and the shape (7.29) with the collocated output (book 88.7 -> 22.0 mm); ΔΓ (7.32),
  (7.33) on the initial arms (1.6, 1.7 mm); the serial design (7.29) + (7.34) (0.7 mm) and the
  concurrent design (7.37) (1.4 mm), each with Γ0 of the shaped arms and with Γ0 of the
  initial arms (the book does not say which); the shape (7.29) with the combined output
  Γ = Γ0 of the shaped arms (ΔΓ = 0; the book finds no minimum-phase shape so); again on a copy of
  the model without gravity (the reading under which the book's output designs came closest, suite
  ``flexible_cart_readings``), with 2 % and 5 % modal damping. Their end-effector error histories
  are drawn as
  Fig. 7.15 (collocated) and Fig. 7.16 (combined outputs), the arm contours of (7.29) and
  (7.37) as Fig. 7.14, into ``design_output/bench_flexible_cart_shape/``;
* ``study_*``: the four study files (config/designs/flexible_cart_manipulator_{shape,serial,
  concurrent,shape_combined}.yaml) on a local pool of 2, and the serial study once more on
  the model without gravity with 5 % damping (the reading where the book's (7.34) is minimum
  phase), through :func:`bench.common.bench_study`: reduced swarms by default
  (``BENCH_CARTSHAPE_PARTICLES`` x ``BENCH_CARTSHAPE_ITERATIONS``, 20 x 6);
  ``BENCH_CARTSHAPE=full`` runs the files as written (the book's swarms: 160 x 45, 120 x 30,
  140 x 45, 160 x 60). ``BENCH_CARTSHAPE_STUDIES=shape,serial,...`` (``printed`` and the keys
  of :data:`STUDIES`) runs only those; the others keep the figures of bench/results.json's
  last run. A long study runs in parts (:func:`bench.common.run_bench_study`):
  ``BENCH_CARTSHAPE_STOP_AFTER=N`` stops it after N iterations, checkpointed in its
  directory, and ``BENCH_CARTSHAPE_RESUME=1`` continues it from there. Each study directory
  keeps ``design.png``, ``response.png`` and ``convergence.png``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import (
    bench_study,
    previous_entries,
    run_bench_study,
    selected,
    study_fields,
)

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "design_output" / "bench_flexible_cart_shape"  # ignored by git
DESIGNS = HERE.parent / "config" / "designs"


def _designs(robot: str = "flexible_cart_manipulator_design", damping: float = 0.02):
    """(key, label, book_mm, problem, x, figure) of every printed design evaluated."""
    from multibody_control.design.flexible_cart_output import BOOK_DGAMMA_732, BOOK_DGAMMA_733
    from multibody_control.design.flexible_cart_shape import (
        BOOK_DGAMMA_734,
        BOOK_PC_737,
        FlexibleCartShapeOutputProblem,
    )
    from multibody_control.design.flexible_shape import BOOK_SHAPE_729, FlexibleShapeProblem

    shape = FlexibleShapeProblem(robot=robot, task="cart_semicircle", dt=5e-3,
                                 damping=damping)
    initial = FlexibleCartShapeOutputProblem(heights=[10.0] * 8, robot=robot, damping=damping)
    serial = {g: FlexibleCartShapeOutputProblem(heights=1e3 * BOOK_SHAPE_729, gamma0=g,
                                                robot=robot, damping=damping)
              for g in ("geometric", "initial")}
    conc = {g: FlexibleCartShapeOutputProblem(gamma0=g, robot=robot, damping=damping)
            for g in ("geometric", "initial")}
    combined = FlexibleCartShapeOutputProblem(dgamma=np.zeros(6), robot=robot, damping=damping)
    return [
        ("initial", "initial 10 mm arms, collocated output", 88.7, shape, shape.initial, 15),
        ("s729", "shape (7.29), collocated output", 22.0, shape, BOOK_SHAPE_729, 15),
        ("d732", "initial arms, Γ0 + ΔΓ (7.32)", 1.6, initial, BOOK_DGAMMA_732, 16),
        ("d733", "initial arms, Γ0 + ΔΓ (7.33)", 1.7, initial, BOOK_DGAMMA_733, 16),
        ("serial_geometric", "serial: (7.29) + ΔΓ (7.34), Γ0 of the shaped arms", 0.7,
         serial["geometric"], BOOK_DGAMMA_734, 16),
        ("serial_initial", "serial: (7.29) + ΔΓ (7.34), Γ0 of the initial arms", 0.7,
         serial["initial"], BOOK_DGAMMA_734, 16),
        ("concurrent_geometric", "concurrent (7.37), Γ0 of the shaped arms", 1.4,
         conc["geometric"], BOOK_PC_737, 16),
        ("concurrent_initial", "concurrent (7.37), Γ0 of the initial arms", 1.4,
         conc["initial"], BOOK_PC_737, 16),
        ("s729_combined", "shape (7.29), combined output Γ0 of the shaped arms (ΔΓ = 0)", None,
         combined, BOOK_SHAPE_729, 16),
    ]


def _no_gravity(directory: Path) -> str:
    """A copy of the model file without gravity (the reading of docs/design.md, "What the
    unprinted data change")."""
    model = HERE.parent / "config" / "robots" / "flexible_cart_manipulator_design.yaml"
    text = model.read_text()
    for old, new in (("gravity: [0.0, -9.81]", "gravity: [0.0, 0.0]"),
                     ("name: flexible_cart_manipulator_design", "name: cart_no_gravity")):
        if old not in text:
            raise RuntimeError(f"{model}: expected {old!r} in the model file")
        text = text.replace(old, new)
    path = directory / "cart_no_gravity.yaml"
    path.write_text(text)
    return str(path)


def _printed() -> list:
    entries = _printed_on()
    with tempfile.TemporaryDirectory() as tmp:
        robot = _no_gravity(Path(tmp))
        entries += _printed_on(robot, "no gravity")
        entries += _printed_on(robot, "no gravity, 5 % damping", 0.05)
    entries.append(_contours())
    return entries


def _printed_on(robot: str = "flexible_cart_manipulator_design", reading: str = "",
                damping: float = 0.02) -> list:
    from multibody_dynamics.plotting import save_figure, subplots

    OUT.mkdir(parents=True, exist_ok=True)
    entries = []
    figs = {n: subplots(figsize=(8, 4)) for n in (15, 16)}
    tag = "".join(c if c.isalnum() else "_" for c in reading)
    for key, label, book, problem, x, fig in _designs(robot, damping):
        if reading:
            key, label = f"{key}_{tag}", f"{reading}: {label}"
        t = time.perf_counter()
        ev = problem.evaluate(x)
        wall = time.perf_counter() - t
        entries.append({"name": f"cartshape_{key}", "label": label, "book_mm": book,
                        "ok": ev.ok, "error_mm": 1e3 * ev.value if ev.ok else None,
                        "message": ev.message,
                        "spectral_abscissa": ev.info.get("spectral_abscissa"),
                        "heights_mm": ev.info.get("heights_mm"), "scale": ev.info.get("scale"),
                        "frequencies_hz": ev.info.get("frequencies_hz"), "evaluation_s": wall})
        if ev.ok:
            ts, _, e, _, _ = problem.tracking(x)
            book_text = "non-minimum phase" if book is None else f"{book:g}"
            figs[fig][1].plot(ts, 1e3 * e, label=f"{label}: max {1e3 * e.max():.3g} mm "
                              f"(book {book_text})")
        elif fig == 16:
            figs[fig][1].plot([], [], " ", label=f"{label}: rejected ({ev.message})")
    for n, title in ((15, "collocated output y = q_r (as Seifried Fig. 7.15)"),
                     (16, "combined output y = q_r + Γ q_e (as Seifried Fig. 7.16)")):
        fig, ax = figs[n]
        ax.set_xlabel("t [s]")
        ax.set_ylabel("end-effector error [mm]")
        ax.set_title(f"classical inversion, {title}" + (f", {reading}" if reading else ""))
        ax.legend(fontsize=7)
        suffix = f"_{tag}" if reading else ""
        save_figure(fig, OUT / f"fig_7_{n}{suffix}.png")
    return entries


def _contours() -> dict:
    from multibody_control.design.flexible_cart_shape import BOOK_PC_737
    from multibody_control.design.flexible_shape import (
        BOOK_SHAPE_729,
        FlexibleShapeProblem,
        plot_arm_contours,
    )
    from multibody_dynamics.plotting import save_figure, subplots

    p = FlexibleShapeProblem(robot="flexible_cart_manipulator_design", task="cart_semicircle",
                             dt=5e-3)
    m = p.model()
    arms = {n: m.arms[n] for n in p.arm_names}
    fig, axes = subplots(2, 1, figsize=(7, 6.5))
    for ax, (label, h) in zip(axes, (("(7.29)", BOOK_SHAPE_729), ("(7.37)", BOOK_PC_737[:8]))):
        plot_arm_contours(ax, arms, {"arm1": h[:4], "arm2": h[4:]})
        ax.set_title(f"Seifried (2014) {label}: arm contours (as Fig. 7.14)")
    path = save_figure(fig, OUT / "fig_7_14.png")
    return {"name": "cartshape_contours", "figure": str(Path(path).relative_to(HERE.parent))}


#: the studies of the suite: key -> (study file suffix, options, reading)
STUDIES = {
    "shape": ("shape", None, ""),
    "serial": ("serial", None, ""),
    "concurrent": ("concurrent", None, ""),
    "shape_combined": ("shape_combined", None, ""),
    # the reading where (7.34) is minimum phase (the model file is written when it runs)
    "serial_no_gravity": ("serial", {"damping": 0.05}, "no gravity, 5 % damping"),
}


def _entry_name(key: str) -> str:
    name, _, reading = STUDIES[key]
    tag = "".join(c if c.isalnum() else "_" for c in reading)
    return f"cartshape_study_{name}{'_' + tag if tag else ''}"


def _study(key: str, robot: str | None = None) -> dict:
    name, options, reading = STUDIES[key]
    path = DESIGNS / f"flexible_cart_manipulator_{name}.yaml"
    tag = "".join(c if c.isalnum() else "_" for c in reading)
    if options is not None:
        options = {**options, "robot": robot}
    study, full = bench_study(path, "BENCH_CARTSHAPE", 20, 6, options, tag=tag)
    out = OUT / study.name
    result = run_bench_study(study, out, plots=True, env="BENCH_CARTSHAPE")
    best = result.best
    ok = best is not None and best.evaluation.ok
    info = best.evaluation.info if best is not None else {}
    return {"name": _entry_name(key), "study": name, "reading": reading,
            **study_fields(study, result, full),
            "best_ok": ok, "best_error_mm": 1e3 * best.evaluation.value if ok else None,
            "best": ({n: round(float(v), 5) for n, v in zip(study.make_problem().names, best.x)}
                     if best is not None else None),
            "best_heights_mm": info.get("heights_mm"),
            "out": str(out.relative_to(HERE.parent))}


def run() -> list:
    chosen = selected("BENCH_CARTSHAPE_STUDIES", ("printed", *STUDIES))
    if "printed" in chosen:
        entries = _printed()
    else:  # the printed designs' figures of the last run stay
        entries = [e for e in previous_entries("flexible_cart_shape", None)
                   if not e["name"].startswith("cartshape_study_")]
    with tempfile.TemporaryDirectory() as tmp:
        for key in STUDIES:
            if key in chosen:
                entries.append(_study(key, _no_gravity(Path(tmp))
                                      if STUDIES[key][1] is not None else None))
            else:  # not run now: the last run's figures stay
                entries += previous_entries("flexible_cart_shape", [_entry_name(key)])
    return entries
