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

from ros_helpers import TRAJECTORY_START, LoggedProcess, ros_environment

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


# -- the demo runs of bringup.launch.py, shared by test_launch_bringup.py and
# bench/bench_ros_launch.py (which records their figures in bench/results.json) -------------
STARTUP = 90.0         # s (wall) until /joint_states and the controller's subscription
#: s of simulated time between the last state seen and the start of the move (lockstep): the
#: loop may outrun the probe, and the trajectory must arrive before it starts
LOCKSTEP_LEAD = 1.0
LOCKSTEP_HOLD = 1.0    # s of simulated time recorded after the move
LAMBDA_D = 50.0        # N, Aghili (2010) Sect. 5's desired contact force (prr_surface)
#: s recorded after the end of the demo move, per law (the joint PD converges slowly); else 1
DEMO_HOLD = {"pd": 3.0, "pid": 3.0}
#: s of slack between the probe's wall clock for the start of a move sent with stamp zero (the
#: controller starts it on receipt) and the controller's: the DDS delivery latency
LAG = 0.05


def bringup_defaults(robot: str) -> dict:
    """``config/bringup/<robot>.yaml``."""
    import yaml

    return yaml.safe_load((ROOT / "config" / "bringup" / f"{robot}.yaml").read_text())


def demo_trajectory(names, q0, q1, duration, n=21, start=0.0):
    """The rest-to-rest JointTrajectory of ``names`` from ``q0`` to ``q1`` in ``duration`` s,
    stamped ``start`` (0: on receipt)."""
    import numpy as np

    from multibody_control.trajectories import rest_to_rest
    from multibody_dynamics.ros.conversions import trajectory_msg

    t = np.linspace(0.0, duration, n)
    wp = rest_to_rest(t, q0, q1, 0.0, duration)
    return trajectory_msg(names, t, wp.q, wp.v, wp.a, stamp=start)


def joint_positions(msg, names):
    """Positions (len(names),) of a JointState in the order of ``names``."""
    import numpy as np

    index = {n: i for i, n in enumerate(msg.name)}
    return np.array([msg.position[index[n]] for n in names])


def stamp(msg) -> float:
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def make_bringup_tool():
    """tools/make_bringup.py as a module (its library loops)."""
    spec = importlib.util.spec_from_file_location("make_bringup",
                                                  ROOT / "tools" / "make_bringup.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def library_demo(robot: str, cfg: dict, law: str, hold: float) -> tuple[float, float]:
    """(max, final) error of the moved joints of the demo move in the library loop without
    delay (tools/make_bringup.py library_demo), the bringup's gains and rate."""
    import numpy as np

    from multibody_dynamics.model import load_model

    gains = cfg["controller_node"][law]
    kp, kd = (g[0] if len(g) == 1 else tuple(g) for g in (gains["kp"], gains["kd"]))
    return make_bringup_tool().library_demo(
        load_model(robot), law, kp, kd, np.array(cfg["simulator_node"]["initial_positions"],
                                                 float),
        cfg["demo"]["move"], float(gains["rate_hz"]), hold=hold)


def set_parameters(probe, client, **values):
    """Set controller_node parameters (bool, str or float list) through its service; raises
    RuntimeError with the reasons when one is refused."""
    from rcl_interfaces.msg import Parameter as ParameterMsg
    from rcl_interfaces.msg import ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    def value(v):
        if isinstance(v, bool):
            return ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=v)
        if isinstance(v, str):
            return ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=v)
        return ParameterValue(type=ParameterType.PARAMETER_DOUBLE_ARRAY, double_array_value=v)

    request = SetParameters.Request(parameters=[ParameterMsg(name=k, value=value(v))
                                                for k, v in values.items()])
    result = probe.call(client, request, 30.0)
    if not all(r.successful for r in result.results):
        raise RuntimeError(f"parameters refused: {[r.reason for r in result.results]}")


def load_factor() -> float:
    """How many times longer than on an idle machine CPU-bound work takes now: the 1-minute
    load average per CPU, at least 1 (os.getloadavg; 1 where it is not available)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


def _past(t0: float, budget: float) -> bool:
    """Whether more than ``budget`` s of wall time, scaled by the load measured now
    (:func:`load_factor`), have passed since ``t0`` (time.monotonic).  Node start-up is
    CPU-bound (imports, model, numba caches): a load of 10-15 on 2 cores made passive_arm4's
    three nodes miss a fixed 90 s while they were still starting, not stalled."""
    return time.monotonic() - t0 > budget * load_factor()


def _wait_loop(run, ready, what: str):
    """Wait until ``ready()``, for STARTUP s scaled by the load (:func:`_past`); RuntimeError
    if the launch ends first."""
    t0 = time.monotonic()
    while not _past(t0, STARTUP) and not ready():
        if not run.alive:
            raise RuntimeError(f"the launch ended:\n{run.log()[-4000:]}")
        time.sleep(0.05)
    if not ready():
        raise RuntimeError(f"no {what} after {time.monotonic() - t0:.0f} s (STARTUP {STARTUP:g} "
                           f"s x load factor {load_factor():.1f}):\n{run.log()[-4000:]}")


def _record_clock(probe):
    """The simulator's /clock as the probe sees it now: a depth-1 reader, so that its message
    is the newest even when the probe's /joint_states reader lags behind a fast lockstep loop
    (under load the probe fell seconds of simulated time behind it, and a move stamped from
    its last state started in the past and was refused)."""
    from rosgraph_msgs.msg import Clock

    return probe.record(Clock, "/clock", depth=1)


def _sim_now(states, clock) -> float:
    """The latest simulated time seen [s]: the last state's stamp or the last /clock."""
    now = stamp(states[-1])
    if clock:
        c = clock[-1].clock
        now = max(now, c.sec + 1e-9 * c.nanosec)
    return now


def _run_to(run, states, t_end: float):
    """Wait until a state stamped ``t_end`` (simulated time) or later has arrived; the wall
    clock bounds only a stalled loop (STARTUP scaled by the load, :func:`_past`), the load sets
    the pace."""
    wall = time.monotonic()
    while stamp(states[-1]) < t_end:
        if not run.alive or _past(wall, STARTUP):
            raise RuntimeError(f"the loop did not reach t = {t_end:.3f} s:\n{run.log()[-4000:]}")
        time.sleep(0.05)
    time.sleep(0.5)  # the probe's spin thread takes what DDS still holds for it


def _demo_goal(model, law: str, q_start, move: dict):
    """Goal configuration of a demo ``move`` ({joint: delta}) from ``q_start``, the joints the
    trajectory names and their indices: a closed loop under a constrained law gets the moved
    (independent) joints only, any other robot all of them."""
    names = list(model.coordinate_names)
    q_goal = q_start.copy()
    q_goal[[names.index(n) for n in move]] += list(move.values())
    constrained = law in ("projected_inverse_dynamics", "quasi_velocity")
    sent = list(move) if constrained and model.closures else names
    return q_goal, sent, [names.index(n) for n in sent]


def run_lockstep_demo(prefix: Path, probe, robot: str, log_path: Path,
                      controller: str = "default", *, lockstep: bool = False,
                      hold: float = LOCKSTEP_HOLD, library: bool = True) -> dict:
    """``bringup.launch.py robot:=<robot> sim:=embedded rviz:=false`` (and ``controller``) of
    a robot whose defaults put the loop in lockstep on simulated time (or any robot with
    ``lockstep``: the launch argument ``lockstep:=true``); the demo move of its defaults,
    stamped LOCKSTEP_LEAD s of simulated time after the last state seen, then ``hold`` s.
    Errors of the moved joints against the rest-to-rest reference computed here, and (with
    ``library``) the library run of the same loop to the last state recorded.

    Returns a dict: ``law``, ``states`` (recorded in the move and hold), ``rate`` (of them per
    simulated second), ``t_last`` (of the last one after the start [s]), ``max_error``,
    ``end_error`` [rad | m], ``library_max``, ``library_end``, ``died`` (a process died during
    the run), ``alive`` (the launch at the end of the run), ``exit_code`` (of the launch after
    SIGINT; None: killed), ``leftover`` (pids after it), ``log``.
    """
    import numpy as np
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory

    from multibody_control.trajectories import rest_to_rest
    from multibody_dynamics.model import load_model

    cfg = bringup_defaults(robot)
    if not (lockstep or cfg.get("use_sim_time")):
        raise ValueError(f"{robot}: its bringup loop runs on the wall clock, not in lockstep")
    model = load_model(robot)
    law = cfg["law"] if controller == "default" else controller
    move, duration = cfg["demo"]["move"], float(cfg["demo"]["duration"])
    names, moved = list(model.coordinate_names), list(move)
    imoved = [names.index(n) for n in moved]
    states = probe.record(JointState, "/joint_states", depth=2000)
    clock = _record_clock(probe)
    commands = probe.record(Float64MultiArray, "/effort_controller/commands", depth=50)
    pub = probe.publisher(JointTrajectory, "/controller_node/joint_trajectory")
    args = {"robot": robot, "sim": "embedded", "rviz": "false"}
    if controller != "default":
        args["controller"] = controller
    if lockstep:
        args["lockstep"] = "true"
    run = LaunchProcess(prefix, "bringup.launch.py", args, log_path)
    out: dict = {"robot": robot, "law": law}
    try:
        _wait_loop(run, lambda: states and commands and pub.get_subscription_count() > 0,
                   "loop")
        q_start = joint_positions(states[-1], names)
        q_goal, sent, idx = _demo_goal(model, law, q_start, move)
        n_before = len(states)
        t_sent = _sim_now(states, clock) + LOCKSTEP_LEAD
        pub.publish(demo_trajectory(sent, q_start[idx], q_goal[idx], duration, start=t_sent))
        _run_to(run, states, t_sent + duration + hold)
        log = run.log()
        out.update(died="process has died" in log, alive=run.alive)
        recorded = [m for m in list(states)[n_before:]
                    if t_sent <= stamp(m) <= t_sent + duration + hold]
        t = np.array([stamp(m) - t_sent for m in recorded])
        ref = rest_to_rest(t, q_start[imoved], q_goal[imoved], 0.0, duration).q
        got = np.array([joint_positions(m, moved) for m in recorded])
        out.update(states=len(recorded), rate=len(recorded) / (duration + hold),
                   t_last=float(t[-1]), max_error=float(np.max(np.abs(ref - got))),
                   end_error=float(np.max(np.abs(got[-1] - q_goal[imoved]))))
    finally:
        out["exit_code"] = run.stop()
        out["leftover"] = run.leftover
        out["log"] = run.log()
    out["library_max"], out["library_end"] = library_demo(robot, cfg, law,
                                                          out["t_last"] - duration) \
        if library else (None, None)
    return out


def library_force_demo(hold: float = LOCKSTEP_HOLD) -> dict:
    """The force-control demo of :func:`run_force_control_demo` in the library loop without
    delay (tools/make_bringup.py library_force_demo)."""
    return make_bringup_tool().library_force_demo(LAMBDA_D, LOCKSTEP_LEAD, hold)


def run_force_control_demo(prefix: Path, probe, log_path: Path) -> dict:
    """prr_surface with ``controller:=quasi_velocity lockstep:=true`` under bringup.launch.py;
    ``force_control`` and ``lambda_d`` = LAMBDA_D set through the controller's parameter
    service, the demo move of the independent joints (q2, q3: the trajectory names only them)
    stamped on the simulated clock; then ``law`` switched to projected_inverse_dynamics (force
    control kept) and the move made back.

    Returns a dict: ``before`` (the multipliers received before force control [N]); per law
    (``quasi_velocity``, ``projected_inverse_dynamics``) a dict of ``multiplier_min``,
    ``multiplier_max`` [N] and ``multipliers`` (their count: those received from 0.1 s of wall
    time after the sending to the end of the hold), ``states``, ``t_last``, ``max_error``,
    ``end_error`` [rad]; ``multipliers_after_switch`` (received after the law change),
    ``accepted`` / ``rejected`` (trajectories, from the controller's log), ``died``,
    ``alive``, ``exit_code``, ``leftover``, ``log`` as :func:`run_lockstep_demo`.
    """
    import numpy as np
    from rcl_interfaces.srv import SetParameters
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory

    from multibody_control.trajectories import rest_to_rest

    robot = "prr_surface"
    cfg = bringup_defaults(robot)
    names = ["q1", "q2", "q3"]
    move, duration = cfg["demo"]["move"], float(cfg["demo"]["duration"])
    moved = list(move)
    idx = [names.index(n) for n in moved]
    states = probe.record(JointState, "/joint_states", depth=5000)
    clock = _record_clock(probe)
    lam = probe.record(Float64MultiArray, "/simulator_node/constraint_forces", depth=1000,
                       timed=True)
    pub = probe.publisher(JointTrajectory, "/controller_node/joint_trajectory")
    client = probe.node.create_client(SetParameters, "/controller_node/set_parameters")
    run = LaunchProcess(prefix, "bringup.launch.py",
                        {"robot": robot, "controller": "quasi_velocity", "lockstep": "true",
                         "sim": "embedded", "rviz": "false"}, log_path)

    def move_and_record(sign):
        q_start = joint_positions(states[-1], names)
        q_goal = q_start.copy()
        for name, delta in move.items():
            q_goal[names.index(name)] += sign * delta
        t_start = _sim_now(states, clock) + LOCKSTEP_LEAD
        mono = time.monotonic()
        pub.publish(demo_trajectory(moved, q_start[idx], q_goal[idx], duration, start=t_start))
        t_end = t_start + duration + LOCKSTEP_HOLD
        _run_to(run, states, t_end)
        recorded = [m for m in list(states) if t_start <= stamp(m) <= t_end]
        # the multipliers carry no stamp: those received 0.1 s (wall) after the sending on,
        # when one sent before the parameter change is no longer in flight
        after = np.array([m.data[0] for t, m in list(lam) if mono + 0.1 < t])
        t = np.array([stamp(m) - t_start for m in recorded])
        ref = rest_to_rest(t, q_start[idx], q_goal[idx], 0.0, duration).q
        got = np.array([joint_positions(m, moved) for m in recorded])
        return {"multiplier_min": float(after.min()) if after.size else float("nan"),
                "multiplier_max": float(after.max()) if after.size else float("nan"),
                "multipliers": int(after.size), "states": len(recorded),
                "t_last": float(t[-1]), "max_error": float(np.max(np.abs(ref - got))),
                "end_error": float(np.max(np.abs(got[-1] - q_goal[idx])))}

    out: dict = {}
    try:
        _wait_loop(run, lambda: len(states) > 10 and len(lam) > 5
                   and pub.get_subscription_count() > 0, "loop")
        out["before"] = [m.data[0] for _, m in list(lam)]
        set_parameters(probe, client, force_control=True, lambda_d=[LAMBDA_D])
        out["quasi_velocity"] = move_and_record(+1)
        n_lam = len(lam)
        set_parameters(probe, client, law="projected_inverse_dynamics")
        out["projected_inverse_dynamics"] = move_and_record(-1)
        out["multipliers_after_switch"] = len(lam) - n_lam
        log = run.log()
        out.update(died="process has died" in log, alive=run.alive,
                   accepted=log.count("trajectory accepted"), rejected=log.count("rejected"))
    finally:
        out["exit_code"] = run.stop()
        out["leftover"] = run.leftover
        out["log"] = run.log()
    return out


#: Flexible robots: s of simulated time recorded after the demo move (else LOCKSTEP_HOLD)
FLEX_HOLD = {"flexible_parallel_tool": 0.1}  # its plant steps at ~0.08 x real time


def library_flexible_demo(robot: str, cfg: dict, interp, t_start: float, t_end: float):
    """The flexible bringup loop run in the library: the same pd gains on the joint view, the
    simulator's stepper at its rate from ``initial_positions`` at rest, commands held over one
    step and computed from the state at its start (lockstep, no delay), the reference held at
    its first point until ``t_start`` (node clock [s]) and then the trajectory ``interp``
    (a TrajectoryInterpolator), until ``t_end``.

    Returns (max joint error [rad | m] over the run, joint positions at ``t_end`` (nq_r,))."""
    import numpy as np

    from multibody_control.controllers import Reference, make_controller
    from multibody_dynamics.flexible.joint_view import joint_space_model
    from multibody_dynamics.flexible.loader import load_flexible_model
    from multibody_dynamics.flexible.stepper import make_stepper
    from multibody_dynamics.simulate import SimulatorConfig

    system = load_flexible_model(robot)
    nr = system.nq_r
    gains = cfg["controller_node"]["pd"]
    ctl = make_controller("pd", joint_space_model(system), tuple(gains["kp"]),
                          tuple(gains["kd"]))
    sim = make_stepper(system, SimulatorConfig(dt=1.0 / cfg["simulator_node"]["rate_hz"]))
    sim.reset(np.array(cfg["simulator_node"]["initial_positions"], float))
    sim.t = t_start - 0.05  # at rest in equilibrium before: the hold changes nothing
    B = np.asarray(system.B, float)
    err = 0.0
    while sim.t < t_end:
        p, v, a, _ = interp.sample(sim.t - t_start)
        sim.step(B @ ctl.step(sim.t, sim.q[:nr], sim.v[:nr], Reference(p, v, a, None)))
        err = max(err, float(np.max(np.abs(sim.q[:nr] - interp.sample(sim.t - t_start)[0]))))
    return err, sim.q[:nr].copy()


def _field(msg, names, field: str):
    """``field`` (velocity, effort) of a JointState, (len(names),) in the order of ``names``."""
    import numpy as np

    index = {n: i for i, n in enumerate(msg.name)}
    values = getattr(msg, field)
    return np.array([values[index[n]] for n in names])


def _flexible_move(run, states, pub, names, move, duration, hold):
    """Measure the real-time factor over 1 s of wall time, send the demo move stamped zero
    (started by the controller at its first tick after receipt, as joint_trajectory_controller
    does), read that start on the simulated clock from the controller's log and wait for the
    end of the hold.  A move stamped ahead on the simulated clock started late whenever DDS
    took longer than the lead to deliver it (a loaded machine, the loop at half real time:
    the first 0.13 s of the move ran on the held reference).  Returns (rtf, message sent,
    t_start, t_end, q_goal)."""
    wall0, sim0 = time.monotonic(), stamp(states[-1])
    time.sleep(1.0)
    rtf = (stamp(states[-1]) - sim0) / (time.monotonic() - wall0)
    if not rtf > 0.0:
        raise RuntimeError(f"simulated time does not advance:\n{run.log()[-4000:]}")
    q_start = joint_positions(states[-1], names)
    q_goal = q_start.copy()
    for name, delta in move.items():
        q_goal[names.index(name)] += delta
    msg = demo_trajectory(names, q_start, q_goal, duration)
    pub.publish(msg)
    _wait_loop(run, lambda: TRAJECTORY_START.search(run.log()), "start of the move in the "
               "controller's log")
    t_start = float(TRAJECTORY_START.search(run.log()).group(1))
    t_end = t_start + duration + hold
    wall1 = time.monotonic()
    while stamp(states[-1]) < t_end:
        if not run.alive or "process has died" in run.log():
            raise RuntimeError(f"a process ended during the move:\n{run.log()[-4000:]}")
        if time.monotonic() - wall1 > STARTUP + 20.0 * (duration + hold) / rtf:
            raise RuntimeError(f"the loop stalled:\n{run.log()[-4000:]}")
        time.sleep(0.05)
    return rtf, msg, t_start, t_end, q_goal


def run_flexible_demo(prefix: Path, probe, robot: str, log_path: Path) -> dict:
    """``bringup.launch.py robot:=<robot> sim:=embedded rviz:=false`` of a flexible robot (the
    joint PD in lockstep on simulated time): the real-time factor of the running loop
    (simulated over wall time, 1 s), the demo move of its defaults (stamped zero; its start on
    the simulated clock read from the controller's log), then FLEX_HOLD s (default
    LOCKSTEP_HOLD); errors of the joints against the trajectory sent, the lockstep pairing
    from the recorded states (each state's effort is the pd law on the state before it: no
    delay) and the library run of the same loop (:func:`library_flexible_demo`) to the last
    state recorded.

    Returns a dict: ``law`` ("pd"), ``rtf``, ``states`` (recorded in the move and hold),
    ``expected`` (states of the simulator's rate over that span), ``rate`` (recorded per
    simulated second), ``monotonic`` (their stamps increase), ``paired`` (fraction paired
    without delay), ``t_last`` [s after the start], ``max_error``, ``end_error`` (distance
    of the last state from the goal), ``library_max``, ``library_end`` [rad | m],
    ``end_gap`` (last state against the library's positions at its stamp), ``largest`` (the
    largest move), ``started`` (process names), ``accepted`` (the controller accepted the
    trajectory), ``died``, ``alive``, ``exit_code``, ``leftover``, ``log`` as
    :func:`run_lockstep_demo`.
    """
    import re

    import numpy as np
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory

    from multibody_control.controllers.reference import TrajectoryInterpolator
    from multibody_dynamics.flexible.joint_view import joint_space_model
    from multibody_dynamics.flexible.loader import load_flexible_model

    cfg = bringup_defaults(robot)
    system = load_flexible_model(robot)
    names = list(system.joint_names)
    move, duration = cfg["demo"]["move"], float(cfg["demo"]["duration"])
    hold = FLEX_HOLD.get(robot, LOCKSTEP_HOLD)
    states = probe.record(JointState, "/joint_states", depth=5000)
    pub = probe.publisher(JointTrajectory, "/controller_node/joint_trajectory")
    run = LaunchProcess(prefix, "bringup.launch.py",
                        {"robot": robot, "sim": "embedded", "rviz": "false"}, log_path)
    out: dict = {"robot": robot, "law": "pd"}
    try:
        _wait_loop(run, lambda: len(states) > 10 and pub.get_subscription_count() > 0, "loop")
        rtf, msg, t_start, t_end, q_goal = _flexible_move(run, states, pub, names, move,
                                                          duration, hold)
        log = run.log()
        out.update(rtf=rtf, died="process has died" in log, alive=run.alive,
                   started=sorted(re.findall(r"\[(\w+)-\d+\]: process started", log)),
                   accepted="trajectory accepted" in log)
    finally:
        out["exit_code"] = run.stop()
        out["leftover"] = run.leftover
        out["log"] = run.log()
    t = np.array([p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.points])
    interp = TrajectoryInterpolator(t, np.array([p.positions for p in msg.points]),
                                    np.array([p.velocities for p in msg.points]),
                                    np.array([p.accelerations for p in msg.points]))
    recorded = [m for m in list(states) if t_start <= stamp(m) <= t_end]
    stamps = np.array([stamp(m) for m in recorded])
    errors = [np.max(np.abs(joint_positions(m, names) - interp.sample(stamp(m) - t_start)[0]))
              for m in recorded]
    gains = cfg["controller_node"]["pd"]
    kp, kd = np.array(gains["kp"], float), np.array(gains["kd"], float)
    inputs = list(joint_space_model(system).input_names)
    ia = [names.index(n) for n in inputs]

    def law(m):
        p, v, _, _ = interp.sample(stamp(m) - t_start)
        return (kp * (p[ia] - joint_positions(m, inputs))
                + kd * (v[ia] - _field(m, inputs, "velocity")))

    paired = [np.allclose(_field(m1, inputs, "effort"), law(m0), rtol=1e-6, atol=1e-6)
              for m0, m1 in zip(recorded, recorded[1:])]
    q_last = joint_positions(recorded[-1], names)
    err_lib, q_lib = library_flexible_demo(robot, cfg, interp, t_start, stamps[-1])
    out.update(states=len(recorded), rate=len(recorded) / (t_end - t_start),
               expected=(t_end - t_start) * cfg["simulator_node"]["rate_hz"],
               monotonic=bool(np.all(np.diff(stamps) > 0)), paired=float(np.mean(paired)),
               t_last=float(stamps[-1] - t_start), max_error=float(max(errors)),
               end_error=float(np.max(np.abs(q_last - q_goal))), library_max=err_lib,
               library_end=float(np.max(np.abs(q_lib - q_goal))),
               end_gap=float(np.max(np.abs(q_last - q_lib))),
               largest=max(abs(d) for d in move.values()))
    return out


def wallclock_cases() -> list[tuple[str, str]]:
    """(robot, controller:=) of every shipped rigid robot whose bringup defaults run the loop
    on the wall clock (no ``use_sim_time`` in ``config/bringup/<robot>.yaml``; the flexible
    robots and the stiff passive arms have it), with the default law, and arm7's documented
    ``pd`` and ``pid``."""
    robots = [p.stem for p in sorted((ROOT / "config" / "bringup").glob("*.yaml"))
              if not bringup_defaults(p.stem).get("use_sim_time")]
    return [(r, "default") for r in robots] + [("arm7", "pd"), ("arm7", "pid")]


def _wall_errors(recorded, t_sent, moved, q_start, q_goal, duration):
    """Per recorded state, the error of the ``moved`` joints against the rest-to-rest reference
    started at ``t_sent`` (wall clock [s]), the smallest over start times within +-LAG."""
    import numpy as np

    from multibody_control.trajectories import rest_to_rest

    lags = np.linspace(-LAG, LAG, 11)
    errors = []
    for m in recorded:
        ref = rest_to_rest(stamp(m) - t_sent + lags, q_start, q_goal, 0.0, duration).q
        errors.append(np.min(np.max(np.abs(ref - joint_positions(m, moved)), axis=1)))
    return np.array(errors)


def run_wallclock_demo(prefix: Path, probe, tmp_path: Path, robot: str,
                       controller: str = "default") -> dict:
    """``bringup.launch.py robot:=<robot> sim:=embedded rviz:=false`` (and ``controller``)
    with every other argument at its default, for a robot whose defaults run the loop on the
    wall clock: the simulator paced by the wall clock at 1 kHz, the controller on its timer.
    Once states, commands and the controller's trajectory subscription are seen, the demo
    move of the robot's defaults is sent with stamp zero (started on receipt) at the probe's
    wall time ``t_sent``; the states stamped in the move and DEMO_HOLD s after it (1 s
    unless the law is there) are recorded.  The error of a state is taken against the
    rest-to-rest reference computed here from ``t_sent``, the smallest over start times within
    +-LAG s (the delivery latency the probe cannot see).  The figures depend on how much CPU
    the machine leaves the loop: the 1-minute load average is returned beside them.

    Parameters
    ----------
    prefix : Path
        The ament prefix (:func:`make_prefix`).
    probe : ros_helpers.Probe
        The test's node in the launch's ROS domain.
    tmp_path : Path
        Folder of the launch log (``<robot>-<controller>-wallclock.log``).
    robot, controller : str
        The robot; ``controller:=`` (``"default"``: the argument not given).

    Returns
    -------
    dict
        ``robot``, ``law``, ``hold`` [s], ``states`` (recorded in the move and hold),
        ``rate`` (of them per wall-clock second [Hz]), ``max_error`` (over the move and hold),
        ``max_error_at`` (its time after ``t_sent`` [s]), ``last_error`` (of the last state
        against the reference), ``end_error`` (distance of the last state from the goal)
        [rad | m], ``load_before``, ``load_after`` (1-minute load averages before the launch
        and after the hold), ``died``, ``alive``, ``exit_code``, ``leftover``, ``log`` as
        :func:`run_lockstep_demo`.
    """
    import numpy as np
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory

    from multibody_dynamics.model import load_model

    cfg = bringup_defaults(robot)
    if cfg.get("use_sim_time"):
        raise ValueError(f"{robot}: its bringup loop runs in lockstep on simulated time, not on "
                         "the wall clock (run_lockstep_demo)")
    model = load_model(robot)
    law = cfg["law"] if controller == "default" else controller
    move, duration = cfg["demo"]["move"], float(cfg["demo"]["duration"])
    hold = DEMO_HOLD.get(law, 1.0)
    names, moved = list(model.coordinate_names), list(move)
    imoved = [names.index(n) for n in moved]
    states = probe.record(JointState, "/joint_states", depth=2000)
    commands = probe.record(Float64MultiArray, "/effort_controller/commands", depth=50)
    pub = probe.publisher(JointTrajectory, "/controller_node/joint_trajectory")
    args = {"robot": robot, "sim": "embedded", "rviz": "false"}
    if controller != "default":
        args["controller"] = controller
    out: dict = {"robot": robot, "law": law, "hold": hold, "load_before": os.getloadavg()[0]}
    run = LaunchProcess(prefix, "bringup.launch.py", args,
                        Path(tmp_path) / f"{robot}-{controller}-wallclock.log")
    try:
        _wait_loop(run, lambda: states and commands and pub.get_subscription_count() > 0,
                   "loop")
        q_start = joint_positions(states[-1], names)  # where the simulator holds the robot
        q_goal, sent, idx = _demo_goal(model, law, q_start, move)
        n_before = len(states)
        t_sent = time.time()
        pub.publish(demo_trajectory(sent, q_start[idx], q_goal[idx], duration))
        time.sleep(duration + hold)
        log = run.log()
        out.update(died="process has died" in log, alive=run.alive,
                   load_after=os.getloadavg()[0])
        recorded = [m for m in list(states)[n_before:]
                    if t_sent <= stamp(m) <= t_sent + duration + hold]
        if not recorded:
            new = list(states)[n_before:]
            last = f"{stamp(new[-1]) - t_sent:+.3f} s" if new else "none"
            raise RuntimeError(f"no /joint_states stamped in the move and hold ({len(new)} "
                               f"after the sending, the last stamped {last} from it):\n"
                               f"{log[-4000:]}")
        errors = _wall_errors(recorded, t_sent, moved, q_start[imoved], q_goal[imoved],
                              duration)
        worst = int(np.argmax(errors))
        out.update(states=len(recorded), rate=len(recorded) / (duration + hold),
                   max_error=float(errors[worst]),
                   max_error_at=stamp(recorded[worst]) - t_sent,
                   last_error=float(errors[-1]),
                   end_error=float(np.max(np.abs(joint_positions(recorded[-1], moved)
                                                 - q_goal[imoved]))))
    finally:
        out["exit_code"] = run.stop()
        out["leftover"] = run.leftover
        out["log"] = run.log()
    return out
