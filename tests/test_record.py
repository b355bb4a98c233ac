"""Recording: exact tick decimation, byte-identical datasets, the dataset doctor, and the
``caliper record`` / ``caliper control`` faces."""
import hashlib
import io
import json

import numpy as np
import pytest

from caliper_jax import cli, control, progress
from caliper_jax.dataset import LeRobotReader
from caliper_jax.errors import CaliperError
from caliper_jax.motion import MotionLimits

GOAL = "0.5,-0.4"


def run(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def digest(root):
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def test_decimation_needs_fps_to_divide_the_tick_rate():
    assert control.decimation(1e-3, 50) == 20
    assert control.decimation(1e-3, 1000) == 1
    assert control.decimation(2e-3, 250) == 2
    for dt, fps in ((1e-3, 30), (1e-3, 2000), (1e-3, 0), (1e-3, 7)):
        with pytest.raises(CaliperError, match="fps"):
            control.decimation(dt, fps)


@pytest.mark.x64     # the command line records in float64: the reference rollout is float64 too
def test_record_cli_writes_byte_identical_episodes_one_per_world(capsys, tmp_path):
    reports, roots = [], []
    for name in ("a", "b"):
        root = tmp_path / name
        code, out, _ = run(capsys, "record", "pendulum2", "--goal", GOAL, "--out", str(root),
                           "--ticks", "190", "--worlds", "3", "--json")   # 190 ticks: 10 frames
        assert code == 0
        reports.append(json.loads(out))
        roots.append(root)
    rep = reports[0]
    assert rep["episodes"] == [0, 1, 2] and rep["frames_per_episode"] == 10 and rep["ticks_per_frame"] == 20
    assert {**reports[0], "out": ""} == {**reports[1], "out": ""}
    assert digest(roots[0]) == digest(roots[1])

    reader = LeRobotReader(roots[0])
    assert (reader.num_episodes, reader.num_frames, reader.fps) == (3, 30, 50)
    ep0 = reader.episode(0)
    np.testing.assert_array_equal(ep0["timestamp"], (np.arange(10) / 50).astype(np.float32))
    # world 0 starts at the default q0 (0, 0): the same loop as a single-world rollout, decimated
    from caliper_jax.loading import load

    model = load("pendulum2", dtype=np.float64)
    src = control.goal_source(np.zeros(2), np.array([0.5, -0.4]), MotionLimits.from_model(model))
    ref = control.simulate(model, src, np.zeros(2), 2000)
    np.testing.assert_allclose(ep0["observation.state"], ref.q[0:200:20].astype(np.float32), atol=1e-6)
    np.testing.assert_allclose(ep0["action"], ref.command[0:200:20].astype(np.float32), atol=1e-6)
    assert not np.array_equal(reader.episode(1)["observation.state"], ep0["observation.state"])

    from doctors.dataset import diagnose
    report = diagnose(roots[0], progress=False)
    assert report.counts["Error"] == 0, report.text()


def test_record_errors_are_one_line(capsys, tmp_path):
    code, _, err = run(capsys, "record", "pendulum2", "--goal", GOAL, "--out", str(tmp_path / "x"),
                       "--fps", "30")
    assert code == 2 and "does not divide the tick rate" in err and not (tmp_path / "x").exists()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    code, _, err = run(capsys, "record", "pendulum2", "--goal", GOAL, "--out", str(tmp_path / "busy"))
    assert code == 2 and "not a dataset root" in err
    code, _, err = run(capsys, "record", "pendulum2", "--goal", "0.1", "--out", str(tmp_path / "y"))
    assert code == 2 and "--goal: expected 2 values" in err
    code, _, err = run(capsys, "control", "toy", "--goal", "0.1,0.1")    # toy has no inertials
    assert code == 2 and "needs inertial data" in err


def test_control_cli_reports_error_effort_warnings_and_plots(capsys, tmp_path):
    png = tmp_path / "q.png"
    code, out, _ = run(capsys, "control", "pendulum2", "--goal", GOAL, "--plot", str(png), "--json")
    assert code == 0
    rep = json.loads(out)
    assert rep["final_error"] < 1e-6 and rep["within_effort_limits"] and not rep["estopped"]
    assert rep["warnings"] == {} and len(rep["max_effort"]) == 2 and rep["effort_limit"] == [20.0, 20.0]
    assert rep["plot"] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = run(capsys, "control", "pendulum2", "--goal", "5,-0.4")
    assert code == 0 and "clamped by the gate" in out and "position_clamp" in out


def test_progress_bar_only_on_a_tty(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv(progress.ENV, raising=False)
    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        bar = progress.bar(100, "record", unit="tick", stream=stream)
        bar.update(40)
        bar.update(60)
        bar.close()
    assert "100%" in tty.getvalue() and "100/100" in tty.getvalue() and pipe.getvalue() == ""
    progress.set_quiet(True)               # the CLI under --json: silent even on a terminal
    try:
        quiet = Tty()
        progress.bar(100, "record", stream=quiet).update(100)
        assert quiet.getvalue() == ""
    finally:
        progress.set_quiet(False)
