"""The planning front door: classify the goal, search, shortcut-smooth, hand off to retiming.

``plan`` is deterministic for a seed: the only randomness is the JAX PRNG stream of the
:class:`~caliper_jax.planning.sampling.Sampler`, and the host-side search is plain NumPy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.collision.scene import CollisionModel
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model
from caliper_jax.planning.prm import prm
from caliper_jax.planning.reach import BLOCKED, OUT_OF_REACH, REACHABLE, classify_joint_goal
from caliper_jax.planning.rrt import rrt_connect, rrt_star
from caliper_jax.planning.sampling import Sampler, as_key
from caliper_jax.planning.smoothing import path_length, shortcut
from caliper_jax.planning.validity import Checker

PLANNERS = ("rrtconnect", "rrtstar", "prm")


@dataclass
class PlanResult:
    """``status``: reachable (a path was found) / blocked / out_of_reach, with a ``reason``.
    ``waypoints``: the smoothed path (n, nq) from start to goal; ``raw``: before smoothing."""

    status: str
    reason: str
    planner: str
    waypoints: np.ndarray | None
    raw: np.ndarray | None
    iterations: int = 0
    nodes: int = 0
    calls: int = 0
    states_checked: int = 0
    resolution: float = 0.0

    @property
    def success(self) -> bool:
        return self.waypoints is not None

    @property
    def length(self) -> float:
        return path_length(self.waypoints) if self.waypoints is not None else float("nan")

    def to_dict(self) -> dict:
        return {
            "status": self.status, "reason": self.reason, "planner": self.planner, "success": self.success,
            "waypoints": None if self.waypoints is None else self.waypoints.tolist(),
            "raw_waypoints": None if self.raw is None else int(self.raw.shape[0]),
            "length": None if self.waypoints is None else self.length,
            "iterations": self.iterations, "nodes": self.nodes, "validity_calls": self.calls,
            "states_checked": self.states_checked, "edge_resolution": self.resolution,
        }


def plan(model: Model, cm: CollisionModel, goal, start=None, *, planner: str = "rrtconnect", seed=0,
         resolution: float = 0.02, margin: float = 0.0, step: float = 0.3, max_iterations: int | None = None,
         smooth: bool = True, checker: Checker | None = None) -> PlanResult:
    """Plan a collision-free joint-space path from ``start`` (default: the neutral pose) to
    ``goal``. ``seed`` is an int or a JAX key. ``resolution`` is the edge-check step (rad or m),
    ``margin`` a required clearance (m). ``max_iterations`` bounds the search (planner-specific
    default); for PRM it bounds the roadmap size in samples."""
    if planner not in PLANNERS:
        raise CaliperError(f"unknown planner {planner!r} (expected one of {', '.join(PLANNERS)})")
    if not (np.isfinite(step) and step > 0):
        raise CaliperError(f"step must be > 0, got {step!r}")
    if max_iterations is not None and max_iterations < 1:
        raise CaliperError(f"max_iterations must be >= 1, got {max_iterations!r}")
    checker = checker or Checker(model, cm, margin=margin, resolution=resolution)
    goal = np.asarray(goal, dtype=np.float64).reshape(-1)
    if start is None:
        from caliper_jax.configuration import neutral

        start = np.asarray(neutral(model), dtype=np.float64)
    start = np.asarray(start, dtype=np.float64).reshape(-1)
    for name, x in (("goal", goal), ("start", start)):
        if x.shape != (model.nq,) or not np.all(np.isfinite(x)):
            raise CaliperError(f"{name}: expected {model.nq} finite joint values for {model.name!r}")
    calls0, states0 = checker.calls, checker.states

    def result(status, reason, path=None, raw=None, stats=None):
        return PlanResult(status, reason, planner, path, raw, getattr(stats, "iterations", 0),
                          getattr(stats, "nodes", 0), checker.calls - calls0, checker.states - states0,
                          checker.resolution)

    s = classify_joint_goal(checker, start)
    if s.status != REACHABLE:
        return result(s.status, f"start: {s.reason}")
    g = classify_joint_goal(checker, goal)
    if g.status != REACHABLE:
        return result(g.status, g.reason)
    sampler = Sampler(as_key(seed), checker.lower, checker.upper)
    if planner == "rrtconnect":
        raw, stats = rrt_connect(checker, start, goal, sampler, step=step,
                                 max_iterations=max_iterations or 2000)
    elif planner == "rrtstar":
        raw, stats = rrt_star(checker, start, goal, sampler, step=step,
                              max_iterations=max_iterations or 3000)
    else:
        raw, stats = prm(checker, start, goal, sampler, max_nodes=max_iterations or 4096)
    if raw is None:
        return result(BLOCKED, f"no collision-free path found by {planner} within its budget "
                               f"({stats.iterations} iterations, {stats.nodes} nodes); sampling-based, so "
                               "this is not a proof that none exists", stats=stats)
    path = shortcut(checker, raw, sampler) if smooth else raw
    return result(REACHABLE, f"path found by {planner}: {path.shape[0]} waypoints, length "
                             f"{path_length(path):.4g} (joint space)", path, raw, stats)


RETIMERS = ("scurve", "topp")


def plan_trajectory(model: Model, waypoints, limits=None, method: str = "scurve"):
    """Time a waypoint path with the motion module, under ``limits`` (default: the model's
    :class:`~caliper_jax.motion.MotionLimits`):

    * ``"scurve"``: :func:`caliper_jax.motion.retime_waypoints` -- jerk-limited S-curves, rest at
      every waypoint; the joints are synchronised in time, not in shape, so the motion can leave
      the straight (checked) segments between waypoints: lint it (:func:`lint_trajectory`);
    * ``"topp"``: :func:`caliper_jax.motion.topp_piecewise_linear` -- time-optimal,
      acceleration-limited, stops at every waypoint, and stays exactly on the checked segments
      (jerk unbounded at the switches).
    """
    from caliper_jax.motion import MotionLimits, retime_waypoints, topp_piecewise_linear

    if method not in RETIMERS:
        raise CaliperError(f"retiming method must be one of {', '.join(RETIMERS)}, got {method!r}")
    limits = limits or MotionLimits.from_model(model)
    waypoints = np.asarray(waypoints, dtype=np.float64)
    if method == "topp":
        return topp_piecewise_linear(waypoints, limits)
    return retime_waypoints(waypoints, limits)


__all__ = ["BLOCKED", "OUT_OF_REACH", "PLANNERS", "PlanResult", "REACHABLE", "RETIMERS", "plan",
           "plan_trajectory"]
