"""Simulation of flexible models with constant joint inputs (``multibody simulate`` for them).

Open chains (:class:`~multibody_dynamics.flexible.system.FlexibleChain`) are integrated with
an adaptive scipy method on ``x = [q, v]``; closed loops
(:class:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain`) with their own simulator
(index-1 form between projection points every :data:`PROJECTION_DT` at most, projection on the
constraint manifold there, the samples in between from the solver's dense output). The
result holds the samples, the energy and the counters, and writes CSV and PNG like the rigid
simulator's :class:`~multibody_dynamics.simulate.SimulationResult`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..deprecation import deprecated_alias
from ..errors import InputError
from ..interruptible import solve_ivp_keeping
from ..simulate import SimulationInterrupted, SimulationResult
from ..validation import check_sample_budget
from .system import FlexibleChain, _vector


@dataclass(frozen=True)
class FlexibleSimulation(SimulationResult):
    """Samples of a flexible-model run: a :class:`~multibody_dynamics.simulate.SimulationResult`
    (same fields, same ``summary``/``to_csv``/``plot`` calls) whose report shows the elastic
    coordinates.

    A subclass rather than the base type itself because the reports differ: the CSV has no
    multiplier or residual columns (``t, q.<name>, v.<name>, energy``, as before), the plot
    has a panel of elastic coordinates and none of the end effector, and the summary lists
    the peak elastic deflections instead of the projection counters.

    Attributes
    ----------
    As :class:`~multibody_dynamics.simulate.SimulationResult`, with ``names == q_names`` the
    coordinate names (joints, then ``<body>.e<k>``; ``nq == nv``), ``tau`` (N, nv) the
    generalized input ``B u`` at each sample, ``residual`` (N,) max |closure residual| [m | rad]
    before the projection at the projection points and as sampled between them (closed loops;
    zeros otherwise), ``nfev`` the right-hand-side
    evaluations, ``mode = "adaptive"``, ``nsteps = 0`` and ``nrejected = None`` (scipy's
    integrators do not report their steps); besides:
    name : str
        The model's name.
    """

    name: str = ""

    def summary(self, dissipative: bool = False) -> str:
        """A few lines: outcome, cost, energy change, closure residual, peak elastic
        coordinates (``dissipative`` is accepted for the common call; the energy line says
        when the energy is constant anyway)."""
        span = float(self.t[-1] - self.t[0]) if self.t.size else 0.0
        e0 = self.energy[0] if self.energy.size else 0.0
        change = float(np.max(np.abs(self.energy - e0))) if self.energy.size else 0.0
        rel = f" ({change / abs(e0):.3g} relative)" if abs(e0) > 1e-9 else ""
        lines = [f"{'ok' if self.success else 'FAILED'}: {self.message}",
                 f"simulated    {span:.6g} s in {self.wall_time:.3g} s wall "
                 f"({span / max(self.wall_time, 1e-12):.3g} simulated s per wall s), "
                 f"{self.t.size} samples, {self.nfev} dynamics evaluations",
                 f"energy       E(0) = {e0:.6g} J, max change {change:.3g} J{rel} "
                 "(constant only without inputs and damping)"]
        if np.any(self.residual):
            lines.append("residual     max closure residual at the samples (before projection) "
                         f"{self.residual.max():.3g}")
        ne = sum("." in n for n in self.names)
        if ne:
            peak = np.abs(self.q[:, -ne:]).max(axis=0)
            lines.append("elastic      peak |q_e| [sqrt(kg) m] " + ", ".join(
                f"{n} {p:.3g}" for n, p in zip(self.names[-ne:], peak)))
        return "\n".join(lines)

    def to_csv(self, path: str | Path) -> Path:
        """``t, q.<name>..., v.<name>..., energy`` (s, rad | m | modal, J)."""
        path = Path(path)
        cols = ["t"] + [f"q.{n}" for n in self.names] + [f"v.{n}" for n in self.names] + ["energy"]
        np.savetxt(path, np.column_stack([self.t, self.q, self.v, self.energy]), delimiter=",",
                   header=",".join(cols), comments="", fmt="%.10g")
        return path

    def plot(self, path: str | Path, title: str = "", model=None) -> Path:
        """PNG: joint coordinates, elastic coordinates (modal amplitudes, sqrt(kg) m for the
        mass-normalised modes), energy (legends right of the axes); ``model`` is accepted for
        the common call and not used."""
        from ..plotting import legend_outside, plain_axis, save_figure, subplots

        fig, axes = subplots(3, 1, figsize=(10, 8), sharex=True)
        for k, n in enumerate(self.names):
            ax = axes[1] if "." in n else axes[0]
            ax.plot(self.t, self.q[:, k], lw=1.1, label=n)
        axes[0].set_ylabel("joints [rad | m]")
        # modal amplitudes of mass-normalised shapes (multibody_dynamics.flexible.modal)
        axes[1].set_ylabel("elastic coordinates\nq_e [sqrt(kg) m]")
        axes[2].plot(self.t, self.energy, "k", lw=1.1)
        axes[2].set_ylabel("energy [J]")
        plain_axis(axes[2])  # no "+3.178" offset: the energy reads in J as it is
        for ax in axes[:2]:
            if ax.get_legend_handles_labels()[0]:
                legend_outside(ax)
        for ax in axes:
            ax.grid(alpha=0.3)
        axes[-1].set_xlabel("t [s]")
        fig.suptitle(title or f"{self.name}: simulation")
        return save_figure(fig, path)


@dataclass(frozen=True)
class ClosedSimulation(FlexibleSimulation):
    """Result of :meth:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain.simulate`: a
    :class:`FlexibleSimulation` whose ``residual`` (N,) is max |c(q)| [m | rad] at each sample,
    before the projection where the state is projected; ``constraint_error`` is its deprecated
    read-only alias."""

    constraint_error = deprecated_alias("residual", "constraint_error")


#: Largest interval [s] between two projections of a closed loop's state on its constraint
#: manifold in :func:`simulate_flexible` (the samples between them come from the solver's
#: dense output, :meth:`~multibody_dynamics.flexible.closed.ClosedFlexibleChain.simulate`):
#: the former sample interval of closed loops, now the projection interval whatever the
#: sampling (``bench/bench_flexible_closed_sampling.py`` measures the drift before it).
PROJECTION_DT = 1e-2


class FlexibleSimulationInterrupted(SimulationInterrupted):
    """Ctrl-C during :func:`simulate_flexible`: a
    :class:`~multibody_dynamics.simulate.SimulationInterrupted` (so still an interrupt for the
    caller) carrying the partial :class:`FlexibleSimulation` (``success`` False, the samples
    computed before) as ``result``."""


class TimeProgress:
    """tqdm bar over simulated time [s] on stderr, advanced by :meth:`tick` with the times at
    which an integrator evaluates the dynamics (redrawn at most every 0.5 % of ``duration``).

    Parameters
    ----------
    duration : float
        Simulated time the bar spans [s].
    enabled : bool
        False: every method does nothing.
    desc : str
        Label of the bar.
    """

    def __init__(self, duration: float, enabled: bool, desc: str = "simulate"):
        self.bar = None
        self.step = 0.005 * duration
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=round(duration, 9), desc=desc, unit="s", leave=False,
                            bar_format="{l_bar}{bar}| {n:.3g}/{total:.3g} s "
                                       "[{elapsed}<{remaining}]")

    def tick(self, t: float) -> None:
        if self.bar is not None and t - self.bar.n >= self.step:
            self.bar.update(min(t, self.bar.total) - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def simulate_flexible(model, duration: float, q0=None, v0=None, u=None, *, rtol: float = 1e-8,
                      atol: float = 1e-10, output_dt: float = 1e-2,
                      progress: bool = False,
                      on_sample: Callable[[float, np.ndarray], None] | None = None
                      ) -> FlexibleSimulation:
    """Run ``model`` (open or closed flexible model) for ``duration`` s with constant inputs ``u``.

    Parameters
    ----------
    q0, v0 : (nv,), optional
        Start (default: the neutral configuration, at rest); closed loops project it onto the
        constraint manifold first.
    u : (nu,), optional
        Joint inputs [N | N m], held constant (default zero).
    rtol, atol : DOP853 tolerances; output_dt : sample spacing [s] (closed loops: projected
        every :data:`PROJECTION_DT` at most, the samples between from the dense output)
    progress : bool
        tqdm progress bar on stderr (simulated time).
    on_sample : callable ``on_sample(t, q)``, optional
        Called with each output sample (``t`` [s], ``q`` (nv,)) as the run goes, e.g. to
        stream it to the live viewer: an open chain's samples of each adaptive step when the
        next step starts (:func:`~multibody_dynamics.interruptible.solve_ivp_keeping`), a
        closed loop's once their projection interval is integrated and its end projected;
        the values are those of the result.

    Raises
    ------
    DimensionError
        ``q0``, ``v0`` or ``u`` of the wrong shape, in the chains' wording, which names the
        argument, the expected and the given shape (``"q0 must have shape (12,), got (11,)"``;
        it replaced ``"q0: expected 12 values, got 11"``, which read "got 12" for a (2, 6)
        array).
    InputError
        ``q0``, ``v0`` or ``u`` with NaN or inf (``"u must be finite"``); ``duration`` or
        ``output_dt`` not a positive time, or more samples than fit in memory
        (:func:`~multibody_dynamics.validation.check_sample_budget`), checked before anything
        is integrated.
    """
    if not (np.isfinite(duration) and duration > 0):
        raise InputError(f"duration: expected a positive time in s, got {duration}")
    if not (np.isfinite(output_dt) and output_dt > 0):
        raise InputError(f"output_dt: expected a positive time in s, got {output_dt}")
    if output_dt < duration:  # a longer interval records the start and the end
        check_sample_budget(duration, output_dt, "simulate_flexible: duration / output_dt",
                            "pass a larger output_dt or a shorter duration")
    nv, nu = model.nv, model.nu

    def vec(x, n, what, default):
        return default if x is None else _vector(x, n, what, finite=True)

    chain = model if isinstance(model, FlexibleChain) else model.chain
    q0 = vec(q0, nv, "q0", chain.neutral())
    v0 = vec(v0, nv, "v0", np.zeros(nv))
    u = vec(u, nu, "u", np.zeros(nu))
    t = np.unique(np.r_[np.arange(0.0, duration, output_dt), duration])  # always ends at duration
    start = time.perf_counter()
    bar = TimeProgress(t[-1], progress)
    try:
        return _integrate(model, chain, q0, v0, u, t, rtol, atol, bar, start, on_sample)
    finally:
        bar.close()


def _integrate(model, chain, q0, v0, u, t, rtol, atol, bar, start,
               on_sample=None) -> FlexibleSimulation:
    """The integration of :func:`simulate_flexible` (open chain or closed loop)."""
    nv = model.nv
    name = chain.config.name
    names = chain.coordinate_names
    if isinstance(model, FlexibleChain):
        f = model.ode(u=u)

        def rhs(tk, x):
            bar.tick(tk)
            return f(tk, x)

        sol, stopped = solve_ivp_keeping(rhs, (0.0, t[-1]), np.r_[q0, v0], method="DOP853",
                                         t_eval=t, rtol=rtol, atol=atol,
                                         on_sample=None if on_sample is None else
                                         (lambda tk, x: on_sample(tk, x[:nv])))
        q, v = sol.y[:nv].T, sol.y[nv:].T
        ok = sol.status == 0 and np.all(np.isfinite(sol.y))
        msg = (f"completed (DOP853, rtol {rtol:g}, atol {atol:g})" if ok else
               f"integration failed at t = {sol.t[-1]:.4g} s: {sol.message}")
        if stopped is not None:
            msg = _interrupted_message(stopped)
        energy = np.array([model.energy(qk, vk) for qk, vk in zip(q, v)])
        n = sol.t.size
        result = FlexibleSimulation(
            t=sol.t, q=q, v=v, tau=np.tile(model.B @ u, (n, 1)), energy=energy,
            success=bool(ok and stopped is None), message=msg, nsteps=0,
            wall_time=time.perf_counter() - start, names=names, q_names=names,
            lam=np.zeros((n, 0)), residual=np.zeros(n), velocity_residual=np.zeros(n),
            nrejected=None, nfev=int(sol.nfev), mode="adaptive", name=name)
        if stopped is not None:
            raise FlexibleSimulationInterrupted(result)
        return result

    def u_of(tk):
        bar.tick(tk)
        return u

    stopped: list = []  # Ctrl-C between two samples: the samples before it are complete
    sim = model.simulate(q0, v0, t, u=u_of, rtol=rtol, atol=atol, interrupted=stopped,
                         on_sample=on_sample, projection_dt=PROJECTION_DT)
    result = replace(sim, name=name, wall_time=time.perf_counter() - start)
    if stopped:
        result = replace(result, success=False, message=_interrupted_message(stopped[0]))
        raise FlexibleSimulationInterrupted(result)
    return result


def _interrupted_message(t_stop: float) -> str:
    return f"interrupted at t = {t_stop:.6g} s; the samples recorded until then are kept"
