"""Resolved-motion rate control (NASA CR-165977 App. D), with a directly commanded redundant joint.

The operator commands the end-effector twist ``V = [v; w]`` (6,) [m/s, rad/s] (world axes,
about the frame origin: pinocchio ``LOCAL_WORLD_ALIGNED``) and, for a redundant arm, the rate
``r'`` of one joint.  The other joints' rates solve ``J_o q_o' = V - J_r r'`` -- the redundant
column times its rate is subtracted (the printed App. D equations forget this term) -- by a
damped least-squares solve from one SVD ``J_o = U S W^T``::

    q_o' = sum_i  s_i / (s_i^2 + mu^2)  w_i (u_i^T (V - J_r r')),
    mu^2 = 0 for s_min >= eps,  mu^2 = (1 - (s_min / eps)^2) mu_max^2 below
    (variable damping, Maciejewski & Klein 1988 / Chiaverini 1997),

not from ``(E A)^+ = A^+ E^+``, which App. D states but which is false in general.  Away from
singularities (s_min >= eps) it is the exact (minimum-norm) solution.

The rates are integrated into a commanded configuration ``q_c`` (``pin.integrate``, started at
the measured q on the first step and on :meth:`RMRCController.reset`), and the Jacobian is
evaluated at ``q_c``: the resolved path does not depend on the servo error.  The commanded
acceleration is the derivative of the resolved rates, ``a_c = J_o^# (V' - J' q_c' - J_r r'')``
(``J' q_c'`` the frame's classical acceleration at zero joint acceleration).  Optionally
(``pose_gain`` > 0) the drift of the integrated command from the integrated twist is fed back,
``V <- V + K_x [p_d - p(q_c); log(R_d R(q_c)^T)]`` (closed-loop inverse kinematics); 0 is the
plain open-loop RMRC of App. D.

Joint torques come from an inner loop on (q_c, q_c', a_c) (``inner``):

* ``"computed_torque"``: ``tau = M (a_c + K_D (q_c' - v) + K_P (q_c - q)) + h`` (``rnea``), error
  dynamics e'' + K_D e' + K_P e = 0 per joint with an exact model;
* ``"pd"``: ``tau = K_P (q_c - q) + K_D (q_c' - v) + g(q)`` (gravity compensation), K_P
  [N m/rad], K_D [N m s/rad].

The command is a :class:`TwistReference` passed to ``step`` in place of a joint reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from scipy.linalg import lapack

from multibody_dynamics.errors import InputError
from multibody_dynamics.rigid import RigidDynamics
from multibody_dynamics.validation import as_vector

from .base import (
    Controller,
    ControllerConfig,
    check_gain_config,
    gain_vector,
    require_fully_actuated,
)

_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
_ND, _F8 = np.ndarray, np.dtype(float)
INNER_LOOPS = ("computed_torque", "pd")


@dataclass(frozen=True)
class TwistReference:
    """The operator's command at one instant.

    Attributes
    ----------
    twist : (6,) end-effector twist [vx, vy, vz, wx, wy, wz] [m/s, rad/s], world axes,
        about the frame origin
    redundant_rate : float  rate of the redundant joint [rad/s | m/s]
    twist_rate : (6,) or None  time derivative of ``twist`` [m/s^2, rad/s^2] (None: zero)
    redundant_acceleration : float  [rad/s^2 | m/s^2]
    """

    twist: np.ndarray
    redundant_rate: float = 0.0
    twist_rate: np.ndarray | None = None
    redundant_acceleration: float = 0.0


@dataclass(frozen=True)
class RMRCConfig(ControllerConfig):
    """Settings of :class:`RMRCController`.

    Parameters
    ----------
    frame : str or None  the commanded frame (default: the model's end effector)
    redundant_joint : str or None
        Joint whose rate is commanded directly; None: every joint resolved (minimum norm).
    damping : float  mu_max of the variable damping [m | rad mixed, as J] (>= 0)
    singular_threshold : float  eps: damping starts when s_min < eps (> 0)
    pose_gain : float  K_x [1/s] of the drift feedback (>= 0; 0: open-loop RMRC)
    inner : str  ``"computed_torque"`` or ``"pd"`` (module docstring)
    kp, kd : float or sequence  inner-loop gains (> 0) per joint: [1/s^2], [1/s] for computed
        torque, [N m/rad], [N m s/rad] for PD
    effort_limit : float or sequence  |u| [N m | N] (> 0; inf: none)
    """

    frame: str | None = None
    redundant_joint: str | None = None
    damping: float = 0.05
    singular_threshold: float = 0.05
    pose_gain: float = 0.0
    inner: str = "computed_torque"
    kp: float | tuple = 400.0
    kd: float | tuple = 40.0
    effort_limit: float | tuple = float("inf")

    def __post_init__(self):
        if self.inner not in INNER_LOOPS:
            raise InputError(f"inner: expected one of {', '.join(INNER_LOOPS)}, "
                             f"got {self.inner!r}")
        for name, low in (("damping", 0.0), ("pose_gain", 0.0)):
            val = getattr(self, name)
            if not (isinstance(val, (int, float)) and np.isfinite(val) and val >= low):
                raise InputError(f"{name}: expected a finite number >= {low:g}, got {val!r}")
        if not (isinstance(self.singular_threshold, (int, float))
                and np.isfinite(self.singular_threshold) and self.singular_threshold > 0):
            raise InputError(f"singular_threshold: expected a number > 0, got "
                             f"{self.singular_threshold!r}")
        for name in ("kp", "kd", "effort_limit"):
            object.__setattr__(self, name, check_gain_config(getattr(self, name), name))


def damped_least_squares(J, b, damping: float, threshold: float) -> tuple[np.ndarray, float]:
    """x minimizing ``|J x - b|^2 + mu^2 |x|^2`` with the variable damping of the module
    docstring, from one SVD; returns ``(x, s_min)``."""
    U, s, Vt, info = lapack.dgesvd(J, full_matrices=0)
    if info != 0:
        raise InputError(f"J: singular value decomposition failed (LAPACK info {info})")
    s_min = float(s[-1]) if J.shape[0] <= J.shape[1] else float(s.min())
    mu2 = 0.0
    if s_min < threshold:
        mu2 = (1.0 - (s_min / threshold) ** 2) * damping**2
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(s > 0, s / (s * s + mu2), 0.0)
    return Vt.T @ (w * (U.T @ b)), s_min


class RMRCController(Controller):
    """Resolved-motion rate control with an inner joint loop (fully actuated arms).

    Attributes (of the last step)
    -----------------------------
    q_c, v_c, a_c : commanded configuration (nq,), rates and accelerations (nv,)
    sigma_min : float  smallest singular value of J_o at q_c
    """

    config_type = RMRCConfig

    def __init__(self, model, config: RMRCConfig | None = None):
        super().__init__(model, config or RMRCConfig())
        c = self.config
        self._Binv = require_fully_actuated(model, "rmrc")
        frame = c.frame or model.end_effector
        if frame is None:
            raise InputError(f"rmrc: {model.name} has no end_effector; set config.frame")
        self._fid = model.frame_id(frame)
        nv = model.nv
        if c.redundant_joint is not None:
            self._r = model.joint_index(c.redundant_joint)
            self._o = np.array([i for i in range(nv) if i != self._r], int)
        else:
            self._r = None
            self._o = np.arange(nv)
        self.kp = gain_vector(c.kp, nv, "kp", per="coordinate")
        self.kd = gain_vector(c.kd, nv, "kd", per="coordinate")
        self.effort_limit = gain_vector(c.effort_limit, model.nu, "effort_limit")
        self._limited = bool(np.any(np.isfinite(self.effort_limit)))
        self._pm = model.pin_model
        self._data = self._pm.createData()
        self.dynamics = RigidDynamics(model)
        self._zero = np.zeros(nv)
        self.reset()

    def reset(self):
        self.q_c: np.ndarray | None = None
        self.v_c = np.zeros(self.model.nv)
        self.a_c = np.zeros(self.model.nv)
        self._t_prev: float | None = None
        self._pose_d = None  # integrated desired pose (p, R) for the drift feedback
        self.sigma_min = float("nan")

    def resolve(self, q, twist, redundant_rate: float = 0.0) -> np.ndarray:
        """Joint rates (nv,) that produce ``twist`` (6,) at configuration q (nq,)."""
        q = as_vector(q, self.model.nq, "q")
        twist = as_vector(twist, 6, "twist")
        pm, data = self._pm, self._data
        pin.computeJointJacobians(pm, data, q)
        pin.updateFramePlacements(pm, data)
        J = pin.getFrameJacobian(pm, data, self._fid, _LWA)
        return self._resolve(J, twist, redundant_rate)[0]

    def _resolve(self, J, b, rate):
        c = self.config
        qd = np.empty(self.model.nv)
        if self._r is not None:
            b = b - J[:, self._r] * rate  # the term the printed App. D equations forget
            qd[self._r] = rate
        x, s_min = damped_least_squares(J[:, self._o], b, c.damping, c.singular_threshold)
        qd[self._o] = x
        return qd, s_min

    def step(self, t, q, v, reference: TwistReference) -> np.ndarray:
        """Inputs u (nu,) for the commanded twist; ``reference`` is a :class:`TwistReference`."""
        q, v = self._state(q, v)
        if not isinstance(reference, TwistReference):
            raise InputError(f"rmrc: expected a TwistReference (end-effector twist command), got "
                             f"{type(reference).__name__}")
        c, pm, data = self.config, self._pm, self._data
        t = float(t)
        if self.q_c is None:
            self.q_c = q.copy()
        else:
            dt = max(t - self._t_prev, 0.0)
            self.q_c = pin.integrate(pm, self.q_c, dt * self.v_c)  # rates held over the step
            if self._pose_d is not None:
                p_d, R_d, V_prev = self._pose_d
                p_d = p_d + dt * V_prev[:3]
                R_d = pin.exp3(dt * V_prev[3:]) @ R_d
                self._pose_d = (p_d, R_d, V_prev)
        self._t_prev = t
        V = as_vector(reference.twist, 6, "reference.twist")
        rate = float(reference.redundant_rate)
        pin.forwardKinematics(pm, data, self.q_c, self.v_c, self._zero)
        pin.computeJointJacobians(pm, data)
        oMf = pin.updateFramePlacement(pm, data, self._fid)
        J = pin.getFrameJacobian(pm, data, self._fid, _LWA)
        V_cmd = V
        if c.pose_gain > 0:
            if self._pose_d is None:
                self._pose_d = (oMf.translation.copy(), oMf.rotation.copy(), V)
            p_d, R_d, _ = self._pose_d
            self._pose_d = (p_d, R_d, V)
            err = np.concatenate([p_d - oMf.translation, pin.log3(R_d @ oMf.rotation.T)])
            V_cmd = V + c.pose_gain * err
        v_c, self.sigma_min = self._resolve(J, V_cmd, rate)
        # resolved acceleration at the new rates: J' q_c' from the classical frame acceleration
        pin.forwardKinematics(pm, data, self.q_c, v_c, self._zero)
        bias = pin.getFrameClassicalAcceleration(pm, data, self._fid, _LWA).vector
        Vd = np.zeros(6) if reference.twist_rate is None else \
            as_vector(reference.twist_rate, 6, "reference.twist_rate")
        self.a_c = self._resolve(J, Vd - bias, float(reference.redundant_acceleration))[0]
        self.v_c = v_c
        e = pin.difference(pm, q, self.q_c)
        if c.inner == "computed_torque":
            tau = self.dynamics.inverse_dynamics(q, v, self.a_c
                                                 + self.kd * (v_c - v) + self.kp * e)
        else:
            tau = self.kp * e + self.kd * (v_c - v) + self.dynamics.gravity_forces(q)
            if self.model.has_springs:
                tau = tau - self.dynamics.spring_forces(q, np.zeros(self.model.nv))
        u = self._Binv @ tau
        if self._limited:
            np.clip(u, -self.effort_limit, self.effort_limit, out=u)
        return u


__all__ = ["INNER_LOOPS", "RMRCConfig", "RMRCController", "TwistReference",
           "damped_least_squares"]
