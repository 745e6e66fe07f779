"""One validator for ``closures:`` lists (YamlChecker.closures): the rigid model YAML and the
flexible model schema refuse the same bad closure with the same message, naming the file and
the key."""

import shutil
from pathlib import Path

import pytest

from multibody_dynamics.errors import ModelError
from multibody_dynamics.flexible.loader import load_flexible_model
from multibody_dynamics.model import load_model, share_dir

RIGID = """\
name: arm
urdf: arm.urdf
closures:
{closures}
"""
RIGID_OK = "  - {name: pin, type: spherical, frame_a: tip, frame_b: cart}"

FLEXIBLE = """\
name: flexible_parallelogram
gravity: [0.0, -9.81]
bodies:
  - name: link1
    joint: {{name: th1}}
    rigid: {{mass: 1.0, inertia: 0.02}}
  - name: link2
    joint: {{name: th2}}
    rigid: {{mass: 1.0, inertia: 0.02}}
  - name: link3
    joint: {{name: th3}}
    rigid: {{mass: 1.0, inertia: 0.02}}
closures:
{closures}
independent: [th1]
"""
FLEXIBLE_OK = "  - {name: pin, type: planar_revolute, body_a: link3, point_b: [0.4, 0.0]}"


def rigid_error(tmp_path: Path, closures: str) -> str:
    shutil.copy(share_dir() / "urdf" / "passive_arm.urdf", tmp_path / "arm.urdf")
    path = tmp_path / "robot.yaml"
    path.write_text(RIGID.format(closures=closures))
    with pytest.raises(ModelError) as info:
        load_model(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: "), msg
    return msg[len(f"{path}: "):]


def flexible_error(tmp_path: Path, closures: str) -> str:
    path = tmp_path / "flexible.yaml"
    path.write_text(FLEXIBLE.format(closures=closures))
    with pytest.raises(ModelError) as info:
        load_flexible_model(path, backend="numpy")
    msg = str(info.value)
    assert msg.startswith(f"{path}: "), msg
    return msg[len(f"{path}: "):]


@pytest.mark.parametrize("rigid, flexible, expected", [
    ("  - [spherical, tip, cart]", "  - [planar_revolute, link3]",
     "closures[0]: expected a mapping, got list"),
    ("  - {type: spherical, frame_a: tip, frame_b: cart, colour: red}",
     "  - {type: planar_revolute, body_a: link3, point_b: [0.4, 0.0], colour: red}",
     "closures[0].colour: unknown key; expected one of "),
    ("  - {frame_a: tip, frame_b: cart}", "  - {body_a: link3, point_b: [0.4, 0.0]}",
     "closures[0].type: missing"),
    ("  - {type: hinge, frame_a: tip, frame_b: cart}",
     "  - {type: hinge, body_a: link3, point_b: [0.4, 0.0]}",
     "closures[0].type: unknown closure type 'hinge'; expected one of "),
    ("  - {type: 3, frame_a: tip, frame_b: cart}",
     "  - {type: 3, body_a: link3, point_b: [0.4, 0.0]}",
     "closures[0].type: expected a non-empty string, got 3"),
    (RIGID_OK + "\n" + RIGID_OK, FLEXIBLE_OK + "\n" + FLEXIBLE_OK,
     "closures[1].name: duplicate closure name 'pin'"),
    ("  - {name: '', type: spherical, frame_a: tip, frame_b: cart}",
     "  - {name: '', type: planar_revolute, body_a: link3, point_b: [0.4, 0.0]}",
     "closures[0].name: expected a non-empty string, got ''"),
])
def test_both_schemas_refuse_a_bad_closure_alike(tmp_path, rigid, flexible, expected):
    r = rigid_error(tmp_path, rigid)
    f = flexible_error(tmp_path, flexible)
    assert r.startswith(expected), r
    assert f.startswith(expected), f
    if "unknown key" not in expected and "unknown closure type" not in expected:
        assert r == f  # the same sentence; only the lists of keys and types are the schema's


def test_required_keys_are_the_schemas_own(tmp_path):
    """Each schema still names its own missing key (frames vs. bodies)."""
    assert rigid_error(tmp_path, "  - {type: spherical, frame_a: tip}") == \
        "closures[0].frame_b: missing"
    assert flexible_error(tmp_path, "  - {type: planar_revolute, point_b: [0.4, 0.0]}") == \
        "closures[0].body_a: missing"


def test_known_types_are_listed(tmp_path):
    r = rigid_error(tmp_path, "  - {type: hinge, frame_a: tip, frame_b: cart}")
    f = flexible_error(tmp_path, "  - {type: hinge, body_a: link3, point_b: [0.4, 0.0]}")
    assert "weld, revolute" in r and "planar_revolute, planar_weld" in f


def test_not_a_list(tmp_path):
    assert rigid_error(tmp_path, "  {type: spherical}") == \
        "closures: expected a list of closures (cut joints), got {'type': 'spherical'}"
    assert flexible_error(tmp_path, "  {type: planar_revolute}") == \
        "closures: expected a non-empty list of closures (cut joints), got {'type': " \
        "'planar_revolute'}"


def test_an_empty_list_is_open_for_rigid_and_refused_for_flexible(tmp_path):
    """A rigid model with ``closures: []`` is an open tree; a flexible file's ``closures`` make
    it a closed loop, so an empty list is refused."""
    shutil.copy(share_dir() / "urdf" / "passive_arm.urdf", tmp_path / "arm.urdf")
    path = tmp_path / "robot.yaml"
    path.write_text("name: arm\nurdf: arm.urdf\nclosures: []\n")
    assert load_model(path).closures == ()
    assert flexible_error(tmp_path, "  []") == \
        "closures: expected a non-empty list of closures (cut joints), got []"
