"""A brax-compatible face of a task (``pip install "caliper-jax[rl]"`` for brax).

:class:`BraxEnv` is a single-world ``brax.envs.base.Env``: pure ``reset(rng) -> State`` and
``step(state, action) -> State`` with ``obs`` (obs_dim,), ``reward`` (), ``done`` () float,
``metrics`` (each dense reward term's weighted value and ``success``) and ``info`` -- the interface
brax's training agents and MuJoCo Playground wrap (``VmapWrapper``, ``EpisodeWrapper``,
``AutoResetWrapper``), so ``brax.training.agents.ppo.train.train(environment=BraxEnv("lift-cube"),
...)`` trains on the zoo. ``pipeline_state`` is a one-world :class:`tasks.env_mjx.State` of the
MJX engine (its own auto-reset included; brax's ``AutoResetWrapper`` then restarts finished
worlds from their first state). ``rng`` seeds the randomisation: the reset draws episode 0 of
world 0 under that key, so each vmapped world draws its own scene.

Actions are brax's convention, in [-1, 1] per joint: the joint target is ``centre + half * a``
(the joint limits' middle and half range; the safety gate clamps).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

try:
    from brax.envs.base import Env, State
except ImportError as exc:          # a clear message rather than a NameError below
    raise ImportError('tasks.brax_env needs brax: pip install "caliper-jax[rl]"') from exc


class BraxEnv(Env):
    """One world of ``task`` (zoo name, task file, Task or TaskScene) in brax's interface; keywords
    go to :class:`tasks.env_mjx.MjxEnv` (``randomization``)."""

    def __init__(self, task="lift-cube", **kwargs):
        from tasks.env_mjx import MjxEnv

        self.mjx = MjxEnv(task, 1, **kwargs)
        lo, hi = self.mjx.action_low, self.mjx.action_high
        self._centre = jnp.asarray(0.5 * (hi + lo), self.mjx._gdtype)
        self._half = jnp.asarray(0.5 * (hi - lo), self.mjx._gdtype)

    @property
    def observation_size(self) -> int:
        return self.mjx.obs_dim

    @property
    def action_size(self) -> int:
        return self.mjx.action_dim

    @property
    def backend(self) -> str:
        return "mjx"

    def _wrap(self, s, done) -> State:
        metrics = {k: v[0] for k, v in s.info["reward_terms"].items()}
        metrics["success"] = s.info["success"][0].astype(jnp.float32)
        return State(pipeline_state=s, obs=s.obs[0], reward=s.reward[0], done=done, metrics=metrics, info={})

    def reset(self, rng: jax.Array) -> State:
        s = self.mjx.reset_state(rng)
        return self._wrap(s, jnp.zeros((), jnp.float32))

    def step(self, state: State, action: jax.Array) -> State:
        a = self._centre + self._half * jnp.clip(action, -1.0, 1.0).astype(self._half.dtype)
        s = self.mjx.step_state(state.pipeline_state, a[None])
        done = (s.terminated[0] | s.truncated[0]).astype(jnp.float32)
        out = self._wrap(s, done)
        # keep every metric key the wrappers added (brax's trainer adds "reward" at reset)
        return out.replace(metrics={**state.metrics, **out.metrics}, info=state.info)


__all__ = ["BraxEnv"]
