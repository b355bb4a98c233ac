"""The RL training loop: collect (either engine) -> one jitted update -> scalars -> checkpoints.

One loop for every algorithm of :data:`ALGORITHMS` (PPO, :mod:`learn.rl.ppo`; SAC,
:mod:`learn.rl.sac`): each names its config class, networks, policy, state and jitted update.

Runs in *segments* of ``checkpoint_every`` updates: each segment restarts every world from the
randomisation seed ``segment_seed(cfg.seed, segment)`` (running episodes are cut there and
bootstrapped like any truncation), the collection key of update ``u`` is ``fold_in(PRNGKey(seed
+ 2), u)``, and a checkpoint is written at the end of each segment. A run resumed from a
checkpoint therefore replays the rest of the run bit for bit (same parameters, same optimiser
state, same observation statistics).

Output folder ``out``:

- ``best/``: with ``select_episodes``, the checkpoint whose deterministic actor scored the highest
  success on the validation seed (``learn.protocol``'s ``val`` split) at a segment's end -- the
  run's result (``RLResult.policy``, ``checkpoint``) is that actor, not the last one;
- ``step_<update>/``: checkpoints through :func:`learn.checkpoint.save_checkpoint` -- ``params``
  is the deterministic actor as a BC-MLP (SAC's with ``squash``; ``caliper learn
  eval|sweep|profile|autopsy`` load it like any BC policy), ``opt_state`` the whole algorithm
  state (SAC's replay buffer included), ``extra["rl"]`` the algorithm, config, task and engine;
- ``scalars.jsonl`` / ``scalars.csv``: one row per update (env steps, episodes ended, their mean
  return and success, the algorithm's losses (:attr:`Algorithm.metrics`), steps/s, wall time),
  rewritten atomically;
- ``curve.png`` (with matplotlib): mean return and success against env steps.
"""
from __future__ import annotations

import csv
import io
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.errors import CaliperError
from learn.rl import ppo as P
from learn.rl import sac as S


@dataclass(frozen=True)
class Algorithm:
    """What the loop needs of an algorithm: its config class, ``build(cfg, feat_dim, obs_dim,
    action_dim) -> (nets, flat)``, ``make_policy(nets, feat_idx) -> act``, ``init_state(cfg, nets,
    flat, obs_dim, action_dim)``, ``make_update(cfg, nets, feat_idx, action_dim)``, the state class
    (a NamedTuple; ``sub``: its NamedTuple fields), the metric names of an update, and whether the
    exported actor's output is tanh-squashed."""

    name: str
    config: type
    build: object
    make_policy: object
    init_state: object
    make_update: object
    state: type
    sub: dict
    metrics: tuple
    squash: bool
    needs_reward: bool


ALGORITHMS = {
    "ppo": Algorithm("ppo", P.PPOConfig, P.build, P.make_policy,
                     lambda cfg, nets, flat, obs_dim, action_dim: P.init_state(cfg, nets, flat, obs_dim),
                     lambda cfg, nets, idx, action_dim: P.make_update(cfg, nets, idx), P.PPOState,
                     {"stats": P.RunningStats},
                     ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac", "std"), False, False),
    "sac": Algorithm("sac", S.SACConfig, S.build, S.make_policy, S.init_state, S.make_update, S.SACState,
                     {"stats": P.RunningStats, "buffer": S.Buffer}, S.METRICS, True, True),
}
ALGOS = tuple(ALGORITHMS)
_HEAD = ("update", "env_steps", "episodes", "return", "success", "held_success", "val_success")
_TAIL = ("collect_s", "update_s", "steps_per_s", "wall_s")
SCALARS = _HEAD + ALGORITHMS["ppo"].metrics + _TAIL


def scalar_columns(algo: str) -> tuple:
    """The ``scalars.csv`` columns of a run of ``algo``."""
    return _HEAD + ALGORITHMS[algo].metrics + _TAIL


def segment_seed(seed: int, segment: int) -> int:
    """The randomisation seed every world restarts from at segment ``segment``."""
    return (int(seed) * 100_003 + int(segment)) % (2 ** 31 - 1)


@dataclass
class RLResult:
    algo: str
    task: str
    engine: str
    config: dict
    out: Path | None
    checkpoint: Path | None
    updates: int
    env_steps: int
    history: list = field(default_factory=list)
    compile_s: float = 0.0
    wall_s: float = 0.0
    policy: object = None          # learn.bundle.TrainedPolicy (deterministic actor)
    selected: dict | None = None   # {"update", "env_steps", "val_success", "val_seed", "episodes"}

    def to_dict(self) -> dict:
        last = self.history[-1] if self.history else {}
        return {"algo": self.algo, "task": self.task, "engine": self.engine, "config": self.config,
                "out": None if self.out is None else str(self.out),
                "checkpoint": None if self.checkpoint is None else str(self.checkpoint),
                "updates": self.updates, "env_steps": self.env_steps, "compile_s": round(self.compile_s, 3),
                "wall_s": round(self.wall_s, 3), "final": {k: last.get(k) for k in ("return", "success")},
                "selected": self.selected}


class Setup:
    """Env, feature layout, networks and collector of one run."""

    def __init__(self, task, algo: Algorithm, cfg, engine: str, nthread=None):
        from learn.features import FeatureLayout, env_observation
        from tasks.env import VecEnv

        self.env = env = VecEnv(task, cfg.envs, engine=engine, seed=segment_seed(cfg.seed, 0),
                                nthread=nthread)
        L = env.layout
        self.features = FeatureLayout(("observation.state", "observation.environment_state"),
                                      (L.nq, 7 * L.nprop), "action", L.nq, L.fps)
        probe = np.arange(env.obs_dim, dtype=np.float64)[None]
        self.feat_idx = np.asarray(env_observation(self.features, L, probe)[0]).astype(np.int64)
        self.centre, self.half = P.action_frame(cfg, env.action_low, env.action_high, env.task.q0)
        self.algo = algo
        self.nets, self.flat0 = algo.build(cfg, len(self.feat_idx), env.obs_dim, env.action_dim)
        act = algo.make_policy(self.nets, self.feat_idx)
        if engine == "mjx":
            from learn.rl.collect import MjxCollector

            self.collector = MjxCollector(env, act, self.centre, self.half, cfg.rollout)
        else:
            from learn.rl.collect import CpuCollector

            self.collector = CpuCollector(env, act, self.centre, self.half)
        self.update = algo.make_update(cfg, self.nets, self.feat_idx, env.action_dim)

    def init_state(self, cfg):
        return self.algo.init_state(cfg, self.nets, self.flat0, self.env.obs_dim, self.env.action_dim)

    def export(self, state, cfg):
        """The deterministic actor as a :class:`learn.bundle.TrainedPolicy` (a BC-MLP; SAC's with
        ``squash``)."""
        from flax import nnx

        from learn.bundle import TrainedPolicy
        from learn.config import BCConfig
        from learn.normalize import Normalizer
        from learn.policies import build_policy

        config = BCConfig(hidden=tuple(cfg.actor_hidden), squash=self.algo.squash)
        model = build_policy(config, len(self.feat_idx), self.env.action_dim, seed=0)
        nnx.update(model.net, self.nets.unravel(state.params)["actor"])
        st = state.stats
        idx = self.feat_idx
        f32 = np.float32
        norm = Normalizer(np.asarray(st.mean)[idx].astype(f32), np.asarray(st.std())[idx].astype(f32),
                          self.centre.astype(f32), self.half.astype(f32))
        return TrainedPolicy(model, config, self.features, norm, None)


def _state_tree(state) -> dict:
    """An algorithm state as a dict (its NamedTuple fields as dicts; ``opt_state`` as optax has it)."""
    return {k: (v._asdict() if isinstance(v, tuple) and hasattr(v, "_asdict") and k != "opt_state" else v)
            for k, v in state._asdict().items()}


def _from_tree(algo: Algorithm, tree: dict):
    return algo.state(**{k: (algo.sub[k](**{n: jnp.asarray(x) for n, x in v.items()}) if k in algo.sub
                             else v if k == "opt_state" else jnp.asarray(v)) for k, v in tree.items()})


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_scalars(out: Path, history: list, columns: tuple = SCALARS) -> None:
    """``scalars.jsonl`` and ``scalars.csv`` (``columns``: :func:`scalar_columns`), atomically."""
    _write_atomic(out / "scalars.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in history))
    buf = io.StringIO()
    w = csv.DictWriter(buf, columns, extrasaction="ignore")
    w.writeheader()
    for r in history:
        w.writerow({k: ("" if r.get(k) is None else r[k]) for k in columns})
    _write_atomic(out / "scalars.csv", buf.getvalue())


def plot_curve(history: list, path: Path, title: str) -> Path | None:
    """Mean episode return and success against env steps (None without matplotlib: ``pip install
    "caliper-jax[plot]"``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = [r for r in history if r.get("return") is not None]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.2))
    x = [r["env_steps"] for r in rows]
    a.plot(x, [r["return"] for r in rows])
    a.set_xlabel("env steps")
    a.set_ylabel("mean episode return")
    b.plot(x, [r["success"] for r in rows])
    b.set_xlabel("env steps")
    b.set_ylabel("episode success")
    b.set_ylim(-0.02, 1.02)
    fig.suptitle(title)
    fig.tight_layout()
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def _save(out: Path, setup: Setup, state, cfg, meta: dict, keep: int = 2,
          selected: dict | None = None) -> Path:
    from learn.checkpoint import save_run_checkpoint

    policy = setup.export(state, cfg)
    return save_run_checkpoint(out, int(state.update), keep=keep, model=policy.model, config=policy.config,
                               train_config=None, features=policy.features, normalizer=policy.normalizer,
                               fingerprint=None, opt_state=jax.device_get(_state_tree(state)),
                               extra={"rl": meta, **({"selected": selected} if selected else {})})


def _resume(out: Path, setup: Setup, template, meta: dict) -> tuple:
    from learn.checkpoint import load_checkpoint, read_checkpoint_meta, resolve_checkpoint

    path = resolve_checkpoint(out)
    saved = (read_checkpoint_meta(path).get("extra") or {}).get("rl")
    if not isinstance(saved, dict):
        raise CaliperError(f"{path}: not an RL checkpoint (no extra.rl)")
    for k in ("algo", "task", "engine", "config"):
        if saved.get(k) != meta[k]:
            raise CaliperError(f"{path}: saved with {k}={saved.get(k)!r}, this run has {meta[k]!r}; resume "
                               f"with the same settings")
    ckpt = load_checkpoint(path, expect_features=setup.features,
                           opt_template=jax.device_get(_state_tree(template)))
    state = _from_tree(setup.algo, ckpt.opt_state)
    rows = []
    log = out / "scalars.jsonl"
    if log.is_file():
        rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
        rows = [r for r in rows if r["update"] < int(state.update)]
    return state, rows


class Selector:
    """Model selection on the validation split: at a segment's end the deterministic actor (the
    mean action; SAC's squashed) plays one episode in each of ``episodes`` worlds of randomisation
    seed ``seed`` (:func:`learn.rl.collect.first_episodes`: the episodes ``learn.evaluate`` runs
    for that seed, at the cost of one horizon of ticks); the best success so far (ties: the later,
    more trained actor) is kept, and written to ``out/best`` when the run has a folder."""

    def __init__(self, episodes: int, seed: int, every: int):
        from learn.protocol import split_of

        for name, v, hi in (("select_episodes", episodes, 256), ("select_every", every, None)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1 or (hi and v > hi):
                raise CaliperError(f"{name} must be an integer in 1..{hi or 'inf'}, got {v!r}")
        if split_of(seed) != "val":
            raise CaliperError(f"select_seed {seed!r}: model selection must use a val-split seed "
                               f"[1000, 1000000) (learn.protocol), never a test seed")
        self.episodes, self.seed, self.every = int(episodes), int(seed), int(every)
        self.best: dict | None = None
        self.policy = None
        self.checkpoint: Path | None = None

    def bind(self, setup: Setup, task, nthread=None) -> None:
        """Build the validation worlds and the jitted deterministic actor of ``setup``'s run."""
        from tasks.env import VecEnv

        self.env = VecEnv(task, self.episodes, seed=self.seed, nthread=nthread)
        idx, nets, squash = jnp.asarray(setup.feat_idx), setup.nets, setup.algo.squash
        self._centre, self._half = setup.centre, setup.half

        @jax.jit
        def act(params, stats, obs):
            feats = (obs[..., idx] - stats.mean[idx]) / stats.std()[idx]
            mean = P.actor_mean(nets, params, feats)
            return jnp.tanh(mean) if squash else mean

        self._act = act

    def restore(self, out: Path) -> None:
        """Take up the best actor of a resumed run's ``out/best``."""
        from learn.checkpoint import load_checkpoint, read_checkpoint_meta, resolve_checkpoint

        if not (out / "best").is_dir():
            return
        try:
            path = resolve_checkpoint(out / "best")
        except CaliperError:                     # interrupted before its first selection was sealed
            return
        self.best = (read_checkpoint_meta(path).get("extra") or {}).get("selected")
        self.policy, self.checkpoint = load_checkpoint(path).policy, path

    def __call__(self, state, row: dict, export, save) -> None:
        """Score ``state``'s actor into ``row["val_success"]``; keep it (``export()`` -> policy,
        ``save(selected)`` -> checkpoint path or None) when it is the best so far."""
        from learn.rl.collect import first_episodes

        ok = first_episodes(self.env, lambda obs: self._act(state.params, state.stats, obs),
                            self._centre, self._half, self.seed)
        rate = float(ok.mean())
        row["val_success"] = rate
        if self.best is None or rate >= self.best["val_success"]:
            self.best = {"update": row["update"] + 1, "env_steps": row["env_steps"], "val_success": rate,
                         "val_seed": self.seed, "episodes": self.episodes}
            self.policy = export()
            self.checkpoint = save(self.best)

    def close(self) -> None:
        """Release the validation worlds (idempotent; a no-op before :meth:`bind`)."""
        if getattr(self, "env", None) is not None:
            self.env.close()


def train_rl(task, algo: str = "ppo", cfg=None, *, engine: str = "mujoco", out=None,
             resume: bool = False, checkpoint_every: int | None = None, progress=None, nthread=None,
             stop_success: float | None = None, select_episodes: int = 0, select_seed: int = 1000,
             select_every: int = 1) -> RLResult:
    """Train ``algo`` (``"ppo"``, ``"sac"``) on ``task`` (zoo name, task file, Task or TaskScene)
    -> :class:`RLResult`. ``cfg``: the algorithm's config (None: its defaults).
    ``out``: the run folder (None: no files); ``resume``: continue from its newest checkpoint;
    ``checkpoint_every``: updates per segment (None: enough ticks for three episodes of the task's
    horizon); ``progress(row)``: called after every update with the scalar row; ``stop_success``: stop at
    the end of a segment whose episodes succeeded at least this often (None: run every update);
    ``select_episodes`` (0: off): keep the best deterministic actor by success on val seed
    ``select_seed`` over that many episodes, judged every ``select_every`` segments and at the end
    (:class:`Selector`); the result is that actor."""
    from tasks.env import resolve_task

    if algo not in ALGOS:
        raise CaliperError(f"algo {algo!r}: expected one of {', '.join(ALGOS)}")
    spec = ALGORITHMS[algo]
    cfg = cfg or spec.config()
    if not isinstance(cfg, spec.config):
        raise CaliperError(f"algo {algo}: the config must be a {spec.config.__name__}, got "
                           f"{type(cfg).__name__}")
    ts = resolve_task(task)
    if checkpoint_every is None:                 # segments of >= 3 episodes, so failures show up too
        from tasks.env_spec import make_layout

        checkpoint_every = -(-3 * make_layout(ts).horizon // cfg.rollout)
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) or checkpoint_every < 1:
        raise CaliperError(f"checkpoint_every must be an integer >= 1, got {checkpoint_every!r}")
    if ts.task.reward is None or not ts.task.reward.active:
        if spec.needs_reward:
            raise CaliperError(f"task {ts.task.name}: no dense reward terms (a 'reward' block with a "
                               f"nonzero term); {algo} cannot learn from the 0/1 success flag alone -- add "
                               "reward terms (docs/tasks.md) or use --algo ppo")
        import warnings

        warnings.warn(f"task {ts.task.name}: no dense reward terms; PPO learns from the 0/1 success flag "
                      "alone", stacklevel=2)
    selector = Selector(select_episodes, select_seed, select_every) if select_episodes else None
    t_start = time.perf_counter()
    setup = Setup(ts, spec, cfg, engine, nthread)
    try:
        if selector is not None:
            selector.bind(setup, ts, nthread)
        state = setup.init_state(cfg)
        meta = {"algo": algo, "task": ts.task.name, "engine": engine, "config": cfg.to_dict(),
                "checkpoint_every": checkpoint_every}
        history: list = []
        out = None if out is None else Path(out)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            if resume:
                state, history = _resume(out, setup, state, meta)
                if selector is not None:
                    selector.restore(out)
        start = int(state.update)
        if start % checkpoint_every:
            raise CaliperError(f"resume at update {start}: not a segment boundary of {checkpoint_every}")
        base = jax.random.PRNGKey(cfg.seed + 2)
        compile_s, ckpt = 0.0, None
        env_steps = start * cfg.batch
        wall0 = time.perf_counter()
        seg_eps: list = []
        for u in range(start, cfg.updates):
            if u % checkpoint_every == 0:
                setup.collector.restart(segment_seed(cfg.seed, u // checkpoint_every))
                seg_eps = []
            t0 = time.perf_counter()
            key = jax.random.fold_in(base, u)
            ro, eps = setup.collector.collect(state.params, state.stats, key, cfg.rollout)
            jax.block_until_ready(ro.reward)
            t1 = time.perf_counter()
            state, m = setup.update(state, ro)
            m = {k: float(v) for k, v in m.items()}
            t2 = time.perf_counter()
            if u == start:                          # first collection and update include the compiles
                compile_s = t2 - t0
            env_steps += cfg.batch
            seg_eps.append(eps)
            row = {"update": u, "env_steps": env_steps, "episodes": int(len(eps.ret)),
                   "return": float(eps.ret.mean()) if len(eps.ret) else None,
                   "success": float(eps.success.mean()) if len(eps.ret) else None,
                   "held_success": float(eps.held.mean()) if len(eps.ret) else None, **m,
                   "collect_s": round(t1 - t0, 4), "update_s": round(t2 - t1, 4),
                   "steps_per_s": round(cfg.batch / max(t1 - t0, 1e-9), 1),
                   "wall_s": round(time.perf_counter() - wall0, 3)}
            for k in ("return",) + spec.metrics:
                if row[k] is not None and not np.isfinite(row[k]):
                    raise CaliperError(f"update {u}: {k} is {row[k]} (diverged); lower the lr or check the "
                                       "reward terms")
            end_of_segment = (u + 1) % checkpoint_every == 0 or u + 1 == cfg.updates
            if selector is not None and end_of_segment and (
                    ((u + 1) // checkpoint_every) % selector.every == 0 or u + 1 == cfg.updates):
                def save_best(sel, state=state):
                    if out is None:
                        return None
                    return _save(out / "best", setup, state, cfg, meta, keep=1, selected=sel)

                selector(state, row, lambda state=state: setup.export(state, cfg), save_best)
            history.append(row)
            if progress is not None:
                progress(row)
            if out is not None:
                write_scalars(out, history, scalar_columns(algo))
                if end_of_segment:
                    ckpt = _save(out, setup, state, cfg, meta)
            if end_of_segment and stop_success is not None:
                s = np.concatenate([e.success for e in seg_eps]) if seg_eps else np.zeros(0)
                if len(s) and s.mean() >= stop_success:
                    break
        if out is not None and history:
            plot_curve(history, out / "curve.png", f"{algo} on {ts.task.name} ({engine})")
    finally:                                     # a raising run still releases its worlds
        setup.env.close()
        if selector is not None:
            selector.close()
    policy = setup.export(state, cfg)
    selected = None
    if selector is not None and selector.policy is not None:
        policy, selected = selector.policy, selector.best
        ckpt = selector.checkpoint if selector.checkpoint is not None else ckpt
    return RLResult(algo, ts.task.name, engine, cfg.to_dict(), out, ckpt, int(state.update), env_steps,
                    history, compile_s, time.perf_counter() - t_start, policy, selected)


__all__ = ["ALGORITHMS", "ALGOS", "Algorithm", "RLResult", "SCALARS", "Selector", "plot_curve",
           "scalar_columns", "segment_seed", "train_rl", "write_scalars"]
