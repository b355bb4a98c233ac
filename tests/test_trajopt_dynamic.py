"""Dynamics trajopt (direct multiple shooting, augmented Lagrangian): the solver on problems with
known answers, the fixed-path minimum time against TOPP-RA on the same rows, the float64 gradient
check of the trajopt cost (objective + penalties) w.r.t. the decision variables, input errors, and
(slow) full solves: pendulum2, and the free collide_arm problems (issue 22). The benchmark against
CHOMP + TOPP-RA is ``benchmarks/bench_trajopt.py``."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax.collision import build_sphere_model
from caliper_jax.collision.geometry import box
from caliper_jax.errors import CaliperError
from caliper_jax.loading import load
from caliper_jax.motion import MotionLimits
from caliper_jax.motion.reachability import joint_limit_constraints, topp_ra
from caliper_jax.motion.spline import cubic_spline, spline_eval
from caliper_jax.trajopt import auglag, dynamic, path_timing
from caliper_jax.trajopt.dynamic import DynamicOptions, Problem, trajopt_dynamic

WAYPOINTS = np.array([[-1.0, 0.2, 0.1], [-0.3, 1.2, -0.8], [0.5, 0.9, 0.3], [1.0, -0.2, 0.2]])


@pytest.mark.x64
@pytest.mark.parametrize("method", ["lbfgs", "newton", "gauss_newton"])
def test_auglag_circle(method):
    """min x + y on the unit circle with x >= -0.5: the answer is (-0.5, -sqrt(3)/2)."""
    f = lambda z: z[0] + z[1]
    c = lambda z: jnp.array([z @ z - 1.0])
    g = lambda z: jnp.array([-0.5 - z[0]])
    res = jax.jit(lambda z: auglag.solve(f, c, g, z, auglag.ALOptions(outer=10, inner=30, method=method)))(
        jnp.array([1.0, 0.0]))
    np.testing.assert_allclose(np.asarray(res.z), [-0.5, -np.sqrt(3) / 2], atol=1e-6)
    assert float(res.violation) < 1e-8 and float(res.mu[0]) > 0     # the bound is active


@pytest.mark.x64
def test_fixed_path_minimum_time_matches_topp_ra():
    """The trajopt solver's minimum time on a fixed path (TOPP-RA's own velocity/acceleration rows)
    is within 1% of TOPP-RA's time-optimal duration (the must-show asks 5%) and feasible."""
    model = load("collide_arm", dtype=jnp.float64)
    lim = MotionLimits.from_model(model)
    grid = jnp.linspace(0.0, 1.0, 51)
    cons = joint_limit_constraints(spline_eval(cubic_spline(jnp.asarray(WAYPOINTS)), grid), lim)
    ref = topp_ra(grid, cons)
    x, T, viol = path_timing.time_optimal_jit(grid, cons)
    assert bool(ref.feasible)
    assert abs(float(T) / float(ref.duration) - 1.0) < 0.01, (float(T), float(ref.duration))
    assert float(viol) < 1e-6
    assert float(x[0]) == 0.0 and float(x[-1]) == 0.0


@pytest.fixture(scope="module")
def arm_problem():
    with jax.enable_x64(True):
        model = load("collide_arm", dtype=jnp.float64)
        spheres, _ = build_sphere_model(model, [box([0.0, 0.0, 0.8], [0.06, 0.3, 0.06])])
        p = Problem(jnp.array([-0.3, 0.2, 0.1]), jnp.array([0.4, -0.2, 0.2]), jnp.eye(4), jnp.asarray(0.6),
                    jnp.asarray(model.dof_velocity_limit), jnp.asarray(model.dof_effort_limit))
        return model, spheres, p


@pytest.mark.x64
# the "effort" case is slow only for its compile; "time" covers the same terms plus the free T
@pytest.mark.parametrize("objective", ["time", pytest.param("effort", marks=pytest.mark.slow)])
def test_trajopt_cost_gradient_central_differences(arm_problem, objective):
    """Must-show 1 (trajopt part): d(objective + augmented-Lagrangian penalties)/dz against float64
    central differences, at a point where the collision hinge, limits and defects are all active."""
    model, spheres, p = arm_problem
    opts = DynamicOptions(horizon=3, objective=objective, w_collision=10.0, epsilon=0.2).check()
    n = dynamic.size(model, opts)
    path = jnp.stack([p.q0, jnp.array([0.0, 0.0, 0.0]), p.goal])
    z = jax.jit(lambda a: dynamic.warm_start(model, p, a, 0.6, opts))(path)
    z = z + 0.05 * jax.random.normal(jax.random.PRNGKey(0), (n,))
    neq = jax.eval_shape(lambda x: dynamic.equalities(model, p, x, opts), z).shape[0]
    nin = jax.eval_shape(lambda x: dynamic.inequalities(model, p, x, opts), z).shape[0]
    lam = jax.random.normal(jax.random.PRNGKey(1), (neq,))
    mu = jnp.abs(jax.random.normal(jax.random.PRNGKey(2), (nin,)))
    fun = jax.jit(lambda x: dynamic.merit(model, spheres, p, x, lam, mu, 5.0, opts))
    hit = jax.jit(lambda x: dynamic.collision(model, spheres, dynamic.unpack(model, p, x, opts)[0], opts))
    assert float(hit(z)) > 0
    grad = np.asarray(jax.jit(jax.grad(fun))(z))
    h = 1e-6
    eye = np.eye(n)
    fd = np.array([(float(fun(z + h * eye[i])) - float(fun(z - h * eye[i]))) / (2 * h) for i in range(n)])
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(fd).max()))


def test_bad_input_names_the_argument():
    model = load("pendulum2")
    with pytest.raises(CaliperError, match="objective"):
        trajopt_dynamic(model, [0, 0], [1, 0], objective="fast", dt=0.05)
    with pytest.raises(CaliperError, match="goal"):
        trajopt_dynamic(model, [0, 0], [1, 0, 0], dt=0.05)
    with pytest.raises(CaliperError, match="dt= or duration="):
        trajopt_dynamic(model, [0, 0], [1, 0])
    with pytest.raises(CaliperError, match="limits"):
        trajopt_dynamic(model, [0, 0], [1, 0], dt=0.05, limits={"effort": [0.0, 1.0]})
    with pytest.raises(CaliperError, match="init"):
        trajopt_dynamic(model, [0, 0], [1, 0], dt=0.05, init=np.zeros((5, 3)))


@pytest.mark.slow      # ~3 min compile under load; the solver and the cost are covered by the tests above
@pytest.mark.x64
def test_pendulum_effort_converges_and_obeys_the_dynamics():
    """pendulum2 from rest to rest in 1 s (minimum effort): converged, torques within the effort
    limit, and every interval reproduces one integrator step of the native forward dynamics."""
    from caliper_jax import integrators

    model = load("pendulum2", dtype=jnp.float64)
    res = trajopt_dynamic(model, [0.0, 0.0], [1.0, -0.5], horizon=20, duration=1.0)
    assert res.converged[0] and res.violation[0] < 1e-4
    assert np.abs(res.tau[0]).max() <= 20.0 * (1 + 1e-3)
    np.testing.assert_allclose(res.q[0, -1], [1.0, -0.5], atol=1e-4)
    h = 1.0 / 20
    step = jax.vmap(lambda q, v, t: integrators.step(model, q, v, t, h))
    qn, vn = step(jnp.asarray(res.q[0, :-1]), jnp.asarray(res.qd[0, :-1]), jnp.asarray(res.tau[0]))
    np.testing.assert_allclose(np.asarray(qn), res.q[0, 1:], atol=1e-4)
    np.testing.assert_allclose(np.asarray(vn), res.qd[0, 1:], atol=1e-2)
    assert res.replay_error.shape == (1,) and res.replay_integrator == "euler"


@pytest.mark.x64
def test_every_solution_reports_its_open_loop_replay_error():
    """The open-loop replay (issue 36: a Panda solution with 4.8e-5 rad defects ended 391 rad away
    when replayed). Nodes that are an exact Euler chain at step h (zero defects) replay to
    themselves at h/1; at h/10 the replay equals a plain loop of integrators.step; a converged
    result whose coarse step misses warns (ReplayWarning) and says so in replay_error/replay_ok,
    a fine one does not."""
    import warnings

    from caliper_jax import integrators
    from caliper_jax.trajopt.dynamic import DynamicResult, ReplayWarning, _with_replay, replay

    model = load("pendulum2", dtype=jnp.float64)
    N = 6
    tau = np.random.default_rng(0).uniform(-3.0, 3.0, (N, 2))
    step = jax.jit(lambda q, v, t, h: integrators.step(model, q, v, t, h))

    def chain(h, sub=1):
        q, v = np.zeros(2), np.zeros(2)
        qs, vs = [q], [v]
        for t in tau:
            for _ in range(sub):
                q, v = (np.asarray(x) for x in step(q, v, t, h / sub))
            qs.append(q)
            vs.append(v)
        return np.stack(qs), np.stack(vs)

    qn, vn = chain(0.3)
    qr, vr = replay(model, qn[0], tau, N * 0.3, substeps=1)
    np.testing.assert_allclose(qr[0], qn, rtol=0, atol=1e-12)
    np.testing.assert_allclose(vr[0], vn, rtol=0, atol=1e-12)
    qr, _ = replay(model, qn[0], tau, N * 0.3, substeps=10)
    np.testing.assert_allclose(qr[0], chain(0.3, 10)[0], rtol=0, atol=1e-10)

    def result(h):
        q, v = chain(h)
        one = np.ones(1)
        return DynamicResult(q[None], v[None], tau[None], np.linspace(0, N * h, N + 1)[None], N * h * one,
                             one.astype(bool), 0 * one, 0 * one, np.zeros(1, int), np.zeros((1, 1)),
                             np.zeros((1, 1)))

    with pytest.warns(ReplayWarning, match=r"problem 0 converged .* too coarse"):
        coarse = _with_replay(model, result(0.3), "euler", 10, 1e-2)
    err = np.abs(chain(0.3, 10)[0][-1] - chain(0.3)[0][-1]).max()
    assert coarse.replay_error[0] == pytest.approx(err, rel=1e-9) and err > 1e-2 and not coarse.replay_ok[0]
    assert coarse.to_dict()["replay_error"] == [coarse.replay_error[0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fine = _with_replay(model, result(0.005), "euler", 10, 1e-2)
    assert fine.replay_ok[0] and fine.replay_error[0] < 5e-3                 # measured 2.8e-3
    with pytest.raises(CaliperError, match="substeps"):
        replay(model, qn[0], tau, 1.0, substeps=0)


def test_cli_dynamics_flags_fail_before_any_solve(capsys):
    from caliper_jax.cli import main

    for bad, flag in ((["--objective", "effort"], "--duration"), (["--horizon", "1"], "--horizon"),
                      (["--duration", "-1"], "--duration")):
        assert main(["trajopt", "pendulum2", "--start", "0,0", "--goal", "1,0", "--dynamics", *bad]) == 2
        assert flag in capsys.readouterr().err


@pytest.mark.slow      # ~2-3 min compile under load; the flags are checked by the test above
def test_cli_dynamics_json(capsys):
    import json

    from caliper_jax.cli import main

    rc = main(["trajopt", "pendulum2", "--start", "0,0", "--goal", "1.0,-0.5", "--dynamics", "--objective",
               "effort", "--duration", "1.0", "--horizon", "16", "--inits", "2", "--iterations", "50",
               "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["success"] and report["converged"] and report["violation"] < 1e-3
    assert len(report["q"]) == 17 and len(report["tau"]) == 16 and report["duration"] == 1.0


@pytest.mark.slow      # ~2 min (compile + 2 solves) under load; test_auglag_circle covers gauss_newton
@pytest.mark.x64
def test_collide_arm_free_minimum_time_converges():
    """Issue 22: the free collide_arm problems (horizon 16, minimum time, warm-started from CHOMP)
    converge with the default Gauss-Newton inner solver, collision-free under the exact colliders,
    within the torque limits and at rest on the goal."""
    from caliper_jax.planning import Checker
    from caliper_jax.planning.problems import collide_arm_problems
    from caliper_jax.trajopt import trajopt

    ps = collide_arm_problems(2, seed=0)
    ps.model = ps.model.astype(jnp.float64)
    spheres = ps.sphere_model()
    chomp = trajopt(ps.model, ps.starts, ps.goals, inits=8, seed=0, spheres=spheres)
    res = trajopt_dynamic(ps.model, ps.starts, ps.goals, horizon=16, objective="time", spheres=spheres,
                          init=chomp.paths)
    check = Checker(ps.model, ps.collision_model(), resolution=ps.resolution, batch=256)
    assert res.converged.all() and res.violation.max() < 1e-3, res.violation
    assert all(check.path_valid(res.q[p]) for p in range(2))
    assert np.abs(res.tau).max() <= 20.0 * (1 + 1e-3)
    np.testing.assert_allclose(res.q[:, -1], ps.goals, atol=1e-3)
    np.testing.assert_allclose(res.qd[:, -1], 0.0, atol=1e-2)
