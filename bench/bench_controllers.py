"""Cost of one ``step()`` of each control law, as a ratio to one pinocchio ``rnea`` on the same
model.

Models: arm7 (7-DOF open chain, fully actuated) and five_bar (closed loop, two passive joints);
a law that does not apply to a model is listed as skipped with the reason.  Absolute targets
(issue "Tracking controllers" section 3): computed torque and projected inverse dynamics
<= 100 us per step, time-variant LQR <= 50 us per step once its gains are precomputed; the
entries carry ``target_time_us`` and ``meets_target`` for those.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from multibody_control.controllers import (
    ComputedTorqueConfig,
    ComputedTorqueController,
    LQRConfig,
    PDConfig,
    PDController,
    ProjectedInverseDynamicsConfig,
    ProjectedInverseDynamicsController,
    Reference,
    RMRCConfig,
    RMRCController,
    TimeVariantLQRController,
    TwistReference,
)
from multibody_control.trajectories import rest_to_rest
from multibody_dynamics import RigidDynamics, load_model

from .common import ratio_entry

TARGET_US = {"computed_torque": 100.0, "projected_inverse_dynamics": 100.0, "tv_lqr": 50.0}
ARM_Q = np.array([0.2, 0.5, -0.3, -1.2, 0.2, 0.9, 0.3])


def _entry(model, law, step, rnea):
    e = ratio_entry(f"{model} {law} step", step, rnea, f"pin.rnea ({model})", number=1000,
                    repeat=5)
    if law in TARGET_US:
        e["target_time_us"] = TARGET_US[law]
        e["meets_target"] = bool(e["time_us"] <= TARGET_US[law])
    return e


def _arm7() -> list[dict]:
    model = load_model("arm7")
    pm, data = model.pin_model, model.create_data()
    rng = np.random.default_rng(0)
    q, v = ARM_Q.copy(), rng.normal(size=7) * 0.3
    ref = Reference(q + 0.01, v + 0.01, rng.normal(size=7), u_ff=np.zeros(7))
    a0 = np.zeros(7)

    def rnea():
        pin.rnea(pm, data, q, v, a0)

    # nominal motion for the LQR: a short rest-to-rest move with its inverse dynamics
    t = np.linspace(0.0, 0.2, 201)
    traj = rest_to_rest(t, ARM_Q, ARM_Q + 0.05, 0.0, 0.2)
    dyn = RigidDynamics(model)
    u = np.array([dyn.inverse_dynamics(*x) for x in zip(traj.q, traj.v, traj.a)])
    laws = {
        "pd": PDController(model, PDConfig(kp=100.0, kd=20.0)),
        "pid": PDController(model, PDConfig(kp=100.0, kd=20.0, ki=10.0)),
        "computed_torque": ComputedTorqueController(model, ComputedTorqueConfig(100.0, 20.0)),
        "projected_inverse_dynamics": ProjectedInverseDynamicsController(
            model, ProjectedInverseDynamicsConfig(100.0, 20.0)),
        "tv_lqr": TimeVariantLQRController(model, LQRConfig(dt=1e-3, Q=100.0, R=0.01),
                                           t=t, q=traj.q, v=traj.v, u=u),
    }
    out = []
    for law, ctl in laws.items():
        clock = iter(np.arange(1_000_000) * 1e-4 % 0.2)  # the integrator and gain lookup move
        out.append(_entry("arm7", law, lambda c=ctl, k=clock: c.step(next(k), q, v, ref), rnea))
    rmrc = RMRCController(model, RMRCConfig(redundant_joint="joint3"))
    twist = TwistReference(np.array([0.1, 0.0, 0.05, 0.0, 0.0, 0.0]), 0.1)
    clock = iter(np.arange(1_000_000) * 1e-6)  # tiny steps: the command stays near q
    out.append(_entry("arm7", "rmrc", lambda: rmrc.step(next(clock), q, v, twist), rnea))
    return out


def _five_bar() -> list[dict]:
    model = load_model("five_bar")
    pm, data = model.pin_model, model.create_data()
    pid_ctl = ProjectedInverseDynamicsController(model, ProjectedInverseDynamicsConfig(100.0,
                                                                                       20.0))
    q = pid_ctl.assemble(np.array([2.0, -1.2, 1.1, 1.2]))
    v = pid_ctl.dependent_velocity(q, [0.3, -0.2])
    ref = Reference(q + 0.01, v, np.zeros(4), u_ff=np.zeros(2))
    a0 = np.zeros(4)

    def rnea():
        pin.rnea(pm, data, q, v, a0)

    laws = {
        "pd": PDController(model, PDConfig(kp=1.0, kd=0.1)),
        "pid": PDController(model, PDConfig(kp=1.0, kd=0.1, ki=0.5)),
        "projected_inverse_dynamics": pid_ctl,
    }
    out = []
    for law, ctl in laws.items():
        clock = iter(np.arange(1_000_000) * 1e-4)
        out.append(_entry("five_bar", law,
                          lambda c=ctl, k=clock: c.step(next(k), q, v, ref), rnea))
    for law, why in (("computed_torque", "needs a fully actuated open chain"),
                     ("tv_lqr", "the linearization is for open chains"),
                     ("rmrc", "needs a fully actuated arm")):
        out.append({"name": f"five_bar {law} step", "skipped": why})
    return out


def run() -> list[dict]:
    return _arm7() + _five_bar()
