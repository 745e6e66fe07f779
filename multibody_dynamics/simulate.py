"""Time integration of multibody models.

:class:`Simulator` advances a model by fixed steps with the input held
constant over each step (zero-order hold), as a plant in a control loop does;
:func:`simulate` runs a whole time span and returns a :class:`SimulationResult`.
Configuration updates go through ``pin.integrate`` (the manifold), so joints with
nq != nv (continuous, spherical, free-flyer) are integrated correctly.

NaN or divergence stops the run and is reported in the result (``success`` is
False, ``message`` says what and when); samples computed before are kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin

from .errors import InputError
from .model import MultibodyModel
from .rigid import RigidDynamics
from .validation import as_vector, require_finite

METHODS = ("rk4", "semi_implicit_euler")


@dataclass(frozen=True)
class SimulatorConfig:
    """Settings of :class:`Simulator`.

    Parameters
    ----------
    dt : float
        Step size [s] (> 0).
    method : str
        ``"rk4"`` (classical Runge-Kutta on the manifold) or
        ``"semi_implicit_euler"`` (symplectic, one dynamics call per step).
    max_speed : float
        A velocity component above this [rad/s | m/s] is reported as divergence.
    """

    dt: float = 1e-3
    method: str = "rk4"
    max_speed: float = 1e4

    def __post_init__(self):
        if not (np.isfinite(self.dt) and self.dt > 0):
            raise InputError(f"dt: expected a positive step size in s, got {self.dt}")
        if self.method not in METHODS:
            raise InputError(f"method: expected one of {', '.join(METHODS)}, got {self.method!r}")
        if not self.max_speed > 0:
            raise InputError(f"max_speed: expected > 0, got {self.max_speed}")


@dataclass(frozen=True)
class SimulationResult:
    """Samples of a simulation run (python-control's one-result-type habit).

    Attributes
    ----------
    t : (N,) [s]; q : (N, nq); v : (N, nv); tau : (N, nv) input applied from each sample on
    energy : (N,) total mechanical energy [J]
    success : bool; message : str
    nsteps : int; wall_time : float [s]
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    energy: np.ndarray
    success: bool
    message: str
    nsteps: int
    wall_time: float
    names: tuple[str, ...] = field(default=())

    @property
    def realtime_factor(self) -> float:
        """Simulated seconds per wall-clock second."""
        span = float(self.t[-1] - self.t[0]) if self.t.size else 0.0
        return span / self.wall_time if self.wall_time > 0 else float("inf")


class Simulator:
    """Fixed-step integrator of an open-chain model (springs and dampers included).

    Parameters
    ----------
    model : MultibodyModel
    config : SimulatorConfig
    """

    def __init__(self, model: MultibodyModel, config: SimulatorConfig | None = None):
        self.model = model
        self.config = config or SimulatorConfig()
        self.dynamics = RigidDynamics(model)
        self._pm = model.pin_model
        self.reset()

    def reset(self, q=None, v=None, t: float = 0.0):
        """Set the state (default: the spring rest configuration, at rest)."""
        self.q = self.model.q_rest.copy() if q is None else require_finite(
            as_vector(q, self.model.nq, "q0"), "q0").copy()
        self.v = np.zeros(self.model.nv) if v is None else require_finite(
            as_vector(v, self.model.nv, "v0"), "v0").copy()
        self.t = float(t)

    def _accel(self, q, v, tau):
        return self.dynamics.forward_dynamics(q, v, tau)

    def step(self, tau, dt: float | None = None):
        """Advance one step with ``tau`` (nv,) held constant; returns (q, v)."""
        h = self.config.dt if dt is None else dt
        tau = as_vector(tau, self.model.nv, "tau")
        q, v = self.q, self.v
        if self.config.method == "semi_implicit_euler":
            v_new = v + h * self._accel(q, v, tau)
            q_new = pin.integrate(self._pm, q, h * v_new)
        else:
            f = self._accel
            a1 = f(q, v, tau)
            q2 = pin.integrate(self._pm, q, 0.5 * h * v)
            v2 = v + 0.5 * h * a1
            a2 = f(q2, v2, tau)
            q3 = pin.integrate(self._pm, q, 0.5 * h * v2)
            v3 = v + 0.5 * h * a2
            a3 = f(q3, v3, tau)
            q4 = pin.integrate(self._pm, q, h * v3)
            v4 = v + h * a3
            a4 = f(q4, v4, tau)
            q_new = pin.integrate(self._pm, q, h / 6.0 * (v + 2 * v2 + 2 * v3 + v4))
            v_new = v + h / 6.0 * (a1 + 2 * a2 + 2 * a3 + a4)
        self.q, self.v, self.t = q_new, v_new, self.t + h
        return self.q, self.v

    def energy(self) -> float:
        return self.dynamics.energy(self.q, self.v)


def simulate(model: MultibodyModel, duration: float, q0=None, v0=None,
             tau: Callable[[float, np.ndarray, np.ndarray], np.ndarray] | np.ndarray | None = None,
             config: SimulatorConfig | None = None, progress: bool = False) -> SimulationResult:
    """Simulate ``duration`` seconds with fixed steps.

    Parameters
    ----------
    tau : (nv,) constant, or callable ``tau(t, q, v) -> (nv,)`` evaluated once per step
        (zero-order hold); default zero.
    """
    sim = Simulator(model, config)
    sim.reset(q0, v0)
    if not (np.isfinite(duration) and duration > 0):
        raise InputError(f"duration: expected a positive time in s, got {duration}")
    n = int(round(duration / sim.config.dt))
    const = np.zeros(model.nv) if tau is None else (None if callable(tau) else
                                                   as_vector(tau, model.nv, "tau"))
    t_out = np.empty(n + 1)
    q_out, v_out = np.empty((n + 1, model.nq)), np.empty((n + 1, model.nv))
    tau_out, e_out = np.zeros((n + 1, model.nv)), np.empty(n + 1)
    t_out[0], q_out[0], v_out[0], e_out[0] = sim.t, sim.q, sim.v, sim.energy()
    success, message, k = True, "completed", 0
    steps = range(n)
    if progress:
        from tqdm import tqdm

        steps = tqdm(steps, desc="simulate", unit="step", leave=False)
    start = time.perf_counter()
    for k in steps:
        u = const if const is not None else as_vector(tau(sim.t, sim.q, sim.v), model.nv, "tau(t, q, v)")
        tau_out[k] = u
        q, v = sim.step(u)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
            success, message = False, f"state became NaN/inf at t = {sim.t:.6g} s"
            break
        if np.max(np.abs(v)) > sim.config.max_speed:
            success, message = False, (f"diverged at t = {sim.t:.6g} s: |v| > "
                                       f"{sim.config.max_speed:g} (max_speed)")
            break
        t_out[k + 1], q_out[k + 1], v_out[k + 1], e_out[k + 1] = sim.t, q, v, sim.energy()
    else:
        k = n
    wall = time.perf_counter() - start
    m = k + 1  # samples stored: the initial one plus every completed step (not a failing one)
    return SimulationResult(t_out[:m], q_out[:m], v_out[:m], tau_out[:m], e_out[:m], success, message,
                            k, wall, model.coordinate_names)
