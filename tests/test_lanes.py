"""The lane kernels behind ``jax.vmap`` of ``dynamics.rnea``, ``dynamics.crba`` and
``kinematics.forward_kinematics``: same results as the reference implementation, the right
fallbacks, derivatives through the reference.

float32 (the user's precision) throughout; the kernels against the reference also in float64 on
the panda (mimic fingers, the largest robot here), on the other robots under ``-m slow``. Lane and
reference agree to a few eps of the dtype (measured <= 4.4 eps of the largest entry for RNEA, CRBA
and FK in both dtypes), so the gates are 16 eps of that scale."""
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
F64_DEFAULT = "panda" if "panda" in NAMES else "collide_arm"


def eps(dtype):
    return float(jnp.finfo(dtype).eps)


def _robot_dtypes():
    """(name, dtype) cases: float32 on every robot; float64 (x64) on F64_DEFAULT, the rest slow."""
    out = []
    for name in NAMES:
        out.append(pytest.param(name, jnp.float32, id=f"{name}-float32"))
        marks = [pytest.mark.x64] + ([] if name == F64_DEFAULT else [pytest.mark.slow])
        out.append(pytest.param(name, jnp.float64, id=f"{name}-float64", marks=marks))
    return out


F32 = jnp.float32
X64 = pytest.mark.x64


def _reference(model, qs, vs, accs, gravity=None):
    one = lambda q, v, a: dynamics._rnea_reference(model, q, v, a, None, gravity)  # noqa: E731
    return np.asarray(jax.jit(jax.vmap(one))(qs, vs, accs))


def _draws(model, n, seed=0):
    kq, kv, ka = jax.random.split(jax.random.PRNGKey(seed), 3)
    qs = jax.vmap(lambda k: configuration.random_configuration(model, k))(jax.random.split(kq, n))
    shape = (n, model.nv)
    return qs, jax.random.normal(kv, shape, model.dtype), jax.random.normal(ka, shape, model.dtype)


@pytest.mark.parametrize("name, dtype", _robot_dtypes())
def test_vmapped_rnea_takes_the_lane_path_and_matches_the_reference(name, dtype):
    model = load(name, dtype=dtype)
    assert lanes.supports(model)
    qs, vs, accs = _draws(model, BATCH)
    fast = np.asarray(jax.jit(jax.vmap(dynamics.rnea, in_axes=(None, 0, 0, 0)))(model, qs, vs, accs))
    ref = _reference(model, qs, vs, accs)
    assert fast.dtype == dtype
    np.testing.assert_allclose(fast, ref, rtol=0, atol=16 * eps(dtype) * np.abs(ref).max())  # was 2e-5
    lowered = jax.jit(jax.vmap(dynamics.rnea, in_axes=(None, 0, 0, 0))).lower(model, qs, vs, accs)
    assert "divide" in lowered.as_text()  # the lane kernel's fusion boundaries are in the program


def test_blocks_and_padding():
    model = load("gripper_arm", dtype=F32)
    qs, vs, accs = _draws(model, 50, seed=3)
    kernel = lambda *y: lanes.rnea_lanes(model, *y)  # noqa: E731
    run = jax.jit(lambda *x: lanes.run_in_blocks(kernel, x, (True, True, True, False), block=16))
    out = run(qs, vs, accs, model.gravity)
    assert out.shape == (50, model.nv)
    ref = _reference(model, qs, vs, accs)
    np.testing.assert_allclose(out, ref, rtol=0, atol=16 * eps(F32) * np.abs(ref).max())


def test_partly_batched_arguments_and_gravity():
    model = load("collide_arm", dtype=F32)
    qs, vs, _ = _draws(model, BATCH, seed=4)
    a = jnp.zeros(model.nv)
    g = jnp.array([1.0, -2.0, -9.0])
    fast = jax.jit(jax.vmap(lambda q, v: dynamics.rnea(model, q, v, a, gravity=g)))(qs, vs)
    ref = _reference(model, qs, vs, jnp.broadcast_to(a, vs.shape), gravity=g)
    np.testing.assert_allclose(fast, ref, rtol=0, atol=16 * eps(F32) * np.abs(ref).max())


def test_batched_model_falls_back_to_the_reference():
    model = load("pendulum2", dtype=F32)
    q = jnp.array([0.3, -0.4], F32)
    scales = jnp.linspace(0.5, 2.0, BATCH, dtype=F32)
    batched = model.replace(body_mass=scales[:, None] * model.body_mass[None])
    axes = model_in_axes(model, batched=("body_mass",))
    g = jax.jit(jax.vmap(dynamics.gravity_torques, in_axes=(axes, None)))(batched, q)
    base = dynamics.gravity_torques(model, q)
    want = np.asarray(scales, np.float64)[:, None] * np.asarray(base, np.float64)[None]
    np.testing.assert_allclose(g, want, rtol=0, atol=16 * eps(F32) * np.abs(want).max())


def test_unsupported_joints_and_external_forces_use_the_reference():
    model = load("pendulum2", dtype=F32)
    qs, vs, accs = _draws(model, BATCH, seed=5)
    f_ext = jnp.ones((model.nbody, 6))
    out = jax.jit(jax.vmap(lambda q, v, a: dynamics.rnea(model, q, v, a, f_ext=f_ext)))(qs, vs, accs)
    one = jax.jit(lambda q, v, a: dynamics.rnea(model, q, v, a, f_ext=f_ext))
    np.testing.assert_array_equal(out[7], one(qs[7], vs[7], accs[7]))   # the same reference code
    if robots.example_robot_data_dir() is not None:
        solo = load("solo12", dtype=F32, floating=True)
        assert not lanes.supports(solo)


def test_derivatives_through_the_vmapped_rnea():
    model = load("collide_arm", dtype=F32)
    qs, vs, accs = _draws(model, BATCH, seed=6)

    def loss(rnea, qs):
        return jnp.sum(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(model, qs, vs, accs) ** 2)

    reference = lambda m, q, v, a: dynamics._rnea_reference(m, q, v, a)  # noqa: E731
    g_fast = jax.jit(jax.grad(lambda qs: loss(dynamics.rnea, qs)))(qs)
    g_ref = jax.jit(jax.grad(lambda qs: loss(reference, qs)))(qs)
    np.testing.assert_array_equal(g_fast, g_ref)          # custom_jvp: the reference's derivative
    batched = jax.vmap(dynamics.rnea, in_axes=(None, 0, 0, 0))
    J = jax.jacfwd(lambda q: batched(model, q, vs[:4], accs[:4]))(qs[:4])
    assert J.shape == (4, model.nv, 4, model.nq) and np.isfinite(J).all()


@pytest.mark.parametrize("dtype, atol", [pytest.param(jnp.float64, 2.3e-16, marks=X64),
                                         (jnp.float32, 1.2e-7)])
def test_sincos_matches_numpy(dtype, atol):
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-1e4, 1e4, 20000), np.linspace(-7, 7, 20001),
                        np.arange(-8, 9) * np.pi / 4])
    s, c = jax.jit(lanes.sincos)(jnp.asarray(x, dtype))
    x64 = np.asarray(jnp.asarray(x, dtype), np.float64)       # the angle as the dtype holds it
    np.testing.assert_allclose(np.asarray(s, np.float64), np.sin(x64), rtol=0, atol=atol * 4)
    np.testing.assert_allclose(np.asarray(c, np.float64), np.cos(x64), rtol=0, atol=atol * 4)


@pytest.mark.parametrize("name, dtype", _robot_dtypes())
def test_vmapped_fk_takes_the_lane_path_and_matches_the_reference(name, dtype):
    model = load(name, dtype=dtype)
    qs, _, _ = _draws(model, 150, seed=8)              # 150: blocks of 128 lanes plus padding
    fk = jax.jit(jax.vmap(kinematics.forward_kinematics, in_axes=(None, 0)))
    ref = jax.jit(jax.vmap(kinematics._forward_kinematics_reference, in_axes=(None, 0)))
    assert "divide" in fk.lower(model, qs).as_text()
    out = np.asarray(fk(model, qs))
    assert out.shape == (150, model.nframe, 4, 4)
    want = np.asarray(ref(model, qs))
    np.testing.assert_allclose(out, want, rtol=0, atol=16 * eps(dtype) * np.abs(want).max())  # was 2e-6
    np.testing.assert_array_equal(out[:, :, 3], np.broadcast_to([0, 0, 0, 1], out[:, :, 3].shape))


def test_fk_derivatives_and_frames_on_the_world():
    model = load("pendulum2", dtype=F32)
    assert -1 in model.frame_body                      # "base" sits on the world: the identity row
    qs, _, _ = _draws(model, BATCH, seed=9)
    loss = lambda fk, qs: jnp.sum(jax.vmap(fk, in_axes=(None, 0))(model, qs)[:, -1, :3, 3] ** 2)  # noqa: E731
    g_fast = jax.jit(jax.grad(lambda qs: loss(kinematics.forward_kinematics, qs)))(qs)
    g_ref = jax.jit(jax.grad(lambda qs: loss(kinematics._forward_kinematics_reference, qs)))(qs)
    np.testing.assert_array_equal(g_fast, g_ref)          # custom_jvp: the reference's derivative


@pytest.mark.parametrize("name, dtype", _robot_dtypes())
def test_vmapped_crba_takes_the_lane_path_and_matches_the_reference(name, dtype):
    model = load(name, dtype=dtype)                    # panda: mimic fingers, the reduced M
    qs, _, _ = _draws(model, 150, seed=10)             # blocks of 128 lanes plus padding
    crba = jax.jit(jax.vmap(dynamics.crba, in_axes=(None, 0)))
    ref = np.asarray(jax.jit(jax.vmap(dynamics._crba_reference, in_axes=(None, 0)))(model, qs))
    assert "divide" in crba.lower(model, qs).as_text()
    out = np.asarray(crba(model, qs))
    assert out.shape == (150, model.nv, model.nv)
    np.testing.assert_allclose(out, ref, rtol=0, atol=16 * eps(dtype) * np.abs(ref).max())  # was 2e-6
    np.testing.assert_array_equal(out, np.swapaxes(out, 1, 2))


def test_crba_lane_kernel_without_mimic_and_its_derivatives():
    model = load("collide_arm", dtype=F32).replace(dof_armature=jnp.array([0.1, 0.2, 0.3], F32))
    qs, _, _ = _draws(model, BATCH, seed=11)
    fast = jax.jit(jax.vmap(dynamics.crba, in_axes=(None, 0)))(model, qs)
    ref = jax.jit(jax.vmap(dynamics._crba_reference, in_axes=(None, 0)))(model, qs)
    np.testing.assert_allclose(fast, ref, rtol=0, atol=16 * eps(F32) * np.abs(ref).max())
    loss = lambda crba, qs: jnp.sum(jax.vmap(crba, in_axes=(None, 0))(model, qs) ** 2)  # noqa: E731
    g_fast = jax.jit(jax.grad(lambda qs: loss(dynamics.crba, qs)))(qs)
    g_ref = jax.jit(jax.grad(lambda qs: loss(dynamics._crba_reference, qs)))(qs)
    np.testing.assert_array_equal(g_fast, g_ref)          # custom_jvp: the reference's derivative


def expected_shared(M, b):
    return np.linalg.solve(np.asarray(M, np.float64), np.asarray(b, np.float64).T).T


@pytest.mark.slow   # ~18 s per precision; forward dynamics (default run) goes through the same solve
@pytest.mark.parametrize("dtype, atol", [pytest.param(jnp.float64, 1e-12, marks=X64), (jnp.float32, 2e-5)])
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
    model = load("gripper_arm", dtype=F32)
    qs, vs, taus = _draws(model, BATCH, seed=13)
    fd = jax.jit(jax.vmap(dynamics.forward_dynamics_cholesky, in_axes=(None, 0, 0, 0)))(model, qs, vs, taus)
    ref = np.asarray(jax.jit(jax.vmap(dynamics.aba, in_axes=(None, 0, 0, 0)))(model, qs, vs, taus))
    # two float32 solves of M qdd = tau - b: each is good to cond(M) eps relative
    M = np.asarray(jax.jit(jax.vmap(dynamics.crba, in_axes=(None, 0)))(model, qs), np.float64)
    cond = np.linalg.cond(M).max()                           # ~1e2 on the gripper arm
    np.testing.assert_allclose(fd, ref, rtol=0, atol=cond * eps(F32) * np.abs(ref).max())
