"""MJX behind the same contract, kept tiny (two worlds, a two-link arm, a few steps): MJX
compiles for tens of seconds on a CPU, so this module compiles its step function once."""
import jax
import mujoco.mjx  # noqa: F401  (mujoco-mjx is a dependency: a broken install fails here)
import numpy as np
import pytest

from caliper_jax.io import Geom
from mjx_backend.cpu import MujocoBackend
from mjx_backend.layout import compile_scene
from mjx_backend.randomize import RandomizationSpec, sample

EYE = tuple(map(tuple, np.eye(3)))
# sphere-tipped pendulum resting its tip on the ground in both worlds (about 1 mm and 0.3 mm deep)
Q0 = np.array([[2.0, 0.0], [1.9, 0.2]])
GROUND = -0.2987
SPEC = RandomizationSpec(mass=(0.8, 1.2), damping=(0.5, 1.5), frictionloss=None, friction=(0.5, 1.5),
                         gain=(0.9, 1.1))


@pytest.fixture(scope="module")
def scene(fixture_models):
    m = fixture_models["pendulum2"]
    tip = Geom("l2", 1, "collision", "sphere", EYE, (0.0, 0.0, 0.3), (0.05,))
    return compile_scene(m.replace(geoms=(tip,), dof_damping=np.full(2, 0.1)), ground=GROUND,
                         actuators="motor")


@pytest.fixture(scope="module")
def mjx_backend(scene):
    from mjx_backend.mjx_sim import MjxBackend

    params = sample(scene, jax.random.PRNGKey(0), 2, SPEC)
    return MjxBackend(scene, 2, q0=Q0, params=params), params


def test_mjx_agrees_with_cpu_mujoco_on_a_contact_scene(scene, mjx_backend):
    mx, params = mjx_backend
    cpu = MujocoBackend(scene, 2, q0=Q0, nthread=2, params=params)
    taus = [np.array([[0.5, -0.2], [-0.3, 0.1]]), np.array([0.0, 0.4]), np.array([-0.6, 0.0])]
    for b in (mx, cpu):
        b.reset()
        b.enable()
    touching = np.zeros(2, int)
    for tau in taus:
        for b in (mx, cpu):
            b.command(tau)
        s_mx, s_cpu = mx.step(0.01), cpu.step(0.01)
        touching += [len(cpu.contacts(w)) > 0 for w in range(2)]
        np.testing.assert_allclose(s_mx.q, s_cpu.q, atol=1e-5)
        np.testing.assert_allclose(s_mx.v, s_cpu.v, atol=1e-3)
        np.testing.assert_allclose(s_mx.effort, s_cpu.effort, atol=1e-9)
    assert touching.min() >= 1                                  # the tips bear on the ground
    assert s_mx.tick == 15 and not np.allclose(s_mx.q[0], s_mx.q[1])
    cpu.close()


def test_mjx_reset_repeats_bitwise_and_new_draws_do_not_recompile(scene, mjx_backend):
    mx, params = mjx_backend

    def run():
        mx.reset()
        mx.enable()
        mx.command([0.3, -0.3])
        a = mx.step(0.01)
        mx.disable()                                             # de-energise: a traced factor
        b = mx.step(0.01)
        return a, b

    (a1, b1), (a2, b2) = run(), run()
    assert a1.q.tobytes() == a2.q.tobytes() and b1.q.tobytes() == b2.q.tobytes()
    np.testing.assert_array_equal(b1.effort, 0.0)
    assert np.abs(a1.effort).max() > 0.2
    mx.set_params(sample(scene, jax.random.PRNGKey(1), 2, SPEC))
    a3, _ = run()
    assert a3.q.tobytes() != a1.q.tobytes()
    fn = mx._step_fn(5)
    assert len(mx._compiled) == 1 and fn._cache_size() == 1     # one compilation for all of it
