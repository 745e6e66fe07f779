"""Joint reaction wrenches (requirements tool, NASA CR-165977 App. B) and the requirements CLI.

The oracle is a recursive Newton-Euler written here from the URDF XML alone
(xml.etree; no pinocchio): world-frame vectors throughout, outward recursion for
the link kinematics (CR-165977 B-6..B-9, with the B-9 reading of docs/derivations.md),
inward recursion for the wrenches (B-12, B-13, with m (a - g)).  Fixed joints are
rigid attachments (separate bodies in the oracle, merged into their parent by
pinocchio).  For each moving joint it gives the wrench that the parent applies on
the child, about the child frame's origin (the joint origin), in child-frame axes —
the convention of :meth:`RigidDynamics.reaction_wrenches`.
"""

import csv
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest
from conftest import random_state

from multibody_control.cli import main
from multibody_control.trajectories import read_trajectory_csv, rest_to_rest
from multibody_dynamics.errors import InputError, MultibodyError
from multibody_dynamics.requirements import COMPONENTS, requirements_analysis
from multibody_dynamics.rigid import Payload, RigidDynamics


# ---------------------------------------------------------------- the oracle
def _floats(text, default):
    if text is None:
        return np.array(default, float)
    return np.array([float(x) for x in text.split()])


def _rpy(r, p, y):
    """URDF fixed-axis roll-pitch-yaw: R = Rz(y) Ry(p) Rx(r)."""
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def _axis_angle(axis, angle):
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def _origin(elem):
    o = elem.find("origin") if elem is not None else None
    if o is None:
        return np.zeros(3), np.eye(3)
    return _floats(o.get("xyz"), [0, 0, 0]), _rpy(*_floats(o.get("rpy"), [0, 0, 0]))


class UrdfTree:
    """Links (mass, CoM, inertia) and joints of a URDF, in parent-before-child order."""

    def __init__(self, path):
        root = ET.parse(path).getroot()
        self.links = {}
        for link in root.findall("link"):
            inertial = link.find("inertial")
            if inertial is None:
                self.links[link.get("name")] = (0.0, np.zeros(3), np.zeros((3, 3)))
                continue
            com, rot = _origin(inertial)
            i = inertial.find("inertia")
            g = {k: float(i.get(k, 0.0)) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
            inertia = np.array([[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]],
                                [g["ixz"], g["iyz"], g["izz"]]])
            mass = float(inertial.find("mass").get("value"))
            self.links[link.get("name")] = (mass, com, rot @ inertia @ rot.T)
        joints = []
        for j in root.findall("joint"):
            xyz, rot = _origin(j)
            axis = _floats(j.find("axis").get("xyz") if j.find("axis") is not None else None,
                           [1, 0, 0])
            joints.append(dict(name=j.get("name"), type=j.get("type"), xyz=xyz, rot=rot,
                               axis=axis / np.linalg.norm(axis),
                               parent=j.find("parent").get("link"),
                               child=j.find("child").get("link")))
        children = {j["child"] for j in joints}
        roots = [n for n in self.links if n not in children]
        assert len(roots) == 1, roots
        self.root, self.joints = roots[0], []
        frontier = [self.root]
        while frontier:  # breadth first: every parent before its children
            parent = frontier.pop(0)
            for j in joints:
                if j["parent"] == parent:
                    assert j["type"] in ("revolute", "prismatic", "fixed"), j["type"]
                    self.joints.append(j)
                    frontier.append(j["child"])


def newton_euler(tree, q, v, a, gravity, extra_bodies=(), loads=()):
    """Per joint name: (R_child, o_child, f, n) in world axes, n about o_child.

    q, v, a: dicts joint name -> value (moving joints).  extra_bodies: (link, mass,
    com in link frame, inertia about the CoM in link axes); loads: (link, force in world
    axes, application point in link frame, torque in world axes).
    """
    # outward: pose, angular velocity/acceleration, origin velocity/acceleration of every link
    R, o = {tree.root: np.eye(3)}, {tree.root: np.zeros(3)}
    w, dw = {tree.root: np.zeros(3)}, {tree.root: np.zeros(3)}
    vo, ao = {tree.root: np.zeros(3)}, {tree.root: np.zeros(3)}
    for j in tree.joints:
        p, c = j["parent"], j["child"]
        Rj = R[p] @ j["rot"]
        oj = o[p] + R[p] @ j["xyz"]
        u = Rj @ j["axis"]  # joint axis, world axes (fixed in both parent and child)
        qj, vj, aj = (q.get(j["name"], 0.0), v.get(j["name"], 0.0), a.get(j["name"], 0.0))
        w[c], dw[c] = w[p].copy(), dw[p].copy()
        R[c], o[c] = Rj, oj
        if j["type"] == "revolute":
            R[c] = Rj @ _axis_angle(j["axis"], qj)
            w[c] = w[p] + u * vj
            dw[c] = dw[p] + u * aj + np.cross(w[p], u * vj)
        elif j["type"] == "prismatic":
            o[c] = oj + u * qj
        r = o[c] - o[p]
        vo[c] = vo[p] + np.cross(w[p], r)
        ao[c] = ao[p] + np.cross(dw[p], r) + np.cross(w[p], np.cross(w[p], r))
        if j["type"] == "prismatic":  # sliding: relative, Coriolis and relative acceleration
            vo[c] = vo[c] + u * vj
            ao[c] = ao[c] + 2 * np.cross(w[p], u * vj) + u * aj

    # body loads: net wrench m (a_c - g), I dw + w x I w, about each link origin, world axes
    bodies = [(name, *tree.links[name]) for name in tree.links] + list(extra_bodies)
    F = {name: np.zeros(3) for name in tree.links}
    N = {name: np.zeros(3) for name in tree.links}
    for link, m, com, inertia in bodies:
        rc = R[link] @ com
        ac = ao[link] + np.cross(dw[link], rc) + np.cross(w[link], np.cross(w[link], rc))
        Iw = R[link] @ inertia @ R[link].T
        f = m * (ac - gravity)
        F[link] = F[link] + f
        N[link] = N[link] + Iw @ dw[link] + np.cross(w[link], Iw @ w[link]) + np.cross(rc, f)
    for link, force, point, torque in loads:  # applied loads enter with the opposite sign
        F[link] = F[link] - force
        N[link] = N[link] - np.cross(R[link] @ point, force) - torque

    # inward: the wrench on each child's subtree is what its joint transmits
    out = {}
    for j in reversed(tree.joints):
        p, c = j["parent"], j["child"]
        out[j["name"]] = (R[c], o[c], F[c].copy(), N[c].copy())
        F[p] = F[p] + F[c]
        N[p] = N[p] + N[c] + np.cross(o[c] - o[p], F[c])
    return out


def oracle_wrenches(model, q, v, a, payload=None):
    """(njoints, 6) wrenches in the convention of RigidDynamics.reaction_wrenches."""
    assert model.nq == model.nv  # revolute and prismatic joints only: q index == v index
    tree = UrdfTree(model.urdf_path)
    named = [{n: x[model.joint_index(n)] for n in model.joint_names} for x in (q, v, a)]
    extra, loads = [], []
    if payload is not None:
        link = payload.frame or model.end_effector
        com = np.array(payload.com)
        extra.append((link, payload.mass, com, np.asarray(payload.inertia)))
        point = com if payload.force_point is None else np.array(payload.force_point)
        loads.append((link, np.array(payload.force), point, np.array(payload.torque)))
    res = newton_euler(tree, *named, np.asarray(model.gravity, float), extra, loads)
    rows = []
    for name in model.joint_names:
        rot, _, f, n = res[name]
        rows.append(np.concatenate([rot.T @ f, rot.T @ n]))
    return np.array(rows), tree


def joint_axes(model, tree):
    """Per moving joint, the unit 6-vector selecting its actuated component (child axes)."""
    sel = []
    for name in model.joint_names:
        j = next(x for x in tree.joints if x["name"] == name)
        s = np.zeros(6)
        if j["type"] == "prismatic":
            s[:3] = j["axis"]  # a slider carries the force along its axis
        else:
            s[3:] = j["axis"]  # a hinge carries the torque about its axis
        sel.append(s)
    return np.array(sel)


# ---------------------------------------------------------------- reaction wrenches
ROBOTS = ["arm7", "passive_arm", "cart_double_pendulum"]


def random_payload(rng, model):
    spd = rng.uniform(-1, 1, (3, 3))
    return Payload(
        mass=rng.uniform(0.5, 5.0),
        com=tuple(rng.uniform(-0.1, 0.1, 3)),
        inertia=0.01 * (spd @ spd.T + np.eye(3)),
        force=tuple(rng.uniform(-20, 20, 3)),
        force_point=tuple(rng.uniform(-0.2, 0.2, 3)),
        torque=tuple(rng.uniform(-5, 5, 3)),
    )


def _scale(w):
    return 1.0 + np.max(np.abs(w))


@pytest.mark.parametrize("with_payload", [False, True], ids=["bare", "payload"])
@pytest.mark.parametrize("name", ROBOTS)
def test_reaction_wrenches_match_independent_newton_euler(models, rng, name, with_payload):
    model = models[name]
    dyn = RigidDynamics(model)
    for _ in range(5):
        q, v, a = random_state(model, rng, scale=2.0)
        payload = random_payload(rng, model) if with_payload else None
        wrenches, tau = dyn.reaction_wrenches(q, v, a, payload)
        expected, tree = oracle_wrenches(model, q, v, a, payload)
        assert wrenches.shape == (len(model.joint_names), 6)
        # Two different round-off paths (spatial algebra vs world-frame vectors) through at
        # most 8 bodies; measured <= 2e-15 of the largest component, tolerance 1e-13 of it
        np.testing.assert_allclose(wrenches, expected, rtol=0, atol=1e-13 * _scale(expected))
        # the axis components are the joint forces of the EoM (actuation + springs)
        axial = np.einsum("jk,jk->j", joint_axes(model, tree), wrenches)
        np.testing.assert_allclose(axial, tau + dyn.spring_forces(q, v), rtol=0,
                                   atol=1e-13 * _scale(expected))  # same round-off argument
        if payload is None:
            np.testing.assert_allclose(tau, dyn.inverse_dynamics(q, v, a), rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize("name", ROBOTS)
def test_statics_first_joint_carries_the_weight(models, rng, name):
    """At rest the first joint holds the whole weight (minus the payload's external force)."""
    model = models[name]
    dyn = RigidDynamics(model)
    pm, data = model.pin_model, model.create_data()
    zero = np.zeros(model.nv)
    for payload in (None, random_payload(rng, model)):
        q = random_state(model, rng)[0]
        wrenches, tau = dyn.reaction_wrenches(q, zero, zero, payload)
        pin.forwardKinematics(pm, data, q)
        f_world = data.oMi[1].rotation @ wrenches[0, :3]
        mass = model.total_mass() + (payload.mass if payload else 0.0)
        applied = np.array(payload.force) if payload else np.zeros(3)
        # sum of forces on the whole robot: f + m g + F_ext = 0; round-off of O(100 N) terms
        np.testing.assert_allclose(f_world, -mass * model.gravity - applied, rtol=0, atol=1e-10)
        # static holding torques: axis components == gravity (+ payload) load == returned tau
        _, tree = oracle_wrenches(model, q, zero, zero)
        axial = np.einsum("jk,jk->j", joint_axes(model, tree), wrenches)
        np.testing.assert_allclose(axial, tau + dyn.spring_forces(q, zero), rtol=0, atol=1e-10)
        if payload is None:
            np.testing.assert_allclose(tau, dyn.gravity_forces(q) - dyn.spring_forces(q, zero),
                                       rtol=0, atol=1e-10)  # round-off, forces up to ~1e3


def test_payload_weight_equals_a_heavier_link(models, rng):
    """A payload with no external load is just mass: same wrenches as the oracle's extra body."""
    model = models["arm7"]
    dyn = RigidDynamics(model)
    q, v, a = random_state(model, rng)
    payload = Payload(mass=3.0, com=(0.0, 0.0, 0.05))
    w_pay, _ = dyn.reaction_wrenches(q, v, a, payload)
    w_bare, _ = dyn.reaction_wrenches(q, v, a)
    # a 3 kg load changes every wrench (it sits beyond the last joint)
    assert np.all(np.linalg.norm(w_pay - w_bare, axis=1) > 1.0)
    np.testing.assert_allclose(w_pay, oracle_wrenches(model, q, v, a, payload)[0],
                               rtol=0, atol=1e-10)  # round-off, components up to ~1e2


# ---------------------------------------------------------------- requirements analysis
def _motion(model, n=41, duration=1.0, seed=3):
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, duration, n)
    q0 = model.q_rest.copy()
    return rest_to_rest(t, q0, q0 + rng.uniform(-1, 1, model.nq), 0.0, duration)


def test_requirements_analysis_tables_and_files(models, tmp_path):
    model = models["passive_arm"]
    traj = _motion(model)
    payload = Payload(mass=1.5, com=(0.0, -0.05, 0.0))
    res = requirements_analysis(model, traj.t, traj.q, traj.v, traj.a, payload)
    n, nj = traj.t.size, len(model.joint_names)
    assert res.wrenches.shape == (n, nj, 6) and res.tau.shape == (n, model.nv)
    dyn = RigidDynamics(model)
    for k in (0, n // 3, n - 1):
        w, tau = dyn.reaction_wrenches(traj.q[k], traj.v[k], traj.a[k], payload)
        np.testing.assert_array_equal(res.wrenches[k], w)  # the same computation, sample by sample
        np.testing.assert_array_equal(res.tau[k], tau)
    # an arbitrary joint motion needs effort on the passive joint: reported, not hidden
    beta = model.joint_index("beta")
    assert res.passive_effort == pytest.approx(np.max(np.abs(res.tau[:, beta])), rel=1e-15)
    assert res.passive_effort > 1.0 and "not reachable" in res.format_peaks()

    columns = ["t"] + [f"{j}.{c}" for j in model.joint_names for c in COMPONENTS]
    assert res.columns() == columns
    path = res.to_csv(tmp_path / "req.csv")
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == columns
    table = np.array(rows[1:], dtype=float)
    # the CSV rounds to 9 decimals: absolute error <= 5e-10 plus float printing
    np.testing.assert_allclose(table, res.table(), rtol=0, atol=1e-9)
    np.testing.assert_allclose(table[:, 0], traj.t, rtol=0, atol=1e-15)  # 0.025 k prints exactly

    peaks = res.peaks()
    assert [p["joint"] for p in peaks] == list(model.joint_names)
    for j, p in enumerate(peaks):
        w = res.wrenches[:, j, :]
        for k, comp in enumerate(COMPONENTS):
            assert p[comp] == np.max(np.abs(w[:, k]))
        fn = np.linalg.norm(w[:, :3], axis=1)
        assert p["force"] == fn.max() and p["t_force"] == traj.t[np.argmax(fn)]
        tn = np.linalg.norm(w[:, 3:], axis=1)
        assert p["torque"] == tn.max() and p["t_torque"] == traj.t[np.argmax(tn)]
    text = res.format_peaks()
    assert all(name in text for name in model.joint_names)

    png = res.plot(tmp_path / "req.png", title="test")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("bad, words", [
    (lambda tr: (tr.t[::-1], tr.q, tr.v, tr.a), ["t", "increasing"]),
    (lambda tr: (tr.t, tr.q[:, :2], tr.v, tr.a), ["q", "expected shape"]),
    (lambda tr: (tr.t, tr.q, tr.v, np.full_like(tr.a, np.nan)), ["a", "non-finite"]),
])
def test_requirements_analysis_bad_input(models, bad, words):
    model = models["cart_double_pendulum"]
    with pytest.raises(MultibodyError) as err:
        requirements_analysis(model, *bad(_motion(model, n=11)))
    assert all(w in str(err.value) for w in words), str(err.value)


def test_requirements_analysis_rejects_closed_loops(models):
    model = models["four_bar"]
    z = np.zeros((3, model.nq))
    with pytest.raises(InputError, match="closure"):
        requirements_analysis(model, np.arange(3.0), z, z, z)


# ---------------------------------------------------------------- the CLI
@pytest.mark.slow
def test_cli_requirements_demo(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["requirements", "cart_double_pendulum", "demo", "--out", str(out), "--quiet",
                 "--payload-mass", "0.2", "--payload-force", "0", "-1", "0"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    csv_path = out / "cart_double_pendulum_requirements.csv"
    png_path = out / "cart_double_pendulum_requirements.png"
    assert csv_path.is_file() and png_path.stat().st_size > 1000
    header = csv_path.read_text().splitlines()[0].split(",")
    assert header[:2] == ["t", "x.fx"] and header[-1] == "beta.tz" and len(header) == 1 + 3 * 6
    assert "peak joint reaction loads" in captured.out and "payload 0.2 kg" in captured.out


def _write_csv(path, header, rows):
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.mark.parametrize("case, words", [
    ("missing", ["nowhere.csv", "not found"]),
    ("no_joint", ["q.beta", "missing column"]),
    ("not_monotonic", ["'t'", "strictly increasing"]),
])
def test_cli_requirements_bad_input(tmp_path, capsys, case, words):
    t = np.linspace(0, 1, 8)
    full = ["t", "q.x", "q.alpha", "q.beta"]
    rows = np.column_stack([t, 0.1 * t, 0.2 * t, -0.1 * t])
    if case == "missing":
        path = tmp_path / "nowhere.csv"
    elif case == "no_joint":
        path = _write_csv(tmp_path / "traj.csv", full[:3], rows[:, :3].tolist())
    else:
        rows[[2, 3], 0] = rows[[3, 2], 0]
        path = _write_csv(tmp_path / "traj.csv", full, rows.tolist())
    code = main(["requirements", "cart_double_pendulum", str(path), "--out", str(tmp_path / "o"),
                 "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("multibody requirements: error:"), err
    assert all(w in lines[0] for w in words), err
    assert not (tmp_path / "o").exists()  # nothing written on bad input


def _write_positions(path, t, q, names):
    header = ["t"] + [f"q.{n}" for n in names]
    return _write_csv(path, header, np.column_stack([t, q]).round(12).tolist())


def test_csv_reader_differentiates_positions(tmp_path):
    """v and a from positions only, against the analytic derivatives of a quintic rest-to-rest.

    The reader interpolates the positions with a quintic spline (smoothing factor 0 for exact
    data) and differentiates it.  Measured on this data (printed to 12 decimals, 5 ms
    sampling): 2e-10 of the peak velocity, 5e-8 of the peak acceleration, limited by the
    rounding of the file (1e-12 / h^2 ~ 4e-8).  Tolerances: 1e-8 and 1e-6 of the peaks,
    20x the measured error.
    """
    names = ("x", "alpha", "beta")
    t = np.linspace(0.0, 1.0, 201)
    traj = rest_to_rest(t, np.zeros(3), np.array([0.5, 1.2, -0.8]), 0.0, 1.0)
    got = read_trajectory_csv(_write_positions(tmp_path / "q.csv", t, traj.q, names), names)
    np.testing.assert_allclose(got.q, traj.q, rtol=0, atol=1e-12)  # printed to 12 decimals
    np.testing.assert_allclose(got.v, traj.v, rtol=0, atol=1e-8 * np.abs(traj.v).max())
    np.testing.assert_allclose(got.a, traj.a, rtol=0, atol=1e-6 * np.abs(traj.a).max())
    # given v and a columns are used as they are (no differentiation)
    header = (["t"] + [f"{p}.{n}" for p in "qva" for n in names])
    path = _write_csv(tmp_path / "qva.csv", header,
                      np.column_stack([t, traj.q, traj.v, traj.a]).round(12).tolist())
    got = read_trajectory_csv(path, names)
    np.testing.assert_allclose(got.a, traj.a, rtol=0, atol=1e-12)  # printed to 12 decimals


def test_csv_reader_acceleration_at_a_moving_end(tmp_path):
    """q = sin(2 t) on [0, 1]: a(1) = -4 sin 2 = -3.64 rad/s^2, not zero (no natural-spline
    end)."""
    t = np.linspace(0.0, 1.0, 201)
    got = read_trajectory_csv(_write_positions(tmp_path / "s.csv", t, np.sin(2 * t)[:, None],
                                               ("x",)), ("x",))
    # 1 % of the peak acceleration (4 rad/s^2): a working differentiator meets it easily
    np.testing.assert_allclose(got.a[:, 0], -4 * np.sin(2 * t), rtol=0, atol=0.04)
