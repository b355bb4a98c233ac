"""Re-simulate recorded demonstrations from their randomisation record, bit for bit.

:func:`resimulate` reads a dataset written by :func:`tasks.demo.record_demos`: its sidecar
``meta/caliper_demos.json`` names the task (``task_spec``: the task as written; a format-1 file
only its name, looked up in the zoo), the randomisation spec, the engine and the precision, and
holds every episode's draws. The task scene is rebuilt, one world starts from the stored draws
(``VecEnv.reset(options={"draws": ...})``), the recorded ``action`` column is replayed tick by
tick, and the re-simulated ``observation.state`` (T, nq) and ``observation.environment_state``
(T, P * 7) -- float32, world frame, as recorded -- are compared with the recorded columns.

What the bits depend on (measured; ``tests/test_task_resim.py``):

* MuJoCo engine: every world of :class:`mujoco.batch.Batch` is a plain ``mj_step`` loop, so
  neither the number of worlds, nor the thread count, nor the world's slot changes its bits:
  episodes recorded on 2 and on 72 worlds (any slot, first and later episodes) replay in a
  1-world env, on one thread or all, bit for bit. The gate and grasp rule run in JAX vmapped over
  the worlds; the gated targets come from elementwise IEEE operations (clip, add), whose bits do
  not depend on the batch size (at 64+ worlds the gate's gravity check takes the lane kernels of
  :mod:`caliper_jax.lanes`, which may change its last bits, but it only sets a flag against a
  threshold). What must match: the task and its robot file, the precision (a float64 recording
  replays under ``jax.enable_x64``, done here; replayed in float32 it differs by ~1e-8 from the
  first tick) and the MuJoCo / JAX releases (recorded; a mismatch is named in ``notes``).
* MJX engine (float32 XLA): the physics of all worlds is one vmapped XLA program whose compiled
  code depends on the world count, so the replay runs in an env of the recording's ``num_envs``,
  every world replaying the episode, and compares the recorded world's slot. Measured on the CPU
  (lift-cube, 2 worlds): every episode replays bit for bit, also those the recording started
  inside its jitted step (auto-reset) rather than at the env's reset -- on the same machine, XLA
  release and device kind; XLA promises no more. The same episode in a 1-world env differs by
  ~3e-6 m after one tick and then diverges (a grasp decided a tick apart: cm). Replaying with
  another engine than the recording's is allowed and reports the cross-engine difference.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from caliper_jax.errors import CaliperError

COLUMNS = ("observation.state", "observation.environment_state")


@dataclass(frozen=True)
class Comparison:
    """One re-simulated column against the recorded one (float32, (T, n))."""

    max_abs_diff: float                # over all frames (inf when the shapes differ)
    first_diff_frame: int | None       # first frame whose bits differ, None when identical
    identical: bool                    # same shape and every value bit for bit

    def to_dict(self) -> dict:
        return {"max_abs_diff": self.max_abs_diff, "first_diff_frame": self.first_diff_frame,
                "identical": self.identical}


@dataclass(frozen=True)
class ResimResult:
    """One re-simulated episode. ``state`` (T, nq) and ``env_state`` (T, P * 7) float32: the
    observation at the start of each replayed tick (world frame, as recorded)."""

    episode: int                       # dataset episode index
    world: int                         # world and episode within it at recording time
    world_episode: int
    engine: str                        # engine of the replay
    recorded_engine: str
    length: int                        # frames replayed
    state: np.ndarray
    env_state: np.ndarray
    compare: dict                      # {column: Comparison}
    ended: bool                        # the replayed episode ended on its last recorded frame
    success: bool                      # ... with success
    recorded_success: bool
    notes: tuple = field(default=())   # what may explain a difference (engine, versions)

    @property
    def identical(self) -> bool:
        """Every compared column bit for bit, and the episode ended as recorded."""
        return (all(c.identical for c in self.compare.values()) and self.ended
                and self.success == self.recorded_success)

    def to_dict(self) -> dict:
        return {"episode": self.episode, "world": self.world, "world_episode": self.world_episode,
                "engine": self.engine, "recorded_engine": self.recorded_engine, "length": self.length,
                "identical": self.identical, "ended": self.ended, "success": self.success,
                "recorded_success": self.recorded_success,
                "compare": {k: c.to_dict() for k, c in self.compare.items()}, "notes": list(self.notes)}


def compare_columns(new: np.ndarray, old: np.ndarray) -> Comparison:
    """Bitwise comparison of a re-simulated float32 (T, n) column with the recorded one (T', n).
    Frames beyond the shorter of the two count as differing; ``max_abs_diff`` is over the common
    frames (inf where only one side is NaN)."""
    new, old = np.asarray(new, np.float32), np.asarray(old, np.float32)
    if new.shape[1:] != old.shape[1:]:
        return Comparison(float("inf"), 0, False)
    T = min(len(new), len(old))
    a, b = new[:T].reshape(T, -1), old[:T].reshape(T, -1)
    same_bits = a.view(np.int32) == b.view(np.int32)
    diff = np.where(same_bits, 0.0, np.abs(a.astype(np.float64) - b.astype(np.float64)))
    worst = float(np.nan_to_num(diff, nan=np.inf).max(initial=0.0))
    same = same_bits.all(axis=1)
    if not same.all():
        first = int(np.argmin(same))
    else:
        first = None if len(new) == len(old) else T
    return Comparison(worst, first, first is None)


# ---- the record -----------------------------------------------------------------------------------

def read_record(root) -> dict:
    """The sidecar of the dataset at ``root``, checked: format, task, seed, engine, num_envs and
    the per-episode entries (format 1 and 2). Errors name the file and the field."""
    from tasks.demo import DEMOS_PATH
    from tasks.env import ENGINES

    path = Path(root) / DEMOS_PATH
    if not path.is_file():
        raise CaliperError(f"{path}: no randomisation record (not a dataset written by caliper task demo)")
    try:
        side = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CaliperError(f"{path}: not valid JSON ({exc})") from None

    def bad(what: str) -> CaliperError:
        return CaliperError(f"{path}: {what}")

    if not isinstance(side, dict):
        raise bad("expected a JSON object")
    fmt = side.get("format", 1)
    if fmt not in (1, 2):
        raise bad(f"format: unknown record format {fmt!r} (this caliper reads 1 and 2)")
    if not isinstance(side.get("task"), str):
        raise bad(f"task: expected a task name, got {side.get('task')!r}")
    if not isinstance(side.get("seed"), int) or isinstance(side.get("seed"), bool):
        raise bad(f"seed: expected an integer, got {side.get('seed')!r}")
    if side.get("engine", "mujoco") not in ENGINES:
        raise bad(f"engine: expected one of {', '.join(ENGINES)}, got {side.get('engine')!r}")
    n = side.get("num_envs", 1)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise bad(f"num_envs: expected an integer >= 1, got {n!r}")
    if side.get("precision", "float32") not in ("float32", "float64"):
        raise bad(f"precision: expected float32 or float64, got {side.get('precision')!r}")
    eps = side.get("episodes")
    if not isinstance(eps, list):
        raise bad("episodes: expected a list")
    for i, e in enumerate(eps):
        if not isinstance(e, dict):
            raise bad(f"episodes[{i}]: expected an object")
        for key in ("world", "world_episode", "length"):
            if not isinstance(e.get(key), int) or isinstance(e.get(key), bool) or e[key] < 0:
                raise bad(f"episodes[{i}].{key}: expected an integer >= 0, got {e.get(key)!r}")
        if not isinstance(e.get("success"), bool):
            raise bad(f"episodes[{i}].success: expected true or false, got {e.get('success')!r}")
        if not isinstance(e.get("randomization"), dict):
            raise bad(f"episodes[{i}].randomization: expected an object {{field: values}}")
    side["_path"] = str(path)
    return side


def record_spec(side: dict):
    """The :class:`tasks.env_spec.EnvRandomization` of a record: ``randomization_spec`` (format 2),
    else (format 1) the fields any episode drew, each with the default range widened to the
    recorded values (a format-1 record does not say which ranges it drew from)."""
    from tasks.env_spec import RANDOM_FIELDS, EnvRandomization

    where = side["_path"]
    if "randomization_spec" in side:
        spec = side["randomization_spec"]
        if spec is None:
            return None
        if not isinstance(spec, dict) or set(spec) - set(RANDOM_FIELDS):
            raise CaliperError(f"{where}: randomization_spec: expected an object with fields "
                               f"{', '.join(RANDOM_FIELDS)}, got {spec!r}")
        try:
            return EnvRandomization(**{k: spec.get(k) for k in RANDOM_FIELDS})
        except CaliperError as exc:
            raise CaliperError(f"{where}: randomization_spec: {exc}") from None
    drawn: dict = {}
    for e in side["episodes"]:
        for k, v in e["randomization"].items():
            if k not in RANDOM_FIELDS:
                raise CaliperError(f"{where}: randomization.{k}: unknown field "
                                   f"(fields: {', '.join(RANDOM_FIELDS)})")
            try:
                a = np.asarray(v, np.float64).ravel()
            except (TypeError, ValueError):
                raise CaliperError(f"{where}: randomization.{k}: expected numbers, got {v!r}") from None
            drawn.setdefault(k, []).append(a)
    if not drawn:
        return None
    values = {k: np.concatenate(v) for k, v in drawn.items()}
    default, kwargs = EnvRandomization(), {}
    for k in RANDOM_FIELDS:
        a, d = values.get(k), getattr(default, k)
        if a is None or not np.all(np.isfinite(a)):          # absent; non-finite: check_draws names it
            kwargs[k] = None if a is None else d
        elif k in ("prop_xy", "prop_yaw"):
            kwargs[k] = max(d or 0.0, float(np.abs(a).max(initial=0.0)))
        elif (a > 0).all():
            lo, hi = d or (np.inf, 0.0)
            kwargs[k] = (min(lo, float(a.min())), max(hi, float(a.max())))
        else:                                                # a factor <= 0: check_draws names it
            kwargs[k] = d or (1.0, 1.0)
    return EnvRandomization(**kwargs)


def record_task(side: dict, task=None):
    """The task a record was made with: ``task`` (a Task, file or zoo name) when given -- it must
    equal the recorded ``task_spec`` but for the robot path --, else the recorded spec (its robot
    path is relative to the task file's folder: tried against the zoo's folder), else (format 1)
    the zoo task of the recorded name."""
    from tasks.schema import ZOO_DIR, Task, find_task, load_task, parse_task, task_to_dict

    where, spec = side["_path"], side.get("task_spec")
    if task is not None:
        chosen = task if isinstance(task, Task) else load_task(find_task(task))
        if spec is not None:
            ours = {k: v for k, v in task_to_dict(chosen).items() if k != "robot"}
            theirs = {k: v for k, v in spec.items() if k != "robot"}
            if json.loads(json.dumps(ours)) != theirs:
                keys = sorted(k for k in set(ours) | set(theirs) if json.loads(json.dumps(ours.get(k)))
                              != theirs.get(k))
                raise CaliperError(f"{where}: task_spec: the given task {chosen.name!r} differs from the "
                                   f"recorded one in {', '.join(keys)}")
        return chosen
    if spec is None:
        return load_task(find_task(side["task"]))
    if not isinstance(spec, dict):
        raise CaliperError(f"{where}: task_spec: expected an object, got {type(spec).__name__}")
    try:
        return parse_task(spec, base_dir=ZOO_DIR)
    except CaliperError as exc:
        raise CaliperError(f"{where}: task_spec: {exc} (pass the task: task=... / --task FILE)") from None


# ---- the replay -----------------------------------------------------------------------------------

#: Built scenes of the last few replayed tasks, so replays of one record share a scene and the
#: environment's compiled functions (building and compiling take seconds; a replay of a short
#: episode milliseconds). Keyed by the task as written, its robot file and the precision.
_SCENES: dict = {}
_MAX_SCENES = 4


def _scene(task, x64: bool):
    from tasks.scene import build_scene
    from tasks.schema import task_to_dict

    spec = {k: v for k, v in task_to_dict(task).items() if k != "robot"}
    key = (json.dumps(spec, sort_keys=True), str(Path(task.robot).resolve()), x64)
    ts = _SCENES.get(key)
    if ts is None:
        ts = build_scene(task)
        if len(_SCENES) >= _MAX_SCENES:
            _SCENES.pop(next(iter(_SCENES)))
        _SCENES[key] = ts
    return ts


class Replayer:
    """The environment a record replays in, built once for all its episodes. ``engine``: "mujoco"
    or "mjx"; ``task``: as :func:`record_task`; ``num_envs``: worlds of the replay env (None: 1 on
    MuJoCo, the recording's world count on MJX, see the module's notes), every world replaying the
    episode and the one in the recorded world's slot (slot 0 when there are fewer) compared."""

    def __init__(self, root, *, engine: str = "mujoco", task=None, nthread: int | None = None,
                 num_envs: int | None = None):
        from caliper_jax.dataset import LeRobotReader
        from tasks.env import ENGINES

        if engine not in ENGINES:
            raise CaliperError(f"engine={engine!r}: expected one of {', '.join(ENGINES)}")
        self.root = Path(root)
        self.side = read_record(self.root)
        self.reader = LeRobotReader(self.root)
        n = len(self.side["episodes"])
        if n != self.reader.num_episodes:
            raise CaliperError(f"{self.side['_path']}: episodes: {n} entries for {self.reader.num_episodes} "
                               "dataset episodes")
        self.engine, self.recorded_engine = engine, self.side.get("engine", "mujoco")
        self.x64 = self.side.get("precision", "float32") == "float64"
        self.spec = record_spec(self.side)
        self.task = record_task(self.side, task)
        if num_envs is not None and (not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool)
                                     or num_envs < 1):
            raise CaliperError(f"num_envs must be None or an integer >= 1, got {num_envs!r}")
        # MJX: the recording's world count (its compiled program); the CPU engine: one world
        self.num_envs = int(num_envs) if num_envs is not None else \
            int(self.side.get("num_envs", 1)) if engine == "mjx" else 1
        self._nthread = nthread
        self._env = None
        self.notes = self._notes()

    def _notes(self) -> tuple:
        import jax
        import mujoco

        notes = []
        if self.engine != self.recorded_engine:
            notes.append(f"recorded on {self.recorded_engine}, replayed on {self.engine}: not expected to be "
                         "bit-identical")
        for name, now in (("mujoco", mujoco.__version__), ("jax", jax.__version__)):
            then = self.side.get("versions", {}).get(name)
            if then is not None and then != now:
                notes.append(f"recorded with {name} {then}, replayed with {now}")
        return tuple(notes)

    def _precision(self):
        import jax

        return jax.enable_x64(self.x64)

    def env(self):
        if self._env is None:
            from tasks.env import VecEnv

            with self._precision():
                self._env = VecEnv(_scene(self.task, self.x64), self.num_envs, engine=self.engine,
                                   seed=self.side["seed"], randomization=self.spec, nthread=self._nthread)
        return self._env

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def episode(self, i: int) -> ResimResult:
        """Re-simulate dataset episode ``i``."""
        from tasks.demo import env_features

        eps = self.side["episodes"]
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool) or not 0 <= i < len(eps):
            raise CaliperError(f"{self.root}: episode {i!r} out of range (the dataset has {len(eps)})")
        i, e = int(i), eps[int(i)]
        rec = self.reader.episode(i)
        actions = np.asarray(rec["action"], np.float32)
        if len(actions) != e["length"]:
            raise CaliperError(f"{self.side['_path']}: episodes[{i}].length: {e['length']}, but the dataset "
                               f"episode has {len(actions)} frames")
        W = self.num_envs
        lane = e["world"] if e["world"] < W else 0
        with self._precision():
            env = self.env()
            try:
                draws = {k: np.broadcast_to(np.asarray(v, np.float64), (W, *np.shape(v)))
                         for k, v in e["randomization"].items()}
            except ValueError as exc:
                raise CaliperError(f"{self.side['_path']}: episodes[{i}].randomization: {exc}") from None
            try:
                obs, _ = env.reset(seed=self.side["seed"], options={"draws": draws})
            except CaliperError as exc:
                raise CaliperError(f"{self.side['_path']}: episodes[{i}].randomization: {exc}") from None
            rows, ended, success = [], False, False
            for t, a in enumerate(actions):
                rows.append(np.asarray(obs[lane]))
                obs, _, term, trunc, info = env.step(np.broadcast_to(a, (W, len(a))))
                if term[lane] or trunc[lane]:
                    ended = t == len(actions) - 1
                    success = bool(info["final_success"][lane])
                    if not ended:
                        break
        feats = env_features(env.layout, np.asarray(rows, np.float64))
        new = {k: np.asarray(feats[k], np.float32) for k in COLUMNS}
        compare = {k: compare_columns(new[k], rec[k]) for k in COLUMNS}
        return ResimResult(i, e["world"], e["world_episode"], self.engine, self.recorded_engine, len(rows),
                           new["observation.state"], new["observation.environment_state"], compare, ended,
                           success, e["success"], self.notes)


def resimulate(dataset_root, episode: int, *, engine: str = "mujoco", task=None,
               nthread: int | None = None, num_envs: int | None = None) -> ResimResult:
    """Re-simulate episode ``episode`` of the dataset at ``dataset_root`` from its stored draws and
    recorded actions -> :class:`ResimResult` (states and their comparison with the recording).
    ``engine``: "mujoco" (default) or "mjx"; ``task``: the task when the record's own spec cannot be
    used (a task outside the zoo); ``nthread``: MuJoCo threads (bits do not depend on it);
    ``num_envs``: worlds of the replay env (:class:`Replayer`)."""
    with Replayer(dataset_root, engine=engine, task=task, nthread=nthread, num_envs=num_envs) as r:
        return r.episode(episode)


def resimulate_all(dataset_root, *, engine: str = "mujoco", task=None, nthread: int | None = None,
                   num_envs: int | None = None, progress=None) -> list[ResimResult]:
    """Every episode of the dataset, in one environment -> [ResimResult]. ``progress(n)`` after each."""
    out = []
    with Replayer(dataset_root, engine=engine, task=task, nthread=nthread, num_envs=num_envs) as r:
        for i in range(len(r.side["episodes"])):
            out.append(r.episode(i))
            if progress is not None:
                progress(len(out))
    return out


__all__ = ["COLUMNS", "Comparison", "Replayer", "ResimResult", "compare_columns", "read_record",
           "record_spec", "record_task", "resimulate", "resimulate_all"]
