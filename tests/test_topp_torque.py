"""Torque-limited TOPP-RA: rows from RNEA, RNEA torques of the result within the effort limits on a
dense check, agreement with toppra's JointTorqueConstraint, the NumPy face, infeasibility.

The toppra comparisons run in float64 (x64), the rest in float32 (the user's precision)."""
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toppra
import toppra.algorithm as algo
import toppra.constraint as constraint

from caliper_jax import api, dynamics
from caliper_jax.errors import CaliperError
from caliper_jax.loading import load
from caliper_jax.motion import (
    MotionLimits,
    PathConstraints,
    interpolate_constraints,
    topp_torque,
    torque_coefficients,
)

NGRID = 100
DENSE = 16
EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def pendulum(fixture_models):
    return fixture_models["pendulum2"]


def _solve(model, wp, eff):
    """topp_torque with the dense torque check; the same compile without torque limits (inf)."""
    out = topp_torque(model, wp, effort=eff, dense=DENSE)
    free = topp_torque(model, wp, effort=np.full(model.nv, np.inf), dense=DENSE)
    return MotionLimits.from_model(model), out, free.duration


def _toppra_duration(model, wp, lim, eff):
    logging.getLogger("toppra").setLevel(logging.ERROR)
    D = constraint.DiscretizationType
    grid = np.linspace(0.0, 1.0, NGRID + 1)
    path = toppra.SplineInterpolator(np.linspace(0, 1, wp.shape[0]), wp, bc_type="natural")
    vel = constraint.JointVelocityConstraint(np.stack([-lim.vmax, lim.vmax], 1))
    acc = constraint.JointAccelerationConstraint(np.stack([-lim.amax, lim.amax], 1),
                                                 discretization_scheme=D.Collocation)
    tq = constraint.JointTorqueConstraint(lambda q, qd, qdd: api.inverse_dynamics(model, q, qd, qdd),
                                          np.stack([-eff, eff], 1), np.zeros(model.nv),
                                          discretization_scheme=D.Interpolation)
    sd = algo.TOPPRA([vel, acc, tq], path, gridpoints=grid, solver_wrapper="seidel").compute_parameterization(
        0.0, 0.0)[1]
    assert sd is not None, "toppra found the path infeasible"
    return float(np.sum(2.0 * np.diff(grid) / (sd[1:] + sd[:-1])))


def test_torque_coefficients_reproduce_rnea(pendulum):
    rng = np.random.default_rng(3)
    q, qs, qss = (jnp.asarray(rng.normal(size=2), jnp.float32) for _ in range(3))

    @jax.jit
    def check(q, qs, qss, sd, sdd):
        a, b, c = torque_coefficients(pendulum, q, qs, qss)
        return a * sdd + b * sd * sd + c, dynamics.rnea(pendulum, q, qs * sd, qs * sdd + qss * sd * sd)

    for sd, sdd in ((0.0, 0.0), (1.3, -0.7), (2.0, 4.0)):
        mine, ref = (np.asarray(x, np.float64) for x in check(q, qs, qss, sd, sdd))
        # the same float32 terms summed in another order: a few eps of the largest
        np.testing.assert_allclose(mine, ref, atol=16 * EPS32 * max(1.0, np.abs(ref).max()))


@pytest.mark.x64
def test_torque_limited_pendulum_within_effort_and_matches_toppra(pendulum):
    pendulum = pendulum.astype(jnp.float64)
    wp = np.array([[0.0, 0.0], [1.0, -1.5], [2.0, 0.5], [0.5, 1.0]])
    eff = np.array([8.0, 3.0])
    lim, out, free = _solve(pendulum, wp, eff)
    assert out.feasible and out.fail_index == -1
    assert out.dense_tau.shape == (NGRID * DENSE + 1, 2)
    ratio = np.abs(out.dense_tau) / eff
    assert ratio.max() <= 1.0 + 1e-3                    # dense: 16 points per grid interval
    assert np.abs(out.tau / eff).max() <= 1.0 + 1e-9    # at the grid points (rows imposed there)
    assert ratio.max() > 0.999                          # the torque limit binds ...
    assert out.duration > 1.2 * free                    # ... and costs time
    # the last row's qdd reuses the previous interval's sdd (joint_rows), so it is not a row of the LP
    assert np.all(np.abs(out.qd) <= lim.vmax * (1 + 1e-9))
    assert np.all(np.abs(out.qdd[:-1]) <= lim.amax * (1 + 1e-9))
    np.testing.assert_allclose(out.q[[0, -1]], wp[[0, -1]], atol=1e-12)
    ref = _toppra_duration(pendulum, wp, lim, eff)
    assert abs(out.duration - ref) / ref < 1e-4


@pytest.mark.x64
def test_torque_limited_panda_dense_check_and_toppra():
    panda = load("panda", dtype=jnp.float64)
    rng = np.random.default_rng(0)
    lo, hi = np.asarray(panda.qpos_lower), np.asarray(panda.qpos_upper)
    wp = rng.uniform(lo + 0.2 * (hi - lo), hi - 0.2 * (hi - lo), (4, panda.nq))
    wp[:, 7] = 0.02
    eff = 1.5 * np.abs(api.gravity_torques(panda, wp)).max(axis=0) + 1.0
    lim, out, free = _solve(panda, wp, eff)
    assert out.feasible
    assert np.abs(out.dense_tau / eff).max() <= 1.0 + 1e-2 and np.abs(out.tau / eff).max() <= 1.0 + 1e-9
    assert out.duration > free
    ref = _toppra_duration(panda, wp, lim, eff)
    assert abs(out.duration - ref) / ref < 1e-3


def test_interpolate_constraints_adds_the_next_point_rows():
    grid = jnp.array([0.0, 0.5, 1.5])
    a = jnp.array([[1.0], [2.0], [3.0]])
    b = jnp.array([[10.0], [20.0], [30.0]])
    c = jnp.array([[0.1], [0.2], [0.3]])
    lo, hi = -jnp.ones((3, 1)), jnp.array([[1.0], [2.0], [3.0]])
    out = interpolate_constraints(grid, PathConstraints(a, b, c, lo, hi))
    assert out.a.shape == (3, 2)
    # interval 0 (ds = 0.5): a_1 + 2 ds b_1 = 2 + 20, b_1, c_1, bounds of point 1
    np.testing.assert_allclose(np.asarray(out.a[0]), [1.0, 22.0])
    np.testing.assert_allclose(np.asarray(out.b[1]), [20.0, 30.0])
    np.testing.assert_allclose(np.asarray(out.a[1]), [2.0, 3.0 + 2.0 * 30.0])
    np.testing.assert_allclose(np.asarray(out.upper[0]), [1.0, 2.0])


def test_topp_torque_infeasible_and_errors(pendulum):
    wp = np.array([[0.0, 0.0], [1.0, -1.5], [2.0, 0.5], [0.5, 1.0]])
    # effort below the static gravity torque: infeasible, reported without NaN
    bad = topp_torque(pendulum, np.array([[1.2, 0.0], [1.5, 0.2], [1.4, 0.1], [1.3, 0.0]]), effort=[1.0, 1.0],
                      dense=DENSE)
    assert not bad.feasible and bad.fail_index >= 0 and np.all(np.isfinite(bad.times))
    cases = (({"waypoints": wp[:1]}, "waypoints"), ({"waypoints": wp[:, :1]}, "waypoints"),
             ({"waypoints": wp, "effort": [0.0, 1.0]}, "effort"), ({"waypoints": wp, "n_grid": 1}, "n_grid"),
             ({"waypoints": wp, "dense": -1}, "dense"))
    for kwargs, needle in cases:
        with pytest.raises(CaliperError, match=needle):
            topp_torque(pendulum, **kwargs)
