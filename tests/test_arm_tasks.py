"""The registry-arm tasks (issue 31): task schema v2 (v1 files load unchanged), the checks a real
arm adds (reach, base, gripper), the arm zoo, and the friction-grasp scripted expert on the CPU
engine (two episodes here; 100 in the slow set against the >= 95 % target)."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from tasks.env_spec import declared_randomization
from tasks.scene import build_scene
from tasks.schema import find_task, load_task, parse_task, task_to_dict, zoo_files, zoo_names

LIFT = {"version": 2, "name": "t", "robot": "panda", "grasp": "friction",
        "q0": [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.04],
        "scene": {"props": [{"name": "cube", "kind": "box", "halfExtents": [0.02, 0.02, 0.02],
                             "pos": [0.5, 0.0, 0.02], "mass": 0.05}],
                  "zones": [{"name": "bin", "center": [0.45, 0.2, 0.04], "half": [0.06, 0.06, 0.04]}]},
        "success": {"kind": "lifted", "prop": "cube", "height": 0.1},
        "randomization": {"prop_xy": 0.05, "prop_mass": [0.8, 1.2]}}


def _with(**changes):
    d = copy.deepcopy(LIFT)
    for path, value in changes.items():
        *head, last = path.split("__")
        node = d
        for key in head:
            node = node[int(key)] if key.isdigit() else node[key]
        node[int(last) if last.isdigit() else last] = value
    return d


def _parse(d):
    return parse_task(d, base_dir=".", source="t.caliper-task.json")


def test_v2_registry_robot_grasp_and_randomization_round_trip():
    task = _parse(LIFT)
    assert task.version == 2 and task.robot_name == "panda" and task.robot.name == "panda.urdf"
    assert task.grasp == "friction"
    spec = declared_randomization(task)
    assert spec.prop_xy == 0.05 and spec.prop_mass == (0.8, 1.2)
    assert spec.prop_yaw is None and spec.gain is None         # not declared: fixed
    out = task_to_dict(task)
    assert out["robot"] == "panda" and out["version"] == 2
    assert _parse(json.loads(json.dumps(out))) == task


@pytest.mark.parametrize("change, where, what", [
    ({"grasp": "glue"}, "grasp", "'glue' is not one of weld, friction"),
    ({"randomization__prop_xz": 0.1}, "randomization.prop_xz", "unknown key (did you mean 'prop_xy'?)"),
    ({"randomization__prop_mass": [1.2, 0.8]}, "randomization.prop_mass", "need 0 < lo <= hi"),
    ({"randomization__prop_xy": -0.1}, "randomization.prop_xy", "must be >= 0"),
    ({"robot": "pandaa"}, "robot", "unknown robot 'pandaa'"),
    ({"version": 1}, "grasp", 'needs "version": 2'),
    ({"expert": "throw"}, "expert", "'throw' is not one of pick, push"),
])
def test_v2_errors_name_the_field(change, where, what):
    with pytest.raises(CaliperError) as exc:
        _parse(_with(**change))
    msg = str(exc.value)
    assert msg.startswith(f"t.caliper-task.json: {where}: ") and what in msg and "\n" not in msg


def test_v1_files_load_unchanged():
    """The seed zoo's files keep their version (1, or 2 where only a dense reward block was added)
    and none of the arm keys."""
    for f in zoo_files():
        task = load_task(f)
        assert task.version == (1 if task.reward is None else 2)
        assert task.grasp is None and task.randomization is None and task.expert is None
        assert json.loads(f.read_text())["version"] == task_to_dict(task)["version"] == task.version


@pytest.mark.parametrize("change, what", [
    ({"scene__props__0__pos": [0.95, 0.0, 0.02]}, "scene.props[0].pos: 'cube' is out of reach of panda"),
    ({"scene__zones__0__center": [0.05, 0.0, 0.04]}, "scene.zones[0]: zone 'bin' overlaps the panda base"),
])
def test_arm_layout_errors(change, what):
    with pytest.raises(CaliperError, match=r"^task t: ") as exc:
        build_scene(_parse(_with(**change)))
    assert what in str(exc.value) and "\n" not in str(exc.value)


def test_robot_without_gripper_for_a_grasping_task():
    d = _with(robot="ur5", grasp="weld")
    d.pop("q0")
    with pytest.raises(CaliperError, match=r"^task t: gripper: .*found no gripper joint.*props need one"):
        build_scene(_parse(d))


def test_arm_zoo_is_listed_and_found():
    names = zoo_names(arms=True)
    assert names[:5] == zoo_names()
    assert {"panda-lift-cube", "panda-pick-place", "panda-push-cube", "so101-lift-cube",
            "so101-pick-place", "so101-reach", "so101-push-cube"} <= set(names)
    assert load_task(find_task("panda-push-cube")).expert == "push"
    for name in names[5:]:
        task = load_task(find_task(name))
        assert task.version == 2 and task.grasp == "friction" and task.randomization is not None


def _expert_run(name, worlds, episodes, seed=0):
    from tasks.arm_expert import ArmExpert
    from tasks.demo import run_episodes
    from tasks.env import VecEnv

    env = VecEnv(name, worlds, seed=seed)
    try:
        eps, expert = run_episodes(env, episodes, policy=ArmExpert)
    finally:
        env.close()
    return eps, expert


def test_expert_lifts_by_friction():
    """Two randomised episodes of panda-lift-cube; the cube ends in the hand, which holds no weld.
    Planted bug caught: an expert that never closes (or closes before the descent) lifts nothing."""
    eps, expert = _expert_run("panda-lift-cube", 2, 2)
    assert not expert.failed_plans
    assert all(ep.success for ep in eps), [ep.success for ep in eps]
    start = np.array([ep.env_state[0][:3] for ep in eps])
    end = np.array([ep.env_state[-1][:3] for ep in eps])
    assert np.all(end[:, 2] - start[:, 2] >= 0.09)                # the last frame is one tick before success
    assert np.ptp(start[:, :2], axis=0).max() > 1e-3             # the starts were randomised


def _wilson(k, n, z=1.959963984540054):
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return c - h, c + h


@pytest.mark.slow
@pytest.mark.parametrize("name, need", [("panda-lift-cube", 95), ("panda-pick-place", 95),
                                        ("panda-push-cube", 95), ("so101-lift-cube", 90),
                                        ("so101-pick-place", 90), ("panda-stack", 90),
                                        ("panda-insert-peg", 80), ("so101-reach", 90),
                                        ("so101-push-cube", 90)])
def test_expert_success_rate(name, need):
    eps, _ = _expert_run(name, 4, 100)
    k = sum(ep.success for ep in eps)
    assert k >= need, (k, _wilson(k, 100))


def test_arm_tasks_judge_the_grasp():
    """Every arm task's success means the task was done (as the seed zoo's since its tightening): a
    lift is held, a pick-and-place (a stack, an insertion) released after a carry, a push settled
    and never carried; every one needs a dwell
    (a reach, which grasps nothing, holds its goal for a shorter one).
    Planted bug caught: a task file that drops "held" / "released" / "pushed" or its successDwellS."""
    from tasks.predicates import needs_grasp
    from tasks.schema import Lifted, PlacedInZone, Reached, Stacked

    for name in zoo_names(arms=True)[5:]:
        task = load_task(find_task(name))
        if isinstance(task.success, Reached):
            assert task.success_dwell_s >= 0.2 and not needs_grasp(task.success), name
            continue
        assert task.success_dwell_s >= 0.5, name
        if isinstance(task.success, Lifted):
            assert task.success.held, name
        else:
            assert isinstance(task.success, (PlacedInZone, Stacked)) and task.success.settled_speed, name
            assert task.success.released == (task.expert != "push"), name
            assert getattr(task.success, "pushed", False) == (task.expert == "push"), name
        assert needs_grasp(task.success), name


def test_friction_grasp_lets_go_of_a_prop_that_left_the_jaw():
    """A weld grasp keeps its prop while the gripper is closed; a friction grasp holds it only while
    it stays within the jaw's reach (else a prop that slipped out counts as held, and carried).
    Planted bug caught: the weld rule on a friction task."""
    from tasks.env_spec import grasp_update

    held = np.array([0, 0, -1, 1])
    close = np.array([True, True, True, False])
    cand = np.array([[True, False], [False, False], [False, True], [True, True]])
    assert grasp_update(np, held, close, cand).tolist() == [0, 0, 1, -1]
    assert grasp_update(np, held, close, cand, friction=True).tolist() == [0, -1, 1, -1]


def test_check_runs_a_friction_task_and_its_expert_witness():
    """``task check`` on a friction-grasp task (no weld body: it used to crash MuJoCo on a None body
    name) witnesses success with the scripted expert. Planted bug caught: a lift the SO-101 expert
    cannot make (0.3 m) passes unnoticed."""
    from tasks.check import check_task

    assert check_task(load_task(find_task("so101-lift-cube")), baselines=0) == []
    d = json.loads(find_task("so101-lift-cube").read_text())
    d["success"]["height"] = 0.3
    findings = check_task(_parse(d), baselines=0)
    assert [f.code for f in findings] == ["K005"], findings
    assert "reaches" in findings[0].message and "0 of 2" in findings[0].message


def test_primitive_model_covers_every_mesh_vertex():
    """The MJX engine's Panda: no mesh geoms, one capsule (or sphere) per mesh collider, each
    containing every vertex of its mesh (planted bug caught: a radius measured to the infinite
    axis instead of the clipped segment leaves the link ends outside)."""
    import trimesh

    from caliper_jax.loading import load
    from mjx_backend.mjcf import fit_capsule

    ts = build_scene(_parse(LIFT), colliders="primitive")
    mj = ts.scene.mj
    assert 7 not in set(mj.geom_type.tolist())                          # mjGEOM_MESH
    robot = [g for g in range(mj.ngeom) if mj.geom(g).name.startswith("panda_")]
    assert all(mj.geom_contype[g] == 2 and mj.geom_conaffinity[g] == 1 for g in robot)
    model = load(ts.task.robot)
    meshes = [g for g in model.geoms if g.kind == "mesh" and g.role == "collision"]
    assert len(meshes) == 9
    for geom in meshes:
        a, b, r = fit_capsule(geom)
        v = np.asarray(trimesh.load(str(geom.mesh), force="mesh").vertices) * np.asarray(geom.size)
        pts = v @ np.asarray(geom.R).T + np.asarray(geom.p)
        ab = b - a
        t = np.clip(((pts - a) @ ab) / max(float(ab @ ab), 1e-18), 0.0, 1.0)
        dist = np.linalg.norm(pts - (a + np.outer(t, ab)), axis=1)
        assert dist.max() <= r + 1e-9 and r < 0.14, (geom.link, dist.max(), r)
