"""Former home of the inversion scenarios of rigid and closed-loop robots, now
:mod:`multibody_control.scenarios.inversion` (loading, running) and
:mod:`multibody_control.scenarios.report` (summary, CSV, plot): the names stay importable here.
"""

from ..scenarios.inversion import (
    InversionScenario,
    inversion_scenario_from_mapping,
    load_inversion_scenario,
    run_inversion_scenario,
)
from ..scenarios.report import LARGE_END_EFFECTOR_ERROR
from ..scenarios.report import inversion_summary as summary
from ..scenarios.report import plot_inversion as plot
from ..scenarios.report import write_inversion_csv as write_csv
from ..scenarios.schema import read_scenario_file, time_law, xy

__all__ = ["LARGE_END_EFFECTOR_ERROR", "InversionScenario", "inversion_scenario_from_mapping",
           "load_inversion_scenario", "plot", "read_scenario_file", "run_inversion_scenario",
           "summary", "time_law", "write_csv", "xy"]
