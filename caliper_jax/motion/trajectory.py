"""Joint-space trajectories built from time-synchronised S-curves: MOVE_J and waypoint retiming.

A :class:`Trajectory` is a pytree of ``nseg`` consecutive segments; each segment moves every
dof with its own S-curve, all of one common duration, from rest to rest. Sampling is O(1) per
time stamp plus a binary search over segment start times.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.motion.scurve import SCurve, _float, _stretch, scurve_min_time, scurve_sample

Array = jnp.ndarray


class MotionSample(NamedTuple):
    """Joint state at the requested time stamps: each field has shape ``t.shape + (ndof,)``."""

    q: Array
    qd: Array
    qdd: Array
    qddd: Array


class SampledRows(NamedTuple):
    """Rows for playback and for the trajectory lint: times (n,), q, qd, qdd (n, ndof)."""

    times: Array
    q: Array
    qd: Array
    qdd: Array


def _segment_index(t_start: Array, t: Array) -> Array:
    k = jnp.searchsorted(t_start, t, side="right") - 1
    return jnp.clip(k, 0, t_start.shape[0] - 1)


def uniform_times(duration: float, dt: float) -> np.ndarray:
    """Host-side uniform time grid 0, dt, 2dt, ... with ``duration`` appended when it is off-grid."""
    duration, dt = float(duration), float(dt)
    if not (np.isfinite(dt) and dt > 0.0):
        raise CaliperError(f"dt must be > 0 and finite, got {dt!r}")
    if not (np.isfinite(duration) and duration >= 0.0):
        raise CaliperError(f"trajectory duration must be finite and >= 0, got {duration!r}")
    n = int(np.floor(duration / dt * (1.0 + 1e-12))) + 1
    times = np.arange(n) * dt
    if duration - times[-1] > 1e-9 * dt:
        times = np.append(times, duration)
    else:
        times[-1] = duration  # the last row is the end exactly
    return times


def grid_rows(traj, n: int) -> SampledRows:
    """``n`` rows evenly spaced over [0, duration] of any trajectory value (``n`` static: jittable)."""
    times = jnp.linspace(0.0, 1.0, n, dtype=traj.t_start.dtype) * traj.duration
    s = traj.sample(times)
    return SampledRows(times, s.q, s.qd, s.qdd)


@jax.jit
def _sample_padded(traj, times):
    s = traj.sample(times)
    return s.q, s.qd, s.qdd


def _rows_at(traj, times: np.ndarray) -> SampledRows:
    n = times.shape[0]
    padded = np.full((1 << max(n - 1, 1).bit_length(),), times[-1])
    padded[:n] = times
    q, qd, qdd = _sample_padded(traj, jnp.asarray(padded, dtype=traj.t_start.dtype))
    return SampledRows(jnp.asarray(times, dtype=traj.t_start.dtype), q[:n], qd[:n], qdd[:n])


def uniform_rows(traj, dt: float) -> SampledRows:
    """Rows every ``dt`` seconds from 0, the last row at the duration. A host-level entry point
    (the row count depends on the duration), so not for ``jit``; use ``grid`` there. It samples
    through one jitted call, padding the time vector to a power of two to bound recompiles."""
    return _rows_at(traj, uniform_times(float(traj.duration), dt))


def sample_at(traj, times) -> SampledRows:
    """NumPy rows (times, q, qd, qdd) of any trajectory value at host ``times`` (n >= 1,), through
    the same padded jitted call as ``sample_uniform``."""
    t = np.asarray(times, dtype=np.float64).reshape(-1)
    if t.shape[0] < 1 or not np.all(np.isfinite(t)):
        raise CaliperError(f"times: expected at least one finite time, got shape {t.shape}")
    return SampledRows(*(np.asarray(x, dtype=np.float64) for x in _rows_at(traj, t)))


class Trajectory(NamedTuple):
    """Consecutive rest-to-rest segments of per-dof S-curves sharing each segment's duration.

    Fields: ``t_start`` (nseg,), ``seg_duration`` (nseg,), ``q_start`` (nseg, ndof) and
    ``profile`` (an :class:`SCurve` whose fields are (nseg, ndof)).
    """

    t_start: Array
    seg_duration: Array
    q_start: Array
    profile: SCurve

    @property
    def duration(self) -> Array:
        return self.t_start[..., -1] + self.seg_duration[..., -1]

    @property
    def ndof(self) -> int:
        return self.q_start.shape[-1]

    def sample(self, t) -> MotionSample:
        """State at time(s) ``t`` (any shape); before 0 and after the end the state is at rest."""
        # Materialise the plan and the time stamps before the per-sample loop (see scurve_sample).
        self, t = jax.lax.optimization_barrier((self, jnp.asarray(t, dtype=self.t_start.dtype)))
        if self.t_start.shape[-1] == 1:  # one segment (MOVE_J): broadcast, no search or gather
            first = jax.tree_util.tree_map(lambda x: x[0], self.profile)
            st = scurve_sample(first, (t - self.t_start[0])[..., None])
            return MotionSample(self.q_start[0] + st.p, st.v, st.a, st.j)
        k = _segment_index(self.t_start, t)
        local = (t - self.t_start[k])[..., None]
        prof = jax.tree_util.tree_map(lambda x: x[k], self.profile)
        st = scurve_sample(prof, local)
        return MotionSample(self.q_start[k] + st.p, st.v, st.a, st.j)

    grid = grid_rows
    sample_uniform = uniform_rows


def _limits_arrays(limits, dtype):
    return (jnp.asarray(limits.vmax, dtype), jnp.asarray(limits.amax, dtype), jnp.asarray(limits.jmax, dtype))


def synchronized_profiles(q_start, q_goal, limits, duration=None) -> SCurve:
    """Per-dof S-curves from ``q_start`` to ``q_goal`` (ndof,) all lasting the slowest dof's minimum
    time (or ``duration`` when it is longer). Every dof keeps its own amax/jmax; faster dofs get
    a lower peak velocity."""
    q0, q1 = _float(q_start), _float(q_goal)
    dtype = jnp.result_type(q0, q1)
    vmax, amax, jmax = _limits_arrays(limits, dtype)
    fastest = scurve_min_time(q1 - q0, vmax, amax, jmax)
    common = jnp.max(fastest.duration)
    if duration is not None:
        common = jnp.maximum(common, jnp.asarray(duration, dtype))
    return _stretch(fastest, jnp.broadcast_to(common, fastest.distance.shape), amax, jmax)


def move_j(q_start, q_goal, limits, duration=None) -> Trajectory:
    """MOVE_J: every joint starts and stops together, timed by the slowest joint (jerk-limited).

    ``limits`` is a :class:`~caliper_jax.motion.MotionLimits` (only vmax/amax/jmax are used;
    position limits are for the lint). ``duration`` optionally asks for a longer move.
    """
    prof = synchronized_profiles(q_start, q_goal, limits, duration)
    q0 = jnp.broadcast_to(_float(q_start), prof.distance.shape).astype(prof.distance.dtype)
    seg_t = jnp.max(prof.duration)[None]
    expand = jax.tree_util.tree_map(lambda x: x[None], prof)
    return Trajectory(jnp.zeros_like(seg_t), seg_t, q0[None], expand)


def retime_waypoints(waypoints, limits) -> Trajectory:
    """A waypoint path (N, ndof) to one jerk-limited Trajectory, resting at every waypoint.

    Each leg is a time-synchronised MOVE_J; legs follow each other without pause. Repeated
    waypoints give zero-length legs.
    """
    wp = _float(waypoints)
    if wp.ndim != 2 or wp.shape[0] < 2:
        raise CaliperError(f"retime_waypoints: waypoints must have shape (N >= 2, ndof), got {wp.shape}")
    prof = jax.vmap(lambda a, b: synchronized_profiles(a, b, limits))(wp[:-1], wp[1:])
    seg_t = jnp.max(prof.duration, axis=-1)
    t_start = jnp.concatenate([jnp.zeros((1,), wp.dtype), jnp.cumsum(seg_t)[:-1]])
    return Trajectory(t_start, seg_t, wp[:-1], prof)
