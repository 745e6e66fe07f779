"""Architecture guards, read from the source files' syntax trees (no import, no extra tool).

The dependency rules of the design (docs/contributing.md, "Architecture guards"):

* no import cycle between the suite's modules (imports executed when a module is imported:
  module level and class bodies, not function bodies, which defer an import on purpose, and
  not ``if TYPE_CHECKING:`` blocks);
* ``multibody_dynamics`` never imports ``multibody_control`` (anywhere, deferred or not); the
  one exception, by dotted name and only when a deprecated old name is used, is
  ``multibody_dynamics.deprecation.forwarded`` (the former names of a module that moved to
  ``multibody_control``): no other module of ``multibody_dynamics`` imports by name, and
  importing ``multibody_dynamics`` loads nothing of ``multibody_control``;
* library modules (outside the ``ros/`` subpackages) never import rclpy or another ROS 2
  package, nor a ``ros/`` subpackage, at module level: the library must import without ROS;
* only the command line (``multibody_control/cli.py``, ``*_cli.py``) calls ``print``: library
  code reports progress through a callback or ``logging``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("multibody_dynamics", "multibody_control")
# Top-level names of ROS 2 Python packages (rclpy, message packages, launch, ament).
ROS_PACKAGES = {
    "rclpy", "rcl_interfaces", "rosidl_runtime_py", "rosidl_parser", "rmw", "rosgraph_msgs",
    "std_msgs", "sensor_msgs", "trajectory_msgs", "geometry_msgs", "diagnostic_msgs",
    "builtin_interfaces", "action_msgs", "control_msgs", "visualization_msgs", "nav_msgs",
    "tf2_ros", "tf2_msgs", "launch", "launch_ros", "launch_testing", "ament_index_python",
    "message_filters", "diagnostic_updater",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, eager_only: bool):
    """(node, imported names) for every import, skipping function bodies if ``eager_only``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if eager_only and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.Lambda)):
                continue
            if eager_only and isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            stack.append(child)


def imported_modules(name: str, eager_only: bool) -> set[str]:
    """Absolute dotted names ``name`` imports (``from pkg import sub`` gives ``pkg.sub`` when
    that is a module of the suite, else ``pkg``)."""
    path = modules()[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _imports(ast.parse(path.read_text(), str(path)), eager_only):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        subs = {f"{target}.{a.name}" for a in node.names} & modules().keys()
        found.update(subs or {target})
    return found


def internal_graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: {t for t in imported_modules(m, eager_only=True) if t in mods and t != m}
            for m in mods}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def is_ros_module(name: str) -> bool:
    return "ros" in name.split(".")


def test_the_suite_has_modules():
    # the guards below are vacuous if the walk finds nothing
    assert len(modules()) > 40 and "multibody_dynamics.projection" in modules()


def test_no_import_cycle():
    cycle = find_cycle(internal_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_finder_finds_a_cycle():
    # the checker itself: a known three-module cycle and a known acyclic graph
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("name", [m for m in sorted(modules()) if m.startswith(
    "multibody_dynamics")])
def test_dynamics_does_not_import_control(name):
    bad = sorted(t for t in imported_modules(name, eager_only=False)
                 if t.split(".")[0] == "multibody_control")
    assert not bad, f"{modules()[name]}: multibody_dynamics imports {bad}"


def name_imports(tree: ast.AST) -> list[int]:
    """Line numbers of imports by name in ``tree``: ``importlib.import_module``,
    ``import_module`` and ``__import__`` calls."""
    names = {"import_module", "__import__"}
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id in names)
        or (isinstance(node.func, ast.Attribute) and node.func.attr in names))]


def test_dynamics_imports_by_name_only_for_deprecated_names():
    # an import by name escapes the syntax-tree guard above: only the deprecation shim may
    bad = {name: lines for name in modules() if name.startswith("multibody_dynamics")
           and name != "multibody_dynamics.deprecation"
           and (lines := name_imports(ast.parse(modules()[name].read_text())))}
    assert not bad, f"imports by name in multibody_dynamics: {bad}"
    assert name_imports(ast.parse("import importlib\nimportlib.import_module('x')\n"
                                  "__import__('y')\n")) == [2, 3]


def test_importing_dynamics_loads_no_control():
    # the modules that name former attributes now in multibody_control, imported fresh
    code = ("import sys, multibody_dynamics.flexible.closed, multibody_dynamics.flexible.loader, "
            "multibody_dynamics.robot; "
            "print(sorted(m for m in sys.modules if m.startswith('multibody_control')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("name", [m for m in sorted(modules()) if not is_ros_module(m)])
def test_library_module_imports_no_ros_at_module_level(name):
    eager = imported_modules(name, eager_only=True)
    ros = sorted(t for t in eager if t.split(".")[0] in ROS_PACKAGES)
    ros_sub = sorted(t for t in eager if t in modules() and is_ros_module(t))
    assert not ros and not ros_sub, (
        f"{modules()[name]}: a library module imports {ros + ros_sub} at module level; "
        "import it inside the function that needs it, or move the code under ros/")


def test_import_reader_sees_relative_and_ros_imports():
    # the reader itself, on the suite's own files: projection.py imports ``.constraints``
    # at module level (a relative import, resolved to the absolute name), and the simulator
    # node imports rclpy at module level (what the library guard looks for)
    assert "multibody_dynamics.constraints" in imported_modules(
        "multibody_dynamics.projection", eager_only=True)
    eager = imported_modules("multibody_dynamics.ros.simulator_node", eager_only=True)
    assert any(t.split(".")[0] == "rclpy" for t in eager)


def is_cli_module(name: str) -> bool:
    """The command-line layer, the only library code that writes to the terminal:
    ``multibody_control.cli`` and the modules named ``*_cli``."""
    last = name.split(".")[-1]
    return name == "multibody_control.cli" or last.endswith("_cli")


def print_calls(tree: ast.AST) -> list[int]:
    """Line numbers of the calls of the builtin ``print`` in ``tree``."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name) and node.func.id == "print"]


@pytest.mark.parametrize("name", [m for m in sorted(modules()) if not is_cli_module(m)])
def test_library_module_does_not_print(name):
    path = modules()[name]
    lines = print_calls(ast.parse(path.read_text(), str(path)))
    assert not lines, (
        f"{path}: print() on line(s) {lines}; library code reports progress through a "
        "callback (a `progress` parameter) or the logging module, and the command line "
        "(cli.py, *_cli.py) prints")


def test_print_finder_finds_a_print():
    # the checker itself: a nested bare print is found, a method named print is not
    tree = ast.parse("def f(x):\n    if x:\n        print('a', flush=True)\n    x.print()\n")
    assert print_calls(tree) == [3]
    assert is_cli_module("multibody_control.cli")
    assert is_cli_module("multibody_control.animate_cli")
    assert not is_cli_module("multibody_control.scenarios.flexible")
