"""Ray-cast sensors on a MuJoCo state: a pinhole depth camera and a LiDAR scan pattern.

Both cast every ray of a frame from one origin with ``mj_multiRay`` (C, one call per frame) on
an ``MjData`` whose kinematics are current (``backend.world_data(world)``). Frames follow
MuJoCo's camera convention: the sensor looks along its -z axis, +x right, +y up. Misses are NaN.
Geometry in ``exclude_body`` (e.g. the link carrying the sensor) is ignored.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError


def _cast(mj, d, origin, dirs_world, exclude_body: int, max_range: float):
    import mujoco

    origin = np.asarray(origin, dtype=np.float64).reshape(3)
    dirs = np.ascontiguousarray(dirs_world, dtype=np.float64).reshape(-1, 3)
    n = dirs.shape[0]
    dist = np.empty(n)
    geomid = np.empty(n, dtype=np.int32)
    mujoco.mj_multiRay(mj, d, origin, dirs.ravel(), None, 1, int(exclude_body), geomid, dist, None, n,
                       float(max_range))
    dist = np.where(geomid >= 0, dist, np.nan)
    return dist, geomid


def _rotation(R) -> np.ndarray:
    R = np.asarray(R, dtype=np.float64)
    if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-6):
        raise CaliperError("sensor orientation must be a 3x3 rotation matrix (columns: sensor axes in world)")
    return R


@dataclass(frozen=True)
class DepthCamera:
    """A pinhole depth camera: ``width`` x ``height`` pixels, vertical field of view ``fovy``
    (degrees), square pixels, readings beyond ``max_range`` are misses."""

    width: int = 64
    height: int = 48
    fovy: float = 60.0
    max_range: float = 10.0

    def directions(self) -> np.ndarray:
        """Unit ray directions in the camera frame, (height, width, 3), row 0 at the top."""
        f = 0.5 * self.height / np.tan(np.radians(self.fovy) / 2.0)
        u = np.arange(self.width) + 0.5 - self.width / 2.0
        v = self.height / 2.0 - (np.arange(self.height) + 0.5)
        x, y = np.meshgrid(u / f, v / f)
        dirs = np.stack([x, y, -np.ones_like(x)], axis=-1)
        return dirs / np.linalg.norm(dirs, axis=-1, keepdims=True)

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
