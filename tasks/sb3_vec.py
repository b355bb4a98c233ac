"""Stable-Baselines3's ``VecEnv`` over the gymnasium vector adapter (``pip install
"caliper-jax[rl]"`` for stable-baselines3).

:func:`sb3_vec_env` wraps a :class:`tasks.gym.CaliperVectorEnv` (or a task name) so SB3's
algorithms (PPO, SAC, ...) train on it directly: same-step auto-reset maps to SB3's convention
(``infos[i]["terminal_observation"]`` from gymnasium's ``final_obs`` where a world ended,
``infos[i]["TimeLimit.truncated"]`` on truncation), one batched call per step for all worlds.
"""
from __future__ import annotations

import numpy as np

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv
except ImportError as exc:          # a clear message rather than a NameError below
    raise ImportError('tasks.sb3_vec needs stable-baselines3: pip install "caliper-jax[rl]"') from exc


class CaliperSB3VecEnv(VecEnv):
    """SB3 ``VecEnv`` of a :class:`tasks.gym.CaliperVectorEnv` (``envs``)."""

    def __init__(self, envs):
        self.envs = envs
        super().__init__(envs.num_envs, envs.single_observation_space, envs.single_action_space)
        self._actions = None
        self._seed = None

    def reset(self):
        obs, _ = self.envs.reset(seed=self._seed)
        self._seed = None
        return obs

    def step_async(self, actions) -> None:
        self._actions = np.asarray(actions, np.float32)

    def step_wait(self):
        obs, reward, terminated, truncated, info = self.envs.step(self._actions)
        done = terminated | truncated
        infos = [{} for _ in range(self.num_envs)]
        for i in np.flatnonzero(done):
            infos[i]["terminal_observation"] = info["final_obs"][i]
            infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            infos[i]["is_success"] = bool(info["final_info"]["success"][i])
        return obs, reward, done, infos

    def seed(self, seed=None):
        self._seed = None if seed is None else int(seed)
        return [self._seed] * self.num_envs

    def close(self) -> None:
        self.envs.close()

    def get_attr(self, attr_name, indices=None):
        return [getattr(self.envs, attr_name)] * len(self._get_indices(indices))

    def set_attr(self, attr_name, value, indices=None) -> None:
        setattr(self.envs, attr_name, value)

    def env_method(self, method_name, *args, indices=None, **kwargs):
        return [getattr(self.envs, method_name)(*args, **kwargs)] * len(self._get_indices(indices))

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False] * len(self._get_indices(indices))

    def get_images(self):
        return [None] * self.num_envs


def sb3_vec_env(task="lift-cube", num_envs: int = 8, **kwargs) -> CaliperSB3VecEnv:
    """An SB3 VecEnv of ``num_envs`` worlds of ``task``; keywords go to :class:`tasks.env.VecEnv`."""
    from tasks.gym import CaliperVectorEnv

    return CaliperSB3VecEnv(CaliperVectorEnv(task, num_envs, **kwargs))


__all__ = ["CaliperSB3VecEnv", "sb3_vec_env"]
