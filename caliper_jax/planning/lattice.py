"""The pieces the jitted planning loops share (:mod:`caliper_jax.planning.vrrt`'s search and
:mod:`caliper_jax.planning.vshortcut`'s smoothing): the dyadic edge-check grid in bisection order
and a counter-based uniform stream that is cheap to compile inside a loop body."""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np


def bisection_order(levels: int) -> np.ndarray:
    """The fractions ``j / 2^levels``, ``j = 1 .. 2^levels - 1``, in van der Corput order
    (1/2, 1/4, 3/4, 1/8, ...): each prefix of length ``2^k - 1`` is the grid ``j / 2^k``."""
    n = 1 << levels
    m = np.arange(1, n)
    rev = np.zeros_like(m)
    for b in range(levels):
        rev |= ((m >> b) & 1) << (levels - 1 - b)
    return rev / n


def levels_for(span: float, resolution: float) -> int:
    """Smallest ``L`` with ``span / 2^L <= resolution``."""
    return max(0, math.ceil(math.log2(max(span / resolution, 1.0)) - 1e-12))


def _hash32(x):
    """A 32-bit integer finaliser (lowbias32): uint32 -> well-mixed uint32."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def counter_uniform(seed, it, shape, dtype):
    """Uniform [0, 1) numbers for iteration ``it`` from a (2,) uint32 ``seed``: a counter-based
    hash of (seed, iteration, index). Cheap to compile inside a loop body (``jax.random``'s
    threefry costs seconds of compile per call site on CPU); the stream is fixed by the key."""
    n = int(np.prod(shape))
    idx = jnp.arange(n, dtype=jnp.uint32)
    x = _hash32(idx * jnp.uint32(0x9E3779B9) + seed[0] + _hash32(it.astype(jnp.uint32) ^ seed[1]))
    x = _hash32(x ^ seed[1])
    return ((x >> 8).astype(dtype) * dtype(1.0 / (1 << 24))).reshape(shape)


__all__ = ["bisection_order", "counter_uniform", "levels_for"]
