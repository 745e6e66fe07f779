"""Message <-> array conversions shared by the nodes (no algorithm here).

Every conversion from a message validates what it reads and raises
:class:`MessageError` with a message naming the problem (unknown or missing
joint names, wrong lengths, NaN/inf, non-monotonic times); nodes catch it at the
callback boundary, log it (throttled) and keep running.

Conventions
-----------
- ``sensor_msgs/JointState`` carries one entry per velocity coordinate of the
  model (``model.coordinate_names``), in any order; positions of continuous
  joints (stored by pinocchio as cos/sin) are angles in rad.  A flexible model's
  messages carry its joints and its elastic coordinates ``<body>.e<k>``; a reader
  built with ``ignored`` names (the joint-space controller of a flexible robot)
  drops those entries.
- ``std_msgs/Float64MultiArray`` published by the suite is labelled: each
  ``layout.dim[k].label`` lists the names along that axis, comma-separated
  (``"joint1,joint2,..."``; for a wrench matrix the second axis is
  ``"fx,fy,fz,tx,ty,tz"``).  :func:`labels_of` reads them back.  Incoming
  commands are read by length only, as ros2_control's forward_command_controller does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from builtin_interfaces.msg import Duration as DurationMsg
from builtin_interfaces.msg import Time as TimeMsg
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from ..errors import InputError, ModelError
from ..model.joint_angles import JointAngles
from ..robot import input_effort_limits  # noqa: F401 - the simulator node imports it from here

WRENCH_LABELS = ("fx", "fy", "fz", "tx", "ty", "tz")


class MessageError(InputError):
    """A received message is malformed or inconsistent with the model; the message says how."""


# -- time -------------------------------------------------------------------------------------

def duration_to_sec(d: DurationMsg) -> float:
    return float(d.sec) + 1e-9 * float(d.nanosec)


def stamp_to_sec(t: TimeMsg) -> float:
    return float(t.sec) + 1e-9 * float(t.nanosec)


def sec_to_stamp(t: float) -> TimeMsg:
    """``builtin_interfaces/Time`` of ``t`` >= 0 seconds (rounded to the nanosecond)."""
    ns = int(round(t * 1e9))
    return TimeMsg(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def sec_to_duration(t: float) -> DurationMsg:
    ns = int(round(t * 1e9))
    return DurationMsg(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


# -- joint coordinates --------------------------------------------------------------------------

class JointCoordinates:
    """Maps between a model's configuration ``q`` (nq,) and per-joint values in messages.

    Only one-degree-of-freedom joints can be carried by ``JointState``:
    revolute/prismatic (nq = nv = 1) and continuous (nq = 2 as cos/sin, nv = 1).
    A flexible model (:class:`~multibody_dynamics.flexible.system.FlexibleChain` or a closed
    one) has Euclidean coordinates: its ``coordinate_names`` (joints, then the elastic
    ``<body>.e<k>``) are the message entries and ``q`` is the positions.

    Parameters
    ----------
    model : MultibodyModel, FlexibleChain or ClosedFlexibleChain
    ignored : sequence of str
        Names that messages may carry besides the model's coordinates; their entries are
        dropped (a joint-space controller of a flexible robot reads the joints of a
        ``/joint_states`` that also carries the elastic coordinates).

    Raises
    ------
    ModelError
        If the model has a joint with more than one velocity coordinate.
    """

    def __init__(self, model, ignored=()):
        self.model = model
        self.names: tuple[str, ...] = tuple(model.coordinate_names)
        self.ignored = frozenset(ignored) - set(self.names)
        self._index = {n: i for i, n in enumerate(self.names)}
        self._cache: tuple[tuple[str, ...], np.ndarray] | None = None
        self._kept: tuple[tuple[str, ...], np.ndarray | None] | None = None
        self._angles: JointAngles | None = None
        if getattr(model, "pin_model", None) is None:  # flexible model: q = the coordinates
            self.label = getattr(model, "name", None) or model.config.name
            return
        self.label = model.name
        try:
            self._angles = JointAngles(model)
        except ModelError as exc:
            raise ModelError(f"{exc}; sensor_msgs/JointState carries 1-DoF joints only") from None

    @property
    def n(self) -> int:
        return len(self.names)

    def positions(self, q) -> np.ndarray:
        """Joint positions (nv,) [rad | m] of configuration ``q`` (nq,)."""
        if self._angles is None:
            return np.array(q, float)
        return self._angles.angles(q)

    def configuration(self, positions) -> np.ndarray:
        """Configuration ``q`` (nq,) of joint positions (nv,)."""
        if self._angles is None:
            return np.array(positions, float)
        return self._angles.configuration(positions)

    def order(self, names, what: str) -> np.ndarray:
        """Index ``idx`` with ``model_vector[idx] = message_vector`` for the names of a message.

        All model coordinates must be present exactly once; raises :class:`MessageError`
        naming unknown, duplicate or missing names.
        """
        names = tuple(names)
        if self._cache is not None and self._cache[0] == names:
            return self._cache[1]
        idx = name_order(names, self._index, what, "joint",
                         f"{self.label} has: {', '.join(self.names)}")
        self._cache = (names, idx)
        return idx

    def kept(self, names) -> np.ndarray | None:
        """Positions of the entries of a message with ``names`` that are not ``ignored``;
        None when every entry is kept (no ignored name present)."""
        names = tuple(names)
        if self._kept is not None and self._kept[0] == names:
            return self._kept[1]
        take = None
        if self.ignored and not self.ignored.isdisjoint(names):
            take = np.array([k for k, n in enumerate(names) if n not in self.ignored], dtype=int)
        self._kept = (names, take)
        return take


def name_order(names, index: Mapping[str, int], what: str, noun: str,
               known: str) -> np.ndarray:
    """Index ``idx`` with ``vector[idx] = message_vector`` for the names of a message.

    Parameters
    ----------
    names : sequence of str
        The message's names, in its order (k,).
    index : mapping of str to int
        Position of each expected name in the receiver's vectors; every one must be in
        ``names`` exactly once.
    what : str
        The message field, first in an error (e.g. ``"JointState.name"``).
    noun : str
        What a name names (``"joint"``, ``"output"``).
    known : str
        Closes an unknown- or missing-name error: what the receiver has.

    Returns
    -------
    numpy.ndarray
        ``idx`` (k,), int.

    Raises
    ------
    MessageError
        Naming the unknown, duplicate or missing names.
    """
    names = tuple(names)
    unknown = [n for n in names if n not in index]
    if unknown:
        raise MessageError(f"{what}: unknown {noun} name(s) {', '.join(map(repr, unknown))}; "
                           f"{known}")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise MessageError(f"{what}: duplicate {noun} name(s) {', '.join(dup)}")
    missing = [n for n in index if n not in names]
    if missing:
        raise MessageError(f"{what}: missing {noun}(s) {', '.join(missing)}; {known}")
    return np.array([index[n] for n in names], dtype=int)


def _select(coords, names, what: str):
    """``(take, idx)``: message entries kept (None: all) and their model indices (see
    :meth:`JointCoordinates.order`); ``coords`` may be any object with ``order``."""
    names = tuple(names)
    kept = getattr(coords, "kept", None)
    take = kept(names) if kept is not None else None
    if take is not None:
        names = tuple(names[k] for k in take)
    return take, coords.order(names, what)


#: Largest magnitude a value of a message may have [rad | m | rad/s | m/s | N m | N | ...]:
#: beyond it a finite number (1e300) is not a plausible state, command or reference but a
#: broken sender, and one such value taken as valid saturates every law and plant (measured:
#: a 1e300 position in one /joint_states sent arm7's simulation past max_speed).
PLAUSIBLE = 1e6


def _finite_array(values, n: int, what: str, allow_empty: bool = False) -> np.ndarray | None:
    arr = np.asarray(values, dtype=float).ravel()
    if arr.size == 0 and allow_empty:
        return None
    if arr.size != n:
        raise MessageError(f"{what}: expected {n} values, got {arr.size}")
    if not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr))
        raise MessageError(f"{what}: NaN or inf at index {bad[:5].tolist()}")
    if np.any(np.abs(arr) > PLAUSIBLE):
        k = int(np.argmax(np.abs(arr)))
        raise MessageError(f"{what}: {arr[k]:.6g} at index {k} is beyond +-{PLAUSIBLE:g} "
                           "(finite but not a plausible value in SI units)")
    return arr


@dataclass(frozen=True)
class JointStateArrays:
    """A validated ``JointState`` in model order: ``q`` (nq,), ``v`` (nv,) or None, ``effort`` or
    None."""

    stamp: float
    q: np.ndarray
    v: np.ndarray | None
    effort: np.ndarray | None


def joint_state_to_arrays(msg: JointState, coords: JointCoordinates,
                          require_velocity: bool = True) -> JointStateArrays:
    """Read ``msg`` into model order (reordering by name) with validation.

    Raises
    ------
    MessageError
        Unknown/missing/duplicate names, position/velocity/effort lengths that do
        not match ``name``, NaN or inf, or (``require_velocity``) no velocities.
    """
    take, idx = _select(coords, msg.name, "JointState.name")
    m, n = len(msg.name), len(idx)
    # every entry is checked, the ignored ones too: a NaN anywhere means a broken plant
    pos = _finite_array(msg.position, m, "JointState.position")
    vel = _finite_array(msg.velocity, m, "JointState.velocity", allow_empty=not require_velocity)
    eff = _finite_array(msg.effort, m, "JointState.effort", allow_empty=True)

    def ordered(x):
        if x is None:
            return None
        out = np.empty(n)
        out[idx] = x if take is None else x[take]
        return out

    return JointStateArrays(stamp_to_sec(msg.header.stamp), coords.configuration(ordered(pos)),
                            ordered(vel), ordered(eff))


def trajectory_msg(names, t, positions, velocities=None, accelerations=None, effort=None,
                   stamp: float | None = None) -> JointTrajectory:
    """``JointTrajectory`` of ``names`` with one point per time ``t`` (N,) [s from start]:
    ``positions`` (N, n) and optionally ``velocities``, ``accelerations``, ``effort`` (N, n);
    ``stamp`` [s] the header stamp (None: zero, start on receipt)."""
    msg = JointTrajectory(joint_names=list(names))
    if stamp is not None:
        msg.header.stamp = sec_to_stamp(stamp)
    fields = {"positions": positions, "velocities": velocities,
              "accelerations": accelerations, "effort": effort}
    rows = {k: np.asarray(v, float) for k, v in fields.items() if v is not None}
    for k, tk in enumerate(np.asarray(t, float)):
        point = JointTrajectoryPoint(time_from_start=sec_to_duration(float(tk)))
        for name, arr in rows.items():
            setattr(point, name, arr[k].tolist())
        msg.points.append(point)
    return msg


def joint_state_msg(coords: JointCoordinates, q, v, effort, stamp: TimeMsg,
                    frame_id: str = "") -> JointState:
    """``JointState`` in model order from ``q`` (nq,), ``v`` (nv,), ``effort`` (nv,)."""
    msg = JointState()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.name = list(coords.names)
    msg.position = coords.positions(q).tolist()
    msg.velocity = np.asarray(v, float).tolist()
    msg.effort = np.asarray(effort, float).tolist()
    return msg


# -- Float64MultiArray ----------------------------------------------------------------------------

def vector_msg(values, labels) -> Float64MultiArray:
    """Labelled 1-D ``Float64MultiArray``: one dimension whose label lists ``labels``."""
    values = np.asarray(values, float).ravel()
    labels = tuple(labels)
    if len(labels) != values.size:
        raise InputError(f"vector_msg: {values.size} values but {len(labels)} labels")
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=",".join(labels), size=values.size,
                                          stride=values.size)]
    msg.layout.data_offset = 0
    msg.data = values.tolist()
    return msg


def matrix_msg(values, row_labels, col_labels) -> Float64MultiArray:
    """Labelled row-major 2-D ``Float64MultiArray`` of ``values`` (rows, cols)."""
    values = np.asarray(values, float)
    rows, cols = values.shape
    if len(row_labels) != rows or len(col_labels) != cols:
        raise InputError(f"matrix_msg: shape {values.shape} but {len(row_labels)} row and "
                         f"{len(col_labels)} column labels")
    msg = Float64MultiArray()
    msg.layout.dim = [
        MultiArrayDimension(label=",".join(row_labels), size=rows, stride=rows * cols),
        MultiArrayDimension(label=",".join(col_labels), size=cols, stride=cols),
    ]
    msg.data = values.ravel().tolist()
    return msg


def labels_of(msg: Float64MultiArray) -> list[tuple[str, ...]]:
    """The names along each dimension of a labelled array (see the module docstring)."""
    return [tuple(d.label.split(",")) if d.label else () for d in msg.layout.dim]


def array_from_msg(msg: Float64MultiArray) -> np.ndarray:
    """The data of ``msg`` shaped by its layout (1-D when the layout is empty)."""
    data = np.asarray(msg.data, float)
    sizes = [d.size for d in msg.layout.dim]
    if len(sizes) > 1 and int(np.prod(sizes)) == data.size - msg.layout.data_offset:
        return data[msg.layout.data_offset:].reshape(sizes)
    return data


def vector_from_msg(msg: Float64MultiArray, n: int, what: str) -> np.ndarray:
    """``msg.data`` as (n,) float array; raises :class:`MessageError` on length or NaN/inf."""
    return _finite_array(msg.data, n, what)


# -- JointTrajectory ------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrajectoryArrays:
    """A validated ``JointTrajectory`` in model coordinate order.

    Attributes
    ----------
    start : float or None
        ``header.stamp`` [s]; None when zero (start on receipt, as joint_trajectory_controller).
    t : (N,) time from start [s], strictly increasing, >= 0
    positions : (N, nv); velocities, accelerations, effort : (N, nv) or None
    """

    start: float | None
    t: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None
    accelerations: np.ndarray | None
    effort: np.ndarray | None


def trajectory_from_msg(msg, coords: JointCoordinates) -> TrajectoryArrays | None:
    """Read a ``trajectory_msgs/JointTrajectory``; None for an empty one (a stop request).

    Every point must carry all positions; velocities, accelerations and effort are
    each given at all points or at none; accelerations need velocities.

    Raises
    ------
    MessageError
        Names (unknown, duplicate, missing), lengths, NaN/inf, negative or
        non-increasing ``time_from_start``, accelerations without velocities.
    """
    if not msg.points:
        return None
    take, idx = _select(coords, msg.joint_names, "JointTrajectory.joint_names")
    n, m, npts = len(idx), len(msg.joint_names), len(msg.points)
    t = np.array([duration_to_sec(p.time_from_start) for p in msg.points])
    if t[0] < 0:
        raise MessageError(f"JointTrajectory: negative time_from_start {t[0]:g} s at point 0")
    bad = np.flatnonzero(np.diff(t) <= 0)
    if bad.size:
        k = int(bad[0]) + 1
        raise MessageError(f"JointTrajectory: time_from_start must increase strictly; point {k} "
                           f"at {t[k]:g} s follows {t[k - 1]:g} s")

    def field(name, required):
        present = [len(getattr(p, name)) > 0 for p in msg.points]
        if not any(present) and not required:
            return None
        if not all(present):
            k = present.index(False)
            hint = "" if required else f"; give {name} at every point or at none"
            raise MessageError(f"JointTrajectory: point {k} has no {name}{hint}")
        out = np.empty((npts, n))
        for k, p in enumerate(msg.points):
            x = _finite_array(getattr(p, name), m, f"JointTrajectory.points[{k}].{name}")
            out[k, idx] = x if take is None else x[take]
        return out

    pos = field("positions", True)
    vel = field("velocities", False)
    acc = field("accelerations", False)
    eff = field("effort", False)
    if acc is not None and vel is None:
        raise MessageError("JointTrajectory: accelerations given without velocities")
    stamp = stamp_to_sec(msg.header.stamp)
    return TrajectoryArrays(stamp if stamp > 0 else None, t, pos, vel, acc, eff)


def input_bounds(model) -> tuple[np.ndarray, np.ndarray] | None:
    """``(lower, upper)`` (each (nu,)) of the commands a plant accepts: an MJCF model's
    ``ctrlrange`` (MuJoCo clamps ``ctrl`` to it; -inf/inf where not limited), else
    -+ :func:`input_effort_limits`; None without either."""
    bounds = getattr(model, "actuator_limits", None)
    if bounds is not None:
        return bounds.ctrl_lower.copy(), bounds.ctrl_upper.copy()
    limit = input_effort_limits(model)
    return None if limit is None else (-limit, limit)
