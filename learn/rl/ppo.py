"""PPO (clipped objective) in flax NNX + optax: the networks, the train state and one jitted update.

Actor: ``learn.policies.layers.MLP`` (GELU) from the normalised policy features (the recorded
features of :func:`learn.features.env_observation`, ``(obs - mean) / std`` with running statistics)
to the mean of a diagonal Gaussian over *normalised* actions ``u``; the joint targets sent to the
env are ``centre + half * u`` (``centre``, ``half``: the middle and half range of the joint
limits; the safety gate clamps to the limits). The state-independent ``log_std`` is a parameter.
Because the actor is exactly a BC-MLP with an action normaliser (mean ``centre``, std ``half``),
the deterministic policy exports as a :class:`learn.bundle.TrainedPolicy` that ``caliper learn
eval|sweep|profile|autopsy`` run unchanged (:func:`export_policy`).

Critic: an MLP from the full normalised env observation (velocities and the held flag included)
to a scalar value. All trainable parameters live in one flat float32 vector (``ravel_pytree``),
so the optax state is a few plain arrays and checkpoints are shape-checked leaf by leaf.

:func:`make_update` returns one jitted function ``update(state, rollout) -> (state, metrics)``:
values of every observation and every ``final_obs`` (bootstrap on truncation), GAE(lambda),
``epochs`` passes of shuffled minibatches (advantages normalised per minibatch, clipped ratio,
optionally clipped value loss, entropy bonus, global-norm gradient clip, learning rate annealed
linearly to 0 over the run), then the running observation statistics take the rollout's
observations (the next collection uses them). Deterministic given the state's key.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from caliper_jax.errors import CaliperError
from learn.normalize import STD_FLOOR
from learn.policies.layers import MLP


class RunConfig:
    """What every RL config (a frozen dataclass with ``envs``, ``rollout``, ``steps``) shares."""

    @property
    def batch(self) -> int:
        """Env steps collected per update: ``envs * rollout``."""
        return self.envs * self.rollout

    @property
    def updates(self) -> int:
        return -(-self.steps // self.batch)

    def to_dict(self) -> dict:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in fields(self)}


def config_kwargs(cls, d: dict, where: str) -> dict:
    """The keyword arguments of ``cls`` from the JSON dict ``d`` (the ``*hidden`` lists as tuples);
    an unknown key is a CaliperError naming ``where`` and the known keys."""
    known = {f.name for f in fields(cls)}
    bad = sorted(set(d) - known)
    if bad:
        raise CaliperError(f"{where}: unknown key(s) {', '.join(map(repr, bad))} "
                           f"(known: {', '.join(sorted(known))})")
    return {k: tuple(v) if k.endswith("hidden") else v for k, v in d.items()}


@dataclass(frozen=True)
class PPOConfig(RunConfig):
    """PPO hyper-parameters. ``envs`` worlds x ``rollout`` ticks per update; ``steps``: env steps
    of the whole run (rounded up to whole updates)."""

    envs: int = 64
    rollout: int = 32
    steps: int = 1_000_000
    epochs: int = 4
    minibatches: int = 4
    lr: float = 3e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    value_clip: float | None = None
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    max_grad_norm: float = 0.5
    reward_scale: float = 0.1
    init_log_std: float = -1.5
    actor_hidden: tuple = (64, 64)
    critic_hidden: tuple = (128, 128)
    anneal_lr: bool = True
    action_centre: str = "limits"
    action_scale: float = 1.0
    seed: int = 0

    def __post_init__(self):
        check_action_frame(self, "ppo config")
        for name in ("envs", "rollout", "steps", "epochs", "minibatches"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise CaliperError(f"ppo config: {name} must be an integer >= 1, got {v!r}")
        for name in ("lr", "clip", "reward_scale"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise CaliperError(f"ppo config: {name} must be a number > 0, got {v!r}")
        for name in ("gamma", "gae_lambda"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 <= v <= 1):
                raise CaliperError(f"ppo config: {name} must be in [0, 1], got {v!r}")
        if (self.envs * self.rollout) % self.minibatches:
            raise CaliperError(f"ppo config: envs * rollout ({self.envs * self.rollout}) must divide into "
                               f"{self.minibatches} minibatches")

    @staticmethod
    def from_dict(d: dict, where: str = "ppo config") -> PPOConfig:
        return PPOConfig(**config_kwargs(PPOConfig, d, where))


ACTION_CENTRES = ("limits", "home")


def check_action_frame(cfg, where: str) -> None:
    """``action_centre`` in :data:`ACTION_CENTRES`, ``action_scale`` a number > 0."""
    if cfg.action_centre not in ACTION_CENTRES:
        raise CaliperError(f"{where}: action_centre must be one of {', '.join(ACTION_CENTRES)}, got "
                           f"{cfg.action_centre!r}")
    v = cfg.action_scale
    if isinstance(v, bool) or not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
        raise CaliperError(f"{where}: action_scale must be a number > 0, got {v!r}")


def action_frame(cfg, low, high, home) -> tuple[np.ndarray, np.ndarray]:
    """(centre, half) (A,) float64 of the normalised action ``u``: the joint target is ``centre +
    half * u``. ``action_centre`` "limits": the middle of the joint limits ``low``..``high``;
    "home": the task's start configuration ``home`` (clipped into the limits), so ``u = 0`` holds
    the arm where every episode starts. ``half``: ``action_scale`` x the limits' half range."""
    lo, hi = np.asarray(low, np.float64), np.asarray(high, np.float64)
    home = np.clip(np.asarray(home, np.float64), lo, hi)
    centre = 0.5 * (hi + lo) if cfg.action_centre == "limits" else home
    return centre, float(cfg.action_scale) * 0.5 * (hi - lo)


class RunningStats(NamedTuple):
    """Per-dimension running mean / variance of observations (parallel Welford merge)."""

    count: Any     # () float32
    mean: Any      # (obs_dim,)
    var: Any       # (obs_dim,)

    @staticmethod
    def init(dim: int) -> RunningStats:
        f32 = jnp.float32
        return RunningStats(jnp.zeros((), f32), jnp.zeros(dim, f32), jnp.ones(dim, f32))

    def update(self, x) -> RunningStats:
        """Merge a batch ``x`` (N, obs_dim)."""
        n = jnp.asarray(x.shape[0], jnp.float32)
        m, v = jnp.mean(x, 0), jnp.var(x, 0)
        tot = self.count + n
        d = m - self.mean
        mean = self.mean + d * n / tot
        var = (self.var * self.count + v * n + jnp.square(d) * self.count * n / tot) / tot
        return RunningStats(tot, mean, var)

    def std(self):
        return jnp.maximum(jnp.sqrt(self.var), STD_FLOOR)

    def normalize(self, x):
        return (x - self.mean) / self.std()


class Nets(NamedTuple):
    """The graph definitions and the unravel function of the flat parameter vector."""

    actor: Any
    critic: Any
    unravel: Any


class PPOState(NamedTuple):
    """Everything an update changes (a pytree of arrays; the checkpoint's ``opt_state`` tree)."""

    params: Any        # (n,) float32: actor, log_std, critic
    opt_state: Any
    stats: RunningStats
    key: Any           # PRNG key (raw uint32[2])
    update: Any        # () int32 updates done


def build(cfg: PPOConfig, feat_dim: int, obs_dim: int, action_dim: int) -> tuple[Nets, Any]:
    """(Nets, initial flat parameter vector) from the seed."""
    from jax.flatten_util import ravel_pytree

    k_actor, k_critic = jax.random.split(jax.random.PRNGKey(cfg.seed), 2)
    actor = MLP(feat_dim, tuple(cfg.actor_hidden), action_dim, rngs=nnx.Rngs(params=k_actor))
    critic = MLP(obs_dim, tuple(cfg.critic_hidden), 1, rngs=nnx.Rngs(params=k_critic))
    ga, pa = nnx.split(actor, nnx.Param)
    gc, pc = nnx.split(critic, nnx.Param)
    tree = {"actor": pa, "log_std": jnp.full(action_dim, cfg.init_log_std, jnp.float32), "critic": pc}
    flat, unravel = ravel_pytree(tree)
    return Nets(ga, gc, unravel), flat


def make_optimizer(cfg: PPOConfig):
    sgd_steps = cfg.updates * cfg.epochs * cfg.minibatches
    lr = optax.linear_schedule(cfg.lr, 0.0, sgd_steps) if cfg.anneal_lr else cfg.lr
    return optax.chain(optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(lr, eps=1e-5))


def init_state(cfg: PPOConfig, nets: Nets, flat, obs_dim: int) -> PPOState:
    return PPOState(flat, make_optimizer(cfg).init(flat), RunningStats.init(obs_dim),
                    jax.random.PRNGKey(cfg.seed + 1), jnp.zeros((), jnp.int32))


def actor_mean(nets: Nets, params, feats):
    """(..., feat_dim) normalised features -> (..., action_dim) mean of the normalised action."""
    tree = nets.unravel(params)
    return nnx.merge(nets.actor, tree["actor"])(feats)


def value(nets: Nets, params, obs_n):
    tree = nets.unravel(params)
    return nnx.merge(nets.critic, tree["critic"])(obs_n)[..., 0]


def log_prob(mean, log_std, u):
    z = (u - mean) / jnp.exp(log_std)
    return jnp.sum(-0.5 * jnp.square(z) - log_std - 0.5 * jnp.log(2 * jnp.pi), axis=-1)


def make_policy(nets: Nets, feat_idx: np.ndarray):
    """``act(params, stats, obs (W, obs_dim), key) -> (u (W, A), logp (W,))``: a stochastic sample
    of the normalised action (pure JAX, for both collectors)."""
    idx = jnp.asarray(feat_idx)

    def act(params, stats: RunningStats, obs, key):
        feats = (obs[..., idx] - stats.mean[idx]) / stats.std()[idx]
        mean = actor_mean(nets, params, feats)
        log_std = nets.unravel(params)["log_std"]
        u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)
        return u, log_prob(mean, log_std, u)

    return act


class Rollout(NamedTuple):
    """One batch from a collector, every field (T, W, ...): the raw observation the policy saw,
    its normalised action and log-probability, the reward (unscaled), ``terminated`` (success:
    no bootstrap), ``done`` (terminated or truncated), and ``final_obs`` (the observation after
    the tick, before any auto-reset: V(final_obs) bootstraps every non-terminal tick)."""

    obs: Any
    u: Any
    logp: Any
    reward: Any
    terminated: Any
    done: Any
    final_obs: Any


def gae(cfg: PPOConfig, v, v_next, reward, terminated, done):
    """(advantages, returns) (T, W) by GAE(lambda), scanning time backwards."""
    delta = reward + cfg.gamma * (1.0 - terminated) * v_next - v

    def back(carry, x):
        d, dn = x
        a = d + cfg.gamma * cfg.gae_lambda * (1.0 - dn) * carry
        return a, a

    _, adv = jax.lax.scan(back, jnp.zeros_like(v[0]), (delta, done), reverse=True)
    return adv, adv + v


def make_update(cfg: PPOConfig, nets: Nets, feat_idx: np.ndarray):
    """The jitted ``update(state, rollout) -> (state, metrics)`` (module docstring)."""
    tx = make_optimizer(cfg)
    idx = jnp.asarray(feat_idx)
    mb = cfg.batch // cfg.minibatches

    def loss_fn(params, stats, b):
        obs_n = stats.normalize(b["obs"])
        feats = obs_n[..., idx]
        mean = actor_mean(nets, params, feats)
        log_std = nets.unravel(params)["log_std"]
        logp = log_prob(mean, log_std, b["u"])
        ratio = jnp.exp(logp - b["logp"])
        adv = (b["adv"] - b["adv"].mean()) / (b["adv"].std() + 1e-8)
        pg = -jnp.mean(jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - cfg.clip, 1 + cfg.clip) * adv))
        v = value(nets, params, obs_n)
        vl = jnp.square(v - b["ret"])
        if cfg.value_clip is not None:
            vc = b["v"] + jnp.clip(v - b["v"], -cfg.value_clip, cfg.value_clip)
            vl = jnp.maximum(vl, jnp.square(vc - b["ret"]))
        vloss = 0.5 * jnp.mean(vl)
        ent = jnp.sum(log_std + 0.5 * jnp.log(2 * jnp.pi * jnp.e))
        loss = pg + cfg.vf_coef * vloss - cfg.ent_coef * ent
        return loss, {"policy_loss": pg, "value_loss": vloss, "entropy": ent,
                      "approx_kl": jnp.mean((ratio - 1) - jnp.log(ratio)),
                      "clip_frac": jnp.mean((jnp.abs(ratio - 1) > cfg.clip).astype(jnp.float32))}

    grad_fn = jax.grad(loss_fn, has_aux=True)

    def update(state: PPOState, ro: Rollout):
        T, W = ro.reward.shape
        stats = state.stats
        v = value(nets, state.params, stats.normalize(ro.obs))
        v_next = value(nets, state.params, stats.normalize(ro.final_obs))
        term = ro.terminated.astype(jnp.float32)
        adv, ret = gae(cfg, v, v_next, ro.reward * cfg.reward_scale, term, ro.done.astype(jnp.float32))
        flat = {"obs": ro.obs.reshape(T * W, -1), "u": ro.u.reshape(T * W, -1), "logp": ro.logp.reshape(-1),
                "adv": adv.reshape(-1), "ret": ret.reshape(-1), "v": v.reshape(-1)}
        key, sub = jax.random.split(state.key)

        def epoch(carry, k):
            params, opt = carry
            perm = jax.random.permutation(k, T * W)
            batches = {n: x[perm].reshape((cfg.minibatches, mb) + x.shape[1:]) for n, x in flat.items()}

            def step(c, b):
                p, o = c
                g, m = grad_fn(p, stats, b)
                upd, o = tx.update(g, o, p)
                return (optax.apply_updates(p, upd), o), m

            (params, opt), ms = jax.lax.scan(step, (params, opt), batches)
            return (params, opt), ms

        keys = jax.random.split(sub, cfg.epochs)
        (params, opt), ms = jax.lax.scan(epoch, (state.params, state.opt_state), keys)
        metrics = jax.tree_util.tree_map(lambda x: x[-1].mean(), ms)
        metrics["value_mean"] = v.mean()
        metrics["std"] = jnp.exp(nets.unravel(params)["log_std"]).mean()
        new = PPOState(params, opt, stats.update(ro.obs.reshape(T * W, -1)), key, state.update + 1)
        return new, metrics

    return jax.jit(update)


__all__ = ["ACTION_CENTRES", "Nets", "PPOConfig", "PPOState", "Rollout", "RunConfig", "RunningStats",
           "action_frame", "actor_mean", "build", "check_action_frame", "config_kwargs", "gae", "init_state",
           "log_prob", "make_optimizer", "make_policy", "make_update", "value"]
