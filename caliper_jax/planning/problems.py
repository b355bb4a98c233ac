"""Seeded benchmark problem sets for the planners and CHOMP (the issue's "panda among boxes" and
"collide_arm around an obstacle"). The benchmark (``benchmarks/bench_collision.py``) runs whole
sets; the tests run small prefixes of the same sets.

Every problem's start and goal are inside the limits and clear of everything by ``clearance``
(exact colliders, on the MuJoCo engine of :mod:`caliper_jax.planning.exact`), and the straight
joint-space line between them collides (checked at the set's
edge resolution), so every problem needs a detour. Drawing is deterministic for a seed (NumPy
``default_rng``); the problem list for ``n`` is a prefix of the list for any larger ``n``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.collision.geometry import box, ground
from caliper_jax.collision.scene import CollisionModel, build_collision_model, build_sphere_model
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model
from caliper_jax.planning.exact import ExactChecker


@dataclass
class ProblemSet:
    """``starts``/``goals`` (n, nq) for ``model`` among ``obstacles`` (SRDF allow-list ``srdf``);
    ``resolution`` is the edge-check step the set was drawn with."""

    name: str
    model: Model
    obstacles: list
    srdf: object
    starts: np.ndarray
    goals: np.ndarray
    resolution: float

    def __len__(self) -> int:
        return self.starts.shape[0]

    def collision_model(self) -> CollisionModel:
        return build_collision_model(self.model, self.obstacles, srdf=self.srdf)

    def sphere_model(self) -> CollisionModel:
        return build_sphere_model(self.model, self.obstacles, srdf=self.srdf)[0]


def _draw(name, model, obstacles, srdf, n, seed, resolution, clearance, propose, max_tries):
    if n < 0:
        raise CaliperError(f"n must be >= 0, got {n}")
    cm = build_collision_model(model, obstacles, srdf=srdf)
    clear = ExactChecker(model, cm, margin=clearance, resolution=resolution)
    touch = ExactChecker(model, cm, resolution=resolution)
    rng = np.random.default_rng(seed)
    starts, goals = [], []
    for _ in range(max_tries):
        if len(starts) == n:
            break
        s, g = propose(rng)
        if clear.valid(np.stack([s, g])).all() and not touch.edges_valid(s[None], g[None])[0]:
            starts.append(s)
            goals.append(g)
    if len(starts) < n:
        raise CaliperError(f"{name}: drew only {len(starts)} of {n} problems in {max_tries} tries")
    nq = model.nq
    return ProblemSet(name, model, obstacles, srdf, np.array(starts).reshape(-1, nq),
                      np.array(goals).reshape(-1, nq), resolution)


def collide_arm_problems(n: int, seed: int = 0, *, resolution: float = 0.02,
                         clearance: float = 0.01) -> ProblemSet:
    """collide_arm swinging from one side to the other under a bar at 0.74-0.86 m that the
    straight-up arm (0.9 m) cannot pass: shoulder from [-1.3, -0.7] to [0.7, 1.3] rad, elbow and
    wrist in +-0.4 rad; ground 0.1 m below the shoulder."""
    from caliper_jax.loading import load

    model = load("collide_arm")
    obstacles = [box([0.0, 0.0, 0.8], [0.06, 0.3, 0.06], name="bar"), ground(-0.1)]

    def propose(rng):
        s = np.r_[rng.uniform(-1.3, -0.7), rng.uniform(-0.4, 0.4, 2)]
        g = np.r_[rng.uniform(0.7, 1.3), rng.uniform(-0.4, 0.4, 2)]
        return s, g

    return _draw("collide_arm", model, obstacles, None, n, seed, resolution, clearance, propose, 50 * n + 50)


#: The panda's reference pose: hand forward at about (0.65, 0, 0.33) m.
PANDA_HOME = np.array([0.0, 0.4, 0.0, -1.8, 0.0, 2.2, 0.8, 0.02])


def panda_problems(n: int, seed: int = 0, *, resolution: float = 0.05,
                   clearance: float = 0.01) -> ProblemSet:
    """The panda (SRDF allow-list) reaching from one side of a bar in front of it to the other:
    a bar 0.16 x 0.5 x 0.16 m centred at (0.5, 0, 0.45) across the workspace, a post at
    (0.35, -0.45, 0.25) and the ground. Start and goal are the home pose with the base joint swung
    0.7-1.1 rad to either side and the other arm joints perturbed by up to 0.25 rad."""
    import robots
    from caliper_jax.loading import load

    model = load("panda")
    srdf = robots.example_robot_data_dir() / "panda_description/srdf/panda.srdf"
    obstacles = [box([0.5, 0.0, 0.45], [0.08, 0.25, 0.08], name="bar"),
                 box([0.35, -0.45, 0.25], [0.05, 0.05, 0.25], name="post"), ground(-0.01)]
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)

    def propose(rng):
        swing = rng.uniform(0.7, 1.1, 2) * np.array([-1.0, 1.0])
        out = []
        for k in range(2):
            q = PANDA_HOME.copy()
            q[0] = swing[k]
            q[1:7] += rng.uniform(-0.25, 0.25, 6)
            out.append(np.clip(q, lo, hi))
        return out[0], out[1]

    return _draw("panda", model, obstacles, srdf, n, seed, resolution, clearance, propose, 50 * n + 50)


def panda_pillar_problems(n: int, seed: int = 0, *, resolution: float = 0.005,
                          clearance: float = 0.01) -> ProblemSet:
    """The panda (SRDF allow-list) passing a pillar in front of it: a 0.12 x 0.12 x 0.9 m pillar
    at (0.5, 0, 0.45), a low wall 0.3 m behind the base's left side at (-0.3, 0.35, 0.15) and the
    ground. Start and goal: the home pose with the base joint swung 0.4-0.9 rad to either side,
    the shoulder and elbow perturbed by up to 0.3 rad and the wrist by up to 0.5 rad."""
    import robots
    from caliper_jax.loading import load

    model = load("panda")
    srdf = robots.example_robot_data_dir() / "panda_description/srdf/panda.srdf"
    obstacles = [box([0.5, 0.0, 0.45], [0.06, 0.06, 0.45], name="pillar"),
                 box([-0.3, 0.35, 0.15], [0.2, 0.03, 0.15], name="wall"), ground(-0.01)]
    lo, hi = np.asarray(model.qpos_lower), np.asarray(model.qpos_upper)
    spread = np.array([0.3, 0.3, 0.3, 0.3, 0.5, 0.5])

    def propose(rng):
        swing = rng.uniform(0.4, 0.9, 2) * np.array([-1.0, 1.0])
        out = []
        for k in range(2):
            q = PANDA_HOME.copy()
            q[0] = swing[k]
            q[1:7] += rng.uniform(-1.0, 1.0, 6) * spread
            out.append(np.clip(q, lo, hi))
        return out[0], out[1]

    return _draw("panda_pillar", model, obstacles, srdf, n, seed, resolution, clearance, propose, 50 * n + 50)


__all__ = ["PANDA_HOME", "ProblemSet", "collide_arm_problems", "panda_pillar_problems", "panda_problems"]
