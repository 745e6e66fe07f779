"""The part of an inverse model with elastic internal dynamics that does not depend on the
system: internal states ``η = (q_e, q_e')`` (Seifried 2014 Sect. 6.3), their right-hand side,
the reconstruction of ``q, v, a, u``, the static equilibrium and the zero-dynamics Jacobian.

Subclasses (the open chains' ``FlexibleServo`` in :mod:`multibody_control.inversion.flexible`,
the closed loops' ``ClosedOutputServo`` in :mod:`multibody_control.inversion.closed_flexible`)
set ``nu_int`` (number of elastic coordinates), ``iu`` (their indices in ``v``), ``counters``
and ``on_evaluate``, and provide ``state(y, yd, qe, qed) -> (q, v)``, ``solve(q, v, ydd) -> (a,
reactions, u)`` and ``_rest_residual(y, qe)`` (zero at the static equilibrium);
:func:`~multibody_control.inversion.internal.solve_stable` drives them.

:class:`ElasticServo` satisfies the protocol ``multibody_control.inversion.protocol.InverseModel``
structurally (members and signatures, checked by ``test/test_inversion_structure.py``); it is
not declared here because :mod:`multibody_dynamics` does not import :mod:`multibody_control`.
"""

from __future__ import annotations

import numpy as np

from ..errors import SolverError


class ElasticServo:
    """Base of the inverse models with internal states ``η = (q_e, q_e')`` (module docstring)."""

    nu_int: int
    iu: np.ndarray
    #: evaluation counts (``"dynamics"``: model solves), set by the subclass
    counters: dict
    #: optional ``callback(n)`` after n dynamics evaluations (progress bars), set by the subclass
    on_evaluate: object
    #: accepted max |residual| of the static equilibrium
    equilibrium_tol = 1e-10

    def internal_rhs_at(self, y, yd, ydd, eta) -> np.ndarray:
        """``η'`` given the desired output and its derivatives at one instant."""
        n = self.nu_int
        q, v = self.state(y, yd, eta[:n], eta[n:])
        a = self.accelerations(q, v, ydd)
        return np.concatenate([v[self.iu], a[self.iu]])

    def accelerations(self, q, v, ydd) -> np.ndarray:
        """``a`` alone (the hot path of the boundary value solvers); by default from ``solve``,
        subclasses that get ``a`` cheaper than ``u`` override it."""
        return self.solve(q, v, ydd)[0]

    def internal_rhs(self, t, eta, ytraj) -> np.ndarray:
        return self.internal_rhs_at(*ytraj(t), eta)

    def internal_rhs_batch(self, y, yd, ydd, eta) -> np.ndarray:
        return np.array([self.internal_rhs_at(*args) for args in zip(y, yd, ydd, eta)])

    def reconstruct(self, t, eta, ytraj):
        """``q, v, a, u`` at time ``t`` [s] from the internal state ``eta``."""
        y, yd, ydd = ytraj(t)
        n = self.nu_int
        q, v = self.state(y, yd, eta[:n], eta[n:])
        a, _, u = self.solve(q, v, ydd)
        return q, v, a, u

    def equilibrium(self, y, guess=None) -> np.ndarray:
        """Internal state at rest with constant output ``y`` (Newton on ``_rest_residual``)."""
        n = self.nu_int
        qe = np.zeros(n) if guess is None else np.asarray(guess, float)[:n].copy()
        for _ in range(30):
            r = self._rest_residual(y, qe)
            if np.max(np.abs(r)) < self.equilibrium_tol:
                return np.concatenate([qe, np.zeros(n)])
            h = 1e-7
            Jr = np.column_stack([(self._rest_residual(y, qe + h * e)
                                   - self._rest_residual(y, qe - h * e)) / (2 * h)
                                  for e in np.eye(n)])
            qe = qe - np.linalg.solve(Jr, r)
        raise SolverError(f"no static equilibrium of the elastic coordinates found at output {y}")

    def zero_dynamics_jacobian(self, y, eta0=None, step=1e-7):
        """``Q = ∂η'/∂η`` (2 nq_e, 2 nq_e) of the zero dynamics at constant output ``y`` (central
        differences) and the equilibrium ``η0``."""
        eta0 = self.equilibrium(y) if eta0 is None else eta0
        zero = np.zeros_like(np.asarray(y, float))
        Q = np.column_stack([(self.internal_rhs_at(y, zero, zero, eta0 + step * e)
                              - self.internal_rhs_at(y, zero, zero, eta0 - step * e)) / (2 * step)
                             for e in np.eye(eta0.size)])
        return Q, eta0
