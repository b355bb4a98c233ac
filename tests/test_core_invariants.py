"""Physical invariants of the dynamics and the integrators, batching, and differentiability.

float32, the user's precision, with gates derived from eps32 and the scale of the quantity; the
finite-difference derivative checks run in float64 (x64): central differences with h = 1e-6 need it."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import robots
from caliper_jax import configuration, dynamics, integrators, kinematics
from caliper_jax.loading import load
from caliper_jax.model import model_in_axes, stack_models

NAMES = ["pendulum2", "gripper_arm", "collide_arm"]
if robots.example_robot_data_dir() is not None:
    NAMES += ["panda"]
EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module", params=NAMES)
def model(request):
    return load(request.param, dtype=jnp.float32)


def _draws(model, n, seed=0):
    kq, kv, ka = jax.random.split(jax.random.PRNGKey(seed), 3)
    qs = jax.vmap(lambda k: configuration.random_configuration(model, k))(jax.random.split(kq, n))
    return qs, jax.random.normal(kv, (n, model.nv)), jax.random.normal(ka, (n, model.nv))


def test_mass_matrix_symmetric_positive_definite(model):
    qs, _, _ = _draws(model, 16)
    Ms = np.asarray(jax.jit(jax.vmap(dynamics.crba, in_axes=(None, 0)))(model, qs), np.float64)
    np.testing.assert_allclose(Ms, np.swapaxes(Ms, 1, 2), atol=4 * EPS32 * np.abs(Ms).max())  # measured 0
    assert np.linalg.eigvalsh(Ms).min() > 0


def test_forward_inverse_round_trip_and_aba_equals_cholesky(model):
    qs, vs, taus = _draws(model, 16, seed=1)

    def check(q, v, tau):
        qdd = dynamics.aba(model, q, v, tau)
        return qdd, dynamics.forward_dynamics_cholesky(model, q, v, tau), dynamics.rnea(model, q, v, qdd)

    qdd_aba, qdd_chol, tau_back = (np.asarray(x, np.float64) for x in jax.jit(jax.vmap(check))(qs, vs, taus))
    M = np.asarray(jax.jit(jax.vmap(dynamics.crba, in_axes=(None, 0)))(model, qs), np.float64)
    # two float32 solves of the same system agree to cond(M) eps of |qdd| (measured <= 12.5 eps at
    # cond 1e2); rnea(qdd) sums terms of size |M| |qdd| (measured 2e-8 of that, panda)
    scale = np.abs(qdd_aba).max()
    np.testing.assert_allclose(qdd_aba, qdd_chol, rtol=0, atol=np.linalg.cond(M).max() * EPS32 * scale)
    np.testing.assert_allclose(tau_back, taus, rtol=0, atol=16 * EPS32 * np.abs(M).max() * scale)


def test_rk4_conserves_energy_without_damping(model):
    undamped = model.replace(dof_damping=jnp.zeros(model.nv))
    q0 = configuration.random_configuration(undamped, jax.random.PRNGKey(5))
    run = jax.jit(lambda q: integrators.simulate(undamped, q, jnp.zeros(model.nv),
                                                 jnp.zeros((500, model.nv)), 1e-3, "rk4"))
    qs, vs = run(q0)
    energy = jax.vmap(dynamics.total_energy, in_axes=(None, 0, 0))(undamped, qs, vs)
    scale = max(1.0, float(jnp.max(jnp.abs(energy))))
    # RK4 truncation (1e-6, the float64 gate) plus float32 rounding of the state, up to ~eps per step
    # over 500 steps (measured 1.9e-5 on collide_arm)
    assert float(jnp.max(jnp.abs(energy - energy[0]))) / scale < 1e-6 + 500 * EPS32


def test_damping_dissipates_energy():
    model = load("pendulum2", dtype=jnp.float32).replace(dof_damping=jnp.full(2, 0.5, jnp.float32))
    q0 = jnp.array([1.0, 0.5], jnp.float32)
    for method in integrators.INTEGRATORS:
        qs, vs = jax.jit(lambda q, m=method: integrators.simulate(
            model, q, jnp.zeros(2), jnp.zeros((800, 2)), 1e-3, m))(q0)
        energy = np.asarray(jax.vmap(dynamics.total_energy, in_axes=(None, 0, 0))(model, qs, vs), np.float64)
        # never increases beyond float32 rounding of |E| ~ 4 J (measured +9.5e-7 = 2 eps |E|, RK4)
        assert np.all(np.diff(energy) <= 8 * EPS32 * np.abs(energy).max()), method
        assert energy[-1] < energy[0] - 0.1, method


def test_free_body_momentum_conserved():
    urdf = """<robot name="brick"><link name="b"><inertial><origin xyz="0.1 0.02 -0.03" rpy="0.3 0.2 0.1"/>
      <mass value="2"/><inertia ixx="0.02" iyy="0.05" izz="0.04" ixy="0.001" ixz="0" iyz="0.002"/>
      </inertial></link></robot>"""
    from caliper_jax.io import read_urdf_string
    from caliper_jax.model import build_model

    desc = read_urdf_string(urdf, floating=True)
    desc.gravity = np.zeros(3)
    model = build_model(desc, dtype=jnp.float32)
    q0 = configuration.neutral(model)
    v0 = jnp.array([0.3, -0.2, 0.1, 1.5, -2.0, 0.7], jnp.float32)
    qs, vs = jax.jit(lambda q, v: integrators.simulate(model, q, v, jnp.zeros((400, 6)), 1e-3, "rk4"))(q0, v0)

    def world_momentum(q, v):
        R, p = kinematics.body_poses(model, q)
        xi = kinematics.motion_axes(model, R, p)
        V = kinematics.body_velocities(model, xi, v)
        return dynamics._inertia_apply(*dynamics._world_inertias(model, R, p), V)[0]

    h = np.asarray(jax.vmap(world_momentum)(qs, vs), np.float64)
    # RK4 truncation (1e-6) plus float32 rounding, up to ~eps |h| per step over 400 steps
    # (measured 1.25e-6)
    atol = 1e-6 + 400 * EPS32 * np.abs(h[0]).max()
    np.testing.assert_allclose(h, np.broadcast_to(h[0], h.shape), atol=atol)
    assert np.abs(h[0]).max() > 0.1


def test_vmap_over_configurations_matches_single(model):
    qs, vs, accs = _draws(model, 8, seed=2)
    batched = jax.jit(jax.vmap(dynamics.rnea, in_axes=(None, 0, 0, 0)))(model, qs, vs, accs)
    single = jax.jit(dynamics.rnea)
    atol = 16 * EPS32 * float(jnp.abs(batched).max())      # measured 0: 8 < MIN_BATCH, the same code
    for k in range(8):
        np.testing.assert_allclose(batched[k], single(model, qs[k], vs[k], accs[k]), rtol=0, atol=atol)


def test_vmap_over_batched_model(model):
    scales = jnp.array([0.5, 1.0, 2.0], model.dtype)
    q = configuration.random_configuration(model, jax.random.PRNGKey(9))
    base = dynamics.gravity_torques(model, q)
    # only the masses carry a batch axis; every other leaf is shared
    partly = model.replace(body_mass=scales[:, None] * model.body_mass[None])
    axes = model_in_axes(model, batched=("body_mass",))
    g = jax.jit(jax.vmap(dynamics.gravity_torques, in_axes=(axes, None)))(partly, q)
    # every leaf stacked
    full = stack_models([model.replace(body_mass=model.body_mass * s) for s in scales])
    g_full = jax.jit(jax.vmap(dynamics.gravity_torques, in_axes=(0, None)))(full, q)
    atol = 16 * EPS32 * 2.0 * float(jnp.abs(base).max())    # measured 1.6 eps of the largest torque
    for k, s in enumerate(scales):  # gravity torques are linear in the masses (COMs fixed)
        np.testing.assert_allclose(g[k], s * base, rtol=0, atol=atol)
        np.testing.assert_allclose(g_full[k], s * base, rtol=0, atol=atol)


@pytest.mark.x64
def test_grad_wrt_model_parameters_matches_finite_differences():
    model = load("pendulum2", dtype=jnp.float64)
    q, v, a = jnp.array([0.3, -0.7]), jnp.array([0.5, 0.2]), jnp.array([1.0, -1.0])

    def loss(mass):
        return jnp.sum(dynamics.rnea(model.replace(body_mass=mass), q, v, a) ** 2)

    g = jax.grad(loss)(model.body_mass)
    eps = 1e-6
    for i in range(2):
        e = jnp.zeros(2).at[i].set(eps)
        fd = (loss(model.body_mass + e) - loss(model.body_mass - e)) / (2 * eps)
        np.testing.assert_allclose(g[i], fd, rtol=1e-6)


# collide_arm (3 revolute joints) adds nothing over pendulum2 here, the panda's 7 joints nothing
# over gripper_arm's prismatic + revolute mix in the default run: both slow (~20 s, ~35 s)
@pytest.mark.x64
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ("collide_arm", "panda")
                                  else n for n in NAMES])
def test_jacfwd_jacrev_agree_with_finite_differences(name):
    """FK, the frame Jacobian, RNEA and ABA of q as one pytree: one compile per transform."""
    model = load(name, dtype=jnp.float64)
    frame, ones = model.nframe - 1, jnp.ones(model.nv)

    def f(q):
        return {"fk": kinematics.frame_pose(model, q, frame)[:3].ravel(),
                "jac": kinematics.frame_jacobian(model, q, frame).ravel(),
                "rnea": dynamics.rnea(model, q, ones, ones),
                "aba": dynamics.aba(model, q, ones, ones)}

    eps = 1e-6
    jacfwd, jacrev, value = jax.jit(jax.jacfwd(f)), jax.jit(jax.jacrev(f)), jax.jit(f)
    central = jax.jit(lambda q: jax.vmap(lambda e: jax.tree_util.tree_map(
        lambda a, b: (a - b) / (2 * eps), f(q + eps * e), f(q - eps * e)), out_axes=-1)(jnp.eye(model.nq)))
    for q in (configuration.neutral(model), configuration.random_configuration(model, jax.random.PRNGKey(4))):
        jf, jr, fd, val = jacfwd(q), jacrev(q), central(q), value(q)
        for fn in val:
            assert np.all(np.isfinite(jf[fn])) and np.all(np.isfinite(jr[fn]))  # finite at q = 0 too
            np.testing.assert_allclose(jf[fn], jr[fn], rtol=1e-9, atol=1e-9, err_msg=fn)
            scale = max(1.0, float(np.abs(val[fn]).max()))  # central differences lose ~eps_mach/eps * |f|
            np.testing.assert_allclose(jf[fn], fd[fn], rtol=1e-5, atol=1e-6 * scale, err_msg=fn)


def test_integrate_difference_round_trip_on_floating_base():
    if robots.example_robot_data_dir() is None:
        pytest.skip("example-robot-data is not installed")
    model = load("solo12", dtype=jnp.float32)
    assert model.nq == model.nv + 1
    q0 = configuration.random_configuration(model, jax.random.PRNGKey(0))
    q1 = configuration.random_configuration(model, jax.random.PRNGKey(1))
    d = configuration.difference_pos(model, q0, q1)
    q1b = configuration.integrate_pos(model, q0, d)
    fk = jax.jit(kinematics.forward_kinematics)
    T = np.asarray(fk(model, q1), np.float64)
    # float32 round trip through the quaternion exp/log: measured 2 eps of the largest entry
    np.testing.assert_allclose(fk(model, q1b), T, atol=16 * EPS32 * np.abs(T).max())
    np.testing.assert_allclose(configuration.difference_pos(model, q0, q0), 0.0, atol=1e-12)
