"""Overhead of the public rigid-body API over the raw pinocchio calls (arm7)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from multibody_dynamics import RigidDynamics, load_model

from .common import ratio_entry

TARGET = 1.2  # issue "Foundation" section 4: overhead ratio <= 1.2


def run() -> list[dict]:
    model = load_model("arm7")
    dyn = RigidDynamics(model)
    pm, data = model.pin_model, model.create_data()
    rng = np.random.default_rng(0)
    q = pin.randomConfiguration(pm)
    v, a, tau = rng.normal(size=model.nv), rng.normal(size=model.nv), rng.normal(size=model.nv)
    return [
        ratio_entry("arm7 inverse_dynamics", lambda: dyn.inverse_dynamics(q, v, a),
                    lambda: pin.rnea(pm, data, q, v, a), "pin.rnea", TARGET),
        ratio_entry("arm7 forward_dynamics", lambda: dyn.forward_dynamics(q, v, tau),
                    lambda: pin.aba(pm, data, q, v, tau), "pin.aba", TARGET),
        ratio_entry("arm7 mass_matrix", lambda: dyn.mass_matrix(q),
                    lambda: pin.crba(pm, data, q), "pin.crba", TARGET),
    ]
