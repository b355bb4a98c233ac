"""Image encoders for policies that see (flax NNX, trained from scratch: no pretrained weights).

Images arrive normalised (:meth:`learn.normalize.Normalizer.images`), channels last: (..., H, W, 3).

* :class:`ConvBackbone` (``vision_backbone="conv"``, the CPU default): four 3x3 convolutions with
  ReLU, strides 2, 2, 2, 1, channels ``w, w, 2w, 2w`` (``w = vision_width``): a 96x96 image gives a
  12x12 feature map.
* :class:`ResNet18` (``"resnet18"``): ResNet-18's layout (7x7/2 stem, 3x3/2 max pool, four stages of
  two basic blocks, channels ``w, 2w, 4w, 8w``, strides 1, 2, 2, 2); ``vision_width=64`` is
  ResNet-18's own width. A 96x96 image gives a 3x3 feature map. Its norm (``vision_norm``):
  ``"group"`` -- GroupNorm (``C // 16`` groups) in place of BatchNorm, as diffusion policy does;
  ``"affine"`` -- a learned per-channel scale and bias, no statistics (:class:`ChannelAffine`);
  ``"frozen"`` -- the same held fixed at 1 and 0, no gradients: torchvision's FrozenBatchNorm2d as
  lerobot's ACT trunk uses it without pretrained weights (there are none here), i.e. no norm.
* :class:`SpatialSoftmax`: a 1x1 convolution to ``K`` keypoint maps, a softmax over positions and
  the expected (x, y) in [-1, 1] of each: (..., 2K) (Levine et al.; diffusion policy's pooling).
* :class:`ImageEncoder`: backbone + (optionally) spatial softmax -> Linear -> ReLU to one
  ``image_feature_dim`` vector per camera (BC, diffusion), or the feature map itself (ACT's image
  tokens, with :func:`sincos_2d` positions). In training mode (``module.train()``) it first applies
  :func:`random_shift` with the loss's explicit key.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from learn.policies.layers import group_norm, lecun_normal, linear, zeros


def conv2d(cin: int, cout: int, kernel: int, stride: int = 1, *, rngs: nnx.Rngs,
           bias: bool = True) -> nnx.Conv:
    """2-D convolution (SAME padding) over (..., H, W, C)."""
    return nnx.Conv(cin, cout, kernel_size=(kernel, kernel), strides=(stride, stride), padding="SAME",
                    use_bias=bias, kernel_init=lecun_normal, bias_init=zeros, rngs=rngs)


def _down(n: int, stride: int) -> int:
    return -(-n // stride)


def random_shift(images: jax.Array, key: jax.Array, pad: int) -> jax.Array:
    """Random-shift augmentation (DrQ; diffusion policy's and lerobot's random crop): each image of
    ``images`` (..., H, W, C) is edge-padded by ``pad`` pixels and cropped back to H x W at an offset
    drawn uniformly from [0, 2 pad] per axis from ``key``. Same key -> same bytes."""
    if pad <= 0:
        return images
    shape = images.shape
    h, w, c = shape[-3:]
    flat = images.reshape((-1, h, w, c))
    padded = jnp.pad(flat, ((0, 0), (pad, pad), (pad, pad), (0, 0)), mode="edge")
    offsets = jax.random.randint(key, (flat.shape[0], 2), 0, 2 * pad + 1)

    def crop(img, off):
        return jax.lax.dynamic_slice(img, (off[0], off[1], 0), (h, w, c))

    return jax.vmap(crop)(padded, offsets).reshape(shape)


def sincos_2d(h: int, w: int, dim: int, temperature: float = 10000.0) -> np.ndarray:
    """(h, w, dim) float32 fixed 2-D sinusoidal position embedding (DETR / lerobot ACT): the first
    half of the channels encodes the row, the second the column; positions are scaled to
    (0, 2 pi]; channel pairs alternate sin / cos."""
    half = dim // 2
    i = np.arange(half)
    inv = temperature ** (2 * (i // 2) / half)

    def axis(n):
        pos = (np.arange(1, n + 1) / n * 2 * math.pi)[:, None] / inv                 # (n, half)
        return np.where(i % 2 == 0, np.sin(pos), np.cos(pos))

    y = np.broadcast_to(axis(h)[:, None, :], (h, w, half))
    x = np.broadcast_to(axis(w)[None, :, :], (h, w, half))
    out = np.concatenate([y, x], axis=-1)
    if dim % 2:
        out = np.pad(out, ((0, 0), (0, 0), (0, 1)))
    return out.astype(np.float32)


def max_pool_3x3_s2(x):
    """3x3 max pool, stride 2, SAME padding over (M, H, W, C) -> (M, ceil(H/2), ceil(W/2), C): the
    values of ``reduce_window`` (ResNet's stem pool), as the maximum of 9 strided slices, whose
    gradient is a few fused selects instead of XLA's select-and-scatter (4x faster fwd+bwd on the CPU
    at 64 x 48x48x64; the same gradient but at exact ties, which after the ReLU are zeros whose
    gradient the ReLU stops anyway)."""
    _, h, w, _ = x.shape
    oh, ow = -(-h // 2), -(-w // 2)
    ph, pw = max(2 * oh + 1 - h, 0), max(2 * ow + 1 - w, 0)
    xp = jnp.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)),
                 constant_values=-jnp.inf)
    out = xp[:, :2 * oh - 1:2, :2 * ow - 1:2]
    for i in range(3):                  # unrolled at trace time: 8 fused maxima
        for j in range(3):
            if i or j:
                out = jnp.maximum(out, xp[:, i:i + 2 * oh - 1:2, j:j + 2 * ow - 1:2])
    return out


class ConvBackbone(nnx.Module):
    """Small conv net (module doc): (..., H, W, 3) -> (..., ceil(H/8), ceil(W/8), 2w)."""

    def __init__(self, width: int, *, rngs: nnx.Rngs):
        chans = (3, width, width, 2 * width, 2 * width)
        self.convs = nnx.List([conv2d(a, b, 3, s, rngs=rngs)
                               for a, b, s in zip(chans[:-1], chans[1:], (2, 2, 2, 1), strict=True)])
        self.out_channels = chans[-1]

    def out_size(self, h: int, w: int) -> tuple[int, int]:
        return _down(h, 8), _down(w, 8)

    def __call__(self, x):
        for c in self.convs:
            x = jax.nn.relu(c(x))
        return x


class Fixed(nnx.Variable):
    """A variable that is saved with the weights but never trained (a frozen norm's scale / bias)."""


class ChannelAffine(nnx.Module):
    """Per-channel ``x * scale + bias`` over (..., C): no statistics, so no normalisation cost.
    ``trainable`` False holds scale 1 and bias 0 as :class:`Fixed` variables (FrozenBatchNorm2d)."""

    def __init__(self, channels: int, *, trainable: bool = True):
        kind = nnx.Param if trainable else Fixed
        self.scale = kind(jnp.ones((channels,), jnp.float32))
        self.bias = kind(jnp.zeros((channels,), jnp.float32))

    def __call__(self, x):
        return x * self.scale[...] + self.bias[...]


def make_norm(kind: str, channels: int, *, rngs: nnx.Rngs):
    """The ResNet norm ``kind`` (module doc: "group", "affine", "frozen") over ``channels``."""
    if kind == "group":
        return group_norm(channels, max(1, channels // 16), rngs=rngs)
    return ChannelAffine(channels, trainable=kind == "affine")


class BasicBlock(nnx.Module):
    """ResNet basic block: conv3x3(stride)-norm-ReLU-conv3x3-norm + shortcut, ReLU."""

    def __init__(self, cin: int, cout: int, stride: int, *, rngs: nnx.Rngs, norm: str = "group"):
        self.conv1 = conv2d(cin, cout, 3, stride, rngs=rngs, bias=False)
        self.norm1 = make_norm(norm, cout, rngs=rngs)
        self.conv2 = conv2d(cout, cout, 3, 1, rngs=rngs, bias=False)
        self.norm2 = make_norm(norm, cout, rngs=rngs)
        change = stride != 1 or cin != cout
        self.short = conv2d(cin, cout, 1, stride, rngs=rngs, bias=False) if change else None
        self.short_norm = make_norm(norm, cout, rngs=rngs) if change else None

    def __call__(self, x):
        h = jax.nn.relu(self.norm1(self.conv1(x)))
        h = self.norm2(self.conv2(h))
        s = x if self.short is None else self.short_norm(self.short(x))
        return jax.nn.relu(h + s)


class ResNet18(nnx.Module):
    """ResNet-18 with the norm ``norm`` (module doc): (..., H, W, 3) -> (..., ceil(H/32), ceil(W/32),
    8w)."""

    def __init__(self, width: int, *, rngs: nnx.Rngs, norm: str = "group"):
        self.stem = conv2d(3, width, 7, 2, rngs=rngs, bias=False)
        self.stem_norm = make_norm(norm, width, rngs=rngs)
        blocks, cin = [], width
        for i, stride in enumerate((1, 2, 2, 2)):
            cout = width * 2 ** i
            blocks += [BasicBlock(cin, cout, stride, rngs=rngs, norm=norm),
                       BasicBlock(cout, cout, 1, rngs=rngs, norm=norm)]
            cin = cout
        self.blocks = nnx.List(blocks)
        self.out_channels = cin

    def out_size(self, h: int, w: int) -> tuple[int, int]:
        return _down(h, 32), _down(w, 32)

    def __call__(self, x):
        """x (M, H, W, 3) -> (M, h, w, 8w)."""
        x = jax.nn.relu(self.stem_norm(self.stem(x)))
        x = max_pool_3x3_s2(x)
        for b in self.blocks:
            x = b(x)
        return x


class SpatialSoftmax(nnx.Module):
    """(..., h, w, C) -> (..., 2K): expected (x, y) in [-1, 1] of K softmax keypoint maps."""

    def __init__(self, channels: int, keypoints: int, h: int, w: int, *, rngs: nnx.Rngs):
        self.proj = conv2d(channels, keypoints, 1, rngs=rngs)
        self.h, self.w = int(h), int(w)

    def __call__(self, x):
        k = self.proj(x)
        k = k.reshape((*k.shape[:-3], -1, k.shape[-1]))                   # (..., h*w, K)
        attn = jax.nn.softmax(k, axis=-2)
        ys, xs = np.meshgrid(np.linspace(-1.0, 1.0, self.h), np.linspace(-1.0, 1.0, self.w), indexing="ij")
        grid = jnp.asarray(np.stack([xs.reshape(-1), ys.reshape(-1)], -1), jnp.float32)   # (h*w, 2) x, y
        pts = jnp.einsum("...pk,pc->...kc", attn, grid)                    # (..., K, 2)
        return pts.reshape((*pts.shape[:-2], -1))


class ImageEncoder(nnx.Module):
    """The cameras' encoder of a policy (module doc). ``image_shape`` (cameras, H, W)."""

    def __init__(self, config, image_shape, *, rngs: nnx.Rngs, vectors: bool = True):
        self.n_cameras, h, w = (int(x) for x in image_shape)
        self.shift = int(config.image_shift)
        self.deterministic = False
        if config.vision_backbone == "resnet18":
            self.backbone = ResNet18(int(config.vision_width), rngs=rngs, norm=config.vision_norm)
        else:
            self.backbone = ConvBackbone(int(config.vision_width), rngs=rngs)
        self.channels = self.backbone.out_channels
        self.map_size = self.backbone.out_size(h, w)
        self.feature_dim = int(config.image_feature_dim) if vectors else 0
        if vectors:
            self.pool = SpatialSoftmax(self.channels, int(config.spatial_keypoints), *self.map_size,
                                       rngs=rngs)
            self.out = linear(2 * int(config.spatial_keypoints), self.feature_dim, rngs=rngs)

    def augment(self, images, key):
        """Random shift in training mode with a key; the identity otherwise."""
        if self.deterministic or key is None or self.shift == 0:
            return images
        return random_shift(images, jax.random.fold_in(key, 0x1AB), self.shift)

    def feature_map(self, images, key=None):
        """(..., H, W, 3) -> (..., h, w, channels) (the backbone sees one image per row, so the
        GroupNorm statistics are per image)."""
        images = self.augment(images, key)
        lead = images.shape[:-3]
        out = self.backbone(images.reshape((-1, *images.shape[-3:])))
        return out.reshape((*lead, *out.shape[-3:]))

    def vectors(self, images, key=None):
        """(B, T, cameras, H, W, 3) -> (B, T, cameras * image_feature_dim)."""
        v = jax.nn.relu(self.out(self.pool(self.feature_map(images, key))))
        return v.reshape((*v.shape[:-2], -1))


def features_with_images(encoder, obs, images, key):
    """Per-frame policy inputs: ``obs`` (B, T, obs_dim) with each camera's feature vector appended
    (B, T, obs_dim + cameras * image_feature_dim) when ``encoder`` is an :class:`ImageEncoder`;
    ``obs`` itself without one. A missing or extra ``images`` is a CaliperError."""
    from caliper_jax.errors import CaliperError

    if encoder is None:
        if images is not None:
            raise CaliperError("this policy was built without cameras but was given images")
        return obs
    if images is None:
        raise CaliperError("this policy sees cameras but was given no images")
    return jnp.concatenate([obs, encoder.vectors(images, key)], axis=-1)


__all__ = ["BasicBlock", "ChannelAffine", "ConvBackbone", "Fixed", "ImageEncoder",
           "ResNet18", "SpatialSoftmax", "conv2d", "features_with_images", "make_norm", "max_pool_3x3_s2",
           "random_shift",
           "sincos_2d"]
