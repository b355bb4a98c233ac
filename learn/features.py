"""Which dataset features a policy reads and writes, and how a live environment provides them.

A :class:`FeatureLayout` names the dataset's vector features concatenated (in order) into the
policy's observation, the cameras it sees, the action feature, and the dataset's fps. The same
layout maps a :class:`tasks.env.VecEnv` observation to those features at deploy
(:func:`env_observation`), so training and deploy read identical numbers.

Observation sets (:data:`OBS_SETS`), a declared choice recorded with the layout:

* ``state``: joint state and prop poses (``observation.state``, ``observation.environment_state``),
  no cameras;
* ``proprio+images``: what a real robot has -- joint state (``observation.state``) and the
  cameras (``observation.images.*``); a layout of this set that names any other vector feature
  (prop poses, a held flag) is refused;
* ``privileged``: both: the state features and the cameras (an upper bound to compare against).

A camera (:class:`CameraSpec`) is recorded by name, resolution and pinhole intrinsics (pixels;
None when the dataset does not record them); deploying on cameras that differ in any of them is
refused (:func:`camera_mismatch`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError

DEFAULT_STATE_KEYS = ("observation.state", "observation.environment_state")
#: The observation sets a policy can be trained on (module doc).
OBS_SETS = ("state", "proprio+images", "privileged")
#: The only vector features the ``proprio+images`` set may read.
PROPRIO_KEYS = ("observation.state",)
IMAGE_PREFIX = "observation.images."
#: Default memory budget of decoded camera frames (uint8) when loading a dataset, MiB.
IMAGE_BUDGET_MB = 4096


@dataclass(frozen=True)
class CameraSpec:
    """A camera a policy sees: its dataset feature is ``observation.images.<name>``; ``width`` x
    ``height`` pixels; ``intrinsics`` (fx, fy, cx, cy) in pixels, or None when not recorded."""

    name: str
    width: int
    height: int
    intrinsics: tuple | None = None

    @property
    def key(self) -> str:
        return IMAGE_PREFIX + self.name

    def to_dict(self) -> dict:
        return {"name": self.name, "width": self.width, "height": self.height,
                "intrinsics": None if self.intrinsics is None else list(self.intrinsics)}

    @staticmethod
    def from_dict(d: dict) -> CameraSpec:
        k = d.get("intrinsics")
        return CameraSpec(str(d["name"]), int(d["width"]), int(d["height"]),
                          None if k is None else tuple(float(x) for x in k))

    @staticmethod
    def of(camera) -> CameraSpec:
        """The spec of a :class:`caliper_jax.rays.PinholeCamera`."""
        return CameraSpec(camera.name, int(camera.width), int(camera.height),
                          tuple(round(float(x), 6) for x in camera.intrinsics()))

    def describe(self) -> str:
        k = "" if self.intrinsics is None else " f=({:g},{:g}) c=({:g},{:g})".format(*self.intrinsics)
        return f"{self.name} {self.width}x{self.height}{k}"


def camera_mismatch(trained: tuple, given: tuple) -> str | None:
    """How cameras ``given`` (CameraSpecs) differ from the ``trained`` ones (names, order,
    resolution, intrinsics within 1e-4 relative; intrinsics not recorded are not compared), or None."""
    if [c.name for c in trained] != [c.name for c in given]:
        return f"cameras {[c.name for c in trained]} vs {[c.name for c in given]}"
    for a, b in zip(trained, given, strict=True):
        if (a.width, a.height) != (b.width, b.height):
            return f"camera {a.name} is {a.width}x{a.height} vs {b.width}x{b.height}"
        if a.intrinsics is not None and b.intrinsics is not None and not all(
                abs(x - y) <= 1e-4 * max(abs(x), 1.0)
                for x, y in zip(a.intrinsics, b.intrinsics, strict=True)):
            return f"camera {a.describe()} vs {b.describe()} (intrinsics)"
    return None


@dataclass(frozen=True)
class FeatureLayout:
    state_keys: tuple          # dataset features forming the observation, in order
    state_dims: tuple          # their widths
    action_key: str
    action_dim: int
    fps: int
    obs_set: str = "state"     # one of OBS_SETS
    cameras: tuple = ()        # CameraSpecs, in order (none for "state")

    def __post_init__(self):
        if self.obs_set not in OBS_SETS:
            raise CaliperError(f"feature layout: obs set {self.obs_set!r} is not one of "
                               f"{', '.join(OBS_SETS)}")
        if self.obs_set == "proprio+images":
            extra = [k for k in self.state_keys if k not in PROPRIO_KEYS]
            if extra:
                raise CaliperError(f"feature layout: the proprio+images set reads joint state and cameras "
                                   f"only; {', '.join(map(repr, extra))} (prop poses / held flag) is "
                                   f"privileged (use --obs privileged)")
        if self.obs_set == "state" and self.cameras:
            raise CaliperError("feature layout: the state set has no cameras (use proprio+images or "
                               "privileged)")
        if self.obs_set != "state":
            if not self.cameras:
                raise CaliperError(f"feature layout: the {self.obs_set} set needs at least one camera "
                                   f"(observation.images.*); record some with --camera")
            if len({(c.width, c.height) for c in self.cameras}) > 1:
                raise CaliperError("feature layout: every camera must have one resolution, got "
                                   + ", ".join(f"{c.name} {c.width}x{c.height}" for c in self.cameras))

    @property
    def obs_dim(self) -> int:
        return int(sum(self.state_dims))

    @property
    def image_shape(self) -> tuple | None:
        """(cameras, height, width) of the image input, or None without cameras."""
        if not self.cameras:
            return None
        return (len(self.cameras), int(self.cameras[0].height), int(self.cameras[0].width))

    def to_dict(self) -> dict:
        return {"state_keys": list(self.state_keys), "state_dims": list(self.state_dims),
                "action_key": self.action_key, "action_dim": self.action_dim, "fps": self.fps,
                "obs_set": self.obs_set, "cameras": [c.to_dict() for c in self.cameras]}

    @staticmethod
    def from_dict(d: dict) -> FeatureLayout:
        return FeatureLayout(tuple(d["state_keys"]), tuple(int(x) for x in d["state_dims"]), d["action_key"],
                             int(d["action_dim"]), int(d["fps"]), d.get("obs_set", "state"),
                             tuple(CameraSpec.from_dict(c) for c in d.get("cameras", ())))

    def mismatch(self, other: FeatureLayout) -> str | None:
        """A one-line description of how ``other`` differs from this layout, or None."""
        for name in ("obs_set", "state_keys", "state_dims", "action_key", "action_dim", "fps"):
            a, b = getattr(self, name), getattr(other, name)
            if a != b:
                show = lambda x: list(x) if isinstance(x, tuple) else x
                return f"{name} {show(a)} vs {show(b)}"
        return camera_mismatch(self.cameras, other.cameras)


def _state_keys_of(obs_set: str, feats: dict, state_keys) -> tuple:
    if state_keys is not None:
        return tuple(state_keys)
    wanted = PROPRIO_KEYS if obs_set == "proprio+images" else DEFAULT_STATE_KEYS
    return tuple(k for k in wanted if k in feats)


def _cameras_of(feats: dict, camera_records) -> tuple:
    """CameraSpecs of every video/image feature (sorted by key), with the intrinsics of
    ``camera_records`` (the demo sidecar's ``cameras`` list) where it names the feature."""
    known = {r.get("feature"): r for r in camera_records or ()}
    out = []
    for key in sorted(k for k in feats if k.startswith(IMAGE_PREFIX)):
        f = feats[key]
        shape = f.get("shape", [])
        if f.get("dtype") not in ("video", "image") or len(shape) != 3:
            raise CaliperError(f"feature {key!r}: a camera is a video/image feature (height, width, 3), got "
                               f"{f.get('dtype')} {shape}")
        names = f.get("names") or []
        h, w = (shape[1], shape[2]) if list(names)[:1] == ["channels"] else (shape[0], shape[1])
        rec = known.get(key)
        k = None if rec is None else tuple(round(float(rec["intrinsics"][n]), 6)
                                           for n in ("fx", "fy", "cx", "cy"))
        out.append(CameraSpec(key[len(IMAGE_PREFIX):], int(w), int(h), k))
    return tuple(out)


def layout_from_info(info: dict, state_keys=None, action_key: str = "action", *, obs_set: str = "state",
                     camera_records=None) -> FeatureLayout:
    """The layout of a LeRobot dataset's ``meta/info.json`` dict for observation set ``obs_set``:
    ``state_keys`` default to the present ones of :data:`DEFAULT_STATE_KEYS` (``state``,
    ``privileged``) or :data:`PROPRIO_KEYS` (``proprio+images``); the cameras are every
    ``observation.images.*`` feature, with intrinsics from ``camera_records`` (the demo sidecar's)."""
    if obs_set not in OBS_SETS:
        raise CaliperError(f"--obs {obs_set!r}: expected one of {', '.join(OBS_SETS)}")
    feats = info.get("features", {})
    keys = _state_keys_of(obs_set, feats, state_keys)
    if not keys:
        raise CaliperError(f"dataset has none of the state features {', '.join(DEFAULT_STATE_KEYS)}")
    for k in keys + (action_key,):
        if k not in feats:
            raise CaliperError(f"dataset has no feature {k!r} (features: {', '.join(sorted(feats))})")
        f = feats[k]
        if f.get("dtype") not in ("float32", "float64") or len(f.get("shape", [])) != 1:
            raise CaliperError(f"feature {k!r}: a policy reads 1-D float vectors, got {f.get('dtype')} "
                               f"{f.get('shape')}")
    cameras = () if obs_set == "state" else _cameras_of(feats, camera_records)
    return FeatureLayout(keys, tuple(int(feats[k]["shape"][0]) for k in keys), action_key,
                         int(feats[action_key]["shape"][0]), int(info["fps"]), obs_set, cameras)


def env_observation(fl: FeatureLayout, env_layout, obs, xp=np):
    """The policy observation (..., obs_dim) of VecEnv observations ``obs`` (..., env obs_dim):
    each of ``fl.state_keys`` as :func:`tasks.demo.env_features` records it."""
    from tasks.demo import env_features

    feats = env_features(env_layout, obs, xp)
    missing = [k for k in fl.state_keys if k not in feats]
    if missing:
        raise CaliperError(f"the environment provides no {', '.join(missing)} (it has: {', '.join(feats)})")
    return xp.concatenate([feats[k] for k in fl.state_keys], axis=-1)


__all__ = ["DEFAULT_STATE_KEYS", "IMAGE_BUDGET_MB", "IMAGE_PREFIX",
           "OBS_SETS", "PROPRIO_KEYS", "CameraSpec", "FeatureLayout",
           "camera_mismatch", "env_observation", "layout_from_info"]
