"""System outputs y = h(q) for inversion and analysis (Seifried 2014 Ch. 4).

An :class:`Output` stacks m rows, each either

* a linear combination of coordinates, ``"alpha2 + 0.5*beta"`` (collocated y = q_a,
  non-collocated y = q_u and linearly combined y = q_a + Gamma q_u are all of this kind), or
* a world-frame coordinate of a frame origin, ``"tip.x"`` / ``"tip.y"`` / ``"tip.z"``
  (the general, nonlinear y = h(q) of Sect. 4.2.6, e.g. the exact end-effector position).

It provides y = h(q), the Jacobian H = dh/dq (m, nv) and the bias h_bar = H' v (m,), so that
y'' = H a + h_bar.  Linear rows need models with nq == nv (no quaternion joints).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from multibody_dynamics.errors import InputError, SolverError
from multibody_dynamics.model import MultibodyModel

_AXES = {"x": 0, "y": 1, "z": 2}
# sign, optional coefficient (a "*" only after one), joint name: "-0.5*beta", "2beta", "x"
_TERM = re.compile(r"^([+-]?)(?:((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\*?)?([A-Za-z_][\w.]*)$")


@dataclass(frozen=True)
class OutputRow:
    label: str
    coefficients: np.ndarray | None  # (nv,) for a linear row
    frame_id: int | None = None  # frame row
    axis: int | None = None


def bent_guess(model: MultibodyModel) -> np.ndarray:
    """Spring rest configuration with every actuated revolute joint at +0.5 rad.

    The default start of inverse kinematics: away from the stretched-arm singularity, and it
    fixes the branch (elbow sign) so that repeated solves stay on one branch.
    """
    q = model.q_rest.copy()
    pm = model.pin_model
    for jid in range(1, pm.njoints):
        j = pm.joints[jid]
        if j.nq == 1 and "R" in j.shortname() and not model.passive[j.idx_v]:
            q[j.idx_q] += 0.5
    return q


class Output:
    """The output map y = h(q) of a model, built from row expressions.

    Parameters
    ----------
    model : MultibodyModel
    rows : sequence of str
        Each ``"name"``, ``"c1*name1 + c2*name2 ..."`` over coordinate names, or ``"frame.axis"``.
    """

    def __init__(self, model: MultibodyModel, rows):
        self.model = model
        if isinstance(rows, str) or not isinstance(rows, (list, tuple)):
            raise InputError(f"output: expected a list of row expressions, got {rows!r}")
        self.rows = tuple(self._parse(r) for r in rows)
        if not self.rows:
            if not model.nu:  # the default output (the actuated joints) is empty
                raise InputError(f"output: {model.name} has no inputs (every joint passive), "
                                 "so there is no output to analyse or invert; expected a model "
                                 "with at least one actuated joint")
            raise InputError("output: expected at least one row")
        self.m = len(self.rows)
        self.names = tuple(r.label for r in self.rows)
        self.linear = all(r.coefficients is not None for r in self.rows)
        self._S = np.array([r.coefficients if r.coefficients is not None else np.zeros(model.nv)
                            for r in self.rows])
        self._frame_rows = [(i, r.frame_id, r.axis) for i, r in enumerate(self.rows)
                            if r.coefficients is None]
        self._data = model.create_data()

    @classmethod
    def combined(cls, model: MultibodyModel, gamma) -> Output:
        """Linearly combined output y = q_a + Gamma q_u (Seifried eq. 4.89), Gamma (n_a, n_u)."""
        act = [n for n, p in zip(model.coordinate_names, model.passive) if not p]
        pas = list(model.passive_joint_names)
        try:
            gamma = np.zeros((len(act), len(pas))) if gamma is None else np.asarray(gamma, float)
        except (TypeError, ValueError):
            raise InputError(f"gamma: expected a ({len(act)}, {len(pas)}) matrix of numbers, "
                             f"got {gamma!r}") from None
        if not np.all(np.isfinite(gamma)):
            raise InputError(f"gamma: expected finite numbers, got {gamma.tolist()}")
        if not pas and gamma.size:
            raise InputError(f"gamma: {model.name} has no passive joints, so the output is the "
                             f"actuated joints ({', '.join(act)}) and takes no gamma; got "
                             f"{gamma.tolist()}")
        if gamma.ndim == 1 and gamma.size == len(act) * len(pas):
            gamma = gamma.reshape(len(act), len(pas))
        if gamma.shape != (len(act), len(pas)):
            raise InputError(f"gamma: expected shape ({len(act)}, {len(pas)}) = (actuated "
                             f"{', '.join(act)}) x (passive {', '.join(pas)}), got {gamma.shape}")
        rows = []
        for i, a in enumerate(act):
            terms = [a] + [f"{g:.17g}*{p}" for g, p in zip(gamma[i], pas) if g != 0.0]
            rows.append(" + ".join(terms))
        return cls(model, rows)

    @classmethod
    def collocated(cls, model: MultibodyModel) -> Output:
        return cls.combined(model, None)

    def _parse(self, expr: str) -> OutputRow:
        model = self.model
        expr = str(expr).strip()
        if not expr:
            raise InputError("output: empty row expression")
        head, _, tail = expr.rpartition(".")
        if head and tail in _AXES and head not in model.coordinate_names and "+" not in expr \
                and "*" not in expr:
            return OutputRow(expr, None, model.frame_id(head), _AXES[tail])
        if model.nq != model.nv:
            raise InputError(f"output {expr!r}: linear outputs need nq == nv; {model.name} has "
                             f"nq={model.nq}, nv={model.nv}")
        coef = np.zeros(model.nv)
        # split before every sign that is not an exponent's ("1e-3*beta" stays whole)
        for raw in re.split(r"(?<!\d[eE])(?=[+-])", expr.replace(" ", "")):
            if not raw:
                continue
            match = _TERM.match(raw)
            if not match:
                raise InputError(f"output {expr!r}: cannot read term {raw!r}; expected "
                                 "'coef*joint', 'joint' or 'frame.x|y|z'")
            sign, number, name = match.groups()
            c = (-1.0 if sign == "-" else 1.0) * (float(number) if number else 1.0)
            if name not in model.coordinate_names:
                raise InputError(f"output {expr!r}: unknown joint {name!r}; expected one of "
                                 f"{', '.join(model.coordinate_names)} or a frame coordinate "
                                 "like 'tip.x'")
            coef[model.coordinate_names.index(name)] += c
        return OutputRow(expr, coef)

    def solve(self, q0, free, y, tol: float = 1e-12, max_iter: int = 50) -> np.ndarray:
        """q with h(q) = y, varying only the coordinates ``free`` (indices), starting from q0.

        Damped least squares (Levenberg-Marquardt with a tiny fixed damping): well defined
        when q0 is singular for the output, quadratic Newton convergence near the answer.
        Raises SolverError with the residual when it does not converge.
        """
        q = np.array(q0, float)
        for _ in range(max_iter):
            r = self.value(q) - y
            if np.max(np.abs(r)) < tol:
                return q
            J = self.jacobian(q)[:, free]
            step = J.T @ np.linalg.solve(J @ J.T + 1e-10 * np.eye(self.m), r)
            q[free] -= step
            if np.max(np.abs(step)) < 1e-14 and np.max(np.abs(r)) < 1e3 * tol:
                return q  # converged to round-off of the kinematics
        raise SolverError(f"output {self.names}: no configuration reaches y = "
                          f"{np.round(y, 6).tolist()} (residual {np.max(np.abs(r)):.3g}); out of "
                          "reach or at a singular configuration")

    # ------------------------------------------------------------------ evaluation
    def value(self, q) -> np.ndarray:
        y = self._S @ q  # frame rows have zero coefficients and are filled below
        if self._frame_rows:
            pin.framesForwardKinematics(self.model.pin_model, self._data, q)
            for i, fid, ax in self._frame_rows:
                y[i] = self._data.oMf[fid].translation[ax]
        return y

    def jacobian(self, q) -> np.ndarray:
        """H = dh/dq (m, nv)."""
        H = self._S.copy()
        if self._frame_rows:
            pm, data = self.model.pin_model, self._data
            pin.computeJointJacobians(pm, data, q)
            pin.updateFramePlacements(pm, data)
            for i, fid, ax in self._frame_rows:
                J = pin.getFrameJacobian(pm, data, fid, pin.LOCAL_WORLD_ALIGNED)
                H[i] = J[ax]
        return H

    def value_and_jacobian_batch(self, Q):
        """y (K, m) and H (K, m, nv) at K configurations Q (K, nq), one kinematics pass each."""
        K = Q.shape[0]
        y = Q @ self._S.T
        H = np.broadcast_to(self._S, (K,) + self._S.shape).copy()
        if self._frame_rows:
            pm, data = self.model.pin_model, self._data
            for k in range(K):
                pin.computeJointJacobians(pm, data, Q[k])
                pin.updateFramePlacements(pm, data)
                for i, fid, ax in self._frame_rows:
                    y[k, i] = data.oMf[fid].translation[ax]
                    H[k, i] = pin.getFrameJacobian(pm, data, fid, pin.LOCAL_WORLD_ALIGNED)[ax]
        return y, H

    def bias_batch(self, Q, V):
        """h_bar (K, m) at K states."""
        hb = np.zeros((Q.shape[0], self.m))
        if self._frame_rows:
            pm, data = self.model.pin_model, self._data
            zero = np.zeros(self.model.nv)
            for k in range(Q.shape[0]):
                pin.forwardKinematics(pm, data, Q[k], V[k], zero)
                for i, fid, ax in self._frame_rows:
                    hb[k, i] = pin.getFrameClassicalAcceleration(pm, data, fid,
                                                                 pin.LOCAL_WORLD_ALIGNED).linear[ax]
        return hb

    def bias(self, q, v) -> np.ndarray:
        """h_bar = H'(q, v) v (m,): the output acceleration at zero joint acceleration."""
        hb = np.zeros(self.m)
        if self._frame_rows:
            pm, data = self.model.pin_model, self._data
            pin.forwardKinematics(pm, data, q, v, np.zeros(self.model.nv))
            pin.updateFramePlacements(pm, data)
            for i, fid, ax in self._frame_rows:
                acc = pin.getFrameClassicalAcceleration(pm, data, fid, pin.LOCAL_WORLD_ALIGNED)
                hb[i] = acc.linear[ax]
        return hb
