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


def linearised_elastic(body, omega):
    """``(A_q, A_v)``: Jacobians of ``-(h_e + Ke q + De q')`` at q_e = 0 with the frame spinning
    at the constant body rate ``omega`` (3,) [rad/s] about its origin (prescribed reference
    motion), by central differences; a planar body spins about z (``omega[2]``)."""
    from multibody_dynamics.flexible.body3d import FlexibleBody3D

    spatial = isinstance(body, FlexibleBody3D)
    n = body.ne if spatial else body.nq_e

    def rhs(qe, dqe):
        if spatial:
            q, v = np.r_[body.neutral()[:7], qe], np.r_[0.0, 0.0, 0.0, omega, dqe]
            return -(body.nonlinear_effects(q, v) + body.elastic_forces(q, v))[6:]
        q, v = np.r_[0.0, 0.0, 0.0, qe], np.r_[0.0, 0.0, omega[2], dqe]
        return -(body.nonlinear_effects(q, v) + body.elastic_forces(q, v))[3:]

    a_q, a_v = np.zeros((n, n)), np.zeros((n, n))
    for j in range(n):
        e = np.zeros(n)
        e[j] = 1e-6
        a_q[:, j] = (rhs(e, 0 * e) - rhs(-e, 0 * e)) / 2e-6
        a_v[:, j] = (rhs(0 * e, e) - rhs(0 * e, -e)) / 2e-6
    return a_q, a_v


def frequencies_of(a_q, a_v, me):
    """Positive imaginary parts [rad/s], sorted, of ``M_e q'' = A_q q + A_v q'``."""
    n = me.shape[0]
    me_inv = np.linalg.inv(me)
    a = np.block([[np.zeros((n, n)), np.eye(n)], [me_inv @ a_q, me_inv @ a_v]])
    lam = np.linalg.eigvals(a)
    return np.sort(np.abs(lam.imag[lam.imag > 0]))


# test/launch/*_launch_test.py are launch_testing files, run by `launch_test` (as ROS users run
# them) from test_launch_testing_runs.py; pytest's own collection would match *_test.py.
collect_ignore = ["launch"]

# Test files that need rclpy and start ROS 2 nodes or DDS (or parse the launch files through
# ROS) are marked `ros` by file name, so `pytest -m "not ros"` runs the library tests alone
# (docs/contributing.md).
ROS_TEST_FILES = ("test_ros_", "test_launch_")


def compiled_ctrl_c() -> SystemError:
    """What a numba dispatcher raises when Ctrl-C's KeyboardInterrupt was set while its kernel
    ran: SystemError "returned a result with an exception set", the interrupt as its cause."""
    wrapped = SystemError("CPUDispatcher(<kernel>) returned a result with an exception set")
    wrapped.__cause__ = KeyboardInterrupt()
    return wrapped


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Name what the run left behind and keep it from hanging the exit (exit_guard)."""
    if _EXIT_STATUS:
        import exit_guard

        exit_guard.report()
        exit_guard.guard(_EXIT_STATUS[-1])


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name.startswith(ROS_TEST_FILES):
            item.add_marker(pytest.mark.ros)


@pytest.fixture
def figures(monkeypatch):
    """The figures handed to save_figure, drawn and kept for inspection instead of written
    to files (closed at the end of the test)."""
    import multibody_dynamics.plotting as plotting

    kept = []

    def keep(fig, path):
        fig.canvas.draw()
        kept.append(fig)
        return path

    monkeypatch.setattr(plotting, "save_figure", keep)
    yield kept
    import matplotlib.pyplot as plt

    for fig in kept:
        plt.close(fig)
