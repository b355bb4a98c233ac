"""ACT (Zhao et al. 2023, "Learning Fine-Grained Bimanual Manipulation with Low-Cost Hardware"),
following lerobot's ACT with DETR-style positional embeddings.

* Each observation frame is projected to a token (+ a learned positional embedding); padded frames
  (``obs_mask`` False) are masked out as attention keys.
* With cameras, the current frame's images become tokens as in lerobot's ACT: each camera's
  backbone feature map (:mod:`learn.policies.vision`) is projected to ``dim_model`` by a 1x1
  convolution and every map position is one token, with a fixed 2-D sinusoidal position embedding
  (:func:`learn.policies.vision.sincos_2d`, the same for every camera); they follow the state tokens
  in the encoder. The CVAE encoder does not see images (as in lerobot).
* Optional CVAE (``use_vae``): a transformer over [cls, obs tokens, action tokens] (fixed
  sinusoidal positions, padded actions masked) gives mu, logvar of a ``latent_dim`` latent; the
  sampled latent is projected to the *latent token*. Without the VAE, and at ``sample`` time, the
  latent is zeros (the prior mean).
* Encoder (``n_encoder_layers``) over [latent token, obs tokens]; decoder (``n_decoder_layers``)
  with ``chunk_size`` learned query positions (zero inputs, as in DETR) cross-attending to the
  encoder memory; a linear head gives the actions. Layers are **pre-norm** (LayerNorm before each
  sub-block, a final LayerNorm after each stack), ReLU feed-forward, dropout on residual branches
  and inside the feed-forward (not on attention weights).
* Loss: masked L1 over valid actions, plus ``kl_weight`` * KL(q(z | obs, actions) || N(0, I))
  (summed over latent dims, averaged over the batch) when ``use_vae``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from caliper_jax.errors import CaliperError
from learn.config import ACTConfig
from learn.policies.base import Batch
from learn.policies.layers import (
    Attention,
    Dropout,
    embedding,
    layer_norm,
    lecun_normal,
    linear,
    masked_mean,
    sinusoidal_table,
    split_key,
    zeros,
)
from learn.policies.vision import ImageEncoder, sincos_2d


class EncoderLayer(nnx.Module):
    """Pre-norm self-attention + feed-forward block."""

    def __init__(self, c: ACTConfig, *, rngs: nnx.Rngs):
        d = c.dim_model
        self.norm1 = layer_norm(d, rngs=rngs)
        self.attn = Attention(d, c.n_heads, rngs=rngs)
        self.norm2 = layer_norm(d, rngs=rngs)
        self.ff1 = linear(d, c.dim_feedforward, rngs=rngs)
        self.ff2 = linear(c.dim_feedforward, d, rngs=rngs)
        self.drop = Dropout(c.dropout)

    def __call__(self, x, pos, mask, key, first_only: bool = False):
        """x (B, T, D), pos (B|1, T, D), mask (B, T) -> (B, T, D), or (B, 1, D) with ``first_only``
        (only token 0's output, e.g. the CVAE's cls token: the same values for 1/T of the queries
        and feed-forward)."""
        k1, k2, k3 = split_key(key, 3)
        full = tuple(x.shape)
        h = self.norm1(x)
        qk = h + pos
        q = qk[:, :1] if first_only else qk
        x = x[:, :1] if first_only else x
        x = x + self.drop(self.attn(q, qk, h, mask), k1, full)
        h = self.norm2(x)
        h = self.ff2(self.drop(jax.nn.relu(self.ff1(h)), k2, (*full[:-1], self.ff1.out_features)))
        return x + self.drop(h, k3, full)


class DecoderLayer(nnx.Module):
    """Pre-norm self-attention (over queries) + cross-attention (to memory) + feed-forward."""

    def __init__(self, c: ACTConfig, *, rngs: nnx.Rngs):
        d = c.dim_model
        self.norm1 = layer_norm(d, rngs=rngs)
        self.self_attn = Attention(d, c.n_heads, rngs=rngs)
        self.norm2 = layer_norm(d, rngs=rngs)
        self.cross_attn = Attention(d, c.n_heads, rngs=rngs)
        self.norm3 = layer_norm(d, rngs=rngs)
        self.ff1 = linear(d, c.dim_feedforward, rngs=rngs)
        self.ff2 = linear(c.dim_feedforward, d, rngs=rngs)
        self.drop = Dropout(c.dropout)

    def __call__(self, x, query_pos, memory, memory_pos, memory_mask, key):
        """x (B|1, Tq, D), query_pos (1, Tq, D), memory (B, Tk, D), memory_pos (1, Tk, D),
        memory_mask (B, Tk) -> (B, Tq, D). A batch-constant ``x`` (1, Tq, D) -- the first layer's
        zero queries -- runs the self-attention once for the whole batch (same values, 1/B the work)."""
        k1, k2, k3, k4 = split_key(key, 4)
        h = self.norm1(x)
        q = h + query_pos
        shape = (memory.shape[0], *x.shape[1:])
        x = jnp.broadcast_to(x, shape) + self.drop(jnp.broadcast_to(self.self_attn(q, q, h), shape), k1)
        h = self.norm2(x)
        x = x + self.drop(self.cross_attn(h + query_pos, memory + memory_pos, memory, memory_mask), k2)
        h = self.norm3(x)
        h = self.ff2(self.drop(jax.nn.relu(self.ff1(h)), k3))
        return x + self.drop(h, k4)


class Encoder(nnx.Module):
    """A stack of :class:`EncoderLayer` and a final LayerNorm."""

    def __init__(self, c: ACTConfig, n_layers: int, *, rngs: nnx.Rngs):
        self.layers = nnx.List([EncoderLayer(c, rngs=rngs) for _ in range(n_layers)])
        self.norm = layer_norm(c.dim_model, rngs=rngs)

    def __call__(self, x, pos, mask, key, first_only: bool = False):
        """x (B, T, D) -> (B, T, D), or (B, 1, D) (token 0 only, see :class:`EncoderLayer`) with
        ``first_only`` and at least one layer."""
        n = len(self.layers)
        for i, (layer, k) in enumerate(zip(self.layers, split_key(key, n), strict=True)):
            x = layer(x, pos, mask, k, first_only=first_only and i == n - 1)
        return self.norm(x)


class ACT(nnx.Module):
    """Action Chunking Transformer over state observations (see the module docstring)."""

    def __init__(self, config: ACTConfig, obs_dim: int, action_dim: int, *, rngs: nnx.Rngs, image_shape=None):
        c = config
        d = c.dim_model
        self.config = config
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.vision = None if image_shape is None else ImageEncoder(c, image_shape, rngs=rngs, vectors=False)
        self.image_proj = None if image_shape is None else nnx.Conv(
            self.vision.channels, d, kernel_size=(1, 1), kernel_init=lecun_normal, bias_init=zeros, rngs=rngs)
        # Main encoder / decoder.
        self.obs_proj = linear(obs_dim, d, rngs=rngs)
        self.latent_proj = linear(c.latent_dim, d, rngs=rngs)
        self.enc_pos = embedding(rngs, 1, 1 + c.n_obs_steps, d, std=1.0)
        self.encoder = Encoder(c, c.n_encoder_layers, rngs=rngs)
        self.query_pos = embedding(rngs, 1, c.chunk_size, d, std=1.0)
        self.decoder = nnx.List([DecoderLayer(c, rngs=rngs) for _ in range(c.n_decoder_layers)])
        self.decoder_norm = layer_norm(d, rngs=rngs)
        self.head = linear(d, action_dim, rngs=rngs)
        # CVAE encoder.
        if c.use_vae:
            self.vae_cls = embedding(rngs, 1, 1, d, std=1.0)
            self.vae_obs_proj = linear(obs_dim, d, rngs=rngs)
            self.vae_action_proj = linear(action_dim, d, rngs=rngs)
            self.vae_encoder = Encoder(c, c.n_vae_encoder_layers, rngs=rngs)
            self.vae_out = linear(d, 2 * c.latent_dim, rngs=rngs)

    def _posterior(self, batch: Batch, key):
        """mu, logvar (B, latent_dim) of q(z | obs window, action chunk)."""
        b = batch.obs.shape[0]
        d = self.config.dim_model
        cls = jnp.broadcast_to(self.vae_cls[...], (b, 1, d))
        obs, act = self.vae_obs_proj(batch.obs), self.vae_action_proj(batch.action)
        tokens = jnp.concatenate([cls, obs, act], axis=1)
        mask = jnp.concatenate([jnp.ones((b, 1), bool), batch.obs_mask.astype(bool),
                                batch.action_mask.astype(bool)], axis=1)
        pos = jnp.asarray(sinusoidal_table(tokens.shape[1], d))[None]
        out = self.vae_out(self.vae_encoder(tokens, pos, mask, key, first_only=True)[:, 0])
        mu, logvar = jnp.split(out, 2, axis=-1)
        return mu, logvar

    def _image_tokens(self, images, key):
        """images (B, n_obs, cameras, H, W, 3) -> tokens (B, cameras * h * w, D) of the current frame,
        positions (1, cameras * h * w, D)."""
        fmap = self.image_proj(self.vision.feature_map(images[:, -1], key))     # (B, cams, h, w, D)
        b, cams, h, w, d = fmap.shape
        pos = jnp.asarray(np.tile(sincos_2d(h, w, d).reshape(1, h * w, d), (1, cams, 1)))
        return fmap.reshape(b, cams * h * w, d), pos

    def _decode(self, obs, obs_mask, latent, key, images=None, aug_key=None):
        """obs (B, n_obs, obs_dim), obs_mask (B, n_obs), latent (B, latent_dim), images (B, n_obs,
        cameras, H, W, 3) or None -> (B, chunk, action_dim)."""
        b = obs.shape[0]
        k_enc, k_dec = split_key(key, 2)
        tokens = jnp.concatenate([self.latent_proj(latent)[:, None], self.obs_proj(obs)], axis=1)
        mask = jnp.concatenate([jnp.ones((b, 1), bool), obs_mask.astype(bool)], axis=1)
        pos = self.enc_pos[...]
        if (self.vision is None) != (images is None):
            raise CaliperError("this ACT sees cameras but was given no images" if images is None else
                               "this ACT was built without cameras but was given images")
        if images is not None:
            img, img_pos = self._image_tokens(images, aug_key)
            tokens = jnp.concatenate([tokens, img], axis=1)
            mask = jnp.concatenate([mask, jnp.ones(img.shape[:2], bool)], axis=1)
            pos = jnp.concatenate([pos, img_pos], axis=1)
        memory = self.encoder(tokens, pos, mask, k_enc)
        query_pos = self.query_pos[...]
        x = jnp.zeros((1, self.config.chunk_size, self.config.dim_model), memory.dtype)  # same for all b
        for layer, k in zip(self.decoder, split_key(k_dec, len(self.decoder)), strict=True):
            x = layer(x, query_pos, memory, pos, mask, k)
        return self.head(self.decoder_norm(x))

    def loss(self, batch: Batch, key: jax.Array) -> tuple[jax.Array, dict]:
        """Masked L1 (+ kl_weight * KL with the CVAE)."""
        k_vae, k_net = split_key(key, 2)  # dropout seeds (hashed from key; the CVAE noise is threefry's)
        b = batch.obs.shape[0]
        if self.config.use_vae:
            mu, logvar = self._posterior(batch, k_vae)
            latent = mu + jnp.exp(0.5 * logvar) * jax.random.normal(key, mu.shape, mu.dtype)
        else:
            latent = jnp.zeros((b, self.config.latent_dim), jnp.float32)
        pred = self._decode(batch.obs, batch.obs_mask, latent, k_net, batch.images, key)
        l1 = masked_mean(jnp.abs(pred - batch.action), batch.action_mask)
        if not self.config.use_vae:
            return l1, {"l1": l1}
        kl = jnp.mean(jnp.sum(-0.5 * (1.0 + logvar - jnp.square(mu) - jnp.exp(logvar)), axis=-1))
        return l1 + self.config.kl_weight * kl, {"l1": l1, "kl": kl}

    def sample(self, obs: jax.Array, obs_mask: jax.Array, key: jax.Array, images=None) -> jax.Array:
        """(B, n_obs_steps, obs_dim), (B, n_obs_steps), images (B, n_obs_steps, cameras, H, W, 3) or
        None -> (B, chunk_size, action_dim); zero latent."""
        latent = jnp.zeros((obs.shape[0], self.config.latent_dim), jnp.float32)
        return self._decode(obs, obs_mask, latent, key, images)


__all__ = ["ACT"]
