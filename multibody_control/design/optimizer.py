"""Particle swarm optimization by ask and tell: the swarm proposes, the study evaluates.

The swarm is pymoo's :class:`~pymoo.algorithms.soo.nonconvex.pso.PSO` (Kennedy and Eberhart's
update, Seifried (2014) eq. 7.11,

    dp_i^{k+1} = w dp_i^k + c1 r1 (p_i^best - p_i^k) + c2 r2 (p_swarm^best - p_i^k),

with pymoo's optional fuzzy adaptation of w, c1, c2 (Zhan et al. 2009), a velocity limit of
``max_velocity_rate`` times the box per step, and bounds kept by re-drawing a step that leaves
the box). pymoo is used through its ask-and-tell interface: :meth:`ParticleSwarm.ask` returns
one iteration's designs, the caller evaluates them however it likes (in this process, a process
pool, a Dask cluster) and gives the criteria back with :meth:`ParticleSwarm.tell`. The swarm's
whole state, its random generator included, is in this object, so a pickled swarm continues
exactly where it stopped (the study's checkpoint), and a seed fixes the whole run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from multibody_dynamics.errors import InputError

__all__ = ["ParticleSwarm", "SwarmSettings"]


@dataclass(frozen=True)
class SwarmSettings:
    """Particle swarm settings (a study file's ``optimizer`` section).

    Attributes
    ----------
    particles : int
        Swarm size (designs per iteration).
    iterations : int
        Swarm iterations, the initial (Latin hypercube) sample counted as the first; a study
        evaluates ``particles * iterations`` designs (Seifried (2014) Sect. 7.3.2, case 1:
        100 particles, 22 iterations).
    seed : int
        Seed of the swarm's random generator: same seed, same designs, same result.
    w, c1, c2 : float
        Initial inertia, cognitive and social weights of eq. 7.11.
    adaptive : bool
        Adapt w, c1, c2 each iteration from the swarm's spread (pymoo's fuzzy rule); False
        keeps them constant (the classical swarm).
    max_velocity_rate : float
        Largest step per iteration as a fraction of each variable's range.
    initial_velocity : str
        ``random`` (uniform up to the velocity limit) or ``zero``.
    perturb_best : bool
        Mutate the swarm's best particle each iteration (pymoo's polynomial mutation), which
        helps on the flat, discontinuous criteria of design problems.
    violation : str or None
        Key of ``Evaluation.info`` that measures how far an infeasible (``ok=False``) design
        is from feasibility: a number (> 0 infeasible), or a list of eigenvalues that must lie
        in the left half-plane (e.g. ``eigenvalues`` of the zero dynamics, measured by
        :func:`~.study.stability_violation`). The swarm then ranks designs feasible first,
        infeasible ones by this measure (Deb's rules, pymoo's constraint handling), instead
        of by the flat penalty alone, which gives a swarm nothing to follow when few designs
        are feasible. None: infeasible designs are ranked by their criterion (the penalty).
    """

    particles: int = 40
    iterations: int = 20
    seed: int = 1
    w: float = 0.9
    c1: float = 2.0
    c2: float = 2.0
    adaptive: bool = True
    max_velocity_rate: float = 0.2
    initial_velocity: str = "random"
    perturb_best: bool = True
    violation: str | None = None

    def __post_init__(self):
        for name in ("particles", "iterations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"optimizer.{name}: expected a positive integer, got {value!r}")
        if self.particles < 2:
            raise InputError(f"optimizer.particles: expected at least 2, got {self.particles}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise InputError(f"optimizer.seed: expected an integer >= 0, got {self.seed!r}")
        for name in ("w", "c1", "c2", "max_velocity_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                raise InputError(f"optimizer.{name}: expected a finite number >= 0, "
                                 f"got {value!r}")
        if not self.max_velocity_rate > 0:
            raise InputError("optimizer.max_velocity_rate: expected a positive number, got "
                             f"{self.max_velocity_rate!r}")
        if self.initial_velocity not in ("random", "zero"):
            raise InputError("optimizer.initial_velocity: expected 'random' or 'zero', got "
                             f"{self.initial_velocity!r}")
        if self.violation is not None and (not isinstance(self.violation, str)
                                           or not self.violation):
            raise InputError(f"optimizer.violation: expected the name of an info key or null, "
                             f"got {self.violation!r}")
        for name in ("adaptive", "perturb_best"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"optimizer.{name}: expected true or false, got "
                                 f"{getattr(self, name)!r}")

    def as_dict(self) -> dict:
        """The settings as a plain mapping (for reports)."""
        return asdict(self)


class ParticleSwarm:
    """A seeded particle swarm on the box ``[lower, upper]``, driven by ask and tell.

    Parameters
    ----------
    lower, upper : array_like, shape (n,)
        Bounds of the design variables, ``lower < upper`` elementwise.
    settings : SwarmSettings
        Swarm size, seed and weights.

    Notes
    -----
    Call :meth:`ask` then :meth:`tell` alternately; ``iteration`` counts completed tells.
    Criteria and violations may be ``inf`` (a failed evaluation); NaN is treated as ``inf``.
    """

    def __init__(self, lower, upper, settings: SwarmSettings):
        from pymoo.algorithms.soo.nonconvex.pso import PSO
        from pymoo.core.problem import Problem
        from pymoo.core.termination import NoTermination

        self.lower = np.asarray(lower, dtype=float).copy()
        self.upper = np.asarray(upper, dtype=float).copy()
        if self.lower.shape != self.upper.shape or self.lower.ndim != 1:
            raise InputError(f"swarm bounds: expected two arrays of one shape (n,), got "
                             f"{self.lower.shape} and {self.upper.shape}")
        if not (np.all(np.isfinite(self.lower)) and np.all(np.isfinite(self.upper))
                and np.all(self.lower < self.upper)):
            raise InputError(f"swarm bounds: expected finite lower < upper, got "
                             f"{self.lower.tolist()} and {self.upper.tolist()}")
        self.settings = settings
        self.iteration = 0
        self._pending = None
        problem = Problem(n_var=len(self.lower), n_obj=1, n_ieq_constr=1, xl=self.lower,
                          xu=self.upper)
        self._algorithm = PSO(pop_size=settings.particles, w=settings.w, c1=settings.c1,
                              c2=settings.c2, adaptive=settings.adaptive,
                              initial_velocity=settings.initial_velocity,
                              max_velocity_rate=settings.max_velocity_rate,
                              pertube_best=settings.perturb_best)
        self._algorithm.setup(problem, seed=settings.seed, termination=NoTermination(),
                              verbose=False)

    def ask(self) -> np.ndarray:
        """The designs of the next iteration, shape ``(particles, n)``, inside the bounds.

        Asking again before :meth:`tell` returns the same designs.
        """
        if self._pending is None:
            pop = self._algorithm.ask()
            # pymoo keeps its steps inside the box; clip only rounding (a design exactly on
            # a bound must pass check_design_vector) and hand the clipped designs back to it
            X = np.clip(pop.get("X"), self.lower, self.upper)
            pop.set("X", X)
            self._pending = pop
        return self._pending.get("X").copy()

    def tell(self, values, violations=None) -> None:
        """Give the results of the designs of the last :meth:`ask`.

        Parameters
        ----------
        values : array_like, shape (particles,)
            Criteria (smaller is better).
        violations : array_like, shape (particles,), optional
            Constraint violations, 0 for a feasible design and > 0 (the larger the farther)
            otherwise; a design with a violation loses against every feasible one. None:
            every design counts as feasible.
        """
        from pymoo.core.evaluator import Evaluator
        from pymoo.problems.static import StaticProblem

        if self._pending is None:
            raise InputError("ParticleSwarm.tell: call ask() first")
        F = np.asarray(values, dtype=float).reshape(-1)
        if F.shape != (len(self._pending),):
            raise InputError(f"ParticleSwarm.tell: expected {len(self._pending)} values, "
                             f"got shape {np.shape(values)}")
        F = np.where(np.isnan(F), np.inf, F)
        G = np.zeros_like(F) if violations is None else \
            np.asarray(violations, dtype=float).reshape(-1)
        if G.shape != F.shape:
            raise InputError(f"ParticleSwarm.tell: expected {len(F)} violations, got shape "
                             f"{np.shape(violations)}")
        G = np.where(np.isnan(G), np.inf, G)
        Evaluator().eval(StaticProblem(self._algorithm.problem, F=F[:, None], G=G[:, None]),
                         self._pending)
        self._algorithm.tell(infills=self._pending)
        self._pending = None
        self.iteration += 1

    @property
    def weights(self) -> dict:
        """The current (possibly adapted) w, c1, c2."""
        a = self._algorithm
        return {"w": float(a.w), "c1": float(a.c1), "c2": float(a.c2)}
