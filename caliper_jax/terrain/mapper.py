"""A 2.5-D elevation map in JAX: per-cell height and variance fused from point clouds.

The map is a pytree of arrays (:class:`ElevationMap`) on the world lattice of cell centres
``(k + 0.5) * resolution``; every function here is pure, one map per call, jittable and vmappable
over maps (scenes, worlds). ``jax.jit``/``jax.vmap`` are applied by callers (the harness in
:mod:`caliper_jax.terrain.run`).

Layout: ``height[r, c]`` is the surface z (world, metres) of the cell whose centre is
``x = (origin_cell[0] + c + 0.5) * resolution``, ``y = (origin_cell[1] + r + 0.5) * resolution``,
so rows run along +y and columns along +x (an ``(m, n)`` map is ``len(ys) x len(xs)``).

Fusion (:func:`fuse`), per frame, with segment reductions and one sort (no Python loops):

1. each valid point falls in one cell by integer indexing (``floor(x / resolution)``); points
   outside the map are ignored;
2. its height variance grows with its range ``r`` from the sensor origin:
   ``var = (sigma + sigma_range * r) ** 2`` (the sensors' noise model);
3. the frame's *anchor* of a cell is the median height of its ``anchor_points`` points nearest the
   cell centre in (x, y) (the truth is the surface at the centre: for a cell straddling an edge the
   nearest points are on the centre's side; the median of three survives one spike);
4. *face cells*: a cell whose points spread in height beyond ``face_spread`` (plus noise) with none
   within ``face_radius`` cells of its centre holds a vertical face but no evidence of the surface
   at its centre (a wall top never seen, a trench edge; most points also disagree with the anchor,
   so one spike is not a face): the frame neither starts nor updates the cell, and clears a known
   cell whose estimate most of the points disagree with too (``face_clears``);
5. gating: a point is an inlier when ``(z - ref) ** 2 <= gate ** 2 * (ref_var + var + sigma_cell ** 2)``
   with ``ref`` the cell's estimate (``ref_var`` its variance) for a known cell and the anchor
   (``ref_var = 0``) for a new one; ``sigma_cell`` allows for a slope across one cell. A cell's inliers
   combine into one measurement, the inverse-variance weighted mean with variance
   ``max(1 / sum(1 / var), min_variance)`` (the floor: errors within one frame are correlated);
6. a scalar Kalman update merges it into a known cell (``process_noise`` added first); a new cell
   takes the frame's own measurement (its points gated against the anchor), once a frame has a
   return more than ``start_margin`` cells inside its edges (a return on the cell's edge -- a face
   along it -- belongs as much to the neighbour);
7. the stuck-map rule: when a known cell's own measurement this frame (gated against the anchor)
   disagrees with its estimate beyond the gate, the frame is not fused; if it has a return within
   ``reset_radius`` cells of the centre it is counted in ``outliers`` (signed: + above, - below),
   and after ``reset_frames`` such frames in a row on the same side the cell restarts from that
   measurement -- an obstacle that appears (or leaves) is taken; a single spike, noise that flips
   sides, or returns only along the cell's edge (a face on its boundary) never restart it. A frame
   without a central return keeps the count.

:func:`shift` moves the map by whole cells (world-fixed features keep their world position);
:func:`traversability` rates cells in [0, 1] from slope, step height and roughness.
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.errors import CaliperError


class ElevationMap(NamedTuple):
    """An elevation map (one instance; a leading batch axis on every leaf for a vmapped batch).

    height       (m, n) float   surface z, world frame (m); NaN where not ``valid``
    variance     (m, n) float   variance of ``height`` (m^2); inf where not ``valid``
    valid        (m, n) bool    the cell has been observed
    last_update  (m, n) int32   ``time`` of the frame that last changed the cell (-1: never)
    updates      (m, n) int32   frames that changed the cell (fused, started, restarted, cleared)
    hits         (m, n) int32   returns that fell in the cell, all frames (fused or not)
    outliers     (m, n) int32   consecutive frames whose own measurement disagreed with the cell,
                                signed (+ above the estimate, - below)
    origin_cell  (2,)   int32   world lattice index (kx, ky) of cell [0, 0]
    resolution   ()     float   cell size (m)
    time         ()     int32   frames fused so far
    """

    height: jax.Array
    variance: jax.Array
    valid: jax.Array
    last_update: jax.Array
    updates: jax.Array
    hits: jax.Array
    outliers: jax.Array
    origin_cell: jax.Array
    resolution: jax.Array
    time: jax.Array


@dataclasses.dataclass(frozen=True)
class MapParams:
    """Fusion settings (static: hashable, part of the jit cache key, never traced).

    sigma          range-independent std of a point's height (m)
    sigma_range    std growth per metre of range from the sensor origin (m/m)
    gate           Mahalanobis gate (in standard deviations) against the cell's reference
    sigma_cell     height spread allowed within one cell by the gate only (m; a slope across a cell)
    min_variance   floor of a frame measurement's variance (m^2): correlated errors do not average out
    process_noise  variance added to every known cell per frame (m^2; 0 for a static world)
    reset_frames   frames in a row disagreeing on the same side before a cell restarts
    reset_radius   only a frame with a return within this many cells of the centre counts for that
    start_margin   a new cell starts only from a frame with a return more than this many cells
                   inside its edges (a return on the edge -- a face along it -- belongs as much to
                   the neighbour)
    max_variance   a known cell's variance is capped here (m^2)
    anchor         "nearest": the median of the ``anchor_points`` points nearest the cell centre;
                   "median": the median of all the cell's points in the frame
    anchor_points  points of the "nearest" anchor
    face_spread    height spread (m, beyond noise) of a face cell's points in one frame
    face_radius    a face cell has no point within this many cells of its centre
    face_clears    a face frame clears a known cell (else it only does not update it)
    """

    sigma: float = 0.003
    sigma_range: float = 0.002
    gate: float = 3.0
    sigma_cell: float = 0.005
    min_variance: float = 1e-6
    process_noise: float = 0.0
    reset_frames: int = 2
    reset_radius: float = 0.35
    start_margin: float = 0.05
    max_variance: float = 1.0
    anchor: str = "nearest"
    anchor_points: int = 3
    face_spread: float = 0.03
    face_radius: float = 0.25
    face_clears: bool = True

    def __post_init__(self):
        for name in ("sigma", "sigma_range", "sigma_cell", "min_variance", "process_noise"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise CaliperError(f"MapParams.{name} must be a finite number >= 0, got {v!r}")
        if not (self.sigma > 0 or self.min_variance > 0):
            raise CaliperError("MapParams: sigma and min_variance are both 0 (a measurement would have "
                               "zero variance)")
        if not (isinstance(self.gate, (int, float)) and self.gate > 0):
            raise CaliperError(f"MapParams.gate must be > 0, got {self.gate!r}")
        if not (isinstance(self.max_variance, (int, float)) and self.max_variance > 0):
            raise CaliperError(f"MapParams.max_variance must be > 0, got {self.max_variance!r}")
        for name in ("face_spread", "face_radius", "reset_radius"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and v >= 0):
                raise CaliperError(f"MapParams.{name} must be a number >= 0, got {v!r}")
        if not (isinstance(self.anchor_points, int) and 1 <= self.anchor_points <= 9):
            raise CaliperError(f"MapParams.anchor_points must be an integer in [1, 9], "
                               f"got {self.anchor_points!r}")
        if not (isinstance(self.start_margin, (int, float)) and 0.0 <= self.start_margin < 0.5):
            raise CaliperError(f"MapParams.start_margin must be in [0, 0.5), got {self.start_margin!r}")
        if self.anchor not in ("nearest", "median"):
            raise CaliperError(f"MapParams.anchor must be 'nearest' or 'median', got {self.anchor!r}")
        if not (isinstance(self.reset_frames, int) and self.reset_frames >= 1):
            raise CaliperError(f"MapParams.reset_frames must be an integer >= 1, got {self.reset_frames!r}")


@dataclasses.dataclass(frozen=True)
class TraversabilityParams:
    """Traversability settings (static).

    window        half-size (cells) of the square window of the plane fit (slope, roughness)
    step_window   half-size (cells) of the window of the step height (max - min)
    max_slope_deg slope at which a cell becomes untraversable (degrees)
    max_step      step height at which a cell becomes untraversable (m)
    max_roughness RMS residual about the local plane at which a cell becomes untraversable (m)
    min_valid     fraction of known cells a window needs; below it the cell is rated 0 (unknown)
    """

    window: int = 2
    step_window: int = 1
    max_slope_deg: float = 30.0
    max_step: float = 0.15
    max_roughness: float = 0.05
    min_valid: float = 0.5

    def __post_init__(self):
        for name in ("window", "step_window"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                raise CaliperError(f"TraversabilityParams.{name} must be an integer >= 1, got {v!r}")
        for name in ("max_slope_deg", "max_step", "max_roughness"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise CaliperError(f"TraversabilityParams.{name} must be a finite number > 0, got {v!r}")
        if not 0.0 < self.min_valid <= 1.0:
            raise CaliperError(f"TraversabilityParams.min_valid must be in (0, 1], got {self.min_valid!r}")


jax.tree_util.register_static(MapParams)
jax.tree_util.register_static(TraversabilityParams)


# ---- the lattice --------------------------------------------------------------------------------

def cells_of(size_m, resolution) -> tuple[int, int]:
    """Cells (nx, ny) of a ``size_m`` (one number: a square; or (sx, sy)) map at ``resolution``."""
    sx, sy = (size_m, size_m) if np.ndim(size_m) == 0 else tuple(size_m)
    res = float(resolution)
    if not (math.isfinite(res) and res > 0):
        raise CaliperError(f"resolution must be a finite number > 0 (m), got {resolution!r}")
    out = []
    for name, s in (("x", sx), ("y", sy)):
        s = float(s)
        n = int(round(s / res))
        if not (math.isfinite(s) and s > 0) or n < 1:
            raise CaliperError(f"size_m ({name}) must be a positive number of metres at least one cell "
                               f"({res} m) wide, got {s!r}")
        out.append(n)
    return out[0], out[1]


def origin_cell_for(center_xy, shape, resolution):
    """World lattice index (kx, ky) of cell [0, 0] of an ``(m, n)`` map centred on ``center_xy``:
    ``round(center / resolution - n / 2)`` per axis (JAX or NumPy in, int32 out)."""
    m, n = shape
    c = jnp.asarray(center_xy, dtype=jnp.result_type(float))
    half = jnp.asarray([n / 2.0, m / 2.0], c.dtype)
    return jnp.round(c / resolution - half).astype(jnp.int32)


def host_resolution(emap: ElevationMap) -> float:
    """The map's resolution as a Python float: the shortest decimal that rounds to the stored
    value (a float32 map made with 0.04 gives 0.04, not 0.03999999910593033)."""
    r = np.asarray(emap.resolution).reshape(-1)[0]
    return float(np.format_float_positional(r, unique=True))


def cell_centers(emap: ElevationMap) -> tuple[np.ndarray, np.ndarray]:
    """The world cell centres of one map as NumPy float64: xs (n,), ys (m,), ascending."""
    m, n = np.shape(emap.height)[-2:]
    k = np.asarray(emap.origin_cell, dtype=np.int64)
    res = host_resolution(emap)
    xs = (k[0] + np.arange(n) + 0.5) * res
    ys = (k[1] + np.arange(m) + 0.5) * res
    return xs, ys


def init_map(size_m, resolution, center_xy=(0.0, 0.0), *, dtype=None) -> ElevationMap:
    """An empty map of ``size_m`` (m; a number or (sx, sy)) at ``resolution`` (m) centred on
    ``center_xy`` (world, m). ``dtype``: JAX's default float unless given."""
    nx, ny = cells_of(size_m, resolution)
    center = np.asarray(center_xy, dtype=np.float64)
    if center.shape != (2,) or not np.all(np.isfinite(center)):
        raise CaliperError(f"center_xy must be two finite numbers (x, y in metres), got {center_xy!r}")
    dtype = jnp.dtype(dtype) if dtype is not None else jnp.result_type(float)
    shape = (ny, nx)
    return ElevationMap(
        height=jnp.full(shape, jnp.nan, dtype),
        variance=jnp.full(shape, jnp.inf, dtype),
        valid=jnp.zeros(shape, bool),
        last_update=jnp.full(shape, -1, jnp.int32),
        updates=jnp.zeros(shape, jnp.int32),
        hits=jnp.zeros(shape, jnp.int32),
        outliers=jnp.zeros(shape, jnp.int32),
        origin_cell=origin_cell_for(center, shape, float(resolution)),
        resolution=jnp.asarray(resolution, dtype),
        time=jnp.asarray(0, jnp.int32),
    )


# ---- fusion -------------------------------------------------------------------------------------

def _segment_anchor(z, dist2, seg, count, nseg, k: int):
    """Per segment: the median height of its ``k`` points nearest the cell centre (all of them when
    it has fewer; the nearest one of two) and the smallest ``dist2``. One sort by (segment, dist2).
    Returns (anchor (nseg,), nearest dist2 (nseg,)); 0 and inf where a segment is empty."""
    order = jnp.lexsort((dist2, seg))
    zs, ds = z[order], dist2[order]
    start = jnp.cumsum(count) - count
    last = z.shape[0] - 1
    picks = [zs[jnp.clip(start + i, 0, last)] for i in range(k)]
    have = [count > i for i in range(k)]
    # median of the first min(count, k) values: sort the k picks (k is small and static), missing
    # ones pushed to +inf, and take the middle of those present (the nearest one for two)
    vals = jnp.stack([jnp.where(h, v, jnp.inf) for h, v in zip(have, picks, strict=True)])
    ranked = jnp.sort(vals, axis=0)
    n = jnp.minimum(count, k)
    mid = jnp.where(n == 2, 0, (n - 1) // 2)
    med = jnp.take_along_axis(ranked, mid[None, :], axis=0)[0]
    anchor = jnp.where(n == 2, picks[0], med)
    return jnp.where(count > 0, anchor, 0.0), jnp.where(count > 0, ds[jnp.clip(start, 0, last)], jnp.inf)


def _segment_median(values, seg, count, nseg):
    """Lower median of ``values`` (N,) per segment ``seg`` (N,) in [0, nseg) -> (nseg,) (0 where empty)."""
    order = jnp.lexsort((values, seg))
    sorted_vals = values[order]
    start = jnp.cumsum(count) - count
    pos = jnp.clip(start + jnp.maximum(count - 1, 0) // 2, 0, values.shape[0] - 1)
    return jnp.where(count > 0, sorted_vals[pos], 0.0)


def _measure(ok, seg, z, ref, w, nseg):
    """Inverse-variance weighted mean of the points ``ok`` per segment: (mean, sum of weights, count)."""
    wz = jnp.where(ok, w, 0.0)
    sw = jax.ops.segment_sum(wz, seg, nseg)
    swr = jax.ops.segment_sum(wz * (z - ref[seg]), seg, nseg)       # residuals: float32-safe sums
    cnt = jax.ops.segment_sum(ok.astype(jnp.int32), seg, nseg)
    mean = ref + jnp.where(sw > 0, swr / jnp.where(sw > 0, sw, 1.0), 0.0)
    return mean, sw, cnt


def fuse(emap: ElevationMap, points, valid, origin, params: MapParams = MapParams()) -> ElevationMap:
    """Fuse one point cloud into the map.

    points (N, 3) world frame (m; rows may be NaN where not valid), valid (N,) bool, origin (3,) the
    sensor origin (world, m) the ranges are measured from. Returns the updated map (``time`` + 1).
    Pure; jit with the map and arrays traced (``params`` is static).
    """
    height, variance, known = emap.height, emap.variance, emap.valid
    m, n = height.shape
    ncell = m * n
    nseg = ncell + 1                                   # the last segment collects unused points
    dtype = height.dtype
    res = emap.resolution.astype(dtype)
    points = jnp.asarray(points, dtype)
    valid = jnp.asarray(valid, bool)
    origin = jnp.asarray(origin, dtype)

    # cells by integer indexing (module doc, step 1)
    finite = valid & jnp.all(jnp.isfinite(points), axis=-1)
    p = jnp.where(finite[:, None], points, 0.0)
    col = jnp.floor(p[:, 0] / res).astype(jnp.int32) - emap.origin_cell[0]
    row = jnp.floor(p[:, 1] / res).astype(jnp.int32) - emap.origin_cell[1]
    inside = finite & (col >= 0) & (col < n) & (row >= 0) & (row < m)
    seg = jnp.where(inside, row * n + col, ncell)
    z = p[:, 2]
    count = jax.ops.segment_sum(inside.astype(jnp.int32), seg, nseg)

    # range-dependent variance (2)
    rng = jnp.linalg.norm(p - origin, axis=-1)
    var_pt = jnp.maximum((params.sigma + params.sigma_range * rng) ** 2, jnp.asarray(1e-12, dtype))
    w = 1.0 / var_pt
    g2 = params.gate ** 2
    var_gate = var_pt + params.sigma_cell ** 2

    # the frame's anchor per cell: the median of the points nearest the centre (3)
    cx = (col.astype(dtype) + emap.origin_cell[0] + 0.5) * res
    cy = (row.astype(dtype) + emap.origin_cell[1] + 0.5) * res
    d2 = jnp.where(inside, (p[:, 0] - cx) ** 2 + (p[:, 1] - cy) ** 2, jnp.inf)
    if params.anchor == "median":
        anchor = _segment_median(jnp.where(inside, z, jnp.inf), seg, count, nseg)
        near_d2 = jax.ops.segment_min(d2, seg, nseg)
    else:
        anchor, near_d2 = _segment_anchor(z, d2, seg, count, nseg, params.anchor_points)

    # the frame's own measurement, gated against its anchor (5)
    ok_fresh = inside & ((z - anchor[seg]) ** 2 <= g2 * var_gate)
    z_fresh, sw_fresh, n_fresh = _measure(ok_fresh, seg, z, anchor, w, nseg)

    # a vertical face in the cell and nothing to tell which side of it the centre is on (4): heights
    # spread beyond noise, no point within face_radius cells of the centre, and most points away
    # from the anchor (one spike among ground returns is not a face)
    z_hi = jax.ops.segment_max(jnp.where(inside, z, -jnp.inf), seg, nseg)
    z_lo = jax.ops.segment_min(jnp.where(inside, z, jnp.inf), seg, nseg)
    mean_var = jax.ops.segment_sum(jnp.where(inside, var_gate, 0.0), seg, nseg) / jnp.maximum(count, 1)
    spread_tol = params.face_spread + 2.0 * params.gate * jnp.sqrt(mean_var)
    face = ((count > 0) & (z_hi - z_lo > spread_tol) & (near_d2 > (params.face_radius * res) ** 2)
            & (2 * n_fresh < count))

    # the update's measurement: points gated against the cell's estimate where it is known (5)
    k_flat = jnp.append(known.reshape(-1), False)
    h_flat = jnp.append(jnp.where(known, height, 0.0).reshape(-1), 0.0)
    v_flat = jnp.append(jnp.where(known, variance, 0.0).reshape(-1), 0.0)
    ref = jnp.where(k_flat, h_flat, anchor)
    ok = inside & ((z - ref[seg]) ** 2 <= g2 * (jnp.where(k_flat, v_flat, 0.0)[seg] + var_gate))
    z_meas, sw, n_ok = _measure(ok, seg, z, ref, w, nseg)

    def cells(x):
        return x[:ncell].reshape(m, n)

    z_fresh, sw_fresh, n_fresh, face = cells(z_fresh), cells(sw_fresh), cells(n_fresh), cells(face)
    z_meas, sw, n_ok = cells(z_meas), cells(sw), cells(n_ok)
    floor = jnp.asarray(params.min_variance, dtype)
    var_meas = jnp.maximum(1.0 / jnp.where(sw > 0, sw, 1.0), floor)
    var_fresh = jnp.maximum(1.0 / jnp.where(sw_fresh > 0, sw_fresh, 1.0), floor)
    usable = (n_fresh > 0) & ~face

    # the stuck-map rule (7): the frame's own measurement disagrees with a known cell
    h0 = jnp.where(known, height, 0.0)
    v0 = jnp.where(known, variance, 1.0) + params.process_noise
    dz = z_fresh - h0
    rejected = known & usable & (dz ** 2 > g2 * (v0 + var_fresh + params.sigma_cell ** 2))
    side = jnp.where(dz > 0, 1, -1).astype(jnp.int32)
    prev = emap.outliers
    # only a frame with a return near the centre has a say (points along the cell's edge, e.g. a
    # face on its boundary, do not restart it); a frame without one keeps the count
    central = usable & (cells(near_d2) <= (params.reset_radius * res) ** 2)
    streak = jnp.where(rejected & central, jnp.where(prev * side > 0, prev + side, side),
                       jnp.where(central, 0, prev))
    reset = rejected & central & (jnp.abs(streak) >= params.reset_frames)
    streak = jnp.where(reset, 0, streak)

    # the Kalman update of known cells, the first measurement of new ones (6)
    gain = v0 / (v0 + var_meas)
    h_kf = h0 + gain * (z_meas - h0)
    v_kf = (1.0 - gain) * v0
    # a known cell is cleared by a face frame most of whose points also disagree with its estimate
    count_c = cells(count)
    cleared = known & face & (2 * n_ok < count_c) if params.face_clears else jnp.zeros_like(known)
    fused = known & ~rejected & (n_ok > 0) & ~cleared
    # a return on the cell's edge (a face along it) belongs as much to the neighbour: a cell starts
    # from a frame with a return more than start_margin cells inside its edges
    dinf = jnp.where(inside, jnp.maximum(jnp.abs(p[:, 0] - cx), jnp.abs(p[:, 1] - cy)), jnp.inf)
    interior = cells(jax.ops.segment_min(dinf, seg, nseg)) < (0.5 - params.start_margin) * res
    fresh = ~known & usable & interior

    new_h = jnp.where(fused, h_kf, jnp.where(fresh | reset, z_fresh, height))
    new_v = jnp.where(fused, v_kf, jnp.where(fresh | reset, var_fresh, jnp.where(known, v0, variance)))
    new_v = jnp.where(known | fresh, jnp.minimum(new_v, params.max_variance), new_v)
    new_h = jnp.where(cleared, jnp.nan, new_h)
    new_v = jnp.where(cleared, jnp.inf, new_v)
    streak = jnp.where(cleared, 0, streak)
    changed = fused | fresh | reset | cleared
    return emap._replace(
        height=new_h, variance=new_v, valid=(known | fresh) & ~cleared,
        last_update=jnp.where(changed, emap.time, emap.last_update),
        updates=emap.updates + changed.astype(jnp.int32),
        hits=emap.hits + count_c,
        outliers=streak.astype(jnp.int32),
        time=emap.time + 1,
    )


def fuse_sequence(emap: ElevationMap, points, valid, origins,
                  params: MapParams = MapParams()) -> ElevationMap:
    """Fuse F frames in order with ``lax.scan``: points (F, N, 3), valid (F, N), origins (F, 3)."""
    def step(e, frame):
        return fuse(e, *frame, params), None

    out, _ = jax.lax.scan(step, emap, (points, valid, origins))
    return out


# ---- moving the map -----------------------------------------------------------------------------

def shift(emap: ElevationMap, center_xy) -> ElevationMap:
    """The map re-centred on ``center_xy`` (world, m) by whole cells: a cell keeps its world
    position, cells that leave the map are dropped and cells that enter it are unknown. Pure;
    ``center_xy`` may be traced."""
    m, n = emap.height.shape
    res = emap.resolution
    new_origin = origin_cell_for(jnp.asarray(center_xy, res.dtype), (m, n), res)
    dx = new_origin[0] - emap.origin_cell[0]
    dy = new_origin[1] - emap.origin_cell[1]
    cols = jnp.arange(n) + dx
    rows = jnp.arange(m) + dy
    keep = ((rows >= 0) & (rows < m))[:, None] & ((cols >= 0) & (cols < n))[None, :]
    rc, cc = jnp.clip(rows, 0, m - 1), jnp.clip(cols, 0, n - 1)

    def move(layer, empty):
        return jnp.where(keep, layer[rc][:, cc], jnp.asarray(empty, layer.dtype))

    return emap._replace(
        height=move(emap.height, jnp.nan), variance=move(emap.variance, jnp.inf),
        valid=move(emap.valid, False), last_update=move(emap.last_update, -1),
        updates=move(emap.updates, 0), hits=move(emap.hits, 0), outliers=move(emap.outliers, 0),
        origin_cell=new_origin.astype(jnp.int32),
    )


# ---- traversability -----------------------------------------------------------------------------

def _window_views(a, half, fill):
    """The (2 half + 1)^2 shifted views of ``a`` (m, n): list of ((dy, dx), view)."""
    padded = jnp.pad(a, half, constant_values=fill)
    m, n = a.shape
    return [((dy, dx), padded[half + dy:half + dy + m, half + dx:half + dx + n])
            for dy in range(-half, half + 1) for dx in range(-half, half + 1)]


def traversability(emap: ElevationMap, params: TraversabilityParams = TraversabilityParams()):
    """(m, n) float in [0, 1]: 1 is flat, smooth ground; 0 is a slope of ``max_slope_deg``, a step of
    ``max_step``, roughness ``max_roughness`` or worse, or a cell too little known to rate.

    Per cell, over a ``2 window + 1`` square of known cells: a least-squares plane gives the slope
    and the RMS residual (roughness); over a ``2 step_window + 1`` square, max - min of height is
    the step. The rating is ``1 - max(slope / max_slope, step / max_step, rough / max_roughness)``,
    clipped to [0, 1]. Pure, jittable, vmappable.
    """
    h = jnp.where(emap.valid, emap.height, 0.0)
    wv = emap.valid.astype(h.dtype)
    res = emap.resolution.astype(h.dtype)
    dtype = h.dtype

    views_h = _window_views(h, params.window, 0.0)
    views_w = _window_views(wv, params.window, 0.0)
    s = {k: jnp.zeros_like(h) for k in ("w", "x", "y", "z", "xx", "xy", "yy", "xz", "yz", "zz")}
    for ((dy, dx), vh), (_, vw) in zip(views_h, views_w, strict=True):
        x, y = dx * res, dy * res
        vh = vh - h                  # relative to the window's own cell: no large offset to cancel
        s["w"] += vw
        s["x"] += vw * x
        s["y"] += vw * y
        s["z"] += vw * vh
        s["xx"] += vw * x * x
        s["xy"] += vw * x * y
        s["yy"] += vw * y * y
        s["xz"] += vw * x * vh
        s["yz"] += vw * y * vh
        s["zz"] += vw * vh * vh
    cnt = s["w"]
    safe = jnp.maximum(cnt, 1.0)
    mx, my, mz = s["x"] / safe, s["y"] / safe, s["z"] / safe
    cxx = s["xx"] / safe - mx * mx
    cxy = s["xy"] / safe - mx * my
    cyy = s["yy"] / safe - my * my
    cxz = s["xz"] / safe - mx * mz
    cyz = s["yz"] / safe - my * mz
    czz = s["zz"] / safe - mz * mz
    det = cxx * cyy - cxy * cxy
    eps = jnp.asarray(1e-6, dtype) * res ** 4
    good = det > eps
    det_s = jnp.where(good, det, 1.0)
    a = jnp.where(good, (cxz * cyy - cyz * cxy) / det_s, 0.0)
    b = jnp.where(good, (cyz * cxx - cxz * cxy) / det_s, 0.0)
    slope = jnp.degrees(jnp.arctan(jnp.sqrt(a * a + b * b)))
    resid = czz - a * cxz - b * cyz                    # mean squared residual about the plane
    rough = jnp.sqrt(jnp.maximum(resid, 0.0))

    big = jnp.asarray(jnp.finfo(dtype).max, dtype)
    hmax = jnp.where(emap.valid, emap.height, -big)
    hmin = jnp.where(emap.valid, emap.height, big)
    top = jnp.max(jnp.stack([v for _, v in _window_views(hmax, params.step_window, -big)]), axis=0)
    bottom = jnp.min(jnp.stack([v for _, v in _window_views(hmin, params.step_window, big)]), axis=0)
    step = jnp.where(top >= bottom, top - bottom, 0.0)

    cost = jnp.maximum(jnp.maximum(slope / params.max_slope_deg, step / params.max_step),
                       rough / params.max_roughness)
    full = (2 * params.window + 1) ** 2
    rated = emap.valid & good & (cnt >= params.min_valid * full)
    return jnp.where(rated, jnp.clip(1.0 - cost, 0.0, 1.0), 0.0)


def to_numpy(emap: ElevationMap) -> dict:
    """The layers of one map as NumPy arrays (``xs``, ``ys`` cell centres included)."""
    xs, ys = cell_centers(emap)
    out = {name: np.asarray(getattr(emap, name)) for name in ElevationMap._fields}
    out.update(xs=xs, ys=ys)
    return out
