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
from learn.protocol import effective_count
from learn.seeing import policy_cameras
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
    unstable: bool = False  # it ended because the simulation went unstable (MuJoCo reset the world)

    def to_dict(self) -> dict:
        return {"episode": self.episode, "seed": self.seed, "world": self.world,
                "world_episode": self.world_episode, "success": self.success, "steps": self.steps,
                "return": self.ret, "unstable": self.unstable}


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
    #: the protocol split of ``seed`` (:mod:`learn.protocol`; None: outside every split)
    split: str | None = None
    #: (n,) per episode: its initial conditions (task and randomisation draws) as bytes
    signatures: tuple = field(default=(), compare=False, repr=False)
    #: {kind: count} of the simulator's warnings during the evaluation (not printed)
    sim_warnings: dict = field(default_factory=dict)
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
    def effective(self) -> tuple[float, int]:
        """(k_eff, N_eff): successes and trials counted once per distinct initial condition
        (:func:`learn.protocol.effective_count`); (successes, n) when no signatures are known."""
        if len(self.signatures) != self.n:
            return float(self.successes), self.n
        return effective_count([e.success for e in self.episodes], self.signatures)

    @property
    def n_effective(self) -> int:
        return self.effective[1]

    @property
    def wilson(self) -> tuple[float, float]:
        """Wilson 95% interval on the distinct episodes (k_eff of N_eff)."""
        return wilson_interval(*self.effective)

    @property
    def unstable_episodes(self) -> list[int]:
        return [e.episode for e in self.episodes if e.unstable]

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
        k_eff, n_eff = self.effective
        sts = self.steps_to_success
        return {"task": self.task, "policy": self.policy, "engine": self.engine, "seed": self.seed,
                "split": self.split, "num_envs": self.num_envs, "fps": self.fps, "horizon": self.horizon,
                "randomization": self.randomization, "n_episodes": self.n, "successes": self.successes,
                "success_rate": self.success_rate, "n_effective": n_eff, "successes_effective": k_eff,
                "wilson95": [lo, hi], "wilson_basis": self.wilson_basis, "mean_return": self.mean_return,
                "median_return": self.median_return,
                "steps_to_success": {"mean": _mean(sts), "median": _median(sts)},
                "unstable_episodes": self.unstable_episodes, "sim_warnings": dict(self.sim_warnings),
                "episodes": [e.to_dict() for e in self.episodes],
                "findings": [f.to_dict() for f in self.findings]}

    @property
    def wilson_basis(self) -> str:
        """What the Wilson interval counts, in words."""
        n_eff = self.n_effective
        if n_eff == self.n:
            return f"{n_eff} distinct episodes"
        return (f"{n_eff} distinct episode{'s' if n_eff != 1 else ''} (effective N): the {self.n} episodes "
                f"share initial conditions (randomisation off or fixed), so repeats are not new trials")

    def summary(self) -> str:
        lo, hi = self.wilson
        split = (f" ({self.split} seed {self.seed})" if self.split else
                 f" (seed {self.seed}, in no protocol split)")
        text = (f"{self.policy} on {self.task}{split}: {self.successes}/{self.n} successes "
                f"({self.success_rate:.0%}, Wilson 95% [{lo:.2f}, {hi:.2f}] on {self.wilson_basis}), "
                f"mean return {self.mean_return:.3f}")
        unstable = self.unstable_episodes
        if unstable:
            text += (f"\n  {len(unstable)} episode(s) ended unstable (the simulation blew up): "
                     f"{', '.join(map(str, unstable[:10]))}{' ...' if len(unstable) > 10 else ''}")
        for kind, count in self.sim_warnings.items():
            text += f"\n  simulator: {kind} ({count} time{'s' if count != 1 else ''})"
        return text


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
    """VecEnv keyword arguments of ``randomization``: a level name of
    :data:`tasks.env_spec.RANDOMIZATION_LEVELS`, None (none) or an EnvRandomization."""
    from tasks.env_spec import RANDOMIZATION_LEVELS, EnvRandomization, randomization_preset

    if isinstance(randomization, str):
        if randomization not in RANDOMIZATION_LEVELS:
            raise CaliperError(f"randomization {randomization!r}: expected a level "
                               f"({', '.join(RANDOMIZATION_LEVELS)}), None or an EnvRandomization")
        # "default" is the env's own default: the task file's declared randomisation, if any
        return {} if randomization == "default" else {"randomization": randomization_preset(randomization)}
    if randomization is not None and not isinstance(randomization, EnvRandomization):
        raise CaliperError(f"randomization: expected a level ({', '.join(RANDOMIZATION_LEVELS)}), None or an "
                           f"EnvRandomization, got {type(randomization).__name__}")
    return {"randomization": randomization}


def _resolved_randomization(ts, randomization):
    """The EnvRandomization (or None) an env of ``ts`` runs for ``randomization``."""
    from tasks.env_spec import randomization_preset

    return randomization_preset(randomization, ts.task) if isinstance(randomization, str) else randomization


def _randomization_dict(randomization):
    from tasks.env_spec import EnvRandomization, randomization_preset

    if isinstance(randomization, str):
        default = randomization == "default"
        randomization = EnvRandomization() if default else randomization_preset(randomization)
    if randomization is None:
        return None
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(randomization).items()}


def _signatures(ts, randomization, seed: int, eps) -> tuple:
    """(n,) bytes: each episode's initial conditions (task name and randomisation draws)."""
    from learn.protocol import draw_signature
    from tasks.env_common import episode_draws

    spec = _resolved_randomization(ts, randomization)
    draws = episode_draws(ts, spec, seed, [e.world for e in eps], [e.world_episode for e in eps])
    name = ts.task.name.encode()
    return tuple(name + b"|" + draw_signature(draws, i) for i in range(len(eps)))


def _positive_int(value, name: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise CaliperError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


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
    finished ``need`` episodes -> ([(world, world_episode, success, steps, return, unstable)], ticks).
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
                                 int(ep["final_length"][w]), float(ep["final_return"][w]),
                                 bool(info["unstable"][w])))
                    on_episode()
                count[w] += 1
            runner.end(done)
    return rows, ticks


#: MJX evaluation scans per (scene, worlds, randomisation, policy), so reruns do not recompile.
_MJX: dict = {}


def _mjx_scan(ts, policy, W: int, randomization, seed: int, allow_fps_mismatch: bool, cameras=None):
    """(env, jitted chunk(env_state, policy_state) -> (carry, outputs (T, W)), policy state) of
    ``policy`` on ``W`` MJX worlds of ``ts``: ``horizon`` ticks of one ``lax.scan`` whose carry
    holds the environment and the policy's state (:class:`learn.deploy.JaxPolicy`); a policy that
    sees gets its cameras' frames rendered inside the scan."""
    import jax
    import jax.numpy as jnp

    from learn.deploy import JaxPolicy, check_cameras, jax_policy
    from tasks.env_mjx import MjxEnv

    trained = _is_trained(policy)
    cameras = tuple(policy_cameras(policy, cameras) or ())
    key = (id(ts), W, randomization if not isinstance(randomization, str) else "default", id(policy),
           id(getattr(policy, "model", None)), id(getattr(policy, "normalizer", None)), cameras)
    entry = _MJX.get(key)
    if entry is not None and entry[0]() is ts and entry[1]() is policy:
        env, chunk, jp = entry[2:]
    else:
        env = MjxEnv(ts, W, seed=seed, cameras=cameras or None, **_env_kwargs(randomization))
        if trained:
            check_cameras(policy, env.cameras)
            jp = jax_policy(policy, env.layout, allow_fps_mismatch=allow_fps_mismatch)
        else:
            jp = JaxPolicy(lambda num_worlds, seed=0: (),
                           lambda ps, obs, reset, images=None: (ps, jnp.asarray(policy(obs))), None)

        def chunk(es, ps):
            def body(carry, _):
                es, ps = carry
                ps, action = jp.step(ps, es.obs, es.terminated | es.truncated, es.info.get("images"))
                es = env.step_state(es, action)
                i = es.info
                return (es, ps), (es.terminated | es.truncated, i["final_success"], i["final_return"],
                                  i["final_length"], i["unstable"])
            return jax.lax.scan(body, (es, ps), None, length=env.horizon)

        chunk = jax.jit(chunk)
        policy_ref = weakref.ref(policy) if _weakrefable(policy) else (lambda p=policy: p)
        _MJX[key] = (weakref.ref(ts), policy_ref, env, chunk, jp)
    if trained:
        from learn.deploy import check_compatible

        check_compatible(policy, env.layout, allow_fps_mismatch=allow_fps_mismatch)
        check_cameras(policy, env.cameras)
    return env, chunk, jp.init(W, seed)


def _weakrefable(obj) -> bool:
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


def _run_mjx(ts, policy, W, randomization, seed, need, allow_fps_mismatch, on_episode,
             cameras=None) -> tuple[list, int]:
    import jax

    env, chunk, ps = _mjx_scan(ts, policy, W, randomization, seed, allow_fps_mismatch, cameras)
    es = env.jit_reset(jax.random.PRNGKey(seed))
    count = np.zeros(W, np.int64)
    rows, ticks = [], 0
    for _ in range(need):
        if count.min() >= need:
            break
        (es, ps), (done, fsucc, fret, flen, unst) = chunk(es, ps)
        done, fsucc, fret, flen, unst = (np.asarray(x) for x in (done, fsucc, fret, flen, unst))
        ticks += done.shape[0]
        for t, w in zip(*np.nonzero(done), strict=True):
            if count[w] < need:
                rows.append((int(w), int(count[w]), bool(fsucc[t, w]), int(flen[t, w]), float(fret[t, w]),
                             bool(unst[t, w])))
                on_episode()
            count[w] += 1
    rows.sort(key=lambda r: (r[1], r[0]))
    return rows, ticks


# ---- evaluate -------------------------------------------------------------------------------------------
def evaluate(policy, task, *, episodes: int = 20, num_envs: int | None = None, seed: int | None = None,
             split: str | None = None, engine: str = "mujoco", randomization="default", progress=None,
             name: str | None = None, allow_fps_mismatch: bool = False,
             nthread: int | None = None, cameras=None) -> EvalResult:
    """``episodes`` seeded episodes of ``policy`` on ``task`` (a Task, task file, zoo name or built
    TaskScene) -> :class:`EvalResult`. ``split``: "train", "val" or "test" (:mod:`learn.protocol`):
    the split's first seed, or check that ``seed`` lies in it; neither given: seed 0.
    ``randomization``: a level ("none", "default", "wide"), None (none) or an
    :class:`tasks.env_spec.EnvRandomization`. ``progress(done, total)`` after each finished
    episode. ``name``: the policy's label in the result. ``nthread``: the CPU engine's threads.
    ``cameras``: the cameras to render (default: those the policy was trained on; module doc).
    MuJoCo's warnings during the run go to ``result.sim_warnings``, not to the CLI's warning line."""
    from caliper_jax import notices
    from learn.protocol import resolve_seed
    from learn.seeing import policy_env
    from tasks.env import resolve_task

    episodes = _positive_int(episodes, "episodes")
    W = min(episodes, MAX_NUM_ENVS) if num_envs is None else _positive_int(num_envs, "num_envs")
    if engine not in ENGINES:
        raise CaliperError(f"engine={engine!r}: expected one of {', '.join(ENGINES)}")
    seed = resolve_seed(seed, split)
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
    with notices.captured("MuJoCo:") as warned:
        if engine == "mujoco":
            with policy_env(policy, ts, W, seed=int(seed), nthread=nthread, cameras=cameras, **kwargs) as env:
                runner = _runner(policy, env, int(seed), allow_fps_mismatch)
                rows, ticks = _run_cpu(env, runner, need, int(seed), on_episode)
                layout = env.layout
        else:
            rows, ticks = _run_mjx(ts, policy, W, randomization, int(seed), need, allow_fps_mismatch,
                                   on_episode, cameras)
            from tasks.env_spec import make_layout

            layout = make_layout(ts)
    wall = time.perf_counter() - t0
    rows.sort(key=lambda r: (r[1], r[0]))
    eps = episode_results(rows[:episodes], int(seed))
    return _result(ts, policy, name, engine, int(seed), W, layout, randomization, eps,
                   {"wall_s": wall, "episodes_per_s": episodes / wall if wall > 0 else None, "ticks": ticks},
                   warned)


def episode_results(rows, seed: int) -> tuple:
    """EpisodeResults of rows (world, world_episode, success, steps, return, unstable), in order."""
    return tuple(EpisodeResult(i, int(seed), w, e, s, n, r, u) for i, (w, e, s, n, r, u) in enumerate(rows))


def _result(ts, policy, name, engine, seed, W, layout, randomization, eps, timing, warned=None) -> EvalResult:
    from learn.protocol import split_of

    return EvalResult(task=ts.task.name, policy=name or _policy_name(policy), engine=engine, seed=seed,
                      num_envs=W, fps=int(layout.fps), horizon=int(layout.horizon),
                      randomization=_randomization_dict(randomization), episodes=eps,
                      findings=eval_findings([e.success for e in eps], [e.ret for e in eps]),
                      split=split_of(seed), signatures=_signatures(ts, randomization, seed, eps),
                      sim_warnings=dict(sorted((warned or {}).items())), timing=timing)


def serial_eval(policy, task, *, episodes: int = 20, seed: int = 0, num_envs: int | None = None,
                randomization="default", progress=None, name: str | None = None,
                allow_fps_mismatch: bool = False, nthread: int | None = 1) -> EvalResult:
    """The serial baseline of :func:`evaluate`: the same ``episodes`` episodes, one world at a time
    on the CPU engine. Episode k is the batched run's episode k (``evaluate(..., num_envs=
    num_envs, seed=seed)``; default world count ``min(episodes, 64)`` as there): world k mod W,
    its episode k div W, replayed in a 1-world env from that episode's draws (the physics is the
    same bit for bit in any world count) with the policy's key stream of that world and episode."""
    from learn.seeing import policy_env
    from tasks.env import resolve_task

    episodes = _positive_int(episodes, "episodes")
    W = min(episodes, MAX_NUM_ENVS) if num_envs is None else _positive_int(num_envs, "num_envs")
    _check_policy(policy, "mujoco")
    kwargs = _env_kwargs(randomization)
    ts = resolve_task(task)
    eps, ticks = [], 0
    t0 = time.perf_counter()
    with policy_env(policy, ts, 1, seed=int(seed), nthread=nthread, **kwargs) as env:
        runner = _runner(policy, env, int(seed), allow_fps_mismatch)
        for k in range(episodes):
            world, world_episode = k % W, k // W
            draws = env.episode_draws([world], [world_episode])
            rows, n = _run_cpu(env, runner, 1, int(seed), lambda: None, draws=draws,
                               identity=(world, world_episode))
            ticks += n
            (_, _, s, steps, r, u), = rows
            eps.append(EpisodeResult(k, int(seed), world, world_episode, s, steps, r, u))
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


def pooled(results) -> dict:
    """Episodes, successes and rate of several EvalResults together, and the Wilson 95% interval
    on their distinct episodes (an initial condition repeated across results counts once)."""
    succ, sigs = [], []
    for j, res in enumerate(results):
        sig = res.signatures if len(res.signatures) == res.n else [(j, i) for i in range(res.n)]
        succ += [e.success for e in res.episodes]
        sigs += list(sig)
    k, n = sum(succ), len(succ)
    k_eff, n_eff = effective_count(succ, sigs)
    return {"episodes": n, "successes": k, "success_rate": k / n, "n_effective": n_eff,
            "successes_effective": k_eff, "wilson95": list(wilson_interval(k_eff, n_eff))}


def rank(runs) -> list[dict]:
    """Per policy over all its runs: successes, Wilson 95% interval (on distinct episodes) and mean
    return, ordered by success rate desc, mean return desc, name asc (a total order)."""
    by = {}
    for r in runs:
        by.setdefault(r.policy, []).append(r.result)
    out = []
    for name, results in by.items():
        eps = [e for res in results for e in res.episodes]
        out.append({"name": name, **pooled(results), "mean_return": _mean([e.ret for e in eps])})
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


__all__ = ["ENGINES", "EpisodeResult", "EvalResult", "SweepResult", "SweepRun", "episode_results", "evaluate",
           "pooled", "rank", "serial_eval", "sweep"]
