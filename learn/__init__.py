"""learn: policies (BC-MLP, ACT, diffusion; flax NNX), the dataset loader and normalisation,
optax training with orbax checkpoints, deploy (observation history, action chunks, temporal
ensembling), batched closed-loop evaluation on the task VecEnv, and the verdicts (E/L/P codes and
the autopsy). Names load lazily; importing ``learn`` never imports JAX."""
from __future__ import annotations

from caliper_jax.lazy import LazyExports

_lazy = LazyExports(__name__, globals())
_export = _lazy.add


_export(".config", "ACTConfig", "BCConfig", "DiffusionConfig", "PolicyConfig", "TrainConfig",
        "config_from_dict", "config_to_dict")
_export(".features", "FeatureLayout", "env_observation", "layout_from_info")
_export(".normalize", "Normalizer")
_export(".bundle", "TrainedPolicy")
_export(".policies", "Batch", "build_policy")
_export(".data", "Frames", "WindowDataset", "fit_normalizer", "load_frames", "prepare", "split_episodes")
_export(".checkpoint", "Checkpoint", "dataset_fingerprint", "export_safetensors", "import_safetensors",
        "load_checkpoint", "save_checkpoint")
_export(".train", "TrainResult", "fit", "make_optimizer")
_export(".deploy", "Deployer", "DeploySpec", "DeployState", "JaxPolicy", "PolicyState", "init_state",
        "jax_policy", "reset_worlds", "step")
_export(".protocol", "SPLITS", "split_of", "split_seeds")
_export(".recipes", "RECIPES", "Recipe", "recipe")
# ``evaluate`` and ``autopsy`` are functions of the modules ``learn.evaluate`` / ``learn.autopsy``:
# not exported here, so that ``learn.evaluate`` stays the module whatever was imported first.
_export(".evaluate", "EvalResult", "serial_eval", "sweep")
_export(".verdicts", "eval_findings", "wilson_interval")
_export(".profile", "LatencyReport", "profile_rollout")
_export(".debug", "analyze_policy")
_export(".autopsy", "AutopsyReport")

__all__, __getattr__, __dir__ = _lazy.all(), _lazy.getattr, _lazy.dir
