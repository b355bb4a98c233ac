"""Per-episode feature statistics and their count-weighted aggregation, as lerobot 0.4.4 stores them.

Each stat is min, max, mean, std (population), count and the quantiles q01..q99. Quantiles come
from a 5000-bin histogram between min and max with linear interpolation inside the bin (lerobot's
estimator); means and stds are computed in float64. Camera stats are per channel, shape (3, 1, 1),
on [0, 1], from an evenly spaced sample of the episode's frames. Aggregation is pairwise and
count-weighted (parallel-variance formula; quantiles averaged by count), like lerobot's.
"""

from __future__ import annotations

import numpy as np

from caliper_jax.dataset.format import CAMERA_DTYPES, QUANTILE_KEYS, QUANTILES, STAT_KEYS

HIST_BINS = 5000
HIST_PAD = 1e-10


def _quantiles(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Histogram-estimated quantiles per column of ``x`` (n, d) -> (len(QUANTILES), d)."""
    n, d = x.shape
    start = lo - HIST_PAD
    width = (hi - lo + 2 * HIST_PAD) / HIST_BINS
    idx = np.clip(((x - start) / width).astype(np.int64), 0, HIST_BINS - 1)
    hist = np.bincount((idx + np.arange(d) * HIST_BINS).ravel(), minlength=d * HIST_BINS)
    cum = np.cumsum(hist.reshape(d, HIST_BINS), axis=1)
    target = np.asarray(QUANTILES)[:, None] * n
    k = (cum[None] < target[:, :, None]).sum(axis=2)  # first bin whose cumulative count reaches target
    rows = np.arange(d)[None].repeat(len(QUANTILES), axis=0)
    kc = np.clip(k, 1, HIST_BINS - 1)
    before = cum[rows, kc - 1]
    inside = cum[rows, kc] - before
    frac = np.divide(target - before, inside, out=np.zeros_like(target * rows), where=inside > 0)
    value = start + (kc + frac) * width
    return np.where(k == 0, start, np.where(k >= HIST_BINS, start + HIST_BINS * width, value))


def column_stats(x: np.ndarray, count: int | None = None) -> dict[str, np.ndarray]:
    """Stats of the rows of ``x`` (n, d); min/max keep the integer dtype of integer input."""
    n = x.shape[0]
    xf = x.astype(np.float64)
    mean = xf.mean(axis=0)
    stats = {
        "min": x.min(axis=0),
        "max": x.max(axis=0),
        "mean": mean,
        "std": xf.std(axis=0),
        "count": np.array([n if count is None else count], dtype=np.int64),
    }
    if n < 2:
        qs = np.repeat(mean[None], len(QUANTILES), axis=0)
    else:
        qs = _quantiles(xf, xf.min(axis=0), xf.max(axis=0))
    stats.update({k: qs[i] for i, k in enumerate(QUANTILE_KEYS)})
    return stats


def sample_indices(n: int) -> np.ndarray:
    """Evenly spaced frame indices lerobot samples for camera stats (100..10000, ~n**0.75)."""
    num = max(min(n, 100), min(int(n**0.75), 10_000))
    return np.round(np.linspace(0, n - 1, num)).astype(int)


def _downsample(img: np.ndarray) -> np.ndarray:
    h, w = img.shape[:2]
    if max(h, w) < 300:
        return img
    step = int(w / 150) if w > h else int(h / 150)
    return img[::step, ::step]


def camera_stats(frames: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per-channel stats (3, 1, 1) on [0, 1] of a sample of uint8 HxWx3 frames."""
    sample = np.stack([_downsample(f) for f in frames])
    pixels = sample.reshape(-1, 3)
    stats = column_stats(pixels, count=len(frames))
    return {k: v if k == "count" else (v / 255.0).reshape(3, 1, 1) for k, v in stats.items()}


def episode_stats(
    columns: dict[str, np.ndarray], features: dict, camera_frames: dict[str, list[np.ndarray]]
) -> dict[str, dict[str, np.ndarray]]:
    """Stats of one episode, in feature order. ``columns`` holds (n, d) or (n,) numeric arrays."""
    out = {}
    for key, feature in features.items():
        if feature["dtype"] in CAMERA_DTYPES:
            out[key] = camera_stats(camera_frames[key])
        else:
            x = columns[key]
            out[key] = column_stats(x.reshape(len(x), -1))
    return out


def aggregate(a: dict, b: dict) -> dict:
    """Count-weighted merge of two stats dicts {feature: {stat: array}}; keys of both, a's order first."""
    out = {}
    for key in list(a) + [k for k in b if k not in a]:
        if key not in a or key not in b:
            out[key] = a[key] if key in a else b[key]
            continue
        sa, sb = a[key], b[key]
        ca, cb = float(sa["count"][0]), float(sb["count"][0])
        total = ca + cb
        mean = (sa["mean"] * ca + sb["mean"] * cb) / total
        var = (
            (sa["std"] ** 2 + (sa["mean"] - mean) ** 2) * ca
            + (sb["std"] ** 2 + (sb["mean"] - mean) ** 2) * cb
        ) / total
        merged = {
            "min": np.minimum(sa["min"], sb["min"]),
            "max": np.maximum(sa["max"], sb["max"]),
            "mean": mean,
            "std": np.sqrt(var),
            "count": np.array([int(sa["count"][0]) + int(sb["count"][0])], dtype=np.int64),
        }
        for q in QUANTILE_KEYS:
            if q in sa and q in sb:
                merged[q] = (sa[q] * ca + sb[q] * cb) / total
        out[key] = merged
    return out


def to_jsonable(stats: dict) -> dict:
    """{feature: {stat: nested lists}} with Python scalars, stat keys in lerobot's order."""
    return {
        key: {s: np.asarray(v).tolist() for s, v in sorted(st.items(), key=lambda kv: _order(kv[0]))}
        for key, st in stats.items()
    }


def from_jsonable(stats: dict) -> dict:
    return {key: {s: np.asarray(v) for s, v in st.items()} for key, st in stats.items()}


def _order(stat: str) -> int:
    return STAT_KEYS.index(stat) if stat in STAT_KEYS else len(STAT_KEYS)
