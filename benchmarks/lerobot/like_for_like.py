"""lerobot's configuration derived from ours, for the like-for-like training-speed comparison.

Every size lerobot's ACT / diffusion policy is built with is read here from OUR config objects
(:class:`learn.config.ACTConfig`, :class:`learn.config.DiffusionConfig`, :class:`learn.config.TrainConfig`),
never typed a second time; what cannot be matched is listed by :func:`differences`. The result is a
*spec*: a JSON-ready dict that ``benchmarks/lerobot/train_speed.py`` (run in the lerobot venv, no
import of ours) turns into lerobot's own config, policy, optimizer and a timed train step.

    python benchmarks/lerobot/like_for_like.py [--policy act|diffusion] [--vae] [--images]
        [--vision-norm group|affine|frozen]

prints both configurations and the list of differences (no training, no lerobot needed).

Inputs (the defaults are gripper_arm ``lift-cube``'s dataset): ``observation.state`` (joint state,
``state_dim``), ``observation.environment_state`` (prop pose, ``env_dim``), ``action``
(``action_dim``). With images it is the ``proprio+images`` observation set: the joint state and one
``observation.images.<camera>`` per camera (3 x H x W), no prop pose. The image encoder's settings
are read from our config's ``vision_*`` fields where it has them (learn/policies/vision.py).
Imports nothing but :mod:`learn.config` (no JAX, no torch).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root on the path, as for bench_*.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from learn.config import ACTConfig, DiffusionConfig, TrainConfig, config_to_dict  # noqa: E402

#: gripper_arm lift-cube: 3 joint positions, the cube's position + quaternion, 3 joint targets.
STATE_DIM, ENV_DIM, ACTION_DIM = 3, 7, 3
#: The issue's image setting: a 96x96 front and a wrist camera, ResNet-18 on both sides.
CAMERAS, IMAGE_HW, BACKBONE = ("front", "wrist"), (96, 96), "resnet18"


def _features(images: tuple, image_hw: tuple, state_dim: int, env_dim: int, action_dim: int) -> dict:
    """lerobot's input/output features as {key: [FeatureType name, shape]} (shapes per frame); with
    images the proprio+images set (no environment state)."""
    feats = {"observation.state": ["STATE", [state_dim]]}
    if not images:
        feats["observation.environment_state"] = ["ENV", [env_dim]]
    for cam in images:
        feats[f"observation.images.{cam}"] = ["VISUAL", [3, *image_hw]]
    feats["action"] = ["ACTION", [action_dim]]
    return feats


def act_spec(cfg: ACTConfig, train: TrainConfig, *, images: tuple = (), image_hw: tuple = IMAGE_HW,
             state_dim: int = STATE_DIM, env_dim: int = ENV_DIM, action_dim: int = ACTION_DIM) -> dict:
    """The spec of lerobot's ACT at ``cfg``'s sizes, batch ``train.batch_size``."""
    if cfg.n_obs_steps != 1:
        raise ValueError(f"lerobot's ACT takes one observation frame; our config has n_obs_steps "
                         f"{cfg.n_obs_steps}")
    config = {
        "n_obs_steps": cfg.n_obs_steps, "chunk_size": cfg.chunk_size, "n_action_steps": cfg.n_action_steps,
        "dim_model": cfg.dim_model, "n_heads": cfg.n_heads, "dim_feedforward": cfg.dim_feedforward,
        "feedforward_activation": "relu",           # ours: ReLU feed-forward (learn/policies/act.py)
        "pre_norm": True,                           # ours: pre-norm blocks, final LayerNorm per stack
        "n_encoder_layers": cfg.n_encoder_layers, "n_decoder_layers": cfg.n_decoder_layers,
        "use_vae": cfg.use_vae, "latent_dim": cfg.latent_dim,
        "n_vae_encoder_layers": cfg.n_vae_encoder_layers, "dropout": cfg.dropout, "kl_weight": cfg.kl_weight,
        "temporal_ensemble_coeff": cfg.temporal_ensemble,
        "optimizer_lr": train.lr, "optimizer_weight_decay": train.weight_decay,
        "optimizer_lr_backbone": train.lr,
    }
    if images:
        _check_backbone(cfg)
        config.update(vision_backbone=BACKBONE, pretrained_backbone_weights=None,
                      replace_final_stride_with_dilation=False)
    return {"policy": "act", "config": config, "batch": train.batch_size,
            "grad_clip_norm": train.clip_norm,
            "features": _features(images, image_hw, state_dim, env_dim, action_dim)}


def with_resnet18(cfg):
    """``cfg`` with our image encoder set to lerobot's (ResNet-18 at its own width, 64) where our
    config has one (learn/policies/vision.py); ``cfg`` itself otherwise."""
    if not hasattr(cfg, "vision_backbone"):
        return cfg
    return dataclasses.replace(cfg, vision_backbone=BACKBONE, vision_width=64)


#: our vision_norm (learn/policies/vision.py) in words
NORM_WORDS = {"group": "GroupNorm (C / 16 groups)",
              "affine": "a learned per-channel scale and bias (no statistics)",
              "frozen": "a fixed per-channel scale and bias (FrozenBatchNorm2d-like: no statistics, no "
                        "gradients)"}


def _norm(cfg) -> str:
    """Our ResNet trunk's norm (``vision_norm``; GroupNorm where our config has no such field)."""
    return getattr(cfg, "vision_norm", "group")


def _check_backbone(cfg) -> None:
    """Our image encoder, where our config has one, must be ResNet-18 at its own width (64)."""
    if hasattr(cfg, "vision_backbone") and (cfg.vision_backbone, cfg.vision_width) != (BACKBONE, 64):
        raise ValueError(f"lerobot's image rows use a ResNet-18; our config has vision_backbone "
                         f"{cfg.vision_backbone!r}, vision_width {cfg.vision_width} (use 'resnet18', 64)")


def _unet_groups(channels: tuple) -> int:
    """Our GroupNorm groups (gcd(c, 8) per level) as lerobot's single ``n_groups``."""
    if any(c % 8 for c in channels):
        raise ValueError(f"unet_channels {list(channels)}: lerobot uses 8 groups at every level, ours "
                         "gcd(channels, 8); use multiples of 8 to compare like for like")
    return 8


def diffusion_spec(cfg: DiffusionConfig, train: TrainConfig, *, images: tuple = (),
                   image_hw: tuple = IMAGE_HW, state_dim: int = STATE_DIM, env_dim: int = ENV_DIM,
                   action_dim: int = ACTION_DIM) -> dict:
    """The spec of lerobot's diffusion policy at ``cfg``'s sizes (its UNet: ``cfg.denoiser`` must be
    "unet"), batch ``train.batch_size``."""
    if cfg.denoiser != "unet":
        raise ValueError(f"lerobot's diffusion policy denoises with a 1-D UNet; our config's denoiser is "
                         f"{cfg.denoiser!r} (use denoiser='unet')")
    config = {
        "n_obs_steps": cfg.n_obs_steps, "horizon": cfg.chunk_size, "n_action_steps": cfg.n_action_steps,
        "drop_n_last_frames": max(cfg.chunk_size - cfg.n_action_steps - cfg.n_obs_steps + 1, 0),
        "down_dims": list(cfg.unet_channels), "kernel_size": cfg.kernel_size,
        "n_groups": _unet_groups(cfg.unet_channels), "diffusion_step_embed_dim": cfg.time_embed_dim,
        "use_film_scale_modulation": True,          # ours: FiLM scale and bias
        "num_train_timesteps": cfg.train_timesteps, "num_inference_steps": cfg.inference_steps,
        "beta_schedule": cfg.beta_schedule, "noise_scheduler_type": "DDIM",  # ours samples by DDIM
        "prediction_type": "epsilon", "clip_sample": True, "clip_sample_range": cfg.clip_sample,
        "optimizer_lr": train.lr, "optimizer_weight_decay": train.weight_decay,
        "scheduler_warmup_steps": train.warmup,
    }
    if images:
        _check_backbone(cfg)
        # lerobot's diffusion trunk: GroupNorm (use_group_norm) or torchvision's trainable BatchNorm2d
        config.update(vision_backbone=BACKBONE, pretrained_backbone_weights=None,
                      use_group_norm=_norm(cfg) == "group", crop_shape=None)
        if hasattr(cfg, "spatial_keypoints"):       # ours (learn/policies/vision.py); else lerobot's 32
            config["spatial_softmax_num_keypoints"] = cfg.spatial_keypoints
    return {"policy": "diffusion", "config": config, "batch": train.batch_size,
            "grad_clip_norm": train.clip_norm,
            "features": _features(images, image_hw, state_dim, env_dim, action_dim)}


def spec_for(cfg, train: TrainConfig, **kw) -> dict:
    """:func:`act_spec` or :func:`diffusion_spec` by the config's kind."""
    if isinstance(cfg, ACTConfig):
        return act_spec(cfg, train, **kw)
    if isinstance(cfg, DiffusionConfig):
        return diffusion_spec(cfg, train, **kw)
    raise ValueError(f"no lerobot counterpart for a {type(cfg).__name__}")


def differences(cfg, train: TrainConfig, images: tuple = ()) -> list[str]:
    """Every remaining difference between our training step and lerobot's at the spec's sizes."""
    out = [
        "framework: ours one jitted JAX step (compile reported apart); lerobot eager torch (no "
        "torch.compile), the same thread count",
        "data: a fixed random batch every step on both sides (no loader, no normalisation step)",
        f"optimizer: both sides at lr {train.lr:g}, weight decay {train.weight_decay:g}, global-norm clip "
        f"{train.clip_norm:g}; ours AdamW (betas 0.9, 0.999), a {train.schedule} schedule after "
        f"{train.warmup} linear warm-up steps",
    ]
    if isinstance(cfg, ACTConfig):
        if not images:
            out.append(f"encoder tokens: ours one token per observation frame (state and prop pose "
                       f"concatenated, {1 + cfg.n_obs_steps} tokens with the latent); lerobot a token each "
                       "for the state and the environment state (3 with the latent)")
        out += [
            "lerobot: dropout also on the attention weights (nn.MultiheadAttention); ours on the residual "
            "branches and inside the feed-forward only",
            "loss: ours masked L1 averaged over valid actions; lerobot L1 zeroed on padding, averaged over "
            "all (identical when nothing is padded, as in the benchmark batch)",
            "initialisation: lerobot Xavier-uniform on the transformer; ours flax defaults (no effect on "
            "speed)",
            "lerobot ACT: AdamW (betas 0.9, 0.999) at a constant learning rate (no scheduler preset)",
        ]
        if cfg.use_vae and not images:
            out.append("CVAE encoder input: ours [cls, observation frame (state + prop pose), actions]; "
                       "lerobot [cls, robot state, actions] (same token count)")
        if images:
            same = ("the same norm on both sides" if _norm(cfg) == "frozen" else
                    "a different norm: ours " + NORM_WORDS[_norm(cfg)])
            out.append("image backbone: lerobot torchvision ResNet-18 with FrozenBatchNorm2d (frozen "
                       "statistics and affine: no norm gradients; not pretrained, nothing can be "
                       f"downloaded, so it is the identity), {same}; "
                       + _our_backbone(cfg, "one token per layer4 feature-map position, "
                                            "2-D sinusoidal positions, on both sides"))
    else:
        out += [
            f"lerobot diffusion: Adam (betas 0.95, 0.999; weight decay as an L2 term, not decoupled) with "
            f"diffusers' cosine schedule after {train.warmup} warm-up steps",
            "EMA: " + (f"ours keeps an EMA of the weights (decay {train.ema_decay:g}) in the step; lerobot "
                       "0.4.4 has none" if train.ema_decay else "neither side keeps an EMA"),
            f"action window: lerobot's horizon starts at frame t - {cfg.n_obs_steps - 1}, ours at frame t "
            "(the same length)",
            "loss: ours masked MSE (padded actions filled and excluded); lerobot unmasked MSE "
            "(do_mask_loss_for_padding False)",
            "conditioning order: ours [observation window, timestep embedding], lerobot [timestep, "
            "window] (same width)",
        ]
        if cfg.beta_schedule == "linear":
            out.append("beta schedule 'linear': ours rescaled by 1000 / train_timesteps, diffusers' not")
        if images:
            theirs = ("GroupNorm" if _norm(cfg) == "group" else "BatchNorm2d with batch statistics "
                      f"(use_group_norm false; ours {NORM_WORDS[_norm(cfg)]})")
            out.append(f"image encoder: lerobot torchvision ResNet-18 with {theirs} (not pretrained), "
                       "spatial softmax, Linear + ReLU to 2 x keypoints per camera, no crop; "
                       + _our_backbone(cfg, "both encode every frame of the window"))
            dim = getattr(cfg, "image_feature_dim", None)
            if dim is not None and dim != 2 * cfg.spatial_keypoints:
                out.append(f"image feature width: ours {dim} per camera, lerobot 2 x "
                           f"{cfg.spatial_keypoints} keypoints = {2 * cfg.spatial_keypoints}")
    return out


def _our_backbone(cfg, shared: str) -> str:
    """Our side of the image-encoder difference (or that it is missing on this branch)."""
    if not hasattr(cfg, "vision_backbone"):
        return "ours: no image encoder on this branch (learn/policies/vision.py, branch `vision`)"
    shift = (f"a random shift of +-{cfg.image_shift} px in the step (lerobot: none)" if cfg.image_shift
             else "no augmentation")
    return f"ours ResNet-18 with {NORM_WORDS[_norm(cfg)]}, {shift}; {shared}"


def describe(cfg, train: TrainConfig, spec: dict, lerobot_config: dict | None = None,
             images: tuple = ()) -> str:
    """Both configurations and the differences, as text. ``lerobot_config``: lerobot's full config as
    its policy was built (from ``train_speed.py``); else the keys this spec sets."""
    theirs = lerobot_config if lerobot_config is not None else spec["config"]
    lines = [f"ours ({cfg.kind}): {json.dumps(config_to_dict(cfg), sort_keys=True)}",
             f"ours (train): {json.dumps(dataclasses.asdict(train), sort_keys=True)}",
             f"lerobot ({spec['policy']}): {json.dumps(theirs, sort_keys=True, default=str)}",
             f"lerobot features: {json.dumps(spec['features'])}; batch {spec['batch']}; grad clip "
             f"{spec['grad_clip_norm']:g}",
             "remaining differences:"]
    lines += [f"  - {d}" for d in differences(cfg, train, images)]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", choices=("act", "diffusion"), default="act")
    ap.add_argument("--vae", action="store_true", help="ACT with the CVAE")
    ap.add_argument("--images", action="store_true", help=f"with the {', '.join(CAMERAS)} cameras")
    ap.add_argument("--vision-norm", choices=tuple(NORM_WORDS), default=None,
                    help="our ResNet trunk's norm (default: the config's)")
    a = ap.parse_args(argv)
    cfg = ACTConfig(use_vae=a.vae) if a.policy == "act" else DiffusionConfig(denoiser="unet")
    if a.vision_norm is not None:
        cfg = dataclasses.replace(cfg, vision_norm=a.vision_norm)
    images = CAMERAS if a.images else ()
    cfg = with_resnet18(cfg) if images else cfg
    train = TrainConfig()
    print(describe(cfg, train, spec_for(cfg, train, images=images), images=images))


if __name__ == "__main__":
    main()
