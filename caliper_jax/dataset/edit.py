"""Offline edit operations: delete, split, merge episodes; tag episodes.

Each structural edit streams the surviving episodes through ``LeRobotWriter`` into a sibling
temporary directory and swaps it in atomically (``atomic.swap_in``): survivors are renumbered
densely, tasks remapped, stats recomputed, tags carried along. A crash before the swap leaves the
original untouched; ``recover`` removes the leftover temporary directory.
"""

from __future__ import annotations

from pathlib import Path

from caliper_jax.dataset import format as fmt
from caliper_jax.dataset.atomic import edit_dir, recover, swap_in
from caliper_jax.dataset.reader import LeRobotReader
from caliper_jax.dataset.tags import read_tags, tags_bytes, validate_tags, write_tags
from caliper_jax.dataset.writer import LeRobotWriter
from caliper_jax.errors import CaliperError

# An output episode: list of (source episode, first frame, end frame) segments, and its tags.
Plan = list[tuple[list[tuple[int, int, int]], list[str]]]


def _open(root) -> LeRobotReader:
    root = Path(root)
    if root.exists():
        recover(root)
    reader = LeRobotReader(root)
    if fmt.video_keys(reader.features):
        raise CaliperError(
            f"{root}: editing datasets with video features is not supported (the MP4s would need re-muxing)"
        )
    return reader


def _rewrite(src: LeRobotReader, plan: Plan) -> dict:
    info = src.info
    user = {k: f for k, f in src.features.items() if k not in fmt.DEFAULT_FEATURES}
    tmp = edit_dir(src.root)
    with LeRobotWriter.like(tmp, info) as writer:
        for segments, _ in plan:
            tasks: list[str] = []
            for ep, lo, hi in segments:
                arrays = src.episode(ep, list(user) + ["task_index"], decode_images=False)
                writer.add_frames({k: arrays[k][lo:hi] for k in user})
                tasks += [src.tasks[int(t)] for t in arrays["task_index"][lo:hi]]
            writer.save_episode(task=tasks)
    tags = {i: t for i, (_, t) in enumerate(plan) if t}
    if tags:
        (tmp / fmt.TAGS_PATH).write_bytes(tags_bytes(tags))
    swap_in(src.root, tmp)
    return {"episodes": len(plan), "frames": sum(hi - lo for s, _ in plan for _, lo, hi in s)}


def _check_episode(src: LeRobotReader, ep: int) -> int:
    src.episode_meta(int(ep))
    return int(ep)


def delete_episodes(root, episodes) -> dict:
    """Delete ``episodes`` (indices); refuses to delete every episode."""
    src = _open(root)
    gone = {_check_episode(src, ep) for ep in episodes}
    if not gone:
        raise CaliperError("delete: name at least one episode")
    if len(gone) >= src.num_episodes:
        raise CaliperError(f"{src.root}: refusing to delete all {src.num_episodes} episodes")
    tags = src.tags
    plan = [([(ep, 0, m["length"])], tags.get(ep, [])) for ep, m in enumerate(src.episodes) if ep not in gone]
    return {"op": "delete", "deleted": sorted(gone), **_rewrite(src, plan)}


def split_episode(root, episode: int, frame: int) -> dict:
    """Split ``episode`` before local ``frame`` (0 < frame < length); both halves keep task and tags."""
    src = _open(root)
    episode = _check_episode(src, episode)
    length = src.episodes[episode]["length"]
    if not 0 < frame < length:
        raise CaliperError(f"split: frame must be in 1..{length - 1} for episode {episode}, got {frame}")
    tags = src.tags
    plan: Plan = []
    for ep, meta in enumerate(src.episodes):
        if ep == episode:
            plan += [([(ep, 0, frame)], tags.get(ep, [])), ([(ep, frame, length)], tags.get(ep, []))]
        else:
            plan.append(([(ep, 0, meta["length"])], tags.get(ep, [])))
    return {"op": "split", "episode": episode, "frame": frame, **_rewrite(src, plan)}


def merge_episodes(root, first: int, second: int) -> dict:
    """Merge adjacent episodes ``first`` and ``second == first + 1``; tasks and tags are unioned."""
    src = _open(root)
    first, second = _check_episode(src, first), _check_episode(src, second)
    if second != first + 1:
        raise CaliperError(f"merge: episodes must be adjacent (second = first + 1), got {first}, {second}")
    tags = src.tags
    plan: Plan = []
    for ep, meta in enumerate(src.episodes):
        if ep == second:
            continue
        segments = [(ep, 0, meta["length"])]
        ep_tags = tags.get(ep, [])
        if ep == first:
            segments.append((second, 0, src.episodes[second]["length"]))
            ep_tags = sorted(set(ep_tags) | set(tags.get(second, [])))
        plan.append((segments, ep_tags))
    return {"op": "merge", "first": first, "second": second, **_rewrite(src, plan)}


def tag_episode(root, episode: int | None = None, add=(), remove=(), clear: bool = False) -> dict:
    """Add/remove/clear tags of ``episode`` (None: just list); return {episode: tags} for all."""
    root = Path(root)
    src = LeRobotReader(root)
    tags = read_tags(root)
    if episode is None:
        if add or remove or clear:
            raise CaliperError("tag: --add/--remove/--clear need --episode")
        return tags
    episode = _check_episode(src, episode)
    current = set() if clear else set(tags.get(episode, []))
    current = (current | set(validate_tags(add))) - set(validate_tags(remove))
    tags[episode] = sorted(current)
    write_tags(root, tags)
    return read_tags(root)
