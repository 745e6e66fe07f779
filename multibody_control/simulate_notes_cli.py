"""Notes of ``multibody simulate`` on its start and step, printed before or after the run:
a closed loop's ``--q0`` moved onto its closures, and a fixed step too long for the stiffest
joint spring (hooked into :mod:`multibody_control.cli`)."""

from __future__ import annotations

import numpy as np


def note_projected_start(args, robot, result) -> None:
    """Say so when a closed loop's --q0 was moved onto its closures (the start used, per
    coordinate in rad | m, beside the one asked for)."""
    q0 = getattr(args, "q0_asked", None)
    if q0 is None or not result.q.shape[0] or not getattr(robot, "closures", None):
        return
    from .cli import _joint_values

    used, asked = _joint_values(robot, result.q[0]), _joint_values(robot, q0)
    if np.allclose(used, asked, rtol=0, atol=1e-9):
        return
    print(f"note: --q0 was assembled onto the closures (phi(q) = 0): used "
          f"{np.array2string(used, precision=6)} instead of "
          f"{np.array2string(asked, precision=6)} ({', '.join(robot.coordinate_names)}; "
          "--q0 with the actuated joints alone or --given keeps those)")


def note_stiff_springs(model, q0, config) -> None:
    """A note before a fixed-step run whose step is too long for the stiffest joint spring
    (:func:`~multibody_dynamics.simulate.stiffest_spring_omega`): fewer than about 6 steps
    per period (omega dt > 1); above the method's stability bound
    the run diverges (it ended "|v| > max_speed" with no word on why), below it RK4 damps the
    mode away numerically (energy drifts)."""
    from multibody_dynamics.simulate import STABLE_OMEGA_H, stiffest_spring_omega

    if config.adaptive:
        return
    omega = stiffest_spring_omega(model, q0)
    bound = STABLE_OMEGA_H.get(config.method, 2.0)
    if omega * config.dt > 1.0:
        what = ("diverges" if omega * config.dt > bound
                else "damps it numerically (the energy is not kept)")
        print(f"note: the stiffest joint spring ({omega / (2 * np.pi):.4g} Hz at the start) gets "
              f"{2 * np.pi / (omega * config.dt):.2g} steps per period at --dt {config.dt:g} s: "
              f"{config.method} {what} (stable below {bound / omega:.2g} s); pass a --dt well "
              "below that (the summary's energy line shows what is kept), or --rtol 1e-8 "
              "(adaptive)")


__all__ = ["note_projected_start", "note_stiff_springs"]
