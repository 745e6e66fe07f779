"""package.xml is a valid format-3 manifest, and an installed copy puts the data where ROS looks.

``colcon build`` installs an ament_python package by running setup.py's install with its
data_files; the same install is done here into a temporary prefix, without ROS, and the
tree checked: ``share/multibody_suite/{package.xml,launch,config,urdf}``, the ament index
marker ``share/ament_index/resource_index/packages/multibody_suite`` and the executables
in ``lib/multibody_suite``.  (``pip install --no-build-isolation`` would need the
``wheel`` package, which the venv does not have; the setuptools command is what colcon runs.)
"""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "multibody_suite"

EXEC_DEPENDS = {
    "rclpy", "launch", "launch_ros", "robot_state_publisher", "sensor_msgs", "std_msgs",
    "trajectory_msgs", "control_msgs", "rosgraph_msgs", "xacro", "python3-numpy",
    "python3-scipy", "python3-yaml", "pinocchio",
}
TEST_DEPENDS = {"python3-pytest", "launch_testing", "launch_testing_ros"}
SOURCES = ["setup.py", "setup.cfg", "package.xml", "resource", "launch", "config", "urdf",
           "multibody_dynamics", "multibody_control"]


@pytest.fixture(scope="module")
def manifest():
    from catkin_pkg.package import parse_package

    return parse_package(str(ROOT / "package.xml"))


def test_manifest_format_and_name(manifest):
    assert manifest.package_format == 3
    assert manifest.name == PACKAGE
    assert manifest.licenses and manifest.maintainers
    assert manifest.get_build_type() == "ament_python"
    manifest.validate()  # raises InvalidPackage on a malformed manifest


def test_manifest_depends(manifest):
    exec_depends = {d.name for d in manifest.exec_depends}
    test_depends = {d.name for d in manifest.test_depends}
    assert EXEC_DEPENDS <= exec_depends, (
        f"missing exec_depend {sorted(EXEC_DEPENDS - exec_depends)}")
    assert TEST_DEPENDS <= test_depends, (
        f"missing test_depend {sorted(TEST_DEPENDS - test_depends)}")


def test_manifest_version_matches_setup(manifest):
    tree = ast.parse((ROOT / "setup.py").read_text())
    versions = [k.value.value for n in ast.walk(tree) if isinstance(n, ast.Call)
                for k in n.keywords if k.arg == "version" and isinstance(k.value, ast.Constant)]
    assert versions == [manifest.version]


def test_ament_resource_marker():
    assert (ROOT / "resource" / PACKAGE).is_file()


def _console_scripts():
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "console_scripts":
                    return sorted(e.value.split("=")[0].strip() for e in v.elts)
    return []


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """An install of a copy of the sources, done the way colcon's ament_python build does it
    (``setup.py install --prefix ... --single-version-externally-managed``), so setup.cfg's
    ``install_scripts`` applies too.  A copy, because building writes build/ and *.egg-info
    next to setup.py."""
    tmp = tmp_path_factory.mktemp("install")
    src, prefix = tmp / "src", tmp / "prefix"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    env = {k: v for k, v in os.environ.items() if k != "AMENT_PREFIX_PATH"}
    cmd = [sys.executable, "setup.py", "--quiet", "install", "--prefix", str(prefix),
           "--single-version-externally-managed", "--record", str(tmp / "installed.txt")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=src, env=env)
    assert proc.returncode == 0, f"setup.py install failed:\n{proc.stdout}\n{proc.stderr}"
    return prefix


@pytest.mark.parametrize("rel", [
    f"share/{PACKAGE}/package.xml",
    f"share/{PACKAGE}/launch/bringup.launch.py",
    f"share/{PACKAGE}/launch/demo.launch.py",
    f"share/{PACKAGE}/config/robots/arm7.yaml",
    f"share/{PACKAGE}/config/controllers/arm7.yaml",
    f"share/{PACKAGE}/config/simulator_node.yaml",
    f"share/{PACKAGE}/config/controller_node.yaml",
    f"share/{PACKAGE}/config/rviz/multibody.rviz",
    f"share/{PACKAGE}/urdf/arm7.urdf",
    f"share/{PACKAGE}/urdf/arm7.urdf.xacro",
    f"share/{PACKAGE}/urdf/ros2_control.xacro",
    f"share/ament_index/resource_index/packages/{PACKAGE}",
])
def test_installed_data(installed, rel):
    assert (installed / rel).is_file(), f"{rel} not installed"


def test_installed_tree_complete(installed):
    """Every shipped data file is installed, at the same relative place."""
    share = installed / "share" / PACKAGE
    for folder in ("launch", "config", "urdf"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                rel = path.relative_to(ROOT)
                assert (share / rel).is_file(), f"{rel} missing from share/{PACKAGE}"


def test_installed_executables(installed):
    """Console scripts land in lib/<package>/, where ``ros2 run`` and launch_ros look."""
    for script in _console_scripts():
        assert (installed / "lib" / PACKAGE / script).is_file(), f"lib/{PACKAGE}/{script}"
