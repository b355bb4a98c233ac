"""LeRobotDataset v3.0 on-disk layout: paths, feature declarations, Arrow schemas, info.json.

Facts follow lerobot 0.4.4's own writer (see docs/dataset.md); nothing here touches the disk
except the small JSON helpers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from caliper_jax.errors import CaliperError

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_FILES_SIZE_IN_MB = 100
VIDEO_FILES_SIZE_IN_MB = 200

INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
TAGS_PATH = "meta/caliper_tags.json"
EPISODES_DIR = "meta/episodes"
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = EPISODES_DIR + "/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"

DEFAULT_FEATURES = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
NUMERIC_DTYPES = ("float32", "float64", "int32", "int64")
CAMERA_DTYPES = ("image", "video")
IMAGE_NAMES = ["height", "width", "channels"]
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
QUANTILE_KEYS = tuple(f"q{round(q * 100):02d}" for q in QUANTILES)
STAT_KEYS = ("min", "max", "mean", "std", "count") + QUANTILE_KEYS
PARQUET_OPTIONS = {"compression": "snappy", "use_dictionary": True}
# per-episode files that close() compacts: skip dictionaries and column statistics (faster, still valid)
STAGING_OPTIONS = {"compression": "snappy", "use_dictionary": False, "write_statistics": False}


def chunk_file_path(template: str, chunk: int, file: int, **extra: str) -> str:
    return template.format(chunk_index=chunk, file_index=file, **extra)


def next_chunk_file(chunk: int, file: int, chunks_size: int) -> tuple[int, int]:
    """The (chunk, file) index after ``(chunk, file)``: a chunk folder holds ``chunks_size`` files."""
    return (chunk + 1, 0) if file + 1 == chunks_size else (chunk, file + 1)


def normalize_features(features: dict, where: str = "features") -> dict:
    """Validate user feature declarations; return them (without the five defaults) in lerobot form."""
    if not isinstance(features, dict) or not features:
        raise CaliperError(f"{where}: declare at least one feature as a dict name -> spec")
    out = {}
    for name, spec in features.items():
        if not isinstance(name, str) or not name or "/" in name:
            raise CaliperError(f"{where}: feature name {name!r} must be a non-empty string without '/'")
        if name in DEFAULT_FEATURES:
            continue
        if not isinstance(spec, dict) or "dtype" not in spec or "shape" not in spec:
            raise CaliperError(f"{where}.{name}: needs 'dtype' and 'shape'")
        dtype, shape = spec["dtype"], [int(s) for s in spec["shape"]]
        names = spec.get("names")
        if dtype in NUMERIC_DTYPES:
            if len(shape) != 1 or shape[0] < 1:
                raise CaliperError(f"{where}.{name}: numeric features are vectors, shape [n] with n >= 1")
            if names is not None and (not isinstance(names, list) or len(names) != shape[0]):
                raise CaliperError(f"{where}.{name}: names must be a list of {shape[0]} strings or null")
        elif dtype in CAMERA_DTYPES:
            if len(shape) != 3 or shape[2] != 3 or min(shape) < 1:
                raise CaliperError(f"{where}.{name}: {dtype} shape must be [height, width, 3]")
            names = IMAGE_NAMES
        else:
            raise CaliperError(
                f"{where}.{name}: unsupported dtype {dtype!r} ({', '.join(NUMERIC_DTYPES)}, image, video)"
            )
        entry = {"dtype": dtype, "shape": shape, "names": names}
        if "info" in spec and dtype == "video":
            entry["info"] = spec["info"]
        out[name] = entry
    if not out:
        raise CaliperError(f"{where}: declare at least one feature besides the five default columns")
    return out


def all_features(user_features: dict) -> dict:
    """User features followed by the five default columns, the order lerobot writes."""
    return {**user_features, **{k: dict(v) for k, v in DEFAULT_FEATURES.items()}}


def video_keys(features: dict) -> list[str]:
    return [k for k, f in features.items() if f["dtype"] == "video"]


def image_keys(features: dict) -> list[str]:
    return [k for k, f in features.items() if f["dtype"] == "image"]


def vector_keys(features: dict) -> list[str]:
    """Numeric features that are not one of the five default columns."""
    return [k for k, f in features.items() if f["dtype"] in NUMERIC_DTYPES and k not in DEFAULT_FEATURES]


def list_of(value: pa.DataType, size: int = -1) -> pa.DataType:
    """A list type whose child is named "element", as lerobot's files have it."""
    return pa.list_(pa.field("element", value), size)


def arrow_type(feature: dict) -> pa.DataType:
    if feature["dtype"] == "image":
        return pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    scalar = pa.from_numpy_dtype(feature["dtype"])
    return scalar if feature["shape"] == [1] else list_of(scalar, feature["shape"][0])


def _hf_feature(feature: dict) -> dict:
    if feature["dtype"] == "image":
        return {"_type": "Image"}
    value = {"dtype": feature["dtype"], "_type": "Value"}
    return (
        value
        if feature["shape"] == [1]
        else {"feature": value, "length": feature["shape"][0], "_type": "List"}
    )


def data_schema(features: dict) -> pa.Schema:
    """Schema of data/*.parquet: one column per non-video feature, HF features in the metadata."""
    cols = {k: f for k, f in features.items() if f["dtype"] != "video"}
    hf = {"info": {"features": {k: _hf_feature(f) for k, f in cols.items()}}}
    return pa.schema([(k, arrow_type(f)) for k, f in cols.items()], metadata={"huggingface": json.dumps(hf)})


def stats_arrow_types(feature: dict) -> dict[str, pa.DataType]:
    """Arrow type of each stats/{feature}/{stat} column in meta/episodes."""
    if feature["dtype"] in CAMERA_DTYPES:
        value = list_of(list_of(list_of(pa.float64())))
    else:
        value = list_of(pa.float64())
    int_minmax = list_of(pa.int64()) if feature["dtype"] in ("int32", "int64") else value
    return {
        k: (list_of(pa.int64()) if k == "count" else int_minmax if k in ("min", "max") else value)
        for k in STAT_KEYS
    }


def episodes_schema(features: dict) -> pa.Schema:
    """Schema of meta/episodes/*.parquet, columns in lerobot's order."""
    fields = [
        ("episode_index", pa.int64()),
        ("tasks", list_of(pa.string())),
        ("length", pa.int64()),
        ("data/chunk_index", pa.int64()),
        ("data/file_index", pa.int64()),
        ("dataset_from_index", pa.int64()),
        ("dataset_to_index", pa.int64()),
    ]
    for key in video_keys(features):
        fields += [
            (f"videos/{key}/chunk_index", pa.int64()),
            (f"videos/{key}/file_index", pa.int64()),
            (f"videos/{key}/from_timestamp", pa.float64()),
            (f"videos/{key}/to_timestamp", pa.float64()),
        ]
    for key, feature in features.items():
        fields += [(f"stats/{key}/{s}", t) for s, t in stats_arrow_types(feature).items()]
    fields += [("meta/episodes/chunk_index", pa.int64()), ("meta/episodes/file_index", pa.int64())]
    return pa.schema(fields)


def tasks_schema() -> pa.Schema:
    """meta/tasks.parquet: task_index with the task string as an unnamed pandas index (as lerobot)."""
    pandas_meta = {
        "index_columns": ["__index_level_0__"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": None,
                "field_name": "__index_level_0__",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
    }
    return pa.schema(
        [("task_index", pa.int64()), ("__index_level_0__", pa.string())],
        metadata={"pandas": json.dumps(pandas_meta)},
    )


def new_info(
    fps: int,
    user_features: dict,
    robot_type: str | None,
    chunks_size: int,
    data_files_size_in_mb: float,
    video_files_size_in_mb: float,
) -> dict:
    """A fresh info.json dict (no episodes yet)."""
    if isinstance(fps, bool) or not isinstance(fps, int) or fps <= 0:
        raise CaliperError(f"fps must be a positive integer, got {fps!r}")
    if int(chunks_size) < 1 or data_files_size_in_mb <= 0 or video_files_size_in_mb <= 0:
        raise CaliperError("chunks_size and the file size limits must be positive")
    features = all_features(user_features)
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": 0,
        "total_frames": 0,
        "total_tasks": 0,
        "chunks_size": int(chunks_size),
        "data_files_size_in_mb": data_files_size_in_mb,
        "video_files_size_in_mb": video_files_size_in_mb,
        "fps": fps,
        "splits": {},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if video_keys(features) else None,
        "features": features,
    }


def dumps_json(obj, indent: int | None = 4) -> bytes:
    """Deterministic JSON bytes (lerobot's layout: indent 4, UTF-8; ``indent=None`` is compact and faster)."""
    return json.dumps(obj, indent=indent, ensure_ascii=False, allow_nan=False).encode("utf-8")


def read_json(path: Path, what: str):
    """The JSON document at ``path`` (a regular file within ``CALIPER_MAX_FILE_MB``)."""
    from caliper_jax import limits

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise CaliperError(f"{path}: missing ({what})")
    text = limits.read_text(path, what)
    limits.check_depth(text, f"{path} ({what})")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CaliperError(f"{path}: unreadable {what}: {exc}") from None
    except RecursionError:
        raise CaliperError(f"{path}: unreadable {what}: nested too deeply") from None


def load_info(root: Path) -> dict:
    """Read and sanity-check meta/info.json (version gate and required keys)."""
    path = Path(root) / INFO_PATH
    info = read_json(path, "dataset info")
    if not isinstance(info, dict):
        raise CaliperError(f"{path}: not a JSON object")
    version = str(info.get("codebase_version", ""))
    if not version.startswith("v3."):
        raise CaliperError(
            f"{path}: codebase_version {version!r} is not v3.x; convert v2.x datasets with "
            "lerobot's convert_dataset_v21_to_v30 first"
        )
    for key in ("fps", "features", "total_episodes", "total_frames"):
        if key not in info:
            raise CaliperError(f"{path}: missing field {key!r}")
    info["fps"] = _whole(info["fps"], path, "fps", minimum=1)
    for key in ("total_episodes", "total_frames", "total_tasks", "chunks_size"):
        if key in info:
            info[key] = _whole(info[key], path, key, minimum=1 if key == "chunks_size" else 0)
    if not isinstance(info["features"], dict):
        raise CaliperError(f"{path}: field 'features' must be a JSON object")
    for name, feat in info["features"].items():
        if not isinstance(feat, dict) or "dtype" not in feat or "shape" not in feat:
            raise CaliperError(f"{path}: feature {name!r} lacks dtype/shape")
        shape = feat["shape"]
        if not isinstance(shape, list):
            raise CaliperError(f"{path}: feature {name!r}: shape must be a list of sizes, got {shape!r}")
        feat["shape"] = [_whole(n, path, f"features.{name}.shape", minimum=0) for n in shape]
    return info


def _whole(value, path, field: str, minimum: int) -> int:
    """An info.json integer field (an integral float such as 30.0 is accepted), >= ``minimum``."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, float) and value.is_integer():
        value, ok = int(value), True
    if not ok or value < minimum:
        kind = "a positive integer" if minimum >= 1 else "a non-negative integer"
        raise CaliperError(f"{path}: field {field!r} must be {kind}, got {value!r}")
    return value
