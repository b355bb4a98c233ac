"""Rigid-body dynamics: RNEA, CRBA, ABA, forward/inverse dynamics, energies.

Equations of motion: ``M(q) qdd + b(q, v) = tau + J^T f_ext`` with ``b = C(q, v) v + g(q)`` and
``M`` including the rotor armature on its diagonal. Joint damping and friction are not part of
these rigid-body terms; the integrators add them. External forces ``f_ext`` are per body, (nbody,
6) as [f; n] at the body origin in body axes (Pinocchio's convention). One instance per call.
"""
from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from caliper_jax.configuration import expand_q, expand_v, reduce_force
from caliper_jax.kinematics import body_motion, body_poses, joint_placements, motion_subspace
from caliper_jax.model import Model
from caliper_jax.spatial import (
    force_to_parent,
    inertia_about_origin,
    inertia_times_motion,
    mm,
    motion_cross_force,
    mv,
    skew,
)


def _gravity(model: Model, gravity):
    return model.gravity if gravity is None else jnp.asarray(gravity, model.dtype)


def _spatial_inertias(model: Model):
    """Per body (mass, first moment h = m c, inertia about the body origin), body axes."""
    h = model.body_mass[:, None] * model.body_com
    I_o = inertia_about_origin(model.body_mass, model.body_com, model.body_inertia)
    return model.body_mass, h, I_o


def _full_to_reduced_matrix(model: Model, M_full):
    if not model.has_mimic:
        return M_full
    return reduce_force(model, reduce_force(model, M_full, axis=-1), axis=-2)


def _armature_full(model: Model):
    """Armature per full dof (mimic joints carry none of their own)."""
    if not model.has_mimic:
        return model.dof_armature
    idx = np.array(model.vfull_src)
    own = np.array([m < 0 for m in model.vfull_mimic])
    return jnp.where(own, model.dof_armature[idx], 0.0)


def rnea(model: Model, q, v, a, f_ext=None, gravity=None):
    """Inverse dynamics tau (nv,) = M(q) a + b(q, v) - J^T f_ext, by Newton-Euler."""
    q_full, v_full, a_full = expand_q(model, q), expand_v(model, v), expand_v(model, a)
    Rs, ps = joint_placements(model, q_full)
    vel, acc = body_motion(model, Rs, ps, v_full, a_full, a_base=-_gravity(model, gravity))
    mass, h, I_o = _spatial_inertias(model)
    forces = []
    for i in range(model.nbody):
        (v_, w_), (av, aw) = vel[i], acc[i]
        f, n = inertia_times_motion(mass[i], h[i], I_o[i], av, aw)
        pf, pn = inertia_times_motion(mass[i], h[i], I_o[i], v_, w_)
        cf, cn = motion_cross_force(v_, w_, pf, pn)
        f, n = f + cf, n + cn
        if f_ext is not None:
            f, n = f - f_ext[i, :3], n - f_ext[i, 3:]
        forces.append([f, n])
    tau = [None] * model.nbody
    for i in reversed(range(model.nbody)):
        f, n = forces[i]
        tau[i] = motion_subspace(model, i).T @ jnp.concatenate([f, n])
        parent = model.body_parent[i]
        if parent >= 0:
            fp, np_ = force_to_parent(Rs[i], ps[i], f, n)
            forces[parent][0] = forces[parent][0] + fp
            forces[parent][1] = forces[parent][1] + np_
    tau_full = jnp.concatenate(tau) if tau else jnp.zeros(0, model.dtype)
    tau_full = tau_full + _armature_full(model) * a_full
    return reduce_force(model, tau_full)


inverse_dynamics = rnea


def bias_forces(model: Model, q, v, gravity=None):
    """b(q, v) = C(q, v) v + g(q) (nv,)."""
    return rnea(model, q, v, jnp.zeros_like(v), gravity=gravity)


def gravity_torques(model: Model, q, gravity=None):
    """g(q) (nv,): the torques that hold the robot still against gravity."""
    zero = jnp.zeros(model.nv, model.dtype)
    return rnea(model, q, zero, zero, gravity=gravity)


def _inertia_to_parent(R, p, mass, h, I_o):
    """A spatial inertia in child axes at the child origin -> parent axes at the parent origin."""
    hp = mv(R, h)
    I_rot = mm(mm(R, I_o), R.T)
    px, hx = skew(p), skew(hp)
    return mass, hp + mass * p, I_rot - mass * mm(px, px) - mm(px, hx) - mm(hx, px)


def crba(model: Model, q):
    """Joint-space inertia matrix M(q) (nv, nv), armature included, by composite bodies."""
    q_full = expand_q(model, q)
    Rs, ps = joint_placements(model, q_full)
    mass, h, I_o = _spatial_inertias(model)
    comp = [[mass[i], h[i], I_o[i]] for i in range(model.nbody)]
    for i in reversed(range(model.nbody)):
        parent = model.body_parent[i]
        if parent >= 0:
            m, hp, Ip = _inertia_to_parent(Rs[i], ps[i], *comp[i])
            comp[parent] = [comp[parent][0] + m, comp[parent][1] + hp, comp[parent][2] + Ip]
    blocks = {}
    for i in range(model.nbody):
        S = motion_subspace(model, i)
        m, hc, Ic = comp[i]
        f, n = inertia_times_motion(m, hc, Ic, S[:3].T, S[3:].T)  # (k, 3) each
        j = i
        while True:
            Sj = motion_subspace(model, j)
            blocks[(j, i)] = Sj[:3].T @ f.T + Sj[3:].T @ n.T
            parent = model.body_parent[j]
            if parent < 0:
                break
            f, n = force_to_parent(Rs[j], ps[j], f, n)
            j = parent
    nv = model.nv_full
    M = jnp.zeros((nv, nv), model.dtype)
    for (j, i), block in blocks.items():
        aj, ai = model.body_vadr[j], model.body_vadr[i]
        M = M.at[aj:aj + block.shape[0], ai:ai + block.shape[1]].set(block)
        if j != i:
            M = M.at[ai:ai + block.shape[1], aj:aj + block.shape[0]].set(block.T)
    M = M + jnp.diag(_armature_full(model))
    return _full_to_reduced_matrix(model, M)


mass_matrix = crba


def forward_dynamics_cholesky(model: Model, q, v, tau, f_ext=None, gravity=None):
    """qdd (nv,) = M^-1 (tau - b(q, v) + J^T f_ext) by CRBA and a Cholesky solve."""
    M = crba(model, q)
    rhs = tau - rnea(model, q, v, jnp.zeros_like(v), f_ext=f_ext, gravity=gravity)
    return jsl.cho_solve(jsl.cho_factor(M), rhs)


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


def aba(model: Model, q, v, tau, f_ext=None, gravity=None):
    """Forward dynamics qdd (nv,) by the articulated-body algorithm, O(n).

    Models with mimic joints (a coupling ABA cannot express) use CRBA + Cholesky instead."""
    if model.has_mimic:
        return forward_dynamics_cholesky(model, q, v, tau, f_ext=f_ext, gravity=gravity)
    Rs, ps = joint_placements(model, q)
    mass, h, I_o = _spatial_inertias(model)
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


forward_dynamics = aba


def kinetic_energy(model: Model, q, v):
    """0.5 v^T M(q) v, summed body by body (armature included)."""
    q_full, v_full = expand_q(model, q), expand_v(model, v)
    Rs, ps = joint_placements(model, q_full)
    vel, _ = body_motion(model, Rs, ps, v_full, jnp.zeros_like(v_full))
    mass, h, I_o = _spatial_inertias(model)
    energy = 0.5 * jnp.sum(_armature_full(model) * v_full**2)
    for i, (lin, ang) in enumerate(vel):
        f, n = inertia_times_motion(mass[i], h[i], I_o[i], lin, ang)
        energy = energy + 0.5 * (jnp.dot(lin, f) + jnp.dot(ang, n))
    return energy


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
