"""Launch-file helpers: no orphaned nodes, optional tools skipped before anything starts.

Used by ``launch/bringup.launch.py`` and ``launch/demo.launch.py`` (imported when a launch file
is loaded, so ``launch`` and ``launch_ros`` are imported inside the functions only).

Two rules (docs/ros-launch.md):

* a node of the suite that ends while the launch is running shuts the whole launch down
  (:func:`shutdown_on_exit`): the others would otherwise keep running without it, e.g. a
  controller commanding a plant that is gone, or a plant braking with no controller;
* an optional tool (robot_state_publisher, rviz2, static_transform_publisher) whose package
  is not installed is left out with a warning at the time the launch description is built,
  before any process starts (:func:`optional_node`); before this, the missing package was
  found only when its action ran, after the suite's nodes had started, and the launch
  failed leaving them running.

A true/false argument (``rviz:=``, ``use_sim_time:=``, ``lockstep:=``, ``with_inverter:=``) is
declared by :func:`flag_argument` and read by :func:`flag_value`, the same way in every launch
file. This module is part of the installed Python package, so an installed launch file finds
it as the source tree's does.
"""

from __future__ import annotations

from ..errors import InputError

#: Tools of other packages the launch files can do without (visualization and frames only).
OPTIONAL_PACKAGES = ("robot_state_publisher", "rviz2", "tf2_ros")
#: The values of a true/false launch argument (its ``choices``), the default's spelling first.
FLAG_CHOICES = ("true", "false")


def flag_argument(name: str, default: bool, description: str):
    """``DeclareLaunchArgument`` of a true/false argument ``name:=true|false``.

    Parameters
    ----------
    name : str
        The argument's name.
    default : bool
        Its value when not given (written ``"true"`` or ``"false"``).
    description : str
        What it switches (shown by ``ros2 launch ... --show-args``).

    Returns
    -------
    launch.actions.DeclareLaunchArgument
        With ``choices=["true", "false"]``: launch refuses any other value before anything
        starts.
    """
    from launch.actions import DeclareLaunchArgument

    if not isinstance(default, bool):
        raise InputError(f"flag_argument {name!r}: default must be True or False, got "
                        f"{default!r}")
    return DeclareLaunchArgument(name, default_value=FLAG_CHOICES[not default],
                                 choices=list(FLAG_CHOICES), description=description)


def flag_value(context, name: str) -> bool:
    """The value of the true/false launch argument ``name`` in ``context`` (an
    ``OpaqueFunction``'s launch context): True for ``true`` (also ``1``, ``yes``, ``on``,
    any case, as a substitution may give)."""
    from launch.substitutions import LaunchConfiguration

    return LaunchConfiguration(name).perform(context).strip().lower() in ("true", "1", "yes",
                                                                          "on")


def package_available(name: str) -> bool:
    """Whether ``name`` is in the ament index (False also without AMENT_PREFIX_PATH)."""
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    try:
        get_package_prefix(name)
    except (PackageNotFoundError, LookupError, ValueError, OSError):
        return False
    return True


def missing_packages(names) -> list[str]:
    """The packages of ``names`` not in the ament index."""
    return [n for n in names if not package_available(n)]


def _shutdown_if_running(context):
    from launch.actions import LogInfo, Shutdown

    if context.is_shutdown:
        return None
    event = context.locals.event
    name = getattr(event, "process_name", None) or getattr(event, "action", "a process")
    code = event.returncode
    reason = (f"{name} exited with code {code} while the launch was running; every process of "
              "this launch depends on it, so the launch shuts down (see its log above)")
    return [LogInfo(msg=f"[multibody_suite] {reason}"), Shutdown(reason=reason)]


def shutdown_on_exit() -> list:
    """``on_exit`` actions of a required node: the launch shuts down when it ends."""
    from launch.actions import OpaqueFunction

    return [OpaqueFunction(function=_shutdown_if_running)]


def optional_node(package: str, what: str, **node_kwargs) -> list:
    """``[Node(package=package, ...)]``, or a warning and nothing when the package is missing.

    ``what`` says what is lost without it (e.g. ``"TF frames"``).  Decided when called, i.e.
    while the launch description is built, before any process of the launch starts.
    """
    from launch.actions import LogInfo
    from launch_ros.actions import Node

    if package_available(package):
        return [Node(package=package, **node_kwargs)]
    return [LogInfo(msg=f"[multibody_suite] WARNING: package {package} is not installed; "
                        f"{node_kwargs.get('executable', package)} is skipped ({what})")]


def rviz_node(config: str, use_sim_time: bool | None = None) -> list:
    """rviz2 with ``config/rviz/<config>`` of multibody_suite, optional as :func:`optional_node`
    (the RViz block of bringup.launch.py and demo.launch.py).  ``use_sim_time``: set as a node
    parameter unless None."""
    from launch.substitutions import PathJoinSubstitution
    from launch_ros.substitutions import FindPackageShare

    extra = {} if use_sim_time is None else {"parameters": [{"use_sim_time": use_sim_time}]}
    return optional_node(
        "rviz2", "no visualization; rviz:=false silences this",
        executable="rviz2",
        name="rviz2",
        output="log",
        arguments=["-d", PathJoinSubstitution([FindPackageShare("multibody_suite"), "config",
                                               "rviz", config])],
        **extra,
    )
