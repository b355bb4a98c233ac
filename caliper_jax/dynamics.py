"""Rigid-body dynamics: RNEA, CRBA, ABA, forward/inverse dynamics, energies.

Equations of motion: ``M(q) qdd + b(q, v) = tau + J^T f_ext`` with ``b = C(q, v) v + g(q)`` and
``M`` including the rotor armature on its diagonal. Joint damping and friction are not part of
these rigid-body terms; the integrators add them. External forces ``f_ext`` are per body, (nbody,
6) as [f; n] at the body origin in body axes (Pinocchio's convention). One instance per call.
"""
from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.linalg as jsl

from caliper_jax import lanes, lanes_aba, levels
from caliper_jax.configuration import armature_full, expand_q, expand_v, reduce_force
from caliper_jax.kinematics import (
    body_accelerations,
    body_poses,
    body_velocities,
    joint_placements,
    motion_axes,
    subtree_sum,
    tables,
)
from caliper_jax.model import Model
from caliper_jax.spatial import cross, inertia_about_origin, mm, mv, skew


def _gravity(model: Model, gravity):
    return model.gravity if gravity is None else jnp.asarray(gravity, model.dtype)


def _world_inertias(model: Model, Rw, pw):
    """Per body (mass, first moment h = m c, inertia about the world origin), world axes."""
    mass = model.body_mass
    com = pw + mv(Rw, model.body_com)
    I_com = mm(mm(Rw, model.body_inertia), jnp.swapaxes(Rw, -1, -2))
    return mass, mass[:, None] * com, inertia_about_origin(mass, com, I_com)


def _inertia_apply(mass, h, I_o, m):
    """Spatial inertias (..., as from _world_inertias) applied to motions m (..., 6) -> (..., 6)."""
    v, w = m[..., :3], m[..., 3:]
    return jnp.concatenate([mass[..., None] * v - cross(h, w), mv(I_o, w) + cross(h, v)], axis=-1)


def _force_cross(m, f):
    """Spatial cross product m x* f for a motion m and force f (..., 6)."""
    v, w, fl, fa = m[..., :3], m[..., 3:], f[..., :3], f[..., 3:]
    return jnp.concatenate([cross(w, fl), cross(w, fa) + cross(v, fl)], axis=-1)


def _full_to_reduced_matrix(model: Model, M_full):
    if not model.has_mimic:
        return M_full
    return reduce_force(model, reduce_force(model, M_full, axis=-1), axis=-2)


def _external_world(Rw, pw, f_ext):
    """Body-frame external forces (nbody, 6) -> spatial forces at the world origin."""
    f = mv(Rw, f_ext[:, :3])
    return jnp.concatenate([f, mv(Rw, f_ext[:, 3:]) + cross(pw, f)], axis=-1)


def _rnea_reference(model: Model, q, v, a, f_ext=None, gravity=None):
    """RNEA in world-frame spatial form: every body at once, then subtree sums (any joint
    type, external forces, differentiable)."""
    q_full, v_full, a_full = expand_q(model, q), expand_v(model, v), expand_v(model, a)
    if model.nbody == 0:
        return jnp.zeros(model.nv, model.dtype)
    Rw, pw = body_poses(model, q)
    xi = motion_axes(model, Rw, pw)
    V = body_velocities(model, xi, v_full)
    A = body_accelerations(model, xi, V, v_full, a_full, a_base=-_gravity(model, gravity))
    inertia = _world_inertias(model, Rw, pw)
    f = _inertia_apply(*inertia, A) + _force_cross(V, _inertia_apply(*inertia, V))
    if f_ext is not None:
        f = f - _external_world(Rw, pw, f_ext)
    dof_body = tables(model)[1]
    F = subtree_sum(model, f)                                 # subtree sums (nbody, 6)
    tau_full = jnp.sum(xi * F[dof_body], axis=-1) + armature_full(model) * a_full
    del q_full
    return reduce_force(model, tau_full)


def rnea(model: Model, q, v, a, f_ext=None, gravity=None):
    """Inverse dynamics tau (nv,) = M(q) a + b(q, v) - J^T f_ext (Newton-Euler, world-frame
    spatial form: every body at once, then subtree sums).

    Under ``jax.vmap`` (no external forces, revolute/prismatic joints, one shared Model) the
    batch runs through the lane kernel of :mod:`caliper_jax.lanes` (9x on panda, 2 CPU cores);
    derivatives always come from the reference implementation."""
    if f_ext is None:
        return _rnea_lanes(model, q, v, a, _gravity(model, gravity))
    return _rnea_reference(model, q, v, a, f_ext, gravity)


#: jax.vmap(rnea) runs the lane kernel in blocks of 512 (best of 64..4096 for panda, 2 CPU cores)
_rnea_lanes = lanes.vmap_fast_path(lambda m, q, v, a, g: _rnea_reference(m, q, v, a, None, g),
                                   lanes.rnea_lanes, block=512)


inverse_dynamics = rnea


def bias_forces(model: Model, q, v, gravity=None):
    """b(q, v) = C(q, v) v + g(q) (nv,)."""
    return rnea(model, q, v, jnp.zeros_like(v), gravity=gravity)


def gravity_torques(model: Model, q, gravity=None):
    """g(q) (nv,): the torques that hold the robot still against gravity."""
    zero = jnp.zeros(model.nv, model.dtype)
    return rnea(model, q, zero, zero, gravity=gravity)


def crba(model: Model, q):
    """Joint-space inertia matrix M(q) (nv, nv), armature included: composite (subtree)
    inertias in world axes, then M[j, k] = xi_j . Ic_k xi_k for j above k.

    Under ``jax.vmap`` (revolute/prismatic joints, one shared Model) the batch runs through the
    lane kernel of :mod:`caliper_jax.lanes`; derivatives come from the reference code."""
    return _crba_lanes(model, q)


def _crba_reference(model: Model, q):
    if model.nbody == 0:
        return jnp.zeros((model.nv, model.nv), model.dtype)
    Rw, pw = body_poses(model, q)
    xi = motion_axes(model, Rw, pw)
    mass, h, I_o = _world_inertias(model, Rw, pw)
    support, dof_body, _ = tables(model)
    packed = jnp.concatenate([mass[:, None], h, I_o.reshape(model.nbody, 9)], axis=1)
    Ic = subtree_sum(model, packed)                                            # composite inertias
    Ic_mass, Ic_h, Ic_I = Ic[:, 0], Ic[:, 1:4], Ic[:, 4:].reshape(model.nbody, 3, 3)
    Y = _inertia_apply(Ic_mass[dof_body], Ic_h[dof_body], Ic_I[dof_body], xi)  # (nv_full, 6)
    G = xi @ Y.T                                                               # xi_j . Ic_k xi_k
    if levels.use_levels(model):       # body(j) supports body(k): from two index vectors (deep trees)
        above = levels.ancestor_mask(levels.schedule(model), dof_body, dof_body)
    else:                              # or from the static table
        above = jnp.asarray(support[dof_body][:, dof_body].T)
    M = jnp.where(above, G, jnp.where(above.T, G.T, 0.0))
    M = M + jnp.diag(armature_full(model))
    return _full_to_reduced_matrix(model, M)


#: jax.vmap(crba) runs the lane kernel in blocks of 128 (best of 64..512 for panda, 2 CPU cores)
_crba_lanes = lanes.vmap_fast_path(_crba_reference, lanes.crba_lanes, block=128)

mass_matrix = crba


def solve_spd(M, b):
    """x (n,) = M^-1 b for a symmetric positive-definite M (n, n), e.g. the mass matrix, by
    Cholesky. Under ``jax.vmap`` (at least 64 systems, n <= ``lanes.MAX_UNROLLED_SOLVE``) it runs
    an unrolled lane kernel; derivatives come from ``jax.scipy.linalg.cho_solve``."""
    if M.shape[-1] > lanes.MAX_UNROLLED_SOLVE:
        return jsl.cho_solve(jsl.cho_factor(M), b)
    return _solve_spd_lanes(None, M, b)


#: jax.vmap(solve_spd) runs the lane kernel in blocks of 128 (8x vmapped cho_solve, n = 9, float32)
_solve_spd_lanes = lanes.vmap_fast_path(lambda _, M, b: jsl.cho_solve(jsl.cho_factor(M), b),
                                        lambda _, M, b: lanes.cholesky_solve_lanes(M, b), block=128,
                                        applies=lambda _: True)


def forward_dynamics_cholesky(model: Model, q, v, tau, f_ext=None, gravity=None):
    """qdd (nv,) = M^-1 (tau - b(q, v) + J^T f_ext) by CRBA and a Cholesky solve."""
    M = crba(model, q)
    rhs = tau - rnea(model, q, v, jnp.zeros_like(v), f_ext=f_ext, gravity=gravity)
    return solve_spd(M, rhs)


def _X(R, p):
    """6x6 motion transform parent -> child for a child frame at (R, p) in the parent."""
    Rt = R.T
    top = jnp.concatenate([Rt, -Rt @ skew(p)], axis=1)
    bottom = jnp.concatenate([jnp.zeros_like(Rt), Rt], axis=1)
    return jnp.concatenate([top, bottom], axis=0)


def _I6(mass, h, I_o):
    hx = skew(h)
    top = jnp.concatenate([mass * jnp.eye(3, dtype=I_o.dtype), -hx], axis=1)
    return jnp.concatenate([top, jnp.concatenate([hx, I_o], axis=1)], axis=0)


def _cross_m(v):
    """6x6 motion cross-product matrix of a twist [v; w]."""
    vx, wx = skew(v[:3]), skew(v[3:])
    top = jnp.concatenate([wx, vx], axis=1)
    return jnp.concatenate([top, jnp.concatenate([jnp.zeros_like(wx), wx], axis=1)], axis=0)


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


def aba(model: Model, q, v, tau, f_ext=None, gravity=None):
    """Forward dynamics qdd (nv,) by the articulated-body algorithm, O(n).

    Models with mimic joints (a coupling ABA cannot express) and deep trees (``levels.use_levels``:
    this recursion is unrolled per body, so its compile time grows with the depth) use CRBA +
    Cholesky instead."""
    if model.has_mimic or levels.use_levels(model):
        return forward_dynamics_cholesky(model, q, v, tau, f_ext=f_ext, gravity=gravity)
    if f_ext is None:
        return _aba_lanes(model, q, v, tau, _gravity(model, gravity))
    return _aba_reference(model, q, v, tau, f_ext, gravity)


def _aba_reference(model: Model, q, v, tau, f_ext=None, gravity=None):
    """ABA in the classic form: joint frames, 6x6 transforms X between parent and child."""
    Rs, ps = joint_placements(model, q)
    mass = model.body_mass
    h = mass[:, None] * model.body_com
    I_o = inertia_about_origin(mass, model.body_com, model.body_inertia)
    arm = model.dof_armature
    n = model.nbody
    X, S, vel, c, IA, pA = [None] * n, [None] * n, [None] * n, [None] * n, [None] * n, [None] * n
    for i, parent in enumerate(model.body_parent):
        X[i], S[i] = _X(Rs[i], ps[i]), motion_subspace(model, i)
        a, k = model.body_vadr[i], S[i].shape[1]
        vJ = S[i] @ v[a:a + k]
        vel[i] = (X[i] @ vel[parent] if parent >= 0 else 0.0) + vJ
        c[i] = _cross_m(vel[i]) @ vJ
        IA[i] = _I6(mass[i], h[i], I_o[i])
        pA[i] = -_cross_m(vel[i]).T @ (IA[i] @ vel[i])
        if f_ext is not None:
            pA[i] = pA[i] - f_ext[i]
    U, Dinv, u = [None] * n, [None] * n, [None] * n
    for i in reversed(range(n)):
        a, k = model.body_vadr[i], S[i].shape[1]
        U[i] = IA[i] @ S[i]
        D = S[i].T @ U[i] + jnp.diag(arm[a:a + k])
        Dinv[i] = jnp.linalg.inv(D)
        u[i] = tau[a:a + k] - S[i].T @ pA[i]
        parent = model.body_parent[i]
        if parent >= 0:
            Ia = IA[i] - U[i] @ Dinv[i] @ U[i].T
            pa = pA[i] + Ia @ c[i] + U[i] @ (Dinv[i] @ u[i])
            IA[parent] = IA[parent] + X[i].T @ Ia @ X[i]
            pA[parent] = pA[parent] + X[i].T @ pa
    g = _gravity(model, gravity)
    a_world = jnp.concatenate([-g, jnp.zeros(3, model.dtype)])
    acc, qdd = [None] * n, [None] * n
    for i, parent in enumerate(model.body_parent):
        a_i = X[i] @ (acc[parent] if parent >= 0 else a_world) + c[i]
        qdd[i] = Dinv[i] @ (u[i] - U[i].T @ a_i)
        acc[i] = a_i + S[i] @ qdd[i]
    return jnp.concatenate(qdd) if qdd else jnp.zeros(0, model.dtype)


#: jax.vmap(aba) (no external forces, revolute/prismatic joints, no mimic joints, one shared Model)
#: runs the world-frame lane kernel of :mod:`caliper_jax.lanes_aba` in blocks of 512 lanes
#: (best of 64..512 for panda, float32, 2 loaded CPU cores)
_aba_lanes = lanes.vmap_fast_path(lambda m, q, v, tau, g: _aba_reference(m, q, v, tau, None, g),
                                  lanes_aba.aba_lanes, block=512)


def forward_dynamics(model: Model, q, v, tau, f_ext=None, gravity=None):
    """The default forward dynamics qdd (nv,): CRBA + Cholesky for one instance (it compiles faster
    than ABA there and its results are unchanged); under ``jax.vmap`` (no external forces,
    revolute/prismatic joints, no mimic joints, one shared Model) the ABA lane kernel, which measured
    1.05-1.2x the CRBA, RNEA and Cholesky lane kernels together in float32 and level in float64
    (panda, batch 4096, 2 loaded cores, rounds interleaved) and compiles in less time. Both are
    exact; derivatives are CRBA + Cholesky's."""
    if f_ext is not None:
        return forward_dynamics_cholesky(model, q, v, tau, f_ext=f_ext, gravity=gravity)
    return _forward_dynamics_lanes(model, q, v, tau, _gravity(model, gravity))


_forward_dynamics_lanes = lanes.vmap_fast_path(
    lambda m, q, v, tau, g: forward_dynamics_cholesky(m, q, v, tau, None, g), lanes_aba.aba_lanes,
    block=512, applies=lambda m: lanes.supports(m) and not m.has_mimic)


def kinetic_energy(model: Model, q, v):
    """0.5 v^T M(q) v, summed body by body (armature included)."""
    v_full = expand_v(model, v)
    if model.nbody == 0:
        return jnp.zeros((), model.dtype)
    Rw, pw = body_poses(model, q)
    V = body_velocities(model, motion_axes(model, Rw, pw), v_full)
    momentum = _inertia_apply(*_world_inertias(model, Rw, pw), V)
    return 0.5 * (jnp.sum(V * momentum) + jnp.sum(armature_full(model) * v_full**2))


def potential_energy(model: Model, q, gravity=None):
    """-sum_i m_i g . c_i (zero at the world origin), for any gravity vector."""
    R, p = body_poses(model, q)
    com_world = p + mv(R, model.body_com)
    return -jnp.sum(model.body_mass * (com_world @ _gravity(model, gravity)))


def total_energy(model: Model, q, v, gravity=None):
    return kinetic_energy(model, q, v) + potential_energy(model, q, gravity)


def center_of_mass(model: Model, q):
    """Whole-robot centre of mass in the world frame (3,)."""
    R, p = body_poses(model, q)
    com_world = p + mv(R, model.body_com)
    return jnp.sum(model.body_mass[:, None] * com_world, axis=0) / jnp.sum(model.body_mass)
