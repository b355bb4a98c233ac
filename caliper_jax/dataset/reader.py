"""Read a LeRobotDataset v3.0 as NumPy: episodes, frames, metadata, tasks, stats, tags.

Only the episodes metadata (without its stats columns) is held in memory; frame data is read per
episode from the row groups that hold it, so ``iter_episodes`` keeps one episode resident.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from caliper_jax.dataset import format as fmt
from caliper_jax.dataset import video
from caliper_jax.dataset.atomic import TXN_NAME, pending_commit
from caliper_jax.dataset.png import decode_png
from caliper_jax.dataset.stats import from_jsonable
from caliper_jax.dataset.tables import read_episodes, read_tasks
from caliper_jax.dataset.tags import read_tags
from caliper_jax.errors import CaliperError
from caliper_jax.limits import inside


def column_to_numpy(column: pa.ChunkedArray | pa.Array, decode_images: bool = True) -> np.ndarray:
    """One parquet column as NumPy: scalars (n,), vectors (n, d), images (n, H, W, 3) or PNG bytes."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_struct(arr.type):
        data = arr.field("bytes").to_pylist()
        if not decode_images:
            return np.array(data + [None], dtype=object)[:-1]
        return np.stack([decode_png(b) for b in data]) if data else np.zeros((0, 0, 0, 3), np.uint8)
    if (
        pa.types.is_fixed_size_list(arr.type)
        or pa.types.is_list(arr.type)
        or pa.types.is_large_list(arr.type)
    ):
        flat = arr.flatten().to_numpy(zero_copy_only=False)
        return flat.reshape(len(arr), -1) if len(arr) else flat.reshape(0, 0)
    return arr.to_numpy(zero_copy_only=False)


class _DataFile:
    """An open data parquet file with the global ``index`` range of each row group (from its statistics)."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.file = pq.ParquetFile(path)
        except (OSError, pa.ArrowException) as exc:
            raise CaliperError(f"{path}: unreadable parquet: {exc}") from None
        self.names = self.file.schema_arrow.names
        if "index" not in self.names:
            raise CaliperError(f"{path}: no 'index' column")
        schema, meta = self.file.schema, self.file.metadata
        pos = [schema.column(i).path for i in range(len(schema))].index("index")
        bounds = []
        for g in range(meta.num_row_groups):
            st = meta.row_group(g).column(pos).statistics
            bounds.append((st.min, st.max) if st is not None and st.has_min_max else (-np.inf, np.inf))
        self.first = np.array([b[0] for b in bounds], dtype=float)
        self.last = np.array([b[1] for b in bounds], dtype=float)


class LeRobotReader:
    """A read-only view of the dataset at ``root``."""

    def __init__(self, root):
        self.root = Path(root)
        if not self.root.is_dir():
            what = "not a directory" if self.root.exists() else "no such directory"
            raise CaliperError(f"{self.root}: {what} (a dataset root holds meta/ and data/)")
        if pending_commit(self.root):
            raise CaliperError(
                f"{self.root / TXN_NAME}: an interrupted write; run `caliper data recover "
                f"{self.root}` (or reopen it with LeRobotWriter) first"
            )
        self.info = fmt.load_info(self.root)
        self.features: dict = self.info["features"]
        self.fps = int(self.info["fps"])
        self.tasks: list[str] = read_tasks(self.root) if self.info["total_episodes"] else []
        self.episodes: list[dict] = read_episodes(self.root) if self.info["total_episodes"] else []
        if self.info["total_episodes"] and not self.episodes:
            raise CaliperError(
                f"{self.root / fmt.EPISODES_DIR}: missing or empty episodes metadata (info.json declares "
                f"{self.info['total_episodes']} episode(s)); the dataset cannot be read without it"
            )
        self.episodes.sort(key=lambda r: r["episode_index"])
        self._starts = [r["dataset_from_index"] for r in self.episodes]
        self._file: _DataFile | None = None
        self._cached: tuple[int, dict] | None = None

    # -- metadata --------------------------------------------------------------------------
    @property
    def num_episodes(self) -> int:
        return len(self.episodes)

    @property
    def num_frames(self) -> int:
        return sum(r["length"] for r in self.episodes)

    @property
    def stats(self) -> dict | None:
        """meta/stats.json as {feature: {stat: ndarray}}, or None when the file is missing."""
        path = self.root / fmt.STATS_PATH
        return from_jsonable(fmt.read_json(path, "stats")) if path.exists() else None

    @property
    def tags(self) -> dict[int, list[str]]:
        return read_tags(self.root)

    def data_keys(self) -> list[str]:
        """Features stored as parquet columns (everything but video)."""
        return [k for k, f in self.features.items() if f["dtype"] != "video"]

    def episode_meta(self, ep: int) -> dict:
        if not 0 <= ep < len(self.episodes):
            raise CaliperError(f"{self.root}: episode {ep} out of range 0..{len(self.episodes) - 1}")
        return self.episodes[ep]

    # -- data ------------------------------------------------------------------------------
    def _parquet(self, path: Path) -> _DataFile:
        if self._file is None or self._file.path != path:
            self._file = _DataFile(path)
        return self._file

    def read_table(self, ep: int, keys: list[str] | None = None) -> pa.Table:
        """The episode's rows as an Arrow table (columns ``keys``, default all stored columns)."""
        meta = self.episode_meta(ep)
        path = inside(self.root, fmt.chunk_file_path(
            self.info.get("data_path") or fmt.DATA_PATH, meta["data/chunk_index"], meta["data/file_index"]
        ), f"{self.root / fmt.INFO_PATH}: data_path")
        data = self._parquet(path)
        lo, hi = meta["dataset_from_index"], meta["dataset_to_index"]
        pf, names = data.file, data.names
        groups = np.flatnonzero((data.first < hi) & (data.last >= lo)).tolist()
        wanted = list(dict.fromkeys((keys if keys is not None else names) + ["index"]))
        missing = [k for k in wanted if k not in names]
        if missing:
            raise CaliperError(f"{path}: lacks columns {missing}")
        try:
            table = pf.read_row_groups(groups, columns=wanted)
        except (OSError, pa.ArrowException) as exc:
            raise CaliperError(f"{path}: unreadable row groups: {exc}") from None
        index = table.column("index").to_numpy()
        rows = np.flatnonzero((index >= lo) & (index < hi))
        if len(rows) != hi - lo:
            raise CaliperError(f"{path}: episode {ep} has {len(rows)} rows, metadata says {hi - lo}")
        if len(rows) and rows[-1] - rows[0] + 1 == len(rows):
            table = table.slice(int(rows[0]), len(rows))
        else:
            table = table.take(pa.array(rows))
        return table if keys is None or "index" in keys else table.drop_columns(["index"])

    def episode(self, ep: int, keys: list[str] | None = None, decode_images: bool = True) -> dict:
        """Episode ``ep`` as {feature: ndarray}; video features only when named in ``keys``."""
        keys = self.data_keys() if keys is None else list(keys)
        vids = [k for k in keys if self.features.get(k, {}).get("dtype") == "video"]
        table = self.read_table(ep, [k for k in keys if k not in vids])
        out = {k: column_to_numpy(table.column(k), decode_images) for k in table.column_names}
        for key in vids:
            out[key] = self.video_frames(ep, key)
        return out

    def iter_episodes(
        self, keys: list[str] | None = None, decode_images: bool = True
    ) -> Iterator[tuple[dict, dict]]:
        """Yield (episode metadata, episode arrays) one episode at a time."""
        for ep in range(self.num_episodes):
            yield self.episodes[ep], self.episode(ep, keys, decode_images)

    def frame(self, index: int) -> dict:
        """Global frame ``index`` as {feature: value} (the episode stays cached for neighbours)."""
        if not 0 <= index < self.num_frames:
            raise CaliperError(f"{self.root}: frame {index} out of range 0..{self.num_frames - 1}")
        ep = bisect.bisect_right(self._starts, index) - 1
        if self._cached is None or self._cached[0] != ep:
            self._cached = (ep, self.episode(ep))
        local = index - self._starts[ep]
        return {k: v[local] for k, v in self._cached[1].items()}

    def video_path(self, ep: int, key: str) -> Path:
        meta = self.episode_meta(ep)
        template = self.info.get("video_path") or fmt.VIDEO_PATH
        return inside(self.root, fmt.chunk_file_path(
            template, meta[f"videos/{key}/chunk_index"], meta[f"videos/{key}/file_index"], video_key=key
        ), f"{self.root / fmt.INFO_PATH}: video_path")

    def video_frames(self, ep: int, key: str) -> np.ndarray:
        """Decoded frames of video feature ``key`` for episode ``ep`` (needs PyAV)."""
        meta = self.episode_meta(ep)
        return video.decode(
            self.video_path(ep, key),
            float(meta[f"videos/{key}/from_timestamp"]),
            int(meta["length"]),
            self.fps,
        )
