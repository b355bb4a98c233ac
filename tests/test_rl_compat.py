"""Ecosystem fit: brax's own PPO trainer on a zoo task through tasks.brax_env.BraxEnv, and
Stable-Baselines3's PPO through the gymnasium adapter (tasks.sb3_vec), a few iterations each.

brax comes with the ``rl`` and ``test`` extras; stable-baselines3 needs torch (gigabytes of CUDA
libraries from PyPI), so its test runs where torch is installed and skips elsewhere, saying why."""
from __future__ import annotations

import numpy as np
import pytest


def test_brax_training_wrappers_run_the_brax_env():
    """BraxEnv under brax's own training wrappers (VmapWrapper, EpisodeWrapper, AutoResetWrapper:
    what brax's PPO and MuJoCo Playground put around an env): batched reset from a batch of keys,
    jitted steps, the episode cut at ``episode_length`` and restarted, dense terms as metrics."""
    pytest.importorskip("brax")
    import jax
    import jax.numpy as jnp
    from brax.envs.wrappers.training import wrap

    from tasks.brax_env import BraxEnv

    env = BraxEnv("lift-cube")
    w = wrap(env, episode_length=3)
    st = jax.jit(w.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    assert st.obs.shape == (2, env.observation_size)
    assert set(st.metrics) >= {"reach", "grasp", "success"}
    assert not np.array_equal(np.asarray(st.obs[0]), np.asarray(st.obs[1]))     # each key its own draws
    step = jax.jit(w.step)
    first = np.asarray(st.obs)
    for _ in range(3):
        st = step(st, jnp.zeros((2, env.action_size)))
        assert np.isfinite(np.asarray(st.reward)).all()
        terms = sum(st.metrics[k] for k in ("reach", "grasp", "lift", "smooth"))
        np.testing.assert_allclose(st.reward, terms, rtol=1e-5, atol=1e-6)
    assert np.asarray(st.done).all() and np.asarray(st.info["truncation"]).all()
    np.testing.assert_array_equal(np.asarray(st.obs), first)          # auto-reset to the first state


def _replicated(x, devices):
    """``jax.device_put_replicated`` (removed in jax 0.10, still called by brax 0.14.2): the
    migration guide's drop-in, a leading device axis on every leaf."""
    import jax
    import jax.numpy as jnp

    stack = lambda a: jnp.broadcast_to(jnp.asarray(a), (len(devices),) + jnp.shape(a))  # noqa: E731
    return jax.device_put(jax.tree_util.tree_map(stack, x), devices[0])


@pytest.mark.slow
def test_brax_ppo_trainer_trains_on_the_brax_env_and_its_policy_acts_in_it(monkeypatch):
    """brax's own ``ppo.train`` on ``BraxEnv("lift-cube")`` (320 env steps, 4 worlds, [16] layers,
    no eval unroll): it returns parameters and finite metrics, and its deterministic policy's
    action steps our env. Catches: BraxEnv.step dropping the metric keys brax's trainer adds at
    reset (the trainer's scan fails on the changed pytree). Slow: the MJX step compiles inside
    brax's pmapped reset and training epoch, minutes on 2 loaded CPU cores."""
    pytest.importorskip("brax")
    import functools

    import jax
    from brax.training.agents.ppo import networks as ppo_networks
    from brax.training.agents.ppo import train as ppo

    from tasks.brax_env import BraxEnv

    if "device_put_replicated" not in vars(jax):
        monkeypatch.setattr(jax, "device_put_replicated", _replicated, raising=False)
    env = BraxEnv("lift-cube")
    factory = functools.partial(ppo_networks.make_ppo_networks, policy_hidden_layer_sizes=(16,),
                                value_hidden_layer_sizes=(16,))
    make_policy, params, metrics = ppo.train(
        environment=env, num_timesteps=320, episode_length=20, num_envs=4, unroll_length=5, batch_size=4,
        num_minibatches=2, num_updates_per_batch=1, num_evals=1, run_evals=False, network_factory=factory,
        normalize_observations=True, seed=0)
    leaves = jax.tree_util.tree_leaves(params)
    assert len(params) == 3 and leaves and all(np.isfinite(np.asarray(x)).all() for x in leaves)
    assert all(np.isfinite(np.asarray(v)).all() for v in jax.tree_util.tree_leaves(metrics))
    st = jax.jit(env.reset)(jax.random.PRNGKey(1))
    action, _ = make_policy(params, deterministic=True)(st.obs, jax.random.PRNGKey(2))
    assert action.shape == (env.action_size,) and np.all(np.abs(np.asarray(action)) <= 1)
    nxt = jax.jit(env.step)(st, action)
    assert np.isfinite(np.asarray(nxt.obs)).all() and np.isfinite(float(nxt.reward))
    assert not np.array_equal(np.asarray(nxt.obs), np.asarray(st.obs))


def test_sb3_ppo_runs_a_few_thousand_steps_through_the_gymnasium_adapter():
    pytest.importorskip("torch", reason="stable-baselines3 needs torch (the rl extra)")
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    from tasks.sb3_vec import sb3_vec_env

    ended = []

    class Count(BaseCallback):
        def _on_step(self) -> bool:
            ended.extend(i for i in self.locals["infos"] if "terminal_observation" in i)
            return True

    venv = sb3_vec_env("lift-cube", 8, seed=0)
    model = PPO("MlpPolicy", venv, n_steps=256, batch_size=512, n_epochs=2, seed=0, device="cpu",
                policy_kwargs={"net_arch": [32, 32]})
    model.learn(total_timesteps=4096, callback=Count())
    assert model.num_timesteps == 4096
    assert ended and all(e["terminal_observation"].shape == venv.observation_space.shape for e in ended)
    obs = venv.reset()
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape == (8, 3)
    venv.close()
