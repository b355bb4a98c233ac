"""The planning collision checker (caliper_jax.planning.spherecheck): conservative against the exact
mesh checker, exact against a NumPy reference of its own sphere model, no recompiles for new
worlds, vmappable over worlds, traceable in a while loop, clear errors."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import robots
from caliper_jax.collision import api
from caliper_jax.collision.geometry import box, capsule, ground, halfspace, robot_colliders, sphere
from caliper_jax.collision.scene import build_collision_model
from caliper_jax.collision.spheres import fit_collider
from caliper_jax.errors import CaliperError
from caliper_jax.kinematics import body_poses
from caliper_jax.loading import load
from caliper_jax.planning.spherecheck import planning_checker, split_cover

PANDA_SRDF = robots.example_robot_data_dir() / "panda_description/srdf/panda.srdf"
UR5_SRDF = robots.example_robot_data_dir() / "ur_description/srdf/ur5.srdf"


def _rot(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K


def _world(robot):
    """Obstacles of every kind placed within the arm's reach (a good fraction of random
    configurations collide)."""
    z = 0.0 if robot == "panda" else -0.1      # the ur5's shoulder hangs low: a lower ground
    return [box([0.45, 0.1, 0.35 + z], [0.08, 0.2, 0.06], R=_rot([1, 1, 0], 0.5), name="board"),
            box([0.0, -0.45, 0.45 + z], [0.05, 0.05, 0.25], name="post"),
            sphere([-0.35, 0.25, 0.55 + z], 0.08, name="ball"),
            capsule([0.2, 0.4, 0.7 + z], 0.04, 0.15, R=_rot([1, 0, 0], 1.0), name="rod"),
            ground(-0.01 + z)]


@pytest.fixture(scope="module")
def panda():
    model = load("panda")
    obstacles = _world("panda")
    return model, obstacles, planning_checker(model, obstacles, srdf=PANDA_SRDF)


@pytest.fixture(scope="module")
def ur5():
    model = load("ur5")
    obstacles = _world("ur5")
    return model, obstacles, planning_checker(model, obstacles, srdf=UR5_SRDF)


def _conservative(model, obstacles, checker, srdf, n, seed):
    rng = np.random.default_rng(seed)
    q = rng.uniform(checker.lower, checker.upper, (n, model.nq))
    free_sphere = checker.valid_np(q)
    cm = build_collision_model(model, obstacles, srdf=srdf)
    hit_mesh = api.in_collision(model, cm, q)
    # the property: every configuration the spheres call free is free under the meshes (GJK)
    bad = np.flatnonzero(free_sphere & hit_mesh)
    assert bad.size == 0, f"{model.name}: sphere-valid but mesh-colliding at {q[bad[:3]].tolist()}"
    false_alarm = float(np.mean(~free_sphere[~hit_mesh]))     # the price of conservativeness
    print(f"{model.name}: {n} configurations, mesh collides {hit_mesh.mean():.1%}, sphere-valid "
          f"{free_sphere.mean():.1%}, spheres collide where the meshes are free {false_alarm:.1%}")
    assert 0.1 < hit_mesh.mean() < 0.95        # the world is near the arm: both outcomes occur
    assert free_sphere.sum() > 0.1 * n           # and the checker is not trivially "all invalid"
    return false_alarm


def test_conservative_panda(panda):
    model, obstacles, checker = panda
    _conservative(model, obstacles, checker, PANDA_SRDF, 256, 0)


@pytest.mark.slow   # the exact GJK checker compiles again for the ur5; test_conservative_panda covers the
# property by default and test_conservative_thousands runs both robots on 4096 configurations
def test_conservative_ur5(ur5):
    model, obstacles, checker = ur5
    _conservative(model, obstacles, checker, UR5_SRDF, 256, 1)


@pytest.mark.slow   # thousands of configurations; test_conservative_panda/_ur5 cover it on 256
@pytest.mark.parametrize("robot", ["panda", "ur5"])
def test_conservative_thousands(robot, panda, ur5):
    model, obstacles, checker = panda if robot == "panda" else ur5
    _conservative(model, obstacles, checker, PANDA_SRDF if robot == "panda" else UR5_SRDF, 4096, 7)


def _references(checker, model, obstacles, qs, margin):
    """(n,) bool: the checker's own spheres and pairs at float64 in NumPy, distances by closed forms
    with square roots (body poses from the reference kinematics)."""
    poses = jax.jit(jax.vmap(lambda q: body_poses(model, q)))(jnp.asarray(qs, model.jnt_p.dtype))
    Rs, ps = (np.asarray(x, np.float64) for x in poses)
    return np.array([_reference(checker, obstacles, q, R, p, margin)
                     for q, R, p in zip(qs, Rs, ps, strict=True)])


def _reference(checker, obstacles, q, Rb, pb, margin):
    rs = checker.spheres
    c = np.array([rs.centre[s] if b < 0 else Rb[b] @ rs.centre[s] + pb[b] for s, b in enumerate(rs.body)])
    r = rs.radius
    d = [np.linalg.norm(c[rs.self_i] - c[rs.self_j], axis=1) - r[rs.self_i] - r[rs.self_j]]
    mov = rs.body >= 0
    cm, rm = c[mov], r[mov]
    for o in obstacles:
        rel = cm - o.p
        if o.kind == "point":
            d.append(np.linalg.norm(rel, axis=1) - rm - o.radius)
        elif o.kind == "segment":
            a = o.R[:, 2]
            t = np.clip(rel @ a, -o.half[2], o.half[2])
            d.append(np.linalg.norm(rel - t[:, None] * a, axis=1) - rm - o.radius)
        elif o.kind == "box":
            d.append(np.linalg.norm(np.maximum(np.abs(rel @ o.R) - o.half, 0), axis=1) - rm)
        else:
            d.append(rel @ o.R[:, 2] - rm)
    inside = np.all((q >= checker.lower) & (q <= checker.upper))
    return bool(inside and np.min(np.concatenate(d)) >= margin)


@pytest.mark.x64
def test_matches_reference_float64():
    model = load("ur5", dtype=jnp.float64)
    obstacles = _world("ur5")
    checker = planning_checker(model, obstacles, srdf=UR5_SRDF, margin=0.03)
    assert checker.params.margin.dtype == jnp.float64
    rng = np.random.default_rng(3)
    q = rng.uniform(checker.lower - 0.1, checker.upper + 0.1, (96, model.nq))
    got = checker.valid_np(q)
    want = _references(checker, model, obstacles, q, 0.03)
    np.testing.assert_array_equal(got, want)
    assert 0 < got.sum() < got.size


def test_float32_matches_reference(panda):
    model, obstacles, checker = panda
    rng = np.random.default_rng(4)
    q = rng.uniform(checker.lower, checker.upper, (64, model.nq))
    got = checker.valid_np(q)
    want = _references(checker, model, obstacles, q, 0.0)
    assert np.mean(got == want) >= 0.98            # float32: only grazing pairs may differ
    assert 0 < want.sum() < want.size
    early = dataclasses.replace(checker, early_exit=True)      # the same answers, another schedule
    np.testing.assert_array_equal(early.valid_np(q), got)


def test_split_cover_holds_the_hulls():
    """Every vertex of panda's collision hulls, and random points inside them, lie in the union of
    the split cover's spheres; its excess beats the slab fit's on the big links."""
    model = load("panda")
    rng = np.random.default_rng(6)
    cols = [c for c in robot_colliders(model)[0] if c.kind == "hull"][:4]
    for c in cols:
        centres, radii, excess = split_cover(c, 4)
        w = rng.dirichlet(np.ones(4), 500)
        inside = np.einsum("nk,nkd->nd", w, c.vertices[rng.integers(0, len(c.vertices), (500, 4))])
        pts = np.concatenate([c.vertices, inside])
        gap = np.min(np.linalg.norm(pts[:, None] - centres[None], axis=-1) - radii[None], axis=1)
        assert np.all(gap <= 1e-12), (c.name, gap.max())
        assert len(radii) == 4 and 0 < excess < fit_collider(c)[2], c.name


def test_limits(panda):
    model, _, _ = panda
    checker = planning_checker(model, [ground(-0.01)], srdf=PANDA_SRDF)
    q = np.tile(np.array([0.0, 0.4, 0.0, -1.8, 0.0, 2.2, 0.8, 0.02]), (3, 1))
    q[1, 3] = checker.upper[3] + 0.01
    q[2, 0] = checker.lower[0] - 0.01
    assert checker.valid_np(q).tolist() == [True, False, False]
    assert checker.valid_np(q[0]) == np.True_


def test_with_obstacles_does_not_recompile(panda):
    model, obstacles, _ = panda
    checker = planning_checker(model, [ground(-0.01)], srdf=PANDA_SRDF, capacity=6)
    traces = []

    def f(p, q):
        traces.append(1)
        return checker.valid(p, q)

    g = jax.jit(f)
    q = np.tile(np.array([0.0, 0.4, 0.0, -1.8, 0.0, 2.2, 0.8, 0.02]), (4, 1)).astype(np.float32)
    assert bool(g(checker.params, q)[0])
    hand = np.array([0.65, 0.0, 0.33])                     # the hand at the home pose
    worlds = [[box(hand, [0.05, 0.05, 0.05])],                              # fewer, moved: hits
              [sphere(hand + [0, 0, 0.02], 0.03), ground(-0.5)],            # other kinds
              [capsule(hand, 0.02, 0.1), box([2, 2, 2], [0.1, 0.1, 0.1])],
              [halfspace([0, 0, -1], -0.3)],                                 # solid above z = 0.3
              []]
    for w in worlds[:4]:
        assert not bool(g(checker.with_obstacles(w), q)[0]), w
    assert bool(g(checker.with_obstacles(worlds[4]), q)[0])
    assert bool(g(checker.with_obstacles([ground(-0.01)], margin=0.01), q)[0])
    assert not bool(g(checker.with_obstacles([ground(-0.01)], margin=0.5), q)[0])   # the margin is live
    assert len(traces) == 1


def test_vmap_over_worlds_and_while_loop(panda):
    model, obstacles, _ = panda
    checker = planning_checker(model, obstacles, srdf=PANDA_SRDF, capacity={"box": 3, "sphere": 1})
    rng = np.random.default_rng(5)
    worlds = [obstacles, [box([0.65, 0.0, 0.33], [0.1, 0.1, 0.1]), ground(0.0)],
              [sphere([0.3, 0.3, 0.5], 0.2)]]
    params = [checker.with_obstacles(w) for w in worlds]
    stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *params)
    qs = rng.uniform(checker.lower, checker.upper, (3, 32, model.nq)).astype(np.float32)
    batched = jax.jit(jax.vmap(lambda p, q: checker.valid(p, q)))(stacked, qs)
    for k in range(3):
        np.testing.assert_array_equal(np.asarray(batched[k]), checker.valid_np(qs[k], params[k]))

    def count_valid(p, q):          # inside a while loop, as the vectorised planner calls it
        def body(state):
            i, n = state
            return i + 1, n + jnp.sum(checker.valid(p, q[i]))
        return jax.lax.while_loop(lambda s: s[0] < q.shape[0], body, (0, 0))[1]

    n = jax.jit(count_valid)(params[0], qs)
    assert int(n) == sum(int(checker.valid_np(qs[k], params[0]).sum()) for k in range(3))


def test_describe(panda):
    _, _, checker = panda
    d = checker.describe()
    assert d["spheres"] == sum(v["spheres"] for v in d["links"].values())
    assert d["links"]["panda_link1"]["spheres"] >= 1 and d["links"]["panda_link1"]["excess"] > 0
    assert d["capacity"] == {"sphere": 1, "capsule": 1, "box": 2, "ground/halfspace": 1}
    assert d["self_sphere_pairs"] > 0 and d["moving_spheres"] < d["spheres"]   # link0 is fixed


def test_bad_input(panda):
    model, obstacles, checker = panda
    with pytest.raises(CaliperError, match=r"2 box obstacle\(s\) but the checker's capacity .*is 1"):
        planning_checker(model, obstacles, capacity={"box": 1})
    with pytest.raises(CaliperError, match=r"3 box obstacle\(s\).*capacity.*is 2"):
        checker.with_obstacles(obstacles + [box([1, 1, 1], [0.1, 0.1, 0.1])])
    with pytest.raises(CaliperError, match="obstacles\\[0\\]"):
        checker.with_obstacles(["box"])
    with pytest.raises(CaliperError, match="capacity: unknown obstacle kind 'cone'"):
        planning_checker(model, obstacles, capacity={"cone": 2})
    with pytest.raises(CaliperError, match="margin"):
        checker.with_obstacles(obstacles, margin=-0.1)
    with pytest.raises(CaliperError, match="srdf"):
        planning_checker(model, obstacles, srdf="/nonexistent.srdf")
    with pytest.raises(CaliperError, match=r"qs: expected shape \(B, 8\)"):
        checker.valid_np(np.zeros((4, 7)))
    with pytest.raises(CaliperError, match="non-finite"):
        checker.valid_np(np.full((2, 8), np.nan))
    with pytest.raises(CaliperError, match=r"qs: expected shape \(B, 8\)"):
        checker.valid(checker.params, jnp.zeros((4, 3)))


def test_a_robot_without_collision_geometry_is_free_inside_its_limits():
    """pendulum2 has no collision geometry: no sphere moves, so every configuration inside the joint
    limits is free and every one outside is not (`caliper plan pendulum2` once failed here)."""
    model = load("pendulum2")
    checker = planning_checker(model, [ground(-1.0)])
    qs = np.array([[0.0, 0.0], [1.0, -0.5], [1e3, 0.0]])
    inside = np.all((qs >= checker.lower) & (qs <= checker.upper), axis=1)
    np.testing.assert_array_equal(np.asarray(checker.valid(checker.params, qs)), inside)
