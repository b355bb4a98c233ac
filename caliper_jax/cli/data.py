"""``caliper data info|doctor|delete|split|merge|tag|recover|coverage DATASET [--json]``."""

from __future__ import annotations

import argparse

from caliper_jax.cli import runtime
from caliper_jax.cli.common import budget, emit, output_dir, output_file, seed
from caliper_jax.dataset import atomic, edit
from caliper_jax.dataset.reader import LeRobotReader
from caliper_jax.errors import CaliperError


def register(subparsers) -> None:
    data = subparsers.add_parser("data", help="LeRobotDataset v3.0: inspect, diagnose, edit")
    sub = data.add_subparsers(dest="data_command", metavar="ACTION")
    sub.required = True

    def add(name: str, handler, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("dataset", help="dataset root (the folder holding meta/ and data/)")
        p.add_argument("--json", action="store_true", help="print the report as JSON")
        p.set_defaults(func=handler)
        return p

    add("info", info, "episodes, frames, features, tasks")
    p = add("doctor", doctor, "run the dataset doctor (D001-D021)")
    p.add_argument("--markdown", action="store_true", help="print a Markdown section for a dataset card")
    p.add_argument("--window", type=int, default=None, help="policy window in frames (enables D020)")
    p.add_argument("--seed", type=int, default=0, help="seed of the subsampling")
    p.add_argument("--progress", action="store_true", default=None, help="show a progress bar even off a TTY")
    p.set_defaults(uses_jax=True)          # plans with JAX: gets the persistent compilation cache
    p = add("delete", delete, "delete episodes (renumbers the rest)")
    p.add_argument("--episodes", required=True, help="comma-separated episode indices")
    p = add("split", split, "split an episode at a local frame")
    p.add_argument("--episode", type=int, required=True)
    p.add_argument("--frame", type=int, required=True)
    p = add("merge", merge, "merge two adjacent episodes")
    p.add_argument("--first", type=int, required=True)
    p.add_argument("--second", type=int, required=True)
    p = add("tag", tag, "list or change episode tags (meta/caliper_tags.json)")
    p.add_argument("--episode", type=int, default=None)
    p.add_argument("--add", default="", help="comma-separated tags to add")
    p.add_argument("--remove", default="", help="comma-separated tags to remove")
    p.add_argument("--clear", action="store_true")
    add("recover", recover, "finish or discard a write interrupted by a crash")
    p = add("coverage", coverage, "plan new episodes into the emptiest joint bins (D007) as a new dataset")
    p.add_argument("--out", required=True, help="root of the new dataset (must not exist, or be empty)")
    p.add_argument("--robot", default=None,
                   help="registry name or URDF/MJCF path (default: info.json robot_type)")
    p.add_argument("--episodes", type=int, default=40, help="new episodes to plan (default 40)")
    p.add_argument("--seed", type=int, default=0, help="seed of the goal draws")
    p.add_argument("--plot", default=None, metavar="PNG", help="write a before/after occupancy heat map")
    p.add_argument("--no-collision", action="store_true",
                   help="skip the self-collision check of the planned frames")
    p.add_argument("--progress", action="store_true", default=None, help="show a progress bar even off a TTY")


def _emit(args, report: dict, text: str) -> int:

    emit(args, report, text)
    return 0


def _split_list(text: str) -> list[str]:
    return [t for t in (s.strip() for s in text.split(",")) if t]


def info(args) -> int:
    r = LeRobotReader(args.dataset)
    report = {
        "dataset": str(r.root),
        "codebase_version": r.info["codebase_version"],
        "fps": r.fps,
        "robot_type": r.info.get("robot_type"),
        "episodes": r.num_episodes,
        "frames": r.num_frames,
        "tasks": r.tasks,
        "features": r.features,
        "tags": {str(k): v for k, v in r.tags.items()},
    }
    lines = [
        f"{r.root}: LeRobotDataset {r.info['codebase_version']}, {r.num_episodes} episodes, "
        f"{r.num_frames} frames @ {r.fps} fps"
    ]
    for key, f in r.features.items():
        lines.append(f"  {key}: {f['dtype']} {f['shape']}")
    lines.append("  tasks: " + "; ".join(f"{i}={t!r}" for i, t in enumerate(r.tasks)))
    return _emit(args, report, "\n".join(lines))


def doctor(args) -> int:
    from doctors.dataset import DoctorOptions, diagnose

    seed(args.seed)
    if args.window is not None and args.window < 1:
        raise CaliperError(f"--window must be >= 1 frame, got {args.window}")
    report = diagnose(
        args.dataset, DoctorOptions(seed=args.seed, policy_window=args.window), progress=args.progress
    )
    text = report.markdown() if args.markdown else report.text()
    return _emit(args, report.to_dict(), text)


def _edit_text(result: dict) -> str:
    return f"{result['op']}: now {result['episodes']} episodes, {result['frames']} frames"


def _episode_list(text: str) -> list[int]:
    """--episodes '0,3' -> [0, 3], with a one-line error naming the flag."""
    out = []
    for item in _split_list(text):
        try:
            out.append(int(item))
        except ValueError:
            raise CaliperError(f"--episodes: expected comma-separated indices, got {item!r}") from None
        if out[-1] < 0:
            raise CaliperError(f"--episodes: episode indices are >= 0, got {out[-1]}")
    if not out:
        raise CaliperError("--episodes: no episode index given")
    return out


def delete(args) -> int:
    result = edit.delete_episodes(args.dataset, _episode_list(args.episodes))
    return _emit(args, result, _edit_text(result))


def split(args) -> int:
    result = edit.split_episode(args.dataset, args.episode, args.frame)
    return _emit(args, result, _edit_text(result))


def merge(args) -> int:
    result = edit.merge_episodes(args.dataset, args.first, args.second)
    return _emit(args, result, _edit_text(result))


def tag(args) -> int:
    tags = edit.tag_episode(
        args.dataset, args.episode, _split_list(args.add), _split_list(args.remove), args.clear
    )
    text = "\n".join(f"episode {ep}: {', '.join(t)}" for ep, t in sorted(tags.items())) or "no tags"
    return _emit(args, {"tags": {str(k): v for k, v in tags.items()}}, text)


def recover(args) -> int:
    done = atomic.recover(args.dataset)
    return _emit(args, done, ", ".join(f"{k}={v}" for k, v in done.items()))


def coverage(args) -> int:
    from tasks.coverage import generate_coverage

    seed(args.seed)
    if args.episodes < 1:
        raise CaliperError(f"--episodes must be >= 1, got {args.episodes}")
    budget(args.episodes, "--episodes", "batch")
    output_dir(args.out, "--out")                # both outputs writable before any planning
    if args.plot:
        output_file(args.plot, "--plot")
    # a failure after the dataset is written (the plot) leaves neither behind
    with runtime.partial_output(args.out):
        report = generate_coverage(args.dataset, args.out, robot=args.robot, episodes=args.episodes,
                                   seed=args.seed, progress=args.progress, collision=not args.no_collision)
        result = report.to_dict()
        text = report.text()
        if args.plot:
            with runtime.partial_output(args.plot):
                result["plot"] = str(report.plot(args.plot))
            text += f"\n  heat map: {result['plot']}"
    return _emit(args, result, text)
