"""Combined output y = q_r + Γ q_e of the serial flexible manipulator (Seifried 2014 Sect. 6.4).

Oracles: the book's Γ (6.38) with the two corrected readings (and the printed readings, which do
not reproduce it: the errata are documented here), the exact linearisation J_y^-1 dr/dq_e of
the chain's end point, the mass integrals of rigid end parts summed over point masses, and the
book's statement that the zero dynamics with this output is non-minimum phase.
"""

import numpy as np
import pytest

from multibody_dynamics.errors import ModelError
from multibody_dynamics.flexible.beam import BeamConfig, BeamSection, assemble_beam
from multibody_dynamics.flexible.loader import load_flexible_model
from multibody_dynamics.flexible.modal import clamped_modes
from multibody_dynamics.flexible.output import (
    RigidPart,
    arm_modal_data,
    chain_combined_output,
    combined_output_gamma,
)
from multibody_dynamics.flexible.sid import modal_data_from_beam
from multibody_dynamics.flexible.system import ChainBody, FlexibleChain, FlexibleChainConfig

# Seifried (2014) eq. (6.38)
BOOK_GAMMA = np.array([[25.779, 47.552, 0.0, 0.0], [13.500, 88.897, 32.316, 39.470]])
# Sect. 6.4 geometry [m]; steel
L1, LR11, LE1, LR12 = 0.351, 0.0635, 0.209, 0.0785
L2, LR21, LE2, LR22 = 0.2875, 0.0625, 0.210, 0.015
W1, T1_PRINTED, T1_BOOK_GAMMA = 0.0762, 0.00127, 0.0009
W2, T2 = 0.0381, 0.0009
STEEL = dict(E=2.1e11, rho=7850.0, nu=0.3)


def strip(length, width, thickness, elements=40, theory="timoshenko", **material):
    mat = {**STEEL, **material}
    section = BeamSection.rectangle(width, thickness, **mat)
    return clamped_modes(assemble_beam(BeamConfig(length, elements, section, theory=theory)), 2)


def book_gamma(t1, lever2, **material):
    """Γ by eqs. (6.31)-(6.37) with arm-1 thickness t1 and arm-2 lever ``lever2`` in (6.35)."""
    tips = []
    for basis in (strip(LE1, W1, t1, **material), strip(LE2, W2, T2, **material)):
        tip = basis.Phi[-3:]  # (u_x, u_y, theta) of the beam tip
        tips.append((tip[1], tip[2]))
    (phi1, psi1), (phi2, psi2) = tips
    return combined_output_gamma([phi1 + LR12 * psi1, phi2 + lever2 * psi2], [psi1, psi2],
                                 [L1, L2])


def test_book_gamma_with_corrected_readings():
    gamma = book_gamma(T1_BOOK_GAMMA, LR22)
    # the book prints 5 digits but not its element type/count or steel density; arm 1's
    # entries agree to 0.14 %, arm 2's two columns are 0.56 % low by a common factor (as from a
    # 1.1 % different rho A of arm 2): 2e-3 and 7e-3 bound these with a margin of ~1.3
    np.testing.assert_allclose(gamma[:, :2], BOOK_GAMMA[:, :2], rtol=2e-3)
    np.testing.assert_allclose(gamma[1, 2:], BOOK_GAMMA[1, 2:], rtol=7e-3)
    assert np.all(gamma[0, 2:] == 0.0)
    ratio = gamma[1, 2:] / BOOK_GAMMA[1, 2:]
    # common factor: Γ of one arm scales as 1/sqrt(rho A) with mass-normalised modes
    assert abs(ratio[0] - ratio[1]) < 1e-3


def test_printed_readings_do_not_reproduce_book_gamma():
    # erratum 2: with the printed 1.27 mm arm 1, row 1 drops by sqrt(0.9 / 1.27)
    printed = book_gamma(T1_PRINTED, LR22)
    np.testing.assert_allclose(printed[0, 0], 21.69, rtol=1e-3)  # 3-4 printed digits
    np.testing.assert_allclose(printed[0, 0] / BOOK_GAMMA[0, 0], np.sqrt(0.9 / 1.27),
                               rtol=2e-3)  # the 0.04 % of the corrected reading, plus FE
    assert abs(printed[0, 0] / BOOK_GAMMA[0, 0] - 1.0) > 0.15
    # erratum 1: the printed lever l_r21 in (6.35) instead of the distal l_r22
    lever = book_gamma(T1_BOOK_GAMMA, LR21)
    np.testing.assert_allclose(lever[1, 2:], [41.25, 70.88], rtol=1e-3)
    assert np.all(np.abs(lever[1, 2:] / BOOK_GAMMA[1, 2:] - 1.0) > 0.25)


def test_gamma_depends_on_density_and_geometry_only():
    base = book_gamma(T1_BOOK_GAMMA, LR22)
    # E changes every frequency but not the clamped-free mode shapes; 1e-7: eigenvector
    # rounding (~1e-10) amplified by the cancellation in Γ_21 = Ψ_1 - Γ_11 (13.5 of 39.3)
    np.testing.assert_allclose(book_gamma(T1_BOOK_GAMMA, LR22, E=7e10), base, rtol=1e-7)
    # mass-normalised modes scale as 1/sqrt(rho)
    np.testing.assert_allclose(book_gamma(T1_BOOK_GAMMA, LR22, rho=4 * 7850.0), base / 2,
                               rtol=1e-7)


def two_arm_chain(t1=T1_PRINTED, masses=(0.15, 0.45, 0.08, 0.05)):
    arm1 = arm_modal_data(strip(LE1, W1, t1, elements=10), RigidPart(LR11, masses[0], 1e-4),
                          RigidPart(LR12, masses[1], 1e-4, com=0.06))
    arm2 = arm_modal_data(strip(LE2, W2, T2, elements=10), RigidPart(LR21, masses[2], 3e-5),
                          RigidPart(LR22, masses[3], 7e-6))
    bodies = [ChainBody("arm1", "alpha", modal_data=arm1),
              ChainBody("arm2", "beta", modal_data=arm2)]
    return FlexibleChain(FlexibleChainConfig(bodies, gravity=(0.0, 0.0)), backend="numpy")


def test_chain_gamma_matches_construction_and_ignores_rigid_masses():
    chain = two_arm_chain(T1_BOOK_GAMMA)
    expected = book_gamma(T1_BOOK_GAMMA, LR22)
    # 10 instead of 40 elements: the tip shapes of the two lowest modes agree to ~1e-5
    np.testing.assert_allclose(chain_combined_output(chain), expected, rtol=1e-4)
    heavy = two_arm_chain(T1_BOOK_GAMMA, masses=(1.0, 2.0, 1.0, 0.5))
    np.testing.assert_allclose(chain_combined_output(heavy), chain_combined_output(chain),
                               rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gamma_is_exact_linearisation_of_end_point(seed):
    """Γ = J_y^-1 dr/dq_e at q_e = 0, with r_ap(y) of (6.30), in any configuration."""
    chain = two_arm_chain()
    gamma = chain_combined_output(chain)
    rng = np.random.default_rng(seed)
    q = np.r_[rng.uniform(-np.pi, np.pi, 2), np.zeros(4)]
    a, b = q[:2]
    jy = np.array([[-L1 * np.sin(a) - L2 * np.sin(a + b), -L2 * np.sin(a + b)],
                   [L1 * np.cos(a) + L2 * np.cos(a + b), L2 * np.cos(a + b)]])
    # the frame of K_1 here is along x at alpha = 0: r_ap = l1 (cos, sin) + l2 (cos, sin)
    np.testing.assert_allclose(chain.point_position(q, "arm2"),
                               [L1 * np.cos(a) + L2 * np.cos(a + b),
                                L1 * np.sin(a) + L2 * np.sin(a + b)], atol=1e-14)
    h = 1e-6
    je = np.column_stack([
        (chain.point_position(q + h * e, "arm2") - chain.point_position(q - h * e, "arm2"))
        / (2 * h) for e in np.eye(6)[2:]])
    # central differences of a point that is linear in q_e and smooth in the frame angle psi:
    # truncation O(h^2 |Γ|^3 l) ~ 1e-8 relative
    np.testing.assert_allclose(np.linalg.solve(jy, je), gamma, rtol=1e-6, atol=1e-6)


def point_mass_integrals(positions, masses, shapes):
    """Mass integrals of point masses at r0 (k, 2) displaced by shapes (k, 2, nq)."""
    J = np.array([[0.0, -1.0], [1.0, 0.0]])
    out = dict(mass=masses.sum(), mc0=masses @ positions,
               I0=masses @ np.sum(positions**2, axis=1),
               Ct=np.einsum("k,kin->ni", masses, shapes),
               I1=2 * np.einsum("k,ki,kin->n", masses, positions, shapes),
               Cr0=np.einsum("k,kin,ij,kj->n", masses, shapes, J, positions),
               Cr1=np.einsum("k,kin,ij,kjm->nm", masses, shapes, J, shapes),
               Me=np.einsum("k,kin,kim->nm", masses, shapes, shapes))
    return out


def test_arm_modal_data_rigid_parts_against_point_masses():
    basis = strip(0.2, 0.03, 0.002, elements=8)
    prox = RigidPart(0.05, mass=0.3, inertia=2e-4, com=0.02)
    dist = RigidPart(0.07, mass=0.5, inertia=3e-4, com=0.04)
    arm = arm_modal_data(basis, prox, dist)
    beam = modal_data_from_beam(basis)
    J = np.array([[0.0, -1.0], [1.0, 0.0]])
    tip = basis.Phi[-3:]
    # each rigid part as two point masses m/2 at com -+ s along y, m s^2 = inertia
    pts, ms, shp = [], [], []
    for part, xc, moving in ((prox, 0.05 - 0.02, False), (dist, 0.25 + 0.04, True)):
        s = np.sqrt(part.inertia / part.mass)
        for eta in (-s, s):
            p = np.array([xc, eta])
            pts.append(p)
            ms.append(part.mass / 2)
            d = p - [0.25, 0.0]
            shp.append(tip[:2] + np.outer(J @ d, tip[2]) if moving else np.zeros((2, 2)))
    pm = point_mass_integrals(np.array(pts), np.array(ms), np.array(shp))
    # the beam shifted by 0.05 along x
    lp = 0.05
    shifted = dict(mass=beam.mass, mc0=beam.mc0 + [lp * beam.mass, 0],
                   I0=beam.I0 + 2 * lp * beam.mc0[0] + lp**2 * beam.mass, Ct=beam.Ct,
                   I1=beam.I1 + 2 * lp * beam.Ct[:, 0], Cr0=beam.Cr0 + lp * beam.Ct[:, 1],
                   Cr1=beam.Cr1, Me=beam.Me)
    for key in pm:
        # closed-form rigid-body sums against the same sums over points: rounding only
        np.testing.assert_allclose(getattr(arm, key), shifted[key] + pm[key], rtol=1e-12,
                                   atol=1e-14, err_msg=key)
    np.testing.assert_allclose(arm.node_positions[[0, -1]], [[0, 0], [0.32, 0]])
    np.testing.assert_allclose(arm.node_shapes[-1, 1], tip[1] + 0.07 * tip[2], rtol=1e-14)


def test_arm_without_rigid_parts_is_the_beam():
    basis = strip(0.2, 0.03, 0.002, elements=8)
    arm, beam = arm_modal_data(basis), modal_data_from_beam(basis)
    for key in ("mass", "mc0", "Ct", "I0", "I1", "Cr0", "Cr1", "Me", "Ke", "Komega"):
        np.testing.assert_allclose(getattr(arm, key), getattr(beam, key), rtol=1e-13,
                                   atol=1e-15, err_msg=key)
    np.testing.assert_allclose(arm.node_shapes[1:-1], beam.node_shapes, atol=0)


def test_flexible_manipulator_model():
    chain = load_flexible_model("flexible_manipulator")
    assert chain.coordinate_names == ("alpha", "beta", "arm1.e1", "arm1.e2", "arm2.e1",
                                      "arm2.e2")
    np.testing.assert_allclose(chain.point_position(np.zeros(6), "arm2"), [L1 + L2, 0.0],
                               atol=1e-15)
    # printed geometry: Γ row 1 is the 1.27 mm value, the arm-2 columns the corrected ones
    np.testing.assert_allclose(chain_combined_output(chain), book_gamma(T1_PRINTED, LR22),
                               rtol=1e-4)  # 20 vs 40 elements
    # rigid masses of the yaml: strips 0.159 kg and 0.0565 kg plus 0.15 + 0.45 and 0.08 + 0.05
    np.testing.assert_allclose([b.modal_data.mass for b in chain.bodies],
                               [7850 * LE1 * W1 * T1_PRINTED + 0.6,
                                7850 * LE2 * W2 * T2 + 0.13], rtol=1e-12)


def test_flexible_manipulator_backends_agree():
    rng = np.random.default_rng(3)
    fast = load_flexible_model("flexible_manipulator")
    ref = load_flexible_model("flexible_manipulator", backend="numpy")
    q = np.r_[rng.uniform(-1, 1, 2), 1e-3 * rng.standard_normal(4)]
    v = rng.standard_normal(6)
    # same algebra in another order (compiled kernel vs FlexibleBody2D): rounding only
    np.testing.assert_allclose(fast.mass_matrix(q), ref.mass_matrix(q), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fast.nonlinear_effects(q, v), ref.nonlinear_effects(q, v),
                               rtol=1e-10, atol=1e-12)


def test_loader_rigid_part_errors(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("name: m\nbodies:\n  - name: a\n    joint: {name: q}\n    beam:\n"
                    "      {length: 0.2, elements: 4, section: {width: 0.01, height: 0.001},\n"
                    "       material: {E: 2.0e+11, rho: 7850.0}, modes: 2,\n"
                    "       distal: {mass: 0.1}}\n")
    with pytest.raises(ModelError, match=r"bodies\[0\]\.beam\.distal\.length: missing"):
        load_flexible_model(path)
    path.write_text(path.read_text().replace("{mass: 0.1}", "{length: 0.1, weight: 1}"))
    with pytest.raises(ModelError, match=r"distal\.weight: unknown key"):
        load_flexible_model(path)


def zero_dynamics_jacobian(chain, gamma, y0, h=1e-6):
    """Jacobian of the internal dynamics x = (q_e, v_e) with y = q_r + Γ q_e held at y0.

    For each state, q_r = y0 - Γ q_e, v_r = -Γ v_e and (a_e, u) solve the equations of motion
    ``M [-Γ; I] a_e - B u = g - k - f_e`` (y'' = 0); central differences give the linearisation.
    """
    ne = chain.nq_e
    T = np.vstack([-gamma, np.eye(ne)])

    def f(x):
        qe, ve = x[:ne], x[ne:]
        q = np.r_[y0 - gamma @ qe, qe]
        v = np.r_[-gamma @ ve, ve]
        M = chain.mass_matrix(q)
        rhs = chain.gravity_forces(q) - chain.nonlinear_effects(q, v) - chain.elastic_forces(q, v)
        sol = np.linalg.solve(np.hstack([M @ T, -chain.B]), rhs)
        return np.r_[ve, sol[:ne]]

    x0 = np.zeros(2 * ne)
    return np.column_stack([(f(x0 + h * e) - f(x0 - h * e)) / (2 * h) for e in np.eye(2 * ne)])


@pytest.mark.parametrize("y0", [(0.0, 0.0), (0.3, 1.2), (-0.8, -2.0)])
def test_flexible_manipulator_zero_dynamics_non_minimum_phase(y0):
    chain = load_flexible_model("flexible_manipulator")
    gamma = chain_combined_output(chain)
    A = zero_dynamics_jacobian(chain, gamma, np.asarray(y0))
    lam = np.linalg.eigvals(A)
    # Seifried Sect. 6.4: "the system is non-minimum phase"; undamped, so the unstable
    # eigenvalues come as real pairs +-sigma, far from the FD noise (~1e-4 of |lambda|)
    assert lam.real.max() > 1e-2 * np.abs(lam).max()
    # with the collocated output (Γ = 0) the internal dynamics are the clamped arms' vibration:
    # marginally stable (purely imaginary up to the FD error)
    lam0 = np.linalg.eigvals(zero_dynamics_jacobian(chain, 0 * gamma, np.asarray(y0)))
    assert np.abs(lam0.real).max() < 1e-4 * np.abs(lam0).max()


def test_flexible_manipulator_block_diagonal_output_still_non_minimum_phase():
    # Seifried Sect. 6.4: with Γ_3 = Γ_4 = 0 (his flat numbering of Γ_21, Γ_22; the output of
    # De Luca, Moallem et al.) "the system is still non-minimum phase"
    chain = load_flexible_model("flexible_manipulator")
    gamma = chain_combined_output(chain)
    gamma[1, :2] = 0.0
    lam = np.linalg.eigvals(zero_dynamics_jacobian(chain, gamma, np.array([0.3, 1.2])))
    assert lam.real.max() > 1e-2 * np.abs(lam).max()
