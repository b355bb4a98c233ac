"""Ray-cast ground truth on the elevation map's own lattice.

``lattice`` gives the cell centres ``(k + 0.5) * resolution`` of a square window (the rule of
:func:`caliper_jax.terrain.mapper.init_map`: ``n = round(size / resolution)`` cells per side,
cell 0 at ``k0 = round(center / resolution - n / 2)``), so truth and estimate are compared by
integer indexing, never interpolated. ``ground_truth`` casts one straight-down ray per cell centre
through the JAX ray engine (float64, the scene at rest, the sensor shell excluded) and returns
the height of the first surface it meets:

* on a height field that is the triangulated surface MuJoCo builds from the samples, not the smooth
  closed form: the two differ by the interpolation error (``scene.info["interp_tol"]``);
* a ray exactly on a cell's diagonal or edge cannot fall between the triangles (the engine's
  walk is watertight: :mod:`caliper_jax.rays.hfield`), so no second, offset ray is needed (the
  seed's sampler cast one 10 um aside; MuJoCo 3.17 still lets the odd ray through a diagonal or an
  edge fall through, see ``tests/test_terrain_scenes.py``);
* a cell straddling a vertical face (a step, box, wall or trench edge) takes the height at its
  centre, i.e. the side of the face its centre is on; a centre exactly on a face (never on the
  default 0.04 m lattice: every face of the scenes lies on a multiple of 0.04 m) gets the top.
"""
from __future__ import annotations

import math

import numpy as np

from caliper_jax.errors import CaliperError

_CAST = {}


def lattice(center_xy, size_m: float, resolution: float) -> tuple[np.ndarray, np.ndarray]:
    """Cell centres of a ``size_m`` square window around ``center_xy`` (world, m) on the
    ``(k + 0.5) * resolution`` lattice: ``xs`` (n,), ``ys`` (n,), ascending, float64."""
    res, size = float(resolution), float(size_m)
    if not (math.isfinite(res) and res > 0):
        raise CaliperError(f"lattice: resolution must be a finite number > 0 (m), got {resolution!r}")
    n = int(round(size / res))
    if not math.isfinite(size) or n < 1:
        raise CaliperError(f"lattice: size_m must be at least one cell ({res} m), got {size_m!r}")
    c = np.asarray(center_xy, dtype=np.float64).reshape(-1)
    if c.shape != (2,) or not np.all(np.isfinite(c)):
        raise CaliperError(f"lattice: center_xy must be 2 finite numbers, got {center_xy!r}")
    k0 = np.round(c / res - n / 2.0).astype(np.int64)
    xs = (k0[0] + np.arange(n) + 0.5) * res
    ys = (k0[1] + np.arange(n) + 0.5) * res
    return xs, ys


def _cast_fn():
    import jax

    from caliper_jax.rays import cast_rays

    if "f" not in _CAST:
        _CAST["f"] = jax.jit(cast_rays)
    return _CAST["f"]


def ground_truth(scene, xs, ys, *, chunk: int = 65536) -> np.ndarray:
    """Heights (m, n) at the cell centres ``xs`` (n,) x ``ys`` (m,) (row r at ``ys[r]``, column c at
    ``xs[c]``) by straight-down rays from above the scene's highest point. NaN where a ray meets
    nothing (not the case inside any scene's ground). Rays are cast ``chunk`` at a time (padded, so
    the compiled cast is reused)."""
    import jax

    xs = np.asarray(xs, dtype=np.float64).reshape(-1)
    ys = np.asarray(ys, dtype=np.float64).reshape(-1)
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))) or xs.size == 0 or ys.size == 0:
        raise CaliperError("ground_truth: xs and ys must be non-empty finite arrays")
    X, Y = np.meshgrid(xs, ys)
    z_top = float(scene.info.get("z_max", 0.0)) + 1.0
    n = X.size
    size = min(int(chunk), n)
    m = -(-n // size)
    pad = m * size - n
    o = np.stack([X.ravel(), Y.ravel(), np.full(n, z_top)], axis=-1)
    o = np.concatenate([o, np.repeat(o[:1], pad, axis=0)]) if pad else o
    down = np.tile([0.0, 0.0, -1.0], (size, 1))
    xpos, xmat = scene.poses()
    out = np.empty(m * size)
    with jax.enable_x64(True):
        cast = _cast_fn()
        for k in range(m):
            h = cast(scene.rays, xpos, xmat, o[k * size:(k + 1) * size], down,
                     exclude_body=np.int32(scene.shell_body_id))
            out[k * size:(k + 1) * size] = np.asarray(h.distance, dtype=np.float64)
    z = z_top - out[:n]
    return np.where(np.isfinite(z), z, np.nan).reshape(X.shape)


__all__ = ["lattice", "ground_truth"]
