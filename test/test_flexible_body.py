"""Planar floating-frame flexible body (Seifried 2014, Sect. 2.2).

Oracles: Lagrange's equations (the Coriolis/centrifugal vector must equal the one implied by
the mass matrix), the potential energy, published rotating-beam frequencies, energy
conservation, and the closed-form (elliptic) rigid pendulum.
"""

import numpy as np
import pytest
from conftest import frequencies_of, linearised_elastic
from scipy.integrate import solve_ivp
from scipy.special import ellipj, ellipk

from multibody_dynamics.errors import DimensionError, InputError
from multibody_dynamics.flexible.beam import BeamConfig, BeamSection, assemble_beam
from multibody_dynamics.flexible.body import FlexibleBody2D, FlexibleBodyConfig
from multibody_dynamics.flexible.modal import clamped_modes
from multibody_dynamics.flexible.sid import modal_data_from_beam

ALU = BeamSection.rectangle(0.01, 0.01, E=70e9, rho=2700.0, nu=0.33)
# a fictitious section with a soft axial direction (E/rho low, I/A large) so that two bending
# modes and an axial static mode all lie below ~110 rad/s: every coupling integral (Ct, Cr1, I1)
# is non-zero and explicit integration stays cheap
SOFT = BeamSection(E=1e7, rho=2700.0, A=1e-4, I=5e-7)


def soft_data(alpha=0.0, beta=0.0):
    model = assemble_beam(BeamConfig(1.0, 8, SOFT, rayleigh_alpha=alpha, rayleigh_beta=beta))
    return modal_data_from_beam(clamped_modes(model, 2, static_dofs=[model.dof(-1, "u")]))


@pytest.fixture(scope="module")
def data():
    return soft_data()


OPTIONS = [dict(), dict(geometric_stiffening=True), dict(second_order_inertia=False)]


@pytest.mark.parametrize("options", OPTIONS)
def test_coriolis_vector_follows_from_mass_matrix(data, options, rng):
    """k(q, v) = M'(q) v - 1/2 d(v^T M v)/dq for a Lagrangian system with q' = v: checks every
    gyroscopic term (2.117-2.122 with the errata and the corrected O_e sign) against (2.110)."""
    body = FlexibleBody2D(data, FlexibleBodyConfig(**options))
    for _ in range(3):
        q = np.r_[rng.uniform(-1, 1, 3), 0.05 * rng.standard_normal(3)]
        v = rng.standard_normal(6)
        eps = 1e-6
        mdot = np.zeros((6, 6))
        grad = np.zeros(6)
        for j in range(6):
            e = np.zeros(6)
            e[j] = eps
            mp, mm = body.mass_matrix(q + e), body.mass_matrix(q - e)
            mdot += v[j] * (mp - mm) / (2 * eps)
            grad[j] = 0.5 * v @ (mp - mm) @ v / (2 * eps)
        expected = mdot @ v - grad
        # central differences of a polynomial/trigonometric M: truncation ~eps^2 |M'''| and
        # rounding ~1e-16 |M| / eps ~ 1e-10 relative to the largest term
        np.testing.assert_allclose(body.nonlinear_effects(q, v), expected,
                                   atol=1e-7 * np.abs(expected).max())
        m = body.mass_matrix(q)
        assert np.allclose(m, m.T)
        if not options:
            # the exact M is a Gram matrix (2.110), positive definite for any q_e; the
            # first-order and stiffened inertias lose that at centimetre deformations of this
            # soft body (a limit of those approximations)
            assert np.linalg.eigvalsh(m).min() > 0


def test_gravity_is_minus_potential_gradient(data, rng):
    body = FlexibleBody2D(data, FlexibleBodyConfig(gravity=(1.0, -9.81)))
    q = np.r_[rng.uniform(-1, 1, 3), 0.05 * rng.standard_normal(3)]
    grad = np.zeros(6)
    for j in range(6):
        e = np.zeros(6)
        e[j] = 1e-6
        grad[j] = (body.potential_energy(q + e) - body.potential_energy(q - e)) / 2e-6
    elastic = body.elastic_forces(q, np.zeros(6))
    # central difference of a smooth potential: ~1e-9 relative
    np.testing.assert_allclose(body.gravity_forces(q) - elastic, -grad,
                               atol=1e-7 * np.abs(grad).max())


def test_input_validation(data):
    body = FlexibleBody2D(data)
    with pytest.raises(DimensionError, match=r"\(6,\)"):
        body.mass_matrix(np.zeros(5))
    with pytest.raises(InputError, match="gravity"):
        FlexibleBodyConfig(gravity=(0.0, 1.0, 2.0))
    with pytest.raises(InputError, match="^data must be a ModalData, got dict$"):
        FlexibleBody2D({})
    with pytest.raises(InputError, match="^config must be a FlexibleBodyConfig, got str$"):
        FlexibleBody2D(data, "free")
    assert FlexibleBody2D(data).config == FlexibleBodyConfig()  # the default options


@pytest.mark.parametrize("method", ["first_moment", "inertia", "Cr", "centrifugal"])
def test_wrong_shape_q_e_of_planar_modal_data(data, method):
    # a shape error is a DimensionError, as for the spatial data (test_flexible_3d), stating
    # the expected shape; still a ValueError, the class InputError also derives from
    with pytest.raises(DimensionError, match=r"^q_e must have shape \(3,\), got \(2,\)$"):
        getattr(data, method)(np.zeros(2))
    assert issubclass(DimensionError, ValueError)


# ---------------------------------------------------------------- rotating beam


def rotating_frequencies(body, omega):
    """Elastic frequencies in the frame spinning at constant omega about z (hub at the origin,
    theta'' = 0 imposed): linearise M_e q'' = -(k_e + K_e q + D_e q') by central differences."""
    return frequencies_of(*linearised_elastic(body, (0.0, 0.0, omega)), body.data.Me)


@pytest.fixture(scope="module")
def alu_data():
    # slender EB cantilever, 5 bending modes (all below the first axial mode)
    return modal_data_from_beam(clamped_modes(assemble_beam(BeamConfig(1.0, 30, ALU)), 5))


# first flapwise frequency of a uniform rotating cantilever, zero hub radius, in units of
# sqrt(EI / (rho A l^4)) versus gamma = Omega / sqrt(EI / (rho A l^4)); Wright, Smith, Thompson
# and Jaffe (1982) / Hodges and Rutkowski (1981); reproduced here by a 60-element FE with
# the consistent geometric stiffness to all printed digits
PUBLISHED_FLAP = {0.0: 3.5160, 1.0: 3.6816, 2.0: 4.1373, 5.0: 6.4495}


@pytest.mark.parametrize("gamma", sorted(PUBLISHED_FLAP))
def test_rotating_beam_matches_published_in_plane_frequency(alu_data, gamma):
    """Bending in the plane of rotation (axis normal to the bending plane): the in-plane
    (chordwise) frequency obeys omega^2 = omega_flap^2 - Omega^2 for a beam without axial
    coupling (the in-plane equation is the flapwise one plus the centrifugal -rho A Omega^2 w).
    Needs the corrected O_e sign *and* the geometric stiffening; net Southwell slope
    K1 - 1 = 0.193 > 0: it still stiffens, by much less than out of plane."""
    unit = np.sqrt(ALU.E * ALU.I / (ALU.rho * ALU.A))
    body = FlexibleBody2D(alu_data, FlexibleBodyConfig(geometric_stiffening=True))
    w = rotating_frequencies(body, gamma * unit)[0] / unit
    expected = np.sqrt(PUBLISHED_FLAP[gamma] ** 2 - gamma**2)
    # 4 printed digits (up to 1.4e-5 relative) plus the 5-mode Ritz truncation, an upper
    # bound growing with gamma: measured 4e-6 .. 1.4e-5 for gamma <= 2, 9e-5 at gamma = 5
    np.testing.assert_allclose(w, expected, rtol=2e-4)
    # Southwell with the Rayleigh coefficient K1 = 1.1933 is an upper bound (non-rotating mode
    # as trial function) and exact as gamma -> 0; the frequency rises with gamma
    southwell = np.sqrt(3.51602**2 + (1.1933 - 1.0) * gamma**2)
    assert 3.51601 * (1 - 1e-5) <= w <= southwell * (1 + 1e-5)


def test_linear_ffr_softens_by_omega_squared(alu_data):
    """Without geometric stiffening the first-order FFR model softens: omega^2 = omega0^2 -
    Omega^2 exactly for bending modes (h_e = -Omega^2 Me q). The printed O_e sign would give
    + Omega^2 instead, i.e. a spurious stiffening with the wrong coefficient (1 vs 0.193)."""
    unit = np.sqrt(ALU.E * ALU.I / (ALU.rho * ALU.A))
    body = FlexibleBody2D(alu_data)
    omega = 2.0 * unit
    w0 = np.sqrt(np.diag(alu_data.Ke))
    # exact relation, only the finite-difference linearisation rounding remains
    np.testing.assert_allclose(rotating_frequencies(body, omega), np.sqrt(w0**2 - omega**2),
                               rtol=1e-7)


# ---------------------------------------------------------------- pendulum


def pendulum_rhs(body):
    """Body pinned at its frame origin: keep theta and q_e (rows/columns 2: of M)."""

    def f(t, x):
        n = x.size // 2
        q, v = np.r_[0.0, 0.0, x[:n]], np.r_[0.0, 0.0, x[n:]]
        m, rhs = body._terms(q, v)
        return np.r_[x[n:], np.linalg.solve(m[2:, 2:], rhs[2:])]

    return f


def pendulum_energy(body, x):
    n = x.size // 2
    return body.energy(np.r_[0.0, 0.0, x[:n]], np.r_[0.0, 0.0, x[n:]])


@pytest.mark.parametrize("stiffening", [False, True])
def test_pendulum_conserves_energy(data, stiffening):
    body = FlexibleBody2D(data, FlexibleBodyConfig(geometric_stiffening=stiffening))
    x0 = np.r_[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # released horizontal, undeformed
    sol = solve_ivp(pendulum_rhs(body), (0.0, 0.6), x0, method="DOP853", rtol=1e-10,
                    atol=1e-12, dense_output=False)
    assert sol.success and sol.y[0].min() < -1.0  # it did swing down
    e = np.array([pendulum_energy(body, x) for x in sol.y.T])
    scale = data.mass * 9.81 * 0.5  # m g l/2: the energy exchanged
    # integrator tolerance rtol 1e-10 over ~500 steps: measured 1e-14 relative drift
    np.testing.assert_allclose(e - e[0], 0.0, atol=1e-8 * scale)


def test_pendulum_with_rayleigh_damping_loses_energy():
    body = FlexibleBody2D(soft_data(alpha=2.0, beta=1e-2))
    x0 = np.zeros(8)
    sol = solve_ivp(pendulum_rhs(body), (0.0, 1.0), x0, method="DOP853", rtol=1e-8,
                    atol=1e-10, t_eval=np.linspace(0, 1, 41))
    e = np.array([pendulum_energy(body, x) for x in sol.y.T])
    de = np.diff(e)
    # dissipation D_e is PSD: energy never increases beyond integrator noise (1e-8 scale)
    assert np.all(de < 1e-8 * data_scale(body))
    # and it visibly decays: measured 1.0e-3 m g l/2 lost in 1 s (the vibration excited by
    # the release is small compared with the swing energy)
    assert e[-1] < e[0] - 5e-4 * data_scale(body)


def data_scale(body):
    return body.data.mass * 9.81 * 0.5


def test_stiff_pendulum_matches_rigid_closed_form():
    """A very stiff link swings like the rigid compound pendulum; the closed form is
    theta(t) = -pi/2 + 2 arcsin(k sn(K - w t, k)), k = sin(theta0/2), w^2 = m g s / I_O."""
    stiff = BeamSection(E=1e12, rho=2700.0, A=1e-4, I=1e-7)
    # critical-ish stiffness damping (zeta = beta w1 / 2 ~ 1 at w1 ~ 2e3 rad/s) removes the
    # release transient so the stiff integrator can take pendulum-sized steps
    model = assemble_beam(BeamConfig(1.0, 4, stiff, rayleigh_beta=1e-3))
    data = modal_data_from_beam(clamped_modes(model, 1))
    body = FlexibleBody2D(data)
    amp = 1.0  # [rad] from the downward vertical
    x0 = np.r_[-np.pi / 2 + amp, 0.0, 0.0, 0.0]
    t = np.linspace(0.0, 2.0, 21)
    sol = solve_ivp(pendulum_rhs(body), (0.0, 2.0), x0, method="Radau", rtol=1e-9,
                    atol=1e-11, t_eval=t)
    m, length = data.mass, 1.0
    w = np.sqrt(m * 9.81 * length / 2 / (m * length**2 / 3))
    k = np.sin(amp / 2)
    sn, *_ = ellipj(ellipk(k**2) - w * t, k**2)
    rigid = -np.pi / 2 + 2 * np.arcsin(k * sn)
    # the elastic sag under gravity shifts the swing by ~ (w / w1)^2 ~ 4e-6 rad (first mode
    # ~2e3 rad/s against a 3.8 rad/s pendulum); measured 2.2e-7 rad, 1e-5 rad allowed
    np.testing.assert_allclose(sol.y[0], rigid, atol=1e-5)
