"""Depth-sensor noise with an explicit PRNG key, re-gated to the sensor's range.

``noisy_depth`` adds zero-mean Gaussian noise with standard deviation ``sigma + sigma_rel * depth``
(metres; range-proportional term for structured-light / time-of-flight sensors), drops each valid
reading with probability ``dropout``, and then applies the sensor's ``[min_range, max_range]`` gate
again: a reading pushed outside the range becomes a miss (``inf``), never a clipped value. Misses
stay misses. Works on any shape (depth images, LiDAR ranges) and under ``vmap``/``jit``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from caliper_jax.errors import CaliperError


def noisy_depth(key, depth, *, min_range=0.0, max_range=jnp.inf, sigma=0.0, sigma_rel=0.0,
                dropout=0.0):
    """``depth`` (...) with misses as inf -> noisy ``depth`` (...), misses inf."""
    for name, v in (("sigma", sigma), ("sigma_rel", sigma_rel)):
        if isinstance(v, (int, float)) and v < 0:
            raise CaliperError(f"noisy_depth: {name} must be >= 0, got {v}")
    if isinstance(dropout, (int, float)) and not 0.0 <= dropout <= 1.0:
        raise CaliperError(f"noisy_depth: dropout must be in [0, 1], got {dropout}")
    depth = jnp.asarray(depth)
    dtype = jnp.result_type(depth.dtype, jnp.float32)
    depth = depth.astype(dtype)
    k_noise, k_drop = jax.random.split(key)
    valid = jnp.isfinite(depth)
    d0 = jnp.where(valid, depth, 0.0)
    noisy = d0 + (sigma + sigma_rel * d0) * jax.random.normal(k_noise, depth.shape, dtype)
    keep = valid & (jax.random.uniform(k_drop, depth.shape, dtype) >= dropout)
    keep = keep & (noisy >= min_range) & (noisy <= max_range)
    return jnp.where(keep, noisy, jnp.inf)


def noisy_frame(key, frame: dict, camera, *, sigma=0.0, sigma_rel=0.0, dropout=0.0) -> dict:
    """A rendered frame (:func:`caliper_jax.rays.camera.render`) with noisy depth; pixels that
    became misses get segmentation -1 and a zero normal (rgb is left as rendered)."""
    depth = noisy_depth(key, frame["depth"], min_range=camera.min_range, max_range=camera.max_range,
                        sigma=sigma, sigma_rel=sigma_rel, dropout=dropout)
    ok = jnp.isfinite(depth)
    return {**frame, "depth": depth, "segmentation": jnp.where(ok, frame["segmentation"], -1),
            "normal": jnp.where(ok[..., None], frame["normal"], 0.0)}
