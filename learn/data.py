"""Training data: a dataset's episodes in memory, the train/val split by episode, and windowed
batches (:class:`learn.policies.base.Batch`) in the normalised space.

Datasets here are small (tens of episodes of low-dimensional vectors), so every frame is held as
NumPy (:class:`Frames`) and, for sampling, once on the device (:class:`WindowData`); a batch is
one jitted gather with no per-sample Python. Camera features (``observation.images.*``, MP4 video)
are decoded once at load (PyAV, seeking to each episode's keyframe) and held as uint8 in memory,
within ``image_budget_mb`` (:data:`IMAGE_BUDGET_MB`, refused beyond it before any decoding); the
gather normalises the window's frames per channel. A window never crosses an episode boundary: frames
before the episode start repeat the first frame (``obs_mask`` False), actions past its end repeat
the last action (``action_mask`` False).
"""
from __future__ import annotations

import functools
import queue
import threading
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from caliper_jax.errors import CaliperError
from learn.features import IMAGE_BUDGET_MB, FeatureLayout, layout_from_info
from learn.normalize import Normalizer
from learn.policies.base import Batch


# -- frames ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Frames:
    """Every frame of some episodes, concatenated in episode order (raw units).

    ``obs`` (N, obs_dim) float32 is the concatenation of ``layout.state_keys``; ``action``
    (N, action_dim) float32; episode ``i`` is rows ``starts[i] : starts[i] + lengths[i]`` and was
    episode ``episode_index[i]`` of its dataset. ``images`` (N, cameras, H, W, 3) uint8: the
    frames of ``layout.cameras`` (None without cameras)."""

    obs: np.ndarray
    action: np.ndarray
    starts: np.ndarray          # (E,) int64
    lengths: np.ndarray         # (E,) int64
    episode_index: np.ndarray   # (E,) int64
    layout: FeatureLayout | None = None
    images: np.ndarray | None = None

    @property
    def num_episodes(self) -> int:
        return len(self.lengths)

    @property
    def num_frames(self) -> int:
        return int(self.obs.shape[0])

    def episode(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(obs (T, obs_dim), action (T, action_dim)) of episode position ``i``."""
        s, n = int(self.starts[i]), int(self.lengths[i])
        return self.obs[s:s + n], self.action[s:s + n]

    def select(self, ids) -> Frames:
        """The episodes at positions ``ids`` (in that order)."""
        ids = np.asarray(ids, np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_episodes):
            raise CaliperError(f"episode positions {ids.tolist()} out of range 0..{self.num_episodes - 1}")
        parts = [self.episode(int(i)) for i in ids]
        obs = np.concatenate([p[0] for p in parts]) if parts else self.obs[:0]
        action = np.concatenate([p[1] for p in parts]) if parts else self.action[:0]
        lengths = self.lengths[ids]
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if ids.size else lengths
        images = None
        if self.images is not None:
            rows = [np.arange(int(self.starts[i]), int(self.starts[i] + self.lengths[i])) for i in ids]
            images = self.images[np.concatenate(rows) if rows else np.zeros(0, np.int64)]
        return Frames(obs, action, starts, lengths, self.episode_index[ids], self.layout, images)

    @staticmethod
    def from_episodes(obs, action, layout: FeatureLayout | None = None, episode_index=None,
                      images=None) -> Frames:
        """Frames of per-episode arrays ``obs[i]`` (T_i, obs_dim) and ``action[i]`` (T_i, action_dim),
        validated (non-empty, T_i >= 1, consistent widths, finite); ``images[i]`` (T_i, cameras, H,
        W, 3) uint8 when the layout has cameras."""
        obs, action = list(obs), list(action)
        if not obs:
            raise CaliperError("empty dataset: no episodes")
        if len(obs) != len(action):
            raise CaliperError(f"{len(obs)} observation episodes but {len(action)} action episodes")
        index = np.arange(len(obs)) if episode_index is None else np.asarray(episode_index, np.int64)
        names = _names(layout)
        obs = [np.asarray(o, np.float32) for o in obs]
        action = [np.asarray(a, np.float32) for a in action]
        for i, (o, a) in enumerate(zip(obs, action, strict=True)):
            ep = int(index[i])
            for arr, what, width in ((o, "observation", obs[0].shape[-1]),
                                     (a, "action", action[0].shape[-1])):
                if arr.ndim != 2:
                    raise CaliperError(f"episode {ep}: {what} must be (frames, dim), got shape {arr.shape}")
                if arr.shape[1] != width:
                    raise CaliperError(f"episode {ep}: {what} has width {arr.shape[1]}, episode "
                                       f"{int(index[0])} has {width}")
            if len(o) < 1:
                raise CaliperError(f"episode {ep} has no frames (an episode needs at least 1)")
            if len(o) != len(a):
                raise CaliperError(f"episode {ep}: {len(o)} observation frames but {len(a)} actions")
            _check_finite(o, ep, names["obs"])
            _check_finite(a, ep, names["action"])
        dims = (obs[0].shape[1], action[0].shape[1])
        if layout is not None and dims != (layout.obs_dim, layout.action_dim):
            raise CaliperError(f"arrays are obs_dim {dims[0]}, action_dim {dims[1]} but the layout says "
                               f"{layout.obs_dim}, {layout.action_dim}")
        lengths = np.array([len(o) for o in obs], np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        shape = None if layout is None else layout.image_shape
        if (images is None) != (shape is None):
            raise CaliperError("images are given but the layout has no cameras" if shape is None else
                               f"the layout has cameras {[c.name for c in layout.cameras]} but no images "
                               f"were given")
        if images is not None:
            images = list(images)
            for i, (im, o) in enumerate(zip(images, obs, strict=True)):
                want = (len(o), shape[0], shape[1], shape[2], 3)
                if tuple(np.shape(im)) != want or np.asarray(im).dtype != np.uint8:
                    raise CaliperError(f"episode {int(index[i])}: images must be uint8 {want} (frames, "
                                       f"cameras, height, width, rgb), got {np.asarray(im).dtype} "
                                       f"{tuple(np.shape(im))}")
            images = np.concatenate(images)
        return Frames(np.concatenate(obs), np.concatenate(action), starts, lengths, index, layout, images)


def _names(layout: FeatureLayout | None) -> dict:
    """Per-column feature names of the observation and action (for error messages)."""
    if layout is None:
        return {"obs": None, "action": None}
    cols = [k for k, d in zip(layout.state_keys, layout.state_dims, strict=True) for _ in range(d)]
    return {"obs": cols, "action": [layout.action_key] * layout.action_dim}


def _check_finite(arr: np.ndarray, ep: int, columns) -> None:
    """Raise naming episode, feature and frame when ``arr`` (T, d) holds NaN/inf."""
    ok = np.isfinite(arr)
    if ok.all():
        return
    frame, col = (int(x[0]) for x in np.nonzero(~ok))
    if isinstance(columns, str):
        what = f"feature {columns!r}"
    elif columns is not None and col < len(columns):
        what = f"feature {columns[col]!r}"
    else:
        what = f"column {col}"
    raise CaliperError(f"episode {ep}: {what} frame {frame} holds NaN/inf (value {arr[frame, col]}); "
                       f"fix or drop the episode before training")


def _camera_records(root) -> list:
    """The demo sidecar's camera records (intrinsics) of dataset ``root``, or [] without one."""
    import json
    from pathlib import Path

    from tasks.demo import DEMOS_PATH

    path = Path(root) / DEMOS_PATH
    if not path.is_file():
        return []
    try:
        return list(json.loads(path.read_text()).get("cameras", []))
    except (ValueError, AttributeError) as exc:
        raise CaliperError(f"{path}: unreadable ({exc})") from None


def load_frames(root, layout: FeatureLayout | None = None, *, episodes=None, obs_set: str = "state",
                image_budget_mb: float = IMAGE_BUDGET_MB) -> Frames:
    """Every episode (or the dataset indices ``episodes``) of the LeRobot dataset at ``root``:
    observation = ``layout.state_keys`` concatenated (float32), action = ``layout.action_key``,
    and for a layout with cameras their decoded frames (``Frames.images``; refused when they would
    take more than ``image_budget_mb`` MiB). ``layout`` defaults to
    :func:`learn.features.layout_from_info` of observation set ``obs_set``; a given layout must
    match the dataset exactly (set, keys, widths, fps, cameras)."""
    from caliper_jax.dataset.reader import LeRobotReader

    reader = LeRobotReader(root)
    records = _camera_records(root)
    if layout is None:
        layout = layout_from_info(reader.info, obs_set=obs_set, camera_records=records)
    else:
        actual = layout_from_info(reader.info, layout.state_keys, layout.action_key, obs_set=layout.obs_set,
                                  camera_records=records)
        diff = layout.mismatch(actual)
        if diff is not None:
            raise CaliperError(f"{root}: the dataset does not match the feature layout ({diff}, layout vs "
                               f"dataset)")
    if reader.num_episodes == 0:
        raise CaliperError(f"{root}: empty dataset (no episodes)")
    ids = range(reader.num_episodes) if episodes is None else [int(e) for e in episodes]
    keys = list(layout.state_keys) + [layout.action_key]
    if layout.cameras:
        total = sum(int(reader.episode_meta(e)["length"]) for e in ids)
        _check_image_budget(root, layout, total, image_budget_mb)
    obs, action, images = [], [], []
    for ep in ids:
        cols = reader.episode(ep, keys)
        n = len(cols[layout.action_key])
        if n < 1:
            raise CaliperError(f"{root}: episode {ep} has no frames (an episode needs at least 1)")
        for k in keys:
            with np.errstate(over="ignore"):  # float64 beyond float32's range -> inf, caught below
                cols[k] = np.asarray(cols[k], np.float32).reshape(n, -1)
            _check_finite(cols[k], ep, k)
        obs.append(np.concatenate([cols[k] for k in layout.state_keys], axis=1))
        action.append(cols[layout.action_key])
        if layout.cameras:
            images.append(episode_images(reader, ep, layout, n))
    return Frames.from_episodes(obs, action, layout, list(ids), images if layout.cameras else None)


def _check_image_budget(root, layout: FeatureLayout, frames: int, budget_mb: float) -> None:
    c, h, w = layout.image_shape
    need = frames * c * h * w * 3 / 2**20
    if need > budget_mb:
        raise CaliperError(f"{root}: the decoded camera frames would take {need:.0f} MiB ({frames} frames x "
                           f"{c} cameras x {w}x{h}), over the {budget_mb:g} MiB image budget; train on fewer "
                           f"episodes or raise the budget (--image-budget-mb)")


def episode_images(reader, ep: int, layout: FeatureLayout, n: int) -> np.ndarray:
    """(n, cameras, H, W, 3) uint8: the frames of ``layout.cameras`` in episode ``ep`` of the
    dataset ``reader`` reads (``n`` its length), decoded as training loads them."""
    return np.stack([_decode(reader, ep, c.key, n) for c in layout.cameras], axis=1)


def _decode(reader, ep: int, key: str, n: int) -> np.ndarray:
    """(n, H, W, 3) uint8 frames of camera feature ``key`` in episode ``ep`` (PyAV, seekable)."""
    from caliper_jax.dataset.video import have_pyav

    if reader.info["features"][key].get("dtype") == "video":
        if not have_pyav():
            raise CaliperError(f'{key}: decoding video features needs PyAV: pip install "caliper-jax[video]"')
        frames = reader.video_frames(ep, key)
    else:
        frames = np.asarray(reader.episode(ep, [key])[key])
    if len(frames) != n:
        raise CaliperError(f"episode {ep}: {key} has {len(frames)} frames, the episode {n}")
    return np.asarray(frames, np.uint8)


# -- split and normalisation -----------------------------------------------------------------------
def _seed_of(key_or_seed) -> list[int]:
    """NumPy seed entropy of an int seed or a JAX PRNG key (raw uint32 or typed)."""
    if isinstance(key_or_seed, (int, np.integer)) and not isinstance(key_or_seed, bool):
        if key_or_seed < 0:
            raise CaliperError(f"seed must be >= 0, got {key_or_seed}")
        return [int(key_or_seed)]
    import jax
    import jax.numpy as jnp

    key = key_or_seed
    if hasattr(key, "dtype") and jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    data = np.asarray(key)
    if data.dtype != np.uint32:
        raise CaliperError(f"expected an int seed or a JAX PRNG key, got {type(key_or_seed).__name__}")
    return [int(x) for x in data.reshape(-1)]


def split_episodes(n_episodes: int, val_fraction: float, key_or_seed=0) -> tuple[np.ndarray, np.ndarray]:
    """(train_ids, val_ids): sorted int64 episode positions, disjoint, covering ``range(n_episodes)``.
    ``round(n * val_fraction)`` episodes (at least 1 when ``val_fraction`` > 0 and n >= 2, never all)
    go to validation, chosen by a seeded permutation: deterministic for a seed or key."""
    n = int(n_episodes)
    if n < 1:
        raise CaliperError(f"cannot split {n} episodes: the dataset is empty")
    if not 0.0 <= val_fraction < 1.0:
        raise CaliperError(f"val_fraction must be in [0, 1), got {val_fraction!r}")
    n_val = int(np.floor(n * val_fraction + 0.5))
    if val_fraction > 0 and n >= 2:
        n_val = max(n_val, 1)
    n_val = min(n_val, n - 1)
    perm = np.random.default_rng(_seed_of(key_or_seed)).permutation(n)
    return np.sort(perm[n_val:]).astype(np.int64), np.sort(perm[:n_val]).astype(np.int64)


def fit_normalizer(frames: Frames, train_ids=None) -> Normalizer:
    """Per-dimension statistics of the frames of episode positions ``train_ids`` (default all):
    pass the train split so validation episodes never leak into the normalisation."""
    sub = frames if train_ids is None else frames.select(train_ids)
    if sub.num_frames == 0:
        raise CaliperError("cannot fit normalisation statistics on no frames (empty train split)")
    norm = Normalizer.fit(sub.obs, sub.action)
    return norm if sub.images is None else norm.with_images(sub.images)


# -- windows ----------------------------------------------------------------------------------------
class WindowData(NamedTuple):
    """The arrays a batch is gathered from (a pytree; NumPy or JAX), normalised (images: raw
    uint8, normalised by the gather with ``img_mean``/``img_std``)."""

    obs: object      # (N, obs_dim) float32
    action: object   # (N, action_dim) float32
    first: object    # (N,) int32: the index of each frame's episode's first frame
    last: object     # (N,) int32: ... and of its last frame
    images: object = None   # (N, cameras, H, W, 3) uint8, or None
    img_mean: object = None  # (3,) float32
    img_std: object = None   # (3,) float32


def gather_windows(data: WindowData, idx, n_obs_steps: int, chunk_size: int, xp=np) -> Batch:
    """The :class:`Batch` of the windows ending at frames ``idx`` (B,) (``xp``: numpy or jax.numpy):
    obs (B, n_obs_steps, obs_dim), obs_mask (B, n_obs_steps), action (B, chunk_size, action_dim),
    action_mask (B, chunk_size); indices are clamped to each frame's own episode."""
    first, last = data.first[idx][:, None], data.last[idx][:, None]
    oi = idx[:, None] + xp.arange(1 - n_obs_steps, 1)[None, :]
    ai = idx[:, None] + xp.arange(chunk_size)[None, :]
    images = None
    if data.images is not None:
        pixels = data.images[xp.maximum(oi, first)].astype(xp.float32)
        images = (pixels / 255.0 - data.img_mean) / data.img_std
    return Batch(data.obs[xp.maximum(oi, first)], oi >= first, data.action[xp.minimum(ai, last)], ai <= last,
                 images)


@functools.lru_cache(maxsize=None)
def _jitted():
    """(jitted gather at given indices, jitted uniform sample), compiled per static shape."""
    import jax

    @functools.partial(jax.jit, static_argnums=(2, 3))
    def at(data, idx, n_obs, chunk):
        import jax.numpy as jnp

        return gather_windows(data, idx, n_obs, chunk, jnp)

    @functools.partial(jax.jit, static_argnums=(2, 3, 4))
    def sample(data, key, batch_size, n_obs, chunk):
        return sample_windows(data, key, batch_size, n_obs, chunk)

    return at, sample


def sample_windows(data: WindowData, key, batch_size: int, n_obs_steps: int, chunk_size: int) -> Batch:
    """A pure JAX batch of ``batch_size`` windows ending at frames drawn uniformly from all of
    ``data``'s frames (jit/scan it inside a train step; ``data`` as JAX arrays)."""
    import jax
    import jax.numpy as jnp

    idx = jax.random.randint(key, (batch_size,), 0, data.obs.shape[0])
    return gather_windows(data, idx, n_obs_steps, chunk_size, jnp)


def _positive(batch_size) -> int:
    if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) or batch_size < 1:
        raise CaliperError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    return int(batch_size)


class WindowDataset:
    """Normalised windows of the episodes ``episode_ids`` (positions in ``frames``; default all)
    for a policy of ``config`` (``n_obs_steps``, ``chunk_size``)."""

    def __init__(self, frames: Frames, config, normalizer: Normalizer, episode_ids=None):
        sub = frames if episode_ids is None else frames.select(episode_ids)
        if sub.num_episodes == 0 or sub.num_frames == 0:
            raise CaliperError("a window dataset needs at least one episode with frames (empty selection)")
        dims = (sub.obs.shape[1], sub.action.shape[1])
        if (normalizer.obs_mean.shape[0], normalizer.act_mean.shape[0]) != dims:
            raise CaliperError(f"normaliser is for obs_dim {normalizer.obs_mean.shape[0]}, action_dim "
                               f"{normalizer.act_mean.shape[0]}; the frames have {dims[0]}, {dims[1]}")
        self.frames = sub
        self.n_obs_steps = int(config.n_obs_steps)
        self.chunk_size = int(config.chunk_size)
        self.normalizer = normalizer
        ep = np.repeat(np.arange(sub.num_episodes), sub.lengths)
        first, last = sub.starts[ep], (sub.starts + sub.lengths - 1)[ep]
        if (sub.images is None) != (normalizer.img_mean is None):
            raise CaliperError("the frames have camera images but the normaliser has no image statistics"
                               if sub.images is not None else "the normaliser has image statistics but the "
                               "frames have no camera images")
        self.host = WindowData(np.asarray(normalizer.obs(sub.obs), np.float32),
                               np.asarray(normalizer.action(sub.action), np.float32),
                               first.astype(np.int32), last.astype(np.int32), sub.images,
                               normalizer.img_mean, normalizer.img_std)
        self._device = None

    def __len__(self) -> int:
        return self.frames.num_frames

    @property
    def data(self) -> WindowData:
        """The :class:`WindowData` as JAX arrays (moved to the default device once; concrete even
        when first asked for inside a trace)."""
        if self._device is None:
            import jax

            with jax.ensure_compile_time_eval():
                self._device = jax.tree_util.tree_map(jax.numpy.asarray, self.host)
        return self._device

    def windows(self, idx) -> Batch:
        """NumPy :class:`Batch` of the windows ending at frames ``idx`` (B,) (0..len-1)."""
        idx = np.asarray(idx, np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            raise CaliperError(f"frame indices out of range 0..{len(self) - 1}")
        return gather_windows(self.host, idx, self.n_obs_steps, self.chunk_size, np)

    def sample_batch(self, key, batch_size: int) -> Batch:
        """JAX :class:`Batch` of ``batch_size`` windows ending at frames drawn uniformly (with
        replacement) from every frame; deterministic given ``key``."""
        return _jitted()[1](self.data, key, _positive(batch_size), self.n_obs_steps, self.chunk_size)

    def iter_epoch(self, key=None, batch_size: int = 256, drop_last: bool = False):
        """JAX batches covering every frame once (shuffled by ``key``; in order when None); the last
        batch is smaller unless ``drop_last``."""
        n, batch_size = len(self), _positive(batch_size)
        if key is None:
            order = np.arange(n)
        else:
            import jax

            order = np.asarray(jax.random.permutation(key, n))
        stop = n - n % batch_size if drop_last else n
        for s in range(0, stop, batch_size):
            idx = order[s:s + batch_size].astype(np.int32)
            yield _jitted()[0](self.data, idx, self.n_obs_steps, self.chunk_size)

    def prefetch(self, key, batch_size: int, num_batches: int | None = None, *, start: int = 0,
                 depth: int = 2) -> Prefetcher:
        """An iterator of ``sample_batch(fold_in(key, i), batch_size)`` for i = start, start + 1, ...
        (``num_batches`` of them, or forever), made ``depth`` ahead on a background thread. Batch i
        depends only on (key, i), so a resumed run at step ``start`` sees the same batches."""
        import jax

        _jitted()
        _ = self.data  # make the jitted functions and device arrays here, not on the producer thread

        def make(i):
            return jax.block_until_ready(self.sample_batch(jax.random.fold_in(key, i), batch_size))

        stop = None if num_batches is None else start + int(num_batches)
        return Prefetcher(make, start, stop, depth)


class Prefetcher:
    """Iterator over ``make(i)`` for i in [start, stop) (forever when stop is None), computed by one
    background thread into a bounded queue of ``depth``; order is deterministic. ``close()`` (or use
    as a context manager) stops the thread; an exception in ``make`` is re-raised by ``next``."""

    def __init__(self, make, start: int = 0, stop: int | None = None, depth: int = 2):
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, int(depth)))
        self._stop = threading.Event()
        self._finished = False
        self._thread = threading.Thread(target=self._run, args=(make, start, stop), daemon=True,
                                        name="caliper-prefetch")
        self._thread.start()

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, make, start, stop):
        i = start
        try:
            while (stop is None or i < stop) and not self._stop.is_set():
                if not self._put(("ok", make(i))):
                    return
                i += 1
        except BaseException as exc:  # noqa: B036 -- handed to the consumer thread
            self._put(("error", exc))
            return
        self._put(("done", None))

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        kind, value = self._queue.get()
        if kind == "ok":
            return value
        self._finished = True
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self) -> None:
        self._stop.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self._stop.set()


# -- everything together ----------------------------------------------------------------------------
@dataclass
class Split:
    """What training needs from a dataset: the train/val windows and the train-split statistics."""

    train: WindowDataset
    val: WindowDataset | None
    normalizer: Normalizer
    train_ids: np.ndarray
    val_ids: np.ndarray


def prepare(frames: Frames, config, val_fraction: float, key_or_seed=0) -> Split:
    """Split ``frames`` by episode, fit the normaliser on the train episodes, build both windowed
    datasets (``val`` None when the split leaves no validation episode)."""
    train_ids, val_ids = split_episodes(frames.num_episodes, val_fraction, key_or_seed)
    norm = fit_normalizer(frames, train_ids)
    val = WindowDataset(frames, config, norm, val_ids) if len(val_ids) else None
    return Split(WindowDataset(frames, config, norm, train_ids), val, norm, train_ids, val_ids)


__all__ = ["IMAGE_BUDGET_MB", "Frames", "episode_images",
           "Prefetcher", "Split", "WindowData", "WindowDataset", "fit_normalizer", "gather_windows",
           "load_frames", "prepare", "sample_windows", "split_episodes"]
