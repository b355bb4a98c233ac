"""A gymnasium vector-env adapter over :class:`tasks.env.VecEnv`, and the zoo's registered names.

Importing this module registers every zoo task as ``caliper/<name>-v0`` (``caliper/lift-cube-v0``,
...) with a ``vector_entry_point``, so standard RL code runs on the zoo::

    import gymnasium, tasks.gym
    envs = gymnasium.make_vec("caliper/lift-cube-v0", num_envs=64)   # engine="mujoco" by default
    obs, info = envs.reset(seed=0)

Conventions (``gymnasium.vector.VectorEnv``): ``single_observation_space`` Box(-inf, inf,
(obs_dim,), float32), ``single_action_space`` Box(joint lower limits, upper limits, (nq,), float32)
-- joint position targets, safety-gated inside; batched ``observation_space`` / ``action_space``;
``reset(seed=, options=)`` (``seed``: one integer, a list of one integer per world, or None);
``step`` returns the 5-tuple. Autoreset is same-step (``metadata["autoreset_mode"] =
AutoresetMode.SAME_STEP``): a finished world's returned observation is its new episode's first;
on the steps where at least one world ended -- and only then -- ``info["final_obs"]`` (object
array, None for worlds that did not finish) and ``info["final_info"]`` hold the finished
episodes' last observation and verdict, each with its ``_key`` mask. VecEnv's
``info["episode"]`` counters are renamed ``info["caliper_episode"]`` here, leaving ``"episode"``
to ``RecordEpisodeStatistics``.
"""
from __future__ import annotations

import numpy as np

from caliper_jax.errors import CaliperError

try:
    import gymnasium
    from gymnasium.vector import VectorEnv
except ImportError as exc:          # a clear message rather than a NameError below
    raise ImportError("tasks.gym needs gymnasium>=1.0: pip install 'gymnasium>=1.0'") from exc

NAMESPACE = "caliper"


def env_id(task_name: str) -> str:
    """The registered id of a zoo task: ``caliper/<name>-v0``."""
    return f"{NAMESPACE}/{task_name}-v0"


def _autoreset_metadata() -> dict:
    mode = getattr(gymnasium.vector, "AutoresetMode", None)
    return {"autoreset_mode": mode.SAME_STEP if mode is not None else "SameStep", "render_modes": []}


class CaliperVectorEnv(VectorEnv):
    """``num_envs`` worlds of ``task`` (zoo name, task file, Task or TaskScene) as a gymnasium
    vector env. Keywords go to :class:`tasks.env.VecEnv` (``engine``, ``seed``,
    ``randomization``, ``nthread``)."""

    metadata = _autoreset_metadata()

    def __init__(self, task="lift-cube", num_envs: int = 1, **kwargs):
        from gymnasium import spaces
        from gymnasium.vector.utils import batch_space

        from tasks.env import VecEnv

        self.env = VecEnv(task, num_envs, **kwargs)
        self.num_envs = self.env.num_envs
        self.single_observation_space = spaces.Box(-np.inf, np.inf, (self.env.obs_dim,), np.float32)
        self.single_action_space = spaces.Box(self.env.action_low, self.env.action_high, dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def reset(self, *, seed=None, options: dict | None = None):
        """-> (obs (num_envs, obs_dim) float32, info). ``seed``: one integer for all worlds (world
        w, episode e draws from ``fold_in(fold_in(PRNGKey(seed), w), e)``); a list of one integer
        per world (world w starts from the draws episode 0 of world 0 gets under ``seed[w]``, so
        equal seeds give equal starts; later episodes continue the streams of ``seed[0]``); None
        continues the streams. ``options``: none are defined (None or {})."""
        if options:
            raise CaliperError(f"reset(options=...): no options are defined, got {sorted(options)}")
        if isinstance(seed, (list, tuple, np.ndarray)):
            seeds = self._seed_list(seed)
            super().reset(seed=seeds[0])
            draws = seeded_draws(self.env, seeds)
            obs, info = self.env.reset(seed=seeds[0], options={"draws": draws})
            return obs, _gym_info(info)
        if seed is not None and (not isinstance(seed, (int, np.integer)) or isinstance(seed, bool)):
            raise CaliperError(f"reset(seed=...): expected an integer, a list of {self.num_envs} integers "
                               f"(one per world) or None, got {type(seed).__name__}")
        super().reset(seed=seed)
        obs, info = self.env.reset(seed=seed)
        return obs, _gym_info(info)

    def _seed_list(self, seed) -> list:
        seeds = list(np.asarray(seed, dtype=object).reshape(-1)) if not isinstance(seed, list) else seed
        if len(seeds) != self.num_envs:
            raise CaliperError(f"reset(seed=[...]): expected {self.num_envs} seeds (one per world), got "
                               f"{len(seeds)}")
        for i, s in enumerate(seeds):
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= s < 2 ** 31:
                raise CaliperError(f"reset(seed=[...]): seed[{i}] must be an integer in [0, 2**31), "
                                   f"got {s!r}")
        return [int(s) for s in seeds]

    def step(self, actions):
        """-> (obs, rewards (num_envs,) float32, terminations, truncations, info), same-step autoreset."""
        obs, reward, terminated, truncated, info = self.env.step(actions)
        return obs, reward, terminated, truncated, _gym_info(info, terminated | truncated)

    def close_extras(self, **kwargs) -> None:
        self.env.close()

    def __repr__(self) -> str:
        env = self.env
        return f"CaliperVectorEnv({env.task.name!r}, num_envs={self.num_envs}, engine={env.engine!r})"


def seeded_draws(env, seeds) -> dict:
    """{field: (W, ...) float32}: world w gets the draws of episode 0 of world 0 under ``seeds[w]``
    (either engine; {} without randomisation)."""
    import jax

    from tasks.env import draw_shapes
    from tasks.env_spec import draw

    if env.randomization is None:
        return {}
    shapes = draw_shapes(env.layout, env.task_scene.scene.mj.nu)

    def one(s):
        key = jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(s), 0), 0)
        return draw(env.randomization, key, shapes)

    out = jax.jit(jax.vmap(one))(np.asarray(seeds, np.uint32))
    return {k: np.asarray(v, np.float32) for k, v in out.items()}


def _gym_info(info: dict, done=None) -> dict:
    """VecEnv's info in gymnasium's vector form: ``episode`` -> ``caliper_episode``; on a step
    where some world finished (``done`` any), ``final_obs`` becomes an object array (None where
    the world did not finish) and the finished episodes' verdicts go to ``final_info``, each with
    its ``_key`` mask; on other steps neither key is present."""
    out = {k: v for k, v in info.items() if k not in ("episode", "final_obs")}
    out["caliper_episode"] = info["episode"]
    if done is None or not np.any(done):
        return out
    final = np.full(len(done), None, dtype=object)
    for i in np.flatnonzero(done):
        final[i] = info["final_obs"][i]
    ep = info["episode"]
    out.update(final_obs=final, _final_obs=done.copy(), _final_info=done.copy(),
               final_info={"success": info["final_success"], "_success": done.copy(),
                           "return": ep["final_return"], "_return": done.copy(),
                           "length": ep["final_length"], "_length": done.copy()})
    return out


def register_envs() -> list[str]:
    """Register ``caliper/<name>-v0`` for every zoo task (idempotent) -> the ids."""
    from tasks.schema import zoo_names

    ids = []
    for name in zoo_names():
        eid = env_id(name)
        if eid not in gymnasium.registry:
            gymnasium.register(eid, vector_entry_point="tasks.gym:CaliperVectorEnv", kwargs={"task": name})
        ids.append(eid)
    return ids


ENV_IDS = register_envs()

__all__ = ["CaliperVectorEnv", "ENV_IDS", "NAMESPACE", "env_id", "register_envs", "seeded_draws"]
