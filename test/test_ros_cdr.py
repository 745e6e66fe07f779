"""The serialized (CDR) forms of the loop's messages against rclpy's own serializer."""

import math
import string

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, MultiArrayDimension, String  # noqa: E402

from multibody_dynamics.ros.cdr import (  # noqa: E402
    CdrError,
    PatchedMessage,
    patched_or_none,
    read_float64_array,
    read_joint_state,
    reader,
)
from multibody_dynamics.ros.conversions import (  # noqa: E402
    JointCoordinates,
    MessageError,
    joint_state_msg,
    joint_state_to_arrays,
    sec_to_stamp,
    vector_msg,
)


def _names(rng, n):
    """``n`` distinct names of 1-9 characters: every alignment of the strings occurs."""
    letters = list(string.ascii_lowercase)
    return [f"{''.join(rng.choice(letters, rng.integers(1, 9)))}_{k}" for k in range(n)]


def _joint_state(rng, n, lengths=None):
    msg = JointState()
    msg.header.stamp.sec = int(rng.integers(0, 2**31 - 1))
    msg.header.stamp.nanosec = int(rng.integers(0, 10**9))
    msg.header.frame_id = "f" * int(rng.integers(0, 6))
    msg.name = _names(rng, n)
    lengths = lengths or (n, n, n)
    msg.position, msg.velocity, msg.effort = (rng.normal(size=m).tolist() for m in lengths)
    return msg


def _same_joint_state(view, msg):
    assert (view.header.stamp.sec, view.header.stamp.nanosec) == (msg.header.stamp.sec,
                                                                  msg.header.stamp.nanosec)
    assert view.header.frame_id == msg.header.frame_id
    assert list(view.name) == list(msg.name)
    for field in ("position", "velocity", "effort"):
        np.testing.assert_array_equal(getattr(view, field), np.asarray(getattr(msg, field)))


def test_read_joint_state_equals_rclpy_deserializer(rng):
    """Random messages (name and frame-id lengths, empty and unequal arrays) read from rclpy's
    serialization give exactly the fields rclpy's deserializer gives."""
    for _ in range(200):
        n = int(rng.integers(0, 12))
        lengths = tuple(int(rng.choice([0, n, n + 1])) for _ in range(3))
        msg = _joint_state(rng, n, lengths)
        raw = serialize_message(msg)
        _same_joint_state(read_joint_state(raw), deserialize_message(raw, JointState))


def test_read_float64_array_equals_rclpy_deserializer(rng):
    for _ in range(200):
        msg = Float64MultiArray()
        msg.layout.dim = [MultiArrayDimension(label="x" * int(rng.integers(0, 7)),
                                              size=int(rng.integers(0, 9)),
                                              stride=int(rng.integers(0, 99)))
                          for _ in range(int(rng.integers(0, 3)))]
        msg.layout.data_offset = int(rng.integers(0, 3))
        msg.data = rng.normal(size=int(rng.integers(0, 10))).tolist()
        raw = serialize_message(msg)
        view, back = read_float64_array(raw), deserialize_message(raw, Float64MultiArray)
        assert [(d.label, d.size, d.stride) for d in view.layout.dim] == \
            [(d.label, d.size, d.stride) for d in back.layout.dim]
        assert view.layout.data_offset == back.layout.data_offset
        np.testing.assert_array_equal(view.data, np.asarray(back.data))


def test_readers_refuse_what_they_cannot_read_and_reader_falls_back(rng):
    raw = serialize_message(_joint_state(rng, 4))
    with pytest.raises(CdrError, match="ends inside"):
        read_joint_state(raw[:len(raw) - 3])
    with pytest.raises(CdrError, match="not little-endian CDR"):
        read_joint_state(b"\x00\x00" + raw[2:])  # big-endian encapsulation
    with pytest.raises(CdrError, match="ends inside"):
        read_float64_array(serialize_message(vector_msg([1.0, 2.0], ["a", "b"]))[:-4])
    # a big-endian buffer goes to rclpy's deserializer, which reads its own encapsulation
    read = reader(JointState)
    _same_joint_state(read(raw), deserialize_message(raw, JointState))
    # types without a reader of their own: rclpy's message
    assert reader(String)(serialize_message(String(data="abc"))).data == "abc"


def test_views_go_through_the_validating_conversions(models, rng):
    """The view of a serialized JointState is accepted, reordered and refused exactly as the
    message itself (same arrays, same errors)."""
    model = models["passive_arm"]
    coords = JointCoordinates(model)
    q = rng.uniform(-1, 1, coords.n)
    msg = joint_state_msg(coords, coords.configuration(q), rng.normal(size=model.nv),
                          rng.normal(size=model.nv), sec_to_stamp(3.25))
    perm = rng.permutation(coords.n)
    for field in ("name", "position", "velocity", "effort"):
        setattr(msg, field, [list(getattr(msg, field))[k] for k in perm])
    a = joint_state_to_arrays(msg, coords)
    b = joint_state_to_arrays(read_joint_state(serialize_message(msg)), coords)
    assert a.stamp == b.stamp == 3.25
    for x, y in zip((a.q, a.v, a.effort), (b.q, b.v, b.effort)):
        np.testing.assert_array_equal(x, y)
    msg.velocity = [math.nan] + list(msg.velocity)[1:]
    for source in (msg, read_joint_state(serialize_message(msg))):
        with pytest.raises(MessageError, match="NaN or inf at index"):
            joint_state_to_arrays(source, coords)


def test_patched_messages_read_back_through_rclpy(rng):
    """A JointState and a labelled command vector serialized once, stamp and arrays written in
    afterwards: rclpy's deserializer reads what the message itself would have carried."""
    for n in range(1, 10):
        names = _names(rng, n)
        template = JointState(name=names, position=[0.0] * n, velocity=[0.0] * n,
                              effort=[0.0] * n)
        template.header.frame_id = "base" * int(rng.integers(0, 3))
        writer = PatchedMessage(template, ("position", "velocity", "effort"), "header.stamp")
        assert template.position.tolist() == [0.0] * n  # the probes went into a copy
        for _ in range(5):
            p, v, e = rng.normal(size=(3, n))
            stamp = (int(rng.integers(0, 2**31 - 1)), int(rng.integers(0, 10**9)))
            back = deserialize_message(writer.serialize(p, v, e, stamp=stamp), JointState)
            assert (back.header.stamp.sec, back.header.stamp.nanosec) == stamp
            assert list(back.name) == names and back.header.frame_id == template.header.frame_id
            for x, y in ((back.position, p), (back.velocity, v), (back.effort, e)):
                np.testing.assert_array_equal(np.asarray(x), y)
        command = PatchedMessage(vector_msg(np.zeros(n), names), ["data"])
        u = rng.normal(size=n)
        back = deserialize_message(command.serialize(u), Float64MultiArray)
        expected = vector_msg(u, names)
        assert back.layout.dim[0].label == expected.layout.dim[0].label
        np.testing.assert_array_equal(np.asarray(back.data), u)
        with pytest.raises(CdrError, match=f"{n + 1} values for a slot of {n}"):
            command.serialize(np.zeros(n + 1))


def test_patched_message_refuses_a_slot_it_cannot_locate():
    """A slot that is no float64 sequence is refused; patched_or_none says so, returns None."""
    with pytest.raises(CdrError, match="must be float64 sequence fields"):
        PatchedMessage(String(data="x"), ["data"])
    with pytest.raises(AttributeError):
        PatchedMessage(JointState(), ["position"], "header.no_stamp")
    said = []
    assert patched_or_none(String(data="x"), ["data"], log=said.append) is None
    assert len(said) == 1 and "String" in said[0]
