"""Scripted demonstrations recorded as a LeRobotDataset v3.0 (the first part of the data factory).

:func:`run_episodes` runs the scripted expert (:mod:`tasks.expert`) on a :class:`tasks.env.VecEnv`
until every world has finished enough episodes, keeping each episode's frames; :func:`record_demos`
writes the first N of them, ordered by (episode index within its world, world), so the dataset
does not depend on which world happened to finish first.

One frame per control tick (the task's fps): ``observation.state`` (nq) the measured joint
positions at the tick's start, ``action`` (nq) the joint position targets the expert sent,
``observation.environment_state`` (P * 7) every prop's position and quaternion (w, x, y, z),
world frame. Each episode's task text is the task's name and its success predicate in words.
Per-episode outcomes -- success, length, world, the seed and every randomisation draw -- are in
the sidecar ``meta/caliper_demos.json`` (lerobot ignores it) and as the tags ``success`` /
``failure`` (``meta/caliper_tags.json``). The same task, seed, episode count and world count give
a byte-identical dataset (no wall-clock value is written anywhere).

The sidecar is the randomisation record that :mod:`tasks.resim` re-simulates from (format 2; a
file without ``format`` is format 1 and still loads): besides the per-episode draws ({field:
nested lists}, float32 values written as Python floats, which read back to the same float32) it
holds the task as written (``task_spec``, :func:`tasks.schema.task_to_dict`), the randomisation
spec (``randomization_spec``, null when off), the engine, the float precision of the run
(``precision``: the robot Model's dtype, which the safety gate -- and on MJX the physics -- runs
in) and the MuJoCo / JAX versions. Nothing else in an episode is random: the gate, the grasp
rule and the physics are deterministic, and the expert's choices are in the ``action`` column.
The actions are rounded to float32 before they are sent, so the recorded column is exactly what
the environment received, at either precision.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from caliper_jax.errors import CaliperError

DEMOS_PATH = "meta/caliper_demos.json"
#: Version of the sidecar's layout (1: no ``format`` key, draws and outcomes only).
DEMOS_FORMAT = 2


@dataclass(frozen=True)
class Episode:
    world: int
    index: int                 # episode index within its world
    state: np.ndarray          # (T, nq)
    action: np.ndarray         # (T, nq)
    env_state: np.ndarray      # (T, P * 7)
    success: bool
    draws: dict                # {field: list} this episode's randomisation draw


def run_episodes(env, episodes: int, *, progress=None, policy=None) -> tuple[list[Episode], object]:
    """Run the scripted expert until ``episodes`` episodes have finished in canonical order ->
    (episodes sorted by (index, world), the expert). ``progress(n)`` is called with each finished
    count. ``policy``: None (the scripted expert) or ``policy(env)`` -> an object with
    ``act(obs (W, obs_dim), info) -> (W, nq)`` joint targets (sent rounded to float32)."""
    from tasks.expert import ScriptedExpert

    if episodes < 1:
        raise CaliperError(f"episodes must be >= 1, got {episodes}")
    W, L = env.num_envs, env.layout
    need = -(-episodes // W)                     # episodes per world
    expert = ScriptedExpert(env) if policy is None else policy(env)
    obs, info = env.reset()
    frames = [[] for _ in range(W)]
    done: list[Episode] = []
    count = np.zeros(W, np.int64)
    while count.min() < need:
        action = np.asarray(expert.act(obs, info), np.float64).astype(np.float32)
        feats = env_features(L, np.asarray(obs, np.float64))
        q, env_state = feats["observation.state"], feats["observation.environment_state"]
        for w in range(W):
            frames[w].append((q[w], action[w], env_state[w]))
        obs, _, term, trunc, new_info = env.step(action)
        for w in np.flatnonzero(term | trunc):
            if count[w] < need:
                q, a, e = (np.stack(x) for x in zip(*frames[w], strict=True))
                draws = {k: np.asarray(v[w]).tolist() for k, v in info["randomization"].items()}
                success = bool(new_info["final_success"][w])
                done.append(Episode(int(w), int(count[w]), q, a, e, success, draws))
                if progress is not None:
                    progress(len(done))
            count[w] += 1
            frames[w] = []
        info = new_info
    done.sort(key=lambda ep: (ep.index, ep.world))
    return done[:episodes], expert


def env_features(L, obs, xp=np) -> dict:
    """The recorded features of VecEnv observations ``obs`` (..., obs_dim) of layout ``L``:
    ``observation.state`` (..., nq) joint positions, ``observation.environment_state`` (..., P * 7)
    every prop's position and quaternion (w, x, y, z). ``xp``: numpy or jax.numpy."""
    from tasks.env_spec import observation_parts

    parts = observation_parts(L, obs)
    props = xp.concatenate([parts["prop_pos"], parts["prop_quat"]], axis=-1)
    return {"observation.state": parts["q"],
            "observation.environment_state": props.reshape(props.shape[:-2] + (-1,))}


def features(model, prop_names) -> dict:
    joints = list(model.joint_names)
    env_names = [f"{p}.{c}" for p in prop_names for c in ("x", "y", "z", "qw", "qx", "qy", "qz")]
    return {"observation.state": {"dtype": "float32", "shape": [len(joints)], "names": joints},
            "action": {"dtype": "float32", "shape": [len(joints)], "names": joints},
            "observation.environment_state": {"dtype": "float32", "shape": [len(env_names)],
                                              "names": env_names}}


def task_text(task) -> str:
    from tasks.predicates import describe

    return task.name if task.success is None else f"{task.name}: {describe(task.success)}"


@dataclass(frozen=True)
class DemoResult:
    root: Path
    episodes: int
    successes: int
    frames: int
    failed_plans: int

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes


def record_demos(task, episodes: int, out, *, seed: int = 0, engine: str = "mujoco", num_envs: int = 4,
                 randomization="default", progress=None, policy=None) -> DemoResult:
    """Record ``episodes`` scripted demonstrations of ``task`` (a Task, file or zoo name) into a new
    LeRobot v3 dataset at ``out`` (which must not exist or be an empty folder). ``policy``: as
    :func:`run_episodes` (None: the scripted expert)."""
    from caliper_jax.dataset import LeRobotWriter, tag_episode
    from caliper_jax.dataset.atomic import write_atomic
    from tasks.env import VecEnv

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CaliperError(f"{out}: already exists and is not an empty folder (demos go into a new dataset)")
    kwargs = {} if randomization == "default" else {"randomization": randomization}
    with VecEnv(task, num_envs, engine=engine, seed=seed, **kwargs) as env:
        eps, expert = run_episodes(env, episodes, progress=progress, policy=policy)
        ts = env.task_scene
        record = run_record(env)
        text = task_text(ts.task)
        with LeRobotWriter(out, env.layout.fps, features(ts.model, env.layout.prop_names),
                           robot_type=ts.model.name) as writer:
            for ep in eps:
                writer.add_frames({"observation.state": ep.state.astype(np.float32),
                                   "action": ep.action.astype(np.float32),
                                   "observation.environment_state": ep.env_state.astype(np.float32)})
                writer.save_episode(task=text)
    for i, ep in enumerate(eps):
        tag_episode(out, i, add=["success" if ep.success else "failure"])
    sidecar = {**record, "seed": int(seed), "engine": engine, "num_envs": int(num_envs),
               "episodes": [{"episode_index": i, "world": ep.world, "world_episode": ep.index,
                             "success": ep.success, "length": len(ep.state), "randomization": ep.draws}
                            for i, ep in enumerate(eps)]}
    write_atomic(out / DEMOS_PATH, (json.dumps(sidecar, indent=1, sort_keys=True) + "\n").encode())
    return DemoResult(out, len(eps), sum(ep.success for ep in eps), sum(len(ep.state) for ep in eps),
                      len(getattr(expert, "failed_plans", ())))


def run_record(env) -> dict:
    """What the sidecar records of an environment besides the per-episode draws: format, task name
    and spec, randomisation spec, precision and the MuJoCo / JAX versions."""
    import dataclasses

    import jax
    import mujoco

    from tasks.schema import task_to_dict

    spec = env.randomization
    return {"format": DEMOS_FORMAT, "task": env.task.name, "task_spec": task_to_dict(env.task),
            "randomization_spec": None if spec is None else dataclasses.asdict(spec),
            "precision": str(np.dtype(env.task_scene.model.dtype)),
            "versions": {"mujoco": mujoco.__version__, "jax": jax.__version__}}


__all__ = ["DEMOS_FORMAT", "DEMOS_PATH", "DemoResult", "Episode", "env_features", "features", "record_demos",
           "run_episodes", "run_record", "task_text"]
