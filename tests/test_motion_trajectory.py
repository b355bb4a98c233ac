"""MOVE_J time synchronisation (against Ruckig, in float64), the Trajectory value and waypoint
retiming (float32, the user's precision: gates of a few eps32 of the scale)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import ruckig

from caliper_jax.errors import CaliperError
from caliper_jax.motion import MotionLimits, Trajectory, move_j, retime_waypoints, uniform_times

NDOF = 7
EPS32 = float(np.finfo(np.float32).eps)
_move_batch = jax.jit(jax.vmap(move_j, in_axes=(0, 0, None)))
_grid_batch = jax.jit(jax.vmap(lambda tr: tr.grid(3001)))
_move = jax.jit(move_j)
_retime = jax.jit(retime_waypoints)
_sample = jax.jit(lambda tr, t: tr.sample(t))
_jerk_batch = jax.jit(jax.vmap(lambda tr, t: tr.sample(t).qddd))
_grid11 = jax.jit(lambda tr: tr.grid(11))
_grid5001 = jax.jit(lambda tr: tr.grid(5001))
_move_longer = jax.jit(lambda a, b, lim, d: move_j(a, b, lim, duration=d))


def _limits(rng):
    v = 10.0 ** rng.uniform(-0.5, 0.7, NDOF)
    return MotionLimits.from_arrays(-np.full(NDOF, 4.0), np.full(NDOF, 4.0), v,
                                    acceleration=v * 10.0 ** rng.uniform(0, 1, NDOF),
                                    jerk=v * 10.0 ** rng.uniform(1, 2.5, NDOF))


def _ruckig_duration(q0, q1, lim):
    n = len(q0)
    inp = ruckig.InputParameter(n)
    inp.current_position, inp.target_position = list(q0), list(q1)
    inp.max_velocity, inp.max_acceleration, inp.max_jerk = list(lim.vmax), list(lim.amax), list(lim.jmax)
    traj = ruckig.Trajectory(n)
    assert ruckig.Ruckig(n).calculate(inp, traj) in (ruckig.Result.Working, ruckig.Result.Finished)
    return traj.duration


@pytest.mark.x64
def test_move_j_time_synchronised_matches_ruckig():
    rng = np.random.default_rng(99)
    lim = _limits(rng)
    n = 150
    q0 = rng.uniform(-3, 3, (n, NDOF))
    q1 = q0 + rng.uniform(-1, 1, (n, NDOF)) * 10.0 ** rng.uniform(-3, 0.5, (n, NDOF))
    q1[:5, :3] = q0[:5, :3]  # some joints stay put
    traj = _move_batch(jnp.asarray(q0), jnp.asarray(q1), lim)
    ours = np.asarray(traj.duration)
    ref = np.array([_ruckig_duration(a, b, lim) for a, b in zip(q0, q1, strict=True)])
    rel = np.abs(ours - ref) / ref
    assert rel.max() < 5e-3
    assert rel.max() < 1e-9
    # every joint's profile lasts the common duration
    np.testing.assert_allclose(traj.profile.duration[:, 0, :], ours[:, None] * np.ones(NDOF), rtol=1e-12)
    rows = _grid_batch(traj)
    assert np.all(np.abs(rows.qd) <= lim.vmax * (1 + 1e-12) + 1e-9)
    assert np.all(np.abs(rows.qdd) <= lim.amax * (1 + 1e-12) + 1e-9)
    np.testing.assert_array_equal(rows.q[:, -1], q1)  # endpoints exact
    np.testing.assert_array_equal(rows.q[:, 0], q0)
    np.testing.assert_array_equal(rows.qd[:, [0, -1]], 0.0)
    jerk = _jerk_batch(traj, rows.times)
    assert np.all(np.abs(jerk) <= lim.jmax * (1 + 1e-12) + 1e-9)


def test_trajectory_value_api():
    lim = MotionLimits.from_arrays([-3, -3, -3], [3, 3, 3], [1.0, 2.0, 0.5])
    q0, q1 = jnp.array([0.0, 0.5, -1.0]), jnp.array([1.0, 0.5, 0.0])
    tr = _move(q0, q1, lim)
    assert isinstance(tr, Trajectory) and tr.ndof == 3
    assert len(jax.tree_util.tree_leaves(tr)) == 3 + 5
    total = float(tr.duration)
    s = _sample(tr, jnp.array([[0.0, total], [-1.0, total + 1.0]]))
    assert s.q.shape == (2, 2, 3)
    np.testing.assert_array_equal(s.q[:, 0], [q0, q0])
    np.testing.assert_array_equal(s.q[:, 1], [q1, q1])
    rows = tr.sample_uniform(0.01)
    # float32 sample times k * 0.01 carry eps32 * t of rounding each (measured 2.3e-7 s at t ~ 2 s)
    np.testing.assert_allclose(np.diff(rows.times)[:-1], 0.01, rtol=0, atol=2 * EPS32 * total)
    assert float(rows.times[-1]) == total and rows.q.shape == (rows.times.shape[0], 3)
    np.testing.assert_array_equal(rows.q[-1], q1)
    g = _grid11(tr)
    np.testing.assert_allclose(g.times, np.linspace(0, total, 11))
    # joint 1 does not move; the slowest joint is the one with vmax 0.5
    np.testing.assert_array_equal(g.q[:, 1], 0.5)
    longer = _move_longer(q0, q1, lim, 2 * total)
    assert float(longer.duration) == pytest.approx(2 * total, rel=4 * EPS32)


def test_zero_move():
    lim = MotionLimits.from_arrays([-3, -3], [3, 3], [1.0, 1.0])
    tr = _move(jnp.array([0.2, 0.3]), jnp.array([0.2, 0.3]), lim)
    assert float(tr.duration) == 0.0
    rows = tr.sample_uniform(0.01)
    assert rows.times.shape == (1,)
    np.testing.assert_array_equal(rows.q, np.float32([[0.2, 0.3]]))


def test_uniform_times():
    np.testing.assert_allclose(uniform_times(0.3, 0.1), [0.0, 0.1, 0.2, 0.3])
    np.testing.assert_allclose(uniform_times(0.25, 0.1), [0.0, 0.1, 0.2, 0.25])
    with pytest.raises(CaliperError):
        uniform_times(1.0, 0.0)


def test_retime_waypoints_rests_at_each_waypoint():
    rng = np.random.default_rng(5)
    lim = _limits(rng)
    wp = rng.uniform(-2, 2, (6, NDOF))
    wp[3] = wp[2]  # a repeated waypoint gives a zero-length leg
    tr = _retime(jnp.asarray(wp), lim)
    legs = [float(_move(wp[i], wp[i + 1], lim).duration) for i in range(5)]
    # float32: the legs timed alone agree to rounding (measured 0.6 eps)
    np.testing.assert_allclose(np.asarray(tr.seg_duration), legs, rtol=16 * EPS32)
    assert float(tr.duration) == pytest.approx(sum(legs), rel=16 * EPS32)
    assert legs[2] == 0.0
    bounds = np.concatenate([[0.0], np.cumsum(legs)])
    s = _sample(tr, jnp.asarray(bounds, jnp.float32))
    # at rest at each waypoint, to the float32 rounding of the sample time (eps32 * t) times the
    # largest speed and acceleration the profile passes
    dt = EPS32 * bounds[-1]
    np.testing.assert_allclose(s.q, wp, atol=16 * EPS32 * np.abs(wp).max())
    np.testing.assert_allclose(s.qd, 0.0, atol=16 * dt * lim.amax.max())
    np.testing.assert_allclose(s.qdd, 0.0, atol=16 * dt * lim.jmax.max())
    rows = _grid5001(tr)
    assert np.all(np.abs(rows.qd) <= lim.vmax * (1 + 16 * EPS32))
    assert np.all(np.abs(rows.qdd) <= lim.amax * (1 + 16 * EPS32))
    # the last leg ends at q_start + (q_end - q_start): one float32 rounding off the waypoint
    np.testing.assert_allclose(rows.q[-1], wp[-1], rtol=0, atol=EPS32 * np.abs(wp).max())
    # position is continuous across leg boundaries (a step of 4 ulps of the time either side)
    eps = 4 * EPS32 * bounds[-1]
    left = _sample(tr, jnp.asarray(bounds[1:-1] - eps, jnp.float32)).q
    right = _sample(tr, jnp.asarray(bounds[1:-1] + eps, jnp.float32)).q
    np.testing.assert_allclose(left, right, atol=16 * EPS32 * np.abs(wp).max() + 2 * eps * lim.vmax.max())


def test_retime_waypoints_rejects_bad_shapes():
    lim = MotionLimits.from_arrays([-1], [1])
    with pytest.raises(CaliperError, match="waypoints"):
        retime_waypoints(jnp.zeros((1, 1)), lim)
    with pytest.raises(CaliperError, match="waypoints"):
        retime_waypoints(jnp.zeros((3,)), lim)
