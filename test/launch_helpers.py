"""Running the project's launch files for real: an ament prefix of this tree, and launches of it.

``launch`` and ``launch_ros`` are not on PyPI; ``make test`` installs them from
``../shared/ros-launch-wheels`` when that folder exists (docs/ros-launch.md).  Without them
(or without rclpy) the tests that use this module skip.

:func:`make_prefix` builds an ament prefix of the working tree in a few milliseconds: the
package marker of the ament index, ``share/multibody_suite/{package.xml,launch,config,urdf}``
as symbolic links into the tree, and ``lib/multibody_suite/<console script>`` wrappers that
run this interpreter on this tree (so a launch starts the code under test, not an installed
copy).  ``test_package.py`` checks separately that ``setup.py install`` produces the same
layout.

:func:`start_launch` runs ``LaunchService`` on a launch file in a subprocess of its own
(launch wants the main thread and its own signal handlers), in that prefix and in the test's
isolated ROS domain (``ros_helpers.ROS_ENV``); :class:`LaunchProcess` stops it with SIGINT
like ``ros2 launch`` on Ctrl-C, and SIGKILLs the process group if it has not ended.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

from ros_helpers import LoggedProcess, ros_environment

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "multibody_suite"


def have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # parent missing, or only the repo's launch/ namespace dir
        return False


HAVE_LAUNCH = have("launch.actions") and have("launch_ros.actions")
HAVE_RCLPY = have("rclpy")


def console_scripts() -> dict[str, str]:
    """``name -> module:function`` of setup.py's console scripts."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "console_scripts":
                    pairs = (e.value.split("=") for e in v.elts)
                    return {a.strip(): b.strip() for a, b in pairs}
    return {}


def make_prefix(dest: Path) -> Path:
    """An ament prefix at ``dest`` holding this tree as the package (see the module doc)."""
    dest = Path(dest)
    marker = dest / "share" / "ament_index" / "resource_index" / "packages" / PACKAGE
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("")
    share = dest / "share" / PACKAGE
    share.mkdir(parents=True, exist_ok=True)
    for name in ("package.xml", "launch", "config", "urdf"):
        link = share / name
        if not link.exists():
            link.symlink_to(ROOT / name)
    lib = dest / "lib" / PACKAGE
    lib.mkdir(parents=True, exist_ok=True)
    for name, target in console_scripts().items():
        module, func = target.split(":")
        script = lib / name
        script.write_text(
            f"#!{sys.executable}\n"
            "import sys\n"
            f"sys.path.insert(0, {str(ROOT)!r})\n"
            f"from {module} import {func}\n"
            f"sys.exit({func}())\n")
        script.chmod(0o755)
    return dest


def launch_environment(prefix: Path, extra: dict | None = None) -> dict[str, str]:
    """The environment of a launch in ``prefix``: the test's ROS domain, this tree first on
    PYTHONPATH, this interpreter's scripts (xacro) first on PATH."""
    env = ros_environment()
    env["AMENT_PREFIX_PATH"] = os.pathsep.join(
        [str(prefix), *filter(None, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep))])
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.update(extra or {})
    return env


RUNNER = """
import sys
from launch import LaunchDescription
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.launch_service import LaunchService
from ament_index_python.packages import get_package_share_directory
path = get_package_share_directory('multibody_suite') + '/launch/' + sys.argv[1]
args = [tuple(a.split(':=', 1)) for a in sys.argv[2:]]
ls = LaunchService(argv=[])
ls.include_launch_description(LaunchDescription([IncludeLaunchDescription(
    PythonLaunchDescriptionSource(path), launch_arguments=args)]))
sys.exit(ls.run())
"""


class LaunchProcess(LoggedProcess):
    """``LaunchService`` running ``launch_file`` with ``args`` in a subprocess (own session)."""

    def __init__(self, prefix: Path, launch_file: str, args: dict, log_path: Path,
                 env: dict | None = None):
        argv = [f"{k}:={v}" for k, v in args.items()]
        self.leftover: list[int] = []
        super().__init__([sys.executable, "-c", RUNNER, launch_file, *argv], log_path,
                         launch_environment(prefix, env))

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGINT to the process group (as Ctrl-C in the terminal of ``ros2 launch``: launch
        then leaves the signal of its processes to the terminal), then SIGKILL to the session.

        Returns the launch's exit code, or None when it had to be killed."""
        code = None
        if self.alive:
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
            code = self.wait(timeout)
        else:
            code = self.proc.returncode
        # what outlived the launch (checked by the tests), then killed: nothing may stay
        self.leftover = [] if self.alive else session_members(self.proc.pid)
        for pid in session_members(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.alive:
            self.proc.wait(5)
        self._log.close()
        return code


def session_members(sid: int) -> list[int]:
    """Pids still alive (not zombies) in session ``sid`` (Linux /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def wait_until(predicate, timeout: float, period: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(period)
    return predicate()
