"""dynamics_node: model-based quantities of the measured state, at the state rate.

Subscribes
    ``/joint_states`` (sensor_msgs/JointState, all coordinates of the model, any order).
Publishes (std_msgs/Float64MultiArray, labelled: see :mod:`.conversions`)
    ``~/gravity_torques``: g(q) (nv,), the effort that holds the robot at rest;
    ``~/inverse_dynamics_torques``: M a + h - tau_s (nv,) for the measured (q, v)
    and an acceleration estimate (``acceleration`` parameter);
    ``~/reaction_wrenches``: (njoints, 6) force [N] and torque [N m] that each
    joint transmits, in the joint frame (:meth:`RigidDynamics.reaction_wrenches`).

Closed loops (a model with closures) use the constrained inverse dynamics of
:class:`~multibody_dynamics.projection.ProjectedDynamics` (Aghili 2005 eqs. 45, 59-62): the
acceleration estimate is first made consistent (``a - A^+ (A a + gamma)``), the torques are
the minimum-norm actuation of that motion with zero torque on the passive joints, and
``~/gravity_torques`` is the same at rest (v = a = 0).  They also publish

    ``~/constraint_forces``: f_c = (I - P)(M a + h - tau_s - tau) (nv,) [N m | N], the
    generalized constraint force of that actuation (eq. 32);
    ``~/constraint_multipliers``: its minimum-norm multipliers lambda (m,) [N | N m].

``~/reaction_wrenches`` of a closed loop are not published: the spanning tree's joint loads
(:meth:`RigidDynamics.reaction_wrenches`) leave out the closure forces.

Underactuated closed loops (more passive coordinates than constraint rows: dual_arm_load, 7
passive coordinates against 3 rows) fail eq. 64 at every configuration: no torque with zero
passive components produces an arbitrary admissible acceleration, so the minimum-norm
actuation above does not exist.  Their torques are the collocated inverse dynamics
(:meth:`~multibody_dynamics.projection.ProjectedDynamics.collocated_inverse_dynamics`): the
inputs that give the actuated coordinates their measured acceleration while the passive ones
follow the model's own dynamics (for a motion the model produced, the input that produced it);
``~/gravity_torques`` is the same at rest (the inputs that keep the actuated coordinates still
for an instant), and the constraint force is that of the motion under those inputs.  The node
says so once at start; a warning then means a real problem (a singular configuration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from ..model import load_model
from ..projection import ProjectedDynamics
from ..rigid import RigidDynamics
from .conversions import (
    WRENCH_LABELS,
    JointCoordinates,
    MessageError,
    joint_state_to_arrays,
    matrix_msg,
    vector_msg,
)
from .node import MultibodyNode
from .parameters import ParameterSet, ParameterSpec
from .runtime import main_for

ACCELERATION_SOURCES = ("differentiate", "zero")

PARAMETERS = (
    ParameterSpec("robot", "arm7", "shipped robot name or path to a model YAML file",
                  read_only=True),
    ParameterSpec("acceleration", "differentiate", "acceleration used for the inverse dynamics "
                  "and reaction wrenches: low-pass filtered difference of the measured "
                  "velocities, or zero (quasi-static)", choices=ACCELERATION_SOURCES),
    ParameterSpec("acceleration_cutoff_hz", 20.0, "cut-off frequency of the first-order "
                  "low-pass on the differentiated velocity", unit="Hz", range=(0.1, 10000.0)),
    ParameterSpec("publish_reactions", True, "publish ~/reaction_wrenches"),
)


@dataclass(frozen=True)
class ClosedLoopLoads:
    """What dynamics_node publishes for one state of a closed loop.

    Attributes
    ----------
    gravity : (nv,) actuation at rest (v = a = 0) [N m | N]
    tau : (nv,) actuation of the measured motion [N m | N]
    f_c : (nv,) generalized constraint force of that actuation [N m | N]
    lam : (m,) its minimum-norm multipliers [N | N m]
    problem : str  empty, or why the torques are not those of the measured motion
    """

    gravity: np.ndarray
    tau: np.ndarray
    f_c: np.ndarray
    lam: np.ndarray
    problem: str


def underactuated_closed_loop(pd: ProjectedDynamics) -> bool:
    """True when the model has more passive coordinates than constraint rows: Aghili (2005)
    eq. 64 then fails at every configuration (module docstring)."""
    return int(np.count_nonzero(pd.model.passive)) > pd.constraints.n_rows


def closed_loop_loads(pd: ProjectedDynamics, q, v, a, collocated: bool) -> ClosedLoopLoads:
    """Loads of a closed loop at the measured state (q (nq,), v (nv,), a (nv,)).

    ``collocated`` False: the constrained inverse dynamics of the consistent acceleration
    ``a - A^+ (A a + gamma)`` (Aghili 2005 eqs. 45, 59-62); True: the collocated inverse
    dynamics of an underactuated loop (module docstring).
    """
    zero = np.zeros(pd.model.nv)
    if collocated:
        rest = pd.collocated_inverse_dynamics(q, zero, zero)
        res = pd.collocated_inverse_dynamics(q, v, a)
        problem = "; ".join(dict.fromkeys(r.message for r in (rest, res) if not r.success))
        return ClosedLoopLoads(rest.tau, res.tau, res.f_c, res.lam, problem)
    A, gamma = pd.constraints.jacobian_and_bias(q, v)
    a = a - np.linalg.lstsq(A, A @ a + gamma, rcond=None)[0]  # consistent: A a + gamma = 0
    rest = pd.inverse_dynamics_result(q, zero, zero)
    res = pd.inverse_dynamics_result(q, v, a)
    return ClosedLoopLoads(rest.tau, res.tau, res.f_c, res.lam,
                           "" if res.success else res.message)


class DynamicsNode(MultibodyNode):
    """Gravity, inverse-dynamics and reaction loads of the state on /joint_states."""

    node_name = "dynamics_node"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)  # name, executor_kind (--executor), throttle
        self.params = ParameterSet(self, PARAMETERS)
        self.model = model = load_model(self.params["robot"])
        self.coords = JointCoordinates(model)
        self.projected = ProjectedDynamics(model) if model.closures else None
        self.collocated = self.projected is not None and underactuated_closed_loop(
            self.projected)
        self.dynamics = RigidDynamics(model)
        self._labels = model.coordinate_names
        self._joints = model.joint_names
        self._prev: tuple[float, np.ndarray] | None = None
        self._a = np.zeros(model.nv)
        self.rejected = 0
        qos = QoSProfile(depth=10)
        self._pub_g = self.create_publisher(Float64MultiArray, "~/gravity_torques", qos)
        self._pub_id = self.create_publisher(Float64MultiArray, "~/inverse_dynamics_torques", qos)
        self._pub_w = self.create_publisher(Float64MultiArray, "~/reaction_wrenches", qos)
        self.create_subscription(JointState, "/joint_states", self._on_state, qos)
        if self.projected is not None:
            self._pub_fc = self.create_publisher(Float64MultiArray, "~/constraint_forces", qos)
            self._pub_lam = self.create_publisher(Float64MultiArray, "~/constraint_multipliers",
                                                  qos)
            m = self.projected.constraints.n_rows
            self._lam_labels = [f"lambda{k}" for k in range(m)]
            self.get_logger().info(
                f"dynamics of {model.name} (closed loop: "
                f"{', '.join(c.name for c in model.closures)}, {m} constraint rows): "
                "/joint_states -> ~/gravity_torques, ~/inverse_dynamics_torques (constrained, "
                f"{'collocated' if self.collocated else 'minimum norm'}, zero on passive "
                "joints), ~/constraint_forces, "
                "~/constraint_multipliers; no ~/reaction_wrenches (the tree's joint loads "
                "leave out the closure forces)")
            if self.collocated:
                n_passive = int(np.count_nonzero(model.passive))
                actuated = [n for n, p in zip(model.coordinate_names, model.passive) if not p]
                self.get_logger().info(
                    f"{model.name} is underactuated: {n_passive} passive coordinates against "
                    f"{m} constraint rows, so no actuation holds every passive joint (Aghili "
                    "2005 eq. 64). ~/inverse_dynamics_torques are the inputs that give the "
                    f"actuated joints ({', '.join(actuated)}) their measured "
                    "acceleration, the passive joints following their own dynamics; "
                    "~/gravity_torques keep the actuated joints still at rest")
            return
        self.get_logger().info(
            f"dynamics of {model.name}: /joint_states -> ~/gravity_torques, "
            f"~/inverse_dynamics_torques, ~/reaction_wrenches ({len(self._joints)} x 6)")

    def _acceleration(self, stamp: float, v: np.ndarray) -> np.ndarray:
        if self.params["acceleration"] == "zero":
            self._prev = None
            return np.zeros(self.model.nv)
        if self._prev is not None:
            dt = stamp - self._prev[0]
            if dt > 0:
                tc = 1.0 / (2.0 * math.pi * self.params["acceleration_cutoff_hz"])
                alpha = dt / (dt + tc)
                self._a = self._a + alpha * ((v - self._prev[1]) / dt - self._a)
            elif dt < 0:  # time went back (simulation restarted): start over
                self._a = np.zeros(self.model.nv)
        self._prev = (stamp, v)
        return self._a

    def _on_state(self, msg: JointState):
        try:
            s = joint_state_to_arrays(msg, self.coords)
        except MessageError as exc:
            self.rejected += 1
            self.throttle.warn("state", f"rejected /joint_states: {exc}")
            return
        a = self._acceleration(s.stamp, s.v)
        if self.projected is not None:
            self._publish_constrained(s.q, s.v, a)
            return
        g = self.dynamics.gravity_forces(s.q)
        wrenches, tau = self.dynamics.reaction_wrenches(s.q, s.v, a)
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(tau))
                and np.all(np.isfinite(wrenches))):
            self.throttle.error("nan", "dynamics produced NaN/inf; nothing published")
            return
        self._pub_g.publish(vector_msg(g, self._labels))
        self._pub_id.publish(vector_msg(tau, self._labels))
        if self.params["publish_reactions"]:
            self._pub_w.publish(matrix_msg(wrenches, self._joints, WRENCH_LABELS))

    def _publish_constrained(self, q, v, a):
        loads = closed_loop_loads(self.projected, q, v, a, self.collocated)
        out = (loads.gravity, loads.tau, loads.f_c, loads.lam)
        if not all(np.all(np.isfinite(x)) for x in out):
            self.throttle.error("nan", "dynamics produced NaN/inf; nothing published"
                                + (f" ({loads.problem})" if loads.problem else ""))
            return
        if loads.problem:
            self.throttle.warn("id", f"constrained inverse dynamics: {loads.problem}")
        self._pub_g.publish(vector_msg(loads.gravity, self._labels))
        self._pub_id.publish(vector_msg(loads.tau, self._labels))
        self._pub_fc.publish(vector_msg(loads.f_c, self._labels))
        self._pub_lam.publish(vector_msg(loads.lam, self._lam_labels))

main = main_for(DynamicsNode)

if __name__ == "__main__":
    main()
