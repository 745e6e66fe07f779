"""Seifried (2014) Sect. 7.4.3 / Fig. 7.8, short version (the four concepts in full are the
bench suite design_tracking).

The case-1 optimum (Table 7.3) tracks the half circle of Sect. 4.2.7 with feedback
linearization: of the exact output, the error is only the zero-order hold's (first order in
the control period; the bench runs it at 1 and 20 kHz); of the combined output (5.23), the
error is the approximation r_ap(y) of the end-effector point, which the book gives as about
2.5 mm (we measure 2.72 mm; bound 1.5-4 mm: the book reads it off a plot and its gains are not
printed). Independent of the code under test: the radial error is measured from the tip's
forward kinematics against the circle's centre and radius.
"""

import pytest

from multibody_control.design.tracking import COMBINED, FL, _model, radial_error, track


@pytest.mark.slow
def test_optimum_tracks_the_half_circle_exactly_and_the_combined_output_approximately():
    model = _model("optimum")
    res = track(model, None, "classical", FL)
    assert res.success, res.message
    exact = radial_error(model, res.t, res.q).max()
    assert exact < 1e-4                               # m: 0.051 mm measured at 1 kHz
    model = _model("optimum")
    res = track(model, COMBINED, "classical", FL)
    assert res.success, res.message
    combined = radial_error(model, res.t, res.q).max()
    assert 1.5e-3 < combined < 4e-3                   # m; book: about 2.5 mm
    assert combined > 20 * exact


def test_scenario_refuses_a_robot_that_is_neither_a_name_nor_a_model():
    from multibody_control.scenarios import scenario_from_mapping
    from multibody_dynamics.errors import InputError

    raw = {"robot": 3, "duration": 1.0, "reference": {}, "controller": {"law": "pd"}}
    with pytest.raises(InputError, match="robot: expected a robot name or a path"):
        scenario_from_mapping(raw)


def _case4_optimum():
    import numpy as np

    from multibody_control.design.problem import get_problem
    from multibody_control.design.problems import PRINTED_OPTIMA

    problem = get_problem("passive_arm4_case4")
    return problem.build(np.array(PRINTED_OPTIMA["passive_arm4_case4"]))[0].model


def test_load_disturbance_adds_ten_percent_of_the_load_at_the_tip():
    """Checked by the first and second moments of the last body, computed independently of the
    relative changes: +0.6 kg at the tip frame, +0.6 kg * tip and +0.6 |tip|^2 + 0.00147 about
    the joint (Table 7.2's 6 kg, 0.0147 kg m^2 load, +10 %)."""
    import numpy as np

    from multibody_control.design.tracking import load_disturbance
    from multibody_control.scenarios import Disturbances, perturbed_model

    model = _case4_optimum()
    d = load_disturbance(model, 0.10, 6.0, 0.0147)
    plant = perturbed_model(model, Disturbances(**d))
    pm, pp = model.pin_model, plant.pin_model
    old, new = pm.inertias[pm.njoints - 1], pp.inertias[pp.njoints - 1]
    tip = pm.frames[pm.getFrameId("tip")].placement.translation
    assert new.mass - old.mass == pytest.approx(0.6, rel=1e-12)
    np.testing.assert_allclose(new.mass * new.lever - old.mass * old.lever, 0.6 * tip, atol=1e-12)

    def izz_about_joint(i):
        return i.inertia[2, 2] + i.mass * (i.lever[0] ** 2 + i.lever[1] ** 2)

    assert izz_about_joint(new) - izz_about_joint(old) == pytest.approx(
        0.6 * (tip[0] ** 2 + tip[1] ** 2) + 0.00147, rel=1e-10)


@pytest.mark.slow
def test_case4_optimum_tracks_with_the_books_uncertainties():
    """Seifried (2014) Sect. 7.4.4: with load +10 %, springs +15 %, dampers -30 % and measurement
    noise the book's error is 0.338 mm and the internal dynamics stay bounded. Our gains and rate
    are not the book's (not printed): measured 0.253 mm at kp 3600, kd 120, 1 kHz; bound 1 mm
    (three times the book's figure) and passive angles within the nominal run's 0.23 rad + 50 %."""
    from multibody_control.design.tracking import FL_STIFF, ROBUSTNESS, load_disturbance

    model = _case4_optimum()
    r = ROBUSTNESS
    dist = load_disturbance(model, r["load_fraction"], r["load_mass"], r["load_inertia"])
    dist.update(stiffness=r["stiffness"], damping=r["damping"])
    plant = {"disturbances": dist, "noise": {"q": r["noise_q"], "v": r["noise_v"], "seed": 1}}
    res = track(model, None, "classical", FL_STIFF, 1000.0, plant)
    assert res.success, res.message
    assert radial_error(model, res.t, res.q).max() < 1e-3
    passive = [model.coordinate_names.index(n) for n in model.passive_joint_names]
    assert abs(res.q[:, passive]).max() < 0.35
