"""The bringups under the real launch: the lockstep loops' DDS figures beside the library's,
and the wall-clock defaults (case group ``wallclock``).

``bringup.launch.py robot:=<robot> sim:=embedded rviz:=false`` run with ``LaunchService``
(``launch`` and ``launch_ros`` from ../shared/ros-launch-wheels, as ``make test`` installs
them) on an ament prefix of this tree, for every rigid robot whose defaults
(``config/bringup/<robot>.yaml``) put the loop in lockstep on simulated time: the stiff
passive arms under feedback linearization (and passive_arm4 with
``controller:=projected_inverse_dynamics``, the delay-tolerant alternative), dual_arm_load
under feedback linearization of its motors through the constrained dynamics.  Each sends the
demo move of its defaults, stamped on the simulated clock, and records ``/joint_states``
(``test/launch_helpers.py`` ``run_lockstep_demo``, the run ``test_launch_bringup.py`` checks):
the largest error of the moved joints over the move and 1 s of hold and their error at the
end, against the rest-to-rest reference computed here; beside them the library run of the
same loop (``tools/make_bringup.py`` ``library_demo``: the same law, gains and rate, the
command computed from the state at the start of each step, no delay) to the last recorded
state.

prr_surface's force control (``test/launch_helpers.py`` ``run_force_control_demo``):
``controller:=quasi_velocity lockstep:=true``, ``force_control`` and ``lambda_d`` = 50 N set
through the parameter service, the demo move of theta = (q2, q3), then ``law`` switched to
projected_inverse_dynamics and the move made back: range of the surface multiplier the
simulator publishes and the tracking errors, beside the library run of the same sequence
(``library_force_demo``).

The flexible robots (``test/launch_helpers.py`` ``run_flexible_demo``, the run of
``test_launch_bringup.py::test_flexible_bringup_tracks_demo_reference``): their defaults run
the joint PD in lockstep on simulated time; the real-time factor of the running loop, the
share of states paired without delay (each state's effort is the PD law on the state before
it), the largest joint error over the demo move and its hold and the distance from the goal
at the end, beside the library run of the same loop (``library_flexible_demo``) to the last
recorded state.

The errors do not depend on the load (lockstep); the states per simulated second do (the
probe may drop some).  The 1-minute load average is recorded with every entry.

The case group ``wallclock`` (``test/launch_helpers.py`` ``run_wallclock_demo``, the run of
``test_launch_bringup.py::test_bringup_wall_clock_defaults``): every rigid robot whose
defaults run the loop on the wall clock (``launch_helpers.wallclock_cases``: the default law
of each, and arm7 with ``controller:=pd`` and ``pid``), launched with the launch's true
defaults (no lockstep argument); the demo move sent with stamp zero, the largest error of the
moved joints over the move and its hold against the reference started at the probe's wall
time and the distance from the goal at the end, the states recorded per wall-clock second,
and the 1-minute load average before the launch and after the hold.  These figures do depend
on the load: they say what the defaults give on this machine at that load, and are worth
recording only on an idle one.  No library column: the wall-clock loop's delay is whatever
the scheduler gives.

``BENCH_ROS_LAUNCH_ONLY=passive_arm2,force`` selects cases (robot names, ``force``,
``flexible`` for the four flexible robots, ``wallclock`` for that group); the entries of the
cases not selected are kept from bench/results.json, so that ``--only ros_launch`` with a
selection reruns only those.
Without launch, launch_ros or rclpy every entry is skipped with the reason.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

TEST = Path(__file__).resolve().parents[1] / "test"
#: (robot, controller:=) of the lockstep demo runs
CASES = (
    ("passive_arm2", "default"),
    ("passive_arm4", "default"),
    ("passive_arm_minphase", "default"),
    ("passive_arm_nonminphase", "default"),
    ("passive_arm4", "projected_inverse_dynamics"),
    ("dual_arm_load", "default"),
)
#: the flexible robots (joint PD in lockstep on simulated time)
FLEXIBLE = ("flexible_manipulator", "flexible_manipulator_book", "flexible_cart_manipulator",
            "flexible_parallel_tool")
RESULTS = Path(__file__).resolve().parent / "results.json"


#: what a run that went wrong raises: the helpers' RuntimeError, pytest.fail of the probe
_FAILURES: tuple[type[BaseException], ...] = (RuntimeError, AssertionError)


def _selected() -> set[str] | None:
    only = os.environ.get("BENCH_ROS_LAUNCH_ONLY", "")
    return {s.strip() for s in only.split(",") if s.strip()} or None


def _case(entry: dict) -> str:
    """The selection name of an entry: ``wallclock`` for that group's, ``force`` for
    prr_surface's force control, else its robot."""
    if entry.get("wallclock"):
        return "wallclock"
    return "force" if entry.get("robot") == "prr_surface" else entry.get("robot", "")


def _kept(only: set[str]) -> list[dict]:
    """The entries of bench/results.json's ros_launch suite whose case is not in ``only``."""
    import json

    if not RESULTS.exists():
        return []
    previous = json.loads(RESULTS.read_text()).get("suites", {}).get("ros_launch", [])
    return [e for e in previous if "skipped" not in e and _case(e) not in only]


def _probe(ros_helpers):
    """A ros_helpers.Probe in its own context, in the isolated domain of its launches."""
    import rclpy

    os.environ.update(ros_helpers.ROS_ENV)
    context = rclpy.context.Context()
    rclpy.init(context=context, domain_id=ros_helpers.DOMAIN_ID)
    return ros_helpers.Probe(rclpy, context), context


def _close(probe, context):
    import rclpy

    probe.close()
    rclpy.try_shutdown(context=context)


def _common(r: dict) -> dict:
    return {"load_average_1min": os.getloadavg()[0],
            "clean": bool(not r.get("died") and r.get("alive") and r.get("exit_code") is not None
                          and not r.get("leftover"))}


def _lockstep(lh, ros_helpers, prefix, logs, robot, controller) -> dict:
    name = robot if controller == "default" else f"{robot} controller:={controller}"
    probe, context = _probe(ros_helpers)
    try:
        r = lh.run_lockstep_demo(prefix, probe, robot, logs / f"{robot}-{controller}.log",
                                 controller)
    except _FAILURES as exc:
        return {"name": name, "robot": robot, "failed": " ".join(str(exc).split())[:300]}
    finally:
        _close(probe, context)
    entry = {"name": name, "robot": robot, "law": r["law"], "max_error": r["max_error"],
             "end_error": r["end_error"], "library_max": r["library_max"],
             "library_end": r["library_end"], "states_per_s": r["rate"], "t_last": r["t_last"]}
    entry.update(_common(r))
    print(f"  {name}: DDS {r['max_error']:.3g} / {r['end_error']:.3g}, library "
          f"{r['library_max']:.3g} / {r['library_end']:.3g}", flush=True)
    return entry


def _force(lh, ros_helpers, prefix, logs) -> list[dict]:
    probe, context = _probe(ros_helpers)
    try:
        r = lh.run_force_control_demo(prefix, probe, logs / "prr_surface-force.log")
    except _FAILURES as exc:
        return [{"name": "prr_surface force control", "robot": "prr_surface",
                 "failed": " ".join(str(exc).split())[:300]}]
    finally:
        _close(probe, context)
    lib = lh.library_force_demo()
    out = []
    for law in ("quasi_velocity", "projected_inverse_dynamics"):
        m, b = r[law], lib[law]
        entry = {"name": f"prr_surface force control ({law})", "robot": "prr_surface",
                 "law": law, "lambda_d": lh.LAMBDA_D,
                 "multiplier_min": m["multiplier_min"], "multiplier_max": m["multiplier_max"],
                 "max_error": m["max_error"], "end_error": m["end_error"],
                 "library_multiplier_min": b["multiplier_min"],
                 "library_multiplier_max": b["multiplier_max"],
                 "library_max": b["max_error"], "library_end": b["end_error"],
                 "direction": "forward" if law == "quasi_velocity" else "back"}
        entry.update(_common(r))
        print(f"  {entry['name']}: {m['multiplier_min']:.7g}..{m['multiplier_max']:.7g} N, "
              f"{m['max_error']:.3g} / {m['end_error']:.3g} rad", flush=True)
        out.append(entry)
    return out


def _flexible(lh, ros_helpers, prefix, logs, robot) -> dict:
    probe, context = _probe(ros_helpers)
    try:
        r = lh.run_flexible_demo(prefix, probe, robot, logs / f"{robot}.log")
    except _FAILURES as exc:
        return {"name": robot, "robot": robot, "flexible": True,
                "failed": " ".join(str(exc).split())[:300]}
    finally:
        _close(probe, context)
    entry = {"name": robot, "robot": robot, "flexible": True, "law": r["law"],
             "real_time_factor": r["rtf"], "paired": r["paired"], "max_error": r["max_error"],
             "end_error": r["end_error"], "library_max": r["library_max"],
             "library_end": r["library_end"], "states_per_s": r["rate"], "t_last": r["t_last"],
             "move": r["largest"]}
    entry.update(_common(r))
    entry["clean"] = entry["clean"] and r["started"] == ["controller_node", "simulator_node"]
    print(f"  {robot}: rtf {r['rtf']:.3g}, paired {r['paired']:.1%}, DDS {r['max_error']:.3g} "
          f"/ {r['end_error']:.3g}, library {r['library_max']:.3g} / {r['library_end']:.3g}",
          flush=True)
    return entry


def _wallclock(lh, ros_helpers, logs, prefix, robot, controller) -> dict:
    name = robot if controller == "default" else f"{robot} controller:={controller}"
    probe, context = _probe(ros_helpers)
    try:
        r = lh.run_wallclock_demo(prefix, probe, logs, robot, controller)
    except _FAILURES as exc:
        return {"name": name, "robot": robot, "wallclock": True,
                "load_average_1min": os.getloadavg()[0],
                "failed": " ".join(str(exc).split())[:300]}
    finally:
        _close(probe, context)
    entry = {"name": name, "robot": robot, "wallclock": True, "law": r["law"],
             "max_error": r["max_error"], "end_error": r["end_error"],
             "states_per_s": r["rate"], "hold": r["hold"]}
    entry.update(_common(r))
    entry.update(load_average_1min=r["load_before"], load_after=r["load_after"])
    print(f"  {name} (wall clock): {r['max_error']:.3g} / {r['end_error']:.3g}, "
          f"{r['rate']:.0f} states/s, load {r['load_before']:.2f} -> {r['load_after']:.2f}",
          flush=True)
    return entry


def run() -> list[dict]:
    if str(TEST) not in sys.path:
        sys.path.insert(0, str(TEST))
    try:
        import launch_helpers as lh
        import ros_helpers
    except ImportError as exc:  # pytest (the test helpers) missing
        return [{"name": "ros_launch", "skipped": f"test helpers not importable: {exc}"}]
    if not (lh.HAVE_LAUNCH and lh.HAVE_RCLPY):
        return [{"name": "ros_launch", "skipped": "launch / launch_ros / rclpy not installed "
                 "(docs/ros-launch.md)"}]
    import pytest

    global _FAILURES
    _FAILURES = (RuntimeError, AssertionError, pytest.fail.Exception)
    only = _selected()
    if only is not None and "flexible" in only:
        only |= set(FLEXIBLE)
    entries = []
    with tempfile.TemporaryDirectory(prefix="bench_ros_launch_") as tmp:
        prefix = lh.make_prefix(Path(tmp) / "prefix")
        logs = Path(tmp)
        for robot, controller in CASES:
            if only is None or robot in only:
                entries.append(_lockstep(lh, ros_helpers, prefix, logs, robot, controller))
        if only is None or "force" in only:
            entries += _force(lh, ros_helpers, prefix, logs)
        for robot in FLEXIBLE:
            if only is None or robot in only:
                entries.append(_flexible(lh, ros_helpers, prefix, logs, robot))
        if only is None or "wallclock" in only:
            for robot, controller in lh.wallclock_cases():
                entries.append(_wallclock(lh, ros_helpers, logs, prefix, robot, controller))
    if only is not None:  # the other cases' last figures, in the order of the cases
        order = [r for r, _ in CASES] + ["force"] + list(FLEXIBLE) + ["wallclock"]
        entries = sorted(_kept(only) + entries,
                         key=lambda e: order.index(_case(e)) if _case(e) in order else -1)
    return entries


if __name__ == "__main__":
    for e in run():
        print(e)
