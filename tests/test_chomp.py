"""CHOMP on small prefixes of the seeded benchmark sets (collide_arm must fold under a bar; panda
among boxes), batching over problems and initialisations, determinism, gradients of the cost and of
the whole solve, and the ``caliper trajopt`` face. Success rates over the full sets are in
``benchmarks/bench_collision.py``."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax.cli import main
from caliper_jax.collision import build_sphere_model
from caliper_jax.planning import Checker
from caliper_jax.planning.problems import collide_arm_problems, panda_problems
from caliper_jax.trajopt import ChompOptions, cost, optimize, smoothness, straight_line, trajopt

EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def arm_set():
    return collide_arm_problems(2, seed=0)


@pytest.fixture(scope="module")
def scene(arm_set):
    return arm_set.sphere_model(), arm_set.collision_model()


@pytest.fixture(scope="module")
def checker(arm_set, scene):
    return Checker(arm_set.model, scene[1], resolution=arm_set.resolution, batch=256)


@pytest.fixture(scope="module")
def solved(arm_set, scene, checker):
    return trajopt(arm_set.model, arm_set.starts, arm_set.goals, inits=8, seed=0, spheres=scene[0],
                   checker=checker)


def _check_solution(ps, res, fine):
    lo, hi = np.asarray(ps.model.qpos_lower), np.asarray(ps.model.qpos_upper)
    for p in range(len(ps)):
        assert res.success[p] and res.costs[p] < res.initial_costs[p]
        path = res.paths[p]
        # the endpoints are the problem's own, up to the rounding of q to the model's precision
        # (a scalar atol: numpy 2.4's assert_allclose formats it into its message with :g)
        tol = 2 * np.finfo(ps.model.dtype).eps * max(1.0, np.abs(ps.starts[p]).max())
        np.testing.assert_allclose(path[0], ps.starts[p], rtol=0, atol=tol)
        tol = 2 * np.finfo(ps.model.dtype).eps * max(1.0, np.abs(ps.goals[p]).max())
        np.testing.assert_allclose(path[-1], ps.goals[p], rtol=0, atol=tol)
        assert fine.path_valid(path)                       # collision-free re-checked 5x finer
        assert np.all(path >= lo) and np.all(path <= hi)   # joint limits respected


def test_chomp_clears_the_bar(arm_set, scene, solved):
    fine = Checker(arm_set.model, scene[1], resolution=arm_set.resolution / 5, batch=256)
    for p in range(len(arm_set)):                          # the straight line hits the bar
        assert not fine.path_valid(np.asarray(straight_line(jnp.asarray(arm_set.starts[p]),
                                                             jnp.asarray(arm_set.goals[p]), 32)))
    _check_solution(arm_set, solved, fine)
    assert solved.all_costs.shape == (2, 8) and solved.paths.shape == (2, 32, 3)


def test_same_seed_same_bytes(arm_set, scene, checker, solved):
    again = trajopt(arm_set.model, arm_set.starts, arm_set.goals, inits=8, seed=0, spheres=scene[0],
                    checker=checker)
    assert again.paths.tobytes() == solved.paths.tobytes()
    np.testing.assert_array_equal(again.chosen, solved.chosen)


def test_held_joints_are_reported(arm_set, scene, checker):
    """CHOMP holds every joint start and goal share; the result names them, and a problem that
    fails while holding joints says so (issue 36). Holding j2 (goal j2 := start j2) leaves problem 0
    no way under the bar (measured: fails with j2 held, succeeds with free=["j2"])."""
    goals = arm_set.goals.copy()
    goals[:, 1] = arm_set.starts[:, 1]
    res = trajopt(arm_set.model, arm_set.starts, goals, inits=8, seed=0, spheres=scene[0], checker=checker)
    assert res.held == [["j2"], ["j2"]]
    assert not res.success[0] and "j2" in res.hints[0] and "free=['j2']" in res.hints[0]
    assert [h is None for h in res.hints] == [False, bool(res.success[1])]
    assert res.to_dict()["held"] == res.held and res.to_dict()["hints"] == res.hints
    freed = trajopt(arm_set.model, arm_set.starts, goals, inits=8, seed=0, spheres=scene[0], checker=checker,
                    free=["j2"])
    assert freed.held == [[], []] and freed.success[0] and freed.hints[0] is None


class _Rerun(Exception):
    pass


def test_only_problems_that_move_two_joints_or_more_are_rerun(arm_set, scene, checker, monkeypatch):
    """The adam rerun (ChompOptions.fallback) is for failed problems that move >= 2 joints: one
    that moves a single joint has one path (its sweep) whatever the update rule. Both problems
    below fail (one initialisation, the straight line, and no step: it crosses the bar); problem 0
    moves j1 only, problem 1 may move j2 as well, so only problem 1 is handed to the rerun (a spy
    that stops there: no second solver is compiled)."""
    import importlib

    tapi = importlib.import_module("caliper_jax.trajopt.api")
    reruns = []

    def spy(model, starts, goals, *args, **kw):
        reruns.append((np.asarray(starts).copy(), kw.get("free")))
        raise _Rerun

    monkeypatch.setattr(tapi, "trajopt", spy)
    start = arm_set.starts[0]
    goal = start.copy()
    goal[0] = arm_set.goals[0][0]
    kw = dict(inits=1, seed=0, spheres=scene[0], checker=checker,
              opts=ChompOptions(n_waypoints=8, iterations=0))
    one = trajopt(arm_set.model, start, goal, **kw)                          # j1 only: not rerun
    assert not one.success[0] and not one.fell_back[0] and reruns == []
    with pytest.raises(_Rerun):
        trajopt(arm_set.model, [start, start], [goal, goal],
                free=np.array([[False] * 3, [False, True, False]]), **kw)
    (rerun_starts, _), = reruns
    np.testing.assert_array_equal(rerun_starts, start[None])                # problem 1 only


@pytest.mark.slow          # ~60 s; CHOMP's default coverage is collide_arm under the bar above
def test_panda_among_boxes():
    ps = panda_problems(2, seed=0)
    exact = ps.collision_model()
    res = trajopt(ps.model, ps.starts, ps.goals, inits=4, seed=0, spheres=ps.sphere_model(),
                  checker=Checker(ps.model, exact, resolution=ps.resolution, batch=256))
    _check_solution(ps, res, Checker(ps.model, exact, resolution=ps.resolution / 5, batch=256))


def test_smoothness_is_the_second_difference_quadratic():
    """float32: the quadratic form against its float64 matrix form."""
    rng = np.random.default_rng(0)
    path = jnp.asarray(rng.normal(size=(12, 3)), jnp.float32)
    n = 12
    K = np.zeros((n - 2, n))
    for i in range(n - 2):
        K[i, i:i + 3] = [1, -2, 1]
    A = K.T @ K * (n - 1) ** 3
    P = np.asarray(path, np.float64)
    value = float(smoothness(path))
    # float32 sums of n-term stencils: a few eps relative (measured 1.8e-7 = 1.5 eps); allow 16 eps
    assert value == pytest.approx(float(np.sum(P * (A @ P))), rel=16 * EPS32)
    grad = 2 * A @ P
    np.testing.assert_allclose(np.asarray(jax.grad(smoothness)(path)), grad, rtol=0,
                               atol=16 * EPS32 * np.abs(grad).max())   # measured 0.3 eps of the max


@pytest.mark.x64           # central differences with h = 1e-6 need float64
def test_cost_gradient_matches_finite_differences(arm_set):
    arm = arm_set.model.astype(jnp.float64)
    spheres = build_sphere_model(arm, arm_set.obstacles, srdf=arm_set.srdf)[0]
    opts = ChompOptions()
    rng = np.random.default_rng(1)
    path = np.asarray(straight_line(jnp.asarray(arm_set.starts[0]), jnp.asarray(arm_set.goals[0]), 32)) + \
        0.05 * rng.normal(size=(32, 3))
    f = jax.jit(lambda x: cost(arm, spheres, x, opts))
    g = np.asarray(jax.jit(jax.grad(lambda x: cost(arm, spheres, x, opts)))(jnp.asarray(path)))
    assert np.all(np.isfinite(g))
    assert float(f(jnp.asarray(path))) > opts.w_smooth * float(smoothness(jnp.asarray(path)))  # near the bar
    eps = 1e-6
    for (i, j) in [(5, 0), (14, 1), (16, 2), (20, 0), (31, 1)]:
        e = np.zeros_like(path)
        e[i, j] = eps
        fd = (float(f(jnp.asarray(path + e))) - float(f(jnp.asarray(path - e)))) / (2 * eps)
        assert g[i, j] == pytest.approx(fd, rel=1e-5, abs=1e-6)


@pytest.mark.x64           # central differences with h = 1e-6 need float64
def test_solve_is_differentiable_in_start_and_goal(arm_set):
    """Forward mode through the whole solve (a scan of gradient steps with projection) against
    central differences of the same compiled function's primal output. Plain gradient descent keeps
    the map smooth (Adam's per-coordinate normalisation jumps where a gradient component crosses
    zero); world obstacles only, to keep the second-order graph small."""
    arm = arm_set.model.astype(jnp.float64)
    spheres, _ = build_sphere_model(arm, arm_set.obstacles, self_collision=False)
    opts = ChompOptions(n_waypoints=12, iterations=6, optimizer="gd", learning_rate=1e-6)
    s0, g0 = jnp.asarray(arm_set.starts[0]), jnp.asarray(arm_set.goals[0])
    init = straight_line(s0, g0, 12)

    def final_cost(start, goal):
        return optimize(arm, spheres, start, goal, init, opts)[1]

    jvp = jax.jit(lambda s, g, ds, dg: jax.jvp(final_cost, (s, g), (ds, dg)))
    rng = np.random.default_rng(5)
    eps = 1e-6
    for _ in range(3):
        ds, dg = jnp.asarray(rng.normal(size=3)), jnp.asarray(rng.normal(size=3))
        _, slope = jvp(s0, g0, ds, dg)
        up, _ = jvp(s0 + eps * ds, g0 + eps * dg, ds, dg)
        down, _ = jvp(s0 - eps * ds, g0 - eps * dg, ds, dg)
        fd = (float(up) - float(down)) / (2 * eps)
        assert np.isfinite(float(slope)) and float(slope) == pytest.approx(fd, rel=1e-5, abs=1e-6)


def test_trajopt_cli(arm_set, solved, monkeypatch, capsys):
    """The face: arguments reach trajopt and the report is formed (the solve itself is the
    module fixture's first problem, which is this command's problem)."""
    import caliper_jax.trajopt as trajopt_pkg
    from caliper_jax.trajopt.api import TrajoptResult

    seen = {}

    def fake(model, starts, goals, **kw):
        seen.update(kw, starts=starts, goals=goals)
        return TrajoptResult(solved.paths[:1], solved.costs[:1], solved.success[:1], solved.chosen[:1],
                             solved.initial_costs[:1], solved.all_costs[:1])

    monkeypatch.setattr(trajopt_pkg, "trajopt", fake)
    vec = lambda x: ",".join(repr(float(v)) for v in x)
    rc = main(["trajopt", "collide_arm", f"--start={vec(arm_set.starts[0])}",
               f"--goal={vec(arm_set.goals[0])}", "--ground", "-0.1", "--box", "0,0,0.8,0.06,0.3,0.06",
               "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["success"] and report["cost"] < report["initial_cost"]
    assert len(report["waypoints"]) == 32 and report["spheres"][0]["spheres"] == 3
    np.testing.assert_array_equal(seen["starts"], arm_set.starts[0])
    assert seen["inits"] == 8 and seen["opts"] == ChompOptions() and seen["spheres"].obstacles[-1] == "ground"
    for bad, field in ((["--start=1,0", "--goal=1,0,0"], "--start"),
                       (["--start=0,0,0", "--goal=1,0,0", "--waypoints", "2"], "--waypoints"),
                       (["--start=0,0,0", "--goal=1,0,0", "--sphere", "0,0,1,-0.1"], "radius")):
        assert main(["trajopt", "collide_arm", *bad]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("caliper: error:") and "\n" not in err and field in err, err
