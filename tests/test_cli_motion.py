"""caliper move / caliper report: JSON reports, row files, exit codes (0 done, 1 problem or
--strict with Error findings, 2 bad input as one line)."""
import json

import numpy as np
import pytest

from caliper_jax import api, cli
from caliper_jax.loading import load

UR5_Q0 = "0.3,-1.2,1.0,-0.5,0.4,0.4"


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def pendulum():
    return load("pendulum2", dtype=np.float32)      # checks the (float64) CLI to 1e-6 = 8 eps32 x 1 m


@pytest.mark.parametrize("suffix", [".json", ".npz", ".csv"])
def test_move_j_through_goals_writes_rows(capsys, tmp_path, suffix):
    out = tmp_path / f"rows{suffix}"
    code, text, err = run(capsys, "move", "pendulum2", "--goal", "1,0.5", "--goal", "0,-0.5", "--json",
                          "--out", out)
    assert code == 0 and err == ""
    rep = json.loads(text)
    assert rep["kind"] == "MOVE_J" and rep["segments"] == 2 and rep["ok"] and rep["q_end"] == [0.0, -0.5]
    if suffix == ".json":
        rows = json.loads(out.read_text())
        t, q = np.array(rows["times"]), np.array(rows["q"])
        assert rows["joint_names"] == ["j1", "j2"]
    elif suffix == ".npz":
        with np.load(out) as z:
            t, q = z["times"], z["q"]
    else:
        data = np.loadtxt(out, delimiter=",", skiprows=1)
        t, q = data[:, 0], data[:, 1:3]
        assert out.read_text().splitlines()[0] == "t,q_j1,q_j2,qd_j1,qd_j2,qdd_j1,qdd_j2"
    assert len(t) == rep["rows"] and t[-1] == pytest.approx(rep["duration"])
    np.testing.assert_allclose(q[-1], [0.0, -0.5], atol=1e-12)
    np.testing.assert_allclose(np.diff(t)[:-1], 0.01)


def test_move_linear_and_arc_position_only(capsys, pendulum):
    q0 = np.array([0.6, 1.4])
    p0 = api.fk(pendulum, q0)[pendulum.frame_id("tip")][:3, 3]
    p1 = p0 + [-0.15, 0.0, -0.1]
    target = ",".join(f"{x:.12f}" for x in p1)
    code, text, _ = run(capsys, "move", "pendulum2", "--q0", "0.6,1.4", "--target", target, "--linear",
                        "--position-only", "--json")
    rep = json.loads(text)
    assert code == 0 and rep["kind"] == "MOVE_L" and rep["cartesian"]["ok"] and rep["frame"] == "tip"
    tip = api.fk(pendulum, np.array(rep["q_end"]))[pendulum.frame_id("tip")][:3, 3]
    assert np.linalg.norm(tip - p1) < 1e-6
    via = ",".join(f"{x:.12f}" for x in p0 + [-0.05, 0.0, 0.02])
    code, text, _ = run(capsys, "move", "pendulum2", "--q0", "0.6,1.4", "--target", target, "--via", via,
                        "--position-only")
    assert code == 0 and "MOVE_C" in text and "passes the via point" in text
    # out of reach: the report is printed, exit 1
    code, text, _ = run(capsys, "move", "pendulum2", "--q0", "0.6,1.4", "--target", "0.9,0,0.1", "--linear",
                        "--position-only", "--json")
    rep = json.loads(text)
    assert code == 1 and not rep["ok"] and "IK did not converge" in rep["problem"]


def test_report_lints_and_strict_gates(capsys):
    code, text, _ = run(capsys, "report", "ur5", "--q0", UR5_Q0, "--goal", "0.3,-1.2,1.0,-0.5,-0.4,0.4",
                        "--json")
    rep = json.loads(text)
    assert code == 0 and rep["n_samples"] == 100 and rep["frame"] == "tool0"
    assert [f["code"] for f in rep["lint"]["findings"]] == ["T007"] and rep["lint"]["errors"] == 0
    assert rep["sigma_min"]["min"] < 1e-2 and len(rep["joints"]) == 6
    code2, text2, _ = run(capsys, "report", "ur5", "--q0", UR5_Q0, "--goal", "0.3,-1.2,1.0,-0.5,-0.4,0.4",
                          "--json")
    assert text2 == text                                           # deterministic bytes
    code, text, _ = run(capsys, "report", "ur5", "--q0", UR5_Q0, "--goal", "0.3,-1.2,1.0,-0.5,-0.4,0.4",
                        "--strict")
    assert code == 0 and "LINT: 0 error(s), 1 warning(s)" in text and "sigma_min" in text
    # elbow goal beyond its limit (pi): T001 Error -> --strict exits 1, without it 0
    beyond = "0.3,-1.2,3.3,-0.5,0.4,0.4"
    assert run(capsys, "report", "ur5", "--q0", UR5_Q0, "--goal", beyond)[0] == 0
    code, text, _ = run(capsys, "report", "ur5", "--q0", UR5_Q0, "--goal", beyond, "--strict")
    assert code == 1 and "[T001]" in text
    code, text, _ = run(capsys, "report", "ur5", "--q0", UR5_Q0, "--goal", "0.3,-1.0,1.0,-0.5,1.2,0.4",
                        "--goal", "0.5,-1.0,0.8,-0.5,1.4,0.4", "--strict", "--json")
    rep = json.loads(text)
    assert code == 0 and rep["n_samples"] == 200 and rep["lint"]["findings"] == []


@pytest.mark.parametrize("argv, needle", [
    (("move", "pendulum2"), "--goal"),
    (("move", "pendulum2", "--goal", "1,0", "--target", "0,0,0.5"), "not both"),
    (("move", "pendulum2", "--goal", "1,0,3"), "expected 2 values"),
    (("move", "pendulum2", "--goal", "1,0", "--via", "0,0,0.5"), "need --target"),
    (("move", "pendulum2", "--target", "0,0,0.5", "--via", "0.1,0,0.5", "--screw"), "--screw"),
    (("move", "pendulum2", "--goal", "1,0", "--out", "rows.txt"), "--out"),
    (("move", "pendulum2", "--goal", "1,0", "--dt", "0"), "--dt"),
    (("move", "pendulum2", "--target", "1,2"), "--target"),
    (("report", "pendulum2", "--goal", "1,0", "--samples", "1"), "--samples"),
    (("report", "pendulum2", "--goal", "1,0", "--clearance", "-1"), "--clearance"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, needle):
    code, text, err = run(capsys, *argv)
    assert code == 2 and text == "" and needle in err and len(err.strip().splitlines()) == 1


def test_report_calls_the_collision_lint_only_when_asked(capsys, monkeypatch):
    """The one collision call site: gated on --clearance / --ground, findings merged and gated."""
    import caliper_jax.collision as collision
    from doctors.trajectory import ERROR, Finding

    calls = []

    def fake_lint(model, cm, times, q, clearance):
        calls.append((cm, len(times), q.shape, clearance))
        return [Finding("T008", ERROR, None, float(times[3]), -0.01, 0.0, "fix", "in collision")]

    monkeypatch.setattr(collision, "build_collision_model", lambda model, obstacles: ("cm", list(obstacles)))
    monkeypatch.setattr(collision, "lint_collision", fake_lint)
    args = ("report", "pendulum2", "--goal", "1,0.5", "--samples", "20", "--strict")
    assert run(capsys, *args)[0] == 0 and calls == []
    code, text, _ = run(capsys, *args, "--ground", "0.1", "--json")
    rep = json.loads(text)
    assert code == 1 and [f["code"] for f in rep["lint"]["findings"]] == ["T008"]
    (cm, n, shape, clearance), = calls
    assert n == 20 and shape == (20, 2) and clearance == 0.02 and len(cm[1]) == 1
    code, _, _ = run(capsys, *args, "--clearance", "0")
    assert code == 1 and calls[-1][3] == 0.0 and calls[-1][0][1] == []
