"""Structure of multibody_control.inversion: imports one way, one registry, one interface.

* the package's import graph (every ``import`` statement, at module or function level) has no
  cycle, and no module imports a package module inside a function (no cycle dodged that way);
* every module imports first, in a fresh interpreter, and in seeded random orders;
* multibody_dynamics never imports multibody_control;
* the inverse models satisfy :class:`~multibody_control.inversion.protocol.InverseModel`;
* ``invert``'s options (``options=`` and the keywords) and its failure contract.
"""

import ast
import dataclasses
import inspect
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from multibody_control.inversion import (
    METHODS,
    ForwardOptions,
    InverseModel,
    StableOptions,
    invert,
)
from multibody_control.inversion.closed_flexible import ClosedOutputServo, invert_closed
from multibody_control.inversion.flexible import FlexibleServo
from multibody_control.inversion.servo import ServoConstraints
from multibody_control.outputs import Output
from multibody_control.tasks import half_circle_task
from multibody_dynamics.errors import InputError
from multibody_dynamics.flexible.servo import ElasticServo

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "multibody_control" / "inversion"
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def _package_imports(path: Path):
    """(module imported, at function level?) for every import of a sibling module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom):
                if child.level == 1:  # from .x import ... / from . import x
                    names = [child.module] if child.module else [a.name for a in child.names]
                elif child.module and child.module.startswith("multibody_control.inversion."):
                    names = [child.module.split(".")[2]]
                else:
                    names = []
                found.extend((n.split(".")[0], in_function) for n in names)
            elif isinstance(child, ast.Import):
                found.extend((a.name.split(".")[2], in_function) for a in child.names
                             if a.name.startswith("multibody_control.inversion."))
            visit(child, nested)

    visit(tree, False)
    return found


def test_import_graph_is_acyclic_and_has_no_function_level_imports():
    graph, late = {}, []
    for name in MODULES:
        deps = _package_imports(PACKAGE / f"{name}.py")
        graph[name] = {d for d, _ in deps if d in MODULES}
        late += [f"{name} -> {d}" for d, f in deps if f]
    assert late == [], f"function-level imports of package modules: {late}"
    # Kahn's algorithm: a module is placed once everything it imports is placed
    order, pending = [], dict(graph)
    while pending:
        ready = sorted(m for m, deps in pending.items() if deps <= set(order))
        assert ready, f"import cycle among {sorted(pending)}: {pending}"
        order += ready
        for m in ready:
            del pending[m]
    # the layering the module docstrings promise
    assert graph["result"] == set()
    assert {"methods", "causal", "quasi_static", "closed_loop"}.isdisjoint(graph["internal"])
    core = {"result", "protocol", "desired", "servo", "internal", "causal", "quasi_static",
            "closed_loop", "verify", "flexible", "closed_flexible"}
    assert "methods" not in set().union(*(graph[m] for m in core))


def test_every_module_imports_first_in_any_order():
    """Each module imported first with the package unloaded, then 20 seeded random orders."""
    code = f"""
import importlib, json, random, sys
mods = {MODULES!r}
orders = [[m] + [x for x in mods if x != m] for m in mods]
rng = random.Random(7)
for _ in range(20):
    orders.append(rng.sample(mods, len(mods)))
failures = []
for order in orders:
    for key in [k for k in sys.modules if k.startswith("multibody_control")]:
        del sys.modules[key]
    try:
        for m in order:
            importlib.import_module("multibody_control.inversion." + m)
    except Exception as exc:
        failures.append([order, type(exc).__name__ + ": " + str(exc)])
print(json.dumps({{"orders": len(orders), "failures": failures}}))
"""
    env = {"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["orders"] == len(MODULES) + 20
    assert report["failures"] == []


def test_dynamics_never_imports_control():
    offenders = []
    for path in (ROOT / "multibody_dynamics").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(ROOT)}: {m}" for m in mods
                          if m.startswith("multibody_control")]
    assert offenders == []


# ------------------------------------------------------------------ the InverseModel protocol
def _protocol_methods():
    return [n for n, v in vars(InverseModel).items()
            if callable(v) and not n.startswith("_")]


@pytest.mark.parametrize("cls", [ServoConstraints, ElasticServo, FlexibleServo,
                                 ClosedOutputServo])
def test_inverse_models_match_the_protocol_signatures(cls):
    names = _protocol_methods()
    assert {"internal_rhs", "internal_rhs_batch", "reconstruct", "equilibrium",
            "zero_dynamics_jacobian", "accelerations"} <= set(names)
    for name in names:
        want = list(inspect.signature(getattr(InverseModel, name)).parameters)
        got = list(inspect.signature(getattr(cls, name)).parameters)
        assert got == want, f"{cls.__name__}.{name}{got} != protocol {want}"


def test_servo_constraints_is_an_inverse_model(models):
    m = models["passive_arm"]
    servo = ServoConstraints(m, Output.collocated(m))
    assert isinstance(servo, InverseModel)
    assert servo.nu_int == 1 and servo.counters["dynamics"] == 0


# ------------------------------------------------------------------ registry and options
def test_registry_names_options_and_keywords():
    assert list(METHODS) == ["classical", "ode", "index1", "index2_euler", "stable", "causal",
                             "quasi_static"]
    for name, spec in METHODS.items():
        assert dataclasses.is_dataclass(spec.options), name
        assert callable(spec.solve) and spec.summary, name
    # every keyword invert accepted before the registry is an option of some method
    legacy = {"dt", "t_start", "t_end", "rtol", "atol", "decay_tol", "max_nodes", "bvp_tol",
              "eta_limit", "max_step", "euler_dt", "guess", "ik_guess", "n_free", "free_rows",
              "segments", "end_tol", "verbose", "progress"}
    known = set().union(*({f.name for f in dataclasses.fields(s.options)}
                          for s in METHODS.values()))
    assert legacy <= known


def test_options_object_equals_keywords(models):
    """``options=`` and the old keywords give the same feedforward (classical, collocated)."""
    m = models["passive_arm_minphase"]
    out = Output.collocated(m)
    task = half_circle_task(t0=0.05, tf=1.05)
    kw = invert(m, out, task, "classical", dt=5e-3, rtol=1e-8, atol=1e-10, t_end=1.1)
    op = invert(m, out, task, "classical",
                options=ForwardOptions(dt=5e-3, rtol=1e-8, atol=1e-10, t_end=1.1))
    assert kw.success and op.success, (kw.message, op.message)
    np.testing.assert_array_equal(kw.t, op.t)
    # same arithmetic in the same order: identical samples
    np.testing.assert_array_equal(kw.u, op.u)


def test_options_misuse_raises(models):
    m = models["passive_arm"]
    out, task = Output.collocated(m), half_circle_task(t0=0.05, tf=1.05)
    with pytest.raises(InputError, match="StableOptions"):
        invert(m, out, task, "stable", options=ForwardOptions())
    with pytest.raises(InputError, match="not both"):
        invert(m, out, task, "stable", options=StableOptions(), dt=1e-3)
    with pytest.raises(InputError, match="dt"):
        invert(m, out, task, "stable", dt=0.0)
    with pytest.raises(InputError, match="method"):
        invert(m, out, task, "shooting")
    with pytest.raises(TypeError, match="bvp_toll"):
        invert(m, out, task, "stable", bvp_toll=1e-6)


# ------------------------------------------------------------------ failure contract
@pytest.mark.parametrize("method", ["stable", "classical"])
def test_non_hyperbolic_zero_dynamics_is_a_failed_result(models, method):
    """Undamped passive spring joint, collocated output: the zero dynamics are the spring
    oscillator of the passive link with the actuated joints held, eigenvalues +-j w with
    w^2 = c / (I_s + m (l/2)^2) (link 3 of Seifried (2014) Table 4.2: c = 50 N m/rad,
    m = 3.438 kg, I_s = 0.0723 kg m^2, l = 0.5 m).  Once a SolverError; now ``success=False``
    with the message and the eigenvalues."""
    m = dataclasses.replace(models["passive_arm"], damping=np.zeros(models["passive_arm"].nv))
    res = invert(m, Output.collocated(m), half_circle_task(t0=0.05, tf=1.05), method, dt=1e-3)
    assert not res.success
    assert "not hyperbolic" in res.message
    assert res.t.size == 0 and res.u.shape == (0, m.nu) and res.output_error == np.inf
    w = np.sqrt(50.0 / (0.0723 + 3.438 * 0.25 ** 2))
    # tolerance: the Jacobian is a central difference (step 1e-6), error ~1e-8 relative
    np.testing.assert_allclose(np.sort(res.eigenvalues.imag), [-w, w], rtol=1e-6)
    np.testing.assert_allclose(res.eigenvalues.real, 0.0, atol=1e-6)


class _UndampedOscillator:
    """A minimal inverse model for :func:`invert_closed`: one elastic coordinate whose zero
    dynamics are an undamped oscillator, Q = [[0, 1], [-w^2, 0]] (eigenvalues +-j w)."""

    m, nu_int, w = 1, 1, 3.0
    system = type("System", (), {"nv": 2})()

    def __init__(self):
        self.counters, self.on_evaluate = {"dynamics": 0}, None

    def equilibrium(self, y, guess=None):
        return np.zeros(2)

    def zero_dynamics_jacobian(self, y, eta0=None, step=1e-7):
        return np.array([[0.0, 1.0], [-self.w ** 2, 0.0]]), np.zeros(2)


def test_invert_closed_returns_failure_for_non_hyperbolic_zero_dynamics():
    """Once a SolverError; now ``success=False`` with the message and empty samples."""
    t = np.linspace(0.0, 1.0, 11)

    def ytraj(s):  # the output at rest: y = y' = y'' = 0
        return (np.zeros((np.size(s), 1)),) * 3

    res = invert_closed(_UndampedOscillator(), ytraj, t, method="stable")
    assert not res.success and "not hyperbolic" in res.message
    assert res.t.size == 0 and res.q.shape == (0, 2) and res.eta.shape == (0, 2)
    assert res.nfev == 0 and res.output_error == np.inf
    with pytest.raises(InputError, match="method"):  # misuse still raises
        invert_closed(_UndampedOscillator(), ytraj, t, method="bvp")


def test_cli_reports_a_failed_inversion_with_exit_1(tmp_path, capsys):
    """A solver failure is a result: the summary says FAILED, one line on stderr, exit 1
    (bad input stays exit 2).  Here stable inversion on the non-minimum phase Sect. 4.2.7 arm
    with an interval that leaves no room for the pre-actuation."""
    from multibody_control.cli import main

    path = tmp_path / "s.yaml"
    path.write_text("robot: passive_arm\n"
                    "task:\n  t0: 0.05\n  tf: 1.05\n  joints: {x: {start: -1.0, end: 1.0}}\n"
                    "  arcs: {tip: {center: [0.0, -1.5], radius: 1.0, start_deg: 180.0, "
                    "end_deg: 0.0}}\n"
                    "method: stable\ndt: 0.002\noptions: {t_start: 0.05}\n")
    assert main(["invert", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 1
    out, err = capsys.readouterr()
    assert "stable: FAILED - pre-actuation needs" in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("multibody invert: failed: pre-actuation")
    assert not (tmp_path / "o" / "s.csv").exists()
