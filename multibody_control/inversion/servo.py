"""Servo-constraint formulation of the inverse model (Seifried 2014 Ch. 5).

The output is prescribed, c = h(q) - y_d(t) = 0 (5.3).  With D an orthogonal
complement of the actuation map (D^T B = 0, eq. 5.18) the input is eliminated and the
accelerations follow from the ODE form (5.21)-(5.22), whose matrix is nonsingular by
construction when the decoupling matrix is::

    [ D^T M ]       [ D^T (tau_s - h) ]
    [   H   ] a  =  [ y_d'' - h_bar   ]           (5.22, our signs: M a + h = B u + tau_s)

and the input from the equations of motion: u = B^+ (M a + h - tau_s)  (5.14).

The internal states are the passive coordinates and their velocities,
eta = (q_u, v_u) (Sect. 5.2.3, vector relative degree {2, ..., 2}); the actuated
coordinates follow from the servo-constraints h(q_a, q_u) = y_d (solved in closed
form for linear outputs, by Newton iterations otherwise).
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import scipy.linalg as sla

from multibody_dynamics.errors import InputError, SolverError
from multibody_dynamics.model import MultibodyModel
from multibody_dynamics.rigid import RigidDynamics

from ..outputs import Output, bent_guess


class ServoConstraints:
    """Inverse-model equations of a model with an output (an :class:`~.protocol.InverseModel`).

    Parameters
    ----------
    model : MultibodyModel
        nq == nv, no loop closures.
    output : Output
        As many rows as the model has inputs.
    newton_tol : float
        Servo-constraint residual [output units] accepted when solving for q_a.
    """

    def __init__(self, model: MultibodyModel, output: Output, newton_tol: float = 1e-12):
        if model.closures:
            raise InputError(f"{model.name}: servo-constraint inversion of models with loop "
                             "closures is not available; use a model without closures")
        if model.nq != model.nv:
            raise InputError(f"{model.name}: inversion needs nq == nv "
                             f"(got {model.nq}, {model.nv})")
        if output.m != model.nu:
            raise InputError(f"output has {output.m} rows ({', '.join(output.names)}) but "
                             f"{model.name} has {model.nu} inputs "
                             f"({', '.join(model.input_names)}); the inverse model needs a square "
                             "system")
        self.model, self.output = model, output
        self.dyn = RigidDynamics(model)
        self.B = model.B
        self.Bpinv = np.linalg.pinv(model.B)
        self.D = sla.null_space(model.B.T)  # (nv, nv - nu), D^T B = 0
        self.iu = np.flatnonzero(model.passive)
        self.ia = np.flatnonzero(~model.passive)
        if self.D.shape[1] != self.iu.size:
            raise InputError(f"{model.name}: the actuation map leaves {self.D.shape[1]} "
                             f"unactuated directions but {self.iu.size} joints are passive")
        self.nu_int = self.iu.size  # number of internal (passive) coordinates
        self.newton_tol = newton_tol
        self._qa_guess = None
        self.counters = {"dynamics": 0, "newton": 0}
        self.on_evaluate = None  # optional callback(n) after n evaluations (progress bars)
        # hot-path data (the BVP evaluates the internal dynamics ~1e5 times): a constant
        # output Jacobian is inverted once, the system matrix of (5.22) is preallocated and,
        # when D selects the passive coordinates (B_a = I, B_u = 0), D^T M is row indexing
        nv = model.nv
        self._D_rows = None
        if np.allclose(np.abs(self.D), np.abs(self.D).round()) and self.D.shape[1]:
            rows = np.argmax(np.abs(self.D), axis=0)
            if np.array_equal(np.sort(rows), self.iu):
                self._D_rows, self._D_sign = rows, np.sign(self.D[rows, np.arange(rows.size)])
        self._A = np.empty((nv, nv))
        self._b = np.empty(nv)
        self._Sa_inv = self._Su = None
        if output.linear:
            S = output._S
            self._H_const = S
            self._Sa_inv = self._invert_actuated(S[:, self.ia])
            self._Su = S[:, self.iu]
        from scipy.linalg.lapack import dgesv

        self._dgesv = dgesv

    # ------------------------------------------------------------------ pieces
    def assemble(self, qa, qu):
        q = np.empty(self.model.nq)
        q[self.ia], q[self.iu] = qa, qu
        return q

    def _invert_actuated(self, Ha):
        if np.linalg.cond(Ha) > 1e12:
            self._solve_actuated(np.zeros_like(Ha), np.zeros(Ha.shape[0]))  # raises the message
        return np.linalg.inv(Ha)

    def _solve_actuated(self, Ha, rhs):
        try:
            return np.linalg.solve(Ha, rhs)
        except np.linalg.LinAlgError:
            raise SolverError(
                f"output {self.output.names}: its Jacobian with respect to the actuated "
                "coordinates is singular, so the output does not determine them (decoupling "
                "matrix singular); choose independent output rows"
            ) from None

    def solve_positions(self, y, qu, guess=None):
        """q with h(q) = y for given passive coordinates (Newton for nonlinear outputs)."""
        out = self.output
        if self._Sa_inv is not None:
            return self.assemble(self._Sa_inv @ (y - self._Su @ qu), qu)
        qa = self._qa_guess if guess is None else np.asarray(guess, float)
        default = bent_guess(self.model)[self.ia]
        self.counters["newton"] += 1
        try:
            q = out.solve(self.assemble(default if qa is None else qa, qu), self.ia, y,
                          tol=self.newton_tol)
        except SolverError:
            if qa is None:
                raise
            # the warm start came from a rejected trial step far away: restart on the branch
            # of the default guess before giving up
            q = out.solve(self.assemble(default, qu), self.ia, y, tol=self.newton_tol)
        self._qa_guess = q[self.ia]
        return q

    def solve_velocities(self, q, yd, vu):
        if self._Sa_inv is not None:
            va = self._Sa_inv @ (yd - self._Su @ vu)
        else:
            H = self.output.jacobian(q)
            va = self._solve_actuated(H[:, self.ia], yd - H[:, self.iu] @ vu)
        v = np.empty(self.model.nv)
        v[self.ia], v[self.iu] = va, vu
        return v

    def accelerations(self, q, v, ydd):
        """a from the ODE form (5.22); raises SolverError if the decoupling matrix is singular."""
        self.counters["dynamics"] += 1
        if self.on_evaluate is not None:
            self.on_evaluate(1)
        dyn, n, A, b = self.dyn, self.nu_int, self._A, self._b
        M = dyn.mass_matrix(q)
        rhs_dyn = dyn.spring_forces(q, v) - dyn.nonlinear_effects(q, v)
        if self._D_rows is not None:
            A[:n] = M[self._D_rows] * self._D_sign[:, None]
            b[:n] = rhs_dyn[self._D_rows] * self._D_sign
        else:
            A[:n] = self.D.T @ M
            b[:n] = self.D.T @ rhs_dyn
        if self._Sa_inv is not None:  # linear output: constant H, zero bias
            A[n:] = self._H_const
            b[n:] = ydd
        else:
            A[n:] = self.output.jacobian(q)
            b[n:] = ydd - self.output.bias(q, v)
        _, _, a, info = self._dgesv(A, b)
        if info != 0:
            raise SolverError(
                f"decoupling matrix H M^-1 B singular at q = {np.round(q, 4).tolist()}: the "
                f"output {self.output.names} does not have relative degree 2 in every row here")
        return a

    def inputs(self, q, v, a):
        """u = B^+ (M a + h - tau_s), Seifried eq. 5.14."""
        return self.Bpinv @ self.dyn.inverse_dynamics(q, v, a)

    # ------------------------------------------------------------------ internal dynamics
    def internal_rhs(self, t, eta, ytraj):
        """eta' for eta = (q_u, v_u) at time t (coordinate-transformation form, exact output)."""
        return self.internal_rhs_at(*ytraj(t), eta)

    def internal_rhs_at(self, y, yd, ydd, eta):
        """eta' given the desired output and its derivatives at one instant."""
        n = self.nu_int
        q = self.solve_positions(y, eta[:n])
        v = self.solve_velocities(q, yd, eta[n:])
        a = self.accelerations(q, v, ydd)
        return np.concatenate([v[self.iu], a[self.iu]])

    def internal_rhs_batch(self, y, yd, ydd, eta):
        """eta' at K instants at once: y, yd, ydd (K, m), eta (K, 2 n_u) -> (K, 2 n_u).

        Everything but pinocchio's per-configuration calls is vectorized over the K instants
        (batched small solves), which is what makes the boundary value solver fast.  Nonlinear
        outputs solve the servo-constraints by a batched Newton iteration, warm-started from
        the previous call with the same K (solve_bvp evaluates the same mesh repeatedly).
        """
        if self._D_rows is None:
            return np.array([self.internal_rhs_at(*args) for args in zip(y, yd, ydd, eta)])
        n, nv, ia, iu = self.nu_int, self.model.nv, self.ia, self.iu
        K = eta.shape[0]
        self.counters["dynamics"] += K
        if self.on_evaluate is not None:
            self.on_evaluate(K)
        qu, vu = eta[:, :n], eta[:, n:]
        q = np.empty((K, nv))
        v = np.empty((K, nv))
        q[:, iu] = qu
        v[:, iu] = vu
        if self._Sa_inv is not None:
            q[:, ia] = (y - qu @ self._Su.T) @ self._Sa_inv.T
            v[:, ia] = (yd - vu @ self._Su.T) @ self._Sa_inv.T
            H = np.broadcast_to(self._H_const, (K,) + self._H_const.shape)
            hbar = 0.0
        else:
            q[:, ia] = self._batch_guess(K)
            H = self._batch_newton(q, y)
            Ha = H[:, :, ia]
            rhs = yd - np.einsum("kij,kj->ki", H[:, :, iu], vu)
            v[:, ia] = np.linalg.solve(Ha, rhs[..., None])[..., 0]
            hbar = self.output.bias_batch(q, v)
        pm, data = self.dyn._pm, self.dyn._data
        rows = self._D_rows
        A = np.empty((K, nv, nv))
        rhs = np.empty((K, nv))
        crba, nle = pin.crba, pin.nonLinearEffects
        for k in range(K):
            A[k] = crba(pm, data, q[k])
            rhs[k] = nle(pm, data, q[k], v[k])
        model = self.model
        rhs = -(q - model.q_rest) * model.stiffness - v * model.damping - rhs  # tau_s - h
        b = np.empty((K, nv))
        b[:, :n] = rhs[:, rows] * self._D_sign
        b[:, n:] = ydd - hbar
        A[:, :n] = A[:, rows] * self._D_sign[None, :, None]
        A[:, n:] = H
        try:
            a = np.linalg.solve(A, b[..., None])[..., 0]
        except np.linalg.LinAlgError:
            raise SolverError(f"decoupling matrix H M^-1 B singular along the trajectory: the "
                              f"output {self.output.names} does not have relative degree "
                              "2") from None
        return np.hstack([v[:, iu], a[:, iu]])

    def _batch_guess(self, K):
        cached = getattr(self, "_batch_qa", None)
        if cached is not None and cached.shape[0] == K:
            return cached
        qa = self._qa_guess if self._qa_guess is not None else bent_guess(self.model)[self.ia]
        return np.tile(qa, (K, 1))

    def _batch_newton(self, q, y, max_iter=30):
        """Solve h(q) = y for the actuated columns of q (K, nv) in place; returns H (K, m, nv)."""
        ia = self.ia
        for _ in range(max_iter):
            val, H = self.output.value_and_jacobian_batch(q)
            r = val - y
            if np.max(np.abs(r)) < self.newton_tol:
                self._batch_qa = q[:, ia].copy()
                return H
            try:
                q[:, ia] -= np.linalg.solve(H[:, :, ia], r[..., None])[..., 0]
            except np.linalg.LinAlgError:
                break
        # a node did not converge from the warm start: solve node by node (restarts included)
        for k in range(q.shape[0]):
            q[k] = self.solve_positions(y[k], q[k, self.iu], guess=q[k, ia] if np.all(
                np.isfinite(q[k, ia])) else None)
        self._batch_qa = q[:, ia].copy()
        return self.output.value_and_jacobian_batch(q)[1]

    def reconstruct(self, t, eta, ytraj):
        """Full q, v, a, u at time t from the internal state."""
        y, yd, ydd = ytraj(t)
        n = self.nu_int
        q = self.solve_positions(y, eta[:n])
        v = self.solve_velocities(q, yd, eta[n:])
        a = self.accelerations(q, v, ydd)
        return q, v, a, self.inputs(q, v, a)

    def equilibrium(self, y, guess=None):
        """Internal state at rest with constant output y (passive rows in static balance)."""
        from scipy.optimize import root

        n = self.nu_int
        zeros = np.zeros(self.model.nv)

        def static(qu):
            q = self.solve_positions(y, qu)
            return self.D.T @ (self.dyn.spring_forces(q, zeros) - self.dyn.gravity_forces(q))

        x0 = self.model.q_rest[self.iu] if guess is None else guess
        if n == 0:
            return np.zeros(0)
        sol = root(static, x0, tol=1e-13)
        if not sol.success or np.max(np.abs(static(sol.x))) > 1e-8:
            raise SolverError(f"no equilibrium of the passive joints found at output {y}: "
                              f"{sol.message}")
        return np.concatenate([sol.x, np.zeros(n)])

    def zero_dynamics_jacobian(self, y, eta0=None, step=1e-6):
        """Q = d(eta')/d(eta) of the zero dynamics at constant output y (Seifried eq. 3.70)."""
        eta0 = self.equilibrium(y) if eta0 is None else eta0
        zero = np.zeros_like(y)

        def const(t):
            return y, zero, zero

        n = eta0.size
        Q = np.empty((n, n))
        for j in range(n):
            e = np.zeros(n)
            e[j] = step
            Q[:, j] = (self.internal_rhs(0.0, eta0 + e, const)
                       - self.internal_rhs(0.0, eta0 - e, const)) / (2 * step)
        return Q, eta0
