"""Body trajectories for the terrain harness: nominal paths plus an optional walking body motion.

``trajectory(name, frames, ...)`` returns ``T_world_body`` poses (frames, 4, 4), NumPy float64.
Paths (heading = yaw about +z, the body's +x forward):

* ``static``: at ``center``, heading ``yaw0``;
* ``spin``: in place, the heading sweeping ``turns`` full turns over the frames (endpoint
  excluded: 24 frames of one turn are 15 degrees apart -- the seed's stationary 360 sweep);
* ``line``: ``length`` along the heading ``yaw0``, centred on ``center``, heading fixed;
* ``circle``: radius ``radius`` around ``center``, heading along the tangent (it translates and
  turns together), ``turns`` laps;
* ``figure8``: a lemniscate of Gerono ``(a sin s, (a / 2) sin 2s)`` (``a = radius``) whose heading
  follows the path tangent: the curvature changes sign where the path crosses itself, so the yaw
  rate reverses twice per lap;
* ``walk``: the ``line`` path with the walking body motion (below).

``motion``: a :class:`BodyMotion` (or ``"walk"`` for :meth:`BodyMotion.walking`) composed with any
path: vertical bob, lateral sway in the body frame (it follows the heading), roll and pitch, each
term a quarter cycle out of phase with the previous (bob 0, sway 90, roll 180, pitch 270 degrees)
so the attitude traces a loop instead of heaving in lockstep. Orientation is
``Rz(yaw) Ry(pitch) Rx(roll)``; positive pitch tips the nose down. A sinusoid sampled at few
frames need not reach its peaks (6 cycles over 24 frames sample every 90 degrees).

``height`` is the body's height above the ground; ``terrain``, a callable ``height(x, y)`` (e.g. a
scene's closed form), puts the path on the terrain (default: ground at z = 0).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError

TRAJECTORIES = ("static", "spin", "line", "circle", "figure8", "walk")


@dataclass(frozen=True)
class BodyMotion:
    """Amplitudes of the body motion (m, m, degrees, degrees) and its cycles over the run."""

    bob: float = 0.0
    sway: float = 0.0
    roll_deg: float = 0.0
    pitch_deg: float = 0.0
    cycles: float = 6.0

    @classmethod
    def walking(cls) -> "BodyMotion":
        """A trotting quadruped's motion: 4 cm bob, 3 cm sway, 4 degrees roll, 3 degrees pitch,
        six cycles over the run."""
        return cls(bob=0.04, sway=0.03, roll_deg=4.0, pitch_deg=3.0, cycles=6.0)

    def terms(self, frames: int) -> dict:
        """Per frame (frames,): ``bob``, ``sway`` (m), ``roll``, ``pitch`` (rad)."""
        ph = 2.0 * math.pi * self.cycles * np.arange(frames) / max(frames, 1)
        q = 0.5 * math.pi
        return {"bob": self.bob * np.sin(ph), "sway": self.sway * np.sin(ph + q),
                "roll": math.radians(self.roll_deg) * np.sin(ph + 2 * q),
                "pitch": math.radians(self.pitch_deg) * np.sin(ph + 3 * q)}


def _rot(yaw, pitch, roll) -> np.ndarray:
    """Rz(yaw) Ry(pitch) Rx(roll), batched: (F, 3, 3)."""
    cy, sy, cp, sp, cr, sr = (np.cos(yaw), np.sin(yaw), np.cos(pitch), np.sin(pitch), np.cos(roll),
                              np.sin(roll))
    R = np.empty(np.shape(yaw) + (3, 3))
    R[..., 0, 0] = cy * cp
    R[..., 0, 1] = cy * sp * sr - sy * cr
    R[..., 0, 2] = cy * sp * cr + sy * sr
    R[..., 1, 0] = sy * cp
    R[..., 1, 1] = sy * sp * sr + cy * cr
    R[..., 1, 2] = sy * sp * cr - cy * sr
    R[..., 2, 0] = -sp
    R[..., 2, 1] = cp * sr
    R[..., 2, 2] = cp * cr
    return R


def path(name: str, frames: int, *, center=(0.0, 0.0), radius: float = 1.0, length: float = 2.0,
         yaw0: float = 0.0, turns: float = 1.0):
    """The nominal path: ``x, y, yaw`` (frames,) each (yaw unwrapped, radians)."""
    cx, cy = (float(c) for c in center)
    s = np.arange(frames) / frames                    # [0, 1), endpoint excluded
    if name in ("static",):
        return np.full(frames, cx), np.full(frames, cy), np.full(frames, yaw0)
    if name == "spin":
        return np.full(frames, cx), np.full(frames, cy), yaw0 + 2.0 * math.pi * turns * s
    if name in ("line", "walk"):
        u = (np.arange(frames) / max(frames - 1, 1) - 0.5) * length
        return cx + u * math.cos(yaw0), cy + u * math.sin(yaw0), np.full(frames, yaw0)
    if name == "circle":
        a = 2.0 * math.pi * turns * s
        x, y = cx + radius * np.cos(a + yaw0), cy + radius * np.sin(a + yaw0)
        return x, y, a + yaw0 + 0.5 * math.pi * np.sign(turns or 1.0)
    if name == "figure8":
        a = 2.0 * math.pi * turns * s
        x, y = radius * np.sin(a), 0.5 * radius * np.sin(2.0 * a)
        dx, dy = radius * np.cos(a), radius * np.cos(2.0 * a)
        heading = np.unwrap(np.arctan2(dy, dx))
        c, sn = math.cos(yaw0), math.sin(yaw0)
        return cx + c * x - sn * y, cy + sn * x + c * y, heading + yaw0
    raise CaliperError(f"trajectory: unknown trajectory {name!r} (choose from {', '.join(TRAJECTORIES)})")


def trajectory(name: str, frames: int, *, center=(0.0, 0.0), height: float = 0.5, motion=None,
               terrain=None, **params) -> np.ndarray:
    """Poses ``T_world_body`` (frames, 4, 4) of path ``name`` (see the module doc). ``params``:
    ``radius``, ``length``, ``yaw0`` (rad), ``turns`` of :func:`path`; ``motion``: a
    :class:`BodyMotion`, ``"walk"`` or None (``walk`` defaults to the walking motion)."""
    if name not in TRAJECTORIES:
        raise CaliperError(f"trajectory: unknown trajectory {name!r} (choose from {', '.join(TRAJECTORIES)})")
    if not isinstance(frames, (int, np.integer)) or frames < 1:
        raise CaliperError(f"trajectory: frames must be a positive integer, got {frames!r}")
    c = np.asarray(center, dtype=np.float64).reshape(-1)
    if c.shape != (2,) or not np.all(np.isfinite(c)):
        raise CaliperError(f"trajectory: center must be 2 finite numbers, got {center!r}")
    if not math.isfinite(float(height)):
        raise CaliperError(f"trajectory: height must be finite, got {height!r}")
    unknown = set(params) - {"radius", "length", "yaw0", "turns"}
    if unknown:
        raise CaliperError(f"trajectory: unknown parameter(s) {sorted(unknown)} "
                           "(radius, length, yaw0, turns, motion, terrain, center, height)")
    if motion is None and name == "walk":
        motion = BodyMotion.walking()
    elif isinstance(motion, str):
        if motion != "walk":
            raise CaliperError(f"trajectory: motion must be a BodyMotion, 'walk' or None, got {motion!r}")
        motion = BodyMotion.walking()
    x, y, yaw = path(name, int(frames), center=tuple(c), **params)
    z = np.full(frames, float(height))
    roll = pitch = np.zeros(frames)
    if motion is not None:
        m = motion.terms(int(frames))
        x = x - m["sway"] * np.sin(yaw)               # sway along the body's +y (heading + 90 deg)
        y = y + m["sway"] * np.cos(yaw)
        z = z + m["bob"]
        roll, pitch = m["roll"], m["pitch"]
    if terrain is not None:
        z = z + np.asarray(terrain(x, y), dtype=np.float64)
    T = np.tile(np.eye(4), (int(frames), 1, 1))
    T[:, :3, :3] = _rot(yaw, pitch, roll)
    T[:, 0, 3], T[:, 1, 3], T[:, 2, 3] = x, y, z
    return T


def yaw_of(T) -> np.ndarray:
    """Heading (rad, unwrapped) of poses (F, 4, 4): the body +x axis's azimuth."""
    T = np.asarray(T)
    return np.unwrap(np.arctan2(T[:, 1, 0], T[:, 0, 0]))


__all__ = ["TRAJECTORIES", "BodyMotion", "trajectory", "path", "yaw_of"]
