"""Configuration-space helpers: neutral pose, random draws, integrate / difference on the
manifold (quaternions for ball and free joints), and the mimic expansion to full coordinates.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.model import Model
from caliper_jax.spatial import cross, mv, quat_conj, quat_exp, quat_log, quat_mul, quat_to_R, skew


def _independent(model: Model):
    """(body, type, reduced q address, reduced v address) for every non-mimic joint."""
    out = []
    for i, jtype in enumerate(model.jnt_type):
        if model.vfull_mimic[model.body_vadr[i]] < 0:
            out.append((i, jtype, model.qfull_src[model.body_qadr[i]], model.vfull_src[model.body_vadr[i]]))
    return out


def mimic_scale(model: Model, dtype):
    """(nv_full,) per full velocity coordinate: 1, or the mimic multiplier."""
    idx = np.array(model.vfull_mimic)
    if not model.has_mimic:
        return jnp.ones(model.nv_full, dtype)
    gathered = jnp.asarray(model.mimic_multiplier, dtype)[np.maximum(idx, 0)]
    return jnp.where(idx >= 0, gathered, jnp.ones((), dtype))


def expand_q(model: Model, q):
    """Independent q (nq,) -> full q (nq_full,) with mimic joints filled in."""
    if not model.has_mimic:
        return q
    qf = q[np.array(model.qfull_src)]
    for i in range(model.nbody):
        k = model.vfull_mimic[model.body_vadr[i]]
        if k >= 0:
            a = model.body_qadr[i]
            qf = qf.at[a].set(qf[a] * model.mimic_multiplier[k] + model.mimic_offset[k])
    return qf


def expand_v(model: Model, v):
    """Independent velocities/accelerations (nv,) -> full (nv_full,)."""
    if not model.has_mimic:
        return v
    return v[np.array(model.vfull_src)] * mimic_scale(model, v.dtype)


def reduce_force(model: Model, tau_full, axis: int = -1):
    """Full generalized forces (..., nv_full) -> independent ones (..., nv): G^T tau."""
    if not model.has_mimic:
        return tau_full
    tau_full = jnp.moveaxis(tau_full, axis, -1) * mimic_scale(model, tau_full.dtype)
    out = jnp.zeros(tau_full.shape[:-1] + (model.nv,), tau_full.dtype)
    out = out.at[..., np.array(model.vfull_src)].add(tau_full)
    return jnp.moveaxis(out, -1, axis)


def armature_full(model: Model):
    """Armature per full dof (nv_full,); mimic joints carry none of their own."""
    if not model.has_mimic:
        return model.dof_armature
    idx = np.array(model.vfull_src)
    own = np.array([m < 0 for m in model.vfull_mimic])
    return jnp.where(own, model.dof_armature[idx], 0.0)


def neutral(model: Model, dtype=None):
    """The neutral configuration: zeros and identity quaternions (nq,)."""
    q = np.zeros(model.nq)
    for _, jtype, qa, _ in _independent(model):
        if jtype == "ball":
            q[qa] = 1.0
        elif jtype == "free":
            q[qa + 3] = 1.0
    return jnp.asarray(q, dtype=dtype or model.dtype)


def default_start(model: Model) -> np.ndarray:
    """The planners' default start (nq,) float64: :func:`neutral`, with every 1-dof coordinate
    whose neutral value (0) lies outside its finite limits moved to the middle of its range
    (panda's joint 4, whose range is [-3.07, -0.07] rad, starts at -1.57)."""
    q = np.asarray(neutral(model), np.float64).copy()
    lo, hi = np.asarray(model.qpos_lower, np.float64), np.asarray(model.qpos_upper, np.float64)
    out = np.isfinite(lo) & np.isfinite(hi) & ((q < lo) | (q > hi))
    q[out] = 0.5 * (lo[out] + hi[out])
    return q


def random_configuration(model: Model, key, unbounded_range: float = np.pi):
    """Uniform draw within the position limits; unbounded 1-dof coordinates in
    +-``unbounded_range``; uniformly random unit quaternions for ball/free joints."""
    k_uniform, k_quat = jax.random.split(key)
    lo = jnp.where(jnp.isfinite(model.qpos_lower), model.qpos_lower, -unbounded_range)
    hi = jnp.where(jnp.isfinite(model.qpos_upper), model.qpos_upper, unbounded_range)
    q = jax.random.uniform(k_uniform, (model.nq,), dtype=model.dtype, minval=lo, maxval=hi)
    for _, jtype, qa, _ in _independent(model):
        if jtype in ("ball", "free"):
            k_quat, sub = jax.random.split(k_quat)
            quat = jax.random.normal(sub, (4,), dtype=model.dtype)
            quat = quat / jnp.linalg.norm(quat)
            a = qa if jtype == "ball" else qa + 3
            q = q.at[a:a + 4].set(quat)
    return q


def _se3_exp_translation(w, v):
    """V(w) @ v, the translation of exp([v; w]), NaN-safe at w = 0."""
    sq = jnp.sum(w * w)
    tiny = sq < jnp.finfo(w.dtype).eps
    safe = jnp.where(tiny, 1.0, sq)
    th = jnp.sqrt(safe)
    a = jnp.where(tiny, 0.5 - sq / 24.0, (1 - jnp.cos(th)) / safe)
    b = jnp.where(tiny, 1.0 / 6.0 - sq / 120.0, (th - jnp.sin(th)) / (safe * th))
    return v + a * cross(w, v) + b * cross(w, cross(w, v))


def _one_dof(model: Model):
    """(q addresses, v addresses) of the independent 1-dof joints, as index arrays: they are
    updated in one op, not one per joint (a chain of 1000 links otherwise traces 1000 updates)."""
    pairs = [(qa, va) for _, jtype, qa, va in _independent(model) if jtype in ("revolute", "prismatic")]
    return tuple(np.array(x, dtype=np.int64) for x in zip(*pairs, strict=True)) if pairs else None


def integrate_pos(model: Model, q, v, dt=1.0):
    """q (+) v*dt on the configuration manifold; v is in the joints' local frames."""
    dv = v * dt
    one = _one_dof(model)
    if one is not None and len(one[0]) == model.nq == model.nv:
        return (q + dv).astype(q.dtype)                  # one coordinate per dof, in order
    out = q + jnp.zeros_like(q)
    if one is not None:
        out = out.at[one[0]].set(q[one[0]] + dv[one[1]])
    for _, jtype, qa, va in _independent(model):
        if jtype in ("revolute", "prismatic"):
            continue
        if jtype == "ball":
            out = out.at[qa:qa + 4].set(_unit(quat_mul(q[qa:qa + 4], quat_exp(dv[va:va + 3]))))
        else:  # free: T <- T exp([v; w]) with the twist in the body frame
            quat = q[qa + 3:qa + 7]
            step = _se3_exp_translation(dv[va + 3:va + 6], dv[va:va + 3])
            out = out.at[qa:qa + 3].set(q[qa:qa + 3] + mv(quat_to_R(quat), step))
            out = out.at[qa + 3:qa + 7].set(_unit(quat_mul(quat, quat_exp(dv[va + 3:va + 6]))))
    return out


def difference_pos(model: Model, q0, q1):
    """The velocity v (nv,) with integrate_pos(q0, v) == q1 (the shortest one)."""
    out = jnp.zeros(model.nv, dtype=q0.dtype)
    one = _one_dof(model)
    if one is not None:
        out = out.at[one[1]].set(q1[one[0]] - q0[one[0]])
    for _, jtype, qa, va in _independent(model):
        if jtype in ("revolute", "prismatic"):
            continue
        if jtype == "ball":
            rel = quat_mul(quat_conj(_unit(q0[qa:qa + 4])), _unit(q1[qa:qa + 4]))
            out = out.at[va:va + 3].set(quat_log(rel))
        else:
            rel = quat_mul(quat_conj(_unit(q0[qa + 3:qa + 7])), _unit(q1[qa + 3:qa + 7]))
            w = quat_log(rel)
            dp = mv(quat_to_R(q0[qa + 3:qa + 7]).T, q1[qa:qa + 3] - q0[qa:qa + 3])
            out = out.at[va:va + 3].set(_se3_log_translation(w, dp))
            out = out.at[va + 3:va + 6].set(w)
    return out


def _se3_log_translation(w, p):
    """V(w)^-1 @ p, NaN-safe at w = 0."""
    sq = jnp.sum(w * w)
    tiny = sq < jnp.finfo(w.dtype).eps
    safe = jnp.where(tiny, 1.0, sq)
    half = 0.5 * jnp.sqrt(safe)
    coef = jnp.where(tiny, 1.0 / 12.0 + sq / 720.0, (1.0 - half * jnp.cos(half) / jnp.sin(half)) / safe)
    wx = skew(w)
    return p - 0.5 * mv(wx, p) + coef * mv(wx, mv(wx, p))


def normalize(model: Model, q):
    """Re-normalise every quaternion in q."""
    for _, jtype, qa, _ in _independent(model):
        if jtype == "ball":
            q = q.at[qa:qa + 4].set(_unit(q[qa:qa + 4]))
        elif jtype == "free":
            q = q.at[qa + 3:qa + 7].set(_unit(q[qa + 3:qa + 7]))
    return q


def _unit(quat):
    return quat / jnp.linalg.norm(quat)
