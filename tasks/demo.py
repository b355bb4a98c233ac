"""Scripted demonstrations recorded as a LeRobotDataset v3.0 (the first part of the data factory).

:func:`run_episodes` runs the scripted expert (:mod:`tasks.expert`) on a :class:`tasks.env.VecEnv`
until every world has finished enough episodes, keeping each episode's frames; :func:`record_demos`
writes the first N of them, ordered by (episode index within its world, world), so the dataset
does not depend on which world happened to finish first.

One frame per control tick (the task's fps): ``observation.state`` (nq) the measured joint
positions at the tick's start, ``action`` (nq) the joint position targets the expert sent,
``observation.environment_state`` (P * 7) every prop's position and quaternion (w, x, y, z),
world frame. Each episode's task text is the task's name and its success predicate in words.
With ``cameras`` (names such as ``"front:96x96"`` or named PinholeCameras, see
:mod:`tasks.cameras`) each camera is also a video feature ``observation.images.<name>`` (uint8
[height, width, 3], names ["height", "width", "channels"], lerobot's MP4 encoding, 32 px a side at
least): frame t is the image rendered from the state whose ``observation.state`` is row t. The
sidecar's ``cameras`` list records each camera's size, intrinsics and pose (frame, body).
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
from dataclasses import dataclass, field
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
    images: dict = field(default_factory=dict)   # {camera: (T, height, width, 3) uint8}


def run_episodes(env, episodes: int, *, progress=None, policy=None) -> tuple[list[Episode], object]:
    """Run the scripted expert until ``episodes`` episodes have finished in canonical order ->
    (episodes sorted by (index, world), the expert). ``progress(n)`` is called with each finished
    count. ``policy``: None (the scripted expert) or ``policy(env)`` -> an object with
    ``act(obs (W, obs_dim), info) -> (W, nq)`` joint targets (sent rounded to float32). An env
    with cameras also gives each episode its frames (``Episode.images``, frame t of ``state`` row t)."""
    if episodes < 1:
        raise CaliperError(f"episodes must be >= 1, got {episodes}")
    W = env.num_envs
    need = -(-episodes // W)                     # episodes per world
    expert = _expert(env, policy)
    obs, info = env.reset()
    frames = [[] for _ in range(W)]
    done: list[Episode] = []
    count = np.zeros(W, np.int64)
    while count.min() < need:
        obs, ended, new_info = _tick(env, expert, obs, info, frames)
        for w in ended:
            if count[w] < need:
                done.append(_episode(frames[w], info, new_info, w, int(w), int(count[w])))
                if progress is not None:
                    progress(len(done))
            count[w] += 1
            frames[w] = []
        info = new_info
    done.sort(key=lambda ep: (ep.index, ep.world))
    return done[:episodes], expert


def run_rounds(env, worlds, rounds: int, *, policy=None, progress=None) -> tuple[list[Episode], object]:
    """Episodes ``0..rounds-1`` of the global worlds ``worlds`` (one per world of ``env``, in order),
    as :func:`run_episodes` in an env of any world count records them: each round resets every world
    from the draws that episode has there (:meth:`tasks.env.VecEnv.episode_draws`) and runs until
    each world's episode ends. -> (episodes sorted by (index, world), the expert). ``progress(n)``
    with each finished count. What a Ray worker runs (:func:`learn.cluster.ray_record_demos`)."""
    worlds = [int(w) for w in worlds]
    if len(worlds) != env.num_envs:
        raise CaliperError(f"run_rounds: {len(worlds)} world indices for an env of {env.num_envs} worlds")
    expert = _expert(env, policy)
    done: list[Episode] = []
    for e in range(int(rounds)):
        draws = env.episode_draws(worlds, [e] * len(worlds))
        obs, info = env.reset(options={"draws": draws} if draws else None)
        frames = [[] for _ in worlds]
        live = np.ones(len(worlds), bool)
        while live.any():
            obs, ended, new_info = _tick(env, expert, obs, info, frames)
            for w in ended:
                if live[w]:
                    done.append(_episode(frames[w], info, new_info, w, worlds[w], e))
                    live[w] = False
                    if progress is not None:
                        progress(len(done))
                frames[w] = []
            info = new_info
    done.sort(key=lambda ep: (ep.index, ep.world))
    return done, expert


def _expert(env, policy):
    from tasks.arm_expert import expert_for

    return expert_for(env) if policy is None else policy(env)


def _tick(env, expert, obs, info, frames) -> tuple:
    """One control tick of every world: append each world's frame (state, action, props, images)
    to ``frames[w]``, step -> (obs, worlds whose episode ended, the new info)."""
    action = np.asarray(expert.act(obs, info), np.float64).astype(np.float32)
    feats = env_features(env.layout, np.asarray(obs, np.float64))
    q, env_state = feats["observation.state"], feats["observation.environment_state"]
    images = info.get("images", {})
    for w in range(env.num_envs):
        frames[w].append((q[w], action[w], env_state[w], {k: v[w] for k, v in images.items()}))
    obs, _, term, trunc, new_info = env.step(action)
    return obs, np.flatnonzero(term | trunc), new_info


def _episode(frames, info, new_info, w: int, world: int, index: int) -> Episode:
    """The Episode of local world ``w`` (global ``world``, its ``index``-th) from its frames."""
    q, a, e, im = zip(*frames, strict=True)
    images = {k: np.stack([f[k] for f in im]) for k in im[0]}
    draws = {k: np.asarray(v[w]).tolist() for k, v in info["randomization"].items()}
    return Episode(world, index, np.stack(q), np.stack(a), np.stack(e), bool(new_info["final_success"][w]),
                   draws, images)


def env_features(L, obs, xp=np) -> dict:
    """The recorded features of VecEnv observations ``obs`` (..., obs_dim) of layout ``L``:
    ``observation.state`` (..., nq) joint positions, ``observation.environment_state`` (..., P * 7)
    every prop's position and quaternion (w, x, y, z). ``xp``: numpy or jax.numpy."""
    from tasks.env_spec import observation_parts

    parts = observation_parts(L, obs)
    props = xp.concatenate([parts["prop_pos"], parts["prop_quat"]], axis=-1)
    return {"observation.state": parts["q"],
            "observation.environment_state": props.reshape(props.shape[:-2] + (-1,))}


def features(model, prop_names, cameras=()) -> dict:
    """The dataset features of a demo recording; ``cameras`` (PinholeCameras) add one video
    feature each."""
    from tasks.cameras import feature_key

    joints = list(model.joint_names)
    env_names = [f"{p}.{c}" for p in prop_names for c in ("x", "y", "z", "qw", "qx", "qy", "qz")]
    out = {"observation.state": {"dtype": "float32", "shape": [len(joints)], "names": joints},
           "action": {"dtype": "float32", "shape": [len(joints)], "names": joints},
           "observation.environment_state": {"dtype": "float32", "shape": [len(env_names)],
                                             "names": env_names}}
    for c in cameras:
        out[feature_key(c)] = {"dtype": "video", "shape": [int(c.height), int(c.width), 3],
                               "names": ["height", "width", "channels"]}
    return out


def check_video_cameras(cameras) -> None:
    """Recorded cameras are video features: PyAV must be installed and each side 32..16384 px."""
    from caliper_jax.dataset.video import MAX_SIDE, MIN_SIDE, have_pyav

    if not cameras:
        return
    for c in cameras:
        if not (MIN_SIDE <= c.width <= MAX_SIDE and MIN_SIDE <= c.height <= MAX_SIDE):
            raise CaliperError(f"camera {c.name!r} ({c.width}x{c.height}): recorded cameras are video "
                               f"features, and libsvtav1 (lerobot's codec) needs {MIN_SIDE}..{MAX_SIDE} px "
                               f"a side (e.g. {c.name}:{max(c.width, MIN_SIDE)}x{max(c.height, MIN_SIDE)})")
    if not have_pyav():
        raise CaliperError('recording cameras needs PyAV for the MP4 videos: pip install '
                           '"caliper-jax[video]"')


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


def check_out(out) -> Path:
    """``out`` as a Path, refused when it exists and is not an empty folder (demos go into a new
    dataset)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CaliperError(f"{out}: already exists and is not an empty folder (demos go into a new dataset)")
    return out


def record_demos(task, episodes: int, out, *, seed: int = 0, engine: str = "mujoco", num_envs: int = 4,
                 randomization="default", progress=None, policy=None, cameras=()) -> DemoResult:
    """Record ``episodes`` scripted demonstrations of ``task`` (a Task, file or zoo name) into a new
    LeRobot v3 dataset at ``out`` (which must not exist or be an empty folder). ``policy``: as
    :func:`run_episodes` (None: the scripted expert). ``cameras``: camera names (``"front"``,
    ``"wrist:64x64"``) or named PinholeCameras recorded as video features (module doc)."""
    from tasks.env import VecEnv

    out = check_out(out)
    kwargs = {} if randomization == "default" else {"randomization": randomization}
    with VecEnv(task, num_envs, engine=engine, seed=seed, cameras=cameras or None, **kwargs) as env:
        check_video_cameras(env.cameras)
        eps, expert = run_episodes(env, episodes, progress=progress, policy=policy)
        write_demos(env, eps, out, seed=seed)
    return DemoResult(out, len(eps), sum(ep.success for ep in eps), sum(len(ep.state) for ep in eps),
                      len(getattr(expert, "failed_plans", ())))


def write_demos(env, eps, out, *, seed: int) -> Path:
    """Write episodes ``eps`` (:func:`run_episodes` on ``env``, whose cameras they carry) as a new
    LeRobot v3 dataset at ``out``: the frames, the success/failure tags and the sidecar (the
    randomisation record; ``seed`` is the env's). Returns the dataset root."""
    from caliper_jax.dataset import LeRobotWriter, tag_episode
    from caliper_jax.dataset.atomic import write_atomic
    from tasks.cameras import camera_record, feature_key

    out = check_out(out)
    cams = tuple(getattr(env, "cameras", ()))
    check_video_cameras(cams)
    ts = env.task_scene
    text = task_text(ts.task)
    with LeRobotWriter(out, env.layout.fps, features(ts.model, env.layout.prop_names, cams),
                       robot_type=ts.model.name) as writer:
        for ep in eps:
            columns = {"observation.state": ep.state.astype(np.float32),
                       "action": ep.action.astype(np.float32),
                       "observation.environment_state": ep.env_state.astype(np.float32)}
            for c in cams:
                columns[feature_key(c)] = ep.images[c.name]
            writer.add_frames(columns)
            writer.save_episode(task=text)
    for i, ep in enumerate(eps):
        tag_episode(out, i, add=["success" if ep.success else "failure"])
    sidecar = {**run_record(env), "seed": int(seed), "engine": env.engine, "num_envs": int(env.num_envs),
               "episodes": [{"episode_index": i, "world": ep.world, "world_episode": ep.index,
                             "success": ep.success, "length": len(ep.state), "randomization": ep.draws}
                            for i, ep in enumerate(eps)]}
    if cams:
        sidecar["cameras"] = [{**camera_record(c, ts.scene.mj), "feature": feature_key(c)} for c in cams]
    write_atomic(out / DEMOS_PATH, (json.dumps(sidecar, indent=1, sort_keys=True) + "\n").encode())
    return out


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


__all__ = ["DEMOS_FORMAT", "DEMOS_PATH", "DemoResult", "Episode", "check_video_cameras", "env_features",
           "features", "record_demos", "run_episodes", "run_record", "task_text", "write_demos"]
