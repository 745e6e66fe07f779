"""Scenario files: YAML -> validated scenario -> run -> summary, CSV, PNG.

One package for every scenario kind the ``multibody`` command reads:

=====================  ==========================================================================
:mod:`.schema`         the one schema checker (numbers, mappings, matrices, time laws, files)
                       every kind validates its keys with, so that a value gets the same answer
                       and the same error wording in every file
:mod:`.inversion`      inversion scenarios of rigid and closed-loop robots (``invert_*.yaml``)
:mod:`.flexible`       inversion scenarios of flexible robots, open and closed (``invert_*.yaml``
                       whose robot is a flexible model)
:mod:`.run`            closed-loop scenarios (``run_*.yaml``, ``multibody run``)
:mod:`.report`         the summaries, CSV files and plots of all of them
=====================  ==========================================================================

The names of the former ``multibody_control/scenarios.py`` (the closed-loop scenarios) stay
importable from here: ``summary_table``, ``write_csv`` and ``plot`` are the closed-loop
reports (:func:`.report.run_summary`, :func:`.report.write_run_csv`, :func:`.report.plot_run`).
"""

from .flexible import (
    ClosedInversionScenario,
    FlexibleInversionScenario,
    is_flexible_scenario,
    load_flexible_scenario,
    run_flexible_scenario,
)
from .inversion import InversionScenario, load_inversion_scenario, run_inversion_scenario
from .report import plot_run as plot
from .report import run_summary as summary_table
from .report import write_run_csv as write_csv
from .run import (
    Disturbances,
    RunResult,
    RunScenario,
    SampledReference,
    _frame_positions,
    build_controller,
    error_dynamics_solution,
    load_run_scenario,
    perturbed_model,
    run_scenario,
    sample_reference,
    scenario_from_mapping,
)

__all__ = ["ClosedInversionScenario", "Disturbances", "FlexibleInversionScenario",
           "InversionScenario", "RunResult", "RunScenario", "SampledReference",
           "_frame_positions", "build_controller", "error_dynamics_solution",
           "is_flexible_scenario", "load_flexible_scenario", "load_inversion_scenario",
           "load_run_scenario", "perturbed_model", "plot", "run_flexible_scenario",
           "run_inversion_scenario", "run_scenario", "sample_reference", "scenario_from_mapping",
           "summary_table", "write_csv"]
