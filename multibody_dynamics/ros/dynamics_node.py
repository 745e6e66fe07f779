"""dynamics_node: model-based quantities of the measured state, at the state rate.

Subscribes
    ``/joint_states`` (sensor_msgs/JointState, all coordinates of the model, any order).
Publishes (std_msgs/Float64MultiArray, labelled: see :mod:`.conversions`)
    ``~/gravity_torques``: g(q) (nv,), the effort that holds the robot at rest;
    ``~/inverse_dynamics_torques``: M a + h - tau_s (nv,) for the measured (q, v)
    and an acceleration estimate (``acceleration`` parameter);
    ``~/reaction_wrenches``: (njoints, 6) force [N] and torque [N m] that each
    joint transmits, in the joint frame (:meth:`RigidDynamics.reaction_wrenches`).

Open chains only (the spanning-tree inverse dynamics of a closed loop ignores
the constraint forces): a model with closures is refused at start-up.
"""

from __future__ import annotations

import math

import numpy as np
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from ..model import load_model
from ..rigid import RigidDynamics
from .conversions import (
    WRENCH_LABELS,
    JointCoordinates,
    MessageError,
    joint_state_to_arrays,
    matrix_msg,
    vector_msg,
)
from .parameters import ParameterSet, ParameterSpec
from .runtime import StartupError, Throttle, main_for

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


class DynamicsNode(Node):
    """Gravity, inverse-dynamics and reaction loads of the state on /joint_states."""

    node_name = "dynamics_node"

    def __init__(self, **kwargs):
        super().__init__(self.node_name, **kwargs)
        self.params = ParameterSet(self, PARAMETERS)
        self.throttle = Throttle(self.get_logger())
        self.model = model = load_model(self.params["robot"])
        if model.closures:
            raise StartupError(f"robot {model.name!r} has loop closures; dynamics_node handles "
                               "open chains only until the constrained inverse dynamics exists")
        self.coords = JointCoordinates(model)
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


main = main_for(DynamicsNode)

if __name__ == "__main__":
    main()
