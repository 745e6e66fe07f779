"""Rolling without slipping: Pfaffian (non-integrable) velocity constraints for wheeled bases.

The model YAML describes holonomic closures only; rolling contacts are velocity constraints
``A_p(q) v = 0`` that no position residual expresses, so they are added in code to a
:class:`~multibody_dynamics.constraints.Constraints` object with
:meth:`~multibody_dynamics.constraints.Constraints.add_pfaffian`.

Differential drive (two wheels on one axle, Yesiloglu 2007 Sect. 4.5, "two-wheeled cart"):
a planar base with coordinates ``x``, ``y`` [m] and heading ``theta`` [rad] (prismatic x,
prismatic y, revolute z; pinocchio's URDF parser has no planar joint), and two wheels of
radius ``r`` spinning about the axle (the base's +y axis) at ``+-b`` along it.  With
``e = (cos theta, sin theta)`` the forward and ``n = (-sin theta, cos theta)`` the lateral
direction, the velocity of the contact point of wheel ``s`` (+1 left, -1 right) vanishes::

    longitudinal   x' cos(theta) + y' sin(theta) - s b theta' - r phi_s' = 0      (1 row per wheel)
    lateral        -x' sin(theta) + y' cos(theta)                          = 0      (1 row, axle)

(a positive spin about +y rolls the wheel forward: ``omega x (-r e_z) = -r phi' e_x``).  The
two wheels' lateral conditions are the same row, because both wheels sit on one rigid axle;
it is kept once so that ``A`` has full rank 3.  The bias ``gamma = A'(q, v) v`` follows from
``dA/dt = theta' dA/dtheta``::

    gamma_long = theta' (-x' sin(theta) + y' cos(theta)),
    gamma_lat = -theta' (x' cos(theta) + y' sin(theta)).

Yesiloglu's formulation drops the lateral row from the dynamics and asks to monitor it; here
all three rows enter the projection (Aghili 2005), so the simulator enforces all three, and
:func:`pfaffian_residual` reports each of them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .constraints import Constraints
from .errors import InputError
from .model import MultibodyModel

#: Wheel radius of the shipped ``two_wheeled_cart`` [m] (tools/make_robots.py, test-checked
#: against the wheel cylinder of urdf/two_wheeled_cart.urdf).
TWO_WHEELED_CART_RADIUS = 0.1


def differential_drive(model: MultibodyModel, radius: float, half_track: float,
                       x: str = "chassis_x", y: str = "chassis_y", heading: str = "chassis_theta",
                       left: str = "left_wheel", right: str = "right_wheel"):
    """The Pfaffian function ``fn(q, v) -> (A_p (3, nv), gamma_p (3,))`` of a differential drive.

    Parameters
    ----------
    model : MultibodyModel
    radius : float
        Wheel radius r [m] (> 0).
    half_track : float
        Distance b of each wheel from the base origin along the axle [m] (> 0).
    x, y, heading, left, right : str
        Coordinate names of the planar base and of the two wheel spin joints.

    Returns
    -------
    fn : callable
    labels : tuple of str
        ``("left.longitudinal", "right.longitudinal", "axle.lateral")``.
    """
    if not (np.isfinite(radius) and radius > 0):
        raise InputError(f"radius: expected a positive wheel radius in m, got {radius}")
    if not (np.isfinite(half_track) and half_track > 0):
        raise InputError(f"half_track: expected a positive distance in m, got {half_track}")
    ix, iy, ith, il, ir = (model.joint_index(n) for n in (x, y, heading, left, right))
    pm = model.pin_model
    # nq index of the heading: with 1-DoF revolute joints q and v share the layout up to offsets
    jq = pm.joints[pm.getJointId(heading)]
    if jq.nq != 1:
        raise InputError(f"heading: joint {heading!r} must be a 1-DoF revolute joint (nq = 1)")
    iq_th = jq.idx_q
    nv = model.nv
    b, r = float(half_track), float(radius)

    def fn(q, v):
        c, s = np.cos(q[iq_th]), np.sin(q[iq_th])
        A = np.zeros((3, nv))
        A[0, ix], A[0, iy], A[0, ith], A[0, il] = c, s, -b, -r
        A[1, ix], A[1, iy], A[1, ith], A[1, ir] = c, s, b, -r
        A[2, ix], A[2, iy] = -s, c
        w, vx, vy = v[ith], v[ix], v[iy]
        lat = -vx * s + vy * c
        gamma = np.array([w * lat, w * lat, -w * (vx * c + vy * s)])
        return A, gamma

    return fn, ("left.longitudinal", "right.longitudinal", "axle.lateral")


def add_differential_drive(constraints: Constraints, radius: float,
                           half_track: float | None = None,
                           **names) -> None:
    """Add the three rolling rows of :func:`differential_drive` to ``constraints``.

    ``half_track`` defaults to the distance of the left wheel joint from the heading joint,
    read from the model.
    """
    model = constraints.model
    if half_track is None:
        pm = model.pin_model
        left = names.get("left", "left_wheel")
        half_track = float(np.linalg.norm(pm.jointPlacements[pm.getJointId(left)].translation[:2]))
    fn, labels = differential_drive(model, radius, half_track, **names)
    constraints.add_pfaffian("rolling", 3, fn, labels)


def _two_wheeled_cart(constraints: Constraints) -> None:
    add_differential_drive(constraints, TWO_WHEELED_CART_RADIUS)


#: Robots whose constraints include Pfaffian rows, by model name: ``fn(constraints)`` adds them.
#: :func:`model_constraints` (used by ``multibody simulate``) looks robots up here.
PFAFFIAN_MODELS: dict[str, Callable[[Constraints], None]] = {
    "two_wheeled_cart": _two_wheeled_cart,
}


def model_constraints(model: MultibodyModel) -> Constraints | None:
    """``Constraints(model)`` plus any registered Pfaffian rows; None for a plain open chain."""
    extra = PFAFFIAN_MODELS.get(model.name)
    if extra is None and not model.closures:
        return None
    c = Constraints(model)
    if extra is not None:
        extra(c)
    return c


def pfaffian_residual(constraints: Constraints, q, v) -> np.ndarray:
    """Velocity-level residual ``A(q) v`` of every row (holonomic and Pfaffian), (n_rows,)
    [m/s | rad/s]: zero when the motion is admissible."""
    return constraints.jacobian(q) @ np.asarray(v, float)
