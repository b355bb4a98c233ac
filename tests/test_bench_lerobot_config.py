"""The lerobot side of benchmarks/bench_learn.py's speed comparison is configured FROM our config
objects (benchmarks/lerobot/like_for_like.py), so its "same sizes" claim can fail: every size field
of ours, changed, changes lerobot's config (and the printed description) to the same value.
No lerobot needed; tests/lerobot_compat/test_bench_like_for_like.py builds the result in lerobot."""
from __future__ import annotations

import dataclasses

import pytest

from benchmarks.lerobot.like_for_like import (
    CAMERAS,
    act_spec,
    describe,
    differences,
    diffusion_spec,
    main,
    spec_for,
    with_resnet18,
)
from learn.config import ACTConfig, DiffusionConfig, TrainConfig

#: our ACTConfig field -> lerobot ACTConfig key, with a value different from our default
ACT_FIELDS = {"chunk_size": ("chunk_size", 33), "n_action_steps": ("n_action_steps", 7),
              "dim_model": ("dim_model", 96), "n_heads": ("n_heads", 8),
              "dim_feedforward": ("dim_feedforward", 640), "n_encoder_layers": ("n_encoder_layers", 3),
              "n_decoder_layers": ("n_decoder_layers", 2), "use_vae": ("use_vae", True),
              "latent_dim": ("latent_dim", 16), "n_vae_encoder_layers": ("n_vae_encoder_layers", 4),
              "dropout": ("dropout", 0.2), "kl_weight": ("kl_weight", 5.0)}
#: our DiffusionConfig field -> lerobot DiffusionConfig key
DIFFUSION_FIELDS = {"chunk_size": ("horizon", 32), "n_obs_steps": ("n_obs_steps", 3),
                    "n_action_steps": ("n_action_steps", 4), "unet_channels": ("down_dims", (32, 64, 128)),
                    "kernel_size": ("kernel_size", 3), "time_embed_dim": ("diffusion_step_embed_dim", 128),
                    "train_timesteps": ("num_train_timesteps", 50),
                    "inference_steps": ("num_inference_steps", 5),
                    "beta_schedule": ("beta_schedule", "linear"), "clip_sample": ("clip_sample_range", 1.0)}
TRAIN = TrainConfig()


def _printed(cfg, train=TRAIN, images=()):
    return describe(cfg, train, spec_for(cfg, train, images=images), images=images)


@pytest.mark.parametrize("name", sorted(ACT_FIELDS))
def test_act_sizes_come_from_our_config(name):
    key, value = ACT_FIELDS[name]
    base = ACTConfig()
    changed = dataclasses.replace(base, **{name: value})
    assert getattr(base, name) != value
    theirs = act_spec(changed, TRAIN)["config"]
    assert theirs[key] == value, f"lerobot's {key} is {theirs[key]!r}, ours {value!r}"
    assert act_spec(base, TRAIN)["config"][key] == getattr(base, name)
    assert _printed(changed) != _printed(base)


@pytest.mark.parametrize("name", sorted(DIFFUSION_FIELDS))
def test_diffusion_sizes_come_from_our_config(name):
    key, value = DIFFUSION_FIELDS[name]
    base = DiffusionConfig(denoiser="unet")
    changed = dataclasses.replace(base, **{name: value})
    assert getattr(base, name) != value
    theirs = diffusion_spec(changed, TRAIN)["config"]
    want = list(value) if isinstance(value, tuple) else value
    assert theirs[key] == want, f"lerobot's {key} is {theirs[key]!r}, ours {want!r}"
    assert _printed(changed) != _printed(base)


def test_batch_optimizer_and_inputs_come_from_ours():
    train = TrainConfig(batch_size=48, lr=2e-4, weight_decay=1e-3, clip_norm=5.0, warmup=10)
    a = act_spec(ACTConfig(), train)
    assert (a["batch"], a["grad_clip_norm"]) == (48, 5.0)
    assert (a["config"]["optimizer_lr"], a["config"]["optimizer_weight_decay"]) == (2e-4, 1e-3)
    d = diffusion_spec(DiffusionConfig(denoiser="unet"), train)
    assert (d["batch"], d["config"]["scheduler_warmup_steps"]) == (48, 10)
    # the same inputs on both sides: our observation is the state and the prop pose concatenated
    feats = act_spec(ACTConfig(), TRAIN, state_dim=5, env_dim=4, action_dim=2)["features"]
    assert feats == {"observation.state": ["STATE", [5]], "observation.environment_state": ["ENV", [4]],
                     "action": ["ACTION", [2]]}
    assert _printed(ACTConfig(), train) != _printed(ACTConfig())


def test_image_rows_add_the_cameras_and_the_backbone():
    for cfg in (with_resnet18(ACTConfig()), with_resnet18(DiffusionConfig(denoiser="unet"))):
        spec = spec_for(cfg, TRAIN, images=CAMERAS, image_hw=(64, 80))
        cams = {k: v for k, v in spec["features"].items() if k.startswith("observation.images.")}
        assert cams == {f"observation.images.{c}": ["VISUAL", [3, 64, 80]] for c in CAMERAS}
        assert spec["config"]["vision_backbone"] == "resnet18"
        assert spec["config"]["pretrained_backbone_weights"] is None   # ours trains from scratch
        assert any("ResNet-18" in d for d in differences(cfg, TRAIN, CAMERAS))
        assert not any("ResNet-18" in d for d in differences(cfg, TRAIN))


@dataclasses.dataclass(frozen=True)
class _SeeingDiffusion(DiffusionConfig):
    """Our config with the image-encoder fields of learn/policies/vision.py (branch `vision`)."""

    vision_backbone: str = "conv"
    vision_width: int = 32
    spatial_keypoints: int = 32
    image_feature_dim: int = 64
    image_shift: int = 4


def test_image_rows_are_proprio_plus_images_and_read_our_encoder():
    spec = spec_for(with_resnet18(ACTConfig()), TRAIN, images=CAMERAS)
    assert "observation.environment_state" not in spec["features"]      # no prop pose with cameras
    assert "observation.environment_state" in spec_for(ACTConfig(), TRAIN)["features"]
    seeing = with_resnet18(_SeeingDiffusion(denoiser="unet"))
    assert (seeing.vision_backbone, seeing.vision_width) == ("resnet18", 64)
    with pytest.raises(ValueError, match="ResNet-18"):
        spec_for(dataclasses.replace(seeing, vision_backbone="conv", vision_width=32), TRAIN, images=CAMERAS)
    for k in (16, 24):
        spec = spec_for(dataclasses.replace(seeing, spatial_keypoints=k), TRAIN, images=CAMERAS)
        assert spec["config"]["spatial_softmax_num_keypoints"] == k
    assert any("random shift of +-4 px" in d for d in differences(seeing, TRAIN, CAMERAS))
    assert any("image feature width: ours 64" in d for d in
               differences(dataclasses.replace(seeing, spatial_keypoints=16), TRAIN, CAMERAS))


@pytest.mark.parametrize("norm", ["group", "affine", "frozen"])
def test_the_trunk_norm_round_trips_and_reaches_both_sides(norm):
    """Planted bugs caught: vision_norm dropped from the saved config (the round trip loses it), the
    diffusion spec's use_group_norm not following ours, the printed differences not naming our norm."""
    from benchmarks.lerobot.like_for_like import NORM_WORDS
    from learn.config import config_from_dict, config_to_dict

    for cfg in (with_resnet18(ACTConfig(vision_norm=norm)),
                with_resnet18(DiffusionConfig(denoiser="unet", vision_norm=norm))):
        assert config_to_dict(cfg)["vision_norm"] == norm and config_from_dict(config_to_dict(cfg)) == cfg
        text = _printed(cfg, images=CAMERAS)
        assert NORM_WORDS[norm] in text and f'"vision_norm": "{norm}"' in text
    spec = spec_for(with_resnet18(DiffusionConfig(denoiser="unet", vision_norm=norm)), TRAIN, images=CAMERAS)
    assert spec["config"]["use_group_norm"] is (norm == "group")
    act = differences(with_resnet18(ACTConfig(vision_norm=norm)), TRAIN, CAMERAS)
    assert any("the same norm on both sides" in d for d in act) is (norm == "frozen")
    with pytest.raises(Exception, match="vision_norm must be one of group, affine, frozen"):
        ACTConfig(vision_norm="batch")


def test_what_lerobot_cannot_match_is_refused():
    with pytest.raises(ValueError, match="n_obs_steps"):
        act_spec(ACTConfig(n_obs_steps=2), TRAIN)
    with pytest.raises(ValueError, match="denoiser"):
        diffusion_spec(DiffusionConfig(denoiser="mlp"), TRAIN)
    with pytest.raises(ValueError, match="multiples of 8"):
        diffusion_spec(DiffusionConfig(denoiser="unet", unet_channels=(12, 24)), TRAIN)


def test_differences_follow_the_config():
    vae = differences(ACTConfig(use_vae=True), TRAIN)
    assert any("CVAE" in d for d in vae) and not any("CVAE" in d for d in differences(ACTConfig(), TRAIN))
    ema = differences(DiffusionConfig(denoiser="unet"), dataclasses.replace(TRAIN, ema_decay=0.99))
    assert any("decay 0.99" in d for d in ema)


def test_cli_prints_both_configurations(capsys):
    main(["--policy", "act", "--vae"])
    out = capsys.readouterr().out
    assert '"use_vae": true' in out and "lerobot (act)" in out and "remaining differences" in out


def test_speed_rows_are_configured_from_the_recipes():
    from benchmarks.bench_learn import SPEED_ROWS, speed_configs
    from learn.recipes import recipe

    for row in SPEED_ROWS:
        pcfg, tcfg = speed_configs(row, 32)
        spec = spec_for(pcfg, tcfg)
        assert spec["batch"] == 32
        assert spec["config"]["chunk_size" if pcfg.kind == "act" else "horizon"] == \
            recipe(pcfg.kind).policy.chunk_size
