"""Closed-form inverse kinematics for the 6R wrist-partitioned geometry of UR-type arms.

Geometry (standard DH, T_i = Rz(theta_i) Tz(d_i) Tx(a_i) Rx(alpha_i)):
alpha = (pi/2, 0, 0, pi/2, -pi/2, 0), a = (0, a2, a3, 0, 0, 0), d = (d1, 0, 0, d4, d5, d6):
joint 1 vertical-ish, joints 2-4 parallel, joints 5 and 6 each perpendicular to the previous,
consecutive axes 1-2, 4-5 and 5-6 intersecting. The parameters are not typed in: ``fit_ur``
reads them off the Model on the host (joint axes and origins at q = 0, common normals), adds the
base and tool transforms and the per-joint sign and offset that map the model's q to the DH
angles, then checks the fit against the Model's own forward kinematics at random
configurations. A robot that is not of this family gets a CaliperError naming what fails.

Solution (all 8 branches: shoulder +-, wrist +-, elbow +-), with p5 the wrist centre (the flange
origin moved back by d6 along the last axis) and z_k the DH z axes:
  theta1: p5 . z1 = d4 with z1 = (sin t1, -cos t1, 0)  ->  t1 = psi + asin(d4/r) or psi + pi - ...
  theta5: z5 . z1 = cos t5
  theta6: from z1 expressed in the flange frame, (s5 c6, -s5 s6, c5)
  theta2, theta3, theta4: a planar 2R problem for the frame-4 origin in frame 1, then the sum.
Everything is pure JAX (jit / vmap over targets); unreachable branches come back invalid.
"""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax import kinematics
from caliper_jax.errors import CaliperError
from caliper_jax.ik import chain
from caliper_jax.model import Model
from caliper_jax.spatial import so3_log

ALPHA = (np.pi / 2, 0.0, 0.0, np.pi / 2, -np.pi / 2, 0.0)


@dataclasses.dataclass(frozen=True)
class URGeometry:
    """Host-side parameters of a UR-type arm (NumPy, float64)."""

    frame: int
    a: np.ndarray          # (6,) DH a_i
    d: np.ndarray          # (6,) DH d_i
    sign: np.ndarray       # (6,) theta_i = sign_i * q_i + offset_i
    offset: np.ndarray     # (6,)
    T_base: np.ndarray     # (4, 4) T_world_dh0
    T_tool: np.ndarray     # (4, 4) T_dh6_frame
    q_index: np.ndarray    # (6,) q coordinate of the k-th joint of the chain
    fit_error: float       # max FK mismatch (m or rad) over the check configurations


class DHParams(NamedTuple):
    """The fitted geometry as arrays (a pytree: traced under jit, so arms of one topology --
    UR3 / UR5 / UR10 -- share one compiled solver)."""

    a: jnp.ndarray
    d: jnp.ndarray
    sign: jnp.ndarray
    offset: jnp.ndarray
    T_base_inv: jnp.ndarray
    T_tool_inv: jnp.ndarray


def params_of(geom: URGeometry, dtype) -> DHParams:
    as_ = lambda x: jnp.asarray(x, dtype)
    return DHParams(as_(geom.a), as_(geom.d), as_(geom.sign), as_(geom.offset),
                    as_(np.linalg.inv(geom.T_base)), as_(np.linalg.inv(geom.T_tool)))


class AnalyticIK(NamedTuple):
    """``q`` (8, nq) the branch solutions; ``valid`` (8,) a real solution inside the limits;
    ``pos_residual`` / ``rot_residual`` (8,) of each branch through the Model's own FK."""

    q: jnp.ndarray
    valid: jnp.ndarray
    pos_residual: jnp.ndarray
    rot_residual: jnp.ndarray


# ---- host-side fit ---------------------------------------------------------------------------

def _dh(theta, d, a, alpha):
    ct, st, ca, sa = np.cos(theta), np.sin(theta), np.cos(alpha), np.sin(alpha)
    return np.array([[ct, -st * ca, st * sa, a * ct], [st, ct * ca, -ct * sa, a * st],
                     [0.0, sa, ca, d], [0.0, 0.0, 0.0, 1.0]])


def _closest(p1, u1, p2, u2):
    """Closest points of two lines (p + t u) and their distance."""
    w = p1 - p2
    b = u1 @ u2
    denom = 1.0 - b * b
    if denom < 1e-12:
        return p1, p2, np.linalg.norm(w - (w @ u2) * u2)
    t1 = (b * (u2 @ w) - (u1 @ w)) / denom
    t2 = ((u2 @ w) - b * (u1 @ w)) / denom
    c1, c2 = p1 + t1 * u1, p2 + t2 * u2
    return c1, c2, np.linalg.norm(c1 - c2)


def _frame(x, z, o):
    T = np.eye(4)
    T[:3, 0], T[:3, 1], T[:3, 2], T[:3, 3] = x, np.cross(z, x), z, o
    return T


def fit_ur(model: Model, frame: int, tol: float = 1e-6, checks: int = 16) -> URGeometry:
    """Read the UR-type DH geometry of the chain ending at ``frame`` off the Model."""
    name = f"robot {model.name!r}, frame {model.frame_names[frame]!r}"
    body = model.frame_body[frame]
    if body < 0:
        raise CaliperError(f"analytic IK: {name} is fixed to the world")
    joints = model.supports(body)
    if len(joints) != 6 or any(model.jnt_type[b] != "revolute" for b in joints):
        raise CaliperError(f"analytic IK: {name}: needs a chain of exactly 6 revolute joints, "
                           f"got {len(joints)} ({', '.join(model.jnt_type[b] for b in joints)})")
    if any(model.vfull_mimic[model.body_vadr[b]] >= 0 for b in joints):
        raise CaliperError(f"analytic IK: {name}: the chain contains a mimic joint")
    m64 = model.astype(jnp.float64) if jax.config.jax_enable_x64 else model
    m64 = chain.for_jit(m64)                              # one compile per topology, not per file
    rng = np.random.default_rng(0)
    q_check = rng.uniform(-np.pi, np.pi, (checks, model.nq))
    q0 = np.zeros(model.nq)
    Rw, pw, T0, T_check = (np.asarray(x, np.float64) for x in _host_fk(m64, frame, jnp.asarray(q0, m64.dtype),
                                                                        jnp.asarray(q_check, m64.dtype)))
    axis = np.asarray(model.jnt_axis, np.float64)
    u = [Rw[b] @ axis[b] for b in joints]
    c = [pw[b] for b in joints]
    scale = max(1.0, max(np.linalg.norm(ci - c[0]) for ci in c))
    ltol = 1e-6 * scale

    def need(ok, what):
        if not ok:
            raise CaliperError(f"analytic IK: {name} is not a UR-type 6R arm: {what}")

    need(abs(u[0] @ u[1]) < 1e-6, "axes 1 and 2 are not perpendicular")
    need(np.linalg.norm(np.cross(u[1], u[2])) < 1e-6 and np.linalg.norm(np.cross(u[2], u[3])) < 1e-6,
         "axes 2, 3, 4 are not parallel")
    need(abs(u[3] @ u[4]) < 1e-6 and abs(u[4] @ u[5]) < 1e-6, "axes 4-5 or 5-6 are not perpendicular")
    O0, _, gap = _closest(c[0], u[0], c[1], u[1])
    need(gap < ltol, f"axes 1 and 2 do not intersect (gap {gap:.3g} m)")
    O4, _, gap = _closest(c[3], u[3], c[4], u[4])
    need(gap < ltol, f"axes 4 and 5 do not intersect (gap {gap:.3g} m)")
    O5, _, gap = _closest(c[4], u[4], c[5], u[5])
    need(gap < ltol, f"axes 5 and 6 do not intersect (gap {gap:.3g} m)")
    # DH z axes z0..z5 = +-u1..u6; signs chosen so alpha matches ALPHA (z1 = z2 = z3)
    sign = np.ones(6)
    z = [u[0], u[1]]
    sign[2] = 1.0 if u[2] @ z[1] > 0 else -1.0
    z.append(sign[2] * u[2])
    sign[3] = 1.0 if u[3] @ z[1] > 0 else -1.0
    z.append(sign[3] * u[3])
    z += [u[4], u[5]]
    # origins: O1 = O0 (d1 = 0; the base carries the height), O2, O3 feet of common normals
    O1 = O0
    O2 = c[2] + ((O1 - c[2]) @ z[2]) * z[2]
    O3 = c[3] + ((O2 - c[3]) @ z[3]) * z[3]
    a2, a3 = np.linalg.norm(O2 - O1), np.linalg.norm(O3 - O2)
    need(a2 > ltol and a3 > ltol, "no upper-arm / forearm length between the parallel axes")
    x = [None] * 7
    x[1] = np.cross(z[0], z[1])
    x[2], x[3] = (O2 - O1) / a2, (O3 - O2) / a3
    x[4] = np.cross(z[3], z[4])
    x[5] = np.cross(z[5], z[4])
    x[0] = x[1]
    p_frame = T0
    d6 = (p_frame[:3, 3] - O5) @ z[5]
    O6 = O5 + d6 * z[5]
    x[6] = x[5]
    origins = [O0, O1, O2, O3, O4, O5, O6]
    d = np.zeros(6)
    a = np.array([0.0, a2, a3, 0.0, 0.0, 0.0])
    offset = np.zeros(6)
    for k in range(6):
        d[k] = (origins[k + 1] - origins[k]) @ z[k]
        offset[k] = np.arctan2(np.cross(x[k], x[k + 1]) @ z[k], x[k] @ x[k + 1])
    T_base = _frame(x[0], z[0], O0)
    T_tool = np.linalg.inv(_frame(x[6], z[5], O6)) @ p_frame
    q_index = np.array([model.qfull_src[model.body_qadr[b]] for b in joints])
    geom = URGeometry(frame, a, d, sign, offset, T_base, T_tool, q_index, 0.0)
    # check against the Model's FK
    worst = 0.0
    for q, T_model in zip(q_check, T_check, strict=True):
        T_dh = forward(geom, q[q_index])
        worst = max(worst, np.abs(T_model[:3, 3] - T_dh[:3, 3]).max() / scale,
                    np.abs(T_model[:3, :3] - T_dh[:3, :3]).max())
    need(worst < tol, f"the fitted DH chain misses the model's FK by {worst:.3g}")
    return dataclasses.replace(geom, fit_error=float(worst))


@partial(jax.jit, static_argnums=1)
def _host_fk(model: Model, frame: int, q0, q_check):
    """Body poses and the frame's pose at q0, and the frame's pose at each check configuration."""
    Rw, pw = kinematics.body_poses(model, q0)
    pose = lambda q: kinematics.frame_pose(model, q, frame)
    return Rw, pw, pose(q0), jax.vmap(pose)(q_check)


def forward(geom: URGeometry, q6) -> np.ndarray:
    """Host-side FK of the fitted chain: T_world_frame for the 6 chain angles ``q6``."""
    T = geom.T_base.copy()
    theta = geom.sign * np.asarray(q6, np.float64) + geom.offset
    for k in range(6):
        T = T @ _dh(theta[k], geom.d[k], geom.a[k], ALPHA[k])
    return T @ geom.T_tool


# ---- the closed form (pure JAX) ------------------------------------------------------------------

def _rz_tz_tx_rx_inv(theta, d, a, alpha):
    """Inverse of one DH transform as (R (3, 3), p (3,))."""
    ct, st, ca, sa = jnp.cos(theta), jnp.sin(theta), jnp.cos(alpha), jnp.sin(alpha)
    R = jnp.stack([jnp.stack([ct, -st * ca, st * sa]), jnp.stack([st, ct * ca, -ct * sa]),
                   jnp.stack([jnp.zeros_like(ct), sa * jnp.ones_like(ct), ca * jnp.ones_like(ct)])])
    p = jnp.stack([a * ct, a * st, d * jnp.ones_like(ct)])
    return R.T, -R.T @ p


def _acos_branch(x, slack):
    """acos of x clipped into [-1, 1] when it lies within ``slack`` outside; NaN beyond."""
    ok = jnp.abs(x) <= 1.0 + slack
    return jnp.where(ok, jnp.arccos(jnp.clip(x, -1.0, 1.0)), jnp.nan)


BRANCHES = np.array([(a, b, c) for a in (1, -1) for b in (1, -1) for c in (1, -1)], dtype=np.float64)


def solve_dh(params: DHParams, T06, dtype):
    """The 8 DH angle sets (8, 6) for the flange pose T06 (4, 4) in DH frame 0 (NaN rows where
    a branch does not exist). Branch k has (shoulder, wrist, elbow) signs ``BRANCHES[k]``; the
    branches are one vmapped computation, not eight traced copies."""
    a2, a3 = params.a[1], params.a[2]
    d = params.d
    d4, d6 = d[3], d[5]
    slack = 1e3 * float(jnp.finfo(dtype).eps)
    R06, p06 = T06[:3, :3], T06[:3, 3]
    p05 = p06 - d6 * R06[:, 2]
    psi = jnp.arctan2(p05[1], p05[0])
    r = jnp.sqrt(p05[0] ** 2 + p05[1] ** 2)
    ratio = d4 / jnp.where(r > 0, r, 1.0)
    ok1 = jnp.abs(ratio) <= 1.0 + slack
    s = jnp.arcsin(jnp.clip(ratio, -1.0, 1.0))

    def branch(k1, k5, k3):
        t1 = jnp.where(ok1, jnp.where(k1 > 0, psi + s, psi + jnp.pi - s), jnp.nan)
        z1 = jnp.stack([jnp.sin(t1), -jnp.cos(t1), jnp.zeros_like(t1)])
        t5 = k5 * _acos_branch(R06[:, 2] @ z1, slack)
        s5 = jnp.sin(t5)
        v = R06.T @ z1                                   # (s5 c6, -s5 s6, c5)
        # below sqrt(eps) the division by s5 costs more than taking the wrist as singular (t6 = 0,
        # error ~ |s5|); 1e3 * slack (1e6 eps) was 0.12 in float32, a wrong t6 within 7 deg of it
        wrist_ok = jnp.abs(s5) > float(np.sqrt(jnp.finfo(dtype).eps))
        s5_safe = jnp.where(wrist_ok, s5, 1.0)
        t6 = jnp.where(wrist_ok, jnp.arctan2(-v[1] / s5_safe, v[0] / s5_safe), 0.0)
        # T14 = T01^-1 T06 T56^-1 T45^-1
        R1i, p1i = _rz_tz_tx_rx_inv(t1, d[0], 0.0, ALPHA[0])
        R6i, p6i = _rz_tz_tx_rx_inv(t6, d[5], 0.0, ALPHA[5])
        R5i, p5i = _rz_tz_tx_rx_inv(t5, d[4], 0.0, ALPHA[4])
        R16, p16 = R1i @ R06, R1i @ p06 + p1i
        R15, p15 = R16 @ R6i, R16 @ p6i + p16
        R14, p14 = R15 @ R5i, R15 @ p5i + p15
        px, py = p14[0], p14[1]
        t3 = k3 * _acos_branch((px * px + py * py - a2 * a2 - a3 * a3) / (2.0 * a2 * a3), slack)
        t2 = jnp.arctan2(py, px) - jnp.arctan2(a3 * jnp.sin(t3), a2 + a3 * jnp.cos(t3))
        t4 = jnp.arctan2(R14[1, 0], R14[0, 0]) - t2 - t3   # theta2 + theta3 + theta4 from R14
        return jnp.stack([t1, t2, t3, t4, t5, t6])

    signs = jnp.asarray(BRANCHES, dtype)
    return jax.vmap(branch)(signs[:, 0], signs[:, 1], signs[:, 2])


def _wrap_near(q, ref, lower, upper):
    """The 2 pi representative of each angle nearest ``ref``, moved inside the limits when one
    exists there; second output: whether it is inside."""
    two_pi = 2.0 * jnp.pi
    q = q + two_pi * jnp.round((ref - q) / two_pi)
    q = jnp.where(q > upper, q - two_pi, q)
    q = jnp.where(q < lower, q + two_pi, q)
    return q, (q >= lower) & (q <= upper)


def solve(model: Model, geom: URGeometry, target_T, reference_q=None, tol: float = 1e-6,
          params: DHParams | None = None) -> AnalyticIK:
    """Every branch (8) for one target ``target_T`` (4, 4) T_world_frame of ``geom.frame``.

    Each angle is the 2 pi representative nearest ``reference_q`` (default 0) that lies within
    the limits; ``valid`` marks branches that exist, respect the limits and reproduce the target
    through the Model's FK to ``tol``, floored at 1e3 eps of the dtype (the branch tests' slack:
    float32 branches reproduce their targets to ~1e2 eps, 1e-5, above the default 1e-6).
    ``params`` (default ``params_of(geom)``) may be traced; only ``geom.frame`` and
    ``geom.q_index`` are used statically. Pure JAX: vmap over targets, jit at the caller."""
    dtype = model.dtype
    tol = jnp.maximum(jnp.asarray(tol, dtype), 1e3 * float(jnp.finfo(dtype).eps))
    params = params_of(geom, dtype) if params is None else params
    target_T = jnp.asarray(target_T, dtype)
    T06 = params.T_base_inv @ target_T @ params.T_tool_inv
    theta = solve_dh(params, T06, dtype)                                 # (8, 6)
    q6 = (theta - params.offset) * params.sign
    exists = jnp.all(jnp.isfinite(q6), axis=-1)
    q6 = jnp.where(jnp.isfinite(q6), q6, 0.0)
    idx = geom.q_index
    ref = jnp.zeros(model.nq, dtype) if reference_q is None else jnp.asarray(reference_q, dtype)
    q6, inside = _wrap_near(q6, ref[idx], model.qpos_lower[idx], model.qpos_upper[idx])
    q = jnp.broadcast_to(ref, (8, model.nq)).at[:, idx].set(q6)
    R, p = jax.vmap(lambda x: chain.frame_pose(model, x, geom.frame))(q)
    pos_res = jnp.linalg.norm(p - target_T[:3, 3], axis=-1)
    R_err = jnp.swapaxes(R, -1, -2) @ target_T[:3, :3]
    rot_res = jnp.linalg.norm(so3_log(R_err), axis=-1)
    valid = exists & jnp.all(inside, axis=-1) & (pos_res <= tol) & (rot_res <= tol)
    return AnalyticIK(q=q, valid=valid, pos_residual=pos_res, rot_residual=rot_res)


__all__ = ["ALPHA", "BRANCHES", "URGeometry", "DHParams", "params_of", "AnalyticIK", "fit_ur", "forward",
           "solve_dh", "solve"]
