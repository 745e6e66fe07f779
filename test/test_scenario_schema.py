"""One schema checker for every scenario kind (multibody_control/scenarios/schema.py): the same
value gets the same answer, in the same words, in a closed-loop, a rigid inversion, a flexible
inversion and a closed flexible inversion scenario, in a design study file and (the wording of
a bad number, multibody_dynamics.yaml_io.number_problem) in a model YAML.

Before the scenario package, the closed-loop validator accepted ``.inf`` for every number
(``kp: .inf``, a time ``t0: .inf``) while the inversion validators rejected it everywhere,
also inside the ``reference.inversion`` block of the same closed-loop file."""

import math
from pathlib import Path

import numpy as np
import pytest
from test_flexible_scenario_closed import SMALL, SMALL_ROBOT

from multibody_control.scenarios import (
    load_flexible_scenario,
    load_inversion_scenario,
    load_run_scenario,
    schema,
)
from multibody_dynamics.errors import InputError
from multibody_dynamics.model.resources import share_dir
from multibody_dynamics.yaml_io import load_yaml

SCENARIOS = share_dir() / "config" / "scenarios"

#: a bad value of a time key, and what every kind answers
BAD = [(".inf", "expected a finite number, got inf"),
       ("-.inf", "expected a finite number, got -inf"),
       (".nan", "expected a number, got nan"),
       ("true", "expected a number, got True"),
       ("'0.001'", "expected a number, got '0.001'")]


def _write(tmp_path: Path, kind: str, value: str) -> tuple[Path, object]:
    """A scenario of ``kind`` whose sample spacing ``dt`` is ``value`` (YAML text), and its
    loader."""
    if kind == "closed_flexible":
        (tmp_path / "small_tool.yaml").write_text(SMALL_ROBOT)
        text = SMALL
        assert "\ndt: " in text
        text = "\n".join(f"dt: {value}" if line.startswith("dt: ") else line
                         for line in text.splitlines())
        loader = load_flexible_scenario
    else:
        name, loader = {"run": ("run_passive_arm_pid", load_run_scenario),
                        "invert": ("invert_passive_arm", load_inversion_scenario),
                        "flexible": ("invert_flexible_manipulator", load_flexible_scenario)}[kind]
        lines = (SCENARIOS / f"{name}.yaml").read_text().splitlines()
        # the (first) dt key: top level, or in the run scenario's reference.inversion block
        i = next(i for i, line in enumerate(lines) if line.strip().startswith("dt: "))
        indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
        lines[i] = f"{indent}dt: {value}"
        text = "\n".join(lines)
    path = tmp_path / f"{kind}.yaml"
    path.write_text(text + "\n")
    return path, loader


@pytest.mark.parametrize("kind", ["run", "invert", "flexible", "closed_flexible"])
def test_every_kind_reads_a_good_dt(tmp_path, kind):
    # the edit itself is right: 2 ms is accepted by every kind (else the rejections below
    # could come from a damaged file)
    path, loader = _write(tmp_path, kind, "0.002")
    sc = loader(path)
    dt = sc.reference["inversion"].dt if kind == "run" else sc.dt
    assert dt == 0.002


@pytest.mark.parametrize("kind", ["run", "invert", "flexible", "closed_flexible"])
@pytest.mark.parametrize("value, answer", BAD, ids=[v for v, _ in BAD])
def test_every_kind_gives_the_same_answer(tmp_path, kind, value, answer):
    path, loader = _write(tmp_path, kind, value)
    with pytest.raises(InputError) as info:
        loader(path)
    message = str(info.value)
    assert message.startswith(str(path)), message  # names the file
    assert message.endswith(f"dt: {answer}"), message  # names the key, same words everywhere


def _run(tmp_path, text: str):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return load_run_scenario(path)


RUN = """\
robot: passive_arm
duration: 0.5
reference:
  joints: {t0: 0.0, tf: 0.5, start: {x: 0.0}, end: {x: 0.1}}
controller: {law: pid, kp: 100.0, kd: 20.0, ki: 1.0, integral_limit: .inf, effort_limit: .inf}
plant: {max_speed: .inf, effort_limit: .inf}
"""


def test_limits_take_inf_as_no_limit(tmp_path):
    # the documented exception: the limit keys (module docstring of schema.py)
    sc = _run(tmp_path, RUN)
    assert sc.controller["integral_limit"] == math.inf
    assert sc.controller["effort_limit"] == math.inf
    assert sc.max_speed == math.inf
    np.testing.assert_array_equal(sc.effort_limit, np.full(sc.model.nu, math.inf))


@pytest.mark.parametrize("old, new, key", [
    ("kp: 100.0", "kp: .inf", "controller.kp"),
    ("ki: 1.0", "ki: -.inf", "controller.ki"),
    ("duration: 0.5", "duration: .inf", "duration"),
    ("tf: 0.5,", "tf: .inf,", "reference.joints.tf"),
    ("end: {x: 0.1}", "end: {x: .inf}", "reference.joints.end.x"),
])
def test_other_numbers_of_a_run_scenario_are_finite(tmp_path, old, new, key):
    # accepted before the schema was shared (the closed-loop checker only refused NaN)
    assert old in RUN
    with pytest.raises(InputError, match=rf": {key}: expected a finite number"):
        _run(tmp_path, RUN.replace(old, new))


def test_the_checker_itself():
    where = "file.yaml"
    assert schema.number(where, "k", 2) == 2.0 and isinstance(schema.number(where, "k", 2), float)
    assert schema.number(where, "k", math.inf, infinite=True) == math.inf
    for bad in (math.inf, -math.inf, math.nan, True, None, "1", [1.0]):
        with pytest.raises(InputError, match=r"^file\.yaml: k: expected a"):
            schema.number(where, "k", bad)
    with pytest.raises(InputError, match="expected a number, got nan"):
        schema.number(where, "k", math.nan, infinite=True)  # a limit is never NaN
    with pytest.raises(InputError, match=r"expected a positive number \(> 0\), got 0"):
        schema.number(where, "k", 0, positive=True)
    with pytest.raises(InputError, match="expected a number >= -1, got -2"):
        schema.number(where, "k", -2, minimum=-1.0)
    assert schema.integer(where, "n", 3) == 3
    for bad in (0, 2.0, True, "3"):
        with pytest.raises(InputError, match="expected an integer >= 1"):
            schema.integer(where, "n", bad)
    np.testing.assert_array_equal(schema.matrix(where, "G", [[1, 2], [3, 4]], (2, 2)),
                                  [[1.0, 2.0], [3.0, 4.0]])
    for bad in ([[1, 2], [3]], [[1, 2]], [], "x"):
        with pytest.raises(InputError, match=r"G: expected a finite 2 x 2 matrix \(rows x cols\)"):
            schema.matrix(where, "G", bad, (2, 2), "rows x cols")
    with pytest.raises(InputError, match="G: expected a finite number, got inf"):
        schema.matrix(where, "G", [[1.0, math.inf]])
    with pytest.raises(InputError, match="k.b: unknown key; expected one of a"):
        schema.mapping(where, "k", {"a": 1, "b": 2}, {"a"})
    assert schema.merge({"a": {"b": 1, "c": 2}}, {"a": {"b": 3}}) == {"a": {"b": 3, "c": 2}}
    assert load_yaml("x: .inf")["x"] == math.inf  # what a YAML file gives the checker


# -- the design study files and the model YAML answer in the same words -------------------------
#: a study of the analytic problem (cheap to build); its swarm and reference keys are edited
STUDY = """\
problem: sphere
options: {dim: 2, center: 0.3}
optimizer: {particles: 4, iterations: 2, seed: 1, w: 0.9}
bounds: {x0: [0.0, 1.0]}
reference: {source: closed form, parameters: {x0: 0.3, x1: 0.3}, criterion: 0.0}
"""


@pytest.mark.parametrize("old, key", [("w: 0.9", "optimizer.w"),
                                      ("x0: 0.3,", "reference.parameters.x0"),
                                      ("criterion: 0.0", "reference.criterion"),
                                      ("[0.0, 1.0]", "bounds.x0[1]")])
@pytest.mark.parametrize("value, answer", BAD, ids=[v for v, _ in BAD])
def test_a_study_file_gives_the_same_answer(tmp_path, old, key, value, answer):
    # before the study files were checked by the scenario schema: NaN and inf of a swarm weight
    # and a NaN reference criterion were "a number" there (the swarm then refused NaN as
    # "expected a finite number >= 0", and the criterion was kept), and ±inf of a reference
    # parameter was "expected a number"
    from multibody_control.design.study import load_study

    path = tmp_path / "study.yaml"
    assert old in STUDY
    new = {"w: 0.9": f"w: {value}", "x0: 0.3,": f"x0: {value},",
           "criterion: 0.0": f"criterion: {value}", "[0.0, 1.0]": f"[0.0, {value}]"}[old]
    path.write_text(STUDY.replace(old, new))
    with pytest.raises(InputError) as info:
        load_study(path)
    message = str(info.value)
    assert message == f"{path}: {key}: {answer}", message


def test_a_good_study_file_loads(tmp_path):
    # the edits above act on a file that is right as it stands
    from multibody_control.design.study import load_study

    path = tmp_path / "study.yaml"
    path.write_text(STUDY)
    study = load_study(path)
    assert study.optimizer.w == 0.9 and study.reference["criterion"] == 0.0
    np.testing.assert_array_equal(study.upper, [1.0, study.upper[1]])


def test_a_study_file_refuses_unknown_keys_and_wrong_types(tmp_path):
    from multibody_control.design.study import load_study

    path = tmp_path / "study.yaml"
    for old, new, expected in [
            ("seed: 1", "seed: 1, speed: 2", "optimizer.speed: unknown key; expected one of "),
            ("problem: sphere", "problem: sphere\nextra: 1", "extra: unknown key; expected "),
            ("seed: 1", "seed: 1.5", "optimizer.seed: expected an integer >= 0, got 1.5"),
            ("source: closed form", "source: 3", "reference.source: expected text, got 3")]:
        path.write_text(STUDY.replace(old, new))
        with pytest.raises(InputError, match=f"^{path}: {expected}"):
            load_study(path)
    with pytest.raises(InputError, match=f"^{tmp_path / 'none.yaml'}: study file not found"):
        load_study(tmp_path / "none.yaml")


@pytest.mark.parametrize("value, answer", BAD, ids=[v for v, _ in BAD])
def test_a_model_file_gives_the_same_answer(tmp_path, value, answer):
    # the model YAML checker (multibody_dynamics) shares the wording: it called NaN "expected
    # a finite number" before
    from multibody_dynamics.errors import ModelError
    from multibody_dynamics.model import load_model

    text = (share_dir() / "config" / "robots" / "passive_arm.yaml").read_text()
    urdf = share_dir() / "urdf" / "passive_arm.urdf"
    text = text.replace("urdf: ../../urdf/passive_arm.urdf", f"urdf: {urdf}")
    assert "gravity: [0.0, 0.0, -9.81]" in text
    path = tmp_path / "model.yaml"
    path.write_text(text.replace("gravity: [0.0, 0.0, -9.81]", f"gravity: [0.0, 0.0, {value}]"))
    with pytest.raises(ModelError) as info:
        load_model(path)
    assert str(info.value) == f"{path}: gravity[2]: {answer}"
