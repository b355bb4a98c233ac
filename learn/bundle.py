"""A trained policy with everything deploy needs: the module, its config, the feature layout it
reads and writes, and the training split's normalisation statistics."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from learn.config import PolicyConfig
from learn.features import FeatureLayout
from learn.normalize import Normalizer


@dataclass
class TrainedPolicy:
    model: object                  # an nnx Module meeting learn.policies.base.Policy
    config: PolicyConfig
    features: FeatureLayout        # what it was trained on (features.fps is the training fps)
    normalizer: Normalizer
    fingerprint: str | None = None  # dataset fingerprint (learn.checkpoint.dataset_fingerprint)

    def chunk_fn(self):
        """A pure JAX function (graphdef, state, obs (B, n_obs, obs_dim) raw, obs_mask (B, n_obs),
        key, images=None) -> (B, chunk_size, action_dim) raw actions, plus its (graphdef, state)
        arguments: the module in eval mode, split so the function can be jitted or scanned.
        ``images`` (B, n_obs, cameras, H, W, 3) uint8: the frames of ``features.cameras`` (required
        exactly when the policy has cameras)."""
        import jax.numpy as jnp
        from flax import nnx

        self.model.eval()
        graphdef, state = nnx.split(self.model)
        n = self.normalizer

        def fn(graphdef, state, obs, obs_mask, key, images=None):
            model = nnx.merge(graphdef, state)
            x = jnp.asarray(n.obs(obs), jnp.float32)
            if images is None:            # a state policy may implement the 3-argument sample
                a = model.sample(x, obs_mask, key)
            else:
                a = model.sample(x, obs_mask, key, n.images(jnp.asarray(images)))
            return n.unaction(a)

        return fn, graphdef, state

    def jax_policy(self, env_layout, *, allow_fps_mismatch: bool = False):
        """This policy as a stateful pure-JAX policy ``(init, step)`` on raw observations of an
        environment of ``env_layout`` (``env.layout``): :class:`learn.deploy.JaxPolicy`, which
        :meth:`tasks.env_mjx.MjxEnv.rollout` runs inside its scan (chunks, history and temporal
        ensembling included)."""
        from learn.deploy import jax_policy

        return jax_policy(self, env_layout, allow_fps_mismatch=allow_fps_mismatch)

    def predict_chunk(self, obs, obs_mask=None, key=None, images=None) -> np.ndarray:
        """(B, chunk_size, action_dim) raw actions for raw windows ``obs`` (B, n_obs, obs_dim)
        and, with cameras, ``images`` (B, n_obs, cameras, H, W, 3) uint8 (NumPy in and out;
        ``obs_mask`` defaults to all True, ``key`` to PRNGKey(0))."""
        import jax

        fn, g, s = self.chunk_fn()
        obs = np.asarray(obs, np.float32)
        mask = np.ones(obs.shape[:2], bool) if obs_mask is None else np.asarray(obs_mask, bool)
        key = jax.random.PRNGKey(0) if key is None else key
        images = None if images is None else np.asarray(images, np.uint8)
        return np.asarray(jax.jit(fn, static_argnums=0)(g, s, obs, mask, key, images))


__all__ = ["TrainedPolicy"]
