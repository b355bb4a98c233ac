"""Streaming LeRobotDataset v3.0 writer: ``add_frame`` -> ``save_episode(task=...)`` -> ``close()``.

Durability: every ``save_episode`` commits the episode as its own data file and episodes-metadata
file, plus tasks, stats and info, in one ``Transaction`` -- so a process killed at any point
leaves every saved episode loadable (by us and by lerobot) and no half-written file under a name
a loader reads. ``close()`` then compacts this session's per-episode files into lerobot's
size-based files (new file when current_MB + avg_MB_per_frame * frames >= limit), again in one
transaction. Video features follow the same pattern: each episode is encoded to its own MP4
(``from_timestamp`` 0), and ``close()`` concatenates the session's MP4s by stream copy into files of
at most ``video_files_size_in_mb``, rewriting from/to timestamps (see ``video``). Reopening an
existing dataset appends; the new session starts at the next file, as lerobot does on resume. No
wall-clock value is written anywhere.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from caliper_jax.dataset import format as fmt
from caliper_jax.dataset import video
from caliper_jax.dataset.atomic import Transaction, recover
from caliper_jax.dataset.png import SIGNATURE, decode_png, encode_png
from caliper_jax.dataset.stats import aggregate, episode_stats, from_jsonable, sample_indices, to_jsonable
from caliper_jax.dataset.tables import last_episode_row, read_tasks, tasks_table
from caliper_jax.errors import CaliperError

MB = 1024**2
MAX_ABS = 1e150   # float64 values beyond this overflow the variance of the episode statistics


def _all_finite(arr: np.ndarray) -> bool:
    # for one small frame a Python scan beats NumPy's per-call overhead several times over
    if arr.size <= 64:
        return all(map(math.isfinite, arr.ravel().tolist()))
    return bool(np.isfinite(arr).all())


class LeRobotWriter:
    """Write (or append to) a LeRobotDataset v3.0 at ``root``.

    ``features`` maps names to ``{"dtype", "shape", "names"}`` (float32/float64/int32/int64
    vectors, ``image`` or ``video`` with shape [h, w, 3]); the five default columns are added.
    Reopening an existing dataset needs neither ``fps`` nor ``features`` (if given they must match).
    """

    def __init__(
        self,
        root,
        fps: int | None = None,
        features: dict | None = None,
        *,
        robot_type: str | None = None,
        chunks_size: int = fmt.CHUNKS_SIZE,
        data_files_size_in_mb: float = fmt.DATA_FILES_SIZE_IN_MB,
        video_files_size_in_mb: float = fmt.VIDEO_FILES_SIZE_IN_MB,
    ):
        self.root = Path(root)
        if (self.root / fmt.INFO_PATH).exists():
            self._reopen(fps, features)
        else:
            if fps is None or features is None:
                raise CaliperError(f"{self.root}: no dataset here; pass fps= and features= to create one")
            if self.root.exists() and any(self.root.iterdir()):
                raise CaliperError(f"{self.root}: directory exists and is not an empty dataset root")
            user = fmt.normalize_features(features)
            self.info = fmt.new_info(
                fps, user, robot_type, chunks_size, data_files_size_in_mb, video_files_size_in_mb
            )
            self.tasks: list[str] = []
            self.stats: dict = {}
            self._next_data = self._next_meta = (0, 0)
            self._next_video = {k: (0, 0) for k in fmt.video_keys(self.info["features"])}
            txn = Transaction(self.root)
            txn.stage_bytes(fmt.INFO_PATH, fmt.dumps_json(self.info))
            txn.commit()
        self.features = self.info["features"]
        self.fps = int(self.info["fps"])
        self._user = {k: f for k, f in self.features.items() if k not in fmt.DEFAULT_FEATURES}
        self._vectors = [
            (k, f["dtype"], f["shape"][0]) for k, f in self._user.items() if f["dtype"] in fmt.NUMERIC_DTYPES
        ]
        self._cameras = [k for k, f in self._user.items() if f["dtype"] in fmt.CAMERA_DTYPES]
        self._data_schema = fmt.data_schema(self.features)
        self._episodes_schema = fmt.episodes_schema(self.features)
        self._session: list[dict] = []  # episodes rows written by this session (uncompacted)
        self._closed = False
        self._reset_buffer()

    @classmethod
    def like(cls, root, info: dict) -> LeRobotWriter:
        """A new dataset at ``root`` shaped like the one ``info`` (its info.json) describes: the
        same fps, user features, robot type, chunk size and file-size limits."""
        user = {k: f for k, f in info["features"].items() if k not in fmt.DEFAULT_FEATURES}
        return cls(root, info["fps"], user, robot_type=info.get("robot_type"),
                   chunks_size=info.get("chunks_size", fmt.CHUNKS_SIZE),
                   data_files_size_in_mb=info.get("data_files_size_in_mb", fmt.DATA_FILES_SIZE_IN_MB),
                   video_files_size_in_mb=info.get("video_files_size_in_mb", fmt.VIDEO_FILES_SIZE_IN_MB))

    # -- opening ---------------------------------------------------------------------------
    def _reopen(self, fps, features) -> None:
        recover(self.root)
        self.info = fmt.load_info(self.root)
        stored_user = {k: f for k, f in self.info["features"].items() if k not in fmt.DEFAULT_FEATURES}
        fmt.normalize_features(stored_user, where=str(self.root / fmt.INFO_PATH))  # only what we can write
        if fps is not None and int(fps) != int(self.info["fps"]):
            raise CaliperError(f"{self.root / fmt.INFO_PATH}: fps is {self.info['fps']}, not {fps}")
        if features is not None:
            declared = fmt.all_features(fmt.normalize_features(features))
            stored = {
                k: {f: v for f, v in spec.items() if f != "info"} for k, spec in self.info["features"].items()
            }
            if stored != {k: {f: v for f, v in spec.items() if f != "info"} for k, spec in declared.items()}:
                raise CaliperError(
                    f"{self.root / fmt.INFO_PATH}: declared features differ from the dataset's"
                )
        self.tasks = read_tasks(self.root) if (self.root / fmt.TASKS_PATH).exists() else []
        stats_path = self.root / fmt.STATS_PATH
        self.stats = from_jsonable(fmt.read_json(stats_path, "stats")) if stats_path.exists() else {}
        size = int(self.info["chunks_size"])
        last = last_episode_row(self.root) if self.info["total_episodes"] else None
        if last is None:
            self._next_data = self._next_meta = (0, 0)
            self._next_video = {k: (0, 0) for k in fmt.video_keys(self.info["features"])}
            return
        self._next_data = fmt.next_chunk_file(last["data/chunk_index"], last["data/file_index"], size)
        self._next_meta = fmt.next_chunk_file(
            last["meta/episodes/chunk_index"], last["meta/episodes/file_index"], size
        )
        self._next_video = {
            k: fmt.next_chunk_file(last[f"videos/{k}/chunk_index"], last[f"videos/{k}/file_index"], size)
            for k in fmt.video_keys(self.info["features"])
        }

    # -- frames ----------------------------------------------------------------------------
    def _reset_buffer(self) -> None:
        self._frames: dict[str, list] = {k: [] for k in self._user}
        self._n = 0

    @property
    def num_buffered_frames(self) -> int:
        return self._n

    def add_frame(self, frame: dict) -> None:
        """Buffer one frame: every declared feature, nothing else. Non-finite values are rejected."""
        self._add(frame, 1, single=True)

    def add_frames(self, columns: dict) -> None:
        """Buffer many frames at once: each feature given as a sequence/array of per-frame values."""
        lengths = {len(v) for v in columns.values()}
        if len(lengths) != 1:
            raise CaliperError(f"add_frames: features have different frame counts {sorted(lengths)}")
        self._add(columns, lengths.pop(), single=False)

    def _add(self, frame: dict, n: int, single: bool) -> None:
        self._check_open()
        if frame.keys() != self._user.keys():
            missing = [k for k in self._user if k not in frame]
            extra = [k for k in frame if k not in self._user]
            raise CaliperError(f"add_frame: frame {self._n} missing {missing} / undeclared {extra}")
        converted = [
            (key, self._numeric(key, dtype, dim, frame[key], n)) for key, dtype, dim in self._vectors
        ]
        cameras = [
            (
                key,
                [
                    self._camera(key, v, self._n + i)
                    for i, v in enumerate([frame[key]] if single else frame[key])
                ],
            )
            for key in self._cameras
        ]
        for key, value in converted:
            self._frames[key].append(value)
        for key, values in cameras:
            self._frames[key].extend(values)
        self._n += n

    def _numeric(self, key: str, dtype: str, dim: int, values, n: int) -> np.ndarray:
        try:
            if isinstance(values, np.ndarray) and values.dtype == dtype:
                arr = values.reshape(n, -1).copy()
            else:
                with np.errstate(over="ignore", invalid="ignore"):  # float32 overflow -> inf, caught below
                    arr = np.array(values, dtype=dtype).reshape(n, -1)
        except (TypeError, ValueError) as exc:
            raise CaliperError(f"add_frame: feature {key!r} frame {self._n}: {exc}") from None
        if arr.shape[1] != dim:
            raise CaliperError(
                f"add_frame: feature {key!r} frame {self._n} has {arr.shape[1]} values, declared {dim}"
            )
        if arr.dtype.kind == "f" and not _all_finite(arr):
            bad = self._n + int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
            raise CaliperError(f"add_frame: feature {key!r} frame {bad} holds NaN/inf")
        if arr.dtype == np.float64 and arr.size and np.abs(arr).max() > MAX_ABS:
            bad = self._n + int(np.flatnonzero((np.abs(arr) > MAX_ABS).any(axis=1))[0])
            raise CaliperError(f"add_frame: feature {key!r} frame {bad} holds a value beyond +-{MAX_ABS:g} "
                               f"(its statistics would overflow)")
        return arr

    def _camera(self, key: str, value, index: int):
        feature = self._user[key]
        dtype = feature["dtype"]
        if dtype == "image" and isinstance(value, (bytes, bytearray)):
            if not bytes(value[:8]) == SIGNATURE:
                raise CaliperError(f"add_frame: image {key!r} frame {index}: bytes are not a PNG")
            return bytes(value)
        pixels = np.asarray(value)
        h, w, c = feature["shape"]
        if pixels.shape == (c, h, w):
            pixels = pixels.transpose(1, 2, 0)
        if pixels.shape != (h, w, c) or pixels.dtype != np.uint8:
            raise CaliperError(
                f"add_frame: {dtype} {key!r} frame {index} must be uint8 {[h, w, c]}, "
                f"got {pixels.dtype} {list(pixels.shape)}"
            )
        return encode_png(pixels) if dtype == "image" else np.ascontiguousarray(pixels)

    def discard_episode(self) -> None:
        """Drop the buffered frames without saving them."""
        self._reset_buffer()

    # -- episodes --------------------------------------------------------------------------
    def save_episode(self, task: str | list[str], videos: dict | None = None) -> int:
        """Commit the buffered frames as one episode; return its index.

        ``task`` is the episode's task string (or one string per frame). ``videos`` maps a video
        feature to an MP4 the caller encoded for this episode; without it PyAV encodes the frames.
        """
        self._check_open()
        n = self._n
        if n == 0:
            raise CaliperError("save_episode: no frames added")
        frame_tasks = [task] * n if isinstance(task, str) else list(task)
        if len(frame_tasks) != n or not all(isinstance(t, str) and t for t in frame_tasks):
            raise CaliperError(f"save_episode: task must be a non-empty string or {n} strings")
        ep = int(self.info["total_episodes"])
        start = int(self.info["total_frames"])
        txn = Transaction(self.root)

        ep_tasks = list(dict.fromkeys(frame_tasks))
        new_tasks = [t for t in ep_tasks if t not in self.tasks]
        lookup = {t: i for i, t in enumerate(self.tasks + new_tasks)}
        columns = {k: np.concatenate(self._frames[k]) for k, _, _ in self._vectors}
        columns.update(
            {
                "timestamp": (np.arange(n) / self.fps).astype(np.float32),
                "frame_index": np.arange(n, dtype=np.int64),
                "episode_index": np.full(n, ep, dtype=np.int64),
                "index": np.arange(start, start + n, dtype=np.int64),
                "task_index": np.array([lookup[t] for t in frame_tasks], dtype=np.int64),
            }
        )
        samples = {k: self._camera_sample(k) for k in self._cameras}
        ep_stats = episode_stats(columns, self.features, samples)

        row = {
            "episode_index": ep,
            "tasks": ep_tasks,
            "length": n,
            "data/chunk_index": self._next_data[0],
            "data/file_index": self._next_data[1],
            "dataset_from_index": start,
            "dataset_to_index": start + n,
        }
        row.update(self._stage_videos(txn, n, videos or {}))
        row.update(
            {f"stats/{k}/{s}": np.asarray(v).tolist() for k, st in ep_stats.items() for s, v in st.items()}
        )
        row["meta/episodes/chunk_index"], row["meta/episodes/file_index"] = self._next_meta

        table = self._episode_table(columns, n)
        pq.write_table(table, txn.stage(self._data_rel(*self._next_data)), **fmt.STAGING_OPTIONS)
        self._stage_episode_rows(txn, [row], self._next_meta, fmt.STAGING_OPTIONS)
        if new_tasks:
            pq.write_table(
                tasks_table(self.tasks + new_tasks), txn.stage(fmt.TASKS_PATH), **fmt.PARQUET_OPTIONS
            )
        stats = aggregate(self.stats, ep_stats) if self.stats else ep_stats
        info = dict(
            self.info,
            total_episodes=ep + 1,
            total_frames=start + n,
            total_tasks=len(self.tasks) + len(new_tasks),
            splits={"train": f"0:{ep + 1}"},
        )
        txn.stage_bytes(fmt.STATS_PATH, fmt.dumps_json(to_jsonable(stats), indent=None))
        txn.stage_bytes(fmt.INFO_PATH, fmt.dumps_json(info))
        txn.commit()

        self.info, self.stats, self.tasks = info, stats, self.tasks + new_tasks
        size = int(info["chunks_size"])
        self._next_data = fmt.next_chunk_file(*self._next_data, size)
        self._next_meta = fmt.next_chunk_file(*self._next_meta, size)
        self._session.append(row)
        self._reset_buffer()
        return ep

    def _camera_sample(self, key: str) -> list[np.ndarray]:
        frames = self._frames[key]
        idx = sample_indices(len(frames))
        if self._user[key]["dtype"] == "video":
            return [frames[i] for i in idx]
        return [decode_png(frames[i]) for i in idx]

    def _episode_table(self, columns: dict, n: int) -> pa.Table:
        schema = self._data_schema
        arrays = []
        for field in schema:
            feature = self.features[field.name]
            if feature["dtype"] == "image":
                names = [f"frame-{i:06d}.png" for i in range(n)]
                arrays.append(
                    pa.StructArray.from_arrays(
                        [pa.array(self._frames[field.name], pa.binary()), pa.array(names, pa.string())],
                        fields=list(field.type),
                    )
                )
            elif feature["shape"] == [1]:
                arrays.append(pa.array(columns[field.name].reshape(-1), field.type))
            else:
                flat = pa.array(columns[field.name].reshape(-1), field.type.value_type)
                arrays.append(pa.FixedSizeListArray.from_arrays(flat, feature["shape"][0]))
        return pa.Table.from_arrays(arrays, schema=schema)

    def _stage_videos(self, txn: Transaction, n: int, supplied: dict) -> dict:
        """Encode (or take) each video feature's MP4 for this episode as its own file; its columns."""
        unknown = [k for k in supplied if k not in fmt.video_keys(self._user)]
        if unknown:
            raise CaliperError(f"save_episode: videos= names undeclared video features {unknown}")
        keys = fmt.video_keys(self._user)
        for key in keys:  # check everything before the first byte is staged
            if key in supplied:
                self._check_supplied(key, Path(supplied[key]), n)
            else:
                h, w, _ = self._user[key]["shape"]
                video.check_size(h, w, f"save_episode: video feature {key!r}")
        cols = {}
        size = int(self.info["chunks_size"])
        for key in keys:
            chunk, file = self._next_video[key]
            tmp = txn.stage(self._video_rel(key, chunk, file))
            if key in supplied:
                shutil.copyfile(supplied[key], tmp)
            else:
                video.encode(self._frames[key], tmp, self.fps)
            duration = video.probe(tmp)["duration_s"] if video.have_pyav() else n / self.fps
            if "info" not in self.info["features"][key]:
                self.info["features"][key]["info"] = video.stream_info(tmp, self._user[key], self.fps)
            cols.update(
                {
                    f"videos/{key}/chunk_index": chunk,
                    f"videos/{key}/file_index": file,
                    f"videos/{key}/from_timestamp": 0.0,
                    f"videos/{key}/to_timestamp": duration,
                }
            )
            self._next_video[key] = fmt.next_chunk_file(chunk, file, size)
        return cols

    def _check_supplied(self, key: str, path: Path, n: int) -> None:
        """A caller-encoded MP4 must hold this episode's frames at the declared size (PyAV checks it)."""
        if not path.is_file():
            raise CaliperError(f"save_episode: videos[{key!r}] = {path}: no such file")
        if not video.have_pyav():
            return
        p = video.probe(path)
        h, w, _ = self._user[key]["shape"]
        info = self.info["features"][key].get("info") or {}
        problems = []
        if p["frames"] != n:
            problems.append(f"{p['frames']} frames, the episode has {n}")
        if (p["height"], p["width"]) != (h, w):
            problems.append(f"{p['height']}x{p['width']} px, declared {h}x{w}")
        if p["fps"] != self.fps:
            problems.append(f"{p['fps']} fps, the dataset's is {self.fps}")
        if info.get("video.codec") and p["codec"] != info["video.codec"]:
            problems.append(f"codec {p['codec']}, the dataset's is {info['video.codec']}")
        if problems:
            raise CaliperError(f"save_episode: videos[{key!r}] = {path}: " + "; ".join(problems))

    def _stage_episode_rows(
        self, txn: Transaction, rows: list[dict], at: tuple[int, int], options: dict
    ) -> None:
        table = pa.Table.from_pylist(rows, schema=self._episodes_schema)
        pq.write_table(table, txn.stage(self._meta_rel(*at)), **options)

    @staticmethod
    def _data_rel(chunk: int, file: int) -> str:
        return fmt.chunk_file_path(fmt.DATA_PATH, chunk, file)

    @staticmethod
    def _meta_rel(chunk: int, file: int) -> str:
        return fmt.chunk_file_path(fmt.EPISODES_PATH, chunk, file)

    @staticmethod
    def _video_rel(key: str, chunk: int, file: int) -> str:
        return fmt.chunk_file_path(fmt.VIDEO_PATH, chunk, file, video_key=key)

    # -- closing ---------------------------------------------------------------------------
    def close(self) -> None:
        """Compact this session's per-episode files into lerobot-sized files. Unsaved frames are dropped."""
        if self._closed:
            return
        self._closed = True
        self._reset_buffer()
        if len(self._session) > 1:
            self._compact()
        self._session = []

    def _compact(self) -> None:
        size = int(self.info["chunks_size"])
        limit = float(self.info["data_files_size_in_mb"]) * MB
        txn = Transaction(self.root)
        old_data = [self._data_rel(r["data/chunk_index"], r["data/file_index"]) for r in self._session]
        old_meta = [
            self._meta_rel(r["meta/episodes/chunk_index"], r["meta/episodes/file_index"])
            for r in self._session
        ]
        at = (self._session[0]["data/chunk_index"], self._session[0]["data/file_index"])
        sink = writer = None
        frames_in_file = 0
        for row, rel in zip(self._session, old_data, strict=True):
            table = pq.ParquetFile(self.root / rel).read()
            if writer is not None:
                current = sink.tell()
                if current + current / frames_in_file * table.num_rows >= limit:
                    writer.close()
                    sink.close()
                    writer = None
                    at = fmt.next_chunk_file(*at, size)
            if writer is None:
                sink = pa.OSFile(str(txn.stage(self._data_rel(*at))), "wb")
                writer = pq.ParquetWriter(sink, table.schema, **fmt.PARQUET_OPTIONS)
                frames_in_file = 0
            writer.write_table(table)
            frames_in_file += table.num_rows
            row["data/chunk_index"], row["data/file_index"] = at
        writer.close()
        sink.close()
        for key in fmt.video_keys(self._user) if video.have_pyav() else []:
            self._compact_videos(txn, key, size)
        self._compact_meta(txn, limit, size)
        for rel in old_data + old_meta:
            txn.delete(rel)
        txn.commit()
        self._next_data = fmt.next_chunk_file(*at, size)

    def _compact_videos(self, txn: Transaction, key: str, size: int) -> None:
        """Concatenate this session's episode MP4s of ``key`` into files of at most video_files_size_in_mb.

        lerobot's rule: an episode starts a new file when current_MB + episode_MB >= limit (the
        first episode of a file always fits). Packets are stream-copied, never re-encoded.
        """
        limit = float(self.info["video_files_size_in_mb"]) * MB
        chunk, file, lo, hi = (f"videos/{key}/{c}" for c in ("chunk_index", "file_index", "from_timestamp",
                                                              "to_timestamp"))
        old = [self._video_rel(key, r[chunk], r[file]) for r in self._session]
        at = (self._session[0][chunk], self._session[0][file])
        groups: list[tuple[tuple[int, int], list[tuple[dict, str]]]] = [(at, [])]
        current = 0
        for row, rel in zip(self._session, old, strict=True):
            nbytes = (self.root / rel).stat().st_size
            if groups[-1][1] and current + nbytes >= limit:
                at = fmt.next_chunk_file(*at, size)
                groups.append((at, []))
                current = 0
            groups[-1][1].append((row, rel))
            current += nbytes
        kept = set()
        for where, members in groups:
            target = self._video_rel(key, *where)
            if len(members) == 1 and members[0][1] == target:
                kept.add(target)  # already alone in its final file
                continue
            spans = video.concatenate([self.root / rel for _, rel in members], txn.stage(target))
            for (row, _), (start, end) in zip(members, spans, strict=True):
                row[chunk], row[file], row[lo], row[hi] = where[0], where[1], start, end
        for rel in old:
            if rel not in kept:
                txn.delete(rel)
        self._next_video[key] = fmt.next_chunk_file(*at, size)

    def _compact_meta(self, txn: Transaction, limit: float, size: int) -> None:
        at = (self._session[0]["meta/episodes/chunk_index"], self._session[0]["meta/episodes/file_index"])
        row_bytes = pa.Table.from_pylist(self._session[:1], schema=self._episodes_schema).nbytes
        groups: list[tuple[tuple[int, int], list[dict]]] = [(at, [])]
        for row in self._session:
            rows = groups[-1][1]
            if rows and (len(rows) + 1) * row_bytes >= limit:  # lerobot's rule with a per-row size estimate
                at = fmt.next_chunk_file(*at, size)
                groups.append((at, []))
            row["meta/episodes/chunk_index"], row["meta/episodes/file_index"] = at
            groups[-1][1].append(row)
        for where, rows in groups:
            self._stage_episode_rows(txn, rows, where, fmt.PARQUET_OPTIONS)
        self._next_meta = fmt.next_chunk_file(*at, size)

    def _check_open(self) -> None:
        if self._closed:
            raise CaliperError(f"{self.root}: writer is closed")

    def __enter__(self) -> LeRobotWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
