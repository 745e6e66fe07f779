"""Stability of joint feedback sampled at the control rate, per coordinate.

A node publishes its command once per period ``dt`` and the plant holds it (zero-order hold);
the command is computed from a state that is up to one period old (the ``/joint_states``
message of the previous plant step).  For one coordinate of inertia ``M`` [kg m^2 | kg] under
``u = -kp e - kd e'`` this loop is, with ``x = (e, e', u_held)``::

    e_{k+1}  = e_k + dt e'_k + dt^2 / (2 M) u_k
    e'_{k+1} = e'_k + dt / M u_k
    u_{k+1}  = -kp e_k - kd e'_k

(exact integration of a constant force over a period, one period of delay).  It is stable iff
the spectral radius of its matrix is at most 1; :func:`unstable_gains` refuses a loop that
grows faster than ``GROWTH_LIMIT`` at ``dt`` or at ``PERIOD_MARGIN`` times ``dt``.  The
continuous-time design ignores this: a
velocity gain with ``kd dt / M`` of order 1 or more makes the sampled loop diverge however
well damped the continuous one is (e.g. kd = 20 N m s/rad on a joint of 2.4e-4 kg m^2 at
500 Hz: kd dt / M = 167).  Laws whose gains are error-dynamics gains (computed torque,
projected inverse dynamics: ``e'' + kd e' + kp e = 0`` [1/s^2, 1/s]) are the case ``M = 1``.

The inertia of an actuated coordinate j is the one it shows with the other actuated
coordinates held (by their own loops) and the passive ones free: ``1 / (M_S^-1)_jj`` with
``M_S`` the rows and columns of j and of the passive coordinates of the spanning tree's mass
matrix at the model's rest configuration.  The diagonal ``M_jj`` (everything else held) is up
to 16 times larger on passive_arm's elbow, where the passive joint beyond it swings freely,
and would pass gains whose loop diverges.  A closed loop's links only add inertia.  It remains
a per-coordinate check: it refuses gains that cannot work, it does not prove that the others
do.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

#: Largest growth rate ln(radius) / period accepted [1/s].  Not 0: a coordinate without
#: position feedback (kp = 0) has the eigenvalue 1 of a free inertia, and the delay makes a
#: lightly damped one (kd << 2 sqrt(kp M)) grow by a fraction of a percent per second, which
#: any friction of the plant absorbs; the gains this is meant to catch grow by orders of
#: magnitude per second (kd dt / M = 167 above: radius 18 per 2 ms).
GROWTH_LIMIT = 1.0
#: Margin: the loop must also be stable at this multiple of the period (a state message that
#: arrives a period late, a skipped tick, an inertia smaller than the one used).
PERIOD_MARGIN = 2.0


def sampled_radius(kp: float, kd: float, inertia: float, dt: float) -> float:
    """Spectral radius of the one-period-delayed sampled PD loop of one coordinate.

    Parameters
    ----------
    kp : float  position gain [N m/rad | N/m] (per unit inertia: [1/s^2])
    kd : float  velocity gain [N m s/rad | N s/m] (per unit inertia: [1/s])
    inertia : float  M > 0 [kg m^2 | kg] (1 for error-dynamics gains)
    dt : float  control period [s]
    """
    a = np.array([[1.0, dt, dt * dt / (2.0 * inertia)],
                  [0.0, 1.0, dt / inertia],
                  [-kp, -kd, 0.0]])
    return float(np.max(np.abs(np.linalg.eigvals(a))))


def input_inertias(model, q=None) -> np.ndarray:
    """Inertia (nu,) of the coordinate each input drives, the other actuated coordinates held and
    the passive ones free, ``1 / (M_S^-1)_jj`` (see the module doc) [kg m^2 | kg].

    ``q``: configuration (nq,); default the model's rest configuration ``q_rest``.
    """
    pm = model.pin_model
    q = model.q_rest if q is None else q
    M = pin.crba(pm, pm.createData(), np.asarray(q, float))
    M = np.triu(M) + np.triu(M, 1).T  # crba fills the upper triangle
    B = np.asarray(model.B, float)
    passive = list(np.flatnonzero(np.asarray(model.passive, bool)))
    out = np.empty(B.shape[1])
    for j in range(B.shape[1]):
        i = int(np.argmax(np.abs(B[:, j])))
        sub = [i] + [k for k in passive if k != i]
        out[j] = 1.0 / np.linalg.inv(M[np.ix_(sub, sub)])[0, 0]
    return out


def unstable_gains(kp, kd, inertias, dt: float, names) -> list[str]:
    """Descriptions of the coordinates whose sampled loop is unstable ([] when all are stable).

    ``kp``, ``kd``, ``inertias``: one value each or one per name; ``dt`` [s].
    """
    n = len(names)
    kp, kd, inertias = (np.broadcast_to(np.asarray(x, float), (n,)) for x in (kp, kd, inertias))
    bad = []
    for name, p, d, m in zip(names, kp, kd, inertias):
        r = max(sampled_radius(p, d, m, dt), sampled_radius(p, d, m, PERIOD_MARGIN * dt))
        growth = np.log(r) / dt if r > 0 else -np.inf
        if not growth <= GROWTH_LIMIT:
            bad.append(f"{name} (kp {p:g}, kd {d:g}, M {m:.3g}: kd*dt/M = {d * dt / m:.3g}, "
                       f"spectral radius {r:.3g} at 1 or {PERIOD_MARGIN:g} x the period)")
    return bad


def linear_loop_radius(A, B, kp, kd, dt: float, delay: int = 0) -> float:
    """Spectral radius of joint PD closed around a linear model, sampled with zero-order hold.

    The model ``x' = A x + B u`` with ``x = (q, v)`` (2 nv) and ``nu`` inputs that drive the
    first ``nu`` coordinates (a flexible chain's joints, ``B = [I; 0]`` in its input rows);
    ``u_k = -kp q_{k-d} - kd v_{k-d}`` per input, computed from the state ``d = delay``
    periods old and held over ``[t_k, t_k + dt]`` (``delay`` 0: the lockstep loop of
    ``simulator_node`` / ``controller_node timing: state``; 1: the one-period delay of
    :func:`sampled_radius`, which this reproduces for a single inertia
    ``A = [[0, 1], [0, 0]], B = [[0], [1/M]]``).  Unlike the per-coordinate check it keeps the
    coupling of the joints to the elastic coordinates, whose undamped modes a delayed velocity
    feedback destabilizes.

    Parameters
    ----------
    A : (2 nv, 2 nv)  continuous state matrix [1/s] (e.g. ``FlexibleChain.linearize(...).A``)
    B : (2 nv, nu)  continuous input matrix
    kp, kd : (nu,)  gains [N m/rad | N/m], [N m s/rad | N s/m] (a scalar: every input)
    dt : float  control period [s], > 0
    delay : int  periods between the state and the command computed from it, >= 0

    Returns
    -------
    float
        The largest |eigenvalue| of the one-period map of the loop (stable iff < 1).
    """
    from multibody_dynamics.linearize import discretize_zoh

    A, B = np.asarray(A, float), np.asarray(B, float)
    n, nu = B.shape
    nv = n // 2
    phi, theta = discretize_zoh(A, B, dt)
    gain = np.zeros((nu, n))
    gain[:, :nu] = np.diag(np.broadcast_to(np.asarray(kp, float), (nu,)))
    gain[:, nv:nv + nu] = np.diag(np.broadcast_to(np.asarray(kd, float), (nu,)))
    size = n * (int(delay) + 1)  # the state and its `delay` predecessors
    F = np.zeros((size, size))
    F[:n, :n] = phi
    F[:n, size - n:] -= theta @ gain
    for k in range(int(delay)):
        F[n * (k + 1):n * (k + 2), n * k:n * (k + 1)] = np.eye(n)
    return float(np.max(np.abs(np.linalg.eigvals(F))))
