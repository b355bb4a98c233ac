"""The lane kernels behind ``jax.vmap`` of ``dynamics.rnea``, ``dynamics.crba`` and
``kinematics.forward_kinematics``: same results as the reference implementation, the right
fallbacks, derivatives through the reference."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import robots
from caliper_jax import configuration, dynamics, kinematics, lanes
from caliper_jax.loading import load
from caliper_jax.model import model_in_axes

NAMES = ["pendulum2", "gripper_arm", "collide_arm"]
if robots.example_robot_data_dir() is not None:
    NAMES += ["panda", "ur5"]
BATCH = 96  # >= lanes.MIN_BATCH: the lane path


def _reference(model, qs, vs, accs, gravity=None):
    one = lambda q, v, a: dynamics._rnea_reference(model, q, v, a, None, gravity)  # noqa: E731
    return np.asarray(jax.jit(jax.vmap(one))(qs, vs, accs))


def _draws(model, n, seed=0):
    kq, kv, ka = jax.random.split(jax.random.PRNGKey(seed), 3)
    qs = jax.vmap(lambda k: configuration.random_configuration(model, k))(jax.random.split(kq, n))
    shape = (n, model.nv)
    return qs, jax.random.normal(kv, shape, model.dtype), jax.random.normal(ka, shape, model.dtype)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype, rtol", [(jnp.float64, 1e-12), (jnp.float32, 2e-5)])
def test_vmapped_rnea_takes_the_lane_path_and_matches_the_reference(name, dtype, rtol):
    model = load(name, dtype=dtype)
    assert lanes.supports(model)
    qs, vs, accs = _draws(model, BATCH)
    fast = np.asarray(jax.jit(jax.vmap(dynamics.rnea, in_axes=(None, 0, 0, 0)))(model, qs, vs, accs))
    ref = _reference(model, qs, vs, accs)
    np.testing.assert_allclose(fast, ref, rtol=0, atol=rtol * np.abs(ref).max())
    lowered = jax.jit(jax.vmap(dynamics.rnea, in_axes=(None, 0, 0, 0))).lower(model, qs, vs, accs)
    assert "divide" in lowered.as_text()  # the lane kernel's fusion boundaries are in the program


def test_blocks_and_padding():
    model = load("gripper_arm", dtype=jnp.float64)
    qs, vs, accs = _draws(model, 50, seed=3)
    kernel = lambda *y: lanes.rnea_lanes(model, *y)  # noqa: E731
    run = jax.jit(lambda *x: lanes.run_in_blocks(kernel, x, (True, True, True, False), block=16))
    out = run(qs, vs, accs, model.gravity)
    assert out.shape == (50, model.nv)
    np.testing.assert_allclose(out, _reference(model, qs, vs, accs), rtol=1e-12, atol=1e-12)


def test_partly_batched_arguments_and_gravity():
    model = load("collide_arm", dtype=jnp.float64)
    qs, vs, _ = _draws(model, BATCH, seed=4)
    a = jnp.zeros(model.nv)
    g = jnp.array([1.0, -2.0, -9.0])
    fast = jax.jit(jax.vmap(lambda q, v: dynamics.rnea(model, q, v, a, gravity=g)))(qs, vs)
    ref = _reference(model, qs, vs, jnp.broadcast_to(a, vs.shape), gravity=g)
    np.testing.assert_allclose(fast, ref, rtol=1e-12, atol=1e-12)


def test_batched_model_falls_back_to_the_reference():
    model = load("pendulum2", dtype=jnp.float64)
    q = jnp.array([0.3, -0.4])
    scales = jnp.linspace(0.5, 2.0, BATCH)
    batched = model.replace(body_mass=scales[:, None] * model.body_mass[None])
    axes = model_in_axes(model, batched=("body_mass",))
    g = jax.jit(jax.vmap(dynamics.gravity_torques, in_axes=(axes, None)))(batched, q)
    base = dynamics.gravity_torques(model, q)
    np.testing.assert_allclose(g, scales[:, None] * base[None], rtol=1e-10, atol=1e-12)


def test_unsupported_joints_and_external_forces_use_the_reference():
    model = load("pendulum2", dtype=jnp.float64)
    qs, vs, accs = _draws(model, BATCH, seed=5)
    f_ext = jnp.ones((model.nbody, 6))
    out = jax.jit(jax.vmap(lambda q, v, a: dynamics.rnea(model, q, v, a, f_ext=f_ext)))(qs, vs, accs)
    one = jax.jit(lambda q, v, a: dynamics.rnea(model, q, v, a, f_ext=f_ext))
    np.testing.assert_allclose(out[7], one(qs[7], vs[7], accs[7]), rtol=1e-12, atol=1e-12)
    if robots.example_robot_data_dir() is not None:
        solo = load("solo12", dtype=jnp.float64, floating=True)
        assert not lanes.supports(solo)


def test_derivatives_through_the_vmapped_rnea():
    model = load("collide_arm", dtype=jnp.float64)
    qs, vs, accs = _draws(model, BATCH, seed=6)

    def loss(rnea, qs):
        return jnp.sum(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(model, qs, vs, accs) ** 2)

    reference = lambda m, q, v, a: dynamics._rnea_reference(m, q, v, a)  # noqa: E731
    g_fast = jax.jit(jax.grad(lambda qs: loss(dynamics.rnea, qs)))(qs)
    g_ref = jax.jit(jax.grad(lambda qs: loss(reference, qs)))(qs)
    np.testing.assert_allclose(g_fast, g_ref, rtol=1e-10, atol=1e-10)
    batched = jax.vmap(dynamics.rnea, in_axes=(None, 0, 0, 0))
    J = jax.jacfwd(lambda q: batched(model, q, vs[:4], accs[:4]))(qs[:4])
    assert J.shape == (4, model.nv, 4, model.nq) and np.isfinite(J).all()


@pytest.mark.parametrize("dtype, atol", [(jnp.float64, 2.3e-16), (jnp.float32, 1.2e-7)])
def test_sincos_matches_numpy(dtype, atol):
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-1e4, 1e4, 20000), np.linspace(-7, 7, 20001),
                        np.arange(-8, 9) * np.pi / 4])
    s, c = jax.jit(lanes.sincos)(jnp.asarray(x, dtype))
    x64 = np.asarray(jnp.asarray(x, dtype), np.float64)       # the angle as the dtype holds it
    np.testing.assert_allclose(np.asarray(s, np.float64), np.sin(x64), rtol=0, atol=atol * 4)
    np.testing.assert_allclose(np.asarray(c, np.float64), np.cos(x64), rtol=0, atol=atol * 4)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype, atol", [(jnp.float64, 1e-13), (jnp.float32, 2e-6)])
def test_vmapped_fk_takes_the_lane_path_and_matches_the_reference(name, dtype, atol):
    model = load(name, dtype=dtype)
    qs, _, _ = _draws(model, 150, seed=8)              # 150: blocks of 128 lanes plus padding
    fk = jax.jit(jax.vmap(kinematics.forward_kinematics, in_axes=(None, 0)))
    ref = jax.jit(jax.vmap(kinematics._forward_kinematics_reference, in_axes=(None, 0)))
    assert "divide" in fk.lower(model, qs).as_text()
    out = np.asarray(fk(model, qs))
    assert out.shape == (150, model.nframe, 4, 4)
    np.testing.assert_allclose(out, np.asarray(ref(model, qs)), rtol=0, atol=atol)
    np.testing.assert_array_equal(out[:, :, 3], np.broadcast_to([0, 0, 0, 1], out[:, :, 3].shape))


def test_fk_derivatives_and_frames_on_the_world():
    model = load("pendulum2", dtype=jnp.float64)
    assert -1 in model.frame_body                      # "base" sits on the world: the identity row
    qs, _, _ = _draws(model, BATCH, seed=9)
    loss = lambda fk, qs: jnp.sum(jax.vmap(fk, in_axes=(None, 0))(model, qs)[:, -1, :3, 3] ** 2)  # noqa: E731
    g_fast = jax.jit(jax.grad(lambda qs: loss(kinematics.forward_kinematics, qs)))(qs)
    g_ref = jax.jit(jax.grad(lambda qs: loss(kinematics._forward_kinematics_reference, qs)))(qs)
    np.testing.assert_allclose(g_fast, g_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype, rtol", [(jnp.float64, 1e-12), (jnp.float32, 2e-6)])
def test_vmapped_crba_takes_the_lane_path_and_matches_the_reference(name, dtype, rtol):
    model = load(name, dtype=dtype)                    # panda: mimic fingers, the reduced M
    qs, _, _ = _draws(model, 150, seed=10)             # blocks of 128 lanes plus padding
    crba = jax.jit(jax.vmap(dynamics.crba, in_axes=(None, 0)))
    ref = np.asarray(jax.jit(jax.vmap(dynamics._crba_reference, in_axes=(None, 0)))(model, qs))
    assert "divide" in crba.lower(model, qs).as_text()
    out = np.asarray(crba(model, qs))
    assert out.shape == (150, model.nv, model.nv)
    np.testing.assert_allclose(out, ref, rtol=0, atol=rtol * np.abs(ref).max())
    np.testing.assert_array_equal(out, np.swapaxes(out, 1, 2))


def test_crba_lane_kernel_without_mimic_and_its_derivatives():
    model = load("collide_arm", dtype=jnp.float64).replace(dof_armature=jnp.array([0.1, 0.2, 0.3]))
    qs, _, _ = _draws(model, BATCH, seed=11)
    fast = jax.jit(jax.vmap(dynamics.crba, in_axes=(None, 0)))(model, qs)
    ref = jax.jit(jax.vmap(dynamics._crba_reference, in_axes=(None, 0)))(model, qs)
    np.testing.assert_allclose(fast, ref, rtol=1e-12, atol=1e-12)
    loss = lambda crba, qs: jnp.sum(jax.vmap(crba, in_axes=(None, 0))(model, qs) ** 2)  # noqa: E731
    g_fast = jax.jit(jax.grad(lambda qs: loss(dynamics.crba, qs)))(qs)
    g_ref = jax.jit(jax.grad(lambda qs: loss(dynamics._crba_reference, qs)))(qs)
    np.testing.assert_allclose(g_fast, g_ref, rtol=1e-10, atol=1e-10)


def expected_shared(M, b):
    return np.linalg.solve(np.asarray(M, np.float64), np.asarray(b, np.float64).T).T


@pytest.mark.parametrize("dtype, atol", [(jnp.float64, 1e-12), (jnp.float32, 2e-5)])
def test_vmapped_solve_spd_takes_the_lane_path(dtype, atol):
    rng = np.random.default_rng(12)
    for n in (1, 2, 9):
        A = rng.normal(size=(150, n, n))
        M = jnp.asarray(A @ np.swapaxes(A, 1, 2) + n * np.eye(n), dtype)
        b = jnp.asarray(rng.normal(size=(150, n)), dtype)
        solve = jax.jit(jax.vmap(dynamics.solve_spd))
        assert "divide" in solve.lower(M, b).as_text() and "cholesky" not in solve.lower(M, b).as_text()
        expected = np.linalg.solve(np.asarray(M, np.float64), np.asarray(b, np.float64)[..., None])[..., 0]
        np.testing.assert_allclose(solve(M, b), expected, rtol=0, atol=atol)
        shared = jax.jit(jax.vmap(dynamics.solve_spd, in_axes=(None, 0)))(M[0], b)   # one M, many b
        np.testing.assert_allclose(shared, expected_shared(M[0], b), rtol=0, atol=atol)
    grad = jax.grad(lambda M, b: jnp.sum(jax.vmap(dynamics.solve_spd)(M, b) ** 2), argnums=(0, 1))
    gM, gb = jax.jit(grad)(M, b)
    assert np.isfinite(gM).all() and np.isfinite(gb).all()
    x = jax.vmap(dynamics.solve_spd)(M, b)                         # d|x|^2/db = 2 M^-1 x
    np.testing.assert_allclose(gb, 2 * jax.vmap(dynamics.solve_spd)(M, x), rtol=1e-4, atol=atol * 10)


def test_vmapped_forward_dynamics_matches_the_reference_solve():
    model = load("gripper_arm", dtype=jnp.float64)
    qs, vs, taus = _draws(model, BATCH, seed=13)
    fd = jax.jit(jax.vmap(dynamics.forward_dynamics_cholesky, in_axes=(None, 0, 0, 0)))(model, qs, vs, taus)
    ref = jax.jit(jax.vmap(dynamics.aba, in_axes=(None, 0, 0, 0)))(model, qs, vs, taus)
    np.testing.assert_allclose(fd, ref, rtol=1e-10, atol=1e-10)
