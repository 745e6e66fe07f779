"""Shape design of the flexible cart manipulator and shape + output combined (Seifried (2014)
Sect. 7.5.2.1, 7.5.2.3): the printed designs evaluate, the mass stays, bad options are named."""

from pathlib import Path

import numpy as np
import pytest

from multibody_control.design.flexible_cart_output import (
    BOOK_DGAMMA_732,
    FlexibleCartOutputProblem,
)
from multibody_control.design.flexible_cart_shape import (
    BOOK_DGAMMA_734,
    BOOK_PC_737,
    FlexibleCartShapeOutputProblem,
)
from multibody_control.design.flexible_shape import BOOK_SHAPE_729, FlexibleShapeProblem
from multibody_control.design.study import load_study
from multibody_dynamics.errors import InputError, ModelError

ROOT = Path(__file__).resolve().parents[1]
ROBOT = "flexible_cart_manipulator_design"


@pytest.fixture(scope="module")
def shape():
    return FlexibleShapeProblem(robot=ROBOT, task="cart_semicircle", dt=5e-3)


@pytest.fixture(scope="module")
def concurrent():
    return FlexibleCartShapeOutputProblem()


def test_shape_space_is_the_books(shape):
    # Seifried (2014) Sect. 7.5.2.1: 8 heights in [1, 100] mm
    assert shape.names[0] == "arm1_y0" and len(shape.names) == 8
    np.testing.assert_allclose(shape.lower, 1e-3)
    np.testing.assert_allclose(shape.upper, 0.1)


def test_initial_shape_is_the_collocated_output_of_the_loaded_model(shape):
    # independent routes: the arms rebuilt from Bézier heights (10 mm everywhere) against the
    # model loaded from its file with Γ = 0 (flexible_cart_manipulator_output, gamma0 zero);
    # both integrate to rtol 1e-7, so they agree far below 0.1 %
    a = shape.evaluate(shape.initial)
    b = FlexibleCartOutputProblem(gamma0="zero").evaluate(np.zeros(6))
    assert a.ok and b.ok
    assert a.value == pytest.approx(b.value, rel=1e-3)
    assert 0.05 < a.value < 0.2  # ours 92.6 mm, the book's initial design 88.7 mm


def test_book_shape_729_evaluates_and_stiffens(shape):
    # Seifried (2014) (7.29): 88.7 mm -> 22.0 mm. Our model (tool, gravity, damping chosen)
    # gives a smaller gain; the book's design must still be a clear improvement at equal mass.
    init = shape.evaluate(shape.initial)
    ev = shape.evaluate(BOOK_SHAPE_729)
    assert ev.ok, ev.message
    assert ev.value < 0.6 * init.value
    assert ev.info["mass"] == pytest.approx(init.info["mass"], rel=1e-12)
    # (7.29) has the mean height of the 10 mm arms: the mass scale is 1
    assert ev.info["scale"] == pytest.approx(1.0, abs=1e-9)
    f0, f1 = init.info["frequencies_hz"]["arm1"][0], ev.info["frequencies_hz"]["arm1"][0]
    assert f1 > f0  # thicker at the root: the inner arm stiffens


def test_constant_mass_in_the_concurrent_bounds(concurrent):
    from multibody_dynamics.flexible.shape import total_mass

    m = concurrent.shape.model()
    arms = [m.arms[n] for n in concurrent.shape.arm_names]
    x = BOOK_PC_737.copy()
    x[:8] = [24e-3, 20e-3, 24e-3, 22e-3, 15e-3, 18e-3, 19e-3, 12e-3]  # far too heavy
    heights, s = concurrent.heights(x)
    assert s < 1
    assert total_mass(arms, list(heights.values())) == pytest.approx(m.mass0, rel=1e-12)
    h = np.concatenate(list(heights.values()))
    assert np.all(h >= concurrent.lower[:8] - 1e-15) and np.all(h <= concurrent.upper[:8] + 1e-15)


def test_serial_on_initial_arms_is_the_output_design(concurrent):
    # the shaped route with 10 mm arms and ΔΓ (7.32) against the loaded model's output design:
    # rebuilt chain, Γ0 of the rebuilt geometry and mode signs must all agree
    serial = FlexibleCartShapeOutputProblem(heights=[10.0] * 8)
    a = serial.evaluate(BOOK_DGAMMA_732)
    b = FlexibleCartOutputProblem().evaluate(BOOK_DGAMMA_732)
    assert a.ok and b.ok
    assert a.value == pytest.approx(b.value, rel=1e-3)


def test_printed_combined_designs_evaluate():
    # Seifried (2014) (7.34) on the (7.29) arms (book 0.7 mm) and (7.37) (book 1.4 mm): both
    # must run through the criterion to a finite value or a named rejection
    serial = FlexibleCartShapeOutputProblem(heights=1e3 * BOOK_SHAPE_729)
    ev = serial.evaluate(BOOK_DGAMMA_734)
    assert np.isfinite(ev.value) and (ev.ok or "non-minimum phase" in ev.message)
    assert ev.info["heights_mm"]["arm1"] == pytest.approx([12.9, 10.4, 22.1, 5.3])
    ev = FlexibleCartShapeOutputProblem().evaluate(BOOK_PC_737)
    assert ev.ok, ev.message
    assert 0 < ev.value < 0.05


def test_gamma0_readings_differ_for_the_same_vector():
    # the build is cached per thread: problems differing only in gamma0 must not share it
    x = BOOK_PC_737
    g = FlexibleCartShapeOutputProblem(gamma0="geometric").gamma(x)
    i = FlexibleCartShapeOutputProblem(gamma0="initial").gamma(x)
    z = FlexibleCartShapeOutputProblem(gamma0="zero").gamma(x)
    assert not np.allclose(g, i)
    # Γ0 = 0: Γ is ΔΓ (7.37) alone, up to the mode signs
    np.testing.assert_allclose(np.abs(z[1:, :]),
                               np.abs([[-0.167, 0.258, 0, 0], [0.038, 0.039, -0.452, 1.651]]))


@pytest.mark.parametrize("options, match", [
    ({"heights": [10.0] * 7}, "heights: expected 8 positive"),
    ({"heights": [10.0] * 7 + [-1.0]}, "heights: expected 8 positive"),
    ({"heights": "thin"}, "heights: expected 8 positive"),
    ({"gamma0": "book"}, "gamma0: expected one of"),
    ({"dgamma": [0.0] * 5}, "dgamma: expected the 6 entries"),
    ({"dgamma": [0.0] * 6, "heights": [10.0] * 8}, "give at most one"),
    ({"damping": 1.5}, "damping"),
    ({"constant_mass": "yes"}, "constant_mass"),
])
def test_bad_options_are_named(options, match):
    with pytest.raises(InputError, match=match):
        FlexibleCartShapeOutputProblem(**options)


@pytest.mark.parametrize("robot, error, match", [
    ("nope", ModelError, "unknown flexible model 'nope'"),
    ("flexible_manipulator_book", InputError, "expected a task for that robot")])
def test_bad_robot_is_named_before_work(robot, error, match):
    with pytest.raises(error, match=match):
        FlexibleCartShapeOutputProblem(robot=robot)


def test_out_of_bounds_variable_is_named(concurrent):
    x = BOOK_PC_737.copy()
    x[0] = 0.03  # (7.36): at most 25 mm
    with pytest.raises(InputError, match="arm1_y0"):
        concurrent.evaluate(x)


# swarms as printed in Seifried (2014) Sect. 7.5.2: 160 x 45 (7.5.2.1), 120 x 30 (the output
# design, reused by the serial route), 140 x 45 (concurrent), 160 x 60 (shape, combined output)
@pytest.mark.parametrize("name, problem, n, swarm", [
    ("shape", "flexible_arm_shape", 8, (160, 45)),
    ("serial", "flexible_cart_manipulator_shape_output", 6, (120, 30)),
    ("concurrent", "flexible_cart_manipulator_shape_output", 14, (140, 45)),
    ("shape_combined", "flexible_cart_manipulator_shape_output", 8, (160, 60))])
def test_study_files(name, problem, n, swarm):
    study = load_study(ROOT / "config" / "designs" / f"flexible_cart_manipulator_{name}.yaml")
    assert study.problem == problem
    assert len(study.make_problem().names) == n
    assert (study.optimizer.particles, study.optimizer.iterations) == swarm
    if study.reference is not None:  # the printed design lies in the bounds
        ref = np.array([study.reference["parameters"][k] for k in study.names])
        assert np.all(ref >= study.lower) and np.all(ref <= study.upper)
    assert (study.reference is None) == (name == "shape_combined")  # no printed design


def test_shape_with_the_combined_output():
    # ΔΓ fixed to 0: the 8 heights in [1, 100] mm are the variables, Γ = Γ0 of each shape;
    # 10 mm arms give Γ0 (7.30) alone (printed to 4 digits; the model's density is chosen to
    # match it, so 1e-3), non-minimum phase as the book states (Sect. 7.5.2.2)
    p = FlexibleCartShapeOutputProblem(dgamma=[0.0] * 6)
    assert p.names[0] == "arm1_y0" and len(p.names) == 8
    np.testing.assert_allclose(p.lower, 1e-3)
    ev = p.evaluate(np.full(8, 0.01))
    assert not ev.ok and "non-minimum phase" in ev.message
    np.testing.assert_allclose(np.array(ev.info["gamma"])[1, :2], [1.557, -1.557], rtol=1e-3)


def test_criterion_runs_on_the_shaped_chain(concurrent):
    # the inherited criterion must reach the shaped chain through servo()/tracking(): the
    # evaluation of (7.37) equals the inversion and zero dynamics recomputed on the rebuilt
    # chain, and differs from the same ΔΓ on the 10 mm arms
    ev = concurrent.evaluate(BOOK_PC_737)
    _, _, e, ok, _ = concurrent.tracking(BOOK_PC_737)
    assert ev.ok and ok
    assert ev.value == pytest.approx(float(e.max()), rel=1e-12)
    lam = concurrent.zero_dynamics(BOOK_PC_737)
    assert ev.info["spectral_abscissa"] == pytest.approx(float(lam.real.max()), rel=1e-9)
    chain, _, _ = concurrent.build(BOOK_PC_737)
    assert concurrent.servo(BOOK_PC_737).chain is chain
    flat = FlexibleCartShapeOutputProblem(heights=[10.0] * 8).evaluate(BOOK_PC_737[8:])
    assert abs(flat.value - ev.value) > 1e-4  # 0.1 mm: the shapes differ visibly


@pytest.fixture
def rebuilds(monkeypatch):
    """The chain rebuilds of every FlexibleShapeProblem in the test: a list that
    ``FlexibleShapeProblem.chain_of`` appends to on each call (still calling the original)."""
    calls = []
    original = FlexibleShapeProblem.chain_of

    def counted(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(FlexibleShapeProblem, "chain_of", counted)
    return calls


def test_rebuilds_per_evaluation(rebuilds):
    # a concurrent evaluation rebuilds its arms once (step 1 and the inversion share the
    # chain); the serial route builds its fixed arms once for all ΔΓ; the cached results are
    # those of a fresh problem
    calls = rebuilds
    conc = FlexibleCartShapeOutputProblem()
    x = BOOK_PC_737.copy()
    for k in range(2):
        x[0] *= 1.05 if k else 1.0  # another shape (not a uniform scale: mass is kept)
        ev = conc.evaluate(x)
        assert ev.ok and len(calls) == k + 1
    serial = FlexibleCartShapeOutputProblem(heights=1e3 * BOOK_SHAPE_729)
    calls.clear()
    values = [serial.evaluate(BOOK_PC_737[8:] + d).value for d in (0.0, 0.01, 0.0)]
    assert len(calls) == 1
    assert values[0] == values[2] != values[1]
    fresh = FlexibleCartShapeOutputProblem(heights=1e3 * BOOK_SHAPE_729, damping=0.0200000001)
    assert fresh.evaluate(BOOK_PC_737[8:]).value == pytest.approx(values[0], rel=1e-6)


def test_shape_evaluation_rebuilds_once(shape, rebuilds):
    calls = rebuilds
    x = BOOK_SHAPE_729 * np.array([1.0, 1.03] + [1.0] * 6)  # a design no other test builds
    ev = shape.evaluate(x)
    assert ev.ok and len(calls) == 1
    other = x * np.array([1.05] + [1.0] * 7)
    assert shape.evaluate(other).value != ev.value and len(calls) == 2


@pytest.mark.slow  # the Python path: tens of seconds on a loaded machine
def test_compiled_inversion_matches_the_python_path():
    # the combined route inverts through the compiled DOP853 of fast_servo; the Python path
    # (solve_ivp on the servo's NumPy right-hand side) takes the same steps, so the criteria
    # agree to rounding accumulated over 3.3 s of adaptive steps (seen: 2e-9 relative); 1e-6
    # still tells a different inversion apart (another Γ or chain moves it by percents)
    p = FlexibleCartShapeOutputProblem()
    fast = p.evaluate(BOOK_PC_737)
    p.compiled = False
    slow = p.evaluate(BOOK_PC_737 * (1 + 1e-12))  # not the cached build of the same vector
    assert fast.ok and slow.ok
    assert slow.value == pytest.approx(fast.value, rel=1e-6)
