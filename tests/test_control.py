"""Computed-torque loop: goals on three robots, effort limits at every tick, the closed-form
decoupled error dynamics on pendulum2, determinism, tick-by-tick = scan, sources (IK, teleop),
and one vmapped call over randomised model parameters and seeds.

Compile budget: every rollout here reuses one compiled scan per robot (TICKS ticks, a
TrajectorySource, default-shaped params); only the randomised batch compiles its own."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax import control
from caliper_jax.control import flags as F
from caliper_jax.loading import load
from caliper_jax.motion import MotionLimits, move_j

TICKS = 2000
EPS32 = float(np.finfo(np.float32).eps)


def settle_floor(q, kp=100.0, kd=20.0, h=1e-3):
    """float32 floor of a settled position error: q stops moving once the step h*v is below half an
    ulp of q, and near the target v ~ (kp/kd) e, so e can stall at up to ulp(q) kd / (2 kp h)
    (~6e-6 rad at q = 0.5); eps*|q| kd / (kp h) is that bound with a factor 2 margin."""
    return EPS32 * float(np.max(np.abs(q))) * kd / (kp * h)


GOALS = {   # (q0, goal, tolerance on the final position)
    "pendulum2": ([0.0, 0.0], [0.5, -0.4], settle_floor([0.5, -0.4])),          # measured 1.3e-6
    "gripper_arm": ([0.0, 0.0, 0.0], [0.6, -0.5, 0.03], settle_floor([0.6, -0.5, 0.03])),
    "panda": ([0.0, -0.3, 0.0, -2.0, 0.0, 1.6, 0.8, 0.01],
              [0.4, 0.2, -0.3, -1.5, 0.3, 1.9, 0.2, 0.035], 2e-3),
}


@pytest.fixture(scope="module")
def models(fixture_models):
    return {"pendulum2": fixture_models["pendulum2"], "gripper_arm": fixture_models["gripper_arm"],
            "panda": load("panda", dtype=jnp.float32)}


@pytest.fixture(scope="module")
def goal_runs(models):
    out = {}
    for name, (q0, goal, _) in GOALS.items():
        m = models[name]
        src = control.goal_source(np.array(q0), np.array(goal), MotionLimits.from_model(m))
        out[name] = (src, control.simulate(m, src, np.array(q0), TICKS))
    return out


@pytest.mark.parametrize("name", list(GOALS))
def test_goal_reached_within_effort_limits_at_every_tick(models, goal_runs, name):
    m = models[name]
    _, goal, tol = GOALS[name]
    src, r = goal_runs[name]
    effort = np.asarray(m.dof_effort_limit)
    assert r.q.shape == (TICKS, m.nq) and r.tau.shape == (TICKS, m.nv)
    assert np.all(np.abs(r.tau) <= effort), "an applied effort exceeded its limit"
    assert np.all(np.isfinite(r.tau)) and not r.estopped
    assert np.max(np.abs(r.q_final - np.asarray(goal))) < tol
    assert float(src.traj.duration) < 0.8 * TICKS * 1e-3
    assert r.warnings() == {}                      # a feasible trajectory: the gate never intervened
    np.testing.assert_array_equal(r.max_abs_tau, np.max(np.abs(r.tau), axis=0))


def _hold_source(m, q):
    """A constant target as a (zero-length) MOVE_J, so it reuses the goal runs' compiled scan."""
    return control.trajectory_source(move_j(np.asarray(q), np.asarray(q), MotionLimits.from_model(m)))


def _discrete_error(e0, kp, kd, h, n):
    """Exact per-joint error of semi-implicit Euler on e'' + kd e' + kp e = 0 (constant target)."""
    e, ed, out = e0.copy(), np.zeros_like(e0), []
    for _ in range(n):
        out.append(e.copy())
        ed = ed + h * (-kp * e - kd * ed)
        e = e + h * ed
    return np.array(out)


@pytest.mark.parametrize("kd", [20.0, pytest.param(10.0, marks=pytest.mark.x64)])
def test_pendulum_matches_closed_form_decoupled_error_dynamics(models, goal_runs, kd):
    """Critically damped in float32 (the goal runs' compiled scan); underdamped (zeta = 0.5) in
    float64, where the loop equals the decoupled discrete system to 1e-12."""
    m, kp, h = models["pendulum2"], 100.0, 1e-3
    x64 = bool(jax.config.jax_enable_x64)
    m = m.astype(jnp.float64) if x64 else m
    target, q0 = np.array([0.35, -0.25]), np.array([0.25, -0.1])
    params = control.control_params(m, kp=kp, kd=kd, dt=h)
    safety = control.safety_params(m, h, vmax=np.inf)           # no rate limit: a pure step response
    r = control.simulate(m, _hold_source(m, target), q0, TICKS, params=params, safety=safety)
    assert r.warnings() == {} and np.all(np.abs(r.tau) < 20.0)  # unsaturated throughout
    e = target - r.q                                              # (T, 2), e(t_k) at tick k
    e0 = target - q0
    # 1. the loop is exactly the decoupled discrete system (both joints, to rounding: float64
    # measured ~1e-15; float32 at the settle floor of the targets, measured 1.3e-6)
    atol = 1e-12 if x64 else settle_floor(target, kp, kd, h)
    np.testing.assert_allclose(e, _discrete_error(e0, kp, kd, h, TICKS), rtol=0, atol=atol)
    # 2. and the closed-form continuous solution of e'' + kd e' + kp e = 0, to O(h)
    t = r.times[:, None]
    w = np.sqrt(kp)
    zeta = kd / (2 * w)
    if np.isclose(zeta, 1.0):
        closed = e0 * (1 + w * t) * np.exp(-w * t)
    else:
        wd = w * np.sqrt(1 - zeta**2)
        closed = e0 * np.exp(-zeta * w * t) * (np.cos(wd * t) + zeta / np.sqrt(1 - zeta**2) * np.sin(wd * t))
    assert np.max(np.abs(e - closed)) < 5 * w * h * np.max(np.abs(e0))
    if zeta < 1:
        assert np.min(e[:, 0]) < -0.1 * e0[0]                     # it overshoots, as it should


def test_saturation_is_on_the_command_actually_sent(models):
    m = models["pendulum2"]
    weak = m.replace(dof_effort_limit=jnp.array([4.0, 4.0]))
    src = control.goal_source(np.zeros(2), np.array([0.5, -0.4]), MotionLimits.from_model(m))
    r = control.simulate(weak, src, np.zeros(2), TICKS)
    assert np.all(np.abs(r.tau) <= 4.0)
    assert np.isclose(np.max(np.abs(r.tau)), 4.0)
    assert "effort_saturated" in r.warnings() and not r.estopped
    assert np.max(np.abs(r.q_final - [0.5, -0.4])) < 1e-3         # still gets there


def test_rollouts_are_bit_identical(models, goal_runs):
    m = models["pendulum2"]
    src, first = goal_runs["pendulum2"]
    again = control.simulate(m, src, np.array(GOALS["pendulum2"][0]), TICKS)
    for a, b in zip(first[:8], again[:8], strict=True):
        assert np.array_equal(a, b)


def test_step_runs_tick_by_tick_from_python(models, goal_runs):
    m = models["pendulum2"]
    src, r = goal_runs["pendulum2"]
    params, safety = control.control_params(m), control.safety_params(m)
    step = jax.jit(control.step)
    state = control.init_state(m, np.zeros(2), key=jax.random.PRNGKey(0))
    for k in range(60):
        state, out = step(m, params, safety, src, state)
        np.testing.assert_allclose(np.asarray(out.q), r.q[k], rtol=0, atol=1e-15)
        np.testing.assert_allclose(np.asarray(out.tau), r.tau[k], rtol=0, atol=1e-12)
        assert int(out.flags) == r.flags[k]
    assert int(state.tick) == 60


def test_ik_goal_source_plugs_in_any_solver(models):
    m = models["pendulum2"]

    def solve(T):  # closed-form planar 2-link IK to the tip (0.3 m links), elbow-negative branch
        x, z = T[0, 3], T[2, 3]
        c2 = (x * x + z * z - 0.18) / 0.18
        q2 = -jnp.arccos(jnp.clip(c2, -1.0, 1.0))
        q1 = jnp.arctan2(x, z) - jnp.arctan2(0.3 * jnp.sin(q2), 0.3 + 0.3 * jnp.cos(q2))
        return jnp.stack([q1, q2])

    def tip(q):
        return np.array([0.3 * np.sin(q[0]) + 0.3 * np.sin(q[0] + q[1]), 0.0,
                         0.3 * np.cos(q[0]) + 0.3 * np.cos(q[0] + q[1])])

    q_goal = np.array([0.45, -0.7])
    T = np.eye(4)
    T[:3, 3] = tip(q_goal)
    src = control.ik_goal_source(solve, T, np.zeros(2), MotionLimits.from_model(m))
    r = control.simulate(m, src, np.zeros(2), TICKS)
    floor = settle_floor(q_goal)                                # float32, measured 2.8e-6
    np.testing.assert_allclose(r.q_final, q_goal, atol=floor)
    np.testing.assert_allclose(tip(r.q_final), T[:3, 3], atol=0.6 * floor)   # 0.6 m of arm

    class Failed:  # an IKResult-like object that did not converge: the move stays put
        q, success = jnp.array([jnp.nan, 0.0]), jnp.array(False)

    stay = control.ik_goal_source(lambda T: Failed(), T, np.array([0.1, 0.2]), MotionLimits.from_model(m))
    np.testing.assert_allclose(np.asarray(stay.traj.sample(jnp.array([0.0, 1.0])).q), [[0.1, 0.2]] * 2)


def test_ik_stream_source_marks_failed_solves_not_fresh():
    poses = jnp.stack([jnp.eye(4)] * 3).at[1, 0, 3].set(1.0)
    solve = lambda T: jnp.where(T[0, 3] > 0.5, jnp.nan, 0.2) * jnp.ones(2)
    src = control.ik_stream_source(solve, poses)
    fresh = [bool(src.setpoint(jnp.int32(k), 0.0, jnp.zeros(2), jnp.zeros(2)).fresh) for k in range(4)]
    assert fresh == [True, False, True, False]     # tick 1 failed, tick 3 is past the stream
    np.testing.assert_allclose(src.setpoint(jnp.int32(0), 0.0, jnp.zeros(2), jnp.zeros(2)).q, [0.2, 0.2])


def test_leader_follower_teleop(models, goal_runs):
    """The leader's measured state (the goal run's rows) commands a heavier follower."""
    m = models["pendulum2"]
    _, leader = goal_runs["pendulum2"]
    follower = m.replace(body_mass=m.body_mass * 1.3, body_inertia=m.body_inertia * 1.3)
    src = control.teleop_source(leader.q, leader.v)
    r = control.simulate(follower, src, leader.q[0], TICKS)
    assert r.warnings() == {}
    lag = np.max(np.abs(r.q - leader.q))
    assert lag < 0.15                                        # no acceleration feed-forward from a leader
    assert np.max(np.abs(r.q_final - leader.q[-1])) < settle_floor(leader.q[-1])   # measured 3.9e-6
    # mapping: follower joint 0 copies leader joint 1, mirrored
    mapped = control.teleop_source(leader.q[:5], index=[1, 0], scale=[-1.0, 1.0], offset=[0.1, 0.0])
    sp = mapped.setpoint(jnp.int32(4), 0.0, jnp.zeros(2), jnp.zeros(2))
    np.testing.assert_allclose(sp.q, [-leader.q[4, 1] + 0.1, leader.q[4, 0]])
    assert not bool(mapped.setpoint(jnp.int32(5), 0.0, jnp.zeros(2), jnp.zeros(2)).fresh)


def test_vmap_over_randomised_masses_and_seeds_in_one_call(models):
    m = models["pendulum2"]
    n = 6
    scale = np.asarray(jax.random.uniform(jax.random.PRNGKey(7), (n,), minval=0.8, maxval=1.2))
    batch = m.replace(body_mass=jnp.stack([m.body_mass * s for s in scale]),
                      body_inertia=jnp.stack([m.body_inertia * s for s in scale]))
    goal = np.array([0.5, -0.4])
    src = control.goal_source(np.zeros(2), goal, MotionLimits.from_model(m))
    params = control.control_params(m, sensor_noise=1e-5)
    q0 = np.zeros((n, 2))
    run = lambda seed: control.simulate(batch, src, q0, 600, params=params, seed=seed,
                                        randomized=("body_mass", "body_inertia"))
    r = run(0)
    assert r.q.shape == (n, 600, 2) and not r.estopped.any()
    assert np.all(np.abs(r.tau) <= np.asarray(m.dof_effort_limit))
    assert np.max(np.abs(r.q_final - goal)) < 1e-3
    # heavier arms need more shoulder effort: the batch really carried different masses
    assert np.corrcoef(scale, r.max_abs_tau[:, 0])[0, 1] > 0.9
    # each world has its own noise stream; the same seed reproduces it bit for bit
    assert not np.array_equal(r.q[0], r.q[1])
    assert np.array_equal(r.q, run(0).q)
    assert not np.array_equal(r.q, run(1).q)


def test_flag_helpers():
    assert F.describe(F.RATE_LIMIT | F.ESTOP) == ["rate_limit", "estop"]
    s = F.summary_from_flags(np.array([0, F.RATE_LIMIT, F.RATE_LIMIT | F.ESTOP, 0]))
    assert s == {"rate_limit": {"count": 2, "first_tick": 1}, "estop": {"count": 1, "first_tick": 2}}
    assert len(F.NAMES) == F.NFLAGS == len(set(F.BY_NAME.values()))
