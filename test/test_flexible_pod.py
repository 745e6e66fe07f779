"""POD shape functions (Seifried 2014 Sect. 6.5: the machine tool's arms use POD shapes).

Oracles: snapshots built from a known W-orthonormal basis with known amplitudes (the POD must
return that span and those singular values), numpy's SVD for the unweighted case, and the
invariance of the machine tool's equations under a change of basis within the same span.
"""

from __future__ import annotations

import numpy as np
import pytest

from multibody_control.inversion.closed_flexible import ClosedOutputServo
from multibody_dynamics.errors import DimensionError, InputError
from multibody_dynamics.flexible.beam import BeamSection
from multibody_dynamics.flexible.loader import load_flexible_model
from multibody_dynamics.flexible.pod import pod_basis
from multibody_dynamics.flexible.segmented import ArmSegment, segmented_arm_modal_data
from multibody_dynamics.robot import load_robot


def spd(rng, n):
    A = rng.standard_normal((n, n))
    return A @ A.T + n * np.eye(n)


def test_pod_recovers_known_shapes_and_amplitudes(rng):
    ndof, nsnap = 30, 200
    W = spd(rng, ndof)
    L = np.linalg.cholesky(W)
    # W-orthonormal shapes B (B^T W B = I) and orthonormal time histories C (rows)
    B = np.linalg.solve(L.T, np.linalg.qr(rng.standard_normal((ndof, 4)))[0])
    C = np.linalg.qr(rng.standard_normal((nsnap, 4)))[0].T
    amps = np.array([10.0, 5.0, 1.0, 0.1])
    X = B @ np.diag(amps) @ C
    pod = pod_basis(X, 2, weight=W)
    np.testing.assert_allclose(pod.singular_values[:4], amps, rtol=1e-12)
    assert pod.singular_values[4] < 1e-12 * amps[0]
    np.testing.assert_allclose(pod.shapes.T @ W @ pod.shapes, np.eye(2), atol=1e-12)
    # the two dominant shapes, up to sign
    for k in range(2):
        c = pod.shapes[:, k] @ W @ B[:, k]
        np.testing.assert_allclose(abs(c), 1.0, atol=1e-12)
    np.testing.assert_allclose(pod.captured, (100 + 25) / (100 + 25 + 1 + 0.01), rtol=1e-12)
    full = pod_basis(X, 4, weight=W)
    P = full.shapes @ full.shapes.T @ W  # W-orthogonal projector on the POD span
    np.testing.assert_allclose(P @ X, X, atol=1e-12 * np.abs(X).max())
    assert full.n == 4 and full.captured == pytest.approx(1.0, abs=1e-14)


def test_unweighted_pod_is_the_svd(rng):
    X = rng.standard_normal((12, 40))
    pod = pod_basis(X, 3)
    U, S, _ = np.linalg.svd(X, full_matrices=False)
    np.testing.assert_allclose(pod.singular_values, S, rtol=1e-12)
    np.testing.assert_allclose(np.abs(pod.shapes.T @ U[:, :3]), np.eye(3), atol=1e-12)
    # sign convention: largest entry of each shape positive
    assert np.all(pod.shapes[np.argmax(np.abs(pod.shapes), axis=0), np.arange(3)] > 0)


def test_pod_errors_name_the_problem(rng):
    X = rng.standard_normal((6, 2)) @ rng.standard_normal((2, 10))  # rank 2
    with pytest.raises(InputError, match="fewer than n = 3"):
        pod_basis(X, 3)
    with pytest.raises(InputError, match="n must be an integer"):
        pod_basis(X, 7)
    with pytest.raises(DimensionError, match="weight must have shape"):
        pod_basis(X, 1, weight=np.eye(5))
    with pytest.raises(InputError, match="positive definite"):
        pod_basis(X, 1, weight=-np.eye(6))
    with pytest.raises(DimensionError, match="2-D"):
        pod_basis(X[0], 1)


def arm():
    steel = BeamSection.rectangle(0.08, 0.002, E=2.1e11, rho=7850.0)
    block = BeamSection.rectangle(0.08, 0.03, E=7e10, rho=2700.0, nu=0.33)
    return [ArmSegment(0.08, 2, block), ArmSegment(0.4, 6, steel), ArmSegment(0.08, 2, block)]


def test_arm_basis_option_reproduces_and_transforms_the_modal_data(rng):
    data, info = segmented_arm_modal_data(arm(), 3, rayleigh=(0.5, 1e-5))
    Phi = data.node_shapes.reshape(-1, 3)
    same, info2 = segmented_arm_modal_data(arm(), 3, rayleigh=(0.5, 1e-5), basis=Phi)
    for key, value in data.arrays().items():
        np.testing.assert_allclose(same.arrays()[key], value, rtol=1e-12, atol=1e-14, err_msg=key)
    # the full FE eigenproblem (stiff blocks: stiffness entries spread over ~1e9) resolves the
    # lowest frequency to ~1e-8 only; the reduced 3 x 3 problem is exact
    np.testing.assert_allclose(info2["frequencies"], info["frequencies"], rtol=1e-7)
    np.testing.assert_allclose(Phi.T @ info["M"] @ Phi, np.eye(3), atol=1e-10)
    # another basis of the same span: every linear term transforms with T
    T = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    other, info3 = segmented_arm_modal_data(arm(), 3, rayleigh=(0.5, 1e-5), basis=Phi @ T)
    np.testing.assert_allclose(other.Me, T.T @ data.Me @ T, atol=1e-10)
    np.testing.assert_allclose(other.Ke, T.T @ data.Ke @ T, rtol=1e-10)
    np.testing.assert_allclose(other.De, T.T @ data.De @ T, rtol=1e-10)
    np.testing.assert_allclose(other.Komega, T.T @ data.Komega @ T, rtol=1e-10, atol=1e-12)
    for key in ("Ct", "I1", "Cr0"):
        np.testing.assert_allclose(getattr(other, key), T.T @ getattr(data, key), rtol=1e-10,
                                   atol=1e-14)
    np.testing.assert_allclose(other.Cr1, T.T @ data.Cr1 @ T, atol=1e-12)
    np.testing.assert_allclose(info3["frequencies"], info2["frequencies"], rtol=1e-8)
    bad = Phi.copy()
    bad[2, 0] = 1.0  # the root slope, held by the tangent frame
    with pytest.raises(InputError, match="vanish"):
        segmented_arm_modal_data(arm(), 3, basis=bad)
    with pytest.raises(DimensionError, match="basis must have shape"):
        segmented_arm_modal_data(arm(), 2, basis=Phi)


def zero_dynamics_eigenvalues(system):
    q = np.zeros(system.nv)
    q[:4] = [0.0, 0.8, np.pi / 4, 2.4]
    q = system.project_position(q, partitioned=True)
    H, gamma = system.outputs["combined"]
    servo = ClosedOutputServo(system, H, gamma, guess=q[:4])
    return np.linalg.eigvals(servo.zero_dynamics_jacobian(H @ q[:4])[0])


def test_tool_zero_dynamics_depend_only_on_the_span(rng):
    """Shapes ``Phi T`` instead of the eigenmodes ``Phi``: same equations in other
    coordinates, Γ q_e (tip deflection / l_l) unchanged: the same zero-dynamics spectrum. So
    POD shapes can only change the split through their span."""
    kw = {"modes_long": 3, "modes_short": 2, "link_elements": 6}
    base = load_robot("flexible_parallel_tool", parameters=kw)
    shapes = {}
    for body in base.chain.bodies[2:]:
        d = body.modal_data
        T = rng.standard_normal((d.nq, d.nq)) + 3 * np.eye(d.nq)
        shapes[body.name] = d.node_shapes.reshape(-1, d.nq) @ T
    other = load_flexible_model("flexible_parallel_tool", parameters=kw, shape_vectors=shapes)
    lam, mu = zero_dynamics_eigenvalues(base), zero_dynamics_eigenvalues(other)
    # central differences of step 1e-7 in differently scaled coordinates: ~1e-6 relative
    dist = np.abs(lam[:, None] - mu[None, :]).min(axis=1)
    assert dist.max() < 1e-5 * np.abs(lam).max()
    assert np.sum(lam.real > 0) == np.sum(mu.real > 0)
    with pytest.raises(InputError, match="shape_vectors: unknown bodies"):
        load_flexible_model("flexible_parallel_tool", parameters=kw,
                            shape_vectors={"arm": shapes["long_arm"]})


def bending_shapes(body):
    """Bending eigenmodes (axial ones dropped) of an arm as FE-dof shape vectors."""
    sh = body.modal_data.node_shapes  # (nodes, [u, w, theta], modes)
    keep = [k for k in range(sh.shape[2]) if np.abs(sh[:, 0, k]).max() < np.abs(sh[:, 1, k]).max()]
    return sh.reshape(-1, sh.shape[2])[:, keep]


def test_tool_split_depends_on_the_long_arms_highest_shape():
    """Seifried (2014) Sect. 6.5: "7 eigenvalues in the left half plane and 29 in the right"
    for 12 + 6 POD shapes. The study ``bench/study_parallel_tool_pod.py`` finds 29 stable / 7
    unstable for POD shapes from a 24 + 12 bending-mode simulation of the bench motion, 30 / 6
    for the eigenmodes: the 12th long-arm POD shape is mostly the 13th bending eigenmode
    (903 Hz). The same split follows from eigenmodes 1-11 and 13 of the long arm, pinned
    here; undamped the 7 stable and 7 unstable eigenvalues are hyperbolic and 22 lie on the
    imaginary axis (the book's counts if these are taken as "right half plane")."""
    big = load_robot("flexible_parallel_tool", parameters=dict(modes_long=14, modes_short=6))
    # 13 bending modes (the 13th FE mode is axial)
    long_modes = bending_shapes(big.chain.bodies[2])
    assert long_modes.shape[1] == 13
    shapes = {"long_arm": long_modes[:, [*range(11), 12]]}
    counts = {}
    for label, kw in (("damped", {}), ("undamped", {"rayleigh_alpha": 0.0, "rayleigh_beta": 0.0})):
        model = load_flexible_model("flexible_parallel_tool", parameters=kw,
                                    shape_vectors=shapes)
        lam = zero_dynamics_eigenvalues(model)
        axis = np.abs(lam.real) < 1e-7 * np.abs(lam).max()
        counts[label] = (int(np.sum(~axis & (lam.real < 0))), int(np.sum(~axis & (lam.real > 0))),
                         int(axis.sum()))
    assert counts == {"damped": (29, 7, 0), "undamped": (7, 7, 22)}
