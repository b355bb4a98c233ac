"""panda-stack and panda-insert-peg (issue 31): the ``stacked`` predicate (NumPy and JAX twins on
planted poses, its schema and K001), static fixtures (a hole the peg drops into, or sits on), and
one randomised expert episode of each task on the CPU engine (100 each in the slow set)."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from tasks.schema import Stacked, find_task, load_task, parse_task, task_to_dict

STACK = json.loads(find_task("panda-stack").read_text())
PEG = json.loads(find_task("panda-insert-peg").read_text())


def _parse(d):
    return parse_task(d, base_dir=".", source="t.caliper-task.json")


def _stack_states():
    """(pos, vel, held, carried, expected) of planted panda-stack states, A = cube_a (4 cm), B =
    cube_b (5 cm) resting at (0.5, 0.12, 0.025); A on B means A's centre 0.045 m above B's."""
    b = np.array([0.5, 0.12, 0.025])
    on = b + [0.0, 0.0, 0.045]
    still, none = np.zeros((2, 3)), np.array([False, False])
    A_carried = np.array([True, False])
    cases = [  # (A centre, vel, held, carried, stacked?)
        (on, still, none, A_carried, True),                              # stacked, let go, still
        (on + [0.0, 0.0, 0.004], still, none, A_carried, True),          # 4 mm gap: within tolerance
        (on + [0.01, -0.01, 0.0], still, none, A_carried, True),         # 14 mm off centre: within xy
        (on + [0.0, 0.0, 0.006], still, none, A_carried, False),         # hovering 6 mm above
        (on - [0.0, 0.0, 0.006], still, none, A_carried, False),         # sunk 6 mm (not on the top face)
        (on + [0.011, 0.011, 0.0], still, none, A_carried, False),       # 15.6 mm off centre
        (np.array([0.5, -0.15, 0.02]), still, none, A_carried, False),   # beside it on the ground
        (on, still, np.array([True, False]), A_carried, False),          # still in the gripper
        (on, still, np.array([False, True]), A_carried, False),          # B in the gripper
        (on, still, none, none, False),                                  # never carried there
        (on, np.array([[0.02, 0, 0], [0, 0, 0]]), none, A_carried, False),   # A sliding
        (on, np.array([[0, 0, 0], [0, 0.02, 0]]), none, A_carried, False),   # B moving
    ]
    pos = np.array([[a, b] for a, *_ in cases])
    vel = np.array([c[1] for c in cases])
    held = np.array([c[2] for c in cases])
    carried = np.array([c[3] for c in cases])
    return pos, vel, held, carried, [c[4] for c in cases]


def test_stacked_predicate_twins_on_planted_poses():
    """Both twins judge twelve planted states the same, and as stated. Planted bugs caught (each
    flips a case): no tolerance on the gap (|.| dropped: sunk passes), the xy check dropped or on
    one axis, B's speed or B's held flag ignored, released without the carry."""
    import jax

    from tasks.predicates import evaluate_np, evaluator

    task = load_task(find_task("panda-stack"))
    names = [p.name for p in task.props]
    assert task.success == Stacked("cube_a", "cube_b", 0.005, 0.015, 0.01, True, rise=0.045)
    pos, vel, held, carried, want = _stack_states()
    pos0 = np.repeat(np.array([[0.5, -0.15, 0.02], [0.5, 0.12, 0.025]])[None], len(want), 0)
    got_np = evaluate_np(task.success, names, pos, pos0, vel, held, carried)
    assert got_np.tolist() == want
    fn = jax.jit(evaluator(task.success, names))
    got_jax = np.asarray(fn(pos, pos0, vel, held, carried))
    assert got_jax.tolist() == want
    with pytest.raises(CaliperError, match="stacked 'cube_a' on 'cube_b': settled_speed needs velocities"):
        evaluate_np(task.success, names, pos, pos0, None, held, carried)


def test_stacked_schema_round_trip_and_errors():
    """The rise is derived from the props (not written); a bad reference names the field.
    Planted bug caught: a rise read from one prop only (0.04 or 0.05, not 0.045)."""
    task = _parse(STACK)
    assert task.success.rise == pytest.approx(0.045)
    out = task_to_dict(task)
    assert "rise" not in out["success"] and _parse(json.loads(json.dumps(out))) == task
    for change, where, what in [
        ({"on": "cube_c"}, "success.on", "no prop 'cube_c' in scene.props"),
        ({"on": "cube_a"}, "success.on", "cannot be stacked on itself"),
        ({"tolerance": 0}, "success.tolerance", "must be > 0"),
        ({"xy": None}, "success.xy", "expected a number"),
        ({"ontop": 1}, "success.ontop", "unknown key"),
    ]:
        d = copy.deepcopy(STACK)
        d["success"].update(change)
        with pytest.raises(CaliperError) as exc:
            _parse(d)
        msg = str(exc.value)
        assert msg.startswith(f"t.caliper-task.json: {where}: ") and what in msg, msg


def test_check_flags_a_stack_that_starts_stacked():
    """K001 sees a stacked verdict that holds at t = 0 (A placed on B, no "released"); with
    "released" the same start is no success (nothing was carried). Planted bug caught: a K001 that
    skips the new predicate kind."""
    from tasks.check import check_task

    d = copy.deepcopy(STACK)
    d["scene"]["props"][0]["pos"] = [0.5, 0.12, 0.0705]
    del d["success"]["released"]
    codes = [f.code for f in check_task(_parse(d), simulate=False)]
    assert "K001" in codes, codes
    d["success"]["released"] = True
    assert "K001" not in [f.code for f in check_task(_parse(d), simulate=False)]


def _drop_peg(ts, xy_offset, seconds=0.6):
    """(3,) where the peg settles when released upright 5 mm above the rim, at the hole's centre
    moved by ``xy_offset`` (m), the arm held at q0."""
    import mujoco

    mj, L = ts.scene.mj, ts.scene.layout
    d = mujoco.MjData(mj)
    d.qpos[:] = ts.qpos(ts.q0)
    a = L.prop_qposadr["peg"]
    d.qpos[a:a + 7] = [0.5 + xy_offset[0], 0.15 + xy_offset[1], 0.03 + 0.05 + 0.005, 1, 0, 0, 0]
    d.ctrl[:] = np.asarray(ts.q0)[[ts.model.joint_names.index(n) for n in ts.scene.mjcf.actuated]]
    for _ in range(round(seconds / mj.opt.timestep)):
        mujoco.mj_step(mj, d)
    return d.qpos[a:a + 3].copy()


def test_fixtures_are_static_geometry_with_a_real_hole():
    """The hole's four walls are world geoms (no joint), 3 mm of clearance per side around the
    24 mm peg; a peg dropped at the hole's centre falls in to the floor and meets the success zone,
    one dropped 20 mm off centre stays on a wall and does not, nor does a peg 14 mm into the hole
    (15 mm required). Planted bugs caught: fixtures not written to the MJCF (the peg falls to the
    ground), a zone deeper or taller than stated."""
    from tasks.predicates import evaluate_np
    from tasks.scene import build_scene

    task = load_task(find_task("panda-insert-peg"))
    ts = build_scene(task)
    import mujoco

    mj = ts.scene.mj
    for f in task.fixtures:
        g = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_GEOM, f.name)
        assert g >= 0 and mj.geom_bodyid[g] == 0, f.name
    walls = {f.name: f for f in task.fixtures}
    hole_x = walls["hole_wall_xhi"].pos[0] - walls["hole_wall_xhi"].size[0] \
        - (walls["hole_wall_xlo"].pos[0] + walls["hole_wall_xlo"].size[0])
    assert hole_x - 2 * task.props[0].size[0] == pytest.approx(0.006)       # 3 mm per side
    inside = _drop_peg(ts, (0.0, 0.0))
    assert inside[2] == pytest.approx(0.05, abs=2e-3)                         # on the floor of the hole
    on_wall = _drop_peg(ts, (0.02, 0.0))
    assert on_wall[2] > 0.075                                                 # resting on a wall
    names, carried, nobody = ["peg"], np.array([True]), np.array([False])
    rim = np.array([0.5, 0.15, 0.03 + 0.05 - 0.014])       # 14 mm in: 1 mm short of the required depth
    judge = [evaluate_np(task.success, names, p[None], ts.pos0, np.zeros((1, 3)), nobody, carried)
             for p in (inside, on_wall, rim)]
    assert judge == [True, False, False]


def test_check_flags_a_prop_inside_a_fixture():
    """K004 names the fixture a prop starts inside (the peg moved into a wall of the hole); the zoo
    file has no start-state finding. Planted bug caught: fixtures left out of the overlap rule."""
    from tasks.check import check_task

    assert check_task(_parse(PEG), simulate=False) == []
    d = copy.deepcopy(PEG)
    d["scene"]["props"][0]["pos"] = [0.47, 0.15, 0.05]
    found = [f for f in check_task(_parse(d), simulate=False) if f.code == "K004"]
    assert len(found) == 1 and "overlaps fixture 'hole_wall_xlo'" in found[0].message, found


def test_fixtures_need_version_2_and_boxes():
    d = copy.deepcopy(PEG)
    d["scene"]["fixtures"][0]["kind"] = "sphere"
    with pytest.raises(CaliperError, match=r"scene.fixtures\[0\].kind: 'sphere': a fixture is a box"):
        _parse(d)
    d = copy.deepcopy(PEG)
    d["scene"]["fixtures"][1]["name"] = "peg"
    with pytest.raises(CaliperError, match=r"scene.fixtures\[1\].name: 'peg' is also a prop's name"):
        _parse(d)
    d = {k: v for k, v in copy.deepcopy(PEG).items() if k not in ("grasp", "randomization", "expert")}
    d["version"] = 1
    import robots

    d["robot"] = str(robots.resolve("panda"))          # a version-1 file names the URDF by path
    with pytest.raises(CaliperError, match="scene.fixtures: unknown key"):
        _parse(d)


@pytest.mark.parametrize("name", ["panda-stack", "panda-insert-peg"])
def test_expert_stacks_and_inserts(name):
    """One randomised episode per task: the expert succeeds and the scored prop ends where the task
    says (A on B; the peg in the hole, below the rim). Planted bugs caught: a stack lowered to the
    ground instead of onto B; an insert that keeps the start yaw (the peg jams on the rim)."""
    from tasks.arm_expert import ArmExpert
    from tasks.demo import run_episodes
    from tasks.env import VecEnv

    with VecEnv(name, 1, seed=3) as env:
        eps, expert = run_episodes(env, 1, policy=ArmExpert)
    assert not expert.failed_plans and eps[0].success
    end = eps[0].env_state[-1].reshape(-1, 7)[:, :3]
    if name == "panda-stack":
        assert end[0, 2] - end[1, 2] == pytest.approx(0.045, abs=5e-3)
        assert np.hypot(*(end[0, :2] - end[1, :2])) < 0.015
    else:
        assert end[0, 2] - 0.05 < 0.03 - 0.015 and np.hypot(end[0, 0] - 0.5, end[0, 1] - 0.15) < 0.005
