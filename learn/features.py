"""Which dataset features a policy reads and writes, and how a live environment provides them.

A :class:`FeatureLayout` names the dataset's vector features concatenated (in order) into the
policy's observation, the action feature, and the dataset's fps. The same layout maps a
:class:`tasks.env.VecEnv` observation to those features at deploy (:func:`env_observation`), so
training and deploy read identical numbers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError

DEFAULT_STATE_KEYS = ("observation.state", "observation.environment_state")


@dataclass(frozen=True)
class FeatureLayout:
    state_keys: tuple          # dataset features forming the observation, in order
    state_dims: tuple          # their widths
    action_key: str
    action_dim: int
    fps: int

    @property
    def obs_dim(self) -> int:
        return int(sum(self.state_dims))

    def to_dict(self) -> dict:
        return {"state_keys": list(self.state_keys), "state_dims": list(self.state_dims),
                "action_key": self.action_key, "action_dim": self.action_dim, "fps": self.fps}

    @staticmethod
    def from_dict(d: dict) -> FeatureLayout:
        return FeatureLayout(tuple(d["state_keys"]), tuple(int(x) for x in d["state_dims"]), d["action_key"],
                             int(d["action_dim"]), int(d["fps"]))

    def mismatch(self, other: FeatureLayout) -> str | None:
        """A one-line description of how ``other`` differs from this layout, or None."""
        for name in ("state_keys", "state_dims", "action_key", "action_dim", "fps"):
            a, b = getattr(self, name), getattr(other, name)
            if a != b:
                show = lambda x: list(x) if isinstance(x, tuple) else x
                return f"{name} {show(a)} vs {show(b)}"
        return None


def layout_from_info(info: dict, state_keys=None, action_key: str = "action") -> FeatureLayout:
    """The layout of a LeRobot dataset's ``meta/info.json`` dict: ``state_keys`` default to the
    present ones of :data:`DEFAULT_STATE_KEYS`."""
    feats = info.get("features", {})
    keys = tuple(k for k in DEFAULT_STATE_KEYS if k in feats) if state_keys is None else tuple(state_keys)
    if not keys:
        raise CaliperError(f"dataset has none of the state features {', '.join(DEFAULT_STATE_KEYS)}")
    for k in keys + (action_key,):
        if k not in feats:
            raise CaliperError(f"dataset has no feature {k!r} (features: {', '.join(sorted(feats))})")
        f = feats[k]
        if f.get("dtype") not in ("float32", "float64") or len(f.get("shape", [])) != 1:
            raise CaliperError(f"feature {k!r}: a policy reads 1-D float vectors, got {f.get('dtype')} "
                               f"{f.get('shape')}")
    return FeatureLayout(keys, tuple(int(feats[k]["shape"][0]) for k in keys), action_key,
                         int(feats[action_key]["shape"][0]), int(info["fps"]))


def env_observation(fl: FeatureLayout, env_layout, obs, xp=np):
    """The policy observation (..., obs_dim) of VecEnv observations ``obs`` (..., env obs_dim):
    each of ``fl.state_keys`` as :func:`tasks.demo.env_features` records it."""
    from tasks.demo import env_features

    feats = env_features(env_layout, obs, xp)
    missing = [k for k in fl.state_keys if k not in feats]
    if missing:
        raise CaliperError(f"the environment provides no {', '.join(missing)} (it has: {', '.join(feats)})")
    return xp.concatenate([feats[k] for k in fl.state_keys], axis=-1)


__all__ = ["DEFAULT_STATE_KEYS", "FeatureLayout", "env_observation", "layout_from_info"]
