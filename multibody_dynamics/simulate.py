"""Time integration of multibody models, open-chain and constrained.

:class:`Simulator` advances a model by fixed steps with the input held constant over each
step (zero-order hold), as a plant in a control loop does; :func:`simulate` runs a whole
time span, with fixed steps or with an adaptive scipy integrator, and returns a
:class:`SimulationResult`.  Configuration updates go through ``pin.integrate`` (the
manifold), so joints with nq != nv (continuous, spherical, free-flyer) are integrated
correctly.

**Constrained models** (closures of the model YAML, Pfaffian rows added to a
:class:`~multibody_dynamics.constraints.Constraints`, e.g. by
:mod:`multibody_dynamics.rolling`): the accelerations come from the projection formulation
``M_c a = P f + M C v`` (Aghili 2005 eq. 22 with M_c of eq. 24 -- the "eq. 25" ODE of the
source), through :class:`~multibody_dynamics.projection.ProjectedDynamics`.  Instead of
Baumgarte stabilization (Aghili 2005 Sect. 6), after every step

1. the configuration is projected onto the manifold ``phi(q) = 0`` by Newton-Raphson,
   ``q <- q (-) A^+ phi`` until ``||phi||_inf < position_tol`` (eq. 39), once more if the
   step ``||A^+ phi||_inf`` is still ``projection.NEWTON_STEP_FACTOR`` times larger (near a
   singular configuration a small phi does not mean a small distance), and
2. the velocity is projected onto null(A) (all rows, Pfaffian ones included), by default in
   the mass metric (a constraint impulse; ``SimulatorConfig.velocity_metric``), which
   keeps the energy error second order where Aghili's Euclidean ``P v`` is first order.

The initial state is projected the same way before the first step; if that fails the
run reports it (:class:`~multibody_dynamics.errors.SolverError` from
:meth:`Simulator.reset`, ``success = False`` from :func:`simulate`).

**Adaptive mode** (``SimulatorConfig(rtol=...)``): an explicit scipy Runge-Kutta solver
(``DOP853`` by default) with error control ``rtol``/``atol`` integrates from one output
sample to the next; the state is projected **at the output samples**, not after every
accepted step.  Projecting inside a step sequence would change the state under the
solver's error estimate and its first-same-as-last stage (the next step would start
from an evaluation at a state that no longer exists); restarting the solver at each
sample keeps its error control honest and costs one extra evaluation per sample (the last
step size is carried over).  Between samples the drift is that of the unstabilized
index-1 ODE, of the order of the solver tolerance (near a singular configuration it
decides the branch: see below).  The input ``tau(t, q, v)`` is held
over each output interval (zero-order hold at the output rate).  Rejected steps are known
from the evaluation count: each attempt of an explicit Runge-Kutta method costs
``n_stages`` evaluations.

**Singular configurations** (``SimulatorConfig.singular_branch``).  Where A loses rank on
the trajectory, branches of the constraint manifold may cross: the slider-crank at
q1 = +-pi/2, where its single row vanishes, joins the branch ``q2 = -2 q1`` (slider moving)
and the folded branch ``q2 = pi`` (slider at the crank pivot).  Both continuations satisfy
the constraint and conserve energy; only the one on the same branch keeps the velocity
continuous (the other needs an impulse along a vanishing row).  Numerically the choice is
decided by the drift: near the crossing the level set ``phi(q) = phi_drift`` is a hyperbola
that turns from one branch to the other at a distance of about ``sqrt(2 |phi_drift| /
|dA/dq|)`` from the crossing point, and an integrator that resolves that region with small
steps follows the turn.

* Fixed steps project after every step; a step moves ``|v| dt`` (here about 1e-2 rad), far
  more than the ambiguous region (about 1e-6 rad for ``position_tol`` 1e-12), so the
  Newton projection lands on the continued branch: the fixed-step mode continues with
  either setting.
* Adaptive, ``"free"``: nothing is done; between output samples the drift is of the order of
  the solver tolerance, the error control resolves the turn and the motion may change
  branch (measured on ``slider_crank``, 10 s from v0 = (6, -12) rad/s, DOP853 rtol 1e-10:
  0.10 crank turns, i.e. reversed, instead of 6.21).
* Adaptive, ``"continue"`` (default): after every accepted step the r-th singular value of
  A(q) is evaluated (r the generic rank, the largest seen).  When it falls below
  ``singular_tol`` (1e-3, or 10 times the drift-dependent size above if larger), the entry
  is located on the step's dense output (Brent), the state there is projected, and the
  crossing time ``T`` is predicted from the signed singular value ``g = u^T A(q) w`` and its
  rate along v (central difference).  One classical RK4 step of length ``3 T`` then carries
  the state across: its stages lie at ``-T``, ``T/2`` (twice) and ``2 T`` from the crossing,
  never in the ambiguous region, and it ends at about twice the threshold on the far side,
  where the state is projected and the adaptive solver restarts.  The bridge is skipped
  when the predicted crossing is slower than 20 adaptive steps (grazing); output samples
  that fall inside a bridge are interpolated (cubic Hermite in q and v, then projected) and
  the input they produce is applied from the bridge's end.  Measured (slider_crank, 10 s,
  rtol 1e-10): 6.2071, 15.4651 and 12.3648 crank turns from v0 = (6, -12), (12, -12),
  (12, -24) rad/s, as with fixed 1 ms steps, relative energy drift 2e-10 to 8e-10;
  ``SimulationResult.nsingular`` counts the bridges (most crossings are jumped by long
  accepted steps and need none).

NaN, divergence (``|v| > max_speed``), a failed projection or a failed adaptive step stop
the run and are reported in the result (``success`` is False, ``message`` says what and
when); samples computed before are kept.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pinocchio as pin
from scipy.linalg import lapack
from scipy.optimize import brentq

from .constraints import Constraints
from .errors import InputError, MultibodyError, SolverError
from .interruptible import INTERRUPTS, reraise_unless_interrupt
from .model import MultibodyModel
from .projection import VELOCITY_METRICS, ProjectedDynamics, ProjectionSettings
from .rigid import RigidDynamics
from .validation import as_vector, require_finite

_F8 = np.dtype(float)

METHODS = ("rk4", "semi_implicit_euler")
IVP_METHODS = ("DOP853", "RK45", "RK23")
SINGULAR_BRANCHES = ("continue", "free")
_LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED


@dataclass(frozen=True)
class SimulatorConfig:
    """Settings of :class:`Simulator` and :func:`simulate`.

    Parameters
    ----------
    dt : float
        Step size [s] (> 0) of the fixed-step methods.
    method : str
        ``"rk4"`` (classical Runge-Kutta on the manifold) or
        ``"semi_implicit_euler"`` (symplectic, one dynamics call per step).
    max_speed : float
        A velocity component above this [rad/s | m/s] is reported as divergence.
    position_tol : float
        Newton projection onto ``phi(q) = 0`` stops below this ``||phi||_inf`` [m | rad]
        (constrained models only).
    max_newton_iter : int
        Newton iterations per projection at most; more is reported as a failure.
    project_velocity : bool
        Project v onto null(A) after each step (constrained models only).  Off, only the
        positions are corrected and the velocity drifts (for studies of the drift).
    velocity_metric : str
        Metric of the velocity projection,
        :meth:`ProjectedDynamics.project_velocity(q, v, metric)
        <multibody_dynamics.projection.ProjectedDynamics.project_velocity>`:
        ``"mass"`` (default): the M-orthogonal projection ``v <- v - M^-1 B (B^T M^-1 B)^-1 B^T v``
        with ``B`` an orthonormal basis of the row space of A (same rank decision as the
        dynamics): the correction is a constraint impulse ``M^-1 A^T mu``, so it changes the
        kinetic energy only to second order in the violation and conserves the momentum of a
        free-floating system.  ``"euclidean"``: Aghili's ``v <- P v`` (eq. 15), which changes
        T to first order; measured on the slider-crank crossing its singularity (RK4, 0.5 ms):
        relative energy error 1.4e-5 per crossing against 1.2e-11 with the mass metric.
    singular_branch : str
        Which continuation the adaptive mode takes where the constraint Jacobian loses rank
        on the trajectory (the slider-crank at q1 = +-pi/2, where two branches of the
        constraint manifold cross and both continuations satisfy the constraint and conserve
        energy).  ``"continue"`` (default): the motion keeps its velocity through the singular
        configuration (the continuation with continuous velocity, i.e. the same branch); the
        crossing is bridged explicitly (module notes, "Singular configurations").
        ``"free"``: no special treatment; the adaptive integrator resolves the drift-sized
        neighbourhood of the crossing and may turn onto the other branch (measured: the
        slider-crank reversed after 0.1 turns instead of 6.2 over 10 s).  Fixed steps behave
        the same with either value (see the module notes).
    singular_tol : float
        Threshold [units of A: m/rad, m/m or 1] (> 0) of the neighbourhood of a singular
        configuration that ``"continue"`` bridges: the state is near one when the r-th
        singular value of A (r its generic rank) is below ``max(singular_tol,
        10 sqrt(2 ||phi||_inf sigma_1))``, the second term being ten times the size of the
        region made ambiguous by a closure drift phi.  Larger values make longer bridges (one
        RK4 step over about ``3 singular_tol / |d sigma / dt|``; 1.5 ms on the slider-crank).
    projection : ProjectionSettings or None
        Rank thresholds and mass-matrix variant of the projected dynamics (default:
        ``ProjectionSettings()``, i.e. Aghili 2005 eq. 24).
    rtol : float or None
        Relative tolerance of the adaptive mode of :func:`simulate`; None: fixed steps.
    atol : float
        Absolute tolerance of the adaptive mode [rad | m, rad/s | m/s].
    ivp_method : str
        scipy explicit Runge-Kutta class of the adaptive mode: DOP853, RK45 or RK23.
    compiled : bool
        Fixed steps: use the compiled step of :mod:`multibody_dynamics.fast_step` where it
        applies (numba installed, revolute/prismatic joints, closures without Pfaffian rows,
        no external wrenches); False always takes the reference path (pinocchio and LAPACK
        from Python).  Both give the same trajectory to round-off (``test/test_fast_step.py``).
    """

    dt: float = 1e-3
    method: str = "rk4"
    max_speed: float = 1e4
    position_tol: float = 1e-12
    max_newton_iter: int = 30
    project_velocity: bool = True
    velocity_metric: str = "mass"
    projection: ProjectionSettings | None = None
    rtol: float | None = None
    atol: float = 1e-10
    ivp_method: str = "DOP853"
    singular_branch: str = "continue"
    singular_tol: float = 1e-3
    compiled: bool = True

    def __post_init__(self):
        if not (np.isfinite(self.dt) and self.dt > 0):
            raise InputError(f"dt: expected a positive step size in s, got {self.dt}")
        if self.method not in METHODS:
            raise InputError(f"method: expected one of {', '.join(METHODS)}, got {self.method!r}")
        if not self.max_speed > 0:
            raise InputError(f"max_speed: expected > 0, got {self.max_speed}")
        if not (np.isfinite(self.position_tol) and self.position_tol > 0):
            raise InputError(f"position_tol: expected a positive tolerance in m | rad, got "
                             f"{self.position_tol}")
        if not (isinstance(self.max_newton_iter, int) and self.max_newton_iter >= 1):
            raise InputError("max_newton_iter: expected an integer >= 1, got "
                             f"{self.max_newton_iter!r}")
        if self.velocity_metric not in VELOCITY_METRICS:
            raise InputError(f"velocity_metric: expected one of {', '.join(VELOCITY_METRICS)}, "
                             f"got {self.velocity_metric!r}")
        if self.singular_branch not in SINGULAR_BRANCHES:
            raise InputError(f"singular_branch: expected one of {', '.join(SINGULAR_BRANCHES)}, "
                             f"got {self.singular_branch!r}")
        if not (np.isfinite(self.singular_tol) and self.singular_tol > 0):
            raise InputError(f"singular_tol: expected a positive singular-value threshold "
                             f"[units of A], got {self.singular_tol}")
        if self.rtol is not None and not (np.isfinite(self.rtol) and 0 < self.rtol < 1):
            raise InputError(f"rtol: expected a relative tolerance in (0, 1), got {self.rtol}")
        if not (np.isfinite(self.atol) and self.atol > 0):
            raise InputError(f"atol: expected a positive absolute tolerance, got {self.atol}")
        if self.ivp_method not in IVP_METHODS:
            raise InputError(f"ivp_method: expected one of {', '.join(IVP_METHODS)}, got "
                             f"{self.ivp_method!r}")

    @property
    def adaptive(self) -> bool:
        return self.rtol is not None


@dataclass(frozen=True)
class ExternalWrench:
    """A force and torque applied on a body at the origin of one of its frames.

    Parameters
    ----------
    frame : str
        Frame of the body the wrench acts on (applied at the frame's origin).
    wrench : (6,) or callable ``wrench(t) -> (6,)``
        ``[fx, fy, fz, tx, ty, tz]`` in world axes [N, N m]; a callable is evaluated at the
        start of each step (zero-order hold, like the input).
    """

    frame: str
    wrench: Callable[[float], np.ndarray] | Sequence[float] | np.ndarray

    def value(self, t: float) -> np.ndarray:
        w = self.wrench(t) if callable(self.wrench) else self.wrench
        return as_vector(w, 6, f"wrench on {self.frame!r}")


def _q_names(model: MultibodyModel) -> tuple[str, ...]:
    pm = model.pin_model
    names = []
    for jid in range(1, pm.njoints):
        nq = pm.joints[jid].nq
        names.extend([pm.names[jid]] if nq == 1 else [f"{pm.names[jid]}.{k}" for k in range(nq)])
    return tuple(names)


@dataclass(frozen=True)
class SimulationResult:
    """Samples of a simulation run (python-control's one-result-type habit).

    Attributes
    ----------
    t : (N,) [s]; q : (N, nq); v : (N, nv)
    tau : (N, nv) generalized input applied from each sample on [N m | N]
    energy : (N,) total mechanical energy T + V (gravity and springs) [J]
    success : bool; message : str
    nsteps : int  accepted integration steps
    wall_time : float [s]
    names : tuple of str  coordinate names (v)
    lam : (N, m) minimum-norm constraint multipliers at each sample [N | N m] (Aghili 2005
        Remark 4); zero columns for an open chain
    lam_labels : tuple of str  one label per row (``Constraints.labels``)
    residual : (N,) ``max |phi(q)|`` of the holonomic rows [m | rad] (mixed units: the
        largest entry of either kind)
    velocity_residual : (N,) ``max |A(q) v|`` of all rows, Pfaffian ones included
        [m/s | rad/s]
    nrejected : int or None  rejected steps (0 with fixed steps; None when unknown)
    nprojections : int  manifold projections (initial one included)
    newton_iterations : int  Newton iterations of all projections
    nfev : int  evaluations of the dynamics
    mode : str  ``"fixed"`` or ``"adaptive"``
    q_names : tuple of str  one name per entry of q
    nsingular : int  singular configurations bridged (adaptive mode, ``singular_branch =
        "continue"``; see the module notes)
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
    lam: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    lam_labels: tuple[str, ...] = field(default=())
    residual: np.ndarray = field(default_factory=lambda: np.zeros(0))
    velocity_residual: np.ndarray = field(default_factory=lambda: np.zeros(0))
    nrejected: int | None = 0
    nprojections: int = 0
    newton_iterations: int = 0
    nfev: int = 0
    mode: str = "fixed"
    q_names: tuple[str, ...] = field(default=())
    nsingular: int = 0

    @property
    def realtime_factor(self) -> float:
        """Simulated seconds per wall-clock second."""
        span = float(self.t[-1] - self.t[0]) if self.t.size else 0.0
        return span / self.wall_time if self.wall_time > 0 else float("inf")

    @property
    def max_residual(self) -> float:
        """Largest closure residual over the samples [m | rad] (0 without closures)."""
        return float(np.max(self.residual)) if self.residual.size else 0.0

    @property
    def max_velocity_residual(self) -> float:
        """Largest ``|A v|`` over the samples [m/s | rad/s] (0 without constraints)."""
        return float(np.max(self.velocity_residual)) if self.velocity_residual.size else 0.0

    @property
    def energy_drift(self) -> float:
        """``max |E(t) - E(0)| / max |E(t)|``: relative energy drift (meaningful when no input,
        damper or external force does work)."""
        if self.energy.size == 0:
            return 0.0
        scale = float(np.max(np.abs(self.energy)))
        dev = float(np.max(np.abs(self.energy - self.energy[0])))
        return dev / scale if scale > 0 else dev

    def columns(self) -> list[str]:
        """CSV header: t, q.<joint>, v.<joint>, lambda.<row label>, residual, [velocity_residual,]
        energy."""
        cols = ["t"] + [f"q.{n}" for n in self.q_names] + [f"v.{n}" for n in self.names]
        cols += [f"lambda.{lab}" for lab in self.lam_labels] + ["residual"]
        if self.lam_labels:
            cols.append("velocity_residual")
        return cols + ["energy"]

    def table(self) -> np.ndarray:
        """(N, len(columns())) array of the samples."""
        parts = [self.t[:, None], self.q, self.v, self.lam, self.residual[:, None]]
        if self.lam_labels:
            parts.append(self.velocity_residual[:, None])
        return np.hstack(parts + [self.energy[:, None]])

    def to_csv(self, path: str | Path) -> Path:
        """One row per output sample (units: s, rad | m, rad/s | m/s, N | N m, m | rad, J)."""
        path = Path(path)
        with path.open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(self.columns())
            writer.writerows(self.table().tolist())
        return path

    def summary(self, dissipative: bool = False) -> str:
        """A few lines: outcome, counters, residuals, energy drift, realtime factor.

        ``dissipative``: the model has dampers, so its energy change is no drift (nor is it
        where inputs act: ``tau`` not zero)."""
        rej = "unknown" if self.nrejected is None else str(self.nrejected)
        span = float(self.t[-1] - self.t[0]) if self.t.size else 0.0
        lines = [
            f"{'ok' if self.success else 'FAILED'}: {self.message}",
            f"simulated    {span:.6g} s in {self.wall_time:.3g} s wall "
            f"({self.realtime_factor:.3g} simulated s per wall s), {self.t.size} samples",
            f"steps        {self.nsteps} accepted, {rej} rejected ({self.mode}), "
            f"{self.nfev} dynamics evaluations",
        ]
        if self.lam_labels:
            lines += [
                f"projections  {self.nprojections}, {self.newton_iterations} Newton iterations"
                + (f", {self.nsingular} singular configuration(s) bridged"
                   if self.nsingular else ""),
                f"residual     max |phi| = {self.max_residual:.3g} (m | rad), "
                f"max |A v| = {self.max_velocity_residual:.3g} (m/s | rad/s)",
            ]
        lines.append(self._energy_line(dissipative))
        return "\n".join(lines)

    def _energy_line(self, dissipative: bool) -> str:
        """The change of E = T + V in J; a relative drift only where it checks conservation:
        E not zero everywhere, no input and no damper doing work."""
        if not self.energy.size:
            return "energy       -"
        dev = float(np.max(np.abs(self.energy - self.energy[0])))
        line = f"energy       E(0) = {self.energy[0]:.6g} J, max |E - E(0)| = {dev:.3g} J"
        if dissipative or np.any(self.tau != 0.0):
            return line + " (inputs or dampers do work: a change, not a drift)"
        if np.any(self.energy != 0.0):
            return line + f", relative drift {self.energy_drift:.3g}"
        return line + " (zero energy throughout: no relative drift)"

    def plot(self, path: str | Path, title: str = "", model: MultibodyModel | None = None
             ) -> Path:
        """PNG: joint positions, end-effector position, residual (log axis), energy drift.

        With ``model``, revolute angles are wrapped to (-pi, pi] (a spinning crank stays
        readable) and the world coordinates of ``model.end_effector`` that move get a panel
        (the slider position of the slider-crank).  The residual panel is drawn for
        constrained runs only; legends sit right of the axes, off the data.
        """
        from .plotting import (
            engineering_scale,
            legend_outside,
            plain_axis,
            save_figure,
            subplots,
            wrap_angle,
        )

        revolute = set()
        ee = None
        if model is not None:
            pm = model.pin_model
            for jid in range(1, pm.njoints):
                j = pm.joints[jid]
                if j.nq == 1 and "R" in j.shortname() and "P" not in j.shortname():
                    revolute.add(j.idx_q)
            if model.end_effector is not None and self.t.size:
                fid = model.frame_id(model.end_effector)
                data = pm.createData()
                pos = np.zeros((self.t.size, 3))
                for i, qk in enumerate(self.q):
                    pin.forwardKinematics(pm, data, qk)
                    pos[i] = pin.updateFramePlacement(pm, data, fid).translation
                moving = [k for k in range(3) if np.ptp(pos[:, k]) > 1e-9]
                ee = (pos, moving) if moving else None
        panels = ["q"] + (["ee"] if ee is not None else []) + (
            ["residual"] if self.lam_labels else []) + ["energy"]
        fig, axes = subplots(len(panels), 1, figsize=(10, 2.6 * len(panels) + 0.6), sharex=True)
        ax = axes[0]
        for k, name in enumerate(self.q_names):
            y = wrap_angle(self.q[:, k]) if k in revolute else self.q[:, k]
            ax.plot(self.t, y, lw=1.1, label=name)
        ax.set_ylabel("q [rad | m]" + ("\n(angles wrapped to ±π)" if revolute else ""))
        if len(self.q_names) <= 12:
            legend_outside(ax)
        if ee is not None:
            ax = axes[panels.index("ee")]
            pos, moving = ee
            for k in moving:
                ax.plot(self.t, pos[:, k], lw=1.1, label=f"{model.end_effector}.{'xyz'[k]}")
            ax.set_ylabel(f"{model.end_effector}\nposition [m]")
            legend_outside(ax)
        if self.lam_labels:
            ax = axes[panels.index("residual")]
            floor = 1e-17  # zero residuals on a log axis
            ax.semilogy(self.t, np.maximum(self.residual, floor), lw=1.1,
                        label="max |phi| [m | rad]")
            ax.semilogy(self.t, np.maximum(self.velocity_residual, floor), lw=1.1,
                        label="max |A v| [m/s | rad/s]")
            ax.set_ylabel("residual")
            legend_outside(ax)
        ax = axes[-1]
        drift = self.energy - self.energy[0] if self.energy.size else self.energy
        factor, unit = engineering_scale(drift, "J")
        ax.plot(self.t, drift * factor, lw=1.1)
        plain_axis(ax)
        ax.set_ylabel(f"E(t) - E(0) [{unit}]")
        ax.set_xlabel("t [s]")
        for a in axes:
            a.grid(alpha=0.3)
        fig.suptitle(title
                     or ("simulation" + ("" if self.success else f" (FAILED: {self.message})")),
                     fontsize=10)
        return save_figure(fig, path)


class Simulator:
    """Fixed-step integrator of a model: open chain, or constrained with manifold projection.

    Parameters
    ----------
    model : MultibodyModel
    config : SimulatorConfig
    constraints : Constraints, optional
        Default: the closures of the model YAML (none: the open-chain integrator, which is
        pinocchio's ``aba`` in a Runge-Kutta loop).  Pass one to add Pfaffian rows
        (:func:`multibody_dynamics.rolling.model_constraints`).
    wrenches : sequence of ExternalWrench, optional
    project_default : bool, optional
        True (default): the state at construction is the model's default, projected onto the
        constraint manifold (:meth:`reset` without arguments; left unprojected when that
        configuration cannot be assembled).  False: the unprojected default, for a caller that
        calls :meth:`reset` with its own state before stepping (as :func:`simulate` does: the
        projection of a default configuration that is not assembled costs a full Newton run,
        30 iterations, about 2 ms on four_bar).

    Attributes
    ----------
    q, v, t : current state [rad | m, rad/s | m/s, s]
    nsteps, nprojections, newton_iterations, nfev, nsingular : counters since construction
    residual : float  ``||phi(q)||_inf`` after the last projection [m | rad]
    """

    def __init__(self, model: MultibodyModel, config: SimulatorConfig | None = None,
                 constraints: Constraints | None = None,
                 wrenches: Sequence[ExternalWrench] = (), *, project_default: bool = True):
        self.model = model
        self.config = config or SimulatorConfig()
        self.dynamics = RigidDynamics(model)
        self._pm = model.pin_model
        if constraints is None and model.closures:
            constraints = Constraints(model)
        self.constraints = constraints if constraints is not None and constraints.n_rows else None
        self.projected = None
        if self.constraints is not None:
            self.projected = ProjectedDynamics(model, self.constraints,
                                               self.config.projection or ProjectionSettings())
        self.wrenches = tuple(wrenches)
        for w in self.wrenches:
            model.frame_id(w.frame)  # FrameNotFound now, not in the loop
        self._wdata = self._pm.createData() if self.wrenches else None
        self._tau_ext = None
        base = self.projected.acceleration_as_written if self.projected is not None else \
            self.dynamics.forward_dynamics
        # the open chain without wrenches calls RigidDynamics directly: no extra Python layer
        # in the 1 kHz loop of the ROS simulator node
        self._accel = self._accel_with_wrenches if self.wrenches else base
        self._base_accel = base
        self.nsteps = self.nprojections = self.newton_iterations = self.nfev = 0
        self.nsingular = 0
        self.residual = 0.0
        self._fast = None  # FastStepper, built on the first fixed step that can use it
        self._fast_config = None
        self.q, self.v, self.t = model.q_initial.copy(), np.zeros(model.nv), 0.0
        if project_default:
            try:
                self.reset()
            except SolverError:  # rest configuration not assembled: the caller's reset decides
                pass

    @property
    def constrained(self) -> bool:
        return self.constraints is not None

    def reset(self, q=None, v=None, t: float = 0.0):
        """Set the state (default: the model's ``q_initial``, at rest: its
        ``initial_positions``, else the spring rest configuration).

        For a constrained model the state is projected onto the manifold and v onto null(A)
        first.  Raises :class:`SolverError` if the configuration cannot be projected.
        """
        self.q = self.model.q_initial.copy() if q is None else require_finite(
            as_vector(q, self.model.nq, "q0"), "q0").copy()
        self.v = np.zeros(self.model.nv) if v is None else require_finite(
            as_vector(v, self.model.nv, "v0"), "v0").copy()
        self.t = float(t)
        if self.constrained:
            self.q, self.v = self._project(self.q, self.v, "the initial state")

    def _accel_with_wrenches(self, q, v, tau):
        return self._base_accel(q, v, tau + self._wrench_forces(q))

    def _wrench_forces(self, q) -> np.ndarray:
        """Generalized force ``sum J^T w`` of the held wrenches at q (nv,)."""
        pm, data = self._pm, self._wdata
        pin.computeJointJacobians(pm, data, q)
        pin.updateFramePlacements(pm, data)
        out = np.zeros(self.model.nv)
        for w, val in zip(self.wrenches, self._tau_ext):
            J = pin.getFrameJacobian(pm, data, self.model.frame_id(w.frame), _LWA)
            out += J.T @ val
        return out

    def _project(self, q, v, what: str, t: float | None = None):
        """Newton projection of q onto phi = 0 (Aghili 2005 eq. 39), then v <- P v."""
        t = self.t if t is None else t
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
            raise SolverError(f"state became NaN/inf at t = {t:.6g} s")
        cfg = self.config
        res = self.projected.project_position(q, cfg.position_tol, cfg.max_newton_iter)
        self.nprojections += 1
        self.newton_iterations += res.iterations
        if not res.success:
            raise SolverError(f"projection of {what} onto the constraint manifold failed at "
                              f"t = {t:.6g} s: {res.message}")
        self.residual = res.residual
        if cfg.project_velocity:
            v = self.projected.project_velocity(res.q, v, cfg.velocity_metric)
        return res.q, v

    def fast_stepper(self):
        """The compiled fixed step (:class:`~multibody_dynamics.fast_step.FastStepper`) of this
        simulator, or None where it does not apply or ``config.compiled`` is False."""
        if self._fast_config is not self.config:
            from .fast_step import FastStepper

            self._fast_config = self.config
            self._fast = FastStepper.build(self) if self.config.compiled else None
        return self._fast

    def step(self, tau, dt: float | None = None):
        """Advance one step with ``tau`` (nv,) held constant; returns (q, v).

        Constrained models: the new state is projected onto the manifold (positions) and onto
        null(A) (velocities); :class:`SolverError` if the projection fails (the state is then
        left unchanged).  The compiled step is used where it applies (``config.compiled``); a
        step it cannot complete is repeated by the reference path, which reports the failure.
        """
        # the repeated path (1 kHz loops): the compiled step with its 7 arguments, tau checked
        # by three attribute comparisons here (shape, dtype, layout) and for NaN/inf in the
        # kernel; anything else goes through as_vector first
        fast = self._fast if self._fast_config is self.config else self.fast_stepper()
        if fast is not None:
            if tau.__class__ is not np.ndarray or tau.dtype is not _F8 or \
                    tau.shape != fast.shape or not tau.flags.c_contiguous:
                tau = np.ascontiguousarray(as_vector(tau, self.model.nv, "tau"))
            h = fast.dt if dt is None else dt
            q, v = self.q.copy(), self.v.copy()
            status, its, err = fast.step_kernel(q, v, tau, self.t, h, fast.ip, fast.fp)
            if status == 0:
                self.nfev += fast.nfev_step
                if fast.closed:
                    self.nprojections += 1
                    self.newton_iterations += its
                    self.residual = err
                self.q, self.v = q, v
                self.t += h
                self.nsteps += 1
                return q, v
            # BAD_INPUT raises here; a step the kernel stopped is repeated by the reference path
            # to report the failure with its usual message
        h = self.config.dt if dt is None else dt
        tau = as_vector(tau, self.model.nv, "tau")
        if not np.all(np.isfinite(tau)):
            raise InputError(f"tau: NaN/inf input at t = {self.t:.6g} s (indices "
                             f"{np.flatnonzero(~np.isfinite(tau))[:5].tolist()}); the state "
                             "is left unchanged")
        if self.wrenches:
            self._tau_ext = [w.value(self.t) for w in self.wrenches]
        q, v = self.q, self.v
        if self.config.method == "semi_implicit_euler":
            v_new = v + h * self._accel(q, v, tau)
            q_new = pin.integrate(self._pm, q, h * v_new)
            self.nfev += 1
        else:
            q_new, v_new = self._rk4(q, v, tau, h)[:2]
        if self.projected is not None:
            q_new, v_new = self._project(q_new, v_new, "the new state", self.t + h)
        self.q, self.v, self.t = q_new, v_new, self.t + h
        self.nsteps += 1
        return self.q, self.v

    def _rk4(self, q, v, tau, h):
        """One classical Runge-Kutta step on the manifold from (q, v) with ``tau`` held;
        returns ``(q_new, v_new, a)`` with ``a`` the accelerations at (q, v)."""
        f, pm = self._accel, self._pm
        a1 = f(q, v, tau)
        q2 = pin.integrate(pm, q, 0.5 * h * v)
        v2 = v + 0.5 * h * a1
        a2 = f(q2, v2, tau)
        q3 = pin.integrate(pm, q, 0.5 * h * v2)
        v3 = v + 0.5 * h * a2
        a3 = f(q3, v3, tau)
        q4 = pin.integrate(pm, q, h * v3)
        v4 = v + h * a3
        a4 = f(q4, v4, tau)
        self.nfev += 4
        return (pin.integrate(pm, q, h / 6.0 * (v + 2 * v2 + 2 * v3 + v4)),
                v + h / 6.0 * (a1 + 2 * a2 + 2 * a3 + a4), a1)

    def energy(self) -> float:
        """Total mechanical energy T + V (gravity and springs) at the current state [J]."""
        return self.dynamics.energy(self.q, self.v)

    def constraint_forces(self, tau):
        """Constrained dynamics at the current state with input ``tau`` (nv,) (plus the
        current external wrenches): :class:`~multibody_dynamics.projection.ForwardDynamicsResult`
        with ``lam`` (m,) [N | N m] and ``f_c`` (nv,).  None for an open chain."""
        if self.projected is None:
            return None
        tau = as_vector(tau, self.model.nv, "tau")
        if self.wrenches:
            self._tau_ext = [w.value(self.t) for w in self.wrenches]
            tau = tau + self._wrench_forces(self.q)
        return self.projected.forward_dynamics_result(self.q, self.v, tau)

    def sample(self, tau) -> tuple[np.ndarray, float, float]:
        """``(lam, max |phi|, max |A v|)`` at the current state (empty/zero for an open chain)."""
        if self.projected is None:
            return np.zeros(0), 0.0, 0.0
        c = self.constraints
        fd = self.constraint_forces(tau)
        phi = c.residual(self.q) if c.n_holonomic else np.zeros(0)
        Av = c.jacobian(self.q) @ self.v
        return (fd.lam, float(np.max(np.abs(phi))) if phi.size else 0.0,
                float(np.max(np.abs(Av))))


class _Recorder:
    """Preallocated sample storage (grown when an adaptive run needs more)."""

    def __init__(self, n, model, m, on_sample=None):
        self.on_sample = on_sample  # called with (t, q) of each sample once recorded
        self.t = np.empty(n)
        self.q, self.v = np.empty((n, model.nq)), np.empty((n, model.nv))
        self.tau, self.e = np.zeros((n, model.nv)), np.empty(n)
        self.lam, self.res, self.vres = np.zeros((n, m)), np.zeros(n), np.zeros(n)
        self.k = 0
        self.passed = 0  # samples handed to on_sample so far

    def add(self, sim: Simulator, tau, constrained: bool):
        k = self.k
        if k == self.t.size:
            for name in ("t", "q", "v", "tau", "e", "lam", "res", "vres"):
                a = getattr(self, name)
                setattr(self, name, np.concatenate([a, np.zeros_like(a)]))
        fast = sim.fast_stepper() if not sim.config.adaptive else None
        if fast is not None:  # energy, multipliers and residuals from the compiled kernel
            e, lam, res, vres = fast.sample(sim.q, sim.v, as_vector(tau, sim.model.nv, "tau"))
            self.t[k], self.q[k], self.v[k], self.tau[k], self.e[k] = sim.t, sim.q, sim.v, tau, e
            if constrained:
                self.lam[k], self.res[k], self.vres[k] = lam, res, vres
        else:
            self.t[k], self.q[k], self.v[k] = sim.t, sim.q, sim.v
            self.tau[k], self.e[k] = tau, sim.energy()
            if constrained:
                self.lam[k], self.res[k], self.vres[k] = sim.sample(tau)
        self.k = k + 1
        self.notify()

    def notify(self) -> None:
        """Pass the samples recorded and not yet passed to ``on_sample`` (if any).  A sample
        counts as passed once its call has returned, so that after a Ctrl-C landing in that
        call (or in the kernel recording a chunk) one more ``notify`` passes every kept one."""
        if self.on_sample is not None:
            while self.passed < self.k:
                self.on_sample(self.t[self.passed], self.q[self.passed])
                self.passed += 1


def simulate(model: MultibodyModel, duration: float, q0=None, v0=None,
             tau: Callable[[float, np.ndarray, np.ndarray], np.ndarray] | np.ndarray | None = None,
             config: SimulatorConfig | None = None, progress: bool = False,
             constraints: Constraints | None = None, wrenches: Sequence[ExternalWrench] = (),
             output_dt: float | None = None,
             on_sample: Callable[[float, np.ndarray], None] | None = None) -> SimulationResult:
    """Simulate ``duration`` seconds, with fixed steps or adaptively (``config.rtol``).

    Parameters
    ----------
    model : MultibodyModel
    duration : float
        [s] (> 0).
    q0 : (nq,), optional; v0 : (nv,), optional
        Initial state (default: the model's ``q_initial``, at rest); projected onto the manifold
        first for a constrained model.
    tau : (nv,) constant, or callable ``tau(t, q, v) -> (nv,)``
        Generalized input [N m | N], held over each step (fixed steps) or each output
        interval (adaptive); default zero.
    config : SimulatorConfig, optional
    progress : bool
        tqdm progress bar on stderr.
    constraints : Constraints, optional
        Default: the model's closures; pass one with Pfaffian rows for rolling contacts.
    wrenches : sequence of ExternalWrench, optional
    output_dt : float, optional
        Interval of the output samples [s]: default every step (fixed) or 0.01 s (adaptive);
        with fixed steps it is rounded to a whole number of steps.
    on_sample : callable ``on_sample(t, q)``, optional
        Called in the simulating thread with each output sample once it is recorded (``t``
        [s], ``q`` (nq,), read-only use), e.g. to stream the motion to a live viewer
        (:mod:`multibody_control.animation.live`); an exception it raises ends the run
        (Ctrl-C in it is an interrupt like any other).

    Returns
    -------
    SimulationResult
        Failures (initial projection, NaN, divergence, projection, step-size collapse) are
        ``success = False`` with the samples computed before.

    Raises
    ------
    SimulationInterrupted
        On Ctrl-C (a KeyboardInterrupt), with the samples computed before as its ``result``.
    """
    cfg = config or SimulatorConfig()
    if not (np.isfinite(duration) and duration > 0):
        raise InputError(f"duration: expected a positive time in s, got {duration}")
    if output_dt is not None and not (np.isfinite(output_dt) and output_dt > 0):
        raise InputError(f"output_dt: expected a positive interval in s, got {output_dt}")
    const = np.zeros(model.nv) if tau is None else (None if callable(tau) else require_finite(
        as_vector(tau, model.nv, "tau"), "tau"))
    q_init = None if q0 is None else require_finite(as_vector(q0, model.nq, "q0"), "q0")
    v_init = None if v0 is None else require_finite(as_vector(v0, model.nv, "v0"), "v0")
    start = time.perf_counter()
    sim = Simulator(model, cfg, constraints, wrenches, project_default=False)  # _run_on resets
    return _run_on(sim, duration, q_init, v_init, tau, const, output_dt, progress, start,
                   on_sample)


def _check_output_multiple(output_dt: float, dt: float) -> None:
    """The fixed-step samples fall on the steps: ``output_dt`` [s] must be a whole number of
    steps ``dt`` [s] (it was rounded silently: 0.1 ms asked with 1 ms steps recorded every
    1 ms, 2.5 ms every 2 ms)."""
    ratio = output_dt / dt
    if ratio < 1.0 - 1e-9 or abs(ratio - round(ratio)) > 1e-9 * ratio:
        near = sorted({max(1, int(np.floor(ratio))) * dt, max(1, int(np.ceil(ratio))) * dt})
        raise InputError(f"output_dt: {output_dt:g} s is not a whole number of steps of "
                         f"{dt:g} s (the fixed-step samples fall on steps); expected e.g. "
                         f"{' or '.join(f'{x:g}' for x in near)} s, or a smaller step")


def _run_on(sim: Simulator, duration: float, q_init, v_init, tau, const, output_dt, progress,
            start: float, on_sample=None) -> SimulationResult:
    """The run of :func:`simulate` on ``sim`` (arguments checked by the caller): reset to
    ``(q_init, v_init)`` (None: the model's default), integrate, record.  Shared with
    :func:`multibody_dynamics.batch.simulate_batch`, which reuses one simulator."""
    model, cfg = sim.model, sim.config
    if output_dt is not None and not cfg.adaptive:
        _check_output_multiple(output_dt, cfg.dt)
    initial_error = None
    try:
        sim.reset(q_init, v_init)
    except SolverError as exc:
        initial_error = str(exc)
        sim.q = model.q_initial.copy() if q_init is None else q_init.copy()
        sim.v = np.zeros(model.nv) if v_init is None else v_init.copy()
        sim.t = 0.0
    constrained = sim.constrained
    labels = sim.constraints.labels if constrained else ()

    def u_at(t, q, v):
        return const if const is not None else as_vector(tau(t, q, v), model.nv, "tau(t, q, v)")

    if cfg.adaptive:
        every, n_out = None, int(np.ceil(duration / (output_dt or 0.01) - 1e-9))
        t_out = np.linspace(0.0, duration, n_out + 1) if output_dt is None else \
            np.minimum(np.arange(n_out + 1) * output_dt, duration)
    else:
        n = int(round(duration / cfg.dt))
        every = 1 if output_dt is None else max(1, int(round(output_dt / cfg.dt)))
        n_out = -(-n // every)
    rec = _Recorder(n_out + 1, model, len(labels), on_sample)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=round(duration, 9), desc="simulate", unit="s", leave=False,
                   bar_format="{l_bar}{bar}| {n:.3g}/{total:.3g} s [{elapsed}<{remaining}]")
    success, message, nrejected = True, "completed", 0
    interrupted = False
    try:
        if initial_error is not None:
            rec.add(sim, np.zeros(model.nv), False)
            success, message = False, initial_error
        else:
            u = u_at(sim.t, sim.q, sim.v)
            rec.add(sim, u, constrained)
            if cfg.adaptive:
                success, message, nrejected = _run_adaptive(sim, t_out, u_at, rec, bar)
            else:
                success, message = _run_fixed(sim, n, every, u_at, rec, bar, const)
    except INTERRUPTS as exc:  # Ctrl-C: keep what was computed
        reraise_unless_interrupt(exc)
        interrupted = True
        success, message = False, (f"interrupted at t = {sim.t:.6g} s; the samples recorded "
                                   "until then are kept")
    finally:
        if bar is not None:
            bar.close()
    if interrupted:
        rec.notify()  # the kept samples the interrupt kept from the listener
    wall = time.perf_counter() - start
    m = rec.k
    result = SimulationResult(
        rec.t[:m], rec.q[:m], rec.v[:m], rec.tau[:m], rec.e[:m], success, message, sim.nsteps,
        wall, model.coordinate_names, rec.lam[:m], labels, rec.res[:m], rec.vres[:m], nrejected,
        sim.nprojections, sim.newton_iterations, sim.nfev, "adaptive" if cfg.adaptive else "fixed",
        _q_names(model), sim.nsingular)
    if interrupted:
        raise SimulationInterrupted(result)
    return result


class SimulationInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`simulate`: still an interrupt for the caller, carrying the partial
    :class:`SimulationResult` (``success`` False, the samples recorded before) as ``result``."""

    def __init__(self, result: SimulationResult):
        super().__init__(result.message)
        self.result = result


def _check(sim: Simulator) -> str | None:
    """Why the state is unusable, or None."""
    if not (np.all(np.isfinite(sim.q)) and np.all(np.isfinite(sim.v))):
        return f"state became NaN/inf at t = {sim.t:.6g} s"
    if np.max(np.abs(sim.v)) > sim.config.max_speed:
        return f"diverged at t = {sim.t:.6g} s: |v| > {sim.config.max_speed:g} (max_speed)"
    return None


def _run_fixed(sim: Simulator, n: int, every: int, u_at, rec: _Recorder, bar, const=None):
    constrained = sim.constrained
    u = rec.tau[0]
    k0 = 0
    fast = sim.fast_stepper() if const is not None else None
    if fast is not None:  # constant input: whole runs of steps in the compiled kernel
        # a live listener gets the kernel's samples after each chunk of 0.1 s of result time
        chunk = n if bar is None and rec.on_sample is None else max(
            1, int(round(0.1 / sim.config.dt)))
        rk4 = sim.config.method == "rk4"
        while k0 < n:
            done, ok, q, v, t, its, err = fast.run(sim.q, sim.v, u, sim.t, min(chunk, n - k0),
                                                   every, k0, n, rec)
            rec.notify()
            if done:
                sim.q, sim.v, sim.t = q, v, t
                sim.nsteps += done
                sim.nfev += done * (4 if rk4 else 1)
                if constrained:
                    sim.nprojections += done
                    sim.newton_iterations += its
                    sim.residual = err
                if bar is not None:
                    bar.update(round(sim.t - bar.n, 9))
            k0 += done
            if not ok:  # the reference path below repeats the step and reports
                break
    for k in range(k0, n):
        if k:
            u = u_at(sim.t, sim.q, sim.v)
        try:
            sim.step(u)
        except MultibodyError as exc:
            return False, str(exc)
        why = _check(sim)
        if why is not None:
            return False, why
        if (k + 1) % every == 0 or k + 1 == n:
            rec.add(sim, u_at(sim.t, sim.q, sim.v) if constrained else u, constrained)
            if bar is not None:
                bar.update(round(sim.t - bar.n, 9))
    return True, f"completed {n} steps of {sim.config.dt:g} s ({sim.config.method})"


class _SingularMonitor:
    """Distance of the state to the singular set of A (``singular_branch = "continue"``).

    The generic rank ``r`` of A is the largest rank seen so far (rank decision of the
    projection settings); the state is near a singular configuration when the r-th singular
    value of A drops below the threshold of :attr:`SimulatorConfig.singular_tol` (or the
    drift-dependent one, whichever is larger).
    """

    def __init__(self, sim: Simulator):
        self.sim = sim
        self.c = sim.constraints
        self.pfaffian = self.c.n_rows > self.c.n_holonomic
        s = sim.projected.settings
        self.rank_atol, self.rank_rtol = s.rank_atol, s.rank_rtol
        self.tol = sim.config.singular_tol
        self.rank = 0

    def sigma(self, q) -> tuple[float, float]:
        """``(sigma_r, threshold)`` at q; ``(inf, 0)`` while no constraint has had rank."""
        c = self.c
        if self.pfaffian or not c.n_holonomic:
            A = c.jacobian(q)
            phi = c.residual(q) if c.n_holonomic else np.zeros(0)
        else:
            phi, A = c.residual_and_jacobian(q)
        s = lapack.dgesvd(A, compute_uv=0)[1]
        if s.size:
            r = int(np.count_nonzero(s > max(self.rank_atol, self.rank_rtol * s[0])))
            self.rank = max(self.rank, r)
        if self.rank == 0:
            return np.inf, 0.0
        thr = self.tol
        if phi.size:
            # the level set phi = drift turns from one branch to the other at a distance of
            # about sqrt(2 |phi| / |dA/dq|) from the crossing, where sigma ~ sqrt(2 |phi| sigma_1)
            thr = max(thr, 10.0 * np.sqrt(2.0 * float(np.max(np.abs(phi))) * s[0]))
        return float(s[self.rank - 1]), thr

    def rate(self, q, v) -> tuple[float, float]:
        """``(g, dg/dt)`` with ``g = u^T A(q) w`` (u, w: the r-th singular vectors at q, so g is
        the r-th singular value there, but keeps its sign through the crossing) and its rate
        along v by a central difference on the manifold (displacement 1e-6 rad | m)."""
        c, pm, r = self.c, self.sim._pm, self.rank
        U, s, Vt, info = lapack.dgesvd(c.jacobian(q), full_matrices=0)
        speed = float(np.max(np.abs(v)))
        if info != 0 or r == 0 or r > s.size or not speed > 0:
            return (float(s[r - 1]) if 0 < r <= s.size else 0.0), 0.0
        u, w = U[:, r - 1], Vt[r - 1]
        eta = 1e-6 / speed
        dA = c.jacobian(pin.integrate(pm, q, eta * v)) - c.jacobian(pin.integrate(pm, q, -eta * v))
        return float(s[r - 1]), float(u @ dA @ w) / (2.0 * eta)


def _run_adaptive(sim: Simulator, t_out: np.ndarray, u_at, rec: _Recorder, bar):  # noqa: C901
    """Adaptive integration between output samples, projection at each sample; with
    ``singular_branch = "continue"`` also at the entry of the neighbourhood of a singular
    configuration, which one RK4 step then bridges (module notes)."""
    from scipy import integrate

    cfg, pm, nv = sim.config, sim._pm, sim.model.nv
    solver_cls = getattr(integrate, cfg.ivp_method)
    euclidean = sim.model.nq == nv and all(pm.joints[j].nq == 1 for j in range(1, pm.njoints))
    mon = _SingularMonitor(sim) if sim.constrained and cfg.singular_branch == "continue" else None
    h_prev, rejected = None, 0
    k, u, bridges = 1, None, 0  # next output sample; input held over the interval; in a row
    stopped = False  # the last segment stopped at the entry of a singular neighbourhood

    def chart(q_ref, delta):
        return q_ref + delta if euclidean else pin.integrate(pm, q_ref, delta)

    def hold(t, q, v):
        """The input (and external wrenches) from the state at t, held until the next sample."""
        if sim.wrenches:
            sim._tau_ext = [w.value(t) for w in sim.wrenches]
        return u_at(t, q, v)

    def record():
        rec.add(sim, u_at(sim.t, sim.q, sim.v) if sim.constrained else u, sim.constrained)
        if bar is not None:
            bar.update(round(sim.t - bar.n, 9))

    while k < t_out.size:
        t1 = t_out[k]
        if u is None:
            u = hold(sim.t, sim.q, sim.v)
        sig_prev, watch = np.inf, mon is not None  # watch: may stop at a singular neighbourhood
        if mon is not None:
            sig_prev, thr = mon.sigma(sim.q)
            if (stopped or sig_prev < thr) and bridges < 3:
                out = _bridge(sim, mon, u, h_prev, t_out, k, euclidean, u_at, rec, bar)
                if isinstance(out, str):
                    return False, out, rejected
                if out is not None:
                    k, u_new = out
                    u = u_new if u_new is not None else u
                    bridges, stopped = bridges + 1, False
                    continue
                # not approaching fast enough to bridge: take at least one ordinary step
                watch = not stopped
        bridges, stopped = 0, False
        if sim.t >= t1:  # stopped on the sample itself and not bridged
            record()
            k, u = k + 1, None
            continue
        q_ref, t0 = sim.q.copy(), sim.t

        def rhs(t, y, q_ref=q_ref, u=u):
            # the configuration is q_ref (+) delta: a chart around the sample, so quaternions
            # and other nq != nv joints stay on their manifold
            delta, v = y[:nv], y[nv:]
            if euclidean:
                q, ddelta = q_ref + delta, v
            else:
                q = pin.integrate(pm, q_ref, delta)
                J = pin.dIntegrate(pm, q_ref, delta, pin.ArgumentPosition.ARG1)
                ddelta = np.linalg.solve(J, v)
            return np.concatenate([ddelta, sim._accel(q, v, u)])

        init_evals = 1 if h_prev is not None else 2  # f(t0, y0), plus one to pick the first step
        first = None if h_prev is None else min(h_prev, t1 - t0)
        solver = solver_cls(rhs, t0, np.concatenate([np.zeros(nv), sim.v]), t1, rtol=cfg.rtol,
                            atol=cfg.atol, first_step=first)
        accepted, h_before, y_stop, t_stop, nfev_steps = 0, solver.h_abs, None, None, None
        while solver.status == "running":
            h_before, t_old = solver.h_abs, solver.t
            msg = solver.step()
            if solver.status == "failed":
                return False, f"{cfg.ivp_method} failed at t = {solver.t:.6g} s: {msg}", rejected
            accepted += 1
            if not np.all(np.isfinite(solver.y)):
                break
            if not watch:
                watch = mon is not None
            elif mon is not None:
                sig, thr = mon.sigma(chart(q_ref, solver.y[:nv]))
                if sig < thr and sig_prev >= thr:  # entered: locate the entry on the step
                    nfev_steps = solver.nfev
                    sol = solver.dense_output()  # DOP853 adds 3 evaluations (counted below)

                    def excess(t, sol=sol, thr=thr, q_ref=q_ref):
                        return mon.sigma(chart(q_ref, sol(t)[:nv]))[0] - thr

                    t_stop = t_old  # the threshold grew with the drift: it was already inside
                    if excess(t_old) > 0:
                        t_stop = brentq(excess, t_old, solver.t, xtol=1e-6 * (solver.t - t_old))
                    y_stop = sol(t_stop)
                    break
                if sig < thr and sig < sig_prev:  # approaching within the neighbourhood
                    t_stop, y_stop = solver.t, solver.y
                    break
                sig_prev = sig
        # the last step is usually cut short to land on t1: its proposal before the cut is the
        # better first step of the next interval
        h_prev = max(h_before, solver.h_abs)
        attempts = ((solver.nfev if nfev_steps is None else nfev_steps) - init_evals) \
            // solver.n_stages  # dense-output evaluations are not attempts
        rejected += max(0, attempts - accepted)
        sim.nfev += solver.nfev
        sim.nsteps += accepted
        y = solver.y if y_stop is None else y_stop
        q, v = chart(q_ref, y[:nv]), y[nv:]
        sim.t = float(t1) if y_stop is None else float(t_stop)
        try:
            if sim.constrained:
                q, v = sim._project(q, v, "the state")
        except MultibodyError as exc:
            return False, str(exc), rejected
        sim.q, sim.v = q, v
        why = _check(sim)
        if why is not None:
            return False, why, rejected
        if y_stop is not None:  # the bridge starts from this projected state
            stopped = True
            continue
        record()
        k, u = k + 1, None
    return True, (f"completed {t_out.size - 1} output intervals ({cfg.ivp_method}, rtol "
                  f"{cfg.rtol:g}, atol {cfg.atol:g})"), rejected


def _bridge(sim: Simulator, mon: _SingularMonitor, u, h_ref, t_out, k, euclidean, u_at, rec, bar):
    """Carry the projected state (sim.q, sim.v), near a singular configuration and approaching
    it, across it with one RK4 step whose stages stay away from it (module notes).

    Returns None when the state does not approach the singular set fast enough to bridge
    (the caller integrates normally), an error message, or ``(k, u)``: the next output index
    after the samples interpolated inside the bridge and the input held from the end of the
    bridge on (None: unchanged).
    """
    g, rate = mon.rate(sim.q, sim.v)
    if not rate < 0:
        return None
    T = g / -rate  # time to the crossing at the current rate of approach
    H = 3.0 * T  # stages at -T, T/2 (twice) and 2T from it
    if h_ref is not None and H > 20.0 * h_ref:  # grazing or slow: not a crossing to bridge
        return None
    q0, v0, t0 = sim.q, sim.v, sim.t
    try:
        q1, v1, a0 = sim._rk4(q0, v0, u, H)
    except MultibodyError as exc:
        return f"bridge across a singular configuration failed at t = {t0:.6g} s: {exc}"
    t_b = t0 + H
    u_next = None
    if k < t_out.size and t_out[k] <= t_b:  # samples inside the bridge: cubic Hermite
        a1 = sim._accel(q1, v1, u)
        sim.nfev += 1
        pm = sim._pm
        if not euclidean:
            d1 = pin.difference(pm, q0, q1)
            dd1 = np.linalg.solve(pin.dIntegrate(pm, q0, d1, pin.ArgumentPosition.ARG1), v1)
        while k < t_out.size and t_out[k] <= t_b:
            x = (t_out[k] - t0) / H
            h00, h10 = 2 * x ** 3 - 3 * x ** 2 + 1, (x ** 3 - 2 * x ** 2 + x) * H
            h01, h11 = -2 * x ** 3 + 3 * x ** 2, (x ** 3 - x ** 2) * H
            if euclidean:
                q = h00 * q0 + h10 * v0 + h01 * q1 + h11 * v1
            else:
                q = pin.integrate(pm, q0, h10 * v0 + h01 * d1 + h11 * dd1)
            sim.t = float(t_out[k])
            try:  # the recorded sample only: the integration goes on from the bridge's end
                sim.q, sim.v = sim._project(q, h00 * v0 + h10 * a0 + h01 * v1 + h11 * a1,
                                            "a sample inside a bridge")
            except MultibodyError as exc:
                return str(exc)
            u_next = u_at(sim.t, sim.q, sim.v)
            rec.add(sim, u_next, True)
            if bar is not None:
                bar.update(round(sim.t - bar.n, 9))
            if sim.wrenches:
                sim._tau_ext = [w.value(sim.t) for w in sim.wrenches]
            k += 1
    sim.t = float(t_b)
    try:
        sim.q, sim.v = sim._project(q1, v1, "the state after a singular configuration")
    except MultibodyError as exc:
        return str(exc)
    sim.nsteps += 1
    sim.nsingular += 1
    why = _check(sim)
    if why is not None:
        return why
    return k, u_next


# |omega h| bound of the fixed-step methods on an undamped oscillator: RK4's stability region
# meets the imaginary axis at 2 sqrt(2); the semi-implicit (symplectic) Euler step is stable
# for omega h < 2 (Hairer, Lubich & Wanner, Geometric Numerical Integration, Sect. I.5)
STABLE_OMEGA_H = {"rk4": 2.0 * np.sqrt(2.0), "semi_implicit_euler": 2.0}


def stiffest_spring_omega(model: MultibodyModel, q=None) -> float:
    """Angular frequency [rad/s] of the stiffest mode of the joint springs at ``q`` (default:
    the model's start), ``sqrt(max eig(M(q)^-1 K))`` with ``K = diag(stiffness)``, damping and
    gravity left out; 0 without springs.  With loop closures it bounds the closed system's
    stiffest mode from above (the constrained eigenproblem's eigenvalues interlace)."""
    k = np.asarray(getattr(model, "stiffness", np.zeros(model.nv)), float)
    if not np.any(k > 0):
        return 0.0
    q = model.q_initial if q is None else np.asarray(q, float)
    M = RigidDynamics(model).mass_matrix(q)
    lam = np.linalg.eigvals(np.linalg.solve(M, np.diag(k)))
    return float(np.sqrt(max(0.0, float(np.max(lam.real)))))
