"""Fixed-step integration of an open flexible chain: the embedded plant for flexible models.

:class:`FlexibleStepper` has the interface of :class:`multibody_dynamics.simulate.Simulator`
that ``simulator_node`` drives (``config``, ``reset``, ``step(tau)``, ``q``, ``v``, ``t``,
``constrained``, ``energy``): the node steps a rigid, constrained or flexible plant the same
way, with the same :class:`~multibody_dynamics.simulate.SimulatorConfig` (``dt``, ``method``,
``max_speed``). The generalized force ``tau`` (nv,) is held constant over a step (zero-order
hold of the commands; ``tau = B u`` with ``B = [I; 0]``).

Integrator choice
-----------------
The elastic coordinates make the equations stiff: flexible_manipulator's linearization at rest
has an undamped mode at 842 1/s (134 Hz), flexible_cart_manipulator's at 1363 1/s, whereas a
controller and a ``/joint_states`` stream run at 250-1000 Hz. One explicit step per tick would
be unstable or grossly wrong for that mode: classical RK4 on ``y' = i w y`` is stable for
``h w < 2.83`` and its amplification ``|R(i h w)|^2 = 1 - (h w)^6/72 + (h w)^8/576`` damps an
undamped mode numerically. So every step of ``dt`` is split into
``n = ceil(dt * omega_max / h_omega)`` equal RK4 substeps, with ``omega_max`` the largest
``|eigenvalue|`` of the linearization (:meth:`FlexibleChain.linearize`) at the state given to
:meth:`FlexibleStepper.reset`, and ``h_omega = 0.25`` (:data:`H_OMEGA`) by default. Then
``h w <= 0.25`` for every mode of the linearization: the amplitude loss is ``(h w)^6/144 <=
1.7e-6`` per substep (0.6 % per second of the 842 1/s mode, 3500 substeps per s), the phase
error ``(h w)^5/120 <= 8e-6`` rad per substep (0.03 rad per s), and the stability limit is 11
times away, which covers the change of the eigenfrequencies with the configuration (the
elastic stiffness K_e is constant; the mass matrix changes with the joint angles, by far less
than a factor 11). Measured (``test/test_ros_flexible.py``, 500 Hz, 1 s, torque step, against
DOP853 at rtol 1e-10): flexible_manipulator 7 substeps, joints within 2.9e-6 rad, elastic
coordinates within 0.93 % of their peak, 0.14 ms per step (numba kernel); with ``h_omega``
0.5: 2.7e-5 rad and 8.6 %, with 0.125: 1.8e-7 rad and 0.06 % (fourth order).
A semi-implicit (symplectic) Euler substep (``method="semi_implicit_euler"``) keeps the
amplitude of an undamped mode bounded for ``h w < 2`` but is first order: with the same
substeps its elastic coordinates are off by 10-70 % of their peak; use it for speed only.

Implicit or exponential steps were not chosen: an implicit step needs the Jacobian of the
dynamics (finite differences: 2 nv evaluations, plus a Newton solve per step), which costs as
much as the substeps here, and damps (implicit Euler) or delays (trapezoidal rule) the elastic
mode by amounts that depend on ``dt``; the substepped RK4 error is set by ``h_omega`` alone.

Closed loops (:class:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain`) step in
:class:`ClosedFlexibleStepper`: the same substeps on the index-1 form (a KKT solve per
evaluation), then the state is projected on the position and velocity manifolds of the loops
once per step, as :meth:`ClosedFlexibleChain.simulate` does at its samples. The substeps come
from the stiffest mode of the tree (the cut system): closing the loops adds constraints, and
by Rayleigh's theorem of constraint the highest natural frequency of a constrained linear
system does not exceed that of the unconstrained one, so ``h w <= h_omega`` holds for the
closed system too. A closed loop is far slower than real time (flexible_parallel_tool: 22
coordinates of which 18 elastic, a 24 x 24 KKT system per evaluation, 17 substeps per 1 ms
step: 11.5 ms per step here); :meth:`FlexibleStepper.real_time_factor` says by how much.
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import numpy as np

from ..errors import InputError, ModelError, SolverError
from ..robot import has_closures
from ..simulate import SimulatorConfig
from ..validation import as_vector, require_finite
from .system import FlexibleChain

__all__ = ["H_OMEGA", "ClosedFlexibleStepper", "FlexibleStepper", "highest_frequency",
           "make_stepper"]

#: Default bound of ``h * omega_max`` of one RK4 substep (see the module notes).
H_OMEGA = 0.25


def highest_frequency(chain: FlexibleChain, q=None, v=None) -> float:
    """Largest ``|eigenvalue|`` [1/s] of the linearization of ``chain`` at ``(q, v)``, ``u = 0``
    (default: the neutral configuration at rest): the stiffest mode's angular frequency."""
    q = chain.neutral() if q is None else q
    v = np.zeros(chain.nv) if v is None else v
    lin = chain.linearize(q, v)
    return float(np.max(np.abs(np.linalg.eigvals(lin.A))))


class FlexibleStepper:
    """Fixed steps of an open :class:`FlexibleChain` with the input held over each step.

    Parameters
    ----------
    chain : FlexibleChain
        An open chain (``nq = nv = nq_r + nq_e``, all coordinates Euclidean).
    config : SimulatorConfig, optional
        ``dt`` [s] is the step the caller sees (one per tick); ``method`` the substep
        (``"rk4"`` or ``"semi_implicit_euler"``); ``max_speed`` as for the rigid simulator.
    h_omega : float
        Bound of ``h * omega_max`` per substep (> 0, < 2.8 for RK4 stability), default
        :data:`H_OMEGA`.

    Attributes
    ----------
    q, v, t : current state [rad | m | modal, rad/s | m/s | modal/s, s]
    omega_max : float
        Stiffest angular frequency [1/s] of the linearization at the last :meth:`reset`.
    substeps : int
        Substeps per step of ``config.dt``.
    nsteps, nfev : counters since construction (steps; dynamics evaluations)

    Raises
    ------
    ModelError
        For a closed flexible loop (use :class:`ClosedFlexibleStepper`, or :func:`make_stepper`
        for either).
    """

    constrained = False
    constraints = None

    def __init__(self, chain: FlexibleChain, config: SimulatorConfig | None = None,
                 h_omega: float = H_OMEGA):
        if not isinstance(chain, FlexibleChain):
            name = getattr(chain, "name", type(chain).__name__)
            if len(getattr(chain, "closures", ())):
                raise ModelError(f"{name} is a closed flexible loop ({len(chain.closures)} cut "
                                 "joint(s)): step it with ClosedFlexibleStepper")
            raise InputError(f"chain: expected a FlexibleChain, got {type(chain).__name__}")
        self._setup(chain, chain, config, h_omega)
        self.reset()

    def _setup(self, chain: FlexibleChain, model, config, h_omega: float):
        if not (np.isfinite(h_omega) and 0 < h_omega < 2.8):
            raise InputError(f"h_omega: expected a value in (0, 2.8) (RK4 stability), got "
                             f"{h_omega}")
        self.chain = chain
        self.model = model
        self.h_omega = float(h_omega)
        self._config = config or SimulatorConfig()
        self.nsteps = self.nfev = 0
        self.omega_max = 0.0
        self.substeps = 1

    # -- configuration -------------------------------------------------------------------
    @property
    def config(self) -> SimulatorConfig:
        return self._config

    @config.setter
    def config(self, config: SimulatorConfig):
        """A new config (e.g. a new rate): the substeps follow the new ``dt``."""
        self._config = config
        self.substeps = self._substeps_for(config.dt)

    def _substeps_for(self, dt: float) -> int:
        return max(1, math.ceil(dt * self.omega_max / self.h_omega - 1e-9))

    # -- state ---------------------------------------------------------------------------
    def reset(self, q=None, v=None, t: float = 0.0):
        """Set the state (default: the neutral configuration, at rest) and choose the substeps
        from the stiffest mode of the linearization there."""
        chain = self.chain
        self.q = chain.neutral() if q is None else require_finite(
            as_vector(q, chain.nq, "q0"), "q0").copy()
        self.v = np.zeros(chain.nv) if v is None else require_finite(
            as_vector(v, chain.nv, "v0"), "v0").copy()
        self.t = float(t)
        self.omega_max = highest_frequency(chain, self.q, self.v)
        self.substeps = self._substeps_for(self._config.dt)

    def energy(self) -> float:
        """Total mechanical energy T + V (gravity and strain) at the current state [J]."""
        return self.chain.energy(self.q, self.v)

    def real_time_factor(self, steps: int = 3) -> float:
        """Simulated seconds per wall-clock second of ``steps`` steps of ``config.dt`` from the
        current state with zero input, timed here; the state and counters are restored."""
        saved = (self.q, self.v, self.t, self.nsteps, self.nfev)
        start = time.perf_counter()
        try:
            for _ in range(max(int(steps), 1)):
                self.step(np.zeros(self.model.nv))
        finally:
            wall = time.perf_counter() - start
            self.q, self.v, self.t, self.nsteps, self.nfev = saved
        return max(int(steps), 1) * self._config.dt / max(wall, 1e-12)

    # -- stepping ------------------------------------------------------------------------
    def _accel(self, q, v, f):
        a = self.chain._forward(q, v, f)  # internal buffer: copied, RK4 keeps four of them
        if a is None:
            raise SolverError(f"{self.chain.config.name}: mass matrix not positive definite at "
                              f"t = {self.t:.6g} s (deformation beyond the floating-frame "
                              "model's range)")
        self.nfev += 1
        return a.copy()

    def step(self, tau, dt: float | None = None):
        """Advance ``dt`` (default ``config.dt``) [s] with the generalized force ``tau`` (nv,)
        [N | N m] held constant; returns (q, v). The state is unchanged if a substep fails
        (:class:`SolverError`)."""
        f = as_vector(tau, self.chain.nv, "tau")
        if dt is None:
            dt, n = self._config.dt, self.substeps
        else:
            dt = float(dt)
            n = self._substeps_for(dt)
        h = dt / n
        q, v = self.q, self.v
        if self._config.method == "semi_implicit_euler":
            for _ in range(n):
                v = v + h * self._accel(q, v, f)
                q = q + h * v
        else:
            for _ in range(n):
                q, v = self._rk4(q, v, f, h)
        self.q, self.v, self.t = q, v, self.t + dt
        self.nsteps += 1
        return self.q, self.v

    def sample(self, tau) -> tuple[np.ndarray, float, float]:
        """``(lam, max |c|, max |C v|)`` as :meth:`ClosedFlexibleStepper.sample`: an open chain
        has no closures, so no multipliers and zero residuals."""
        as_vector(tau, self.chain.nv, "tau")
        return np.zeros(0), 0.0, 0.0

    def _rk4(self, q, v, f, h):
        """One classical Runge-Kutta step; the coordinates are Euclidean (angles unwrapped,
        modal amplitudes), so ``q + h v`` is the configuration update."""
        a1 = self._accel(q, v, f)
        v2 = v + 0.5 * h * a1
        a2 = self._accel(q + 0.5 * h * v, v2, f)
        v3 = v + 0.5 * h * a2
        a3 = self._accel(q + 0.5 * h * v2, v3, f)
        v4 = v + h * a3
        a4 = self._accel(q + h * v3, v4, f)
        return (q + h / 6.0 * (v + 2.0 * v2 + 2.0 * v3 + v4),
                v + h / 6.0 * (a1 + 2.0 * a2 + 2.0 * a3 + a4))


class ClosedFlexibleStepper(FlexibleStepper):
    """Fixed steps of a closed flexible loop (:class:`ClosedFlexibleChain`), input held over
    each step: RK4 substeps of the index-1 form (KKT solve per evaluation, no Baumgarte
    terms), then a projection of ``q`` and ``v`` on the loop manifolds (minimum-norm Newton,
    ``v - C^+ C v``). See the module notes for the substeps.

    Parameters and attributes as :class:`FlexibleStepper`; besides:

    Attributes
    ----------
    system : ClosedFlexibleChain
    constraints : namespace with ``labels`` (one per closure row: ``<closure>.x``, ``.y``,
        ``.angle``), the names of the multipliers :meth:`sample` returns.
    """

    constrained = True

    def __init__(self, system, config: SimulatorConfig | None = None, h_omega: float = H_OMEGA):
        from .closed import ClosedFlexibleChain

        if not isinstance(system, ClosedFlexibleChain):
            raise InputError(f"system: expected a ClosedFlexibleChain, got "
                             f"{type(system).__name__}")
        self._setup(system.chain, system, config, h_omega)
        self.system = system
        labels = []
        for c in system.closures:
            labels += [f"{c.name}.x", f"{c.name}.y"] + ([f"{c.name}.angle"] if c.angle else [])
        self.constraints = SimpleNamespace(labels=tuple(labels))
        self.reset()

    def reset(self, q=None, v=None, t: float = 0.0):
        """Set the state projected on the loop manifolds (default: the neutral configuration
        assembled, at rest); :class:`SolverError` when the loops cannot be closed near ``q``."""
        system = self.system
        q = system.chain.neutral() if q is None else require_finite(
            as_vector(q, system.nq, "q0"), "q0")
        v = np.zeros(system.nv) if v is None else require_finite(
            as_vector(v, system.nv, "v0"), "v0")
        q = system.project_position(q)
        super().reset(q, system.project_velocity(q, v), t)

    def _accel(self, q, v, f):
        a, _ = self.system._kkt(q, v, f)
        self.nfev += 1
        return a

    def step(self, tau, dt: float | None = None):
        """As :meth:`FlexibleStepper.step`, then the projection; the state is unchanged if a
        substep or the projection fails (:class:`SolverError`)."""
        saved = (self.q, self.v, self.t, self.nsteps)
        super().step(tau, dt)
        try:
            q = self.system.project_position(self.q)
            v = self.system.project_velocity(q, self.v)
        except SolverError:
            self.q, self.v, self.t, self.nsteps = saved
            raise
        self.q, self.v = q, v
        return self.q, self.v

    def sample(self, tau) -> tuple[np.ndarray, float, float]:
        """``(lam, max |c|, max |C v|)`` at the current state with the generalized force ``tau``:
        the closure multipliers [N | N m] and the loop residuals [m | rad, m/s | rad/s]."""
        f = as_vector(tau, self.system.nv, "tau")
        _, lam = self.system._kkt(self.q, self.v, f)
        c, C, _ = self.system.constraint_terms(self.q)
        return lam, float(np.max(np.abs(c))), float(np.max(np.abs(C @ self.v)))


def make_stepper(system, config: SimulatorConfig | None = None,
                 h_omega: float = H_OMEGA) -> FlexibleStepper:
    """:class:`ClosedFlexibleStepper` for a closed loop, :class:`FlexibleStepper` otherwise."""
    if has_closures(system):
        return ClosedFlexibleStepper(system, config, h_omega)
    return FlexibleStepper(system, config, h_omega)
