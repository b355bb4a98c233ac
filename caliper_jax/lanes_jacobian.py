"""Lane kernels (batch in the last axis, see :mod:`caliper_jax.lanes`) for the geometric frame
Jacobian: one frame, or every frame, in the ``"world"`` (LOCAL_WORLD_ALIGNED) or ``"local"``
(LOCAL) flavour of :func:`caliper_jax.kinematics.frame_jacobian`.

Same quantities as the reference, written per supporting dof: a revolute dof with world axis w
through the point p_k moves the frame origin o at ``w x (o - p_k)`` and turns it at ``w``; a
prismatic one moves it at ``w``. (The reference forms ``p_k x w + w x o`` from world-origin motion
axes; the two agree to round-off.) Only the frame's supporting chain is computed; dofs off the chain
are zero columns. Mimic joints fold their column into the driving dof's, times the multiplier.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from caliper_jax.configuration import mimic_scale
from caliper_jax.lanes import _cross, _is_revolute, _lanes, _masked_sum, _mv, boundary, world_pose_list
from caliper_jax.model import Model


def _chain_columns(model: Model, world, bodies, R_f, o_f, reference):
    """Columns (n, 6, L) of the dofs of ``bodies`` (static, one dof per body) for a frame at
    origin o_f (3, L) with rotation R_f (3, 3, L)."""
    rev = _is_revolute(model)[np.array(bodies)]
    R = jnp.stack([world[b][:3] for b in bodies])                       # (n, 3, 3, L)
    P = jnp.stack([world[b][3] for b in bodies])                        # (n, 3, L)
    w = _mv(R, _lanes(model.jnt_axis[np.array(bodies)]))
    lin = jnp.where(rev[:, None, None], _cross(w, o_f[None] - P), w)
    ang = jnp.where(rev[:, None, None], w, 0.0)
    if reference == "local":                                             # R_f^T (.)
        Rt = jnp.swapaxes(R_f, 0, 1)[None]
        lin, ang = _mv(Rt, lin), _mv(Rt, ang)
    return jnp.concatenate([lin, ang], axis=1)


def _to_reduced(model: Model, cols, bodies, dtype):
    """Columns (n, 6, L) of the full dofs of ``bodies`` -> the (6, nv, L) Jacobian."""
    src = np.array(model.vfull_src)[np.array(bodies)]
    if model.has_mimic:
        cols = cols * mimic_scale(model, dtype)[np.array(bodies)][:, None, None]
    mask = src[None, :] == np.arange(model.nv)[:, None]                  # (nv, n)
    return jnp.swapaxes(_masked_sum(mask, cols), 0, 1)


def _frame_origin(model: Model, world, frame: int, lanes: int, dtype):
    body = model.frame_body[frame]
    Rb, pb = world[body][:3], world[body][3]
    R_f = sum(Rb[:, k, None, :] * _lanes(model.frame_R[frame])[None, k, :, :] for k in range(3))
    return R_f, pb + _mv(Rb, _lanes(model.frame_p[frame]))


def frame_jacobian_lanes(model: Model, q, frame: int, reference: str = "world"):
    """Jacobian of one frame for L configurations: q (nq, L) -> (6, nv, L), rows [v; w]."""
    lanes = q.shape[-1]
    body = model.frame_body[frame]
    if body < 0:                                                         # a frame on the world
        return jnp.zeros((6, model.nv, lanes), q.dtype)
    world = world_pose_list(model, q)
    R_f, o_f = _frame_origin(model, world, frame, lanes, q.dtype)
    bodies = tuple(model.supports(body))
    return _to_reduced(model, _chain_columns(model, world, bodies, R_f, boundary(o_f), reference),
                       bodies, q.dtype)


def frame_jacobians_lanes(model: Model, q, reference: str = "world"):
    """Jacobians of every frame for L configurations: q (nq, L) -> (nframe, 6, nv, L)."""
    lanes = q.shape[-1]
    world = world_pose_list(model, q)
    out = []
    for frame in range(model.nframe):
        body = model.frame_body[frame]
        if body < 0:
            out.append(jnp.zeros((6, model.nv, lanes), q.dtype))
            continue
        R_f, o_f = _frame_origin(model, world, frame, lanes, q.dtype)
        bodies = tuple(model.supports(body))
        out.append(_to_reduced(model, _chain_columns(model, world, bodies, R_f, o_f, reference),
                               bodies, q.dtype))
    return jnp.stack(out)
