"""Behaviour cloning with an MLP: flattened observation window (each frame's state, and with
cameras each camera's image feature vector) -> action chunk, L2 loss."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from learn.config import BCConfig
from learn.policies.base import Batch
from learn.policies.layers import MLP, masked_mean
from learn.policies.vision import ImageEncoder, features_with_images


class BCMLP(nnx.Module):
    """MLP (``config.hidden``, GELU, dropout ``config.dropout``) from the flattened window
    (n_obs_steps * obs_dim) to ``chunk_size * action_dim``. Padded frames are used as recorded
    (they repeat the episode's first frame)."""

    def __init__(self, config: BCConfig, obs_dim: int, action_dim: int, *, rngs: nnx.Rngs, image_shape=None):
        self.config = config
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.vision = None if image_shape is None else ImageEncoder(config, image_shape, rngs=rngs)
        width = obs_dim + (0 if self.vision is None else self.vision.n_cameras * self.vision.feature_dim)
        self.net = MLP(config.n_obs_steps * width, tuple(config.hidden), config.chunk_size * action_dim,
                       dropout_rate=config.dropout, rngs=rngs)

    def _forward(self, obs: jax.Array, key, images=None) -> jax.Array:
        """obs (B, n_obs_steps, obs_dim), images (B, n_obs_steps, cameras, H, W, 3) or None ->
        (B, chunk_size, action_dim)."""
        b = obs.shape[0]
        obs = features_with_images(self.vision, obs, images, key)
        out = self.net(obs.reshape(b, -1), key)
        if self.config.squash:
            out = jnp.tanh(out)
        return out.reshape(b, self.config.chunk_size, self.action_dim)

    def loss(self, batch: Batch, key: jax.Array) -> tuple[jax.Array, dict]:
        """Masked mean squared error over valid actions."""
        pred = self._forward(batch.obs, key, batch.images)
        loss = masked_mean(jnp.square(pred - batch.action), batch.action_mask)
        return loss, {"l2": loss}

    def sample(self, obs: jax.Array, obs_mask: jax.Array, key: jax.Array, images=None) -> jax.Array:
        """(B, n_obs_steps, obs_dim), (B, n_obs_steps) -> (B, chunk_size, action_dim)."""
        del obs_mask
        return self._forward(obs, key, images)


__all__ = ["BCMLP"]
