"""Shape design of flexible arms with the collocated output (Seifried (2014) Sect. 7.5.1.2).

Design variables: the four Bézier control heights (7.22)-(7.23) of every shaped arm
(``<arm>_y0`` .. ``<arm>_y3`` [m]), the thickness constant. Each evaluation rebuilds the arms'
finite element models, their modes, their modal data and the chain
(:mod:`multibody_dynamics.flexible.shape`), then inverts the test trajectory classically with
the collocated output ``y = q_r`` (Γ = 0, Sect. 6.2) and returns the maximal end-point error
``f = max_t |r_d(t) - r(q(t))|`` [m] (7.16)-(7.17). The collocated output is minimum phase for
every shape, so step 1 of Sect. 7.3.1 (the zero-dynamics test) is skipped, as the book says;
a failed or diverging integration still gives the penalty.

Constant mass (the book's equality constraint ``g(p) = 0``), by construction: the heights of all
arms are scaled by one factor ``s = m0 / m(p)`` before the rebuild, ``m0`` the arms' combined
beam mass in the model file (:func:`~multibody_dynamics.flexible.shape.scale_to_mass`; the mass
is linear in the heights). Chosen over a penalty because every particle then is a feasible
design: an equality constraint leaves a penalty formulation a measure-zero feasible set in the
box, and a particle swarm rarely lands near it. The heights built are ``clip(s p, lower,
upper)`` with the ``s`` that gives ``m0`` exactly (the clipped mass is piecewise linear in
``s``), so they also respect the bounds; the evaluation reports them (``heights_mm``) and
``s``. ``constant_mass: false`` switches the scaling off.

Cached per process (they do not change between evaluations): the base chain, the arms'
mesh/Bernstein tables (:class:`~multibody_dynamics.flexible.shape.BezierArmBuilder`), the rigid
inverse kinematics of the task tabulated on the output grid (the arm lengths do not change) and
the desired end point; per thread, the last design's rebuilt chain (an evaluation builds it
once for its check and its inversion).

Test trajectory (``task``): ``line_6_4``, the Sect. 6.4 straight line of
:func:`.flexible_output.book_task` for ``flexible_manipulator_book``; ``cart_semicircle``, the
Sect. 7.5.2 semicircle of :func:`~multibody_control.tasks.cart_semicircle_task` for
``flexible_cart_manipulator_design`` (the cart coordinate prescribed, the elbow branch of
:mod:`.flexible_cart_output`, the error taken on the end point only); other tasks register in
:data:`TASKS`. Damping: modal damping ratio ``damping`` on every mode (default 2 %, as the
output design, :mod:`.flexible_output`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from multibody_dynamics.errors import InputError, MultibodyError

from ..tasks import Task, cart_semicircle_task
from .criteria import PENALTY
from .flexible_output import book_task, classical_tracking, tracking_evaluation
from .problem import Evaluation, check_design_vector, per_thread, register_problem

__all__ = ["BOOK_SHAPE_729", "TASKS", "FlexibleShapeProblem", "plot_arm_contours"]

#: Seifried (2014) eq. (7.29), the shape-optimized heights of the Sect. 7.5.2 cart
#: manipulator's two arms [m] (arm 1 y0..y3, arm 2 y0..y3).
BOOK_SHAPE_729 = np.array([12.9, 10.4, 22.1, 5.3, 5.1, 16.2, 7.0, 1.0]) * 1e-3

#: Test trajectories by name: factory () -> Task.
TASKS: dict[str, Callable[[], Task]] = {"line_6_4": book_task,
                                        "cart_semicircle": cart_semicircle_task}

_LAST = threading.local()


class _Model:
    """Per-process state: the base chain, arm builders, initial mass and tabulated task."""

    def __init__(self, robot, arms, task, dt, t_after):
        from multibody_dynamics.flexible.loader import load_flexible_model
        from multibody_dynamics.flexible.shape import (
            BezierArmBuilder,
            arms_from_model,
            total_mass,
        )
        from multibody_dynamics.flexible.system import FlexibleChain

        from ..inversion.flexible import RigidInverseKinematics
        from .flexible_cart_output import _ik_guess

        base = load_flexible_model(robot)
        if not isinstance(base, FlexibleChain):
            raise InputError(f"robot {robot!r}: expected a serial flexible chain (no closures)")
        self.base = base
        self.arms = arms_from_model(robot, arms)
        self.builders = {n: BezierArmBuilder(a) for n, a in self.arms.items()}
        self.mass0 = total_mass(list(self.arms.values()), [a.heights for a in self.arms.values()])
        self.task = TASKS[task]()
        # a cart task: start Newton on the book's elbow branch (closed-form two-link guess)
        cart = base.bodies[0].joint_type == "prismatic"
        ik = RigidInverseKinematics(base, self.task,
                                    _ik_guess(base, self.task) if cart else None)
        self.body = ik.body
        t0, tf = self.task.law.t0, self.task.law.tf
        self.t = np.arange(t0, tf + t_after + 0.5 * dt, dt)
        self.ytraj = ik.tabulate(self.t)
        # r_d: the end point's coordinates only (a task may also prescribe joints)
        self.y = self.ytraj(self.t)[0]
        self.r_d = self.task(self.t)[0][:, ik._task_point]


def _model(robot, arms, task, dt, t_after) -> _Model:
    return per_thread(_Model, robot, arms, task, dt, t_after)


@register_problem("flexible_arm_shape")
class FlexibleShapeProblem:
    """Bézier shape design of flexible arms with the collocated output (a
    :class:`~.problem.DesignProblem`; module docstring).

    Parameters
    ----------
    robot : str
        A serial flexible model whose shaped arms are uniform rectangular beams in its file.
    arms : sequence of str or None
        Bodies to shape (default: every uniform beam body, in file order).
    task : str
        Test trajectory, a key of :data:`TASKS`.
    bounds : (float, float)
        Bounds of every height as factors of the arm's height in the model file (default
        (0.1, 10): the book's 1-100 mm around its 10 mm arms, Sect. 7.5.2.1).
    constant_mass : bool
        Scale the heights so the arms' combined mass stays that of the model file.
    damping : float
        Modal damping ratio of every retained mode of the chain, in [0, 1).
    dt, t_after, rtol, limit, penalty
        As :class:`~.flexible_output.FlexibleOutputProblem`: output grid [s], time after the
        motion included in the error [s], integration tolerance, divergence limit of an
        elastic coordinate, value of failed designs.
    """

    def __init__(self, robot: str = "flexible_manipulator_book", arms=None,
                 task: str = "line_6_4", bounds=(0.1, 10.0), constant_mass: bool = True,
                 damping: float = 0.02, dt: float = 2e-3, t_after: float = 0.3,
                 rtol: float = 1e-7, limit: float = 0.1, penalty: float = PENALTY):
        from multibody_dynamics.flexible.damping import check_damping_ratio
        from multibody_dynamics.flexible.shape import N_CONTROL, arms_from_model

        self.robot = str(robot)
        self.arms = None if arms is None else tuple(str(a) for a in arms)
        if task not in TASKS:
            raise InputError(f"task: expected one of {sorted(TASKS)}, got {task!r}")
        self.task = task
        lo, hi = (float(b) for b in bounds)
        if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo < hi):
            raise InputError(f"bounds: expected two factors 0 < lower < upper, got {bounds!r}")
        if not isinstance(constant_mass, bool):
            raise InputError(f"constant_mass: expected true or false, got {constant_mass!r}")
        self.bounds, self.constant_mass = (lo, hi), constant_mass
        self.damping = check_damping_ratio(damping)
        for name, value in (("dt", dt), ("t_after", t_after), ("rtol", rtol), ("limit", limit)):
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
                raise InputError(f"{name}: expected a positive number, got {value!r}")
        self.dt, self.t_after, self.rtol = float(dt), float(t_after), float(rtol)
        self.limit, self.penalty = float(limit), float(penalty)
        described = arms_from_model(self.robot, self.arms)  # checks the names, cheap
        self._check_task()
        self.arm_names = tuple(described)
        self.names = tuple(f"{a}_y{j}" for a in described for j in range(N_CONTROL))
        h0 = np.concatenate([np.asarray(a.heights) for a in described.values()])
        self.initial = h0
        self.lower, self.upper = lo * h0, hi * h0
        for arr in (self.initial, self.lower, self.upper):
            arr.setflags(write=False)

    def _check_task(self) -> None:
        """The model is a serial chain with one joint per task coordinate (before any work)."""
        from multibody_dynamics.flexible.loader import load_flexible_model
        from multibody_dynamics.flexible.system import FlexibleChain

        chain = load_flexible_model(self.robot)
        if not isinstance(chain, FlexibleChain):
            raise InputError(f"robot {self.robot!r}: expected a serial flexible chain "
                             "(no closures)")
        names = TASKS[self.task]().names
        if len(names) != chain.nq_r:
            raise InputError(f"task {self.task!r} has {len(names)} coordinates "
                             f"({', '.join(names)}) but {self.robot} has {chain.nq_r} joints "
                             f"({', '.join(chain.joint_names)}); expected a task for that robot")

    def __repr__(self):
        return (f"FlexibleShapeProblem(robot={self.robot!r}, arms={self.arms!r}, "
                f"task={self.task!r}, bounds={self.bounds!r}, "
                f"constant_mass={self.constant_mass!r}, damping={self.damping!r}, "
                f"dt={self.dt!r}, t_after={self.t_after!r}, rtol={self.rtol!r})")

    def model(self) -> _Model:
        """This process's cached state (built on first use)."""
        return _model(self.robot, self.arms, self.task, self.dt, self.t_after)

    def heights(self, x) -> tuple[dict[str, np.ndarray], float]:
        """The heights built for ``x`` per arm [m] (mass-scaled within the bounds if
        ``constant_mass``) and the scale factor."""
        from multibody_dynamics.flexible.shape import N_CONTROL, scale_to_mass

        m = self.model()
        x = np.asarray(x, float)
        split = [x[N_CONTROL * k:N_CONTROL * (k + 1)] for k in range(len(self.arm_names))]
        s = 1.0
        if self.constant_mass:
            k = len(self.arm_names)
            lo = [self.lower[N_CONTROL * i:N_CONTROL * (i + 1)] for i in range(k)]
            hi = [self.upper[N_CONTROL * i:N_CONTROL * (i + 1)] for i in range(k)]
            split, s = scale_to_mass([m.arms[n] for n in self.arm_names], split, m.mass0,
                                     lo, hi)
        return dict(zip(self.arm_names, split)), s

    def chain(self, x):
        """The rebuilt, damped chain of ``x`` and ``info`` (heights, scale, frequencies); the
        last one is cached per thread (an evaluation's check and its inversion share it)."""
        # the repr names every option the chain depends on
        key = (repr(self), np.asarray(x, float).tobytes())
        last = getattr(_LAST, "value", None)
        if last is not None and last[0] == key:
            chain, info = last[1]
            return chain, dict(info)
        chain, info = self.chain_of(*self.heights(x))
        _LAST.value = (key, (chain, info))
        return chain, dict(info)

    def chain_of(self, heights: dict, s: float = 1.0):
        """The rebuilt, damped chain of the control heights ``heights`` (per arm, (4,) [m]) and
        ``info``; ``s`` the mass scale already applied (reported only)."""
        from multibody_dynamics.flexible.damping import with_modal_damping
        from multibody_dynamics.flexible.shape import shaped_chain

        m = self.model()
        chain, freq = shaped_chain(m.base.config, m.builders, heights)
        info = {"scale": float(s),
                "heights_mm": {n: [round(float(1e3 * v), 6) for v in p]
                               for n, p in heights.items()},
                "frequencies_hz": {n: [float(f / (2 * np.pi)) for f in w]
                                   for n, w in freq.items()}}
        chain = type(chain)(with_modal_damping(chain.config, self.damping))
        return chain, info

    def tracking(self, x):
        """Classical inversion of the task with ``y = q_r``: ``(t, q, e, ok, message)``, the
        end-point error ``e(t)`` [m] (7.16) on the output grid (shorter if it failed)."""
        from ..inversion.flexible import FlexibleServo

        m = self.model()
        chain, _ = self.chain(x)
        # Γ = 0: y = q_r, so q = (y, eta_q) exactly
        return classical_tracking(FlexibleServo(chain, np.zeros((chain.nq_r, chain.nq_e))), m,
                                  self.rtol, self.dt, self.limit)

    def evaluate(self, x) -> Evaluation:
        """The criterion (7.16)-(7.17) of ``x`` [m]; never raises for a vector within bounds."""
        x = check_design_vector(self, x)
        try:
            _, info = self.chain(x)
        except MultibodyError as exc:  # a degenerate shape (e.g. a mode lost)
            return Evaluation(self.penalty, ok=False, message=f"rebuild failed: {exc}")
        info["mass"] = float(self.model().mass0 if self.constant_mass else self._mass(x))
        return tracking_evaluation(self, x, info)

    def _mass(self, x) -> float:
        from multibody_dynamics.flexible.shape import total_mass

        m = self.model()
        heights, _ = self.heights(x)
        return total_mass([m.arms[n] for n in self.arm_names], list(heights.values()))

    # -- plots (called by the study engine) ---------------------------------------------------
    def plot_design(self, ax, x):
        """Arm contours y(x) of the design ``x`` beside the initial ones (as Fig. 7.14)."""
        m = self.model()
        heights, s = self.heights(x)
        plot_arm_contours(ax, {n: m.arms[n] for n in self.arm_names}, heights)
        ax.set_title(f"Bézier arm contours (dotted: initial; mass scale s = {s:.3f})")

    def plot_response(self, ax, x):
        """End-point error of the classical inversion, design and initial shape (Fig. 7.15)."""
        for label, design in (("initial shape", self.initial), ("design", x)):
            t, _, e, ok, msg = self.tracking(design)
            ax.plot(t, 1e3 * e, label=f"{label}: max {1e3 * e.max():.3g} mm"
                    + ("" if ok else f" ({msg})"))
        ax.set_xlabel("t [s]")
        ax.set_ylabel("end-point error [mm]")
        ax.set_title("collocated output y = q_r, classical inversion")
        ax.legend()


def plot_arm_contours(ax, arms: dict, heights: dict) -> None:
    """Draw the height contours ``y(x)`` of Bézier arms one after the other (Fig. 7.14).

    Parameters
    ----------
    ax : matplotlib Axes
    arms : dict of str to BezierArm
        The arms in chain order; each one's ``heights`` is drawn dotted (the initial design).
    heights : dict of str to array_like (4,)
        The control heights to draw [m] per arm; the control polygon is marked.
    """
    from multibody_dynamics.flexible.shape import N_CONTROL, bezier_height

    start = 0.0
    for k, (name, arm) in enumerate(arms.items()):
        p = np.asarray(heights[name], float)
        xs = np.linspace(0.0, arm.length, 101)
        y = 1e3 * bezier_height(p, xs, arm.length)
        ax.fill_between(start + xs, 0.0, y, color=f"C{k}", alpha=0.35,
                        label=f"{name}: " + " / ".join(f"{v:.3g}" for v in 1e3 * p) + " mm")
        ax.plot(start + xs, y, color=f"C{k}")
        ax.plot(start + np.arange(N_CONTROL) * arm.length / (N_CONTROL - 1), 1e3 * p, "o--",
                color=f"C{k}", ms=4, lw=0.8)
        ax.plot(start + xs, 1e3 * bezier_height(arm.heights, xs, arm.length), ":",
                color="0.3")
        start += arm.length
    ax.set_xlabel("x along the arms, root of arm 1 at 0 [m]")
    ax.set_ylabel("height y(x) [mm]")
    ax.legend(loc="upper right", fontsize=8)
