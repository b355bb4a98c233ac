"""Evaluation sweeps and evaluations split over a Ray cluster (the optional ``[cluster]`` extra).

Nothing here starts a cluster: :func:`connect` joins a running one (``"auto"``: the one this host
belongs to, or ``host:port`` of its head's GCS), or uses the connection the caller already holds
(``ray.init`` in tests). Each Ray task is a whole batched run on one node, worlds vectorized inside:

* :func:`ray_sweep` -- one task per sweep cell (task x randomisation level x seed x policy), the
  cells in :func:`learn.evaluate.sweep`'s order, so the merged :class:`learn.evaluate.SweepResult`
  is the one-process sweep's (``to_dict`` byte for byte: each cell is the same seeded run).
* :func:`ray_evaluate` -- one evaluation (CPU engine) split into blocks of worlds: block b plays
  worlds ``w0..w1`` for every world-episode round e, each round reset from the draws episode e of
  those worlds has in any world count (:meth:`tasks.env.VecEnv.episode_draws`) and the policy on the
  key stream of (world, e); rows merged in (e, world) order -> the :func:`learn.evaluate.evaluate`
  result (its ``to_dict``) byte for byte.

Failures: a task whose worker dies (SIGKILL, lost node) or raises is run once more; a cell that
fails twice is reported in one :class:`CellsFailed` error naming every such cell, never dropped.
Policies: "scripted", a checkpoint / run folder path (loaded on the worker: the path must be
visible there, a shared file system) or any picklable policy object (shipped once with
``ray.put``). Progress: ``progress(done, total)`` as cells finish, in completion order.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError

EXTRA = 'pip install "caliper-jax[cluster]"'
#: A failing task runs this many times in all (the first try and one retry).
ATTEMPTS = 2
#: Seconds to wait for a head's GCS port to accept a TCP connection before calling it unreachable.
CONNECT_TIMEOUT_S = 5.0


class CellsFailed(CaliperError):
    """Cells that failed on every attempt; ``failures`` is [(cell label, error line)]."""

    def __init__(self, failures):
        self.failures = list(failures)
        shown = "; ".join(f"{label}: {err}" for label, err in self.failures[:3])
        more = f" (and {len(self.failures) - 3} more)" if len(self.failures) > 3 else ""
        super().__init__(f"{len(self.failures)} Ray cell(s) failed {ATTEMPTS} times: {shown}{more}")


def require_ray():
    """The ``ray`` module, or a one-line error naming the extra."""
    try:
        import ray
    except ImportError:
        raise CaliperError(f"--ray needs Ray, which is not installed: {EXTRA}") from None
    return ray


def _probe(address: str, timeout: float) -> None:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise CaliperError(f"--ray {address!r}: expected 'auto' or HOST:PORT of a Ray head's GCS")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__)
        raise CaliperError(f"--ray {address}: no Ray head answers there ({reason} after at most "
                           f"{timeout:g} s); start one with `ray start --head` or fix the address") from None


class connect:
    """Context manager joining the Ray cluster at ``address`` ("auto", "HOST:PORT") for the
    block, disconnecting after; ``None`` (or an existing connection): use the one held."""

    def __init__(self, address: str | None, *, timeout: float = CONNECT_TIMEOUT_S):
        self.address, self.timeout, self.owned = address, float(timeout), False

    def __enter__(self):
        ray = require_ray()
        if ray.is_initialized():
            return ray
        if self.address is None:
            raise CaliperError("no Ray connection: pass --ray auto or --ray HOST:PORT of a running head")
        if self.address != "auto":
            self._probe_address()
        try:
            ray.init(address=self.address, log_to_driver=False, logging_level="ERROR")
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CaliperError(f"--ray {self.address}: cannot join a Ray cluster ({first})") from None
        self.owned = True
        return ray

    def _probe_address(self):
        _probe(self.address, self.timeout)

    def __exit__(self, *exc):
        if self.owned:
            import ray

            ray.shutdown()
        return False


# ---- running cells ----------------------------------------------------------------------------------
def _first_line(exc) -> str:
    """The root cause of a Ray task error in one line."""
    cause = getattr(exc, "cause", None)
    err = cause if isinstance(cause, BaseException) else exc
    text = str(err).strip().splitlines()
    # RayTaskError text carries the remote traceback; its last line is "Type: message"
    line = text[-1] if text else type(err).__name__
    return f"{type(err).__name__}: {line}" if type(err).__name__ not in line else line


def run_cells(fn, cells: list, labels: list[str], *, progress=None, num_cpus: float = 1) -> list:
    """``fn(cell)`` for every cell as Ray tasks (each retried once on worker death or an error) ->
    results in ``cells`` order. Raises :class:`CellsFailed` naming every cell that failed twice."""
    import ray

    remote = ray.remote(num_cpus=num_cpus, max_retries=ATTEMPTS - 1, retry_exceptions=True)(fn)
    refs = [remote.remote(c) for c in cells]
    index = {r: i for i, r in enumerate(refs)}
    results, failures, pending = [None] * len(cells), [], list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        i = index[ready[0]]
        try:
            results[i] = ray.get(ready[0])
        except ray.exceptions.RayError as exc:
            failures.append((i, _first_line(exc)))
        if progress is not None:
            progress(len(cells) - len(pending), len(cells))
    if failures:
        raise CellsFailed([(labels[i], err) for i, err in sorted(failures)])
    return results


def _policy_ref(policy):
    """What a worker gets for ``policy``: a string (loaded there) or an object reference."""
    import ray

    return policy if isinstance(policy, str) else ray.put(policy)


def _resolve_policy(ref):
    """A policy from its reference: an object reference, "scripted" or a checkpoint path."""
    if not isinstance(ref, str):
        import ray

        return ray.get(ref)
    if ref == "scripted":
        return "scripted"
    from learn.checkpoint import load_checkpoint, resolve_checkpoint

    return load_checkpoint(resolve_checkpoint(ref)).policy


# ---- the sweep --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _SweepCell:
    policy: object          # str or ObjectRef
    name: str
    task: object
    level: str
    randomization: object
    seed: int
    episodes: int
    num_envs: int | None
    engine: str
    allow_fps_mismatch: bool


#: Scenes built on this worker, by the pickled task: a worker reuses a scene (and the env functions
#: compiled for it) across cells instead of rebuilding and recompiling it for each (~2 s a cell).
_SCENES: dict = {}


def _scene(task):
    import pickle

    from tasks.env import resolve_task

    key = pickle.dumps(task)
    if key not in _SCENES:
        _SCENES[key] = resolve_task(task)
    return _SCENES[key]


def _sweep_cell(cell: _SweepCell):
    from learn.evaluate import evaluate

    return evaluate(_resolve_policy(cell.policy), _scene(cell.task), episodes=cell.episodes,
                    num_envs=cell.num_envs, seed=cell.seed, engine=cell.engine,
                    randomization=cell.randomization, name=cell.name,
                    allow_fps_mismatch=cell.allow_fps_mismatch)


def ray_sweep(policies: dict, tasks, *, address: str | None = None, randomization_levels: dict | None = None,
              seeds=(0,), episodes: int = 20, num_envs: int | None = None, engine: str = "mujoco",
              progress=None, allow_fps_mismatch: bool = False, num_cpus: float = 1):
    """:func:`learn.evaluate.sweep` with one Ray task per cell on the cluster at ``address``
    (module doc) -> the same :class:`learn.evaluate.SweepResult`. ``num_cpus``: CPUs each cell
    reserves (the CPU engine's threads)."""
    from learn.evaluate import SweepResult, SweepRun, rank, sweep_axes
    from tasks.env import resolve_task

    levels, task_list, seeds = sweep_axes(policies, tasks, randomization_levels, seeds)
    names = [resolve_task(t).task.name for t in task_list]     # bad tasks fail here, before any cell
    with connect(address):
        refs = {n: _policy_ref(p) for n, p in policies.items()}
        cells, labels = [], []
        for t, tname in zip(task_list, names, strict=True):      # sweep()'s order
            for level, spec in levels.items():
                for s in seeds:
                    for p in sorted(policies):
                        cells.append(_SweepCell(refs[p], p, t, str(level), spec, s, episodes, num_envs,
                                                engine, allow_fps_mismatch))
                        labels.append(f"policy={p} task={tname} level={level} seed={s}")
        results = run_cells(_sweep_cell, cells, labels, progress=progress, num_cpus=num_cpus)
    runs = [SweepRun(c.name, res.task, c.level, c.seed, res) for c, res in zip(cells, results, strict=True)]
    return SweepResult(runs, rank(runs))


# ---- one evaluation in blocks of worlds -------------------------------------------------------------
@dataclass(frozen=True)
class _EvalBlock:
    policy: object
    task: object
    worlds: tuple           # global world indices of this block
    rounds: int             # world-episodes 0..rounds-1 of each
    seed: int
    randomization: object
    allow_fps_mismatch: bool
    cameras: object = None  # the cameras to render (None: the policy's own; learn.seeing)


def _eval_block(block: _EvalBlock) -> list:
    """[(world, world_episode, success, steps, return)] of every (world, round) of ``block``."""
    from learn.evaluate import _env_kwargs, _run_cpu, _runner
    from learn.seeing import policy_env

    policy, worlds = _resolve_policy(block.policy), list(block.worlds)
    rows = []
    kwargs = _env_kwargs(block.randomization)
    with policy_env(policy, _scene(block.task), len(worlds), seed=block.seed, nthread=1,
                    cameras=block.cameras, **kwargs) as env:
        runner = _runner(policy, env, block.seed, block.allow_fps_mismatch)
        for e in range(block.rounds):
            draws = env.episode_draws(worlds, [e] * len(worlds))
            got, _ = _run_cpu(env, runner, 1, block.seed, lambda: None, draws=draws, identity=(worlds, e))
            rows += [(worlds[w], e, s, n, r, u) for (w, _, s, n, r, u) in got]
    return rows


def ray_evaluate(policy, task, *, address: str | None = None, episodes: int = 20, num_envs: int | None = None,
                 seed: int = 0, randomization="default", blocks: int | None = None, progress=None,
                 name: str | None = None, allow_fps_mismatch: bool = False, num_cpus: float = 1,
                 cameras=None):
    """:func:`learn.evaluate.evaluate` (CPU engine) with its ``num_envs`` worlds split into
    ``blocks`` Ray tasks (default: one per world, at most the cluster's CPUs) -> the same
    :class:`learn.evaluate.EvalResult` (module doc). ``progress(done, total)`` per finished block.
    A policy that sees gets its cameras rendered in every block (:mod:`learn.seeing`); ``cameras``
    renders others, refused here in one line, before any Ray task, unless they match the trained ones."""
    import time

    from learn.evaluate import (
        MAX_NUM_ENVS,
        _check_policy,
        _env_kwargs,
        _positive_int,
        _result,
        episode_results,
    )
    from tasks.env import resolve_task
    from tasks.env_spec import make_layout

    episodes = _positive_int(episodes, "episodes")
    W = min(episodes, MAX_NUM_ENVS) if num_envs is None else _positive_int(num_envs, "num_envs")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise CaliperError(f"seed must be an integer, got {seed!r}")
    local = _resolve_policy(policy) if isinstance(policy, str) else policy     # checked and named here
    _check_policy(local, "mujoco")
    _env_kwargs(randomization)
    ts = resolve_task(task)
    from learn.seeing import check_task_cameras

    check_task_cameras(local, ts, cameras)
    rounds = -(-episodes // W)
    t0 = time.perf_counter()
    with connect(address) as ray:
        n_blocks = min(W, blocks or max(1, int(ray.cluster_resources().get("CPU", 1))))
        n_blocks = _positive_int(n_blocks, "blocks")
        ref = _policy_ref(policy)
        splits = [tuple(int(w) for w in part) for part in np.array_split(np.arange(W), n_blocks) if len(part)]
        cells = [_EvalBlock(ref, task, part, rounds, int(seed), randomization, allow_fps_mismatch, cameras)
                 for part in splits]
        labels = [f"worlds {p[0]}..{p[-1]} of {ts.task.name} seed={seed}" for p in splits]
        parts = run_cells(_eval_block, cells, labels, progress=progress, num_cpus=num_cpus)
    wall = time.perf_counter() - t0
    rows = sorted((r for part in parts for r in part), key=lambda r: (r[1], r[0]))
    eps = episode_results(rows[:episodes], int(seed))
    return _result(ts, local, name, "mujoco", int(seed), W, make_layout(ts), randomization, eps,
                   {"wall_s": wall, "episodes_per_s": episodes / wall if wall > 0 else None,
                    "blocks": len(splits)})


# ---- scripted demonstrations in blocks of worlds ----------------------------------------------------
@dataclass(frozen=True)
class _DemoBlock:
    task: object
    worlds: tuple           # global world indices of this block
    rounds: int             # world-episodes 0..rounds-1 of each
    seed: int
    randomization: object
    cameras: tuple


def _demo_block(block: _DemoBlock) -> tuple[list, int]:
    """(the Episodes of every (world, round) of ``block``, how many had no plan)."""
    from tasks.demo import run_rounds
    from tasks.env import VecEnv

    kwargs = {} if block.randomization == "default" else {"randomization": block.randomization}
    with VecEnv(_scene(block.task), len(block.worlds), seed=block.seed, nthread=1,
                cameras=list(block.cameras) or None, **kwargs) as env:
        eps, expert = run_rounds(env, block.worlds, block.rounds)
    return eps, len(getattr(expert, "failed_plans", ()))


def ray_record_demos(task, episodes: int, out, *, address: str | None = None, seed: int = 0,
                     num_envs: int = 4, randomization="default", cameras=(), blocks: int | None = None,
                     progress=None, num_cpus: float = 1):
    """:func:`tasks.demo.record_demos` (CPU engine, scripted expert) with its ``num_envs`` worlds
    split into ``blocks`` Ray tasks (default: one per world, at most the cluster's CPUs), each
    recording its worlds' episodes with :func:`tasks.demo.run_rounds`; the driver writes them in
    canonical order as one LeRobot v3 dataset at ``out`` -> the same
    :class:`tasks.demo.DemoResult`, and the same dataset byte for byte. ``progress(done, total)``
    per finished block."""
    from tasks.demo import DemoResult, check_out, check_video_cameras, write_demos
    from tasks.env import VecEnv, resolve_task

    if not isinstance(episodes, (int, np.integer)) or isinstance(episodes, bool) or episodes < 1:
        raise CaliperError(f"episodes must be an integer >= 1, got {episodes!r}")
    if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
        raise CaliperError(f"num_envs must be an integer >= 1, got {num_envs!r}")
    out = check_out(out)
    ts = resolve_task(task)
    kwargs = {} if randomization == "default" else {"randomization": randomization}
    rounds = -(-episodes // num_envs)
    with VecEnv(ts, num_envs, seed=seed, cameras=list(cameras) or None, **kwargs) as env:   # checked here
        check_video_cameras(env.cameras)
        with connect(address) as ray:
            n_blocks = min(num_envs, blocks or max(1, int(ray.cluster_resources().get("CPU", 1))))
            splits = [tuple(int(w) for w in part) for part in np.array_split(np.arange(num_envs), n_blocks)]
            cells = [_DemoBlock(task, part, rounds, int(seed), randomization, tuple(cameras))
                     for part in splits]
            labels = [f"worlds {p[0]}..{p[-1]} of {ts.task.name} seed={seed}" for p in splits]
            parts = run_cells(_demo_block, cells, labels, progress=progress, num_cpus=num_cpus)
        eps = sorted((ep for part, _ in parts for ep in part), key=lambda ep: (ep.index, ep.world))[:episodes]
        write_demos(env, eps, out, seed=seed)
    return DemoResult(out, len(eps), sum(ep.success for ep in eps), sum(len(ep.state) for ep in eps),
                      sum(n for _, n in parts))


__all__ = ["ATTEMPTS", "CellsFailed", "EXTRA", "connect", "ray_evaluate", "ray_record_demos", "ray_sweep",
           "require_ray", "run_cells"]
