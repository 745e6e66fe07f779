"""Study: do POD shape functions explain the book's zero-dynamics split of the machine tool?

Seifried (2014) Sect. 6.5 states 7 eigenvalues in the left and 29 in the right half plane for
the linearised zero dynamics of the combined output (6.39); our eigenmode model (12 + 6
chord/clamped eigenmodes) gives 30 stable / 6 unstable (``bench_flexible_parallel``). The
book's arms use 12 + 6 POD shapes from MatMorembs (snapshots, weighting and damping not
printed; the book's reference [12], Fehr and Eberhard 2011). Here:

1. a *fine* model of the same machine (``FINE`` bending eigenmodes per arm; the FE models' axial
   modes are dropped, see :func:`bending_model`) runs the bench's motion (tool point moved by
   (+0.1, -0.1) m in 1 s from the 45 deg pose, 0.3 s of rest before and after): the classical
   inversion of the book's collocated output ``y = [s1, alpha]`` on the fine model, i.e. exactly
   the motion of the fine machine driven by the collocated feedforward (bounded internal
   dynamics). The stable inversion of the combined output on the fine model was tried as a
   second source: its dichotomy sweeps diverge (sweep 6, loop-closure Newton failure);
2. the snapshots of each arm's nodal deformation ``x(t) = Phi_fine q_e(t)`` (every ``STRIDE``-th
   sample of the 0.2 ms grid) give POD shapes (:func:`multibody_dynamics.flexible.pod.pod_basis`)
   with two inner products: the FE mass matrix (kinetic-energy norm; since the fine eigenmodes
   are mass-orthonormal this is the Euclidean SVD of the modal coordinates, mapped back by
   ``Phi_fine``) and the Euclidean norm of the nodal values ``[u, w, theta]``;
3. the POD model (``load_flexible_model("flexible_parallel_tool", shape_vectors=...)``,
   12 + 6 POD shapes, same FE models, frames and damping) and its combined output
   (Γ_i = Φ_i(tip) / l_l, the project's rule, from the POD shapes) give the zero-dynamics
   split at the 45 deg pose, with the shipped
   Rayleigh damping and undamped (``stable``/``unstable``: hyperbolic eigenvalues;
   ``imaginary_axis``: |Re| < 1e-7 max|λ|); with ``--errors`` also the tool errors of the
   classical (collocated) and stable (combined) inversions of the POD model.

Results (2026-11-22): 24 + 12 snapshot model, 1 ms snapshots, both weightings: **29 stable /
7 unstable** (real 49.7, 378, ~3780 1/s), undamped 7 / 7 and 22 on the imaginary axis; the same
with 20 + 10 and 32 + 16 snapshot models and with the snapshot integration at rtol 1e-11 (the
singular values agree to 3 digits: the weak tail shapes are not integration noise); 30 / 6 with
the under-resolved 16 + 8 snapshot model, with 11 long-arm POD shapes, or with POD on the short
arm only. The extra real
pair comes from the weakest long-arm shape (σ_12/σ_1 = 3e-11), 87 deg away from the span of
eigenmodes 1-12 and mostly the 13th bending eigenmode: eigenmodes 1-11 and 13 give the same
split (``test/test_flexible_pod.py``). Tool errors of the POD model: 12.9 mm (classical, [s1,
alpha]) and 0.022 mm (stable, combined), as with eigenmodes.

The split depends only on the span of the shapes (a change of basis within the span leaves the
equations, Γ q_e and the damping ``alpha M + beta K`` unchanged; ``test_flexible_pod.py``
checks it), so the variants are variants of the subspace. About 2 minutes (3 with
``--errors``). Run ``OPENBLAS_NUM_THREADS=1 python -m bench.study_parallel_tool_pod [--errors]
[--rtol 1e-8 --atol 1e-10]``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from bench.bench_flexible_parallel import (
    DT,
    Q_GUESS,
    T0,
    T_POST,
    T_PRE,
    TF,
    desired_outputs,
    tool_error,
)
from multibody_control.inversion.closed_flexible import ClosedOutputServo, invert_closed
from multibody_dynamics.flexible.loader import load_flexible_model
from multibody_dynamics.flexible.pod import pod_basis
from multibody_dynamics.robot import load_robot

KEEP = {"long_arm": 12, "short_arm": 6}  # the book's numbers of shape functions
FINE = {"long_arm": 24, "short_arm": 12}  # eigenmodes of the snapshot model
STRIDE = 5  # snapshot every 1 ms
RANK_TOL = 1e-14  # of pod_basis


def assembled(system):
    q = np.zeros(system.nv)
    q[:4] = Q_GUESS
    return system.project_position(q, partitioned=True)


def spectrum(system, output="combined"):
    """Zero-dynamics eigenvalues of ``output`` at the 45 deg pose and their split."""
    q = assembled(system)
    H, gamma = system.outputs[output]
    servo = ClosedOutputServo(system, H, gamma, guess=q[:4])
    Q, _ = servo.zero_dynamics_jacobian(H @ q[:4])
    lam = np.linalg.eigvals(Q)
    scale = np.abs(lam).max()
    real = np.abs(lam.imag) < 1e-9 * scale
    axis = np.abs(lam.real) < 1e-7 * scale  # undamped: +-1e-13 from the differences
    return {"n": int(lam.size), "stable": int(np.sum(~axis & (lam.real < 0))),
            "unstable": int(np.sum(~axis & (lam.real > 0))), "imaginary_axis": int(axis.sum()),
            "real": int(real.sum()),
            "real_unstable_1_per_s": sorted(round(float(x), 2)
                                            for x in lam[real & (lam.real > 0)].real)}


def bending_model(n_long, n_short, **parameters):
    """The machine tool with the lowest ``n_long``/``n_short`` *bending* eigenmodes per arm.

    The arms' FE models have axial modes among the higher ones (long arm: mode 13 at 776 Hz
    and mode 22, short arm: mode 10 at 1.67 kHz); with them in the 24 + 12 eigenmode model the zero
    dynamics of the
    rigid output get a real eigenvalue at +32588 1/s and its classical inversion fails, so the
    snapshot model keeps bending modes only (the POD of bending snapshots has no axial part).
    """
    big = load_robot("flexible_parallel_tool",
                     parameters=dict(modes_long=n_long + 4, modes_short=n_short + 3, **parameters))
    shapes = {}
    for body, n in zip(big.chain.bodies[2:], (n_long, n_short)):
        sh = body.modal_data.node_shapes  # (nodes, [u, w, theta], modes)
        keep = [k for k in range(sh.shape[2])
                if np.abs(sh[:, 0, k]).max() < np.abs(sh[:, 1, k]).max()][:n]
        shapes[body.name] = sh.reshape(-1, sh.shape[2])[:, keep]
    return load_flexible_model("flexible_parallel_tool", shape_vectors=shapes,
                               parameters=dict(modes_long=n_long, modes_short=n_short,
                                               **parameters))


def arm_data(system):
    """Per arm: fine shapes ``Phi`` (ndof, nq) and the slice of its coordinates in ``q_e``."""
    out = {}
    for arm in KEEP:
        i = system.chain._body_index(arm)
        d = system.chain.bodies[i].modal_data
        sl = system.chain.elastic_slices[i]
        out[arm] = (d.node_shapes.reshape(-1, d.nq), slice(sl.start - system.nq_r,
                                                            sl.stop - system.nq_r), d)
    return out


def snapshots(system, rtol=1e-8, atol=1e-10):
    """Elastic coordinates (N, nq_e) of the fine model during the bench motion: the classical
    inversion of the collocated output ``[s1, alpha]`` (``rtol``, ``atol`` of its DOP853)."""
    q = assembled(system)
    t = np.arange(T0 - T_PRE, TF + T_POST + DT / 2, DT)
    H, gamma = system.outputs["rigid"]
    servo = ClosedOutputServo(system, H, gamma, guess=q[:4])
    start = time.perf_counter()
    res = invert_closed(servo, desired_outputs(system, H, t), t, method="classical",
                        rtol=rtol, atol=atol)
    info = {"source": f"classical inversion, output [s1, alpha], fine model, rtol {rtol:g}",
            "success": res.success, "wall_time_s": round(time.perf_counter() - start, 1),
            "tool_error_max_mm": 1e3 * float(tool_error(system, res).max())}
    return res.q[::STRIDE, system.nq_r:], info


def pod_shapes(fine, qe, weighting="mass", keep=None):
    """POD shapes per arm from the fine model's elastic coordinates ``qe`` (N, nq_e).

    ``keep``: shapes per arm (default :data:`KEEP`); an arm mapped to 0 keeps its eigenmodes
    (absent from the result). The tail singular values reach 3e-11 of the first, hence the
    low ``rank_tol``.
    """
    keep = {**KEEP, **(keep or {})}
    shapes, info = {}, {}
    for arm, (Phi, sl, d) in arm_data(fine).items():
        n = keep[arm]
        if n == 0:
            continue
        Q = qe[:, sl].T  # (nq_fine, N)
        if weighting == "mass":
            # fine eigenmodes are mass-orthonormal: x^T M x = q^T q
            assert np.allclose(d.Me, np.eye(d.nq), atol=1e-9)
            pod = pod_basis(Q, n, rank_tol=RANK_TOL)
            shapes[arm] = Phi @ pod.shapes
            U = pod.shapes
        else:
            pod = pod_basis(Phi @ Q, n, rank_tol=RANK_TOL)
            shapes[arm] = pod.shapes
            U = np.linalg.lstsq(Phi, pod.shapes, rcond=None)[0]  # exact: in the fine span
        # principal angles (mass inner product) between the POD span and the lowest n
        # eigenmodes (fine coordinates e_1..e_n): cosines = singular values of U[:n]
        cosines = np.linalg.svd(np.linalg.qr(U)[0][:n], compute_uv=False)
        info[arm] = {"sigma_ratio_last_kept": float(pod.singular_values[n - 1]
                                                    / pod.singular_values[0]),
                     "max_angle_to_eigenmode_span_deg": round(float(np.degrees(np.arccos(
                         np.clip(cosines.min(), -1, 1)))), 2)}
    return shapes, info


def inversion_errors(system):
    """Tool errors of the bench's classical (rigid output) and stable (combined) inversions."""
    q = assembled(system)
    t = np.arange(T0 - T_PRE, TF + T_POST + DT / 2, DT)
    outs = system.outputs
    out = {}
    for output, method in (("rigid", "classical"), ("combined", "stable")):
        H, gamma = outs[output]
        servo = ClosedOutputServo(system, H, gamma, guess=q[:4])
        res = invert_closed(servo, desired_outputs(system, H, t), t, method=method)
        out[f"{method}_{output}"] = {"success": res.success, "message": res.message,
                                     "tool_error_max_mm": 1e3 * float(
                                         tool_error(system, res).max())}
    return out


def run(errors=False, rtol=1e-8, atol=1e-10) -> list[dict]:
    undamped = {"rayleigh_alpha": 0.0, "rayleigh_beta": 0.0}
    entries = [{"name": "eigenmodes 12 + 6 (shipped)",
                **spectrum(load_robot("flexible_parallel_tool"))},
               {"name": "eigenmodes 12 + 6, undamped",
                **spectrum(load_robot("flexible_parallel_tool", parameters=undamped))}]
    for n_long, n_short in ((16, 8), (24, 12)):
        entries.append({"name": f"eigenmodes {n_long} + {n_short} (with axial modes)",
                        **spectrum(load_robot("flexible_parallel_tool", parameters=dict(
                            modes_long=n_long, modes_short=n_short)))})
    fine = bending_model(FINE["long_arm"], FINE["short_arm"])
    entries.append({"name": f"bending eigenmodes {FINE['long_arm']} + {FINE['short_arm']} "
                            "(snapshot model)", **spectrum(fine),
                    "rigid_output": spectrum(fine, "rigid")})
    qe, info = snapshots(fine, rtol, atol)
    entries.append({"name": "snapshots", **info})
    variants = [("mass", None), ("euclidean", None), ("mass", {"short_arm": 0}),
                ("mass", {"long_arm": 0}), ("mass", {"long_arm": 11})]
    for weighting, keep in variants:
        shapes, pinfo = pod_shapes(fine, qe, weighting, keep)
        counts = {**KEEP, **(keep or {})}
        label = (f"POD {weighting}-weighted, long {counts['long_arm'] or 'eigenmodes 12'}, "
                 f"short {counts['short_arm'] or 'eigenmodes 6'}")
        n_long = counts["long_arm"] or 12
        n_short = counts["short_arm"] or 6
        for damping, kw in (("shipped damping", {}), ("undamped", undamped)):
            system = load_flexible_model("flexible_parallel_tool", shape_vectors=shapes,
                                         parameters=dict(modes_long=n_long,
                                                         modes_short=n_short, **kw))
            entry = {"name": f"{label}, {damping}", **spectrum(system), "pod": pinfo}
            if errors and not kw and keep is None and weighting == "mass":
                entry.update(inversion_errors(system))
            entries.append(entry)
    return entries


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--errors", action="store_true", help="also invert the POD model")
    parser.add_argument("--rtol", type=float, default=1e-8, help="of the snapshot simulation")
    parser.add_argument("--atol", type=float, default=1e-10, help="of the snapshot simulation")
    args = parser.parse_args()
    for e in run(args.errors, args.rtol, args.atol):
        print(json.dumps(e, default=float), flush=True)
