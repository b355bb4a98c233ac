"""The JAX elevation mapper (caliper_jax.terrain.mapper), its metrics and the harness.

Synthetic point clouds on known surfaces (flat, plane, step): fusion converges to the surface,
the variance follows the Kalman recursion (float64 reference), gating keeps outliers out, the
stuck-map rule lets an appearing obstacle in, shifting keeps world-fixed features, traversability
flags steps and steep slopes, metrics on hand-made arrays, vmap over a batch of maps, and one tiny
end-to-end run through the harness. Sizes are small: one compile of ``fuse`` serves most tests.
"""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from caliper_jax.errors import CaliperError
from caliper_jax.terrain import mapper as M
from caliper_jax.terrain import metrics as mt

RES = 0.04
SIZE = 1.6                      # 40 x 40 cells
NPTS = 6400                     # 4 points a cell on average (grid_cloud: exactly 4)
ORIGIN = np.array([0.0, 0.0, 1.0], np.float32)
PARAMS = M.MapParams(sigma=0.003, sigma_range=0.0)

_fuse = jax.jit(M.fuse)
_trav = jax.jit(M.traversability)
_shift = jax.jit(M.shift)


def cloud(surface, rng, *, n=NPTS, half=SIZE / 2, sigma=0.003):
    """n points uniform over the map with z = surface(x, y) + N(0, sigma)."""
    xy = rng.uniform(-half, half, (n, 2))
    z = surface(xy[:, 0], xy[:, 1]) + sigma * rng.standard_normal(n)
    return np.c_[xy, z].astype(np.float32), np.ones(n, bool)


def grid_cloud(surface, rng, *, per_cell=4, sigma=0.003):
    """per_cell points uniform inside every cell of the test map (every cell is seen)."""
    k = (np.arange(int(round(SIZE / RES))) - SIZE / RES / 2) * RES
    cx, cy = (a.reshape(-1) for a in np.meshgrid(k, k))
    xy = np.repeat(np.c_[cx, cy], per_cell, axis=0) + rng.uniform(0, RES, (cx.size * per_cell, 2))
    xy[::per_cell] = np.c_[cx, cy] + RES * rng.uniform(0.45, 0.55, (cx.size, 2))   # one near the centre
    z = surface(xy[:, 0], xy[:, 1]) + sigma * rng.standard_normal(len(xy))
    return np.c_[xy, z].astype(np.float32), np.ones(len(xy), bool)


def padded(points, valid=None, n=16):
    """A few hand-placed points padded to n rows (invalid) so the small-map tests share one compile."""
    points = np.asarray(points, np.float32)
    valid = np.ones(len(points), bool) if valid is None else np.asarray(valid, bool)
    pad = n - len(points)
    return np.r_[points, np.full((pad, 3), np.nan, np.float32)], np.r_[valid, np.zeros(pad, bool)]


def fused(surface, frames, rng, emap=None, params=PARAMS, *, every_cell=False, **kw):
    emap = M.init_map(SIZE, RES) if emap is None else emap
    for _ in range(frames):
        pts, ok = (grid_cloud if every_cell else cloud)(surface, rng, **kw)
        emap = _fuse(emap, pts, ok, ORIGIN, params)
    return emap


def errors(emap, surface):
    xs, ys = M.cell_centers(emap)
    truth = surface(xs[None, :], ys[:, None])
    ok = np.asarray(emap.valid)
    return (np.asarray(emap.height) - truth)[ok], ok


def flat(x, y):
    return 0.2 + 0 * (x + y)


def plane(x, y):
    return np.tan(np.radians(12.0)) * (0.8 * x - 0.6 * y) + 0.1


def step(x, y):
    return np.where(x > 0.13, 0.12, 0.0) + 0 * y         # the edge crosses cells, not a boundary


# ---- the lattice and construction -----------------------------------------------------------

def test_lattice_is_k_plus_half_resolution_and_centred():
    emap = M.init_map(8.0, 0.04)                          # 8 / 0.04 is 199.999... in floating point
    xs, ys = M.cell_centers(emap)
    assert emap.height.shape == (200, 200)
    k = xs / 0.04 - 0.5
    assert np.allclose(k, np.round(k), atol=1e-9) and xs[0] == pytest.approx(-3.98)
    assert xs[-1] == pytest.approx(3.98) and np.array_equal(xs, ys)
    e2 = M.init_map((1.0, 0.6), 0.1, center_xy=(10.03, -2.0))
    xs2, ys2 = M.cell_centers(e2)
    assert e2.height.shape == (6, 10)
    assert xs2.mean() == pytest.approx(10.0) and ys2.mean() == pytest.approx(-2.0)
    assert not bool(e2.valid.any()) and np.all(np.isnan(np.asarray(e2.height)))


@pytest.mark.parametrize("kwargs,field", [({"resolution": 0.0}, "resolution"),
                                          ({"size_m": -1.0}, "size_m"),
                                          ({"center_xy": (0.0, np.nan)}, "center_xy")])
def test_init_map_rejects_bad_input_naming_the_field(kwargs, field):
    args = {"size_m": 1.0, "resolution": 0.1, "center_xy": (0.0, 0.0), **kwargs}
    with pytest.raises(CaliperError, match=field):
        M.init_map(**args)


def test_params_are_checked():
    with pytest.raises(CaliperError, match="gate"):
        M.MapParams(gate=0.0)
    with pytest.raises(CaliperError, match="reset_frames"):
        M.MapParams(reset_frames=0)
    with pytest.raises(CaliperError, match="max_step"):
        M.TraversabilityParams(max_step=-1.0)


# ---- fusion on known surfaces ---------------------------------------------------------------

def test_flat_converges_and_variance_decreases():
    rng = np.random.default_rng(0)
    emap = M.init_map(SIZE, RES)
    medians = []
    for _ in range(4):
        pts, ok = cloud(flat, rng)
        emap = _fuse(emap, pts, ok, ORIGIN, PARAMS)
        medians.append(float(np.median(np.asarray(emap.variance)[np.asarray(emap.valid)])))
    err, ok = errors(emap, flat)
    assert ok.mean() == 1.0                                # 6400 points a frame, 1600 cells
    assert np.sqrt(np.mean(err ** 2)) < 0.003 / np.sqrt(4 * 2)   # ~4 points a cell a frame
    assert all(b < a for a, b in zip(medians, medians[1:], strict=False))
    assert int(emap.time) == 4 and int(np.asarray(emap.updates).max()) == 4


def test_plane_cells_hold_the_height_at_their_centre():
    emap = fused(plane, 3, np.random.default_rng(1))
    err, ok = errors(emap, plane)
    assert ok.mean() == 1.0 and np.abs(err).max() < 0.006 and abs(err.mean()) < 3e-4


def test_step_is_sharp_cells_straddling_the_edge_keep_their_centres_side():
    emap = fused(step, 3, np.random.default_rng(2))
    err, ok = errors(emap, step)
    assert ok.mean() > 0.995           # an edge cell whose points all sit far from its centre waits
    assert np.mean(np.abs(err) < 0.01) > 0.99             # a mean per cell would smear the edge column
    assert np.sqrt(np.mean(err ** 2)) < 0.01


@pytest.mark.x64
def test_one_cell_fusion_equals_the_kalman_recursion_float64():
    """Inverse-variance weighted mean per frame (range-dependent variances), then the scalar Kalman
    update, against a NumPy float64 reference."""
    params = M.MapParams(sigma=0.002, sigma_range=0.01, gate=50.0, min_variance=0.0, sigma_cell=0.0)
    rng = np.random.default_rng(3)
    emap = M.init_map(0.2, 0.1, dtype=jnp.float64)         # 2 x 2 cells; cell [0, 0] is x, y in [-0.1, 0)
    h_ref, v_ref = None, None
    fuse64 = jax.jit(M.fuse)
    for _ in range(3):
        origin = rng.uniform(-1, 1, 3) + [0, 0, 2]
        pts = np.c_[rng.uniform(-0.1, 0, (7, 2)), 0.05 + 0.004 * rng.standard_normal(7)]
        var = (0.002 + 0.01 * np.linalg.norm(pts - origin, axis=1)) ** 2
        zm = np.sum(pts[:, 2] / var) / np.sum(1 / var)
        vm = 1 / np.sum(1 / var)
        if h_ref is None:
            h_ref, v_ref = zm, vm
        else:
            h_ref, v_ref = (h_ref * vm + zm * v_ref) / (v_ref + vm), v_ref * vm / (v_ref + vm)
        emap = fuse64(emap, pts, np.ones(7, bool), origin, params)
        assert float(emap.height[0, 0]) == pytest.approx(h_ref, abs=1e-12)
        assert float(emap.variance[0, 0]) == pytest.approx(v_ref, rel=1e-10)
    assert np.asarray(emap.valid).tolist() == [[True, False], [False, False]]


def test_points_outside_the_map_invalid_or_nan_are_ignored():
    emap = M.init_map(0.2, 0.1)
    pts = np.array([[0.05, 0.05, 1.0], [5.0, 0.0, 9.0], [np.nan, 0.0, 0.0], [-0.05, 0.05, 7.0]], np.float32)
    out = _fuse(emap, *padded(pts, [True, True, True, False]), ORIGIN, PARAMS)
    assert np.asarray(out.valid).tolist() == [[False, False], [False, True]]
    assert float(out.height[1, 1]) == pytest.approx(1.0)


# ---- gating and the stuck-map rule ----------------------------------------------------------

def test_gating_rejects_outliers():
    rng = np.random.default_rng(4)
    emap = fused(flat, 3, rng)
    before = np.asarray(emap.height).copy()
    pts, ok = cloud(flat, rng)
    spikes = rng.random(len(pts)) < 0.15                   # 15% of the returns 0.3-1 m off
    pts[spikes, 2] += rng.choice([-1, 1], spikes.sum()) * rng.uniform(0.3, 1.0, spikes.sum())
    out = _fuse(emap, pts, ok, ORIGIN, PARAMS)
    clean = _fuse(emap, pts, ok & ~spikes, ORIGIN, PARAMS)          # the same frame without the spikes
    h_out, h_clean = np.asarray(out.height), np.asarray(clean.height)
    cleared = ~np.asarray(out.valid)
    cell = ((np.floor(pts[:, 1] / RES) + 20) * 40 + np.floor(pts[:, 0] / RES) + 20).astype(int)
    n_all = np.bincount(cell, minlength=1600).reshape(40, 40)
    n_spike = np.bincount(cell[spikes], minlength=1600).reshape(40, 40)
    same = np.isclose(h_out, h_clean, rtol=0, atol=1e-6)      # fused exactly what it would without spikes
    kept = h_out == before                                    # or not fused at all (spikes near the centre)
    assert np.all(same | kept | cleared) and (kept & ~same).mean() < 0.05
    # a cell is cleared only where spikes were at least half its returns (a face-like frame)
    assert np.all(2 * n_spike[cleared] >= n_all[cleared]) and cleared.mean() < 0.02
    err, _ = errors(out, flat)
    assert np.abs(err).max() < 0.01
    # in a new cell, the frame's own median gates: 3 spikes among 12 returns do not move it
    one = np.c_[np.full((12, 2), 0.05), np.r_[np.zeros(9), 0.5, 0.6, -0.4]].astype(np.float32)
    e1 = _fuse(M.init_map(0.2, 0.1), *padded(one), ORIGIN, PARAMS)
    assert abs(float(e1.height[1, 1])) < 1e-6


def test_an_obstacle_appearing_is_taken_after_reset_frames():
    rng = np.random.default_rng(5)
    params = M.MapParams(sigma=0.003, sigma_range=0.0, reset_frames=2)
    emap = fused(flat, 3, rng, params=params)

    def boxed(x, y):
        return np.where((np.abs(x - 0.3) < 0.2) & (np.abs(y) < 0.2), 0.5, 0.2)

    xs, ys = M.cell_centers(emap)
    inside = (np.abs(xs[None, :] - 0.3) < 0.18) & (np.abs(ys[:, None]) < 0.18)
    emap = fused(boxed, 1, rng, emap, params, every_cell=True)
    assert np.allclose(np.asarray(emap.height)[inside], 0.2, atol=0.01)      # one frame: gated out
    assert np.all(np.asarray(emap.outliers)[inside] == 1)
    emap = _fuse(emap, np.zeros((NPTS, 3), np.float32), np.zeros(NPTS, bool), ORIGIN, params)
    assert np.all(np.asarray(emap.outliers)[inside] == 1)                    # a frame that misses: kept
    emap = fused(boxed, 1, rng, emap, params, every_cell=True)
    assert np.allclose(np.asarray(emap.height)[inside], 0.5, atol=0.01)      # two in a row: taken
    assert np.all(np.asarray(emap.outliers)[inside] == 0)
    emap = fused(flat, 2, rng, emap, params, every_cell=True)                # and removed again
    assert np.allclose(np.asarray(emap.height)[inside], 0.2, atol=0.01)


def test_outliers_that_flip_sides_never_reset_a_cell():
    params = M.MapParams(sigma=0.003, sigma_range=0.0, reset_frames=2)
    emap = M.init_map(0.2, 0.1)
    base = np.c_[np.full((5, 2), 0.05), np.zeros(5)].astype(np.float32)
    emap = _fuse(emap, *padded(base), ORIGIN, params)
    for k in range(6):
        spike = base.copy()
        spike[:, 2] = 0.4 if k % 2 == 0 else -0.4
        emap = _fuse(emap, *padded(spike), ORIGIN, params)
        assert abs(float(emap.height[1, 1])) < 1e-6 and abs(int(emap.outliers[1, 1])) == 1


def test_a_vertical_face_seen_alone_does_not_make_a_cell():
    """Cell [1, 1] of a 0.2 m map spans x, y in [0, 0.1): points on a wall face along its edge
    x = 0.1 (heights spread over 0.4 m, none near the centre) say nothing about the centre."""
    y = np.linspace(0.01, 0.09, 8)
    wall = np.c_[np.full(8, 0.0999), y, np.linspace(0.0, 0.4, 8)]
    e0 = _fuse(M.init_map(0.2, 0.1), *padded(wall), ORIGIN, PARAMS)
    assert not bool(e0.valid[1, 1])
    # with returns near the centre the cell is measured, at the centre's height
    near = [[0.001, 0], [0, 0.002], [-0.002, 0], [0, -0.001]]
    centre = np.c_[np.full((4, 2), 0.05) + near, np.full(4, 0.02)]
    e1 = _fuse(M.init_map(0.2, 0.1), *padded(np.r_[wall, centre]), ORIGIN, PARAMS)
    assert bool(e1.valid[1, 1]) and float(e1.height[1, 1]) == pytest.approx(0.02, abs=1e-6)
    # a known cell that then sees only the face is cleared (its centre is hidden behind the face)
    e2 = _fuse(e1, *padded(wall), ORIGIN, PARAMS)
    assert not bool(e2.valid[1, 1]) and np.isnan(float(e2.height[1, 1]))
    kept = _fuse(e1, *padded(wall), ORIGIN, M.MapParams(sigma=0.003, sigma_range=0.0, face_clears=False))
    assert bool(kept.valid[1, 1]) and float(kept.height[1, 1]) == pytest.approx(0.02, abs=1e-6)


# ---- shifting -------------------------------------------------------------------------------

def test_shift_keeps_world_fixed_features():
    rng = np.random.default_rng(6)

    def pillar(x, y):
        return np.where(np.hypot(x - 0.3, y - 0.2) < 0.1, 0.4, 0.0)

    emap = fused(pillar, 2, rng)
    xs0, ys0 = M.cell_centers(emap)
    h0 = np.asarray(emap.height)
    shifted = _shift(emap, jnp.array([0.37, -0.21]))
    xs1, ys1 = M.cell_centers(shifted)
    dx, dy = int(round((xs1[0] - xs0[0]) / RES)), int(round((ys1[0] - ys0[0]) / RES))
    assert (dx, dy) == (9, -5)                  # whole cells: round(0.37 / 0.04), round(-0.21 / 0.04)
    # every cell of the shifted map shows what the old map held at the same world position
    h1, v1 = np.asarray(shifted.height), np.asarray(shifted.valid)
    rows, cols = np.arange(40) + dy, np.arange(40) + dx
    inside = ((rows >= 0) & (rows < 40))[:, None] & ((cols >= 0) & (cols < 40))[None, :]
    old = h0[np.clip(rows, 0, 39)][:, np.clip(cols, 0, 39)]
    v0 = np.asarray(emap.valid)[np.clip(rows, 0, 39)][:, np.clip(cols, 0, 39)]
    assert np.array_equal(h1[inside], old[inside], equal_nan=True) and np.array_equal(v1[inside], v0[inside])
    assert not v1[~inside].any() and np.isnan(h1[~inside]).all()       # cells that entered are unknown
    # the pillar is still where it is in the world, and keeps converging there after the shift
    shifted = fused(pillar, 1, rng, shifted, half=SIZE / 2)
    err, _ = errors(shifted, pillar)
    assert np.mean(np.abs(err) < 0.01) > 0.98
    back = _shift(shifted, jnp.zeros(2))
    assert not np.asarray(back.valid)[:, :dx].any()       # what left the map is gone


# ---- traversability -------------------------------------------------------------------------

def _map_of(surface, size=1.6, res=RES):
    emap = M.init_map(size, res)
    xs, ys = M.cell_centers(emap)
    h = jnp.asarray(surface(xs[None, :], ys[:, None]), emap.height.dtype)
    return emap._replace(height=h, variance=jnp.full_like(h, 1e-6), valid=jnp.ones(h.shape, bool))


def test_traversability_flags_a_step_and_a_steep_slope():
    trav = _trav
    t = np.asarray(trav(_map_of(step)))
    xs, _ = M.cell_centers(M.init_map(1.6, RES))
    near = np.abs(xs - 0.13) < 0.05
    far = np.abs(xs - 0.13) > 0.2
    assert t[5:-5][:, near].max() <= 0.2 + 1e-6           # 0.12 m of the 0.15 m limit: cost >= 0.8
    strict = np.asarray(trav(_map_of(step), M.TraversabilityParams(max_step=0.1)))
    assert strict[:, near].max() == 0.0
    assert t[5:-5][:, far & (np.abs(xs) < 0.7)].min() > 0.95
    gentle = np.asarray(trav(_map_of(lambda x, y: np.tan(np.radians(5.0)) * x + 0 * y)))
    steep = np.asarray(trav(_map_of(lambda x, y: np.tan(np.radians(40.0)) * y + 0 * x)))
    assert gentle[3:-3][:, 3:-3].min() > 0.8 and steep[3:-3][:, 3:-3].max() == 0.0
    assert np.all((t >= 0) & (t <= 1))
    hole = _map_of(flat)
    hole = hole._replace(valid=hole.valid.at[10:20, 10:20].set(False))
    th = np.asarray(trav(hole))
    assert th[14, 14] == 0.0 and th[30, 30] > 0.95         # unknown cells are not rated traversable


# ---- vmap over maps -------------------------------------------------------------------------

def test_vmap_over_a_batch_of_maps_equals_one_by_one():
    rng = np.random.default_rng(7)
    surfaces = (flat, plane, step)
    clouds = [cloud(s, rng) for s in surfaces]
    pts = np.stack([c[0] for c in clouds])
    ok = np.stack([c[1] for c in clouds])
    centers = np.array([[0.0, 0.0], [0.1, -0.3], [2.0, 1.0]])
    maps = [M.init_map(SIZE, RES, center_xy=c) for c in centers]
    batch = jax.tree.map(lambda *xs: jnp.stack(xs), *maps)
    out = jax.jit(jax.vmap(M.fuse, in_axes=(0, 0, 0, None, None)))(batch, pts, ok, ORIGIN, PARAMS)
    trav = jax.jit(jax.vmap(M.traversability))(out)
    moved = jax.jit(jax.vmap(M.shift))(out, jnp.asarray(centers) + 0.1)
    for i in range(3):
        one = _fuse(maps[i], pts[i], ok[i], ORIGIN, PARAMS)
        np.testing.assert_allclose(np.asarray(out.height[i]), np.asarray(one.height), atol=1e-6)
        np.testing.assert_array_equal(np.asarray(out.valid[i]), np.asarray(one.valid))
        np.testing.assert_allclose(np.asarray(trav[i]), np.asarray(_trav(one)), atol=1e-5)
        np.testing.assert_array_equal(np.asarray(moved.origin_cell[i]),
                                      np.asarray(_shift(one, centers[i] + 0.1).origin_cell))
    assert int(np.asarray(out.valid[2]).sum()) == 0        # the third map is centred elsewhere


def test_fuse_sequence_scans_frames():
    rng = np.random.default_rng(8)
    frames = [cloud(plane, rng) for _ in range(3)]
    pts = np.stack([f[0] for f in frames])
    ok = np.stack([f[1] for f in frames])
    origins = np.tile(ORIGIN, (3, 1))
    seq = jax.jit(M.fuse_sequence)(M.init_map(SIZE, RES), pts, ok, origins, PARAMS)
    one = M.init_map(SIZE, RES)
    for k in range(3):
        one = _fuse(one, pts[k], ok[k], ORIGIN, PARAMS)
    np.testing.assert_allclose(np.asarray(seq.height), np.asarray(one.height), atol=1e-6)
    assert int(seq.time) == 3


# ---- metrics --------------------------------------------------------------------------------

def test_score_on_hand_made_arrays():
    xs = (np.arange(-3, 3) + 0.5) * 1.0                    # -2.5 .. 2.5
    ys = xs.copy()
    truth = np.zeros((6, 6))
    est = np.zeros((6, 6))
    valid = np.ones((6, 6), bool)
    est[2, 2], est[3, 3], est[2, 3] = 0.3, -0.1, 0.2     # (x, y) = (-0.5, -0.5), (0.5, 0.5), (0.5, -0.5)
    valid[3, 2] = False                                    # (-0.5, 0.5): unknown
    truth[0, 0] = np.nan                                   # not scored
    s = mt.score(est, valid, truth, xs, ys, (0.0, 0.0), radius=1.0)
    assert s["cells"] == 4 and s["known"] == 3 and s["coverage"] == pytest.approx(0.75)
    e = np.array([0.3, 0.2, -0.1])
    assert s["rmse"] == pytest.approx(np.sqrt(np.mean(e ** 2)))
    assert s["mae"] == pytest.approx(0.2) and s["bias"] == pytest.approx(0.4 / 3)
    assert s["p95"] == pytest.approx(np.percentile(np.abs(e), 95)) and s["max"] == pytest.approx(0.3)
    s_all = mt.score(est, valid, truth, xs, ys, (0.0, 0.0), radius=10.0)
    assert s_all["cells"] == 35                             # the NaN truth cell is not scored
    with pytest.raises(CaliperError, match="truth"):
        mt.score(est, valid, truth[:5], xs, ys)
    none = mt.score(est, np.zeros_like(valid), truth, xs, ys, radius=1.0)
    assert none["coverage"] == 0.0 and np.isnan(none["rmse"])
    amb = np.zeros_like(valid)
    amb[2, 2] = True                                       # the 0.3 error sits on a face: reported apart
    seen = valid.copy()
    seen[3, 2] = True                                      # a return fell there, the map did not keep it
    d = mt.score(est, valid, truth, xs, ys, radius=1.0, observed=seen, ambiguous=amb)
    assert d["observed_coverage"] == 1.0 and d["ambiguous_cells"] == 1
    assert d["rmse_unambiguous"] == pytest.approx(np.sqrt((0.2 ** 2 + 0.1 ** 2) / 2))
    assert d["rmse"] == s["rmse"]


def test_step_and_slope_recovery():
    xs = (np.arange(-40, 40) + 0.5) * 0.04
    X, Y = np.meshgrid(xs, xs)
    truth = 0.08 * (X > 0.3) + 0.08 * (X > 0.9)
    est = truth + 0.002
    est[:, 47] = 0.04                                       # a smeared edge column: not a plateau interior
    s = mt.score(est, np.ones_like(est, bool), truth, xs, xs, radius=1.5, steps=True)
    assert s["steps"]["levels"] == pytest.approx([0.0, 0.08, 0.16])
    assert s["steps"]["estimated_steps"] == pytest.approx([0.08, 0.08])
    assert s["steps"]["max_step_error"] == pytest.approx(0.0, abs=1e-12)
    tilt = np.tan(np.radians(15.0)) * Y
    s2 = mt.score(tilt * 1.02, np.ones_like(est, bool), tilt, xs, xs, radius=1.5, slope=True)
    assert s2["slope"]["true_deg"] == pytest.approx(15.0)
    assert s2["slope"]["estimated_deg"] == pytest.approx(np.degrees(np.arctan(1.02 * np.tan(np.radians(15)))))
    assert s2["slope"]["true_azimuth_deg"] == pytest.approx(-90.0)       # downhill towards -y


def test_triptych_is_deterministic(tmp_path):
    pytest.importorskip("matplotlib")
    xs = (np.arange(-10, 10) + 0.5) * 0.1
    truth = np.add.outer(xs, xs) * 0.1
    est = truth + 0.01
    valid = np.ones_like(truth, bool)
    valid[:3] = False
    kw = dict(valid=valid, xs=xs, ys=xs, center_xy=(0, 0), radius=0.5)
    a = mt.triptych(truth, est, tmp_path / "a.png", "t", **kw)
    b = mt.triptych(truth, est, tmp_path / "b.png", "t", **kw)
    assert a.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and a.read_bytes() == b.read_bytes()


# ---- the harness end to end -----------------------------------------------------------------



@pytest.mark.parametrize("center,size,res", [((0.0, 0.0), 8.0, 0.04), ((1.234, -0.5), 3.0, 0.05),
                                             ((-2.0, 0.07), 1.0, 0.1)])
def test_the_map_lattice_is_the_ground_truth_lattice(center, size, res):
    from caliper_jax.terrain.truth import lattice

    xs, ys = M.cell_centers(M.init_map(size, res, center_xy=center))
    txs, tys = lattice(center, size, res)
    np.testing.assert_array_equal(xs, txs)
    np.testing.assert_array_equal(ys, tys)


def test_tiny_end_to_end_run_on_the_flat_scene(tmp_path):
    from caliper_jax.terrain.run import run

    res = run("flat", sensor="camera", frames=2, map_size=3.0, radius=1.0, out=tmp_path)
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    m = d["metrics"]
    assert m["coverage"] > 0.3 and m["rmse"] < 0.01 and m["observed_coverage"] >= m["coverage"]
    assert d["timings"]["compile_s"] >= 0 and d["timings"]["run_s"] >= 0
    assert (tmp_path / "flat_camera.png").is_file()


# ---- the command line -----------------------------------------------------------------------

@pytest.mark.parametrize("argv,needle", [
    (["--frames", "0"], "--frames"),
    (["--radius", "4.5"], "--radius"),
    (["--resolution", "-1"], "--resolution"),
    (["--scene", "moon"], "--scene"),
    (["--resolution", "0.00001"], "MEMORY_MB"),
])
def test_cli_bad_input_is_one_line(argv, needle, tmp_path, capsys):
    from caliper_jax import cli

    code = cli.main(["terrain", "run", *argv, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("caliper: error:") and needle in err and "\n" not in err
    assert not (tmp_path / "o").exists()


def test_cli_choices_match_the_scene_and_trajectory_modules():
    from caliper_jax.cli import terrain as cli_terrain
    from caliper_jax.terrain.scenes import SCENES
    from caliper_jax.terrain.trajectories import TRAJECTORIES

    assert cli_terrain.SCENE_NAMES == tuple(SCENES)
    assert cli_terrain.TRAJECTORY_NAMES == tuple(TRAJECTORIES)


# The full protocol (24-frame spin, 0.04 m cells, r <= 2.5 m) on the scenes with vertical faces, both
# sensors: the RMSE stays below the seed's published figure. Slow (about a minute); the default
# tests covering the same rules are test_step_is_sharp_cells_straddling_the_edge_keep_their_centres_side,
# test_a_vertical_face_seen_alone_does_not_make_a_cell and test_tiny_end_to_end_run_on_the_flat_scene.
SEED_RMSE = {("camera", "steps"): 0.0097, ("camera", "gap"): 0.0298, ("camera", "wall"): 0.0896,
             ("lidar", "steps"): 0.0098, ("lidar", "gap"): 0.0339, ("lidar", "wall"): 0.0120}


@pytest.mark.slow
@pytest.mark.parametrize("sensor,scene", sorted(SEED_RMSE))
def test_protocol_rmse_beats_the_seed_on_faced_scenes(sensor, scene):
    from caliper_jax.terrain.run import run

    m = run(scene, sensor=sensor).metrics
    assert m["rmse"] <= SEED_RMSE[sensor, scene] and m["coverage"] > 0.8
    assert m["observed_coverage"] - m["coverage"] < 0.03      # the mapper keeps what the sensor saw
