"""The closed-loop inversion starts where Newton's method can: from the model's default start,
and, when that is singular (the shipped four-bar's rest is drawn straight, where [A; H] gives
no direction), from the closures assembled with the task's first joint values held."""

import numpy as np

from multibody_control.inversion.methods import invert
from multibody_control.inversion.verify import verify
from multibody_control.outputs import Output
from multibody_control.tasks import Task, TimeLaw, linear_move
from multibody_dynamics.model import load_model


def test_four_bar_joint_task_from_the_default_start():
    """Crank 0 -> 1 rad, no ik_guess (it failed at t = 0: "residual 0.1 after 1 Newton
    iterations").  At crank 0 the crank tip (0.1, 0), the rocker pivot (0.3, 0), coupler
    0.35 m and rocker 0.25 m close the triangle with the coupler at acos(5/7) = 0.7752 rad
    (law of cosines: (0.2^2 + 0.35^2 - 0.25^2) / (2 0.2 0.35)) and the rocker at
    atan2(0.35 sin, 0.35 cos + 0.1 - 0.3) = 1.3694 rad, in one of the two modes."""
    model = load_model("four_bar")
    task = Task(TimeLaw(0.0, 1.0, 5), (linear_move("crank", 0.0, 1.0),))
    out = Output(model, ["crank"])
    r = invert(model, out, task, "classical", dt=0.01)
    assert r.success, r.message
    coupler = np.arccos(5 / 7)
    rocker = np.arctan2(0.35 * np.sin(coupler), 0.35 * np.cos(coupler) + 0.1 - 0.3)
    sign = np.sign(r.q[0, 1])
    # Newton converged to 1e-12 on lengths of 0.1 m: the angles to ~1e-10 rad
    np.testing.assert_allclose(r.q[0], [0.0, sign * coupler, sign * rocker], atol=1e-9)
    assert abs(r.y[-1, 0] - 1.0) < 1e-12
    # the feedforward drives the plant along the task (integration error only)
    assert verify(model, r, task, out).output_error < 1e-4


def test_simulate_q0_of_the_actuated_joints_only(tmp_path, capsys):
    """`simulate four_bar --q0 0.3`: the crank alone (it was "expected 3 values"), coupler and
    rocker assembled: crank tip A = 0.1 (cos 0.3, sin 0.3), rocker pivot D = (0.3, 0); the
    coupler's absolute angle is angle(AD) + acos((|AD|^2 + 0.35^2 - 0.25^2) / (2 |AD| 0.35))
    in the mode nearest the rest (J+), its joint angle that less the crank's; the rocker's is
    the direction from D to the coupler's end B."""
    from multibody_control.cli import main

    out = tmp_path / "s.csv"
    assert main(["simulate", "four_bar", "--q0", "0.3", "--duration", "0.01", "--quiet",
                 "--out", str(out)]) == 0
    header = out.read_text().splitlines()[0].split(",")
    first = np.loadtxt(out, delimiter=",", skiprows=1)[0]
    a = 0.1 * np.array([np.cos(0.3), np.sin(0.3)])
    ad = np.array([0.3, 0.0]) - a
    d = np.linalg.norm(ad)
    coupler_abs = np.arctan2(ad[1], ad[0]) + np.arccos((d**2 + 0.35**2 - 0.25**2) / (2 * d * 0.35))
    b = a + 0.35 * np.array([np.cos(coupler_abs), np.sin(coupler_abs)])
    rocker = np.arctan2(b[1], b[0] - 0.3)  # the rocker hangs on the ground at D
    # the assembly converges to 1e-10 m on lengths of 0.1 m; the CSV has 10 digits
    np.testing.assert_allclose([first[header.index(f"q.{n}")] for n in
                                ("crank", "coupler", "rocker")],
                               [0.3, coupler_abs - 0.3, rocker], atol=1e-8)
    assert main(["simulate", "five_bar", "--q0", "0.3", "--duration", "0.01", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "or the 2 actuated joint(s) (left_motor, right_motor) alone" in err


def test_assemble_from_a_platform_pose():
    """The five-bar's end point given instead of its motors: the four working modes of its
    inverse kinematics (each leg elbow up or down) are found, each puts the frame on the
    target (pinocchio's forward kinematics) with the loop closed, and the one closest to the
    default start is the configuration the motors 0.3, 0.5 rad assemble to."""
    import pinocchio as pin

    from multibody_dynamics.assembly import assemble
    from multibody_dynamics.constraints import Constraints

    model = load_model("five_bar")
    pm = model.pin_model
    data = pm.createData()
    by_motors = assemble(model, {"left_motor": 0.3, "right_motor": 0.5})
    fid = pm.getFrameId("left_tip")
    pin.framesForwardKinematics(pm, data, by_motors.q)
    target = data.oMf[fid].translation.copy()
    pose = assemble(model, {"left_tip.x": target[0], "left_tip.y": target[1]})
    assert pose.success, pose.message
    assert len(pose.modes) == 4 and pose.dof == 2  # mobility: the closures' alone
    for mode in pose.modes:
        pin.framesForwardKinematics(pm, data, mode.q)
        # solved to 1e-10 m (the assembly tolerance)
        np.testing.assert_allclose(data.oMf[fid].translation[:2], target[:2], atol=1e-10)
        assert np.abs(Constraints(model).residual(mode.q)).max() < 1e-10
    # the same mechanism configuration: angles to ~1e-7 rad (1e-10 m over 0.1 m links,
    # amplified by the conditioning of the inverse kinematics)
    np.testing.assert_allclose(pose.q, by_motors.q, atol=1e-6)
