"""Named training recipes: the policy and train configs the documented commands use.

A :class:`Recipe` is a complete, public description of one training setup -- policy config, train
config, the task and how many demonstrations -- so a Python user gets the same run as the CLI
without reading the CLI's source. ``caliper learn train --policy KIND`` starts from
``RECIPES[DEFAULT_RECIPE[KIND]]`` (every ``--config`` / ``--train-config`` / flag overrides a
field), and ``caliper demo --full`` runs ``RECIPES["demo-full"]``.

The ACT and diffusion recipes are the configurations of ``benchmarks/bench_learn.py``; the BC
recipes run the network every tick with temporal ensembling (executing 5 chunk actions open loop
released or mis-placed the cube under the held, 1 s dwell lift-cube predicate: 9/32 -> 30/32 on
val seed 1000, docs/learn.md). Measured test-seed success, with seeds and machine load, is in
docs/learn.md.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from caliper_jax.errors import CaliperError
from learn.config import ACTConfig, BCConfig, DiffusionConfig, PolicyConfig, TrainConfig, config_to_dict


@dataclass(frozen=True)
class Recipe:
    """``policy`` trained with ``train`` on ``demos`` scripted demonstrations of ``task``."""

    name: str
    policy: PolicyConfig
    train: TrainConfig
    task: str = "lift-cube"
    demos: int = 100
    note: str = ""

    def with_seed(self, seed: int) -> Recipe:
        """The recipe with training seed ``seed`` (weights, split and batches)."""
        return replace(self, train=replace(self.train, seed=int(seed)))

    def to_dict(self) -> dict:
        return {"name": self.name, "task": self.task, "demos": self.demos, "note": self.note,
                "policy": config_to_dict(self.policy), "train": config_to_dict(self.train)}


RECIPES = {r.name: r for r in (
    Recipe("bc-lift-cube", BCConfig(chunk_size=10, n_action_steps=1, temporal_ensemble=0.01),
           TrainConfig(steps=6000, lr=1e-3),
           note="MLP, 10-action chunks, run every tick with temporal ensembling 0.01"),
    Recipe("act-lift-cube", ACTConfig(chunk_size=20, n_action_steps=1, temporal_ensemble=0.01),
           TrainConfig(steps=3000, lr=3e-4, warmup=200),
           note="ACT, 20-action chunks, temporal ensembling 0.01 (lerobot's default)"),
    Recipe("diffusion-lift-cube", DiffusionConfig(n_obs_steps=2, chunk_size=16, n_action_steps=8),
           TrainConfig(steps=3000, lr=1e-3, ema_decay=0.995),
           note="DDPM (MLP denoiser), 2 observations, 16-action chunks, 8 executed, EMA 0.995"),
    Recipe("demo-full", BCConfig(chunk_size=10, n_action_steps=1, temporal_ensemble=0.01),
           TrainConfig(steps=6000, eval_every=6000, log_every=100), demos=40,
           note="`caliper demo --full`: the small BC run of the end-to-end demo"),
)}

#: The recipe ``caliper learn train --policy KIND`` starts from.
DEFAULT_RECIPE = {"bc_mlp": "bc-lift-cube", "act": "act-lift-cube", "diffusion": "diffusion-lift-cube"}


def recipe(name: str) -> Recipe:
    """The named recipe (:data:`RECIPES`), or the default recipe of a policy kind ("bc_mlp", ...)."""
    name = DEFAULT_RECIPE.get(name, name)
    if name not in RECIPES:
        raise CaliperError(f"recipe {name!r}: expected one of {', '.join(RECIPES)} or a policy kind "
                           f"({', '.join(DEFAULT_RECIPE)})")
    return RECIPES[name]


__all__ = ["DEFAULT_RECIPE", "RECIPES", "Recipe", "recipe"]
