"""controller_node's law selection and validation, in-process (no DDS timing).

:func:`law_setup` maps the parameters to a law and refuses laws that do not fit the robot;
the node refuses them at start-up (exit code 1, one log line) and at run time (the
parameter change fails with the reason).  The tv_lqr design path (trajectory -> nominal
motion -> worker-thread Riccati solve -> switch at the next tick) is driven by calling the
node's callbacks directly.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from multibody_control.controllers import (  # noqa: E402
    ComputedTorqueController,
    FeedbackLinearizationController,
    PDController,
    ProjectedInverseDynamicsController,
    QuasiVelocityController,
    RMRCController,
    TrajectoryInterpolator,
    make_controller,
)
from multibody_control.ros.controller_node import (  # noqa: E402
    PARAMETERS,
    ControllerNode,
    LawError,
    law_setup,
    nominal_motion,
)
from multibody_control.trajectories import rest_to_rest  # noqa: E402
from multibody_dynamics.errors import InputError  # noqa: E402
from multibody_dynamics.rigid import RigidDynamics  # noqa: E402
from multibody_dynamics.ros.conversions import (  # noqa: E402
    JointCoordinates,
    MessageError,
    sec_to_duration,
    trajectory_msg,
)
from multibody_dynamics.ros.runtime import run_node  # noqa: E402

DEFAULTS = {s.name: s.default for s in PARAMETERS}


def values(**changes):
    return {**DEFAULTS, **changes}


@pytest.mark.parametrize("robot, params, kind", [
    ("arm7", {"law": "pd", "kp": [1.0], "kd": [0.02]}, PDController),
    ("arm7", {"law": "pid", "kp": [1.0], "kd": [0.02], "ki": [1.0]}, PDController),
    ("five_bar", {"law": "projected_inverse_dynamics"}, ProjectedInverseDynamicsController),
    ("slider_crank", {"law": "projected_inverse_dynamics", "rate_hz": 1000.0},
     ProjectedInverseDynamicsController),
    ("prr_surface", {"law": "projected_inverse_dynamics", "independent": ["q2", "q3"],
                     "force_control": True, "lambda_d": [50.0]},
     ProjectedInverseDynamicsController),
    ("prr_surface", {"law": "quasi_velocity", "kp": [3.0], "kd": [5.0]},
     QuasiVelocityController),
    ("arm7", {"law": "computed_torque"}, ComputedTorqueController),
    ("arm7", {"law": "rmrc"}, RMRCController),
    ("arm7", {"law": "rmrc", "rmrc_redundant_joint": "joint3", "rmrc_inner": "pd"},
     RMRCController),
    ("arm7", {"law": "tv_lqr"}, PDController),                    # the fallback runs first
    ("passive_arm", {"law": "tv_lqr", "kp": [1e3], "kd": [10.0], "lqr_r": [0.1]}, PDController),
    ("passive_arm", {"law": "tv_lqr", "fallback_law": "zero"}, type(None)),
    ("passive_arm_minphase", {"law": "feedback_linearization"}, FeedbackLinearizationController),
    ("passive_arm_minphase", {"law": "feedback_linearization",
                              "output": ["x", "tip.x", "tip.y"]}, FeedbackLinearizationController),
    # a closed loop through its constrained dynamics: dual_arm_load's bringup default
    ("dual_arm_load", {"law": "feedback_linearization", "rate_hz": 1000.0},
     FeedbackLinearizationController),
])
def test_law_setup_accepts(models, robot, params, kind):
    setup = law_setup(models[robot], values(**params))
    assert setup.law == params["law"]
    assert isinstance(setup.controller, kind)
    if setup.law == "tv_lqr":
        assert setup.lqr["R"] == params.get("lqr_r", [1.0])[0]
        assert setup.fallback == params.get("fallback_law", "pd")


def test_feedback_linearization_output_default_and_change(models):
    """Without ``output`` the law linearizes the actuated joints (the collocated output); the
    rows given are the ones it tracks, and changing them rebuilds the law (LAW_PARAMETERS)."""
    from multibody_control.ros.controller_node import LAW_PARAMETERS

    model = models["passive_arm_minphase"]
    setup = law_setup(model, values(law="feedback_linearization"))
    assert setup.controller.output.names == ("x", "alpha1", "alpha2")
    rows = ["x", "alpha1", "alpha2 + 0.6667*beta1 + 0.3333*beta2"]
    assert law_setup(model, values(law="feedback_linearization",
                                   output=rows)).controller.output.names == tuple(rows)
    assert "output" in LAW_PARAMETERS


@pytest.mark.parametrize("robot, params, message", [
    ("passive_arm", {"law": "computed_torque"}, "law computed_torque: .*fully actuated"),
    ("passive_arm", {"law": "rmrc"}, "law rmrc: .*fully actuated"),
    ("five_bar", {"law": "tv_lqr"}, "law tv_lqr: five_bar has loop closures"),
    ("passive_arm", {"law": "tv_lqr", "fallback_law": "computed_torque"},
     "law tv_lqr: fallback_law computed_torque: .*fully actuated"),
    ("arm7", {"law": "tv_lqr", "kp": [1.0, 2.0]}, "law tv_lqr: kp: expected a scalar or 7"),
    ("arm7", {"law": "tv_lqr", "lqr_r": [1.0, 2.0]}, "law tv_lqr: R: expected a scalar or 7"),
    ("arm7", {"law": "rmrc", "rmrc_frame": "nope"}, "law rmrc: .*no frame named 'nope'"),
    ("arm7", {"law": "rmrc", "rmrc_redundant_joint": "nope"}, "law rmrc: .*nope"),
    ("arm7", {"law": "pd", "kd": [1.0, 2.0]}, "law pd: kd: expected a scalar or 7"),
    # the node's default gains (kp 100 N m/rad, kd 20 N m s/rad) on arm7's wrist at 500 Hz:
    # kd dt / M = 20 * 0.002 / 2.4e-4 = 167 (M from pinocchio's crba), the sampled loop diverges
    ("arm7", {"law": "pd"}, r"law pd: gains unstable at rate_hz 500 .*joint7 .*kd\*dt/M = 167"),
    ("arm7", {"law": "computed_torque", "kd": [2000.0]}, "law computed_torque: gains unstable"),
    ("five_bar", {"law": "projected_inverse_dynamics", "force_control": True},
     "force control needs every coordinate actuated"),
    ("prr_surface", {"law": "projected_inverse_dynamics", "force_control": True,
                     "lambda_d": [1.0, 2.0]}, "lambda_d: expected 1 values"),
    ("five_bar", {"law": "feedback_linearization", "output": ["left_motor"]},
     "law feedback_linearization: .*1 output rows for 2 inputs"),
    ("passive_arm_minphase", {"law": "feedback_linearization", "output": ["x", "alpha1"]},
     "law feedback_linearization: .*2 output rows for 3 inputs"),
    ("passive_arm_minphase", {"law": "feedback_linearization", "output": ["x", "a", "tip.y"]},
     "law feedback_linearization: .*unknown joint 'a'"),
    ("passive_arm_minphase", {"law": "feedback_linearization", "kd": [2000.0]},
     "law feedback_linearization: gains unstable"),
])
def test_law_setup_refuses(models, robot, params, message):
    with pytest.raises(LawError, match=message):
        law_setup(models[robot], values(**params))


def test_nominal_motion(models):
    """The tv_lqr design input: the trajectory's effort mapped to the inputs, or (fully actuated,
    no effort) the inverse dynamics; an underactuated robot without effort is refused."""
    arm = models["arm7"]
    coords = JointCoordinates(arm)
    t = np.linspace(0.0, 1.0, 11)
    wp = rest_to_rest(t, np.zeros(7), 0.3 * np.ones(7), 0.0, 1.0)
    interp = TrajectoryInterpolator(wp.t, wp.q, wp.v, wp.a)
    nom = nominal_motion(arm, coords, interp, 0.01)
    assert nom["t"].shape == (101,) and nom["u"].shape == (101, 7)
    rigid = RigidDynamics(arm)
    k = 37
    p, v, a, _ = interp.sample(nom["t"][k])
    # B = I on arm7: u is the inverse dynamics (same arithmetic; 1e-9 N m of round-off)
    np.testing.assert_allclose(nom["u"][k], rigid.inverse_dynamics(p, v, a), atol=1e-9)

    arm_pa = models["passive_arm"]
    c_pa = JointCoordinates(arm_pa)
    wp = rest_to_rest(t, np.zeros(4), np.array([0.2, 0.1, 0.1, 0.0]), 0.0, 1.0)
    with pytest.raises(InputError, match="underactuated"):
        nominal_motion(arm_pa, c_pa, TrajectoryInterpolator(wp.t, wp.q, wp.v, wp.a), 0.01)
    effort = np.zeros((t.size, 4))
    effort[:, :3] = np.arange(3.0) + 1.0  # B selects x, alpha1, alpha2; beta is passive
    nom = nominal_motion(arm_pa, c_pa,
                         TrajectoryInterpolator(wp.t, wp.q, wp.v, wp.a, effort), 0.01)
    np.testing.assert_allclose(nom["u"], np.tile([1.0, 2.0, 3.0], (101, 1)), atol=1e-12)


def test_refuses_to_start_in_process(capfd):
    """A law that does not fit: one error line naming the law, exit code 1 (no spinning)."""
    code = run_node(ControllerNode, args=["controller_node", "--ros-args", "-p",
                                          "robot:=passive_arm", "-p", "law:=rmrc"])
    assert code == 1
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if "cannot start" in ln]
    assert len(lines) == 1 and "law rmrc:" in lines[0] and "fully actuated" in lines[0], err


@pytest.fixture
def node():
    context = rclpy.context.Context()
    rclpy.init(context=context, domain_id=232)  # no peer: nothing is exchanged
    made = []

    def make(**params):
        # the tests call _tick themselves: no paced thread ticking behind their back
        params.setdefault("timing", "timer")
        n = ControllerNode(context=context, parameter_overrides=[
            Parameter(k, value=v) for k, v in params.items()])
        made.append(n)
        return n

    yield make
    for n in made:
        n.destroy_node()
    rclpy.try_shutdown(context=context)


def _state(model, q):
    names = list(model.coordinate_names)
    return JointState(name=names, position=list(map(float, q)), velocity=[0.0] * len(names))


def test_runtime_law_changes_refused_with_reason(node):
    n = node(robot="passive_arm", law="tv_lqr", kp=[1e3], kd=[10.0], lqr_r=[0.1])
    for name, value, reason in [("law", "rmrc", "law rmrc:"),
                                ("law", "computed_torque", "fully actuated"),
                                ("fallback_law", "computed_torque", "fallback_law"),
                                ("kp", [1.0, 2.0], "kp: expected a scalar or 4")]:
        result = n.set_parameters([Parameter(name, value=value)])[0]
        assert not result.successful and reason in result.reason, (name, result.reason)
    assert n.setup.law == "tv_lqr"
    assert n.set_parameters([Parameter("law", value="pd")])[0].successful
    assert n.setup.law == "pd"
    # kd 2000 N m s/rad on alpha2 (M = 2.29 kg m^2) at 500 Hz: kd dt / M = 1.75
    result = n.set_parameters([Parameter("kd", value=[2000.0])])[0]
    assert not result.successful and "gains unstable" in result.reason, result.reason
    assert n.params["kd"] == [10.0]


def test_tv_lqr_switches_after_the_design(node, models):
    """A trajectory with feedforward: the fallback commands at once, the Riccati solve runs in
    the worker thread, the next tick switches to the gains; the command is finite and matches
    the library controller designed on the same nominal motion."""
    model = models["passive_arm"]
    n = node(robot="passive_arm", law="tv_lqr", rate_hz=250.0, kp=[1e3], kd=[10.0],
             lqr_r=[0.1], fallback_kp=[400.0, 400.0, 100.0], fallback_kd=[40.0, 40.0, 2.0])
    q0 = np.array([-1.0, 0.3, 0.2, 0.0])
    n._on_state(_state(model, q0))
    t = np.linspace(0.0, 1.0, 21)
    wp = rest_to_rest(t, q0, q0 + np.array([0.3, 0.1, 0.1, 0.0]), 0.1, 0.9)
    effort = np.zeros((t.size, 4))
    effort[:, 0] = 5.0
    msg = trajectory_msg(model.coordinate_names, t, wp.q, wp.v, wp.a, effort)
    n._on_trajectory(msg)
    u_fallback = n._command(n._now())  # before the gains: the PD fallback + feedforward
    assert n._plan is None and np.all(np.isfinite(u_fallback))
    deadline = time.monotonic() + 30.0
    while n._ready is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert n._ready is not None, "no tv_lqr design within 30 s"
    n._tick()
    plan = n._plan
    assert plan is not None and plan.solve_time > 0
    now = n._now()
    u = n._command(now)
    assert np.all(np.isfinite(u))
    interp, start, _ = n._traj
    nominal = nominal_motion(model, n.coords, interp, 1.0 / 250.0)
    ref_ctl = make_controller("tv_lqr", model, 1e3, 10.0, trajectory=nominal, dt=1.0 / 250.0,
                              R=0.1)
    # same nominal motion and weights: the same gain table (round-off only)
    np.testing.assert_allclose(plan.controller.gain(0.5), ref_ctl.gain(0.5), rtol=1e-9,
                               atol=1e-9 * np.abs(ref_ctl.gain(0.5)).max())
    # a new trajectory drops the gains at once (back to the fallback until its design)
    n._on_trajectory(JointTrajectory(joint_names=msg.joint_names, points=msg.points[:5]))
    assert n._plan is None


def _point(q, t):
    return JointTrajectoryPoint(positions=list(map(float, q)), time_from_start=sec_to_duration(t))


def test_trajectories_refused_as_joint_trajectory_controller_does(node, models):
    """Refused, the current reference kept: a position outside the URDF limits (arm7 joint2:
    +-2.09 rad in urdf/arm7.urdf), a finite but absurd 1e300, a trajectory that ended before it
    arrived (stamp + last time_from_start in the past); accepted: the same points in range."""
    from builtin_interfaces.msg import Time

    model = models["arm7"]
    names = list(model.coordinate_names)
    n = node(robot="arm7", law="computed_torque")
    n._on_state(_state(model, np.zeros(7)))
    cases = [
        ([0.0, 2.5, 0, 0, 0, 0, 0], None,
         r"joint2 at 2.5, outside its URDF limits \[-2.09, 2.09\]"),
        ([0.0, 0, 0, 0, 0, 0, 1e300], None, r"1e\+300 at index 6 is beyond \+-1e\+06"),
        ([0.0, 0.1, 0, 0, 0, 0, 0], 1.0, "ends in the past"),
    ]
    for q, stamp, reason in cases:
        msg = JointTrajectory(joint_names=names, points=[_point(q, 0.5)])
        if stamp is not None:  # 1 s after the epoch: long gone
            msg.header.stamp = Time(sec=int(stamp))
        before = n.rejected["trajectory"]
        with pytest.raises(MessageError, match=reason):
            n._accept(msg)
        n._on_trajectory(msg)
        assert n.rejected["trajectory"] == before + 1 and n._traj is None
    ok = JointTrajectory(joint_names=names, points=[_point([0.0, 2.0, 0, 0, 0, 0, 3.0], 0.5)])
    n._on_trajectory(ok)
    assert n._traj is not None


def test_closed_loop_reference_names_the_independent_joints_only(node, models):
    """five_bar under projected_inverse_dynamics: a trajectory of the two motors is accepted
    (the elbows, dependent, are filled in and ignored by the law); one that leaves out a motor
    is refused naming it."""
    model = models["five_bar"]
    q0 = [2.260904311, -1.549961486, 0.880688343, 1.549961486]
    n = node(robot="five_bar", law="projected_inverse_dynamics")
    n._on_state(_state(model, q0))
    msg = JointTrajectory(joint_names=["right_motor"], points=[_point([0.9], 0.5)])
    with pytest.raises(MessageError, match="left_motor not named"):
        n._accept(msg)
    msg = JointTrajectory(joint_names=["left_motor", "right_motor"],
                          points=[_point([2.2, 0.9], 0.5)])
    n._on_trajectory(msg)
    assert n._traj is not None
    u = n._command(n._now())
    assert u.shape == (2,) and np.all(np.isfinite(u))


def test_urdf_effort_limits_saturate_the_law(models):
    """effort_limit unset: the law saturates at the URDF effort limits of arm7's joints
    (urdf/arm7.urdf: 320, 320, 176, 176, 110, 40, 40 N m); a 2 rad error on every joint asks
    for far more under computed torque (kp 100 1/s^2 times inertias up to 3.3 kg m^2 plus
    gravity)."""
    from multibody_control.controllers import Reference

    model = models["arm7"]
    setup = law_setup(model, values(law="computed_torque"))
    q = np.zeros(7)
    u = setup.controller.step(0.0, q, np.zeros(7), Reference(q + 2.0, np.zeros(7), np.zeros(7)))
    limits = np.array([320, 320, 176, 176, 110, 40, 40], float)
    assert np.all(np.abs(u) <= limits + 1e-9)
    assert np.any(np.isclose(np.abs(u), limits))  # it does saturate
    explicit = law_setup(model, values(law="computed_torque", effort_limit=[1e6]))
    u2 = explicit.controller.step(0.0, q, np.zeros(7),
                                  Reference(q + 2.0, np.zeros(7), np.zeros(7)))
    assert np.max(np.abs(u2)) > 320.0  # an explicit effort_limit replaces the URDF's
