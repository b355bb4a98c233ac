"""The like-for-like speed comparison (benchmarks/bench_learn.py --part speed) builds lerobot's ACT
and diffusion policy from specs derived from our configs; here lerobot 0.4.4 itself builds them
(run by .ci/lerobot_compat.sh): its config as built must carry our sizes, and one training step of
benchmarks/lerobot/train_speed.py must give a finite loss. Image rows are built, not stepped (a
ResNet-18 step at batch 64 takes tens of seconds on 2 cores)."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

pytest.importorskip("lerobot", reason="lerobot not installed; run .ci/lerobot_compat.sh")
torch = pytest.importorskip("torch", reason="torch not installed; run .ci/lerobot_compat.sh")
pytest.importorskip("diffusers", reason="diffusers not installed (lerobot's diffusion policy); run "
                    ".ci/lerobot_compat.sh")

from benchmarks.lerobot.like_for_like import CAMERAS, spec_for, with_resnet18  # noqa: E402
from learn.config import ACTConfig, DiffusionConfig, TrainConfig  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "lerobot" / "train_speed.py"
_spec = importlib.util.spec_from_file_location("lerobot_train_speed", SCRIPT)
train_speed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(train_speed)

CONFIGS = {"act": ACTConfig(dim_model=64, n_heads=2, dim_feedforward=128, chunk_size=8, n_action_steps=8),
           "act_vae": ACTConfig(dim_model=64, n_heads=2, dim_feedforward=128, chunk_size=8, n_action_steps=8,
                                use_vae=True, n_vae_encoder_layers=1),
           "diffusion": DiffusionConfig(denoiser="unet", unet_channels=(16, 32), chunk_size=8,
                                        n_action_steps=4)}
TRAIN = TrainConfig(batch_size=4)


@pytest.mark.parametrize("row", sorted(CONFIGS))
def test_lerobot_builds_our_sizes_and_steps(row):
    spec = spec_for(CONFIGS[row], TRAIN)
    cfg, policy = train_speed.build(spec)
    for key, value in spec["config"].items():
        built = getattr(cfg, key)
        assert (list(built) if isinstance(built, tuple) else built) == value, key
    batch = train_speed.random_batch(spec, cfg, torch.Generator().manual_seed(0))
    policy.train()
    loss, _ = policy.forward(batch)
    loss.backward()
    assert math.isfinite(loss.item())
    assert sum(float(p.grad.abs().sum()) for p in policy.parameters() if p.grad is not None) > 0


@pytest.mark.parametrize("cfg", [ACTConfig(), DiffusionConfig(denoiser="unet")], ids=["act", "diffusion"])
def test_lerobot_builds_the_image_rows(cfg):
    spec = spec_for(with_resnet18(cfg), TRAIN, images=CAMERAS)
    built, policy = train_speed.build(spec)
    assert sorted(built.image_features) == [f"observation.images.{c}" for c in sorted(CAMERAS)]
    assert built.vision_backbone == "resnet18" and built.pretrained_backbone_weights is None
    assert sum(p.numel() for p in policy.parameters()) > 11_000_000   # a ResNet-18 trunk is ~11.2M
