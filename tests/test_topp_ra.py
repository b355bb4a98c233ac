"""TOPP-RA over a grid: splines, agreement with toppra, the generic constraint hook, infeasibility.

The comparisons with scipy and toppra run in float64 (x64); the rest in float32, the user's
precision, with constraint gates of a few eps32 (the LP's rows are satisfied to rounding)."""
import functools
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toppra
import toppra.algorithm as algo
import toppra.constraint as constraint
from scipy import interpolate

from caliper_jax.motion import (
    MotionLimits,
    PathConstraints,
    cubic_spline,
    joint_limit_constraints,
    joint_rows,
    spline_eval,
    stack_constraints,
    topp_ra,
    topp_ra_spline,
)

EPS32 = float(np.finfo(np.float32).eps)
NDOF, NWP, NGRID = 6, 5, 100
_solve = jax.jit(topp_ra)
_eval = jax.jit(spline_eval)
_spline = jax.jit(cubic_spline, static_argnames=("bc",))
_rows = jax.jit(jax.vmap(joint_rows))


def _topp_one(spline, vmax, amax):
    return topp_ra_spline(spline, MotionLimits(None, None, vmax, amax, None), NGRID)


_spline_batch = {bc: jax.jit(jax.vmap(functools.partial(cubic_spline, bc=bc)))
                 for bc in ("natural", "clamped")}
_topp_batch = jax.jit(jax.vmap(_topp_one))  # one compile serves both boundary conditions


def _toppra_duration(wp, vmax, amax, bc, grid):
    logging.getLogger("toppra").setLevel(logging.ERROR)
    path = toppra.SplineInterpolator(np.linspace(0, 1, wp.shape[0]), wp, bc_type=bc)
    vel = constraint.JointVelocityConstraint(np.stack([-vmax, vmax], 1))
    acc = constraint.JointAccelerationConstraint(
        np.stack([-amax, amax], 1), discretization_scheme=constraint.DiscretizationType.Collocation)
    inst = algo.TOPPRA([vel, acc], path, gridpoints=grid, solver_wrapper="seidel")
    sd = inst.compute_parameterization(0.0, 0.0)[1]
    assert sd is not None, "toppra found the path infeasible"
    return float(np.sum(2.0 * np.diff(grid) / (sd[1:] + sd[:-1])))


@pytest.mark.x64
@pytest.mark.parametrize("bc", ["natural", "clamped"])
def test_spline_matches_scipy(bc):
    rng = np.random.default_rng(0)
    wp = rng.uniform(-1, 1, (6, 3))
    knots = np.cumsum(np.r_[0.0, rng.uniform(0.5, 2.0, 5)])
    s = np.linspace(knots[0], knots[-1], 333)
    ours = _eval(_spline(wp, knots, bc=bc), s)
    ref = interpolate.CubicSpline(knots, wp, bc_type=bc)
    for k, got in enumerate((ours.q, ours.qs, ours.qss)):
        np.testing.assert_allclose(got, ref(s, k), atol=1e-10)
    slopes = _eval(_spline(wp, knots, bc="clamped", start_slope=np.array([1.0, 2, 3]), end_slope=0.5),
                   knots[[0, -1]]).qs
    np.testing.assert_allclose(slopes, [[1, 2, 3], [0.5, 0.5, 0.5]], atol=1e-12)


@pytest.mark.x64
@pytest.mark.parametrize("bc", ["natural", "clamped"])
def test_matches_toppra_on_random_splines(bc):
    rng = np.random.default_rng(2024 if bc == "natural" else 7)
    n = 8
    wp = rng.uniform(-1.5, 1.5, (n, NWP, NDOF))
    vmax = rng.uniform(0.5, 2.0, (n, NDOF))
    amax = rng.uniform(1.0, 5.0, (n, NDOF))
    splines = _spline_batch[bc](jnp.asarray(wp))
    res, path = _topp_batch(splines, jnp.asarray(vmax), jnp.asarray(amax))  # one call, n paths
    assert np.all(np.asarray(res.feasible))
    grid = np.linspace(0.0, 1.0, NGRID + 1)
    ours = np.asarray(res.duration)
    ref = np.array([_toppra_duration(wp[i], vmax[i], amax[i], bc, grid) for i in range(n)])
    rel = np.abs(ours - ref) / ref
    assert rel.max() < 1e-3        # measured 1.4e-6 (natural), 2.6e-4 (clamped); the gate was 0.02
    # constraints hold at every grid point (collocation)
    t, q, qd, qdd = (np.asarray(x) for x in _rows(path, res))
    assert np.all(np.isfinite(t)) and np.all(np.diff(t, axis=1) > 0)
    assert np.all(np.abs(qd) <= vmax[:, None] * (1 + 1e-9) + 1e-12)
    assert np.all(np.abs(qdd[:, :-1]) <= amax[:, None] * (1 + 1e-9) + 1e-12)
    np.testing.assert_array_equal(np.asarray(res.sd)[:, [0, -1]], 0.0)


def test_straight_line_approaches_bang_bang():
    # q(s) = s * dq on [0, 1]: the optimum is the bang-bang trapezoid of the corner-stop TOPP.
    dq = np.array([1.0, -0.5])
    vmax, amax = np.array([0.8, 1.0]), np.array([2.0, 3.0])
    grid = np.linspace(0.0, 1.0, 51)
    qs = np.tile(dq, (grid.shape[0], 1))
    cons = joint_limit_constraints(_eval(_spline(np.stack([0 * dq, dq]), bc="natural"), grid),
                                   MotionLimits(None, None, vmax, amax, None))
    np.testing.assert_allclose(cons.a[:, 2:], qs, atol=4 * EPS32)  # [velocity rows | acceleration rows]
    res = _solve(jnp.asarray(grid), stack_constraints(cons, _inactive_rows(grid.shape[0])), 0.0, 0.0)
    sd, sdd = 0.8, 2.0  # min over dofs of vmax/|dq| and amax/|dq|
    exact = 1.0 / sd + sd / sdd
    assert float(res.duration) == pytest.approx(exact, rel=1e-2)
    assert np.max(np.asarray(res.sd)) <= sd * (1 + 4 * EPS32)


def _simple_problem():
    grid = np.linspace(0.0, 1.0, 51)
    path = _eval(_spline(np.array([[0.0, 0.0], [0.5, 1.0], [1.0, 0.0]]), bc="clamped"), grid)
    lim = MotionLimits(None, None, np.array([1.0, 1.0]), np.array([3.0, 3.0]), None)
    return grid, path, joint_limit_constraints(path, lim)


def _inactive_rows(rows):
    """Two rows that always hold, so every solve in this file has the same row count (one compile)."""
    z = np.zeros((rows, 2))
    return PathConstraints(z, z, z, z - 1.0, z + 1.0)


def test_generic_constraint_hook_torque_like():
    grid, path, base = _simple_problem()
    # tau = M q' sdd + (M q'' + h(q')) sd^2 + g, a stand-in for rigid-body dynamics
    mass = np.array([[2.0, 0.3], [0.3, 0.5]])
    qs, qss = np.asarray(path.qs), np.asarray(path.qss)
    a = qs @ mass.T
    b = qss @ mass.T + 0.1 * qs * qs
    c = np.tile([0.5, -0.2], (grid.shape[0], 1))
    effort = np.array([2.5, 1.0])
    bound = np.tile(effort, (grid.shape[0], 1))
    torque = PathConstraints(a, b, c, -bound, bound)
    free = _solve(jnp.asarray(grid), stack_constraints(base, _inactive_rows(grid.shape[0])), 0.0, 0.0)
    res = _solve(jnp.asarray(grid), stack_constraints(base, torque), 0.0, 0.0)
    assert bool(res.feasible) and float(res.duration) > float(free.duration)
    x, u = np.asarray(res.sd) ** 2, np.asarray(res.sdd)
    tau = a[:-1] * u[:, None] + b[:-1] * x[:-1, None] + c[:-1]
    assert np.all(np.abs(tau) <= effort * (1 + 16 * EPS32))
    assert np.max(np.abs(tau) / effort) > 0.99  # the new rows are active somewhere


def test_infeasible_is_flagged_never_nan():
    grid, _, base = _simple_problem()
    rows = grid.shape[0]
    c = np.zeros((rows, 2))
    c[37, 0] = 1.0  # 0 * sdd + 0 * sd^2 + 1 <= 0 cannot hold at grid point 37
    bad = PathConstraints(np.zeros((rows, 2)), np.zeros((rows, 2)), c, np.full((rows, 2), -np.inf),
                          np.zeros((rows, 2)))
    res = _solve(jnp.asarray(grid), stack_constraints(base, bad), 0.0, 0.0)
    assert not bool(res.feasible) and int(res.fail_index) == 37
    for field in res:
        assert np.all(np.isfinite(np.asarray(field, dtype=float)))
    # a start speed outside the controllable set fails at index 0
    res = _solve(jnp.asarray(grid), stack_constraints(base, _inactive_rows(rows)), 100.0, 0.0)
    assert not bool(res.feasible) and int(res.fail_index) == 0
    assert np.all(np.isfinite(np.asarray(res.t)))


def test_nonzero_boundary_speeds():
    grid, path, base = _simple_problem()
    res = _solve(jnp.asarray(grid), stack_constraints(base, _inactive_rows(grid.shape[0])), 0.2, 0.3)
    assert bool(res.feasible)
    assert float(res.sd[0]) == pytest.approx(0.2) and float(res.sd[-1]) == pytest.approx(0.3)
    t, q, qd, qdd = _rows(*jax.tree_util.tree_map(lambda x: x[None], (path, res)))
    assert np.all(np.abs(qd) <= 1.0 + 16 * EPS32) and np.all(np.abs(qdd[:-1]) <= 3.0 * (1 + 16 * EPS32))
    assert np.all(np.diff(np.asarray(t)) > 0)


@pytest.mark.x64
def test_float32_agrees_with_float64():
    rng = np.random.default_rng(3)
    wp = rng.uniform(-1.5, 1.5, (4, NWP, NDOF))
    vmax = rng.uniform(0.5, 2.0, (4, NDOF))
    amax = rng.uniform(1.0, 5.0, (4, NDOF))
    res64, _ = _topp_batch(_spline_batch["natural"](jnp.asarray(wp)), jnp.asarray(vmax), jnp.asarray(amax))
    with jax.enable_x64(False):
        args = [jnp.asarray(x, jnp.float32) for x in (wp, vmax, amax)]
        res32, _ = jax.jit(jax.vmap(_topp_one))(jax.vmap(cubic_spline)(args[0]), args[1], args[2])
        assert res32.sd.dtype == jnp.float32
        assert np.all(np.asarray(res32.feasible))
    # the duration is a sum of NGRID float32 terms: NGRID eps bounds its rounding (measured 0.5 eps,
    # the gate was 1e-3)
    np.testing.assert_allclose(np.asarray(res32.duration), np.asarray(res64.duration), rtol=NGRID * EPS32)
