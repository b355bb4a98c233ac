"""Typed, strict configurations of the policies and of training.

Every config is a frozen dataclass that round-trips through JSON (:func:`config_to_dict`,
:func:`config_from_dict`); an unknown key or a wrong type is a :class:`CaliperError` naming the
field, so a typo in a saved config can never silently fall back to a default.

Chunking follows lerobot's semantics: a forward pass predicts ``chunk_size`` actions; deploy pops
one per control tick and re-runs the network every ``n_action_steps`` ticks, or -- with
``temporal_ensemble`` set (ACT) -- runs it every tick and averages the overlapping predictions
with weights ``exp(-temporal_ensemble * i)`` (i = 0 the oldest prediction), which needs
``n_action_steps == 1``. ``n_obs_steps`` is the observation window the policy sees: the current
frame and the ``n_obs_steps - 1`` before it, exactly as recorded. The ``vision_*`` / ``image_*``
fields shape the image encoder of a policy trained on cameras (:mod:`learn.policies.vision`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import ClassVar

from caliper_jax.errors import CaliperError

VISION_BACKBONES = ("conv", "resnet18")
#: The ResNet-18 trunk's norms (learn.policies.vision): GroupNorm, a learned per-channel affine, a
#: fixed one (FrozenBatchNorm2d without pretrained statistics).
VISION_NORMS = ("group", "affine", "frozen")


@dataclass(frozen=True)
class PolicyConfig:
    """What every policy kind shares."""

    kind: ClassVar[str] = ""
    n_obs_steps: int = 1
    chunk_size: int = 1
    n_action_steps: int = 1
    temporal_ensemble: float | None = None
    # cameras (used when the feature layout has any; learn.policies.vision)
    vision_backbone: str = "conv"      # "conv" (small conv net, the CPU default) or "resnet18" (GroupNorm)
    vision_width: int = 32             # channels of the first stage (64: ResNet-18's own width)
    vision_norm: str = "group"         # the resnet18 trunk's norm: "group", "affine" or "frozen"
    spatial_keypoints: int = 32        # spatial-softmax keypoints per camera (BC, diffusion)
    image_feature_dim: int = 64        # per-camera feature vector (BC, diffusion)
    image_shift: int = 4               # random-shift augmentation, +- pixels (0: off); training only

    def __post_init__(self):
        if self.vision_backbone not in VISION_BACKBONES:
            raise CaliperError(f"{self.kind} config: vision_backbone must be one of "
                               f"{', '.join(VISION_BACKBONES)}, got {self.vision_backbone!r}")
        if self.vision_norm not in VISION_NORMS:
            raise CaliperError(f"{self.kind} config: vision_norm must be one of {', '.join(VISION_NORMS)}, "
                               f"got {self.vision_norm!r}")
        shift = self.image_shift
        if not isinstance(shift, int) or isinstance(shift, bool) or shift < 0:
            raise CaliperError(f"{self.kind} config: image_shift must be an integer >= 0, got {shift!r}")
        for name in ("n_obs_steps", "chunk_size", "n_action_steps", "vision_width", "spatial_keypoints",
                     "image_feature_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise CaliperError(f"{self.kind} config: {name} must be an integer >= 1, got {value!r}")
        if self.n_action_steps > self.chunk_size:
            raise CaliperError(f"{self.kind} config: n_action_steps ({self.n_action_steps}) > chunk_size "
                               f"({self.chunk_size}): a forward pass would not cover the steps popped")
        if self.temporal_ensemble is not None:
            if not isinstance(self.temporal_ensemble, (int, float)) or self.temporal_ensemble < 0:
                raise CaliperError(f"{self.kind} config: temporal_ensemble must be None or a number >= 0, "
                                   f"got {self.temporal_ensemble!r}")
            if self.n_action_steps != 1:
                raise CaliperError(f"{self.kind} config: temporal_ensemble needs n_action_steps == 1, got "
                                   f"{self.n_action_steps} (set \"temporal_ensemble\": null to execute "
                                   f"{self.n_action_steps} actions of each chunk open loop)")


@dataclass(frozen=True)
class BCConfig(PolicyConfig):
    """An MLP from the flattened observation window to the action chunk (L2 loss). ``squash``:
    tanh on the output (the normalised action in [-1, 1]; a SAC actor's deterministic policy)."""

    kind: ClassVar[str] = "bc_mlp"
    hidden: tuple = (256, 256)
    dropout: float = 0.0
    squash: bool = False

    def __post_init__(self):
        super().__post_init__()
        if not isinstance(self.squash, bool):
            raise CaliperError(f"bc_mlp config: squash must be true or false, got {self.squash!r}")


@dataclass(frozen=True)
class ACTConfig(PolicyConfig):
    """ACT: a transformer encoder over the observation window (one token per frame, plus the CVAE
    latent token when ``use_vae``), a decoder with ``chunk_size`` learned queries, L1 loss (plus
    ``kl_weight`` * KL when ``use_vae``; deploy uses the prior mean, a zero latent)."""

    kind: ClassVar[str] = "act"
    chunk_size: int = 20
    dim_model: int = 128
    n_heads: int = 4
    dim_feedforward: int = 512
    n_encoder_layers: int = 2
    n_decoder_layers: int = 1
    dropout: float = 0.1
    use_vae: bool = False
    latent_dim: int = 32
    n_vae_encoder_layers: int = 2
    kl_weight: float = 10.0


@dataclass(frozen=True)
class DiffusionConfig(PolicyConfig):
    """A DDPM over action chunks conditioned on the observation window; DDIM sampling at deploy.
    ``denoiser``: "mlp" or "unet" (1-D convolutional U-Net over the chunk's time axis)."""

    kind: ClassVar[str] = "diffusion"
    n_obs_steps: int = 2
    chunk_size: int = 16
    n_action_steps: int = 8
    denoiser: str = "mlp"
    hidden: tuple = (512, 512, 512)
    unet_channels: tuple = (64, 128)
    kernel_size: int = 5
    time_embed_dim: int = 64
    train_timesteps: int = 100
    inference_steps: int = 10
    beta_schedule: str = "squaredcos_cap_v2"
    clip_sample: float = 3.0


POLICY_CONFIGS = {c.kind: c for c in (BCConfig, ACTConfig, DiffusionConfig)}


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation: AdamW at ``lr`` with ``warmup`` linear steps then ``schedule`` ("cosine" to
    ``lr * final_lr_fraction`` or "constant"), global-norm clipping at ``clip_norm``, optional EMA of
    the weights (``ema_decay``; the diffusion default), train/val split by episode."""

    steps: int = 2000
    batch_size: int = 64
    lr: float = 1e-3
    warmup: int = 100
    schedule: str = "cosine"
    final_lr_fraction: float = 0.05
    weight_decay: float = 1e-4
    clip_norm: float = 1.0
    ema_decay: float | None = None
    seed: int = 0
    val_fraction: float = 0.1
    eval_every: int = 200
    log_every: int = 50

    def __post_init__(self):
        for name in ("steps", "batch_size", "eval_every", "log_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise CaliperError(f"train config: {name} must be an integer >= 1, got {value!r}")
        if self.schedule not in ("cosine", "constant"):
            raise CaliperError(f"train config: schedule must be 'cosine' or 'constant', got "
                               f"{self.schedule!r}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise CaliperError(f"train config: val_fraction must be in [0, 1), got {self.val_fraction!r}")
        if self.ema_decay is not None and not 0.0 < self.ema_decay < 1.0:
            raise CaliperError(f"train config: ema_decay must be None or in (0, 1), got {self.ema_decay!r}")
        if not self.lr > 0:
            raise CaliperError(f"train config: lr must be > 0, got {self.lr!r}")
        if not isinstance(self.warmup, int) or isinstance(self.warmup, bool) or self.warmup < 0:
            raise CaliperError(f"train config: warmup must be an integer >= 0, got {self.warmup!r}")
        if not 0.0 <= self.final_lr_fraction <= 1.0:
            raise CaliperError(f"train config: final_lr_fraction must be in [0, 1], got "
                               f"{self.final_lr_fraction!r}")
        if not self.weight_decay >= 0:
            raise CaliperError(f"train config: weight_decay must be >= 0, got {self.weight_decay!r}")


def config_to_dict(config) -> dict:
    """JSON-ready dict of a policy or train config (policy configs carry their ``kind``)."""
    out = {f.name: (list(v) if isinstance(v := getattr(config, f.name), tuple) else v)
           for f in fields(config)}
    if isinstance(config, PolicyConfig):
        out = {"kind": config.kind, **out}
    return out


def _coerce(cls, data: dict, where: str):
    if not isinstance(data, dict):
        raise CaliperError(f"{where}: expected an object, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise CaliperError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))} (known: "
                           f"{', '.join(sorted(known))})")
    values = {}
    for name, value in data.items():
        default = getattr(cls, name, None)
        default = None if isinstance(default, dataclasses.Field) else default
        if isinstance(default, tuple):
            if not isinstance(value, (list, tuple)):
                raise CaliperError(f"{where}.{name}: expected a list, got {type(value).__name__}")
            value = tuple(value)
        elif isinstance(default, bool) and not isinstance(value, bool):
            raise CaliperError(f"{where}.{name}: expected true/false, got {value!r}")
        elif isinstance(default, int) and not isinstance(default, bool) and \
                (not isinstance(value, int) or isinstance(value, bool)):
            raise CaliperError(f"{where}.{name}: expected an integer, got {value!r}")
        elif isinstance(default, float) and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise CaliperError(f"{where}.{name}: expected a number, got {value!r}")
        elif isinstance(default, str) and not isinstance(value, str):
            raise CaliperError(f"{where}.{name}: expected a string, got {value!r}")
        values[name] = value
    return cls(**values)


def config_from_dict(data: dict, where: str = "policy config") -> PolicyConfig:
    """The policy config a :func:`config_to_dict` dict describes (strict: unknown kind or key raises)."""
    if not isinstance(data, dict) or "kind" not in data:
        raise CaliperError(f"{where}: expected an object with a 'kind' ({', '.join(POLICY_CONFIGS)})")
    kind = data["kind"]
    if kind not in POLICY_CONFIGS:
        raise CaliperError(f"{where}.kind: unknown policy kind {kind!r} (known: {', '.join(POLICY_CONFIGS)})")
    return _coerce(POLICY_CONFIGS[kind], {k: v for k, v in data.items() if k != "kind"}, where)


def train_config_from_dict(data: dict, where: str = "train config") -> TrainConfig:
    return _coerce(TrainConfig, data, where)


__all__ = ["VISION_BACKBONES", "VISION_NORMS", "ACTConfig", "BCConfig",
           "DiffusionConfig", "POLICY_CONFIGS", "PolicyConfig", "TrainConfig",
           "config_from_dict", "config_to_dict", "train_config_from_dict"]
