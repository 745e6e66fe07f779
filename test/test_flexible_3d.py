"""Spatial beam elements, spatial modal data and the spatial floating-frame body.

Oracles: Euler-Bernoulli, torsion and axial closed forms (cantilever frequencies and static
tip deflections), the planar element and the planar body of the same section (the 3-D model
restricted to the x-y plane must be the planar one), pinocchio's rigid box inertia, energy and
momentum conservation of a free spinning body, and published rotating-beam frequencies.
"""

import numpy as np
import pinocchio as pin
import pytest
import scipy.linalg
from conftest import frequencies_of, linearised_elastic
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from multibody_dynamics.errors import DimensionError, InputError, ModelError
from multibody_dynamics.flexible.beam import (
    BeamConfig,
    BeamSection,
    assemble_beam,
    element_matrices,
)
from multibody_dynamics.flexible.beam3d import (
    BeamConfig3D,
    BeamSection3D,
    assemble_beam_3d,
    clamped_modes_3d,
    element_matrices_3d,
    mode_components,
    static_deflection_3d,
)
from multibody_dynamics.flexible.body import FlexibleBody2D, FlexibleBodyConfig
from multibody_dynamics.flexible.body3d import (
    FlexibleBody3D,
    FlexibleBody3DConfig,
    ModalData3D,
    load_modal_data_3d,
    modal_data_3d_from_beam,
    quaternion_to_matrix,
    save_modal_data_3d,
)
from multibody_dynamics.flexible.modal import clamped_modes
from multibody_dynamics.flexible.sid import modal_data_from_beam, save_modal_data

# aluminium bar 20 mm (z) x 10 mm (y): E Iy = 4 E Iz, so the two bending planes are distinct
ALU3 = BeamSection3D.rectangle(0.02, 0.01, E=70e9, rho=2700.0, nu=0.33)
# a fictitious soft section (low E, large I/A): bending, torsion and an axial static mode all
# below ~100 rad/s, every coupling integral non-zero, explicit integration cheap
SOFT3 = BeamSection3D(E=1e7, rho=2700.0, A=1e-4, Iy=3e-7, Iz=5e-7, J=4e-7)
BENDING_XY, BENDING_XZ, TORSION, AXIAL = 2, 3, 1, 0  # columns of mode_components
IN_PLANE_FIXED = ("w", "rx", "ry")  # held components that leave the x-y plane problem


def planar_section(s3: BeamSection3D, plane: str = "xy") -> BeamSection:
    """The planar section of one bending plane of ``s3``."""
    if plane == "xy":
        return BeamSection(E=s3.E, rho=s3.rho, A=s3.A, I=s3.Iz, nu=s3.nu,
                           shear_factor=s3.shear_factor_y)
    return BeamSection(E=s3.E, rho=s3.rho, A=s3.A, I=s3.Iy, nu=s3.nu,
                       shear_factor=s3.shear_factor_z)


def beta_l(i):
    """i-th root of the cantilever frequency equation cos(b) cosh(b) + 1 = 0."""
    return brentq(lambda b: np.cos(b) * np.cosh(b) + 1.0, (i - 0.5) * np.pi - 0.5,
                  (i - 0.5) * np.pi + 0.5)


def grouped_frequencies(config, n_modes):
    """Clamped-free frequencies [rad/s] of a 3-D beam, grouped by mode kind."""
    basis = clamped_modes_3d(assemble_beam_3d(config), n_modes)
    kind = np.argmax(mode_components(basis), axis=1)
    return {k: basis.frequencies[kind == k] for k in range(4)}


# ---------------------------------------------------------------- beam elements


@pytest.mark.parametrize("theory", ["euler-bernoulli", "timoshenko"])
@pytest.mark.parametrize("rotary", [False, True])
def test_element_restricted_to_a_plane_is_the_planar_element(theory, rotary):
    m3, k3 = element_matrices_3d(BeamConfig3D(0.7, 3, ALU3, theory, rotary_inertia=rotary))
    xy = [0, 1, 5, 6, 7, 11]  # (u, v, rz) of both nodes
    m2, k2 = element_matrices(BeamConfig(0.7, 3, planar_section(ALU3), theory,
                                         rotary_inertia=rotary))
    # the same shape functions and quadrature: equal to rounding
    np.testing.assert_allclose(m3[np.ix_(xy, xy)], m2, rtol=0, atol=1e-14 * np.abs(m2).max())
    np.testing.assert_allclose(k3[np.ix_(xy, xy)], k2, rtol=0, atol=1e-14 * np.abs(k2).max())
    # the x-z plane is the planar element in (u, w, psi = -ry)
    xz, flip = [0, 2, 4, 6, 8, 10], np.diag([1.0, 1.0, -1.0, 1.0, 1.0, -1.0])
    m2, k2 = element_matrices(BeamConfig(0.7, 3, planar_section(ALU3, "xz"), theory,
                                         rotary_inertia=rotary))
    np.testing.assert_allclose(flip @ m3[np.ix_(xz, xz)] @ flip, m2, rtol=0,
                               atol=1e-14 * np.abs(m2).max())
    np.testing.assert_allclose(flip @ k3[np.ix_(xz, xz)] @ flip, k2, rtol=0,
                               atol=1e-14 * np.abs(k2).max())
    # no coupling between the two planes, torsion and the axial dofs (doubly symmetric)
    groups = [[0, 6], [3, 9], [1, 5, 7, 11], [2, 4, 8, 10]]
    for a in groups:
        for b in groups:
            if a is not b:
                assert np.abs(m3[np.ix_(a, b)]).max() == 0.0
                assert np.abs(k3[np.ix_(a, b)]).max() == 0.0


def test_element_is_symmetric_semidefinite_with_six_rigid_modes():
    m, k = element_matrices_3d(BeamConfig3D(0.5, 1, ALU3, "timoshenko"))
    lam_k = scipy.linalg.eigvalsh(k)
    # six rigid-body modes (3 translations, 3 small rotations): zero strain energy
    assert np.sum(np.abs(lam_k) < 1e-9 * lam_k.max()) == 6
    assert scipy.linalg.eigvalsh(m).min() > 0.0
    # an infinitesimal rigid rotation about z: v = x rz, rz const -> no strain
    rigid = np.zeros(12)
    rigid[[5, 11]] = 1.0
    rigid[7] = 0.5
    np.testing.assert_allclose(k @ rigid, 0.0, atol=1e-9 * np.abs(k).max())
    rigid = np.zeros(12)  # about y: w = -x ry
    rigid[[4, 10]] = 1.0
    rigid[8] = -0.5
    np.testing.assert_allclose(k @ rigid, 0.0, atol=1e-9 * np.abs(k).max())


def test_cantilever_bending_frequencies_in_both_planes():
    freqs = grouped_frequencies(BeamConfig3D(1.0, 40, ALU3), 10)
    roots = np.array([beta_l(i) for i in (1, 2, 3)])
    # the published 4-digit roots (half a unit of the last digit)
    np.testing.assert_allclose(roots, [1.8751, 4.6941, 7.8548], atol=5e-5)
    for group, inertia in ((BENDING_XY, ALU3.Iz), (BENDING_XZ, ALU3.Iy)):
        exact = roots**2 * np.sqrt(ALU3.E * inertia / (ALU3.rho * ALU3.A))
        err = np.abs(freqs[group][:3] / exact - 1.0)
        # Hermite cubics, 40 elements: measured 3.4e-9, 1.3e-7, 1.0e-6 in both planes
        assert np.all(err < [1e-8, 3e-7, 2e-6]), err
    # EI_y = 4 EI_z: the x-z frequencies are exactly twice the x-y ones
    # (eigen-solver rounding of the coupled 240-dof problem: measured 2.6e-11)
    np.testing.assert_allclose(freqs[BENDING_XZ][:3], 2.0 * freqs[BENDING_XY][:3], rtol=1e-9)


@pytest.mark.parametrize("kind", ["torsion", "axial"])
def test_torsional_and_axial_frequencies_converge_quadratically(kind):
    s = ALU3
    speed = np.sqrt(s.G * s.J / (s.rho * s.Ip)) if kind == "torsion" else np.sqrt(s.E / s.rho)
    exact = (2 * np.arange(1, 4) - 1) * np.pi / 2 * speed / 1.0
    group = TORSION if kind == "torsion" else AXIAL
    fixed = ("u", "v", "w", "ry", "rz") if kind == "torsion" else ("v", "w", "rx", "ry", "rz")
    errors = []
    for n in (10, 20, 40):
        basis = clamped_modes_3d(assemble_beam_3d(BeamConfig3D(1.0, n, s)), 3,
                                 fixed_components=fixed)
        assert np.all(np.argmax(mode_components(basis), axis=1) == group)
        errors.append(basis.frequencies / exact - 1.0)
    errors = np.array(errors)
    # linear elements with consistent mass over-estimate by (k_n h)^2 / 24 to leading order
    h = 1.0 / np.array([10, 20, 40])
    lead = (exact / speed)[None, :] ** 2 * h[:, None] ** 2 / 24.0
    np.testing.assert_allclose(errors, lead, rtol=0.02)  # higher-order terms: measured <1.3 %
    assert np.all(errors > 0.0)
    np.testing.assert_allclose(errors[:-1] / errors[1:], 4.0, rtol=0.01)  # O(h^2)
    assert errors[-1, 0] < 1e-4  # 40 elements: first mode to 6.4e-5


def test_bending_frequencies_converge_fourth_order():
    exact = beta_l(2) ** 2 * np.sqrt(ALU3.E * ALU3.Iy / (ALU3.rho * ALU3.A))
    err = [abs(grouped_frequencies(BeamConfig3D(1.0, n, ALU3), 6)[BENDING_XZ][1] / exact - 1)
           for n in (4, 8, 16)]
    ratios = np.array(err[:-1]) / np.array(err[1:])
    assert np.all(ratios > 12.0), ratios  # ~16 for O(h^4); measured 14.6, 15.7


@pytest.mark.parametrize("theory", ["euler-bernoulli", "timoshenko"])
def test_static_tip_loads_match_closed_forms(theory):
    s, length = ALU3, 0.8
    model = assemble_beam_3d(BeamConfig3D(length, 3, s, theory))
    shear = theory == "timoshenko"
    f = np.zeros(model.ndof)
    P, T, N = 3.0, 0.7, 1000.0
    f[model.dof(-1, "v")] = P
    f[model.dof(-1, "w")] = -2.0 * P
    f[model.dof(-1, "rx")] = T
    f[model.dof(-1, "u")] = N
    x = static_deflection_3d(model, f)
    tip = x[model.dof(-1, "u"):]
    v_tip = P * length**3 / (3 * s.E * s.Iz) + shear * P * length / (s.shear_factor_y * s.G * s.A)
    w_tip = -2 * P * length**3 / (3 * s.E * s.Iy) - shear * 2 * P * length / (
        s.shear_factor_z * s.G * s.A)
    expected = [N * length / (s.E * s.A), v_tip, w_tip, T * length / (s.G * s.J),
                2 * P * length**2 / (2 * s.E * s.Iy),  # ry = -w' > 0 for a downward load
                P * length**2 / (2 * s.E * s.Iz)]
    # the elements are exact for end loads (any n): rounding only
    np.testing.assert_allclose(tip, expected, rtol=1e-10)


def test_timoshenko_modes_in_each_plane_equal_the_planar_beam():
    cfg = BeamConfig3D(1.0, 12, SOFT3, "timoshenko")
    for fixed, plane, sign in ((IN_PLANE_FIXED, "xy", 1.0), (("v", "rx", "rz"), "xz", -1.0)):
        basis3 = clamped_modes_3d(assemble_beam_3d(cfg), 4, fixed_components=fixed)
        basis2 = clamped_modes(assemble_beam(BeamConfig(1.0, 12, planar_section(SOFT3, plane),
                                                        "timoshenko")), 4)
        np.testing.assert_allclose(basis3.frequencies, basis2.frequencies, rtol=1e-12)
        comps = [0, 1, 5] if plane == "xy" else [0, 2, 4]
        phi3 = basis3.Phi.reshape(-1, 6, 4)[:, comps] * np.array([1.0, 1.0, sign])[:, None]
        # same eigenvectors; the sign rule (largest entry positive) may differ for x-z
        phi3 *= np.sign(np.sum(phi3.reshape(-1, 4) * basis2.Phi, axis=0))
        np.testing.assert_allclose(phi3.reshape(-1, 4), basis2.Phi, atol=1e-9)


def test_rayleigh_damping_and_modal_matrices():
    model = assemble_beam_3d(BeamConfig3D(1.0, 6, SOFT3, rayleigh_alpha=0.3,
                                          rayleigh_beta=2e-3))
    np.testing.assert_allclose(model.D, 0.3 * model.M + 2e-3 * model.K, rtol=1e-15)
    basis = clamped_modes_3d(model, 5)
    np.testing.assert_allclose(basis.Me, np.eye(5), atol=1e-12)
    np.testing.assert_allclose(basis.Ke, np.diag(basis.frequencies**2),
                               atol=1e-9 * basis.frequencies.max() ** 2)
    np.testing.assert_allclose(basis.De, 0.3 * np.eye(5) + 2e-3 * basis.Ke,
                               atol=1e-9 * np.abs(basis.De).max())


def test_circle_twists_like_a_rod():
    s = BeamSection3D.circle(0.02, E=200e9, rho=7800.0)
    assert s.J == pytest.approx(s.Ip, rel=1e-15) and s.Iy == s.Iz
    basis = clamped_modes_3d(assemble_beam_3d(BeamConfig3D(2.0, 40, s)), 1,
                             fixed_components=("u", "v", "w", "ry", "rz"))
    # J = Ip: speed sqrt(G/rho); linear elements, (pi h / 4)^2 / 24 = 1.6e-4 over-estimate
    np.testing.assert_allclose(basis.frequencies[0], np.pi / 4 * np.sqrt(s.G / s.rho),
                               rtol=2e-4)


def test_beam_input_errors():
    with pytest.raises(InputError, match="Iy"):
        BeamSection3D(E=1.0, rho=1.0, A=1.0, Iy=-1.0, Iz=1.0, J=1.0)
    with pytest.raises(InputError, match="shear_factor_z"):
        BeamSection3D(E=1.0, rho=1.0, A=1.0, Iy=1.0, Iz=1.0, J=1.0, shear_factor_z=1.5)
    with pytest.raises(InputError, match="nu"):
        BeamSection3D(E=1.0, rho=1.0, A=1.0, Iy=1.0, Iz=1.0, J=1.0, nu=0.5)
    with pytest.raises(InputError, match="BeamSection3D"):
        BeamConfig3D(1.0, 2, planar_section(ALU3))
    with pytest.raises(InputError, match="left"):
        BeamConfig3D(1.0, 2, ALU3, left="hinged")
    with pytest.raises(InputError, match="n_elements"):
        BeamConfig3D(1.0, 0, ALU3)
    with pytest.raises(InputError, match="rayleigh_beta"):
        BeamConfig3D(1.0, 2, ALU3, rayleigh_beta=-1.0)
    model = assemble_beam_3d(BeamConfig3D(1.0, 2, ALU3, left="free"))
    with pytest.raises(InputError, match="component"):
        model.dof(0, "theta")
    with pytest.raises(InputError, match="node"):
        model.dof(5, "u")
    with pytest.raises(InputError, match="unknown components"):
        model.restricted(["q"])
    with pytest.raises(DimensionError, match=r"\(18,\)"):
        static_deflection_3d(model, np.zeros(3))
    with pytest.raises(ModelError, match="rigid-body"):
        static_deflection_3d(model, np.zeros(18))
    with pytest.raises(InputError, match="BeamModel3D"):
        clamped_modes_3d(assemble_beam(BeamConfig(1.0, 2, planar_section(ALU3))), 1)


# ---------------------------------------------------------------- modal data and body


def soft_bases(theory="timoshenko", rotary=None, n=8, alpha=0.0, beta=0.0):
    """The same soft beam as a 3-D model (x-y plane modes) and as a planar model, both with
    two bending modes and an axial static tip mode."""
    cfg3 = BeamConfig3D(1.0, n, SOFT3, theory, rotary, rayleigh_alpha=alpha,
                        rayleigh_beta=beta)
    b3 = assemble_beam_3d(cfg3)
    basis3 = clamped_modes_3d(b3, 2, static_dofs=[b3.dof(-1, "u")],
                              fixed_components=IN_PLANE_FIXED)
    b2 = assemble_beam(BeamConfig(1.0, n, planar_section(SOFT3), theory, rotary,
                                  rayleigh_alpha=alpha, rayleigh_beta=beta))
    basis2 = clamped_modes(b2, 2, static_dofs=[b2.dof(-1, "u")])
    return basis3, basis2


def planar_state(rng, ne):
    """Random planar state: (q3, v3 inertial) and (q2, v2)."""
    x, y, th = rng.uniform(-1, 1, 3)
    qe, dx, dy, dth = 0.05 * rng.normal(size=ne), *rng.normal(size=3)
    dqe = rng.normal(size=ne)
    quat = [0.0, 0.0, np.sin(th / 2), np.cos(th / 2)]
    q3 = np.r_[x, y, 0.0, quat, qe]
    v3 = np.r_[dx, dy, 0.0, 0.0, 0.0, dth, dqe]
    return q3, v3, np.r_[x, y, th, qe], np.r_[dx, dy, dth, dqe]


PLANAR_CASES = [("timoshenko", None), ("euler-bernoulli", True)]
BODY_OPTIONS = [dict(), dict(geometric_stiffening=True), dict(second_order_inertia=False)]


@pytest.mark.parametrize("theory, rotary", PLANAR_CASES)
def test_modal_data_in_plane_equals_planar_sid(theory, rotary):
    basis3, basis2 = soft_bases(theory, rotary, alpha=0.5, beta=1e-3)
    np.testing.assert_allclose(basis3.frequencies, basis2.frequencies, rtol=1e-12)
    d3, d2 = modal_data_3d_from_beam(basis3), modal_data_from_beam(basis2)
    # the same modes up to sign: align the 3-D ones with the planar ones
    phi3 = basis3.Phi.reshape(-1, 6, 3)[:, [0, 1, 5]].reshape(-1, 3)
    sign = np.sign(np.sum(phi3 * basis2.Phi, axis=0))
    np.testing.assert_allclose(phi3 * sign, basis2.Phi, atol=1e-10)
    assert np.all(sign == 1.0)  # the shared sign rule picks the same signs

    def close(a, b):  # Gauss sums of the same polynomials in another order: rounding only
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * max(np.abs(b).max(), 1e-300))

    close(d3.mass, d2.mass)
    close(d3.mc0, np.r_[d2.mc0, 0.0])
    close(d3.Ct, np.column_stack([d2.Ct, np.zeros(3)]))
    close(d3.J0[2, 2], d2.I0)
    close(d3.J1[:, 2, 2], d2.I1)
    close(d3.Cr0[:, 2], d2.Cr0)
    close(d3.Cr1[:, :, 2], d2.Cr1)
    close(np.einsum("kjab->kj", d3.Oe1[:, :, 2:, 2:]), -d2.Me)  # o_e = -(I1/2 + Me q)
    close(d3.Oe0[:, 2, 2], -0.5 * d2.I1)
    for key in ("Me", "Ke", "De", "Komega"):
        close(getattr(d3, key), getattr(d2, key))
    # the 3-D integral Me equals Phi^T M Phi of the consistent mass matrix
    close(d3.Me, basis3.Me)


@pytest.mark.parametrize("options", BODY_OPTIONS)
@pytest.mark.parametrize("theory, rotary", PLANAR_CASES)
def test_body_in_planar_motion_equals_planar_body(theory, rotary, options, rng):
    basis3, basis2 = soft_bases(theory, rotary, alpha=0.5, beta=1e-3)
    d3, d2 = modal_data_3d_from_beam(basis3), modal_data_from_beam(basis2)
    body2 = FlexibleBody2D(d2, FlexibleBodyConfig(gravity=(0.3, -9.81), **options))
    g3 = (0.3, -9.81, 0.0)
    inertial = FlexibleBody3D(d3, FlexibleBody3DConfig(g3, velocity_frame="inertial",
                                                       **options))
    body = FlexibleBody3D(d3, FlexibleBody3DConfig(g3, **options))
    ix = [0, 1, 5, 6, 7, 8]  # x, y, rz and the elastic coordinates
    # relative to the largest entry: rounding of the same sums in another order
    tol = 1e-12

    def close(a, b, tol=tol):
        np.testing.assert_allclose(a, b, rtol=0, atol=tol * np.abs(b).max())

    # accelerations: the solve with the ill-conditioned M (its rotational Schur complement is
    # ~1e-4 of m l^2) amplifies the rounding; measured up to 2e-12
    tol_a = 1e-10

    out = [2, 3, 4]  # z, rx, ry: must stay unloaded and unaccelerated in planar motion
    for _ in range(5):
        q3, v3, q2, v2 = planar_state(rng, 3)
        tau2 = rng.normal(size=6)
        tau3 = np.zeros(9)
        tau3[ix] = tau2
        M3 = inertial.mass_matrix(q3)

        close(M3[np.ix_(ix, ix)], body2.mass_matrix(q2))
        close(inertial.nonlinear_effects(q3, v3)[ix], body2.nonlinear_effects(q2, v2))
        close(inertial.gravity_forces(q3)[ix], body2.gravity_forces(q2))
        close(inertial.elastic_forces(q3, v3)[ix], body2.elastic_forces(q2, v2))
        a2 = body2.forward_dynamics(q2, v2, tau2)
        a3 = inertial.forward_dynamics(q3, v3, tau3)
        close(a3[ix], a2, tol_a)
        np.testing.assert_allclose(a3[out], 0.0, atol=tol_a * np.abs(a2).max())
        assert inertial.energy(q3, v3) == pytest.approx(body2.energy(q2, v2), rel=1e-12)
        # body-frame velocities: v_b = S^T v_I, inertial acceleration S (v_b' + w x v_b)
        S = quaternion_to_matrix(q3[3:7])
        vb = v3.copy()
        vb[:3] = S.T @ v3[:3]
        # generalised forces on v_b are S^T times those on v_I (same power)
        ab = body.forward_dynamics(q3, vb, np.r_[S.T @ tau3[:3], tau3[3:]])
        a_inertial = S @ (ab[:3] + np.cross(vb[3:6], vb[:3]))
        close(np.r_[a_inertial[:2], ab[5:]], a2, tol_a)
        np.testing.assert_allclose([a_inertial[2], ab[3], ab[4]], 0.0,
                                   atol=tol_a * np.abs(a2).max())
        assert body.energy(q3, vb) == pytest.approx(body2.energy(q2, v2), rel=1e-12)


def spatial_data(alpha=0.0, beta=0.0, theory="timoshenko", n=6):
    """A soft 3-D body: the 5 lowest modes (bending in both planes, torsion) + axial static."""
    model = assemble_beam_3d(BeamConfig3D(1.0, n, SOFT3, theory, rayleigh_alpha=alpha,
                                          rayleigh_beta=beta))
    return modal_data_3d_from_beam(clamped_modes_3d(model, 5, static_dofs=[model.dof(-1, "u")]))


@pytest.fixture(scope="module")
def data3():
    return spatial_data()


def test_spatial_basis_has_all_mode_kinds(data3):
    model = assemble_beam_3d(BeamConfig3D(1.0, 6, SOFT3, "timoshenko"))
    basis = clamped_modes_3d(model, 5, static_dofs=[model.dof(-1, "u")])
    kinds = np.argmax(mode_components(basis), axis=1)
    assert set(kinds) == {AXIAL, TORSION, BENDING_XY, BENDING_XZ}
    # every Taylor coefficient is exercised: none is identically zero
    for key in ("Ct", "J1", "J2", "Cr0", "Cr1", "Gr0", "Gr1", "Oe0", "Oe1", "Komega"):
        assert np.abs(getattr(data3, key)).max() > 0.0, key


def test_gyroscopic_taylor_data_satisfy_the_exact_identity(data3, rng):
    """G_r omega = I^' omega + omega x (C_r^T q') (eq. 2.119 against d/dt of 2.112), and
    G_e, O_e against their defining integrals evaluated with the basic data."""
    d = data3
    for _ in range(3):
        q, dq, w = 0.05 * rng.normal(size=d.nq), rng.normal(size=d.nq), rng.normal(size=3)
        eps = 1e-6
        idot = (d.inertia(q + eps * dq) - d.inertia(q - eps * dq)) / (2 * eps)
        lhs = d.Gr(q, dq) @ w
        rhs = idot @ w + np.cross(w, d.Cr(q).T @ dq)
        np.testing.assert_allclose(lhs, rhs, atol=1e-8 * np.abs(lhs).max())  # FD of a quadratic
        # omega^T O_e^k omega = -d/dq_k of the centrifugal potential -1/2 omega^T I^ omega
        grad = np.array([(w @ d.inertia(q + eps * e) @ w - w @ d.inertia(q - eps * e) @ w)
                         / (2 * eps) for e in np.eye(d.nq)])
        np.testing.assert_allclose(np.einsum("a,kab,b->k", w, d.Oe(q), w), -0.5 * grad,
                                   atol=1e-8 * np.abs(grad).max())


@pytest.mark.parametrize("options", BODY_OPTIONS)
def test_body_terms_equal_the_modal_data_formulas(data3, options, rng):
    """The body's flattened fast path against eqs. (2.110), (2.117)-(2.122) written with the
    ModalData3D methods (body velocities: plus Mbar[:, :3] (omega x v_O))."""
    body = FlexibleBody3D(data3, FlexibleBody3DConfig(**options))
    d, second = data3, options.get("second_order_inertia", True)
    stiff = options.get("geometric_stiffening", False)
    q, v = random_state(body, rng)
    qe, dqe, w, vo = q[7:], v[6:], v[3:6], v[:3]
    D = np.diag([0.0, 1.0, 1.0])
    inertia = d.inertia(qe, second) - stiff * (qe @ d.Komega @ qe) * D
    gw = d.Gr(qe, dqe) @ w if second else (
        np.tensordot(dqe, d.J1, axes=1) @ w + np.cross(w, d.Cr(qe).T @ dqe))
    gw = gw - stiff * 2.0 * (qe @ d.Komega @ dqe) * (D @ w)
    mc = d.first_moment(qe)
    M = body.mass_matrix(q)
    np.testing.assert_allclose(M[3:6, 3:6], inertia, rtol=1e-14, atol=1e-16)
    np.testing.assert_allclose(M[6:, 3:6], d.Cr(qe), rtol=1e-14, atol=1e-16)
    h = np.r_[np.cross(w, np.cross(w, mc)) + 2 * np.cross(w, d.Ct.T @ dqe),
              np.cross(w, inertia @ w) + gw,
              np.einsum("a,kab,b->k", w, d.Oe(qe, second), w) + d.Ge(dqe) @ w
              + stiff * (w @ D @ w) * (d.Komega @ qe)]
    h += M[:, :3] @ np.cross(w, vo)
    k = body.nonlinear_effects(q, v)
    np.testing.assert_allclose(k, h, rtol=0, atol=1e-13 * np.abs(h).max())  # rounding


def test_rigid_mass_matrix_at_zero_deformation_matches_a_box(data3):
    """At q_e = 0 the 6x6 block is the spatial inertia of the undeformed bar: a box
    l x sqrt(12 Iz/A)-equivalent section, from pinocchio (an independent integral)."""
    for theory in ("euler-bernoulli", "timoshenko"):
        s = ALU3
        model = assemble_beam_3d(BeamConfig3D(0.9, 10, s, theory))
        data = modal_data_3d_from_beam(clamped_modes_3d(model, 3))
        body = FlexibleBody3D(data)
        M = body.mass_matrix(body.neutral())
        m = s.rho * s.A * 0.9
        box = pin.Inertia.FromBox(m, 0.9, 0.01, 0.02)  # lengths along x, y (height), z (width)
        spatial = pin.Inertia(m, np.array([0.45, 0.0, 0.0]), box.inertia).matrix()
        # Gauss sums of polynomials: rounding only
        np.testing.assert_allclose(M[:6, :6], spatial, rtol=0, atol=1e-13 * m)
        # closed forms: J_xx = rho l Ip, J_yy = rho (A l^3/3 + Iy l)
        np.testing.assert_allclose(np.diag(data.J0), s.rho * np.array(
            [s.Ip * 0.9, s.A * 0.9**3 / 3 + s.Iy * 0.9, s.A * 0.9**3 / 3 + s.Iz * 0.9]),
            rtol=1e-13)
    # inertial velocities at a rotated pose: T^T M T with T = blockdiag(S^T, I, I)
    inertial = FlexibleBody3D(data3, FlexibleBody3DConfig(velocity_frame="inertial"))
    q = inertial.neutral()
    q[3:7] = [0.1, -0.3, 0.2, 0.9]
    S = quaternion_to_matrix(q[3:7])
    T = scipy.linalg.block_diag(S.T, np.eye(3 + data3.nq))
    np.testing.assert_allclose(inertial.mass_matrix(q),
                               T.T @ FlexibleBody3D(data3).mass_matrix(q) @ T, atol=1e-14)


def test_quaternion_matches_pinocchio(rng):
    for _ in range(5):
        quat = rng.normal(size=4)
        quat /= np.linalg.norm(quat)
        ref = pin.Quaternion(quat[3], quat[0], quat[1], quat[2]).toRotationMatrix()
        np.testing.assert_allclose(quaternion_to_matrix(quat), ref, atol=1e-15)


def random_state(body, rng, scale=1.0):
    q = body.neutral()
    q[:3] = rng.uniform(-1, 1, 3)
    quat = rng.normal(size=4)
    q[3:7] = quat / np.linalg.norm(quat)
    q[7:] = 0.02 * rng.normal(size=body.ne)
    v = scale * rng.normal(size=body.nv)
    return q, v


def test_gravity_is_minus_potential_gradient(data3, rng):
    body = FlexibleBody3D(data3, FlexibleBody3DConfig(gravity=(1.0, -2.0, -9.81)))
    q, _ = random_state(body, rng)
    g = body.gravity_forces(q)
    eps = 1e-6
    grad = np.zeros(body.nv)
    S = quaternion_to_matrix(q[3:7])
    for j in range(body.nv):
        def moved(t, j=j):
            qq = q.copy()
            if j < 3:  # body-frame translation
                qq[:3] += t * S[:, j]
            elif j < 6:  # body-frame rotation: quaternion times exp(t e_j / 2)
                e = np.zeros(3)
                e[j - 3] = 1.0
                dq = pin.Quaternion(pin.exp3(t * e))
                qq[3:7] = (pin.Quaternion(q[6], *q[3:6]) * dq).coeffs()
            else:
                qq[j + 1] += t
            # gravity only: the elastic potential is not part of g
            return body.potential_energy(qq) - 0.5 * qq[7:] @ body.data.Ke @ qq[7:]
        grad[j] = (moved(eps) - moved(-eps)) / (2 * eps)
    # central differences of a smooth function, step 1e-6: about 1e-9 relative
    np.testing.assert_allclose(g, -grad, atol=1e-7 * np.abs(g).max())


def spin_rhs(body):
    def f(t, x):
        q, v = x[:body.nq], x[body.nq:]
        return np.r_[body.configuration_derivative(q, v), body.forward_dynamics(q, v)]
    return f


# (options, velocity frame, scale of the initial q_e): the first-order and the stiffened inertia
# are O(q_e^2) approximations of the kinetic energy; on this soft body their mass matrix stops
# being positive definite at a few mm of bending (the rotational inertia left after the modes
# take their share is only ~1e-4 kg m^2), so they start from smaller deformations
SPIN_CASES = [(dict(), "body", 1e-3), (dict(), "inertial", 1e-3),
              (dict(geometric_stiffening=True), "body", 1e-4),
              (dict(second_order_inertia=False), "body", 1e-4)]


@pytest.mark.parametrize("options, frame, scale", SPIN_CASES)
@pytest.mark.slow
def test_free_spinning_body_conserves_energy_and_momentum(data3, options, frame, scale, rng):
    body = FlexibleBody3D(data3, FlexibleBody3DConfig(gravity=(0.0, 0.0, 0.0),
                                                      velocity_frame=frame, **options))
    q0, v0 = random_state(body, rng, 0.1)
    q0[7:] *= scale / 0.02
    v0[6:] *= scale / 1e-3
    v0[3:6] = [0.7, -1.1, 2.3]  # a tumbling spin, not about a principal axis
    assert np.linalg.eigvalsh(body.mass_matrix(q0)).min() > 0.0
    sol = solve_ivp(spin_rhs(body), (0.0, 1.0), np.r_[q0, v0], method="DOP853",
                    rtol=1e-10, atol=1e-12, t_eval=[0.25, 0.5, 1.0])
    assert sol.success, sol.message
    e0 = body.energy(q0, v0)
    lin0, ang0 = body.momentum(q0, v0)
    # the quaternion ODE keeps the norm up to the integration error; re-normalise
    assert abs(np.linalg.norm(sol.y[3:7, -1]) - 1.0) < 1e-10
    for x in sol.y.T:
        q, v = body.normalize(x[:body.nq]), x[body.nq:]
        lin, ang = body.momentum(q, v)
        # DOP853 at rtol 1e-10 over 1 s (~17 periods of the highest mode): measured drifts
        # 3e-12 .. 4e-11 relative (energy), 2e-12 .. 8e-12 (momenta)
        assert abs(body.energy(q, v) / e0 - 1.0) < 1e-9
        np.testing.assert_allclose(lin, lin0, atol=1e-9 * np.linalg.norm(lin0))
        np.testing.assert_allclose(ang, ang0, atol=1e-9 * np.linalg.norm(ang0))
    assert np.abs(sol.y[7:body.nq]).max() > 3 * scale  # it did deform (centrifugal loading)


def test_damped_spinning_body_loses_energy_keeps_momentum(rng):
    body = FlexibleBody3D(spatial_data(alpha=1.0, beta=1e-3),
                          FlexibleBody3DConfig(gravity=(0.0, 0.0, 0.0)))
    q0, v0 = random_state(body, rng, 0.3)
    v0[3:6] = [0.7, -1.1, 2.3]
    q0[7:] *= 0.05
    sol = solve_ivp(spin_rhs(body), (0.0, 0.5), np.r_[q0, v0], method="DOP853", rtol=1e-10,
                    atol=1e-12)
    q, v = body.normalize(sol.y[:body.nq, -1]), sol.y[body.nq:, -1]
    assert body.energy(q, v) < body.energy(q0, v0) * (1 - 1e-3)
    # internal damping forces cannot change the momentum (no external load)
    for a, b in zip(body.momentum(q, v), body.momentum(q0, v0)):
        np.testing.assert_allclose(a, b, atol=1e-8 * np.linalg.norm(b))


# ---------------------------------------------------------------- rotating cantilever


# first flapwise frequency of a uniform rotating cantilever, zero hub radius, in units of
# sqrt(EI / (rho A l^4)) versus gamma = Omega / sqrt(EI / (rho A l^4)); Wright, Smith, Thompson
# and Jaffe (1982) / Hodges and Rutkowski (1981) (as in test_flexible_body.py)
PUBLISHED_FLAP = {0.0: 3.5160, 1.0: 3.6816, 2.0: 4.1373, 5.0: 6.4495}


@pytest.fixture(scope="module")
def alu3_basis():
    # slender EB cantilever: 6 x-y, 5 x-z bending modes and the first torsion mode
    return clamped_modes_3d(assemble_beam_3d(BeamConfig3D(1.0, 30, ALU3)), 12)


@pytest.mark.parametrize("axis", ["z", "y"])
@pytest.mark.parametrize("gamma", sorted(PUBLISHED_FLAP))
def test_rotating_cantilever_matches_planar_body_and_published_flap(alu3_basis, axis, gamma):
    """Spin about an axis normal to the beam. Bending in the plane of rotation softens by
    Omega^2 (corrected O_e sign) and equals the planar body's result; bending out of the plane
    of rotation (flapwise) only stiffens geometrically and matches the published values."""
    kinds = np.argmax(mode_components(alu3_basis), axis=1)
    in_plane, flap = (BENDING_XY, BENDING_XZ) if axis == "z" else (BENDING_XZ, BENDING_XY)
    plane, flap_inertia = ("xy", ALU3.Iy) if axis == "z" else ("xz", ALU3.Iz)
    assert np.sum(kinds == flap) >= 5 and np.sum(kinds == in_plane) >= 5
    data = modal_data_3d_from_beam(alu3_basis)
    unit = np.sqrt(ALU3.E * flap_inertia / (ALU3.rho * ALU3.A))
    Omega = gamma * unit
    omega = np.array([0.0, 0.0, Omega]) if axis == "z" else np.array([0.0, Omega, 0.0])
    # the planar body of the in-plane section, spinning about its z axis
    basis2 = clamped_modes(assemble_beam(BeamConfig(1.0, 30, planar_section(ALU3, plane))),
                           int(np.sum(kinds == in_plane)))
    data2 = modal_data_from_beam(basis2)
    for stiffening in (False, True):
        body = FlexibleBody3D(data, FlexibleBody3DConfig(geometric_stiffening=stiffening))
        a_q, a_v = linearised_elastic(body, omega)
        groups = {k: np.flatnonzero(kinds == k) for k in (in_plane, flap, TORSION)}
        # the mode groups stay decoupled under the spin (doubly symmetric section, EB)
        for ka, ia in groups.items():
            for kb, ib in groups.items():
                if ka != kb:
                    assert np.abs(a_q[np.ix_(ia, ib)]).max() <= 1e-9 * np.abs(a_q).max()
                    assert np.abs(a_v[np.ix_(ia, ib)]).max() <= 1e-9 * max(np.abs(a_v).max(), 1)
        ii, fi = groups[in_plane], groups[flap]
        w_in = frequencies_of(a_q[np.ix_(ii, ii)], a_v[np.ix_(ii, ii)], data.Me[np.ix_(ii, ii)])
        w_flap = frequencies_of(a_q[np.ix_(fi, fi)], a_v[np.ix_(fi, fi)],
                                data.Me[np.ix_(fi, fi)])
        body2 = FlexibleBody2D(data2, FlexibleBodyConfig(geometric_stiffening=stiffening))
        a2_q, a2_v = linearised_elastic(body2, np.array([0.0, 0.0, Omega]))
        # the same model: finite-difference rounding only
        np.testing.assert_allclose(w_in, frequencies_of(a2_q, a2_v, data2.Me), rtol=1e-8)
        w0_in = alu3_basis.frequencies[ii]
        w0_flap = alu3_basis.frequencies[fi]
        if not stiffening:
            # linear FFR: in-plane omega^2 = omega_0^2 - Omega^2 exactly, flap unchanged
            # (no rotary inertia); the printed O_e sign would give + Omega^2 in plane
            ok = w0_in > Omega
            np.testing.assert_allclose(w_in[-ok.sum():], np.sqrt(w0_in[ok]**2 - Omega**2),
                                       rtol=1e-7)
            np.testing.assert_allclose(w_flap, w0_flap, rtol=1e-7)
        else:
            # 4 printed digits plus the 5-mode Ritz truncation (as for the planar body)
            np.testing.assert_allclose(w_flap[0] / unit, PUBLISHED_FLAP[gamma], rtol=2e-4)


# ---------------------------------------------------------------- inputs and files


def test_modal_data_file_round_trip(data3, tmp_path):
    path = tmp_path / "bar3d.npz"
    save_modal_data_3d(path, data3)
    back = load_modal_data_3d(path)
    for key, value in data3.arrays().items():
        np.testing.assert_array_equal(back.arrays()[key], value)


def test_body_input_errors(data3, tmp_path):
    arrays = data3.arrays()
    bad = {k: v for k, v in arrays.items() if k not in ("format_version", "spatial")}
    bad["J1"] = bad["J1"][:, :2]
    with pytest.raises(ModelError, match="'J1'.*expected shape"):
        ModalData3D(**bad)
    bad = {k: v for k, v in arrays.items() if k not in ("format_version", "spatial")}
    bad["J0"] = -bad["J0"]
    with pytest.raises(ModelError, match="'J0'.*positive definite"):
        ModalData3D(**bad)
    bad["J0"] = arrays["J0"]
    bad["Cr1"] = np.abs(bad["Cr1"]) + 1.0
    with pytest.raises(ModelError, match="'Cr1'.*skew"):
        ModalData3D(**bad)
    # a planar file is not a spatial one: the message names the missing key and the file
    planar = tmp_path / "planar.npz"
    basis2 = clamped_modes(assemble_beam(BeamConfig(1.0, 4, planar_section(SOFT3))), 2)
    save_modal_data(planar, modal_data_from_beam(basis2))
    with pytest.raises(ModelError, match="planar.npz: key 'spatial': missing"):
        load_modal_data_3d(planar)
    with pytest.raises(ModelError, match="not found"):
        load_modal_data_3d(tmp_path / "nothing.npz")
    with pytest.raises(InputError, match="ModalData3D"):
        FlexibleBody3D(modal_data_from_beam(basis2))
    with pytest.raises(InputError, match="ModalBasis of a BeamModel3D"):
        modal_data_3d_from_beam(basis2)
    with pytest.raises(InputError, match="gravity"):
        FlexibleBody3DConfig(gravity=(0.0, -9.81))
    with pytest.raises(InputError, match="velocity_frame"):
        FlexibleBody3DConfig(velocity_frame="world")
    body = FlexibleBody3D(data3)
    q, v = body.neutral(), np.zeros(body.nv)
    with pytest.raises(DimensionError, match=r"q must have shape \(13,\)"):
        body.mass_matrix(q[:-1])
    with pytest.raises(DimensionError, match=r"v must have shape \(12,\)"):
        body.forward_dynamics(q, v[:-1])
    with pytest.raises(DimensionError, match="tau"):
        body.forward_dynamics(q, v, np.zeros(3))
    q_bad = q.copy()
    q_bad[3:7] = 0.0
    with pytest.raises(InputError, match="quaternion"):
        body.gravity_forces(q_bad)
    with pytest.raises(InputError, match="node"):
        body.node_position(q, 99)
    with pytest.raises(DimensionError, match="q_e"):
        data3.inertia(np.zeros(2))
