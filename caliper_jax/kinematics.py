"""Forward kinematics, frame placements, Jacobians, frame velocities and accelerations.

Frames: ``T_world_frame`` as 4x4 homogeneous matrices, row-major, ``p_world = T[:3, :3] @ p_frame
+ T[:3, 3]``. Twists are ``[v; w]`` (linear first). Jacobian flavours follow Pinocchio:
``"world"`` is LOCAL_WORLD_ALIGNED (the frame origin's velocity, world axes) and ``"local"`` is
LOCAL (the same twist in the frame's own axes). One instance per call; batch with ``jax.vmap``.

Formulation (chosen for XLA, where the number of kernels sets the cost): joint placements are
computed for all bodies at once; only the composition of world poses walks the tree. Motion is
then expressed with *world-origin spatial axes* ``xi`` (one 6-vector per dof), so velocities and
accelerations of every body are masked sums over their supporting dofs -- a few batched ops,
not a recursion.

Deep or large trees (more than ``levels.MAX_UNROLLED_BODIES`` bodies or
``levels.MAX_UNROLLED_DEPTH`` levels) replace the unrolled walk and the dense masks by level walks
in one ``lax.scan`` (:mod:`caliper_jax.levels`), so compile time stays flat in the depth.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from caliper_jax import lanes, lanes_jacobian, levels
from caliper_jax.configuration import expand_q, expand_v, reduce_force
from caliper_jax.model import Model, tables
from caliper_jax.spatial import axis_angle_to_R, cross, homogeneous, mm, mtv, mv, quat_to_R

REFERENCES = ("world", "local")


# ---- placements ----------------------------------------------------------------------------------

def joint_placements(model: Model, q_full):
    """Every body's frame in its parent body's frame at q: R (nbody, 3, 3), p (nbody, 3)."""
    types = model.jnt_type
    adr = np.array(model.body_qadr, dtype=np.int64)
    is_rev = np.array([t == "revolute" for t in types])
    is_pri = np.array([t == "prismatic" for t in types])
    zero = jnp.zeros((), q_full.dtype)
    coord = q_full[adr] if len(adr) else jnp.zeros(0, q_full.dtype)
    angle = jnp.where(is_rev, coord, zero)
    R_joint = axis_angle_to_R(model.jnt_axis, angle)
    t_joint = model.jnt_axis * jnp.where(is_pri, coord, zero)[:, None]
    for i, jtype in enumerate(types):                      # the few multi-dof joints
        a = model.body_qadr[i]
        if jtype == "ball":
            R_joint = R_joint.at[i].set(quat_to_R(q_full[a:a + 4]))
        elif jtype == "free":
            R_joint = R_joint.at[i].set(quat_to_R(q_full[a + 3:a + 7]))
            t_joint = t_joint.at[i].set(q_full[a:a + 3])
    return mm(model.jnt_R, R_joint), model.jnt_p + mv(model.jnt_R, t_joint)


def compose_world(model: Model, R_local, p_local):
    """World placement of every body from the local ones, walking the tree once.

    Each body is written into the output in place (a dynamic-update-slice): building the result
    with ``stack`` instead lets XLA's CPU backend fuse the whole chain into one concatenate and
    recompute it per element (1.7x slower on panda). Deep or large trees
    (``levels.use_levels``) walk level by level in one ``lax.scan`` instead."""
    if levels.use_levels(model):
        return levels.compose_down(levels.schedule(model), R_local, p_local)
    Rw, pw = R_local, p_local
    for i, parent in enumerate(model.body_parent):
        if parent >= 0:
            Rw = Rw.at[i].set(mm(Rw[parent], R_local[i]))
            pw = pw.at[i].set(pw[parent] + mv(Rw[parent], p_local[i]))
    return Rw, pw


def body_poses(model: Model, q):
    """World placement of every body frame: R (nbody, 3, 3), p (nbody, 3)."""
    return compose_world(model, *joint_placements(model, expand_q(model, q)))


def _frames_from_bodies(model: Model, Rb, pb):
    """World placement of every frame from the bodies' (frames on the world use identity)."""
    idx = np.array(model.frame_body)
    eye = jnp.eye(3, dtype=model.frame_R.dtype)
    Rb_ext = jnp.concatenate([Rb, eye[None]], axis=0)
    pb_ext = jnp.concatenate([pb, jnp.zeros((1, 3), pb.dtype)], axis=0)
    Rp, pp = Rb_ext[idx], pb_ext[idx]  # index -1 picks the appended world row
    return mm(Rp, model.frame_R), pp + mv(Rp, model.frame_p)


def frame_placements(model: Model, q):
    """World placement of every named frame: R (nframe, 3, 3), p (nframe, 3)."""
    return _frames_from_bodies(model, *body_poses(model, q))


def forward_kinematics(model: Model, q):
    """T_world_frame for every frame: (nframe, 4, 4), row-major homogeneous matrices.

    Under ``jax.vmap`` (revolute/prismatic joints, one shared Model) the batch runs through the
    lane kernel of :mod:`caliper_jax.lanes`; derivatives come from the reference form."""
    return _forward_kinematics_lanes(model, q)


def _forward_kinematics_reference(model: Model, q):
    return homogeneous(*frame_placements(model, q))


#: blocks of 128 lanes (measured best of 4..512 for panda, 2 CPU cores); the output transpose back
#: to (batch, frame, 4, 4) is fused into the last kernel
_forward_kinematics_lanes = lanes.vmap_fast_path(_forward_kinematics_reference,
                                                 lanes.forward_kinematics_lanes, block=128)


def frame_pose(model: Model, q, frame: int):
    """T_world_frame (4, 4) of one frame (index from ``model.frame_id``)."""
    Rb, pb = body_poses(model, q)
    body = model.frame_body[frame]
    if body < 0:
        R, p = model.frame_R[frame], model.frame_p[frame]
    else:
        R = mm(Rb[body], model.frame_R[frame])
        p = pb[body] + mv(Rb[body], model.frame_p[frame])
    return homogeneous(R, p)


# ---- world-origin spatial motion axes ------------------------------------------------------------

def motion_axes(model: Model, Rw, pw):
    """xi (nv_full, 6): each full dof's unit motion as a spatial vector [v; w] at the world
    origin in world axes (a rotation about axis w through point o is [o x w; w])."""
    if model.nbody == 0:
        return jnp.zeros((0, 6), model.dtype)
    # 1-dof joints, all bodies at once
    w = mv(Rw, model.jnt_axis)
    is_rev = np.array([t == "revolute" for t in model.jnt_type])[:, None]
    rows = jnp.where(is_rev, jnp.concatenate([cross(pw, w), w], axis=-1),
                     jnp.concatenate([w, jnp.zeros_like(w)], axis=-1))
    if all(t in ("revolute", "prismatic") for t in model.jnt_type):
        return rows
    pieces = []
    for i, jtype in enumerate(model.jnt_type):  # splice in the multi-dof joints' columns
        R, p = Rw[i], pw[i]
        axes = R.T                                      # rows: the body's axes in world
        rot = jnp.concatenate([cross(jnp.broadcast_to(p, axes.shape), axes), axes], axis=-1)
        if jtype == "ball":
            pieces.append(rot)
        elif jtype == "free":
            pieces += [jnp.concatenate([axes, jnp.zeros_like(axes)], axis=-1), rot]
        else:
            pieces.append(rows[i:i + 1])
    return jnp.concatenate(pieces, axis=0)


def motion_cross(a, b):
    """Spatial motion cross product a x b for [v; w] vectors (..., 6)."""
    av, aw, bv, bw = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return jnp.concatenate([cross(aw, bv) + cross(av, bw), cross(aw, bw)], axis=-1)


def masked_sum(model: Model, x, mask=None):
    """out[i] = sum_k mask[i, k] x[k] for rows x (n, c) (default mask: dof_support, i.e. the dofs
    that move body i), as one flat product (n*c,) @ kron(mask.T, I_c): batched, that is a plain
    matrix product with the batch as its rows, with no transposed copy of x."""
    if mask is None:
        mask = tables(model)[2]
    c = x.shape[-1]
    K = np.kron(np.asarray(mask, np.float64).T, np.eye(c))
    return (x.reshape(-1) @ jnp.asarray(K, x.dtype)).reshape(mask.shape[0], c)


def support_sum(model: Model, x):
    """out[i] = sum of the rows x[k] (nv_full, c) of the dofs that move body i (its own and its
    ancestors'): ``masked_sum`` with ``dof_support``, or a level walk for deep trees."""
    if not levels.use_levels(model):
        return masked_sum(model, x)
    per_body = x
    if model.nv_full != model.nbody:                     # multi-dof joints: sum each body's dofs
        per_body = jnp.zeros((model.nbody,) + x.shape[1:], x.dtype).at[tables(model)[1]].add(x)
    return levels.accumulate_down(levels.schedule(model), per_body)


def subtree_sum(model: Model, x):
    """out[i] = sum of the rows x[k] (nbody, c) over body i and its descendants: ``masked_sum``
    with ``support.T``, or a level walk for deep trees."""
    if levels.use_levels(model):
        return levels.accumulate_up(levels.schedule(model), x)
    return masked_sum(model, x, tables(model)[0].T)


def body_velocities(model: Model, xi, v_full):
    """Spatial velocity of every body (nbody, 6) at the world origin, world axes."""
    return support_sum(model, xi * v_full[:, None])


def body_accelerations(model: Model, xi, V, v_full, a_full, a_base=None):
    """Spatial acceleration of every body (nbody, 6) at the world origin; ``a_base`` is the
    linear acceleration of the world (``-gravity`` for dynamics)."""
    _, dof_body, _ = tables(model)
    xi_dot = motion_cross(V[dof_body], xi)
    A = support_sum(model, xi * a_full[:, None] + xi_dot * v_full[:, None])
    if a_base is not None:
        A = A + jnp.concatenate([a_base, jnp.zeros(3, A.dtype)])
    return A


# ---- Jacobians -------------------------------------------------------------------------------

def _point_jacobians(model: Model, xi, bodies, points, rotations, reference):
    """Jacobians (n, 6, nv) of points (n, 3) rigidly attached to ``bodies`` (static tuple)."""
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")
    if model.nv_full == 0:
        return jnp.zeros((len(bodies), 6, 0), model.dtype)
    _, _, dof_support = tables(model)
    ext = np.concatenate([dof_support, np.zeros((1, model.nv_full), bool)])  # body -1: world
    mask = jnp.asarray(ext[np.array(bodies)])[..., None]                      # (n, nv_full, 1)
    ang = jnp.broadcast_to(xi[None, :, 3:], (len(bodies), model.nv_full, 3))
    lin = xi[None, :, :3] + cross(ang, points[:, None, :])
    lin, ang = jnp.where(mask, lin, 0.0), jnp.where(mask, ang, 0.0)
    if reference == "local":
        lin, ang = mtv(rotations[:, None], lin), mtv(rotations[:, None], ang)
    J = jnp.concatenate([jnp.swapaxes(lin, -1, -2), jnp.swapaxes(ang, -1, -2)], axis=-2)
    return reduce_force(model, J)


def frame_jacobians(model: Model, q, reference: str = "world"):
    """Geometric Jacobians of every frame: (nframe, 6, nv), rows [v; w].

    Under ``jax.vmap`` (revolute/prismatic joints, one shared Model) the batch runs through the
    lane kernel of :mod:`caliper_jax.lanes_jacobian`; derivatives come from the reference form."""
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")
    return _jacobian_fast_path(None, reference)(model, q)


def _frame_jacobians_reference(model: Model, q, reference: str = "world"):
    Rw, pw = body_poses(model, q)
    Rf, pf = _frames_from_bodies(model, Rw, pw)
    return _point_jacobians(model, motion_axes(model, Rw, pw), model.frame_body, pf, Rf, reference)


def frame_jacobian(model: Model, q, frame: int, reference: str = "world"):
    """Geometric Jacobian (6, nv) of one frame (index from ``model.frame_id``).

    Under ``jax.vmap`` (revolute/prismatic joints, one shared Model) the batch runs through the
    lane kernel of :mod:`caliper_jax.lanes_jacobian` (only the frame's chain); derivatives come
    from the reference form."""
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")
    return _jacobian_fast_path(int(frame), reference)(model, q)


def _frame_jacobian_reference(model: Model, q, frame: int, reference: str = "world"):
    Rw, pw = body_poses(model, q)
    Rf, pf = _frames_from_bodies(model, Rw, pw)
    return _point_jacobians(model, motion_axes(model, Rw, pw), (model.frame_body[frame],),
                            pf[frame][None], Rf[frame][None], reference)[0]


_JACOBIAN_PATHS: dict = {}


def _jacobian_fast_path(frame, reference):
    """The ``lanes.vmap_fast_path`` dispatcher of one frame's Jacobian (every frame's for
    ``frame=None``) in one reference, built once per (frame, reference). Blocks of 128 lanes."""
    key = (frame, reference)
    if key not in _JACOBIAN_PATHS:
        if frame is None:
            ref = lambda m, q: _frame_jacobians_reference(m, q, reference)  # noqa: E731
            kernel = lambda m, q: lanes_jacobian.frame_jacobians_lanes(m, q, reference)  # noqa: E731
        else:
            ref = lambda m, q: _frame_jacobian_reference(m, q, frame, reference)  # noqa: E731
            kernel = lambda m, q: lanes_jacobian.frame_jacobian_lanes(m, q, frame, reference)  # noqa: E731
        _JACOBIAN_PATHS[key] = lanes.vmap_fast_path(ref, kernel, block=128)
    return _JACOBIAN_PATHS[key]


# ---- frame velocities and accelerations ------------------------------------------------------------

def _frame_motion(model: Model, q, v, a, frame, reference):
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {REFERENCES}, got {reference!r}")
    Rw, pw = body_poses(model, q)
    xi = motion_axes(model, Rw, pw)
    v_full = expand_v(model, v)
    a_full = expand_v(model, a) if a is not None else jnp.zeros_like(v_full)
    V = body_velocities(model, xi, v_full)
    A = body_accelerations(model, xi, V, v_full, a_full)
    Rf, pf = _frames_from_bodies(model, Rw, pw)
    body = model.frame_body[frame]
    zero = jnp.zeros(6, model.dtype)
    Vb, Ab = (zero, zero) if body < 0 else (V[body], A[body])
    o = pf[frame]
    # shift from the world origin to the frame origin (world axes)
    fv, fw = Vb[:3] + cross(Vb[3:], o), Vb[3:]
    fav, faw = Ab[:3] + cross(Ab[3:], o), Ab[3:]
    if reference == "local":
        R = Rf[frame]
        fv, fw, fav, faw = mtv(R, fv), mtv(R, fw), mtv(R, fav), mtv(R, faw)
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
