"""`multibody analyze` on closed loops: the closure-consistent decoupling matrix, checked
against the constrained dynamics solved with Lagrange multipliers (KKT system)."""

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from multibody_control.analysis import analyze_output
from multibody_control.cli import main
from multibody_control.outputs import Output
from multibody_dynamics.constraints import Constraints
from multibody_dynamics.model import load_model


def _kkt_alpha(model, output, q):
    """d(y'')/du at v = 0 from M a - A^T lambda = B u - g, A a = 0 (least squares: the
    four-bar's closure has redundant rows, lambda is not unique but a is)."""
    pm = model.pin_model
    M = pin.crba(pm, pm.createData(), q)
    M = np.triu(M) + np.triu(M, 1).T
    A = Constraints(model).holonomic_jacobian(q)
    r = A.shape[0]
    K = np.block([[M, -A.T], [A, np.zeros((r, r))]])
    H = output.jacobian(q)  # y'' = H a at v = 0
    cols = []
    for i in range(model.nu):
        rhs = np.concatenate([model.B[:, i], np.zeros(r)])  # gravity cancels in the difference
        a = np.linalg.lstsq(K, rhs, rcond=None)[0][:model.nv]
        cols.append(H @ a)
    return np.column_stack(cols)


@pytest.mark.parametrize("robot, rows", [
    ("five_bar", ["left_tip.x", "left_tip.y"]),  # before: a zero column, "singular"
    ("five_bar", ["left_motor", "right_motor"]),
    ("four_bar", ["coupler"]),  # passive joint as output, redundant closure rows
    ("slider_crank", ["crank"]),
])
def test_closed_decoupling_matches_kkt(robot, rows):
    model = load_model(robot)
    output = Output(model, rows)
    res = analyze_output(model, output)
    assert np.max(np.abs(Constraints(model).residual(res.q))) < 1e-9  # assembled
    expected = _kkt_alpha(model, output, res.q)
    # tolerance: two exact linear-algebra routes to the same matrix, round-off only
    np.testing.assert_allclose(res.decoupling, expected, rtol=1e-8, atol=1e-10)
    assert res.relative_degree == (2,) * len(rows) and res.decoupling_cond < 1e6


def test_analyze_cli_five_bar_end_effector(capsys):
    assert main(["analyze", "five_bar", "--output", "left_tip.x,left_tip.y",
                 "--q", "0.3", "-0.7", "0.6", "-1.9"]) == 0
    out = capsys.readouterr().out
    assert "closure-consistent" in out and "relative degree   {2, 2}" in out
    assert "singular" not in out
    assert "[0.3, " in out  # the actuated joints of --q are held


def test_analyze_underactuated_closed_loop_cli(capsys):
    # dual_arm_load: 9 coordinates, 3 closure rows, 2 inputs -> 6 degrees of freedom, 4 of
    # them internal (before: refused, exit 2)
    assert main(["analyze", "dual_arm_load", "--output", "arm1_joint2,arm2_joint3"]) == 0
    out = capsys.readouterr().out
    assert "zero dynamics eigenvalues" in out and "4 internal" in out
    assert out.count("j   ") == 8  # 2 x 4 eigenvalues


@pytest.fixture
def five_bar_one_motor(tmp_path):
    """The shipped five-bar with its right motor replaced by a spring-damper: 2 degrees of
    freedom, 1 input."""
    root = Path(__file__).resolve().parents[1]
    text = (root / "config" / "robots" / "five_bar.yaml").read_text()
    assert "urdf: ../../urdf/five_bar.urdf" in text and "  right_elbow: {}" in text
    path = tmp_path / "five_bar_one_motor.yaml"
    path.write_text(text.replace("urdf: ../../urdf/", f"urdf: {root}/urdf/").replace(
        "  right_elbow: {}", "  right_elbow: {}\n  right_motor: {stiffness: 4.0, damping: "
        "0.15, rest: 1.9}"))
    return load_model(path)


def test_closed_zero_dynamics_match_the_energy_of_the_held_loop(five_bar_one_motor):
    """Output the left motor of a five-bar whose right motor is a spring-damper: with the
    output held the loop is a one-degree-of-freedom mechanism in s = right joint angle, and
    its linearization m(s*) lambda^2 + d lambda + V''(s*) = 0 is built here from energies
    alone: m = w^T M w with w the loop's tangent (w_s = 1), V = gravity + spring potential
    along the assembled loop, d the damper (no Lagrange multipliers, no accelerations)."""
    from multibody_dynamics.assembly import assemble
    from multibody_dynamics.rigid import RigidDynamics

    model = five_bar_one_motor
    assert model.nu == 1 and model.input_names == ("left_motor",)
    res = analyze_output(model, Output(model, ["left_motor"]))
    assert res.closed and res.relative_degree == (2,) and res.eigenvalues.size == 2
    il, ir = (model.coordinate_names.index(n) for n in ("left_motor", "right_motor"))
    held = float(res.q[il])
    c, dyn = Constraints(model), RigidDynamics(model)

    def loop_at(s):
        a = assemble(model, {"left_motor": held, "right_motor": s}, guess=res.q)
        assert a.success, a.message
        return a.q

    pm = model.pin_model
    data = pm.createData()

    def potential(s):  # gravity (pinocchio) plus the right motor's spring
        return pin.computePotentialEnergy(pm, data, loop_at(s)) + 0.5 * 4.0 * (s - 1.9) ** 2

    s_star, h = float(res.q[ir]), 1e-4
    # tangent of the loop with the left motor held: null([A; e_left]), scaled to w_s = 1
    A = np.vstack([c.holonomic_jacobian(res.q), np.eye(model.nv)[il]])
    w = np.linalg.svd(A)[2][-1]
    w = w / w[ir]
    m = w @ dyn.mass_matrix(res.q) @ w
    dV = (potential(s_star + h) - potential(s_star - h)) / (2 * h)
    ddV = (potential(s_star + h) - 2 * potential(s_star) + potential(s_star - h)) / h**2
    assert abs(dV) < 1e-6  # the analysis sits at the rest point of the held loop
    expected = np.sort_complex(np.roots([m, 0.15, ddV]))
    # central differences in both routes (steps 1e-4 here, 1e-6 in the analysis) on
    # eigenvalues of modulus ~10: agreement to ~1e-6 relative, asserted at 1e-5
    np.testing.assert_allclose(np.sort_complex(res.eigenvalues), expected, rtol=1e-5)
    assert res.minimum_phase is True
