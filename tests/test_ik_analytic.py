"""Analytic 6R IK on the UR arms of example-robot-data: every branch satisfies FK and the branch
set contains the configuration that produced the target.

float32, the user's precision: a valid branch reproduces its target to 1e3 eps32 (1.2e-4, the
solver's own floor on ``tol``; measured <= 80 eps). In float64 the same checks hold to 1e-9."""
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax import api as core_api
from caliper_jax.errors import CaliperError
from caliper_jax.ik import analytic, analytic_ik
from caliper_jax.ik.api import jit_model
from caliper_jax.loading import load

N = 200
EPS32 = float(np.finfo(np.float32).eps)
BRANCH_TOL = 1e3 * EPS32
# joint angles near a straight elbow or wrist come from arccos near +-1, which loses sqrt(eps) of
# the angle (measured 2.7e-4 rad = 0.8 sqrt(eps32); the float64 gate 1e-8 was the same in eps64)
ANGLE_TOL = 4 * float(np.sqrt(EPS32))


def random_qs(model, n, seed):
    """Uniform within the limits (+-pi where unbounded), drawn on the host."""
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    lo, hi = np.where(np.isfinite(lo), lo, -np.pi), np.where(np.isfinite(hi), hi, np.pi)
    return np.random.default_rng(seed).uniform(lo, hi, (n, model.nq))


def wrap(a):
    return (a + np.pi) % (2 * np.pi) - np.pi


@pytest.mark.parametrize("name", ["ur3", "ur5", "ur10"])
def test_every_branch_closes_and_contains_the_generator(name):
    model = load(name, dtype=jnp.float32)
    f = model.frame_id("tool0")
    qs = random_qs(model, N, 4)
    fk_model = jit_model(model)                       # UR3/5/10 share the FK compile too
    T = core_api.fk(fk_model, qs)[:, f]
    sol = analytic_ik(model, T, frame="tool0")
    assert sol.q.shape == (N, 8, 6) and sol.valid.shape == (N, 8)
    assert sol.valid.sum(axis=1).min() >= 2            # shoulder x elbow x wrist, minus limits
    # every valid branch reproduces the target through the core FK, independently recomputed
    T_b = core_api.fk(fk_model, sol.q)[..., f, :, :]
    pos = np.linalg.norm(T_b[..., :3, 3] - T[:, None, :3, 3], axis=-1)
    rot = np.abs(T_b[..., :3, :3] - T[:, None, :3, :3]).max(axis=(-2, -1))
    assert pos[sol.valid].max() < BRANCH_TOL and rot[sol.valid].max() < BRANCH_TOL
    assert sol.pos_residual[sol.valid].max() < BRANCH_TOL
    # the generating configuration is one of the branches (angles modulo 2 pi)
    dist = np.abs(wrap(sol.q - qs[:, None, :])).max(axis=-1)
    dist = np.where(sol.valid, dist, np.inf)
    assert dist.min(axis=1).max() < ANGLE_TOL
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    assert np.all(sol.q[sol.valid] >= lo) and np.all(sol.q[sol.valid] <= hi)
    # with the generator as reference, the matching branch equals it exactly (no 2 pi shift)
    near = analytic_ik(model, T, frame="tool0", reference_q=qs)
    exact = np.where(near.valid, np.abs(near.q - qs[:, None, :]).max(axis=-1), np.inf)
    assert exact.min(axis=1).max() < ANGLE_TOL


def test_fitted_geometry_is_the_ur5_dh_table():
    model = load("ur5", dtype=jnp.float32)
    geom = analytic.fit_ur(model, model.frame_id("tool0"))
    # the float32 model's lengths (< 1 m) fitted to their rounding (fit error measured 1.6 eps)
    np.testing.assert_allclose(np.abs(geom.a[1:3]), [0.425, 0.39225], atol=4 * EPS32)
    np.testing.assert_allclose(geom.d[3:], [0.10915, 0.09465, 0.0823], atol=4 * EPS32)
    assert geom.fit_error < 16 * EPS32


def test_unreachable_target_has_no_valid_branch():
    model = load("ur5")
    T = np.eye(4)
    T[:3, 3] = [3.0, 0.0, 0.5]
    sol = analytic_ik(model, T)
    assert not sol.valid.any()


@pytest.mark.parametrize("name,match", [("panda", "exactly 6 revolute"), ("kinova", "not a UR-type"),
                                        ("so101", "exactly 6 revolute")])
def test_other_geometries_are_refused_clearly(name, match):
    model = load(name)
    with pytest.raises(CaliperError, match=match):
        analytic_ik(model, np.eye(4))
