"""Compiled mass matrix and bias forces of a planar tree (numba): the 3-component twin of
:func:`multibody_dynamics.fast_step._terms`.

A tree whose revolute joints all turn about the world ``z`` axis and whose prismatic joints
all slide in the ``x-y`` plane moves in that plane: every body velocity, acceleration and
joint axis ``S_i`` of :func:`~multibody_dynamics.fast_step._terms` (spatial vectors
``[linear; angular]`` at the world origin, Featherstone, *Rigid Body Dynamics Algorithms*,
2008, Ch. 5-6) has only the components ``(l_x, l_y, w_z)``, and those components of the
composite-rigid-body and recursive Newton-Euler recursions involve only the in-plane ones:

* motion cross product ``V x S = (-V_w S_y + V_y S_w, V_w S_x - V_x S_w, 0)``: the bias
  acceleration of every body has no angular part;
* a body's spatial inertia at the origin acts through its mass ``m``, first moment
  ``h = m c`` in the plane and inertia about the world ``z`` axis ``I_zz + m |c|^2``
  (``I_zz`` about the centre of mass; products ``I_xz``, ``I_yz``, the ``z`` offset of the
  centre of mass and gravity along ``z`` give only out-of-plane forces, which no joint axis
  measures);
* force cross product ``V x* F``: ``(-V_w F_y, V_w F_x, V_x F_y - V_y F_x)``.

So the same recursions on 3 instead of 6 components (and an angle instead of a rotation
matrix) give the same ``M`` and ``h = C v + g`` (``g``: the in-plane gravity) to round-off,
about a fifth of the arithmetic.  Checked against pinocchio's ``crba`` and
``nonLinearEffects`` in ``test/test_fast_planar.py``.

Scope: one-degree-of-freedom joints, ``nq = nv``; joint placements that rotate about ``z``
only; revolute axes ``+-z``; prismatic axes in the joint frame's ``x-y`` plane.
:func:`pack_planar` returns None for any other tree (the general kernel then applies).
"""

from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

__all__ = ["PLANAR_WORK", "pack_planar", "planar_terms", "wanted_rows"]

#: columns of the work array of :func:`_planar_terms` per joint
PLANAR_WORK = 20
_TOL = 1e-12  # how far from planar a placement or axis may be (round-off of the URDF's rpy)


def _planar_terms(q, v, ji, jp, g, M, nle, W, rows):  # pragma: no cover - numba
    """Mass matrix ``M`` (n, n) and bias forces ``nle`` (n,) of a planar tree at (q, v).

    ``rows`` (n,) int: 1 for the joints whose rows of ``M`` and ``nle`` are wanted *and every
    joint below them in the tree*, 0 elsewhere; the backward pass skips the joints marked 0
    (their ``nle`` and the entries of ``M`` between two of them are left as they were, zero
    for ``M``).  All ones: the whole of ``M`` and ``nle``.  The entries computed are the same
    to the last bit either way.

    ``ji`` (n, 2) [parent (-1: universe), kind (0 revolute, 1 prismatic)]; ``jp`` (n, 10)
    [cos and sin of the placement angle, placement translation x, y, axis (revolute: the sign
    of its z; prismatic: x, y in the joint frame), mass, lever x, y, I_zz about the centre of
    mass]; ``g`` (3,) gravity (x, y used).  ``W`` (n, :data:`PLANAR_WORK`) work space per
    joint: cos, sin of the body angle, joint position (2), axis S (3), velocity V (3), bias
    acceleration (2, one unused column), force (3), composite mass, first moment (2),
    inertia about z at the origin.  No allocation.
    """
    n = ji.shape[0]
    for i in range(n):
        par = ji[i, 0]
        if par < 0:
            cp, sp, px, py = 1.0, 0.0, 0.0, 0.0
            v0, v1, v2 = 0.0, 0.0, 0.0
            b0, b1 = -g[0], -g[1]
        else:
            cp, sp, px, py = W[par, 0], W[par, 1], W[par, 2], W[par, 3]
            v0, v1, v2 = W[par, 7], W[par, 8], W[par, 9]
            b0, b1 = W[par, 10], W[par, 11]
        # placement: angle and position of the joint frame
        c0 = cp * jp[i, 0] - sp * jp[i, 1]
        s0 = sp * jp[i, 0] + cp * jp[i, 1]
        x0 = px + cp * jp[i, 2] - sp * jp[i, 3]
        x1 = py + sp * jp[i, 2] + cp * jp[i, 3]
        qi = q[i]
        if ji[i, 1] == 0:  # revolute about sigma z
            sig = jp[i, 4]
            cq, sq = np.cos(qi), sig * np.sin(qi)
            c, s = c0 * cq - s0 * sq, s0 * cq + c0 * sq
            S0, S1, S2 = sig * x1, -sig * x0, sig
        else:  # prismatic along w = R0 k
            w0 = c0 * jp[i, 4] - s0 * jp[i, 5]
            w1 = s0 * jp[i, 4] + c0 * jp[i, 5]
            c, s = c0, s0
            x0 += w0 * qi
            x1 += w1 * qi
            S0, S1, S2 = w0, w1, 0.0
        vi = v[i]
        v0 += S0 * vi
        v1 += S1 * vi
        v2 += S2 * vi
        # bias acceleration b = b_parent + (V x S) v_i (gravity as a base acceleration; its
        # angular part stays 0)
        b0 += (-v2 * S1 + v1 * S2) * vi
        b1 += (v2 * S0 - v0 * S2) * vi
        # inertia at the origin: m, h = m c, I_zz + m |c|^2
        m = jp[i, 6]
        cx = x0 + c * jp[i, 7] - s * jp[i, 8]
        cy = x1 + s * jp[i, 7] + c * jp[i, 8]
        h0, h1 = m * cx, m * cy
        io = jp[i, 9] + m * (cx * cx + cy * cy)
        # force f = I b + V x* (I V) (the angular momentum enters only out of the plane)
        iv0 = m * v0 - h1 * v2
        iv1 = m * v1 + h0 * v2
        W[i, 0], W[i, 1], W[i, 2], W[i, 3] = c, s, x0, x1
        W[i, 4], W[i, 5], W[i, 6] = S0, S1, S2
        W[i, 7], W[i, 8], W[i, 9] = v0, v1, v2
        W[i, 10], W[i, 11] = b0, b1
        W[i, 13] = m * b0 - v2 * iv1
        W[i, 14] = m * b1 + v2 * iv0
        W[i, 15] = h0 * b1 - h1 * b0 + v0 * iv1 - v1 * iv0
        W[i, 16], W[i, 17], W[i, 18], W[i, 19] = m, h0, h1, io
    _planar_backward(ji, W, M, nle, rows, 1)


def _planar_backward(ji, W, M, nle, rows, need_m):  # pragma: no cover - numba
    """The backward pass of the planar recursions (:func:`_planar_terms` and
    ``fast_step._terms_planar``): joint forces ``nle`` (RNEA) and composite inertias with the
    entries of ``M`` (CRBA), from the axes (``W`` columns 4-6), body forces (13-15) and
    inertias at the origin (16-19) of the forward pass.  ``rows`` as :func:`_planar_terms`'s, or
    of length 0 for every joint; ``need_m`` 0 ``nle`` only, 1 both, 2 ``M`` only (the other left
    as it was)."""
    n = ji.shape[0]
    rnea = need_m != 2
    if need_m:
        for i in range(n):
            for j in range(n):
                M[i, j] = 0.0
    for i in range(n - 1, -1, -1):
        if rows.shape[0] and rows[i] == 0:
            continue
        S0, S1, S2 = W[i, 4], W[i, 5], W[i, 6]
        par = ji[i, 0]
        if rnea:
            nle[i] = S0 * W[i, 13] + S1 * W[i, 14] + S2 * W[i, 15]
            if par >= 0:
                for a in range(13, 16):
                    W[par, a] += W[i, a]
        if need_m:
            m, h0, h1, io = W[i, 16], W[i, 17], W[i, 18], W[i, 19]
            f0 = m * S0 - h1 * S2
            f1 = m * S1 + h0 * S2
            f2 = h0 * S1 - h1 * S0 + io * S2
            j = i
            while j >= 0:
                sm = W[j, 4] * f0 + W[j, 5] * f1 + W[j, 6] * f2
                M[i, j] = sm
                M[j, i] = sm
                j = ji[j, 0]
            if par >= 0:
                for a in range(16, 20):
                    W[par, a] += W[i, a]


_COMPILED: list = []  # [compiled _planar_terms] or [None] without numba


def planar_terms():
    """The compiled :func:`_planar_terms` (for other kernels to call), or None without numba.

    Its arguments are ``(q, v, ji, jp, g, M, nle, W, rows)`` with ``(ji, jp)`` from
    :func:`pack_planar`, ``W`` of shape ``(n, PLANAR_WORK)`` and ``rows`` from
    :func:`wanted_rows`.
    """
    global _planar_terms, _planar_backward
    if not _COMPILED:
        try:
            import numba
        except ImportError:
            _COMPILED.append(None)
        else:
            from .compile_notice import install

            install()  # a note while a first run compiles
            _planar_backward = numba.njit(cache=True, nogil=True, inline="always")(
                _planar_backward)
            _planar_terms = numba.njit(cache=True, nogil=True)(_planar_terms)
            _COMPILED.append(_planar_terms)
    return _COMPILED[0]


def wanted_rows(ji, wanted) -> np.ndarray:
    """``rows`` of :func:`_planar_terms` for the joints ``wanted`` (indices): 1 for them and
    every joint whose path to the root passes one of them, else 0."""
    rows = np.zeros(ji.shape[0], np.int64)
    rows[np.asarray(wanted, dtype=np.int64)] = 1
    for i in range(ji.shape[0]):  # parents come before their children
        if ji[i, 0] >= 0 and rows[ji[i, 0]]:
            rows[i] = 1
    return rows


def _z_rotation(R) -> tuple[float, float] | None:
    """(cos, sin) of a rotation about z, or None when ``R`` is not one."""
    (r00, _, r02), (r10, _, r12), (r20, r21, r22) = np.asarray(R).tolist()
    if abs(r22 - 1.0) > _TOL or max(abs(r02), abs(r12), abs(r20), abs(r21)) > _TOL:
        return None
    return r00, r10


def pack_planar(pm: pin.Model):
    """``(ji, jp)`` of :func:`_planar_terms` for a pinocchio model, or None when the tree is not
    planar in ``x-y`` (see the module docstring) or has a joint other than a one-degree-of-
    freedom revolute or prismatic joint.

    Parameters
    ----------
    pm : pinocchio.Model
        Its current inertias and placements are packed (pack again after changing them).

    Returns
    -------
    ji : (n, 2) int64
        Parent joint (-1: universe) and kind (0 revolute, 1 prismatic) per joint.
    jp : (n, 10) float
        cos, sin of the placement angle, placement translation x, y [m], axis (revolute:
        sign of z; prismatic: x, y), mass [kg], lever x, y [m], I_zz about the centre of mass
        [kg m^2].
    """
    from .fast_step import joint_axes

    axes = joint_axes(pm)
    if axes is None:
        return None
    n = len(axes)
    ji = np.zeros((n, 2), np.int64)
    jp = np.zeros((n, 10))
    for i, (kind, axis) in enumerate(axes):
        placement = pm.jointPlacements[i + 1]
        rotation = _z_rotation(placement.rotation)
        if rotation is None:
            return None
        if kind == 0:
            if abs(axis[0]) > _TOL or abs(axis[1]) > _TOL or abs(abs(axis[2]) - 1.0) > _TOL:
                return None
            packed_axis = (math.copysign(1.0, axis[2]), 0.0)
        else:
            if abs(axis[2]) > _TOL:
                return None
            packed_axis = (axis[0], axis[1])
        Y = pm.inertias[i + 1]
        ji[i] = (pm.parents[i + 1] - 1, kind)
        jp[i] = (*rotation, placement.translation[0], placement.translation[1], *packed_axis,
                 Y.mass, Y.lever[0], Y.lever[1], Y.inertia[2, 2])
    return ji, jp
