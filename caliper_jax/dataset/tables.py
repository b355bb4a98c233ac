"""Readers and builders for the small metadata tables: meta/tasks.parquet and meta/episodes/*."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from caliper_jax.dataset import format as fmt
from caliper_jax.errors import CaliperError


def tasks_table(tasks: list[str]) -> pa.Table:
    return pa.table(
        {
            "task_index": pa.array(range(len(tasks)), pa.int64()),
            "__index_level_0__": pa.array(tasks, pa.string()),
        },
        schema=fmt.tasks_schema(),
    )


def read_tasks(root: Path) -> list[str]:
    """Task strings ordered by task_index (the string is the pandas index of tasks.parquet)."""
    path = Path(root) / fmt.TASKS_PATH
    try:
        table = pq.ParquetFile(path).read()
    except FileNotFoundError:
        raise CaliperError(f"{path}: missing (tasks)") from None
    except (OSError, pa.ArrowException) as exc:
        raise CaliperError(f"{path}: unreadable parquet: {exc}") from None
    meta = json.loads((table.schema.metadata or {}).get(b"pandas", b"{}"))
    names = [c for c in meta.get("index_columns", []) if isinstance(c, str)] + ["task", "__index_level_0__"]
    column = next((c for c in names if c in table.column_names), None)
    if column is None or "task_index" not in table.column_names:
        raise CaliperError(f"{path}: needs a task_index column and the task strings as index")
    pairs = sorted(zip(table.column("task_index").to_pylist(), table.column(column).to_pylist(), strict=True))
    if [i for i, _ in pairs] != list(range(len(pairs))):
        raise CaliperError(f"{path}: task_index is not 0..{len(pairs) - 1}")
    return [t for _, t in pairs]


def episode_files(root: Path) -> list[Path]:
    """meta/episodes parquet files in the order lerobot reads them (sorted glob)."""
    return sorted((Path(root) / fmt.EPISODES_DIR).glob("*/*.parquet"))


def data_files(root: Path) -> list[Path]:
    return sorted((Path(root) / "data").glob("*/*.parquet"))


def _read(path: Path, columns=None) -> pa.Table:
    try:
        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
        return pf.read(columns=None if columns is None else [c for c in names if columns(c)])
    except (OSError, pa.ArrowException) as exc:
        raise CaliperError(f"{path}: unreadable parquet: {exc}") from None


def read_episodes(root: Path, with_stats: bool = False) -> list[dict]:
    """All episodes-metadata rows (dicts), stats columns only when asked."""
    rows: list[dict] = []
    keep = None if with_stats else (lambda c: not c.startswith("stats/"))
    for path in episode_files(root):
        rows.extend(_read(path, keep).to_pylist())
    return rows


def last_episode_row(root: Path) -> dict:
    files = episode_files(root)
    if not files:
        raise CaliperError(f"{Path(root) / fmt.EPISODES_DIR}: no episodes metadata")
    table = _read(files[-1], lambda c: not c.startswith("stats/"))
    if table.num_rows == 0:
        raise CaliperError(f"{files[-1]}: empty episodes file")
    return table.slice(table.num_rows - 1).to_pylist()[0]
