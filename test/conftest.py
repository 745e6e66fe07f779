"""Shared fixtures: shipped models (loaded once per session) and a seeded RNG."""

import numpy as np
import pytest

from multibody_dynamics.model import load_model, shipped_robots

# The rigid robots of config/robots/ (load_model, pinocchio); the flexible models in the same
# folder (a 'bodies' list) are tested in test_flexible_*.py.
ROBOTS = shipped_robots()
OPEN_CHAIN = [r for r in ROBOTS if not load_model(r).closures]

# Start configurations near an assembled state of each shipped closed-loop robot, for the
# Newton projection onto the constraint manifold (rad | m).
ASSEMBLY_GUESS = {
    "slider_crank": [0.7, -1.3],
    "four_bar": [0.5, 0.3, 1.5],
    "five_bar": [2.0, -1.2, 1.1, 1.2],
    "prr_surface": [-0.5, 0.3, 0.2],
}


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


def assembled(model, rng, guess):
    """A consistent state of a closed-loop model: q on the manifold (Newton from ``guess``),
    v in null(A), and a random torque."""
    from multibody_dynamics.projection import ProjectedDynamics

    pd = ProjectedDynamics(model)
    res = pd.project_position(np.asarray(guess, float))
    assert res.success, res.message
    v = pd.project_velocity(res.q, rng.normal(size=model.nv))
    return res.q, v, rng.normal(size=model.nv)


# test/launch/*_launch_test.py are launch_testing files, run by `launch_test` (as ROS users run
# them) from test_launch_testing_runs.py; pytest's own collection would match *_test.py.
collect_ignore = ["launch"]

# Test files that need rclpy and start ROS 2 nodes or DDS (or parse the launch files through
# ROS) are marked `ros` by file name, so `pytest -m "not ros"` runs the library tests alone
# (docs/contributing.md).
ROS_TEST_FILES = ("test_ros_", "test_launch_")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name.startswith(ROS_TEST_FILES):
            item.add_marker(pytest.mark.ros)
