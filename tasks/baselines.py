"""Baseline policies that must not solve a task: uniform random, sticky random and do-nothing.

A success predicate means the task was done only if a policy that does not try cannot satisfy it.
:func:`baseline_rates` runs three such policies side by side on the CPU engine, one episode per
world, all worlds in one batch, and counts the episodes that end in success:

- ``uniform``: every control tick, every joint target drawn uniformly over the action space
  ``[action_low, action_high]`` (the joint limits, gripper included);
- ``sticky``: the same draws, each held for ``STICKY_TICKS`` ticks (a random close that is held
  long enough to take a prop and a random arm motion that carries it: uniform draws change the
  target every tick, so the gated arm hardly moves);
- ``still``: hold ``q0`` (the gripper as at the start).

Actions come from ``numpy.random.default_rng(seed)`` (``seed`` also seeds the environment's
randomisation streams), so a count is reproducible. Every world runs exactly one episode to its
end (success or the horizon); worlds that have finished are frozen (``VecEnv.step(active=...)``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

POLICIES = ("uniform", "sticky", "still")
STICKY_TICKS = 10          # control ticks each sticky draw is held (0.2 s at 50 fps)
MAX_RATE = 0.01            # a baseline succeeding in more than this fraction games the task


@dataclass(frozen=True)
class BaselineCount:
    """Episodes of one baseline policy: ``successes`` of ``episodes``; ``first`` (episode, tick) of
    the earliest success (the episode index within this policy's episodes), None when none."""

    policy: str
    successes: int
    episodes: int
    first: tuple | None = None

    @property
    def rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    @property
    def games(self) -> bool:
        """True when the policy succeeds in more than MAX_RATE of its episodes."""
        return self.rate > MAX_RATE


def _draw(rng, env, n: int) -> np.ndarray:
    lo, hi = env.action_low.astype(np.float64), env.action_high.astype(np.float64)
    return rng.uniform(lo, hi, size=(n, len(lo)))


def baseline_rates(task, episodes: int = 100, *, seed: int = 0, randomization="default",
                   policies=POLICIES, nthread: int | None = None) -> list[BaselineCount]:
    """``episodes`` episodes of each of ``policies`` (names from POLICIES) on ``task`` (zoo name,
    path, Task or TaskScene) -> one :class:`BaselineCount` per policy, in order. All policies run
    side by side in one environment of ``len(policies) * episodes`` worlds (world ``k * episodes +
    e`` is episode ``e`` of policy ``k``), one episode per world. ``randomization``: "default" (the
    environment's defaults), None (off) or an :class:`tasks.env_spec.EnvRandomization`."""
    from caliper_jax.errors import CaliperError
    from tasks.env import VecEnv

    policies = tuple(policies)
    bad = [p for p in policies if p not in POLICIES]
    if bad or not policies:
        name = bad[0] if bad else None
        raise CaliperError(f"baseline policy {name!r}: expected one of {', '.join(POLICIES)}")
    if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
        raise CaliperError(f"baseline episodes: expected a positive integer, got {episodes!r}")
    n, W = int(episodes), len(policies) * int(episodes)
    kind = np.repeat(np.array(policies), n)
    default = isinstance(randomization, str) and randomization == "default"
    kw = {} if default else {"randomization": randomization}
    rng = np.random.default_rng(seed)
    with VecEnv(task, W, seed=seed, nthread=nthread, **kw) as env:
        q0 = np.asarray(env.task_scene.q0, np.float64)
        env.reset()
        action = np.tile(q0, (W, 1))
        active, success = np.ones(W, bool), np.zeros(W, bool)
        first_tick = np.full(W, -1)
        tick = 0
        while active.any():
            draws = _draw(rng, env, W)                       # every tick, for every world: same stream
            action = np.where((kind == "uniform")[:, None], draws, action)
            if tick % STICKY_TICKS == 0:
                action = np.where((kind == "sticky")[:, None], draws, action)
            _, _, term, trunc, info = env.step(action, active=active)
            done = (term | trunc) & active
            won = done & info["episode"]["final_success"]
            first_tick[won] = tick + 1
            success |= won
            active &= ~done
            tick += 1
    out = []
    for k, policy in enumerate(policies):
        part = slice(k * n, (k + 1) * n)
        hits = np.flatnonzero(success[part])
        first = None if not len(hits) else min(((int(first_tick[part][e]), int(e)) for e in hits))
        out.append(BaselineCount(policy, int(len(hits)), n, None if first is None else (first[1], first[0])))
    return out


__all__ = ["MAX_RATE", "POLICIES", "STICKY_TICKS", "BaselineCount", "baseline_rates"]
