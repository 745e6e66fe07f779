"""Feedforward of the serial flexible manipulator (Seifried 2014 Sects. 6.1-6.4).

Oracles: finite differences of the chain's kinematics, an independent formulation of the zero
dynamics (test_flexible_gamma: equations of motion solved for (a_e, u)), the chain's forward
dynamics (a Cholesky solve of the full mass matrix) against the inverse model's (q, v, a, u),
and the book's ranking of the feedforward designs with its error bounds (Sect. 6.4.1).
"""

from pathlib import Path

import numpy as np
import pytest
from test_flexible_gamma import zero_dynamics_jacobian

from multibody_control.cli import main
from multibody_control.inversion.flexible import (
    FlexibleServo,
    RigidInverseKinematics,
    invert_flexible,
    track_flexible,
)
from multibody_control.inversion.flexible_scenario import load_flexible_scenario
from multibody_control.tasks import Task, TimeLaw, straight_line
from multibody_dynamics.errors import DimensionError, InputError
from multibody_dynamics.flexible.loader import load_flexible_model
from multibody_dynamics.flexible.output import chain_combined_output


def line(start=(0.45, -0.10), end=(0.45, 0.10), t0=0.2, tf=1.2):
    """Sect. 6.4: 0.2 m straight line in 1 s, at rest at 0.2 s and 1.2 s (path chosen)."""
    return Task(TimeLaw(t0, tf, 5), (straight_line("arm2", start, end),))


@pytest.fixture(scope="module")
def chain():
    return load_flexible_model("flexible_manipulator")


@pytest.fixture(scope="module")
def designs(chain):
    task = line()
    out = {}
    for method in ("rigid", "quasi_static", "stable"):
        result = invert_flexible(chain, task, method, dt=2e-3)
        assert result.success, result.message
        out[method] = (result, track_flexible(chain, result, task, t_end=1.5, dt=2e-3))
    return task, out


def test_point_kinematics_matches_finite_differences(chain):
    rng = np.random.default_rng(7)
    q = np.r_[rng.uniform(-1, 1, 2), 1e-3 * rng.standard_normal(4)]
    v = np.r_[rng.standard_normal(2), 1e-2 * rng.standard_normal(4)]
    a = np.r_[rng.standard_normal(2), 1e-1 * rng.standard_normal(4)]
    r, J, bias = chain.point_kinematics(q, v, "arm2")
    np.testing.assert_array_equal(r, chain.point_position(q, "arm2"))
    h = 1e-6
    J_fd = np.column_stack([(chain.point_position(q + h * e, "arm2")
                             - chain.point_position(q - h * e, "arm2")) / (2 * h)
                            for e in np.eye(chain.nv)])
    # central differences: O(h^2) truncation and 1e-16 / h rounding on O(1) values
    np.testing.assert_allclose(J, J_fd, atol=1e-8 * np.abs(J).max())

    def rate(t):  # r' along q(t) = q + v t + a t^2 / 2
        jac = chain.point_kinematics(q + v * t + 0.5 * a * t * t, v + a * t, "arm2")[1]
        return jac @ (v + a * t)

    h = 1e-5
    acc_fd = (rate(h) - rate(-h)) / (2 * h)
    np.testing.assert_allclose(J @ a + bias, acc_fd, rtol=1e-7, atol=1e-9)


def test_rigid_inverse_kinematics_follows_the_path(chain):
    task = line()
    ik = RigidInverseKinematics(chain, task)
    t = np.linspace(0.0, 1.4, 57)
    y, yd, ydd = ik.sample(t)
    p = task(t)[0]
    reached = np.array([chain.point_position(np.r_[yk, np.zeros(chain.nq_e)], "arm2") for yk in y])
    np.testing.assert_allclose(reached, p, atol=1e-12)  # Newton to 1e-13 m
    # derivatives against differences of the positions on a fine grid
    tt = np.linspace(0.5, 0.9, 401)
    yy, yyd, yydd = ik.sample(tt)
    dt = tt[1] - tt[0]
    np.testing.assert_allclose(np.gradient(yy, dt, axis=0)[1:-1], yyd[1:-1], atol=1e-5)
    np.testing.assert_allclose(np.gradient(yyd, dt, axis=0)[1:-1], yydd[1:-1], atol=1e-4)


@pytest.mark.parametrize("y0", [(0.0, 0.0), (-0.7, 2.1)])
def test_servo_zero_dynamics_match_the_independent_formulation(chain, y0):
    gamma = chain_combined_output(chain)
    Q, eta0 = FlexibleServo(chain, gamma).zero_dynamics_jacobian(np.asarray(y0), step=1e-6)
    np.testing.assert_allclose(eta0, 0.0, atol=1e-12)  # horizontal: at rest undeformed
    ref = zero_dynamics_jacobian(chain, gamma, np.asarray(y0), h=1e-6)
    # central differences with the same step on both (their truncation error, 1e-6 relative,
    # cancels); the two solves differ by rounding only (measured 1e-10 of the largest entry)
    np.testing.assert_allclose(Q, ref, atol=1e-8 * np.abs(ref).max())


@pytest.mark.slow
def test_stable_inversion_is_an_exact_inverse_model(chain, designs):
    result = designs[1]["stable"][0]
    assert result.t_pre > 0 and result.t[0] < result.t0 - 0.9 * result.t_pre  # pre-actuation
    assert np.any(result.eigenvalues.real > 0)  # non-minimum phase (Sect. 6.4)
    assert result.output_error < 1e-9  # y = q_r + Γ q_e reproduced on the samples
    # the chain's forward dynamics with the feedforward gives back the inverse model's
    # accelerations (a different solve: Cholesky of the full M instead of the (5.22) system)
    for k in range(0, len(result.t), 97):
        a = chain.forward_dynamics(result.q[k], result.v[k], result.u[k])
        np.testing.assert_allclose(a, result.a[k], rtol=1e-7, atol=1e-7 * np.abs(result.a).max())
    # the motion starts and ends at rest, undeformed, within the BVP tolerance
    assert np.abs(result.q[0, 2:]).max() < 1e-6 * np.abs(result.q[:, 2:]).max() + 1e-12
    assert np.abs(result.u[0]).max() < 1e-3 * np.abs(result.u).max()


@pytest.mark.slow
def test_quasi_static_compensation_puts_the_deformed_end_point_on_the_path(chain, designs):
    task, out = designs
    result = out["quasi_static"][0]
    p = task(result.t)[0]
    corrected = np.array([chain.point_position(q, "arm2") for q in result.q])
    uncorrected = np.array([chain.point_position(np.r_[y, q[2:]], "arm2")
                            for y, q in zip(result.y_desired, result.q)])
    # (6.9) cancels the deflection to first order; the remainder is second order in the
    # deflection (Jacobians taken at the undeformed pose): measured 4.4 um of 3.2 mm
    deflection = np.linalg.norm(uncorrected - p, axis=1).max()
    assert deflection > 1e-4  # 0.1 mm or more: something to compensate
    assert np.linalg.norm(corrected - p, axis=1).max() < 1e-2 * deflection
    # the predicted deformation (6.6) is the simulated one, as the book's Fig. 6.6 shows
    sim = out["quasi_static"][1]
    qe_pred = np.array([np.interp(sim.t, result.t, c) for c in result.q[:, 2:].T]).T
    during = sim.t < result.tf
    err = np.abs(sim.q[during, 2] - qe_pred[during, 0]).max()
    assert err < 0.25 * np.abs(qe_pred[:, 0]).max()


@pytest.mark.slow
def test_section_6_4_ranking_of_the_feedforward_designs(designs):
    """Sect. 6.4.1 (Figs. 6.5, 6.6, 6.8): rigid >> quasi-static (< 1 mm) >> stable inversion
    (< 0.1 mm), joints tracked by a stiff PD law. The book's absolute errors (several cm for
    the rigid design) depend on the rigid-part masses it does not print (ours are chosen, see
    config/robots/flexible_manipulator.yaml); the bounds and the ranking are asserted.
    Measured here: 4.3 / 0.086 / 0.0044 mm."""
    _, out = designs
    err = {m: out[m][1].max_error for m in out}
    assert err["quasi_static"] < 1e-3 and err["stable"] < 1e-4
    assert err["rigid"] > 10 * err["quasi_static"]
    assert err["quasi_static"] > 5 * err["stable"]


def test_bad_inputs(chain):
    with pytest.raises(DimensionError, match=r"gamma must have shape \(2, 4\)"):
        FlexibleServo(chain, np.zeros((2, 3)))
    with pytest.raises(InputError, match="method: expected one of"):
        invert_flexible(chain, line(), "exact")
    with pytest.raises(InputError, match="'<body>.x', '<body>.y'"):
        move = straight_line("arm2", (0.4, 0), (0.4, 0.1), plane=("x", "z"))
        invert_flexible(chain, Task(TimeLaw(0.0, 1.0), (move,)), "rigid")
    far = invert_flexible(chain, line(start=(0.9, 0.0), end=(1.0, 0.0)), "rigid")
    assert not far.success and "within reach" in far.message
    with pytest.raises(InputError, match="nothing to track"):
        track_flexible(chain, far, line())


SCENARIO = (Path(__file__).resolve().parent.parent
            / "config/scenarios/invert_flexible_manipulator.yaml")


@pytest.mark.slow
def test_cli_runs_the_flexible_scenario(tmp_path, capsys):
    # the rigid design only (fast); the shipped scenario runs all four in `make bench`
    assert main(["invert", str(SCENARIO), "--method", "rigid", "--out", str(tmp_path),
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "rigid" in out and " mm" in out
    csv = tmp_path / "invert_flexible_manipulator.rigid.csv"
    header = csv.read_text().splitlines()[0].split(",")
    assert header[:3] == ["t", "q.alpha", "q.beta"] and header[-1] == "tracking_error"
    assert (tmp_path / "invert_flexible_manipulator.png").stat().st_size > 10_000
    assert main(["invert", str(SCENARIO), "--method", "index1", "--quiet"]) == 2
    assert "flexible model: expected one of rigid" in capsys.readouterr().err


def test_closed_flexible_models_check_their_own_scenario_keys(tmp_path):
    # closed models take scenario files too (test_flexible_scenario_closed.py); this open-chain
    # task names a body the machine tool does not have
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.read_text().replace("robot: flexible_manipulator",
                                                 "robot: flexible_parallel_tool"))
    with pytest.raises(InputError, match="task.lines.arm2: unknown body"):
        load_flexible_scenario(path)


@pytest.mark.parametrize("change, words", [
    (("method: stable", "method: exact"), ["method", "exact"]),
    (("compare: [rigid,", "compare: [rigidity,"), ["compare[0]", "rigidity"]),
    (("arm2: {start", "arm3: {start"), ["task.lines.arm3", "unknown body"]),
    (("tracking: {", "tracking: {gain: 3, "), ["tracking.gain", "unknown key"]),
    (("dt: 0.001", "dt: 0"), ["dt", "positive"]),
    (("verify: true", "verify: yes please"), ["verify"]),
])
def test_bad_flexible_scenarios_name_the_key(tmp_path, change, words):
    text = SCENARIO.read_text()
    assert change[0] in text
    path = tmp_path / "s.yaml"
    path.write_text(text.replace(*change))
    with pytest.raises(InputError) as err:
        load_flexible_scenario(path)
    assert all(w in str(err.value) for w in words)


def test_cli_check_flexible_models(tmp_path, capsys):
    assert main(["check", "flexible_manipulator"]) == 0
    out = capsys.readouterr().out
    # the first clamped frequency of arm 2 with its rigid end parts (modal data: Me, Ke)
    assert "6 (2 joint + 4 elastic)" in out and "arm2.e2" in out and "Hz" in out
    bad = tmp_path / "bad.yaml"
    text = (Path(__file__).resolve().parent.parent
            / "config/robots/flexible_manipulator.yaml").read_text()
    bad.write_text(text.replace("elements: 20", "elements: -3", 1))
    assert main(["check", str(bad)]) == 2
    assert "elements" in capsys.readouterr().err


BOOK_SCENARIO = SCENARIO.with_name("invert_flexible_manipulator_book.yaml")


@pytest.mark.slow
def test_book_variant_reproduces_all_three_statements_of_section_6_4_1():
    """Seifried Sect. 6.4.1 with ``flexible_manipulator_book`` (arm-1 strip 0.9 mm by the Γ
    erratum, rigid parts 0.6 kg / 0.15 kg chosen, see its header): rigid feedforward several
    cm, quasi-static compensation < 1 mm, stable inversion < 0.1 mm at once, the latter with
    the book's changed Γ_21, Γ_22 = 13.375, 92.5 (scenario file); with the Γ of (6.34)-(6.37)
    the output loses relative degree 2 along the motion (the book's bvp5c failure).
    Measured (1 ms samples, README): 25.1 / 0.378 / 0.083 mm; the same here with 2 ms (4 ms
    for the stable inversion, whose BVP then converges in 5 instead of 13 iterations, same
    error to 3e-7 mm). About 21 s."""
    sc = load_flexible_scenario(BOOK_SCENARIO)
    chain, task = sc.chain, sc.task
    ours = chain_combined_output(chain)
    # the scenario's Γ: our row 1 and Γ_23, Γ_24 (5 digits), the book's Γ_21, Γ_22
    np.testing.assert_allclose(sc.gamma[0], ours[0], rtol=2e-5, atol=1e-12)
    np.testing.assert_allclose(sc.gamma[1, 2:], ours[1, 2:], rtol=2e-5)
    np.testing.assert_array_equal(sc.gamma[1, :2], [13.375, 92.5])
    # our Γ for the 0.9 mm strip is the printed (6.38) to 0.6 %
    book = np.array([[25.779, 47.552, 0.0, 0.0], [13.500, 88.897, 32.316, 39.470]])
    np.testing.assert_allclose(ours, book, rtol=6e-3, atol=1e-12)
    # the Γ of (6.34)-(6.37): det(M_ee - M_er Γ) changes sign along the motion (fails at once;
    # without the check the BVP runs 200 s and exceeds its mesh, max residual 4e4)
    failed = invert_flexible(chain, task, "stable", dt=4e-3, t_end=1.5)
    assert not failed.success and "loses relative degree 2" in failed.message
    err = {}
    for method, dt in (("rigid", 2e-3), ("quasi_static", 2e-3), ("stable", 4e-3)):
        result = invert_flexible(chain, task, method, gamma=sc.gamma, dt=dt, t_end=1.5)
        assert result.success, result.message
        err[method] = track_flexible(chain, result, task, t_end=1.5, dt=dt).max_error
        if method == "stable":
            # still non-minimum phase: 4 of 8 zero-dynamics eigenvalues in the right half plane
            # (measured ±83.5, ±123.0, ±199.9 ± 424.3j 1/s)
            assert np.sum(result.eigenvalues.real > 0) == 4
            assert result.output_error < 1e-9
    assert err["rigid"] > 0.02  # "several cm" (measured 25 mm)
    assert err["quasi_static"] < 1e-3  # measured 0.38 mm
    assert err["stable"] < 1e-4  # measured 0.083 mm
