"""Bézier shape of flexible arms (Seifried 2014 Sect. 7.4.1.2) and stepped beams."""

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from multibody_dynamics.errors import InputError
from multibody_dynamics.flexible.beam import BeamConfig, BeamSection, assemble_beam
from multibody_dynamics.flexible.loader import load_flexible_model
from multibody_dynamics.flexible.modal import clamped_modes
from multibody_dynamics.flexible.segmented import ArmSegment, segmented_arm_modal_data
from multibody_dynamics.flexible.shape import (
    BezierArm,
    BezierArmBuilder,
    arms_from_model,
    bernstein,
    bezier_height,
    rebuild_chain,
    scale_to_mass,
    total_mass,
)
from multibody_dynamics.flexible.sid import KEYS, modal_data_from_beam

ALU = dict(E=7.0e10, rho=2700.0, nu=0.33)


def _arm(heights, elements=20, theory="euler-bernoulli", **kw):
    return BezierArm(length=1.0, width=0.06, heights=heights, elements=elements,
                     theory=theory, **ALU, **kw)


def test_bernstein_partition_of_unity_and_linear_precision():
    b = np.linspace(0.0, 1.0, 11)
    # sum_j B_j = (b + 1 - b)^3 = 1 (binomial theorem), to rounding
    np.testing.assert_allclose(bernstein(b).sum(axis=1), 1.0, rtol=0, atol=1e-15)
    # collinear control heights at x = 0, l/3, 2l/3, l give the straight line through them
    x = np.linspace(0.0, 2.0, 9)
    np.testing.assert_allclose(bezier_height([0.01, 0.008, 0.006, 0.004], x, 2.0),
                               0.01 - 0.003 * x, rtol=1e-13)
    # ends interpolate the first and last control heights, eq. (7.22) at b = 0 and 1
    np.testing.assert_allclose(bezier_height([1.0, 5.0, 2.0, 3.0], [0.0, 1.0], 1.0), [1.0, 3.0])


def test_stepped_beam_of_equal_sections_is_the_uniform_beam():
    """assemble_beam with one section per element (batched element matrices, scattered) against
    the uniform beam (one element matrix, added element by element)."""
    sec = BeamSection.rectangle(0.06, 0.01, **ALU)
    uni = BeamConfig(1.0, 8, sec, theory="timoshenko")
    stepped = BeamConfig(1.0, 8, sec, theory="timoshenko", sections=(sec,) * 8)
    a, b = assemble_beam(uni), assemble_beam(stepped)
    # the same integrals, batched over the elements for the stepped beam: rounding only
    for x, y in ((b.M, a.M), (b.K, a.K)):
        np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-15 * np.abs(y).max())


def test_constant_bezier_is_the_prismatic_arm_of_the_model():
    """The Bézier rebuild with y_j = h of flexible_manipulator_book's arms equals the modal data
    the loader builds from the YAML (rigid end parts, Timoshenko, 2 modes)."""
    chain = load_flexible_model("flexible_manipulator_book")
    arms = arms_from_model("flexible_manipulator_book")
    assert sorted(arms) == ["arm1", "arm2"]
    for body in chain.config.bodies:
        arm = arms[body.name]
        data, freq = BezierArmBuilder(arm).modal_data(arm.heights)
        ref = body.modal_data
        for key in KEYS[1:]:
            a, r = np.asarray(getattr(data, key)), np.asarray(getattr(ref, key))
            # sections equal to rounding (1e-16); the eigenvectors of the 60-dof pencil
            # amplify that to about 1e-10 relative, measured 2e-10. I1 and Cr1 are rounding
            # zeros here (1e-14): the floor 1e-12 (other entries are 1e-3 or more) admits them
            np.testing.assert_allclose(a, r, rtol=0, atol=1e-8 * np.abs(r).max() + 1e-12,
                                       err_msg=key)
        assert np.all(np.isfinite(freq)) and freq.shape == (2,)


def test_stepped_mass_integrals_match_segmented_arm():
    """sid.modal_data_from_beam on a stepped beam against segmented.segmented_arm_modal_data, a
    separate implementation that meshes one segment per element (its own centrifugal
    axial-force sum)."""
    rng = np.random.default_rng(3)
    arm = _arm(rng.uniform(0.004, 0.02, 4), elements=12, theory="timoshenko")
    cfg = BezierArmBuilder(arm).beam_config(arm.heights)
    data = modal_data_from_beam(clamped_modes(assemble_beam(cfg), 3))
    segs = [ArmSegment(cfg.element_length, 1, s) for s in cfg.sections]
    ref, _ = segmented_arm_modal_data(segs, 3, theory="timoshenko")
    for key in KEYS[1:]:
        a, r = np.asarray(getattr(data, key)), np.asarray(getattr(ref, key))
        # the same FE pencil from two assemblies: eigenvector rounding, about 1e-12; I1 is a
        # rounding zero (1e-14) against entries of 1e-3 or more
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-9 * np.abs(r).max() + 1e-12,
                                   err_msg=key)


def _shooting_frequency(EI, rhoA, length, guess):
    """First bending frequency [rad/s] of a clamped-free Euler-Bernoulli beam with smooth
    EI(x), rhoA(x), by shooting on (EI w'')'' = omega^2 rhoA w: state (w, w', M, V) with
    M = EI w'', V = M'; clamped root (w = w' = 0), free tip needs M = V = 0."""

    def tip(omega):
        def rhs(x, s):
            return [s[1], s[2] / EI(x), s[3], omega**2 * rhoA(x) * s[0]]

        cols = [solve_ivp(rhs, (0.0, length), y0, rtol=1e-11, atol=1e-14).y[2:, -1]
                for y0 in ([0, 0, 1.0, 0], [0, 0, 0, 1.0])]
        return np.linalg.det(np.column_stack(cols))

    return brentq(tip, 0.9 * guess, 1.1 * guess, xtol=1e-12)


def test_tapered_cantilever_frequency_against_shooting():
    """Linear taper 10 mm -> 4 mm (collinear Bézier heights): the stepped FE model's first
    frequency converges to the ODE (shooting) reference, independently computed."""
    arm = _arm([0.010, 0.008, 0.006, 0.004], elements=40)
    z, E, rho = arm.width, arm.E, arm.rho

    def h(x):
        return 0.010 - 0.006 * x

    ref = _shooting_frequency(lambda x: E * z * h(x) ** 3 / 12, lambda x: rho * z * h(x), 1.0,
                              guess=BezierArmBuilder(arm).modal_data(arm.heights)[1][0])
    # uniform 10 mm beam, closed form 1.8751^2 sqrt(EI / (rho A l^4)): the taper stiffens
    uniform = 1.87510407**2 * np.sqrt(E * 0.01**2 / 12 / rho)
    assert ref > 1.1 * uniform
    errors = []
    for n in (10, 20, 40):
        f1 = BezierArmBuilder(_arm(arm.heights, elements=n)).modal_data(arm.heights)[1][0]
        errors.append(abs(f1 / ref - 1))
    # stepped sections: O(h^2) convergence (measured 4.9e-3, 1.2e-3, 3.1e-4; 80 elements
    # 7.7e-5, 160 elements 1.9e-5)
    assert errors[2] < 5e-4
    assert errors[0] / errors[1] > 3.5 and errors[1] / errors[2] > 3.5


def test_mass_is_linear_in_the_heights_and_scaling_keeps_it():
    rng = np.random.default_rng(7)
    arms = [_arm([0.01] * 4), _arm([0.01] * 4)]
    heights = [rng.uniform(0.001, 0.1, 4) for _ in arms]
    for arm, p in zip(arms, heights):
        cfg = BezierArmBuilder(arm).beam_config(p)
        fe_mass = sum(s.rho * s.A * cfg.element_length for s in cfg.sections)
        # closed form: rho z l (y0 + y1 + y2 + y3) / 4 (each Bernstein polynomial integrates
        # to 1/4); Gauss quadrature exact for the cubic, rounding only
        np.testing.assert_allclose(fe_mass, 2700 * 0.06 * np.mean(p), rtol=1e-13)
    m0 = total_mass(arms, [arm.heights for arm in arms])  # two 10 x 60 mm x 1 m arms: 3.24 kg
    np.testing.assert_allclose(m0, 2 * 2700 * 0.06 * 0.01, rtol=1e-14)
    scaled, s = scale_to_mass(arms, heights, m0)
    np.testing.assert_allclose(total_mass(arms, scaled), m0, rtol=1e-14)
    np.testing.assert_allclose(scaled[0] / heights[0], s)


def test_book_design_7_29_has_the_initial_mass():
    """Seifried (2014) eq. (7.29): the optimized heights sum to 80.0 mm = 8 x 10 mm, i.e. the
    two equal arms keep the combined mass of the initial 10 mm design exactly (the book's
    equality constraint; printed to 0.1 mm)."""
    arms = [_arm([0.01] * 4), _arm([0.01] * 4)]
    p = np.array([12.9, 10.4, 22.1, 5.3, 5.1, 16.2, 7.0, 1.0]) * 1e-3
    np.testing.assert_allclose(total_mass(arms, [p[:4], p[4:]]),
                               total_mass(arms, [arm.heights for arm in arms]), rtol=1e-12)


@pytest.mark.parametrize("heights, match", [
    ([0.01, -0.002, 0.01, 0.01], r"heights\[1\] \(y1\): expected a positive"),
    ([0.01, 0.01, 0.01], "expected 4 control heights"),
    ([0.01, 0.01, np.nan, 0.01], r"heights\[2\]"),
])
def test_bad_heights_are_named(heights, match):
    with pytest.raises(InputError, match=match):
        _arm(heights)
    builder = BezierArmBuilder(_arm([0.01] * 4))
    with pytest.raises(InputError, match=match):
        builder.modal_data(heights)


def test_bad_arm_parameters_are_named():
    with pytest.raises(InputError, match="width must be a positive"):
        BezierArm(length=1.0, width=0.0, heights=[0.01] * 4, **ALU)
    with pytest.raises(InputError, match="modes must be <= 5"):
        _arm([0.01] * 4, elements=2, modes=6)
    with pytest.raises(InputError, match="modes must be an integer"):
        _arm([0.01] * 4, modes=0)


def test_rebuild_chain_replaces_the_arms_and_checks_the_mode_count():
    chain = load_flexible_model("flexible_manipulator_book")
    arms = arms_from_model("flexible_manipulator_book")
    thin = [0.0012, 0.0010, 0.0008, 0.0006]
    data, _ = BezierArmBuilder(arms["arm2"]).modal_data(thin)
    new = rebuild_chain(chain.config, {"arm2": data})
    assert new.nv == chain.nv
    assert new.config.bodies[1].modal_data is data
    assert new.config.bodies[0].modal_data is chain.config.bodies[0].modal_data
    three = BezierArmBuilder(BezierArm(**{**arms["arm2"].__dict__, "modes": 3}))
    with pytest.raises(InputError, match="3 modes, expected 2"):
        rebuild_chain(chain.config, {"arm2": three.modal_data(thin)[0]})
    with pytest.raises(InputError, match="not a flexible body"):
        rebuild_chain(chain.config, {"arm3": data})


def test_cart_manipulator_arms_rebuild():
    """The rebuild applies to any model file with uniform beam bodies: the Sect. 2.3 cart
    manipulator's two 1 m aluminium links (100 Timoshenko elements, cart rigid)."""
    chain = load_flexible_model("flexible_cart_manipulator")
    arms = arms_from_model("flexible_cart_manipulator")
    assert sorted(arms) == ["link1", "link2"] and arms["link1"].elements == 100
    heights = [0.0129, 0.0104, 0.0221, 0.0053]  # Seifried (2014) (7.29), arm 1 [m]
    data, freq = BezierArmBuilder(arms["link1"]).modal_data(heights)
    # beam mass rho z l mean(p) = 2700 x 0.01 x 1 x 0.012675 kg
    assert data.mass == pytest.approx(2700 * 0.01 * 0.012675, rel=1e-12)
    new = rebuild_chain(chain.config, {"link1": data})
    assert new.nv == chain.nv == 7 and np.all(np.isfinite(freq))
    q = np.zeros(new.nv)
    assert np.all(np.isfinite(new.mass_matrix(q)))


def test_stepped_arm_with_rigid_parts_of_equal_sections_is_the_uniform_arm():
    """arm_modal_data's element loop (centrifugal term of the proximal shift and the distal
    mass) on a stepped beam of equal sections gives the uniform beam's numbers."""
    from multibody_dynamics.flexible.output import RigidPart, arm_modal_data

    sec = BeamSection.rectangle(0.06, 0.01, **ALU)
    prox, dist = RigidPart(0.05, 0.2, 1e-4), RigidPart(0.08, 0.5, 2e-4, com=0.03)
    out = []
    for sections in (None, (sec,) * 10):
        cfg = BeamConfig(1.0, 10, sec, theory="timoshenko", sections=sections)
        out.append(arm_modal_data(clamped_modes(assemble_beam(cfg), 2), prox, dist))
    for key in KEYS[1:]:
        a, r = np.asarray(getattr(out[1], key)), np.asarray(getattr(out[0], key))
        # the same matrices to rounding (batched, scattered), so the modes to about 1e-11; the
        # mass beyond x is summed element-wise instead of l - x. I1, Cr1 are rounding zeros
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-9 * np.abs(r).max() + 1e-12,
                                   err_msg=key)


def test_shaped_chain_needs_heights_for_every_arm():
    from multibody_dynamics.flexible.shape import shaped_chain

    chain = load_flexible_model("flexible_manipulator_book")
    builders = {n: BezierArmBuilder(a) for n, a in arms_from_model(chain.config.name).items()}
    new, freq = shaped_chain(chain.config, builders, {"arm1": [9e-4] * 4, "arm2": [8e-4] * 4})
    assert new.nv == chain.nv and sorted(freq) == ["arm1", "arm2"]
    with pytest.raises(InputError, match=r"missing \['arm2'\]"):
        shaped_chain(chain.config, builders, {"arm1": [9e-4] * 4})
    with pytest.raises(InputError, match=r"arm 'arm2': heights\[3\] \(y3\)"):
        shaped_chain(chain.config, builders, {"arm1": [9e-4] * 4, "arm2": [8e-4] * 3 + [0.0]})


@pytest.mark.parametrize("theory", ["euler-bernoulli", "timoshenko"])
def test_batched_element_matrices_equal_the_element_by_element_ones(theory):
    from multibody_dynamics.flexible.beam import element_matrices, stepped_element_matrices

    rng = np.random.default_rng(11)
    secs = tuple(BeamSection.rectangle(0.06, h, **ALU) for h in rng.uniform(0.002, 0.05, 7))
    cfg = BeamConfig(0.7, 7, secs[0], theory=theory, sections=secs)
    m, k = stepped_element_matrices(cfg)
    for e in range(7):
        me, ke = element_matrices(cfg, e)
        # the same quadrature, batched: rounding only
        np.testing.assert_allclose(m[e], me, rtol=1e-12, atol=1e-12 * np.abs(me).max())
        np.testing.assert_allclose(k[e], ke, rtol=1e-12, atol=1e-12 * np.abs(ke).max())


def test_scaling_within_bounds_keeps_mass_and_bounds():
    """scale_to_mass with bounds: clip(s p) at the s that gives the mass, found from the
    breakpoints of the piecewise-linear clipped mass (exact to rounding)."""
    rng = np.random.default_rng(13)
    arms = [_arm([0.01] * 4), _arm([0.01] * 4)]
    lo, hi = [np.full(4, 0.001)] * 2, [np.full(4, 0.1)] * 2
    m0 = total_mass(arms, [a.heights for a in arms])
    for _ in range(20):
        heights = [rng.uniform(0.001, 0.1, 4) for _ in arms]
        heights[0][rng.integers(4)] = 0.1  # one large height: the rest shrink to the bound
        scaled, s = scale_to_mass(arms, heights, m0, lo, hi)
        np.testing.assert_allclose(total_mass(arms, scaled), m0, rtol=1e-12)
        flat = np.concatenate(scaled)
        assert flat.min() >= 0.001 and flat.max() <= 0.1
        np.testing.assert_allclose(flat, np.clip(s * np.concatenate(heights), 0.001, 0.1))
    # no clipping needed: the plain factor
    plain, s0 = scale_to_mass(arms, [np.full(4, 0.02)] * 2, m0, lo, hi)
    assert s0 == pytest.approx(0.5) and np.allclose(np.concatenate(plain), 0.01)
    with pytest.raises(InputError, match="outside"):
        scale_to_mass(arms, [np.full(4, 0.02)] * 2, 100 * m0, lo, hi)
