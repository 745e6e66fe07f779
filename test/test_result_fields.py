"""Every inversion route's result speaks the same field names (docs/inversion-api.md, "Result
fields"): ``nfev`` for the dynamics evaluations, ``output_error`` for the servo-constraint
residual max |y - y_d|, ``success``/``message``/``method``/``wall_time``; the closed-loop
simulation's constraint residual is ``residual``, as in every simulation result.  The old names
stay as read-only aliases that warn."""

import dataclasses

import numpy as np
import pytest

from multibody_control.inversion import (
    METHODS,
    CausalInversionResult,
    ForwardOptions,
    InversionResult,
    invert,
)
from multibody_control.inversion.closed_flexible import (
    ClosedInversion,
    ClosedOutputServo,
    invert_closed,
)
from multibody_control.inversion.desired import TabulatedOutput
from multibody_control.inversion.flexible import invert_flexible
from multibody_control.outputs import Output
from multibody_control.tasks import Task, TimeLaw, half_circle_task, linear_move, straight_line
from multibody_dynamics.flexible.closed import ClosedSimulation
from multibody_dynamics.flexible.loader import load_flexible_model
from multibody_dynamics.flexible.simulation import FlexibleSimulation
from multibody_dynamics.robot import load_robot
from multibody_dynamics.simulate import SimulationResult

AGREED = {"nfev": int, "output_error": float, "success": bool, "message": str, "method": str,
          "wall_time": float}


def check_agreed(res, model_output=None):
    """The agreed fields with their types and meanings."""
    for name, kind in AGREED.items():
        assert isinstance(getattr(res, name), kind), (type(res).__name__, name)
    assert res.wall_time >= 0.0 and res.nfev >= 0
    if res.t.size == 0:
        assert res.output_error == np.inf
    if model_output is not None:  # max |y(q) - y_d| recomputed from the samples
        y, y_d = model_output
        assert res.output_error == pytest.approx(float(np.max(np.abs(y - y_d))), abs=1e-15)


@pytest.mark.parametrize("cls", [InversionResult, CausalInversionResult, ClosedInversion])
def test_result_types_declare_the_agreed_fields(cls):
    fields = {f.name for f in dataclasses.fields(cls)}
    assert set(AGREED) <= fields, set(AGREED) - fields


@pytest.mark.parametrize("cls", [SimulationResult, FlexibleSimulation, ClosedSimulation])
def test_simulation_results_call_the_constraint_residual_residual(cls):
    fields = {f.name for f in dataclasses.fields(cls)}
    assert {"residual", "success", "message", "wall_time"} <= fields


@pytest.fixture(scope="module")
def rigid_runs(models):
    """Every registered method on the minimum-phase arm (coarse grid: the names, not the
    accuracy, are under test); causal limited to two Newton steps."""
    m = models["passive_arm_minphase"]
    out = Output.collocated(m)
    task = half_circle_task(t0=0.05, tf=1.05)
    runs = {}
    for method in METHODS:
        extra = {"max_iter": 2, "segments": 2} if method == "causal" else {}
        runs[method] = invert(m, out, task, method, dt=1e-2, t_end=1.1, **extra)
    return runs


@pytest.mark.parametrize("method", list(METHODS))
def test_every_rigid_method_reports_the_agreed_names(rigid_runs, method):
    res = rigid_runs[method]
    check_agreed(res, (res.y, res.y_desired) if res.t.size else None)
    assert res.method == method
    # every method evaluates the inverse dynamics (quasi-static: at each sample and for its
    # stiffness matrix; causal: in its shooting, also when it stops unconverged)
    assert res.nfev > 0, (method, res.message)


def test_closed_loop_route(models):
    """The five-bar's motors prescribed (the loop has no internal dynamics)."""
    m = models["five_bar"]
    moves = (linear_move("left_motor", 2.0, 2.1), linear_move("right_motor", 1.1, 1.0))
    opts = ForwardOptions(dt=1e-2, ik_guess=[2.0, -1.2, 1.1, 1.2], t_end=0.35)
    res = invert(m, Output(m, [n for mv in moves for n in mv.names]),
                 Task(TimeLaw(0.1, 0.3), moves),
                 "classical", options=opts)
    assert res.success, res.message
    check_agreed(res, (res.y, res.y_desired))
    assert res.nfev == res.t.size  # one projected inverse dynamics per sample


@pytest.fixture(scope="module")
def flexible_runs():
    chain = load_flexible_model("flexible_manipulator")
    task = Task(TimeLaw(0.2, 1.2, 5), (straight_line("arm2", (0.45, -0.10), (0.45, 0.10)),))
    return chain, {method: invert_flexible(chain, task, method, dt=1e-2)
                   for method in ("rigid", "quasi_static", "classical")}


@pytest.mark.parametrize("method", ["rigid", "quasi_static", "classical"])
def test_open_flexible_route(flexible_runs, method):
    res = flexible_runs[1][method]
    check_agreed(res, (res.y, res.y_desired) if res.t.size else None)
    assert res.method == method and res.nfev > 0


def test_open_flexible_quasi_static_counts_its_stiffness_evaluations(flexible_runs):
    """Quasi-static compensation adds, per sample, one model evaluation and two per coordinate
    for the central-difference stiffness (once uncounted: the rigid design's nfev)."""
    chain, runs = flexible_runs
    rigid, qs = runs["rigid"], runs["quasi_static"]
    assert qs.nfev - rigid.nfev == qs.t.size * (1 + 2 * chain.nv)


@pytest.fixture(scope="module")
def small_tool():
    small = load_robot("flexible_parallel_tool",
                       parameters=dict(modes_long=3, modes_short=1, link_elements=6))
    q = np.zeros(small.nv)
    q[:4] = [0.0, 0.8, np.pi / 4, 2.4]
    return small, small.project_position(q, partitioned=True)


def test_closed_flexible_route_and_its_old_name(small_tool):
    small, q = small_tool
    H, gamma = small.outputs["collocated"]
    servo = ClosedOutputServo(small, H, gamma, guess=q[:4])
    t = np.linspace(0.0, 0.3, 31)
    s = t / 0.3
    prof, dprof = 10 * s**3 - 15 * s**4 + 6 * s**5, (30 * s**2 - 60 * s**3 + 30 * s**4) / 0.3
    ddprof = (60 * s - 180 * s**2 + 120 * s**3) / 0.3**2
    y = H @ q[:4] + np.outer(prof, [0.005, 0.0])
    ytraj = TabulatedOutput(t, y, np.outer(dprof, [0.005, 0.0]), np.outer(ddprof, [0.005, 0.0]))
    res = invert_closed(servo, ytraj, t, method="classical")
    assert res.success, res.message
    check_agreed(res, (res.q[:, :4] @ H.T + res.q[:, 4:] @ gamma.T, y[:res.t.size]))
    assert res.nfev > 0
    with pytest.warns(DeprecationWarning, match=r"ClosedInversion.evaluations .*use \.nfev"):
        assert res.evaluations == res.nfev
    with pytest.raises(AttributeError):
        res.evaluations = 1


def test_closed_simulation_residual_and_its_old_name(small_tool):
    small, q = small_tool
    sim = small.simulate(q, np.zeros(small.nv), np.linspace(0.0, 0.01, 3))
    assert sim.success, sim.message
    assert sim.residual.shape == (3,) and sim.residual.max() < 1e-8
    with pytest.warns(DeprecationWarning, match=r"ClosedSimulation.constraint_error .*\.residual"):
        np.testing.assert_array_equal(sim.constraint_error, sim.residual)
    with pytest.raises(AttributeError):
        sim.constraint_error = sim.residual
