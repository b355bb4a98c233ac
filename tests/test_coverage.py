"""The coverage generator (tasks/coverage.py, ``caliper data coverage``): a deliberately narrow,
corridor-shaped dataset of the gripper_arm fixture gets new MOVE_J demonstrations into its empty
joint bins; occupancy and the doctor's D007 improve, the output is byte-deterministic and the
input untouched.

Thresholds: the spec's smoke figure is min-bin occupancy 0.2 -> 0.7 and D007 3 -> 0 at 40 new
episodes. Our corridor starts lower (0.10 over the joint limits: every dof spans a fifth of its
range or less, and the data sits in two clusters, so D007 fires on all 6 state/action dofs); 6
new episodes of 40 frames must already reach >= 0.7 and D007 0 -- each episode's goal lands in
an empty bin of every dof and its path sweeps the bins in between (measured: 0.85, 6 -> 0).
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from caliper_jax import cli
from caliper_jax.dataset import LeRobotReader, LeRobotWriter
from caliper_jax.errors import CaliperError
from doctors.dataset import DoctorOptions, diagnose
from doctors.dataset.accumulate import Histogram, bin_counts
from tasks.coverage import TAG, generate_coverage

JOINTS = ["j1", "j2", "gripper"]
A = np.array([-0.3, -0.2, 0.010])  # corridor ends (gripper_arm: j1, j2 in +-1.5 rad, gripper 0..0.04 m)
B = np.array([0.3, 0.25, 0.018])
FPS = 30


def write_corridor(root, episodes=6, length=40, seed=0, far=2, robot_type="gripper_arm", extra=None,
                   names=JOINTS):
    """Episodes wiggling along the short segment A -> B in lockstep: ``episodes - far`` near A,
    ``far`` near B -- a narrow corridor with a hole in the middle of every dof's range."""
    rng = np.random.default_rng(seed)
    spec = {"dtype": "float32", "shape": [len(names)], "names": list(names)}
    features = {"observation.state": dict(spec), "action": dict(spec), **(extra or {})}
    with LeRobotWriter(root, FPS, features, robot_type=robot_type) as w:
        for ep in range(episodes):
            base = 0.0 if ep < episodes - far else 0.85
            t = np.arange(length + 1) / FPS
            s = base + 0.075 * (1 + np.sin(2 * np.pi * rng.uniform(0.5, 1.0) * t + rng.uniform(0, 6)))
            q = (A + s[:, None] * (B - A)).astype(np.float32)
            frame = {"observation.state": q[:-1], "action": q[1:]}
            for key, f in (extra or {}).items():
                frame[key] = np.zeros((length, f["shape"][0]), dtype=f["dtype"])
            w.add_frames(frame)
            w.save_episode(task="wiggle along the corridor")
    return root


def tree_digest(root) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def corridor(tmp_path_factory):
    return write_corridor(tmp_path_factory.mktemp("cov") / "corridor")


@pytest.fixture(scope="module")
def result(corridor, tmp_path_factory):
    before = tree_digest(corridor)
    out = tmp_path_factory.mktemp("cov_out") / "more"
    report = generate_coverage(corridor, out, episodes=6, seed=0, collision=False)
    return report, out, before


def test_occupancy_and_d007_improve(result):
    report, out, _ = result
    assert report.robot == "gripper_arm" and report.joints == JOINTS and report.bins == 20
    assert report.min_occupancy_before <= 0.2
    assert report.d007_before >= 3
    assert report.min_occupancy_after >= 0.7
    assert report.d007_after == 0
    assert np.all(report.occupancy_after >= report.occupancy_before)
    assert report.episodes_planned == 6 and report.episodes_failed == 0
    # the doctor on the output agrees with the report's D007 count
    assert sum(f.code == "D007" for f in diagnose(out).findings) == report.d007_after


def test_output_is_input_then_planned_episodes(result, corridor):
    report, out, _ = result
    src, dst = LeRobotReader(corridor), LeRobotReader(out)
    assert dst.num_episodes == src.num_episodes + 6 and dst.fps == src.fps
    assert dst.info["robot_type"] == "gripper_arm"
    assert set(dst.features) == set(src.features)
    for ep in range(src.num_episodes):
        a, b = src.episode(ep), dst.episode(ep)
        for key in ("observation.state", "action", "task_index"):
            np.testing.assert_array_equal(a[key], b[key])
    assert dst.tags == {src.num_episodes + i: [TAG] for i in range(6)}
    lo, hi = np.array([-1.5, -1.5, 0.0]), np.array([1.5, 1.5, 0.04])
    vmax = np.array([5.0, 5.0, 0.5])          # the URDF's velocity limits
    counts = bin_counts(np.concatenate([src.episode(e)["observation.state"] for e in range(6)]
                                       ).astype(np.float64), lo, hi, 20)
    np.testing.assert_array_equal(counts, report.counts_before)
    for i, entry in enumerate(report.episodes):
        ep = src.num_episodes + i
        assert entry["episode"] == ep
        arr = dst.episode(ep)
        q, act = arr["observation.state"].astype(np.float64), arr["action"].astype(np.float64)
        assert len(q) == entry["frames"] >= 40            # at least a recorded episode's length
        assert np.all(q >= lo) and np.all(q <= hi)
        np.testing.assert_array_equal(act[:-1], q[1:])     # action = next target
        np.testing.assert_allclose(q[-1], entry["goal"], atol=1e-6)
        speed = np.abs(np.diff(q, axis=0)) * FPS
        assert np.all(speed <= vmax * (1 + 1e-3))
        counts += bin_counts(q, lo, hi, 20)
        start = q[0]
        if entry["start"] == "previous goal":
            np.testing.assert_allclose(start, report.episodes[i - 1]["goal"], atol=1e-6)
        else:
            assert min(np.abs(src.episode(e)["observation.state"][0] - start).max() for e in range(6)) < 1e-6
    np.testing.assert_array_equal(counts, report.counts_after)


def test_input_is_not_mutated(result, corridor):
    _, _, before = result
    assert tree_digest(corridor) == before


def test_same_seed_same_bytes(result, corridor, tmp_path):
    report, out, _ = result
    again = generate_coverage(corridor, tmp_path / "again", episodes=6, seed=0, collision=False)
    assert tree_digest(tmp_path / "again") == tree_digest(out)
    assert again.to_dict() | {"output": ""} == report.to_dict() | {"output": ""}
    other = generate_coverage(corridor, tmp_path / "other", episodes=6, seed=1, collision=False)
    assert tree_digest(tmp_path / "other") != tree_digest(out)
    assert other.episodes[0]["goal"] != report.episodes[0]["goal"]


def test_report_json_and_heat_map(result, tmp_path):
    report, _, _ = result
    data = json.loads(report.to_json())
    assert data["min_occupancy_before"] == report.min_occupancy_before
    assert data["d007_after"] == 0 and len(data["occupancy_after"]) == 3
    assert np.array(data["counts_after"]).shape == (3, 20)
    png = report.plot(tmp_path / "heat.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.plot(tmp_path / "heat2.png").read_bytes() == png


def test_binning_is_the_doctors(corridor):
    """The generator's bins are the doctor's (one function): a Histogram fed the same rows counts
    the same, and over the data range it reproduces the doctor's bin_occupancy summary."""
    r = LeRobotReader(corridor)
    x = np.concatenate([r.episode(e)["observation.state"] for e in range(r.num_episodes)]).astype(np.float64)
    h = Histogram(x.min(axis=0), x.max(axis=0), 20)
    h.update(x)
    np.testing.assert_array_equal(h.counts, bin_counts(x, x.min(axis=0), x.max(axis=0), 20))
    summary = diagnose(corridor).summaries["observation.state"]["bin_occupancy"]
    np.testing.assert_allclose(h.occupancy(), summary)


def test_histogram_bins_option_sets_the_bins(corridor, tmp_path):
    report = generate_coverage(corridor, tmp_path / "o", episodes=1, collision=False,
                               options=DoctorOptions(histogram_bins=10))
    assert report.bins == 10 and report.counts_after.shape == (3, 10)


def test_clear_errors(corridor, tmp_path):
    with pytest.raises(CaliperError, match=r"names \['gripper'\] are not joints of robot 'toy'"):
        generate_coverage(corridor, tmp_path / "a", robot="toy", collision=False)
    with pytest.raises(CaliperError, match="exists and is not an empty directory"):
        generate_coverage(corridor, corridor.parent, collision=False)
    with pytest.raises(CaliperError, match="must not be the input dataset"):
        generate_coverage(corridor, corridor, collision=False)
    with pytest.raises(CaliperError, match="episodes must be a whole number"):
        generate_coverage(corridor, tmp_path / "b", episodes=0)
    cam = write_corridor(tmp_path / "cam", episodes=2, far=1, extra={
        "observation.environment_state": {"dtype": "float32", "shape": [7], "names": None}})
    # a task-demo dataset (the props' environment_state) is no longer refused: the plan cannot fill
    # that feature, so the output is written without it and the report names it (issue 35)
    report = generate_coverage(cam, tmp_path / "c", episodes=1, collision=False)
    assert report.dropped_features == ["observation.environment_state"]
    assert "observation.environment_state" not in LeRobotReader(tmp_path / "c").features
    assert "not carried into the output" in report.text()
    anon = write_corridor(tmp_path / "anon", episodes=2, far=1, robot_type=None)
    with pytest.raises(CaliperError, match="no robot_type; pass robot="):
        generate_coverage(anon, tmp_path / "d", collision=False)
    bad = write_corridor(tmp_path / "bad", episodes=2, far=1, names=["j1", "j2", "claw"])
    with pytest.raises(CaliperError, match=r"\['claw'\] are not joints of robot 'gripper_arm'"):
        generate_coverage(bad, tmp_path / "e", collision=False)
    assert not any((tmp_path / n).exists() for n in "abde")
    assert not list(tmp_path.glob(".*coverage-tmp"))


def test_cli(corridor, tmp_path, capsys):
    out, png = tmp_path / "new", tmp_path / "map.png"
    code = cli.main(["data", "coverage", str(corridor), "--out", str(out), "--episodes", "3", "--seed", "2",
                     "--no-collision", "--plot", str(png), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["episodes_planned"] == 3 and report["plot"] == str(png)
    assert report["min_occupancy_after"] > report["min_occupancy_before"]
    assert LeRobotReader(out).num_episodes == 9 and png.read_bytes()[:4] == b"\x89PNG"
    code = cli.main(["data", "coverage", str(corridor), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "exists and is not an empty directory" in err


# The default tests above run without the collision check (its GJK compile costs seconds);
# these cover it and the spec's 40-episode smoke setting.
@pytest.mark.slow
def test_collision_checked_frames_are_clear(tmp_path):
    """collide_arm folds into itself (about a third of its joint box collides): every planned
    frame is clear by the exact signed distance (a different solver path than the GJK yes/no
    check the generator uses). Faster default coverage: test_occupancy_and_d007_improve."""
    from caliper_jax.collision import build_collision_model, distances
    from caliper_jax.loading import load

    global A, B
    saved = A, B
    A, B = np.array([-0.4, 0.3, -0.2]), np.array([0.4, 0.8, 0.3])
    try:
        root = write_corridor(tmp_path / "arm", names=["j1", "j2", "j3"], robot_type="collide_arm")
    finally:
        A, B = saved
    report = generate_coverage(root, tmp_path / "out", episodes=12, seed=0, collision=True)
    assert report.collision_checked and report.episodes_planned + report.episodes_failed == 12
    assert report.min_occupancy_after > report.min_occupancy_before
    model = load("collide_arm")
    cm = build_collision_model(model)
    dst = LeRobotReader(tmp_path / "out")
    q = np.concatenate([dst.episode(e)["observation.state"] for e in range(6, dst.num_episodes)])
    assert distances(model, cm, q.astype(np.float64)).min() > 0.0


@pytest.mark.slow
def test_spec_smoke_forty_episodes(corridor, tmp_path):
    """The spec's setting (40 episodes, collision on): min-bin occupancy >= 0.7 and D007 0.
    Faster default coverage: test_occupancy_and_d007_improve (6 episodes)."""
    report = generate_coverage(corridor, tmp_path / "out", episodes=40, seed=0)
    assert report.collision_checked
    assert report.min_occupancy_before <= 0.2 and report.min_occupancy_after >= 0.7
    assert report.d007_before >= 3 and report.d007_after == 0
