"""Normalisation statistics: computed from the training split only, stored with the weights,
applied identically in training and at deploy.

Observations and actions are standardised per dimension, ``(x - mean) / std``, with ``std``
floored at ``STD_FLOOR`` so a constant feature (a quaternion's w of an upright prop) maps to 0
instead of dividing by zero and exploding at deploy when it moves slightly.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

STD_FLOOR = 1e-3


class Normalizer(NamedTuple):
    """Per-dimension statistics (a pytree of float32 arrays)."""

    obs_mean: np.ndarray   # (obs_dim,)
    obs_std: np.ndarray    # (obs_dim,)
    act_mean: np.ndarray   # (action_dim,)
    act_std: np.ndarray    # (action_dim,)

    @staticmethod
    def fit(obs: np.ndarray, action: np.ndarray) -> Normalizer:
        """Statistics of training frames ``obs`` (N, obs_dim) and ``action`` (N, action_dim)."""
        obs, action = np.asarray(obs, np.float64), np.asarray(action, np.float64)
        return Normalizer(obs.mean(0).astype(np.float32),
                          np.maximum(obs.std(0), STD_FLOOR).astype(np.float32),
                          action.mean(0).astype(np.float32),
                          np.maximum(action.std(0), STD_FLOOR).astype(np.float32))

    def obs(self, x):
        """Normalise observations (..., obs_dim) (NumPy or JAX arrays)."""
        return (x - self.obs_mean) / self.obs_std

    def action(self, a):
        """Normalise actions (..., action_dim)."""
        return (a - self.act_mean) / self.act_std

    def unaction(self, a):
        """Actions (..., action_dim) back to physical units."""
        return a * self.act_std + self.act_mean

    def to_dict(self) -> dict:
        return {k: np.asarray(v, np.float32).tolist() for k, v in self._asdict().items()}

    @staticmethod
    def from_dict(d: dict) -> Normalizer:
        return Normalizer(**{k: np.asarray(d[k], np.float32) for k in Normalizer._fields})


__all__ = ["Normalizer", "STD_FLOOR"]
