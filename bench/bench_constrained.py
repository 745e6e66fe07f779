"""Projection forward dynamics (Aghili 2005) against pin.constraintDynamics, per call.

pinocchio has no revolute, planar or point-on-line closure, so the baseline is
``pin.constraintDynamics`` on the same kinematic tree closed by a 3-D point (spherical)
constraint between the same two frames, as ``test/test_projection.py`` does: the same
mechanism for the planar four-bar and five-bar (3 rows of rank 2); for the slider-crank the
point constraint also pins the slider (a locked mechanism, same tree and solver cost).
Before timing, the fast path is checked against the plain numpy implementation
(:func:`projected_acceleration`, eq. 32 for f_c, ``(A^+)^T f_c`` for lam).

Scaling (issue 17): one forward-dynamics call on a planar chain of n links closed at its tip
(``bench/closed_chain.py``; n = 5 ... 200) against ``pin.constraintDynamics`` on the same chain
closed by a 3-D point, and the log-log slopes of both times over n.

Mass-matrix solves (``M^-1 X``, the mass-metric velocity projection): pinocchio's tree
algorithms (``mass_solver="sparse"``: tree-sparse Cholesky for one column, articulated-body
``computeMinverse`` for several) against ``crba`` + LAPACK Cholesky (``"dense"``), as a ratio
sparse/dense, on models of 2 to 60 velocity coordinates (the shipped ones, pinocchio's sample
humanoid and a 60-link chain); the two paths are checked to agree first.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import yaml

from multibody_dynamics.constrained_baselines import PinocchioConstraintDynamics
from multibody_dynamics.model import load_model
from multibody_dynamics.model.resources import share_dir
from multibody_dynamics.projection import (
    SPARSE_MASS_MIN_NV,
    ProjectedDynamics,
    ProjectionSettings,
    inverse_mass_product,
    projected_acceleration,
)

from .closed_chain import closed_chain_model, zigzag
from .common import ratio_entry

TARGET = 1.2  # issue 17: one forward-dynamics call <= 1.2x pin.constraintDynamics
CHAIN_N = (5, 10, 20, 50, 100, 200)  # issue 17: planar chain of n links closed at its tip
CHAIN_TARGET = 1.0  # issue 17: <= 1.0x pinocchio at n = 200 ...
SLOPE_TARGET = 1.3  # ... and a log-log slope of the time over n <= 1.3
CHAIN_AGREE = 1e-8  # relative difference to pin.constraintDynamics (its proximal accuracy)
#: forward-dynamics timings count the CPU time of this process: both sides are single-threaded,
#: and on the shared machine the wall time of a few-microsecond call mostly measures the wait
#: for a core (ratios of 1.0-1.7 between runs of the same code)
TIMER = time.process_time
CASES = {  # robot: (closure frames, a configuration near the manifold)
    "four_bar": (("coupler_tip", "rocker_tip"), [0.5, 0.3, 1.5]),
    "slider_crank": (("slider_pin", "slider_rail"), [0.7, -1.3]),
    "five_bar": (("left_tip", "right_tip"), [2.0, -1.2, 1.1, 1.2]),
}
IDENTITY_RTOL = 1e-12


def _point_closure_model(robot, frames, folder: Path):
    base = load_model(robot)
    path = folder / f"{robot}_point.yaml"
    path.write_text(yaml.safe_dump({
        "name": f"{robot}_point", "urdf": str(share_dir() / "urdf" / f"{robot}.urdf"),
        "gravity": [float(x) for x in base.pin_model.gravity.linear],
        "closures": [{"name": "loop", "type": "spherical", "frame_a": frames[0],
                      "frame_b": frames[1]}]}))
    return load_model(path)


def _check_identity(pd: ProjectedDynamics, q, v, tau) -> float:
    """Largest relative difference of (a, f_c, lam) between the fast and the numpy path."""
    res = pd.forward_dynamics_result(q, v, tau)
    A, gamma = pd.constraints.jacobian_and_bias(q, v)
    M, f = pd._applied(q, v, tau)
    a, proj = projected_acceleration(M, f, A, gamma, pd.settings)
    f_c = M @ a - f
    f_c -= proj.P @ f_c
    lam = proj.A_pinv.T @ f_c
    err = max(float(np.max(np.abs(x - y)) / max(1.0, float(np.max(np.abs(y)))))
              for x, y in ((res.a, a), (res.f_c, f_c), (res.lam, lam)))
    if err > IDENTITY_RTOL or res.rank != proj.rank:
        raise AssertionError(f"{pd.model.name}: fast path differs from the numpy path by "
                             f"{err:.3g}")
    return err


def _entries(robot, frames, guess, rng, folder: Path) -> list[dict]:
    model = load_model(robot)
    pd = ProjectedDynamics(model)
    q = pd.project_position(np.array(guess, float)).q
    v = pd.project_velocity(q, rng.normal(size=model.nv))
    tau = rng.normal(size=model.nv)
    err = _check_identity(pd, q, v, tau)
    base = PinocchioConstraintDynamics(_point_closure_model(robot, frames, folder))
    base.acceleration(q, v, tau)
    baseline = "pin.constraintDynamics (3-D point closure)"
    fd = ratio_entry(f"{robot} forward_dynamics", lambda: pd.forward_dynamics_result(q, v, tau),
                     lambda: base.acceleration(q, v, tau), baseline, TARGET, timer=TIMER)
    fd["max_rel_diff_vs_numpy_path"] = err
    acc = ratio_entry(f"{robot} acceleration", lambda: pd.acceleration(q, v, tau),
                      lambda: base.acceleration(q, v, tau), baseline, TARGET, timer=TIMER)
    for e in (fd, acc):
        e["timer"] = TIMER.__name__
    return [fd, acc]


def _chain(n: int) -> pin.Model:
    """An n-link serial chain of alternating y/z revolute joints, 1 kg boxes 0.3 m long."""
    model, parent = pin.Model(), 0
    for i in range(n):
        joint = pin.JointModelRZ() if i % 2 else pin.JointModelRY()
        parent = model.addJoint(parent, joint,
                                pin.SE3(np.eye(3), np.array([0.0, 0.0, 0.3])), f"j{i}")
        model.appendBodyToJoint(parent,
                                pin.Inertia.FromBox(1.0, 0.05, 0.05, 0.3), pin.SE3.Identity())
    return model


def _mass_solve_entries(rng) -> list[dict]:
    """``M^-1 X`` by pinocchio's tree algorithms against crba + LAPACK Cholesky (ratio
    sparse/dense)."""
    models = [(name, load_model(name).pin_model) for name in
              ("slider_crank", "five_bar", "arm7", "dual_arm_load")]
    models += [("humanoid (pinocchio sample)", pin.buildSampleModelHumanoid()),
               ("15-link chain", _chain(15)), ("30-link chain", _chain(30)),
               ("60-link chain", _chain(60))]
    out = []
    for name, pm in models:
        data = pm.createData()
        q = pin.neutral(pm)
        q[:] = pin.integrate(pm, q, rng.uniform(-1.0, 1.0, pm.nv))
        for k in (1, 3):
            X = rng.normal(size=(pm.nv, k))
            dense = inverse_mass_product(pm, data, q, X, "dense")
            sparse = inverse_mass_product(pm, data, q, X, "sparse")
            err = float(np.max(np.abs(sparse - dense)) / np.max(np.abs(dense)))
            M = pin.crba(pm, data, q)
            # backward error
            res = float(np.linalg.norm(M @ sparse - X)
                        / (np.linalg.norm(M) * np.linalg.norm(sparse) + np.linalg.norm(X)))
            if res > 1e-13:
                raise AssertionError(f"{name}: sparse M^-1 X has a residual of {res:.3g}")
            e = ratio_entry(f"{name} (nv {pm.nv}) M^-1 X, {k} column(s)",
                            lambda a=(pm, data, q, X): inverse_mass_product(*a, "sparse"),
                            lambda a=(pm, data, q, X): inverse_mass_product(*a, "dense"),
                            "crba + LAPACK dposv (dense)", number=1000, repeat=5)
            e["nv"], e["columns"], e["max_rel_diff"] = pm.nv, k, err
            e["auto_uses"] = "sparse" if pm.nv >= SPARSE_MASS_MIN_NV else "dense"
            out.append(e)
    return out


def _velocity_projection_entries(rng) -> list[dict]:
    """The mass-metric ``project_velocity`` end to end, sparse against dense mass solves."""
    out = []
    for robot, guess in (("five_bar", CASES["five_bar"][1]), ("dual_arm_load", None)):
        model = load_model(robot)
        pds = {s: ProjectedDynamics(model, settings=ProjectionSettings(mass_solver=s))
               for s in ("dense", "sparse")}
        pd = pds["dense"]
        q = pd.project_position(np.array(guess, float) if guess else model.neutral()).q
        v = rng.normal(size=model.nv)
        w = {s: p.project_velocity(q, v) for s, p in pds.items()}
        err = float(np.max(np.abs(w["sparse"] - w["dense"])))
        if err > 1e-10 * max(1.0, float(np.max(np.abs(w["dense"])))):
            raise AssertionError(f"{robot}: project_velocity sparse/dense differ by {err:.3g}")
        e = ratio_entry(f"{robot} project_velocity (mass metric)",
                        lambda p=pds["sparse"], q=q, v=v: p.project_velocity(q, v),
                        lambda p=pds["dense"], q=q, v=v: p.project_velocity(q, v),
                        "same, mass_solver='dense'", number=1000, repeat=5)
        e["nv"], e["rank"] = model.nv, pd.projector(q).rank
        out.append(e)
    return out


def _chain_entries(rng, folder: Path) -> list[dict]:
    """One forward-dynamics call on the n-link chain closed at its tip (planar point closure)
    against ``pin.constraintDynamics`` on the same chain closed by a 3-D point, at each n of
    :data:`CHAIN_N`, then the log-log slopes of both times over n.  Before timing, the
    accelerations are checked against pinocchio's and the redundant closure set (planar point
    plus revolute, 7 rows of rank 2) against the single point closure."""
    out, ours, theirs = [], [], []
    for n in CHAIN_N:
        pd = ProjectedDynamics(closed_chain_model(n, folder, "point"))
        q = pd.project_position(zigzag(n)).q
        v = pd.project_velocity(q, rng.normal(size=n))
        tau = rng.normal(size=n)
        res = pd.forward_dynamics_result(q, v, tau)
        base = PinocchioConstraintDynamics(closed_chain_model(n, folder, "spherical"))
        red_dyn = ProjectedDynamics(closed_chain_model(n, folder, "redundant"))
        red = red_dyn.forward_dynamics_result(q, v, tau)
        scale = max(1.0, float(np.max(np.abs(res.a))))
        err = float(np.max(np.abs(res.a - base.acceleration(q, v, tau)))) / scale
        err_red = float(np.max(np.abs(res.a - red.a))) / scale
        if not (res.success and red.success and res.rank == red.rank == 2) or \
                max(err, err_red) > CHAIN_AGREE:
            raise AssertionError(f"chain {n}: forward dynamics differ from pinocchio by "
                                 f"{err:.3g}, redundant set by {err_red:.3g} "
                                 f"(ranks {res.rank}, {red.rank})")
        number = max(50, 20000 // n)
        e = ratio_entry(f"{n}-link closed chain forward_dynamics",
                        lambda p=pd, q=q, v=v, t=tau: p.forward_dynamics_result(q, v, t),
                        lambda b=base, q=q, v=v, t=tau: b.acceleration(q, v, t),
                        "pin.constraintDynamics (3-D point closure)",
                        CHAIN_TARGET if n == CHAIN_N[-1] else None, number=number, repeat=5,
                        timer=TIMER)
        e.update(timer=TIMER.__name__, n=n, rows=pd.constraints.n_rows, rank=res.rank,
                 max_rel_diff_vs_pinocchio=err, max_rel_diff_redundant_set=err_red)
        out.append(e)
        ours.append(e["time_us"])
        theirs.append(e["baseline_time_us"])
    logn = np.log(np.array(CHAIN_N, float))
    slope = float(np.polyfit(logn, np.log(ours), 1)[0])
    big = np.array(CHAIN_N) >= 50
    slope_big = float(np.polyfit(logn[big], np.log(np.array(ours)[big]), 1)[0])
    out.append({"name": "closed chain: log-log slope of the time over n",
                "n": list(CHAIN_N), "slope": slope, "slope_n_ge_50": slope_big,
                "baseline_slope": float(np.polyfit(logn, np.log(theirs), 1)[0]),
                "baseline_slope_n_ge_50": float(np.polyfit(logn[big],
                                                           np.log(np.array(theirs)[big]), 1)[0]),
                "target_slope": SLOPE_TARGET,  # over all n and over n >= 50
                "meets_target": bool(max(slope, slope_big) <= SLOPE_TARGET)})
    return out


def run() -> list[dict]:
    rng = np.random.default_rng(0)
    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        for robot, (frames, guess) in CASES.items():
            entries += _entries(robot, frames, guess, rng, Path(tmp))
        entries += _chain_entries(rng, Path(tmp))
    entries += _mass_solve_entries(rng)
    entries += _velocity_projection_entries(rng)
    return entries
