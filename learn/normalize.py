"""Normalisation statistics: computed from the training split only, stored with the weights,
applied identically in training and at deploy.

Observations and actions are standardised per dimension, ``(x - mean) / std``, with ``std``
floored at ``STD_FLOOR`` so a constant feature (a quaternion's w of an upright prop) maps to 0
instead of dividing by zero and exploding at deploy when it moves slightly. Camera images (uint8
RGB) are standardised per colour channel, ``(x / 255 - img_mean) / img_std``, with the train
split's pixel statistics (None for a policy without cameras).
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
    img_mean: np.ndarray | None = None   # (3,) RGB mean of pixels / 255
    img_std: np.ndarray | None = None    # (3,)

    @staticmethod
    def fit(obs: np.ndarray, action: np.ndarray) -> Normalizer:
        """Statistics of training frames ``obs`` (N, obs_dim) and ``action`` (N, action_dim)."""
        obs, action = np.asarray(obs, np.float64), np.asarray(action, np.float64)
        return Normalizer(obs.mean(0).astype(np.float32),
                          np.maximum(obs.std(0), STD_FLOOR).astype(np.float32),
                          action.mean(0).astype(np.float32),
                          np.maximum(action.std(0), STD_FLOOR).astype(np.float32))

    def with_images(self, pixels: np.ndarray) -> Normalizer:
        """This normaliser plus the per-channel statistics of ``pixels`` (..., 3) uint8."""
        x = np.asarray(pixels).reshape(-1, 3)
        step = max(1, x.shape[0] // 4_000_000)            # a few million pixels are plenty
        x = x[::step].astype(np.float64) / 255.0
        return self._replace(img_mean=x.mean(0).astype(np.float32),
                             img_std=np.maximum(x.std(0), STD_FLOOR).astype(np.float32))

    def images(self, x):
        """Normalise uint8 images (..., 3) to float32 (NumPy or JAX arrays)."""
        return (x.astype("float32") / 255.0 - self.img_mean) / self.img_std

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
        return {k: np.asarray(v, np.float32).tolist() for k, v in self._asdict().items() if v is not None}

    @staticmethod
    def from_dict(d: dict) -> Normalizer:
        return Normalizer(**{k: np.asarray(d[k], np.float32) for k in Normalizer._fields
                             if k in d or not k.startswith("img_")})


__all__ = ["Normalizer", "STD_FLOOR"]
