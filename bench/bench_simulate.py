"""Long constrained simulations (issue "Closed loops and contact constraints", Sect. 5).

Each entry reports simulated seconds per wall second (``realtime_factor``), the largest
closure residual, the velocity-level residual, the energy figure that applies, and the
step counters.  Run with ``python bench/run.py --only simulate``.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from multibody_dynamics import load_model
from multibody_dynamics.rolling import model_constraints
from multibody_dynamics.simulate import SimulatorConfig, simulate


def _entry(name, res, **extra) -> dict:
    return {
        "name": name,
        "success": bool(res.success),
        "message": res.message,
        "simulated_s": float(res.t[-1] - res.t[0]),
        "wall_s": round(res.wall_time, 3),
        "realtime_factor": round(res.realtime_factor, 4),
        "steps": int(res.nsteps),
        "rejected": res.nrejected,
        "projections": int(res.nprojections),
        "newton_iterations": int(res.newton_iterations),
        "max_residual": float(res.max_residual),
        "max_velocity_residual": float(res.max_velocity_residual),
        **extra,
    }


def _energy_balance(res, model):
    """max |E - E0 - input work + damper dissipation| (input held per step; every step sampled)."""
    work = np.concatenate([[0.0],
                           np.cumsum(np.einsum("ij,ij->i", res.tau[:-1], np.diff(res.q, axis=0)))])
    p = np.einsum("ij,j,ij->i", res.v, model.damping, res.v)
    dissipated = np.concatenate([[0.0], np.cumsum(0.5 * (p[1:] + p[:-1]) * np.diff(res.t))])
    return float(np.max(np.abs(res.energy - res.energy[0] - work + dissipated)))


def _momentum(model, q, v):
    data = model.create_data()
    h = pin.computeCentroidalMomentum(model.pin_model, data, q, v)
    c = data.com[0]
    return np.array([h.linear[0], h.linear[1], h.angular[2]
                     + c[0] * h.linear[1] - c[1] * h.linear[0]])


def run() -> list[dict]:
    out = []
    m = load_model("slider_crank")  # unactuated, horizontal: through q1 = +-pi/2 about 12 times
    for cfg in (SimulatorConfig(dt=1e-3), SimulatorConfig(rtol=1e-10, atol=1e-12),
                SimulatorConfig(rtol=1e-10, atol=1e-12, singular_branch="free")):
        res = simulate(m, 10.0, q0=[0.0, 0.0], v0=[6.0, -12.0], config=cfg,
                       output_dt=0.01 if cfg.adaptive else None)
        turns = float((res.q[-1, 0] - res.q[0, 0]) / (2 * np.pi))
        name = (f"DOP853 rtol 1e-10 singular_branch={cfg.singular_branch}" if cfg.adaptive
                else "rk4 1 ms")
        out.append(_entry(f"slider_crank 10 s {name}", res, relative_energy_drift=res.energy_drift,
                          crank_turns=round(turns, 3), singular_bridges=int(res.nsingular)))

    m = load_model("four_bar")
    from multibody_dynamics.projection import ProjectedDynamics
    q0 = ProjectedDynamics(m).project_position(np.array([0.5, 0.3, 1.5])).q
    res = simulate(m, 10.0, q0=q0, v0=[3.0, 0.0, 0.0], config=SimulatorConfig(dt=1e-3))
    out.append(_entry("four_bar 10 s gravity rk4 1 ms", res,
                      relative_energy_drift=res.energy_drift))

    m = load_model("dual_arm_load")

    def ramp(t, q, v):
        return m.B @ (np.array([0.3, -0.2]) * (t / 5.0) if t < 5.0 else np.zeros(2))

    res = simulate(m, 200.0, tau=ramp, config=SimulatorConfig(dt=5e-3))
    P = np.array([_momentum(m, q, v) for q, v in zip(res.q[::100], res.v[::100])])
    out.append(_entry("dual_arm_load 200 s rk4 5 ms", res, energy_at_5s=float(res.energy[1000]),
                      energy_at_end=float(res.energy[-1]),
                      energy_balance_error=_energy_balance(res, m),
                      max_momentum=float(np.max(np.abs(P)))))

    m = load_model("two_wheeled_cart")
    c = model_constraints(m)
    res = simulate(m, 20.0, v0=[0.5, 0, 0, 5.0, 5.0],
                   tau=m.B @ np.array([0.3, -0.1]), constraints=c,
                   config=SimulatorConfig(dt=1e-3))
    out.append(_entry("two_wheeled_cart 20 s rk4 1 ms", res,
                      energy_balance_error=_energy_balance(res, m)))

    m = load_model("arm7")  # open chain: the ROS simulator node's 1 kHz path
    res = simulate(m, 5.0, config=SimulatorConfig(dt=1e-3))
    out.append(_entry("arm7 open chain 5 s rk4 1 ms", res))
    return out
