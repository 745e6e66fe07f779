"""MuJoCo MJCF models: the tree, gravity, actuation and springs against MuJoCo itself,
equality constraints as closures, the shipped MJCF four-bar against the YAML/URDF four_bar,
the CLI on MJCF files, and SDF (refused with what is missing when pinocchio has no sdformat).
"""

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from multibody_control.cli import main
from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import ModelError
from multibody_dynamics.model import load_model
from multibody_dynamics.model.resources import robots_dir
from multibody_dynamics.projection import ProjectedDynamics
from multibody_dynamics.robot import load_robot

DATA = Path(__file__).parent / "data" / "mjcf"
ARM = DATA / "arm.xml"
EQUALITIES = DATA / "equalities.xml"
FOUR_BAR = robots_dir() / "mjcf" / "four_bar.xml"


def _mujoco():
    return pytest.importorskip("mujoco", reason="mujoco (the `test` extra) is not installed")


def _mj_state(mj, mm, model, q, v=None):
    """MuJoCo data at pinocchio's (q, v): quaternions reordered (x y z w) -> (w x y z)."""
    d = mj.MjData(mm)
    qm = np.array(q, float)
    for jid in range(1, model.pin_model.njoints):
        j = model.pin_model.joints[jid]
        if j.nq == 4:  # spherical joint
            qm[j.idx_q:j.idx_q + 4] = np.roll(q[j.idx_q:j.idx_q + 4], 1)
    d.qpos[:] = qm
    if v is not None:
        d.qvel[:] = v
    mj.mj_forward(mm, d)
    return d


def _equality_rows(mj, d):
    """MuJoCo's residual rows of the equality constraints (not joint limits or contacts)."""
    return d.efc_pos[:d.nefc][d.efc_type[:d.nefc] == mj.mjtConstraint.mjCNSTR_EQUALITY]


def _full_mass_matrix(mj, mm, d):
    M = np.zeros((mm.nv, mm.nv))
    try:
        mj.mj_fullM(mm, d, M)  # MuJoCo >= 3.3
    except TypeError:
        mj.mj_fullM(mm, M, d.qM)
    return M


def _assert_mass_and_bias_match(mj, mm, model, rng) -> None:
    """pinocchio's mass matrix and bias forces of ``model`` equal MuJoCo's of ``mm`` at five
    random states: two implementations of the same rigid-body algebra, so to round-off only
    (1e-12 for entries of order 1)."""
    pm = model.pin_model
    data = pm.createData()
    for _ in range(5):
        q, v = rng.uniform(-1, 1, model.nq), rng.uniform(-2, 2, model.nv)
        d = _mj_state(mj, mm, model, q, v)
        M = pin.crba(pm, data, q)
        np.testing.assert_allclose(np.triu(M) + np.triu(M, 1).T, _full_mass_matrix(mj, mm, d),
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(pin.rnea(pm, data, q, v, np.zeros(model.nv)), d.qfrc_bias,
                                   rtol=0, atol=1e-12)


def test_open_chain_matches_mujoco(rng):
    """Mass matrix, gravity + Coriolis, springs and actuation of an open chain with rotated
    bodies, a slide joint, full and geom-derived inertias and default classes, against
    MuJoCo's own model of the same file."""
    mj = _mujoco()
    mm = mj.MjModel.from_xml_path(str(ARM))
    model = load_robot(ARM)
    assert (model.nq, model.nv, model.nu) == (mm.nq, mm.nv, mm.nu) == (4, 4, 3)
    np.testing.assert_allclose(model.gravity, mm.opt.gravity, rtol=0, atol=0)
    _assert_mass_and_bias_match(mj, mm, model, rng)  # entries ~0.7
    # springs of the unactuated joint j4 (class "stiff": k 3, d 0.2, springref 10 degrees)
    j4 = model.joint_index("j4")
    assert model.passive.tolist() == [False, False, False, True]
    np.testing.assert_allclose(model.stiffness[j4], mm.jnt_stiffness[3], rtol=0, atol=0)
    np.testing.assert_allclose(model.damping[j4], mm.dof_damping[3], rtol=0, atol=0)
    np.testing.assert_allclose(model.q_rest[j4], mm.qpos_spring[3], rtol=0, atol=1e-15)
    # B from the actuators' joints, gears and gains (MuJoCo's actuator_moment times the
    # fixed gain: the position servo p3's input is its setpoint, kp 100)
    B = np.zeros((mm.nv, mm.nu))
    for k in range(mm.nu):
        B[mm.jnt_dofadr[mm.actuator_trnid[k, 0]], k] = (mm.actuator_gear[k, 0]
                                                        * mm.actuator_gainprm[k, 0])
    np.testing.assert_array_equal(model.B, B)
    assert model.input_names == ("m1", "m2", "p3")
    assert model.stiffness[model.joint_index("s3")] == 100.0  # p3's kp: the servo's spring
    assert any("servo actuator(s)" in note and "s3" in note for note in model.notes)


def test_multi_joint_bodies_match_mujoco(rng):
    """Bodies with several joints become one joint per body, named as in the file, with
    MuJoCo's mass matrix and bias forces (pinocchio alone makes composite joints)."""
    mj = _mujoco()
    path = DATA / "multi_joint.xml"
    mm = mj.MjModel.from_xml_path(str(path))
    model = load_robot(path)
    assert model.coordinate_names == ("h1", "h2", "s3", "h4", "h5")
    assert model.input_names == ("h2", "h5") and model.B[4, 1] == 3.0
    np.testing.assert_allclose(model.q_initial, mm.qpos0, rtol=0, atol=1e-15)  # h5's ref
    _assert_mass_and_bias_match(mj, mm, model, rng)  # entries ~1


def _closure_norms(residual, closures):
    """(position norm, rotation norm) of each closure's rows."""
    out, k = [], 0
    for c in closures:
        rows = residual[k:k + c.rows]
        out.append((np.linalg.norm(rows[:3]), np.linalg.norm(rows[3:])))
        k += c.rows
    return np.array(out)


def test_equalities_match_mujoco_residuals(rng):
    """connect (sites, body anchor) and weld (qpos0, sites, relpose to the world): the
    closure residual vanishes where MuJoCo's does, compared at random configurations.
    MuJoCo reports world-frame position rows and sin(theta/2) rotation rows, the suite
    frame-b position rows and sin(theta) rotation rows; the norms compare exactly."""
    mj = _mujoco()
    mm = mj.MjModel.from_xml_path(str(EQUALITIES))
    model = load_robot(EQUALITIES)
    names = [c.name for c in model.closures]
    assert names == ["by_sites", "by_anchor", "weld_qpos0", "weld_sites", "weld_relpose"]
    assert [c.type for c in model.closures] == ["spherical"] * 2 + ["weld"] * 3
    assert any("'off'" in n and "inactive" in n for n in model.notes)
    c = Constraints(model)
    # body-anchor connect and weld without relpose hold at qpos0 (the site forms do not)
    np.testing.assert_allclose(c.residual(model.neutral())[3:12], 0, rtol=0, atol=1e-15)
    for _ in range(5):
        q = pin.randomConfiguration(model.pin_model, -np.ones(model.nq), np.ones(model.nq))
        d = _mj_state(mj, mm, model, q)
        ours = _closure_norms(c.residual(q), model.closures)
        theirs = _closure_norms(_equality_rows(mj, d), model.closures)
        # positions: the same distance [m]; round-off only
        np.testing.assert_allclose(ours[:, 0], theirs[:, 0], rtol=0, atol=1e-12)
        s = theirs[2:, 1]  # |sin(theta/2)| of the welds
        np.testing.assert_allclose(ours[2:, 1], 2 * s * np.sqrt(1 - s**2), rtol=0, atol=1e-12)


def test_shipped_mjcf_four_bar_equals_yaml_four_bar(rng):
    """config/robots/mjcf/four_bar.xml against the YAML/URDF four_bar: same tree, same
    actuation, and the same constrained accelerations at random assembled states (the YAML
    model's 5-row revolute closure and the MJCF's 3-row connect close the same loop); the
    MJCF model's accelerations also against pinocchio's own constraintDynamics."""
    xml, yml = load_robot(FOUR_BAR), load_model("four_bar")
    assert xml.coordinate_names == yml.coordinate_names
    np.testing.assert_array_equal(xml.B, yml.B)
    np.testing.assert_array_equal(xml.gravity, yml.gravity)
    pdx, pdy = ProjectedDynamics(xml), ProjectedDynamics(yml)
    pm = xml.pin_model
    data = pm.createData()
    (cl,) = xml.closures
    fa, fb = pm.frames[pm.getFrameId(cl.frame_a)], pm.frames[pm.getFrameId(cl.frame_b)]
    contact = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pm, fa.parentJoint,
                                       fa.placement, fb.parentJoint, fb.placement,
                                       pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
    cdata = [contact.createData()]
    pin.initConstraintDynamics(pm, data, [contact], cdata)
    for crank in rng.uniform(-np.pi, np.pi, 5):
        res = pdy.project_position(np.array([crank, 0.3, 1.5]))
        assert res.success
        q = res.q
        v = pdy.project_velocity(q, rng.normal(size=3))
        tau = rng.normal(size=3)
        np.testing.assert_allclose(pin.crba(pm, data, q), pin.crba(yml.pin_model,
                                   yml.create_data(), q), rtol=0, atol=1e-15)
        a = pdx.acceleration(q, v, tau)
        # the two closures' Jacobians differ in rows, not in null space: round-off of the
        # projection's pinv/solve (accelerations ~10 rad/s^2)
        np.testing.assert_allclose(a, pdy.acceleration(q, v, tau), rtol=0, atol=1e-8)
        ref = pin.constraintDynamics(pm, data, q, v, tau, [contact], cdata,
                                     pin.ProximalSettings(1e-12, 1e-10, 50))
        # proximal solve with mu = 1e-10 (DESIGN.md §7: mu = 0 gives NaN on the rank-2
        # planar closure): its regularization error bounds the agreement
        np.testing.assert_allclose(a, ref, rtol=0, atol=1e-6)


def test_cli_on_mjcf(tmp_path, capsys):
    """check, simulate (closed loop: the MJCF and YAML four-bars move alike) and
    requirements (open chain) on MJCF files."""
    assert main(["check", str(FOUR_BAR)]) == 0
    out = capsys.readouterr().out
    assert "coupler_rocker spherical" in out and "1 degree(s) of freedom" in out
    runs = {}
    for name, robot in (("xml", str(FOUR_BAR)), ("yaml", "four_bar")):
        csv = tmp_path / f"{name}.csv"
        assert main(["simulate", robot, "--duration", "0.2", "--quiet", "--given", "crank=0.4",
                     "--out", str(csv)]) == 0
        header = csv.read_text().splitlines()[0].split(",")
        runs[name] = dict(zip(header, np.loadtxt(csv, delimiter=",", skiprows=1).T))
    cols = ["q.crank", "q.coupler", "q.rocker", "v.crank", "v.coupler", "v.rocker"]
    # same start, same dynamics, fixed-step RK4 with projections: the trajectories agree to
    # the projection's Newton tolerance accumulated over 200 steps
    for col in cols:
        np.testing.assert_allclose(runs["xml"][col], runs["yaml"][col], rtol=0, atol=1e-8)
    assert np.ptp(runs["xml"]["q.crank"]) > 1e-3  # it moved under gravity
    assert main(["requirements", str(ARM), "demo", "--out", str(tmp_path / "req")]) == 0
    (csv,) = (tmp_path / "req").glob("*_requirements.csv")
    assert np.all(np.isfinite(np.genfromtxt(csv, delimiter=",", skip_header=1)))
    capsys.readouterr()


def test_mjcf_result_animates(tmp_path, capsys):
    """A simulate result of an MJCF model finds its model again (the sidecar names the file)
    and is drawn with the MJCF's geoms: the box of each link at its body's pose."""
    from multibody_control.animation.scene import build_scene

    csv = tmp_path / "fb.csv"
    assert main(["simulate", str(FOUR_BAR), "--duration", "0.05", "--quiet", "--out",
                 str(csv)]) == 0
    html = tmp_path / "fb.html"
    assert main(["animate", str(csv), "--out", str(html), "--max-frames", "3"]) == 0
    assert html.stat().st_size > 0
    model = load_robot(FOUR_BAR)
    scene = build_scene(model, model.q_initial[None, :], np.zeros(1))
    boxes = {sh.name: (sh.dims, pose) for sh, pose in zip(scene.shapes, scene.poses[0])
             if sh.role == "link" and sh.kind == "box"}
    assert set(boxes) == {"crank_link", "coupler_link", "rocker_link"}
    # MJCF box sizes are half-lengths: the drawn boxes have the full ones
    np.testing.assert_allclose(boxes["coupler_link"][0], (0.35, 0.02, 0.01))
    # the rocker's box centre: the rocker joint (0.3, 0, 0) plus 0.125 m along the link
    data = model.pin_model.createData()
    pin.forwardKinematics(model.pin_model, data, model.q_initial)
    rocker = data.oMi[model.pin_model.getJointId("rocker")]
    np.testing.assert_allclose(boxes["rocker_link"][1][:3], rocker.act(np.array([0.125, 0, 0])),
                               rtol=0, atol=1e-12)
    capsys.readouterr()


def test_gravity_disabled(tmp_path):
    """``<flag gravity="disable"/>``: no gravity (MuJoCo's qfrc_bias has none either)."""
    path = tmp_path / "nog.xml"
    path.write_text('<mujoco model="nog"><option gravity="0 0 -3"><flag gravity="disable"/>'
                    '</option><worldbody><body name="b" euler="0 90 0"><joint name="j" '
                    'axis="1 0 0"/><geom type="box" pos="0.1 0 0" size="0.1 0.02 0.02" '
                    'mass="1"/></body></worldbody></mujoco>')
    model = load_robot(path)
    np.testing.assert_array_equal(model.gravity, 0.0)
    q = np.array([0.4])
    tau = pin.rnea(model.pin_model, model.create_data(), q, np.zeros(1), np.zeros(1))
    np.testing.assert_array_equal(tau, 0.0)
    mj = pytest.importorskip("mujoco")
    mm = mj.MjModel.from_xml_path(str(path))
    d = _mj_state(mj, mm, model, q)
    np.testing.assert_allclose(d.qfrc_bias, 0.0, rtol=0, atol=1e-15)


def test_include(tmp_path):
    """<include file=...> is read relative to the including file (MuJoCo's rule)."""
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "arm.xml").write_text(
        '<mujoco><worldbody><body name="b"><joint name="j" axis="0 1 0"/><geom type="box" '
        'pos="0.1 0 0" size="0.1 0.02 0.02" mass="2"/></body></worldbody></mujoco>')
    path = tmp_path / "main.xml"
    path.write_text('<mujoco model="inc"><include file="parts/arm.xml"/>'
                    '<actuator><motor joint="j"/></actuator></mujoco>')
    model = load_robot(path)
    assert model.coordinate_names == ("j",) and model.input_names == ("j",)
    assert model.total_mass() == pytest.approx(2.0, rel=1e-12)


def test_all_root_bodies_are_loaded():
    """pinocchio's parser keeps only the first body under <worldbody>; the loader keeps all
    (the four-bar's rocker is the second root body)."""
    bare = pin.buildModelFromMJCF(str(FOUR_BAR))
    assert not bare.existJointName("rocker")  # the parser limitation the loader works around
    assert load_robot(FOUR_BAR).pin_model.existJointName("rocker")


@pytest.mark.parametrize("body, expected", [
    ('<equality><joint joint1="a"/></equality>', "type 'joint' is not supported"),
    ('<equality><connect body1="nope" anchor="0 0 0"/></equality>', "unknown body 'nope'"),
    ('<equality><connect site1="s"/></equality>', "give both site1 and site2"),
    ('<equality><weld body1="b" body2="b"/></equality>', "same rigid body"),
    ('<actuator><motor tendon="t"/></actuator>', "only joint transmissions"),
    ('<actuator><motor joint="zz"/></actuator>', "'zz' is not a 1-DoF joint"),
    ('<actuator><intvelocity name="iv" joint="a"/></actuator>',
     r"'iv' \(<intvelocity>\): this actuator kind is not supported; supported: motor"),
    ('<actuator><damper name="d" joint="a" kv="1"/></actuator>', "'d' .*this actuator kind"),
    ('<actuator><cylinder joint="a"/></actuator>', r"'cylinder\[0\]'.*this actuator kind"),
    ('<actuator><position name="p" joint="a" timeconst="0.1"/></actuator>',
     "'p' .*timeconst > 0"),
    ('<actuator><position name="p" joint="a" dampratio="1"/></actuator>', "'p' .*dampratio"),
    ('<actuator><general name="g" joint="a" dyntype="filter"/></actuator>',
     "'g' .*dyntype='filter'"),
    ('<actuator><general name="g" joint="a" gaintype="affine"/></actuator>',
     "'g' .*gaintype='affine'"),
    ('<actuator><general name="g" joint="a" biastype="affine" biasprm="1 0 0"/></actuator>',
     r"'g' .*constant bias force \(biasprm\[0\] = 1\)"),
    ('<actuator><general name="g" joint="a" biastype="affine" biasprm="0 2 0"/></actuator>',
     "'g': its bias gives the joint a negative stiffness"),
    ('<keyframe><key name="k" qpos="1 2"/></keyframe>',
     "keyframe <key name='k'> qpos: expected at most 1 numbers"),
])
def test_bad_mjcf_is_refused(tmp_path, body, expected):
    path = tmp_path / "bad.xml"
    path.write_text('<mujoco model="bad"><worldbody><body name="b"><joint name="a"/>'
                    '<geom size="0.1" mass="1"/><site name="s"/></body></worldbody>'
                    f"{body}</mujoco>")
    with pytest.raises(ModelError, match=expected):
        load_robot(path)


REF = """<mujoco model="ref">
  <worldbody>
    <body name="b" pos="0 0 1">
      <joint name="a" type="hinge" axis="0 1 0" ref="30" range="0 60" stiffness="2"
             springref="40"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="1"/>
      <body name="c" pos="0.3 0 0">
        <joint name="s" type="slide" axis="1 0 0" ref="0.1" range="-0.2 0.3"/>
        <geom type="box" size="0.02 0.02 0.02" mass="0.5"/>
      </body>
    </body>
  </worldbody>
  <equality><connect name="pin" body1="c" anchor="0.05 0 0"/></equality>
  <actuator><motor joint="s"/></actuator>
</mujoco>
"""


def test_joint_ref(tmp_path, rng):
    """Joints with ``ref``: q is MuJoCo's qpos (dynamics, limits, spring rest as MuJoCo's),
    the connect holds at qpos0 (q = ref), which is the default start."""
    mj = _mujoco()
    path = tmp_path / "ref.xml"
    path.write_text(REF)
    mm = mj.MjModel.from_xml_path(str(path))
    model = load_robot(path)
    pm = model.pin_model
    np.testing.assert_allclose(pm.lowerPositionLimit, mm.jnt_range[:, 0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(pm.upperPositionLimit, mm.jnt_range[:, 1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(model.q_initial, mm.qpos0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(model.q_rest, mm.qpos_spring, rtol=0, atol=1e-15)
    assert model.passive.tolist() == [True, False] and model.stiffness[0] == 2.0
    c = Constraints(model)
    np.testing.assert_allclose(c.residual(model.q_initial), 0, rtol=0, atol=1e-15)
    data = pm.createData()
    for _ in range(3):
        q = rng.uniform(-1, 1, 2)
        d = _mj_state(mj, mm, model, q)
        M = pin.crba(pm, data, q)
        np.testing.assert_allclose(np.triu(M) + np.triu(M, 1).T, _full_mass_matrix(mj, mm, d),
                                   rtol=0, atol=1e-12)  # round-off
        np.testing.assert_allclose(np.linalg.norm(c.residual(q)),
                                   np.linalg.norm(_equality_rows(mj, d)), rtol=0, atol=1e-12)
    # the same tree under a model YAML without initial_positions also starts at qpos0
    yml = tmp_path / "ref.yaml"
    yml.write_text(f"name: ref\nurdf: {path}\npassive_joints: {{a: {{}}}}\n")
    np.testing.assert_allclose(load_robot(yml).q_initial, mm.qpos0, rtol=0, atol=1e-15)


def test_sdf(tmp_path, capsys):
    """SDF: pinocchio parses it only when built with sdformat (the PyPI wheel is not); then
    the error names what is missing and what to use instead."""
    path = tmp_path / "robot.sdf"
    path.write_text('<sdf version="1.7"><model name="m"><link name="l"/></model></sdf>')
    if getattr(pin, "WITH_SDFORMAT", False):  # pragma: no cover - not the PyPI build
        pytest.skip("pinocchio has sdformat: SDF support is pinocchio's")
    with pytest.raises(ModelError, match="SDF needs pinocchio built with sdformat"):
        load_robot(path)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "convert the model to URDF" in err


SERVOS = DATA / "servos.xml"


def test_servo_actuators_match_mujoco(rng):
    """Motor, position (kp, kv, gear), velocity, general (affine bias) actuators, two of them
    on one joint: B u plus the joint springs and dampers are MuJoCo's actuator and passive
    forces, and the accelerations MuJoCo's, with u as MuJoCo's ctrl."""
    from multibody_dynamics.rigid import RigidDynamics

    mj = _mujoco()
    mm = mj.MjModel.from_xml_path(str(SERVOS))
    model = load_robot(SERVOS)
    assert model.input_names == ("m1", "p2", "p3", "v3", "g5") and mm.nu == 5
    assert model.passive.tolist() == [False, False, False, True, False]
    dyn = RigidDynamics(model)
    for _ in range(5):
        q, v = rng.uniform(-1, 1, model.nq), rng.uniform(-2, 2, model.nv)
        u = rng.uniform(-1, 1, model.nu)
        u[2] = rng.uniform(-0.2, 0.2)  # within p3's ctrlrange: B u (limits: test_mjcf_limits)
        d = mj.MjData(mm)
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, u
        mj.mj_forward(mm, d)
        # forces of a few N: round-off only
        np.testing.assert_allclose(model.B @ u + dyn.spring_forces(q, v),
                                   d.qfrc_actuator + d.qfrc_passive, rtol=0, atol=1e-12)
        # accelerations up to ~1e4 (a light hand on stiff servos): relative round-off
        np.testing.assert_allclose(dyn.forward_dynamics(q, v, model.B @ u), d.qacc,
                                   rtol=1e-9, atol=1e-9 * np.abs(d.qacc).max())


def test_keyframe_is_the_start(tmp_path):
    """The first <key>'s qpos is the default start; a model YAML picks another by name
    (a short qpos is padded with qpos0, as MuJoCo does); unknown names are refused."""
    mj = _mujoco()
    mm = mj.MjModel.from_xml_path(str(SERVOS))
    np.testing.assert_array_equal(load_robot(SERVOS).q_initial, mm.key_qpos[0])
    yml = tmp_path / "servos.yaml"
    yml.write_text(f"name: servos\nurdf: {SERVOS}\nmjcf_keyframe: short\n")
    np.testing.assert_array_equal(load_robot(yml).q_initial, mm.key_qpos[1])
    yml.write_text(f"name: servos\nurdf: {SERVOS}\nmjcf_keyframe: away\n")
    with pytest.raises(ModelError, match="mjcf_keyframe: no <key name='away'>.*expected one "
                                         "of: home, short"):
        load_robot(yml)
    yml.write_text(f"name: servos\nurdf: {SERVOS}\nmjcf_keyframe: short\n"
                   "initial_positions: {j1: 0.7}\n")
    assert load_robot(yml).q_initial[0] == 0.7  # initial_positions wins over the keyframe


def test_short_keyframe_assembles_a_closed_loop(tmp_path):
    """A key giving only the crank of the MJCF four-bar (MuJoCo pads qpos with qpos0): the
    crank starts there and the loop is assembled around it."""
    text = FOUR_BAR.read_text()
    assert text.rstrip().endswith("</mujoco>") and "<keyframe>" not in text
    path = tmp_path / "four_bar_key.xml"
    path.write_text(text.rstrip()[:-len("</mujoco>")]
                    + '<keyframe><key name="start" qpos="0.4"/></keyframe></mujoco>\n')
    model = load_robot(path)
    assert model.q_initial[model.joint_index("crank")] == 0.4
    # assembled: the closure holds to Newton's tolerance
    assert np.max(np.abs(Constraints(model).residual(model.q_initial))) < 1e-10
