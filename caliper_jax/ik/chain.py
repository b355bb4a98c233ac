"""The pose and geometric Jacobian of one frame, computed along its supporting chain only.

The IK inner loop needs exactly this pair at every iterate. The general ``kinematics`` routines
place every body and build every dof's motion axis; here only the bodies between the root and the
frame are touched, and the pose and the Jacobian share one pass (several times cheaper on a panda
in the inner loop). Models whose chain holds ball or free joints use the general routines. The
result equals ``kinematics.frame_pose`` / ``frame_jacobian`` (the tests check it).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from caliper_jax import kinematics
from caliper_jax.configuration import expand_q
from caliper_jax.model import Model
from caliper_jax.spatial import axis_angle_to_R


def for_jit(model: Model) -> Model:
    """The model without the static metadata no solver reads (name, source path, geoms), so
    robots of one topology (UR3 / UR5 / UR10, one URDF from two paths) share compiled executables
    instead of each paying a compile. Pass this to jitted entry points."""
    return model.replace(name="", source="", geoms=())


def _one_dof_chain(model: Model, body: int) -> bool:
    return all(model.jnt_type[b] in ("revolute", "prismatic") for b in model.supports(body))


def frame_pose_jacobian(model: Model, q, frame: int, reference: str = "local"):
    """(R (3, 3), p (3,), J (6, nv)) of ``frame`` at q; J rows [v; w] in the frame's axes
    (``"local"``) or world axes at the frame origin (``"world"``)."""
    if reference not in kinematics.REFERENCES:
        raise ValueError(f"reference must be one of {kinematics.REFERENCES}, got {reference!r}")
    body = model.frame_body[frame]
    if body < 0 or not _one_dof_chain(model, body):
        T = kinematics.frame_pose(model, q, frame)
        return T[:3, :3], T[:3, 3], kinematics.frame_jacobian(model, q, frame, reference)
    chain = np.array(model.supports(body))
    q_full = expand_q(model, q)
    coord = q_full[np.array([model.body_qadr[b] for b in chain])]
    is_rev = np.array([model.jnt_type[b] == "revolute" for b in chain])
    zero = jnp.zeros((), coord.dtype)
    axis = model.jnt_axis[chain]
    R_joint = axis_angle_to_R(axis, jnp.where(is_rev, coord, zero))
    t_joint = axis * jnp.where(is_rev, zero, coord)[:, None]
    # plain matmuls: on XLA:CPU they compile ~2x faster than broadcast-sums here and run as fast
    jR, jp = model.jnt_R[chain], model.jnt_p[chain]
    R_loc = jR @ R_joint
    p_loc = jp + (jR @ t_joint[:, :, None])[:, :, 0]
    Rw, pw = [R_loc[0]], [p_loc[0]]
    for k in range(1, len(chain)):
        pw.append(pw[-1] + Rw[-1] @ p_loc[k])
        Rw.append(Rw[-1] @ R_loc[k])
    Rw, pw = jnp.stack(Rw), jnp.stack(pw)
    R = Rw[-1] @ model.frame_R[frame]
    p = pw[-1] + Rw[-1] @ model.frame_p[frame]
    w = (Rw @ axis[:, :, None])[:, :, 0]                      # joint axes in world axes
    lin = jnp.where(is_rev[:, None], jnp.cross(w, p - pw), w)
    ang = jnp.where(is_rev[:, None], w, zero)
    if reference == "local":
        lin, ang = lin @ R, ang @ R                           # rows: R^T v
    cols = jnp.concatenate([lin, ang], axis=-1).T             # (6, len(chain))
    return R, p, cols @ _chain_to_independent(model, chain, cols.dtype)


def _chain_to_independent(model: Model, chain, dtype):
    """(len(chain), nv): column k of the chain Jacobian feeds independent dof j with weight 1,
    or the mimic multiplier when the chain joint follows another (a dense product, no scatter)."""
    P = np.zeros((len(chain), model.nv))
    mimic = []
    for k, b in enumerate(chain):
        va = model.body_vadr[b]
        P[k, model.vfull_src[va]] = 1.0
        if model.vfull_mimic[va] >= 0:
            mimic.append((k, model.vfull_src[va], model.vfull_mimic[va]))
    P = jnp.asarray(P, dtype)
    for k, j, idx in mimic:
        P = P.at[k, j].set(model.mimic_multiplier[idx].astype(dtype))
    return P


def frame_pose(model: Model, q, frame: int):
    """(R (3, 3), p (3,)) of ``frame`` at q (the pose half of ``frame_pose_jacobian``)."""
    R, p, _ = frame_pose_jacobian(model, q, frame, "world")
    return R, p


__all__ = ["for_jit", "frame_pose_jacobian", "frame_pose"]
