"""lerobot's own training step (ACT or diffusion, torch on the CPU), timed; run in the lerobot venv
(.ci/lerobot_compat.sh builds it) by ``benchmarks/bench_learn.py --part speed``. Prints one JSON line.

    .venv-lerobot/bin/python benchmarks/lerobot/train_speed.py --spec SPEC.json [--steps 30] \
        [--warmup 3] [--threads 2] [--seed 0]

SPEC is what ``benchmarks/lerobot/like_for_like.py`` derives from our configs: the policy kind, the
keyword arguments of lerobot's config class (every size), the input/output features, the batch size
and the gradient clip. Nothing of ours is imported here. The step is lerobot's ``update_policy``
without its accelerator and metrics: forward (loss), backward, global-norm clip, optimizer step (the
config's optimizer preset), learning-rate scheduler step (its scheduler preset, if any), zero grad.
The batch is random and the same every step. The report carries lerobot's full config as built.
"""
from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import time


def _skip_policy_registry() -> None:
    """Import lerobot.policies as a bare package: its __init__ imports every policy family
    (groot, pi0, smolvla, ...) and their heavy optional dependencies, none of which we time."""
    import os
    import sys
    import types

    import lerobot

    pkg = types.ModuleType("lerobot.policies")
    pkg.__path__ = [os.path.join(os.path.dirname(lerobot.__file__), "policies")]
    sys.modules["lerobot.policies"] = pkg


def _jsonable(x):
    if isinstance(x, enum.Enum):
        return x.value
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x if isinstance(x, (int, float, str, bool, type(None))) else str(x)


def build(spec: dict):
    """(lerobot config, policy) of ``spec``."""
    _skip_policy_registry()
    from lerobot.configs.types import FeatureType, PolicyFeature

    if spec["policy"] == "act":
        from lerobot.policies.act.configuration_act import ACTConfig as Config
        from lerobot.policies.act.modeling_act import ACTPolicy as Policy
    elif spec["policy"] == "diffusion":
        from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig as Config
        from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy as Policy
    else:
        raise SystemExit(f"train_speed: unknown policy {spec['policy']!r}")
    feats = {k: PolicyFeature(FeatureType[t], tuple(shape)) for k, (t, shape) in spec["features"].items()}
    kw = dict(spec["config"])
    for k in ("down_dims", "crop_shape"):
        if kw.get(k) is not None:
            kw[k] = tuple(kw[k])
    cfg = Config(input_features={k: f for k, f in feats.items() if k != "action"},
                 output_features={"action": feats["action"]}, device="cpu", **kw)
    return cfg, Policy(cfg)


def random_batch(spec: dict, cfg, generator):
    """The batch lerobot's training loop hands the policy: (B, ...) per frame for ACT, (B, n_obs, ...)
    windows for diffusion; actions (B, chunk, A), nothing padded; images in [0, 1]."""
    import torch

    b = spec["batch"]
    window = () if spec["policy"] == "act" else (cfg.n_obs_steps,)
    chunk = cfg.chunk_size if spec["policy"] == "act" else cfg.horizon
    out = {}
    for key, (kind, shape) in spec["features"].items():
        if kind == "ACTION":
            out[key] = torch.randn(b, chunk, *shape, generator=generator)
        elif kind == "VISUAL":
            out[key] = torch.rand(b, *window, *shape, generator=generator)
        else:
            out[key] = torch.randn(b, *window, *shape, generator=generator)
    out["action_is_pad"] = torch.zeros(b, chunk, dtype=torch.bool)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True, help="a JSON file (like_for_like.py's spec)")
    for name, default in (("steps", 30), ("warmup", 3), ("threads", 2), ("seed", 0)):
        ap.add_argument(f"--{name}", type=int, default=default)
    a = ap.parse_args()
    with open(a.spec) as f:
        spec = json.load(f)

    import torch

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    cfg, policy = build(spec)
    policy.train()
    opt_cfg = cfg.get_optimizer_preset()
    opt_cfg.grad_clip_norm = float(spec["grad_clip_norm"])
    optimizer = opt_cfg.build(policy.get_optim_params())
    sched_cfg = cfg.get_scheduler_preset()
    scheduler = sched_cfg.build(optimizer, a.warmup + a.steps) if sched_cfg is not None else None
    batch = random_batch(spec, cfg, torch.Generator().manual_seed(a.seed))
    params = [p for p in policy.parameters() if p.requires_grad]

    def step() -> float:
        loss, _ = policy.forward(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, opt_cfg.grad_clip_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        optimizer.zero_grad()
        return loss.item()

    t0 = time.perf_counter()
    for _ in range(a.warmup):
        step()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    run = time.perf_counter() - t0
    print(json.dumps({"steps_per_s": a.steps / run, "warmup_s": first, "steps": a.steps, "loss": loss,
                      "params": sum(p.numel() for p in policy.parameters()), "torch": torch.__version__,
                      "threads": a.threads, "optimizer": _jsonable(opt_cfg),
                      "scheduler": _jsonable(sched_cfg), "config": _jsonable(cfg)}))


if __name__ == "__main__":
    main()
