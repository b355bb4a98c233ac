"""LiDAR scan patterns and ``scan`` over the shared ray engine.

Sensor frame: azimuth 0 along +x, azimuth grows towards +y, elevation towards +z (the frame of
``mjx_backend.sensors.Lidar``). Patterns return unit directions in the sensor frame as NumPy
(host) arrays, except :func:`spiral_pattern`, whose ``scan_index`` may be traced.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.rays.cast import cast_rays

GOLDEN_ANGLE = math.pi * (3.0 - math.sqrt(5.0))


def _sph(az, el):
    return np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=-1)


#: elevation tables (degrees, low to high) of common spinning units, from their data sheets:
#: Velodyne VLP-32C (non-uniform, dense near the horizon), Velodyne HDL-64E (two blocks of 32:
#: +2 to -8.33 at 1/3 degree, -8.83 to -24.33 at 1/2 degree) and Ouster OS1-128 (45 degrees, uniform)
ELEVATIONS = {
    "vlp32": (-25.0, -15.639, -11.31, -8.843, -7.254, -6.148, -5.333, -4.667, -4.0, -3.667, -3.333,
              -3.0, -2.667, -2.333, -2.0, -1.667, -1.333, -1.0, -0.667, -0.333, 0.0, 0.333, 0.667,
              1.0, 1.333, 1.667, 2.333, 3.333, 4.667, 7.0, 10.333, 15.0),
    "hdl64": tuple(np.round(np.concatenate([np.linspace(-24.33, -8.83, 32), np.linspace(-8.33, 2.0, 32)]),
                            4).tolist()),
    "os128": tuple(np.round(np.linspace(-22.5, 22.5, 128), 4).tolist()),
}
#: beams per revolution of those units at 10 Hz
AZIMUTHS = {"vlp32": 1800, "hdl64": 2048, "os128": 1024}


def spinning_pattern(n_rings: int = 16, vfov=(-15.0, 15.0), n_azimuth: int = 360, tilt: float = 0.0,
                     elevations=None):
    """A spinning multi-ring LiDAR: ``n_rings`` elevations evenly over ``vfov`` (degrees, low,
    high), or the given ``elevations`` (degrees, e.g. ``ELEVATIONS["vlp32"]``; then ``n_rings`` and
    ``vfov`` are ignored), ``n_azimuth`` beams per ring over 360 degrees; ``tilt`` (degrees)
    pitches the spin axis about the sensor's +y axis (positive: +x towards -z, i.e. down).
    Returns (n_rings, n_azimuth, 3)."""
    if elevations is not None:
        el = np.radians(np.asarray(elevations, dtype=np.float64).reshape(-1))
        n_rings = el.size
    if n_rings < 1 or n_azimuth < 1:
        raise CaliperError(f"spinning_pattern: n_rings and n_azimuth must be >= 1, "
                           f"got {n_rings}, {n_azimuth}")
    lo, hi = (float(x) for x in vfov)
    if elevations is None:
        el = np.radians(np.linspace(lo, hi, n_rings) if n_rings > 1 else np.array([0.5 * (lo + hi)]))
    az = np.linspace(0.0, 2.0 * np.pi, n_azimuth, endpoint=False)
    A, E = np.meshgrid(az, el)
    dirs = _sph(A, E)
    c, s = math.cos(math.radians(tilt)), math.sin(math.radians(tilt))
    Ry = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    return dirs @ Ry.T


def grid_pattern(hfov: float = 90.0, vfov: float = 30.0, n_h: int = 32, n_v: int = 8):
    """A plain grid of beams facing +x: ``n_h`` azimuths over ``hfov`` by ``n_v`` elevations over
    ``vfov`` (degrees, centred). Returns (n_v, n_h, 3), row 0 the highest elevation."""
    if n_h < 1 or n_v < 1:
        raise CaliperError(f"grid_pattern: n_h and n_v must be >= 1, got {n_h}, {n_v}")
    az = np.radians(np.linspace(-hfov / 2, hfov / 2, n_h)) if n_h > 1 else np.zeros(1)
    el = np.radians(np.linspace(vfov / 2, -vfov / 2, n_v)) if n_v > 1 else np.zeros(1)
    A, E = np.meshgrid(az, el)
    return _sph(A, E)


def spiral_pattern(n_points: int = 1000, fov: float = 70.0, scan_index=0):
    """A non-repetitive forward pattern (Livox-like): ``n_points`` beams on a golden-angle spiral
    filling a cone of full angle ``fov`` (degrees) around +x, with equal area per beam. Each scan
    rotates the spiral by ``scan_index`` times the golden angle and shifts its radial phase, so
    successive scans cover new directions. ``scan_index`` may be a traced integer. Returns
    (n_points, 3) as a JAX array."""
    if n_points < 1 or not 0.0 < fov < 360.0:
        raise CaliperError(f"spiral_pattern: need n_points >= 1 and 0 < fov < 360, got {n_points}, {fov}")
    k = jnp.arange(n_points)
    s = jnp.asarray(scan_index)
    phase = jnp.mod(s * 0.6180339887498949, 1.0)
    frac = jnp.mod((k + phase) / n_points, 1.0)
    cos_max = math.cos(math.radians(fov) / 2.0)
    cos_t = 1.0 - frac * (1.0 - cos_max)                    # equal solid angle per beam
    sin_t = jnp.sqrt(jnp.maximum(1.0 - cos_t * cos_t, 0.0))
    phi = (k + s) * GOLDEN_ANGLE
    return jnp.stack([cos_t, sin_t * jnp.cos(phi), sin_t * jnp.sin(phi)], axis=-1)


def scan(scene, geom_xpos, geom_xmat, pos, R, dirs_local, *, min_range=0.0, max_range=30.0,
         exclude_body=-1, geomgroup=None) -> dict:
    """Cast a pattern from a sensor at ``pos`` (3,) with orientation ``R`` (3, 3, columns the
    sensor axes in the world). ``dirs_local`` (..., 3) unit, sensor frame. Returns ``ranges``
    (...) metres (inf: nothing within [min_range, max_range]), ``points`` (..., 3) world (NaN on
    a miss) and ``geom`` (...) int32 (-1 on a miss)."""
    dl = jnp.asarray(dirs_local)
    dtype = jnp.result_type(jnp.asarray(geom_xpos).dtype, jnp.float32)
    shape = dl.shape[:-1]
    R = jnp.asarray(R, dtype).reshape(3, 3)
    pos = jnp.asarray(pos, dtype).reshape(3)
    dirs = dl.reshape(-1, 3).astype(dtype) @ R.T
    hits = cast_rays(scene, geom_xpos, geom_xmat, pos, dirs, max_range=max_range,
                     exclude_body=exclude_body, geomgroup=geomgroup)
    ok = hits.distance >= min_range
    r = jnp.where(ok, hits.distance, jnp.inf)
    hit = jnp.isfinite(r)
    pts = jnp.where(hit[:, None], pos + jnp.where(hit, r, 0.0)[:, None] * dirs, jnp.nan)
    return {"ranges": r.reshape(shape), "points": pts.reshape(shape + (3,)),
            "geom": jnp.where(hit, hits.geom, -1).reshape(shape)}
