"""The launch_testing tests of test/launch/, run with ``launch_test`` in a subprocess.

launch_testing's pytest plugin does not load under pytest 9 (its ``pytest_pycollect_makemodule``
hook takes the removed argument ``path``, and pluggy refuses the plugin, which fails every
test run), so it is not installed where pytest runs: ``make test`` puts it in
``.venv/launch-testing`` (off sys.path; docs/ros-launch.md) and this test runs ``launch_test``
from there, with this tree as the ament package (launch_helpers.make_prefix).  Skipped where
launch, rclpy or that folder are missing (``LAUNCH_TESTING_PATH`` names another folder).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from launch_helpers import HAVE_LAUNCH, HAVE_RCLPY, launch_environment, make_prefix

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_TESTING = Path(os.environ.get("LAUNCH_TESTING_PATH", Path(sys.prefix) / "launch-testing"))
TESTS = sorted((ROOT / "test" / "launch").glob("*_launch_test.py"))

pytestmark = [
    pytest.mark.ros,
    pytest.mark.slow,
    pytest.mark.skipif(not (HAVE_LAUNCH and HAVE_RCLPY),
                       reason="launch / launch_ros / rclpy not installed (docs/ros-launch.md)"),
    pytest.mark.skipif(not (LAUNCH_TESTING / "launch_testing").is_dir(),
                       reason=f"launch_testing not in {LAUNCH_TESTING} (docs/ros-launch.md)"),
]


@pytest.mark.parametrize("path", TESTS, ids=lambda p: p.stem)
def test_launch_test(tmp_path, path):
    prefix = make_prefix(tmp_path / "prefix")
    env = launch_environment(prefix)
    env["PYTHONPATH"] = os.pathsep.join([str(LAUNCH_TESTING), env["PYTHONPATH"]])
    cmd = [sys.executable, "-c",
           "import sys; from launch_testing.launch_test import main; sys.exit(main())",
           str(path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240,
                          start_new_session=True)
    out = proc.stdout + proc.stderr
    print(out[-6000:])
    assert proc.returncode == 0, out[-6000:]
