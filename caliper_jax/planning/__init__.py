"""Sampling-based joint-space planning: RRT-Connect as one jitted loop on the sphere checker
(default, :mod:`caliper_jax.planning.vrrt`), host RRT-Connect, RRT*, PRM; shortcut smoothing;
goal reachability; hand-off to the motion module's retiming. Validity checks are batched JAX calls
(see :mod:`caliper_jax.planning.validity`); edges are checked at a sampling resolution."""
from caliper_jax.planning.planner import (
    PLANNERS,
    RETIMERS,
    PlanBatch,
    PlanResult,
    exact_checker,
    fast_checker,
    plan,
    plan_many,
    plan_trajectory,
)
from caliper_jax.planning.problems import ProblemSet, collide_arm_problems, panda_problems
from caliper_jax.planning.reach import (
    BLOCKED,
    OUT_OF_REACH,
    REACHABLE,
    Reach,
    classify_joint_goal,
    classify_position_goal,
)
from caliper_jax.planning.sampling import Sampler
from caliper_jax.planning.smoothing import path_length, shortcut
from caliper_jax.planning.validity import Checker
from caliper_jax.planning.vrrt import SearchOptions, escape_endpoints, solve_many, solve_one
from caliper_jax.planning.vshortcut import ShortcutOptions

__all__ = [
    "BLOCKED",
    "Checker",
    "OUT_OF_REACH",
    "PLANNERS",
    "PlanBatch",
    "PlanResult",
    "ProblemSet",
    "REACHABLE",
    "RETIMERS",
    "Reach",
    "Sampler",
    "SearchOptions",
    "ShortcutOptions",
    "classify_joint_goal",
    "collide_arm_problems",
    "escape_endpoints",
    "exact_checker",
    "fast_checker",
    "classify_position_goal",
    "panda_problems",
    "path_length",
    "plan",
    "plan_many",
    "plan_trajectory",
    "shortcut",
    "solve_many",
    "solve_one",
]
