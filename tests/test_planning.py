"""Sampling planners on small prefixes of the seeded benchmark sets (collide_arm around a bar,
panda among boxes): valid at a fine resolution, deterministic for a seed, goal reachability, the
hand-off to retiming, and the ``caliper plan`` face. The full sets and success rates are in
``benchmarks/bench_collision.py``."""
import json

import numpy as np
import pytest

from caliper_jax.cli import main
from caliper_jax.collision import lint_trajectory
from caliper_jax.collision.lint import trajectory_rows
from caliper_jax.planning import (
    BLOCKED,
    OUT_OF_REACH,
    REACHABLE,
    Checker,
    classify_joint_goal,
    classify_position_goal,
    plan,
    plan_trajectory,
)
from caliper_jax.planning.problems import collide_arm_problems, panda_problems

EPS32 = float(np.finfo(np.float32).eps)      # the problem sets' robots are float32


@pytest.fixture(scope="module")
def arm_set():
    return collide_arm_problems(3, seed=0)


@pytest.fixture(scope="module")
def scene(arm_set):
    return arm_set.collision_model()


@pytest.fixture(scope="module")
def checker(arm_set, scene):
    # plan with a 5 mm margin: between samples 0.02 rad apart the arm can dip ~2 mm into the bar
    return Checker(arm_set.model, scene, resolution=arm_set.resolution, margin=0.005, batch=256)


@pytest.fixture(scope="module")
def fine(arm_set, scene):
    return Checker(arm_set.model, scene, resolution=arm_set.resolution / 5, batch=256)


def test_problem_sets_are_seeded_prefixes_that_need_a_detour(arm_set, checker):
    assert arm_set.starts.shape == (3, 3) and arm_set.resolution == 0.02
    again = collide_arm_problems(2, seed=0)
    assert again.starts.tobytes() == arm_set.starts[:2].tobytes()
    assert checker.valid(arm_set.starts).all() and checker.valid(arm_set.goals).all()
    assert not checker.edges_valid(arm_set.starts, arm_set.goals).any()


@pytest.mark.parametrize("planner", ["rrtconnect", "rrtstar", "prm"])
def test_planner_finds_path_valid_at_fine_resolution(arm_set, scene, checker, fine, planner):
    todo = range(len(arm_set)) if planner == "rrtconnect" else [0]
    for k in todo:
        start, goal = arm_set.starts[k], arm_set.goals[k]
        res = plan(arm_set.model, scene, goal, start, planner=planner, seed=k, checker=checker)
        assert res.status == REACHABLE and res.success, res.reason
        path = res.waypoints
        np.testing.assert_array_equal(path[0], start)
        np.testing.assert_array_equal(path[-1], goal)
        assert path.shape[0] >= 3                       # it had to go round
        assert fine.path_valid(path)                    # every edge re-checked 5x finer
        assert fine.path_valid(res.raw)
        assert res.length <= np.sum(np.linalg.norm(np.diff(res.raw, axis=0), axis=1)) + 1e-12


def test_same_seed_same_path_bytes(arm_set, scene, checker):
    s, g = arm_set.starts[1], arm_set.goals[1]
    a = plan(arm_set.model, scene, g, s, seed=7, checker=checker)
    b = plan(arm_set.model, scene, g, s, seed=7, checker=checker)
    assert a.waypoints.tobytes() == b.waypoints.tobytes() and a.raw.tobytes() == b.raw.tobytes()


def test_goal_reachability(arm_set, scene, checker):
    arm, start = arm_set.model, arm_set.starts[0]
    assert classify_joint_goal(checker, [3.5, 0.0, 0.0]).status == OUT_OF_REACH
    assert classify_joint_goal(checker, [0.0, np.pi, np.pi]).status == BLOCKED      # l3 folds onto l1
    assert classify_joint_goal(checker, arm_set.goals[0]).status == REACHABLE
    res = plan(arm, scene, [0.0, np.pi, np.pi], start, checker=checker)
    assert res.status == BLOCKED and not res.success
    res = plan(arm, scene, arm_set.goals[0], [0.0, np.pi, np.pi], checker=checker)
    assert res.status == BLOCKED and res.reason.startswith("start")
    res = plan(arm, scene, [0.0, 3.4, 0.0], start, checker=checker)
    assert res.status == OUT_OF_REACH and "upper limit" in res.reason


def test_position_goal_reachability(checker):
    # the frame of link l3 sits 0.6 m from the shoulder at full stretch
    assert classify_position_goal(checker, "l3", [0.0, 0.0, 1.5], 0).status == OUT_OF_REACH
    reach = classify_position_goal(checker, "l3", [0.45, 0.0, 0.3], 0)
    assert reach.status == REACHABLE and checker.valid_one(reach.witness)
    # a point inside the bar: the link hanging from it would pass through the bar
    assert classify_position_goal(checker, "l3", [0.0, 0.0, 0.8], 0).status != REACHABLE


def test_retiming_handoff_stays_collision_free(arm_set, scene, checker, fine):
    s, g = arm_set.starts[0], arm_set.goals[0]
    res = plan(arm_set.model, scene, g, s, seed=0, checker=checker)
    traj = plan_trajectory(arm_set.model, res.waypoints)
    _, q = trajectory_rows(traj)             # 100 rows per segment
    scale = np.abs(res.waypoints).max()
    np.testing.assert_allclose(q[0], s, atol=EPS32 * scale)          # the float32 rounding of s
    np.testing.assert_allclose(q[-1], g, atol=4 * EPS32 * scale)
    # the S-curve legs are synchronised in time, not in shape: they may leave the checked segments
    # (plan_trajectory's docstring; this path dips 1.3 cm into the bar early in its second leg, and
    # the float64 retiming of the same waypoints agrees to 5e-7). The lint must then say so (T008).
    assert float(traj.duration) > 0
    t008 = [f for f in lint_trajectory(arm_set.model, scene, traj) if f.code == "T008"]
    assert bool(t008) == (not fine.valid(q).all())
    # TOPP on the polyline: collision-free (margin 0), every row on a checked segment
    topp = plan_trajectory(arm_set.model, res.waypoints, method="topp")
    t, q = trajectory_rows(topp, 20)
    assert fine.valid(q).all()
    W = res.waypoints
    k = np.clip(np.searchsorted(np.asarray(topp.t_start), t, side="right") - 1, 0, W.shape[0] - 2)
    d = W[k + 1] - W[k]
    s = np.sum((q - W[k]) * d, axis=1) / np.sum(d * d, axis=1)
    np.testing.assert_allclose(q, W[k] + s[:, None] * d, atol=16 * EPS32 * scale)
    assert np.all((s > -16 * EPS32) & (s < 1 + 16 * EPS32))


@pytest.mark.slow          # ~60 s; the planners' default coverage is collide_arm around the bar above
@pytest.mark.claim
def test_panda_among_boxes_rrtconnect():
    ps = panda_problems(2, seed=0)
    cm = ps.collision_model()
    coarse = Checker(ps.model, cm, resolution=ps.resolution, margin=0.005, batch=256)
    fine = Checker(ps.model, cm, resolution=ps.resolution / 4, batch=256)
    assert not coarse.edges_valid(ps.starts, ps.goals).any()
    for k in range(len(ps)):
        res = plan(ps.model, cm, ps.goals[k], ps.starts[k], seed=k, checker=coarse)
        assert res.success, res.reason
        assert fine.path_valid(res.waypoints)


def test_plan_cli(capsys):
    argv = ["plan", "collide_arm", "--start=-1,0,0", "--goal=1,0,0", "--box", "0,0,0.8,0.06,0.3,0.06",
            "--ground", "-0.1", "--seed", "2", "--batch", "256", "--retime", "topp", "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["trajectory"]["method"] == "topp" and first["trajectory"]["findings"] == []
    assert first["success"] and first["status"] == "reachable" and first["edge_resolution"] == 0.02
    assert first["waypoints"][0] == [-1, 0, 0] and first["waypoints"][-1] == [1, 0, 0]
    assert first["obstacles"] == ["box(0,0,0.8,0.06,0.3,0.06)", "ground"]
    assert main(argv) == 0 and json.loads(capsys.readouterr().out) == first        # same seed, same path
    assert main(["plan", "collide_arm", "--goal=5,0,0", "--batch", "256"]) == 1
    assert "out_of_reach" in capsys.readouterr().out
    for bad, field in ((["--goal=1,0"], "--goal"), (["--goal=1,0,0", "--planner", "astar"], "--planner"),
                       (["--goal=1,0,0", "--resolution", "0"], "resolution"),
                       (["--goal=1,0,0", "--step", "-1"], "step"),
                       (["--goal=1,0,0", "--retime", "spline"], "--retime"),
                       (["--goal=1,0,0", "--box", "0,0,1"], "--box")):
        assert main(["plan", "collide_arm", *bad]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("caliper: error:") and "\n" not in err and field in err, err
