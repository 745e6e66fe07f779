"""What a new user meets first (a pass over the README, the docs and the CLI with robots of
their own and plausible mistakes), kept right: a sample interval longer than the inversion's
motion, a --plot name that is no image, a NaN --tau, a run's wrong gain count (before the
reference inversion), a file of the wrong kind (scenario, model, URDF) and a misspelt robot
are refused in one line before any work; a closed loop's --q0 moved by the assembly is
reported; a long numba compilation is announced; a closed stdout pipe loses no result."""

import pytest

from multibody_control.cli import main
from multibody_dynamics.errors import InputError
from multibody_dynamics.model.resources import share_dir

SCENARIOS = share_dir() / "config" / "scenarios"


def _edited(tmp_path, name, old, new):
    """A copy of the shipped scenario ``name`` with the line ``old`` replaced by ``new``."""
    text = (SCENARIOS / name).read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


def test_inversion_dt_longer_than_the_motion_is_refused(tmp_path, capsys):
    """dt 5 s on the 0.2 .. 1.7 s half circle: one line naming dt and the motion, before any
    work, nothing written (it printed a 2529 mm miss as a warning and exited 0)."""
    path = _edited(tmp_path, "invert_passive_arm.yaml", "dt: 0.001", "dt: 5")
    assert main(["invert", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert "sample interval 5 s is not shorter than the motion 0.2 .. 1.7 s" in line
    assert "expected dt < 1.5 s" in line
    assert not (tmp_path / "out").exists()


def test_flexible_inversion_dt_longer_than_the_motion_is_refused(tmp_path):
    """The same rule when a flexible scenario is read (0.2 .. 1.2 s motion, dt 1 s)."""
    from multibody_control.inversion.flexible_scenario import load_flexible_scenario

    path = _edited(tmp_path, "invert_flexible_manipulator.yaml", "dt: 0.001", "dt: 1.0")
    with pytest.raises(InputError, match=r"sample interval 1 s is not shorter than the motion"):
        load_flexible_scenario(path)


def test_closed_loop_q0_moved_by_the_assembly_is_reported(capsys):
    """slider_crank (equal crank and rod, Aghili (2005) Sect. 8: closed when rod = -2 crank):
    --q0 0.5 0.3 is not assembled and the run starts elsewhere; stdout says so with the start
    used (it moved silently), and an assembled --q0 0.5 -1.0 prints no note."""
    import numpy as np

    assert main(["simulate", "slider_crank", "--duration", "0.01", "--q0", "0.5", "0.3",
                 "--quiet"]) == 0
    (note,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("note: --q0")]
    used = np.array(note.split("used [")[1].split("]")[0].split(), float)
    # the start used is assembled (rod = -2 crank) to the 6 decimals printed
    assert abs(used[1] + 2 * used[0]) < 3e-6
    assert "instead of [0.5 0.3] (crank, rod;" in note
    assert main(["simulate", "slider_crank", "--duration", "0.01", "--q0", "0.5", "-1.0",
                 "--quiet"]) == 0
    assert "note: --q0" not in capsys.readouterr().out


def test_run_gain_count_is_refused_before_the_reference(tmp_path, capsys, monkeypatch):
    """tv_lqr weights one per coordinate (passive_arm: x, alpha1, alpha2, beta): three values
    are refused when the scenario is read, before the stable inversion of the reference (it
    ran first, then said "one per input", of which passive_arm has 3)."""
    import multibody_control.scenarios.run as run_module

    def no_reference(*args, **kwargs):
        raise AssertionError("the reference was computed before the gains were checked")

    monkeypatch.setattr(run_module, "sample_reference", no_reference)
    path = _edited(tmp_path, "run_passive_arm_lqr.yaml",
                   "kp: [10000.0, 10000.0, 10000.0, 10000.0]", "kp: [1.0e4, 1.0e4, 1.0e4]")
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "controller: kp: expected a scalar or 4 values (one per coordinate)" in line


def test_a_long_numba_compile_is_announced_on_a_terminal(monkeypatch):
    """The first run after an install compiles the kernels (48 s measured for a 1 s
    slider_crank simulate, its bar standing at 0 %): a compilation lasting longer than DELAY
    prints one line on a terminal's stderr (here DELAY 0 and real numba compilations held
    0.3 s by a second listener), nothing on captured output, and nothing twice."""
    import io
    import sys
    import time

    numba = pytest.importorskip("numba")
    from numba.core import event

    from multibody_dynamics import compile_notice

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    class Hold(event.Listener):  # runs after the notice's listener: the compile lasts 0.3 s
        def on_start(self, ev):
            time.sleep(0.3)

        def on_end(self, ev):
            pass

    def compile_one(value):  # a fresh function: compiled now (no cache)
        return numba.njit(cache=False)(lambda x: x + value)(1.0)

    compile_notice.install()
    monkeypatch.setattr(compile_notice, "DELAY", 0.0)
    with event.install_listener("numba:compile", Hold()):
        monkeypatch.setitem(compile_notice._state, "said", False)
        captured = io.StringIO()
        monkeypatch.setattr(sys, "stderr", captured)
        compile_one(1.0)
        assert captured.getvalue() == ""  # not a terminal: nothing

        monkeypatch.setitem(compile_notice._state, "said", False)
        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        compile_one(2.0)
        compile_one(3.0)
    assert terminal.getvalue() == compile_notice.MESSAGE + "\n"


@pytest.mark.parametrize("extra, words", [
    # the simulation ran, then matplotlib refused the suffix: the samples were lost
    (["--plot", "{tmp}/p.txt"], ["--plot", "p.txt'", "expected a file name ending in", ".png"]),
    # the simulation ran and failed at the first step with "state became NaN/inf"
    (["--tau", "nan", "0"], ["--tau", "values must be finite", "nan"]),
])
def test_simulate_refuses_before_the_work(tmp_path, capsys, extra, words):
    out = tmp_path / "s.csv"
    argv = ["simulate", "slider_crank", "--duration", "0.1", "--quiet", "--out", str(out)]
    assert main(argv + [x.replace("{tmp}", str(tmp_path)) for x in extra]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert all(w in line for w in words), line
    assert captured.out == "" and not out.exists()


def test_library_simulate_refuses_a_non_finite_constant_input():
    """simulate(model, T, tau=[nan, ...]) raised nothing and integrated NaN."""
    import numpy as np

    from multibody_dynamics import load_model
    from multibody_dynamics.simulate import simulate

    with pytest.raises(InputError, match="tau: non-finite"):
        simulate(load_model("passive_arm"), 0.01, tau=np.array([np.nan, 0.0, 0.0, 0.0]))


def test_gamma_on_a_model_without_passive_joints_says_why(capsys):
    """arm7 is fully actuated: --gamma 1 said "expected shape (7, 0) = (actuated ...) x
    (passive ), got (1,)"; now it says there are no passive joints to combine."""
    assert main(["analyze", "arm7", "--gamma", "1"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "arm7 has no passive joints" in line and "takes no gamma" in line


def test_a_short_motion_file_is_named_in_the_error(tmp_path, capsys):
    """A 2-sample motion.csv without velocities: the error said "trajectory: need at least 6
    samples" without naming the file or the columns that avoid the differentiation."""
    path = tmp_path / "short.csv"
    path.write_text("t,q.x,q.alpha1,q.alpha2,q.beta\n0,0,0,0,0\n0.1,0.1,0,0,0\n")
    assert main(["requirements", "passive_arm", str(path), "--out", str(tmp_path / "r")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "short.csv: trajectory: need at least 6 samples" in line
    assert "v.<joint> and a.<joint> columns" in line


def test_a_closed_stdout_pipe_loses_no_result(tmp_path):
    """`multibody simulate ... --out r.csv | head -1`: head's exit closed the pipe, the next
    print raised BrokenPipeError and the command ended "error: [Errno 32] Broken pipe" before
    writing r.csv.  Here the reader closes the pipe before the command prints anything."""
    import os
    import subprocess
    import sys

    out = tmp_path / "r.csv"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), OPENBLAS_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "multibody_control.cli", "simulate",
                             "slider_crank", "--duration", "0.05", "--quiet", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # the reader has gone
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert "Broken pipe" not in err and "Traceback" not in err, err
    assert out.exists() and len(out.read_text().splitlines()) == 52  # header, 0 .. 0.05 s by 1 ms


@pytest.mark.parametrize("command, path, words", [
    # these failed on their first key: "dt: unknown key; expected one of controller, ..."
    ("run", "config/scenarios/invert_passive_arm.yaml",
     ["an inversion scenario (keys method, output, task), not a run scenario",
      "use `multibody invert"]),
    ("invert", "config/scenarios/run_slider_crank.yaml",
     ["a run scenario (keys controller, duration, plant, reference)", "use `multibody run"]),
    # "closures: unknown key; expected one of controller, ..."
    ("run", "config/robots/four_bar.yaml", ["a model file, not a run scenario",
                                            "robot: four_bar.yaml"]),
    # "file: expected a mapping, got str"
    ("invert", "urdf/five_bar.urdf", ["a robot description, not an inversion scenario",
                                      "multibody check"]),
])
def test_a_file_of_another_kind_is_named(tmp_path, capsys, command, path, words):
    assert main([command, str(share_dir() / path), "--out", str(tmp_path / "o")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert all(w in line for w in words), line


def test_a_scenario_given_as_a_model_is_named(capsys):
    """`multibody simulate run_slider_crank.yaml` said "controller: unknown key; expected one
    of actuation, closures, ..." (the model schema's complaint)."""
    path = share_dir() / "config" / "scenarios" / "run_slider_crank.yaml"
    assert main(["simulate", str(path), "--duration", "0.1"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "a run scenario (it names robot: slider_crank), not a model file" in line
    assert "multibody run" in line


def test_simulate_out_npz_names_only_the_archive(tmp_path, capsys):
    """--out b.npz printed "wrote .b.tmp.csv" and "wrote b.npz (the samples of .b.tmp.csv,
    removed)": a hidden intermediate file the user never asked for."""
    assert main(["simulate", "slider_crank", "--duration", "0.05", "--quiet", "--out",
                 str(tmp_path / "b.npz")]) == 0
    wrote = [x for x in capsys.readouterr().out.splitlines() if x.startswith("wrote")]
    assert wrote == [f"wrote {tmp_path / 'b.npz'}"]


def test_analyze_a_model_without_inputs_says_so(tmp_path, capsys):
    """Every joint passive (a free double pendulum): analyze said "output: expected at least
    one row", naming neither the model nor why."""
    urdf = share_dir() / "urdf" / "cart_double_pendulum.urdf"
    from multibody_dynamics import load_model

    joints = load_model("cart_double_pendulum").coordinate_names
    path = tmp_path / "free.yaml"
    path.write_text(f"name: free\nurdf: {urdf}\npassive_joints:\n"
                    + "".join(f"  {j}: {{}}\n" for j in joints))
    assert main(["analyze", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "free has no inputs (every joint passive)" in line


def test_a_misspelt_robot_name_gets_a_suggestion(capsys):
    """'five-bar' (a hyphen) listed the 18 shipped names and said "not a path to a model YAML
    file" although URDF, MJCF and SDF files load too."""
    assert main(["check", "five-bar"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "unknown robot 'five-bar': did you mean five_bar?" in line
    assert "model file (YAML, URDF, MJCF or SDF)" in line


@pytest.mark.parametrize("output_dt, near", [("0.0001", "0.001 s"),
                                             ("0.0025", "0.002 or 0.003 s")])
def test_fixed_step_output_interval_must_be_whole_steps(capsys, output_dt, near):
    """--output-dt 0.0001 with 1 ms steps recorded every 1 ms, 0.0025 every 2 ms, silently."""
    assert main(["simulate", "arm7", "--duration", "0.01", "--output-dt", output_dt]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert f"output_dt: {output_dt} s is not a whole number of steps of 0.001 s" in line
    assert f"expected e.g. {near}" in line and captured.out == ""


def test_stiff_spring_note_and_its_frequency(tmp_path, capsys):
    """A joint spring too stiff for the step diverged with "|v| > max_speed" and no word on
    why; simulate now prints a note.  The frequency behind it, sqrt(max eig(M^-1 K)), is
    checked against RK4 itself: RK4's stability bound on an undamped oscillator is
    omega h = 2 sqrt(2) (Hairer, Lubich & Wanner, Sect. I.5), so a small oscillation about rest
    (no gravity: the linearization is M^-1 K exactly) decays at 0.97 of that step and grows
    at 1.03 of it (|R(i omega h)| = 0.8 and 1.2 per step there)."""
    import numpy as np

    from multibody_dynamics import load_model
    from multibody_dynamics.simulate import SimulatorConfig, simulate, stiffest_spring_omega

    joints = load_model("cart_double_pendulum").coordinate_names
    path = tmp_path / "stiff.yaml"
    path.write_text(f"name: stiff\nurdf: {share_dir() / 'urdf' / 'cart_double_pendulum.urdf'}\n"
                    f"gravity: [0, 0, 0]\npassive_joints:\n  {joints[-1]}: "
                    "{stiffness: 1.0e+4, damping: 0}\n")
    model = load_model(path)
    q0 = model.neutral()
    q0[-1] = 1e-3
    omega = stiffest_spring_omega(model, q0)
    bound = 2 * np.sqrt(2) / omega
    energy = {}
    for factor in (0.97, 1.03):
        res = simulate(model, 300 * factor * bound, q0=q0,
                       config=SimulatorConfig(dt=factor * bound, method="rk4"))
        energy[factor] = (res.success, res.energy[-1] / res.energy[0])
    assert energy[0.97][0] and energy[0.97][1] < 1.0
    assert not energy[1.03][0] or energy[1.03][1] > 1e3

    assert main(["simulate", str(path), "--duration", "0.01", "--dt", str(1.2 * bound),
                 "--q0", *[str(x) for x in q0], "--quiet"]) in (0, 1)
    out = capsys.readouterr().out
    assert f"stiffest joint spring ({omega / (2 * np.pi):.4g} Hz at the start)" in out
    assert "rk4 diverges" in out


def test_payload_frame_option(tmp_path, capsys):
    """A plain URDF names no end effector: the payload error said "name the payload frame" with
    no option to do so.  --payload-frame names it: on arm7 the end effector tool0 named
    explicitly gives the very loads of the default, link6 other ones; alone it is refused."""
    urdf = str(share_dir() / "urdf" / "arm7.urdf")
    assert main(["requirements", urdf, "demo", "--payload-mass", "5", "--out",
                 str(tmp_path / "u")]) == 2
    assert "pass --payload-frame FRAME" in capsys.readouterr().err
    runs = {}
    for label, extra in (("default", []), ("tool0", ["--payload-frame", "tool0"]),
                         ("link6", ["--payload-frame", "link6"])):
        out = tmp_path / label
        assert main(["requirements", "arm7", "demo", "--payload-mass", "5", "--payload-com",
                     "0", "0", "0.05", "--out", str(out), *extra]) == 0
        runs[label] = (out / "arm7_requirements.csv").read_text()
    assert runs["tool0"] == runs["default"] and runs["link6"] != runs["default"]
    assert main(["requirements", "arm7", "demo", "--payload-frame", "tool0", "--out",
                 str(tmp_path / "x")]) == 2
    assert "--payload-frame: has no effect without --payload-mass" in capsys.readouterr().err


def test_analyze_at_a_singular_configuration_of_the_loop(capsys):
    """slider_crank (equal crank and rod, Aghili (2005) Sect. 8) at crank = pi/2, rod = -pi:
    the slider constraint's Jacobian [l cos c + l cos(c + r), l cos(c + r)] vanishes, the
    relative rank test kept its round-off (6e-17) as a row and printed an arbitrary
    decoupling matrix as "no internal dynamics"; 1e-3 rad away the analysis stands."""
    import numpy as np

    assert main(["analyze", "slider_crank", "--q", repr(np.pi / 2), repr(-np.pi)]) == 0
    out = capsys.readouterr().out
    assert "the loop is at a singular configuration here" in out
    assert main(["analyze", "slider_crank", "--q", repr(np.pi / 2 - 1e-3), repr(-np.pi)]) == 0
    out = capsys.readouterr().out
    assert "singular configuration" not in out and "no internal dynamics" in out


def test_a_failed_inversion_keeps_its_samples(tmp_path, capsys):
    """The classical inversion of a non-minimum-phase output fails once its unstable internal
    dynamics (eigenvalues 404 and 58 1/s) blow up: the samples up to there are written and
    marked partial with the cause, exit status 1 (nothing was written before)."""
    import json

    import numpy as np

    scenario = SCENARIOS / "invert_nonminphase_exact.yaml"
    assert main(["invert", str(scenario), "--method", "classical", "--quiet", "--out",
                 str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "integration failed at t = " in err and "partial result written to" in err
    csv = tmp_path / "invert_nonminphase_exact.csv"
    data = np.loadtxt(csv, delimiter=",", skiprows=1)
    t = data[:, 0]
    assert t[0] == 0.0 and 0.2 < t[-1] < 1.7 and np.all(np.diff(t) > 0)  # motion 0.2 .. 1.7 s
    assert np.all(np.isfinite(data))
    meta = json.loads(csv.with_suffix(".meta.json").read_text())
    assert meta["partial"] is True and meta["message"].startswith("failed: integration failed")
