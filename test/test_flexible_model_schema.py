"""The flexible model schema with closures (``closures:``, ``actuated:``, ``independent:``) and
segmented beams (``segments:``, ``frame:``, ``masses:``): config/robots/flexible_parallel_tool.yaml
is data, and the model read from it is the one the Python API builds from the same numbers."""

import numpy as np
import pytest

from multibody_dynamics.errors import InputError, ModelError
from multibody_dynamics.flexible.beam import BeamSection
from multibody_dynamics.flexible.closed import ClosedFlexibleChain, PlanarClosure
from multibody_dynamics.flexible.loader import beam_modal_data, load_flexible_model
from multibody_dynamics.flexible.segmented import (
    ArmSegment,
    LumpedMass,
    segmented_arm_modal_data,
)
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


def test_parallel_tool_parameters_edit_the_file(rng):
    """load_robot(..., parameters=...) = the file with the keys its parameters: section names
    changed (the model built here independently from the changed numbers)."""
    small = load_robot("flexible_parallel_tool", backend="numpy", parameters=dict(
        modes_long=3, modes_short=2, link_elements=6, rayleigh_alpha=0.0, rayleigh_beta=2e-5))
    assert_same_model(small, python_parallel_tool(3, 2, 6, (0.0, 2e-5)), rng, states=2)
    with pytest.raises(InputError, match=r"unknown \['cart_mass'\].*declares \['link_elements'"):
        load_robot("flexible_parallel_tool", parameters={"cart_mass": 2.0})
    with pytest.raises(ModelError, match=r"bodies\[2\]\.beam\.modes"):
        load_robot("flexible_parallel_tool", parameters={"modes_long": 0})
    with pytest.raises(InputError, match="rigid model, which declares no parameters"):
        load_robot("four_bar", parameters={"modes_long": 3})


def test_parallel_tool_outputs_from_the_file():
    """The file's outputs: selections of s1, alpha (rigid) and s1, s2 (collocated) with Γ = 0,
    and the combined output (6.39) whose Γ is the rotation of the long arm's chord (frame origin
    to tool point), here by central differences of the tool point (chain kinematics)."""
    tool = load_robot("flexible_parallel_tool", parameters=dict(modes_long=3, modes_short=2,
                                                                link_elements=6))
    names = tool.joint_names  # s1, s2, alpha, beta
    assert set(tool.outputs) == {"combined", "rigid", "collocated"}
    for key, joints in (("combined", ("s1", "alpha")), ("rigid", ("s1", "alpha")),
                        ("collocated", ("s1", "s2"))):
        H, gamma = tool.outputs[key]
        np.testing.assert_array_equal(H, np.eye(4)[[names.index(j) for j in joints]])
        assert gamma.shape == (2, tool.nq_e)
        if key != "combined":
            np.testing.assert_array_equal(gamma, 0.0)
    q0 = np.r_[0.1, 0.8, 0.7, 2.4, np.zeros(tool.nq_e)]

    def chord_angle(q):  # angle of the line cart 1 -> tool point, minus alpha
        d = tool.chain.point_position(q, "long_arm") - np.array([q[0], 0.0])
        return np.arctan2(d[1], d[0]) - q[2]

    h = 1e-6
    fd = [(chord_angle(q0 + h * e) - chord_angle(q0 - h * e)) / (2 * h)
          for e in np.eye(tool.nv)[tool.nq_r:]]
    _, gamma = tool.outputs["combined"]
    np.testing.assert_array_equal(gamma[0], 0.0)  # s1: no elastic term
    # O(h^2) truncation and eps / h round-off of entries ~1 rad per unit q_e
    np.testing.assert_allclose(gamma[1], fd, rtol=0, atol=1e-8 * np.abs(fd).max())
    assert np.abs(gamma[1, 3:]).max() == 0.0 and np.abs(gamma[1, :3]).min() > 0.1  # long arm


def test_former_names_of_the_machine_tool():
    """The builder and the output rule that lived in closed.py still work (with a
    DeprecationWarning); the names moved to multibody_control are importable from the old place
    with a DeprecationWarning naming the new one, and are the new place's objects."""
    import multibody_control.inversion.closed_flexible as new_module
    import multibody_dynamics.flexible.closed as closed

    kw = dict(modes_long=3, modes_short=1, link_elements=6)
    new = load_robot("flexible_parallel_tool", parameters=kw)
    with pytest.warns(DeprecationWarning, match="parameters"):
        old = closed.flexible_parallel_tool(**kw)
    q = np.linspace(-0.1, 0.1, new.nv)
    np.testing.assert_array_equal(old.mass_matrix(q), new.mass_matrix(q))  # same file, same code
    with pytest.warns(DeprecationWarning, match="outputs"):
        outs = closed.parallel_tool_outputs(new)
    assert outs.keys() == new.outputs.keys()
    for name in ("rigid_task_path", "point_error", "PARALLEL_TOOL_TASK"):
        new_place = f"multibody_control.inversion.closed_flexible.{name}"
        with pytest.warns(DeprecationWarning, match=f"closed.{name} is deprecated; use "
                                                    f"{new_place}$"):
            assert getattr(closed, name) is getattr(new_module, name)
    with pytest.warns(DeprecationWarning, match="use multibody_control.inversion.closed_flexible"):
        from multibody_dynamics.flexible.closed import point_error
    assert point_error is new_module.point_error
    with pytest.warns(DeprecationWarning, match="parameters: section"):
        from multibody_dynamics.flexible.closed import PARALLEL_TOOL_OVERRIDES
    # the keys of the former table (closed.py before the tool became data, commit f69fe4f^),
    # each now described by the key paths it sets in the model file
    assert set(PARALLEL_TOOL_OVERRIDES) == {"modes_long", "modes_short", "link_elements",
                                            "rayleigh_alpha", "rayleigh_beta", "theory"}
    assert PARALLEL_TOOL_OVERRIDES["modes_long"] == "bodies.long_arm.beam.modes"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        closed.nothing  # noqa: B018


def test_segmented_arms_keep_their_former_import_path():
    """ArmSegment, LumpedMass and segmented_arm_modal_data moved to flexible/segmented.py;
    closed.py re-exports the same objects."""
    import multibody_dynamics.flexible.closed as closed
    import multibody_dynamics.flexible.segmented as segmented

    for name in ("ArmSegment", "LumpedMass", "segmented_arm_modal_data"):
        assert getattr(closed, name) is getattr(segmented, name)


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
    ("independent: [th1]", "independent: [th1]\noutputs: {y: {joints: [th1]}}",
     ["outputs.y.joints", "expected 3 joints (one per input)"]),
    ("independent: [th1]", "independent: [th1]\n"
     "outputs: {y: {joints: [th1, th2, th3], chord: {th4: link2}}}",
     ["outputs.y.chord.th4", "unknown key"]),
    ("independent: [th1]", "independent: [th1]\n"
     "outputs: {y: {joints: [th1, th2, th3], chord: {th2: link9}}}",
     ["outputs.y.chord", "no body 'link9'"]),
    ("independent: [th1]", "independent: [th1]\nparameters: {n: [bodies.link9.beam.modes]}",
     ["parameters.n[0]", "nothing at 'bodies.link9'"]),
    ("independent: [th1]", "independent: [th1]\nparameters: {n: bodies.link2}",
     ["parameters.n[0]", "'bodies' is not a mapping"]),
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


def test_declared_parameters_and_outputs_of_a_file(tmp_path):
    """A parameter sets every key its paths reach (lists walked by item name: both segments of
    link2 named ``half``); an output row with a chord gets its Γ columns from that body only."""
    text = SEGMENTED.replace("- {length: 0.2, elements: 4,",
                             "- {name: half, length: 0.2, elements: 4,")
    text = text.replace("independent: [th1]", "independent: [th1]\n"
                        "outputs: {tip: {joints: [th1, th2, th3], chord: {th3: link3}}}\n"
                        "parameters: {half_elements: [bodies.link2.beam.segments.half.elements],"
                        " modes: [bodies.link1.beam.modes, bodies.link2.beam.modes]}")
    path = tmp_path / "m.yaml"
    path.write_text(text)
    base = load_flexible_model(path, backend="numpy")
    changed = load_flexible_model(path, backend="numpy",
                                  parameters={"half_elements": 2, "modes": 1})
    # link2: 2 + 2 elements instead of 4 + 4 (9 -> 5 nodes); 1 mode on link1 and link2, and on
    # link3, whose beam is an alias (*bar) of link1's (the anchor caveat of the loader)
    assert base.chain.bodies[1].modal_data.node_positions.shape[0] == 9
    assert changed.chain.bodies[1].modal_data.node_positions.shape[0] == 5
    assert (base.nq_e, changed.nq_e) == (6, 3)
    H, gamma = changed.outputs["tip"]
    np.testing.assert_array_equal(H, np.eye(3))
    link3 = changed.chain.elastic_slices[2]
    np.testing.assert_array_equal(gamma[:2], 0.0)
    np.testing.assert_array_equal(gamma[2, :link3.start - 3], 0.0)
    d = changed.chain.bodies[2].modal_data  # a uniform clamped bar: Γ = w_tip / l (6.34)
    np.testing.assert_allclose(gamma[2, link3.start - 3:], d.node_shapes[-1, 1] / 0.5,
                               rtol=1e-15)
    with pytest.raises(ModelError, match="outputs.*only with closures"):
        bad = tmp_path / "open.yaml"
        bad.write_text(text.split("closures:")[0] + "outputs: {tip: {joints: [th1]}}\n")
        load_flexible_model(bad, backend="numpy")
