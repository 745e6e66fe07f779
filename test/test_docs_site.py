"""The documentation's generated parts: benchmark tables (bench/report.py) and schemas
(tools/docs_hooks.py).  The site itself is built by `make docs` (mkdocs --strict) in CI."""

import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # bench/ and tools/ are folders of the repository, not installed
    sys.path.insert(0, str(ROOT))

from bench import report  # noqa: E402
from tools.docs_hooks import expand, literal_blocks, schema  # noqa: E402

# A two-entry results file written here, so the expected cells are known independently.
RESULTS = {
    "generated": "2026-01-01 00:00:00",
    "machine": {"python": "3.11", "pinocchio": "4.1.0", "numpy": "2.0", "processor": "x86_64"},
    "suites": {"rigid": [
        {"name": "arm7 inverse_dynamics", "baseline": "pin.rnea", "ratio": 1.1235,
         "time_us": 1.8682, "baseline_time_us": 1.6628, "target_ratio": 1.2,
         "meets_target": True},
        {"name": "arm7 slow step", "baseline": "pin.rnea", "ratio": 100.18, "time_us": 113.08,
         "baseline_time_us": 1.1288, "target_time_us": 100.0, "meets_target": False},
    ]},
}


def test_ratio_table_rows_come_from_the_results():
    lines = report.table(RESULTS, "ratios", ["rigid"]).splitlines()
    assert lines[0].startswith("| benchmark | baseline | ratio |")
    assert lines[2] == "| arm7 inverse_dynamics | pin.rnea | 1.12 | 1.87 | 1.66 | ≤ 1.2× |"
    assert lines[3] == ("| arm7 slow step | pin.rnea | 100 | 113 | 1.13 | "
                        "≤ 100 µs (**missed**) |")


def test_ros_launch_tables_split_the_demo_moves_and_the_force_control():
    results = {"suites": {"ros_launch": [
        {"name": "dual_arm_load", "robot": "dual_arm_load", "law": "feedback_linearization",
         "max_error": 1.9084e-05, "end_error": 1.5709e-06, "library_max": 1.9084e-05,
         "library_end": 1.5709e-06, "states_per_s": 754.3, "t_last": 3.0,
         "load_average_1min": 14.897, "clean": True},
        {"name": "passive_arm2", "robot": "passive_arm2", "failed": "no loop after 90 s"},
        {"name": "prr_surface force control (quasi_velocity)", "robot": "prr_surface",
         "law": "quasi_velocity", "direction": "forward", "lambda_d": 50.0,
         "multiplier_min": 49.998146, "multiplier_max": 50.0, "max_error": 1.99e-07,
         "end_error": 9.8e-15, "library_multiplier_min": 49.998147,
         "library_multiplier_max": 50.0, "library_max": 1.99e-07, "library_end": 9.8e-15,
         "load_average_1min": 12.0, "clean": True},
        {"name": "flexible_manipulator", "robot": "flexible_manipulator", "flexible": True,
         "law": "pd", "real_time_factor": 0.8312, "paired": 0.9995, "max_error": 0.046123,
         "end_error": 0.0028, "library_max": 0.046121, "library_end": 0.0028,
         "states_per_s": 999.0, "t_last": 3.0, "move": 0.2, "load_average_1min": 9.4,
         "clean": True}]}}
    lines = report.table(results, "ros_launch").splitlines()
    assert len(lines) == 4  # header, rule, the two demo moves; not force control, flexible
    assert lines[2] == ("| dual_arm_load | feedback_linearization | 1.91e-05 / 1.57e-06 | "
                        "1.91e-05 / 1.57e-06 | 3 | 754 | yes | 15 |")
    assert lines[3].startswith("| passive_arm2 | — | failed: no loop after 90 s |")
    lines = report.table(results, "ros_launch_force").splitlines()
    assert lines[2] == ("| quasi_velocity (forward) | 49.99815 to 50 | 49.99815 to 50 | "
                        "1.99e-07 / 9.80e-15 | 1.99e-07 / 9.80e-15 | 12 |")
    lines = report.table(results, "ros_launch_flexible").splitlines()
    assert len(lines) == 3
    assert lines[2] == ("| flexible_manipulator | 0.2 | 0.83 | 99.95 % | 0.0461 / 0.0028 | "
                        "0.0461 / 0.0028 | 3 | yes | 9.4 |")
    # no wall-clock entries yet: one row says how to measure them
    lines = report.table(results, "ros_launch_wallclock").splitlines()
    assert len(lines) == 3 and lines[2].startswith("| not measured yet |"), lines
    # a wall-clock entry (prr_surface among them) goes to its own table only
    results["suites"]["ros_launch"].append(
        {"name": "prr_surface", "robot": "prr_surface", "wallclock": True,
         "law": "projected_inverse_dynamics", "max_error": 0.012345, "end_error": 2.5e-05,
         "states_per_s": 912.4, "hold": 1.0, "load_average_1min": 1.234, "load_after": 2.0,
         "clean": True})
    assert len(report.table(results, "ros_launch").splitlines()) == 4
    assert len(report.table(results, "ros_launch_force").splitlines()) == 3
    assert len(report.table(results, "ros_launch_flexible").splitlines()) == 3
    lines = report.table(results, "ros_launch_wallclock").splitlines()
    assert lines[2:] == ["| prr_surface | projected_inverse_dynamics | 0.0123 / 2.50e-05 | "
                         "912 | yes | 1.2 | 2 |"]


def test_unknown_table_or_suite_is_an_error_naming_it():
    with pytest.raises(report.ReportError, match="unknown benchmark table 'nosuch'"):
        report.table(RESULTS, "nosuch")
    with pytest.raises(report.ReportError, match="no suite 'flexible'"):
        report.table(RESULTS, "ratios", ["flexible"])


def test_marker_alone_on_a_line_is_replaced_and_a_quoted_one_kept():
    page = "Figures:\n\n<!-- bench:ratios rigid -->\n\nWrite `<!-- bench:ratios rigid -->`.\n"
    out = expand(page, RESULTS)
    assert "| arm7 inverse_dynamics |" in out
    assert "Write `<!-- bench:ratios rigid -->`." in out
    assert "\n<!-- bench:" not in out


def test_every_page_expands_with_the_committed_results():
    # what `make docs` does with each page, without MkDocs: no marker left, none failing
    results = report.load()
    for page in sorted((ROOT / "docs").glob("*.md")):
        out = expand(page.read_text(), results)
        assert not re.search(r"^<!--\s*(bench|schema):", out, re.M), page.name


@pytest.mark.parametrize("path, block, module, keys", [
    ("multibody_dynamics/model/config.py", 1, "multibody_dynamics.model.config", "_TOP_KEYS"),
    ("multibody_dynamics/flexible/loader.py", 1, "multibody_dynamics.flexible.loader", "_TOP"),
    ("multibody_control/scenarios/inversion.py", 1, "multibody_control.scenarios.inversion",
     "_TOP"),
    ("multibody_control/scenarios/flexible.py", 1, "multibody_control.scenarios.flexible",
     "_TOP"),
    ("multibody_control/scenarios/run.py", 1, "multibody_control.scenarios.run", "_TOP"),
])
def test_documented_schema_has_exactly_the_validated_top_level_keys(path, block, module, keys):
    # the site shows the docstring's schema; the validator accepts the module's key set
    text = literal_blocks(ROOT / path)[block - 1]
    documented = set(re.findall(r"^([A-Za-z_]\w*):", text, re.M))
    assert documented == set(getattr(importlib.import_module(module), keys))
    assert schema(path, block).startswith("```yaml\n")


def test_readme_tables_are_those_of_the_committed_results():
    # README.md is not built: its tables are rewritten by `make bench` (report.refresh)
    text = (ROOT / "README.md").read_text()
    assert report.BLOCK.search(text), "README.md has no <!-- bench:TABLE --> block"
    assert report.refresh(text, report.load()) == text


def test_refresh_rewrites_only_the_marked_block():
    page = "a\n<!-- bench:ratios rigid -->\nold | table\n<!-- /bench:ratios -->\nb\n"
    out = report.refresh(page, RESULTS)
    assert out.startswith("a\n<!-- bench:ratios rigid -->\n| benchmark |")
    assert "old | table" not in out and out.endswith("| ≤ 100 µs (**missed**) |\n"
                                                     "<!-- /bench:ratios -->\nb\n")
