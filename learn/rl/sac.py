"""SAC (soft actor-critic) in flax NNX + optax: twin Q, automatic temperature, a replay buffer on
the device, and one jitted update.

Actor: ``learn.policies.layers.MLP`` from the normalised policy features (as PPO's,
:mod:`learn.rl.ppo`) to the mean of a Gaussian over the *pre-squash* action, a state-independent
``log_std`` parameter (clipped to [LOG_STD_MIN, LOG_STD_MAX]); the normalised action is
``u = tanh(pre)`` in [-1, 1] and the env receives ``centre + half * u``. The log-probability
carries the tanh change of variables. The deterministic policy ``tanh(mean)`` exports as a BC-MLP
with ``squash=True`` (:class:`learn.config.BCConfig`), so ``caliper learn eval|sweep|...`` run it.

Critics: two MLPs from (normalised env observation, u) to Q; their Polyak-averaged copy (rate
``tau``) gives the target ``r * reward_scale + gamma * (1 - terminated) * (min Q'(s', a') - alpha
* log pi(a' | s'))``, a' drawn from the policy at ``s' = final_obs`` (the observation after the
tick, before any auto-reset: truncations bootstrap, successes do not). Temperature: ``log_alpha``
learned towards the target entropy ``-action_dim``.

All trainable parameters (actor, log_std, both critics, log_alpha) live in one flat float32
vector; the three losses are summed with ``stop_gradient`` where each must not reach the other's
parameters, so one elementwise Adam is exactly three Adams at one learning rate.

:func:`make_update` returns one jitted ``update(state, rollout) -> (state, metrics)``: the
rollout's (T * W) transitions go into the ring buffer, then ``grad_steps`` gradient steps each on
``batch_size`` transitions drawn uniformly from the filled part, then the running observation
statistics take the rollout's observations. Deterministic given the state's key.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from caliper_jax.errors import CaliperError
from learn.policies.layers import MLP
from learn.rl.ppo import Rollout, RunConfig, RunningStats, check_action_frame, config_kwargs

LOG_STD_MIN, LOG_STD_MAX = -5.0, 1.0
_EPS = 1e-6


@dataclass(frozen=True)
class SACConfig(RunConfig):
    """SAC hyper-parameters. Each update collects ``envs`` worlds x ``rollout`` ticks and takes
    ``grad_steps`` gradient steps; ``steps``: env steps of the whole run (rounded up to whole
    updates); ``buffer``: replay capacity in transitions."""

    envs: int = 32
    rollout: int = 4
    steps: int = 200_000
    buffer: int = 100_000
    batch_size: int = 256
    grad_steps: int = 16
    lr: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    reward_scale: float = 0.1
    init_alpha: float = 0.1
    init_log_std: float = -1.0
    actor_hidden: tuple = (64, 64)
    critic_hidden: tuple = (128, 128)
    action_centre: str = "limits"
    action_scale: float = 1.0
    seed: int = 0

    def __post_init__(self):
        check_action_frame(self, "sac config")
        for name in ("envs", "rollout", "steps", "buffer", "batch_size", "grad_steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise CaliperError(f"sac config: {name} must be an integer >= 1, got {v!r}")
        for name in ("lr", "reward_scale", "init_alpha", "tau"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise CaliperError(f"sac config: {name} must be a number > 0, got {v!r}")
        if not (isinstance(self.gamma, (int, float)) and 0 <= self.gamma <= 1):
            raise CaliperError(f"sac config: gamma must be in [0, 1], got {self.gamma!r}")
        if self.tau > 1:
            raise CaliperError(f"sac config: tau must be in (0, 1], got {self.tau!r}")
        if self.buffer < self.batch:
            raise CaliperError(f"sac config: buffer ({self.buffer}) must hold one collection of envs * "
                               f"rollout ({self.batch}) transitions")

    @staticmethod
    def from_dict(d: dict, where: str = "sac config") -> SACConfig:
        return SACConfig(**config_kwargs(SACConfig, d, where))


class Nets(NamedTuple):
    actor: Any
    critic: Any
    unravel: Any


class Buffer(NamedTuple):
    """Ring buffer of transitions, (capacity, ...) each; ``ptr`` the next slot, ``count`` filled."""

    obs: Any          # (C, obs_dim) float32 raw observations
    u: Any            # (C, A) normalised actions
    reward: Any       # (C,) unscaled reward
    next_obs: Any     # (C, obs_dim) final_obs
    terminated: Any   # (C,) float32
    ptr: Any          # () int32
    count: Any        # () int32

    @staticmethod
    def init(capacity: int, obs_dim: int, action_dim: int) -> Buffer:
        f = jnp.float32
        return Buffer(jnp.zeros((capacity, obs_dim), f), jnp.zeros((capacity, action_dim), f),
                      jnp.zeros(capacity, f), jnp.zeros((capacity, obs_dim), f), jnp.zeros(capacity, f),
                      jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))

    def add(self, ro: Rollout) -> Buffer:
        n = ro.reward.size
        cap = self.reward.shape[0]
        idx = (self.ptr + jnp.arange(n)) % cap
        put = lambda buf, x: buf.at[idx].set(x.reshape((n,) + buf.shape[1:]).astype(buf.dtype))  # noqa: E731
        return Buffer(put(self.obs, ro.obs), put(self.u, ro.u), put(self.reward, ro.reward),
                      put(self.next_obs, ro.final_obs), put(self.terminated, ro.terminated),
                      ((self.ptr + n) % cap).astype(jnp.int32),
                      jnp.minimum(self.count + n, cap).astype(jnp.int32))


class SACState(NamedTuple):
    params: Any        # (n,) float32: actor, log_std, q1, q2, log_alpha
    target: Any        # (n,) float32: the Polyak copy (its critic entries are used)
    opt_state: Any
    buffer: Buffer
    stats: RunningStats
    key: Any
    update: Any        # () int32 updates done


def build(cfg: SACConfig, feat_dim: int, obs_dim: int, action_dim: int) -> tuple[Nets, Any]:
    """(Nets, initial flat parameter vector) from the seed."""
    from jax.flatten_util import ravel_pytree

    ka, k1, k2 = jax.random.split(jax.random.PRNGKey(cfg.seed), 3)
    actor = MLP(feat_dim, tuple(cfg.actor_hidden), action_dim, rngs=nnx.Rngs(params=ka))
    q1 = MLP(obs_dim + action_dim, tuple(cfg.critic_hidden), 1, rngs=nnx.Rngs(params=k1))
    q2 = MLP(obs_dim + action_dim, tuple(cfg.critic_hidden), 1, rngs=nnx.Rngs(params=k2))
    ga, pa = nnx.split(actor, nnx.Param)
    gq, p1 = nnx.split(q1, nnx.Param)
    _, p2 = nnx.split(q2, nnx.Param)
    tree = {"actor": pa, "log_std": jnp.full(action_dim, cfg.init_log_std, jnp.float32), "q1": p1, "q2": p2,
            "log_alpha": jnp.asarray(np.log(cfg.init_alpha), jnp.float32)}
    flat, unravel = ravel_pytree(tree)
    return Nets(ga, gq, unravel), flat


def init_state(cfg: SACConfig, nets: Nets, flat, obs_dim: int, action_dim: int) -> SACState:
    return SACState(flat, flat, optax.adam(cfg.lr).init(flat), Buffer.init(cfg.buffer, obs_dim, action_dim),
                    RunningStats.init(obs_dim), jax.random.PRNGKey(cfg.seed + 1), jnp.zeros((), jnp.int32))


def _log_std(tree):
    return jnp.clip(tree["log_std"], LOG_STD_MIN, LOG_STD_MAX)


def actor_mean(nets: Nets, params, feats):
    """(..., feat_dim) normalised features -> (..., A) mean of the pre-squash Gaussian."""
    return nnx.merge(nets.actor, nets.unravel(params)["actor"])(feats)


def _sample(nets: Nets, params, feats, key):
    """(u (..., A) in [-1, 1], log pi(u) (...,)) with the tanh change of variables."""
    mean = actor_mean(nets, params, feats)
    log_std = _log_std(nets.unravel(params))
    eps = jax.random.normal(key, mean.shape, mean.dtype)
    pre = mean + jnp.exp(log_std) * eps
    u = jnp.tanh(pre)
    logp = jnp.sum(-0.5 * jnp.square(eps) - log_std - 0.5 * jnp.log(2 * jnp.pi), axis=-1)
    return u, logp - jnp.sum(jnp.log(1.0 - jnp.square(u) + _EPS), axis=-1)


def _q(nets: Nets, params, which: str, obs_n, u):
    x = jnp.concatenate([obs_n, u], axis=-1)
    return nnx.merge(nets.critic, nets.unravel(params)[which])(x)[..., 0]


def make_policy(nets: Nets, feat_idx: np.ndarray):
    """``act(params, stats, obs (W, obs_dim), key) -> (u (W, A), logp (W,))``: a squashed sample
    (pure JAX, for both collectors)."""
    idx = jnp.asarray(feat_idx)

    def act(params, stats: RunningStats, obs, key):
        feats = (obs[..., idx] - stats.mean[idx]) / stats.std()[idx]
        return _sample(nets, params, feats, key)

    return act


def make_update(cfg: SACConfig, nets: Nets, feat_idx: np.ndarray, action_dim: int):
    """The jitted ``update(state, rollout) -> (state, metrics)`` (module docstring)."""
    tx = optax.adam(cfg.lr)
    idx = jnp.asarray(feat_idx)
    target_entropy = -float(action_dim)
    sg = jax.lax.stop_gradient

    def loss_fn(params, target, stats, b, key):
        k_next, k_pi = jax.random.split(key)
        obs_n, next_n = stats.normalize(b["obs"]), stats.normalize(b["next_obs"])
        log_alpha = nets.unravel(params)["log_alpha"]
        alpha = jnp.exp(log_alpha)
        # critics: the target from the Polyak copy and a fresh action at s'
        u_next, logp_next = _sample(nets, sg(params), next_n[..., idx], k_next)
        q_next = jnp.minimum(_q(nets, target, "q1", next_n, u_next), _q(nets, target, "q2", next_n, u_next))
        y = sg(b["reward"] * cfg.reward_scale
               + cfg.gamma * (1.0 - b["terminated"]) * (q_next - sg(alpha) * logp_next))
        q1, q2 = _q(nets, params, "q1", obs_n, b["u"]), _q(nets, params, "q2", obs_n, b["u"])
        q_loss = 0.5 * jnp.mean(jnp.square(q1 - y) + jnp.square(q2 - y))
        # actor: through frozen critics
        u_pi, logp_pi = _sample(nets, params, obs_n[..., idx], k_pi)
        frozen = sg(params)
        q_pi = jnp.minimum(_q(nets, frozen, "q1", obs_n, u_pi), _q(nets, frozen, "q2", obs_n, u_pi))
        actor_loss = jnp.mean(sg(alpha) * logp_pi - q_pi)
        # temperature
        alpha_loss = -jnp.mean(log_alpha * sg(logp_pi + target_entropy))
        return q_loss + actor_loss + alpha_loss, {"q_loss": q_loss, "actor_loss": actor_loss, "alpha": alpha,
                                                  "entropy": -jnp.mean(logp_pi), "q_mean": jnp.mean(q1)}

    grad_fn = jax.grad(loss_fn, has_aux=True)

    def update(state: SACState, ro: Rollout):
        T, W = ro.reward.shape
        buf = state.buffer.add(Rollout(ro.obs, ro.u, ro.logp, ro.reward, ro.terminated.astype(jnp.float32),
                                       ro.done, ro.final_obs))
        stats = state.stats
        key, sub = jax.random.split(state.key)

        def step(carry, k):
            params, target, opt = carry
            k_idx, k_loss = jax.random.split(k)
            i = jax.random.randint(k_idx, (cfg.batch_size,), 0, buf.count)
            b = {"obs": buf.obs[i], "u": buf.u[i], "reward": buf.reward[i], "next_obs": buf.next_obs[i],
                 "terminated": buf.terminated[i]}
            g, m = grad_fn(params, target, stats, b, k_loss)
            upd, opt = tx.update(g, opt, params)
            params = optax.apply_updates(params, upd)
            target = target + cfg.tau * (params - target)
            return (params, target, opt), m

        (params, target, opt), ms = jax.lax.scan(step, (state.params, state.target, state.opt_state),
                                                 jax.random.split(sub, cfg.grad_steps))
        metrics = jax.tree_util.tree_map(jnp.mean, ms)
        metrics["std"] = jnp.exp(_log_std(nets.unravel(params))).mean()
        stats = stats.update(ro.obs.reshape(T * W, -1))
        return SACState(params, target, opt, buf, stats, key, state.update + 1), metrics

    return jax.jit(update)


METRICS = ("q_loss", "actor_loss", "alpha", "entropy", "q_mean", "std")

__all__ = ["METRICS", "Buffer", "Nets", "SACConfig", "SACState", "actor_mean", "build", "init_state",
           "make_policy", "make_update"]
