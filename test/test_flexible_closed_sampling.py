"""A closed flexible loop (the parallel machine tool) is sampled finely enough for its modes:
the default sample interval against the stiffest mode of the constrained system, and the
samples taken from the solver's dense output between projections against a reference that
projects at every sample, with the closure gap at each sample."""

import numpy as np
import pytest
import scipy.linalg

from multibody_control.cli import main
from multibody_dynamics.errors import InputError
from multibody_dynamics.flexible.simulation import simulate_flexible
from multibody_dynamics.robot import load_robot

U = [2.0, 0.0]  # N on the first cart
DEFLECTED = ("long_arm.e1", "long_arm.e2", "short_arm.e1", "short_arm.e2")


@pytest.fixture(scope="module")
def tool():
    return load_robot("flexible_parallel_tool")


def _start(model):
    """Neutral configuration with the arms' first two modes deflected by 2e-3 sqrt(kg) m: a
    free vibration of every mode on top of the push (the push alone translates the machine
    without bending it)."""
    q0 = model.chain.neutral()
    names = list(model.coordinate_names)
    for name in DEFLECTED:
        q0[names.index(name)] = 2e-3
    return q0


def _constrained_stiffest_hz(model) -> float:
    """Highest frequency [Hz] of the loop linearized at the assembled neutral configuration,
    at rest: the tree's mass and stiffness (central differences of its inverse dynamics)
    restricted to the null space of the closure Jacobian, a generalized eigenproblem."""
    q = model.project_position(model.chain.neutral())
    lin = model.chain.linearize(q, np.zeros(model.nv))
    N = scipy.linalg.null_space(model.constraint_jacobian(q))
    w2 = scipy.linalg.eigvals(N.T @ lin.K @ N, N.T @ lin.M @ N)
    return float(np.sqrt(np.max(np.abs(w2))) / (2 * np.pi))


def test_default_sampling_resolves_the_stiffest_mode(tool, tmp_path, capsys):
    """`simulate flexible_parallel_tool` samples at least 10 times per period of the loop's
    stiffest mode (668 Hz; the former 0.01 s was 0.15 samples per period), and the written
    samples are the integration's, closed to 1e-10 m at each of them."""
    f_max = _constrained_stiffest_hz(tool)
    assert f_max > 100  # the former default 0.01 s would be under 1 sample per period
    out = tmp_path / "p.csv"
    assert main(["simulate", "flexible_parallel_tool", "--duration", "0.02", "--tau", "2", "0",
                 "--quiet", "--out", str(out)]) == 0
    assert "samples every 0.0001 s" in capsys.readouterr().out
    data = np.loadtxt(out, delimiter=",", skiprows=1)
    assert data.shape[0] == 201 and np.max(np.diff(data[:, 0])) <= 1 / (10 * f_max)
    q = tool.project_position(tool.chain.neutral())
    for bad in (0.0, -1e-3, np.nan):
        with pytest.raises(InputError, match=r"^projection_dt: expected a positive time in s"):
            tool.simulate(q, np.zeros(tool.nv), [0.0, 1e-3], projection_dt=bad)


def test_dense_samples_match_projection_at_every_sample(tool):
    """0.1 ms samples from the dense output between projections every 10 ms (rtol 1e-8)
    against a reference projected at every 0.1 ms sample (rtol 1e-11): every coordinate within
    1e-5 of its peak (measured 3e-7 over 0.3 s: the order of rtol; the 1e-5 bound leaves room
    for the shorter run's different steps), the closure gap at every sample below 1e-10 m
    (measured 2.4e-12 m: the drift over one projection interval at rtol 1e-8), the energy
    within 1e-6 of its range. Linear interpolation of 0.01 s samples misses three of the four
    deflected elastic coordinates by more than half their peak (aliasing; measured 0.92 to
    1.5, the long arm's slow second mode 0.1)."""
    q0 = _start(tool)
    duration = 0.03
    fine = simulate_flexible(tool, duration, q0=q0, u=U, output_dt=1e-4)
    assert fine.success and fine.t.size == 301
    ref = tool.simulate(fine.q[0], fine.v[0], fine.t, u=lambda t: np.array(U), rtol=1e-11,
                        atol=1e-13)
    assert ref.success
    assert np.max(fine.residual) < 1e-10, np.max(fine.residual)
    worst = 0.0
    for k in range(tool.nv):
        peak = np.max(np.abs(ref.q[:, k]))
        if peak > 1e-9:  # coordinates the motion does not move are compared absolutely
            worst = max(worst, np.max(np.abs(fine.q[:, k] - ref.q[:, k])) / peak)
        else:
            assert np.max(np.abs(fine.q[:, k] - ref.q[:, k])) < 1e-12
    assert worst < 1e-5, worst
    e_range = np.ptp(ref.energy)
    assert np.max(np.abs(fine.energy - ref.energy)) < 1e-6 * e_range
    coarse = simulate_flexible(tool, duration, q0=q0, u=U, output_dt=1e-2)
    names = list(tool.coordinate_names)
    misses = [np.max(np.abs(np.interp(ref.t, coarse.t, coarse.q[:, names.index(n)])
                            - ref.q[:, names.index(n)])) / np.max(np.abs(ref.q[:, names.index(n)]))
              for n in DEFLECTED]
    assert sorted(misses)[1] > 0.5, misses
