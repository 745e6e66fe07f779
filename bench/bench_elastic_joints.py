"""Cost of one elastic-joint step (reduced form + expm) against one ``pin.aba`` call."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from multibody_dynamics import load_model
from multibody_dynamics.elastic_joints import ElasticJoints, expm_step

from .common import ratio_entry

ROBOT = "passive_arm_minphase"  # two elastic joints: expm of a 5 x 5 augmented matrix
H = 1e-3  # s, control period of the step


def bench_elastic_joints(number: int = 500, repeat: int = 5, rounds: int = 3) -> dict:
    """Time :meth:`ElasticJoints.step` (torque-driven, coefficients frozen at the start) and the
    bare :func:`expm_step` against ``pin.aba`` on the same model, interleaved in one run.

    Returns
    -------
    dict
        The ``ratio_entry`` of the full step (``ratio``, ``time_us``, ``baseline_time_us``)
        plus ``expm_step_ratio`` / ``expm_step_time_us`` for the exponential alone.
    """
    model = load_model(ROBOT)
    ej = ElasticJoints(model)
    pm, data = model.pin_model, model.create_data()
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.0, 1.0, model.nq)
    v = rng.uniform(-1.0, 1.0, model.nv)
    tau = model.B @ rng.normal(size=model.nu)
    eq = ej.reduced_equation(q, v, tau=tau)

    def aba():
        return pin.aba(pm, data, q, v, tau)

    entry = ratio_entry(f"{ROBOT} elastic step (expm)", lambda: ej.step(q, v, H, tau=tau), aba,
                        "pin.aba", number=number, repeat=repeat, rounds=rounds)
    bare = ratio_entry("expm_step", lambda: expm_step(eq.M, eq.damping, eq.stiffness, eq.force,
                                                      eq.theta, eq.dtheta, H),
                       aba, "pin.aba", number=number, repeat=repeat, rounds=rounds)
    entry["expm_step_ratio"] = bare["ratio"]
    entry["expm_step_time_us"] = bare["time_us"]
    return entry


def run() -> list[dict]:
    """Entry point for the benchmark runner."""
    return [bench_elastic_joints()]


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
