"""The flexible model schema with closures (``closures:``, ``actuated:``, ``independent:``) and
segmented beams (``segments:``, ``frame:``, ``masses:``): config/robots/flexible_parallel_tool.yaml
is data, and the model read from it is the one the Python API builds from the same numbers."""

import numpy as np
import pytest

from multibody_dynamics.errors import InputError, ModelError
from multibody_dynamics.flexible.beam import BeamSection
from multibody_dynamics.flexible.closed import (
    ArmSegment,
    ClosedFlexibleChain,
    LumpedMass,
    PlanarClosure,
    flexible_parallel_tool,
    segmented_arm_modal_data,
)
from multibody_dynamics.flexible.loader import beam_modal_data, load_flexible_model
from multibody_dynamics.flexible.system import ChainBody, FlexibleChain, FlexibleChainConfig
from multibody_dynamics.robot import load_robot


def python_parallel_tool(modes_long=12, modes_short=6, link_elements=16, rayleigh=(0.5, 1.0e-5)):
    """The machine tool (Seifried 2014 Sect. 6.5) built with the Python API from the numbers of
    its model file, independently of the YAML loader; the middle part of the long arm is meshed
    as two 40.5 mm segments (the file: one 81 mm segment of 2 elements, same nodes)."""
    steel = BeamSection.rectangle(0.08, 0.002, E=2.1e11, rho=7850.0, nu=0.3)
    block = BeamSection.rectangle(0.08, 0.03, E=7.0e10, rho=2700.0, nu=0.33)
    link = ArmSegment(0.4, link_elements, steel)
    long_segments = [ArmSegment(0.1, 2, block), link, ArmSegment(0.0405, 1, block),
                     ArmSegment(0.0405, 1, block), link, ArmSegment(0.1, 2, block)]
    middle = 2 + link_elements + 1
    long_data, _ = segmented_arm_modal_data(
        long_segments, modes_long, frame="chord", chord_node=middle,
        masses=[LumpedMass(1.081, 0.5, 2.5e-4)], theory="timoshenko", rayleigh=rayleigh)
    short_data, _ = segmented_arm_modal_data(
        [ArmSegment(0.08, 2, block), link, ArmSegment(0.08, 2, block)], modes_short,
        theory="timoshenko", rayleigh=rayleigh)
    bodies = [ChainBody("cart1", "s1", "prismatic", parent=-1, mass=3.0, inertia=0.03),
              ChainBody("cart2", "s2", "prismatic", parent=-1, mass=3.0, inertia=0.03),
              ChainBody("long_arm", "alpha", parent=0, modal_data=long_data),
              ChainBody("short_arm", "beta", parent=1, modal_data=short_data)]
    chain = FlexibleChain(FlexibleChainConfig(bodies, gravity=(0.0, 0.0), name="tool"),
                          backend="numpy")
    return ClosedFlexibleChain(chain, [PlanarClosure("middle_joint", "short_arm", None,
                                                     "long_arm", middle)],
                               actuated=("s1", "s2"), independent=("s1", "alpha"))


def assert_same_model(a, b, rng, states=4):
    """Same sizes, names, inputs, partitioning, and the same mass matrix, forces and
    constraint terms at random states. Tolerance 1e-12 relative to each quantity's largest
    entry: both sides assemble the same FE matrices from the same numbers and reduce them
    with the same eigensolver, the only difference being how the node positions of the
    middle part are summed (1 ulp); measured: identical to the last bit."""
    assert (a.nq, a.nv, a.nq_r, a.nq_e, a.nc, a.nu) == (b.nq, b.nv, b.nq_r, b.nq_e, b.nc, b.nu)
    assert a.joint_names == b.joint_names and a.coordinate_names == b.coordinate_names
    assert a.input_names == b.input_names and a.independent == b.independent
    np.testing.assert_array_equal(a.B, b.B)
    np.testing.assert_array_equal(a.idx_i, b.idx_i)
    np.testing.assert_array_equal(a.idx_d, b.idx_d)

    def close(x, y):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-12 * max(np.abs(y).max(), 1e-300))

    scale = np.r_[0.3, 0.3, 1.0, 1.0, np.full(a.nq_e, 1e-3)]  # m, rad; elastic ~1 mm
    for _ in range(states):
        q = scale * rng.standard_normal(a.nv) + np.r_[0.0, 0.8, np.pi / 4, 2.4, np.zeros(a.nq_e)]
        v = rng.standard_normal(a.nv) * np.r_[0.2, 0.2, 1.0, 1.0, np.full(a.nq_e, 0.05)]
        u = rng.standard_normal(a.nu)
        close(a.chain.mass_matrix(q), b.chain.mass_matrix(q))
        close(a.chain.nonlinear_effects(q, v), b.chain.nonlinear_effects(q, v))
        close(a.chain.elastic_forces(q, v), b.chain.elastic_forces(q, v))
        for x, y in zip(a.constraint_terms(q, v), b.constraint_terms(q, v)):
            close(x, y)
        close(a.forward_dynamics(q, v, u), b.forward_dynamics(q, v, u))


def test_parallel_tool_file_equals_the_python_model(rng):
    yaml_model = load_robot("flexible_parallel_tool", backend="numpy")
    assert isinstance(yaml_model, ClosedFlexibleChain)
    assert yaml_model.nq == 22 and yaml_model.nq_e == 18  # 4 + 12 + 6, Seifried Sect. 6.5
    assert yaml_model.input_names == ("s1", "s2") and yaml_model.independent == ("s1", "alpha")
    assert yaml_model.chain.config.parents == (-1, -1, 0, 1)  # both carts on the world
    assert_same_model(yaml_model, python_parallel_tool(), rng)


def test_parallel_tool_overrides_edit_the_file(rng):
    """flexible_parallel_tool(**overrides) = the file with those keys changed."""
    small = flexible_parallel_tool(backend="numpy", modes_long=3, modes_short=2,
                                   link_elements=6, rayleigh_alpha=0.0, rayleigh_beta=2e-5)
    assert_same_model(small, python_parallel_tool(3, 2, 6, (0.0, 2e-5)), rng, states=2)
    with pytest.raises(InputError, match="unknown parameters.*cart_mass"):
        flexible_parallel_tool(cart_mass=2.0)
    with pytest.raises(ModelError, match=r"bodies\[2\]\.beam\.modes"):
        flexible_parallel_tool(modes_long=0)


PARALLELOGRAM = """\
name: flexible_parallelogram
gravity: [0.0, -9.81]
bodies:
  - name: link1
    joint: {name: th1}
    beam: &bar {length: 0.5, elements: 8, theory: euler-bernoulli, modes: 2,
                section: {width: 0.02, height: 0.01}, material: {E: 7.0e+10, rho: 2700.0}}
  - name: link2
    joint: {name: th2}
    beam: {length: 0.4, elements: 8, theory: euler-bernoulli, modes: 2,
           section: {width: 0.02, height: 0.01}, material: {E: 7.0e+10, rho: 2700.0}}
  - name: link3
    joint: {name: th3}
    beam: *bar
closures:
  - {name: pin, type: planar_revolute, body_a: link3, point_b: [0.4, 0.0]}
independent: [th1]
"""


def test_a_closed_loop_of_uniform_beams_from_yaml(tmp_path):
    """A loop closed on a world point (the parallelogram of test_flexible_closed): the file
    gives the model the Python API gives."""
    path = tmp_path / "p.yaml"
    path.write_text(PARALLELOGRAM)
    model = load_flexible_model(path, backend="numpy")
    bodies = [ChainBody(f"link{k + 1}", f"th{k + 1}", modal_data=beam_modal_data(
        ln, 8, 0.02, 0.01, 7e10, 2700.0, modes=2, theory="euler-bernoulli"))
        for k, ln in enumerate((0.5, 0.4, 0.5))]
    chain = FlexibleChain(FlexibleChainConfig(bodies, gravity=(0.0, -9.81), name="p"),
                          backend="numpy")
    ref = ClosedFlexibleChain(chain, [PlanarClosure("pin", "link3", point_b=(0.4, 0.0))],
                              independent=["th1"])
    assert model.nc == 2 and model.input_names == ("th1", "th2", "th3")  # default: every joint
    q = np.r_[0.3, -0.3, 0.3 + np.pi, 1e-3 * np.arange(6)]
    v = np.linspace(-1.0, 1.0, model.nv)
    for x, y in zip(model.constraint_terms(q, v), ref.constraint_terms(q, v)):
        np.testing.assert_array_equal(x, y)  # same functions on the same data: bit for bit
    np.testing.assert_array_equal(model.chain.mass_matrix(q), ref.chain.mass_matrix(q))
    # c = r_a - r_b at q = 0: the links along x end at 1.4 m, the world point is (0.4, 0)
    np.testing.assert_allclose(model.constraint_residual(np.zeros(model.nv)), [1.0, 0.0],
                               atol=1e-12)


SEGMENTED = PARALLELOGRAM.replace(
    "    beam: {length: 0.4, elements: 8, theory: euler-bernoulli, modes: 2,\n"
    "           section: {width: 0.02, height: 0.01}, material: {E: 7.0e+10, rho: 2700.0}}\n",
    "    beam:\n"
    "      modes: 2\n"
    "      segments:\n"
    "        - {length: 0.2, elements: 4, section: {width: 0.02, height: 0.01},\n"
    "           material: {E: 7.0e+10, rho: 2700.0}}\n"
    "        - {length: 0.2, elements: 4, section: {width: 0.02, height: 0.03},\n"
    "           material: {E: 7.0e+10, rho: 2700.0}}\n"
    "      frame: {type: chord, position: 0.2}\n"
    "      masses: [{position: 0.4, mass: 0.1}]\n")


@pytest.mark.parametrize("old, new, words", [
    ("independent: [th1]", "independant: [th1]", ["independant", "unknown key"]),
    ("type: planar_revolute", "type: revolute", ["closures[0].type", "planar_revolute"]),
    ("body_a: link3", "body_a: link9", ["closures[0].body_a", "unknown body 'link9'"]),
    ("body_a: link3", "body_a: link3, node_a: 9", ["closures[0].node_a", "out of range"]),
    ("point_b: [0.4, 0.0]", "body_b: link2, position_b: 0.23",
     ["closures[0].position_b", "no node at x = 0.23"]),
    ("point_b: [0.4, 0.0]", "point_b: [0.4]", ["closures[0].point_b", "2 numbers"]),
    ("independent: [th1]", "independent: [th1, th2]", ["independent", "expected 1 joints"]),
    ("independent: [th1]", "actuated: [th1, x]", ["actuated[1]", "unknown joint 'x'"]),
    ("closures:\n  - {name: pin, type: planar_revolute, body_a: link3, point_b: [0.4, 0.0]}\n",
     "", ["independent", "only with closures"]),
    ("frame: {type: chord, position: 0.2}", "frame: {type: chord}",
     ["bodies[1].beam.frame", "node or position"]),
    ("frame: {type: chord, position: 0.2}", "frame: chord", ["bodies[1].beam.frame"]),
    ("frame: {type: chord, position: 0.2}", "frame: {type: chord, node: 99}",
     ["bodies[1].beam.frame.node", "out of range"]),
    ("- {length: 0.2, elements: 4,", "- {length: 0.2, elements: four,",
     ["bodies[1].beam.segments[0].elements", "expected an integer"]),
    ("      modes: 2\n      segments:", "      modes: 2\n      length: 0.4\n      segments:",
     ["bodies[1].beam.length", "either segments"]),
    ("masses: [{position: 0.4, mass: 0.1}]", "masses: [{position: 0.33, mass: 0.1}]",
     ["bodies[1].beam.masses[0].position", "no node"]),
    ("masses: [{position: 0.4, mass: 0.1}]", "masses: [{position: 0.4, mas: 0.1}]",
     ["bodies[1].beam.masses[0].mas", "unknown key"]),
    ("    joint: {name: th2}", "    joint: {name: th2, parent: nowhere}",
     ["bodies[1].joint.parent", "'world'"]),
    ("name: flexible_parallelogram", "name: p\nbuilder: flexible_parallel_tool",
     ["builder", "closures"]),
])
def test_bad_closed_models_name_the_file_and_the_key(tmp_path, old, new, words):
    path = tmp_path / "m.yaml"
    assert old in SEGMENTED
    path.write_text(SEGMENTED.replace(old, new))
    with pytest.raises(ModelError) as info:
        load_flexible_model(path, backend="numpy")
    for word in [str(path)] + words:
        assert word in str(info.value)


def test_segmented_file_loads(tmp_path):
    """The error cases' base file is valid: a chord-frame body of two segments with a mass."""
    path = tmp_path / "m.yaml"
    path.write_text(SEGMENTED)
    model = load_flexible_model(path, backend="numpy")
    data = model.chain.bodies[1].modal_data
    np.testing.assert_allclose(data.node_positions[[0, 4, 8], 0], [0.0, 0.2, 0.4], atol=1e-15)
    # chord frame: node 4 (x = 0.2 m) has no transverse deflection in any mode
    np.testing.assert_array_equal(data.node_shapes[4, 1], 0.0)
    # mass: two bars (0.02 x 0.01 and 0.02 x 0.03 m, 0.2 m, 2700 kg/m^3) + 0.1 kg
    assert data.mass == pytest.approx(2700.0 * 0.2 * 0.02 * (0.01 + 0.03) + 0.1, rel=1e-12)
