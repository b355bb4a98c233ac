"""Rollout collectors: one trainer, two engines.

Both return a :class:`learn.rl.ppo.Rollout` (T, W, ...) and the episodes that ended in it
(:class:`Episodes`), for ``act(params, stats, obs (W, obs_dim), key) -> (u, logp)``, a pure JAX
policy over normalised actions ``u`` (the env receives ``centre + half * u``):

- :class:`CpuCollector` (engine "mujoco"): per tick one jitted policy call for all worlds and one
  batched MuJoCo call (:meth:`tasks.env.VecEnv.step`); the policy key of tick t is
  ``fold_in(key, t)``.
- :class:`MjxCollector` (engine "mjx"): the whole batch -- policy, physics, rewards, auto-resets --
  is one jitted ``lax.scan`` of :meth:`tasks.env_mjx.MjxEnv.step_state`, the same per-tick keys.
  A non-finite dense reward term cannot raise inside the scan; the scan returns a per-term flag
  and the host raises naming the term.

Each collector restarts its worlds with :meth:`restart` (``seed``: the randomisation streams'
base), which the trainer calls at every checkpoint boundary so a resumed run replays exactly.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from learn.rl.ppo import Rollout
from tasks import rewards as R


class Episodes(NamedTuple):
    """Episodes that ended in a batch: success (n,) bool, return (n,) float, length (n,) int, and
    ``held`` (n,) bool: a prop was held on the success tick (from a ``grasp`` reward term; all
    False without one) -- a task predicate such as ``lifted`` also fires on a knocked prop."""

    success: np.ndarray
    ret: np.ndarray
    length: np.ndarray
    held: np.ndarray


def grasp_terms(task) -> tuple:
    """Names of the task's active ``grasp`` reward terms (their value says a prop is held)."""
    return () if task.reward is None else tuple(t.name for t in task.reward.active if t.kind == "grasp")


def _held(terms: dict, names: tuple, xp=np):
    """(...) bool: some ``grasp`` term is on, or None without one."""
    return None if not names else sum(xp.abs(terms[n]) for n in names) > 0


def _episodes(done, success, ret, length, held=None) -> Episodes:
    done = np.asarray(done, bool)
    success = np.asarray(success)[done]
    held = np.zeros_like(success) if held is None else np.asarray(held)[done] & success
    return Episodes(success, np.asarray(ret, np.float64)[done], np.asarray(length)[done], held)


class CpuCollector:
    """Rollouts on :class:`tasks.env.VecEnv` (MuJoCo's C batch)."""

    def __init__(self, env, act, centre, half):
        self.env = env
        self._act = jax.jit(act)
        self._centre, self._half = np.asarray(centre, np.float64), np.asarray(half, np.float64)
        self._grasp = grasp_terms(env.task)
        self._obs = None

    def restart(self, seed: int) -> None:
        self._obs, _ = self.env.reset(seed=int(seed))

    def collect(self, params, stats, key, ticks: int) -> tuple[Rollout, Episodes]:
        env, W = self.env, self.env.num_envs
        A, D = env.action_dim, env.obs_dim
        obs_b, fin_b = np.zeros((ticks, W, D), np.float32), np.zeros((ticks, W, D), np.float32)
        u_b, logp_b = np.zeros((ticks, W, A), np.float32), np.zeros((ticks, W), np.float32)
        rew_b = np.zeros((ticks, W), np.float32)
        term_b, done_b = np.zeros((ticks, W), bool), np.zeros((ticks, W), bool)
        succ, held, ret, length = (np.zeros((ticks, W), t) for t in (bool, bool, np.float64, np.int64))
        obs = self._obs
        for t in range(ticks):
            u, logp = self._act(params, stats, obs, jax.random.fold_in(key, t))
            u = np.asarray(u)
            obs_b[t], u_b[t], logp_b[t] = obs, u, np.asarray(logp)
            obs, rew_b[t], term_b[t], trunc, info = env.step(self._centre + self._half * u)
            done_b[t] = term_b[t] | trunc
            fin_b[t] = info["final_obs"]
            ep = info["episode"]
            succ[t], ret[t], length[t] = ep["final_success"], ep["final_return"], ep["final_length"]
            h = _held(info["reward_terms"], self._grasp)
            held[t] = False if h is None else h
        self._obs = obs
        ro = Rollout(obs_b, u_b, logp_b, rew_b, term_b, done_b, fin_b)
        return jax.tree_util.tree_map(jnp.asarray, ro), _episodes(done_b, succ, ret, length, held)


def first_episodes(env, act, centre, half, seed: int) -> np.ndarray:
    """(W,) bool: whether each world's first episode of randomisation seed ``seed`` succeeded under
    the deterministic ``act(obs (W, obs_dim)) -> u (W, A)`` (normalised actions) on the CPU
    engine's ``env`` -- one jitted policy call and one batched MuJoCo call per tick, at most one
    horizon of ticks."""
    obs, _ = env.reset(seed=int(seed))
    W = env.num_envs
    ended, success = np.zeros(W, bool), np.zeros(W, bool)
    while not ended.all():
        u = np.asarray(act(obs), np.float64)
        obs, _, term, trunc, info = env.step(centre + half * u)
        done = np.asarray(term | trunc, bool)
        new = done & ~ended
        success[new] = np.asarray(info["episode"]["final_success"])[new]
        ended |= done
    return success


class MjxCollector:
    """Rollouts on :class:`tasks.env_mjx.MjxEnv`: one jitted ``lax.scan`` per batch."""

    def __init__(self, env, act, centre, half, ticks: int):
        self.env = env
        self._centre = jnp.asarray(centre, env._gdtype)
        self._half = jnp.asarray(half, env._gdtype)
        self._state = None
        names = grasp_terms(env.task)

        def scan(params, stats, state, key):
            def body(s, t):
                u, logp = act(params, stats, s.obs, jax.random.fold_in(key, t))
                n = env.step_state(s, self._centre + self._half * u.astype(self._half.dtype))
                i = n.info
                bad = {k: ~jnp.all(jnp.isfinite(v)) for k, v in i["reward_terms"].items()}
                done = n.terminated | n.truncated
                out = (Rollout(s.obs, u, logp, n.reward, n.terminated, done, i["final_obs"]),
                       (i["final_success"], i["final_return"], i["final_length"],
                        _held(i["reward_terms"], names, jnp)), bad)
                return n, out

            state, (ro, ep, bad) = jax.lax.scan(body, state, jnp.arange(ticks))
            return state, ro, ep, jax.tree_util.tree_map(jnp.any, bad)

        self._scan = jax.jit(scan)

    def restart(self, seed: int) -> None:
        self._state = self.env.jit_reset(jax.random.PRNGKey(int(seed)))

    def collect(self, params, stats, key, ticks: int) -> tuple[Rollout, Episodes]:
        self._state, ro, (succ, ret, length, held), bad = self._scan(params, stats, self._state, key)
        R.check_finite({k: np.nan if bool(v) else 0.0 for k, v in bad.items()}, " (inside the MJX rollout)")
        return ro, _episodes(ro.done, succ, ret, length, held)


__all__ = ["CpuCollector", "Episodes", "MjxCollector", "first_episodes"]
