"""Former home of the inversion scenarios of flexible robots, now
:mod:`multibody_control.scenarios.flexible` (loading, running) and
:mod:`multibody_control.scenarios.report` (summaries, CSV, plots): the names stay importable
here.
"""

from ..scenarios.flexible import (
    BOOK_TOOL_ERROR_MM,
    BOOK_ZERO_DYNAMICS,
    CLOSED_METHODS,
    CLOSED_OUTPUTS,
    ClosedDesign,
    ClosedDesignSpec,
    ClosedInversionScenario,
    ClosedScenarioInterrupted,
    FlexibleInversionScenario,
    FlexibleScenarioInterrupted,
    closed_grid,
    closed_output,
    closed_task_outputs,
    closed_task_path,
    closed_zero_dynamics,
    is_flexible_scenario,
    load_flexible_scenario,
    parallel_tool_task,
    run_closed_design,
    run_closed_scenario,
    run_flexible_scenario,
    task_body,
)
from ..scenarios.report import (
    closed_summary,
    flexible_summary,
    plot_closed,
    plot_flexible,
    write_closed_csv,
    write_flexible_csv,
)

__all__ = ["BOOK_TOOL_ERROR_MM", "BOOK_ZERO_DYNAMICS", "CLOSED_METHODS", "CLOSED_OUTPUTS",
           "ClosedDesign", "ClosedDesignSpec", "ClosedInversionScenario",
           "ClosedScenarioInterrupted", "FlexibleInversionScenario", "FlexibleScenarioInterrupted",
           "closed_grid", "closed_output", "closed_summary",
           "closed_task_outputs", "closed_task_path", "closed_zero_dynamics",
           "flexible_summary", "is_flexible_scenario", "load_flexible_scenario",
           "parallel_tool_task", "plot_closed", "plot_flexible", "run_closed_design",
           "run_closed_scenario", "run_flexible_scenario", "task_body", "write_closed_csv",
           "write_flexible_csv"]
