"""D019: the metadata must agree with the files (what lerobot's loader silently relies on)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from caliper_jax.dataset import format as fmt
from caliper_jax.dataset.reader import LeRobotReader
from caliper_jax.dataset.tables import data_files
from doctors.dataset.findings import Finding
from doctors.dataset.rules import finding


def check_dataset(reader: LeRobotReader) -> list[Finding]:
    """Totals, episode coverage and contiguity, data columns, referenced video files."""
    out: list[Finding] = []
    info, eps = reader.info, reader.episodes
    indices = [r["episode_index"] for r in eps]
    if indices != list(range(len(eps))):
        out.append(
            finding("D019", f"meta/episodes covers episode indices {_span(indices)}, not 0..{len(eps) - 1}")
        )
    if info["total_episodes"] != len(eps):
        out.append(
            finding(
                "D019",
                f"info.json total_episodes is {info['total_episodes']} but meta/episodes lists {len(eps)}",
            )
        )
    lengths = sum(r["length"] for r in eps)
    rows = 0
    for path in data_files(reader.root):
        try:
            meta = pq.read_metadata(path)
        except (OSError, pa.ArrowException) as exc:
            out.append(finding("D019", f"{path.relative_to(reader.root)}: unreadable parquet ({exc})"))
            continue
        rows += meta.num_rows
        names = meta.schema.to_arrow_schema().names
        declared = [k for k, f in reader.features.items() if f["dtype"] != "video"]
        missing = [k for k in declared if k not in names]
        extra = [k for k in names if k not in declared]
        if missing or extra:
            out.append(
                finding(
                    "D019",
                    f"{path.relative_to(reader.root)}: columns missing {missing} / "
                    f"undeclared {extra} vs info.json features",
                )
            )
    if not info["total_frames"] == lengths == rows:
        out.append(
            finding(
                "D019",
                f"info.json total_frames {info['total_frames']}, episode lengths sum to "
                f"{lengths}, data files hold {rows} rows",
            )
        )
    if info.get("total_tasks", len(reader.tasks)) != len(reader.tasks):
        out.append(
            finding(
                "D019",
                f"info.json total_tasks is {info['total_tasks']} but tasks.parquet holds {len(reader.tasks)}",
            )
        )
    previous = 0
    for r in eps:
        ep = r["episode_index"]
        if (
            r["dataset_from_index"] != previous
            or r["dataset_to_index"] - r["dataset_from_index"] != r["length"]
        ):
            out.append(
                finding(
                    "D019",
                    f"episode {ep}: rows [{r['dataset_from_index']}, {r['dataset_to_index']}) "
                    f"do not continue at {previous} with length {r['length']}",
                    episode=ep,
                )
            )
        previous = r["dataset_to_index"]
        for key in fmt.video_keys(reader.features):
            path = reader.video_path(ep, key)
            if not path.exists():
                out.append(
                    finding(
                        "D019",
                        f"episode {ep}: video {path.relative_to(reader.root)} is missing",
                        episode=ep,
                        feature=key,
                    )
                )
    return out


def check_episode(reader: LeRobotReader, ep: int, arrays: dict) -> list[Finding]:
    """Per-episode index columns: index, frame_index, episode_index, task_index."""
    meta = reader.episodes[ep]
    n = meta["length"]
    expected = {
        "index": np.arange(meta["dataset_from_index"], meta["dataset_from_index"] + n),
        "frame_index": np.arange(n),
        "episode_index": np.full(n, meta["episode_index"]),
    }
    out = []
    for key, want in expected.items():
        got = arrays[key]
        if not np.array_equal(got, want):
            bad = int(np.flatnonzero(got != want)[0]) if len(got) == n else 0
            out.append(
                finding(
                    "D019",
                    f"episode {ep}: column {key!r} is not {_describe(key)} (frame {bad})",
                    episode=ep,
                    frame=bad,
                    feature=key,
                )
            )
    tasks = arrays["task_index"]
    if len(tasks) and (tasks.min() < 0 or tasks.max() >= len(reader.tasks)):
        out.append(
            finding(
                "D019",
                f"episode {ep}: task_index outside 0..{len(reader.tasks) - 1}",
                episode=ep,
                feature="task_index",
            )
        )
    return out


def _describe(key: str) -> str:
    return {
        "index": "the global row position",
        "frame_index": "0..length-1",
        "episode_index": "the episode's index",
    }[key]


def _span(indices: list[int]) -> str:
    return f"{min(indices)}..{max(indices)} ({len(indices)} rows)" if indices else "nothing"
