"""Shared fixtures: shipped models (loaded once per session) and a seeded RNG."""

import numpy as np
import pytest

from multibody_dynamics.model import load_model, shipped_robots

ROBOTS = shipped_robots()
OPEN_CHAIN = [r for r in ROBOTS if not load_model(r).closures]


@pytest.fixture(scope="session")
def models():
    """All shipped models by name."""
    return {name: load_model(name) for name in ROBOTS}


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


def random_state(model, rng, scale=1.0):
    """A random configuration within +-pi (revolute) / +-0.5 m (prismatic) and random v, a."""
    q = model.neutral() + scale * rng.uniform(-1, 1, model.nq)
    v = scale * rng.uniform(-1, 1, model.nv)
    a = scale * rng.uniform(-1, 1, model.nv)
    return q, v, a
