"""System identification through contact: friction, damping, armature, prop mass and contact
solref/solimp by Levenberg-Marquardt through chunked, differentiable MJX rollouts.

- :mod:`~caliper_jax.sysid.params`: named, bounded parameters <-> ``mjx.Model`` fields;
- :mod:`~caliper_jax.sysid.rollout`: recorded trajectories, shooting chunks, MJX rollouts and
  residuals, and the MuJoCo C reference rollout;
- :mod:`~caliper_jax.sysid.identify`: the optimiser, the train/validation split and the report;
- :mod:`~caliper_jax.sysid.scenes`: small MJCF scenes (free swing, push, grip) for tests and docs.
"""
from caliper_jax.sysid.identify import (
                                        Evaluator,
                                        SysIdResult,
                                        feature_names,
                                        feature_scale,
                                        identify,
                                        load_trajectories,
                                        planted_dataset,
                                        split_episodes,
)
from caliper_jax.sysid.params import KINDS, Param, ParamSet, param_set
from caliper_jax.sysid.rollout import (
                                        Chunks,
                                        Trajectories,
                                        check_trajectories,
                                        make_chunks,
                                        residuals,
                                        rollout,
                                        simulate,
)

__all__ = ["KINDS", "Chunks", "Evaluator", "Param", "ParamSet", "SysIdResult", "Trajectories",
           "check_trajectories", "feature_names", "feature_scale", "identify", "load_trajectories",
           "make_chunks", "param_set", "planted_dataset", "residuals", "rollout", "simulate",
           "split_episodes"]
