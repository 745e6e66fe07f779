"""Joint references from flexible inversions: what a collocated joint controller tracks.

A flexible inversion (:func:`~multibody_control.inversion.flexible.invert_flexible`) returns
the motion of every coordinate of the chain -- the joints and the elastic coordinates -- and
the joint torques ``u``. The loop of Seifried (2014) Ch. 6 closes a PD/PID on the joints
around that feedforward (controller_node's ``pd``/``pid`` on a flexible robot), so what it
needs is the joint part: :func:`joint_reference` keeps the joint rows of ``q``, ``v``, ``a``
(and ``u``, ``t``, the diagnostics as they are), which makes the result an inversion result
of the chain's joint view (:func:`~multibody_dynamics.flexible.joint_view.joint_space_model`).
Its ``B`` are the joint rows of the chain's input matrix ``B = [I; 0]``, so ``B u`` of the
joint view is ``u`` on the joints: what inverter_node publishes as ``effort``.

:class:`PointPathOutput` is the output a flexible inversion follows: the planar position
``(<body>.x, <body>.y)`` of one body's end point (the task's coordinates); the elastic
weighting ``y = q_r + Γ q_e`` of the stable inversion is internal to it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from multibody_dynamics.errors import InputError
from multibody_dynamics.flexible.system import FlexibleChain

from .result import InversionResult

__all__ = ["PointPathOutput", "joint_reference"]


def joint_reference(chain, result: InversionResult) -> InversionResult:
    """The joint part of a flexible inversion result (module docstring).

    Parameters
    ----------
    chain : FlexibleChain or ClosedFlexibleChain
        The system that was inverted; its inputs must act on the joints only (``B = [I; 0]``
        for an open chain; a closed loop's actuated joints).
    result : InversionResult or ClosedInversion
        Of :func:`~multibody_control.inversion.flexible.invert_flexible` on ``chain`` (or
        :func:`~multibody_control.inversion.closed_flexible.invert_closed` on a closed loop):
        ``q``, ``v``, ``a`` of shape (N, nq) with the joints first.

    Returns
    -------
    The same type as ``result``
        ``q``, ``v``, ``a`` of shape (N, nq_r) (the joints, in ``chain.joint_names`` order),
        everything else unchanged; ``u`` is the feedforward of the actuated joints.
    """
    tree = getattr(chain, "chain", chain)  # a closed loop's spanning tree
    if not isinstance(tree, FlexibleChain):
        raise InputError(f"expected a FlexibleChain or ClosedFlexibleChain, got "
                         f"{type(chain).__name__}")
    nr, nv = chain.nq_r, chain.nv
    B = np.asarray(chain.B, float)
    if np.any(B[nr:] != 0.0):
        raise InputError(f"{tree.config.name}: its inputs act on elastic coordinates; a joint "
                         "trajectory cannot carry that feedforward")
    for name in ("q", "v", "a"):
        x = getattr(result, name)
        if x.ndim != 2 or x.shape[1] != nv or x.shape[0] != result.t.size:
            raise InputError(f"result.{name} has shape {x.shape}, expected ({result.t.size}, "
                             f"{nv}) (every coordinate of {tree.config.name})")
    if result.u.shape != (result.t.size, chain.nu):
        raise InputError(f"result.u has shape {result.u.shape}, expected ({result.t.size}, "
                         f"{chain.nu}) (one torque per input of {tree.config.name})")
    return dataclasses.replace(result, q=result.q[:, :nr].copy(), v=result.v[:, :nr].copy(),
                               a=result.a[:, :nr].copy())


@dataclass(frozen=True)
class PointPathOutput:
    """Output of a flexible inversion: the end point of ``body`` in the chain's plane.

    ``names`` are the task coordinates ``("<body>.x", "<body>.y")`` [m]; a task (or a
    desired output trajectory) over these names is what
    :func:`~multibody_control.inversion.flexible.invert_flexible` takes.
    """

    chain: FlexibleChain
    body: str

    @property
    def names(self) -> tuple[str, str]:
        return (f"{self.body}.x", f"{self.body}.y")

    @classmethod
    def of(cls, chain: FlexibleChain, names=()) -> PointPathOutput:
        """From output names (``["<body>.x", "<body>.y"]``); empty: the chain's end effector
        (its configured ``end_effector``, else the last body). Invalid names raise
        :class:`InputError` with the reason."""
        cfg = chain.config
        bodies = [b.name for b in chain.bodies]
        if chain.nq_r != 2:
            raise InputError(f"{cfg.name} has {chain.nq_r} joints ({', '.join(chain.joint_names)})"
                             "; the flexible inversion follows a point in the plane with two "
                             "joints")
        names = tuple(names)
        if not names:
            return cls(chain, cfg.end_effector or bodies[-1])
        body = names[0].rsplit(".", 1)[0] if names else ""
        if len(names) != 2 or names != (f"{body}.x", f"{body}.y") or body not in bodies:
            raise InputError(f"output_names {list(names)}: a flexible inversion's output is the "
                             "end point of one body in the plane, ['<body>.x', '<body>.y'], body "
                             f"one of {', '.join(bodies)}")
        return cls(chain, body)
