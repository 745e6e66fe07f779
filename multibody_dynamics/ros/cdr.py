"""Serialized (CDR) forms of the two messages of the 1 kHz loop: ``JointState`` and the effort
commands (``Float64MultiArray``).

rclpy converts a message between Python and C on every take and every publish: measured on
this machine in a 1 kHz loop (arm7, Fast DDS, one reader), taking a ``JointState`` as a
Python message costs 72 us against 26 us taken serialized, and building plus publishing a
command 76 + 27 us against 61 us published serialized (p50).  The paced nodes therefore
exchange the loop's messages in their serialized form:

* :class:`PatchedMessage` -- a message serialized once by rclpy's own serializer
  (``rclpy.serialization``), whose fixed-length float64 arrays and header stamp are then
  overwritten in place in the bytes.  Where each of them lies is found by serializing
  probe values and is checked at construction by a round trip through rclpy's
  deserializer; a message this cannot handle raises :class:`CdrError` (the node then
  publishes Python messages as before).
* :func:`read_joint_state`, :func:`read_float64_array` -- the fields of a serialized
  message read with ``struct`` and ``numpy.frombuffer`` (little-endian plain CDR, the
  encapsulation rmw_fastrtps and rmw_cyclonedds use for ROS messages); anything else raises
  :class:`CdrError` and :func:`reader` falls back to rclpy's deserializer.  They return
  read-only views with the attributes of the message (``name``, ``position``, ...), which
  the validating conversions of :mod:`.conversions` accept as they accept the message.

The CDR layout (OMG CDR, XCDR version 1): a 4-byte encapsulation header, then the fields in
declaration order; primitives aligned to their size counted from the end of the header;
sequences and strings as a uint32 count followed by the elements (strings with their NUL).
"""

from __future__ import annotations

import copy
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from ..errors import MultibodyError

#: encapsulation identifier of little-endian plain CDR (the first two bytes)
CDR_LE = b"\x00\x01"
_U32 = struct.Struct("<I")
_STAMP = struct.Struct("<iI")


class CdrError(MultibodyError, ValueError):
    """A message or serialized buffer the CDR fast path does not handle (the caller falls back)."""


# -- writing: rclpy's serialization patched in place ---------------------------------------------

def _path_get(msg, path: str):
    for part in path.split("."):
        msg = getattr(msg, part)
    return msg


def _path_set(msg, path: str, value):
    *parents, last = path.split(".")
    for part in parents:
        msg = getattr(msg, part)
    setattr(msg, last, value)


class PatchedMessage:
    """``msg`` serialized once; its float64 ``arrays`` (and header stamp) rewritten per publish.

    Parameters
    ----------
    msg : ROS message
        The message with every field that stays fixed already set (names, labels, layout,
        frame id) and each field of ``arrays`` at its final length.
    arrays : sequence of str
        Dotted paths of the float64 sequence fields to rewrite (``"position"``, ``"data"``).
    stamp : str or None
        Dotted path of a ``builtin_interfaces/Time`` field to rewrite (``"header.stamp"``).

    Raises
    ------
    CdrError
        A slot could not be located unambiguously in the bytes, or the round trip through
        rclpy's deserializer did not give back what was written.
    """

    def __init__(self, msg, arrays: Sequence[str], stamp: str | None = None):
        from rclpy.serialization import deserialize_message, serialize_message

        msg = copy.deepcopy(msg)  # the probes are written into a copy
        self.msg_type = type(msg)
        self.arrays = tuple(arrays)
        self.sizes = tuple(len(_path_get(msg, a)) for a in self.arrays)
        self.stamp = stamp
        # probe values: distinct per slot and entry, not otherwise present in the bytes
        probe = {a: [1.2345678901234567e100 * (k + 2) + i for i in range(n)]
                 for k, (a, n) in enumerate(zip(self.arrays, self.sizes))}
        if stamp is not None:
            st = _path_get(msg, stamp)
            st.sec, st.nanosec = 0x5A3C1D2B, 0x2B1D3C5A
        try:
            for a, values in probe.items():
                _path_set(msg, a, values)
            raw = serialize_message(msg)
        except (AssertionError, TypeError) as exc:  # a setter's assertion or the serializer
            raise CdrError(f"{self.msg_type.__name__}: {', '.join(self.arrays)} must be "
                           f"float64 sequence fields ({type(exc).__name__}: {exc})") from None
        if raw[:2] != CDR_LE:
            raise CdrError(f"{self.msg_type.__name__}: serialized with encapsulation "
                           f"{raw[:2].hex()}, not little-endian CDR")
        self._slots = []
        for a, values in probe.items():
            if not values:
                self._slots.append((a, 0, 0))
                continue
            offset = self._locate(raw, np.asarray(values, "<f8").tobytes(), a)
            self._slots.append((a, offset, len(values)))
        self._stamp_at = (None if stamp is None else
                          self._locate(raw, _STAMP.pack(0x5A3C1D2B, 0x2B1D3C5A), stamp))
        self._buf = bytearray(raw)
        # the round trip: write other values through the slots, read back with rclpy
        check = {a: np.linspace(-1.5, 2.5, n) + k for k, (a, n) in
                 enumerate(zip(self.arrays, self.sizes))}
        back = deserialize_message(
            self.serialize(*check.values(), stamp=None if stamp is None else (7, 123456789)),
            self.msg_type)
        for a, values in check.items():
            if not np.array_equal(np.asarray(_path_get(back, a), float), values):
                raise CdrError(f"{self.msg_type.__name__}.{a}: the patched bytes do not read back")
        if stamp is not None:
            st = _path_get(back, stamp)
            if (st.sec, st.nanosec) != (7, 123456789):
                raise CdrError(f"{self.msg_type.__name__}.{stamp}: the patched stamp does not "
                               "read back")

    def _locate(self, raw: bytes, pattern: bytes, what: str) -> int:
        at = raw.find(pattern)
        if at < 0 or raw.find(pattern, at + 1) >= 0:
            raise CdrError(f"{self.msg_type.__name__}.{what}: not found once in the serialized "
                           "message")
        return at

    def serialize(self, *arrays, stamp: tuple[int, int] | None = None) -> bytes:
        """The serialized message with ``arrays`` (one per slot, in order, each of its length)
        and ``stamp`` ``(sec, nanosec)`` written in; for ``Publisher.publish``."""
        buf = self._buf
        for (name, offset, n), values in zip(self._slots, arrays):
            data = np.asarray(values, "<f8").ravel()
            if data.size != n:
                raise CdrError(f"{self.msg_type.__name__}.{name}: {data.size} values for a "
                               f"slot of {n}")
            buf[offset:offset + 8 * n] = data.tobytes()
        if stamp is not None:
            if self._stamp_at is None:
                raise CdrError(f"{self.msg_type.__name__}: no stamp slot to write")
            _STAMP.pack_into(buf, self._stamp_at, *stamp)
        return bytes(buf)


# -- reading: the fields of a serialized message ------------------------------------------------

class _Reader:
    """Sequential little-endian CDR reader over ``raw`` (bounds errors become CdrError)."""

    __slots__ = ("raw", "at")

    def __init__(self, raw: bytes):
        if raw[:2] != CDR_LE:
            raise CdrError(f"encapsulation {bytes(raw[:2]).hex()} is not little-endian CDR")
        self.raw, self.at = raw, 4

    def align(self, size: int) -> None:
        self.at += -(self.at - 4) % size

    def u32(self) -> int:
        self.align(4)
        if self.at + 4 > len(self.raw):
            raise CdrError("serialized message ends inside a count")
        (value,) = _U32.unpack_from(self.raw, self.at)
        self.at += 4
        return value

    def string(self) -> str:
        n = self.u32()
        end = self.at + n
        if n == 0 or end > len(self.raw):
            raise CdrError("serialized message ends inside a string")
        text = self.raw[self.at:end - 1].decode("utf-8")
        self.at = end
        return text

    def strings(self) -> tuple[str, ...]:
        return tuple(self.string() for _ in range(self.u32()))

    def float64s(self) -> np.ndarray:
        n = self.u32()
        if n == 0:
            return np.empty(0)
        self.align(8)
        end = self.at + 8 * n
        if end > len(self.raw):
            raise CdrError("serialized message ends inside a float64 sequence")
        values = np.frombuffer(self.raw, "<f8", n, self.at)
        self.at = end
        return values


@dataclass(slots=True)
class _Stamp:
    sec: int
    nanosec: int


@dataclass(slots=True)
class _Header:
    stamp: _Stamp
    frame_id: str


@dataclass(slots=True)
class JointStateView:
    """The fields of a serialized ``sensor_msgs/JointState`` (arrays are read-only views)."""

    header: _Header
    name: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


@dataclass(slots=True)
class _Dimension:
    label: str
    size: int
    stride: int


@dataclass(slots=True)
class _Layout:
    dim: list
    data_offset: int


@dataclass(slots=True)
class Float64ArrayView:
    """The fields of a serialized ``std_msgs/Float64MultiArray`` (``data`` is a read-only view)."""

    layout: _Layout
    data: np.ndarray


def _header(r: _Reader) -> _Header:
    if len(r.raw) < 12:
        raise CdrError("serialized message ends inside the header stamp")
    sec, nanosec = _STAMP.unpack_from(r.raw, 4)
    r.at = 12
    return _Header(_Stamp(sec, nanosec), r.string())


#: a message view read by :func:`_read`
_View = TypeVar("_View")


def _read(raw: bytes, what: str, fields: Callable[[_Reader], _View]) -> _View:
    """``fields(reader of raw)``; a buffer it cannot read raises :class:`CdrError` naming
    ``what``."""
    try:
        return fields(_Reader(raw))
    except CdrError:
        raise
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise CdrError(f"unreadable serialized {what}: {exc}") from None


def _joint_state_fields(r: _Reader) -> JointStateView:
    header = _header(r)
    return JointStateView(header, r.strings(), r.float64s(), r.float64s(), r.float64s())


def _float64_array_fields(r: _Reader) -> Float64ArrayView:
    dims = [_Dimension(r.string(), r.u32(), r.u32()) for _ in range(r.u32())]
    layout = _Layout(dims, r.u32())
    return Float64ArrayView(layout, r.float64s())


def read_joint_state(raw: bytes) -> JointStateView:
    """``sensor_msgs/JointState`` fields of ``raw`` (serialized); :class:`CdrError` if not CDR-LE
    or truncated."""
    return _read(raw, "JointState", _joint_state_fields)


def read_float64_array(raw: bytes) -> Float64ArrayView:
    """``std_msgs/Float64MultiArray`` fields of ``raw`` (serialized); :class:`CdrError` if not
    CDR-LE or truncated."""
    return _read(raw, "Float64MultiArray", _float64_array_fields)


def reader(msg_type) -> Callable[[bytes], object]:
    """``read(raw)`` for ``msg_type``: this module's reader when it has one, falling back to
    rclpy's deserializer for a buffer it cannot read; rclpy's deserializer for other types."""
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    fast = {JointState: read_joint_state, Float64MultiArray: read_float64_array}.get(msg_type)

    def read(raw: bytes):
        if fast is not None:
            try:
                return fast(raw)
            except CdrError:
                pass
        return deserialize_message(raw, msg_type)

    return read


def patched_or_none(msg, arrays: Sequence[str], stamp: str | None = None,
                    log: Callable[[str], object] | None = None) -> PatchedMessage | None:
    """:class:`PatchedMessage` of ``msg``, or None (said through ``log``) where the serialized
    form is not available: the node then publishes Python messages."""
    try:
        return PatchedMessage(msg, arrays, stamp)
    except CdrError as exc:
        if log is not None:
            log(f"publishing {type(msg).__name__} as Python messages: {exc}")
        return None
