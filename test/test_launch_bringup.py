"""bringup.launch.py run for real, for every shipped robot, and the no-orphan rules.

Flexible robots (test_flexible_bringup_tracks_demo_reference) run in lockstep on simulated
time and are checked against the library run of the same loop; so are the rigid robots whose
defaults say ``use_sim_time`` (the stiff passive arms and dual_arm_load: the demo move is
stamped on the simulated clock and compared with tools/make_bringup.py's library_demo, in
launch_helpers.run_lockstep_demo, which bench/bench_ros_launch.py also runs), and
test_force_control_over_launch runs prr_surface with ``lockstep:=true``.  The rigid robots
whose defaults run the loop on the wall clock are launched with ``lockstep:=true`` by
test_bringup_tracks_demo_reference (their laws, gains and initial positions as shipped): a
tracking error measured on the wall clock of a loaded 2-core machine says how much CPU the
loop got, not how it tracks (its docstring).  Their true default, the wall clock, is tracked
by test_bringup_wall_clock_defaults for two representatives (four_bar: a closed loop under
its constrained law; arm7: an open chain) under the same bounds, when the machine's 1-minute
load average is at most WALL_LOAD_PER_CPU per CPU (else it skips, naming the load), and for
every wall-clock robot by bench/bench_ros_launch.py's ``wallclock`` group (the same
launch_helpers.run_wallclock_demo, figures with their load in docs/ros-launch.md).

Each test runs ``LaunchService`` on the installed launch file (an ament prefix of this tree,
:mod:`launch_helpers`) in a subprocess, ``robot:=<robot> sim:=embedded rviz:=false`` with
every other argument at its default (but the loop's clock where said), in the test's
isolated ROS domain.  A probe node of the test sends the robot's demo reference (``demo`` of
``config/bringup/<robot>.yaml``: a rest-to-rest quintic move of the named joints), stamped on
the simulated clock (on the wall clock: stamp zero, started on receipt, the reference taken
from the probe's time of sending within +-LAG s), to ``/controller_node/joint_trajectory``
once the loop runs, and records ``/joint_states``.  Checked: the three nodes of the suite
stay up (no ``process has died`` in the launch log), ``/joint_states`` flows, and the
tracking error of the moved joints is bounded, measured against the reference computed here
from the same formula (``multibody_control.trajectories.rest_to_rest``), not taken from the
controller.  The move lasts ``demo.duration`` (2 s) and ``HOLD`` s of holding follow (1 s,
3 s for the joint PD).

Without launch/launch_ros (``make test`` installs them from ../shared/ros-launch-wheels) or
rclpy the module is skipped.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
import ros_helpers
from launch_helpers import (
    DEMO_HOLD,
    HAVE_LAUNCH,
    HAVE_RCLPY,
    LAMBDA_D,
    STARTUP,
    LaunchProcess,
    bringup_defaults,
    make_prefix,
    run_flexible_demo,
    run_force_control_demo,
    run_lockstep_demo,
    run_wallclock_demo,
)

from multibody_dynamics.flexible.loader import is_flexible_model

probe = ros_helpers.probe  # fixture

pytestmark = [
    pytest.mark.ros,
    pytest.mark.slow,
    pytest.mark.skipif(not (HAVE_LAUNCH and HAVE_RCLPY),
                       reason="launch / launch_ros / rclpy not installed (docs/ros-launch.md)"),
]

ROOT = Path(__file__).resolve().parents[1]
BRINGUP = sorted((ROOT / "config" / "bringup").glob("*.yaml"))
#: rigid robots and flexible models (lockstep loop on simulated time)
ROBOTS = [p.stem for p in BRINGUP if not is_flexible_model(p.stem)]
FLEXIBLE = [p.stem for p in BRINGUP if is_flexible_model(p.stem)]
# s recorded after the end of the move (joint PD converges slowly); else 1
HOLD = DEMO_HOLD
#: Bounds [rad | m] on the moved joints: (largest tracking error over the move and the hold,
#: distance from the goal at the end of the hold).  The move is 0.1-1 rad in 2 s.  Measured
#: on a 2-core machine shared with other test runs (load average 8): the model-based laws
#: (computed torque, projected inverse dynamics: e'' + 20 e' + 100 e = 0 with an exact model)
#: 1e-3 - 4e-2 over the move when /joint_states flows near its 1 kHz, up to 0.17 when the
#: loaded simulator falls behind its wall-clock schedule (states at 200 Hz: the plant lags the
#: wall-clock reference), and 1e-8 - 5e-3 at the end; the joint PD (no model, elastic passive
#: joints swinging) 0.02-0.19 during and 0.02-0.13 at the end (a library simulation of the
#: passive arms with 1-5 control periods of delay: 0.04-0.1 rad at 3 s, still converging).
#: The bounds catch a loop that diverges or does not track (braked: the whole move stays as
#: error at the end), with room for the load.  None: 3/4 of the largest move (the passive arms
#: under PD ended 0.02-0.11 rad from a 0.2 rad goal after a 3 s hold; braked: 0.2).
ERROR_BOUND = {"computed_torque": (0.25, 0.02), "projected_inverse_dynamics": (0.25, 0.02),
               "feedback_linearization": (0.25, 0.02),
               "pd": (0.3, None), "pid": (0.3, None)}


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    return make_prefix(tmp_path_factory.mktemp("ament") / "prefix")


#: (robot, controller:=): every robot with its default, and arm7's documented pd and pid (they
#: diverged with the node's generic gains: kd dt / M = 167 on joint 7)
CASES = [(r, "default") for r in ROBOTS] + [("arm7", "pd"), ("arm7", "pid")]


@pytest.mark.parametrize("robot, controller", CASES, ids=[f"{r}-{c}" for r, c in CASES])
def test_bringup_tracks_demo_reference(prefix, probe, tmp_path, robot, controller):
    """The demo move under bringup.launch.py with the robot's defaults, judged on simulated
    time.

    A robot whose defaults run the loop on the wall clock is launched with ``lockstep:=true``
    (its law, gains and initial positions unchanged; the simulator steps on the controller's
    commands, on /clock): the tracking errors then depend on the loop, not on how much CPU a
    loaded machine leaves it.  On the wall clock, under a load of 10-15 on 2 cores, four_bar's
    controller stalled and the crank fell away (1.57 rad) and prr_surface ended 0.028 rad
    from its goal (bound 0.02), while the same runs passed at low load; the bounds
    (ERROR_BOUND) are unchanged.  The wall-clock defaults themselves are tracked by
    test_bringup_wall_clock_defaults (four_bar, arm7; skipped on a loaded machine), the
    launch_testing tests (test/launch) and the node tests.
    """
    cfg = bringup_defaults(robot)
    if cfg.get("use_sim_time"):  # the loop in lockstep on simulated time by default
        _check_lockstep_demo(prefix, probe, tmp_path, robot, controller)
        return
    law = cfg["law"] if controller == "default" else controller
    move = cfg["demo"]["move"]
    hold = HOLD.get(law, 1.0)
    r = run_lockstep_demo(prefix, probe, robot, tmp_path / "launch.log", controller,
                          lockstep=True, hold=hold, library=False)
    print(f"{robot} ({law}, lockstep:=true): {r['states']} states ({r['rate']:.0f} per "
          f"simulated s), tracking error max {r['max_error']:.2e}, final {r['end_error']:.2e} "
          f"rad | m\n----- launch (exit {r['exit_code']}):\n{r['log'][-6000:]}")
    assert not r["died"] and r["alive"], r["log"][-4000:]
    # the simulator publishes at 1000 Hz; the probe may drop some, but a flow it must be
    assert r["rate"] > 50.0, f"/joint_states at {r['rate']:.0f} per simulated s"
    assert r["t_last"] > float(cfg["demo"]["duration"]) + 0.5 * hold, r["t_last"]
    during, at_end = ERROR_BOUND[law]
    at_end = at_end or 0.75 * max(abs(d) for d in move.values())
    assert r["max_error"] < during, (r["max_error"], r["log"][-3000:])
    assert r["end_error"] < at_end, (r["end_error"], r["log"][-3000:])
    assert r["exit_code"] is not None, "the launch did not end within 20 s of SIGINT"
    assert not r["leftover"], f"processes left after the launch: {r['leftover']}"


#: Largest 1-minute load average per CPU at which the wall-clock test runs (above: skipped
#: with the load).  The wall-clock loop's figures follow the CPU it gets: on 2 CPUs the runs
#: failed at a load of 10-15 (5-7.5 per CPU: four_bar's controller stalled, the crank fell
#: away) and passed at 1.4 (0.7 per CPU) and at 8 (4 per CPU, where ERROR_BOUND was measured,
#: errors up to 0.17 of its 0.25).  The load is read before the launch, whose own processes
#: (launch, three nodes, the probe) then add about 3: 2 per CPU (4 on 2 CPUs) puts the run
#: near 7, below the 8 measured passing and the 10 seen failing.
WALL_LOAD_PER_CPU = 2.0
#: the representative wall-clock robots: a closed loop under its constrained law, an open chain
WALL_CASES = [("four_bar", "default"), ("arm7", "default")]


@pytest.mark.parametrize("robot, controller", WALL_CASES, ids=[r for r, _ in WALL_CASES])
def test_bringup_wall_clock_defaults(prefix, probe, tmp_path, robot, controller):
    """The demo move under bringup.launch.py with the launch's true defaults (no lockstep
    argument: the simulator paced by the wall clock, the controller on its timer), judged
    with the bounds of test_bringup_tracks_demo_reference (ERROR_BOUND) against the reference
    started at the probe's wall time (launch_helpers.run_wallclock_demo, which
    bench/bench_ros_launch.py runs for every wall-clock robot).  Skipped, with the load, when
    the machine is too loaded for a wall-clock loop to say anything (WALL_LOAD_PER_CPU)."""
    cpus = os.cpu_count() or 1
    load = os.getloadavg()[0]
    if load / cpus > WALL_LOAD_PER_CPU:
        pytest.skip(f"1-minute load average {load:.1f} on {cpus} CPUs ({load / cpus:.1f} per "
                    f"CPU) is above {WALL_LOAD_PER_CPU:g} per CPU: a wall-clock loop would "
                    "measure the load, not the tracking")
    cfg = bringup_defaults(robot)
    assert not cfg.get("use_sim_time"), f"{robot}'s defaults are no longer on the wall clock"
    try:
        r = run_wallclock_demo(prefix, probe, tmp_path, robot, controller)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    print(f"{robot} ({r['law']}, wall clock): {r['states']} states ({r['rate']:.0f} Hz), "
          f"tracking error max {r['max_error']:.2e} (at t = {r['max_error_at']:.3f} s), last "
          f"{r['last_error']:.2e}, final {r['end_error']:.2e} rad | m; 1-minute load average "
          f"{r['load_before']:.2f} before, {r['load_after']:.2f} after\n"
          f"----- launch (exit {r['exit_code']}):\n{r['log'][-6000:]}")
    assert not r["died"] and r["alive"], r["log"][-4000:]
    # the simulator publishes at 1000 Hz; under load fewer arrive, but a flow it must be
    assert r["rate"] > 50.0, f"/joint_states at {r['rate']:.0f} Hz"
    during, at_end = ERROR_BOUND[r["law"]]
    at_end = at_end or 0.75 * max(abs(d) for d in cfg["demo"]["move"].values())
    assert r["max_error"] < during, (r["max_error"], r["log"][-3000:])
    assert r["end_error"] < at_end, (r["end_error"], r["log"][-3000:])
    assert r["exit_code"] is not None, "the launch did not end within 20 s of SIGINT"
    assert not r["leftover"], f"processes left after the launch: {r['leftover']}"


def _check_lockstep_demo(prefix, probe, tmp_path, robot, controller):
    """The demo move of a robot whose defaults put its loop in lockstep on simulated time
    (launch_helpers.run_lockstep_demo), checked against the library run of the same loop."""
    r = run_lockstep_demo(prefix, probe, robot, tmp_path / "launch.log", controller)
    print(f"{robot} ({r['law']}, lockstep): {r['states']} states ({r['rate']:.0f} per simulated "
          f"s), tracking error max {r['max_error']:.2e}, final {r['end_error']:.2e} rad | m; "
          f"library run of the same loop: max {r['library_max']:.2e}, final "
          f"{r['library_end']:.2e}\n----- launch (exit {r['exit_code']}):\n{r['log'][-6000:]}")
    assert not r["died"] and r["alive"], r["log"][-4000:]
    # dynamics_node is quiet at steady state: dual_arm_load (underactuated closed loop) takes
    # the collocated inverse dynamics, which has an answer at every regular state
    assert "constrained inverse dynamics:" not in r["log"], r["log"][-4000:]
    # the simulator publishes at 1000 Hz; the probe may drop some (a reliable writer's history
    # overflows), but a flow it must be, to past the middle of the move
    assert r["rate"] > 50.0, f"/joint_states at {r['rate']:.0f} per simulated s"
    assert r["t_last"] > 0.5 * float(bringup_defaults(robot)["demo"]["duration"]), r["t_last"]
    # the loop without delay is the library's (tools/make_bringup.py library_demo), run to the
    # last recorded state: its errors with a 20 % margin for the states the probe drops and the
    # exchange's round-off; one period of delay instead raises feedback linearization's 3-5
    # fold on the passive arms (tool's LOCKSTEP)
    assert r["max_error"] < 1.2 * r["library_max"] + 1e-4, r["log"][-3000:]
    assert r["end_error"] < 1.2 * r["library_end"] + 1e-4, r["log"][-3000:]
    assert r["exit_code"] is not None, "the launch did not end within 20 s of SIGINT"
    assert not r["leftover"], f"processes left after the launch: {r['leftover']}"


#: DDS error / library error of the same loop accepted.  The lockstep loop (one plant step
#: per command, one command per state, computed from it at its stamp) is the library's
#: zero-order-hold loop without delay, so the two agree to round-off in the exchange (the
#: closed machine tool's DDS test: 0.0097 against 0.0098 mm); a command one period late
#: makes the joint PD of the undamped arms unstable (spectral radius 1.35-1.44 per period,
#: config/bringup/<robot>.yaml).
FLEX_MARGIN = 1.25


@pytest.mark.parametrize("robot", FLEXIBLE)
def test_flexible_bringup_tracks_demo_reference(prefix, probe, tmp_path, robot):
    """A flexible robot with ``robot:=<robot> sim:=embedded rviz:=false`` only: the lockstep
    loop on simulated time comes up (simulator_node and controller_node; no dynamics_node,
    robot_state_publisher or RViz: no URDF), and tracks the demo move (sent with a start
    stamp on the simulated clock, 0.5 s of wall time ahead) as the library run of the same
    loop does (FLEX_MARGIN); the real-time factor of the loop is measured
    (launch_helpers.run_flexible_demo, which bench/bench_ros_launch.py also runs)."""
    try:
        r = run_flexible_demo(prefix, probe, robot, tmp_path / "launch.log")
    except RuntimeError as exc:
        pytest.fail(str(exc))
    print(f"----- launch (exit {r['exit_code']}):\n{r['log'][-3000:]}")
    log = r["log"]
    assert not r["died"], log[-4000:]
    assert r["started"] == ["controller_node", "simulator_node"], log[-4000:]
    assert r["accepted"], log[-4000:]
    assert r["exit_code"] is not None, "the launch did not end within 20 s of SIGINT"
    assert not r["leftover"], f"processes left after the launch: {r['leftover']}"
    assert r["states"] > 0.9 * r["expected"], \
        f"{r['states']} states where the simulator's rate gives {r['expected']:g}"
    assert r["monotonic"]
    print(f"{robot} (pd, lockstep): real-time factor {r['rtf']:.3g}, {r['states']} states, "
          f"{r['paired']:.1%} paired without delay, tracking error DDS {r['max_error']:.3g}, "
          f"library {r['library_max']:.3g}, final {r['end_error']:.3g} rad | m; move "
          f"{r['largest']:g}")
    # lockstep pairing, from the recorded states alone: the effort a state carries (applied
    # over the step that ended in it) is the pd law on the state before it (no delay); one
    # step of delay instead would be the law on the state two before
    assert r["paired"] > 0.99  # a lockstep timeout under load may break a pair or two
    assert r["max_error"] <= FLEX_MARGIN * r["library_max"] + 1e-9
    # the library loop itself tracks: error below half the move, goal reached within a quarter
    # (a braked or diverging loop fails; the PD of the light hubs is slow, see the tool)
    assert r["library_max"] < 0.5 * r["largest"]
    assert r["end_error"] < 0.25 * r["largest"]
    assert r["end_gap"] < 0.1 * r["largest"]


def test_a_node_that_cannot_start_shuts_the_launch_down(prefix, tmp_path):
    """controller:=computed_torque on passive_arm (underactuated): controller_node refuses to
    start (exit 1); the launch must then stop the simulator and dynamics_node and end by
    itself, leaving no process behind."""
    run = LaunchProcess(prefix, "bringup.launch.py",
                        {"robot": "passive_arm", "controller": "computed_torque",
                         "sim": "embedded", "rviz": "false"}, tmp_path / "launch.log")
    try:
        code = run.wait(STARTUP)
        log = run.log()
        assert code is not None, f"the launch kept running:\n{log[-4000:]}"
        assert "fully actuated" in log, log[-4000:]
        assert "exited with code 1 while the launch was running" in log, log[-4000:]
    finally:
        run.stop()
    assert not run.leftover, f"processes left after the launch: {run.leftover}"


def test_missing_optional_packages_skipped_before_anything_starts(prefix, tmp_path):
    """demo.launch.py with its default rviz:=true where rviz2 (and robot_state_publisher, tf2_ros)
    are not installed: each is reported and left out before the first process starts, and the
    suite's nodes run."""
    run = LaunchProcess(prefix, "demo.launch.py", {}, tmp_path / "launch.log")
    try:
        deadline = time.monotonic() + STARTUP
        while time.monotonic() < deadline and run.log().count("process started") < 4:
            assert run.alive, run.log()[-4000:]
            time.sleep(0.2)
        log = run.log()
        assert log.count("process started") == 4, log[-4000:]  # 2 x simulator + controller
        first = log.index("process started")
        if "package rviz2 is not installed" in log:
            assert log.index("rviz2 is skipped") < first, log[:3000]
        else:  # a ROS install with rviz2: it is started like the others
            assert "rviz2" in log
    finally:
        run.stop()
    assert not run.leftover, f"processes left after the launch: {run.leftover}"


#: |lambda - lambda_d| accepted on the multiplier the simulator publishes [N].  The law sets the
#: multiplier algebraically (Aghili 2010 eq. 47; Aghili 2005 Sect. 7.3) for the state it
#: computed the command from; the simulator samples it after the step, at the next state.  The
#: library loop of this move at 1 kHz stays within 0.0019 N of 50 N without delay (0.0074 N
#: with 3 periods of it), both laws; 0.01 N leaves room for the exchange's round-off.  (On the
#: wall clock, a loaded machine stalls the loop for up to 250 ms: a stale command then met the
#: moving plant with -337..140 N, so the test runs in lockstep:=true.)
FORCE_TOL = 0.01


def test_force_control_over_launch(prefix, probe, tmp_path):
    """prr_surface (fully actuated closed loop: the tip slides on a surface) with
    ``controller:=quasi_velocity lockstep:=true`` under bringup.launch.py; force_control and
    lambda_d = 50 N are set through the controller's parameter service and the demo move of the
    independent joints (q2, q3: the trajectory names only them) is sent, stamped on the
    simulated clock; then the law is switched to projected_inverse_dynamics (same parameter
    service, force control kept) and the move is made back.  Checked for each law: tracking
    (ERROR_BOUND of the model-based laws), and the surface multiplier the simulator publishes
    (~/constraint_forces) at lambda_d during the move and the hold (FORCE_TOL); before the
    first change it is away from it (0 while the plant waits braked for its first command,
    else the minimum-norm multiplier of the holding command)."""
    r = run_force_control_demo(prefix, probe, tmp_path / "launch.log")
    print(f"----- launch (exit {r['exit_code']}):\n{r['log'][-3000:]}")
    assert not r["died"] and r["alive"], r["log"][-4000:]
    assert r["rejected"] == 0 and r["accepted"] == 2, r["log"][-4000:]
    assert r["exit_code"] is not None and not r["leftover"]
    before = np.array(r["before"])
    print(f"prr_surface: multiplier before force control {before.min():.4g}..{before.max():.4g} N")
    assert np.min(np.abs(before - LAMBDA_D)) > 10.0  # the parameter change did it
    assert r["multipliers_after_switch"] > 0
    bound_during, bound_end = ERROR_BOUND["projected_inverse_dynamics"]
    duration = float(bringup_defaults("prr_surface")["demo"]["duration"])
    for law in ("quasi_velocity", "projected_inverse_dynamics"):
        m = r[law]
        print(f"prr_surface ({law}, lockstep, force control {LAMBDA_D:g} N): multiplier "
              f"{m['multiplier_min']:.7g}..{m['multiplier_max']:.7g} N ({m['multipliers']} "
              f"samples); tracking error max {m['max_error']:.2e}, final {m['end_error']:.2e} "
              "rad")
        assert m["t_last"] > 0.5 * duration, f"{law}: last state recorded at {m['t_last']:.3f} s"
        assert m["multipliers"] > 20
        assert max(abs(m["multiplier_min"] - LAMBDA_D), abs(m["multiplier_max"] - LAMBDA_D)) \
            < FORCE_TOL, law
        assert m["max_error"] < bound_during and m["end_error"] < bound_end, law
