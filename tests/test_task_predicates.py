"""Success predicates: the shared knife-edge table on both twins (NumPy; JAX in float32 and float64),
grasp conditions included (held, released), JAX/NumPy agreement on random states of every zoo task
(vmap, jit), no zoo verdict true at t=0, and the success dwell's tick count and streak."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from tasks.predicates import (
    describe,
    dwell_ticks,
    evaluate_np,
    evaluator,
    geometric,
    latch,
    needs_grasp,
    needs_velocity,
    props_of,
    released_props,
    streak,
    zone_pairs,
)
from tasks.schema import AllOf, AnyOf, Lifted, PlacedInZone, Zone, load_task, predicate_from_dict, zoo_files

TABLE = json.loads((Path(__file__).parent / "data" / "predicate_cases.json").read_text())
ZONES = [Zone(z["name"], tuple(z["center"]), tuple(z["half"])) for z in TABLE["zones"]]
CASES = TABLE["cases"]


def _case(case):
    pred = predicate_from_dict(case["predicate"], ZONES, case["id"])    # props unchecked: the twins check
    arrays = [None if case[k] is None else np.array(case[k], np.float64) for k in ("pos", "pos0", "vel")]
    arrays += [None if case.get(k) is None else np.array(case[k], bool) for k in ("held", "carried")]
    return pred, arrays


def _cast(arrays, dtype):
    return [None if a is None else a.astype(dtype) for a in arrays[:3]] + list(arrays[3:])


def _numpy(pred, names, arrays):
    return evaluate_np(pred, names, *arrays)


def _jax(pred, names, arrays):
    dtype = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    pos, pos0, vel = [None if a is None else jnp.asarray(a, dtype=dtype) for a in arrays[:3]]
    held, carried = [None if a is None else jnp.asarray(a) for a in arrays[3:]]
    out = evaluator(pred, names)(pos, pos0, vel, held, carried)
    assert out.dtype == jnp.bool_ and out.shape == ()
    return bool(out)


TWINS = {
    "numpy64": lambda p, n, a: _numpy(p, n, a),
    "numpy32": lambda p, n, a: _numpy(p, n, _cast(a, np.float32)),
    "jax32": _jax,
    "jax64": _jax,
}


def test_table_is_float32_exact_and_covers_the_knife_edges():
    for case in CASES:
        for key in ("pos", "pos0", "vel"):
            if case[key] is not None:
                a = np.array(case[key], dtype=np.float64)
                assert np.array_equal(a, a.astype(np.float32)), (case["id"], key)
    ids = [c["id"] for c in CASES]
    for needle in ("min-face", "max-face", "exactly-at-speed-limit", "lifted-initial-exactly",
                   "lifted-absolute-exactly", "just-outside", "nested", "raises-settled",
                   "raises-unknown-prop", "knocked-up-not-in-gripper", "still-in-gripper",
                   "pushed-never-carried", "raises-without-grasp-state", "pushed-but-carried-in",
                   "pushed-touched-by-the-closed-gripper", "pushed-raises-without-grasp-state"):
        assert any(needle in i for i in ids), needle


JAX64 = pytest.param("jax64", marks=pytest.mark.x64)


@pytest.mark.parametrize("twin", ["numpy64", "numpy32", "jax32", JAX64])
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_knife_edge_table(case, twin):
    pred, arrays = _case(case)
    run = TWINS[twin]
    if "raises" in case:
        with pytest.raises(CaliperError, match=case["raises"]):
            run(pred, case["props"], arrays)
    else:
        assert run(pred, case["props"], arrays) is case["expect"]


# ---- every zoo task: random states, both twins ---------------------------------------------------------

N = 1000


@pytest.fixture(scope="module")
def zoo():
    return [load_task(f) for f in zoo_files()]


def _states(task, seed: int):
    """``N`` states ``(N, P, 3)`` (float64) around the task's zones and props, pos0 = the spawn positions.
    About a quarter of the coordinates sit exactly on a zone face, a quarter of the lifted props
    exactly at the lifted height; speeds straddle the settled limit, some exactly on it."""
    rng = np.random.default_rng(seed)
    spawn = np.array([p.pos for p in task.props])                      # (P, 3)
    P = len(spawn)
    pos0 = np.broadcast_to(spawn, (N, P, 3)).copy()
    pairs = zone_pairs(task.success)
    centres = np.array([z.center for _, z in pairs] or [spawn.mean(0)])
    halves = np.array([z.half for _, z in pairs] or [np.full(3, 0.1)])
    k = rng.integers(len(centres), size=(N, P))
    u = rng.uniform(-1.5, 1.5, size=(N, P, 3))
    u = np.where(rng.random((N, P, 3)) < 0.25, rng.choice([-1.0, 1.0], size=(N, P, 3)), u)
    near_zone = centres[k] + halves[k] * u
    pos = np.where(rng.random((N, P, 1)) < 0.8, near_zone, spawn + rng.uniform(-0.3, 0.3, (N, P, 3)))
    names = [p.name for p in task.props]
    for leaf in _leaves(task.success):
        if isinstance(leaf, Lifted):
            i = names.index(leaf.prop)
            pos[rng.random(N) < 0.25, i, 2] = leaf.height + (spawn[i, 2] if leaf.ref == "initial" else 0.0)
    limit = min([leaf.settled_speed for leaf in _leaves(task.success)
                 if isinstance(leaf, PlacedInZone) and leaf.settled_speed is not None] or [0.01])
    direction = rng.normal(size=(N, P, 3))
    direction /= np.linalg.norm(direction, axis=-1, keepdims=True)
    vel = direction * rng.uniform(0, 2 * limit, (N, P, 1))
    vel[rng.random(N) < 0.1] = 0.0
    on_limit = rng.random(N) < 0.1
    vel[on_limit] = 0.0
    vel[on_limit, :, rng.integers(3)] = limit
    held = rng.random((N, P)) < 0.5
    carried = held | (rng.random((N, P)) < 0.5)
    return pos, pos0, vel, held, carried


def _leaves(pred):
    if isinstance(pred, (AllOf, AnyOf)):
        for t in pred.terms:
            yield from _leaves(t)
    else:
        yield pred


def _agree(task, pos, pos0, vel, held, carried):
    """NumPy per state vs JAX (batched call, vmap, jit+vmap), in the dtype of the inputs."""
    names = [p.name for p in task.props]
    expect = np.array([evaluate_np(task.success, names, pos[n], pos0[n], None if vel is None else vel[n],
                                   held[n], carried[n]) for n in range(N)])
    assert np.array_equal(evaluate_np(task.success, names, pos, pos0, vel, held, carried), expect)
    fn = evaluator(task.success, names)
    args = [jnp.asarray(a) for a in (pos, pos0, held, carried)] + ([] if vel is None else [jnp.asarray(vel)])
    one = (lambda p, p0, h, c, v: fn(p, p0, v, h, c)) if vel is not None else \
        (lambda p, p0, h, c: fn(p, p0, None, h, c))
    for got in (one(*args), jax.vmap(one)(*args), jax.jit(jax.vmap(one))(*args)):
        assert got.shape == (N,) and got.dtype == jnp.bool_
        assert np.array_equal(np.asarray(got), expect), task.name
    return expect


@pytest.mark.parametrize("index", range(5))
def test_zoo_twins_agree_float32(zoo, index):
    task = zoo[index]
    pos, pos0, vel, held, carried = _states(task, seed=index)
    pos, pos0, vel = (a.astype(np.float32) for a in (pos, pos0, vel))
    verdicts = _agree(task, pos, pos0, vel, held, carried)
    assert 0 < verdicts.sum() < N, (task.name, verdicts.sum())     # the states straddle the verdict
    if not needs_velocity(task.success):
        assert np.array_equal(_agree(task, pos, pos0, None, held, carried), verdicts)
    # the grasp terms decide: the same poses with the grasp state flipped give other verdicts
    assert needs_grasp(task.success)
    assert not np.array_equal(_agree(task, pos, pos0, vel, ~held, ~held), verdicts), task.name


@pytest.mark.x64
@pytest.mark.parametrize("index", range(5))
def test_zoo_twins_agree_float64(zoo, index):
    task = zoo[index]
    verdicts = _agree(task, *_states(task, seed=100 + index))
    assert 0 < verdicts.sum() < N, (task.name, verdicts.sum())


@pytest.mark.parametrize("index", range(5))
def test_zoo_settled_check_without_velocity_raises_in_both_twins(zoo, index):
    task = zoo[index]
    names = [p.name for p in task.props]
    spawn = np.array([p.pos for p in task.props])
    no = np.zeros(len(names), bool)
    if not needs_velocity(task.success):
        assert evaluate_np(task.success, names, spawn, spawn, None, no, no) is False
    else:
        with pytest.raises(CaliperError, match="settled_speed needs velocities"):
            evaluate_np(task.success, names, spawn, spawn, None, no, no)
        fn = evaluator(task.success, names)
        with pytest.raises(CaliperError, match="settled_speed needs velocities"):
            jax.jit(lambda p, p0: fn(p, p0, None, no, no))(spawn, spawn)
    still = np.zeros_like(spawn)
    with pytest.raises(CaliperError, match="needs the grasp state"):
        evaluate_np(task.success, names, spawn, spawn, still)
    with pytest.raises(CaliperError, match="needs the grasp state"):
        jax.jit(lambda p, p0, v: evaluator(task.success, names)(p, p0, v))(spawn, spawn, still)


def test_every_zoo_verdict_is_false_at_t0(zoo):
    for task in zoo:
        names = [p.name for p in task.props]
        spawn = np.array([p.pos for p in task.props])
        still, no = np.zeros_like(spawn), np.zeros(len(names), bool)
        assert evaluate_np(task.success, names, spawn, spawn, still, no, no) is False, task.name
        assert not bool(evaluator(task.success, names)(spawn, spawn, still, no, no)), task.name


def test_geometric_drops_only_the_grasp_conditions(zoo):
    for task in zoo:
        pose = geometric(task.success)
        assert not needs_grasp(pose) and needs_grasp(task.success)
        assert zone_pairs(pose) == zone_pairs(task.success) and props_of(pose) == props_of(task.success)
    assert released_props(zoo[3].success) == ["tall_block", "short_block"]
    assert released_props(zoo[0].success) == [] and released_props(zoo[2].success) == []


def test_pushed_needs_the_grasp_state_and_is_dropped_by_geometric():
    """``pushed`` (issue 31): the environments must track held/carried for it, the witness's pose
    search drops it, and a carried prop is not pushed on a whole batch in both twins. Planted bug
    caught: needs_grasp ignoring ``pushed`` (then no engine tracks carried and the verdict raises)."""
    zone = Zone("goal", (0.5, 0.1, 0.04), (0.05, 0.05, 0.04))
    pushed = PlacedInZone("cube", zone, 0.01, pushed=True)
    assert needs_grasp(pushed) and needs_grasp(AllOf((pushed,))) and released_props(pushed) == []
    pose = geometric(AnyOf((pushed,)))
    assert not needs_grasp(pose) and pose.terms[0] == PlacedInZone("cube", zone, 0.01)
    assert describe(pushed).endswith("moving at most 0.01 m/s, never carried (pushed, not lifted)")
    pos = np.broadcast_to([[0.5, 0.1, 0.025]], (4, 1, 3))
    pos0, vel = np.zeros((4, 1, 3)), np.zeros((4, 1, 3))
    held = np.array([[False], [True], [False], [True]])
    carried = np.array([[False], [False], [True], [True]])
    want = [True, True, False, False]
    assert evaluate_np(pushed, ["cube"], pos, pos0, vel, held, carried).tolist() == want
    jfn = jax.jit(lambda *a: evaluator(pushed, ["cube"])(*a))
    assert np.asarray(jfn(pos, pos0, vel, held, carried)).tolist() == want


def test_dwell_ticks_and_streak():
    lift = load_task(zoo_files()[0])
    assert lift.success_dwell_s == 1.0 and dwell_ticks(lift, 50) == 50 and dwell_ticks(lift, 30) == 30
    for dwell, fps, want in ((0.0, 50, 1), (0.02, 50, 1), (0.021, 50, 2), (1.0, 30, 30), (0.1, 30, 3)):
        task = dataclasses.replace(lift, success_dwell_s=dwell)
        assert dwell_ticks(task, fps) == want, (dwell, fps)
    now = np.array([[1, 0], [1, 1], [0, 1], [1, 1]], bool)       # (T, W)
    run, seen = np.zeros(2, np.int32), []
    jrun = jnp.zeros(2, jnp.int32)
    for row in now:
        run, jrun = streak(np, run, row), streak(jnp, jrun, jnp.asarray(row))
        seen.append(run.tolist())
        assert np.array_equal(np.asarray(jrun), run) and run.dtype == np.int32
    assert seen == [[1, 0], [2, 1], [0, 2], [1, 3]]


def test_unknown_prop_raises_when_the_evaluator_is_built():
    with pytest.raises(CaliperError, match="unknown prop 'ball'"):
        evaluator(Lifted("ball", 0.1), ["cube"])


def test_integer_inputs_become_floats():
    pred = PlacedInZone("a", Zone("z", (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)))
    assert evaluate_np(pred, ["a"], [[1, 1, 1]], [[0, 0, 0]]) is True
    assert bool(evaluator(pred, ["a"])(jnp.array([[1, 1, 1]]), jnp.array([[0, 0, 0]])))


# ---- reading a predicate ---------------------------------------------------------------------------------

def test_describe_props_of_zone_pairs(zoo):
    lines = {t.name: describe(t.success) for t in zoo}
    assert lines["lift-cube"] == "cube lifted at least 0.08 m above its start height in the gripper"
    assert lines["place-cube"] == ("cube centre inside zone bin (centre (-0.15, 0, 0.05), "
                                   "half (0.07, 0.07, 0.06) m) and moving at most 0.01 m/s, released "
                                   "from the gripper")
    assert lines["hold-cube-high"].startswith("all of: (cube centre at height >= 0.3 m in the gripper); "
                                              "(cube centre inside")
    assert lines["sort-blocks"].startswith("any of: (tall_block centre inside zone dock")
    assert all("\n" not in line for line in lines.values())
    sort = zoo[3]
    assert props_of(sort.success) == ["tall_block", "short_block"]
    assert zone_pairs(sort.success) == [("tall_block", sort.zones[0]), ("short_block", sort.zones[0])]
    assert props_of(zoo[2].success) == ["cube"] and zone_pairs(zoo[2].success) == [("cube", zoo[2].zones[0])]
    assert zone_pairs(zoo[0].success) == []


def test_latch():
    assert latch(False, True) and latch(True, False) and not latch(False, False)
    got = latch(jnp.array([True, False, False]), jnp.array([False, True, False]))
    assert np.array_equal(np.asarray(got), [True, True, False])
