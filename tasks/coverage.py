"""Coverage generator: fill the joint-space holes the dataset doctor reports (D007) with new
planned demonstrations, written as a NEW LeRobot v3 dataset (the input is never touched).

The loop (:func:`generate_coverage`):

1. read the input dataset and find its robot (info.json ``robot_type`` or ``robot=``), map the
   ``observation.state`` names to the robot's joints;
2. histogram every state dof over its joint limits, ``bins`` equal bins (the doctor's
   ``histogram_bins``, binned by the doctor's own :func:`doctors.dataset.accumulate.bin_counts`);
3. per new episode: a start (the first state of a recorded episode, or the previous goal), a goal
   whose every dof lies in one of that dof's emptiest bins (ties drawn from a seeded NumPy
   Generator); a goal that cannot be reached (in collision, or its path is) is redrawn in a
   window widened around the bin, then freely within the limits. The motion is MOVE_J (the
   joint-space, jerk-limited S-curve of :mod:`caliper_jax.motion`) within the robot's velocity,
   acceleration and jerk limits, stretched to the length of a recorded episode picked at random
   (so the episode-length distribution is the input's), sampled at the dataset's fps. The
   histogram is updated after every episode, so consecutive episodes chase different holes;
4. write the input's episodes followed by the new ones into a sibling temporary directory with
   :class:`caliper_jax.dataset.LeRobotWriter` and rename it to ``out_root`` (atomic: a crash leaves
   no partial dataset at ``out_root``); re-run the dataset doctor on the result.

Features: ``observation.state`` = the planned joint positions q(k / fps) (float, in the
dataset's units: rad / m), ``action`` = the next frame's position target (the goal on the last
frame). Any other feature (cameras, prop states, ...) cannot be generated honestly from a
joint-space plan: the input is refused with a :class:`CaliperError` naming them.

Collision: when ``collision=True`` and the robot has collision pairs, every sampled frame of a
planned episode is checked for self-collision with the project's GJK check
(:func:`caliper_jax.collision.in_collision`); joints the dataset does not record sit at zero
(clipped into their limits). The guarantee is sampled at the dataset's fps, like the planner's.
The check costs one compile per process (seconds), then little per episode.

Deterministic: no wall clock; the same input, robot, seed and precision give a byte-identical
output dataset.
"""
from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from caliper_jax import limits as budgets
from caliper_jax import progress as progress_bar
from caliper_jax.dataset import format as fmt
from caliper_jax.dataset.reader import LeRobotReader
from caliper_jax.dataset.tags import read_tags, tags_bytes
from caliper_jax.dataset.writer import LeRobotWriter
from caliper_jax.errors import CaliperError
from doctors.dataset import DoctorOptions, diagnose
from doctors.dataset.accumulate import bin_counts, occupancy

STATE = "observation.state"
ACTION = "action"
#: Task text of every generated episode.
TASK = "coverage: move to a joint-space goal"
#: Tag of every generated episode (meta/caliper_tags.json).
TAG = "coverage"
#: Goal attempts per episode: half-widths (in bins) of the goal window around the chosen bin,
#: then ``None`` = a free draw within the limits.
WINDOWS = (0, 0, 1, 1, 2, 4, None, None, None, None)


@dataclass
class CoverageReport:
    """What :func:`generate_coverage` did. Occupancy = share of a dof's ``bins`` equal bins over
    its joint limits holding at least one ``observation.state`` frame; ``counts_*`` (ndof, bins)
    are the frames per bin; ``d007_*`` the doctor's D007 finding counts on input and output."""

    dataset: str
    output: str
    robot: str
    joints: list[str]
    bins: int
    lower: np.ndarray  # (ndof,) binning range, joint limits (data range for unlimited joints)
    upper: np.ndarray
    counts_before: np.ndarray  # (ndof, bins) int64
    counts_after: np.ndarray
    d007_before: int
    d007_after: int
    findings_before: dict[str, int]  # doctor finding counts per code
    findings_after: dict[str, int]
    episodes_input: int
    episodes_planned: int
    episodes_failed: int
    frames_added: int
    collision_checked: bool
    seed: int
    episodes: list[dict] = field(default_factory=list)  # per new episode: index, goal, frames, how
    dropped_features: list[str] = field(default_factory=list)  # input features a plan cannot fill

    @property
    def occupancy_before(self) -> np.ndarray:
        return occupancy(self.counts_before)

    @property
    def occupancy_after(self) -> np.ndarray:
        return occupancy(self.counts_after)

    @property
    def min_occupancy_before(self) -> float:
        return float(self.occupancy_before.min())

    @property
    def min_occupancy_after(self) -> float:
        return float(self.occupancy_after.min())

    def to_dict(self) -> dict:
        """Plain JSON types (what ``caliper data coverage --json`` prints)."""
        return {
            "dataset": self.dataset,
            "output": self.output,
            "robot": self.robot,
            "seed": self.seed,
            "joints": list(self.joints),
            "bins": self.bins,
            "lower": self.lower.tolist(),
            "upper": self.upper.tolist(),
            "occupancy_before": self.occupancy_before.tolist(),
            "occupancy_after": self.occupancy_after.tolist(),
            "min_occupancy_before": self.min_occupancy_before,
            "min_occupancy_after": self.min_occupancy_after,
            "d007_before": self.d007_before,
            "d007_after": self.d007_after,
            "findings_before": dict(self.findings_before),
            "findings_after": dict(self.findings_after),
            "counts_before": self.counts_before.tolist(),
            "counts_after": self.counts_after.tolist(),
            "episodes_input": self.episodes_input,
            "episodes_planned": self.episodes_planned,
            "episodes_failed": self.episodes_failed,
            "frames_added": self.frames_added,
            "collision_checked": self.collision_checked,
            "episodes": [dict(e) for e in self.episodes],
            "dropped_features": list(self.dropped_features),
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as a JSON string."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    def text(self) -> str:
        lines = [
            f"{self.output}: {self.episodes_input} input + {self.episodes_planned} new episodes "
            f"({self.frames_added} frames, {self.episodes_failed} failed) for {self.robot}",
            f"  min-bin occupancy {self.min_occupancy_before:.2f} -> {self.min_occupancy_after:.2f} "
            f"({self.bins} bins over the joint limits); D007 findings {self.d007_before} -> "
            f"{self.d007_after}",
        ]
        for j, name in enumerate(self.joints):
            lines.append(
                f"  {name}: {self.occupancy_before[j]:.2f} -> {self.occupancy_after[j]:.2f} "
                f"[{self.lower[j]:.4g}, {self.upper[j]:.4g}]"
            )
        if self.dropped_features:
            lines.append(f"  not carried into the output (a joint-space plan cannot fill them): "
                         f"{', '.join(self.dropped_features)}")
        return "\n".join(lines)

    def plot(self, path) -> Path:
        """PNG heat map (dof x bin, frames per bin as a share of the dof's frames, empty bins
        blank), before and after side by side. Needs matplotlib (imported here, Agg backend)."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise CaliperError('--plot needs matplotlib (pip install "caliper-jax[plot]")') from None
        path = Path(path)
        shares = [c / np.maximum(c.sum(axis=1, keepdims=True), 1) for c in (self.counts_before,
                                                                              self.counts_after)]
        top = max(float(max(s.max() for s in shares)), 1e-9)
        fig, axes = plt.subplots(1, 2, figsize=(11, 1.8 + 0.45 * len(self.joints)), sharey=True,
                                 layout="constrained")
        for ax, share, label, occ in (
            (axes[0], shares[0], "before", self.min_occupancy_before),
            (axes[1], shares[1], "after", self.min_occupancy_after),
        ):
            image = ax.imshow(np.ma.masked_equal(share, 0.0), aspect="auto", cmap="viridis",
                              vmin=0.0, vmax=top, interpolation="nearest")
            ax.set_title(f"{label}: min-bin occupancy {occ:.2f}")
            ax.set_xlabel(f"bin (of {self.bins}, lower -> upper limit)")
            ax.set_yticks(range(len(self.joints)), self.joints)
        fig.colorbar(image, ax=axes, label="share of the dof's frames")
        try:
            fig.savefig(path, dpi=100, metadata={"Software": None})
        except OSError as exc:
            raise CaliperError(f"{path}: cannot write the heat map: {exc}") from None
        finally:
            plt.close(fig)
        return path


def _names(feature: dict, key: str, where: Path) -> list[str] | None:
    names = feature.get("names")
    if isinstance(names, dict):  # lerobot sometimes nests them: {"motors": [...]}
        lists = [v for v in names.values() if isinstance(v, list)]
        names = lists[0] if len(lists) == 1 else None
    if names is None:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise CaliperError(f"{where}: feature {key!r} names must be a list of strings, got {names!r}")
    return names


def _check_features(reader: LeRobotReader) -> tuple[list[str] | None, bool, list[str]]:
    """(state names or None, has action, the features a joint-space plan cannot fill -- e.g. the
    props' ``observation.environment_state`` of a ``caliper task demo`` dataset, or camera images:
    the output dataset is written without them, input episodes included)."""
    where = reader.root / fmt.INFO_PATH
    user = {k: f for k, f in reader.features.items() if k not in fmt.DEFAULT_FEATURES}
    if STATE not in user or user[STATE]["dtype"] not in ("float32", "float64"):
        raise CaliperError(f"{where}: no float {STATE!r} feature; coverage plans joint positions")
    other = [k for k in user if k not in (STATE, ACTION)]
    if ACTION in user and user[ACTION]["dtype"] not in ("float32", "float64"):
        other.append(ACTION)
    state_names = _names(user[STATE], STATE, where)
    if ACTION in user and ACTION not in other:
        if user[ACTION]["shape"] != user[STATE]["shape"]:
            raise CaliperError(
                f"{where}: {ACTION!r} shape {user[ACTION]['shape']} differs from {STATE!r} "
                f"{user[STATE]['shape']}; coverage writes position targets of the state's joints"
            )
        action_names = _names(user[ACTION], ACTION, where)
        if action_names is not None and state_names is not None and action_names != state_names:
            raise CaliperError(f"{where}: {ACTION!r} names {action_names} differ from {STATE!r} names "
                               f"{state_names}; coverage writes position targets of the state's joints")
    return state_names, ACTION in user and ACTION not in other, other


def _load_robot(reader: LeRobotReader, robot):
    from caliper_jax.loading import load

    name = robot if robot is not None else reader.info.get("robot_type")
    if not name:
        raise CaliperError(f"{reader.root / fmt.INFO_PATH}: no robot_type; pass robot= (a registry name "
                           "or URDF path)")
    try:
        model = load(str(name))
    except CaliperError as exc:
        if robot is not None:
            raise
        raise CaliperError(f"{reader.root / fmt.INFO_PATH}: robot_type {name!r}: {exc} (pass robot=, "
                           "or --robot on the command line)") from None
    return str(name), model


def _joint_columns(model, state_names: list[str] | None, dim: int, where: Path) -> np.ndarray:
    """q index of every state dof (dim,)."""
    joints = list(model.joint_names)
    if state_names is None:
        if dim != model.nq:
            raise CaliperError(f"{where}: {STATE!r} has no names and {dim} values; robot {model.name!r} has "
                               f"{model.nq} joints {joints}: name the state's joints in info.json")
        return np.arange(dim)
    if len(state_names) != dim:
        raise CaliperError(f"{where}: {STATE!r} has {dim} values but {len(state_names)} names")
    unknown = [n for n in state_names if n not in joints]
    if unknown:
        raise CaliperError(f"{where}: {STATE!r} names {unknown} are not joints of robot {model.name!r} "
                           f"(its joints: {joints}); pass the robot the dataset was recorded with")
    if len(set(state_names)) != len(state_names):
        raise CaliperError(f"{where}: {STATE!r} names repeat a joint: {state_names}")
    return np.array([joints.index(n) for n in state_names])


class _Planner:
    """MOVE_J episodes between joint-space configurations of the state's dofs."""

    def __init__(self, model, cols: np.ndarray, lo: np.ndarray, hi: np.ndarray, fps: int, collision: bool):
        from caliper_jax.motion import MotionLimits

        full = MotionLimits.from_model(model)
        self.limits = MotionLimits.from_arrays(lo, hi, full.vmax[cols], full.amax[cols], full.jmax[cols])
        self.model, self.cols, self.fps = model, cols, fps
        self.lo, self.hi = lo, hi
        q0 = np.zeros(model.nq)
        self.q_rest = np.clip(q0, np.asarray(model.qpos_lower, float), np.asarray(model.qpos_upper, float))
        self.cm = None
        if collision:
            from caliper_jax.collision import build_collision_model

            cm = build_collision_model(model)
            self.cm = cm if cm.npair else None

    @property
    def checks_collision(self) -> bool:
        return self.cm is not None

    def free(self, q: np.ndarray) -> np.ndarray:
        """(n,) bool: configurations (n, ndof) of the state dofs clear of collision."""
        if self.cm is None:
            return np.ones(len(q), dtype=bool)
        from caliper_jax.collision import in_collision

        full = np.broadcast_to(self.q_rest, (len(q), self.model.nq)).copy()
        full[:, self.cols] = q
        return ~np.asarray(in_collision(self.model, self.cm, full))

    def episode(self, start: np.ndarray, goal: np.ndarray, frames: int) -> np.ndarray:
        """States (n, ndof) every 1/fps s of MOVE_J start -> goal lasting at least ``frames``
        frames (longer when the limits need it); the last frame is at rest at the goal."""
        from caliper_jax.motion import move_j, sample_at

        traj = move_j(start, goal, self.limits, duration=(frames - 1) / self.fps)
        duration = float(traj.duration)
        n = int(math.ceil(duration * self.fps - 1e-9)) + 1
        q = sample_at(traj, np.arange(n) / self.fps).q
        return np.clip(q, self.lo, self.hi)


def _bounds(model, cols: np.ndarray, data_lo: np.ndarray, data_hi: np.ndarray):
    lo = np.asarray(model.qpos_lower, dtype=np.float64)[cols]
    hi = np.asarray(model.qpos_upper, dtype=np.float64)[cols]
    lo = np.where(np.isfinite(lo), lo, np.minimum(-np.pi, data_lo))
    hi = np.where(np.isfinite(hi), hi, np.maximum(np.pi, data_hi))
    return lo, hi


def _draw_goal(rng: np.random.Generator, score: np.ndarray, lo, hi, window: int | None):
    """One goal (ndof,) and its target bins (ndof,): per dof uniform within ``window`` bins around
    a bin of least ``score`` (ndof, bins) (ties drawn at random), or anywhere within the limits
    (target bins -1) when ``window`` is None."""
    ndof, bins = score.shape
    if window is None:
        return rng.uniform(lo, hi), np.full(ndof, -1)
    width = (hi - lo) / bins
    goal, target = np.empty(ndof), np.empty(ndof, dtype=np.int64)
    for j in range(ndof):
        emptiest = np.flatnonzero(score[j] == score[j].min())
        b = target[j] = int(emptiest[rng.integers(len(emptiest))])
        a, z = max(b - window, 0), min(b + window + 1, bins)
        goal[j] = rng.uniform(lo[j] + a * width[j], lo[j] + z * width[j])
    return np.clip(goal, lo, hi), target


def _out_path(dataset_root: Path, out_root) -> Path:
    out = Path(out_root)
    if out.resolve() == dataset_root.resolve() or dataset_root.resolve() in out.resolve().parents:
        raise CaliperError(f"{out}: the output must not be the input dataset or inside it "
                           "(coverage never edits its input)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CaliperError(f"{out}: exists and is not an empty directory (choose a new output path)")
    return out


def generate_coverage(
    dataset_root,
    out_root,
    *,
    robot=None,
    episodes: int = 40,
    seed: int = 0,
    progress: bool | None = None,
    collision: bool = True,
    options: DoctorOptions | None = None,
) -> CoverageReport:
    """Plan ``episodes`` new demonstrations into the emptiest joint-limit bins of the dataset at
    ``dataset_root`` and write input + new episodes as a new dataset at ``out_root``.

    ``robot``: registry name or URDF/MJCF path (default: info.json ``robot_type``); ``seed``: the
    NumPy Generator behind every draw; ``collision``: check every frame for self-collision when the
    robot has collision geometry; ``options``: the doctor's (``histogram_bins`` sets the bins).
    Returns a :class:`CoverageReport`. Raises :class:`CaliperError` on input it cannot use.
    """
    opts = options or DoctorOptions()
    if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
        raise CaliperError(f"episodes must be a whole number >= 1, got {episodes!r}")
    root = Path(dataset_root)
    reader = LeRobotReader(root)
    where = root / fmt.INFO_PATH
    out = _out_path(root, out_root)
    if reader.num_episodes == 0:
        raise CaliperError(f"{root}: has no episodes (coverage starts from recorded episodes)")
    state_names, has_action, dropped = _check_features(reader)
    dim = int(reader.features[STATE]["shape"][0])
    lengths = np.array([int(r["length"]) for r in reader.episodes])
    budgets.check("steps", int(episodes) * int(lengths.max()), "episodes x episode length (frames)")
    robot_name, model = _load_robot(reader, robot)
    cols = _joint_columns(model, state_names, dim, where)
    if model.nq != model.nv:
        raise CaliperError(f"robot {model.name!r}: coverage plans one coordinate per joint; free or ball "
                           "joints are not supported")

    state_dtype = np.dtype(reader.features[STATE]["dtype"])
    states = [np.asarray(reader.episode(ep, [STATE])[STATE], dtype=np.float64).reshape(-1, dim)
              for ep in range(reader.num_episodes)]
    every = np.concatenate(states)
    if not np.isfinite(every).all():
        raise CaliperError(f"{root}: {STATE!r} holds NaN/inf (run `caliper data doctor`: D016)")
    lo, hi = _bounds(model, cols, every.min(axis=0), every.max(axis=0))
    bins = int(opts.histogram_bins)
    counts_before = bin_counts(every, lo, hi, bins)
    starts = np.array([s[0] for s in states])

    before = diagnose(root, opts, progress=progress)
    planner = _Planner(model, cols, lo, hi, reader.fps, collision)
    rng = np.random.default_rng(seed)
    counts = counts_before.copy()
    # failed attempts per target bin: a bin that keeps failing (e.g. every goal in it collides)
    # stops being "emptiest" for the goal choice once other holes have caught up
    failures = np.zeros_like(counts)
    planned: list[np.ndarray] = []
    log: list[dict] = []
    failed = 0
    previous = None
    bar = progress_bar.bar(episodes, "coverage", unit="ep", enabled=progress)
    for _ in range(episodes):
        use_previous = previous is not None and rng.random() < 0.5
        start = previous if use_previous else np.clip(starts[rng.integers(len(starts))], lo, hi)
        frames = int(lengths[rng.integers(len(lengths))])
        q, attempts = None, 0
        for window in WINDOWS:
            attempts += 1
            goal, target = _draw_goal(rng, counts + failures, lo, hi, window)
            if planner.free(goal[None])[0]:
                path = planner.episode(start, goal, frames).astype(state_dtype)
                if planner.free(path.astype(np.float64)).all():
                    q = path
                    break
            if window is not None:
                failures[np.arange(len(target)), target] += 1
        bar.update()
        if q is None:
            failed += 1
            continue
        counts += bin_counts(q.astype(np.float64), lo, hi, bins)
        previous = q[-1].astype(np.float64)
        planned.append(q)
        log.append({"goal": previous.tolist(), "frames": len(q),
                    "start": "previous goal" if use_previous else "recorded start",
                    "goal_window": "free" if window is None else int(window), "attempts": attempts})
    bar.close()

    _write(reader, out, planned, has_action, dropped)
    for i, entry in enumerate(log):
        entry["episode"] = reader.num_episodes + i
    after = diagnose(out, opts, progress=progress)
    return CoverageReport(
        dataset=str(root),
        output=str(out),
        robot=robot_name,
        joints=[model.joint_names[c] for c in cols],
        bins=bins,
        lower=lo,
        upper=hi,
        counts_before=counts_before,
        counts_after=counts,
        d007_before=sum(f.code == "D007" for f in before.findings),
        d007_after=sum(f.code == "D007" for f in after.findings),
        findings_before=_by_code(before.findings),
        findings_after=_by_code(after.findings),
        episodes_input=reader.num_episodes,
        episodes_planned=len(planned),
        episodes_failed=failed,
        frames_added=int(sum(len(q) for q in planned)),
        collision_checked=planner.checks_collision,
        seed=int(seed),
        episodes=[{"episode": e.pop("episode"), **e} for e in log],
        dropped_features=list(dropped),
    )


def _by_code(findings) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in findings:
        out[f.code] = out.get(f.code, 0) + 1
    return dict(sorted(out.items()))


def _write(reader: LeRobotReader, out: Path, planned: list[np.ndarray], has_action: bool,
           dropped=()) -> None:
    """Input episodes then ``planned`` (each (n, ndof) states) into a sibling temporary directory,
    renamed to ``out`` once complete; features in ``dropped`` are left out of the whole output."""
    info = {**reader.info, "features": {k: f for k, f in reader.features.items() if k not in dropped}}
    user = {k: f for k, f in info["features"].items() if k not in fmt.DEFAULT_FEATURES}
    tmp = out.with_name("." + out.name + ".coverage-tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        with LeRobotWriter.like(tmp, info) as writer:
            for ep in range(reader.num_episodes):
                arrays = reader.episode(ep, list(user) + ["task_index"], decode_images=False)
                writer.add_frames({k: arrays[k] for k in user})
                writer.save_episode(task=[reader.tasks[int(t)] for t in arrays["task_index"]])
            for q in planned:
                columns = {STATE: q}
                if has_action:
                    columns[ACTION] = np.concatenate([q[1:], q[-1:]]).astype(user[ACTION]["dtype"])
                writer.add_frames(columns)
                writer.save_episode(task=TASK)
        tags = read_tags(reader.root)
        tags.update({reader.num_episodes + i: [TAG] for i in range(len(planned))})
        if tags:
            (tmp / fmt.TAGS_PATH).write_bytes(tags_bytes(tags))
        if out.exists():
            out.rmdir()  # checked empty above
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
