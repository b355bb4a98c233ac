"""Terrain sensors over the shared ray engine: a pinhole depth camera and LiDAR patterns.

A sensor is a frozen (hashable) dataclass mounted on the scene's shell body at ``mount`` (body
frame, m). :func:`capture` is pure JAX in the body pose ``T_world_body`` (4, 4), the PRNG key and
``scan_index`` -- jittable and vmappable over poses -- and takes the full body rotation (a rolled
or pitched body tilts its sensors). Every ray excludes the shell body (the sensors sit inside it).

Noise, in this order: Gaussian range noise ``noise_sigma + noise_rel * range`` (metres), dropout of
each return with probability ``dropout``, then the ``[min_range, max_range]`` gate again
(:func:`caliper_jax.rays.noise.noisy_depth`): a return the noise pushed out of range is dropped,
never kept or clipped (the seed's review found noisy ranges past ``max_range``). The true range
is gated first as well, so a valid return is inside the range both before and after noise.

Depth camera (:class:`DepthSensor`): MuJoCo's camera convention (looks along its -z, +x right, +y
up, row 0 at the top), looking along the body's +x, tilted down by ``pitch_deg``. Its range is the
depth along the optical axis. Rows are kept below the horizon by raising the tilt: the effective
tilt is ``max(pitch_deg, fovy / 2 + horizon_margin_deg)`` (``horizon_margin_deg=None``: no rule), so
the top row looks at least ``horizon_margin_deg`` below the body's horizontal -- every row stays
useful (dropping the top rows instead would waste rays), and near-horizontal rays, the expensive
ones on a height field, are never cast. Default: a 160 x 120, 58 degree (vertical) camera 0.8 m up.

LiDAR (:class:`LidarSensor`): ``"vlp32"``, ``"hdl64"``, ``"os128"`` spinning units (elevation tables
of :data:`caliper_jax.rays.lidar.ELEVATIONS`), ``"livox"`` (a non-repetitive golden-angle spiral in
a 70.4 degree cone, advancing with ``scan_index``: successive scans sample new directions) and
``"grid"`` (a plain grid); the unit is pitched down by ``tilt_deg`` (a level spinning unit puts
most rings above the horizon). Its range is along the beam.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.rays import lidar as _lidar

PATTERNS = ("vlp32", "hdl64", "os128", "livox", "grid")


class Capture(NamedTuple):
    """``points`` (N, 3) world frame, float32, NaN rows where ``valid`` is False; ``valid`` (N,)
    bool, a return inside [min_range, max_range] after noise and dropout; ``origin`` (3,) the
    sensor origin in the world."""

    points: jax.Array
    valid: jax.Array
    origin: jax.Array


def _check_common(name, mount, min_range, max_range, noise_sigma, noise_rel, dropout):
    m = np.asarray(mount, dtype=np.float64).reshape(-1)
    if m.shape != (3,) or not np.all(np.isfinite(m)):
        raise CaliperError(f"{name}.mount: expected 3 finite numbers (body frame, m), got {mount!r}")
    if not (0.0 <= float(min_range) < float(max_range) and math.isfinite(float(max_range))):
        raise CaliperError(f"{name}: need 0 <= min_range < max_range < inf, got [{min_range}, {max_range}]")
    for f, v in (("noise_sigma", noise_sigma), ("noise_rel", noise_rel)):
        if not (math.isfinite(float(v)) and float(v) >= 0):
            raise CaliperError(f"{name}.{f}: must be >= 0, got {v!r}")
    if not 0.0 <= float(dropout) <= 1.0:
        raise CaliperError(f"{name}.dropout: must be in [0, 1], got {dropout!r}")
    return tuple(float(x) for x in m)


@dataclass(frozen=True)
class DepthSensor:
    """A pinhole depth camera on the body (see the module doc). ``pitch_deg``: downward tilt of
    the optical axis from the body's horizontal (None: the least the horizon rule allows)."""

    width: int = 160
    height: int = 120
    fovy_deg: float = 58.0
    pitch_deg: float | None = None
    horizon_margin_deg: float | None = 15.0
    mount: tuple = (0.15, 0.0, 0.30)
    min_range: float = 0.1
    max_range: float = 4.0
    noise_sigma: float = 0.0
    noise_rel: float = 0.0
    dropout: float = 0.0

    def __post_init__(self):
        if int(self.width) < 1 or int(self.height) < 1:
            raise CaliperError(f"DepthSensor: width/height must be >= 1, got {self.width}x{self.height}")
        if not 0.0 < float(self.fovy_deg) < 180.0:
            raise CaliperError(f"DepthSensor.fovy_deg: must be in (0, 180), got {self.fovy_deg!r}")
        object.__setattr__(self, "mount", _check_common("DepthSensor", self.mount, self.min_range,
                                                        self.max_range, self.noise_sigma, self.noise_rel,
                                                        self.dropout))
        if self.effective_pitch_deg() >= 90.0 + 1e-9 + float(self.fovy_deg) / 2.0:
            raise CaliperError(f"DepthSensor: pitch {self.effective_pitch_deg()} degrees tilts the whole "
                               "view past straight down")

    def min_pitch_deg(self) -> float | None:
        """The least tilt that keeps every ray (the top corners too) ``horizon_margin_deg`` below
        the body's horizontal (None without a margin). A ray ``(u, v, -1)`` of the camera tilted by
        ``p`` has ``sin(elevation) = (v cos p - sin p) / |(u, v, 1)|``; the top corner pixel is the
        highest, and ``v cos p - sin p <= -sin(margin) |(u, v, 1)|`` solves to
        ``p >= atan(v) + asin(sin(margin) |(u, v, 1)| / |(v, 1)|)`` (``fovy / 2 + margin`` for the
        centre column)."""
        if self.horizon_margin_deg is None:
            return None
        fx, fy, cx, cy = self.intrinsics()
        u, v = (cx - 0.5) / fx, (cy - 0.5) / fy
        s = math.sin(math.radians(self.horizon_margin_deg))
        s *= math.sqrt(u * u + v * v + 1) / math.sqrt(v * v + 1)
        return math.degrees(math.atan(v) + math.asin(min(max(s, -1.0), 1.0)))

    def effective_pitch_deg(self) -> float:
        """The tilt used: ``pitch_deg`` (default: none) raised to :meth:`min_pitch_deg`."""
        floor = self.min_pitch_deg()
        if self.pitch_deg is None:
            return float(floor if floor is not None else self.fovy_deg / 2.0)
        return float(self.pitch_deg if floor is None else max(self.pitch_deg, floor))

    @property
    def n_rays(self) -> int:
        return int(self.width) * int(self.height)

    def intrinsics(self):
        """(fx, fy, cx, cy) in pixels (square pixels, centred principal point)."""
        f = 0.5 * self.height / math.tan(math.radians(self.fovy_deg) / 2.0)
        return f, f, self.width / 2.0, self.height / 2.0

    def directions(self) -> np.ndarray:
        """Unit ray directions (height * width, 3) in the camera frame (-z forward), row major."""
        fx, fy, cx, cy = self.intrinsics()
        u = (np.arange(self.width) + 0.5 - cx) / fx
        v = (cy - (np.arange(self.height) + 0.5)) / fy
        x, y = np.meshgrid(u, v)
        d = np.stack([x, y, -np.ones_like(x)], axis=-1).reshape(-1, 3)
        return d / np.linalg.norm(d, axis=-1, keepdims=True)

    def rotation(self) -> np.ndarray:
        """R_body_camera (3, 3): camera axes as columns in the body frame."""
        p = math.radians(self.effective_pitch_deg())
        fwd = np.array([math.cos(p), 0.0, -math.sin(p)])
        right = np.array([0.0, -1.0, 0.0])
        up = np.array([math.sin(p), 0.0, math.cos(p)])
        return np.stack([right, up, -fwd], axis=1)


@dataclass(frozen=True)
class LidarSensor:
    """A LiDAR on the body (see the module doc). ``n_azimuth``: beams per revolution of a spinning
    unit (None: the unit's own, :data:`caliper_jax.rays.lidar.AZIMUTHS`); ``n_points``: beams of a
    Livox scan; ``grid``: (n_h, n_v, hfov, vfov) of the grid pattern."""

    pattern: str = "vlp32"
    tilt_deg: float = 20.0
    mount: tuple = (0.0, 0.0, 0.20)
    min_range: float = 0.3
    max_range: float = 30.0
    noise_sigma: float = 0.0
    noise_rel: float = 0.0
    dropout: float = 0.0
    n_azimuth: int | None = None
    n_points: int = 10000
    livox_fov_deg: float = 70.4
    grid: tuple = (64, 16, 90.0, 30.0)

    def __post_init__(self):
        if self.pattern not in PATTERNS:
            raise CaliperError(f"LidarSensor.pattern: unknown pattern {self.pattern!r} "
                               f"(choose from {', '.join(PATTERNS)})")
        if not math.isfinite(float(self.tilt_deg)) or abs(float(self.tilt_deg)) > 90.0:
            raise CaliperError(f"LidarSensor.tilt_deg: must be within [-90, 90], got {self.tilt_deg!r}")
        object.__setattr__(self, "mount", _check_common("LidarSensor", self.mount, self.min_range,
                                                        self.max_range, self.noise_sigma, self.noise_rel,
                                                        self.dropout))
        object.__setattr__(self, "grid", tuple(self.grid))
        if self.n_azimuth is not None and int(self.n_azimuth) < 1:
            raise CaliperError(f"LidarSensor.n_azimuth: must be >= 1, got {self.n_azimuth!r}")
        if int(self.n_points) < 1:
            raise CaliperError(f"LidarSensor.n_points: must be >= 1, got {self.n_points!r}")

    @property
    def n_rays(self) -> int:
        if self.pattern == "livox":
            return int(self.n_points)
        if self.pattern == "grid":
            return int(self.grid[0]) * int(self.grid[1])
        n_az = self.n_azimuth or _lidar.AZIMUTHS[self.pattern]
        return len(_lidar.ELEVATIONS[self.pattern]) * int(n_az)

    def _tilt(self) -> np.ndarray:
        c, s = math.cos(math.radians(self.tilt_deg)), math.sin(math.radians(self.tilt_deg))
        return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])

    def directions(self, scan_index=0):
        """Unit beam directions (N, 3) in the body frame (tilt included); NumPy except for the
        Livox pattern, whose directions depend on ``scan_index`` (may be traced: a JAX array)."""
        if self.pattern == "livox":
            d = _lidar.spiral_pattern(int(self.n_points), fov=float(self.livox_fov_deg),
                                      scan_index=scan_index)
            return d @ jnp.asarray(self._tilt().T, d.dtype)
        if self.pattern == "grid":
            n_h, n_v, hfov, vfov = self.grid
            d = _lidar.grid_pattern(hfov=float(hfov), vfov=float(vfov), n_h=int(n_h), n_v=int(n_v))
            return d.reshape(-1, 3) @ self._tilt().T
        n_az = int(self.n_azimuth or _lidar.AZIMUTHS[self.pattern])
        d = _lidar.spinning_pattern(n_azimuth=n_az, tilt=float(self.tilt_deg),
                                    elevations=_lidar.ELEVATIONS[self.pattern])
        return d.reshape(-1, 3)


def _pose(T_world_body):
    T = jnp.asarray(T_world_body)
    if T.shape != (4, 4):
        raise CaliperError(f"capture: T_world_body must be (4, 4), got {T.shape}")
    return T.astype(jnp.result_type(T.dtype, jnp.float32))


def capture(scene, sensor, T_world_body, key, scan_index=0) -> Capture:
    """One frame of ``sensor`` on ``scene`` with the shell body at ``T_world_body`` (4, 4) (see the
    module doc). Returns a :class:`Capture` of N = ``sensor.n_rays`` rows."""
    from caliper_jax.rays.cast import _cast
    from caliper_jax.rays.noise import noisy_depth

    if not isinstance(sensor, (DepthSensor, LidarSensor)):
        raise CaliperError(f"capture: sensor must be a DepthSensor or LidarSensor, "
                           f"got {type(sensor).__name__}")
    T = _pose(T_world_body)
    dtype = T.dtype
    Rb, pb = T[:3, :3], T[:3, 3]
    origin = Rb @ jnp.asarray(sensor.mount, dtype) + pb
    xpos, xmat = scene.geom_poses(T)
    if isinstance(sensor, DepthSensor):
        local = sensor.directions()
        body_dirs = local @ sensor.rotation().T                          # (N, 3) body frame
        axial = jnp.asarray(-local[:, 2], dtype)                         # cos to the optical axis
        reach = sensor.max_range / float(np.min(-local[:, 2]))
    else:
        body_dirs = sensor.directions(scan_index)
        axial = None
        reach = sensor.max_range
    dirs = jnp.asarray(body_dirs, dtype) @ Rb.T                          # (N, 3) world
    dist, _, _, _ = _cast(scene.rays, xpos, xmat, origin, None, reach, jnp.int32(scene.shell_body_id),
                          None, dirs_t=dirs.T)
    rng = dist if axial is None else dist * axial                       # the sensor's range measure
    rng = jnp.where((rng >= sensor.min_range) & (rng <= sensor.max_range), rng, jnp.inf)
    if sensor.noise_sigma or sensor.noise_rel or sensor.dropout:
        noisy = noisy_depth(key, rng, min_range=sensor.min_range, max_range=sensor.max_range,
                            sigma=sensor.noise_sigma, sigma_rel=sensor.noise_rel, dropout=sensor.dropout)
    else:                               # a noiseless sensor draws nothing (the key is unused)
        noisy = rng
    valid = jnp.isfinite(noisy)
    along = noisy if axial is None else noisy / axial                    # back to the beam length
    pts = origin + jnp.where(valid, along, 0.0)[:, None] * dirs
    pts = jnp.where(valid[:, None], pts, jnp.nan).astype(jnp.float32)
    return Capture(points=pts, valid=valid, origin=origin.astype(jnp.float32))


def ranges(cap: Capture) -> jax.Array:
    """Beam lengths (N,) of a capture's points from its origin (NaN where invalid)."""
    return jnp.linalg.norm(cap.points - cap.origin, axis=-1)


__all__ = ["PATTERNS", "Capture", "DepthSensor", "LidarSensor", "capture", "ranges"]
