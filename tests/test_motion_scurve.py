"""The 7-segment S-curve: against Ruckig, limits, endpoints, degenerate cases, fixed duration, gradients.

The Ruckig comparisons and the finite-difference gradients run in float64 (x64); the rest in
float32, the user's precision, with gates of a few eps32 of the scale."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import ruckig

from caliper_jax.motion import scurve_fixed_time, scurve_min_time, scurve_sample

EPS32 = float(np.finfo(np.float32).eps)

# Jitted once per module (one compile per dtype/shape).
_plan = jax.jit(scurve_min_time)
_plan_fixed = jax.jit(scurve_fixed_time)
_sample = jax.jit(scurve_sample)


def _sample_dense(prof, n):
    """Sample every problem of a batch on n points spanning its own duration: (batch, n)."""
    frac = jnp.linspace(0.0, 1.0, n)
    t = prof.duration[:, None] * frac[None, :]
    expand = jax.tree_util.tree_map(lambda x: x[:, None], prof)
    return _sample(expand, t)


def random_problems(rng, n):
    """Distances and limits spread over orders of magnitude so every profile branch occurs."""
    d = rng.uniform(-1.0, 1.0, n) * 10.0 ** rng.uniform(-4, 1, n)
    v = 10.0 ** rng.uniform(-1, 1, n)
    a = 10.0 ** rng.uniform(-1, 1.5, n)
    j = 10.0 ** rng.uniform(-1, 2.5, n)
    return d, v, a, j


def ruckig_duration_1dof(d, v, a, j):
    inp = ruckig.InputParameter(1)
    inp.current_position, inp.target_position = [0.0], [float(d)]
    inp.max_velocity, inp.max_acceleration, inp.max_jerk = [float(v)], [float(a)], [float(j)]
    traj = ruckig.Trajectory(1)
    result = ruckig.Ruckig(1).calculate(inp, traj)
    assert result in (ruckig.Result.Working, ruckig.Result.Finished)
    return traj.duration


@pytest.mark.x64
def test_min_time_matches_ruckig_and_respects_limits():
    rng = np.random.default_rng(1234)
    d, v, a, j = random_problems(rng, 400)
    prof = _plan(jnp.asarray(d), v, a, j)
    ours = np.asarray(prof.duration)
    ref = np.array([ruckig_duration_1dof(*args) for args in zip(d, v, a, j, strict=True)])
    rel = np.abs(ours - ref) / ref
    assert rel.max() < 5e-3  # the bound; in practice the two agree to rounding:
    assert rel.max() < 1e-9
    # every branch was exercised
    cruise = np.asarray(prof.t_cruise) > 0
    const_acc = np.asarray(prof.t_acc) > 0
    assert cruise.sum() > 20 and (~cruise).sum() > 20
    assert (const_acc & ~cruise).sum() > 5 and (~const_acc & ~cruise).sum() > 5
    assert (const_acc & cruise).sum() > 5 and (~const_acc & cruise).sum() > 5
    st = _sample_dense(prof, 4001)
    assert np.all(np.abs(st.v) <= v[:, None] * (1 + 1e-12) + 1e-9)
    assert np.all(np.abs(st.a) <= a[:, None] * (1 + 1e-12) + 1e-9)
    assert np.all(np.abs(st.j) <= j[:, None] * (1 + 1e-12) + 1e-9)
    np.testing.assert_array_equal(st.p[:, -1], d)  # endpoint exact
    np.testing.assert_array_equal(st.p[:, 0], 0.0)
    np.testing.assert_array_equal(st.v[:, [0, -1]], 0.0)
    np.testing.assert_array_equal(st.a[:, [0, -1]], 0.0)
    # position is monotone toward the goal
    dp = np.diff(np.asarray(st.p), axis=1) * np.sign(d)[:, None]
    assert np.all(dp >= -1e-12)


def test_jerk_pattern_and_phase_lengths():
    prof = _plan(jnp.asarray(3.0), 1.0, 2.0, 10.0)  # cruise and constant-acceleration phases
    tj, ta, tv = float(prof.t_jerk), float(prof.t_acc), float(prof.t_cruise)
    assert tj == pytest.approx(0.2) and ta == pytest.approx(0.3) and tv > 0
    edges = np.cumsum([0, tj, ta, tj, tv, tj, ta, tj])
    mids = 0.5 * (edges[1:] + edges[:-1])
    st = _sample(prof, jnp.asarray(mids))
    np.testing.assert_allclose(st.j, [10, 0, -10, 0, -10, 0, 10], atol=1e-12)
    np.testing.assert_allclose(float(prof.duration), 4 * tj + 2 * ta + tv)
    assert float(prof.peak_velocity) == pytest.approx(1.0)
    assert float(prof.peak_acceleration) == pytest.approx(2.0)


def test_degenerate_cases():
    # zero distance: zero duration, rest everywhere
    prof = _plan(jnp.asarray(0.0), 1.0, 2.0, 10.0)
    assert float(prof.duration) == 0.0
    st = _sample(prof, jnp.array([-1.0, 0.0, 1.0]))
    for field in st:
        np.testing.assert_array_equal(field, 0.0)
    # negative distance mirrors the positive one
    pos, neg = _plan(jnp.asarray(0.7), 1.0, 2.0, 10.0), _plan(jnp.asarray(-0.7), 1.0, 2.0, 10.0)
    assert float(pos.duration) == float(neg.duration)
    t = jnp.linspace(0, float(pos.duration), 50)
    for a_, b_ in zip(_sample(pos, t), _sample(neg, t), strict=True):
        np.testing.assert_allclose(a_, -b_, atol=1e-15)
    # short move: no cruise, no constant acceleration; d = 2 j tj^3
    short = _plan(jnp.asarray(1e-3), 1.0, 2.0, 10.0)
    assert float(short.t_cruise) == 0.0 and float(short.t_acc) == 0.0
    assert float(short.t_jerk) == pytest.approx((1e-3 / 20.0) ** (1 / 3))
    # medium move: constant acceleration, no cruise
    med = _plan(jnp.asarray(0.5), 1.0, 2.0, 10.0)
    assert float(med.t_cruise) == 0.0 and float(med.t_acc) > 0.0
    assert float(med.peak_acceleration) == pytest.approx(2.0)
    # velocity-limited before acceleration saturates (v j < a^2): triangular acceleration + cruise
    tri = _plan(jnp.asarray(5.0), 0.1, 2.0, 10.0)
    assert float(tri.t_acc) == 0.0 and float(tri.t_cruise) > 0.0
    assert float(tri.peak_velocity) == pytest.approx(0.1)
    # before the start and after the end: rest at the endpoints
    st = _sample(med, jnp.array([-5.0, 100.0]))
    np.testing.assert_array_equal(st.p, [0.0, 0.5])
    np.testing.assert_array_equal(st.v, 0.0)
    np.testing.assert_array_equal(st.j, 0.0)


def test_fixed_duration_hits_duration_and_respects_limits():
    rng = np.random.default_rng(7)
    d, v, a, j = random_problems(rng, 300)
    tmin = np.asarray(_plan(jnp.asarray(d), v, a, j).duration)
    target = tmin * rng.uniform(1.0, 20.0, d.shape)
    target[:10] = tmin[:10]  # exactly the minimum
    prof = _plan_fixed(jnp.asarray(d, jnp.float32), target, v, a, j)
    # float32: the target as float32 holds it (measured 0.96 eps)
    np.testing.assert_allclose(prof.duration, target, rtol=4 * EPS32)
    st = _sample_dense(prof, 2001)
    assert np.all(np.abs(st.v) <= v[:, None] * (1 + 16 * EPS32))
    assert np.all(np.abs(st.a) <= a[:, None] * (1 + 16 * EPS32))
    assert np.all(np.abs(st.j) <= j[:, None] * (1 + 16 * EPS32))
    np.testing.assert_array_equal(st.p[:, -1], np.float32(d))         # endpoint exact
    # continuity across the midpoint (the half computed forward meets the half mirrored back)
    total = prof.duration
    mid = jnp.stack([total * 0.5 * (1 - 4 * EPS32), total * 0.5 * (1 + 4 * EPS32)], axis=1)
    both = _sample(jax.tree_util.tree_map(lambda x: x[:, None], prof), mid)
    assert np.all(np.abs(both.p[:, 0] - both.p[:, 1]) <= 16 * EPS32 * np.maximum(np.abs(d), 1))
    # too short a duration is raised to the minimum
    short = _plan_fixed(jnp.asarray(d, jnp.float32), tmin * 0.5, v, a, j)
    np.testing.assert_allclose(short.duration, tmin, rtol=4 * EPS32)


def test_fixed_duration_zero_distance():
    prof = _plan_fixed(jnp.asarray(0.0), 2.0, 1.0, 1.0, 1.0)
    assert float(prof.duration) == 2.0
    st = _sample(prof, jnp.linspace(0, 2, 11))
    np.testing.assert_array_equal(st.p, 0.0)


def _time_derivative(field):
    return jax.jit(jax.vmap(jax.grad(lambda t, prof: getattr(scurve_sample(prof, t), field)),
                            in_axes=(0, None)))


_dp_dt, _dv_dt = _time_derivative("p"), _time_derivative("v")


def test_sampled_derivatives_are_consistent():
    profiles = (_plan(jnp.asarray(2.0), 1.0, 2.0, 10.0), _plan_fixed(jnp.asarray(-0.3), 3.0, 1.0, 2.0, 10.0))
    for prof in profiles:
        t = jnp.linspace(0.0, float(prof.duration), 97)[1:-1]
        st = _sample(prof, t)
        # autodiff of the float32 position vs the closed-form velocity: measured 1.5e-8 (0.1 eps of
        # the largest value)
        np.testing.assert_allclose(_dp_dt(t, prof), st.v, atol=16 * EPS32 * np.abs(st.v).max())
        np.testing.assert_allclose(_dv_dt(t, prof), st.a, atol=16 * EPS32 * np.abs(st.a).max())


# a tuple, not a NumPy array: JAX replays a NumPy constant first traced in float64 as float64 in a
# later float32 trace of the same functions (the x64 and float32 tests below share _jac)
_TS = (0.1, 0.37, 0.9, 1.7, 2.9)


def _fixed_p(d):
    """Prescribed duration: every sample is smooth in d."""
    return scurve_sample(scurve_fixed_time(d, 6.0, 1.0, 2.0, 10.0), jnp.asarray(_TS)).p


def _fastest_p(d):
    """Time-optimal: the duration itself moves with d."""
    prof = scurve_min_time(d, 1.0, 2.0, 10.0)
    return jnp.stack([scurve_sample(prof, 0.5 * prof.duration).p, scurve_sample(prof, 0.3).p, prof.duration])


def _both(d):
    return jnp.concatenate([_fixed_p(d), _fastest_p(d)])


_jac = jax.jit(jax.vmap(jax.jacrev(_both)))
_values = jax.jit(jax.vmap(_both))


@pytest.mark.x64           # central differences with h = 1e-6 need float64
def test_gradient_wrt_distance_matches_finite_differences():
    dist = jnp.array([0.02, 0.3, 3.0, -1.2, 0.9])  # covers the three profile branches and a negative move
    jac = np.asarray(_jac(dist))
    assert np.all(np.isfinite(jac))
    h = 1e-6
    fd = (np.asarray(_values(dist + h)) - np.asarray(_values(dist - h))) / (2 * h)
    np.testing.assert_allclose(jac, fd, rtol=1e-6, atol=1e-8)


def test_gradient_finite_at_zero_distance():
    assert np.all(np.isfinite(np.asarray(_jac(jnp.zeros((5,))))))


def test_float32_and_vmap_over_dofs_and_problems():
    with jax.enable_x64(False):
        d = jnp.asarray(np.random.default_rng(3).uniform(-2, 2, (64, 7)), jnp.float32)
        plan = jax.jit(jax.vmap(jax.vmap(scurve_fixed_time, in_axes=(0, None, 0, 0, 0)),
                                in_axes=(0, 0, None, None, None)))
        v = jnp.linspace(0.5, 2.0, 7, dtype=jnp.float32)
        prof = plan(d, jnp.full((64,), 5.0, jnp.float32), v, 5 * v, 50 * v)
        assert prof.t_jerk.dtype == jnp.float32
        st = _sample(jax.tree_util.tree_map(lambda x: x[..., None], prof), jnp.linspace(0, 5.0, 200))
        assert np.all(np.isfinite(st.p))
        np.testing.assert_allclose(np.asarray(st.p[..., -1]), np.asarray(d), atol=1e-6)
        assert np.all(np.abs(np.asarray(st.v)) <= np.asarray(v)[None, :, None] * (1 + 1e-5))


def test_float32_long_stretch_keeps_precision():
    # A joint that moves a hair while another joint sets a long duration: the cubic branch must not
    # lose the peak velocity to cancellation in float32.
    cases = np.array([[1e-5, 5.0], [1e-6, 50.0], [1e-3, 1000.0], [2.0, 3.0]])
    frac = np.linspace(0.0, 1.0, 2001)
    ref = _sample_dense(_plan_fixed(jnp.asarray(cases[:, 0]), cases[:, 1], 1.0, 5.0, 50.0), 2001).p
    with jax.enable_x64(False):
        prof = jax.jit(scurve_fixed_time)(jnp.asarray(cases[:, 0], jnp.float32),
                                         jnp.asarray(cases[:, 1], jnp.float32), 1.0, 5.0, 50.0)
        t = jnp.asarray(cases[:, 1:] * frac[None, :], jnp.float32)
        p = np.asarray(_sample(jax.tree_util.tree_map(lambda x: x[:, None], prof), t).p, np.float64)
    assert np.all(np.diff(p, axis=1) >= 0.0)
    np.testing.assert_allclose(p[:, -1], cases[:, 0], rtol=1e-6)
    err = np.max(np.abs(p - np.asarray(ref)), axis=1) / cases[:, 0]
    assert err.max() < 1e-5
