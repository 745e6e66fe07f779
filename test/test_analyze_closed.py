"""`multibody analyze` on closed loops: the closure-consistent decoupling matrix, checked
against the constrained dynamics solved with Lagrange multipliers (KKT system)."""

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


def test_analyze_refuses_underactuated_closed_loop(capsys):
    # dual_arm_load: 9 coordinates, 3 closure rows, 2 inputs -> 6 degrees of freedom
    assert main(["analyze", "dual_arm_load", "--output", "arm1_joint2,arm2_joint3"]) == 2
    err = capsys.readouterr().err
    assert "6 degree(s) of freedom and 2 input(s)" in err and err.count("\n") == 1
