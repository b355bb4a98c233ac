"""Batched kernels with the batch in the lanes: the fast path behind ``jax.vmap`` of
``kinematics.forward_kinematics``, ``dynamics.rnea``, ``dynamics.crba`` and ``dynamics.solve_spd``
(the frame Jacobians and ABA, built from the helpers here, are in :mod:`caliper_jax.lanes_jacobian`
and :mod:`caliper_jax.lanes_aba`).

Every array here carries the batch on its *last* axis (``L`` lanes): a rotation of every body is
``(nbody, 3, 3, L)``, a spatial vector ``(nbody, 6, L)``. Each elementwise op then runs over a
contiguous run of ``L`` values, which XLA's CPU backend vectorises; with the batch first (what
``vmap`` of the one-instance code gives) the minor axes are 3 wide and it does not. A large batch
is cut into blocks of ``block`` lanes (vmapped); the block sizes are measured optima, not derived.

The formulation is the world-frame one of :mod:`caliper_jax.dynamics` (same equations, same
conventions), limited to models whose joints are all revolute or prismatic (mimic joints
included); :func:`supports` says when it applies. The kernels are forward-only: derivatives
come from the reference implementations (see :func:`vmap_fast_path`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from caliper_jax import levels
from caliper_jax.configuration import armature_full, expand_q, mimic_scale
from caliper_jax.model import Model, tables

MIN_BATCH = 64         # smaller batches keep the reference vmap path (one compile fewer)
#: larger systems keep the vmapped cho_solve: the unrolled solve's program grows as n^2 (compile,
#: vmapped, float32, loaded 2-core host: n = 16 6 s, 32 20 s, 64 81 s)
MAX_UNROLLED_SOLVE = 24


def supports(model: Model) -> bool:
    """True when the lane kernel covers this model: revolute/prismatic joints only, and not a
    deep tree (``levels.use_levels``: the kernels unroll the walk and the ancestor sums, so their
    program grows as nbody x depth; such models run the vmapped level walk instead)."""
    return (model.nbody > 0 and all(t in ("revolute", "prismatic") for t in model.jnt_type)
            and not levels.use_levels(model))


def _is_revolute(model: Model):
    """(nbody,) bool: revolute (else prismatic, in the models the kernels cover)."""
    return np.array([t == "revolute" for t in model.jnt_type])


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


def keep(x):
    """``x`` unchanged (times a one XLA cannot see). Keeps the algebraic simplifier from looking
    through ``x`` -- e.g. from turning slices of a concatenated pose back into the expressions that
    built it, which fusion would then recompute per use -- without a kernel of its own, as
    :func:`boundary` costs. Measured per site: a link pose kept this way made FK 1.15x faster,
    where ``boundary`` on RNEA's inertia products cannot be swapped for it (4x slower)."""
    return jax.tree_util.tree_map(lambda y: y * jax.lax.optimization_barrier(jnp.ones((), y.dtype)), x)


def _stack(rows):
    """jnp.stack in groups of at most 8: XLA's CPU backend never fuses a concatenate of more
    operands, so each row would become a kernel of its own."""
    if len(rows) <= 8:
        return jnp.stack(rows)
    return jnp.concatenate([jnp.stack(rows[i:i + 8]) for i in range(0, len(rows), 8)])


# Cody-Waite split of pi/2 and the minimax kernels of sin/cos on [-pi/4, pi/4] (fdlibm's for
# float64, Cephes' for float32)
_SINCOS = {
    "float64": ((1.57079632673412561417e+00, 6.07710050650619224932e-11, 2.02226624871116645580e-21),
                (-1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04,
                 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10),
                (4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05,
                 -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11)),
    "float32": ((1.5703125, 4.837512969970703125e-4, 7.549789948768648e-8),
                (-1.6666654611e-1, 8.3321608736e-3, -1.9515295891e-4),
                (4.166664568298827e-2, -1.388731625493765e-3, 2.443315711809948e-5)),
}


def _horner(z, coefs):
    out = jnp.full_like(z, coefs[-1])
    for c in coefs[-2::-1]:
        out = out * z + c
    return out


def sincos(x):
    """(sin x, cos x) from multiplies and adds only, which XLA's CPU backend vectorises (its own
    sin and cos run ~3x slower here). Accurate to 1.1e-16 (float64) / 1e-7 (float32) absolute for
    |x| < 1e5 rad; larger angles lose accuracy in the reduction."""
    pio2, s_coefs, c_coefs = _SINCOS["float64" if x.dtype == jnp.float64 else "float32"]
    n = jnp.round(x * (2 / np.pi))
    r = x - n * pio2[0] - n * pio2[1] - n * pio2[2]
    z = r * r
    s = r + r * z * _horner(z, s_coefs)
    c = 1 - 0.5 * z + z * z * _horner(z, c_coefs)
    quadrant = n.astype(jnp.int32) & 3
    sin = jnp.where(quadrant == 0, s, jnp.where(quadrant == 1, c, jnp.where(quadrant == 2, -s, -c)))
    cos = jnp.where(quadrant == 0, c, jnp.where(quadrant == 1, -s, jnp.where(quadrant == 2, -c, s)))
    return sin, cos


def _masked_sum(mask, x):
    """out[i] = sum_k mask[i, k] x[k] for x (n, ..., L), unrolled over the static mask."""
    rows = []
    for i in range(mask.shape[0]):
        ks = np.nonzero(mask[i])[0]
        rows.append(sum(x[k] for k in ks) if len(ks) else jnp.zeros_like(x[0]))
    return _stack(rows)


# ---- kernels ---------------------------------------------------------------------------------

def _world_poses(model: Model, q):
    """World pose of every body at q (nq, L): (nbody, 4, 3, L), rows 0-2 of each the rotation,
    row 3 the origin. Prismatic joints enter sincos as angle 0 (exactly sin 0, cos 1)."""
    return _stack(world_pose_list(model, q))


def world_pose_list(model: Model, q):
    """The bodies' world poses of :func:`_world_poses` as a list of (4, 3, L) arrays (a kernel that
    needs a few bodies picks them without slicing the stacked array)."""
    q_full = expand_q(model, q)                                          # mimic rows filled in
    is_rev = _is_revolute(model)
    coord = q_full[np.array(model.body_qadr)]                           # (nbody, L)
    s, c = boundary(jnp.stack(sincos(boundary(jnp.where(is_rev[:, None], coord, 0.0)))))
    d = jnp.where(is_rev[:, None], 0.0, coord)
    axis, R0 = _lanes(model.jnt_axis), _lanes(model.jnt_R)
    # Rodrigues folded into the joint frame: R0 (c I + s [a]x + (1 - c) a a^T)
    R_sin = _mm(R0, _skew(axis))
    R_cos = _mm(R0, axis[:, :, None, :] * axis[:, None, :, :]) - R0
    R_local = R0 + s[:, None, None, :] * R_sin + (1 - c)[:, None, None, :] * R_cos
    p_local = _lanes(model.jnt_p) + _mv(R0, axis) * d[:, None, :]
    local = keep(jnp.concatenate([R_local, p_local[:, None]], axis=1))   # (nbody, 4, 3, L)
    world = []               # one array per body, stacked once at the end (an in-place chain of
    for i, parent in enumerate(model.body_parent):   # updates makes XLA copy the whole buffer)
        if parent < 0:
            world.append(local[i])
        else:
            R_par, p_par = world[parent][:3], world[parent][3]
            world.append(keep(jnp.concatenate(
                [_mm(R_par, local[i][:3]), (p_par + _mv(R_par, local[i][3]))[None]])))
    return world


def forward_kinematics_lanes(model: Model, q):
    """T_world_frame of every frame for L configurations: q (nq, L) -> (nframe, 4, 4, L)."""
    world = _world_poses(model, q)
    lanes = q.shape[-1]
    body = np.array(model.frame_body)                                    # -1: on the world
    eye = jnp.broadcast_to(_lanes(jnp.eye(3, dtype=q.dtype)), (1, 3, 3, lanes))
    Rb = jnp.concatenate([world[:, :3], eye])[body]
    pb = jnp.concatenate([world[:, 3], jnp.zeros((1, 3, lanes), q.dtype)])[body]
    R = _mm(Rb, _lanes(model.frame_R))
    p = pb + _mv(Rb, _lanes(model.frame_p))
    last_row = jnp.broadcast_to(jnp.array([0, 0, 0, 1], q.dtype)[:, None], (model.nframe, 1, 4, lanes))
    return jnp.concatenate([jnp.concatenate([R, p[:, :, None]], axis=2), last_row], axis=1)


def _motion_axes(model: Model, world):
    """Unit motion of every dof (one per body) at the world origin, world axes: (nbody, 6, L)."""
    Rw, pw = world[:, :3], world[:, 3]
    w = _mv(Rw, _lanes(model.jnt_axis))
    is_rev = _is_revolute(model)[:, None, None]
    return boundary(jnp.where(is_rev, jnp.concatenate([_cross(pw, w), w], axis=-2),
                              jnp.concatenate([w, jnp.zeros_like(w)], axis=-2)))


def _inertias(model: Model, world):
    """Spatial inertia of every body about the world origin, world axes: mass (nbody, 1, 1),
    first moment h = m c (nbody, 3, L), rotational inertia I_o (nbody, 3, 3, L)."""
    Rw, pw = world[:, :3], world[:, 3]
    mass = _lanes(model.body_mass)[:, None]
    com = pw + _mv(Rw, _lanes(model.body_com))
    I_com = _mm(_mm(Rw, _lanes(model.body_inertia)), jnp.swapaxes(Rw, 1, 2))
    c_x = _skew(com)
    I_o, h = boundary((I_com - mass[..., None] * _mm(c_x, c_x), mass * com))
    return mass, h, I_o


def _inertia_apply(mass, h, I_o, m):
    """Spatial inertias (as from :func:`_inertias`) times motions m (nbody, 6, L) -> forces."""
    lin, ang = m[:, :3], m[:, 3:]
    return jnp.concatenate([mass * lin - _cross(h, ang), _mv(I_o, ang) + _cross(h, lin)], axis=-2)


def rnea_lanes(model: Model, q, v, a, gravity):
    """Inverse dynamics for L configurations: q (nq, L), v, a (nv, L), gravity (3, L) -> tau
    (nv, L); any argument may have a single broadcast lane. Same equations as
    :func:`caliper_jax.dynamics.rnea`."""
    support = tables(model)[0]           # one dof per body here: dof k moves body k and below
    # the gathers and the final scatter stay even without mimic joints: they make XLA write the
    # inputs and tau once in lane layout (dropping them measured 1.4x slower, transposes fused
    # into every reader)
    scale = mimic_scale(model, q.dtype)[:, None]
    src = np.array(model.vfull_src)
    v_full, a_full = v[src] * scale, a[src] * scale
    lanes = max(x.shape[-1] for x in (q, v, a, gravity))
    world = _world_poses(model, q)
    xi = _motion_axes(model, world)
    V = _masked_sum(support, xi * v_full[:, None, :])
    xi_dot = _motion_cross(V, xi)
    A = _masked_sum(support, boundary(xi * a_full[:, None, :] + xi_dot * v_full[:, None, :]))
    A = A + jnp.concatenate([-gravity, jnp.zeros_like(gravity)], axis=0)
    mass, h, I_o = _inertias(model, world)
    f = boundary(boundary(_inertia_apply(mass, h, I_o, A))
                 + _force_cross(V, keep(_inertia_apply(mass, h, I_o, V))))
    F = _masked_sum(support.T, f)                                              # subtree sums
    tau_full = sum(xi[:, c] * F[:, c] for c in range(6)) + _lanes(armature_full(model)) * a_full
    tau_full = jnp.broadcast_to(tau_full * scale, (tau_full.shape[0], lanes))
    return jnp.zeros((model.nv, lanes), q.dtype).at[src].add(tau_full)


def crba_lanes(model: Model, q):
    """Joint-space inertia matrix, armature included, for L configurations: q (nq, L) -> M
    (nv, nv, L). Same equations as :func:`caliper_jax.dynamics.crba`: composite inertias Ic, then
    M[j, k] = xi_j . Ic_k xi_k for body j on the path to body k (and its mirror)."""
    support = tables(model)[0]           # support[k, j]: body j is body k or one of its ancestors
    lanes = q.shape[-1]
    world = _world_poses(model, q)
    xi = _motion_axes(model, world)
    mass, h, I_o = _inertias(model, world)
    n = model.nbody
    packed = jnp.concatenate([jnp.broadcast_to(mass, (n, 1, lanes)), h, I_o.reshape(n, 9, lanes)], 1)
    Ic = _masked_sum(support.T, boundary(packed))                             # subtree sums
    Y = boundary(_inertia_apply(Ic[:, :1], Ic[:, 1:4], Ic[:, 4:].reshape(n, 3, 3, lanes), xi))
    G = boundary(sum(xi[:, None, c] * Y[None, :, c] for c in range(6)))        # xi_j . Ic_k xi_k
    above = support.T[:, :, None]                    # one dof per body: body j on body k's path
    M = jnp.where(above, G, jnp.where(np.swapaxes(above, 0, 1), jnp.swapaxes(G, 0, 1), 0.0))
    M = M + _lanes(jnp.diag(armature_full(model)))
    if not model.has_mimic:
        return M
    # mimic joints: P^T M P, P the map from independent to full dofs (mimic scale in its columns)
    scale = mimic_scale(model, q.dtype)[:, None]
    to_reduced = np.array(model.vfull_src)[None, :] == np.arange(model.nv)[:, None]
    M = _masked_sum(to_reduced, M * scale[:, None])
    return jnp.swapaxes(_masked_sum(to_reduced, jnp.swapaxes(M, 0, 1) * scale[:, None]), 0, 1)


def cholesky_solve_lanes(M, b):
    """x = M^-1 b for L symmetric positive-definite systems: M (n, n, L), b (n, L) -> (n, L),
    by an unrolled Cholesky factorisation M = C C^T and two triangular solves."""
    n = M.shape[0]
    cols = []                                        # cols[j] = C[j:, j], (n - j, L)
    for j in range(n):
        col = M[j:, j] - sum((cols[k][j - k:] * cols[k][j - k] for k in range(j)), jnp.zeros_like(M[j:, j]))
        cols.append(boundary(col / jnp.sqrt(col[0])))
    y = []                                           # C y = b
    for i in range(n):
        y.append(boundary((b[i] - sum((cols[k][i - k] * y[k] for k in range(i)), 0.0)) / cols[i][0]))
    x = [None] * n                                   # C^T x = y
    for i in reversed(range(n)):
        x[i] = boundary((y[i] - sum((cols[i][k - i] * x[k] for k in range(i + 1, n)), 0.0)) / cols[i][0])
    return _stack(x)


# ---- running a batch through a kernel, and the vmap fast path ------------------------------------

def run_in_blocks(kernel, arrays, batched, block: int):
    """``kernel(*lane_arrays)`` over a batch. Batched arrays (B, ...) are cut into blocks of
    ``block`` lanes (the batch padded to whole blocks, fewer lanes when B is smaller) and enter as
    (..., lanes); the others enter as (..., 1). Outputs come back as (B, ...)."""
    batch = next(x.shape[0] for x, b in zip(arrays, batched, strict=True) if b)
    width = min(block, batch)
    nblock = -(-batch // width)
    pad = nblock * width - batch

    def to_lanes(X):
        X = jnp.pad(X, [(0, pad)] + [(0, 0)] * (X.ndim - 1)) if pad else X
        return jnp.moveaxis(X.reshape((nblock, width) + X.shape[1:]), 1, -1)

    inputs = [to_lanes(x) if b else jnp.asarray(x)[..., None] for x, b in zip(arrays, batched, strict=True)]
    out = jax.vmap(kernel, in_axes=[0 if b else None for b in batched])(*inputs)  # (nblock, ..., width)
    out = jnp.moveaxis(out, -1, 1)
    return out.reshape((nblock * width,) + out.shape[2:])[:batch]


def vmap_fast_path(reference, kernel, block: int, applies=supports):
    """``f(model, *arrays)`` that computes ``reference`` for one instance and, under
    ``jax.vmap`` over the arrays with one shared Model and at least ``MIN_BATCH`` instances, runs
    ``kernel(model, *lane_arrays)`` in blocks instead. Derivatives (any order, either mode)
    are those of ``reference``; a batched Model, or one ``applies(model)`` rejects, uses
    ``reference`` throughout."""

    @custom_vmap
    def batched(model, *arrays):
        return reference(model, *arrays)

    @batched.def_vmap
    def _rule(axis_size, in_batched, model, *arrays):
        model_batched, *arrays_batched = in_batched
        if any(jax.tree_util.tree_leaves(model_batched)) or axis_size < MIN_BATCH or not any(arrays_batched):
            axes = jax.tree_util.tree_map(lambda b: 0 if b else None, tuple(in_batched))
            return jax.vmap(reference, in_axes=axes)(model, *arrays), True
        return run_in_blocks(lambda *x: kernel(model, *x), arrays, arrays_batched, block), True

    @jax.custom_jvp
    def fast(model, *arrays):
        return batched(model, *arrays)

    @fast.defjvp
    def _jvp(primals, tangents):
        return jax.jvp(reference, primals, tangents)

    def dispatch(model, *arrays):
        return fast(model, *arrays) if applies(model) else reference(model, *arrays)

    return dispatch
