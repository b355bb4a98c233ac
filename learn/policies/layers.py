"""Building blocks shared by the policies: fast initialisers, a keyed dropout, an MLP, a small
multi-head attention, masked losses and sinusoidal embeddings.

Randomness is explicit: every block that drops out takes ``key`` (a JAX PRNG key, or None for no
dropout) and its :class:`Dropout` children hold no RNG state of their own, so a module's state is
its parameters only and ``module.eval()`` (``deterministic=True``) switches dropout off.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from caliper_jax.errors import CaliperError

_NEG = -1e9  # additive mask for attention logits (finite: a fully masked row stays NaN-free)

# -- initialisers ---------------------------------------------------------------------------------
# flax's initialisers draw each parameter with its own shape; built eagerly, every new shape compiles
# its own threefry + truncated-normal program (~0.3-1 s each on a small CPU: a U-Net took 20 s to
# build). These draw fixed-size blocks from one compiled program and cut/scale them on the host, so
# a policy builds in well under a second. Same distributions as flax's defaults (lecun-normal
# kernels, zero biases, unit norm scales); under a trace (nnx.jit / nnx.eval_shape) the same values
# come from the same program, cut with jnp instead.
_BLOCK = 1 << 14
_TRUNC_STD = 0.87962566103423978  # std of a standard normal truncated to (-2, 2)


@jax.jit
def _normal_block(key: jax.Array) -> jax.Array:
    """(_BLOCK,) float32 truncated normal on (-2, 2) rescaled to unit variance."""
    return jax.random.truncated_normal(key, -2.0, 2.0, (_BLOCK,), jnp.float32) / _TRUNC_STD


def normal_init(key: jax.Array, shape, std: float, dtype=jnp.float32) -> jax.Array:
    """Truncated normal (+-2 std) of ``shape`` with standard deviation ``std``."""
    shape = tuple(shape)
    n = math.prod(shape)
    blocks = [_normal_block(jax.random.fold_in(key, i)) for i in range(max(1, -(-n // _BLOCK)))]
    if isinstance(key, jax.core.Tracer):
        return (jnp.concatenate(blocks)[:n].reshape(shape) * std).astype(dtype)
    flat = np.concatenate([np.asarray(b) for b in blocks])[:n]
    return jnp.asarray((flat.reshape(shape) * np.float32(std)).astype(dtype))


def lecun_normal(key: jax.Array, shape, dtype=jnp.float32) -> jax.Array:
    """Lecun-normal kernel: fan_in = prod(shape[:-1]) (Linear (in, out), Conv (k, in, out))."""
    return normal_init(key, shape, 1.0 / math.sqrt(max(1, math.prod(shape[:-1]))), dtype)


def zeros(key, shape, dtype=jnp.float32) -> jax.Array:
    del key
    return jnp.asarray(np.zeros(shape, dtype))


def ones(key, shape, dtype=jnp.float32) -> jax.Array:
    del key
    return jnp.asarray(np.ones(shape, dtype))


def linear(din: int, dout: int, *, rngs: nnx.Rngs) -> nnx.Linear:
    return nnx.Linear(din, dout, kernel_init=lecun_normal, bias_init=zeros, rngs=rngs)


def conv(cin: int, cout: int, kernel: int, *, rngs: nnx.Rngs, transpose: bool = False, **kw):
    """1-D (transposed) convolution over (B, T, C)."""
    cls = nnx.ConvTranspose if transpose else nnx.Conv
    return cls(cin, cout, kernel_size=(kernel,), kernel_init=lecun_normal, bias_init=zeros, rngs=rngs, **kw)


def layer_norm(dim: int, *, rngs: nnx.Rngs) -> nnx.LayerNorm:
    return nnx.LayerNorm(dim, scale_init=ones, bias_init=zeros, rngs=rngs)


def group_norm(channels: int, groups: int, *, rngs: nnx.Rngs) -> nnx.GroupNorm:
    return nnx.GroupNorm(channels, num_groups=groups, scale_init=ones, bias_init=zeros, rngs=rngs)


def embedding(rngs: nnx.Rngs, *shape, std: float = 0.02) -> nnx.Param:
    """A learned embedding table/token initialised N(0, std^2) (truncated at 2 std)."""
    return nnx.Param(normal_init(rngs.params(), shape, std))


# -- keyed dropout ---------------------------------------------------------------------------------
def _fmix(h: jax.Array) -> jax.Array:
    """murmur3's 32-bit finaliser: a cheap bijective avalanche of uint32 words."""
    h = (h ^ (h >> 16)) * jnp.uint32(0x85EBCA6B)
    h = (h ^ (h >> 13)) * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def _seed(key: jax.Array) -> jax.Array:
    """The two uint32 words of a JAX PRNG key (typed or raw) or of a :func:`split_key` seed."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return key.reshape(-1)[-2:].astype(jnp.uint32)


def split_key(key, n: int) -> list:
    """``n`` dropout seeds (uint32 (2,)) derived from ``key`` (a JAX PRNG key or such a seed) by
    integer hashing, or ``n`` Nones when ``key`` is None. Only for :class:`Dropout`: threefry
    splits would cost a compiled threefry program per call site."""
    if key is None:
        return [None] * n
    s = _seed(key)
    a = _fmix(s[0] ^ _fmix(jnp.arange(n, dtype=jnp.uint32) * jnp.uint32(0x9E3779B9) + jnp.uint32(0x632BE5AB)))
    b = _fmix(s[1] + _fmix(a ^ jnp.uint32(0x5BD1E995)))
    return list(jnp.stack([a, b], axis=-1))


def masked_mean(err: jax.Array, mask: jax.Array) -> jax.Array:
    """Mean of ``err`` (B, T, D) over the entries whose ``mask`` (B, T) is True (0 if none)."""
    m = mask.astype(err.dtype)[..., None]
    count = jnp.sum(m) * err.shape[-1]
    return jnp.sum(err * m) / jnp.maximum(count, 1.0)


def sinusoidal_embedding(t: jax.Array, dim: int, max_period: float = 10000.0) -> jax.Array:
    """Sinusoidal embedding (..., dim) of (integer or real) positions/timesteps ``t`` (...)."""
    half = dim // 2
    freqs = jnp.exp(-math.log(max_period) * jnp.arange(half, dtype=jnp.float32) / max(half - 1, 1))
    args = jnp.asarray(t, jnp.float32)[..., None] * freqs
    emb = jnp.concatenate([jnp.sin(args), jnp.cos(args)], axis=-1)
    if dim % 2:
        emb = jnp.pad(emb, [(0, 0)] * (emb.ndim - 1) + [(0, 1)])
    return emb


def sinusoidal_table(n: int, dim: int) -> np.ndarray:
    """Fixed (n, dim) sinusoidal position table (a NumPy constant, not a parameter)."""
    pos = np.arange(n, dtype=np.float64)[:, None]
    i = np.arange(dim)[None, :]
    angle = pos / np.power(10000.0, 2 * (i // 2) / dim)
    return np.where(i % 2 == 0, np.sin(angle), np.cos(angle)).astype(np.float32)


def _hash_bits(key: jax.Array, shape: tuple) -> jax.Array:
    """uint32 bits of ``shape``: a counter-based hash of the element index seeded by ``key`` (a JAX
    key or a :func:`split_key` seed). ~10x cheaper than threefry to compile and to run on CPU;
    ample quality for dropout masks, not meant for anything statistical beyond that."""
    s = _seed(key)
    h = _fmix(jax.lax.iota(jnp.uint32, math.prod(shape)) * jnp.uint32(0x9E3779B9) + s[0])
    return _fmix(h ^ s[1]).reshape(shape)


class Dropout(nnx.Module):
    """Inverted dropout with an explicit key: ``drop(x, key)``; the identity when ``key`` is None,
    ``rate`` is 0 or the module is in eval mode (``deterministic``, set by ``module.eval()``)."""

    def __init__(self, rate: float, *, deterministic: bool = False):
        if not 0.0 <= rate < 1.0:
            raise CaliperError(f"dropout must be in [0, 1), got {rate!r}")
        self.rate = float(rate)
        self.deterministic = deterministic

    def __call__(self, x: jax.Array, key, full_shape=None) -> jax.Array:
        """x (...) -> (...); ``key``: a JAX key, a :func:`split_key` seed, or None. ``full_shape``:
        ``x`` is the leading corner (``[:n0, :n1, ...]``) of a tensor of that shape; it gets the
        corner of that tensor's mask (the same mask as dropping the whole tensor and slicing)."""
        if key is None or self.deterministic or self.rate == 0.0:
            return x
        bits = _hash_bits(key, tuple(x.shape if full_shape is None else full_shape))
        bits = bits[tuple(slice(0, n) for n in x.shape)] if full_shape is not None else bits
        keep = bits >= jnp.uint32(min(int(self.rate * 2.0 ** 32), 2 ** 32 - 1))
        return jnp.where(keep, x / (1.0 - self.rate), jnp.zeros_like(x))


class MLP(nnx.Module):
    """``din`` -> hidden layers (activation, dropout) -> ``dout`` (linear output)."""

    def __init__(self, din: int, hidden: tuple, dout: int, *, activation=jax.nn.gelu,
                 dropout_rate: float = 0.0, rngs: nnx.Rngs):
        sizes = (din, *hidden)
        pairs = zip(sizes[:-1], sizes[1:], strict=True)
        self.layers = nnx.List([linear(a, b, rngs=rngs) for a, b in pairs])
        self.out = linear(sizes[-1], dout, rngs=rngs)
        self.drop = Dropout(dropout_rate)
        self.activation = activation

    def __call__(self, x: jax.Array, key=None) -> jax.Array:
        """(..., din) -> (..., dout)."""
        keys = split_key(key, len(self.layers))
        for layer, k in zip(self.layers, keys, strict=True):
            x = self.drop(self.activation(layer(x)), k)
        return self.out(x)


class Attention(nnx.Module):
    """Multi-head attention, written out (einsum + softmax; cheaper to compile and run on CPU than
    the general nnx.MultiHeadAttention). ``mask`` (B, Tk) True marks keys that may be attended."""

    def __init__(self, dim: int, n_heads: int, *, rngs: nnx.Rngs):
        if dim % n_heads:
            raise CaliperError(f"act config: dim_model ({dim}) is not divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.q = linear(dim, dim, rngs=rngs)
        self.k = linear(dim, dim, rngs=rngs)
        self.v = linear(dim, dim, rngs=rngs)
        self.o = linear(dim, dim, rngs=rngs)

    def __call__(self, q_in: jax.Array, k_in: jax.Array, v_in: jax.Array, mask=None) -> jax.Array:
        """q_in (B, Tq, D), k_in/v_in (B, Tk, D), mask (B, Tk) bool or None -> (B, Tq, D)."""
        b, tq, d = q_in.shape
        h = self.n_heads
        q = self.q(q_in).reshape(b, tq, h, d // h)
        k = self.k(k_in).reshape(b, -1, h, d // h)
        v = self.v(v_in).reshape(b, -1, h, d // h)
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // h)
        if mask is not None:
            logits = jnp.where(mask[:, None, None, :], logits, _NEG)
        w = jax.nn.softmax(logits, axis=-1)
        out = jnp.einsum("bhqk,bkhd->bqhd", w, v).reshape(b, tq, d)
        return self.o(out)


__all__ = ["MLP", "Attention", "Dropout", "conv", "embedding", "group_norm", "layer_norm", "lecun_normal",
           "linear", "masked_mean", "normal_init", "ones", "sinusoidal_embedding", "sinusoidal_table",
           "split_key", "zeros"]
