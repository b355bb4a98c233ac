"""Reinforcement learning on the task zoo: PPO over both engines (:mod:`learn.rl.ppo`, the
collectors of :mod:`learn.rl.collect`, the loop of :mod:`learn.rl.train`)."""
from learn.rl.ppo import PPOConfig
from learn.rl.train import RLResult, train_rl

__all__ = ["PPOConfig", "RLResult", "train_rl"]
