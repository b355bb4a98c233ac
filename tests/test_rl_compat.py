"""Ecosystem fit: brax's own PPO trainer on a zoo task through tasks.brax_env.BraxEnv, and
Stable-Baselines3's PPO through the gymnasium adapter (tasks.sb3_vec), a few iterations each.

brax comes with the ``rl`` and ``test`` extras; stable-baselines3 needs torch (gigabytes of CUDA
libraries from PyPI), so its test runs where torch is installed and skips elsewhere, saying why."""
from __future__ import annotations

import pytest


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
