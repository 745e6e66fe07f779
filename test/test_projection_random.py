"""Property tests on randomly generated closed-loop models with redundant constraint sets.

Each example builds a random planar chain (3-5 revolute links, random lengths, masses and
section sizes), closes its tip to a world anchor placed where the tip is at a random
configuration, once with a planar point closure (2 rows) and again with a 3-D revolute
closure at the same point (5 more rows): 7 rows of rank 2 for planar motion, a redundant
set.  Oracles: the minimum-norm KKT solution (an independent formulation) and the
acceleration-level constraint A a + gamma = 0.
"""

import importlib.util
import math
import textwrap
from pathlib import Path

import numpy as np
import pinocchio as pin
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multibody_dynamics.constrained_baselines import KKTDynamics
from multibody_dynamics.constraints import Constraints
from multibody_dynamics.model import load_model
from multibody_dynamics.projection import ProjectedDynamics

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("make_robots", ROOT / "tools" / "make_robots.py")
make_robots = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_robots)


def random_loop_model(folder: Path, lengths, masses, q_star):
    """Write a URDF + model YAML of the random chain closed at the tip position of q_star."""
    u = make_robots.Urdf("random_loop", "random planar chain for property tests")
    parent, x0 = "world", 0.0
    for i, (length, mass) in enumerate(zip(lengths, masses)):
        name = f"l{i}"
        u.link(name, mass, com=(length / 2, 0, 0),
               inertia=make_robots.bar_inertia(mass, length, 0.03, 0.02, axis="x"),
               box=(length, 0.03, 0.02), box_origin=(length / 2, 0, 0))
        u.joint(f"j{i}", "revolute", parent, name, xyz=(x0, 0, 0),
                limit=(-4 * math.pi, 4 * math.pi, 10.0, 10.0))
        parent, x0 = name, length
    u.frame("tip", parent, (x0, 0, 0))
    # tip position at q_star (planar chain, angles about z)
    ang = np.cumsum(q_star)
    tip = (np.sum(np.asarray(lengths) * np.cos(ang)), np.sum(np.asarray(lengths) * np.sin(ang)))
    u.frame("anchor", "world", (tip[0], tip[1], 0.0))
    (folder / "r.urdf").write_text(u.text())
    (folder / "r.yaml").write_text(textwrap.dedent("""\
        name: random_loop
        urdf: r.urdf
        gravity: [0.0, -9.81, 0.0]
        closures:
          - {name: point, type: planar_revolute, frame_a: tip, frame_b: anchor}
          - {name: pin, type: revolute, frame_a: tip, frame_b: anchor, axis: [0, 0, 1]}
        """))
    return load_model(folder / "r.yaml")


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(3, 5), seed=st.integers(0, 2**31 - 1))
def test_projection_equals_min_norm_kkt_on_random_redundant_loops(tmp_path_factory, n, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.uniform(0.2, 0.6, n)
    masses = rng.uniform(0.5, 3.0, n)
    q_star = rng.uniform(-1.2, 1.2, n)
    model = random_loop_model(tmp_path_factory.mktemp("loop"), lengths, masses, q_star)
    cons = Constraints(model)
    # the URDF prints the anchor with 10 digits: |phi| ~ 1e-10 at q_star; Newton finishes it
    assert np.max(np.abs(cons.residual(q_star))) < 1e-8
    proj_q = ProjectedDynamics(model, cons).project_position(q_star)
    assert proj_q.success, proj_q.message
    q = proj_q.q
    A = cons.jacobian(q)
    assert A.shape[0] == 7
    # planar motion: the 7 rows span 2 directions (redundant, not an error)
    assert np.linalg.matrix_rank(A, tol=1e-9) == 2
    # admissible random velocity: project a random v onto null(A)
    Pn = np.eye(n) - np.linalg.pinv(A) @ A
    v = Pn @ rng.normal(size=n)
    tau = rng.normal(size=n)
    proj = ProjectedDynamics(model, cons).forward_dynamics_result(q, v, tau)
    kkt = KKTDynamics(model, cons).forward_dynamics_result(q, v, tau)
    assert proj.success and kkt.success
    scale = max(1.0, np.abs(kkt.a).max())
    # two formulations of the same minimum-norm problem: agreement to round-off (1e-9 of scale)
    np.testing.assert_allclose(proj.a, kkt.a, atol=1e-9 * scale)
    A, gamma = cons.jacobian_and_bias(q, v)
    np.testing.assert_allclose(A @ proj.a + gamma, 0.0, atol=1e-9 * scale)
    # the constraint force lies in the row space of A and reproduces the dynamics
    M = pin.crba(model.pin_model, model.create_data(), q)
    h = pin.nonLinearEffects(model.pin_model, model.create_data(), q, v)
    np.testing.assert_allclose(M @ proj.a + h - tau, proj.f_c,
                               atol=1e-8 * max(1.0, np.abs(h).max()))
    np.testing.assert_allclose(Pn @ proj.f_c, 0.0, atol=1e-8 * max(1.0, np.abs(proj.f_c).max()))
