"""Output design of the flexible cart manipulator (Seifried (2014) Sect. 7.5.2.2, eqs. 7.30-7.33).

The model is ``flexible_cart_manipulator_design`` (a cart on e1 and two aluminium arms of 1 m,
10 x 60 mm, a tool at the tip; config/robots/), the task the semicircle of
:func:`~multibody_control.tasks.cart_semicircle_task`. The combined output
``y = q_r + Γ q_e`` (7.12) with ``q_r = [s, alpha, beta]`` has

    Γ = Γ0 + ΔΓ(p),   ΔΓ = [[0, 0, 0, 0], [p1, p2, 0, 0], [p3, p4, p5, p6]]     (7.31)

with Γ0 of (7.30) from the geometry
(:func:`~multibody_dynamics.flexible.output.chain_combined_output`), bounds ``-3 <= p_i <= 3``.
The criterion is the one of :class:`~.flexible_output.FlexibleOutputProblem` (Sect. 7.3.1):
the linearized zero dynamics at rest at the start of the task must be asymptotically stable
(with modal damping, option ``damping``), then ``f = max_t |r_d - r(q)|`` [m] of the classical
inversion.

Mode signs. An eigenvector's sign is arbitrary: the book's second mode of each arm has a
negative tip displacement (Γ0 (7.30): ``Γ_22 = -1.557``), ours a positive one. Design vectors,
Γ0 and ΔΓ are written in the book's signs (so (7.32), (7.33) are used as printed);
:meth:`FlexibleCartOutputProblem.gamma` flips the columns of the modes whose sign differs
before Γ meets the model.

Option ``gamma0``: ``"geometric"`` (default) Γ0 of our model; ``"printed"`` the printed (7.30);
``"zero"`` no Γ0, so ``p = 0`` is the collocated output ``y = q_r`` (Sect. 6.2; the book's
initial design, 88.7 mm).

The unprinted data (tool mass, gravity in the plane, damping) are chosen in the model file and
here; docs/design.md "Flexible cart manipulator: output design" shows what each does to the
book's three printed errors (bench suite ``flexible_cart_readings``).
"""

from __future__ import annotations

import numpy as np

from multibody_dynamics.errors import InputError

from ..tasks import cart_semicircle_task
from .criteria import PENALTY
from .flexible_output import FlexibleOutputProblem
from .problem import check_design_vector, per_thread, register_problem

__all__ = ["BOOK_GAMMA0_730", "BOOK_DGAMMA_732", "BOOK_DGAMMA_733", "FlexibleCartOutputProblem",
           "delta_gamma"]

#: Γ0 from the geometry, Seifried (2014) eq. (7.30) (the book's mode signs).
BOOK_GAMMA0_730 = np.array([[0.0, 0.0, 0.0, 0.0], [1.557, -1.557, 0.0, 0.0],
                            [0.586, -5.887, 1.557, -1.557]])
#: The book's optimized output, ΔΓ_opt,1 of eq. (7.32) (1.6 mm) as a design vector.
BOOK_DGAMMA_732 = np.array([-0.166, -0.435, 0.002, 0.453, -0.214, 0.535])
#: The smoother design ΔΓ_opt,2 of eq. (7.33) (1.7 mm) as a design vector.
BOOK_DGAMMA_733 = np.array([-0.165, -0.430, 0.003, 0.382, -0.179, 0.588])
_ENTRIES = ((1, 0), (1, 1), (2, 0), (2, 1), (2, 2), (2, 3))
_NAMES = ("dg21", "dg22", "dg31", "dg32", "dg33", "dg34")
_GAMMA0 = ("geometric", "printed", "zero")

def delta_gamma(x) -> np.ndarray:
    """ΔΓ (3, 4) of (7.31) from the design vector ``[dg21, dg22, dg31, dg32, dg33, dg34]``."""
    out = np.zeros((3, 4))
    for (i, j), v in zip(_ENTRIES, np.asarray(x, float)):
        out[i, j] = v
    return out


class _CartModel:
    """Per-process state: the damped chain, the tabulated rigid inverse kinematics of the task,
    Γ0 and the column signs between the book's modes and ours."""

    def __init__(self, robot, damping, dt, t_after):
        from multibody_dynamics.flexible.damping import with_modal_damping
        from multibody_dynamics.flexible.loader import load_flexible_model
        from multibody_dynamics.flexible.output import chain_combined_output
        from multibody_dynamics.flexible.system import FlexibleChain

        from ..inversion.flexible import RigidInverseKinematics

        base = load_flexible_model(robot)
        if (not isinstance(base, FlexibleChain) or base.nq_r != 3 or base.nq_e != 4
                or base.bodies[0].joint_type != "prismatic"):
            raise InputError(f"robot {robot!r}: expected a cart and two flexible arms with two "
                             "modes each (as flexible_cart_manipulator_design)")
        self.chain = FlexibleChain(with_modal_damping(base.config, damping))
        ours = chain_combined_output(base)
        # our mode j has the book's sign if its own-arm entry of Γ0 has the printed sign
        own = np.array([ours[1, 0], ours[1, 1], ours[2, 2], ours[2, 3]])
        book = np.array([BOOK_GAMMA0_730[1, 0], BOOK_GAMMA0_730[1, 1], BOOK_GAMMA0_730[2, 2],
                         BOOK_GAMMA0_730[2, 3]])
        self.signs = np.sign(own) * np.sign(book)
        self.gamma0 = ours * self.signs  # in the book's signs
        end = base.config.end_effector or base.bodies[-1].name
        self.task = cart_semicircle_task(frame=end, cart=base.joint_names[0])
        ik = RigidInverseKinematics(self.chain, self.task, _ik_guess(self.chain, self.task))
        self.body = ik.body
        t0, tf = self.task.law.t0, self.task.law.tf
        self.t = np.arange(t0, tf + t_after + 0.5 * dt, dt)
        self.ytraj = ik.tabulate(self.t)
        # r_d: the end point's coordinates only (the task also prescribes the cart)
        self.y, self.r_d = self.ytraj(self.t)[0], self.task(self.t)[0][:, ik._task_point]


def _ik_guess(chain, task, elbow: float = 1.0) -> np.ndarray:
    """Joint values at the task's start by the closed-form two-link inverse kinematics with the
    arm lengths (their distal nodes), on the branch ``sign(beta) = elbow``."""
    p = task(task.law.t0)[0]
    arms = chain.bodies[1:]
    l1, l2 = (b.modal_data.node_positions[b.distal_node][0] for b in arms)
    dx, dy = p[1] - p[0], p[2]
    c = np.clip((dx * dx + dy * dy - l1 * l1 - l2 * l2) / (2 * l1 * l2), -1.0, 1.0)
    beta = elbow * np.arccos(c)
    theta1 = np.arctan2(dy, dx) - np.arctan2(l2 * np.sin(beta), l1 + l2 * np.cos(beta))
    return np.array([p[0], theta1 - arms[0].angle, beta])


def _model(robot, damping, dt, t_after) -> _CartModel:
    return per_thread(_CartModel, robot, damping, dt, t_after)


@register_problem("flexible_cart_manipulator_output")
class FlexibleCartOutputProblem(FlexibleOutputProblem):
    """Output design of Seifried (2014) Sect. 7.5.2.2 (a :class:`~.problem.DesignProblem`).

    Parameters
    ----------
    damping : float
        Modal damping ratio of every retained mode, in [0, 1) (see
        :mod:`~.flexible_output`: undamped, no Γ is asymptotically stable).
    gamma0 : {"geometric", "printed", "zero"}
        Γ0 of (7.31) (module docstring).
    robot : str
        A shipped flexible cart manipulator with two arms of two modes each.
    dt, t_after, rtol, limit, penalty
        As :class:`~.flexible_output.FlexibleOutputProblem`; ``t_after`` [s] after the 3 s
        motion is included in the error.
    """

    names = _NAMES
    lower = np.full(6, -3.0)
    upper = np.full(6, 3.0)
    lower.setflags(write=False)
    upper.setflags(write=False)

    def __init__(self, damping: float = 0.02, gamma0: str = "geometric",
                 robot: str = "flexible_cart_manipulator_design", dt: float = 5e-3,
                 t_after: float = 0.3, rtol: float = 1e-7, limit: float = 0.1,
                 penalty: float = PENALTY):
        super().__init__(damping=damping, robot=robot, dt=dt, t_after=t_after, rtol=rtol,
                         limit=limit, penalty=penalty)
        if gamma0 not in _GAMMA0:
            raise InputError(f"gamma0: expected one of {', '.join(_GAMMA0)}, got {gamma0!r}")
        self.gamma0 = gamma0

    def __repr__(self):
        return (f"FlexibleCartOutputProblem(damping={self.damping!r}, gamma0={self.gamma0!r}, "
                f"robot={self.robot!r}, dt={self.dt!r}, t_after={self.t_after!r}, "
                f"rtol={self.rtol!r})")

    def model(self) -> _CartModel:
        """This process's chain and tabulated task (built on first use, then cached)."""
        return _model(self.robot, self.damping, self.dt, self.t_after)

    def gamma(self, x) -> np.ndarray:
        """Γ (3, 4) of the design ``x`` in the model's mode signs (module docstring)."""
        m = self.model()
        g0 = {"geometric": m.gamma0, "printed": BOOK_GAMMA0_730,
              "zero": np.zeros((3, 4))}[self.gamma0]
        return (g0 + delta_gamma(check_design_vector(self, x))) * m.signs

    def servo(self, x):
        """The inverse model (:class:`~..inversion.flexible.FlexibleServo`) of the design ``x``."""
        from ..inversion.flexible import FlexibleServo

        return FlexibleServo(self.model().chain, self.gamma(x))
