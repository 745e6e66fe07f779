"""Beam finite elements, modal reduction and modal data (SID) files.

Oracles: Euler-Bernoulli closed forms (cantilever frequency equation, tip deflections),
Przemieniecki's closed-form Timoshenko element, Southwell's rotating-beam coefficient, and the
assembled FE matrices as an independent check of the Gauss-integrated mass integrals.
"""

import numpy as np
import pytest
import scipy.linalg
from scipy.optimize import brentq

from multibody_dynamics.errors import InputError, ModelError, MultibodyError
from multibody_dynamics.flexible.beam import (
    BeamConfig,
    BeamSection,
    assemble_beam,
    element_matrices,
    static_deflection,
)
from multibody_dynamics.flexible.modal import clamped_modes
from multibody_dynamics.flexible.sid import (
    KEYS,
    ModalData,
    load_modal_data,
    modal_data_from_beam,
    save_modal_data,
)

# aluminium, 1 m, 10 mm square (Seifried's flexible cart manipulator link)
ALU = BeamSection.rectangle(0.01, 0.01, E=70e9, rho=2700.0, nu=0.33)


def beta_l(i):
    """i-th root of the cantilever frequency equation cos(b) cosh(b) + 1 = 0."""
    return brentq(lambda b: np.cos(b) * np.cosh(b) + 1.0, (i - 0.5) * np.pi - 0.5,
                  (i - 0.5) * np.pi + 0.5)


def frequencies(config, k=3):
    M, K, _ = assemble_beam(config).reduced()
    return np.sqrt(scipy.linalg.eigh(K, M, eigvals_only=True, subset_by_index=[0, k - 1]))


def omega_eb(section, length, bl):
    return bl**2 * np.sqrt(section.E * section.I / (section.rho * section.A * length**4))


def test_frequency_roots_match_published_values():
    # the published 4-digit values (Seifried brief; any vibration handbook)
    np.testing.assert_allclose([beta_l(i) for i in (1, 2, 3)], [1.8751, 4.6941, 7.8548],
                               atol=5e-5)  # half a unit of the last printed digit


def test_cantilever_frequencies_converge_to_closed_form():
    exact = np.array([omega_eb(ALU, 1.0, beta_l(i)) for i in (1, 2, 3)])
    errors = []
    for n in (4, 8, 16, 32):
        w = frequencies(BeamConfig(1.0, n, ALU))
        errors.append(np.abs(w / exact - 1.0))
        assert np.all(w >= exact * (1 - 1e-12))  # consistent mass: Rayleigh-Ritz upper bound
    errors = np.array(errors)
    # Hermite cubics with consistent mass converge as h^4 in frequency: error ratio ~16 per
    # halving; require > 10 while the error is far above eigensolver rounding (n <= 16; mode 1
    # reaches ~1e-8 at n = 32, where the ratio drops to 9)
    assert np.all(errors[0:2] / errors[1:3] > 10.0)
    # measured 2.5e-6 for mode 3 at n = 32; 1e-5 leaves margin for other BLAS/roots
    np.testing.assert_allclose(errors[-1], 0.0, atol=1e-5)


def test_timoshenko_approaches_euler_bernoulli_for_slender_beams():
    ratios, estimates = {}, {}
    bl2 = np.array([beta_l(i) for i in (1, 2, 3)]) ** 2
    for height in (0.01, 0.2):  # slenderness l/h = 100 and 5
        sec = BeamSection.rectangle(0.01, height, E=70e9, rho=2700.0, nu=0.33)
        eb = frequencies(BeamConfig(1.0, 32, sec))
        ti = frequencies(BeamConfig(1.0, 32, sec, theory="timoshenko"))
        # shear flexibility and rotary inertia only lower bending frequencies; the stubby beam's
        # third mode is axial, equal in both theories up to eigensolver rounding (4e-7 Hz seen)
        assert np.all(ti < eb * (1 + 1e-9))
        ratios[height] = 1.0 - ti / eb
        # first-order Timoshenko correction of a slender beam:
        # d omega / omega ~ 1/2 (beta l)^2 (r/l)^2 (1 + E / (kappa G)), r^2 = I / A
        estimates[height] = 0.5 * bl2 * sec.I / sec.A * (1 + sec.E / (sec.shear_factor * sec.G))
    # l/h = 100: measured 8e-5 / 5.6e-4 / 1.3e-3 vs estimate 6e-5 / 4e-4 / 1.1e-3; the estimate
    # is first order (the clamp adds a little), so allow a factor 2 either way
    assert np.all(ratios[0.01] > 0.5 * estimates[0.01])
    assert np.all(ratios[0.01] < 2.0 * estimates[0.01])
    # stubby l/h = 5: first-order theory no longer applies, the drop is percents (measured
    # 3.0 % for mode 1, 17 % for mode 2; the third mode of this beam is the axial one)
    assert ratios[0.2][0] > 0.02 and ratios[0.2][1] > 0.1


@pytest.mark.parametrize("n", [1, 3, 8])
@pytest.mark.parametrize("theory", ["euler-bernoulli", "timoshenko"])
def test_static_tip_deflection(n, theory):
    sec = BeamSection.rectangle(0.02, 0.05, E=210e9, rho=7850.0, nu=0.3)
    length, P = 0.4, 1000.0
    model = assemble_beam(BeamConfig(length, n, sec, theory=theory))
    f = np.zeros(model.ndof)
    f[model.dof(-1, "w")] = P
    u = static_deflection(model, f)
    expected = P * length**3 / (3 * sec.E * sec.I)
    if theory == "timoshenko":
        expected += P * length / (sec.shear_factor * sec.G * sec.A)
    # both elements solve the homogeneous beam equations exactly: nodal values are exact,
    # only rounding remains
    np.testing.assert_allclose(u[model.dof(-1, "w")], expected, rtol=1e-10)


def test_pinned_pinned_midspan_deflection():
    length, P = 2.0, 50.0
    model = assemble_beam(BeamConfig(length, 4, ALU, left="pinned", right="pinned"))
    f = np.zeros(model.ndof)
    f[model.dof(2, "w")] = P
    u = static_deflection(model, f)
    # exact nodal values again (load at a node): rounding only
    np.testing.assert_allclose(u[model.dof(2, "w")], P * length**3 / (48 * ALU.E * ALU.I),
                               rtol=1e-10)


def test_free_beam_static_solve_refuses():
    model = assemble_beam(BeamConfig(1.0, 2, ALU, left="free"))
    with pytest.raises(ModelError, match="rigid-body"):
        static_deflection(model, np.zeros(model.ndof))


def test_timoshenko_element_equals_closed_form():
    sec = BeamSection.rectangle(0.02, 0.05, E=210e9, rho=7850.0, nu=0.3)
    cfg = BeamConfig(0.1, 1, sec, theory="timoshenko")
    _, ke = element_matrices(cfg)
    h, p = 0.1, cfg.shear_parameter()
    closed = sec.E * sec.I / ((1 + p) * h**3) * np.array([
        [12, 6 * h, -12, 6 * h],
        [6 * h, (4 + p) * h**2, -6 * h, (2 - p) * h**2],
        [-12, -6 * h, 12, -6 * h],
        [6 * h, (2 - p) * h**2, -6 * h, (4 + p) * h**2],
    ])  # Przemieniecki (1968)
    bend = [1, 2, 4, 5]
    # same matrix by a different route (quadrature of interpolants vs closed form): rounding
    np.testing.assert_allclose(ke[np.ix_(bend, bend)], closed, rtol=1e-10,
                               atol=1e-12 * np.abs(closed).max())


def test_rayleigh_damping_is_modal():
    cfg = BeamConfig(1.0, 10, ALU, rayleigh_alpha=0.3, rayleigh_beta=2e-4)
    basis = clamped_modes(assemble_beam(cfg), 3)
    expected = 0.3 * np.eye(3) + 2e-4 * np.diag(basis.frequencies**2)
    # D = a M + b K projected on M-orthonormal modes; tolerance relative to the largest entry
    np.testing.assert_allclose(basis.De, expected, atol=1e-10 * expected.max())


@pytest.mark.parametrize("kwargs, match", [
    (dict(E=0.0), "E"), (dict(rho=-1.0), "rho"), (dict(A=np.nan), "A"), (dict(I=0.0), "I"),
    (dict(nu=0.5), "nu"), (dict(shear_factor=1.5), "shear_factor"),
])
def test_section_validation(kwargs, match):
    base = dict(E=1e9, rho=1000.0, A=1e-4, I=1e-9)
    with pytest.raises(InputError, match=match) as err:
        BeamSection(**{**base, **kwargs})
    assert isinstance(err.value, MultibodyError) and isinstance(err.value, ValueError)


@pytest.mark.parametrize("kwargs, match", [
    (dict(length=0.0), "length"), (dict(n_elements=0), "n_elements"),
    (dict(n_elements=2.5), "n_elements"), (dict(theory="bernoulli"), "theory"),
    (dict(left="welded"), "left"), (dict(rayleigh_beta=-1.0), "rayleigh_beta"),
])
def test_config_validation(kwargs, match):
    with pytest.raises(InputError, match=match):
        BeamConfig(**{**dict(length=1.0, n_elements=2, section=ALU), **kwargs})


# ---------------------------------------------------------------- modal reduction and SID


@pytest.fixture(scope="module", params=["euler-bernoulli", "timoshenko"])
def beam_data(request):
    model = assemble_beam(BeamConfig(1.0, 20, ALU, theory=request.param,
                                     rayleigh_alpha=0.1, rayleigh_beta=1e-4))
    basis = clamped_modes(model, 4)
    return model, basis, modal_data_from_beam(basis)


def test_modes_are_mass_normalised(beam_data):
    _, basis, data = beam_data
    # eigh returns M-orthonormal vectors; data.Me is integrated independently (Gauss over
    # elements), so it checks the integration against the assembled M: rounding only
    np.testing.assert_allclose(data.Me, np.eye(4), atol=1e-12)
    np.testing.assert_allclose(data.Ke, np.diag(basis.frequencies**2),
                               atol=1e-9 * basis.frequencies[-1] ** 2)


def test_rigid_mass_integrals(beam_data):
    model, basis, data = beam_data
    s, length = ALU, 1.0
    rho_i = s.rho * s.I if model.config.rotary_inertia else 0.0
    m = s.rho * s.A * length
    # exact integrals of polynomials by 5-point Gauss: rounding only
    np.testing.assert_allclose(data.mass, m, rtol=1e-13)
    np.testing.assert_allclose(data.mc0, [m * length / 2, 0.0], rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(data.I0, m * length**2 / 3 + rho_i * length, rtol=1e-13)


def test_coupling_integrals_against_fe_matrices(beam_data):
    """Ct, Cr0 and I1 are M-weighted projections of rigid fields the elements represent
    exactly: translation, rotation about the origin (w = x, theta = 1) and the axial field
    u = x. Computed from the assembled M, they are an independent oracle."""
    model, basis, data = beam_data
    x = model.nodes
    fields = np.zeros((model.ndof, 4))
    fields[0::3, 0] = 1.0  # translation along x
    fields[1::3, 1] = 1.0  # translation along y
    fields[1::3, 2], fields[2::3, 2] = x, 1.0  # unit rotation about z
    fields[0::3, 3] = x  # u = x
    proj = basis.Phi.T @ model.M @ fields
    scale = np.abs(proj).max()
    # same integrals by two routes: rounding relative to the largest entry
    np.testing.assert_allclose(data.Ct, proj[:, :2], atol=1e-12 * scale)
    np.testing.assert_allclose(data.Cr0, proj[:, 2], atol=1e-12 * scale)
    np.testing.assert_allclose(data.I1, 2 * proj[:, 3], atol=1e-12 * scale)
    np.testing.assert_allclose(data.Cr1, -data.Cr1.T, atol=1e-15)


def test_southwell_coefficient(beam_data):
    _, _, data = beam_data
    # Komega[0, 0] of the mass-normalised first mode is the Rayleigh-quotient Southwell
    # coefficient K1 of a cantilever with zero hub radius, published 1.193 (1.1933 with more
    # digits, e.g. Hodges and Rutkowski 1981); 20 elements and shear (Timoshenko, l/h = 100)
    # change the fourth digit at most
    np.testing.assert_allclose(data.Komega[0, 0], 1.1933, rtol=5e-4)


def test_craig_bampton_static_mode_reproduces_tip_load():
    model = assemble_beam(BeamConfig(0.5, 12, ALU))
    tip = model.dof(-1, "w")
    basis = clamped_modes(model, 2, static_dofs=[tip])
    assert basis.kinds == ("normal", "normal", "static")
    np.testing.assert_allclose(basis.Me, np.eye(3), atol=1e-12)  # re-orthonormalised
    f = np.zeros(model.ndof)
    f[tip] = 3.0
    q = np.linalg.solve(basis.Ke, basis.Phi.T @ f)
    # the constraint mode spans the exact static deflection under a tip load: rounding only
    np.testing.assert_allclose(basis.Phi @ q, static_deflection(model, f), rtol=1e-9,
                               atol=1e-12)


def test_modal_input_errors():
    model = assemble_beam(BeamConfig(1.0, 3, ALU))
    with pytest.raises(InputError, match="n_modes"):
        clamped_modes(model, 100)
    with pytest.raises(InputError, match="static_dofs"):
        clamped_modes(model, 1, static_dofs=[0])  # a clamped dof


# ---------------------------------------------------------------- files


def test_save_load_round_trip(beam_data, tmp_path):
    _, _, data = beam_data
    path = tmp_path / "link.npz"
    save_modal_data(path, data)
    loaded = load_modal_data(path)
    for key in KEYS[1:]:
        np.testing.assert_array_equal(np.asarray(getattr(loaded, key)),
                                      np.asarray(getattr(data, key)))  # lossless .npz


def _corrupt(arrays, key):
    a = dict(arrays)
    nq = a["Me"].shape[0]
    if key == "missing":
        del a["Ke"]
        return a, "Ke"
    if key == "version":
        a["format_version"] = np.asarray(99)
        return a, "format_version"
    if key == "shape":
        a["Ct"] = np.zeros((nq, 3))
        return a, "Ct"
    if key == "nonsymmetric":
        a["Me"] = a["Me"] + np.triu(np.ones((nq, nq)), 1) * 1e-3
        return a, "Me"
    if key == "indefinite":
        a["Me"] = a["Me"] - 2.0 * np.eye(nq)
        return a, "Me"
    if key == "negative_stiffness":
        a["Ke"] = a["Ke"].copy()
        a["Ke"][0, 0] = -1.0
        return a, "Ke"
    if key == "nan":
        a["Cr0"] = a["Cr0"] * np.nan
        return a, "Cr0"
    raise AssertionError(key)


@pytest.mark.parametrize("case", ["missing", "version", "shape", "nonsymmetric", "indefinite",
                                  "negative_stiffness", "nan"])
def test_bad_files_name_file_and_key(beam_data, tmp_path, case):
    _, _, data = beam_data
    arrays, key = _corrupt(data.arrays(), case)
    path = tmp_path / f"bad_{case}.npz"
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    with pytest.raises(ModelError) as err:
        load_modal_data(path)
    assert str(path) in str(err.value) and repr(key) in str(err.value)


def test_unreadable_files(tmp_path):
    with pytest.raises(ModelError, match="not found"):
        load_modal_data(tmp_path / "nope.npz")
    bad = tmp_path / "garbage.npz"
    bad.write_text("not a zip")
    with pytest.raises(ModelError, match="garbage.npz"):
        load_modal_data(bad)


def test_modal_data_constructor_validates(beam_data):
    _, _, data = beam_data
    arrays = data.arrays()
    del arrays["format_version"]
    arrays["mass"] = -1.0
    with pytest.raises(ModelError, match="'mass'"):
        ModalData(**arrays)
