"""Joint-offset (zero) calibration from pose observations.

The encoders read q; the kinematic model's joint angle is q + delta for an unknown constant
delta. From observations (commanded q_k, measured T_k of one frame) the residual of observation k
is the body-frame error twist r_k = log6(FK(q_k + delta)^-1 T_k) (6,), [v; w], zero at the true
delta. delta is found by damped Gauss-Newton (``solver.least_squares``) with the first-order
Jacobian d r_k / d delta = -J_local(q_k + delta), obtained by ``jax.jacfwd`` through the FK.
Offsets of joints that do not move the frame (or that the data cannot separate) stay at 0 and
are reported as unidentifiable. Only 1-dof joints carry an offset.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.calibration.solver import identifiable, least_squares, pose_twist_linearization
from caliper_jax.errors import CaliperError
from caliper_jax.ik import chain
from caliper_jax.ik.poses import as_poses
from caliper_jax.model import Model
from caliper_jax.spatial import log6


def pose_residual(model: Model, q, T_meas, frame: int, pos_weight=1.0, rot_weight=1.0):
    """Weighted body-frame error twist (6,) between FK(q) and a measured pose (4, 4)."""
    R, p = chain.frame_pose(model, q, frame)
    e = log6(R.T @ T_meas[:3, :3], R.T @ (T_meas[:3, 3] - p))
    return e * jnp.asarray([pos_weight] * 3 + [rot_weight] * 3, e.dtype)


def offset_coordinates(model: Model) -> np.ndarray:
    """Indices into q of the coordinates that can carry an offset (1-dof joints)."""
    out = []
    for i, jtype in enumerate(model.jnt_type):
        va = model.body_vadr[i]
        if model.vfull_mimic[va] < 0 and jtype in ("revolute", "prismatic"):
            out.append(model.qfull_src[model.body_qadr[i]])
    return np.array(sorted(out), dtype=np.int64)


def offset_residuals(model: Model, delta, qs, Ts, frame: int, coords, pos_weight=1.0, rot_weight=1.0):
    """Stacked residuals (N * 6,) for offsets ``delta`` (len(coords),) added to q[coords]."""
    def one(q, T):
        return pose_residual(model, q.at[coords].add(delta), T, frame, pos_weight, rot_weight)

    return jax.vmap(one)(qs, Ts).reshape(-1)


class OffsetCalibration(NamedTuple):
    offsets: np.ndarray          # (nq,) estimated delta (0 where not estimated)
    identifiable: np.ndarray     # (nq,) bool
    rms_pos_before: float        # m, over the observations
    rms_rot_before: float        # rad
    rms_pos_after: float
    rms_rot_after: float
    iterations: int
    converged: bool


def _rms(r):
    r = r.reshape(-1, 6)
    rms = lambda x: float(np.sqrt(np.mean(np.sum(x * x, -1))))
    return rms(r[:, :3]), rms(r[:, 3:])


def check_observations(model: Model, qs, Ts, what="data"):
    """Validate (q (N, nq), T (N, 4, 4)) on the host -> float64 arrays."""
    qs = np.asarray(qs, dtype=np.float64)
    if qs.ndim != 2 or qs.shape[1] != model.nq:
        raise CaliperError(f"{what}.q: expected shape (N, {model.nq}) for {model.name!r}, got {qs.shape}")
    if not np.all(np.isfinite(qs)):
        raise CaliperError(f"{what}.q: non-finite values")
    Ts = as_poses(Ts, f"{what}.T")
    if Ts.shape != (qs.shape[0], 4, 4):
        raise CaliperError(f"{what}.T: expected shape ({qs.shape[0]}, 4, 4) to match q, got {Ts.shape}")
    if qs.shape[0] == 0:
        raise CaliperError(f"{what}: no observations")
    return qs, Ts


def calibrate_joint_offsets(model: Model, qs, Ts, frame: str, *, joints=None, pos_weight: float = 1.0,
                            rot_weight: float = 1.0, max_iters: int = 50) -> OffsetCalibration:
    """Estimate joint offsets from observations: q (N, nq) commanded, T (N, 4, 4) measured
    T_world_frame of ``frame`` (row-major). ``joints``: names to calibrate (default all 1-dof)."""
    frame_idx = model.frame_id(frame)
    qs, Ts = check_observations(model, qs, Ts)
    coords = offset_coordinates(model)
    if joints is not None:
        wanted = []
        for name in joints:
            b = model.body_id(name)
            mimic = model.vfull_mimic[model.body_vadr[b]] >= 0
            if model.jnt_type[b] not in ("revolute", "prismatic") or mimic:
                raise CaliperError(f"joints: {name!r} is not an independent 1-dof joint")
            wanted.append(model.qfull_src[model.body_qadr[b]])
        coords = np.array(sorted(set(wanted)), dtype=np.int64)
    dtype = model.dtype
    res = _solve_offsets(chain.for_jit(model), jnp.asarray(qs, dtype), jnp.asarray(Ts, dtype),
                         jnp.asarray([pos_weight, rot_weight], dtype), frame=frame_idx,
                         coords=tuple(int(c) for c in coords), max_iters=int(max_iters))
    x, r0, r1, J = (np.asarray(a) for a in (res.x, res.r0, res.residual, res.jacobian))
    offsets = np.zeros(model.nq)
    offsets[coords] = x
    ident = np.zeros(model.nq, bool)
    ident[coords] = np.asarray(identifiable(J))
    (pb, rb), (pa, ra) = _rms(r0), _rms(r1)
    return OffsetCalibration(offsets, ident, pb, rb, pa, ra, int(res.iterations), bool(res.converged))


class _Solved(NamedTuple):
    x: jnp.ndarray
    r0: jnp.ndarray
    residual: jnp.ndarray
    jacobian: jnp.ndarray
    iterations: jnp.ndarray
    converged: jnp.ndarray


@partial(jax.jit, static_argnames=("frame", "coords"))
def _linearize_offsets(d, model, qs, Ts, weights, *, frame, coords):
    c = np.array(coords, dtype=np.int64)
    w6 = jnp.concatenate([jnp.full(3, weights[0]), jnp.full(3, weights[1])])
    poses = lambda y: jax.vmap(lambda q: chain.frame_pose(model, q.at[c].add(y), frame))(qs)
    return pose_twist_linearization(poses, d, Ts[:, :3, :3], Ts[:, :3, 3], w6)


def _solve_offsets(model, qs, Ts, weights, *, frame, coords, max_iters):
    lin = lambda d: _linearize_offsets(d, model, qs, Ts, weights, frame=frame, coords=coords)
    x0 = jnp.zeros(len(coords), model.dtype)
    out = least_squares(None, x0, max_iters=max_iters, linearize=lin)
    return _Solved(out.x, out.residual_initial, out.residual, out.jacobian, out.iterations, out.converged)


__all__ = ["pose_residual", "offset_coordinates", "offset_residuals", "OffsetCalibration",
           "check_observations", "calibrate_joint_offsets"]
