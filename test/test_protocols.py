"""The Dynamics and PlantStepper protocols: every shipped robot, loaded by load_robot, gives
objects that satisfy them, and calling them agrees with independent relations (kinetic energy
from the mass matrix, inverse dynamics undoing forward dynamics, the stepper's energy and
closure residuals)."""

import numpy as np
import pytest
from conftest import ASSEMBLY_GUESS, assembled

from multibody_dynamics.elastic_joints import ElasticJoints
from multibody_dynamics.errors import DimensionError, InputError
from multibody_dynamics.flexible.closed import ClosedFlexibleChain
from multibody_dynamics.flexible.stepper import (
    ClosedFlexibleStepper,
    FlexibleStepper,
)
from multibody_dynamics.flexible.system import FlexibleChain
from multibody_dynamics.model import load_model
from multibody_dynamics.projection import ForwardDynamicsResult, ProjectedDynamics
from multibody_dynamics.quasi_velocity import (
    ConstrainedQuasiVelocityResult,
    QuasiVelocityDynamics,
    QuasiVelocityInverseResult,
)
from multibody_dynamics.rigid import RigidDynamics
from multibody_dynamics.robot import (
    Dynamics,
    PlantStepper,
    has_closures,
    load_robot,
    robot_dynamics,
    robot_stepper,
    shipped_models,
)
from multibody_dynamics.simulate import Simulator, SimulatorConfig

# Rigid models whose constraints the projection handles: the closed loops plus the rolling
# cart's Pfaffian rows (multibody_dynamics.rolling.PFAFFIAN_MODELS).
PROJECTED = {"dual_arm_load", "five_bar", "four_bar", "prr_surface", "slider_crank",
             "two_wheeled_cart"}
DT = 1e-3  # [s] one tick of the simulator node at 1 kHz


@pytest.fixture(scope="module", params=shipped_models())
def loaded(request):
    robot = load_robot(request.param)
    stepper = robot_stepper(robot, SimulatorConfig(dt=DT))
    return request.param, robot, robot_dynamics(robot), stepper


def _reset(name, stepper):
    """Reset to the model's start, or near an assembled pose where that is not one."""
    guess = ASSEMBLY_GUESS.get(name)
    stepper.reset(None if guess is None else np.asarray(guess, float))


def _state(name, robot, stepper, rng):
    """An assembled configuration (the stepper's reset) and velocities the closures admit
    (one step from rest under a random force)."""
    _reset(name, stepper)
    stepper.step(rng.normal(size=robot.nv))
    return stepper.q.copy(), stepper.v.copy()


def test_dynamics_and_stepper_satisfy_the_protocols(loaded):
    name, robot, dyn, stepper = loaded
    assert isinstance(dyn, Dynamics), name
    assert isinstance(stepper, PlantStepper), name
    if hasattr(robot, "pin_model"):
        kind = ProjectedDynamics if name in PROJECTED else RigidDynamics
        assert type(dyn) is kind and type(stepper) is Simulator, name
    else:
        assert dyn is robot
        closed = isinstance(robot, ClosedFlexibleChain)
        assert type(stepper) is (ClosedFlexibleStepper if closed else FlexibleStepper), name
    assert stepper.constrained == (has_closures(robot) or name in PROJECTED), name


def test_dynamics_calls_return_arrays_that_agree(loaded):
    name, robot, dyn, stepper = loaded
    rng = np.random.default_rng(7)
    q, v = _state(name, robot, stepper, rng)
    nv = robot.nv
    tau = rng.normal(size=nv)
    a = dyn.forward_dynamics(q, v, tau=tau)
    assert type(a) is np.ndarray and a.shape == (nv,) and np.all(np.isfinite(a)), name
    M = dyn.mass_matrix(q)
    assert M.shape == (nv, nv)
    # M is symmetric positive definite; 1e-9 relative: rounding of the composite inertias
    np.testing.assert_allclose(M, M.T, atol=1e-9 * np.abs(M).max())
    assert np.linalg.eigvalsh(M).min() > 0, name
    # The kinetic energy is v^T M v / 2, whatever the energy routine computes it from
    # (pinocchio's computeKineticEnergy, the flexible bodies' mass integrals); tolerance:
    # rounding relative to the energies involved
    T = dyn.energy(q, v) - dyn.energy(q, np.zeros(nv))
    np.testing.assert_allclose(T, 0.5 * v @ M @ v, rtol=1e-8, atol=1e-10)
    # inverse dynamics undoes forward dynamics: exactly tau on a tree, on a closed loop the
    # minimum-norm force that produces the same motion; 1e-7 relative: the KKT/projection solves
    # of the accelerations lose a few digits to the conditioning of M
    tau_id = dyn.inverse_dynamics(q, v, a)
    assert type(tau_id) is np.ndarray and tau_id.shape == (nv,)
    scale = 1.0 + np.abs(a).max()
    np.testing.assert_allclose(dyn.forward_dynamics(q, v, tau=tau_id), a, rtol=0,
                               atol=1e-7 * scale)
    if not stepper.constrained:
        np.testing.assert_allclose(tau_id, tau, rtol=0, atol=1e-7 * (1.0 + np.abs(tau).max()))


def test_stepper_calls(loaded):
    name, robot, dyn, stepper = loaded
    rng = np.random.default_rng(3)
    _reset(name, stepper)
    t0, n0 = stepper.t, stepper.nsteps
    tau = rng.normal(size=robot.nv)
    q, v = stepper.step(tau)
    assert q.shape == (robot.nq,) and v.shape == (robot.nv,), name
    assert stepper.t == pytest.approx(t0 + DT) and stepper.nsteps == n0 + 1
    assert stepper.nfev > 0
    # the stepper's energy is the dynamics' energy at its state (same routine, so exact)
    assert stepper.energy() == pytest.approx(dyn.energy(stepper.q, stepper.v), rel=1e-12)
    lam, phi, Av = stepper.sample(tau)
    if stepper.constrained:
        assert lam.shape == (len(stepper.constraints.labels),), name
        # the step ends projected on the closures (tolerances of the projections: 1e-9 and
        # below, SimulatorConfig.position_tol and the flexible minimum-norm Newton)
        assert phi < 1e-8 and Av < 1e-8, (name, phi, Av)
    else:
        assert lam.shape == (0,) and phi == 0.0 and Av == 0.0


def test_stepper_refuses_a_wrong_force():
    stepper = robot_stepper(load_robot("flexible_manipulator"))
    with pytest.raises(ValueError, match="tau"):
        stepper.sample(np.zeros(stepper.chain.nv + 1))


def test_rich_results_stay_available():
    """The protocol's arrays are the ``a`` and ``tau`` fields of the projection's results."""
    model = load_model("four_bar")
    pd = ProjectedDynamics(model)
    q = pd.project_position(model.neutral()).q
    v = pd.project_velocity(q, np.ones(model.nv))
    tau = np.linspace(-1.0, 1.0, model.nv)
    res = pd.forward_dynamics_result(q, v, tau)
    assert isinstance(res, ForwardDynamicsResult)
    np.testing.assert_array_equal(pd.forward_dynamics(q, v, tau), res.a)
    np.testing.assert_array_equal(pd.inverse_dynamics(q, v, res.a),
                                  pd.inverse_dynamics_result(q, v, res.a).tau)


@pytest.mark.parametrize("name", ["arm7", *ASSEMBLY_GUESS])
def test_quasi_velocity_dynamics_satisfies_the_dynamics_protocol(name):
    """QuasiVelocityDynamics returns arrays like the rest; its accelerations are the projection
    method's (an independent formulation) and its inverse dynamics gives them back."""
    model = load_model(name)
    qd = QuasiVelocityDynamics(model)
    assert isinstance(qd, Dynamics)
    rng = np.random.default_rng(5)
    if name in ASSEMBLY_GUESS:
        q, v, tau = assembled(model, rng, ASSEMBLY_GUESS[name])
    else:
        q, v, tau = model.neutral() + rng.uniform(-1, 1, model.nq), rng.normal(size=model.nv), \
            rng.normal(size=model.nv)
    a = qd.forward_dynamics(q, v, tau=tau)
    assert type(a) is np.ndarray and a.shape == (model.nv,)
    res = qd.forward_dynamics_result(q, v, tau)
    assert isinstance(res, ConstrainedQuasiVelocityResult)
    np.testing.assert_array_equal(a, res.a)  # the same computation
    # 1e-9 relative: two formulations (Cholesky/SVD against the projection's solves) differ by a
    # few condition numbers of M times machine epsilon (as test_quasi_velocity.py)
    scale = 1.0 + np.abs(a).max()
    np.testing.assert_allclose(a, ProjectedDynamics(model).forward_dynamics(q, v, tau),
                               rtol=0, atol=1e-9 * scale)
    tau_id = qd.inverse_dynamics(q, v, a)
    assert type(tau_id) is np.ndarray and tau_id.shape == (model.nv,)
    inv = qd.inverse_dynamics_result(q, v, a)
    assert isinstance(inv, QuasiVelocityInverseResult) and inv.success, inv.message
    np.testing.assert_array_equal(tau_id, inv.tau)
    np.testing.assert_allclose(qd.forward_dynamics(q, v, tau=tau_id), a, rtol=0,
                               atol=1e-9 * scale)
    M = qd.mass_matrix(q)
    # the mass matrix is W W^T of the quasi-velocity factorization, the kinetic energy
    # 1/2 ||nu||^2 = v^T M v / 2 (round-off)
    W = qd.terms(q, v).W
    np.testing.assert_allclose(M, W @ W.T, rtol=0, atol=1e-12 * np.abs(M).max())
    T = qd.energy(q, v) - qd.energy(q, np.zeros(model.nv))
    np.testing.assert_allclose(T, 0.5 * v @ M @ v, rtol=1e-10)
    np.testing.assert_allclose(T, qd.kinetic_energy(q, v), rtol=1e-10)


@pytest.mark.parametrize("name", ["passive_arm", "passive_arm_minphase"])
def test_elastic_joints_satisfy_the_dynamics_protocol(name):
    model = load_model(name)
    ej = ElasticJoints(model)
    assert isinstance(ej, Dynamics)
    rng = np.random.default_rng(11)
    q, v, tau = model.neutral() + 0.1 * rng.normal(size=model.nq), rng.normal(size=model.nv), \
        rng.normal(size=model.nv)
    # the reduced form and the spring model give the same motion and energy (1e-9: the
    # Cholesky solve of the reduced equation against aba)
    spring = RigidDynamics(ej.spring_model)
    np.testing.assert_allclose(ej.forward_dynamics(q, v, tau=tau),
                               spring.forward_dynamics(q, v, tau), atol=1e-9)
    assert ej.energy(q, v) == pytest.approx(spring.energy(q, v), rel=1e-12)


def test_flexible_chain_is_its_own_dynamics():
    robot = load_robot("flexible_manipulator")
    assert isinstance(robot, FlexibleChain) and robot_dynamics(robot) is robot


# ------------------------------------------------------------------ one result type per kind
def test_every_simulation_and_inversion_result_is_of_the_common_type():
    from multibody_control.inversion.causal import CausalInversionResult
    from multibody_control.inversion.closed_flexible import ClosedInversion
    from multibody_control.inversion.flexible import TrackingResult
    from multibody_control.inversion.result import InversionResult
    from multibody_dynamics.elastic_joints import ElasticSimulationResult
    from multibody_dynamics.flexible.closed import ClosedSimulation as OldPlace
    from multibody_dynamics.flexible.simulation import ClosedSimulation, FlexibleSimulation
    from multibody_dynamics.simulate import SimulationResult

    for cls in (ElasticSimulationResult, FlexibleSimulation, ClosedSimulation, TrackingResult):
        assert issubclass(cls, SimulationResult), cls
    assert OldPlace is ClosedSimulation  # the old import keeps working
    for cls in (CausalInversionResult, ClosedInversion):
        assert issubclass(cls, InversionResult), cls


def _check_simulation(res, model, u):
    """Fields of a flexible run against values recomputed here from its samples."""
    n = res.t.size
    assert res.q.shape == res.v.shape == (n, model.nv) and res.residual.shape == (n,)
    # the input held is B u at every sample (exact: the same product)
    np.testing.assert_array_equal(res.tau, np.tile(model.B @ u, (n, 1)))
    # the energy is the model's at each sample (same routine: exact)
    np.testing.assert_array_equal(res.energy, [model.energy(q, v) for q, v in zip(res.q, res.v)])
    assert res.table().shape == (n, len(res.columns()))
    assert res.mode == "adaptive" and res.nrejected is None and res.nfev > 0


def test_flexible_runs_give_simulation_results_with_the_common_calls(tmp_path):
    from multibody_dynamics.flexible.simulation import FlexibleSimulation, simulate_flexible

    chain = load_robot("flexible_manipulator")
    u = np.array([0.5, -0.2])  # [N m] held
    res = simulate_flexible(chain, 0.05, u=u, output_dt=0.01)
    assert type(res) is FlexibleSimulation and res.success, res.message
    _check_simulation(res, chain, u)
    # the calls every SimulationResult takes (the CLI writes any result through them)
    assert "peak |q_e|" in res.summary(dissipative=True)
    header = res.to_csv(tmp_path / "run.csv").read_text().splitlines()[0]
    assert header == ",".join(["t"] + [f"q.{n}" for n in chain.coordinate_names]
                              + [f"v.{n}" for n in chain.coordinate_names] + ["energy"])
    assert res.plot(tmp_path / "run.png", title="t", model=chain).is_file()


def test_flexible_simulation_refuses_bad_starts_and_inputs_by_name():
    # the class and the words of each refusal: the argument, what was expected, what was given
    from multibody_dynamics.flexible.simulation import simulate_flexible

    chain = load_robot("flexible_manipulator")
    nv, nu = chain.nv, chain.nu
    with pytest.raises(DimensionError, match=rf"^q0 must have shape \({nv},\), "
                                             rf"got \({nv - 1},\)$"):
        simulate_flexible(chain, 0.01, q0=np.zeros(nv - 1))
    with pytest.raises(DimensionError, match=rf"^v0 must have shape \({nv},\), "
                                             rf"got \(2, {nv}\)$"):
        simulate_flexible(chain, 0.01, v0=np.zeros((2, nv)))
    with pytest.raises(DimensionError, match=rf"^u must have shape \({nu},\)"):
        simulate_flexible(chain, 0.01, u=np.zeros(nu + 1))
    with pytest.raises(InputError, match="^u must be finite$"):
        simulate_flexible(chain, 0.01, u=np.full(nu, np.nan))
    with pytest.raises(InputError, match="^duration: expected a positive time in s, got -1"):
        simulate_flexible(chain, -1.0)


def test_closed_flexible_simulation_records_energy_and_input():
    from multibody_dynamics.flexible.simulation import ClosedSimulation

    small = load_robot("flexible_parallel_tool",
                       parameters=dict(modes_long=3, modes_short=1, link_elements=6))
    q = np.zeros(small.nv)
    q[:4] = [0.0, 0.8, np.pi / 4, 2.4]
    q = small.project_position(q, partitioned=True)
    u = np.array([1.0, -2.0])  # [N] on the two carts
    res = small.simulate(q, np.zeros(small.nv), np.linspace(0.0, 0.01, 3), u=lambda t: u)
    assert type(res) is ClosedSimulation and res.success, res.message
    _check_simulation(res, small, u)
    assert res.name == small.name and res.names == small.coordinate_names
