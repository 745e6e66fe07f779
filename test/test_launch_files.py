"""Launch files, node parameter files, controllers and ros2_control descriptions.

Runs without a ROS install: the launch files are read with ``ast`` (every argument
described, every file they name shipped, every executable of ours a console script, every
other package an exec_depend), the YAML files with PyYAML and with rcl's own parameter
parser (through rclpy), the xacro files with the ``xacro`` package when it is installed.
Where ``launch`` and ``launch_ros`` are importable, each launch file is also imported and
its ``generate_launch_description()`` called.
"""

import ast
import importlib.util
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml

from multibody_dynamics.model import load_model
from multibody_dynamics.model.resources import is_flexible_file

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "multibody_suite"
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))
NODE_CONFIGS = sorted(p for p in (ROOT / "config").glob("*.yaml"))
ROBOT_FILES = sorted((ROOT / "config" / "robots").glob("*.yaml"))
#: The rigid robots of config/robots/ only: the launch files (robot:=), the nodes, the
#: urdf/<robot>.urdf(.xacro) and config/controllers/<robot>.yaml exist for URDF-backed models.
#: The flexible models in the same folder (a 'bodies' list, see
#: multibody_dynamics.model.resources) have no URDF and are not launchable; they are split off
#: by schema here and checked in test_flexible_models_are_not_robots_for_launch.
ROBOTS = [p.stem for p in ROBOT_FILES if not is_flexible_file(p)]
FLEXIBLE = [p.stem for p in ROBOT_FILES if is_flexible_file(p)]
DATA_DIRS = {"config", "urdf", "launch"}

#: The node parameters (declared by the nodes with these names): name -> type in the YAML.
PARAMETERS = {
    "simulator_node": {
        "robot": str, "rate_hz": float, "controller_name": str, "command_timeout": float,
        "initial_positions": list, "publish_clock": bool, "realtime": bool,
        "diagnostics_period": int,
    },
    "controller_node": {
        "robot": str, "rate_hz": float, "controller_name": str, "law": str,
        "kp": list, "kd": list, "ki": list, "integral_limit": list,
    },
    "dynamics_node": {"robot": str},
    "inverter_node": {"robot": str, "scenario": str, "output_names": list, "method": str,
                      "dt": float, "progress_period": float},
}
#: Left out of the files (documented in a comment): a ROS parameter file cannot hold the
#: empty-list defaults.
OPTIONAL = {"initial_positions", "kp", "kd", "ki", "output_names", "integral_limit"}

spec = importlib.util.spec_from_file_location("make_robots", ROOT / "tools" / "make_robots.py")
make_robots = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_robots)


def _have(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # parent missing, or only the repo's launch/ namespace dir
        return False


HAVE_LAUNCH = _have("launch.actions") and _have("launch_ros.actions")


# --- reading launch files with ast -----------------------------------------------------------

def _tree(path):
    return ast.parse(path.read_text(), filename=str(path))


def _constants(tree):
    """Module-level ``NAME = "string"`` assignments."""
    out = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            out[node.targets[0].id] = node.value.value
    return out


def _value(node, consts):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    return None


def _func_name(call):
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _calls(tree, name):
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _func_name(n) == name]


def _kwarg(call, key):
    return next((k.value for k in call.keywords if k.arg == key), None)


def _part(node):
    """A path component: a string, or a pattern with {robot} / * for f-string fields."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = ""
        for v in node.values:
            if isinstance(v, ast.Constant):
                out += v.value
            elif isinstance(v.value, ast.Name) and v.value.id == "robot":
                out += "{robot}"
            else:
                out += "*"
        return out
    return "*"


def _paths(tree, consts):
    """Package-relative paths a launch file builds (PathJoinSubstitution, os.path.join, ...)."""
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        args = list(call.args)
        if len(args) == 1 and isinstance(args[0], ast.List):
            args = list(args[0].elts)
        if (args and isinstance(args[0], ast.Call)
                and _func_name(args[0]) in ("FindPackageShare", "get_package_share_directory")
                and args[0].args and _value(args[0].args[0], consts) != PACKAGE):
            continue  # a path inside another package's share
        for i, a in enumerate(args):
            if isinstance(a, ast.Constant) and a.value in DATA_DIRS:
                found.append((call.lineno, "/".join(_part(p) for p in args[i:])))
                break
    return found


def _console_scripts():
    tree = _tree(ROOT / "setup.py")
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "console_scripts":
                    return {e.value.split("=")[0].strip() for e in v.elts}
    return set()


def _package_xml():
    from catkin_pkg.package import parse_package

    return parse_package(str(ROOT / "package.xml"))


def test_launch_files_present():
    names = {p.name for p in LAUNCH_FILES}
    assert {"bringup.launch.py", "demo.launch.py"} <= names


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_defines_generate_launch_description(path):
    tree = _tree(path)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    gld = [f for f in funcs if f.name == "generate_launch_description"]
    assert gld, f"{path.name}: no module-level generate_launch_description()"
    assert not gld[0].args.args, "generate_launch_description() takes no arguments"
    assert ast.get_docstring(tree), f"{path.name}: module docstring missing"


#: launch_support.flag_argument(name, default, description=...): a true/false argument, its
#: choices ["true", "false"] (checked in test_flag_argument_declares_true_false)
FLAG_CHOICES = ["true", "false"]


def _arg(call, position, key):
    """Argument ``key`` of ``call``, given by position or by keyword (None if absent)."""
    return call.args[position] if len(call.args) > position else _kwarg(call, key)


def _declared_arguments(tree):
    """``(lineno, name, default, choices, description)`` of every launch argument a launch file
    declares: its ``DeclareLaunchArgument`` calls and its ``flag_argument`` calls (values
    read from the source; choices None when not given, description None when missing)."""
    consts = _constants(tree)
    out = []
    for call in _calls(tree, "DeclareLaunchArgument"):
        choices = _kwarg(call, "choices")
        if isinstance(choices, ast.Name):  # a module-level list such as SIMS
            choices = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                           and getattr(n.targets[0], "id", None) == choices.id)
        desc = _kwarg(call, "description")
        default = _kwarg(call, "default_value")
        out.append((call.lineno, _value(_arg(call, 0, "name"), consts),
                    None if default is None else _value(default, consts),
                    None if choices is None else [_value(e, consts) for e in choices.elts],
                    None if desc is None else _value(desc, consts)))
    for call in _calls(tree, "flag_argument"):
        default = _value(_arg(call, 1, "default"), consts)
        desc = _arg(call, 2, "description")
        out.append((call.lineno, _value(_arg(call, 0, "name"), consts),
                    FLAG_CHOICES[not default] if isinstance(default, bool) else default,
                    FLAG_CHOICES, None if desc is None else _value(desc, consts)))
    return out


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_argument_described(path):
    tree = _tree(path)
    consts = _constants(tree)
    declared = _declared_arguments(tree)
    assert declared, f"{path.name}: declares no launch argument"
    names = []
    for lineno, name, default, choices, text in declared:
        assert isinstance(name, str) and name, f"{path.name}:{lineno}: argument name"
        names.append(name)
        assert isinstance(text, str) and text.strip(), (
            f"{path.name}:{lineno}: argument {name!r} has no description")
        if choices is not None and default is not None:
            assert default in choices, f"{path.name}: {name} default {default!r} not a choice"
    assert len(names) == len(set(names)), f"{path.name}: argument declared twice"
    # every LaunchConfiguration read (and every flag_value(context, name)) is declared here
    used = {_value(c.args[0], consts) for c in _calls(tree, "LaunchConfiguration") if c.args}
    used |= {_value(_arg(c, 1, "name"), consts) for c in _calls(tree, "flag_value")}
    used.discard(None)
    assert used <= set(names), f"{path.name}: undeclared arguments {sorted(used - set(names))}"


def test_launch_argument_reader_sees_both_forms():
    # the reader itself: a plain declaration and a flag, by position and by keyword
    tree = ast.parse('SIMS = ["a", "b"]\n'
                     'DeclareLaunchArgument("sim", default_value="a", choices=SIMS, '
                     'description="plant")\n'
                     'flag_argument("rviz", True, description="RViz")\n'
                     'flag_argument(name="lockstep", default=False)\n')
    assert _declared_arguments(tree) == [
        (2, "sim", "a", ["a", "b"], "plant"), (3, "rviz", "true", FLAG_CHOICES, "RViz"),
        (4, "lockstep", "false", FLAG_CHOICES, None)]


@pytest.mark.skipif(not HAVE_LAUNCH, reason="launch / launch_ros not installed (no ROS 2)")
def test_flag_argument_declares_true_false():
    from launch.launch_context import LaunchContext

    from multibody_dynamics.errors import InputError
    from multibody_dynamics.ros.launch_support import flag_argument, flag_value

    for default, text in ((True, "true"), (False, "false")):
        arg = flag_argument("rviz", default, description="Start RViz.")
        assert arg.name == "rviz" and arg.choices == FLAG_CHOICES
        assert "".join(s.perform(None) for s in arg.default_value) == text
        assert arg.description.startswith("Start RViz.")
    with pytest.raises(InputError, match="default must be True or False, got 'true'"):
        flag_argument("rviz", "true", description="Start RViz.")
    context = LaunchContext()
    for given, value in (("true", True), ("false", False), (" True", True), ("1", True)):
        context.launch_configurations["rviz"] = given
        assert flag_value(context, "rviz") is value


def test_bringup_arguments():
    tree = _tree(ROOT / "launch" / "bringup.launch.py")
    names = {name for _, name, *_ in _declared_arguments(tree)}
    assert {"robot", "sim", "controller", "rviz", "use_sim_time", "lockstep"} <= names


def test_demo_arguments():
    tree = _tree(ROOT / "launch" / "demo.launch.py")
    assert {name for _, name, *_ in _declared_arguments(tree)} == {"rviz", "with_inverter"}


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_referenced_files_exist(path):
    tree = _tree(path)
    paths = _paths(tree, _constants(tree))
    assert paths, f"{path.name}: no package file referenced (is the path parser stale?)"
    for lineno, pattern in paths:
        if "{robot}" in pattern:
            for robot in ROBOTS:
                rel = pattern.replace("{robot}", robot)
                assert (ROOT / rel).exists() or list(ROOT.glob(rel)), (
                    f"{path.name}:{lineno}: {rel} does not exist")
        else:
            assert (ROOT / pattern).exists() or list(ROOT.glob(pattern)), (
                f"{path.name}:{lineno}: {pattern} does not exist")


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_executables_and_packages(path):
    tree = _tree(path)
    consts = _constants(tree)
    scripts = _console_scripts()
    depends = {d.name for d in _package_xml().exec_depends}
    nodes = _calls(tree, "Node")
    assert nodes
    for call in nodes:
        package = _value(_kwarg(call, "package"), consts)
        executable = _value(_kwarg(call, "executable"), consts)
        assert isinstance(package, str) and isinstance(executable, str), (
            f"{path.name}:{call.lineno}: package and executable must be literal strings")
        if package == PACKAGE:
            assert executable in scripts, (
                f"{path.name}:{call.lineno}: {executable} is not a console_script of setup.py "
                f"({sorted(scripts)})")
        else:
            assert package in depends, f"{path.name}: {package} is not an exec_depend"
    for call in _calls(tree, "FindPackageShare"):
        package = _value(call.args[0], consts)
        assert package == PACKAGE or package in depends, f"{path.name}: {package} not a depend"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_rviz_configs_exist(path):
    """The RViz configurations named to launch_support.rviz_node (the shared RViz block)."""
    tree = _tree(path)
    for call in _calls(tree, "rviz_node"):
        name = _value(call.args[0], _constants(tree))
        assert name and (ROOT / "config" / "rviz" / name).is_file(), f"{path.name}: {name}"
    assert _calls(tree, "rviz_node"), f"{path.name}: no RViz"


def _robot_model():
    """bringup.launch.py's robot_model(), run without importing launch."""
    tree = _tree(ROOT / "launch" / "bringup.launch.py")
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "robot_model")
    namespace = {"os": os, "yaml": yaml}
    exec(compile(ast.Module(body=[func], type_ignores=[]), "bringup.launch.py", "exec"), namespace)
    return namespace["robot_model"]


@pytest.mark.parametrize("robot", ROBOTS)
def test_gazebo_refusal_matches_model(robot):
    """sim:=gazebo is refused exactly for the robots whose model has loop closures."""
    closures, flexible = _robot_model()(str(ROOT), robot)
    assert closures == [c.name for c in load_model(robot).closures]
    assert not flexible


def test_flexible_models_are_not_robots_for_launch():
    """The schema split of config/robots/: every file is either a rigid robot (its URDF, xacro
    and controllers shipped) or a flexible model (none of them; bringup.launch.py runs it on
    the embedded simulator only)."""
    assert ROBOTS and FLEXIBLE and sorted(ROBOTS + FLEXIBLE) == [p.stem for p in ROBOT_FILES]
    assert {"arm7", "five_bar"} <= set(ROBOTS)
    assert {"flexible_cart_manipulator", "flexible_manipulator", "flexible_parallel_tool",
            "flexible_cart_manipulator_design"} <= set(FLEXIBLE)
    for robot in ROBOTS:
        for rel in (f"urdf/{robot}.urdf", f"urdf/{robot}.urdf.xacro",
                    f"config/controllers/{robot}.yaml"):
            assert (ROOT / rel).is_file(), rel
    for name in FLEXIBLE:
        for rel in (f"urdf/{name}.urdf", f"urdf/{name}.urdf.xacro",
                    f"config/controllers/{name}.yaml"):
            assert not (ROOT / rel).exists(), f"{rel}: a flexible model has no URDF / controllers"


def test_unknown_robot_is_named():
    with pytest.raises(RuntimeError, match="shipped robots: .*arm7") as info:
        _robot_model()(str(ROOT), "no_such_robot")
    assert "flexible_manipulator" in str(info.value)  # flexible models are launchable too


@pytest.mark.parametrize("name", FLEXIBLE)
def test_bringup_knows_flexible_models(name):
    closures, flexible = _robot_model()(str(ROOT), name)
    assert flexible
    assert bool(closures) == (name == "flexible_parallel_tool")  # the closed machine tool


def test_bringup_refuses_other_plants_for_flexible_models_before_starting():
    """sim:=gazebo / hardware on a flexible model: refused in the OpaqueFunction before any
    action is returned (it has no URDF)."""
    src = (ROOT / "launch" / "bringup.launch.py").read_text()
    setup = src[src.index("def _setup"):]
    refusal = setup.index('if flexible and sim != "embedded"')
    assert refusal < setup.index("actions = [")
    assert "raise RuntimeError" in setup[refusal: setup.index("actions = [")]


def test_bringup_refuses_gazebo_for_closures_before_starting():
    """The refusal is raised in the OpaqueFunction before any action is returned."""
    src = (ROOT / "launch" / "bringup.launch.py").read_text()
    setup = src[src.index("def _setup"):]
    assert setup.index('sim == "gazebo" and closures') < setup.index("actions = [")
    assert "raise RuntimeError" in setup[: setup.index("actions = [")]


# --- node parameter files ---------------------------------------------------------------------

def test_node_configs_present():
    assert {p.stem for p in NODE_CONFIGS} == set(PARAMETERS)


@pytest.mark.parametrize("path", NODE_CONFIGS, ids=lambda p: p.name)
def test_node_config_layout(path):
    data = yaml.safe_load(path.read_text())
    node = path.stem
    assert isinstance(data, dict) and list(data) == [node], f"{path.name}: top key must be {node}"
    assert list(data[node]) == ["ros__parameters"], f"{path.name}: {node}: only ros__parameters"
    params = data[node]["ros__parameters"]
    table = PARAMETERS[node]
    assert set(params) <= set(table), f"{path.name}: unknown parameters {set(params) - set(table)}"
    missing = set(table) - set(params) - OPTIONAL
    assert not missing, f"{path.name}: missing {sorted(missing)}"
    for name, value in params.items():
        assert type(value) is table[name], (
            f"{path.name}: {name} = {value!r}: expected {table[name].__name__} "
            "(write 1000.0, not 1000, for a double)")
        assert value != [], f"{path.name}: {name}: rcl cannot read an empty list; leave it out"
    # every parameter, set or left out, is documented with its unit or meaning
    text = path.read_text()
    for name in table:
        line = next((ln for ln in text.splitlines() if re.search(rf"\b{name}:", ln)), None)
        assert line is not None and "#" in line, f"{path.name}: {name} needs a comment line"


def test_node_config_values():
    sim = yaml.safe_load((ROOT / "config" / "simulator_node.yaml").read_text())
    p = sim["simulator_node"]["ros__parameters"]
    assert p["robot"] in ROBOTS and 1.0 <= p["rate_hz"] <= 10000.0 and p["command_timeout"] > 0
    ctl = yaml.safe_load((ROOT / "config" / "controller_node.yaml").read_text())
    c = ctl["controller_node"]["ros__parameters"]
    assert c["law"] in ("pd", "pid", "computed_torque") and c["rate_hz"] > 0
    assert c["controller_name"] == p["controller_name"] == "effort_controller"


def _rcl_parameters(path, node_name):
    """Parameters rcl gives node ``node_name`` from the file (the parser nodes really use)."""
    rclpy = pytest.importorskip("rclpy")
    from rclpy.context import Context
    from rclpy.node import Node

    ctx = Context()
    rclpy.init(args=["--ros-args", "--params-file", str(path)], context=ctx)
    try:
        node = Node(node_name, context=ctx, automatically_declare_parameters_from_overrides=True)
        try:
            return {name: p.value for name, p in node._parameters.items()}
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)


@pytest.mark.parametrize("path", NODE_CONFIGS, ids=lambda p: p.name)
def test_node_config_read_by_rcl(path):
    expected = yaml.safe_load(path.read_text())[path.stem]["ros__parameters"]
    got = _rcl_parameters(path, path.stem)
    for name, value in expected.items():
        assert got[name] == value, f"{path.name}: rcl read {name} = {got[name]!r}"


# --- ros2_control: controllers and xacro ------------------------------------------------------

def _actuated_passive(robot):
    model = load_model(robot)
    passive = set(model.passive_joint_names)
    moving = [j for j in model.joint_names]
    return [j for j in moving if j not in passive], [j for j in moving if j in passive]


def test_ros2_control_files_up_to_date():
    for rel, text in make_robots.build_ros2_control().items():
        path = ROOT / rel
        assert path.is_file() and path.read_text() == text, (
            f"{rel} is stale: run `python tools/make_robots.py`")


@pytest.mark.parametrize("robot", ROBOTS)
def test_controllers_yaml(robot):
    path = ROOT / "config" / "controllers" / f"{robot}.yaml"
    data = yaml.safe_load(path.read_text())
    cm = data["controller_manager"]["ros__parameters"]
    assert isinstance(cm["update_rate"], int) and cm["update_rate"] > 0
    assert cm["joint_state_broadcaster"]["type"] == "joint_state_broadcaster/JointStateBroadcaster"
    assert cm["effort_controller"]["type"] == "forward_command_controller/ForwardCommandController"
    effort = data["effort_controller"]["ros__parameters"]
    actuated, _ = _actuated_passive(robot)
    assert effort["interface_name"] == "effort"
    assert effort["joints"] == actuated
    got = _rcl_parameters(path, "effort_controller")
    assert list(got["joints"]) == actuated and got["interface_name"] == "effort"


XACRO_NS = "{http://www.ros.org/wiki/xacro}"


@pytest.mark.parametrize("robot", ROBOTS)
def test_xacro_source(robot):
    """urdf/<robot>.urdf.xacro names every moving joint once, with the right interfaces."""
    root = ET.parse(ROOT / "urdf" / f"{robot}.urdf.xacro").getroot()
    assert root.get("name") == robot
    includes = [e.get("filename") for e in root.iter(f"{XACRO_NS}include")]
    assert includes == [f"{robot}.urdf", "ros2_control.xacro"]
    assert all((ROOT / "urdf" / f).is_file() for f in includes)
    _check_joints(robot, root.find(f"{XACRO_NS}multibody_ros2_control/joints"))


def _check_joints(robot, parent):
    actuated, passive = _actuated_passive(robot)
    joints = {j.get("name"): j for j in parent.findall("joint")}
    assert list(joints) == actuated + passive
    for name, joint in joints.items():
        commands = [c.get("name") for c in joint.findall("command_interface")]
        states = [s.get("name") for s in joint.findall("state_interface")]
        assert states == ["position", "velocity"], f"{robot}.{name}: {states}"
        assert commands == (["effort"] if name in actuated else []), f"{robot}.{name}: {commands}"


@pytest.mark.parametrize("sim", ["embedded", "gazebo", "hardware"])
@pytest.mark.parametrize("robot", ROBOTS)
def test_xacro_expands(robot, sim):
    """xacro output: one ros2_control system, the plugin of `sim`, and the same tree for
    pinocchio."""
    xacro = pytest.importorskip("xacro")
    pin = pytest.importorskip("pinocchio")
    controllers = str(ROOT / "config" / "controllers" / f"{robot}.yaml")
    doc = xacro.process_file(str(ROOT / "urdf" / f"{robot}.urdf.xacro"),
                             mappings={"sim": sim, "controllers": controllers})
    text = doc.toxml()
    root = ET.fromstring(text)
    systems = root.findall("ros2_control")
    assert len(systems) == 1 and systems[0].get("name") == robot
    assert systems[0].get("type") == "system"
    plugin = systems[0].find("hardware/plugin").text.strip()
    if sim == "gazebo":
        assert plugin == "gz_ros2_control/GazeboSimSystem"
        gz = [p for g in root.findall("gazebo") for p in g.findall("plugin")]
        assert [p.get("filename") for p in gz] == ["gz_ros2_control-system"]
        assert gz[0].find("parameters").text == controllers
    else:
        assert plugin == "mock_components/GenericSystem"
        assert not [g for g in root.findall("gazebo") if g.find("plugin") is not None]
    _check_joints(robot, systems[0])
    # pinocchio ignores the extra tags: same model as the plain URDF
    expanded = pin.buildModelFromXML(text)
    plain = pin.buildModelFromUrdf(str(ROOT / "urdf" / f"{robot}.urdf"))
    assert list(expanded.names) == list(plain.names)
    np.testing.assert_array_equal(  # same XML numbers parsed twice: exact
        np.array([i.mass for i in expanded.inertias]), np.array([i.mass for i in plain.inertias]))


def test_xacro_hardware_plugin_argument():
    xacro = pytest.importorskip("xacro")
    doc = xacro.process_file(str(ROOT / "urdf" / "arm7.urdf.xacro"),
                             mappings={"sim": "hardware",
                                       "hardware_plugin": "my_driver/ArmSystem"})
    root = ET.fromstring(doc.toxml())
    assert root.find("ros2_control/hardware/plugin").text.strip() == "my_driver/ArmSystem"


# --- with launch installed --------------------------------------------------------------------

def _load_launch_module(path):
    spec = importlib.util.spec_from_file_location(path.name.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not HAVE_LAUNCH, reason="launch / launch_ros not installed (no ROS 2)")
@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_generate_launch_description(path):
    from launch.launch_description import LaunchDescription

    ld = _load_launch_module(path).generate_launch_description()
    assert isinstance(ld, LaunchDescription)
    args = ld.get_launch_arguments()
    for arg in args:
        assert arg.description.strip(), f"{path.name}: {arg.name} has no description"
    # the source reader of test_every_argument_described sees every argument launch sees
    read = {name: choices for _, name, _, choices, _ in _declared_arguments(_tree(path))}
    assert {arg.name: arg.choices for arg in args} == read


@pytest.mark.skipif(not HAVE_LAUNCH, reason="launch / launch_ros not installed (no ROS 2)")
def test_bringup_gazebo_refuses_closed_loop(tmp_path):
    """robot:=five_bar sim:=gazebo stops with an error before starting anything (a real
    LaunchService, in a subprocess: launch configures its logging once per process)."""
    from launch_helpers import LaunchProcess, make_prefix

    prefix = make_prefix(tmp_path / "prefix")  # this tree as an ament package
    run = LaunchProcess(prefix, "bringup.launch.py",
                        {"robot": "five_bar", "sim": "gazebo", "rviz": "false"},
                        tmp_path / "launch.log")
    code = run.wait(60.0)
    run.stop()
    out = run.log()
    assert code not in (0, None), out[-2000:]
    assert "sim:=gazebo cannot simulate five_bar" in out, out[-2000:]
    assert "process started" not in out, out[-2000:]


@pytest.mark.skipif(not HAVE_LAUNCH, reason="launch / launch_ros not installed (no ROS 2)")
def test_bringup_refuses_hardware_for_flexible_model(tmp_path):
    """robot:=flexible_manipulator sim:=hardware (no URDF for ros2_control): one error naming
    sim:=embedded, before anything starts (a real LaunchService, in a subprocess)."""
    from launch_helpers import LaunchProcess, make_prefix

    prefix = make_prefix(tmp_path / "prefix")
    run = LaunchProcess(prefix, "bringup.launch.py",
                        {"robot": "flexible_manipulator", "sim": "hardware", "rviz": "false"},
                        tmp_path / "launch.log")
    code = run.wait(60.0)
    run.stop()
    out = run.log()
    assert code not in (0, None), out[-2000:]
    assert "sim:=hardware cannot run flexible_manipulator" in out, out[-2000:]
    assert "Use sim:=embedded" in out and "process started" not in out, out[-2000:]


@pytest.mark.skipif(not HAVE_LAUNCH, reason="launch / launch_ros not installed (no ROS 2)")
def test_bringup_refuses_lockstep_off_the_embedded_simulator(tmp_path):
    """lockstep:=true sim:=hardware: one error naming sim:=embedded before anything starts (only
    the suite's simulator steps on each command; a real LaunchService, in a subprocess)."""
    from launch_helpers import LaunchProcess, make_prefix

    prefix = make_prefix(tmp_path / "prefix")
    run = LaunchProcess(prefix, "bringup.launch.py",
                        {"robot": "arm7", "sim": "hardware", "lockstep": "true", "rviz": "false"},
                        tmp_path / "launch.log")
    code = run.wait(60.0)
    run.stop()
    out = run.log()
    assert code not in (0, None), out[-2000:]
    assert "lockstep:=true needs sim:=embedded" in out, out[-2000:]
    assert "sim:=hardware does not" in out and "process started" not in out, out[-2000:]


def test_bringup_defaults_up_to_date():
    """config/bringup/<robot>.yaml exists for every launchable robot and is what
    tools/make_bringup.py writes (gains from the mass matrix, assembled initial positions)."""
    spec = importlib.util.spec_from_file_location("make_bringup",
                                                  ROOT / "tools" / "make_bringup.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    for robot in ROBOTS + FLEXIBLE:
        path = ROOT / "config" / "bringup" / f"{robot}.yaml"
        assert path.is_file(), f"{path} missing: run python tools/make_bringup.py"
        text = tool.flexible_file(robot) if robot in FLEXIBLE else tool.robot_file(robot)
        assert path.read_text() == text, f"{path} is stale: run python tools/make_bringup.py"
