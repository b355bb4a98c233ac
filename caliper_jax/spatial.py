"""Rotation, quaternion and rigid-transform helpers (pure JAX, one instance per call).

Conventions: rotations are 3x3 matrices ``R_a_b`` mapping b-coordinates to a-coordinates;
quaternions are ``(w, x, y, z)``; twists and spatial vectors are ``[v; w]`` (linear first,
Pinocchio's order). Small matrix products are written as sums of elementwise products: on XLA's CPU backend a
``dot`` or a broadcast-multiply-reduce over a size-3 axis costs several times more.
All functions are NaN-safe to differentiate (double-``where`` guards near zero).
"""
from __future__ import annotations

import jax.numpy as jnp


def mm(a, b):
    """3x3 @ 3x3 as a sum of three outer products (elementwise only). a, b: (..., 3, 3)."""
    return a[..., :, 0:1] * b[..., 0:1, :] + a[..., :, 1:2] * b[..., 1:2, :] + a[..., :, 2:3] * b[..., 2:3, :]


def mv(a, v):
    """3x3 @ 3-vector, elementwise only. a: (..., 3, 3), v: (..., 3)."""
    return a[..., :, 0] * v[..., 0:1] + a[..., :, 1] * v[..., 1:2] + a[..., :, 2] * v[..., 2:3]


def mtv(a, v):
    """a.T @ v for a 3x3 ``a`` (inverse rotation of ``v``), elementwise only."""
    return a[..., 0, :] * v[..., 0:1] + a[..., 1, :] * v[..., 1:2] + a[..., 2, :] * v[..., 2:3]


def cross(a, b):
    """Cross product of 3-vectors written elementwise (fuses better than jnp.cross)."""
    return jnp.stack(
        [
            a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
            a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
            a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0],
        ],
        axis=-1,
    )


def skew(v):
    """[v]x such that skew(v) @ u == cross(v, u). v: (..., 3) -> (..., 3, 3)."""
    z = jnp.zeros_like(v[..., 0])
    return jnp.stack(
        [
            jnp.stack([z, -v[..., 2], v[..., 1]], -1),
            jnp.stack([v[..., 2], z, -v[..., 0]], -1),
            jnp.stack([-v[..., 1], v[..., 0], z], -1),
        ],
        axis=-2,
    )


def axis_angle_to_R(axis, angle):
    """Rodrigues' formula for a unit ``axis`` (3,) and scalar ``angle``."""
    c, s = jnp.cos(angle), jnp.sin(angle)
    outer = axis[..., :, None] * axis[..., None, :]
    eye = jnp.eye(3, dtype=outer.dtype)
    return c[..., None, None] * eye + s[..., None, None] * skew(axis) + (1 - c)[..., None, None] * outer


def quat_to_R(q):
    """Unit quaternion (w, x, y, z) -> rotation matrix (normalises first)."""
    q = q / jnp.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return jnp.stack(
        [
            jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            jnp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        axis=-2,
    )


def quat_mul(a, b):
    """Hamilton product of (w, x, y, z) quaternions."""
    aw, av = a[..., :1], a[..., 1:]
    bw, bv = b[..., :1], b[..., 1:]
    w = aw * bw - jnp.sum(av * bv, axis=-1, keepdims=True)
    v = aw * bv + bw * av + cross(av, bv)
    return jnp.concatenate([w, v], axis=-1)


def quat_conj(q):
    return q * jnp.array([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


def _safe_norm(v):
    """(norm, guarded norm) of the last axis; the guarded one is 1 where the norm is ~0."""
    sq = jnp.sum(v * v, axis=-1)
    tiny = sq < jnp.finfo(v.dtype).eps ** 2
    safe = jnp.where(tiny, 1.0, sq)
    return jnp.where(tiny, 0.0, jnp.sqrt(safe)), tiny, jnp.sqrt(safe)


def quat_exp(omega):
    """Rotation vector (3,) -> unit quaternion (w, x, y, z), NaN-safe at zero."""
    theta, tiny, safe_theta = _safe_norm(omega)
    half = 0.5 * theta
    sinc_half = jnp.where(tiny, 0.5 - theta**2 / 48.0, jnp.sin(0.5 * safe_theta) / safe_theta)
    return jnp.concatenate([jnp.cos(half)[..., None], sinc_half[..., None] * omega], axis=-1)


def quat_log(q):
    """Unit quaternion -> rotation vector in [-pi, pi] (shortest arc), NaN-safe at identity."""
    q = jnp.where(q[..., :1] < 0, -q, q)
    _, tiny, safe_vnorm = _safe_norm(q[..., 1:])
    scale = jnp.where(tiny, 2.0 / q[..., 0], 2.0 * jnp.arctan2(safe_vnorm, q[..., 0]) / safe_vnorm)
    return scale[..., None] * q[..., 1:]


def so3_exp(omega):
    """Rotation vector -> rotation matrix, NaN-safe at zero."""
    return quat_to_R(quat_exp(omega))


def so3_log(R):
    """Rotation matrix -> rotation vector (axis * angle), NaN-safe near identity and pi."""
    return quat_log(R_to_quat(R))


def R_to_quat(R):
    """Rotation matrix -> unit quaternion (w, x, y, z) with w >= 0 (Shepperd's method, branch-free)."""
    m00, m11, m22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    tr = m00 + m11 + m22
    cands = jnp.stack(
        [
            jnp.stack([1 + tr, R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0],
                       R[..., 1, 0] - R[..., 0, 1]], -1),
            jnp.stack([R[..., 2, 1] - R[..., 1, 2], 1 + m00 - m11 - m22, R[..., 0, 1] + R[..., 1, 0],
                       R[..., 0, 2] + R[..., 2, 0]], -1),
            jnp.stack([R[..., 0, 2] - R[..., 2, 0], R[..., 0, 1] + R[..., 1, 0], 1 - m00 + m11 - m22,
                       R[..., 1, 2] + R[..., 2, 1]], -1),
            jnp.stack([R[..., 1, 0] - R[..., 0, 1], R[..., 0, 2] + R[..., 2, 0], R[..., 1, 2] + R[..., 2, 1],
                       1 - m00 - m11 + m22], -1),
        ],
        axis=-2,
    )
    diag = jnp.stack([1 + tr, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22], -1)
    best = jnp.argmax(diag, axis=-1)
    q = jnp.take_along_axis(cands, best[..., None, None], axis=-2)[..., 0, :]
    q = q / jnp.linalg.norm(q, axis=-1, keepdims=True)
    return jnp.where(q[..., :1] < 0, -q, q)


def rpy_to_R(rpy):
    """URDF roll-pitch-yaw (fixed axes X, then Y, then Z) -> rotation matrix."""
    r, p, y = rpy[..., 0], rpy[..., 1], rpy[..., 2]
    cr, sr, cp, sp, cy, sy = jnp.cos(r), jnp.sin(r), jnp.cos(p), jnp.sin(p), jnp.cos(y), jnp.sin(y)
    return jnp.stack(
        [
            jnp.stack([cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr], -1),
            jnp.stack([sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr], -1),
            jnp.stack([-sp, cp * sr, cp * cr], -1),
        ],
        axis=-2,
    )


def homogeneous(R, p):
    """(R (...,3,3), p (...,3)) -> 4x4 homogeneous matrices (..., 4, 4), row-major."""
    top = jnp.concatenate([R, p[..., :, None]], axis=-1)
    bottom = jnp.broadcast_to(jnp.array([0.0, 0.0, 0.0, 1.0], dtype=R.dtype), top.shape[:-2] + (1, 4))
    return jnp.concatenate([top, bottom], axis=-2)


def log6(R, p):
    """SE(3) log of the transform (R, p) -> twist [v; w] (6,), NaN-safe at identity."""
    w = so3_log(R)
    _, tiny, safe_theta = _safe_norm(w)
    half = 0.5 * safe_theta
    # V^-1 = I - 0.5 [w] + (1/theta^2)(1 - (theta/2) cot(theta/2)) [w]^2
    coef = jnp.where(tiny, 1.0 / 12.0, (1.0 - half * jnp.cos(half) / jnp.sin(half)) / safe_theta**2)
    wx = skew(w)
    Vinv = jnp.eye(3, dtype=R.dtype) - 0.5 * wx + coef[..., None, None] * mm(wx, wx)
    return jnp.concatenate([mv(Vinv, p), w], axis=-1)


# ---- spatial algebra on [v; w] motions and [f; n] forces, as (linear, angular) pairs ----------

def motion_to_child(R, p, v, w):
    """A motion (v, w) at the parent origin in parent axes -> at the child origin in child axes,
    where the child frame sits at (R, p) in the parent."""
    return mtv(R, v + cross(w, p)), mtv(R, w)


def force_to_parent(R, p, f, n):
    """A force (f, n) at the child origin in child axes -> at the parent origin in parent axes."""
    fp = mv(R, f)
    return fp, mv(R, n) + cross(p, fp)


def motion_cross_motion(v, w, mv_, mw):
    """(v, w) x (mv, mw) for motions."""
    return cross(w, mv_) + cross(v, mw), cross(w, mw)


def motion_cross_force(v, w, f, n):
    """(v, w) x* (f, n) for a force."""
    return cross(w, f), cross(w, n) + cross(v, f)


def inertia_times_motion(mass, h, I_o, v, w):
    """Spatial inertia (mass, first moment h = m c, rotational inertia about the origin I_o)
    applied to a motion (v, w) -> momentum (f, n)."""
    return mass * v - cross(h, w), mv(I_o, w) + cross(h, v)


def inertia_about_origin(mass, com, I_com):
    """Rotational inertia about the frame origin from the one about the COM (parallel axis)."""
    cx = skew(com)
    return I_com - mass[..., None, None] * mm(cx, cx)
