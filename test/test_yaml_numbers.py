"""YAML numbers as people write them (and as ROS 2 parameter files read them): 1e-3, 2.1e11
and 1.0e6 are numbers in every file the suite reads, not strings."""

import pytest

from multibody_control.scenarios import load_run_scenario
from multibody_dynamics.model import load_model
from multibody_dynamics.model.resources import robots_dir, share_dir
from multibody_dynamics.yaml_io import load_yaml


@pytest.mark.parametrize("text, value", [
    ("1e-3", 1e-3), ("2.1e11", 2.1e11), ("1.0e6", 1.0e6), ("-2E+3", -2e3), ("1.e2", 100.0),
    (".5e1", 5.0), ("1.0e+6", 1.0e6), ("12", 12), ("0.25", 0.25),
])
def test_exponent_notation_is_a_number(text, value):
    got = load_yaml(f"x: {text}")["x"]
    assert got == value and not isinstance(got, str)


@pytest.mark.parametrize("text", ["'1e-3'", "1e3x", "e5", "1e", "abc"])
def test_strings_stay_strings(text):
    assert isinstance(load_yaml(f"x: {text}")["x"], str)


def test_scenario_with_exponent_numbers(tmp_path):
    shipped = share_dir() / "config" / "scenarios" / "run_slider_crank.yaml"
    text = shipped.read_text()
    assert "kp: 100.0" in text and "rate: 1000.0" in text
    edited = tmp_path / "run.yaml"
    edited.write_text(text.replace("kp: 100.0", "kp: 1e2").replace("rate: 1000.0", "rate: 1e3")
                      .replace("robot: slider_crank",
                               f"robot: {robots_dir() / 'slider_crank.yaml'}"))
    a, b = load_run_scenario(shipped), load_run_scenario(edited)
    assert b.controller == a.controller
    assert b.rate == a.rate == 1000.0


def test_model_yaml_with_exponent_numbers(tmp_path):
    src = robots_dir() / "passive_arm.yaml"
    text = src.read_text()
    assert "stiffness: 50.0" in text
    urdf = share_dir() / "urdf"
    edited = tmp_path / "passive_arm.yaml"
    edited.write_text(text.replace("stiffness: 50.0", "stiffness: 5e1")
                      .replace("urdf: ../../urdf/passive_arm.urdf",
                               f"urdf: {urdf / 'passive_arm.urdf'}"))
    assert load_model(edited).stiffness.max() == load_model(src).stiffness.max() == 50.0
