"""Shared ROS plumbing in-process: message conversions, parameter helper, throttle, run_node."""

import math

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from multibody_dynamics.ros.conversions import (  # noqa: E402
    JointCoordinates,
    MessageError,
    array_from_msg,
    joint_state_msg,
    joint_state_to_arrays,
    labels_of,
    matrix_msg,
    sec_to_duration,
    sec_to_stamp,
    stamp_to_sec,
    trajectory_from_msg,
    vector_from_msg,
    vector_msg,
)
from multibody_dynamics.ros.parameters import ParameterError, ParameterSet, ParameterSpec  # noqa: E402
from multibody_dynamics.ros.runtime import StartupError, Throttle, run_node  # noqa: E402


@pytest.fixture
def coords(models):
    return JointCoordinates(models["passive_arm"])


def test_joint_state_reordering_round_trip(coords, rng):
    n = coords.n
    q = rng.uniform(-1, 1, n)
    v = rng.uniform(-1, 1, n)
    msg = joint_state_msg(coords, q, v, np.zeros(n), sec_to_stamp(12.5))
    perm = rng.permutation(n)
    shuffled = JointState(header=msg.header, name=[msg.name[i] for i in perm],
                          position=[msg.position[i] for i in perm],
                          velocity=[msg.velocity[i] for i in perm])
    s = joint_state_to_arrays(shuffled, coords)
    np.testing.assert_array_equal(s.q, q)
    np.testing.assert_array_equal(s.v, v)
    assert s.effort is None and s.stamp == 12.5


@pytest.mark.parametrize("change, message", [
    (lambda m: m.name.__setitem__(0, "bogus"), "unknown joint name.*'bogus'"),
    (lambda m: m.name.__setitem__(1, m.name[0]), "duplicate joint name"),
    (lambda m: (m.name.pop(), m.position.pop(), m.velocity.pop()), "missing joint"),
    (lambda m: m.position.pop(), r"JointState.position: expected 4 values, got 3"),
    (lambda m: setattr(m, "velocity", []), r"JointState.velocity: expected 4 values, got 0"),
    (lambda m: m.effort.append(1.0), r"JointState.effort: expected 4 values"),
    (lambda m: m.position.__setitem__(2, math.nan), r"position: NaN or inf at index \[2\]"),
    (lambda m: m.velocity.__setitem__(0, math.inf), r"velocity: NaN or inf at index \[0\]"),
])
def test_joint_state_rejections(coords, change, message):
    msg = JointState(name=list(coords.names), position=[0.0] * 4, velocity=[0.0] * 4)
    change(msg)
    with pytest.raises(MessageError, match=message):
        joint_state_to_arrays(msg, coords)


def test_missing_joint_names_the_robot_and_all_its_joints(coords):
    # what was missing, which robot, and every joint it expects (the message ends with the
    # robot's joint list, as an unknown name's does)
    names = list(coords.names)
    msg = JointState(name=names[:-1], position=[0.0] * 3, velocity=[0.0] * 3)
    with pytest.raises(MessageError) as err:
        joint_state_to_arrays(msg, coords)
    assert str(err.value) == (f"JointState.name: missing joint(s) {names[-1]}; passive_arm has: "
                              f"{', '.join(names)}")


def test_missing_output_names_the_output_rows():
    from multibody_dynamics.ros.conversions import name_order

    index = {"x": 0, "y": 1}
    with pytest.raises(MessageError, match=r"^desired: missing output\(s\) y; the output rows "
                                           r"are: 'x', 'y'$"):
        name_order(["x"], index, "desired", "output", "the output rows are: 'x', 'y'")
    np.testing.assert_array_equal(name_order(["y", "x"], index, "desired", "output", ""), [1, 0])


def _trajectory(names, times, positions=True, velocities=True):
    msg = JointTrajectory(joint_names=list(names))
    for k, t in enumerate(times):
        msg.points.append(JointTrajectoryPoint(
            positions=[0.1 * k + i for i in range(len(names))] if positions else [],
            velocities=[0.0] * len(names) if velocities else [],
            time_from_start=sec_to_duration(t)))
    return msg


def test_trajectory_conversion(coords):
    names = list(reversed(coords.names))
    arr = trajectory_from_msg(_trajectory(names, [0.0, 0.5, 1.25]), coords)
    np.testing.assert_allclose(arr.t, [0.0, 0.5, 1.25])
    # reordered into model order: model joint j was sent at position n-1-j with value k/10 + n-1-j
    np.testing.assert_allclose(arr.positions[1], 0.1 + np.arange(coords.n)[::-1])
    assert arr.accelerations is None and arr.effort is None and arr.start is None
    assert trajectory_from_msg(JointTrajectory(joint_names=names), coords) is None  # stop request


@pytest.mark.parametrize("msg_of, message", [
    (lambda n: _trajectory(n, [0.0, 1.0, 0.5]), "increase strictly; point 2 at 0.5 s follows 1 s"),
    (lambda n: _trajectory(n, [0.0, 0.0]), "increase strictly"),
    (lambda n: _trajectory(["bogus"] + n[1:], [0.0]), "unknown joint name.*'bogus'"),
    (lambda n: _trajectory(n, [0.0], positions=False), "point 0 has no positions"),
])
def test_trajectory_rejections(coords, msg_of, message):
    with pytest.raises(MessageError, match=message):
        trajectory_from_msg(msg_of(list(coords.names)), coords)


def test_trajectory_nan_and_partial_fields(coords):
    msg = _trajectory(coords.names, [0.0, 1.0])
    msg.points[1].velocities = []
    with pytest.raises(MessageError, match="point 1 has no velocities; give velocities at every"):
        trajectory_from_msg(msg, coords)
    msg = _trajectory(coords.names, [0.0, 1.0])
    msg.points[1].positions[0] = math.nan
    with pytest.raises(MessageError, match=r"points\[1\].positions: NaN"):
        trajectory_from_msg(msg, coords)
    msg = _trajectory(coords.names, [0.0, 1.0], velocities=False)
    for p in msg.points:
        p.accelerations = [0.0] * coords.n
    with pytest.raises(MessageError, match="accelerations given without velocities"):
        trajectory_from_msg(msg, coords)


def test_labelled_arrays():
    msg = vector_msg([1.0, 2.0], ["a", "b"])
    assert labels_of(msg) == [("a", "b")]
    np.testing.assert_array_equal(vector_from_msg(msg, 2, "x"), [1.0, 2.0])
    with pytest.raises(MessageError, match="x: expected 3 values, got 2"):
        vector_from_msg(msg, 3, "x")
    w = np.arange(12.0).reshape(2, 6)
    msg = matrix_msg(w, ["j1", "j2"], ["fx", "fy", "fz", "tx", "ty", "tz"])
    assert labels_of(msg)[0] == ("j1", "j2")
    np.testing.assert_array_equal(array_from_msg(msg), w)
    assert stamp_to_sec(sec_to_stamp(3.000000001)) == pytest.approx(3.000000001, abs=1e-12)


@pytest.fixture
def ros_context():
    ctx = rclpy.context.Context()
    rclpy.init(context=ctx, domain_id=0)  # in-process only: nothing is published to others
    yield ctx
    rclpy.try_shutdown(context=ctx)


SPECS = (
    ParameterSpec("rate_hz", 100.0, "rate", unit="Hz", range=(1.0, 1000.0)),
    ParameterSpec("law", "pd", "law", choices=("pd", "pid")),
    ParameterSpec("gains", [1.0], "gains", range=(0.0, 10.0), min_length=1),
    ParameterSpec("limits", [], "limits, empty: none", range=(0.0, 5.0)),
    ParameterSpec("robot", "arm7", "robot", read_only=True),
)


def _node(ctx, overrides=()):
    return rclpy.create_node("param_test", context=ctx, parameter_overrides=list(overrides),
                             start_parameter_services=False, enable_rosout=False)


def test_parameter_set_declares_and_validates(ros_context):
    node = _node(ros_context)
    seen = []

    def on_change(changes):
        if changes.get("gains") == [7.0]:
            raise ValueError("gains: 7 is unlucky")
        seen.append(changes)

    params = ParameterSet(node, SPECS, on_change=on_change)
    assert params["limits"] == [] and params["gains"] == [1.0]
    d = node.describe_parameter("rate_hz")
    assert d.description == "rate [Hz]" and d.floating_point_range[0].to_value == 1000.0
    assert "one of: pd, pid" in node.describe_parameter("law").additional_constraints

    def set_(name, value):
        if value == []:  # an empty Python list would be typed as a byte array
            return node.set_parameters([Parameter(name, Parameter.Type.DOUBLE_ARRAY, [])])[0]
        return node.set_parameters([Parameter(name, value=value)])[0]

    for name, value, reason in [
        ("rate_hz", 0.5, "out of range"),
        ("law", "lqr", "expected one of pd, pid"),
        ("gains", [1.0, 11.0], r"gains[1]: 11 out of range [0, 10]"),
        ("gains", [], "expected at least 1"),
        ("robot", "five_bar", "read-only"),
        ("rate_hz", 5, "type"),
        ("gains", [7.0], "7 is unlucky"),
    ]:
        r = set_(name, value)
        assert not r.successful and reason in r.reason, (name, value, r.reason)
    assert params["gains"] == [1.0] and seen == []
    assert set_("gains", [2.0, 3.0]).successful and params["gains"] == [2.0, 3.0]
    assert set_("limits", [1.0]).successful and seen[-1] == {"limits": [1.0]}
    node.destroy_node()


@pytest.mark.parametrize("override, message", [
    (Parameter("rate_hz", value=5000.0), "rate_hz"),
    (Parameter("rate_hz", value=50), "expected a double value"),
    (Parameter("law", value="lqr"), "expected one of pd, pid"),
    (Parameter("gains", value=[1.0, 20.0]), r"gains\[1\]: 20 out of range"),
])
def test_parameter_set_rejects_bad_start_values(ros_context, override, message):
    node = _node(ros_context, [override])
    with pytest.raises(ParameterError, match=message):
        ParameterSet(node, SPECS)
    node.destroy_node()


def test_throttle_counts_and_suppresses():
    class Logger:
        def __init__(self):
            self.lines = []

        def warning(self, m):
            self.lines.append(("W", m))

        def error(self, m):
            self.lines.append(("E", m))

        def info(self, m):
            self.lines.append(("I", m))

    now = [0.0]
    log = Logger()
    th = Throttle(log, period=1.0, clock=lambda: now[0])
    assert th.warn("a", "bad") and not th.warn("a", "bad") and not th.warn("a", "bad")
    assert th.error("b", "other")  # keys are independent
    now[0] = 1.5
    assert th.warn("a", "bad")
    assert log.lines[-1] == ("W", "bad (2 similar message(s) suppressed in the last 1.5 s)")
    assert th.counts == {"a": 4, "b": 1}


def test_run_node_exit_codes():
    class Failing:
        node_name = "failing_node"

        def __init__(self, **kwargs):
            raise StartupError("robot 'x' has loop closures")

    import signal

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    assert run_node(Failing, args=[]) == 1
    # the handlers are restored: ignored SIGINT/SIGTERM would stay ignored in this process
    # and in every child it starts (a broken process pool's terminate() then hung its exit)
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert before[signal.SIGTERM] is not signal.SIG_IGN


def test_run_node_hands_the_executor_choice_to_the_node_class():
    """The default of the node's ``executor`` parameter reaches its constructor as a keyword
    argument: run_node's own argument first, else ``--executor``, else single_threaded."""
    seen = []

    class Recording:
        node_name = "recording_node"

        def __init__(self, *, executor):
            seen.append(executor)
            raise StartupError("stop here")

    assert run_node(Recording, args=["x", "--executor", "events"]) == 1
    assert run_node(Recording, args=["x"]) == 1
    assert run_node(Recording, args=["x", "--executor=events"], executor="single_threaded") == 1
    assert seen == ["events", "single_threaded", "single_threaded"]


def test_nodes_in_one_process_keep_their_own_executor_choice(ros_context):
    """Two nodes built one after the other with different executor choices each declare their
    own (a choice kept in a module global would give the second one's to both); an override
    ``-p executor:=...`` still wins over the default given to the constructor."""
    from multibody_dynamics.ros.dynamics_node import DynamicsNode

    def build(executor, overrides=()):
        return DynamicsNode(executor=executor, context=ros_context, enable_rosout=False,
                            start_parameter_services=False,
                            parameter_overrides=[Parameter("robot", value="passive_arm"),
                                                 *overrides])

    events = build("events")
    single = build("single_threaded")
    overridden = build("single_threaded", [Parameter("executor", value="events")])
    try:
        assert events.get_parameter("executor").value == "events"
        assert events.executor_kind == "events"
        assert single.get_parameter("executor").value == "single_threaded"
        assert single.executor_kind == "single_threaded"
        assert overridden.executor_kind == "events"
        assert events.describe_parameter("executor").read_only
    finally:
        for node in (events, single, overridden):
            node.destroy_node()
    with pytest.raises(ParameterError, match="executor"):
        build("threads")


def test_node_diagnostics_status_and_failures(ros_context):
    """/diagnostics statuses: values formatted, a failing collect becomes an ERROR status
    naming the exception, a bad level is refused, period 0 turns it off."""
    pytest.importorskip("diagnostic_msgs")
    from diagnostic_msgs.msg import DiagnosticStatus

    from multibody_dynamics.ros.diagnostics import NodeDiagnostics

    node = rclpy.create_node("diag_test", context=ros_context, start_parameter_services=False,
                             enable_rosout=False)
    try:
        answers = iter([("ok", "fine", {"rate [Hz]": 999.4567891, "n": 3}),
                        ("warn", "slow", {}), ("bad", "x", {})])

        def collect():
            answer = next(answers, None)
            if answer is None:
                raise RuntimeError("boom")
            return answer

        diag = NodeDiagnostics(node, "test", "arm7", collect)
        assert diag.enabled
        st = diag.status()
        assert (st.level, st.name, st.hardware_id) == (DiagnosticStatus.OK,
                                                       "diag_test: test", "arm7")
        assert [(kv.key, kv.value) for kv in st.values] == [("rate [Hz]", "999.457"), ("n", "3")]
        assert diag.status().level == DiagnosticStatus.WARN
        st = diag.status()
        assert st.level == DiagnosticStatus.ERROR and "level 'bad'" in st.message
        st = diag.status()
        assert st.level == DiagnosticStatus.ERROR and "RuntimeError: boom" in st.message
    finally:
        node.destroy_node()
    off = rclpy.create_node("diag_off", context=ros_context, start_parameter_services=False,
                            enable_rosout=False,
                            parameter_overrides=[Parameter("diagnostic_updater.period",
                                                           value=0.0)])
    try:
        assert not NodeDiagnostics(off, "test", "arm7", lambda: ("ok", "", {})).enabled
    finally:
        off.destroy_node()
