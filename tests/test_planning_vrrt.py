"""The jitted RRT-Connect (caliper_jax.planning.vrrt) and batched shortcutting (vshortcut): a toy
point robot among discs (pure JAX checker) for the search itself, then ``plan``'s fast path on
collide_arm and the panda with every returned path re-checked by the exact mesh checker at 4x the
planning resolution. Timings vs OMPL: ``benchmarks/bench_plan.py``."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from caliper_jax.planning import Checker, plan
from caliper_jax.planning.lattice import bisection_order
from caliper_jax.planning.problems import collide_arm_problems, panda_problems
from caliper_jax.planning.vrrt import (
    SearchOptions,
    compiled_solver,
    flat_batched,
    solve_many,
    solve_one,
)
from caliper_jax.planning.vshortcut import ShortcutOptions


class Discs:
    """A point in [-1, 1]^2 among discs: params = (centres (m, 2), radii (m,))."""

    nq = 2
    lower = np.array([-1.0, -1.0])
    upper = np.array([1.0, 1.0])

    def __init__(self, centres, radii):
        self.params = (jnp.asarray(centres, jnp.float32), jnp.asarray(radii, jnp.float32))

    def valid(self, params, qs):
        c, r = params
        d = jnp.linalg.norm(qs[:, None, :] - c[None], axis=-1)
        inside = jnp.all((qs >= -1.0) & (qs <= 1.0), axis=1)
        return inside & jnp.all(d > r[None], axis=1)

    def valid_np(self, qs, params=None):        # NumPy twin (no per-shape compiles in the checks)
        c, r = (np.asarray(x, np.float64) for x in (self.params if params is None else params))
        qs = np.asarray(qs, np.float64).reshape(-1, 2)
        d = np.linalg.norm(qs[:, None, :] - c[None], axis=-1)
        return np.all(np.abs(qs) <= 1.0, axis=1) & np.all(d > r[None], axis=1)


WALL = Discs([[0.0, -0.6], [0.0, 0.0], [0.0, 0.35]], [0.35, 0.3, 0.2])    # gap near y = 0.55..1
OPTS = SearchOptions(step=0.2, resolution=0.02, capacity=256, max_iterations=400, path_capacity=64)
SMOOTH = ShortcutOptions(iterations=24, resolution=0.02, max_span=2.0)


def dense_ok(checker, path, res=0.002):
    """Every state every ``res`` along the polyline is valid."""
    pts = [a + t * (b - a) for a, b in zip(path[:-1], path[1:], strict=True)
           for t in np.linspace(0, 1, int(np.ceil(np.max(np.abs(b - a)) / res)) + 1)]
    return bool(checker.valid_np(np.array(pts)).all())


def test_bisection_order_prefixes_are_grids():
    f = bisection_order(3)
    assert f[0] == 0.5 and sorted(f) == [k / 8 for k in range(1, 8)]
    assert sorted(f[:3]) == [0.25, 0.5, 0.75]


def test_search_finds_valid_path_round_the_wall_and_shortcut_shortens_it():
    s, g = np.array([-0.6, 0.0]), np.array([0.6, 0.0])
    r = solve_one(WALL, s, g, jax.random.PRNGKey(0), OPTS, SMOOTH)
    assert r["found"] and r["code"] == 0
    raw, path = r["raw"][:r["raw_length"]], r["path"][:r["length"]]
    np.testing.assert_allclose(raw[0], s, atol=1e-6)
    np.testing.assert_allclose(raw[-1], g, atol=1e-6)
    assert raw.shape[0] >= 3 and dense_ok(WALL, raw) and dense_ok(WALL, path)
    assert np.abs(np.diff(raw, axis=0)).max() <= OPTS.step + 1e-6       # tree edges are steps
    length = lambda p: np.linalg.norm(np.diff(p, axis=0), axis=1).sum()   # noqa: E731
    assert length(path) <= length(raw) + 1e-6 and np.all(r["path"][r["length"]:] == path[-1])


def test_same_key_same_bytes_and_unreachable_goal_reports_why():
    s, g = np.array([-0.6, 0.0]), np.array([0.6, 0.0])
    a = solve_one(WALL, s, g, jax.random.PRNGKey(3), OPTS, SMOOTH)
    b = solve_one(WALL, s, g, jax.random.PRNGKey(3), OPTS, SMOOTH)
    assert a["path"].tobytes() == b["path"].tobytes() and a["raw"].tobytes() == b["raw"].tobytes()
    r = solve_one(WALL, s, np.array([0.0, 0.0]), jax.random.PRNGKey(0), OPTS)   # goal inside a disc
    assert not r["found"] and r["code"] == 1
    ring = Discs(np.c_[0.6 + 0.25 * np.cos(np.linspace(0, 2 * np.pi, 40)),
                       0.25 * np.sin(np.linspace(0, 2 * np.pi, 40))], np.full(40, 0.05))
    r = solve_one(ring, s, g, jax.random.PRNGKey(0), OPTS._replace(max_iterations=30))
    assert not r["found"] and r["code"] == 2 and r["iterations"] == 30         # goal enclosed by a ring


def test_batched_problems_in_one_call_and_moved_obstacles_do_not_recompile():
    rng = np.random.default_rng(0)
    B = 16
    starts = np.c_[rng.uniform(-0.9, -0.5, B), rng.uniform(-0.9, 0.9, B)]
    goals = np.c_[rng.uniform(0.5, 0.9, B), rng.uniform(-0.9, 0.9, B)]
    r = solve_many(WALL, starts, goals, jax.random.PRNGKey(1), OPTS)
    assert r["found"].all()
    for k in range(B):
        assert dense_ok(WALL, r["raw"][k, :r["raw_length"][k]])
    fn = compiled_solver(WALL, OPTS, None, batched=True)
    size = fn._cache_size()
    moved = (WALL.params[0] + jnp.array([0.05, 0.0]), WALL.params[1] * 0.9)     # moved and shrunk
    r2 = solve_many(WALL, starts, goals, jax.random.PRNGKey(1), OPTS, params=moved)
    assert fn._cache_size() == size and r2["found"].all()


def test_a_batch_advanced_in_chunks_gives_the_same_bytes_as_one_loop():
    """solve_many(chunk=...) drops stopped problems between rounds (compaction on the host):
    every problem's result must be the one the single vmapped loop gives (same keys)."""
    rng = np.random.default_rng(2)
    B = 12
    starts = np.c_[rng.uniform(-0.9, -0.5, B), rng.uniform(-0.9, 0.9, B)]
    goals = np.c_[rng.uniform(0.5, 0.9, B), rng.uniform(-0.9, 0.9, B)]
    goals[3] = [0.0, 0.0]                                    # inside a disc: stops at once, invalid
    one = solve_many(WALL, starts, goals, jax.random.PRNGKey(4), OPTS, SMOOTH)
    chunked = solve_many(WALL, starts, goals, jax.random.PRNGKey(4), OPTS, SMOOTH, chunk=5)
    assert len(set(one["iterations"].tolist())) > 3 and not one["found"][3]   # stops at different rounds
    for k in one:
        np.testing.assert_array_equal(chunked[k], one[k], err_msg=k)
    with pytest.raises(CaliperError, match="chunk"):
        solve_many(WALL, starts, goals, jax.random.PRNGKey(4), OPTS, chunk=0)


def test_flat_batched_validity_matches_the_plain_vmap():
    qs = jnp.asarray(np.random.default_rng(3).uniform(-1.1, 1.1, (5, 7, 2)), jnp.float32)
    flat = jax.vmap(flat_batched(WALL.valid), in_axes=(None, 0))(WALL.params, qs)
    plain = jax.vmap(WALL.valid, in_axes=(None, 0))(WALL.params, qs)
    np.testing.assert_array_equal(np.asarray(flat), np.asarray(plain))
    assert 0 < np.asarray(plain).mean() < 1


@pytest.mark.x64
def test_float64_search_keeps_its_loop_types():
    w = Discs([[0.0, 0.0]], [0.3])
    w.params = tuple(jnp.asarray(x, jnp.float64) for x in w.params)
    r = solve_one(w, np.array([-0.6, 0.0]), np.array([0.6, 0.0]), jax.random.PRNGKey(0), OPTS, SMOOTH)
    assert r["found"] and dense_ok(w, r["path"][:r["length"]])


def test_bad_input_names_the_argument():
    with pytest.raises(CaliperError, match="starts/goals"):
        solve_many(WALL, np.zeros((2, 3)), np.zeros((2, 3)), 0, OPTS)
    with pytest.raises(CaliperError, match="step"):
        solve_one(WALL, np.zeros(2), np.ones(2), 0, OPTS._replace(step=0.0))
    with pytest.raises(CaliperError, match="goal"):
        solve_one(WALL, np.zeros(2), np.array([np.nan, 0.0]), 0, OPTS)


def _check_plans(ps, k_range, margin):
    cm = ps.collision_model()
    coarse = Checker(ps.model, cm, resolution=ps.resolution, margin=margin, batch=256)
    fine = Checker(ps.model, cm, resolution=ps.resolution / 4, batch=256)
    for k in k_range:
        res = plan(ps.model, cm, ps.goals[k], ps.starts[k], seed=k, checker=coarse)
        assert res.success and res.planner == "vrrtconnect", res.reason
        np.testing.assert_array_equal(res.waypoints[0], ps.starts[k])
        np.testing.assert_array_equal(res.waypoints[-1], ps.goals[k])
        assert fine.path_valid(res.waypoints) and fine.path_valid(res.raw)    # exact meshes, 4x finer


def test_plan_fast_path_collide_arm_exact_check_at_4x():
    _check_plans(collide_arm_problems(2, seed=0), range(2), 0.005)


@pytest.mark.slow   # ~1-2 min (GJK compile on panda meshes); collide_arm above covers the fast path
def test_plan_fast_path_panda_exact_check_at_4x():
    _check_plans(panda_problems(4, seed=0), range(4), 0.0)


def test_witness_connect_is_the_planners_rrt_connect_with_a_host_check():
    """tasks.witness.connect (and the host planner) run vrrt's one RRT-Connect through
    host_search: a point in a box detours round a wall; the last coordinate (the "gripper") stays
    at the value asked for. Fails when connect keeps its own copy that ignores host_search."""
    from types import SimpleNamespace

    from caliper_jax.planning import vrrt
    from tasks import witness

    calls = []
    real = vrrt.host_search

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    def clear(a, b):                         # the wall x in [-0.1, 0.1], y < 0.6, sampled every PATH_STEP
        n = int(np.ceil(np.max(np.abs(b - a)) / witness.PATH_STEP)) + 1
        pts = a + np.linspace(0.0, 1.0, n)[:, None] * (b - a)
        return not np.any((np.abs(pts[:, 0]) < 0.1) & (pts[:, 1] < 0.6))

    ts = SimpleNamespace(model=SimpleNamespace(qpos_lower=np.array([-1.0, -1.0, 0.0]),
                                               qpos_upper=np.array([1.0, 1.0, 0.04])),
                         gripper=SimpleNamespace(q_index=2))
    a, b = np.array([-0.5, 0.0, 0.03]), np.array([0.5, 0.0, 0.03])
    vrrt.host_search = spy
    try:
        path = witness.connect(ts, clear, a, b, 0.03)
    finally:
        vrrt.host_search = real
    assert calls and path is not None and path.shape[0] >= 3
    assert np.array_equal(path[0], a) and np.array_equal(path[-1], b)
    assert np.allclose(path[:, 2], 0.03)
    assert all(clear(p, q) for p, q in zip(path[:-1], path[1:], strict=True))


def test_plan_many_in_rounds_matches_one_loop_and_every_path_passes_the_exact_check():
    """plan_many's default (chunk=32 rounds, compaction between them) against chunk=None on
    collide_arm problems: the same verdicts and waypoints, each path exactly valid."""
    from caliper_jax.planning import plan_many
    from caliper_jax.planning.planner import exact_checker, exact_fine_checker

    ps = collide_arm_problems(6)
    cm = ps.collision_model()
    kw = dict(seed=3, resolution=ps.resolution, max_iterations=400)
    rounds = plan_many(ps.model, cm, ps.starts, ps.goals, chunk=2, **kw)
    one = plan_many(ps.model, cm, ps.starts, ps.goals, chunk=None, **kw)
    assert rounds.success.sum() >= 5 and np.array_equal(rounds.success, one.success)
    fine = exact_fine_checker(exact_checker(ps.model, cm, resolution=ps.resolution))
    for k in np.flatnonzero(rounds.success):
        np.testing.assert_array_equal(rounds.waypoints[k], one.waypoints[k])
        w = rounds.waypoints[k]
        assert np.allclose(w[0], ps.starts[k]) and np.allclose(w[-1], ps.goals[k])
        assert fine.path_valid(w)
