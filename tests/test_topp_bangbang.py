"""Bang-bang TOPP of a piecewise-linear path: corner stops, limits, closed-form leg times.

float32 (the user's precision): the closed forms are evaluated in float64 and the gates are a few
eps32 of the scale (times of a few s, positions of a few rad)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from caliper_jax.motion import MotionLimits, topp, topp_piecewise_linear

EPS32 = float(np.finfo(np.float32).eps)

_plan = jax.jit(topp_piecewise_linear)
_sample = jax.jit(lambda tr, t: tr.sample(t))
_grid = jax.jit(lambda tr: tr.grid(4001))


def _closed_form(dq, vmax, amax):
    """Rest-to-rest time of one leg from the textbook trapezoid/triangle formulas."""
    nz = np.abs(dq) > 0
    if not nz.any():
        return 0.0
    sd = np.min(vmax[nz] / np.abs(dq[nz]))
    sdd = np.min(amax[nz] / np.abs(dq[nz]))
    if sd * sd / sdd >= 1.0:  # triangle: 1 = sdd * (T/2)^2
        return 2.0 * np.sqrt(1.0 / sdd)
    return 1.0 / sd + sd / sdd


def test_alias():
    assert topp is topp_piecewise_linear


def test_leg_times_corner_stops_and_limits():
    rng = np.random.default_rng(11)
    lim = MotionLimits.from_arrays(-np.full(4, 5.0), np.full(4, 5.0), [1.0, 2.0, 0.5, 1.5],
                                   acceleration=[2.0, 1.0, 3.0, 0.5])
    wp = rng.uniform(-2, 2, (7, 4))
    wp[2, :] = wp[1, :] + np.array([0.01, 0.0, 0.0, 0.005])  # a short leg: triangle
    wp[5] = wp[4]  # a zero-length leg
    tr = _plan(jnp.asarray(wp, jnp.float32), lim)
    wp = np.asarray(np.float32(wp), np.float64)                 # the waypoints as float32 holds them
    legs = [_closed_form(wp[i + 1] - wp[i], lim.vmax, lim.amax) for i in range(6)]
    np.testing.assert_allclose(np.asarray(tr.seg_duration), legs, rtol=16 * EPS32)
    assert float(tr.duration) == pytest.approx(sum(legs), rel=16 * EPS32)
    # corner stops: zero velocity at every waypoint, and the path passes through each one
    stops = np.concatenate([[0.0], np.cumsum(legs)])
    s = _sample(tr, jnp.asarray(stops, jnp.float32))
    np.testing.assert_allclose(s.q, wp, atol=16 * EPS32 * np.abs(wp).max())
    np.testing.assert_allclose(s.qd, 0.0, atol=16 * EPS32 * lim.vmax.max())
    rows = _grid(tr)
    assert np.all(np.abs(rows.qd) <= lim.vmax * (1 + 16 * EPS32))
    assert np.all(np.abs(rows.qdd) <= lim.amax * (1 + 16 * EPS32))
    # every leg is time-optimal: some joint reaches its acceleration limit, and legs that cruise
    # do so at some joint's velocity limit
    for i, leg in enumerate(legs):
        if leg == 0.0:
            continue
        mid = _sample(tr, jnp.asarray(stops[i] + 0.25 * leg * np.array([0.01, 1.0, 2.0]), jnp.float32))
        assert np.max(np.abs(mid.qdd[0]) / lim.amax) == pytest.approx(1.0)
    # the points stay on the straight legs: q(t) - q_k is parallel to dq
    times = np.asarray(rows.times)
    k = np.clip(np.searchsorted(stops, times, side="right") - 1, 0, 5)
    dq = (wp[1:] - wp[:-1])[k]
    off = np.asarray(rows.q, np.float64) - wp[:-1][k]
    cross = off[:, :, None] * dq[:, None, :] - off[:, None, :] * dq[:, :, None]
    # float32 positions (|q| < 2) off the line by their rounding, times |dq| < 4
    assert np.abs(cross).max() < 16 * EPS32 * 2.0 * 4.0


def test_single_leg_trapezoid_numbers():
    lim = MotionLimits.from_arrays([-5], [5], [1.0], acceleration=[2.0])
    tr = _plan(jnp.array([[0.0], [3.0]]), lim)
    # sd_max = 1/3, sdd_max = 2/3: ramps 0.5 s each, cruise 2.5 s
    assert float(tr.duration) == pytest.approx(3.5)
    s = _sample(tr, jnp.array([0.25, 1.75, 3.25]))
    np.testing.assert_allclose(s.qd[:, 0], [0.5, 1.0, 0.5])
    np.testing.assert_allclose(s.qdd[:, 0], [2.0, 0.0, -2.0])


def test_sample_uniform_rows():
    lim = MotionLimits.from_arrays([-5, -5], [5, 5], [1.0, 1.0])
    tr = _plan(jnp.array([[0.0, 0.0], [1.0, 0.5], [0.0, 1.0]]), lim)
    rows = tr.sample_uniform(0.01)
    assert float(rows.times[-1]) == float(tr.duration)
    np.testing.assert_allclose(rows.q[-1], [0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(np.asarray(rows.qd)[[0, -1]], 0.0, atol=1e-12)


def test_rejects_bad_shapes():
    lim = MotionLimits.from_arrays([-1], [1])
    with pytest.raises(CaliperError, match="waypoints"):
        topp_piecewise_linear(jnp.zeros((1, 1)), lim)
