"""Projection-matrix constrained dynamics (Aghili 2005) against independent formulations."""

import numpy as np
import pinocchio as pin
import pytest
import yaml
from conftest import ASSEMBLY_GUESS, assembled
from hypothesis import given, settings
from hypothesis import strategies as st

from multibody_dynamics.constrained_baselines import (
    CoordinatePartitioning,
    KKTDynamics,
    KKTSettings,
    PinocchioConstraintDynamics,
)
from multibody_dynamics.constraints import Constraints
from multibody_dynamics.errors import InputError, ModelError
from multibody_dynamics.model import load_model
from multibody_dynamics.model.resources import share_dir
from multibody_dynamics.projection import (
    VARIANTS,
    ProjectedDynamics,
    ProjectionSettings,
    constrained_mass_matrix,
    null_space_projector,
    projected_acceleration,
)

GUESS = ASSEMBLY_GUESS
FULL_RANK = ["five_bar", "slider_crank", "prr_surface"]

# Accelerations of these light mechanisms reach ~1e3 rad/s^2 under unit torques; the
# formulations differ by a few condition numbers of M_c / KKT times machine epsilon.
RTOL = 1e-9




def write_model(tmp_path, name, urdf, closures, passive=None, gravity=(0.0, -9.81, 0.0)):
    """A temporary model YAML (closures as dicts) around an existing URDF file."""
    path = tmp_path / f"{name}.yaml"
    doc = {"name": name, "urdf": str(urdf), "gravity": list(gravity), "closures": closures}
    if passive is not None:
        doc["passive_joints"] = passive
    path.write_text(yaml.safe_dump(doc))
    return load_model(path)


def scale(x):
    return max(1.0, float(np.max(np.abs(x))))


# -- agreement with KKT and coordinate partitioning -----------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("robot", FULL_RANK)
def test_forward_dynamics_equals_kkt_and_partitioning(models, rng, robot, variant):
    model = models[robot]
    pd = ProjectedDynamics(model, settings=ProjectionSettings(variant=variant, alpha=0.05))
    kkt = KKTDynamics(model)
    kkt_lu = KKTDynamics(model, settings=KKTSettings(method="solve"))
    cp = CoordinatePartitioning(model)
    for _ in range(3):
        q, v, tau = assembled(model, rng, GUESS[robot])
        res = pd.forward_dynamics_result(q, v, tau)
        assert res.success and res.rank == pd.constraints.n_rows, res.message
        k = kkt.forward_dynamics_result(q, v, tau)
        s = scale(k.a)
        np.testing.assert_allclose(res.a, k.a, rtol=0, atol=RTOL * s)
        np.testing.assert_allclose(res.a, kkt_lu.forward_dynamics_result(q, v, tau).a, rtol=0,
                                   atol=RTOL * s)
        np.testing.assert_allclose(res.a, cp.forward_dynamics_result(q, v, tau).a, rtol=0,
                                   atol=RTOL * s)
        # multipliers: unique for full-rank A; same sign convention M a + h = tau + A^T lam
        np.testing.assert_allclose(res.lam, k.lam, rtol=0, atol=RTOL * scale(k.lam) * s)
        # the acceleration constraint A a + gamma = 0 holds; this also fixes the sign of the
        # term "M C q'" = -M A^+ gamma of eq. 22 (the wrong sign fails by |gamma| ~ 1..100)
        assert res.residual < RTOL * s


def test_sign_of_the_velocity_term(models, rng):
    """Flipping the sign of M C q' in eq. 22 breaks A a + gamma = 0 (numerical check of C = -A^+
    A')."""
    model = models["five_bar"]
    q, v, tau = assembled(model, rng, GUESS["five_bar"])
    c = Constraints(model)
    A, gamma = c.jacobian_and_bias(q, v)
    assert np.max(np.abs(gamma)) > 1e-3  # the state has a bias to get right
    data = model.create_data()
    M = pin.crba(model.pin_model, data, q)
    f = tau - pin.nonLinearEffects(model.pin_model, data, q, v)
    a, _ = projected_acceleration(M, f, A, gamma)
    a_wrong, _ = projected_acceleration(M, f, A, -gamma)
    assert np.max(np.abs(A @ a + gamma)) < 1e-10 * scale(a)  # round-off of the solve
    assert np.max(np.abs(A @ a_wrong + gamma)) > 1e-3


def test_coordinate_partitioning_repartitions(models, rng):
    model = models["five_bar"]
    cp = CoordinatePartitioning(model)
    q, v, tau = assembled(model, rng, GUESS["five_bar"])
    r1 = cp.forward_dynamics_result(q, v, tau)
    r2 = cp.forward_dynamics_result(q, v, tau)
    assert r1.repartitioned and not r2.repartitioned and cp.repartitions == 1
    assert len(r1.independent) == 2 and r1.cond <= cp.settings.cond_max


# -- pinocchio's proximal solver on spherical and weld closures -----------------------------------
@pytest.mark.parametrize("base,frames", [("five_bar", ("left_tip", "right_tip")),
                                         ("four_bar", ("coupler_tip", "rocker_tip"))])
def test_spherical_closure_equals_pinocchio(tmp_path, rng, base, frames):
    """Planar loops closed by a 3-D point constraint: 3 rows of rank 2 (mu >= 1e-12 needed)."""
    model = write_model(tmp_path, f"{base}_sph", share_dir() / "urdf" / f"{base}.urdf",
                        [{"name": "loop", "type": "spherical", "frame_a": frames[0],
                          "frame_b": frames[1]}])
    q, v, tau = assembled(model, rng, GUESS[base])
    res = ProjectedDynamics(model).forward_dynamics_result(q, v, tau)
    assert res.rank == 2
    s = scale(res.a)
    for rf in (pin.ReferenceFrame.LOCAL, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED):
        p = PinocchioConstraintDynamics(model, reference_frame=rf).forward_dynamics_result(
            q, v, tau)
        assert p.success
        # pinocchio's proximal solve converges to its eps = 1e-12 in a few iterations
        np.testing.assert_allclose(p.a, res.a, rtol=0, atol=RTOL * s)
        # constraint force from pinocchio's accelerations: unique, equal to eq. 32
        data = model.create_data()
        f_c = pin.rnea(model.pin_model, data, q, v, p.a) - tau
        np.testing.assert_allclose(f_c, res.f_c, rtol=0, atol=RTOL * s * scale(res.f_c))
        # both multipliers are minimum-norm (axes differ between LOCAL and world)
        np.testing.assert_allclose(np.linalg.norm(p.lam), np.linalg.norm(res.lam), rtol=1e-8)


@pytest.fixture
def arm7_target(tmp_path):
    """arm7 plus a world-fixed frame 'target' at the placement of tool0 at q0 (frames aligned)."""
    base = load_model("arm7")
    q0 = np.array([0.3, 0.8, -0.2, -1.2, 0.4, 0.9, 0.1])
    data = base.create_data()
    pin.framesForwardKinematics(base.pin_model, data, q0)
    oMt = data.oMf[base.frame_id("tool0")]
    xyz = " ".join(f"{x:.17g}" for x in oMt.translation)
    rpy = " ".join(f"{x:.17g}" for x in pin.rpy.matrixToRpy(oMt.rotation))
    text = (share_dir() / "urdf" / "arm7.urdf").read_text().replace(
        "</robot>", '  <link name="target"/>\n  <joint name="target_fixed" type="fixed">\n'
        '    <parent link="world"/>\n    <child link="target"/>\n'
        f'    <origin xyz="{xyz}" rpy="{rpy}"/>\n  </joint>\n</robot>')
    urdf = tmp_path / "arm7_target.urdf"
    urdf.write_text(text)
    return urdf, q0


@pytest.mark.parametrize("ctype,rank", [("weld", 6), ("spherical", 3)])
def test_spatial_closure_equals_pinocchio(tmp_path, rng, arm7_target, ctype, rank):
    urdf, q0 = arm7_target
    model = write_model(tmp_path, f"arm7_{ctype}", urdf,
                        [{"name": "grip", "type": ctype, "frame_a": "tool0", "frame_b": "target"}],
                        gravity=(0.0, 0.0, -9.81))
    pd = ProjectedDynamics(model)
    c = Constraints(model)
    # assembled by construction [m, rad]
    np.testing.assert_allclose(c.residual(q0), 0.0, atol=1e-12)
    q = pd.project_position(q0 + 0.01 * rng.normal(size=7)).q
    v = pd.project_velocity(q, rng.normal(size=7))
    tau = 5.0 * rng.normal(size=7)
    res = pd.forward_dynamics_result(q, v, tau)
    assert res.rank == rank
    s = scale(res.a)
    np.testing.assert_allclose(res.a, KKTDynamics(model).forward_dynamics_result(q, v, tau).a,
                               rtol=0, atol=RTOL * s)
    for rf in (pin.ReferenceFrame.LOCAL, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED):
        p = PinocchioConstraintDynamics(model, reference_frame=rf).forward_dynamics_result(
            q, v, tau)
        # eps = 1e-12 of the proximal solver, well-conditioned full-rank closure
        np.testing.assert_allclose(p.a, res.a, rtol=0, atol=RTOL * s)


def test_pinocchio_baseline_rejects_other_closures(models):
    with pytest.raises(ModelError, match="no pinocchio equivalent"):
        PinocchioConstraintDynamics(models["five_bar"])
    with pytest.raises(InputError, match="mu"):
        PinocchioConstraintDynamics(models["five_bar"], mu=0.0)


# -- redundant and singular constraints -----------------------------------------------------------
def test_four_bar_redundant_closure(models, rng):
    """5 rows of rank 2: projection and minimum-norm KKT agree; plain LU on KKT fails."""
    model = models["four_bar"]
    q, v, tau = assembled(model, rng, GUESS["four_bar"])
    res = ProjectedDynamics(model).forward_dynamics_result(q, v, tau)
    assert res.success and res.rank == 2 and "redundant" in res.message
    k = KKTDynamics(model).forward_dynamics_result(q, v, tau)
    s = scale(res.a)
    np.testing.assert_allclose(res.a, k.a, rtol=0, atol=RTOL * s)
    np.testing.assert_allclose(res.a,
                               CoordinatePartitioning(model).forward_dynamics_result(q, v, tau).a,
                               rtol=0, atol=RTOL * s)
    # both multipliers are the minimum-norm ones (lstsq and (A^T)^+ f_c)
    np.testing.assert_allclose(res.lam, k.lam, rtol=0, atol=RTOL * s * scale(k.lam))

    lu = KKTDynamics(model, settings=KKTSettings(method="solve"))
    bad = lu.forward_dynamics_result(q, v, tau)
    assert not bad.success and "singular" in bad.message
    K, rhs = lu.kkt_system(q, v, tau)
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.solve(K, rhs)


def test_constraint_force_orthogonal_to_null_space_and_unique(models, rng):
    model = models["four_bar"]
    pd = ProjectedDynamics(model)
    q, v, tau = assembled(model, rng, GUESS["four_bar"])
    res = pd.forward_dynamics_result(q, v, tau)
    P = pd.projector(q).P
    s = scale(res.f_c)
    np.testing.assert_allclose(P @ res.f_c, 0.0, atol=1e-12 * s)  # round-off of one product
    A = pd.constraints.jacobian(q)
    # any multiplier of the affine solution set gives the same force: add null(A^T) components
    null_At = np.linalg.svd(A.T)[2][2:].T  # (5, 3), A^T null_At = 0
    lam_other = res.lam + null_At @ rng.normal(size=3)
    np.testing.assert_allclose(A.T @ lam_other, res.f_c, atol=1e-12 * s)
    assert np.linalg.norm(lam_other) > np.linalg.norm(res.lam)  # minimum norm (Remark 4)
    # eq. 32 from the equation of motion
    data = model.create_data()
    np.testing.assert_allclose(pin.rnea(model.pin_model, data, q, v, res.a) - tau, res.f_c,
                               atol=1e-10 * s)  # acceleration round-off times |M|
    f_c2, lam2 = pd.constraint_force(q, v, res.a, tau)
    np.testing.assert_allclose(f_c2, res.f_c, atol=1e-10 * s)
    np.testing.assert_allclose(lam2, res.lam, atol=1e-10 * s)


def test_slider_crank_singularity(models, rng):
    """At q1 = pi/2 with the rod folded back (q2 = pi) the single row of A vanishes (eq. 70)."""
    model = models["slider_crank"]
    pd = ProjectedDynamics(model)
    q = np.array([np.pi / 2, np.pi])
    np.testing.assert_allclose(pd.constraints.residual(q), 0.0, atol=1e-15)  # on the manifold
    assert np.max(np.abs(pd.constraints.jacobian(q))) < 1e-15  # the row is zero up to cos(pi/2)
    proj = pd.projector(q)
    assert proj.rank == 0
    np.testing.assert_array_equal(proj.P, np.eye(2))
    v = np.array([1.0, 0.5])
    tau = np.array([0.2, 0.0])
    gamma = pd.constraints.bias(q, v)
    assert abs(gamma[0]) > 0.1  # the removed row has a non-zero bias: l v2 (2 v1 + v2)
    res = pd.forward_dynamics_result(q, v, tau)
    assert res.success and np.all(np.isfinite(res.a)) and res.rank == 0
    # P = I, C = 0: the open-chain dynamics (ABA), to round-off
    data = model.create_data()
    np.testing.assert_allclose(res.a, pin.aba(model.pin_model, data, q, v, tau), rtol=1e-12)
    np.testing.assert_allclose(res.residual, abs(gamma[0]), rtol=1e-9)  # reported, not hidden
    np.testing.assert_array_equal(res.f_c, 0.0)


# -- the kernels: projector and constrained mass matrix (Theorem 2) ------------------------------
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 8), data=st.data())
def test_projector_and_theorem_2(seed, n, data):
    rng = np.random.default_rng(seed)
    r = data.draw(st.integers(1, n - 1), label="rank")
    m = data.draw(st.integers(r, n + 2), label="rows")
    A = rng.normal(size=(m, r)) @ rng.normal(size=(r, n))  # rank r < m rows: redundant
    L = rng.normal(size=(n, n))
    M = L @ L.T + 0.1 * np.eye(n)
    proj = null_space_projector(A)
    P = proj.P
    assert proj.rank == r
    # projector identities to round-off (entries of order one)
    np.testing.assert_allclose(P @ P, P, atol=1e-12)
    np.testing.assert_allclose(P, P.T, atol=1e-14)
    np.testing.assert_allclose(A @ P, 0.0, atol=1e-11 * np.abs(A).max())
    for variant in VARIANTS[:2]:
        Mc = constrained_mass_matrix(M, P, variant)
        # positive definite: the symmetric part is PD (for eq. 24 it equals M)
        assert np.linalg.eigvalsh(0.5 * (Mc + Mc.T))[0] > 0
    np.testing.assert_allclose(0.5 * (constrained_mass_matrix(M, P)
                                      + constrained_mass_matrix(M, P).T),
                               M, atol=1e-12 * np.abs(M).max())
    # all variants give the minimum-norm KKT accelerations for a consistent bias
    gamma = A @ rng.normal(size=n)
    f = rng.normal(size=n)
    K = np.block([[M, A.T], [A, np.zeros((m, m))]])
    a_kkt = np.linalg.lstsq(K, np.concatenate([f, -gamma]), rcond=None)[0][:n]
    for variant in VARIANTS:
        a, _ = projected_acceleration(M, f, A, gamma, ProjectionSettings(variant=variant))
        # cond(M) up to ~1e3 and cond(A restricted) up to ~1e3 for these random draws
        np.testing.assert_allclose(a, a_kkt, atol=1e-7 * scale(a_kkt))


def test_projector_threshold():
    A = np.array([[1.0, 0.0], [0.0, 1e-11]])
    assert null_space_projector(A).rank == 1  # 1e-11 < rank_atol = 1e-9: removed (eq. 70)
    assert null_space_projector(A, rank_atol=0.0, rank_rtol=0.0).rank == 2
    assert null_space_projector(np.zeros((0, 3))).rank == 0


# -- inverse dynamics, passive joints, controllability --------------------------------------------
def test_five_bar_inverse_dynamics(models, rng):
    model = models["five_bar"]
    pd = ProjectedDynamics(model)
    q, v, tau0 = assembled(model, rng, GUESS["five_bar"])
    a = pd.forward_dynamics_result(q, v, tau0).a  # a consistent motion
    res = pd.inverse_dynamics_result(q, v, a)
    assert res.success, res.message
    s = scale(res.tau)
    # zero passive torques to round-off
    np.testing.assert_allclose(res.tau[model.passive], 0.0, atol=1e-12 * s)
    assert res.passive_residual < 1e-12 * s and res.residual < 1e-9 * scale(a)
    # forward dynamics with it reproduces the commanded acceleration
    np.testing.assert_allclose(pd.forward_dynamics_result(q, v, res.tau).a, a,
                               rtol=0, atol=RTOL * scale(a))
    # admissible torques: tau + A^T mu with zero passive rows; for the five-bar (2 passive rows,
    # A of rank 2) mu = 0 is the only one, so the minimum norm is also the unique torque
    A = pd.constraints.jacobian(q)
    At_p = A.T[model.passive]
    assert np.linalg.matrix_rank(At_p) == 2
    # tau_par = P (M a + h) is the minimum-norm torque for the same motion without passive joints
    all_act = pd.inverse_dynamics_result(q, v, a, actuated=np.ones(4, bool))
    assert np.linalg.norm(all_act.tau) <= np.linalg.norm(res.tau)
    for _ in range(5):
        alt = all_act.tau + A.T @ rng.normal(size=2)
        assert np.linalg.norm(alt) >= np.linalg.norm(all_act.tau)


def test_minimum_norm_with_redundant_actuation(models, rng):
    """Three actuated joints: a one-parameter family of admissible torques; eq. 62 is its
    minimum."""
    model = models["five_bar"]
    pd = ProjectedDynamics(model)
    q, v, tau0 = assembled(model, rng, GUESS["five_bar"])
    a = pd.forward_dynamics_result(q, v, tau0).a
    act = ["left_motor", "right_motor", "right_elbow"]
    res = pd.inverse_dynamics_result(q, v, a, actuated=act)
    assert res.success, res.message
    assert abs(res.tau[model.joint_index("left_elbow")]) < 1e-12 * scale(res.tau)
    # oracle: tau = tau_any + A^T mu over mu with the passive row zero, minimum norm by lstsq
    A = pd.constraints.jacobian(q)
    tau_any = pd.inverse_dynamics_result(q, v, a, actuated=np.ones(4, bool)).tau
    i = model.joint_index("left_elbow")
    mu0 = np.linalg.lstsq(A.T[[i]], -tau_any[[i]], rcond=None)[0]
    n = np.linalg.svd(A.T[[i]])[2][1:].T[:, 0]  # direction of mu keeping the passive row zero
    B = A.T @ n
    t = -(B @ (tau_any + A.T @ mu0)) / (B @ B)  # minimize ||tau_any + A^T (mu0 + t n)||
    best = tau_any + A.T @ (mu0 + t * n)
    np.testing.assert_allclose(res.tau, best, atol=1e-10 * scale(best))  # two least-squares solves
    np.testing.assert_allclose(pd.forward_dynamics_result(q, v, res.tau).a, a,
                               atol=RTOL * scale(a))


def test_controllability(models, rng):
    model = models["five_bar"]
    pd = ProjectedDynamics(model)
    q, v, _ = assembled(model, rng, GUESS["five_bar"])
    ok = pd.controllability(q)
    assert ok.success and ok.rank == ok.required_rank == 2 and "controllable" in ok.message
    bad = pd.controllability(q, actuated=["left_motor"])
    assert not bad.success and bad.rank == 2 and bad.required_rank == 3
    assert "not controllable" in bad.message and "right_motor" in bad.message
    assert "actuate 1 more joint" in bad.message
    res = pd.inverse_dynamics_result(q, v, np.zeros(4), actuated=["left_motor"])
    assert not res.success and "not controllable" in res.message


def test_inverse_dynamics_inconsistent_motion(models, rng):
    model = models["five_bar"]
    pd = ProjectedDynamics(model)
    q, v, _ = assembled(model, rng, GUESS["five_bar"])
    res = pd.inverse_dynamics_result(q, v, np.ones(4))
    assert not res.success and "violates A a + gamma = 0" in res.message


def test_constraint_force_allocation(models, rng):
    """Fully actuated five-bar: tau = tau_par + (I-P)(M a + h) - A^T lam_d gives f_c = A^T
    lam_d."""
    model = models["five_bar"]
    pd = ProjectedDynamics(model)
    q, v, tau0 = assembled(model, rng, GUESS["five_bar"])
    a = pd.forward_dynamics_result(q, v, tau0).a
    lam_d = np.array([2.0, -1.0])
    f_cd, lam = pd.allocate_constraint_force(q, lam_d)
    A = pd.constraints.jacobian(q)
    np.testing.assert_allclose(f_cd, A.T @ lam_d, atol=1e-15)
    np.testing.assert_allclose(lam, lam_d, rtol=1e-10)  # full row rank: realizable exactly
    res = pd.inverse_dynamics_result(q, v, a, actuated=np.ones(4, bool), lam_d=lam_d)
    fwd = pd.forward_dynamics_result(q, v, res.tau)
    np.testing.assert_allclose(fwd.a, a, atol=RTOL * scale(a))
    np.testing.assert_allclose(fwd.f_c, f_cd, atol=1e-9 * scale(f_cd))  # M times a round-off
    np.testing.assert_allclose(fwd.lam, lam_d, atol=1e-8)
    with pytest.raises(InputError, match="every coordinate actuated"):
        pd.inverse_dynamics_result(q, v, a, lam_d=lam_d)

    # redundant rows: the null(A^T) part of lam_d produces no force
    fb = models["four_bar"]
    pf = ProjectedDynamics(fb)
    qf = pf.project_position(np.array(GUESS["four_bar"])).q
    lam_d = np.array([1.0, 2.0, 3.0, 4.0, 5.0])  # z and tilt rows of A are zero
    f_cd, lam = pf.allocate_constraint_force(qf, lam_d)
    np.testing.assert_allclose(lam[2:], 0.0, atol=1e-12)
    np.testing.assert_allclose(pf.constraints.jacobian(qf).T @ lam, f_cd, atol=1e-12)


def test_springs_are_applied_forces(tmp_path, rng):
    model = write_model(tmp_path, "five_bar_springs", share_dir() / "urdf" / "five_bar.urdf",
                        [{"name": "ee", "type": "planar_revolute", "frame_a": "left_tip",
                          "frame_b": "right_tip"}],
                        passive={"left_elbow": {"stiffness": 2.0, "damping": 0.1, "rest": -1.0},
                                 "right_elbow": {"stiffness": 1.0, "damping": 0.2, "rest": 1.0}},
                        gravity=(0.0, 0.0, -9.81))
    plain = load_model("five_bar")
    q, v, tau = assembled(model, rng, GUESS["five_bar"])
    tau_s = -model.stiffness * (q - model.q_rest) - model.damping * v
    a = ProjectedDynamics(model).acceleration(q, v, tau)
    a_ref = ProjectedDynamics(plain).acceleration(q, v, tau + tau_s)
    np.testing.assert_allclose(a, a_ref, rtol=1e-13, atol=1e-13)  # identical arithmetic
    np.testing.assert_allclose(KKTDynamics(model).forward_dynamics_result(q, v, tau).a, a,
                               atol=RTOL * scale(a))
    idr = ProjectedDynamics(model).inverse_dynamics_result(q, v, a)
    assert idr.success
    np.testing.assert_allclose(ProjectedDynamics(model).acceleration(q, v, idr.tau), a,
                               atol=RTOL * scale(a))


# -- manifold projection --------------------------------------------------------------------------
def test_newton_projection_converges_quadratically(models):
    model = models["five_bar"]
    pd = ProjectedDynamics(model)
    q = np.array(GUESS["five_bar"], float)
    errs = []
    for k in range(1, 5):
        errs.append(pd.project_position(q, tol=1e-300, max_iter=k).residual)
    # quadratic: each residual is at most C * previous^2 until round-off
    assert errs[1] < 10 * errs[0] ** 2 and errs[2] < 10 * errs[1] ** 2 + 1e-15
    res = pd.project_position(q, max_iter=1)
    assert not res.success and res.iterations == 1 and "no convergence" in res.message
    nothing = ProjectedDynamics(models["arm7"]).project_position(models["arm7"].neutral())
    assert nothing.success and nothing.iterations == 0


def test_velocity_projection(models, rng):
    model = models["four_bar"]
    pd = ProjectedDynamics(model)
    q = pd.project_position(np.array(GUESS["four_bar"])).q
    v = pd.project_velocity(q, rng.normal(size=3))
    np.testing.assert_allclose(pd.constraints.jacobian(q) @ v, 0.0, atol=1e-14)  # round-off
    np.testing.assert_allclose(pd.project_velocity(q, v), v, atol=1e-15)  # idempotent


def test_settings_validation():
    with pytest.raises(InputError, match="variant"):
        ProjectionSettings(variant="eq99")
    with pytest.raises(InputError, match="alpha"):
        ProjectionSettings(alpha=0.0)


def test_kkt_baumgarte(models, rng):
    """Off the manifold, the stabilized KKT solve enforces A a + gamma + 2 alpha A v + beta^2 phi =
    0."""
    model = models["five_bar"]
    c = Constraints(model)
    q = np.array(GUESS["five_bar"], float)  # not assembled: phi != 0
    v, tau = rng.normal(size=4), rng.normal(size=4)
    alpha, beta = 5.0, 10.0  # 1/s
    res = KKTDynamics(model, settings=KKTSettings(baumgarte_alpha=alpha, baumgarte_beta=beta)
                      ).forward_dynamics_result(q, v, tau)
    A, gamma = c.jacobian_and_bias(q, v)
    lhs = A @ res.a + gamma + 2 * alpha * A @ v + beta ** 2 * c.residual(q)
    np.testing.assert_allclose(lhs, 0.0, atol=1e-9 * scale(res.a))  # round-off of the solve
    assert res.residual < 1e-9 * scale(res.a)
