"""Diffusion policy (Chi et al. 2023) over action chunks, state-only.

Training is DDPM with epsilon prediction: t ~ U{0..train_timesteps-1}, x_t = sqrt(abar_t) x0 +
sqrt(1 - abar_t) eps, masked MSE between the predicted and the true eps (padded actions excluded
from the mean, and replaced in x0 by the nearest valid action so they cannot leak in through the
denoiser's input).
Sampling is DDIM (eta = 0, diffusers' "leading" spacing: t = (S-1..0) * (T // S)), starting from
noise drawn from ``key``, with the predicted x0 clipped to +-``clip_sample`` at every step; the
loop is a ``lax.fori_loop``.

Beta schedules: "squaredcos_cap_v2" (Nichol & Dhariwal's cosine, betas clipped at 0.999) and
"linear" (DDPM's 1e-4..0.02, rescaled by 1000 / train_timesteps as in improved-DDPM so short
schedules still end near pure noise).

Conditioning: the flattened observation window (padded frames as recorded; with cameras each
frame's state followed by each camera's image feature vector, :mod:`learn.policies.vision`, encoded
once per sample, outside the denoising loop) concatenated with a sinusoidal timestep embedding
(``time_embed_dim``) passed through Linear-Mish-Linear.

Denoisers:

* "mlp": [noisy chunk flattened, cond] -> ``hidden`` (Mish) -> chunk_size * action_dim.
* "unet": a 1-D conv U-Net over the chunk's time axis (channels ``unet_channels``, ``kernel_size``),
  as in Chi et al.'s ConditionalUnet1D: residual blocks of Conv-GroupNorm-Mish with FiLM (scale,
  bias) from the cond, a stride-2 conv downsample after every level but the last, transposed-conv
  upsampling with skip connections (the deepest level's skip joins the mid blocks' output; as in
  Chi et al., the first level's is unused). A chunk whose length is not a multiple of
  2^(len(unet_channels) - 1) is zero-padded at the end of the time axis and the output cropped back.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from caliper_jax.errors import CaliperError
from learn.config import DiffusionConfig
from learn.policies.base import Batch
from learn.policies.layers import MLP, conv, group_norm, linear, masked_mean, sinusoidal_embedding
from learn.policies.vision import ImageEncoder, features_with_images

_mish = jax.nn.mish


@functools.lru_cache(maxsize=None)
def beta_schedule(name: str, timesteps: int) -> np.ndarray:
    """betas (timesteps,) float64 of the named schedule."""
    if name == "squaredcos_cap_v2":
        def abar(t):
            return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2
        return np.array([min(1 - abar((i + 1) / timesteps) / abar(i / timesteps), 0.999)
                         for i in range(timesteps)])
    if name == "linear":
        scale = 1000.0 / timesteps
        return np.linspace(scale * 1e-4, scale * 0.02, timesteps)
    raise CaliperError(f"diffusion config: unknown beta_schedule {name!r} (known: 'squaredcos_cap_v2', "
                       "'linear')")


def _alphas_cumprod(config: DiffusionConfig) -> np.ndarray:
    return np.cumprod(1.0 - beta_schedule(config.beta_schedule, config.train_timesteps))


def fill_padded(action: jax.Array, mask: jax.Array) -> jax.Array:
    """``action`` (B, T, A) with every padded step (``mask`` (B, T) False) replaced by the nearest
    valid step before it (after it for leading padding), so the noised chunk -- and hence the
    loss -- does not depend on padded values. The dataset already pads this way."""
    t = jnp.arange(action.shape[1])
    mask = mask.astype(bool)
    idx = jax.lax.cummax(jnp.where(mask, t, -1), axis=1)
    idx = jnp.where(idx < 0, jnp.argmax(mask, axis=1)[:, None], idx)
    return jnp.take_along_axis(action, idx[..., None], axis=1)


def _groups(channels: int, preferred: int = 8) -> int:
    return math.gcd(channels, preferred)


class TimeEmbedding(nnx.Module):
    """Integer timesteps (B,) -> (B, dim): sinusoidal -> Linear(4 dim) -> Mish -> Linear(dim)."""

    def __init__(self, dim: int, *, rngs: nnx.Rngs):
        self.dim = dim
        self.l1 = linear(dim, 4 * dim, rngs=rngs)
        self.l2 = linear(4 * dim, dim, rngs=rngs)

    def __call__(self, t):
        return self.l2(_mish(self.l1(sinusoidal_embedding(t, self.dim))))


class MLPDenoiser(nnx.Module):
    """(noisy chunk (B, T, A), cond (B, C)) -> predicted noise (B, T, A)."""

    def __init__(self, chunk: int, action_dim: int, cond_dim: int, hidden: tuple, *, rngs: nnx.Rngs):
        self.net = MLP(chunk * action_dim + cond_dim, tuple(hidden), chunk * action_dim, activation=_mish,
                       rngs=rngs)

    def __call__(self, x, cond):
        b = x.shape[0]
        return self.net(jnp.concatenate([x.reshape(b, -1), cond], axis=-1)).reshape(x.shape)


class ConvBlock(nnx.Module):
    """Conv1d (same padding) -> GroupNorm -> Mish over (B, T, C)."""

    def __init__(self, cin: int, cout: int, k: int, *, rngs: nnx.Rngs):
        self.conv = conv(cin, cout, k, padding="SAME", rngs=rngs)
        self.norm = group_norm(cout, _groups(cout), rngs=rngs)

    def __call__(self, x):
        return _mish(self.norm(self.conv(x)))


class ResBlock(nnx.Module):
    """Two ConvBlocks with FiLM (per-channel scale and bias from ``cond``) between them, plus a
    residual (1x1 conv when the channel count changes)."""

    def __init__(self, cin: int, cout: int, cond_dim: int, k: int, *, rngs: nnx.Rngs):
        self.block1 = ConvBlock(cin, cout, k, rngs=rngs)
        self.block2 = ConvBlock(cout, cout, k, rngs=rngs)
        self.film = linear(cond_dim, 2 * cout, rngs=rngs)
        self.residual = conv(cin, cout, 1, rngs=rngs) if cin != cout else None

    def __call__(self, x, cond):
        """x (B, T, cin), cond (B, cond_dim) -> (B, T, cout)."""
        h = self.block1(x)
        scale, bias = jnp.split(self.film(_mish(cond)), 2, axis=-1)
        h = self.block2(h * scale[:, None] + bias[:, None])
        return h + (x if self.residual is None else self.residual(x))


class UNetDenoiser(nnx.Module):
    """1-D conditional U-Net over the chunk's time axis (see the module docstring)."""

    def __init__(self, chunk: int, action_dim: int, cond_dim: int, channels: tuple, k: int, *,
                 rngs: nnx.Rngs):
        channels = tuple(channels)
        if not channels:
            raise CaliperError("diffusion config: unet_channels must not be empty")
        self.multiple = 2 ** (len(channels) - 1)
        self.chunk = chunk
        ins = (action_dim, *channels[:-1])
        down = []
        for i, (cin, cout) in enumerate(zip(ins, channels, strict=True)):
            last = i == len(channels) - 1
            down.append(nnx.List([
                ResBlock(cin, cout, cond_dim, k, rngs=rngs), ResBlock(cout, cout, cond_dim, k, rngs=rngs),
                None if last else conv(cout, cout, 3, strides=(2,), padding=((1, 1),), rngs=rngs)]))
        self.down = nnx.List(down)
        c = channels[-1]
        self.mid = nnx.List([ResBlock(c, c, cond_dim, k, rngs=rngs), ResBlock(c, c, cond_dim, k, rngs=rngs)])
        up = []
        for cin, cout in zip(reversed(channels[1:]), reversed(channels[:-1]), strict=True):
            up.append(nnx.List([
                ResBlock(2 * cin, cout, cond_dim, k, rngs=rngs), ResBlock(cout, cout, cond_dim, k, rngs=rngs),
                conv(cout, cout, 4, strides=(2,), padding="SAME", transpose=True, rngs=rngs)]))
        self.up = nnx.List(up)
        self.final_block = ConvBlock(channels[0], channels[0], k, rngs=rngs)
        self.final = conv(channels[0], action_dim, 1, rngs=rngs)

    def __call__(self, x, cond):
        """x (B, T, A) noisy chunk, cond (B, C) -> (B, T, A) predicted noise."""
        t = x.shape[1]
        pad = (-t) % self.multiple
        if pad:
            x = jnp.pad(x, ((0, 0), (0, pad), (0, 0)))
        skips = []
        for res1, res2, downsample in self.down:
            x = res2(res1(x, cond), cond)
            skips.append(x)
            if downsample is not None:
                x = downsample(x)
        for res in self.mid:
            x = res(x, cond)
        for res1, res2, upsample in self.up:
            x = jnp.concatenate([x, skips.pop()], axis=-1)
            x = upsample(res2(res1(x, cond), cond))
        x = self.final(self.final_block(x))
        return x[:, :t]


class DiffusionPolicy(nnx.Module):
    """DDPM-trained, DDIM-sampled policy over action chunks (see the module docstring)."""

    def __init__(self, config: DiffusionConfig, obs_dim: int, action_dim: int, *, rngs: nnx.Rngs,
                 image_shape=None):
        c = config
        beta_schedule(c.beta_schedule, c.train_timesteps)  # raises on an unknown schedule
        if not 1 <= c.inference_steps <= c.train_timesteps:
            raise CaliperError(f"diffusion config: inference_steps must be in [1, train_timesteps], got "
                               f"{c.inference_steps}")
        self.config = config
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.time_embed = TimeEmbedding(c.time_embed_dim, rngs=rngs)
        self.vision = None if image_shape is None else ImageEncoder(c, image_shape, rngs=rngs)
        width = obs_dim + (0 if self.vision is None else self.vision.n_cameras * self.vision.feature_dim)
        cond_dim = c.n_obs_steps * width + c.time_embed_dim
        if c.denoiser == "mlp":
            self.denoiser = MLPDenoiser(c.chunk_size, action_dim, cond_dim, c.hidden, rngs=rngs)
        elif c.denoiser == "unet":
            self.denoiser = UNetDenoiser(c.chunk_size, action_dim, cond_dim, c.unet_channels, c.kernel_size,
                                         rngs=rngs)
        else:
            raise CaliperError(f"diffusion config: unknown denoiser {c.denoiser!r} (known: 'mlp', 'unet')")

    def _obs_cond(self, obs, images, key):
        """(B, n_obs_steps * width) flattened window of states (and image features)."""
        return features_with_images(self.vision, obs, images, key).reshape(obs.shape[0], -1)

    def _eps(self, x, obs_cond, t):
        """Predicted noise (B, chunk, A) for noisy chunk x at integer timesteps t (B,)."""
        cond = jnp.concatenate([obs_cond, self.time_embed(t)], axis=-1)
        return self.denoiser(x, cond)

    def loss(self, batch: Batch, key: jax.Array) -> tuple[jax.Array, dict]:
        """Masked MSE between predicted and true noise at a random timestep per sample."""
        c = self.config
        k_t, k_eps = jax.random.split(key)
        b = batch.action.shape[0]
        abar = jnp.asarray(_alphas_cumprod(c), jnp.float32)
        t = jax.random.randint(k_t, (b,), 0, c.train_timesteps)
        eps = jax.random.normal(k_eps, batch.action.shape, jnp.float32)
        a = abar[t][:, None, None]
        x_t = jnp.sqrt(a) * fill_padded(batch.action, batch.action_mask) + jnp.sqrt(1.0 - a) * eps
        obs_cond = self._obs_cond(batch.obs, batch.images, key)
        loss = masked_mean(jnp.square(self._eps(x_t, obs_cond, t) - eps), batch.action_mask)
        return loss, {"mse": loss}

    def sample(self, obs: jax.Array, obs_mask: jax.Array, key: jax.Array, images=None) -> jax.Array:
        """(B, n_obs_steps, obs_dim), (B, n_obs_steps) -> (B, chunk_size, action_dim) by DDIM."""
        del obs_mask
        c = self.config
        b = obs.shape[0]
        obs_cond = self._obs_cond(obs, images, None)
        abar_np = _alphas_cumprod(c)
        ratio = c.train_timesteps // c.inference_steps
        ts = np.arange(c.inference_steps)[::-1] * ratio
        prev = ts - ratio
        a_t = jnp.asarray(abar_np[ts], jnp.float32)
        a_prev = jnp.asarray(np.where(prev >= 0, abar_np[np.maximum(prev, 0)], 1.0), jnp.float32)
        ts = jnp.asarray(ts, jnp.int32)

        def step(i, x):
            eps = self._eps(x, obs_cond, jnp.full((b,), ts[i]))
            x0 = (x - jnp.sqrt(1.0 - a_t[i]) * eps) / jnp.sqrt(a_t[i])
            x0 = jnp.clip(x0, -c.clip_sample, c.clip_sample)
            return jnp.sqrt(a_prev[i]) * x0 + jnp.sqrt(1.0 - a_prev[i]) * eps

        x = jax.random.normal(key, (b, c.chunk_size, self.action_dim), jnp.float32)
        return jax.lax.fori_loop(0, c.inference_steps, step, x)


__all__ = ["DiffusionPolicy", "beta_schedule", "fill_padded"]
