"""Batched RNEA with the batch in the lanes: the fast path behind ``jax.vmap(dynamics.rnea)``.

Every array here carries the batch on its *last* axis (``L`` lanes): a rotation of every body is
``(nbody, 3, 3, L)``, a spatial vector ``(nbody, 6, L)``. Each elementwise op then runs over a
contiguous run of ``L`` values, which XLA's CPU backend vectorises; with the batch first (what
``vmap`` of the one-instance code gives) the minor axes are 3 wide and it does not. A large batch
is cut into blocks of ``block`` lanes (vmapped), which keeps each block's working set in cache.

The formulation is the world-frame one of :func:`caliper_jax.dynamics.rnea` (same equations,
same conventions), limited to models whose joints are all revolute or prismatic (mimic joints
included) and to no external forces; :func:`supports` says when it applies. It is a forward-only
kernel: :func:`caliper_jax.dynamics.rnea` differentiates through the reference implementation.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.configuration import armature_full, mimic_scale
from caliper_jax.kinematics import tables
from caliper_jax.model import Model

BLOCK = 512            # lanes per block (best of 64..4096 for panda on 2 CPU cores)
MIN_BATCH = 64         # below this the reference vmap path is as fast and compiles sooner


def supports(model: Model) -> bool:
    """True when the lane kernel covers this model (revolute/prismatic joints only)."""
    return model.nbody > 0 and all(t in ("revolute", "prismatic") for t in model.jnt_type)


# ---- lane helpers: trailing axis = batch ---------------------------------------------------

def _lanes(x):
    """A leaf without a batch -> one broadcast lane."""
    return jnp.asarray(x)[..., None]


def _mm(a, b):
    """3x3 @ 3x3 per lane: a, b (..., 3, 3, L)."""
    return sum(a[..., :, k, None, :] * b[..., k, None, :, :] for k in range(3))


def _mv(a, v):
    """3x3 @ 3-vector per lane: a (..., 3, 3, L), v (..., 3, L)."""
    return sum(a[..., :, k, :] * v[..., k, None, :] for k in range(3))


def _cross(a, b):
    """Cross product per lane: a, b (..., 3, L)."""
    x = lambda u, i: u[..., i, :]  # noqa: E731
    return jnp.stack([x(a, 1) * x(b, 2) - x(a, 2) * x(b, 1),
                      x(a, 2) * x(b, 0) - x(a, 0) * x(b, 2),
                      x(a, 0) * x(b, 1) - x(a, 1) * x(b, 0)], axis=-2)


def _skew(v):
    """[v]x per lane: v (..., 3, L) -> (..., 3, 3, L)."""
    x = lambda i: v[..., i, :]  # noqa: E731
    z = jnp.zeros_like(x(0))
    return jnp.stack([jnp.stack([z, -x(2), x(1)], -2),
                      jnp.stack([x(2), z, -x(0)], -2),
                      jnp.stack([-x(1), x(0), z], -2)], axis=-3)


def _motion_cross(m, n):
    """Spatial motion cross product m x n per lane: (..., 6, L)."""
    mv, mw, nv, nw = m[..., :3, :], m[..., 3:, :], n[..., :3, :], n[..., 3:, :]
    return jnp.concatenate([_cross(mw, nv) + _cross(mv, nw), _cross(mw, nw)], axis=-2)


def _force_cross(m, f):
    """Spatial cross product m x* f per lane: (..., 6, L)."""
    mv, mw, fl, fa = m[..., :3, :], m[..., 3:, :], f[..., :3, :], f[..., 3:, :]
    return jnp.concatenate([_cross(mw, fl), _cross(mw, fa) + _cross(mv, fl)], axis=-2)


def boundary(x):
    """``x`` unchanged, computed once. XLA's CPU backend otherwise fuses cheap producers into
    every consumer and recomputes them per use (a chain of 3x3 products grows 3x per link);
    a division is an expensive op it will not duplicate, so ``x / (1 + 0 x)`` ends a fusion
    (``optimization_barrier`` is dropped before fusion on that backend)."""
    return jax.tree_util.tree_map(lambda y: y / (1 + 0 * y), x)


def _masked_sum(mask, x):
    """out[i] = sum_k mask[i, k] x[k] for x (n, ..., L), unrolled over the static mask."""
    rows = []
    for i in range(mask.shape[0]):
        ks = np.nonzero(mask[i])[0]
        rows.append(sum(x[k] for k in ks) if len(ks) else jnp.zeros_like(x[0]))
    return jnp.stack(rows)


# ---- the kernel ------------------------------------------------------------------------------

def _full_coordinates(model: Model, q, v, a):
    """Independent (n, L) -> full coordinates with mimic joints filled in; also the per full dof
    scale (1 or the mimic multiplier) that maps full forces back."""
    scale = mimic_scale(model, q.dtype)[:, None]
    q_full = q[np.array(model.qfull_src)]
    for i in range(model.nbody):
        k = model.vfull_mimic[model.body_vadr[i]]
        if k >= 0:
            j = model.body_qadr[i]
            q_full = q_full.at[j].set(q_full[j] * model.mimic_multiplier[k] + model.mimic_offset[k])
    src = np.array(model.vfull_src)
    return q_full, v[src] * scale, a[src] * scale, scale


def _world_poses(model: Model, q_full):
    """World rotation (nbody, 3, 3, L) and origin (nbody, 3, L) of every body."""
    is_rev = np.array([t == "revolute" for t in model.jnt_type])
    rev = np.nonzero(is_rev)[0]
    coord = q_full[np.array(model.body_qadr)]                           # (nbody, L)
    angle = boundary(coord[rev])
    c = jnp.ones_like(coord).at[rev].set(boundary(jnp.cos(angle)))
    s = jnp.zeros_like(coord).at[rev].set(boundary(jnp.sin(angle)))
    d = jnp.where(is_rev[:, None], 0.0, coord)
    axis, R0 = _lanes(model.jnt_axis), _lanes(model.jnt_R)
    # Rodrigues folded into the joint frame: R0 (c I + s [a]x + (1 - c) a a^T)
    R_sin = _mm(R0, _skew(axis))
    R_cos = _mm(R0, axis[:, :, None, :] * axis[:, None, :, :]) - R0
    R_local = R0 + s[:, None, None, :] * R_sin + (1 - c)[:, None, None, :] * R_cos
    p_local = _lanes(model.jnt_p) + _mv(R0, axis) * d[:, None, :]
    R_local, p_local = boundary((R_local, p_local))
    Rw, pw = [], []          # one array per body, stacked once at the end (an in-place chain of
    for i, parent in enumerate(model.body_parent):   # updates makes XLA copy the whole buffer)
        if parent < 0:
            Rw.append(R_local[i])
            pw.append(p_local[i])
        else:
            Rw.append(boundary(_mm(Rw[parent], R_local[i])))
            pw.append(boundary(pw[parent] + _mv(Rw[parent], p_local[i])))
    return boundary((jnp.stack(Rw), jnp.stack(pw)))


def rnea_lanes(model: Model, q, v, a, gravity):
    """Inverse dynamics for L configurations at once: q (nq, L), v, a (nv, L), gravity (3,)
    -> tau (nv, L). Same equations as :func:`caliper_jax.dynamics.rnea`."""
    support, dof_body, dof_support = tables(model)
    q_full, v_full, a_full, scale = _full_coordinates(model, q, v, a)
    Rw, pw = _world_poses(model, q_full)
    # world-origin motion axis of every dof (one per body here)
    is_rev = np.array([t == "revolute" for t in model.jnt_type])[:, None, None]
    w = _mv(Rw, _lanes(model.jnt_axis))
    xi = boundary(jnp.where(is_rev, jnp.concatenate([_cross(pw, w), w], axis=-2),
                            jnp.concatenate([w, jnp.zeros_like(w)], axis=-2)))     # (nbody, 6, L)
    V = boundary(_masked_sum(dof_support, xi * v_full[:, None, :]))
    xi_dot = _motion_cross(V[dof_body], xi)
    A = boundary(_masked_sum(dof_support, boundary(xi * a_full[:, None, :] + xi_dot * v_full[:, None, :])))
    g = _lanes(gravity)
    A = A + jnp.concatenate([-g, jnp.zeros_like(g)], axis=0)
    # spatial inertias about the world origin, world axes
    mass = _lanes(model.body_mass)[:, None]                                    # (nbody, 1, 1)
    com = pw + _mv(Rw, _lanes(model.body_com))
    I_com = _mm(_mm(Rw, _lanes(model.body_inertia)), jnp.swapaxes(Rw, 1, 2))
    c_x = _skew(com)
    I_o, h = boundary((I_com - mass[..., None] * _mm(c_x, c_x), mass * com))

    def inertia_apply(m):
        lin, ang = m[:, :3], m[:, 3:]
        return jnp.concatenate([mass * lin - _cross(h, ang), _mv(I_o, ang) + _cross(h, lin)], axis=-2)

    f = boundary(boundary(inertia_apply(A)) + _force_cross(V, boundary(inertia_apply(V))))
    F = boundary(_masked_sum(support.T, f))                                   # subtree sums
    Fd = F[dof_body]
    tau_full = sum(xi[:, c] * Fd[:, c] for c in range(6)) + _lanes(armature_full(model)) * a_full
    out = jnp.zeros((model.nv,) + tau_full.shape[1:], tau_full.dtype)
    return out.at[np.array(model.vfull_src)].add(tau_full * scale)


def rnea_batched(model: Model, Q, V, A, gravity, block: int = BLOCK):
    """Inverse dynamics for a batch in the usual layout: Q (B, nq), V, A (B, nv) -> (B, nv).
    The batch is padded to whole blocks of ``block`` lanes (fewer when B is smaller)."""
    batch = Q.shape[0]
    lanes = min(block, batch)
    nblock = -(-batch // lanes)
    pad = nblock * lanes - batch

    def to_lanes(X):
        X = jnp.pad(X, ((0, pad), (0, 0))) if pad else X
        return jnp.swapaxes(X.reshape(nblock, lanes, -1), 1, 2)             # (nblock, n, lanes)

    tau = jax.vmap(lambda q, v, a: rnea_lanes(model, q, v, a, gravity))(to_lanes(Q), to_lanes(V),
                                                                       to_lanes(A))
    return jnp.swapaxes(tau, 1, 2).reshape(nblock * lanes, -1)[:batch]
