"""Deep trees take the level walk of ``caliper_jax.levels`` (one ``lax.scan`` over depth levels):
same results as the unrolled walk, derivatives through it, a program whose size does not grow
with the depth, and the loader's tables built without an nbody x depth Python loop."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax import api, configuration, dynamics, kinematics, lanes, levels
from caliper_jax.io.urdf import read_urdf_string
from caliper_jax.model import build_model, tables
from robots.chains import chain_urdf, tree_parents

CHAIN = dict(n=80, prismatic_every=7)
TREE = dict(n=40, branch_every=6, prismatic_every=11)     # side branches every 6 links, depth 28


def _model(spec, dtype=None, floating=False):
    return build_model(read_urdf_string(chain_urdf(**spec), floating=floating), dtype=dtype)


def _draw(model, seed=0):
    kq, kv, ka = jax.random.split(jax.random.PRNGKey(seed), 3)
    q = configuration.random_configuration(model, kq)
    return q, jax.random.normal(kv, (model.nv,), model.dtype), jax.random.normal(ka, (model.nv,), model.dtype)


def _everything(model, q, v, a):
    """FK, RNEA and CRBA (forward dynamics, Jacobians and energies reuse their walks)."""
    return {
        "fk": kinematics.forward_kinematics(model, q),
        "rnea": dynamics.rnea(model, q, v, a),
        "crba": dynamics.crba(model, q),
    }


def _compare(spec, dtype, rtol_of, floating=False):
    model = _model(spec, dtype, floating)
    assert levels.use_levels(model) and not lanes.supports(model)
    q, v, a = _draw(model)

    x64 = dtype == jnp.float64      # forward dynamics inverts RNEA (float32: M's condition number)

    @jax.jit
    def deep_walk(q, v, a):
        out = _everything(model, q, v, a)
        return out, (dynamics.forward_dynamics(model, q, v, out["rnea"]) if x64 else a)

    deep, a_back = deep_walk(q, v, a)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(levels, "MAX_UNROLLED_BODIES", 10**6)
        mp.setattr(levels, "MAX_UNROLLED_DEPTH", 10**6)
        assert not levels.use_levels(model)
        ref = _everything(model, q, v, a)     # op by op: unrolled, 80 links take ~25 s to compile
    np.testing.assert_allclose(a_back, a, rtol=0, atol=1e-8)
    for key, value in ref.items():
        value, got = np.asarray(value), np.asarray(deep[key])
        np.testing.assert_allclose(got, value, rtol=0, atol=rtol_of(key) * max(np.abs(value).max(), 1.0),
                                   err_msg=key)


def _f32_tolerance(spec):
    """float32: a few eps per level of the walk (rounding grows with the depth)."""
    eps = float(jnp.finfo(jnp.float32).eps)
    depth = levels.schedule(_model(spec)).nlevel
    return lambda key: 4 * eps * depth


def test_level_walk_matches_the_unrolled_walk_float32():
    _compare(CHAIN, jnp.float32, _f32_tolerance(CHAIN))


@pytest.mark.x64
@pytest.mark.slow   # ~17 s; the float32 twin stays in the default run
def test_level_walk_matches_the_unrolled_walk_float64():
    """A branched tree on a free-floating base (a 6-dof joint: per-body sums of several dofs)."""
    _compare(TREE, jnp.float64, lambda key: 1e-12, floating=True)


def test_schedule_of_a_tree():
    parents = [p - 1 for p in tree_parents(40, branch_every=5)]      # body indices, -1 = world
    model = _model(dict(n=40, branch_every=5))
    assert tuple(model.body_parent) == tuple(parents)
    sched = levels.schedule(model)
    support = tables(model)[0]                                # vectorised: one pass per level
    for i in range(model.nbody):
        np.testing.assert_array_equal(np.nonzero(support[i])[0], sorted(model.supports(i)))
    all_bodies = np.arange(model.nbody)
    np.testing.assert_array_equal(np.asarray(levels.ancestor_mask(sched, all_bodies, all_bodies)), support.T)
    assert sched.level_body.size >= model.nbody and sched.nlevel == sched.depth.max() + 1
    for body, parent in enumerate(parents):                   # each slot reads its parent's slot
        level, slot = divmod(int(sched.body_slot[body]), sched.width)
        assert sched.level_body[level, slot] == body
        if parent >= 0:
            assert sched.level_body[level - 1, sched.parent_slot[level, slot]] == parent
    x = jnp.asarray(np.random.default_rng(0).normal(size=(model.nbody, 2)))
    np.testing.assert_allclose(levels.accumulate_down(sched, x), support @ np.asarray(x), atol=1e-5)
    np.testing.assert_allclose(levels.accumulate_up(sched, x), support.T @ np.asarray(x), atol=1e-5)


@pytest.mark.x64
def test_gradients_of_the_level_walk_match_finite_differences():
    """jax.grad through FK and RNEA w.r.t. q and Model leaves (masses, joint offsets)."""
    model = _model(dict(n=24, branch_every=8, prismatic_every=5), jnp.float64)   # depth > 16
    assert levels.use_levels(model)
    q, v, a = _draw(model, seed=1)
    tip = model.frame_id("tool")

    @jax.jit
    def f(q_, m):
        return (kinematics.forward_kinematics(m, q_)[tip, :3].sum()
                + jnp.sum(jnp.sin(dynamics.rnea(m, q_, v, a))))

    g_q, g_m = jax.jit(jax.grad(f, argnums=(0, 1)))(q, model)
    rng = np.random.default_rng(5)
    dq, dm, dp = rng.normal(size=q.shape), rng.normal(size=model.nbody), rng.normal(size=(model.nbody, 3))
    h = 1e-6

    def central(step):
        return (f(*step(h)) - f(*step(-h))) / (2 * h)

    np.testing.assert_allclose(g_q @ dq, central(lambda e: (q + e * dq, model)), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g_m.body_mass @ dm, rtol=1e-6, atol=1e-8, desired=central(
        lambda e: (q, model.replace(body_mass=model.body_mass + e * dm))))
    np.testing.assert_allclose(np.sum(g_m.jnt_p * dp), rtol=1e-6, atol=1e-8, desired=central(
        lambda e: (q, model.replace(jnt_p=model.jnt_p + e * dp))))


def test_vmap_of_a_deep_tree_runs_the_level_walk():
    model = _model(CHAIN)
    qs = jax.vmap(lambda k: configuration.random_configuration(model, k))(
        jax.random.split(jax.random.PRNGKey(2), lanes.MIN_BATCH + 3))

    def both(q):
        return kinematics.forward_kinematics(model, q), dynamics.gravity_torques(model, q)

    T, tau = jax.jit(jax.vmap(both))(qs)
    one = jax.jit(both)
    for i in (0, lanes.MIN_BATCH + 2):
        T_i, tau_i = one(qs[i])
        np.testing.assert_allclose(T[i], T_i, rtol=0, atol=1e-5)
        np.testing.assert_allclose(tau[i], tau_i, rtol=0, atol=1e-6 * np.abs(tau_i).max())


def test_program_size_does_not_grow_with_the_depth():
    """The level walk is one scan: FK and RNEA of 100 and 1000 links trace to the same number of
    equations (the unrolled walk grew linearly, compile time superlinearly)."""
    def size(n, fn):
        model = _model(dict(n=n))
        q = jnp.zeros(model.nq, model.dtype)
        return len(jax.make_jaxpr(lambda q_: fn(model, q_))(q).eqns)

    fk = lambda m, q: kinematics.forward_kinematics(m, q)          # noqa: E731
    rnea = lambda m, q: dynamics.rnea(m, q, q, q)                  # noqa: E731
    assert size(100, fk) == size(1000, fk)
    assert size(100, rnea) == size(1000, rnea)


def test_thousand_links_load_and_run_fk():
    model = build_model(read_urdf_string(chain_urdf(1000)))
    assert model.nbody == 1000 and model.nframe == 2 * 1000 + 3     # links, joints, base, tool
    q = np.full(model.nq, 0.01)
    T = api.fk(model, q)
    assert T.shape == (model.nframe, 4, 4) and np.all(np.isfinite(T))
    # the chain bends a little per link: the tool is far out but not beyond the chain's length
    assert 0 < np.linalg.norm(T[model.frame_id("tool"), :3, 3]) < 1000 * 0.1
