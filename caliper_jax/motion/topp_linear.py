"""Time-optimal, acceleration-limited timing of a piecewise-linear joint path, corner stops included.

On a straight leg q(s) = q_k + s * dq (s in [0, 1]) the joint rates are qd = dq * sd and
qdd = dq * sdd, so the per-dof limits become two scalar bounds on the path parameter:
``sd <= min_i vmax_i / |dq_i|`` and ``|sdd| <= min_i amax_i / |dq_i|``. At an interior waypoint the
tangent jumps, q''(s) is a Dirac there, and only ``sd = 0`` keeps qdd finite: each leg is a
rest-to-rest bang-bang (trapezoid, or triangle when the peak is never reached) in s, which is
time-optimal under those bounds. Jerk is unbounded at the switching instants by construction.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from caliper_jax.errors import CaliperError
from caliper_jax.motion.scurve import _float
from caliper_jax.motion.trajectory import MotionSample, _segment_index, grid_rows, uniform_rows

Array = jnp.ndarray


class LinearPathTrajectory(NamedTuple):
    """Legs of a piecewise-linear path, each timed by a rest-to-rest bang-bang in s in [0, 1].

    Fields per leg: ``t_start``, ``seg_duration``, ``sd_peak`` (reached path speed),
    ``sdd_max`` (path acceleration used), ``t_ramp`` (each ramp's length); per leg and dof:
    ``q_start`` and ``dq``.
    """

    t_start: Array
    seg_duration: Array
    q_start: Array
    dq: Array
    sd_peak: Array
    sdd_max: Array
    t_ramp: Array

    @property
    def duration(self) -> Array:
        return self.t_start[..., -1] + self.seg_duration[..., -1]

    def sample(self, t) -> MotionSample:
        """Joint state at time(s) ``t``; ``qddd`` is zero (the jerk is impulsive at switches)."""
        t = jnp.asarray(t, dtype=self.t_start.dtype)
        k = _segment_index(self.t_start, t)
        total = self.seg_duration[k]
        tau = jnp.clip(t - self.t_start[k], 0.0, total)
        mirrored = tau > 0.5 * total
        h = jnp.where(mirrored, total - tau, tau)
        acc, peak, ramp = self.sdd_max[k], self.sd_peak[k], self.t_ramp[k]
        on_ramp = h <= ramp
        s_h = jnp.where(on_ramp, 0.5 * acc * h * h, 0.5 * peak * ramp + peak * (h - ramp))
        sd = jnp.where(on_ramp, acc * h, peak)
        sdd = jnp.where(on_ramp, jnp.where(mirrored, -acc, acc), 0.0)
        sdd = jnp.where((tau > 0.0) & (tau < total), sdd, 0.0)
        moving = total > 0.0
        s = jnp.where(moving, jnp.where(mirrored, 1.0 - s_h, s_h), 1.0)
        sd = jnp.where(moving, sd, 0.0)
        dq = self.dq[k]
        q = self.q_start[k] + dq * s[..., None]
        return MotionSample(q, dq * sd[..., None], dq * sdd[..., None], jnp.zeros_like(q))

    grid = grid_rows
    sample_uniform = uniform_rows


def topp_piecewise_linear(waypoints, limits) -> LinearPathTrajectory:
    """Time-optimal acceleration-limited timing of the polyline through ``waypoints`` (N, ndof),
    stopping at every interior waypoint, under per-dof ``limits.vmax`` and ``limits.amax``."""
    wp = _float(waypoints)
    if wp.ndim != 2 or wp.shape[0] < 2:
        raise CaliperError(f"topp: waypoints must have shape (N >= 2, ndof), got {wp.shape}")
    vmax = jnp.asarray(limits.vmax, wp.dtype)
    amax = jnp.asarray(limits.amax, wp.dtype)
    dq = wp[1:] - wp[:-1]
    adq = jnp.abs(dq)
    moving_dof = adq > 0.0
    adq_safe = jnp.where(moving_dof, adq, 1.0)
    inf = jnp.asarray(jnp.inf, wp.dtype)
    sd_max = jnp.min(jnp.where(moving_dof, vmax / adq_safe, inf), axis=-1)
    sdd_max = jnp.min(jnp.where(moving_dof, amax / adq_safe, inf), axis=-1)
    moving = jnp.any(moving_dof, axis=-1)
    sd_max = jnp.where(moving, sd_max, 1.0)
    sdd_max = jnp.where(moving, sdd_max, 1.0)
    # Triangle when accelerating to sd_max would already cover the leg (s in [0, 1]).
    triangle = sd_max * sd_max / sdd_max >= 1.0
    t_ramp = jnp.where(triangle, jnp.sqrt(1.0 / sdd_max), sd_max / sdd_max)
    sd_peak = sdd_max * t_ramp
    t_cruise = jnp.where(triangle, 0.0, jnp.maximum(1.0 / sd_max - t_ramp, 0.0))
    seg_t = jnp.where(moving, 2.0 * t_ramp + t_cruise, 0.0)
    t_ramp = jnp.where(moving, t_ramp, 0.0)
    t_start = jnp.concatenate([jnp.zeros((1,), wp.dtype), jnp.cumsum(seg_t)[:-1]])
    return LinearPathTrajectory(t_start, seg_t, wp[:-1], dq, sd_peak, sdd_max, t_ramp)
