"""Setpoint sources: what the loop is asked to do at each tick.

A source is a pytree with a method ``setpoint(tick, t, q, v) -> Setpoint`` (``q``, ``v`` are the
follower's measured state, for sources that react to it). All of them are pure and traceable,
so a source rides through ``lax.scan`` and ``vmap`` (batch a source by stacking its leaves).

- :class:`ConstantSource`: one fixed position target.
- :class:`TrajectorySource`: a ``caliper_jax.motion.Trajectory`` sampled at the tick times.
- :func:`ik_goal_source`: a target pose through any ``solve(T) -> q`` IK callable, then MOVE_J.
- :class:`IKStreamSource`: a stream of poses, each through ``solve`` (e.g. a VR teleop stream).
- :class:`TeleopSource`: leader-follower teleop; the leader's measured joint state, re-mapped,
  commands the follower. Ticks past the end of the stream are not fresh (the watchdog counts).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.control.safety import Setpoint
from caliper_jax.errors import CaliperError
from caliper_jax.motion import Trajectory, move_j


def _fresh(x=True):
    return jnp.asarray(x, bool)


class ConstantSource(NamedTuple):
    q: Any   # (nq,)

    def setpoint(self, tick, t, q, v) -> Setpoint:
        z = jnp.zeros_like(self.q)
        return Setpoint(self.q, z, z, _fresh(), _fresh(False))


class TrajectorySource(NamedTuple):
    """Samples ``traj`` at ``t - t0``; before the start and after the end it rests there."""

    traj: Trajectory
    t0: Any = 0.0

    def setpoint(self, tick, t, q, v) -> Setpoint:
        # sample a (1,) time vector: Trajectory.sample of a scalar returns (1, ndof) for one segment
        s = self.traj.sample(jnp.reshape(t - self.t0, (1,)))
        return Setpoint(s.q[0], s.qd[0], s.qdd[0], _fresh(), _fresh(False))


def trajectory_source(traj: Trajectory, t0: float = 0.0) -> TrajectorySource:
    return TrajectorySource(traj, jnp.asarray(t0, traj.t_start.dtype))


def goal_source(q_start, q_goal, limits, duration=None) -> TrajectorySource:
    """A jerk-limited MOVE_J from ``q_start`` to ``q_goal`` under ``limits`` (MotionLimits)."""
    traj = move_j(q_start, q_goal, limits, duration)
    return TrajectorySource(traj, jnp.zeros((), traj.t_start.dtype))


def _solution(result, fallback):
    """(q, ok) from an IK callable's result: an array, or anything with ``.q`` (and ``.success``)."""
    q = getattr(result, "q", result)
    ok = jnp.asarray(getattr(result, "success", True), bool) & jnp.all(jnp.isfinite(q))
    q = jnp.asarray(q, jnp.asarray(fallback).dtype)
    return jnp.where(ok, q, fallback), ok


def ik_goal_source(solve: Callable, target_T, q_start, limits, duration=None) -> TrajectorySource:
    """Solve ``target_T`` (4, 4) once with ``solve(T) -> q`` (or an IKResult-like object with
    ``.q``/``.success``), then MOVE_J there from ``q_start``. When the solver fails the move
    stays at ``q_start``. Traceable when ``solve`` is."""
    q_start = jnp.asarray(q_start)
    q_goal, _ = _solution(solve(jnp.asarray(target_T, q_start.dtype)), q_start)
    return goal_source(q_start, q_goal, limits, duration)


@dataclasses.dataclass(frozen=True)
class IKStreamSource:
    """Tick k commands ``solve(poses[k])``; a failed solve or a tick past the stream is not fresh.
    ``solve`` is static (part of the jit cache key)."""

    poses: Any            # (T, 4, 4)
    valid: Any            # (T,) bool
    solve: Callable = dataclasses.field(default=None, metadata={"static": True})

    def setpoint(self, tick, t, q, v) -> Setpoint:
        n = self.poses.shape[0]
        k = jnp.clip(tick, 0, n - 1)
        q_ik, ok = _solution(self.solve(self.poses[k]), q)
        z = jnp.zeros_like(q_ik)
        return Setpoint(q_ik, z, z, ok & self.valid[k] & (tick < n), _fresh(False))


jax.tree_util.register_dataclass(IKStreamSource, data_fields=["poses", "valid"],
                                 meta_fields=["solve"])


def ik_stream_source(solve: Callable, poses, valid=None, dtype=None) -> IKStreamSource:
    poses = jnp.asarray(poses, dtype)
    if poses.ndim != 3 or poses.shape[1:] != (4, 4):
        raise CaliperError(f"ik_stream_source: poses must be (T, 4, 4), got {poses.shape}")
    valid = jnp.ones(poses.shape[0], bool) if valid is None else jnp.asarray(valid, bool)
    return IKStreamSource(poses, valid, solve)


class TeleopSource(NamedTuple):
    """Leader-follower: follower q* = leader_q[k][index] * scale + offset, qd* likewise.

    ``leader_q``/``leader_v`` (T, n_leader) are the leader's *measured* states, one per tick (a
    recorded stream, or another rollout's trace); ``valid`` (T,) marks ticks where a reading
    arrived; ``estop`` (T,) is the operator's e-stop button."""

    leader_q: Any
    leader_v: Any
    valid: Any
    estop: Any
    index: Any     # (nq,) int: follower joint j copies leader joint index[j]
    scale: Any     # (nq,)
    offset: Any    # (nq,)

    def setpoint(self, tick, t, q, v) -> Setpoint:
        n = self.leader_q.shape[0]
        k = jnp.clip(tick, 0, n - 1)
        q_t, qd_t = teleop_map(self.leader_q[k], self.leader_v[k], self.index, self.scale, self.offset)
        inside = tick < n
        return Setpoint(q_t, qd_t, jnp.zeros_like(qd_t), self.valid[k] & inside, self.estop[k] & inside)


def teleop_map(leader_q, leader_v, index, scale, offset):
    """Map one leader reading to follower (q*, qd*). Use it tick by tick with a live leader."""
    return leader_q[index] * scale + offset, leader_v[index] * scale


def teleop_source(leader_q, leader_v=None, *, valid=None, estop=None, index=None, scale=1.0,
                  offset=0.0, nq: int | None = None) -> TeleopSource:
    """Build a :class:`TeleopSource` from a leader's measured stream (T, n_leader)."""
    leader_q = jnp.asarray(leader_q)
    if leader_q.ndim != 2:
        raise CaliperError(f"teleop_source: leader_q must be (T, n_leader), got {leader_q.shape}")
    T, nl = leader_q.shape
    dtype = leader_q.dtype
    leader_v = jnp.zeros_like(leader_q) if leader_v is None else jnp.asarray(leader_v, dtype)
    if leader_v.shape != leader_q.shape:
        raise CaliperError(f"teleop_source: leader_v shape {leader_v.shape} != leader_q {leader_q.shape}")
    idx = np.arange(nl if nq is None else nq) if index is None else np.asarray(index, dtype=np.int64)
    if idx.ndim != 1 or np.any(idx < 0) or np.any(idx >= nl):
        raise CaliperError(f"teleop_source: index must pick leader joints 0..{nl - 1}, got {idx}")
    n = idx.shape[0]
    scale = jnp.broadcast_to(jnp.asarray(scale, dtype), (n,))
    offset = jnp.broadcast_to(jnp.asarray(offset, dtype), (n,))
    valid = jnp.ones(T, bool) if valid is None else jnp.asarray(valid, bool)
    estop = jnp.zeros(T, bool) if estop is None else jnp.asarray(estop, bool)
    if valid.shape != (T,) or estop.shape != (T,):
        raise CaliperError("teleop_source: valid and estop must have one entry per leader tick")
    return TeleopSource(leader_q, leader_v, valid, estop, jnp.asarray(idx, jnp.int32), scale, offset)


__all__ = ["ConstantSource", "IKStreamSource", "TeleopSource", "TrajectorySource", "goal_source",
           "ik_goal_source", "ik_stream_source", "teleop_map", "teleop_source", "trajectory_source"]
