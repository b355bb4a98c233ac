"""The ``reached`` predicate (gripper point at a goal over a marker prop) and the Panda reach task."""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from tasks.predicates import describe, evaluate_np, evaluator, needs_grip
from tasks.schema import Reached, find_task, load_task, predicate_from_dict, predicate_to_dict

N = 2000


@pytest.fixture(scope="module")
def reach():
    return load_task(find_task("panda-reach"))


def _states(task, seed, dtype):
    """Grip points around the goal: a quarter exactly on the tolerance sphere along an axis."""
    rng = np.random.default_rng(seed)
    pred = task.success
    spawn = np.array([p.pos for p in task.props])
    pos = np.broadcast_to(spawn, (N,) + spawn.shape) + rng.uniform(-0.05, 0.05, (N,) + spawn.shape)
    goal = pos[:, 0] + np.array([0.0, 0.0, pred.above])
    grip = goal + rng.uniform(-1.1, 1.1, (N, 3)) * pred.tolerance
    edge = rng.random(N) < 0.25
    axis = rng.integers(3, size=N)
    grip[edge] = goal[edge]
    grip[edge, axis[edge]] += rng.choice([-1.0, 1.0], edge.sum()) * pred.tolerance
    return pos.astype(dtype), grip.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reached_twins_agree(reach, dtype):
    """NumPy per state, NumPy batched and JAX (jit + vmap) agree exactly, straddling the verdict.
    Planted bug caught: a twin judging the prop centre without ``above``, or the JAX twin
    squaring in another order than the NumPy one."""
    if dtype == np.float64 and not jax.config.jax_enable_x64:
        pytest.skip("float64 twin needs x64")
    pred, names = reach.success, [p.name for p in reach.props]
    pos, grip = _states(reach, 0, dtype)
    no = np.zeros((N, 1), bool)
    expect = np.array([evaluate_np(pred, names, pos[n], pos[n], None, no[n], no[n], grip[n])
                       for n in range(N)])
    assert 0.2 < expect.mean() < 0.8
    d = grip - pos[:, 0] - np.array([0, 0, pred.above], dtype)
    assert np.array_equal(expect, np.sum(d * d, -1) <= dtype(pred.tolerance) ** 2)
    assert np.array_equal(evaluate_np(pred, names, pos, pos, None, no, no, grip), expect)
    fn = evaluator(pred, names)
    one = lambda p, g: fn(p, p, None, None, None, g)                     # noqa: E731
    got = jax.jit(jax.vmap(one))(jnp.asarray(pos), jnp.asarray(grip))
    assert got.dtype == jnp.bool_ and np.array_equal(np.asarray(got), expect)


def test_reached_without_grip_raises_in_both_twins(reach):
    pred, names = reach.success, [p.name for p in reach.props]
    spawn = np.array([p.pos for p in reach.props])
    with pytest.raises(CaliperError, match="reached 'target': needs the gripper point"):
        evaluate_np(pred, names, spawn, spawn)
    with pytest.raises(CaliperError, match="needs the gripper point"):
        jax.jit(lambda p: evaluator(pred, names)(p, p))(spawn)
    assert needs_grip(pred) and "within 0.03 m of 0.15 m above target" in describe(pred)


def test_reached_schema_round_trip_and_errors(reach):
    d = predicate_to_dict(reach.success)
    assert d == {"kind": "reached", "prop": "target", "tolerance": 0.03, "above": 0.15}
    assert predicate_from_dict(d, ()) == reach.success == Reached("target", 0.03, 0.15)
    for bad, where in (({**d, "tolerance": 0}, "success.tolerance: must be > 0"),
                       ({**d, "above": -0.1}, "success.above: must be >= 0"),
                       ({**d, "prop": "cube"}, "success.prop: no prop 'cube'"),
                       ({"kind": "all_of", "terms": [d]},
                        r"success.terms\[0\].kind: reached is a whole task")):
        with pytest.raises(CaliperError, match=where):
            predicate_from_dict(bad, (), props=["target"])


def test_check_k001_goal_at_the_start_grip(reach, tmp_path):
    """K001 sees the gripper point: a goal where the gripper starts is already reached.
    Planted bug caught: K001 judging a reached task without the grip point (it raised)."""
    from tasks.check import check_task
    from tasks.scene import build_scene
    from tasks.witness import _Kin, grip_of

    ts = build_scene(reach)
    kin = _Kin(ts)
    kin.set(ts.q0)
    above = float(grip_of(ts, kin.d)[2] - ts.pos0[0, 2])
    # move the marker under the start grip point, goal `above` over it
    src = json.loads(reach.source.read_text())
    g = grip_of(ts, kin.d)
    src["scene"]["props"][0]["pos"] = [float(g[0]), float(g[1]), 0.005]
    src["success"]["above"] = above
    path = tmp_path / "k001.caliper-task.json"
    path.write_text(json.dumps(src))
    codes = {f.code for f in check_task(load_task(path), simulate=False)}
    assert "K001" in codes
    assert "K001" not in {f.code for f in check_task(reach, simulate=False)}


def test_check_passes_and_k005_sees_an_unreachable_goal(reach, tmp_path):
    """The zoo task passes K000-K010 (its witness reaches the goal in simulation; K011 is run by
    ``caliper task check``); a goal 1.2 m over the marker is out of the Panda's reach: K005.
    Planted bug caught: a reach witness that never simulates (or judges without the grip)."""
    from tasks.check import check_task

    found = check_task(reach, baselines=0)
    assert not [f for f in found if f.severity == "Error"], found
    src = json.loads(reach.source.read_text())
    src["success"]["above"] = 1.2
    path = tmp_path / "far.caliper-task.json"
    path.write_text(json.dumps(src))
    k005 = [f for f in check_task(load_task(path), baselines=0) if f.code == "K005"]
    assert k005 and "unreachable" in k005[0].message, k005
