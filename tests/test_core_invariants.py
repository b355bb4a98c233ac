"""Physical invariants of the dynamics and the integrators, batching, and differentiability."""
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


@pytest.fixture(scope="module", params=NAMES)
def model(request):
    return load(request.param, dtype=jnp.float64)


def _draws(model, n, seed=0):
    kq, kv, ka = jax.random.split(jax.random.PRNGKey(seed), 3)
    qs = jax.vmap(lambda k: configuration.random_configuration(model, k))(jax.random.split(kq, n))
    return qs, jax.random.normal(kv, (n, model.nv)), jax.random.normal(ka, (n, model.nv))


def test_mass_matrix_symmetric_positive_definite(model):
    qs, _, _ = _draws(model, 16)
    Ms = np.asarray(jax.jit(jax.vmap(dynamics.crba, in_axes=(None, 0)))(model, qs))
    np.testing.assert_allclose(Ms, np.swapaxes(Ms, 1, 2), atol=1e-12)
    assert np.linalg.eigvalsh(Ms).min() > 0


def test_forward_inverse_round_trip_and_aba_equals_cholesky(model):
    qs, vs, taus = _draws(model, 16, seed=1)

    def check(q, v, tau):
        qdd = dynamics.aba(model, q, v, tau)
        return qdd, dynamics.forward_dynamics_cholesky(model, q, v, tau), dynamics.rnea(model, q, v, qdd)

    qdd_aba, qdd_chol, tau_back = jax.jit(jax.vmap(check))(qs, vs, taus)
    np.testing.assert_allclose(qdd_aba, qdd_chol, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(tau_back, taus, rtol=1e-9, atol=1e-9)


def test_rk4_conserves_energy_without_damping(model):
    undamped = model.replace(dof_damping=jnp.zeros(model.nv))
    q0 = configuration.random_configuration(undamped, jax.random.PRNGKey(5))
    run = jax.jit(lambda q: integrators.simulate(undamped, q, jnp.zeros(model.nv),
                                                 jnp.zeros((500, model.nv)), 1e-3, "rk4"))
    qs, vs = run(q0)
    energy = jax.vmap(dynamics.total_energy, in_axes=(None, 0, 0))(undamped, qs, vs)
    scale = max(1.0, float(jnp.max(jnp.abs(energy))))
    assert float(jnp.max(jnp.abs(energy - energy[0]))) / scale < 1e-6


def test_damping_dissipates_energy():
    model = load("pendulum2", dtype=jnp.float64).replace(dof_damping=jnp.full(2, 0.5))
    q0 = jnp.array([1.0, 0.5])
    for method in integrators.INTEGRATORS:
        qs, vs = jax.jit(lambda q, m=method: integrators.simulate(
            model, q, jnp.zeros(2), jnp.zeros((800, 2)), 1e-3, m))(q0)
        energy = np.asarray(jax.vmap(dynamics.total_energy, in_axes=(None, 0, 0))(model, qs, vs))
        assert np.all(np.diff(energy) <= 1e-9), method
        assert energy[-1] < energy[0] - 0.1, method


def test_free_body_momentum_conserved():
    urdf = """<robot name="brick"><link name="b"><inertial><origin xyz="0.1 0.02 -0.03" rpy="0.3 0.2 0.1"/>
      <mass value="2"/><inertia ixx="0.02" iyy="0.05" izz="0.04" ixy="0.001" ixz="0" iyz="0.002"/>
      </inertial></link></robot>"""
    from caliper_jax.io import read_urdf_string
    from caliper_jax.model import build_model

    desc = read_urdf_string(urdf, floating=True)
    desc.gravity = np.zeros(3)
    model = build_model(desc, dtype=jnp.float64)
    q0 = configuration.neutral(model)
    v0 = jnp.array([0.3, -0.2, 0.1, 1.5, -2.0, 0.7])
    qs, vs = jax.jit(lambda q, v: integrators.simulate(model, q, v, jnp.zeros((400, 6)), 1e-3, "rk4"))(q0, v0)

    def world_momentum(q, v):
        R, p = kinematics.body_poses(model, q)
        xi = kinematics.motion_axes(model, R, p)
        V = kinematics.body_velocities(model, xi, v)
        return dynamics._inertia_apply(*dynamics._world_inertias(model, R, p), V)[0]

    h = np.asarray(jax.vmap(world_momentum)(qs, vs))
    np.testing.assert_allclose(h, np.broadcast_to(h[0], h.shape), atol=1e-6)  # RK4 truncation
    assert np.abs(h[0]).max() > 0.1


def test_vmap_over_configurations_matches_single(model):
    qs, vs, accs = _draws(model, 8, seed=2)
    batched = jax.jit(jax.vmap(dynamics.rnea, in_axes=(None, 0, 0, 0)))(model, qs, vs, accs)
    single = jax.jit(dynamics.rnea)
    for k in range(8):
        np.testing.assert_allclose(batched[k], single(model, qs[k], vs[k], accs[k]), rtol=1e-12, atol=1e-12)


def test_vmap_over_batched_model(model):
    scales = jnp.array([0.5, 1.0, 2.0])
    q = configuration.random_configuration(model, jax.random.PRNGKey(9))
    base = dynamics.gravity_torques(model, q)
    # only the masses carry a batch axis; every other leaf is shared
    partly = model.replace(body_mass=scales[:, None] * model.body_mass[None])
    axes = model_in_axes(model, batched=("body_mass",))
    g = jax.jit(jax.vmap(dynamics.gravity_torques, in_axes=(axes, None)))(partly, q)
    # every leaf stacked
    full = stack_models([model.replace(body_mass=model.body_mass * s) for s in scales])
    g_full = jax.jit(jax.vmap(dynamics.gravity_torques, in_axes=(0, None)))(full, q)
    for k, s in enumerate(scales):  # gravity torques are linear in the masses (COMs fixed)
        np.testing.assert_allclose(g[k], s * base, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(g_full[k], s * base, rtol=1e-10, atol=1e-10)


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


@pytest.mark.parametrize("fn", ["fk", "jac", "rnea", "aba"])
def test_jacfwd_jacrev_agree_with_finite_differences(model, fn):
    frame = model.nframe - 1
    funcs = {
        "fk": lambda q: kinematics.frame_pose(model, q, frame)[:3].ravel(),
        "jac": lambda q: kinematics.frame_jacobian(model, q, frame).ravel(),
        "rnea": lambda q: dynamics.rnea(model, q, jnp.ones(model.nv), jnp.ones(model.nv)),
        "aba": lambda q: dynamics.aba(model, q, jnp.ones(model.nv), jnp.ones(model.nv)),
    }
    f = funcs[fn]
    for q in (configuration.neutral(model), configuration.random_configuration(model, jax.random.PRNGKey(4))):
        jf, jr = jax.jacfwd(f)(q), jax.jacrev(f)(q)
        assert np.all(np.isfinite(jf)) and np.all(np.isfinite(jr))  # finite at q = 0 too
        np.testing.assert_allclose(jf, jr, rtol=1e-9, atol=1e-9)
        eps = 1e-6
        fd = np.stack([(f(q + eps * e) - f(q - eps * e)) / (2 * eps) for e in jnp.eye(model.nq)], -1)
        scale = max(1.0, float(np.abs(f(q)).max()))  # central differences lose ~eps_mach/eps * |f|
        np.testing.assert_allclose(jf, fd, rtol=1e-5, atol=1e-6 * scale)


def test_integrate_difference_round_trip_on_floating_base():
    if robots.example_robot_data_dir() is None:
        pytest.skip("example-robot-data is not installed")
    model = load("solo12", dtype=jnp.float64)
    assert model.nq == model.nv + 1
    q0 = configuration.random_configuration(model, jax.random.PRNGKey(0))
    q1 = configuration.random_configuration(model, jax.random.PRNGKey(1))
    d = configuration.difference_pos(model, q0, q1)
    q1b = configuration.integrate_pos(model, q0, d)
    fk = jax.jit(kinematics.forward_kinematics)
    np.testing.assert_allclose(fk(model, q1b), fk(model, q1), atol=1e-10)
    np.testing.assert_allclose(configuration.difference_pos(model, q0, q0), 0.0, atol=1e-12)
