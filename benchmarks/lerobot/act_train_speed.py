"""lerobot's own ACT training step on the CPU (torch), timed; run in the lerobot venv
(.ci/lerobot_compat.sh builds it) by benchmarks/bench_learn.py. Prints one JSON line.

    .venv-lerobot/bin/python benchmarks/lerobot/act_train_speed.py --state-dim 3 --env-dim 7 \
        --action-dim 3 --chunk 20 --batch 64 --dim-model 128 --heads 4 --ff 512 --enc 2 --dec 1 \
        [--vae] [--steps 30] [--threads 2]
"""
from __future__ import annotations

import argparse
import json
import time


def _skip_policy_registry() -> None:
    """Import lerobot.policies as a bare package: its __init__ imports every policy family
    (groot, pi0, smolvla, ...) and their heavy optional dependencies, none of which ACT needs."""
    import os
    import sys
    import types

    import lerobot

    pkg = types.ModuleType("lerobot.policies")
    pkg.__path__ = [os.path.join(os.path.dirname(lerobot.__file__), "policies")]
    sys.modules["lerobot.policies"] = pkg


def main() -> None:
    ap = argparse.ArgumentParser()
    for name, default in (("state-dim", 3), ("env-dim", 7), ("action-dim", 3), ("chunk", 20), ("batch", 64),
                          ("dim-model", 128), ("heads", 4), ("ff", 512), ("enc", 2), ("dec", 1),
                          ("steps", 30), ("threads", 2), ("warmup", 3)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--vae", action="store_true")
    a = ap.parse_args()

    import torch

    _skip_policy_registry()
    from lerobot.configs.types import FeatureType, PolicyFeature
    from lerobot.policies.act.configuration_act import ACTConfig
    from lerobot.policies.act.modeling_act import ACTPolicy

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = ACTConfig(
        input_features={"observation.state": PolicyFeature(FeatureType.STATE, (a.state_dim,)),
                        "observation.environment_state": PolicyFeature(FeatureType.ENV, (a.env_dim,))},
        output_features={"action": PolicyFeature(FeatureType.ACTION, (a.action_dim,))},
        chunk_size=a.chunk, n_action_steps=a.chunk, dim_model=a.dim_model, n_heads=a.heads,
        dim_feedforward=a.ff, n_encoder_layers=a.enc, n_decoder_layers=a.dec, use_vae=a.vae,
        device="cpu")
    policy = ACTPolicy(cfg)
    policy.train()
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-4, weight_decay=1e-4)
    B = a.batch
    batch = {"observation.state": torch.randn(B, a.state_dim),
             "observation.environment_state": torch.randn(B, a.env_dim),
             "action": torch.randn(B, a.chunk, a.action_dim),
             "action_is_pad": torch.zeros(B, a.chunk, dtype=torch.bool)}

    def step():
        loss, _ = policy.forward(batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 10.0)
        opt.step()
        return float(loss)

    t0 = time.perf_counter()
    for _ in range(a.warmup):
        step()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    run = time.perf_counter() - t0
    n_params = sum(p.numel() for p in policy.parameters())
    print(json.dumps({"steps_per_s": a.steps / run, "warmup_s": first, "params": n_params,
                      "torch": torch.__version__, "threads": a.threads}))


if __name__ == "__main__":
    main()
