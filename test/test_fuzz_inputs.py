"""Property tests over the files users write: every model YAML, scenario file and CSV
trajectory, however damaged, loads or ends in one clear error (a MultibodyError, which the
CLI prints as one line), never another exception, a hang or NaN in what was loaded.

Each example takes a shipped file, replaces one value anywhere in it (or deletes a key) with
a value of the wrong kind, and loads the result."""

import copy
import math
import os
import time

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multibody_control.inversion.flexible_scenario import (
    is_flexible_scenario,
    load_flexible_scenario,
)
from multibody_control.inversion.scenario import load_inversion_scenario
from multibody_control.scenarios import load_run_scenario
from multibody_control.trajectories import read_trajectory_csv
from multibody_dynamics.errors import MultibodyError
from multibody_dynamics.model.resources import robots_dir, share_dir
from multibody_dynamics.robot import load_robot
from multibody_dynamics.yaml_io import load_yaml

# values of the wrong kind, and of the right kind but absurd
BAD = st.sampled_from([None, "", "abc", "1e-3", -1, 0, 1, -1e300, 1e300, math.nan, math.inf,
                       -math.inf, True, [], {}, [1, 2], [[1.0]], {"a": 1}, 0.5, 3, -0.0,
                       "../../nowhere.urdf", [None], [math.nan, 1.0, 2.0]])
# one load must end quickly: a damaged file is no reason to hang (seconds, generous for CI)
LOAD_TIME_LIMIT = 10.0


def _paths(node, prefix=()):
    """Every (path, is_mapping_key) in a parsed YAML tree."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _mutate(tree, path, value, delete):
    tree = copy.deepcopy(tree)
    if not path:
        return value
    parent = tree
    for key in path[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return tree


def _mutations(files):
    trees = {f: load_yaml(f.read_text()) for f in files}

    @st.composite
    def mutation(draw):
        f = draw(st.sampled_from(sorted(trees)))
        paths = list(_paths(trees[f]))
        path = draw(st.sampled_from(paths))
        return f, _mutate(trees[f], path, draw(BAD), draw(st.booleans()))

    return mutation()


def _write(tmp_path, src, tree):
    """The mutated tree as a file in tmp_path; a relative ``urdf`` path (the only relative
    path in the shipped files) made absolute so that it still resolves."""
    if isinstance(tree, dict) and isinstance(tree.get("urdf"), str):
        tree = {**tree, "urdf": str((src.parent / tree["urdf"]).resolve())}
    out = tmp_path / src.name
    out.write_text(yaml.safe_dump(tree, sort_keys=False, allow_unicode=True))
    return out


def _no_nan(obj, depth=0):
    """No NaN in any float or array reachable from a loaded object's public attributes."""
    if depth > 3:
        return
    if isinstance(obj, float):
        assert not math.isnan(obj)
    elif isinstance(obj, np.ndarray) and obj.dtype.kind == "f":
        assert not np.any(np.isnan(obj))
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _no_nan(x, depth + 1)
    elif isinstance(obj, dict):
        for x in obj.values():
            _no_nan(x, depth + 1)
    elif hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:
            _no_nan(getattr(obj, name), depth + 1)


def _load_or_clear_error(load, path):
    start = time.perf_counter()
    try:
        loaded = load(path)
    except MultibodyError as exc:
        message = str(exc)
        assert message and "\n" not in message.strip(), message
        loaded = None
    assert time.perf_counter() - start < LOAD_TIME_LIMIT
    return loaded


MODEL_FILES = sorted(robots_dir().glob("*.yaml"))
SCENARIO_FILES = sorted((share_dir() / "config" / "scenarios").glob("*.yaml"))
# FUZZ_EXAMPLES=500 for a longer local search; 60 keeps the suite fast
FUZZ = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 60)), deadline=None,
                derandomize=not os.environ.get("FUZZ_EXAMPLES"),
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@FUZZ
@given(_mutations([f for f in MODEL_FILES if "parallel_tool" not in f.name]))
def test_damaged_model_files(tmp_path, mutation):
    src, tree = mutation
    robot = _load_or_clear_error(load_robot, _write(tmp_path, src, tree))
    if robot is not None:
        _no_nan(getattr(robot, "B", None))


def _load_scenario(path):
    if is_flexible_scenario(path):
        return load_flexible_scenario(path)
    if path.name.startswith("run_"):
        return load_run_scenario(path)
    return load_inversion_scenario(path)


@FUZZ
@given(_mutations(SCENARIO_FILES))
def test_damaged_scenario_files(tmp_path, mutation):
    src, tree = mutation
    scenario = _load_or_clear_error(_load_scenario, _write(tmp_path, src, tree))
    if scenario is not None:
        _no_nan(scenario)


CELL = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32).map(repr),
                 st.sampled_from(["", "x", "1e-3", "nan", " 1", "--", "1,2"]),
                 st.integers(-5, 5).map(str))


@FUZZ
@given(st.lists(st.lists(CELL, min_size=0, max_size=4), min_size=0, max_size=12),
       st.sampled_from([["t", "q.crank"], ["t", "q.crank", "v.crank"], ["q.crank", "t"],
                        ["t"], ["t", "q.crank", "q.crank"], ["t", "q.rod"]]))
def test_damaged_trajectory_csv(tmp_path, rows, header):
    path = tmp_path / "motion.csv"
    path.write_text("\n".join([",".join(header)] + [",".join(r) for r in rows]) + "\n")
    traj = _load_or_clear_error(lambda p: read_trajectory_csv(p, ["crank"]), path)
    if traj is not None:
        for x in (traj.t, traj.q, traj.v, traj.a):
            assert np.all(np.isfinite(x))


@pytest.mark.parametrize("src", MODEL_FILES[:1])
def test_mutation_helper_changes_the_file(src):
    tree = load_yaml(src.read_text())
    assert _mutate(tree, ("name",), 3, False)["name"] == 3 and tree["name"] != 3
