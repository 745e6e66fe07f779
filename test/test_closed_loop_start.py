"""The closed-loop inversion starts where Newton's method can: from the model's default start,
and, when that is singular (the shipped four-bar's rest is drawn straight, where [A; H] gives
no direction), from the closures assembled with the task's first joint values held."""

import numpy as np

from multibody_control.inversion.methods import invert
from multibody_control.inversion.verify import verify
from multibody_control.outputs import Output
from multibody_control.tasks import Task, TimeLaw, linear_move
from multibody_dynamics.model import load_model


def test_four_bar_joint_task_from_the_default_start():
    """Crank 0 -> 1 rad, no ik_guess (it failed at t = 0: "residual 0.1 after 1 Newton
    iterations").  At crank 0 the crank tip (0.1, 0), the rocker pivot (0.3, 0), coupler
    0.35 m and rocker 0.25 m close the triangle with the coupler at acos(5/7) = 0.7752 rad
    (law of cosines: (0.2^2 + 0.35^2 - 0.25^2) / (2 0.2 0.35)) and the rocker at
    atan2(0.35 sin, 0.35 cos + 0.1 - 0.3) = 1.3694 rad, in one of the two modes."""
    model = load_model("four_bar")
    task = Task(TimeLaw(0.0, 1.0, 5), (linear_move("crank", 0.0, 1.0),))
    out = Output(model, ["crank"])
    r = invert(model, out, task, "classical", dt=0.01)
    assert r.success, r.message
    coupler = np.arccos(5 / 7)
    rocker = np.arctan2(0.35 * np.sin(coupler), 0.35 * np.cos(coupler) + 0.1 - 0.3)
    sign = np.sign(r.q[0, 1])
    # Newton converged to 1e-12 on lengths of 0.1 m: the angles to ~1e-10 rad
    np.testing.assert_allclose(r.q[0], [0.0, sign * coupler, sign * rocker], atol=1e-9)
    assert abs(r.y[-1, 0] - 1.0) < 1e-12
    # the feedforward drives the plant along the task (integration error only)
    assert verify(model, r, task, out).output_error < 1e-4
