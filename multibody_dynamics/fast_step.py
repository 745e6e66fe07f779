"""Compiled fixed step of the simulator (numba): dynamics, RK4 stages, both projections.

The reference path of :class:`~multibody_dynamics.simulate.Simulator` calls pinocchio and
LAPACK from Python about 18 times per RK4 step of a closed loop (four accelerations, the
Newton projection with its Jacobian and SVD, the mass-metric velocity projection, the
argument checks) and records the constraint forces with one more call per sample.  Each of
those calls costs microseconds of interpreter overhead on matrices of a few rows.  This
module does the same arithmetic in one compiled kernel per run (or per step when the input
is a callable): the tree's kinematics, mass matrix and bias forces, the closure rows, the
projected accelerations (Aghili 2005 eq. 22 with the mass matrix of eq. 24, 27 or 29 by
``ProjectionSettings.variant``), the Newton projection onto ``phi(q) = 0`` (eq. 39, skipped
when the residual is already below tolerance, so most steps need only one evaluation of
``phi``), and the mass-metric velocity projection with the same SVD
of ``A`` that the Newton test evaluated.  The output samples (energy, multipliers,
residuals) are computed in the kernel too.

Rigid-body algorithms (world frame, spatial vectors ``[linear; angular]`` at the world
origin, as pinocchio's ``data.J``): joint axes ``S_i`` (revolute: ``[p_i x k_i; k_i]``,
prismatic: ``[k_i; 0]``), body velocities ``V_i = V_parent + S_i v_i``, Jacobian variation
``dS_i = V_i x S_i`` (pinocchio's ``data.dJ``), the composite-rigid-body algorithm for ``M``
and the recursive Newton-Euler algorithm for ``h = C v + g`` (Featherstone, *Rigid Body
Dynamics Algorithms*, 2008, Ch. 5-6, in world coordinates).  Checked against pinocchio's
``crba``, ``nonLinearEffects``, ``data.J``/``data.dJ`` and ``framePlacement`` in
``test/test_fast_step.py``.

Scope: trees of one-degree-of-freedom joints (revolute or prismatic about any fixed axis,
``nq = nv``), closures of the model YAML only (no Pfaffian rows), no external wrenches, the
mass-metric velocity projection (the Euclidean one serves drift studies: reference path).
Everything else (and any model when numba is not installed) takes the reference path; so do
steps that fail: the kernel stops before a step that would give a non-finite state, a
failed projection or a speed above ``max_speed``, and the reference path repeats that step
to report it with its usual message.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from . import fast_planar as _planar
from . import projection as _proj
from .validation import require_finite

#: pinocchio joint classes handled by the kernel: (kind, axis) with kind 0 revolute, 1 prismatic
_AXES = {"JointModelRX": (0, (1.0, 0.0, 0.0)), "JointModelRY": (0, (0.0, 1.0, 0.0)),
         "JointModelRZ": (0, (0.0, 0.0, 1.0)), "JointModelPX": (1, (1.0, 0.0, 0.0)),
         "JointModelPY": (1, (0.0, 1.0, 0.0)), "JointModelPZ": (1, (0.0, 0.0, 1.0))}

#: status codes of the kernel (BAD_INPUT: a non-finite input, from :func:`_step_entry`)
OK, STOPPED, BAD_INPUT = 0, 1, 2


# -- kernels (compiled by numba; plain Python functions until then) ---------------------------
def _terms(q, v, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, need_m, W):  # pragma: no cover - numba
    """Kinematics, Jacobians, mass matrix and bias forces at (q, v).

    ``ji`` (n, 2) [parent (-1: universe), kind]; ``jf`` (n, 28) [axis (3), placement rotation
    (9, row-major), placement translation (3), mass, lever (3), inertia about the centre of
    mass (9)]; ``g`` (3,) gravity; ``fi`` (nf,) parent joint of each closure frame (-1:
    universe, then ``H`` is left as set at construction); ``ff`` (nf, 12) frame placement in its
    joint [rotation (9), translation (3)].  ``need_m``: 0 ``nle`` only, 1 ``M`` and ``nle``, 2
    ``M`` only (``nle``, ``dJ`` and the velocity terms of ``W`` left as they were).  Fills
    ``M``, ``nle``, ``J``, ``dJ``
    (6, n), ``H`` (nf, 4, 4); ``X`` (n, 12) world rotation (9) and position (3) of each joint;
    ``W`` (n, 34) work space: body velocity (6), force (6), inertia at the world origin
    (composite after the backward pass) as mass, first moment ``m c`` (3) and rotational
    inertia about the origin (9), bias acceleration (6), scratch (3).  No allocation.  Returns the
    gravity potential energy [J] (pinocchio's convention, zero at the world origin).
    """
    n = ji.shape[0]
    pot = 0.0
    rnea = need_m != 2
    for i in range(n):
        par = ji[i, 0]
        # parent placement
        if par < 0:
            p00, p01, p02 = 1.0, 0.0, 0.0
            p10, p11, p12 = 0.0, 1.0, 0.0
            p20, p21, p22 = 0.0, 0.0, 1.0
            t0, t1, t2 = 0.0, 0.0, 0.0
        else:
            p00, p01, p02 = X[par, 0], X[par, 1], X[par, 2]
            p10, p11, p12 = X[par, 3], X[par, 4], X[par, 5]
            p20, p21, p22 = X[par, 6], X[par, 7], X[par, 8]
            t0, t1, t2 = X[par, 9], X[par, 10], X[par, 11]
        # R = R_parent R_placement, p = p_parent + R_parent p_placement
        r00 = p00 * jf[i, 3] + p01 * jf[i, 6] + p02 * jf[i, 9]
        r01 = p00 * jf[i, 4] + p01 * jf[i, 7] + p02 * jf[i, 10]
        r02 = p00 * jf[i, 5] + p01 * jf[i, 8] + p02 * jf[i, 11]
        r10 = p10 * jf[i, 3] + p11 * jf[i, 6] + p12 * jf[i, 9]
        r11 = p10 * jf[i, 4] + p11 * jf[i, 7] + p12 * jf[i, 10]
        r12 = p10 * jf[i, 5] + p11 * jf[i, 8] + p12 * jf[i, 11]
        r20 = p20 * jf[i, 3] + p21 * jf[i, 6] + p22 * jf[i, 9]
        r21 = p20 * jf[i, 4] + p21 * jf[i, 7] + p22 * jf[i, 10]
        r22 = p20 * jf[i, 5] + p21 * jf[i, 8] + p22 * jf[i, 11]
        x0 = t0 + p00 * jf[i, 12] + p01 * jf[i, 13] + p02 * jf[i, 14]
        x1 = t1 + p10 * jf[i, 12] + p11 * jf[i, 13] + p12 * jf[i, 14]
        x2 = t2 + p20 * jf[i, 12] + p21 * jf[i, 13] + p22 * jf[i, 14]
        k0, k1, k2 = jf[i, 0], jf[i, 1], jf[i, 2]
        w0 = r00 * k0 + r01 * k1 + r02 * k2  # axis in world (unchanged by the joint's motion)
        w1 = r10 * k0 + r11 * k1 + r12 * k2
        w2 = r20 * k0 + r21 * k1 + r22 * k2
        qi = q[i]
        if ji[i, 1] == 0:  # revolute: R <- R Rot(k, q) (Rodrigues)
            c, s = np.cos(qi), np.sin(qi)
            tt = 1.0 - c
            a00 = c + k0 * k0 * tt
            a01 = k0 * k1 * tt - k2 * s
            a02 = k0 * k2 * tt + k1 * s
            a10 = k1 * k0 * tt + k2 * s
            a11 = c + k1 * k1 * tt
            a12 = k1 * k2 * tt - k0 * s
            a20 = k2 * k0 * tt - k1 * s
            a21 = k2 * k1 * tt + k0 * s
            a22 = c + k2 * k2 * tt
            X[i, 0] = r00 * a00 + r01 * a10 + r02 * a20
            X[i, 1] = r00 * a01 + r01 * a11 + r02 * a21
            X[i, 2] = r00 * a02 + r01 * a12 + r02 * a22
            X[i, 3] = r10 * a00 + r11 * a10 + r12 * a20
            X[i, 4] = r10 * a01 + r11 * a11 + r12 * a21
            X[i, 5] = r10 * a02 + r11 * a12 + r12 * a22
            X[i, 6] = r20 * a00 + r21 * a10 + r22 * a20
            X[i, 7] = r20 * a01 + r21 * a11 + r22 * a21
            X[i, 8] = r20 * a02 + r21 * a12 + r22 * a22
            X[i, 9], X[i, 10], X[i, 11] = x0, x1, x2
            s0, s1, s2 = x1 * w2 - x2 * w1, x2 * w0 - x0 * w2, x0 * w1 - x1 * w0
            s3, s4, s5 = w0, w1, w2
        else:  # prismatic: p <- p + R k q
            X[i, 0], X[i, 1], X[i, 2] = r00, r01, r02
            X[i, 3], X[i, 4], X[i, 5] = r10, r11, r12
            X[i, 6], X[i, 7], X[i, 8] = r20, r21, r22
            X[i, 9], X[i, 10], X[i, 11] = x0 + w0 * qi, x1 + w1 * qi, x2 + w2 * qi
            s0, s1, s2, s3, s4, s5 = w0, w1, w2, 0.0, 0.0, 0.0
        J[0, i], J[1, i], J[2, i], J[3, i], J[4, i], J[5, i] = s0, s1, s2, s3, s4, s5
        if rnea:  # (M only: no velocity terms)
            # velocity V = V_parent + S v_i; dS = V x S; bias acceleration (gravity as a base
            # acceleration), kept in the force slots until the force replaces it
            vi = v[i]
            if par >= 0:
                lv0, lv1, lv2 = W[par, 0] + s0 * vi, W[par, 1] + s1 * vi, W[par, 2] + s2 * vi
                av0, av1, av2 = W[par, 3] + s3 * vi, W[par, 4] + s4 * vi, W[par, 5] + s5 * vi
                b0, b1, b2 = W[par, 25], W[par, 26], W[par, 27]
                b3, b4, b5 = W[par, 28], W[par, 29], W[par, 30]
            else:
                lv0, lv1, lv2, av0, av1, av2 = s0 * vi, s1 * vi, s2 * vi, s3 * vi, s4 * vi, s5 * vi
                b0, b1, b2, b3, b4, b5 = -g[0], -g[1], -g[2], 0.0, 0.0, 0.0
            W[i, 0], W[i, 1], W[i, 2], W[i, 3], W[i, 4], W[i, 5] = lv0, lv1, lv2, av0, av1, av2
            d0 = av1 * s2 - av2 * s1 + lv1 * s5 - lv2 * s4
            d1 = av2 * s0 - av0 * s2 + lv2 * s3 - lv0 * s5
            d2 = av0 * s1 - av1 * s0 + lv0 * s4 - lv1 * s3
            d3 = av1 * s5 - av2 * s4
            d4 = av2 * s3 - av0 * s5
            d5 = av0 * s4 - av1 * s3
            dJ[0, i], dJ[1, i], dJ[2, i], dJ[3, i], dJ[4, i], dJ[5, i] = d0, d1, d2, d3, d4, d5
            b0 += d0 * vi
            b1 += d1 * vi
            b2 += d2 * vi
            b3 += d3 * vi
            b4 += d4 * vi
            b5 += d5 * vi
            W[i, 25], W[i, 26], W[i, 27], W[i, 28], W[i, 29], W[i, 30] = b0, b1, b2, b3, b4, b5
        # inertia at the world origin: mass m, first moment h = m c,
        # Io = R Ic R^T + m (|c|^2 - c c^T)
        m = jf[i, 15]
        c0 = X[i, 9] + X[i, 0] * jf[i, 16] + X[i, 1] * jf[i, 17] + X[i, 2] * jf[i, 18]
        c1 = X[i, 10] + X[i, 3] * jf[i, 16] + X[i, 4] * jf[i, 17] + X[i, 5] * jf[i, 18]
        c2 = X[i, 11] + X[i, 6] * jf[i, 16] + X[i, 7] * jf[i, 17] + X[i, 8] * jf[i, 18]
        pot -= m * (g[0] * c0 + g[1] * c1 + g[2] * c2)
        cc = c0 * c0 + c1 * c1 + c2 * c2
        W[i, 12] = m
        W[i, 13], W[i, 14], W[i, 15] = m * c0, m * c1, m * c2
        for a in range(3):  # R I (into the scratch slots), then (R I) R^T
            for b in range(3):
                W[i, 31 + b] = (X[i, 3 * a] * jf[i, 19 + b] + X[i, 3 * a + 1] * jf[i, 22 + b]
                                + X[i, 3 * a + 2] * jf[i, 25 + b])
            for b in range(3):
                W[i, 16 + 3 * a + b] = (W[i, 31] * X[i, 3 * b] + W[i, 32] * X[i, 3 * b + 1]
                                        + W[i, 33] * X[i, 3 * b + 2])
        W[i, 16] += m * (cc - c0 * c0)
        W[i, 17] -= m * c0 * c1
        W[i, 18] -= m * c0 * c2
        W[i, 19] -= m * c1 * c0
        W[i, 20] += m * (cc - c1 * c1)
        W[i, 21] -= m * c1 * c2
        W[i, 22] -= m * c2 * c0
        W[i, 23] -= m * c2 * c1
        W[i, 24] += m * (cc - c2 * c2)
        if rnea:
            # force f = I b + V x* (I V); I [l; w] = [m l - h x w; h x l + Io w]
            h0, h1, h2 = W[i, 13], W[i, 14], W[i, 15]
            ia0 = m * b0 - (h1 * b5 - h2 * b4)
            ia1 = m * b1 - (h2 * b3 - h0 * b5)
            ia2 = m * b2 - (h0 * b4 - h1 * b3)
            ia3 = h1 * b2 - h2 * b1 + W[i, 16] * b3 + W[i, 17] * b4 + W[i, 18] * b5
            ia4 = h2 * b0 - h0 * b2 + W[i, 19] * b3 + W[i, 20] * b4 + W[i, 21] * b5
            ia5 = h0 * b1 - h1 * b0 + W[i, 22] * b3 + W[i, 23] * b4 + W[i, 24] * b5
            iv0 = m * lv0 - (h1 * av2 - h2 * av1)
            iv1 = m * lv1 - (h2 * av0 - h0 * av2)
            iv2 = m * lv2 - (h0 * av1 - h1 * av0)
            iv3 = h1 * lv2 - h2 * lv1 + W[i, 16] * av0 + W[i, 17] * av1 + W[i, 18] * av2
            iv4 = h2 * lv0 - h0 * lv2 + W[i, 19] * av0 + W[i, 20] * av1 + W[i, 21] * av2
            iv5 = h0 * lv1 - h1 * lv0 + W[i, 22] * av0 + W[i, 23] * av1 + W[i, 24] * av2
            W[i, 6] = ia0 + av1 * iv2 - av2 * iv1
            W[i, 7] = ia1 + av2 * iv0 - av0 * iv2
            W[i, 8] = ia2 + av0 * iv1 - av1 * iv0
            W[i, 9] = ia3 + av1 * iv5 - av2 * iv4 + lv1 * iv2 - lv2 * iv1
            W[i, 10] = ia4 + av2 * iv3 - av0 * iv5 + lv2 * iv0 - lv0 * iv2
            W[i, 11] = ia5 + av0 * iv4 - av1 * iv3 + lv0 * iv1 - lv1 * iv0
    if need_m:
        for i in range(n):
            for j in range(n):
                M[i, j] = 0.0
    # backward pass: joint forces (rnea) and composite inertias (crba)
    for i in range(n - 1, -1, -1):
        s0, s1, s2, s3, s4, s5 = J[0, i], J[1, i], J[2, i], J[3, i], J[4, i], J[5, i]
        par = ji[i, 0]
        if rnea:
            nle[i] = (s0 * W[i, 6] + s1 * W[i, 7] + s2 * W[i, 8] + s3 * W[i, 9]
                      + s4 * W[i, 10] + s5 * W[i, 11])
            if par >= 0:
                for a in range(6, 12):
                    W[par, a] += W[i, a]
        if need_m:
            m = W[i, 12]
            h0, h1, h2 = W[i, 13], W[i, 14], W[i, 15]
            f0 = m * s0 - (h1 * s5 - h2 * s4)
            f1 = m * s1 - (h2 * s3 - h0 * s5)
            f2 = m * s2 - (h0 * s4 - h1 * s3)
            f3 = h1 * s2 - h2 * s1 + W[i, 16] * s3 + W[i, 17] * s4 + W[i, 18] * s5
            f4 = h2 * s0 - h0 * s2 + W[i, 19] * s3 + W[i, 20] * s4 + W[i, 21] * s5
            f5 = h0 * s1 - h1 * s0 + W[i, 22] * s3 + W[i, 23] * s4 + W[i, 24] * s5
            j = i
            while j >= 0:
                sm = (J[0, j] * f0 + J[1, j] * f1 + J[2, j] * f2 + J[3, j] * f3 + J[4, j] * f4
                      + J[5, j] * f5)
                M[i, j] = sm
                M[j, i] = sm
                j = ji[j, 0]
            if par >= 0:
                for a in range(12, 25):
                    W[par, a] += W[i, a]
    _frames(X, fi, ff, H)
    return pot


def _frames(X, fi, ff, H):  # pragma: no cover - numba
    """The closure frames' world placements ``H`` from their joints' ``X`` (see :func:`_terms`)."""
    for s in range(fi.shape[0]):
        jp = fi[s]
        if jp < 0:
            continue
        for a in range(3):
            sp = X[jp, 9 + a]
            for b in range(3):
                H[s, a, b] = (X[jp, 3 * a] * ff[s, b] + X[jp, 3 * a + 1] * ff[s, 3 + b]
                              + X[jp, 3 * a + 2] * ff[s, 6 + b])
                sp += X[jp, 3 * a + b] * ff[s, 9 + b]
            H[s, a, 3] = sp


def _terms_planar(q, v, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, need_m,
                  W):  # pragma: no cover - numba
    """:func:`_terms` of a tree that moves in the world x-y plane (:func:`planar_tree`): the
    recursions of :mod:`~multibody_dynamics.fast_planar` on the three in-plane components
    ``(l_x, l_y, w_z)`` (about a fifth of the arithmetic), read from the same ``jf``, with the
    same outputs: ``M``, ``nle``, ``J`` and ``dJ`` (out-of-plane rows zero, as :func:`_terms`
    gives them for such a tree), ``X`` (rotations about z; positions with their constant z),
    ``H`` and the gravity potential energy (with its z part).  ``W`` (n, >= 20) work space:
    axis S (4-6), velocity (7-9), bias acceleration (10, 11), force (13-15), inertia at the
    origin (16-19: m, m c_x, m c_y, I_zz + m |c_xy|^2; composite after the backward pass)."""
    n = ji.shape[0]
    pot = 0.0
    rnea = need_m != 2
    for i in range(n):
        par = ji[i, 0]
        if par < 0:
            cp, spn, px, py, pz = 1.0, 0.0, 0.0, 0.0, 0.0
            v0, v1, v2 = 0.0, 0.0, 0.0
            b0, b1 = -g[0], -g[1]
        else:
            cp, spn, px, py, pz = X[par, 0], X[par, 3], X[par, 9], X[par, 10], X[par, 11]
            v0, v1, v2 = W[par, 7], W[par, 8], W[par, 9]
            b0, b1 = W[par, 10], W[par, 11]
        # placement: a rotation about z (cos R_00, sin R_10) and a translation
        c0 = cp * jf[i, 3] - spn * jf[i, 6]
        s0 = spn * jf[i, 3] + cp * jf[i, 6]
        x0 = px + cp * jf[i, 12] - spn * jf[i, 13]
        x1 = py + spn * jf[i, 12] + cp * jf[i, 13]
        z = pz + jf[i, 14]
        qi = q[i]
        if ji[i, 1] == 0:  # revolute about (0, 0, sig)
            sig = 1.0 if jf[i, 2] > 0.0 else -1.0
            cq, sq = np.cos(qi), sig * np.sin(qi)
            c, s = c0 * cq - s0 * sq, s0 * cq + c0 * sq
            S0, S1, S2 = sig * x1, -sig * x0, sig
        else:  # prismatic along the in-plane w = R0 k
            w0 = c0 * jf[i, 0] - s0 * jf[i, 1]
            w1 = s0 * jf[i, 0] + c0 * jf[i, 1]
            c, s = c0, s0
            x0 += w0 * qi
            x1 += w1 * qi
            S0, S1, S2 = w0, w1, 0.0
        X[i, 0], X[i, 1], X[i, 2], X[i, 3], X[i, 4], X[i, 5] = c, -s, 0.0, s, c, 0.0
        X[i, 6], X[i, 7], X[i, 8], X[i, 9], X[i, 10], X[i, 11] = 0.0, 0.0, 1.0, x0, x1, z
        J[0, i], J[1, i], J[2, i], J[3, i], J[4, i], J[5, i] = S0, S1, 0.0, 0.0, 0.0, S2
        W[i, 4], W[i, 5], W[i, 6] = S0, S1, S2
        m = jf[i, 15]
        cx = x0 + c * jf[i, 16] - s * jf[i, 17]
        cy = x1 + s * jf[i, 16] + c * jf[i, 17]
        pot -= m * (g[0] * cx + g[1] * cy + g[2] * (z + jf[i, 18]))
        h0, h1 = m * cx, m * cy
        W[i, 16], W[i, 17], W[i, 18] = m, h0, h1
        W[i, 19] = jf[i, 27] + m * (cx * cx + cy * cy)
        if rnea:
            # velocity, dS = V x S, bias acceleration (gravity as a base acceleration)
            vi = v[i]
            v0 += S0 * vi
            v1 += S1 * vi
            v2 += S2 * vi
            d0 = -v2 * S1 + v1 * S2
            d1 = v2 * S0 - v0 * S2
            dJ[0, i], dJ[1, i], dJ[2, i], dJ[3, i], dJ[4, i], dJ[5, i] = d0, d1, 0.0, 0.0, \
                0.0, 0.0
            b0 += d0 * vi
            b1 += d1 * vi
            W[i, 7], W[i, 8], W[i, 9], W[i, 10], W[i, 11] = v0, v1, v2, b0, b1
            # force f = I b + V x* (I V)
            iv0 = m * v0 - h1 * v2
            iv1 = m * v1 + h0 * v2
            W[i, 13] = m * b0 - v2 * iv1
            W[i, 14] = m * b1 + v2 * iv0
            W[i, 15] = h0 * b1 - h1 * b0 + v0 * iv1 - v1 * iv0
    _planar_backward(ji, W, M, nle, ji[:0, 0], need_m)  # (every joint)
    _frames(X, fi, ff, H)
    return pot


def _abi_factor(ji, J, W, IA, U, D):  # pragma: no cover - numba
    """Articulated-body inertias of the tree, tips to root (Featherstone 2008 Sect. 7.3;
    Yesiloglu 2007 (3.1)-(3.2), (3.14), the factor ``D`` of (3.34)/(3.38)), in world
    coordinates at the world origin (so no transforms between bodies): ``IA_i = I_i + sum over
    children c of (IA_c - U_c U_c^T / D_c)``, ``U_i = IA_i S_i``, ``D_i = S_i^T U_i``.  ``W`` as
    left by :func:`_terms` with ``need_m = 0`` (body inertias at the origin in columns 12-24);
    ``IA`` (n, 6, 6), ``U`` (n, 6), ``D`` (n,) outputs.  False if a ``D_i`` is not positive
    (M not positive definite)."""
    n = ji.shape[0]
    for i in range(n):
        m = W[i, 12]
        h0, h1, h2 = W[i, 13], W[i, 14], W[i, 15]
        for a in range(6):
            for b in range(6):
                IA[i, a, b] = 0.0
        IA[i, 0, 0] = m  # [m 1, -[h]x; [h]x, I_o] (force = [linear; angular])
        IA[i, 1, 1] = m
        IA[i, 2, 2] = m
        IA[i, 0, 4], IA[i, 0, 5], IA[i, 1, 3] = h2, -h1, -h2
        IA[i, 1, 5], IA[i, 2, 3], IA[i, 2, 4] = h0, h1, -h0
        IA[i, 3, 1], IA[i, 3, 2], IA[i, 4, 0] = -h2, h1, h2
        IA[i, 4, 2], IA[i, 5, 0], IA[i, 5, 1] = -h0, -h1, h0
        for a in range(3):
            for b in range(3):
                IA[i, 3 + a, 3 + b] = W[i, 16 + 3 * a + b]
    for i in range(n - 1, -1, -1):  # children have larger indices than their parents
        d = 0.0
        for a in range(6):
            sm = 0.0
            for b in range(6):
                sm += IA[i, a, b] * J[b, i]
            U[i, a] = sm
            d += J[a, i] * sm
        if not d > 0.0:
            return False
        D[i] = d
        p = ji[i, 0]
        if p >= 0:
            for a in range(6):
                ua = U[i, a] / d
                for b in range(6):
                    IA[p, a, b] += IA[i, a, b] - ua * U[i, b]
    return True


def _abi_solve(ji, J, U, D, Rt, Xt, k, P):  # pragma: no cover - numba
    """Rows ``Xt[:k] = (M^-1 Rt[:k]^T)^T`` from the factors of :func:`_abi_factor`: the two
    sweeps of the articulated-body algorithm at zero velocity without gravity, i.e. of
    ``M^-1 = (I - K Psi H) D^-1 (I - K Psi H)^T`` (Yesiloglu 2007 (3.38)), for k right-hand
    sides at once, O(n k).  ``P`` (n, 6, k) scratch: bias forces, then accelerations."""
    n = ji.shape[0]
    for i in range(n):
        for a in range(6):
            for c in range(k):
                P[i, a, c] = 0.0
    for i in range(n - 1, -1, -1):  # u_i = x_i - S_i^T p_i; p_parent += p_i + U_i u_i / D_i
        p = ji[i, 0]
        for c in range(k):
            u = Rt[c, i]
            for a in range(6):
                u -= J[a, i] * P[i, a, c]
            Xt[c, i] = u
            if p >= 0:
                ud = u / D[i]
                for a in range(6):
                    P[p, a, c] += P[i, a, c] + U[i, a] * ud
    for i in range(n):  # qdd_i = (u_i - U_i^T a_parent) / D_i; a_i = a_parent + S_i qdd_i
        p = ji[i, 0]
        for c in range(k):
            sm = Xt[c, i]
            if p >= 0:
                for a in range(6):
                    sm -= U[i, a] * P[p, a, c]
            qdd = sm / D[i]
            Xt[c, i] = qdd
            for a in range(6):
                P[i, a, c] = (P[p, a, c] if p >= 0 else 0.0) + J[a, i] * qdd


#: :func:`_tree_fd` solves with ``M`` by a dense Cholesky (``M`` from the composite-rigid-body
#: pass of :func:`_terms`) up to this many joints, by articulated-body sweeps above: one call on
#: the shipped loops (2-4 joints) took 2.5 us of arithmetic with the sweeps (6 x 6 articulated
#: inertias per body) against 1.4 us dense (CPU time, four_bar)
TREE_FD_DENSE_MAX_N = 8


def _tree_fd_size(n, m, nf):
    """Length of the float buffer of :func:`_tree_fd` for n joints, m closure rows, nf frames."""
    return (16 * nf + 102 * n + 6 * n * (m + 1) + m * n + 2 * (m + 1) * n + m * m + 2 * m
            + m * m + 2 * m + 72 + n * m + m * m + m + 2 * n * n)


def _tree_fd(q, v, tau, ic, fc, par, buf):  # pragma: no cover - numba
    """Constrained direct dynamics of :class:`~multibody_dynamics.projection.ProjectedDynamics`
    in O(n m + m^3): :func:`_terms` without M (kinematics, J, dJ, frames, h by RNEA), the closure
    rows and their SVD, then the Gauss form of Aghili (2005) eq. 22 (projection.py's
    ``_gauss_combine``) with ``M^-1 f`` and ``M^-1 V_r`` from one articulated-body factorization
    and r + 1 solves (up to :data:`TREE_FD_DENSE_MAX_N` joints: from M and its Cholesky).
    The constant arrays of :func:`_terms` and of the closure rows come packed
    (a call from Python checks each argument: 7 instead of 13): ``ic`` = [nf, nc, ji, fi, cl]
    (integers, flattened), ``fc`` = [jf, g, ff, cf]; ``buf`` (:func:`_tree_fd_size`) holds the
    frame placements H first (frames on the universe set once), then the work arrays.
    Returns ``(out, rank, residual)``, ``out = [a, f_c, lam]``."""
    n = q.shape[0]
    nf, nc = ic[0], ic[1]
    ji = ic[2:2 + 2 * n].reshape((n, 2))
    fi = ic[2 + 2 * n:2 + 2 * n + nf]
    cl = ic[2 + 2 * n + nf:2 + 2 * n + nf + 7 * nc].reshape((nc, 7))  # with closure_flags
    jf = fc[:28 * n].reshape((n, 28))
    g = fc[28 * n:28 * n + 3]
    o = 28 * n + 3
    ff = fc[o:o + 12 * nf].reshape((nf, 12))
    o += 12 * nf
    cf = fc[o:o + nc * (90 + n)].reshape((nc, 90 + n))
    m = cl[0, 5]
    H = buf[:16 * nf].reshape((nf, 4, 4))
    w = buf[16 * nf:]
    nle = w[:n]
    J = w[n:7 * n].reshape((6, n))
    dJ = w[7 * n:13 * n].reshape((6, n))
    X = w[13 * n:25 * n].reshape((n, 12))
    W = w[25 * n:59 * n].reshape((n, 34))
    IA = w[59 * n:95 * n].reshape((n, 6, 6))
    U = w[95 * n:101 * n].reshape((n, 6))
    D = w[101 * n:102 * n]
    o = 102 * n
    P = w[o:o + 6 * n * (m + 1)].reshape((n, 6, m + 1))
    o += 6 * n * (m + 1)
    A = w[o:o + m * n].reshape((m, n))
    o += m * n
    Rt = w[o:o + (m + 1) * n].reshape((m + 1, n))
    o += (m + 1) * n
    Xt = w[o:o + (m + 1) * n].reshape((m + 1, n))
    o += (m + 1) * n
    Ul = w[o:o + m * m].reshape((m, m))
    o += m * m
    gamma = w[o:o + m]
    c = w[o + m:o + 2 * m]
    o += 2 * m
    wc = w[o:o + m * m + 2 * m]  # _gauss_combine's scratch
    o += m * m + 2 * m
    wb = w[o:o + 72 + n * m + m * m + m]  # _constraint_basis's scratch
    o += 72 + n * m + m * m + m
    dense = n <= TREE_FD_DENSE_MAX_N
    M = w[o:o + n * n].reshape((n, n))
    L = w[o + n * n:o + 2 * n * n].reshape((n, n))
    _terms(q, v, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, 1 if dense else 0, W)
    out = np.empty(2 * n + m)
    for i in range(n):
        Rt[0, i] = tau[i] - nle[i]
    r = _constraint_basis(v, J, dJ, H, cl, cf, par, A, gamma, Rt[1:], c, Ul, wb)
    if dense and _chol(M, L, n):
        for i in range(r + 1):
            _chol_solve(L, Rt, i, Xt, i, n)
    elif not dense and _abi_factor(ji, J, W, IA, U, D):
        _abi_solve(ji, J, U, D, Rt, Xt, r + 1, P)
    else:
        for i in range(r + 1):
            for k in range(n):
                Xt[i, k] = np.nan
    return out, r, _gauss_combine(Xt, Rt, c, Ul, A, gamma, r, out, wc)


def _closure_residual(H, cl, cf, lphi, phi):  # pragma: no cover - numba
    """``phi`` (m,) of the closures (constraints.py: ``D R_b^T (p_a - p_b)`` and
    ``L_phi vec(R_b^T R_a)``); returns ``max |phi|`` (inf if not finite)."""
    err = 0.0
    for c in range(cl.shape[0]):
        ia, ib, o, kp, nrot = cl[c, 0], cl[c, 1], cl[c, 2], cl[c, 3], cl[c, 4]
        # d = R_b^T (p_a - p_b) in scalars (an array allocated per call cost as much as phi)
        e0, e1 = H[ia, 0, 3] - H[ib, 0, 3], H[ia, 1, 3] - H[ib, 1, 3]
        e2 = H[ia, 2, 3] - H[ib, 2, 3]
        d0 = 0.0 + H[ib, 0, 0] * e0 + H[ib, 1, 0] * e1 + H[ib, 2, 0] * e2
        d1 = 0.0 + H[ib, 0, 1] * e0 + H[ib, 1, 1] * e1 + H[ib, 2, 1] * e2
        d2 = 0.0 + H[ib, 0, 2] * e0 + H[ib, 1, 2] * e1 + H[ib, 2, 2] * e2
        for r in range(kp):
            phi[o + r] = cf[c, 3 * r] * d0 + cf[c, 3 * r + 1] * d1 + cf[c, 3 * r + 2] * d2
        for r in range(nrot):
            sm = 0.0
            for a in range(3):
                for b in range(3):
                    Rab = H[ib, 0, a] * H[ia, 0, b] + H[ib, 1, a] * H[ia, 1, b] + \
                        H[ib, 2, a] * H[ia, 2, b]
                    sm += lphi[c, 9 * r + 3 * a + b] * Rab
            phi[o + kp + r] = sm
    for k in range(phi.shape[0]):
        x = abs(phi[k])
        if not x <= err:  # NaN too
            err = x if x == x else np.inf
    return err


def _small_solve(K, Lk, rhs, x, r):  # pragma: no cover - numba
    """x[0] = K^-1 rhs[0] for the leading r x r block of the symmetric K: Cholesky (returns 1,
    ``Lk`` its factor), or LU on a copy of that block (in the storage of ``Lk``, whose
    factorization failed) when K is not numerically positive definite (returns 2); 0 if
    singular (x untouched).  No allocation (the step loop that calls it runs without numba's
    reference counting, :func:`_compiled`); on the LU path ``rhs[0, :r]`` is overwritten."""
    if _chol(K, Lk, r):
        _chol_solve(Lk, rhs, 0, x, 0, r)
        return 1
    Kc = Lk.reshape(Lk.size)[:r * r].reshape((r, r))
    for i in range(r):
        for j in range(r):
            Kc[i, j] = K[i, j]
    return 2 if _gauss_solve(Kc, rhs[0, :r], x[0, :r], 0.0) else 0


def _svd(A, mz, bbuf, Qw, sv, order, Vt, qbuf, rows, par):  # pragma: no cover - numba
    """SVD of ``A`` (m, n), whose rows ``rows[:mz]`` are those not exactly zero
    (:func:`~multibody_dynamics.projection._nonzero_rows`), by one-sided Jacobi on ``A^T``
    (projection.py's ``_jacobi_columns``, accurate to eps * sigma_max as LAPACK), in the work
    arrays (``wk`` 8, 10-14, 27, 28; passed one by one: the whole tuple into an inlined
    function cost about 50 ns a call, measured):
    ``Vt`` (rows: the right singular vectors of the retained directions, decreasing sigma), ``Q``
    (left vectors, columns), ``sv``, ``order``.  Rank decision of Aghili (2005) eq. 70 as
    :func:`null_space_projector`: ``sigma > max(rank_atol, rank_rtol sigma_max)``.  Returns the
    rank."""
    m, n = A.shape
    if m == 0:
        return 0
    # rows that are exactly zero (directions a closure type fixes in 3-D but a planar mechanism
    # never moves, e.g. 3 of a revolute closure's 5 rows) have zero singular values: the Jacobi
    # sweeps run on the others only
    # projection.py's _jacobi_nonzero_rows with the views cut by _cut (its slices and reshapes
    # cost about as much as the sweeps on the shipped loops), its parts inlined
    Qc = _cut(qbuf, 0, (mz, mz))
    Bw = _cut(bbuf, 0, (n, mz))
    _jacobi_rows(A, rows, mz, Bw, Qc, sv)
    for i in range(m):
        for j in range(m):
            Qw[i, j] = 0.0
    for j in range(m):
        order[j] = j
        if j < mz:
            for c in range(mz):
                Qw[rows[c], j] = Qc[c, j]
        else:
            sv[j] = 0.0
    for i in range(m):  # selection sort, decreasing
        best = i
        for j in range(i + 1, m):
            if sv[order[j]] > sv[order[best]]:
                best = j
        tmp = order[i]
        order[i] = order[best]
        order[best] = tmp
    tol = par[1] * sv[order[0]]
    if tol < par[0]:
        tol = par[0]
    r = 0
    for i in range(m):
        j = order[i]
        if sv[j] > tol:
            for k in range(n):
                Vt[r, k] = Bw[k, j] / sv[j]
            r += 1
    return r


#: the closure rows serve as their own basis (:func:`_basis`) when ``cond(A_z)^2`` is below
#: this bound, ``A_z`` the rows that are not exactly zero: the Gauss-form matrix ``A_z M^-1
#: A_z^T`` then loses at most about 6 digits more than with the singular vectors (``cond(M)``
#: the same in both), and any rank decision of eq. 70 with thresholds below ``sigma_min``
#: keeps every row; worse-conditioned or redundant rows take the SVD
DIRECT_COND2 = 1e6


def _basis(A, wk, par):  # pragma: no cover - numba
    """A basis of the row space of ``A`` (m, n) for the Gauss form: ``Vt[:r]`` its rows (``B^T``)
    and ``Ub`` (m, r) with ``B^T C v = -Ub^T gamma`` and ``lam = Ub mu`` (:func:`_fd_closed`).

    When the rows of A that are not exactly zero (``A_z``, mz of them) are independent with
    margin, they are the basis (``B = A_z^T``, ``Ub`` the columns of the identity that pick
    them): their Gram matrix ``G = A_z A_z^T`` and its Cholesky factor (in ``Qw``) cost a few
    products where the Jacobi SVD costs sweeps and a sort.  The test is rigorous:
    ``lambda_min(G) >= 1 / ||L^-1||_F^2`` and ``lambda_max(G) <= trace(G)``, so ``sigma_min(A)``
    is above ``rank_atol`` and ``rank_rtol sigma_max`` (every row retained by eq. 70, as the
    SVD would) and ``cond(A_z)^2 <= DIRECT_COND2``.  Otherwise (redundant or nearly redundant
    rows, a singular configuration) the SVD of :func:`_svd` with its rank decision:
    ``Vt[:r] = V_r^T``, ``Ub = U_r S_r^-1``.  Returns ``(r, direct)``."""
    Qw, sv, order, Vt, K, Lk, rows, Ub = wk[11], wk[12], wk[13], wk[14], wk[16], wk[17], \
        wk[28], wk[34]
    m, n = A.shape
    mz = _nonzero_rows(A, rows)
    if mz == 0:
        return 0, True
    tr = 0.0
    for i in range(mz):
        for j in range(i + 1):
            sm = 0.0
            for k in range(n):
                sm += A[rows[i], k] * A[rows[j], k]
            K[i, j] = sm
            K[j, i] = sm
        tr += K[i, i]
    if _chol(K, Qw, mz):
        fro = 0.0  # ||L^-1||_F^2, column by column (forward substitution, row 0 of Lk)
        for j in range(mz):
            for i in range(j, mz):
                sm = 1.0 if i == j else 0.0
                for k in range(j, i):
                    sm -= Qw[i, k] * Lk[0, k]
                y = sm / Qw[i, i]
                Lk[0, i] = y
                fro += y * y
        lo = 1.0 / fro
        if fro * tr <= DIRECT_COND2 and lo > par[0] * par[0] and lo > par[1] * par[1] * tr:
            for ii in range(mz):
                for k in range(n):
                    Vt[ii, k] = A[rows[ii], k]
                for l2 in range(m):
                    Ub[l2, ii] = 0.0
                Ub[rows[ii], ii] = 1.0
            return mz, True
    r = _svd(A, mz, wk[10], Qw, sv, order, Vt, wk[27], rows, par)
    for ii in range(r):
        j = order[ii]
        for l2 in range(m):
            Ub[l2, ii] = Qw[l2, j] / sv[j]
    return r, False


def _applied(q, v, tau, spring, f):  # pragma: no cover - numba
    """``f = tau + tau_s`` with the springs and dampers ``tau_s = -K (q - q_rest) - D v``."""
    for i in range(q.shape[0]):
        f[i] = tau[i] - spring[0, i] * (q[i] - spring[2, i]) - spring[1, i] * v[i]


def _fd_closed(q, v, tau, mdl, wk, par, a, want_lam, rk):  # pragma: no cover - numba
    """Constrained accelerations ``a`` at (q, v) under tau, in O(n^3 + m^3) by Gauss's form.

    Aghili's eq. 22 with any of the mass matrices of eqs. 24, 27, 29 has the unique solution
    with ``(I - P) a = C v`` and ``P (M a - f) = 0`` (substitute: each reduces to its right-hand
    side; Theorem 2 makes the matrix non-singular).  With ``B`` (n, r) a basis of the row space
    of A (``I - P = B (B^T B)^-1 B^T``; :func:`_basis`: the retained right singular vectors
    ``V_r`` or the closure rows themselves) that is ``a = M^-1 (f + B mu)``, ``B^T a = B^T C
    v``, i.e. ``(B^T M^-1 B) mu = B^T C v - B^T M^-1 f`` with ``C v = -A^+ gamma`` (eq. 16),
    ``B^T C v = -Ub^T gamma``; one Cholesky of M (shared with the velocity projection) and one
    of an r x r matrix.  Multipliers (with ``want_lam``, into wk[24]): ``f_c = B mu`` (eq. 32),
    ``lam = (A^+)^T f_c = Ub mu``.
    ``rk`` >= 0: (q, v) is the state :func:`_project` just left and ``M``, its Cholesky factor
    and the basis of ``A`` (of rank ``rk``) in ``wk`` are those at this q, and so are ``Yt =
    (M^-1 B)^T`` and the Cholesky factor ``Lk`` of ``B^T M^-1 B`` of its velocity projection
    (none depends on v): the tree terms skip ``M`` (:func:`_terms` with ``need_m = 0``), the
    basis and the three factorizations are not repeated (same arithmetic on the same numbers:
    bit-identical); -1 computes them.
    Returns ``(rank, gravity potential energy)``; NaN accelerations if M is not positive definite.
    """
    ji, jf, g, fi, ff, cl, cf, lphi, spring = mdl
    M, nle, J, dJ, H, X, L, W = wk[0], wk[1], wk[2], wk[3], wk[4], wk[5], wk[6], wk[7]
    A, gam, Vt, Yt, K, Lk, Ub = wk[8], wk[9], wk[14], wk[15], wk[16], wk[17], wk[34]
    cvec, mu, ws, f, tmp, lam = wk[18], wk[19], wk[20], wk[21], wk[22], wk[24]
    n = q.shape[0]
    m = gam.shape[0]
    _applied(q, v, tau, spring, f)
    # need_m an int64, not a literal, at every call of the step (numba compiles a callee once
    # per literal argument value: one compiled _terms instead of three)
    if par[4] != 0.0:  # a planar tree
        pot = _terms_planar(q, v, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, 1 if rk < 0 else 0, W)
    else:
        pot = _terms(q, v, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, 1 if rk < 0 else 0, W)
    for i in range(n):
        f[i] -= nle[i]
    r = 0
    if m:
        _closure_rows(v, J, dJ, H, cl, cf, A, gam, ws)
        r = _basis(A, wk, par)[0] if rk < 0 else rk
    if rk < 0 and not _chol(M, L, n):
        for i in range(n):
            a[i] = np.nan
        return r, pot
    for i in range(n):
        tmp[0, i] = f[i]
    _chol_solve(L, tmp, 0, tmp, 1, n)
    for i in range(n):
        a[i] = tmp[1, i]
    if r == 0:
        if want_lam:
            for i in range(m):
                lam[i] = 0.0
        return r, pot
    for ii in range(r):
        if rk < 0:
            _chol_solve(L, Vt, ii, Yt, ii, n)
        sm = 0.0
        for l2 in range(m):
            sm -= Ub[l2, ii] * gam[l2]  # B^T C v
        for k in range(n):
            sm -= Vt[ii, k] * a[k]
        cvec[0, ii] = sm
    if rk >= 0:  # Yt = M^-1 B, K = B^T Yt and its Cholesky factor Lk: those of _project
        _chol_solve(Lk, cvec, 0, mu, 0, r)
    else:
        for i1 in range(r):
            for i2 in range(r):
                sm = 0.0
                for k in range(n):
                    sm += Vt[i1, k] * Yt[i2, k]
                K[i1, i2] = sm
        if not _small_solve(K, Lk, cvec, mu, r):
            for i in range(n):
                a[i] = np.nan
            return r, pot
    for ii in range(r):
        for k in range(n):
            a[k] += Yt[ii, k] * mu[0, ii]
    if want_lam:
        for l2 in range(m):
            sm = 0.0
            for ii in range(r):
                sm += Ub[l2, ii] * mu[0, ii]
            lam[l2] = sm
    return r, pot


def _accel(q, v, tau, mdl, wk, par, a):  # pragma: no cover - numba
    """Accelerations ``a`` (nv,) of an open tree at (q, v) under tau (springs and dampers
    added); NaN on failure (closed loops: :func:`_fd_closed`).  ``mdl`` = (ji, jf, g, fi, ff,
    cl, cf, lphi, spring (3, n): K, D, q_rest).  Returns the gravity potential energy."""
    ji, jf, g, fi, ff, cl, cf, lphi, spring = mdl
    M, nle, J, dJ, H, X, L, W, f = wk[0], wk[1], wk[2], wk[3], wk[4], wk[5], wk[6], wk[7], wk[21]
    n = q.shape[0]
    _applied(q, v, tau, spring, f)
    if par[4] != 0.0:  # a planar tree (int64 need_m: as there)
        pot = _terms_planar(q, v, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, n * 0 + 1, W)
    else:
        pot = _terms(q, v, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, n * 0 + 1, W)
    if not _chol(M, L, n):
        for i in range(n):
            a[i] = np.nan
        return pot
    tmp = wk[22]
    for i in range(n):
        tmp[0, i] = f[i] - nle[i]
    _chol_solve(L, tmp, 0, tmp, 1, n)
    for i in range(n):
        a[i] = tmp[1, i]
    return pot


def _project(q, v, mdl, wk, par, sp):  # pragma: no cover - numba
    """Newton projection of q onto phi = 0 (Aghili 2005 eq. 39: ``q <- q - A^+ phi``, skipped
    when the residual is already below tolerance and the step ``A^+ phi`` below ``sp[4]``,
    else once more at most when the residual is), then v onto null(A) in the mass metric
    (``v <- v - M^-1 B (B^T M^-1 B)^-1 B^T v``), with the SVD of A and the Cholesky of M at the
    final q.  In place; returns (ok, iterations, residual, rank): the rank of ``A`` at the final
    q when ``M``, its Cholesky factor, the SVD, ``Yt`` and the Cholesky factor ``Lk`` left in
    ``wk`` serve :func:`_fd_closed` at the new state (velocity projected, rank > 0, ``B^T M^-1
    B`` positive definite), else -1."""
    ji, jf, g, fi, ff, cl, cf, lphi, spring = mdl
    M, nle, J, dJ, H, X, L, W = wk[0], wk[1], wk[2], wk[3], wk[4], wk[5], wk[6], wk[7]
    A, gam, Qw, Vt, Yt, K, Lk, Ub = wk[8], wk[9], wk[11], wk[14], wk[15], wk[16], wk[17], wk[34]
    cvec, mu, ws, phi, zero, rows = wk[18], wk[19], wk[20], wk[23], wk[25], wk[28]
    n = q.shape[0]
    m = phi.shape[0]
    tol, max_iter, project_v = sp[1], int(sp[2]), sp[5] != 0.0
    dq = wk[22][0]
    nobias = _cut(gam, 0, 0)
    it = 0
    polished = False
    while True:
        if par[4] != 0.0:  # a planar tree (int64 need_m, as there)
            _terms_planar(q, zero, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, n * 0 + 2, W)
        else:
            _terms(q, zero, ji, jf, g, fi, ff, M, nle, J, dJ, H, X, n * 0 + 2, W)
        err = _closure_residual(H, cl, cf, lphi, phi)
        _closure_rows(zero, J, dJ, H, cl, cf, A, nobias, ws)  # A only
        r, direct = _basis(A, wk, par)
        if it >= max_iter or not err < np.inf:
            break
        for k in range(n):
            dq[k] = 0.0
        if direct:  # dq = A^+ phi = A_z^T G^-1 phi_z (G's Cholesky factor in Qw)
            for ii in range(r):
                cvec[0, ii] = phi[rows[ii]]
            _chol_solve(Qw, cvec, 0, mu, 0, r)
        for ii in range(r):  # or dq = A^+ phi = V S^-1 U^T phi = B Ub^T phi
            c = 0.0
            if direct:
                c = mu[0, ii]
            else:
                for l2 in range(m):
                    c += Ub[l2, ii] * phi[l2]
            for k in range(n):
                dq[k] += Vt[ii, k] * c
        if err < tol:
            # phi below tolerance: one more Newton step if q is still ||A^+ phi|| >= sp[4] off
            # the manifold (near a singular configuration ||A^+ phi|| ~ ||phi|| / sigma_min;
            # projection.NEWTON_STEP_FACTOR)
            if polished:
                break
            big = False
            for k in range(n):
                if not abs(dq[k]) < sp[4]:
                    big = True
            if not big:
                break
            polished = True
        for k in range(n):
            q[k] -= dq[k]
        it += 1
    if not err < tol:
        return False, it, err, -1
    if not project_v or r == 0:
        return True, it, err, -1
    for ii in range(r):
        sm = 0.0
        for k in range(n):
            sm += Vt[ii, k] * v[k]
        cvec[0, ii] = sm
    if not _chol(M, L, n):
        return False, it, err, -1
    for ii in range(r):
        _chol_solve(L, Vt, ii, Yt, ii, n)
    for i1 in range(r):
        for i2 in range(r):
            sm = 0.0
            for k in range(n):
                sm += Vt[i1, k] * Yt[i2, k]
            K[i1, i2] = sm
    how = _small_solve(K, Lk, cvec, mu, r)
    if not how:
        return False, it, err, -1
    for ii in range(r):
        for k in range(n):
            v[k] -= Yt[ii, k] * mu[0, ii]
    return True, it, err, r if how == 1 else -1  # Lk the Cholesky factor of K, or not


def _sample(q, v, pot, mdl, wk, closed, res):  # pragma: no cover - numba
    """Energy T + V [J] at (q, v) and for a closed loop ``max |phi|`` and ``max |A v|``, from
    the terms the evaluation of the accelerations at (q, v) left in ``wk`` (``M``, ``H``,
    ``A``) and its gravity potential energy ``pot``; ``res`` >= 0 is ``max |phi|`` at q
    already (the projection that left q computed it last), < 0 computes it."""
    cl, cf, lphi, spring = mdl[5], mdl[6], mdl[7], mdl[8]
    M, H, A, phi = wk[0], wk[4], wk[8], wk[23]
    n = q.shape[0]
    vres = 0.0
    if not closed:
        res = 0.0
    else:
        if res < 0.0:
            res = _closure_residual(H, cl, cf, lphi, phi)
        for i in range(A.shape[0]):
            sm = 0.0
            for k in range(n):
                sm += A[i, k] * v[k]
            if abs(sm) > vres:
                vres = abs(sm)
    e = pot
    for i in range(n):
        dq = q[i] - spring[2, i]
        e += 0.5 * spring[0, i] * dq * dq
        for k in range(n):
            e += 0.5 * v[i] * M[i, k] * v[k]
    return e, res, vres


def _run(q, v, tau, t0, nsteps, every, k0, n_total, mdl, wk, par, sp, closed,
         out_t, out_q, out_v, out_e, out_lam, out_res, out_vres, out_k):  # pragma: no cover
    """``nsteps`` fixed steps from (q, v, t0) with tau held, in place on q and v.

    ``sp`` = [dt, position_tol, max_newton_iter, max_speed, Newton step bound (one more
    iteration below position_tol while ``||A^+ phi||_inf`` reaches it), project_velocity, method
    (0 RK4, 1 semi-implicit Euler)].  Step ``k0 + k`` (global count
    ``n_total``) is recorded into ``out_*[out_k]`` when ``(k0 + k + 1) % every == 0`` or it is
    the last one (``every`` 0: nothing recorded); ``nsteps`` 0 with ``every`` > 0 records the
    state as it is (one sample).  Stops before a step that fails (non-finite
    state, failed projection, speed above max_speed).  Returns (steps done, status, t, samples
    written, Newton iterations, residual after the last projection).  The first evaluation
    after a projection (the next step's first stage, which also gives the output sample at
    that state) reuses the projection's ``M``, factors and basis of ``A`` at the same q
    (:func:`_fd_closed`'s ``rk``; bit-identical).
    """
    n = q.shape[0]
    m = wk[24].shape[0]
    h = sp[0]
    max_speed = sp[3]
    euler = sp[6] != 0.0
    lam = wk[24]
    t = t0
    its = 0
    k_out = out_k
    # stage velocities Vs[s] and accelerations As[s] (Vs[0] = v); one call site each of
    # _fd_closed and _accel, which are inlined (each copy costs compile time: the output
    # sample takes the first stage's evaluation).  Views of the work buffer: five allocations
    # cost 0.7 us, measured, a twelfth of a four_bar step
    Vs, As, qs, qn, vn = wk[29], wk[30], wk[31], wk[32], wk[33]
    err = 0.0
    hh = 0.5 * h
    hs = h / 6.0
    sample_now = nsteps == 0 and every > 0  # a call for one sample of the state as it is
    k = 0
    rk = -1
    while True:
        for i in range(n):
            Vs[0, i] = v[i]
            qs[i] = q[i]
        # the stages of the step; after the last step only the first, for its output sample
        nstage = (1 if euler else 4) if k < nsteps else (1 if sample_now else 0)
        for st in range(nstage):
            if st > 0:  # classical RK4, same operations and order as Simulator._rk4
                c = h if st == 3 else hh
                for i in range(n):
                    qs[i] = q[i] + c * Vs[st - 1, i]
                    Vs[st, i] = v[i] + c * As[st - 1, i]
            if closed:  # (one call site each: inlined)
                pot = _fd_closed(qs, Vs[st], tau, mdl, wk, par, As[st], sample_now and st == 0,
                                 rk if st == 0 else -1)[1]
            else:
                pot = _accel(qs, Vs[st], tau, mdl, wk, par, As[st])
            if st == 0 and sample_now:
                # after a step, the residual at q is the projection's last (err)
                e, res, vres = _sample(q, v, pot, mdl, wk, closed, err if k > 0 else -1.0)
                out_t[k_out] = t
                out_e[k_out] = e
                out_res[k_out] = res
                out_vres[k_out] = vres
                for i in range(n):
                    out_q[k_out, i] = q[i]
                    out_v[k_out, i] = v[i]
                for i in range(m):
                    out_lam[k_out, i] = lam[i]
                k_out += 1
        if k == nsteps:
            break
        if euler:
            for i in range(n):
                vn[i] = v[i] + h * As[0, i]
                qn[i] = q[i] + h * vn[i]
        else:
            for i in range(n):
                qn[i] = q[i] + hs * (v[i] + 2.0 * Vs[1, i] + 2.0 * Vs[2, i] + Vs[3, i])
                vn[i] = v[i] + hs * (As[0, i] + 2.0 * As[1, i] + 2.0 * As[2, i] + As[3, i])
        for i in range(n):
            if not (np.isfinite(qn[i]) and np.isfinite(vn[i])):
                return k, STOPPED, t, k_out, its, err
        if closed:
            ok, it, e2, rk = _project(qn, vn, mdl, wk, par, sp)
            if not ok:
                return k, STOPPED, t, k_out, its, err
            its += it
            err = e2
        for i in range(n):
            if not (np.isfinite(qn[i]) and np.isfinite(vn[i])) or abs(vn[i]) > max_speed:
                return k, STOPPED, t, k_out, its, err
        for i in range(n):
            q[i] = qn[i]
            v[i] = vn[i]
        t = t + h
        k += 1
        kk = k0 + k
        sample_now = every > 0 and (kk % every == 0 or kk == n_total)
    return nsteps, OK, t, k_out, its, err


def _buffer_size(n, m, nf):
    """Length of the float work buffer of :func:`_workspace`."""
    return (2 * n * n + 77 * n + 16 * nf + 5 * m * n + 5 * m * m + 6 * m + 72)


def _workspace(buf, ibuf, n, m, nf):  # pragma: no cover - numba
    """The work arrays of the kernels (indices as used there) as views of one float buffer
    ``buf`` (zeroed once; the frames on the universe placed in ``H`` once) and one integer
    buffer ``ibuf`` (m,): a call from Python then checks two arrays instead of 27."""
    o = 0
    M = _cut(buf, o, (n, n))
    o += n * n
    nle = _cut(buf, o, n)
    o += n
    J = _cut(buf, o, (6, n))
    o += 6 * n
    dJ = _cut(buf, o, (6, n))
    o += 6 * n
    H = _cut(buf, o, (nf, 4, 4))
    o += 16 * nf
    X = _cut(buf, o, (n, 12))
    o += 12 * n
    L = _cut(buf, o, (n, n))
    o += n * n
    W = _cut(buf, o, (n, 34))
    o += 34 * n
    A = _cut(buf, o, (m, n))
    o += m * n
    gam = _cut(buf, o, m)
    o += m
    Bw = _cut(buf, o, n * m)
    o += n * m
    Qw = _cut(buf, o, (m, m))
    o += m * m
    sv = _cut(buf, o, m)
    o += m
    Vt = _cut(buf, o, (m, n))
    o += m * n
    Yt = _cut(buf, o, (m, n))
    o += m * n
    K = _cut(buf, o, (m, m))
    o += m * m
    Lk = _cut(buf, o, (m, m))
    o += m * m
    cvec = _cut(buf, o, (1, m))
    o += m
    mu = _cut(buf, o, (1, m))
    o += m
    ws = _cut(buf, o, 72)
    o += 72
    f = _cut(buf, o, n)
    o += n
    tmp = _cut(buf, o, (2, n))
    o += 2 * n
    phi = _cut(buf, o, m)
    o += m
    lam = _cut(buf, o, m)
    o += m
    zero = _cut(buf, o, n)
    o += n
    acc = _cut(buf, o, n)
    o += n
    qbuf = _cut(buf, o, m * m)
    o += m * m
    Vs = _cut(buf, o, (4, n))  # the step's stages (_run)
    o += 4 * n
    As = _cut(buf, o, (4, n))
    o += 4 * n
    qs = _cut(buf, o, n)
    o += n
    qn = _cut(buf, o, n)
    o += n
    vn = _cut(buf, o, n)
    o += n
    Ub = _cut(buf, o, (m, m))  # _basis
    return (M, nle, J, dJ, H, X, L, W, A, gam, Bw, Qw, sv, _cut(ibuf, 0, m), Vt, Yt, K, Lk,
            cvec, mu, ws, f, tmp, phi, lam, zero, acc, qbuf, _cut(ibuf, m, m), Vs, As, qs, qn,
            vn, Ub)


def _run_entry(q, v, tau, t0, nsteps, every, k0, n_total, ji, jf, g, fi, ff, cl, cf, lphi,
               spring, buf, ibuf, par, sp, closed, out_t, out_q, out_v, out_e, out_lam, out_res,
               out_vres, out_k):  # pragma: no cover - numba
    """:func:`_run` from separate arrays (a call from Python with tuples of arrays costs
    microseconds of argument checks; separate arrays about 60 ns each)."""
    m = cl[0, 5] if closed else 0
    wk = _workspace(buf, ibuf, q.shape[0], m, fi.shape[0])
    return _run(q, v, tau, t0, nsteps, every, k0, n_total,
                (ji, jf, g, fi, ff, cl, cf, lphi, spring), wk, par, sp, closed, out_t, out_q,
                out_v, out_e, out_lam, out_res, out_vres, out_k)


def _step_entry(q, v, tau, t, h, ip, fp):  # pragma: no cover - numba
    """One step of :func:`_run` (nothing recorded) in place on q and v, from the model packed
    in one integer array ``ip`` and one float array ``fp`` (:class:`_Packed`): a call from
    Python then checks 7 arguments instead of 30.
    Returns ``(status, Newton iterations, residual after the projection)``; status
    :data:`BAD_INPUT` (nothing done) when tau holds NaN or inf."""
    n = q.shape[0]
    for i in range(n):
        if not np.isfinite(tau[i]):
            return BAD_INPUT, 0, 0.0
    # views by _cut and _carray (no reference counts, no reshape calls: _make_views)
    q, v, tau = _carray(q), _carray(v), _carray(tau)
    nf, ncl, nlp, m, closed, npar = ip[0], ip[1], ip[2], ip[3], ip[4] != 0, ip[5]
    ncf, nbuf = ip[6], ip[7]
    o = 8
    ji = _cut(ip, o, (n, 2))
    o += 2 * n
    fi = _cut(ip, o, nf)
    o += nf
    cl = _cut(ip, o, (ncl, 7))  # the columns of projection._FastPlan.cl and closure_flags
    o += 7 * ncl
    ibuf = _cut(ip, o, 2 * m)
    o = 0
    jf = _cut(fp, o, (n, 28))
    o += 28 * n
    g = _cut(fp, o, 3)
    o += 3
    ff = _cut(fp, o, (nf, 12))
    o += 12 * nf
    cf = _cut(fp, o, (ncl, ncf))
    o += ncl * ncf
    lphi = _cut(fp, o, (nlp, 27))
    o += 27 * nlp
    spring = _cut(fp, o, (3, n))
    o += 3 * n
    par = _cut(fp, o, npar)
    o += npar
    sp = _cut(fp, o, 7)
    o += 7
    buf = _cut(fp, o, nbuf)
    sp[0] = h
    wk = _workspace(buf, ibuf, n, m, nf)
    zero = nf - nf  # int64 counts, not literals: the signature of _run_entry's call (one
    one = zero + 1  # compiled _run for both entries)
    none1 = _cut(fp, zero, zero)
    none2 = _cut(fp, 0, (zero, n))
    nonelam = _cut(fp, 0, (zero, m))
    out = _run(q, v, tau, t, one, zero, zero, one, (ji, jf, g, fi, ff, cl, cf, lphi, spring),
               wk, par, sp, closed, none1, none2, none2, none1, nonelam, none1, none1, zero)
    return out[1], out[4], out[5]


def _carray(a):  # pragma: no cover - replaced by the compiled version in _compiled()
    """The same 1-D C-contiguous array without its reference count (numba only)."""
    return a


def _cut(buf, o, shape):  # pragma: no cover - replaced by the compiled version in _compiled()
    """The C-contiguous view of ``shape`` at offset ``o`` of the 1-D array ``buf``."""
    return buf[o:o + int(np.prod(shape))].reshape(shape)


def _make_views():
    """The compiled :func:`_carray` and :func:`_cut`: the array structure of a C-contiguous view
    built in place over the data pointer (no reference count, no reshape call, no function
    returning an array, so the step loop compiled without reference counting takes them too: a
    view costs a few instructions; the 60 views of a call cost about 1 us as slices and
    reshapes, measured on four_bar).  Safe where the caller holds the arrays for the call and
    no view leaves it (the kernels return numbers)."""
    import numba
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic
    from numba.np.arrayobj import make_array, populate_array

    @intrinsic
    def view_at(typingctx, buf, off, shape):
        ndim = len(shape) if isinstance(shape, types.BaseTuple) else 1
        retty = types.Array(buf.dtype, ndim, "C")

        def codegen(context, builder, signature, args):
            bty, oty, sty = signature.args
            data = context.make_array(bty)(context, builder, args[0]).data
            ptr = builder.gep(data, [context.cast(builder, args[1], oty, types.intp)])
            if isinstance(sty, types.BaseTuple):
                dims = [context.cast(builder, d, t, types.intp)
                        for d, t in zip(cgutils.unpack_tuple(builder, args[2], len(sty)), sty)]
            else:
                dims = [context.cast(builder, args[2], sty, types.intp)]
            itemsize = context.get_constant(types.intp, context.get_abi_sizeof(
                context.get_data_type(bty.dtype)))
            strides = [itemsize] * ndim
            for k in range(ndim - 2, -1, -1):
                strides[k] = builder.mul(strides[k + 1], dims[k + 1])
            ary = make_array(retty)(context, builder)
            populate_array(ary, data=ptr, shape=dims, strides=strides, itemsize=itemsize,
                           meminfo=None)
            return ary._getvalue()

        return retty(buf, off, shape), codegen

    def carray(a):  # pragma: no cover - numba
        return view_at(a, 0, a.shape[0])

    def cut(buf, o, shape):  # pragma: no cover - numba
        return view_at(buf, o, shape)

    inline = numba.njit(cache=True, nogil=True, inline="always")
    return inline(carray), inline(cut)


_COMPILED = []  # [run] once compiled; [None] without numba
_COMPILED_FD = []  # [_tree_fd] once jitted; [None] without numba


def _compiled():
    """The compiled kernel (:func:`_run_entry`), or None when numba is not installed (one
    entry for runs and samples: each entry compiles the inlined step again; single steps
    call the same compiled :func:`_run` through the thin :func:`_step_entry`)."""
    global _terms, _closure_residual, _chol, _chol_solve, _accel, _project, _sample, _run
    global _closure_rows, _jacobi_columns, _gauss_solve, _svd, _applied, _fd_closed, _small_solve
    global _workspace, _run_entry, _step_entry, _carray, _cut, _nonzero_rows, _jacobi_rows
    global _basis, _frames, _terms_planar, _planar_backward
    if not _COMPILED:
        jit = _proj._numba_jit()
        if jit is None:
            _COMPILED.append(None)
            return None
        _closure_rows, _jacobi_columns, _gauss_solve = (_proj._closure_rows, _proj._jacobi_columns,
                                                        _proj._gauss_solve)
        import numba

        inline = numba.njit(cache=True, nogil=True, inline="always")
        _frames = inline(_frames)
        _planar.planar_terms()  # compiles fast_planar's backward pass (inlined here)
        _planar_backward = _planar._planar_backward
        _terms = jit(_terms)
        # inlined at its three call sites (the stages, the projection, an open chain's
        # accelerations): a call passes its 13 arrays field by field (about 130 words), which
        # cost about a tenth of a four_bar step and a fifth of a slider_crank step (cached
        # kernels, best of 7 in each of 4 processes: 0.91x and 0.82x the step's CPU time,
        # bit-identical states); the price is about 17 s more of the first compilation
        _terms_planar = inline(_terms_planar)
        # the functions that take the tuples of work arrays are inlined into _run: a call
        # passes every array of the tuples (about 1.7 us per call measured on four_bar, more
        # than the dynamics themselves)
        _carray, _cut = _make_views()
        # the kernels of the step without numba's reference counting (see _run) and with
        # numpy's error model: a division by zero gives inf or NaN, which the step's finiteness
        # checks stop on, instead of a test and a Python exception at every division
        lean = numba.njit(cache=True, nogil=True, _nrt=False, error_model="numpy")
        _chol, _chol_solve = inline(_proj._chol.py_func), inline(_proj._chol_solve.py_func)
        _closure_residual = lean(_closure_residual)
        _small_solve = lean(_small_solve)
        # projection.py's row selection and Jacobi sweeps, inlined into _svd (a call costs
        # about as much as the sweeps on the shipped loops)
        _nonzero_rows = inline(_proj._nonzero_rows.py_func)
        _jacobi_rows = inline(_proj._jacobi_rows.py_func)
        _applied = lean(_applied)
        _svd = lean(_svd)
        _basis = inline(_basis)
        _fd_closed = inline(_fd_closed)
        _accel = inline(_accel)
        _project = inline(_project)
        _sample = inline(_sample)
        # the step loop without numba's reference counting: every array it touches is held by
        # its caller for the call (views of the work buffer or the caller's arguments) and
        # nothing in it allocates, so the count updates of the array variables (about 1300
        # call sites in the loop, measured in its LLVM) were pure cost: 0.83x (four_bar) and
        # 0.81x (slider_crank) the CPU time of an RK4 step with them, bit-identical states
        _run = lean(_run)
        _workspace = jit(_workspace)
        _run_entry = jit(_run_entry)
        _step_entry = jit(_step_entry)
        _COMPILED.append(_run_entry)
    return _COMPILED[0]


def _compiled_fd():
    """The compiled :func:`_tree_fd`, or None when numba is not installed."""
    global _abi_factor, _abi_solve, _constraint_basis, _gauss_combine, _tree_fd
    if not _COMPILED_FD:
        if _compiled() is None:  # jits _terms and the shared helpers
            _COMPILED_FD.append(None)
            return None
        jit = _proj._numba_jit()
        _constraint_basis, _gauss_combine = _proj._constraint_basis, _proj._gauss_combine
        _abi_factor = jit(_abi_factor)
        _abi_solve = jit(_abi_solve)
        _tree_fd = jit(_tree_fd)
        _COMPILED_FD.append(_tree_fd)
    return _COMPILED_FD[0]


def compiled_terms():
    """The compiled :func:`_terms` (kinematics, full symmetric mass matrix ``M`` and bias
    forces ``nle`` of a tree packed by :func:`pack_tree`), or None without numba.

    For other compiled kernels that need the dynamics of a tree (e.g. the zero dynamics of a
    design study); their arguments are those of :func:`_terms`, with ``fi`` of length 0 when
    no closure frame is wanted.
    """
    return None if _compiled() is None else _terms


_closure_rows = _proj._closure_rows
_constraint_basis = _proj._constraint_basis
_gauss_combine = _proj._gauss_combine
_jacobi_columns = _proj._jacobi_columns
_nonzero_rows = _proj._nonzero_rows
_jacobi_rows = _proj._jacobi_rows
_gauss_solve = _proj._gauss_solve
_chol = _proj._chol
_chol_solve = _proj._chol_solve
_planar_backward = _planar._planar_backward


# -- model packing ----------------------------------------------------------------------------
def joint_axes(pm: pin.Model) -> list[tuple[int, tuple]] | None:
    """``(kind, axis)`` of every joint of a pinocchio model (kind 0 revolute, 1 prismatic;
    the unit axis in the joint frame), in order, or None when a joint is not a
    one-degree-of-freedom revolute/prismatic joint about a fixed axis or the coordinates are
    not one per joint in joint order (the trees the compiled kernels take)."""
    n = pm.njoints - 1
    if pm.nq != n or pm.nv != n:
        return None
    out = []
    for i in range(n):
        jm = pm.joints[i + 1]
        name = jm.shortname()
        if name in _AXES:
            kind, axis = _AXES[name]
        elif name in ("JointModelRevoluteUnaligned", "JointModelPrismaticUnaligned"):
            kind, axis = int(name.startswith("JointModelPrismatic")), tuple(jm.extract().axis)
        else:
            return None
        if jm.idx_q != i or jm.idx_v != i:
            return None
        out.append((kind, axis))
    return out


def pack_tree(pm: pin.Model):
    """``(ji, jf)`` of :func:`_terms` for a pinocchio model, or None when a joint is not a
    one-degree-of-freedom revolute/prismatic joint about a fixed axis (:func:`joint_axes`)."""
    axes = joint_axes(pm)
    if axes is None:
        return None
    n = len(axes)
    ji = np.zeros((n, 2), np.int64)
    jf = np.zeros((n, 28))
    for i, (kind, axis) in enumerate(axes):
        ji[i] = (pm.parents[i + 1] - 1, kind)
        Xp, Y = pm.jointPlacements[i + 1], pm.inertias[i + 1]
        jf[i, :3] = axis
        jf[i, 3:12] = Xp.rotation.ravel()
        jf[i, 12:15] = Xp.translation
        jf[i, 15] = Y.mass
        jf[i, 16:19] = Y.lever
        jf[i, 19:28] = Y.inertia.ravel()
    return ji, jf


def planar_tree(pm: pin.Model) -> bool:
    """True when the tree moves in the world x-y plane (revolute axes along z, prismatic axes in
    the plane, joint placements rotating about z:
    :func:`~multibody_dynamics.fast_planar.pack_planar`); the step's tree terms are then those
    of :func:`_terms_planar`."""
    return _planar.pack_planar(pm) is not None


def closure_flags(pm: pin.Model, closures, planar: bool | None = None) -> np.ndarray:
    """The flags of :func:`~multibody_dynamics.projection._closure_rows` per closure (its
    ``cl`` column 6): 1 for a planar tree (:func:`planar_tree`; ``planar`` when the caller
    has it), plus 2 when the closure's rotation rows are identically zero in that motion.

    A rotation row of the closure rows is ``s (R_b G)^T J_w``; in planar motion only ``J_w``'s z
    row moves, ``R_b = Rz(theta_b) R_fb`` and ``R = R_b^T R_a = R_fb^T Rz(phi) R_fa`` (``R_f*``
    the frames' rotations in their joints, ``phi`` the relative angle), so the row is ``s c_b^T
    G(R(phi)) J_wz`` with ``c_b`` the third row of ``R_fb``: a combination of 1, cos phi and sin
    phi.  Zero at three distinct angles is zero at every angle; its bias, ``omega_z`` times the
    derivative in phi, vanishes with it."""
    if planar is None:
        planar = planar_tree(pm)
    flags = np.zeros(len(closures), np.int64)
    for i, c in enumerate(closures):
        if not planar:
            continue
        flags[i] = 1
        if not c.n_rot:
            continue
        Ra0 = pm.frames[c.fa].placement.rotation
        Rb0 = pm.frames[c.fb].placement.rotation
        scale = max(1.0, float(np.abs(c.L_g).max()))
        worst = 0.0
        for phi in (0.0, 2.0 * np.pi / 3.0, 4.0 * np.pi / 3.0):
            cz, sz = np.cos(phi), np.sin(phi)
            R = Rb0.T @ np.array([[cz, -sz, 0.0], [sz, cz, 0.0], [0.0, 0.0, 1.0]]) @ Ra0
            G = (c.L_g @ R.ravel()).reshape(c.n_rot, 3)
            worst = max(worst, float(np.abs(G @ Rb0[2]).max()))
        if worst <= 1e-12 * scale:
            flags[i] |= 2
    return flags


class _Packed:
    """The arrays of the kernels for one model and closure set: ``mdl`` (tree, frames, closure
    rows, springs, work buffers), ``par`` (rank thresholds, variant), ``m`` rows."""

    def __init__(self, model, projected, tree):
        pm = model.pin_model
        self.nv = model.nv
        ji, jf = tree
        K = np.asarray(model.stiffness, float) if model.has_springs else np.zeros(self.nv)
        D = np.asarray(model.damping, float) if model.has_springs else np.zeros(self.nv)
        spring = np.vstack([K, D, np.asarray(model.q_rest, float)])
        self.closed = projected is not None
        g = np.array(pm.gravity.linear, float)
        planar = planar_tree(pm)
        if self.closed:
            c = projected.constraints
            plan = _proj._FastPlan(c, pm, pm.createData())
            cl = np.hstack([plan.cl, closure_flags(pm, c._closures, planar)[:, None]])
            cf = plan.cf
            lphi = np.zeros((len(c._closures), 27))
            for i, cc in enumerate(c._closures):
                if cc.n_rot:
                    lphi[i, : 9 * cc.n_rot] = cc.L_phi.ravel()
            frames = sorted({x.fa for x in c._closures} | {x.fb for x in c._closures})
            fi = np.full(len(frames), -1, np.int64)
            ff = np.zeros((len(frames), 12))
            for s, fid in enumerate(frames):
                fr = pm.frames[fid]
                fi[s] = fr.parentJoint - 1
                ff[s, :9] = fr.placement.rotation.ravel()
                ff[s, 9:] = fr.placement.translation
            H0 = plan.H.copy()  # frames on the universe are placed once
            self.par = np.r_[plan.parameters(projected.settings), 0.0]
            self.m = plan.m
        else:
            cl, cf = np.zeros((1, 7), np.int64), np.zeros((1, 90 + self.nv))
            lphi, fi, ff = np.zeros((1, 27)), np.zeros(0, np.int64), np.zeros((0, 12))
            H0 = np.zeros((0, 4, 4))
            self.par = np.zeros(5)
            self.m = 0
        self.par[4] = float(planar)  # the kernels' switch to _terms_planar
        # work buffers: views are cut in the kernel (_workspace); frames on the universe placed
        # once
        buf = np.zeros(_buffer_size(self.nv, self.m, len(fi)))
        o = self.nv * self.nv + 13 * self.nv  # M, nle, J, dJ precede H in the buffer
        buf[o:o + H0.size] = H0.ravel()
        ibuf = np.zeros(2 * self.m, np.int64)
        # everything in one integer and one float array (the layout _step_entry cuts them in);
        # the arrays of the kernels' tuple ``mdl`` are views of them, so both entries share
        # the work buffers
        head = [len(fi), len(cl), len(lphi), self.m, int(self.closed), len(self.par),
                cf.shape[1], len(buf)]
        ints = [np.array(head, np.int64), ji, fi, cl, ibuf]
        floats = [jf, g, ff, cf, lphi, spring, self.par, np.zeros(7), buf]
        self.ip = np.concatenate([a.ravel() for a in ints]).astype(np.int64)
        self.fp = np.concatenate([a.ravel() for a in floats]).astype(float)
        views = []
        for src, arrs in ((self.ip, ints[1:]), (self.fp, floats)):
            o = 8 if src is self.ip else 0
            for a in arrs:
                views.append(src[o:o + a.size].reshape(a.shape))
                o += a.size
        ji, fi, cl, ibuf, jf, g, ff, cf, lphi, spring, self.par, self.sp_step, buf = views
        self.mdl = (ji, jf, g, fi, ff, cl, cf, lphi, spring, buf, ibuf)


class FastStepper:
    """The compiled fixed step of one :class:`~multibody_dynamics.simulate.Simulator`.

    Built by :meth:`build`, which returns None where the kernel does not apply (module notes).
    """

    def __init__(self, model, projected, config, tree, run):
        self._run = run
        packed = _Packed(model, projected, tree)
        self.nv, self.m, self.closed = packed.nv, packed.m, packed.closed
        self.mdl, self.par = packed.mdl, packed.par
        self.sp = np.array([config.dt, config.position_tol, config.max_newton_iter,
                            config.max_speed,
                            _proj.NEWTON_STEP_FACTOR * config.position_tol,
                            float(config.project_velocity),
                            0.0 if config.method == "rk4" else 1.0])
        self._none1, self._none2 = np.zeros(0), np.zeros((0, self.nv))
        self._nonelam = np.zeros((0, self.m))
        self.ip, self.fp = packed.ip, packed.fp  # the model of _step_entry (sp at sp_step)
        packed.sp_step[:] = self.sp
        self.dt = config.dt
        self.shape = (self.nv,)  # of tau
        self.nfev_step = 4 if config.method == "rk4" else 1  # dynamics evaluations a step
        #: :func:`_step_entry` (compiled by :meth:`build`): ``step_kernel(q, v, tau, t, h, ip,
        #: fp)`` advances (q, v) in place, returns ``(status, newton_iterations, residual)``;
        #: q, v, tau C-contiguous float64 arrays (nv,) (read through their data pointers)
        self.step_kernel = _step_entry

    @classmethod
    def build(cls, sim) -> FastStepper | None:
        """The compiled step for ``sim`` (a Simulator), or None where it does not apply."""
        if sim.wrenches or sim.config.adaptive or sim.config.velocity_metric != "mass":
            return None
        proj = sim.projected
        if proj is not None:
            c = proj.constraints
            if c._pfaffian or c.n_holonomic == 0 or type(c) is not _proj.Constraints or \
                    type(proj) is not _proj.ProjectedDynamics:
                return None
        tree = pack_tree(sim.model.pin_model)
        if tree is None:
            return None
        kernels = _compiled()
        if kernels is None:
            return None
        return cls(sim.model, proj, sim.config, tree, kernels)

    def step(self, q, v, tau, t, h):
        """One step from (q, v) (copied); returns ``(ok, q, v, newton_iterations, residual)``.

        ``tau`` a float64 array (nv,) (checked by the caller); the kernel reads it as
        C-contiguous (:func:`_make_views`), so another layout is copied first."""
        q, v = q.copy(), v.copy()
        status, its, err = self.step_kernel(q, v, np.ascontiguousarray(tau), t, h, self.ip,
                                            self.fp)
        if status == BAD_INPUT:
            require_finite(tau, "tau")  # raises InputError naming tau
        return status == OK, q, v, its, err

    def run(self, q, v, tau, t, nsteps, every, k0, n_total, rec):
        """``nsteps`` steps recorded into ``rec`` (the simulate Recorder) at its index; returns
        ``(steps done, ok, q, v, t, newton_iterations, residual)``; ``rec.k`` is advanced."""
        q, v = q.copy(), v.copy()
        n, status, t, k, its, err = self._run(q, v, tau, t, nsteps, every, k0, n_total,
                                              *self.mdl, self.par, self.sp, self.closed, rec.t,
                                              rec.q, rec.v, rec.e, rec.lam, rec.res, rec.vres,
                                              rec.k)
        rec.tau[rec.k:k] = tau
        rec.k = k
        return n, status == OK, q, v, t, its, err

    def sample(self, q, v, tau):
        """``(energy, lam, max |phi|, max |A v|)`` at (q, v) with input tau."""
        n = self.nv
        t, e, res, vres = np.zeros(1), np.zeros(1), np.zeros(1), np.zeros(1)
        lam = np.zeros((1, self.m))
        self._run(q.copy(), v.copy(), tau, 0.0, 0, 1, 0, 0, *self.mdl, self.par, self.sp,
                  self.closed, t, np.zeros((1, n)), np.zeros((1, n)), e, lam, res, vres, 0)
        return float(e[0]), lam[0], float(res[0]), float(vres[0])


class TreeDynamics:
    """The compiled constrained direct dynamics of a
    :class:`~multibody_dynamics.projection.ProjectedDynamics` on a tree of one-degree-of-freedom
    joints (:func:`_tree_fd`: O(n m + m^3), one call, no pinocchio call); built by :meth:`build`,
    which returns None where it does not apply (other joints, Pfaffian rows, no numba)."""

    def __init__(self, projected, tree, kernel):
        pm = projected.model.pin_model
        self.kernel = kernel
        packed = _Packed(projected.model, projected, tree)
        ji, jf, g, fi, ff, cl, cf = packed.mdl[:7]
        nf = len(fi)
        #: the constant arguments of the kernel, packed: integers and floats
        self.ic = np.concatenate([[nf, len(cl)], ji.ravel(), fi, cl.ravel()]).astype(np.int64)
        self.fc = np.concatenate([jf.ravel(), g, ff.ravel(), cf.ravel()])
        self.buf = np.zeros(_tree_fd_size(pm.nv, packed.m, nf))
        o = pm.nv * pm.nv + 13 * pm.nv  # H's place in the simulator's buffer (see _Packed)
        self.buf[:16 * nf] = packed.mdl[9][o:o + 16 * nf]  # frames on the universe

    @classmethod
    def build(cls, projected) -> TreeDynamics | None:
        """The compiled path for ``projected``, or None where it does not apply."""
        c = projected.constraints
        if c._pfaffian or c.n_holonomic == 0 or type(c) is not _proj.Constraints:
            return None
        tree = pack_tree(projected.model.pin_model)
        if tree is None:
            return None
        kernel = _compiled_fd()
        return None if kernel is None else cls(projected, tree, kernel)

    def __call__(self, q, v, tau, par):
        """``(out, rank, residual)`` at (q, v) under ``tau`` (springs included by the caller),
        ``out = [a, f_c, lam]``; ``par`` the kernel parameters of the settings."""
        return self.kernel(q, v, tau, self.ic, self.fc, par, self.buf)
