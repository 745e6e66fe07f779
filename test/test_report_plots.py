"""The run and invert plots: a panel only for what the run has (no empty "no constraints" or
task-error panel on an open chain without a task frame, no internal-state panel for a fully
actuated inversion), legends off the data."""

import numpy as np

from multibody_control.cli import main
from multibody_dynamics.robot import load_robot

HINGE_XML = """<mujoco model="hinge">
  <option gravity="0 0 0"/>
  <worldbody><body name="b"><joint name="j" type="hinge" axis="0 0 1"/>
    <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.25"/></body></worldbody>
  <actuator><motor name="m" joint="j" gear="2"/></actuator>
</mujoco>"""


def _off_the_data(fig) -> bool:
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None:
            a, b = ax.get_window_extent(), legend.get_window_extent()
            if b.x0 < a.x1 and b.x1 > a.x0 and b.y0 < a.y1 and b.y1 > a.y0:
                return False
    return True


def test_open_chain_run_plot_has_no_empty_panels(figures, tmp_path):
    """A PD run of a free hinge (no constraints, no task frame): joint error and input only."""
    from multibody_control.scenarios import plot, run_scenario, scenario_from_mapping

    xml = tmp_path / "hinge.xml"
    xml.write_text(HINGE_XML)
    sc = scenario_from_mapping({
        "robot": load_robot(xml), "duration": 0.1, "task_frame": None,
        "reference": {"joints": {"t0": 0.0, "tf": 0.05, "order": 5, "start": {"j": 0.0},
                                 "end": {"j": 0.1}}},
        "controller": {"law": "pd", "kp": 100.0, "kd": 20.0}, "plant": {"rate": 1000.0}})
    plot(run_scenario(sc), tmp_path / "r.png")
    (fig,) = figures
    labels = [a.get_ylabel().split("\n")[0] for a in fig.axes]
    assert labels == ["joint error", "input u [N | N m]"]
    assert all("no constraints" not in t.get_text() for a in fig.axes for t in a.texts)
    assert _off_the_data(fig)


def test_invert_plot_legends_off_the_data(figures, tmp_path, capsys):
    xml = tmp_path / "hinge.xml"
    xml.write_text(HINGE_XML)
    path = tmp_path / "inv.yaml"
    path.write_text(f"robot: {xml}\ntask: {{t0: 0.0, tf: 1.0, joints: {{j: {{start: 0.0, "
                    "end: 1.0}}}\nmethod: classical\ndt: 0.01\n")
    assert main(["invert", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    (fig,) = figures
    # a fully actuated hinge has no internal states: no empty panel for them
    assert [a.get_ylabel().split("\n")[0] for a in fig.axes] == ["output y", "q [m, rad]",
                                                               "feedforward u"]
    assert any(ax.get_legend() is not None for ax in fig.axes)
    assert _off_the_data(fig)
    # the open-loop check of the joint task is drawn over the planned joint (dotted)
    styles = [line.get_linestyle() for line in fig.axes[1].get_lines()]
    assert ":" in styles and np.isfinite(fig.axes[1].get_lines()[0].get_ydata()).all()
