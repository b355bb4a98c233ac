"""Seeded random streams for the planners (JAX PRNG, drawn in blocks, consumed on the host).

A :class:`Sampler` turns one ``jax.random`` key into a deterministic stream of joint-space samples
and uniform numbers: the same key gives the same stream, hence the same plan, on every run.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

BLOCK = 256


def as_key(seed_or_key):
    """An int seed or a JAX key -> a JAX key."""
    if isinstance(seed_or_key, (int, np.integer)):
        return jax.random.PRNGKey(int(seed_or_key))
    return seed_or_key


@jax.jit
def _draw(key, lo, hi):
    k_next, k_q, k_u = jax.random.split(key, 3)
    dtype = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    q = jax.random.uniform(k_q, (BLOCK, lo.shape[0]), dtype=dtype, minval=lo, maxval=hi)
    u = jax.random.uniform(k_u, (BLOCK, 4))
    return k_next, q, u


class Sampler:
    """Uniform configurations inside ``[lower, upper]`` (infinite bounds replaced by
    +-``unbounded``) and uniform numbers in [0, 1), from one key."""

    def __init__(self, key, lower, upper, unbounded: float = np.pi):
        lo = np.where(np.isfinite(lower), lower, -unbounded)
        hi = np.where(np.isfinite(upper), upper, unbounded)
        self._lo, self._hi = jnp.asarray(lo), jnp.asarray(hi)
        self._key = as_key(key)
        self._q = np.zeros((0, len(lo)))
        self._u = np.zeros((0,))

    def _refill(self):
        self._key, q, u = _draw(self._key, self._lo, self._hi)
        self._q = np.concatenate([self._q, np.asarray(q, dtype=np.float64)])
        self._u = np.concatenate([self._u, np.asarray(u, dtype=np.float64).reshape(-1)])

    def configs(self, n: int) -> np.ndarray:
        while self._q.shape[0] < n:
            self._refill()
        out, self._q = self._q[:n], self._q[n:]
        return out

    def config(self) -> np.ndarray:
        return self.configs(1)[0]

    def uniform(self, n: int = 1) -> np.ndarray:
        while self._u.shape[0] < n:
            self._refill()
        out, self._u = self._u[:n], self._u[n:]
        return out

    def key(self):
        """A fresh JAX key from this sampler's stream (for a jitted search that draws its own
        samples); later draws stay deterministic."""
        self._key, sub = jax.random.split(self._key)
        return sub

    @property
    def box(self) -> tuple[np.ndarray, np.ndarray]:
        """The finite sampling box (lower, upper), (nq,) each."""
        return np.asarray(self._lo, np.float64), np.asarray(self._hi, np.float64)

    def integers(self, n: int, high: int) -> np.ndarray:
        """n integers in [0, high)."""
        return np.minimum((self.uniform(n) * high).astype(np.int64), high - 1)
