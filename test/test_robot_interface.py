"""load_robot: one entry point for every shipped model, rigid and flexible, and the model
summary (RobotModel) they all satisfy."""

import numpy as np
import pytest

from multibody_dynamics.errors import ModelError
from multibody_dynamics.flexible.closed import ClosedFlexibleChain
from multibody_dynamics.flexible.loader import load_flexible_model, shipped_flexible_models
from multibody_dynamics.model import MultibodyModel, load_model, shipped_robots
from multibody_dynamics.model.resources import robots_dir
from multibody_dynamics.robot import (
    RobotModel,
    has_closures,
    has_elastic_coordinates,
    load_robot,
    shipped_models,
)

# Which shipped models have loops, and how many elastic coordinates each flexible one has
# (2 modes per link or arm; the machine tool: 12 + 6 modes), from the model files.
CLOSED = {"dual_arm_load", "five_bar", "four_bar", "prr_surface", "slider_crank",
          "flexible_parallel_tool"}
ELASTIC = {"flexible_cart_manipulator": 4, "flexible_manipulator": 4,
           "flexible_manipulator_book": 4, "flexible_parallel_tool": 18,
           "flexible_cart_manipulator_design": 4}


@pytest.fixture(scope="module")
def robots():
    return {name: load_robot(name) for name in shipped_models()}


def test_every_shipped_model_loads_through_one_entry_point(robots):
    assert set(robots) == set(shipped_robots()) | set(shipped_flexible_models())
    for name, robot in robots.items():
        assert isinstance(robot, RobotModel), name
        assert robot.name == name
        assert len(robot.coordinate_names) == robot.nv
        assert len(robot.input_names) == robot.nu
        assert np.shape(robot.B) == (robot.nv, robot.nu)
        assert robot.neutral().shape == (robot.nq,)
        assert has_closures(robot) == (name in CLOSED), name
        assert robot.nq_e == ELASTIC.get(name, 0), name
        assert has_elastic_coordinates(robot) == (name in ELASTIC)
        assert robot.summary().strip()


def test_load_robot_returns_the_family_loaders_objects(robots):
    for name in shipped_robots():
        robot = robots[name]
        assert isinstance(robot, MultibodyModel)
        np.testing.assert_array_equal(robot.B, load_model(name).B)  # same model, exactly
    for name in shipped_flexible_models():
        robot = robots[name]
        assert type(robot) is type(load_flexible_model(name))
    assert isinstance(robots["flexible_parallel_tool"], ClosedFlexibleChain)
    # a flexible chain's inputs are its joint drives; a closed one's, its actuated joints
    assert robots["flexible_manipulator"].input_names == robots["flexible_manipulator"].joint_names
    assert robots["flexible_parallel_tool"].input_names == ("s1", "s2")


def test_load_robot_by_path_and_bad_names(tmp_path):
    path = robots_dir() / "five_bar.yaml"
    assert load_robot(path).name == "five_bar"
    assert load_robot(str(robots_dir() / "flexible_manipulator.yaml")).nq_e == 4
    with pytest.raises(ModelError, match="unknown robot 'no_such_robot'.*flexible_manipulator"):
        load_robot("no_such_robot")
    with pytest.raises(ModelError, match="no such model file"):
        load_robot(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("bodies: 3\nname: bad\n")  # the flexible schema, malformed
    with pytest.raises(ModelError, match="bad.yaml"):
        load_robot(bad)
