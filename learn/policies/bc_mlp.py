"""Behaviour cloning with an MLP: flattened observation window -> action chunk, L2 loss."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from learn.config import BCConfig
from learn.policies.base import Batch
from learn.policies.layers import MLP, masked_mean


class BCMLP(nnx.Module):
    """MLP (``config.hidden``, GELU, dropout ``config.dropout``) from the flattened window
    (n_obs_steps * obs_dim) to ``chunk_size * action_dim``. Padded frames are used as recorded
    (they repeat the episode's first frame)."""

    def __init__(self, config: BCConfig, obs_dim: int, action_dim: int, *, rngs: nnx.Rngs):
        self.config = config
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.net = MLP(config.n_obs_steps * obs_dim, tuple(config.hidden), config.chunk_size * action_dim,
                       dropout_rate=config.dropout, rngs=rngs)

    def _forward(self, obs: jax.Array, key) -> jax.Array:
        """obs (B, n_obs_steps, obs_dim) -> (B, chunk_size, action_dim)."""
        b = obs.shape[0]
        out = self.net(obs.reshape(b, -1), key)
        if self.config.squash:
            out = jnp.tanh(out)
        return out.reshape(b, self.config.chunk_size, self.action_dim)

    def loss(self, batch: Batch, key: jax.Array) -> tuple[jax.Array, dict]:
        """Masked mean squared error over valid actions."""
        pred = self._forward(batch.obs, key)
        loss = masked_mean(jnp.square(pred - batch.action), batch.action_mask)
        return loss, {"l2": loss}

    def sample(self, obs: jax.Array, obs_mask: jax.Array, key: jax.Array) -> jax.Array:
        """(B, n_obs_steps, obs_dim), (B, n_obs_steps) -> (B, chunk_size, action_dim)."""
        del obs_mask
        return self._forward(obs, key)


__all__ = ["BCMLP"]
