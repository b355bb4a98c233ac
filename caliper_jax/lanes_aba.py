"""Lane kernel (batch in the last axis, see :mod:`caliper_jax.lanes`) for the articulated-body
algorithm, :func:`caliper_jax.dynamics.aba` without external forces.

The recursion runs in world axes about the world origin, as the lane RNEA does: every dof's motion
is its axis xi (6,), every body's inertia a 6x6 spatial inertia at the world origin, so a child's
articulated inertia joins its parent's with no change of frame (the reference's X^T Ia X is the
identity map here). Per body, with U = IA xi, D = xi . U + armature, u = tau - xi . pA:

* down: V = V_parent + xi v, c = V x (xi v), pA = V x* (I V), IA = I;
* up:   IA_parent += IA - U U^T / D, pA_parent += pA + Ia c + U u / D;
* down: A = A_parent + c (the world's A = [-g; 0]), qdd = (u - U . A) / D, A += xi qdd.

Models with mimic joints take CRBA + Cholesky (as the reference does), so this kernel sees none.
"""
from __future__ import annotations

import jax.numpy as jnp

from caliper_jax.lanes import (
    _force_cross,
    _inertia_apply,
    _inertias,
    _lanes,
    _masked_sum,
    _motion_axes,
    _motion_cross,
    _skew,
    _world_poses,
    boundary,
)
from caliper_jax.model import Model, tables


def _spatial_inertia(mass, h, I_o, lanes):
    """6x6 spatial inertias at the world origin (n, 6, 6, L) from (mass (n, 1, 1), h (n, 3, L),
    I_o (n, 3, 3, L)): [[m 1, -[h]x], [[h]x, I_o]]."""
    n = h.shape[0]
    hx = _skew(h)
    eye = jnp.eye(3, dtype=h.dtype)[None, :, :, None]
    m1 = jnp.broadcast_to(mass[..., None] * eye, (n, 3, 3, lanes))
    top = jnp.concatenate([m1, jnp.broadcast_to(-hx, (n, 3, 3, lanes))], axis=2)
    bottom = jnp.concatenate([jnp.broadcast_to(hx, (n, 3, 3, lanes)),
                              jnp.broadcast_to(I_o, (n, 3, 3, lanes))], axis=2)
    return jnp.concatenate([top, bottom], axis=1)


def _dot6(a, b):
    """a . b over the 6 rows, per lane: (6, L), (6, L) -> (L,)."""
    return sum(a[r] * b[r] for r in range(6))


def _mat6_vec(M, x):
    """(6, 6, L) @ (6, L) per lane."""
    return sum(M[:, c] * x[c] for c in range(6))


def aba_lanes(model: Model, q, v, tau, gravity):
    """Forward dynamics qdd (nv, L) for L states: q (nq, L), v, tau (nv, L), gravity (3, L); any
    argument may have a single broadcast lane. Revolute/prismatic joints, no mimic joints."""
    support = tables(model)[0]
    if list(model.body_vadr) != list(range(model.nbody)):       # one dof per body, in body order
        raise ValueError("aba_lanes: the model's dofs are not in body order")
    lanes = max(x.shape[-1] for x in (q, v, tau, gravity))
    dtype = q.dtype
    world = _world_poses(model, q)
    xi = _motion_axes(model, world)                                     # (n, 6, L)
    mass, h, I_o = _inertias(model, world)
    vJ = xi * v[:, None, :]
    V = _masked_sum(support, vJ)
    c = boundary(_motion_cross(V, vJ))
    pA = boundary(_force_cross(V, _inertia_apply(mass, h, I_o, V)))
    IA = boundary(_spatial_inertia(mass, h, I_o, lanes))
    arm = _lanes(model.dof_armature)
    n = model.nbody
    IA, pA = [IA[i] for i in range(n)], [pA[i] for i in range(n)]
    U, Dinv, u = [None] * n, [None] * n, [None] * n
    for i in reversed(range(n)):
        U[i] = _mat6_vec(IA[i], xi[i])
        Dinv[i] = 1.0 / (_dot6(xi[i], U[i]) + arm[i])
        u[i] = tau[i] - _dot6(xi[i], pA[i])
        U[i], Dinv[i], u[i] = boundary((U[i], Dinv[i], u[i]))
        parent = model.body_parent[i]
        if parent >= 0:
            Ia = IA[i] - (U[i][:, None] * (U[i] * Dinv[i])[None])
            pa = pA[i] + _mat6_vec(Ia, c[i]) + U[i] * (Dinv[i] * u[i])
            Ia, pa = boundary((Ia, pa))
            IA[parent] = IA[parent] + Ia
            pA[parent] = pA[parent] + pa
    a_world = jnp.concatenate([-gravity, jnp.zeros_like(gravity)], axis=0)
    a_world = jnp.broadcast_to(a_world, (6, lanes)).astype(dtype)
    A, qdd = [None] * n, [None] * n
    for i, parent in enumerate(model.body_parent):
        a_i = (A[parent] if parent >= 0 else a_world) + c[i]
        qdd[i] = boundary(Dinv[i] * (u[i] - _dot6(U[i], a_i)))
        A[i] = a_i + xi[i] * qdd[i]
    return jnp.stack(qdd)
