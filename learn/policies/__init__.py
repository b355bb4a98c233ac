"""Policy modules (flax NNX): BC-MLP, ACT and a diffusion policy, built from their configs."""
from __future__ import annotations

from learn.config import ACTConfig, BCConfig, DiffusionConfig, PolicyConfig
from learn.policies.base import Batch, Policy


def build_policy(config: PolicyConfig, obs_dim: int, action_dim: int, *, seed: int = 0,
                 image_shape=None) -> Policy:
    """A freshly initialised policy of ``config``'s kind (weights from ``seed``); ``image_shape``
    (cameras, height, width) adds an image encoder (:mod:`learn.policies.vision`)."""
    from flax import nnx

    rngs = nnx.Rngs(seed)
    if isinstance(config, BCConfig):
        from learn.policies.bc_mlp import BCMLP as cls
    elif isinstance(config, ACTConfig):
        from learn.policies.act import ACT as cls
    elif isinstance(config, DiffusionConfig):
        from learn.policies.diffusion import DiffusionPolicy as cls
    else:
        from caliper_jax.errors import CaliperError
        raise CaliperError(f"no policy for config {type(config).__name__}")
    shape = None if image_shape is None else tuple(int(x) for x in image_shape)
    return cls(config, int(obs_dim), int(action_dim), rngs=rngs, image_shape=shape)


__all__ = ["Batch", "Policy", "build_policy"]
