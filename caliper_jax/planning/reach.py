"""Reachability of goals: ``reachable`` / ``blocked`` / ``out_of_reach``, collision-aware.

* Joint-space goals (:func:`classify_joint_goal`): out of reach when outside the joint limits,
  blocked when the goal state collides (or no path is found -- see :func:`caliper_jax.planning.plan`),
  otherwise reachable as far as the goal state goes.
* Position goals for a frame (:func:`classify_position_goal`): ``samples`` random configurations
  are pulled towards the target by damped least squares on the frame position, all at once
  (``vmap`` + ``lax.scan``); the goal is out of reach when none gets within ``tol``, blocked when
  every one that does collides, and reachable otherwise (a collision-free witness is returned).
  Sampling-based: "out of reach" means no sample converged, not a proof.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.kinematics import frame_jacobian, frame_pose
from caliper_jax.planning.sampling import Sampler
from caliper_jax.planning.validity import Checker

REACHABLE, BLOCKED, OUT_OF_REACH = "reachable", "blocked", "out_of_reach"


@dataclass
class Reach:
    status: str
    reason: str
    witness: np.ndarray | None = None

    def to_dict(self) -> dict:
        return {"status": self.status, "reason": self.reason,
                "witness": None if self.witness is None else self.witness.tolist()}


def classify_joint_goal(checker: Checker, goal, tol: float = 1e-9) -> Reach:
    goal = np.asarray(goal, dtype=np.float64)
    below = goal < checker.lower - tol
    above = goal > checker.upper + tol
    if np.any(below | above):
        j = int(np.flatnonzero(below | above)[0])
        side, bound = ("lower", checker.lower[j]) if below[j] else ("upper", checker.upper[j])
        names = getattr(getattr(checker, "model", None), "joint_names", ())
        name = names[j] if len(names) == len(goal) else str(j)
        return Reach(OUT_OF_REACH, f"joint {name} goal {goal[j]:.6g} is beyond its {side} limit {bound:.6g}")
    if not checker.valid_one(goal):
        what = "in collision"
        if checker.margin > 0:
            what += f" or closer than the {checker.margin:g} m margin"
        return Reach(BLOCKED, f"the configuration is {what}")
    return Reach(REACHABLE, "the configuration is inside the limits and collision-free", goal)


def _pull(model, frame, target, lo, hi, iterations, damping):
    def one(q0):
        def step(q, _):
            p = frame_pose(model, q, frame)[:3, 3]
            J = frame_jacobian(model, q, frame)[:3]
            e = target - p
            dq = J.T @ jnp.linalg.solve(J @ J.T + damping * jnp.eye(3, dtype=J.dtype), e)
            dq = jnp.clip(dq, -0.3, 0.3)
            return jnp.clip(q + dq, lo, hi), None
        q, _ = jax.lax.scan(step, q0, None, length=iterations)
        err = jnp.linalg.norm(target - frame_pose(model, q, frame)[:3, 3])
        return q, err
    return one


_pull_batch = jax.jit(lambda model, target, q0, lo, hi, damping, frame, iterations: jax.vmap(
    _pull(model, frame, target, lo, hi, iterations, damping))(q0), static_argnums=(6, 7))


def classify_position_goal(checker: Checker, frame: str, target, key, *, samples: int = 256,
                           tol: float = 1e-3, iterations: int = 40, damping: float = 1e-4) -> Reach:
    """Can ``frame`` reach the world position ``target`` (3,) without collision?"""
    model = checker.model
    fid = model.frame_id(frame)
    target = np.asarray(target, dtype=np.float64).reshape(-1)
    if target.shape != (3,) or not np.all(np.isfinite(target)):
        raise CaliperError(f"position goal must be 3 finite numbers, got {target!r}")
    lo = np.where(np.isfinite(checker.lower), checker.lower, -np.pi)
    hi = np.where(np.isfinite(checker.upper), checker.upper, np.pi)
    q0 = Sampler(key, checker.lower, checker.upper).configs(samples)
    dt = model.dtype
    q, err = _pull_batch(model, jnp.asarray(target, dt), jnp.asarray(q0, dt), jnp.asarray(lo, dt),
                         jnp.asarray(hi, dt), jnp.asarray(damping, dt), fid, iterations)
    q, err = np.asarray(q, dtype=np.float64), np.asarray(err, dtype=np.float64)
    close = err <= tol
    if not close.any():
        return Reach(OUT_OF_REACH, f"none of {samples} samples brought {frame!r} within {tol:g} m of the "
                                   f"target (closest {err.min():.4g} m)")
    cand = q[close]
    ok = checker.valid(cand)
    if not ok.any():
        return Reach(BLOCKED, f"all {int(close.sum())} configurations reaching the target are in collision")
    best = cand[ok][0]
    return Reach(REACHABLE, f"{int(ok.sum())} of {int(close.sum())} reaching configurations are "
                            "collision-free", best)
