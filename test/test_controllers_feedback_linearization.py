"""Input-output feedback linearization (Seifried (2014) 3.1.3-3.1.4, 4.2.6) on the Ch. 7 arms.

Oracle: with an exact model the output error obeys e'' + kd e' + kp e = 0, whose solution from
(e0, e0') is closed form; the internal dynamics stay bounded for the minimum-phase optimum of
Table 7.3 and diverge for the non-minimum-phase initial design of Table 7.1.
"""

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from multibody_control.controllers import (
    LAWS,
    FeedbackLinearizationConfig,
    FeedbackLinearizationController,
    Reference,
    make_controller,
)
from multibody_control.design.problem import get_problem
from multibody_control.design.problems import PRINTED_OPTIMA
from multibody_dynamics.errors import InputError, SolverError
from multibody_dynamics.rigid import RigidDynamics

W = 10.0  # rad/s, output error bandwidth (critical damping)
QC = np.array([0.0, 0.3, 0.5, 0.0, 0.0])  # x [m], alpha1, alpha2, beta1, beta2 [rad]
S = np.array([0.1, 0.05, -0.05, 0.0, 0.0])  # reference amplitudes; passive joints at rest
COMBINED = ("x", "alpha1", f"alpha2 + {2 / 3!r}*beta1 + {1 / 3!r}*beta2")  # Gamma (5.23)
EXACT = ("x", "tip.x", "tip.y")  # cart and exact end-effector position


def reference(t, w=1.5):
    """Joint-space sinusoid about QC; only its output is tracked."""
    return Reference(QC + S * np.sin(w * t), S * w * np.cos(w * t), -S * w * w * np.sin(w * t))


def arm(design):
    problem = get_problem("passive_arm2_case1")
    x = PRINTED_OPTIMA["passive_arm2_case1"] if design == "optimum" else problem.lower
    return problem.build(x)[0].model  # problem.lower: no balancing mass = Table 7.1


def closed_loop(model, ctl, q0, duration, blow_up=np.inf):
    """Continuous closed loop (u evaluated at every right-hand side), stop if |beta| > blow_up."""
    dyn, n = RigidDynamics(model), model.nv

    def f(t, z):
        q, v = z[:n], z[n:]
        return np.concatenate([v, dyn.forward_dynamics(q, v, model.B @ ctl.step(t, q, v,
                                                                               reference(t)))])

    def diverged(t, z):
        return blow_up - np.max(np.abs(z[3:n]))

    diverged.terminal = True
    return solve_ivp(f, (0.0, duration), np.r_[q0, np.zeros(n)], rtol=1e-8, atol=1e-10,
                     events=diverged, dense_output=True)


def output_error_vs_closed_form(ctl, sol):
    """max |e(t) - e_pred(t)| and |e0| with e_pred = (e0 + (e0' + W e0) t) exp(-W t)."""
    n = ctl.model.nv
    z0 = sol.y[:, 0]
    yd, yd_dot, _ = ctl.desired_output(reference(0.0))
    e0 = yd - ctl.output.value(z0[:n])
    de0 = yd_dot - ctl.output.jacobian(z0[:n]) @ z0[n:]
    worst = 0.0
    for t in np.linspace(0.0, sol.t[-1], 40):
        z = sol.sol(t)
        e = ctl.desired_output(reference(t))[0] - ctl.output.value(z[:n])
        worst = max(worst, np.max(np.abs(e - (e0 + (de0 + W * e0) * t) * np.exp(-W * t))))
    return worst, np.max(np.abs(e0))


def test_minimum_phase_optimum_tracks_with_linear_error_dynamics_and_bounded_internals():
    """Table 7.3's optimum (minimum phase): feedback linearization of y = q_a + Gamma q_u."""
    model = arm("optimum")
    ctl = FeedbackLinearizationController(model, FeedbackLinearizationConfig(
        COMBINED, kp=W ** 2, kd=2 * W))
    sol = closed_loop(model, ctl, QC + [0.002, -0.002, 0.003, 0.0, 0.0], 1.0)
    assert sol.status == 0  # reached t = 1 s
    worst, e0 = output_error_vs_closed_form(ctl, sol)
    # exact linearization: only the integration error (rtol 1e-8) remains; measured ~1e-11 rad
    assert worst < 1e-3 * e0
    # internal dynamics bounded (measured max |beta| = 0.15 rad for this lightly damped design)
    assert np.max(np.abs(sol.y[3:5])) < 0.3


def test_non_minimum_phase_initial_design_diverges_under_the_same_law():
    """Table 7.1's initial design (zero-dynamics eigenvalue +58 1/s) with the exact output:
    the output still follows its linear error dynamics while the passive joints run away."""
    model = arm("initial")
    ctl = FeedbackLinearizationController(model, FeedbackLinearizationConfig(
        EXACT, kp=W ** 2, kd=2 * W))
    sol = closed_loop(model, ctl, QC + [0.002, -0.002, 0.003, 0.0, 0.0], 1.0, blow_up=0.5)
    assert sol.status == 1 and sol.t[-1] < 0.2  # |beta| reached 0.5 rad (measured: 0.01 s)
    worst, e0 = output_error_vs_closed_form(ctl, sol)
    assert worst < 1e-3 * e0


def test_configuration_and_singular_outputs_are_rejected():
    model = arm("optimum")
    with pytest.raises(InputError, match="output"):
        FeedbackLinearizationConfig(())
    with pytest.raises(InputError, match="3 inputs"):
        FeedbackLinearizationController(model, FeedbackLinearizationConfig(("x", "alpha1")))
    ctl = FeedbackLinearizationController(model, FeedbackLinearizationConfig(EXACT))
    # stretched arm: the tip cannot move along the links, tip.y has no relative degree 2
    with pytest.raises(SolverError, match="decoupling matrix"):
        ctl.step(0.0, np.zeros(5), np.zeros(5), Reference.hold(model, np.zeros(5)))


def test_registered_law():
    assert "feedback_linearization" in LAWS
    model = arm("optimum")
    ctl = make_controller("feedback_linearization", model, W ** 2, 2 * W, output=COMBINED)
    u = ctl.step(0.0, QC, np.zeros(5), Reference.hold(model, QC))
    # holding a rest configuration in a horizontal plane needs no input
    np.testing.assert_allclose(u, 0.0, atol=1e-9)
    with pytest.raises(InputError, match="output"):
        make_controller("feedback_linearization", model, 1.0, 1.0)


# -- the law in the scenario runner (`multibody run`) -------------------------------------------
FL_SCENARIO = "run_minphase_feedback_linearization.yaml"


@pytest.mark.slow
def test_run_scenario_output_error_follows_the_closed_form_to_first_order_in_dt():
    """``multibody run`` with law feedback_linearization on the minphase design (Table 5.1),
    tracking the combined output (5.23) its classical inversion used: the recorded output error
    deviates from the closed form of e'' + kd e' + kp e = 0 only by the zero-order hold, so the
    deviation halves when the control rate doubles (first order in dt: measured ratio 1.99
    between 1 and 2 kHz; bound [1.8, 2.2]), while the passive joints stay bounded (minimum
    phase) and the output error decays (below 1 % of the 0.02 initial error at the end; measured
    0.25 %)."""
    from multibody_control.scenarios import load_run_scenario, run_scenario
    from multibody_dynamics.model.resources import share_dir

    path = share_dir() / "config" / "scenarios" / FL_SCENARIO
    dev = {}
    for rate in (1000.0, 2000.0):
        res = run_scenario(load_run_scenario(path, {"plant": {"rate": rate}}))
        assert res.success, res.message
        mt = res.metrics
        assert mt["output_error_max"] == pytest.approx(0.02, rel=1e-3)  # the initial error
        assert np.max(np.abs(res.output_error[-1])) < 1e-2 * 0.02  # rad | m: decayed
        assert max(mt["error_max.beta1"], mt["error_max.beta2"]) < 0.1  # rad: bounded
        dev[rate] = mt["analytic_deviation"]
    assert dev[1000.0] < 0.1 * 0.02  # within 10 % of the initial error at 1 kHz
    assert 1.8 < dev[1000.0] / dev[2000.0] < 2.2


def test_run_scenario_refuses_a_bad_output(tmp_path):
    """A row count that is not one per input, an unknown joint, or no output at all (no
    inversion reference to take it from) are one-line errors naming the key."""
    from multibody_control.scenarios import load_run_scenario

    base = ("robot: passive_arm_minphase\nduration: 0.1\nreference:\n  joints:\n    t0: 0.0\n"
            "    tf: 0.1\n    start: {x: 0.0}\n    end: {x: 0.1}\ncontroller:\n  law: "
            "feedback_linearization\n")
    cases = {"": "missing; feedback_linearization needs the output rows",
             "  options: {output: [x, alpha1]}\n": "2 rows for 3 inputs",
             "  options: {output: [x, alpha1, gamma]}\n": "unknown joint 'gamma'"}
    for extra, expected in cases.items():
        path = tmp_path / "fl.yaml"
        path.write_text(base + extra)
        with pytest.raises(InputError, match="controller.options.output") as err:
            load_run_scenario(path)
        assert expected in str(err.value)


# -- closed loops: through the constrained direct dynamics (Aghili 2005 eqs. 16, 22, 24) --------
def _assembled_state(model, seed):
    """A random assembled configuration near q_rest and an admissible velocity (A v = 0)."""
    from multibody_dynamics.constraints import Constraints
    from multibody_dynamics.projection import ProjectedDynamics

    rng = np.random.default_rng(seed)
    q = ProjectedDynamics(model).project_position(model.q_rest + 0.05 * rng.standard_normal(
        model.nq)).q
    A = Constraints(model).jacobian(q)
    null = np.linalg.svd(A)[2][np.linalg.matrix_rank(A):].T
    return q, null @ rng.standard_normal(null.shape[1])


@pytest.mark.parametrize("robot", ["dual_arm_load", "five_bar", "slider_crank"])
def test_closed_loop_output_acceleration_is_the_commanded_one(robot):
    """The inputs put y'' = w on the constrained motion, checked with the compiled direct
    dynamics of ProjectedDynamics (the Gauss form, not the eq. 24 solve of the law)."""
    from multibody_control.outputs import Output
    from multibody_dynamics.model import load_model
    from multibody_dynamics.projection import ProjectedDynamics

    model = load_model(robot)
    rows = Output.collocated(model).names
    ctl = make_controller("feedback_linearization", model, W ** 2, 2 * W, output=rows)
    q, v = _assembled_state(model, 3)
    goal = q + 0.1
    u = ctl.step(0.0, q, v, Reference.hold(model, goal))
    a = ProjectedDynamics(model).acceleration(q, v, model.B @ u)
    idx = [model.coordinate_names.index(n) for n in rows]
    w = W ** 2 * (goal[idx] - q[idx]) - 2 * W * v[idx]
    # round-off of two solves with M_c (entries up to 40 kg on dual_arm_load's base)
    np.testing.assert_allclose(a[idx], w, rtol=1e-8, atol=1e-8)


def test_closed_loop_fully_actuated_matches_projected_inverse_dynamics():
    """five_bar: two motors, two degrees of freedom, so the input that gives the motors their
    commanded accelerations is unique; projected inverse dynamics (Aghili 2005 eqs. 45-48,
    59-62) with the motors as theta computes it another way."""
    from multibody_dynamics.model import load_model

    model = load_model("five_bar")
    fl = make_controller("feedback_linearization", model, W ** 2, 2 * W,
                         output=("left_motor", "right_motor"))
    pid = make_controller("projected_inverse_dynamics", model, W ** 2, 2 * W)
    q, v = _assembled_state(model, 5)
    ref = Reference(q + 0.05, v + 0.1, np.full(model.nv, 0.3))
    np.testing.assert_allclose(fl.step(0.0, q, v, ref), pid.step(0.0, q, v, ref), rtol=1e-8,
                               atol=1e-9)


def test_closed_loop_error_dynamics_and_settling_internals_on_dual_arm_load():
    """dual_arm_load (2 motors, 6 degrees of freedom; projected inverse dynamics refuses it,
    Aghili 2005 eq. 64): continuous loop on the constrained dynamics from an offset, the motor
    error follows e'' + 2 W e' + W^2 e = 0 in closed form; the free base, free and elastic
    joints (the internal dynamics) stay bounded."""
    from multibody_control.outputs import Output
    from multibody_dynamics.model import load_model
    from multibody_dynamics.projection import ProjectedDynamics

    model = load_model("dual_arm_load")
    n, dyn = model.nv, ProjectedDynamics(model)
    ctl = FeedbackLinearizationController(model, FeedbackLinearizationConfig(
        Output.collocated(model).names, kp=W ** 2, kd=2 * W))
    q0, _ = _assembled_state(model, 7)
    goal = model.q_rest.copy()
    idx = [model.coordinate_names.index(n) for n in ctl.output.names]
    goal[idx] = q0[idx] + [0.05, -0.05]

    def f(t, z):
        u = ctl.step(t, z[:n], z[n:], Reference.hold(model, goal))
        return np.concatenate([z[n:], dyn.acceleration(z[:n], z[n:], model.B @ u)])

    sol = solve_ivp(f, (0.0, 0.6), np.r_[q0, np.zeros(n)], rtol=1e-9, atol=1e-11,
                    dense_output=True)
    assert sol.status == 0
    e0 = goal[idx] - q0[idx]
    for t in np.linspace(0.0, 0.6, 13):
        e = goal[idx] - sol.sol(t)[idx]
        # integration error only (rtol 1e-9; the loop drifts off the constraints by about as
        # much): 1e-6 of the 0.05 rad step
        np.testing.assert_allclose(e, e0 * (1 + W * t) * np.exp(-W * t), atol=5e-8)
    assert np.max(np.abs(sol.y[:n])) < 1.0  # internal coordinates bounded (measured 0.1)
