"""The scripted expert solves randomised lift-cube episodes closed loop with contact (the full
success-rate sweep over 100 seeds per task is benchmarks/bench_expert.py)."""
import numpy as np

from tasks.env import VecEnv
from tasks.expert import ScriptedExpert, moved_task, plan_demo
from tasks.scene import build_scene
from tasks.schema import find_task, load_task


def test_expert_plan_is_jerk_limited_and_within_limits():
    ts = build_scene(load_task(find_task("lift-cube")))
    demo = plan_demo(ts, fps=50)
    lo, hi = np.asarray(ts.model.qpos_lower), np.asarray(ts.model.qpos_upper)
    assert np.all(demo.targets >= lo - 1e-6) and np.all(demo.targets <= hi + 1e-6)
    step = np.abs(np.diff(demo.targets, axis=0)).max(axis=0)
    assert np.all(step <= np.asarray(ts.model.dof_velocity_limit) / 50 + 1e-9)   # the gate never clamps
    assert np.isclose(demo.targets[0, ts.gripper.q_index], ts.gripper.open, atol=1e-9)
    assert np.isclose(demo.targets[-1, ts.gripper.q_index], ts.gripper.closed, atol=1e-9)
    assert 0 < demo.close_tick < len(demo.targets)


def test_moved_task_moves_only_the_props():
    task = load_task(find_task("sort-blocks"))
    pos = np.array([[0.1, 0.0, 0.1], [0.2, 0.01, 0.07]])
    quat = np.array([[1.0, 0, 0, 0], [0.0, 0, 0, 2.0]])
    moved = moved_task(task, pos, quat)
    assert [p.pos for p in moved.props] == [tuple(r) for r in pos]
    assert moved.props[1].quat == (0.0, 0.0, 0.0, 1.0) and moved.zones == task.zones


def test_expert_solves_randomised_lift_cube_episodes():
    env = VecEnv("lift-cube", 2, seed=3)
    expert = ScriptedExpert(env)
    obs, info = env.reset()
    outcomes = []
    for _ in range(env.horizon * 2):
        obs, _, term, trunc, info = env.step(expert.act(obs, info))
        outcomes += [bool(info["final_success"][w]) for w in np.flatnonzero(term | trunc)]
        if len(outcomes) >= 3:
            break
    env.close()
    assert len(outcomes) >= 3 and all(outcomes), (outcomes, expert.failed_plans)
