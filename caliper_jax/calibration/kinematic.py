"""Kinematic-parameter calibration: joint placements (``jnt_p``), small rotations of the joint
frames (``jnt_R``) and joint offsets, from pose observations of one frame.

Parametrisation, per calibrated body b: jnt_p[b] + dp_b and jnt_R[b] @ exp([dr_b]) (a local
rotation vector), plus an offset per calibrated 1-dof coordinate. The residual is the same
body-frame error twist as the offset calibration, solved by damped Gauss-Newton; the Jacobian is
first order, the body twist of dT/dx by ``jax.jacfwd`` through the FK over the Model leaves
(``solver.pose_twist_linearization``).

Many of these parameters are not separately observable from one frame's poses (a placement
along a revolute axis, an offset and a rotation about the same axis, the last placement and the
frame's own offset ...): the solver keeps the minimum-norm correction from the nominal model, so
unobservable directions stay nominal, and the report says which parameters were identifiable on
their own. What the data do fix -- the predicted poses -- is what a test should compare.
"""
from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.calibration.offsets import check_observations, offset_coordinates, pose_residual
from caliper_jax.calibration.solver import identifiable, least_squares, pose_twist_linearization, rank
from caliper_jax.errors import CaliperError
from caliper_jax.ik import chain
from caliper_jax.model import Model
from caliper_jax.spatial import mm, so3_exp


class KinematicParams(NamedTuple):
    dp: jnp.ndarray        # (nb, 3) placement corrections of the calibrated bodies
    dr: jnp.ndarray        # (nb, 3) rotation-vector corrections
    offsets: jnp.ndarray   # (nc,) joint offsets of the calibrated coordinates


def apply(model: Model, params: KinematicParams, bodies) -> Model:
    """The model with the corrections of ``bodies`` (static tuple) applied to jnt_p / jnt_R."""
    idx = np.array(bodies, dtype=np.int64)
    if len(idx) == 0:
        return model
    R = model.jnt_R.at[idx].set(mm(model.jnt_R[idx], jax.vmap(so3_exp)(params.dr)))
    p = model.jnt_p.at[idx].add(params.dp)
    return model.replace(jnt_R=R, jnt_p=p)


def _unpack(x, nb, nc):
    dp = x[:3 * nb].reshape(nb, 3)
    dr = x[3 * nb:6 * nb].reshape(nb, 3)
    return KinematicParams(dp, dr, x[6 * nb:6 * nb + nc])


def residuals(model: Model, x, qs, Ts, frame: int, bodies, coords, pos_weight=1.0, rot_weight=1.0):
    """Stacked residuals (N * 6,) for the flat parameter vector x = [dp, dr, offsets]."""
    params = _unpack(x, len(bodies), len(coords))
    m = apply(model, params, bodies)
    c = np.array(coords, dtype=np.int64)

    def one(q, T):
        return pose_residual(m, q.at[c].add(params.offsets) if len(c) else q, T, frame, pos_weight,
                             rot_weight)

    return jax.vmap(one)(qs, Ts).reshape(-1)


def poses(model: Model, x, qs, frame: int, bodies, coords):
    """(R (N, 3, 3), p (N, 3)) of ``frame`` at every observation under parameters x."""
    params = _unpack(x, len(bodies), len(coords))
    m = apply(model, params, bodies)
    c = np.array(coords, dtype=np.int64)
    return jax.vmap(lambda q: chain.frame_pose(m, q.at[c].add(params.offsets) if len(c) else q, frame))(qs)


@partial(jax.jit, static_argnames=("frame", "bodies", "coords"))
def _linearize(x, model, qs, Ts, weights, *, frame, bodies, coords):
    w6 = jnp.concatenate([jnp.full(3, weights[0]), jnp.full(3, weights[1])])
    return pose_twist_linearization(lambda y: poses(model, y, qs, frame, bodies, coords), x,
                                    Ts[:, :3, :3], Ts[:, :3, 3], w6)


def _solve(model, qs, Ts, weights, *, frame, bodies, coords, max_iters):
    lin = lambda x: _linearize(x, model, qs, Ts, weights, frame=frame, bodies=bodies, coords=coords)
    x0 = jnp.zeros(6 * len(bodies) + len(coords), model.dtype)
    out = least_squares(None, x0, max_iters=max_iters, linearize=lin)
    return out, out.residual_initial


class KinematicCalibration(NamedTuple):
    model: Model                 # the calibrated model (offsets NOT folded in; see ``offsets``)
    bodies: tuple                # calibrated body indices
    dp: np.ndarray               # (nb, 3)
    dr: np.ndarray               # (nb, 3)
    offsets: np.ndarray          # (nq,) joint offsets to add to commanded q
    identifiable: np.ndarray     # (6 nb + nc,) per parameter [dp, dr, offsets]
    rank: int
    rms_pos_before: float
    rms_rot_before: float
    rms_pos_after: float
    rms_rot_after: float
    iterations: int
    converged: bool


def calibrate_kinematics(model: Model, qs, Ts, frame: str, *, joints=None, offsets: bool = True,
                         pos_weight: float = 1.0, rot_weight: float = 1.0,
                         max_iters: int = 100) -> KinematicCalibration:
    """Calibrate joint placements / rotations (and offsets) of the joints named in ``joints``
    (default: every joint between the root and ``frame``) from q (N, nq) and measured T (N, 4, 4)."""
    frame_idx = model.frame_id(frame)
    qs, Ts = check_observations(model, qs, Ts)
    body = model.frame_body[frame_idx]
    if body < 0:
        raise CaliperError(f"frame {frame!r} is fixed to the world: nothing to calibrate")
    if joints is None:
        bodies = tuple(model.supports(body))
    else:
        bodies = tuple(sorted({model.body_id(n) for n in joints}))
    coords = ()
    if offsets:
        allowed = set(offset_coordinates(model).tolist())
        coords = tuple(sorted({model.qfull_src[model.body_qadr[b]] for b in bodies
                               if model.qfull_src[model.body_qadr[b]] in allowed
                               and model.vfull_mimic[model.body_vadr[b]] < 0}))
    nb, nc = len(bodies), len(coords)
    dtype = model.dtype
    weights = jnp.asarray([pos_weight, rot_weight], dtype)
    out, r0 = _solve(chain.for_jit(model), jnp.asarray(qs, dtype), jnp.asarray(Ts, dtype), weights,
                     frame=frame_idx, bodies=bodies, coords=coords, max_iters=int(max_iters))
    params = _unpack(out.x, nb, nc)
    calibrated = apply(model, params, bodies)
    J = np.asarray(out.jacobian)
    offs = np.zeros(model.nq)
    offs[list(coords)] = np.asarray(params.offsets)
    r0, r1 = np.asarray(r0).reshape(-1, 6), np.asarray(out.residual).reshape(-1, 6)
    rms = lambda r, s: float(np.sqrt(np.mean(np.sum(r[:, s] ** 2, -1))))
    return KinematicCalibration(
        model=calibrated, bodies=bodies, dp=np.asarray(params.dp), dr=np.asarray(params.dr), offsets=offs,
        identifiable=np.asarray(identifiable(J)), rank=int(rank(jnp.asarray(J))),
        rms_pos_before=rms(r0, slice(0, 3)), rms_rot_before=rms(r0, slice(3, 6)),
        rms_pos_after=rms(r1, slice(0, 3)), rms_rot_after=rms(r1, slice(3, 6)),
        iterations=int(out.iterations), converged=bool(out.converged))


__all__ = ["KinematicParams", "apply", "residuals", "KinematicCalibration", "calibrate_kinematics"]
