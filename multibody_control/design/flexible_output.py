"""Output design of a flexible manipulator (Seifried (2014) Sect. 7.3, eqs. 7.12-7.18).

The design variables are the non-zero entries of Γ in the combined output
``y = q_r + Γ q_e`` (7.12) of the Sect. 6.4 serial flexible manipulator
(``flexible_manipulator_book``): ``Γ = [[g11, g12, 0, 0], [g21, g22, g23, g24]]``, bounds
+-20 % around the printed Γ (6.38). The criterion has the book's two steps (Sect. 7.3.1):

1. the zero dynamics ``(M_ee - M_er Γ) q_e'' = (g - k - f_e)_e`` (7.13), linearized at rest at
   the start of the test trajectory (7.14), must be asymptotically stable (7.15), by a margin
   beyond rounding (:data:`STABILITY_MARGIN`); else the penalty (the book's "large default
   value") with ``ok=False``;
2. classical inversion of the test trajectory (forward integration of the internal dynamics
   from the rest equilibrium) and ``f = max_t |r_d(t) - r(q(t))|`` [m] (7.16)-(7.17), ``r``
   the end point of the last arm; a failed or diverging integration gives the penalty.

Structural damping. The book's model has damped bodies (``D_ee`` in (7.7)-(7.9)) but prints no
value; our shipped model is undamped, and an undamped flexible chain cannot have
asymptotically stable zero dynamics (its linearized zero dynamics have no dissipation: the
eigenvalues are symmetric to the imaginary axis, e.g. Γ (7.18) gives +-143.3 +- 123.6j 1/s on
``flexible_manipulator_book`` at q = 0). The option ``damping`` sets a modal damping ratio on
every retained mode of both arms (:func:`~multibody_dynamics.flexible.damping.with_modal_damping`,
default 2 %, a usual value for bolted steel strips); 0 keeps the model as shipped.

Test trajectory: the Sect. 6.4 straight line of config/scenarios/invert_flexible_manipulator_book
.yaml (arm-2 end point from (0.45, -0.10) to (0.45, 0.10) m, 5th-order law, t0 = 0.2 s,
tf = 1.2 s); the error is taken on ``[t0, tf + t_after]`` so that residual vibration counts.
"""

from __future__ import annotations

import numpy as np

from multibody_dynamics.errors import InputError, MultibodyError

from ..tasks import Task, TimeLaw, straight_line
from .criteria import PENALTY
from .problem import Evaluation, check_design_vector, per_thread, register_problem

__all__ = ["BOOK_GAMMA_638", "BOOK_GAMMA_718", "FlexibleOutputProblem", "gamma_matrix"]

#: Γ from the geometry, Seifried (2014) eq. (6.38) (the centre of the bounds).
BOOK_GAMMA_638 = np.array([[25.779, 47.552, 0.0, 0.0], [13.500, 88.897, 32.316, 39.470]])
#: The book's optimized Γ, Seifried (2014) eq. (7.18).
BOOK_GAMMA_718 = np.array([[25.025, 45.909, 0.0, 0.0], [15.292, 90.345, 29.296, 32.297]])
#: Positions of the design variables in Γ (the non-zero entries of (6.38)).
_ENTRIES = ((0, 0), (0, 1), (1, 0), (1, 1), (1, 2), (1, 3))
_NAMES = ("g11", "g12", "g21", "g22", "g23", "g24")

#: Step 1 accepts max Re(lambda) < -STABILITY_MARGIN * max |lambda| (rounding of the
#: finite-difference zero dynamics, about 1e-13 relative, must not decide).
STABILITY_MARGIN = 1e-9

def gamma_matrix(x) -> np.ndarray:
    """Γ (2, 4) from the design vector ``[g11, g12, g21, g22, g23, g24]``."""
    gamma = np.zeros((2, 4))
    for (i, j), v in zip(_ENTRIES, np.asarray(x, float)):
        gamma[i, j] = v
    return gamma


def classical_tracking(servo, m, rtol: float, dt: float, limit: float, compiled: bool = True):
    """Classical inversion of the test trajectory of ``m`` (a problem's model: ``ytraj``,
    ``y``, ``t``, ``body``, ``r_d``) through ``servo`` (a
    :class:`~..inversion.flexible.FlexibleServo`, Γ its output): ``(t, q, e, ok, message)``
    with the end-point error ``e(t)`` [m] (7.16) on the output grid (shorter if it failed).
    The internal dynamics are integrated with DOP853 at ``rtol`` (``atol`` 1e-3 rtol), steps of
    at most 10 ``dt``, stopped when an elastic coordinate reaches ``limit``."""
    ne = servo.nu_int
    eta, ok, msg = servo.integrate_internal(m.ytraj, servo.equilibrium(m.y[0]), m.t, rtol,
                                            1e-3 * rtol, 10 * dt, limit, compiled)
    n = len(eta)
    q = np.hstack([m.y[:n] - eta[:, :ne] @ servo.gamma.T, eta[:, :ne]])
    r = servo.chain.point_positions(q, m.body)
    e = np.linalg.norm(m.r_d[:n] - r, axis=1)
    if ok and n < len(m.t):
        ok, msg = False, f"integration stopped at t = {m.t[n - 1]:.4g} s"
    return m.t[:n], q, e, ok, msg


def book_task(t0: float = 0.2, tf: float = 1.2) -> Task:
    """The Sect. 6.4 test trajectory (module docstring)."""
    return Task(TimeLaw(t0, tf, 5), (straight_line("arm2", (0.45, -0.10), (0.45, 0.10)),))


class _Model:
    """Per-process state: the damped chain, the rigid inverse kinematics of the task tabulated
    once (it does not depend on Γ), and the desired end point on the output grid."""

    def __init__(self, robot, damping, dt, t_after):
        from multibody_dynamics.flexible.damping import with_modal_damping
        from multibody_dynamics.flexible.loader import load_flexible_model
        from multibody_dynamics.flexible.system import FlexibleChain

        from ..inversion.flexible import RigidInverseKinematics

        base = load_flexible_model(robot)
        if not isinstance(base, FlexibleChain) or base.nq_r != 2 or base.nq_e != 4:
            raise InputError(f"robot {robot!r}: expected a serial flexible chain with two joints "
                             "and two modes per arm (as flexible_manipulator_book)")
        self.chain = FlexibleChain(with_modal_damping(base.config, damping))
        self.task = book_task()
        ik = RigidInverseKinematics(self.chain, self.task)
        self.body = ik.body
        t0, tf = self.task.law.t0, self.task.law.tf
        self.t = np.arange(t0, tf + t_after + 0.5 * dt, dt)
        self.ytraj = ik.tabulate(self.t)
        self.y, self.r_d = self.ytraj(self.t)[0], self.task(self.t)[0]


def _model(robot, damping, dt, t_after) -> _Model:
    return per_thread(_Model, robot, damping, dt, t_after)


def tracking_evaluation(problem, x, info: dict) -> Evaluation:
    """Step 2 of the flexible design criteria (Seifried (2014) (7.16)-(7.17)): the largest
    end-point error [m] of the classical inversion ``problem.tracking(x)`` along the test
    trajectory; ``problem.penalty`` when the inversion fails or does not stay finite.
    ``info`` (what step 1 found) is extended with ``max_error_mm``."""
    try:
        _, _, e, ok, msg = problem.tracking(x)
    except (MultibodyError, np.linalg.LinAlgError, ArithmeticError) as exc:
        return Evaluation(problem.penalty, ok=False, info=info,
                          message=f"classical inversion failed: {exc}")
    if not ok or not np.all(np.isfinite(e)):
        return Evaluation(problem.penalty, ok=False, info=info,
                          message=f"classical inversion failed: {msg}")
    info["max_error_mm"] = 1e3 * float(e.max())
    return Evaluation(float(e.max()), info=info)


@register_problem("flexible_manipulator_book_output")
class FlexibleOutputProblem:
    """Output design of Seifried (2014) Sect. 7.3.2 (a :class:`~.problem.DesignProblem`).

    Parameters
    ----------
    damping : float
        Modal damping ratio of every retained mode, in [0, 1) (module docstring).
    robot : str
        A shipped serial flexible manipulator with 2 joints and 2 modes per arm.
    dt : float
        Output grid of the error (7.16) [s].
    t_after : float
        Time after the motion's end included in the error [s].
    rtol : float
        Relative tolerance of the internal-dynamics integration (DOP853; atol = 1e-3 rtol).
    limit : float
        An elastic coordinate beyond this is a diverged integration (penalty).
    penalty : float
        Criterion value of rejected designs.
    """

    names = _NAMES
    lower = np.array([0.8 * BOOK_GAMMA_638[i, j] for i, j in _ENTRIES])
    upper = np.array([1.2 * BOOK_GAMMA_638[i, j] for i, j in _ENTRIES])
    lower.setflags(write=False)
    upper.setflags(write=False)
    #: classical inversion with the compiled internal dynamics (False: the Python path, same
    #: numbers to the integration tolerance; kept as the baseline of bench/ timings)
    compiled = True

    def __init__(self, damping: float = 0.02, robot: str = "flexible_manipulator_book",
                 dt: float = 2e-3, t_after: float = 0.3, rtol: float = 1e-7,
                 limit: float = 0.1, penalty: float = PENALTY):
        from multibody_dynamics.flexible.damping import check_damping_ratio

        self.damping = check_damping_ratio(damping)
        self.robot = str(robot)
        for name, value in (("dt", dt), ("t_after", t_after), ("rtol", rtol), ("limit", limit)):
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value > 0):
                raise InputError(f"{name}: expected a positive number, got {value!r}")
        self.dt, self.t_after, self.rtol = float(dt), float(t_after), float(rtol)
        self.limit, self.penalty = float(limit), float(penalty)

    def __repr__(self):
        return (f"FlexibleOutputProblem(damping={self.damping!r}, robot={self.robot!r}, "
                f"dt={self.dt!r}, t_after={self.t_after!r}, rtol={self.rtol!r})")

    def model(self) -> _Model:
        """This process's chain and tabulated task (built on first use, then cached)."""
        return _model(self.robot, self.damping, self.dt, self.t_after)

    def servo(self, x):
        """The inverse model (:class:`~..inversion.flexible.FlexibleServo`) of the design ``x``."""
        from ..inversion.flexible import FlexibleServo

        return FlexibleServo(self.model().chain, gamma_matrix(check_design_vector(self, x)))

    def zero_dynamics(self, x) -> np.ndarray:
        """Eigenvalues [1/s] (8,) of the linearized zero dynamics (7.14) at rest at the start
        of the test trajectory."""
        s = self.servo(x)
        return np.linalg.eigvals(s.zero_dynamics_jacobian(self.model().y[0])[0])

    def tracking(self, x):
        """Classical inversion of the test trajectory: ``(t, q, e, ok, message)`` with the
        end-point error ``e(t)`` [m] (7.16) on the output grid (shorter if it failed)."""
        return classical_tracking(self.servo(x), self.model(), self.rtol, self.dt, self.limit,
                                  self.compiled)

    def evaluate(self, x) -> Evaluation:
        """The criterion (7.15)-(7.17) of ``x`` [m]; never raises for a vector within bounds."""
        x = check_design_vector(self, x)
        try:
            lam = self.zero_dynamics(x)
        except (MultibodyError, np.linalg.LinAlgError) as exc:
            return Evaluation(self.penalty, ok=False, message=f"zero dynamics failed: {exc}")
        abscissa = float(np.max(lam.real))
        # marginally stable (undamped) zero dynamics come out at +-1e-13 1/s from the central
        # differences: only a margin beyond that counts as asymptotically stable
        stable = abscissa < -STABILITY_MARGIN * float(np.max(np.abs(lam)))
        info = {"min_phase": stable,
                "eigenvalues": [[float(z.real), float(z.imag)] for z in lam],
                "spectral_abscissa": abscissa}
        if not stable:
            return Evaluation(self.penalty, ok=False, info=info, message=(
                f"non-minimum phase: max Re(lambda) = {abscissa:.4g} 1/s"))
        return tracking_evaluation(self, x, info)

    def plot_response(self, ax, x):
        """End-point error of the classical inversion over time (as Seifried Fig. 7.3 left)."""
        t, _, e, ok, msg = self.tracking(x)
        ax.plot(t, 1e3 * e)
        ax.set_xlabel("t [s]")
        ax.set_ylabel("end-point error [mm]")
        ax.set_title(f"classical inversion, max {1e3 * e.max():.3g} mm"
                     + ("" if ok else f" ({msg})"))
