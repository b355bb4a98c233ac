"""The contract every policy module meets, and the batch it trains on.

All arrays here are in the *normalised* space of :mod:`learn.normalize`: observations and actions
are (x - mean) / std with the training split's statistics. A policy never sees raw units.

A policy is a flax NNX module built by :func:`learn.policies.build_policy` with:

* ``loss(batch, key) -> (scalar loss, {name: scalar})``: the training objective on a
  :class:`Batch`; ``key`` drives dropout, CVAE sampling and diffusion noise. Padded actions
  (``action_mask`` False) contribute nothing.
* ``sample(obs, obs_mask, key, images=None) -> (B, chunk_size, action_dim)``: the action chunk for
  an observation window ``obs`` (B, n_obs_steps, obs_dim) and, for a policy with cameras, its
  normalised ``images`` (B, n_obs_steps, cameras, H, W, 3), deterministic given ``key`` (the module
  is switched to eval mode by the caller: ``module.eval()``).

Both are pure functions of the module's parameters and their arguments, so they jit, vmap and
differentiate; deploy (:mod:`learn.deploy`) calls ``sample`` inside a ``lax.scan``.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol

import jax


class Batch(NamedTuple):
    """One training batch, normalised. The window ends at the sample's frame t: ``obs[:, -1]`` is
    frame t, ``obs[:, 0]`` frame t - n_obs_steps + 1; frames before the episode start repeat the
    first frame and have ``obs_mask`` False. ``action[:, 0]`` is the action at frame t; actions past
    the episode end repeat the last one and have ``action_mask`` False."""

    obs: jax.Array          # (B, n_obs_steps, obs_dim) float32
    obs_mask: jax.Array     # (B, n_obs_steps) bool
    action: jax.Array       # (B, chunk_size, action_dim) float32
    action_mask: jax.Array  # (B, chunk_size) bool
    images: jax.Array | None = None  # (B, n_obs_steps, cameras, H, W, 3) float32 normalised, or None


class Policy(Protocol):
    config: object
    obs_dim: int
    action_dim: int

    def loss(self, batch: Batch, key: jax.Array) -> tuple[jax.Array, dict]: ...

    def sample(self, obs: jax.Array, obs_mask: jax.Array, key: jax.Array, images=None) -> jax.Array: ...


__all__ = ["Batch", "Policy"]
