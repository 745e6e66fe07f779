"""The joints of a flexible model as a kinematics-only :class:`MultibodyModel` (its joint view).

Collocated joint feedback (PD/PID on the motor angles, what Seifried 2014 Ch. 6 closes
around the feedforward of a flexible manipulator) needs the joints, their order, the input
map and a configuration difference, not the flexible dynamics. :func:`joint_space_model`
gives exactly that in the form the controllers take: a pinocchio tree of the ``nq_r`` joints
(revolute about z, prismatic along the joint axis in the plane), ``B`` the joint rows of the
flexible model's input matrix, no inertia. Laws that need the dynamics (computed torque,
LQR, RMRC) must not be built on it; ``controller_node`` refuses them for flexible robots.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin

from ..model import MultibodyModel
from .system import FlexibleChain

__all__ = ["joint_space_model"]


def joint_space_model(system) -> MultibodyModel:
    """Joint view of a :class:`FlexibleChain` or a
    :class:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain`.

    Returns
    -------
    MultibodyModel
        ``coordinate_names`` = the flexible model's ``joint_names`` (nq = nv = nq_r),
        ``B`` (nq_r, nu) its joint rows (``I`` for an open chain), ``input_names`` the
        actuated joints, unactuated joints ``passive``; no inertia, no closures, no frames
        but the joints'.
    """
    chain = system if isinstance(system, FlexibleChain) else system.chain
    cfg = chain.config
    name = system.name
    pm = pin.Model()
    pm.name = name
    for i, b in enumerate(cfg.bodies):
        if b.joint_type == "prismatic":
            axis = np.array([b.axis[0], b.axis[1], 0.0])
            joint = pin.JointModelPrismaticUnaligned(axis / np.linalg.norm(axis))
        else:
            joint = pin.JointModelRZ()
        pm.addJoint(cfg.parents[i] + 1, joint, pin.SE3.Identity(), b.joint)
    nr = chain.nq_r
    B = np.array(system.B[:nr], float)
    B.setflags(write=False)
    passive = ~np.any(B != 0.0, axis=1)
    input_names = system.input_names
    zeros = np.zeros(nr)
    return MultibodyModel(
        name=name,
        description=f"joints of the flexible model {name} (elastic coordinates not modelled)",
        source=cfg.source,
        config_path=None,
        urdf_path=Path(),  # no URDF: the tree is built here from the flexible model's joints
        pin_model=pm,
        joint_names=tuple(chain.joint_names),
        coordinate_names=tuple(chain.joint_names),
        passive=passive,
        stiffness=zeros,
        damping=zeros.copy(),
        q_rest=zeros.copy(),
        B=B,
        input_names=input_names,
        closures=(),
        gravity=np.array([cfg.gravity[0], cfg.gravity[1], 0.0]),
        end_effector=None,
    )
