"""Closed-loop evaluation: N seeded episodes of a task as N worlds of one batched rollout.

:func:`evaluate` runs a policy on a task's environment and reports what actually happened:

* **Episodes.** ``num_envs`` worlds (default ``min(episodes, 64)``) of :class:`tasks.env.VecEnv`
  seeded ``seed``; world w plays its episodes 0, 1, ... of its randomisation stream (auto-reset)
  and contributes its first ``ceil(episodes / num_envs)``; the N episodes kept are the first in
  the order (world episode, world). With ``episodes <= num_envs`` -- the default -- episode k is
  world k's first episode. An episode's identity is (seed, world, world_episode): the same on
  both engines.
* **Engines.** "mujoco": the CPU engine, one :class:`learn.deploy.Deployer` call per control tick
  for all worlds. "mjx": one jitted ``lax.scan`` over ``horizon`` ticks with the deploy step inside
  (the deploy state is part of the carry), repeated until every world has its episodes.
* **Policies.** A :class:`learn.bundle.TrainedPolicy`; ``"scripted"`` -- the task's scripted
  expert (:class:`tasks.expert.ScriptedExpert`, CPU engine only); or any callable ``f(obs) ->
  action`` on raw VecEnv observations (W, obs_dim) -> (W, nq) joint targets, for baselines (on
  the MJX engine it must be a pure JAX function; on the CPU engine an optional ``f.reset(mask)`` is
  called when episodes end).
* **Cameras.** A policy trained on cameras (``features.cameras``) is evaluated in an environment
  that renders those cameras every tick with the JAX ray engine, all worlds in one call (the CPU
  engine after each step, the MJX engine inside the scan); ``cameras=`` renders others instead,
  which deploy refuses unless they match the trained ones (names, resolution, intrinsics).
* **Aggregate.** Successes, rate, Wilson 95% interval, mean / median return, steps to success,
  and the E001-E003 findings (:mod:`learn.verdicts`).

Everything in :meth:`EvalResult.to_dict` is deterministic: a deterministic policy gives byte-
identical ``json.dumps(result.to_dict(), sort_keys=True)`` on rerun. Wall-clock numbers live in
``EvalResult.timing`` only, which ``to_dict`` leaves out.

:func:`sweep` evaluates several policies under the same tasks, randomisation levels and seeds and
ranks them (success rate desc, mean return desc, name asc); :func:`serial_eval` runs the same
number of episodes one world at a time (the baseline of the batched-eval benchmark).
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from caliper_jax.errors import CaliperError
from learn.verdicts import eval_findings, wilson_interval

ENGINES = ("mujoco", "mjx")
MAX_NUM_ENVS = 64


# ---- results ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EpisodeResult:
    """One evaluated episode: its identity (env ``seed``, ``world``, ``world_episode``) and outcome."""

    episode: int          # index in the evaluation (0..N-1)
    seed: int             # the environment's seed
    world: int
    world_episode: int    # episode index within the world's randomisation stream
    success: bool
    steps: int            # control ticks until the episode ended (success or horizon)
    ret: float            # summed reward

    def to_dict(self) -> dict:
        return {"episode": self.episode, "seed": self.seed, "world": self.world,
                "world_episode": self.world_episode, "success": self.success, "steps": self.steps,
                "return": self.ret}


def _median(xs):
    return float(statistics.median(xs)) if xs else None


def _mean(xs):
    return float(math.fsum(xs) / len(xs)) if xs else None


@dataclass
class EvalResult:
    task: str
    policy: str
    engine: str
    seed: int
    num_envs: int
    fps: int
    horizon: int
    randomization: dict | None
    episodes: tuple
    findings: list
    #: wall-clock numbers (wall_s, episodes_per_s, ticks): NOT deterministic, left out of to_dict
    timing: dict = field(default_factory=dict, compare=False)

    @property
    def n(self) -> int:
        return len(self.episodes)

    @property
    def successes(self) -> int:
        return sum(e.success for e in self.episodes)

    @property
    def success_rate(self) -> float:
        return self.successes / self.n

    @property
    def wilson(self) -> tuple[float, float]:
        return wilson_interval(self.successes, self.n)

    @property
    def returns(self) -> list[float]:
        return [e.ret for e in self.episodes]

    @property
    def mean_return(self) -> float:
        return _mean(self.returns)

    @property
    def median_return(self) -> float:
        return _median(self.returns)

    @property
    def steps_to_success(self) -> list[int]:
        return [e.steps for e in self.episodes if e.success]

    def to_dict(self) -> dict:
        """JSON-ready and deterministic (no timing)."""
        lo, hi = self.wilson
        sts = self.steps_to_success
        return {"task": self.task, "policy": self.policy, "engine": self.engine, "seed": self.seed,
                "num_envs": self.num_envs, "fps": self.fps, "horizon": self.horizon,
                "randomization": self.randomization, "n_episodes": self.n, "successes": self.successes,
                "success_rate": self.success_rate, "wilson95": [lo, hi], "mean_return": self.mean_return,
                "median_return": self.median_return,
                "steps_to_success": {"mean": _mean(sts), "median": _median(sts)},
                "episodes": [e.to_dict() for e in self.episodes],
                "findings": [f.to_dict() for f in self.findings]}

    def summary(self) -> str:
        lo, hi = self.wilson
        return (f"{self.policy} on {self.task}: {self.successes}/{self.n} successes "
                f"({self.success_rate:.0%}, Wilson 95% [{lo:.2f}, {hi:.2f}]), "
                f"mean return {self.mean_return:.3f}")


# ---- helpers ------------------------------------------------------------------------------------------
def _is_trained(policy) -> bool:
    from learn.bundle import TrainedPolicy

    return isinstance(policy, TrainedPolicy)


def _policy_name(policy) -> str:
    if isinstance(policy, str):
        return policy
    if _is_trained(policy):
        return policy.config.kind or type(policy.model).__name__
    return getattr(policy, "__name__", type(policy).__name__)


def _check_policy(policy, engine: str) -> None:
    if isinstance(policy, str):
        if policy != "scripted":
            raise CaliperError(f"policy {policy!r}: the only named policy is 'scripted' (the task's expert)")
        if engine != "mujoco":
            raise CaliperError("the scripted expert runs on the CPU engine only (engine='mujoco')")
    elif not (_is_trained(policy) or callable(policy)):
        raise CaliperError(f"policy: expected a TrainedPolicy, 'scripted' or a callable obs -> action, got "
                           f"{type(policy).__name__}")


def _env_kwargs(randomization) -> dict:
    from tasks.env_spec import EnvRandomization

    if isinstance(randomization, str):
        if randomization != "default":
            raise CaliperError(f"randomization {randomization!r}: expected 'default', None or an "
                               f"EnvRandomization")
        return {}
    if randomization is not None and not isinstance(randomization, EnvRandomization):
        raise CaliperError(f"randomization: expected 'default', None or an EnvRandomization, got "
                           f"{type(randomization).__name__}")
    return {"randomization": randomization}


def _randomization_dict(randomization):
    from tasks.env_spec import EnvRandomization

    if randomization is None:
        return None
    spec = EnvRandomization() if isinstance(randomization, str) else randomization
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(spec).items()}


def _positive_int(value, name: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise CaliperError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def policy_cameras(policy, cameras=None):
    """The camera names an evaluation renders: ``cameras`` when given, else a trained policy's own
    (``name:WxH``), else None (no rendering)."""
    if cameras is not None:
        return cameras
    feats = getattr(policy, "features", None) if _is_trained(policy) else None
    cams = () if feats is None else feats.cameras
    return [f"{c.name}:{c.width}x{c.height}" for c in cams] or None


class _Trained:
    def __init__(self, policy, env, seed, allow_fps_mismatch):
        from learn.deploy import Deployer

        self.deployer = Deployer(policy, env.layout, env.num_envs, seed,
                                 allow_fps_mismatch=allow_fps_mismatch, cameras=getattr(env, "cameras", ()))

    def begin(self, identity=None):
        import jax.numpy as jnp

        from learn.deploy import init_state

        d = self.deployer
        if identity is None:
            d.state = init_state(d.spec, d.num_envs)
        else:                                   # world(s) ``w``'s key stream at their episode ``e``
            w, e = identity
            w = list(w) if isinstance(w, (list, tuple)) else [w]
            d.state = init_state(d.spec, len(w), world_ids=w)._replace(episode=jnp.full(len(w), e, jnp.int32))

    def act(self, obs, info, active):
        return self.deployer.act(obs, info.get("images"))

    def end(self, done):
        self.deployer.reset(done)


class _Scripted:
    def __init__(self, env):
        from tasks.arm_expert import expert_for

        self.expert = expert_for(env)

    def begin(self, identity=None):
        pass

    def act(self, obs, info, active):
        # a world past its quota plays on without planning its (ignored) new episodes
        ticks = np.where(active, info["episode"]["tick"], np.maximum(info["episode"]["tick"], 1))
        return self.expert.act(obs, {**info, "episode": {**info["episode"], "tick": ticks}})

    def end(self, done):
        pass


class _Callable:
    def __init__(self, fn):
        self.fn = fn

    def begin(self, identity=None):
        pass

    def act(self, obs, info, active):
        return np.asarray(self.fn(obs))

    def end(self, done):
        reset = getattr(self.fn, "reset", None)
        if callable(reset):
            reset(done)


def _runner(policy, env, seed, allow_fps_mismatch):
    if isinstance(policy, str):
        return _Scripted(env)
    if _is_trained(policy):
        return _Trained(policy, env, seed, allow_fps_mismatch)
    return _Callable(policy)


def _run_cpu(env, runner, need: int, seed: int, on_episode, draws=None, identity=None) -> tuple[list, int]:
    """Run every world of ``env`` (reset to ``seed``, from ``draws`` when given) until each has
    finished ``need`` episodes -> ([(world, world_episode, success, steps, return)], ticks).
    ``identity`` (world or [worlds], episode): the key streams the policy plays (default the env's own)."""
    obs, info = env.reset(seed, options=None if draws is None else {"draws": draws})
    runner.begin(identity)
    W = env.num_envs
    count = np.zeros(W, np.int64)
    rows, ticks = [], 0
    while count.min() < need:
        if ticks > need * env.horizon:          # cannot happen: every episode ends by the horizon
            raise CaliperError(f"evaluation did not finish within {ticks} ticks")
        active = count < need
        action = runner.act(obs, info, active)
        obs, _, term, trunc, info = env.step(action, active)    # finished worlds are not simulated
        ticks += 1
        done = np.asarray(term | trunc)
        if done.any():
            ep = info["episode"]
            for w in np.flatnonzero(done):
                if count[w] < need:
                    rows.append((int(w), int(count[w]), bool(ep["final_success"][w]),
                                 int(ep["final_length"][w]), float(ep["final_return"][w])))
                    on_episode()
                count[w] += 1
            runner.end(done)
    return rows, ticks


#: MJX evaluation scans per (scene, worlds, randomisation, policy), so reruns do not recompile.
_MJX: dict = {}


def _mjx_scan(ts, policy, W: int, randomization, seed: int, allow_fps_mismatch: bool, cameras=None):
    """(env, jitted chunk(params, env_state, deploy_state, key) -> (carry, outputs (T, W)), params,
    deploy init state or None) of ``policy`` on ``W`` MJX worlds of ``ts``: ``horizon`` ticks of
    one ``lax.scan`` whose carry holds the environment and the deploy state."""
    import jax
    import jax.numpy as jnp

    from learn.deploy import check_cameras, check_compatible, init_state, reset_worlds, stack_images, step
    from tasks.env_mjx import MjxEnv

    trained = _is_trained(policy)
    cameras = tuple(policy_cameras(policy, cameras) or ())
    key = (id(ts), W, randomization if not isinstance(randomization, str) else "default", id(policy),
           id(getattr(policy, "model", None)), id(getattr(policy, "normalizer", None)), cameras)
    entry = _MJX.get(key)
    if entry is not None and entry[0]() is ts and entry[1]() is policy:
        env, chunk, params, spec = entry[2:]
        if trained:
            params = policy.chunk_fn()[2]          # the current weights (same structure)
    else:
        env = MjxEnv(ts, W, seed=seed, cameras=cameras or None, **_env_kwargs(randomization))
        if trained:
            check_cameras(policy, env.cameras)
            from learn.deploy import DeploySpec
            from learn.features import env_observation

            fn, graphdef, params = policy.chunk_fn()
            spec, fl, L = DeploySpec.of(policy), policy.features, env.layout
            names = tuple(c.name for c in fl.cameras)

            def act(params, ds, es, dkey):
                ds = reset_worlds(ds, es.terminated | es.truncated)
                obs = env_observation(fl, L, es.obs, jnp)
                images = stack_images(es.info.get("images"), names, jnp)   # rendered inside the scan
                ds, action, _ = step(spec, fn, graphdef, params, ds, obs, dkey, images)
                return ds, action
        else:
            params, spec = None, None

            def act(params, ds, es, dkey):
                return ds, jnp.asarray(policy(es.obs))

        def chunk(params, es, ds, dkey):
            def body(carry, _):
                es, ds = carry
                ds, action = act(params, ds, es, dkey)
                es = env.step_state(es, action)
                i = es.info
                return (es, ds), (es.terminated | es.truncated, i["final_success"], i["final_return"],
                                  i["final_length"])
            return jax.lax.scan(body, (es, ds), None, length=env.horizon)

        chunk = jax.jit(chunk)
        policy_ref = weakref.ref(policy) if _weakrefable(policy) else (lambda p=policy: p)
        _MJX[key] = (weakref.ref(ts), policy_ref, env, chunk, params, spec)
    if trained:
        check_compatible(policy, env.layout, allow_fps_mismatch=allow_fps_mismatch)
        check_cameras(policy, env.cameras)
    ds = None if spec is None else init_state(spec, W)
    return env, chunk, params, ds


def _weakrefable(obj) -> bool:
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


def _run_mjx(ts, policy, W, randomization, seed, need, allow_fps_mismatch, on_episode,
             cameras=None) -> tuple[list, int]:
    import jax

    env, chunk, params, ds = _mjx_scan(ts, policy, W, randomization, seed, allow_fps_mismatch, cameras)
    key = jax.random.PRNGKey(seed)
    es = env.jit_reset(key)
    count = np.zeros(W, np.int64)
    rows, ticks = [], 0
    for _ in range(need):
        if count.min() >= need:
            break
        (es, ds), (done, fsucc, fret, flen) = chunk(params, es, ds, key)
        done, fsucc, fret, flen = (np.asarray(x) for x in (done, fsucc, fret, flen))
        ticks += done.shape[0]
        for t, w in zip(*np.nonzero(done), strict=True):
            if count[w] < need:
                rows.append((int(w), int(count[w]), bool(fsucc[t, w]), int(flen[t, w]), float(fret[t, w])))
                on_episode()
            count[w] += 1
    rows.sort(key=lambda r: (r[1], r[0]))
    return rows, ticks


# ---- evaluate -------------------------------------------------------------------------------------------
def evaluate(policy, task, *, episodes: int = 20, num_envs: int | None = None, seed: int = 0,
             engine: str = "mujoco", randomization="default", progress=None, name: str | None = None,
             allow_fps_mismatch: bool = False, nthread: int | None = None, cameras=None) -> EvalResult:
    """``episodes`` seeded episodes of ``policy`` on ``task`` (a Task, task file, zoo name or built
    TaskScene) -> :class:`EvalResult`. ``randomization``: "default", None (none) or an
    :class:`tasks.env_spec.EnvRandomization`. ``progress(done, total)`` after each finished
    episode. ``name``: the policy's label in the result. ``nthread``: the CPU engine's threads.
    ``cameras``: the cameras to render (default: those the policy was trained on; module doc)."""
    from tasks.env import VecEnv, resolve_task

    episodes = _positive_int(episodes, "episodes")
    W = min(episodes, MAX_NUM_ENVS) if num_envs is None else _positive_int(num_envs, "num_envs")
    if engine not in ENGINES:
        raise CaliperError(f"engine={engine!r}: expected one of {', '.join(ENGINES)}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise CaliperError(f"seed must be an integer, got {seed!r}")
    _check_policy(policy, engine)
    kwargs = _env_kwargs(randomization)
    ts = resolve_task(task)
    need = -(-episodes // W)
    finished = [0]

    def on_episode():
        finished[0] += 1
        if progress is not None:
            progress(min(finished[0], episodes), episodes)

    t0 = time.perf_counter()
    if engine == "mujoco":
        with VecEnv(ts, W, seed=int(seed), nthread=nthread, cameras=policy_cameras(policy, cameras),
                    **kwargs) as env:
            runner = _runner(policy, env, int(seed), allow_fps_mismatch)
            rows, ticks = _run_cpu(env, runner, need, int(seed), on_episode)
            layout = env.layout
    else:
        rows, ticks = _run_mjx(ts, policy, W, randomization, int(seed), need, allow_fps_mismatch, on_episode,
                               cameras)
        from tasks.env_spec import make_layout

        layout = make_layout(ts)
    wall = time.perf_counter() - t0
    rows.sort(key=lambda r: (r[1], r[0]))
    eps = tuple(EpisodeResult(i, int(seed), w, e, s, n, r)
                for i, (w, e, s, n, r) in enumerate(rows[:episodes]))
    return _result(ts, policy, name, engine, int(seed), W, layout, randomization, eps,
                   {"wall_s": wall, "episodes_per_s": episodes / wall if wall > 0 else None, "ticks": ticks})


def _result(ts, policy, name, engine, seed, W, layout, randomization, eps, timing) -> EvalResult:
    return EvalResult(task=ts.task.name, policy=name or _policy_name(policy), engine=engine, seed=seed,
                      num_envs=W, fps=int(layout.fps), horizon=int(layout.horizon),
                      randomization=_randomization_dict(randomization), episodes=eps,
                      findings=eval_findings([e.success for e in eps], [e.ret for e in eps]), timing=timing)


def serial_eval(policy, task, *, episodes: int = 20, seed: int = 0, num_envs: int | None = None,
                randomization="default", progress=None, name: str | None = None,
                allow_fps_mismatch: bool = False, nthread: int | None = 1) -> EvalResult:
    """The serial baseline of :func:`evaluate`: the same ``episodes`` episodes, one world at a time
    on the CPU engine. Episode k is the batched run's episode k (``evaluate(..., num_envs=
    num_envs, seed=seed)``; default world count ``min(episodes, 64)`` as there): world k mod W,
    its episode k div W, replayed in a 1-world env from that episode's draws (the physics is the
    same bit for bit in any world count) with the policy's key stream of that world and episode."""
    from tasks.env import VecEnv, resolve_task

    episodes = _positive_int(episodes, "episodes")
    W = min(episodes, MAX_NUM_ENVS) if num_envs is None else _positive_int(num_envs, "num_envs")
    _check_policy(policy, "mujoco")
    kwargs = _env_kwargs(randomization)
    ts = resolve_task(task)
    eps, ticks = [], 0
    t0 = time.perf_counter()
    with VecEnv(ts, 1, seed=int(seed), nthread=nthread, cameras=policy_cameras(policy), **kwargs) as env:
        runner = _runner(policy, env, int(seed), allow_fps_mismatch)
        for k in range(episodes):
            world, world_episode = k % W, k // W
            draws = env.episode_draws([world], [world_episode])
            rows, n = _run_cpu(env, runner, 1, int(seed), lambda: None, draws=draws,
                               identity=(world, world_episode))
            ticks += n
            (_, _, s, steps, r), = rows
            eps.append(EpisodeResult(k, int(seed), world, world_episode, s, steps, r))
            if progress is not None:
                progress(k + 1, episodes)
        layout = env.layout
    wall = time.perf_counter() - t0
    return _result(ts, policy, name, "mujoco", int(seed), 1, layout, randomization, tuple(eps),
                   {"wall_s": wall, "episodes_per_s": episodes / wall if wall > 0 else None, "ticks": ticks})


# ---- sweep ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepRun:
    policy: str
    task: str
    level: str
    seed: int
    result: EvalResult

    def to_dict(self) -> dict:
        return {"policy": self.policy, "task": self.task, "level": self.level, "seed": self.seed,
                "result": self.result.to_dict()}


@dataclass
class SweepResult:
    runs: list
    ranking: list          # [{name, episodes, successes, success_rate, wilson95, mean_return}], best first

    def to_dict(self) -> dict:
        return {"runs": [r.to_dict() for r in self.runs], "ranking": [dict(r) for r in self.ranking]}

    @property
    def best(self) -> str:
        return self.ranking[0]["name"]


def rank(runs) -> list[dict]:
    """Per policy over all its runs: successes, Wilson 95% interval and mean return, ordered by
    success rate desc, mean return desc, name asc (a total order)."""
    by = {}
    for r in runs:
        by.setdefault(r.policy, []).append(r.result)
    out = []
    for name, results in by.items():
        eps = [e for res in results for e in res.episodes]
        k, n = sum(e.success for e in eps), len(eps)
        lo, hi = wilson_interval(k, n)
        out.append({"name": name, "episodes": n, "successes": k, "success_rate": k / n, "wilson95": [lo, hi],
                    "mean_return": _mean([e.ret for e in eps])})
    out.sort(key=lambda d: (-d["success_rate"], -d["mean_return"], d["name"]))
    for i, d in enumerate(out):
        d["rank"] = i + 1
    return out


def sweep_axes(policies, tasks, randomization_levels, seeds) -> tuple[dict, list, list]:
    """A sweep's checked axes -> (levels {name: spec}, task list, seeds as ints)."""
    if not isinstance(policies, dict) or not policies:
        raise CaliperError("sweep: policies must be a non-empty dict {name: policy}")
    levels = {"default": "default"} if randomization_levels is None else dict(randomization_levels)
    if not levels:
        raise CaliperError("sweep: randomization_levels is empty")
    task_list = list(tasks) if isinstance(tasks, (list, tuple)) else [tasks]
    return levels, task_list, [int(s) for s in seeds]


def sweep(policies: dict, tasks, *, randomization_levels: dict | None = None, seeds=(0,), episodes: int = 20,
          num_envs: int | None = None, engine: str = "mujoco", progress=None,
          allow_fps_mismatch: bool = False) -> SweepResult:
    """Every policy of ``policies`` ({name: TrainedPolicy | "scripted" | callable}) on every task of
    ``tasks`` (one task or a list), randomisation level of ``randomization_levels`` ({name:
    EnvRandomization | None | "default"}; default {"default": "default"}) and seed of ``seeds``,
    ``episodes`` each -> :class:`SweepResult` with every run and the ranking. ``progress(done,
    total)`` after each run."""
    from tasks.env import resolve_task

    levels, task_list, seeds = sweep_axes(policies, tasks, randomization_levels, seeds)
    scenes = [resolve_task(t) for t in task_list]
    total = len(policies) * len(scenes) * len(levels) * len(seeds)
    runs = []
    for ts in scenes:
        for level, spec in levels.items():
            for s in seeds:
                for pname in sorted(policies):
                    res = evaluate(policies[pname], ts, episodes=episodes, num_envs=num_envs, seed=s,
                                   engine=engine, randomization=spec, name=pname,
                                   allow_fps_mismatch=allow_fps_mismatch)
                    runs.append(SweepRun(pname, ts.task.name, str(level), s, res))
                    if progress is not None:
                        progress(len(runs), total)
    return SweepResult(runs, rank(runs))


__all__ = ["ENGINES", "EpisodeResult", "EvalResult", "SweepResult", "SweepRun", "evaluate", "rank",
           "serial_eval", "sweep"]
