"""Forward kinematics, frame placements, Jacobians, frame velocities and accelerations.

Frames: ``T_world_frame`` as 4x4 homogeneous matrices, row-major, ``p_world = T[:3, :3] @ p_frame
+ T[:3, 3]``. Twists are ``[v; w]`` (linear first). Jacobian flavours follow Pinocchio:
``"world"`` is LOCAL_WORLD_ALIGNED (the frame origin's velocity, world axes) and ``"local"`` is
LOCAL (the same twist in the frame's own axes). One instance per call; batch with ``jax.vmap``.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from caliper_jax.configuration import expand_q, expand_v, reduce_force
from caliper_jax.model import Model
from caliper_jax.spatial import (
    axis_angle_to_R,
    cross,
    homogeneous,
    mm,
    motion_cross_motion,
    motion_to_child,
    mtv,
    mv,
    quat_to_R,
)

REFERENCES = ("world", "local")


def joint_placements(model: Model, q_full):
    """Per body, its frame in the parent body's frame at q: lists of R (3,3) and p (3,)."""
    Rs, ps = [], []
    for i, jtype in enumerate(model.jnt_type):
        a = model.body_qadr[i]
        R0, p0 = model.jnt_R[i], model.jnt_p[i]
        if jtype == "revolute":
            Rs.append(mm(R0, axis_angle_to_R(model.jnt_axis[i], q_full[a])))
            ps.append(p0)
        elif jtype == "prismatic":
            Rs.append(R0)
            ps.append(p0 + mv(R0, model.jnt_axis[i] * q_full[a]))
        elif jtype == "ball":
            Rs.append(mm(R0, quat_to_R(q_full[a:a + 4])))
            ps.append(p0)
        else:  # free
            Rs.append(mm(R0, quat_to_R(q_full[a + 3:a + 7])))
            ps.append(p0 + mv(R0, q_full[a:a + 3]))
    return Rs, ps


def _compose_world(model: Model, Rs, ps):
    Rw, pw = [], []
    for i, parent in enumerate(model.body_parent):
        if parent < 0:
            Rw.append(Rs[i])
            pw.append(ps[i])
        else:
            Rw.append(mm(Rw[parent], Rs[i]))
            pw.append(pw[parent] + mv(Rw[parent], ps[i]))
    return Rw, pw


def body_poses(model: Model, q):
    """World placement of every body frame: R (nbody, 3, 3), p (nbody, 3)."""
    Rw, pw = _compose_world(model, *joint_placements(model, expand_q(model, q)))
    dtype = model.dtype
    if not Rw:
        return jnp.zeros((0, 3, 3), dtype), jnp.zeros((0, 3), dtype)
    return jnp.stack(Rw), jnp.stack(pw)


def _frames_from_bodies(model: Model, Rb, pb):
    """World placement of every frame from the bodies' (with the world as body -1)."""
    idx = np.array(model.frame_body)
    eye = jnp.eye(3, dtype=model.frame_R.dtype)
    Rb_ext = jnp.concatenate([Rb, eye[None]], axis=0) if Rb.shape[0] else eye[None]
    pb_ext = jnp.concatenate([pb, jnp.zeros((1, 3), pb.dtype)], axis=0) if pb.shape[0] else jnp.zeros((1, 3))
    Rp, pp = Rb_ext[idx], pb_ext[idx]  # index -1 picks the appended world row
    return mm(Rp, model.frame_R), pp + mv(Rp, model.frame_p)


def frame_placements(model: Model, q):
    """World placement of every named frame: R (nframe, 3, 3), p (nframe, 3)."""
    return _frames_from_bodies(model, *body_poses(model, q))


def forward_kinematics(model: Model, q):
    """T_world_frame for every frame: (nframe, 4, 4), row-major homogeneous matrices."""
    return homogeneous(*frame_placements(model, q))


def frame_pose(model: Model, q, frame: int):
    """T_world_frame (4, 4) of one frame (index from ``model.frame_id``)."""
    return forward_kinematics(model, q)[frame]


# ---- Jacobians ---------------------------------------------------------------------------------

def _dof_axes(model: Model, Rw, pw):
    """Per full velocity coordinate: (angular axis w, linear part at the body origin, body
    origin) in world axes, so the column for a point o is [lin + w x (o - origin); w]."""
    ws, lins, origins = [], [], []
    dtype = model.dtype
    zero = jnp.zeros(3, dtype)
    for i, jtype in enumerate(model.jnt_type):
        R, p = Rw[i], pw[i]
        if jtype == "revolute":
            cols = [(mv(R, model.jnt_axis[i]), zero)]
        elif jtype == "prismatic":
            cols = [(zero, mv(R, model.jnt_axis[i]))]
        elif jtype == "ball":
            cols = [(R[:, k], zero) for k in range(3)]
        else:
            cols = [(zero, R[:, k]) for k in range(3)] + [(R[:, k], zero) for k in range(3)]
        for w, lin in cols:
            ws.append(w)
            lins.append(lin)
            origins.append(p)
    return jnp.stack(ws), jnp.stack(lins), jnp.stack(origins)


def _support_mask(model: Model, bodies) -> np.ndarray:
    """(len(bodies), nv_full) bool: does the full dof move the given body?"""
    mask = np.zeros((len(bodies), model.nv_full), dtype=bool)
    for r, body in enumerate(bodies):
        for b in model.supports(body):
            a = model.body_vadr[b]
            nv = {"revolute": 1, "prismatic": 1, "ball": 3, "free": 6}[model.jnt_type[b]]
            mask[r, a:a + nv] = True
    return mask


def _jacobians_at(model: Model, Rw, pw, bodies, points, rotations, reference):
    """Jacobians (n, 6, nv) of points (n, 3) rigidly attached to ``bodies`` (static tuple)."""
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")
    nv_full = model.nv_full
    if nv_full == 0:
        return jnp.zeros((len(bodies), 6, 0), model.dtype)
    w, lin0, origin = _dof_axes(model, Rw, pw)                       # (nv_full, 3)
    lin = lin0[None] + cross(w[None], points[:, None, :] - origin[None])  # (n, nv_full, 3)
    mask = jnp.asarray(_support_mask(model, bodies))[..., None]
    lin = jnp.where(mask, lin, 0.0)
    ang = jnp.where(mask, jnp.broadcast_to(w[None], lin.shape), 0.0)
    if reference == "local":
        lin = mtv(rotations[:, None], lin)
        ang = mtv(rotations[:, None], ang)
    J = jnp.concatenate([jnp.swapaxes(lin, -1, -2), jnp.swapaxes(ang, -1, -2)], axis=-2)
    return reduce_force(model, J)


def frame_jacobians(model: Model, q, reference: str = "world"):
    """Geometric Jacobians of every frame: (nframe, 6, nv), rows [v; w]."""
    Rw, pw = body_poses(model, q)
    Rf, pf = _frames_from_bodies(model, Rw, pw)
    return _jacobians_at(model, list(Rw), list(pw), model.frame_body, pf, Rf, reference)


def frame_jacobian(model: Model, q, frame: int, reference: str = "world"):
    """Geometric Jacobian (6, nv) of one frame (index from ``model.frame_id``)."""
    Rw, pw = body_poses(model, q)
    Rf, pf = _frames_from_bodies(model, Rw, pw)
    return _jacobians_at(model, list(Rw), list(pw), (model.frame_body[frame],), pf[frame][None],
                         Rf[frame][None], reference)[0]


# ---- velocities and accelerations --------------------------------------------------------------

def motion_subspace(model: Model, body: int):
    """S (6, nv_body) of a body's joint in its own frame, rows [v; w]."""
    jtype, axis, dtype = model.jnt_type[body], model.jnt_axis[body], model.dtype
    zero = jnp.zeros(3, dtype)
    if jtype == "revolute":
        return jnp.concatenate([zero, axis])[:, None]
    if jtype == "prismatic":
        return jnp.concatenate([axis, zero])[:, None]
    if jtype == "ball":
        return jnp.concatenate([jnp.zeros((3, 3), dtype), jnp.eye(3, dtype=dtype)])
    return jnp.eye(6, dtype=dtype)


def body_motion(model: Model, Rs, ps, v_full, a_full, a_base=None):
    """Forward pass: spatial velocity and acceleration of every body in its own frame.

    Rs, ps: joint placements (from :func:`joint_placements`); v_full, a_full: (nv_full,) joint
    velocities and accelerations; a_base: linear acceleration of the world origin in world axes
    (``-gravity`` for dynamics, None for zero). Returns lists of (v, w) and (av, aw) pairs.
    """
    dtype = model.dtype
    zero = jnp.zeros(3, dtype)
    vel, acc = [], []
    for i, parent in enumerate(model.body_parent):
        a = model.body_vadr[i]
        S = motion_subspace(model, i)
        k = S.shape[1]
        sq, sqd = mv(S, v_full[a:a + k]), mv(S, a_full[a:a + k])
        if parent < 0:
            pv, pw_, pav, paw = zero, zero, (zero if a_base is None else a_base), zero
        else:
            (pv, pw_), (pav, paw) = vel[parent], acc[parent]
        v, w = motion_to_child(Rs[i], ps[i], pv, pw_)
        av, aw = motion_to_child(Rs[i], ps[i], pav, paw)
        v, w = v + sq[:3], w + sq[3:]
        cv, cw = motion_cross_motion(v, w, sq[:3], sq[3:])
        vel.append((v, w))
        acc.append((av + sqd[:3] + cv, aw + sqd[3:] + cw))
    return vel, acc


def _frame_motion(model: Model, q, v, a, frame, reference):
    q_full = expand_q(model, q)
    Rs, ps = joint_placements(model, q_full)
    vf = expand_v(model, v)
    af = expand_v(model, a) if a is not None else jnp.zeros_like(vf)
    vel, acc = body_motion(model, Rs, ps, vf, af)
    body = model.frame_body[frame]
    Rf, pf = model.frame_R[frame], model.frame_p[frame]
    if body < 0:
        zero = jnp.zeros(3, model.dtype)
        (bv, bw), (bav, baw) = (zero, zero), (zero, zero)
    else:
        (bv, bw), (bav, baw) = vel[body], acc[body]
    fv, fw = motion_to_child(Rf, pf, bv, bw)
    fav, faw = motion_to_child(Rf, pf, bav, baw)
    if reference == "world":
        Rw, _ = _frames_from_bodies(model, *body_poses(model, q))
        Rwf = Rw[frame]
        fv, fw, fav, faw = mv(Rwf, fv), mv(Rwf, fw), mv(Rwf, fav), mv(Rwf, faw)
    elif reference != "local":
        raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")
    return fv, fw, fav, faw


def frame_velocity(model: Model, q, v, frame: int, reference: str = "world"):
    """Twist [v; w] (6,) of a frame's origin."""
    fv, fw, _, _ = _frame_motion(model, q, v, None, frame, reference)
    return jnp.concatenate([fv, fw])


def frame_acceleration(model: Model, q, v, a, frame: int, reference: str = "world",
                       classical: bool = False):
    """Spatial acceleration [dv; dw] (6,) of a frame (Pinocchio's ``getFrameAcceleration``);
    ``classical=True`` gives the frame origin's classical linear acceleration (adds w x v)."""
    fv, fw, fav, faw = _frame_motion(model, q, v, a, frame, reference)
    if classical:
        fav = fav + cross(fw, fv)
    return jnp.concatenate([fav, faw])
