"""Ray-cast sensors on a MuJoCo state: a pinhole depth camera and a LiDAR scan pattern.

Thin CPU faces over the JAX ray engine (:mod:`caliper_jax.rays`, one implementation): the model's
geoms become a :class:`caliper_jax.rays.RayScene` (built once per model and cached), the poses are
read from an ``MjData`` whose kinematics are current (``backend.world_data(world)``), and every ray
of a frame is cast in one jitted call, in float64 (MuJoCo's precision) whatever the caller's JAX
default. Frames follow MuJoCo's camera convention: the sensor looks along its -z axis, +x right,
+y up. Misses are NaN. Geometry in ``exclude_body`` (e.g. the link carrying the sensor) is ignored.
The batched JAX API (vmap over worlds, noise, RGB, more LiDAR patterns) is :mod:`caliper_jax.rays`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError

_SCENES: dict = {}      # id(model) -> (model, RayScene); the model is kept so the id stays unique
_CAST = None


def _scene(mj):
    from caliper_jax.rays import scene_from_mujoco

    hit = _SCENES.get(id(mj))
    if hit is None or hit[0] is not mj:
        if len(_SCENES) >= 8:
            _SCENES.pop(next(iter(_SCENES)))
        hit = _SCENES[id(mj)] = (mj, scene_from_mujoco(mj))
    return hit[1]


def _cast(mj, d, origin, dirs_world, exclude_body: int, max_range: float):
    """Distances (n,) along unit ``dirs_world`` (NaN on a miss) and geom ids (n,) (-1)."""
    global _CAST
    import jax

    from caliper_jax.rays import cast_rays

    if _CAST is None:
        _CAST = jax.jit(cast_rays)
    origin = np.asarray(origin, dtype=np.float64).reshape(3)
    dirs = np.ascontiguousarray(dirs_world, dtype=np.float64).reshape(-1, 3)
    with jax.enable_x64(True):
        hits = _CAST(_scene(mj), np.asarray(d.geom_xpos), np.asarray(d.geom_xmat), origin, dirs,
                     max_range=float(max_range), exclude_body=int(exclude_body))
        dist = np.asarray(hits.distance, dtype=np.float64)
        geomid = np.asarray(hits.geom, dtype=np.int32)
    return np.where(geomid >= 0, dist, np.nan), geomid


def _rotation(R) -> np.ndarray:
    R = np.asarray(R, dtype=np.float64)
    if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-6):
        raise CaliperError("sensor orientation must be a 3x3 rotation matrix (columns: sensor axes in world)")
    return R


@dataclass(frozen=True)
class DepthCamera:
    """A pinhole depth camera: ``width`` x ``height`` pixels, vertical field of view ``fovy``
    (degrees), square pixels, readings beyond ``max_range`` (along the ray) are misses."""

    width: int = 64
    height: int = 48
    fovy: float = 60.0
    max_range: float = 10.0

    def directions(self) -> np.ndarray:
        """Unit ray directions in the camera frame, (height, width, 3), row 0 at the top."""
        from caliper_jax.rays import PinholeCamera

        return PinholeCamera(width=self.width, height=self.height, fovy=self.fovy,
                             max_range=self.max_range).directions()

    def render(self, mj, d, pos, R, exclude_body: int = -1) -> np.ndarray:
        """Depth along the optical axis (height, width), metres; NaN where nothing is hit."""
        local = self.directions()
        dist, _ = _cast(mj, d, pos, local @ _rotation(R).T, exclude_body, self.max_range)
        return dist.reshape(self.height, self.width) * -local[..., 2]


@dataclass(frozen=True)
class Lidar:
    """A spinning LiDAR pattern: ``n_azimuth`` beams per ring over 360 degrees, one ring per
    elevation angle (degrees, 0 = horizontal, negative = down), in the sensor's x-y plane
    (azimuth 0 along +x, elevation towards +z)."""

    n_azimuth: int = 360
    elevations: tuple = (-15.0, -5.0, 5.0, 15.0)
    max_range: float = 30.0

    def directions(self) -> np.ndarray:
        az = np.linspace(0.0, 2.0 * np.pi, self.n_azimuth, endpoint=False)
        el = np.radians(np.asarray(self.elevations, dtype=np.float64))
        A, E = np.meshgrid(az, el)
        return np.stack([np.cos(E) * np.cos(A), np.cos(E) * np.sin(A), np.sin(E)], axis=-1)

    def scan(self, mj, d, pos, R, exclude_body: int = -1):
        """(ranges (n_elev, n_azimuth), world points (n_elev, n_azimuth, 3)); NaN for misses."""
        dirs = self.directions() @ _rotation(R).T
        dist, _ = _cast(mj, d, pos, dirs, exclude_body, self.max_range)
        ranges = dist.reshape(dirs.shape[:2])
        return ranges, np.asarray(pos, dtype=np.float64) + ranges[..., None] * dirs


__all__ = ["DepthCamera", "Lidar"]
