"""``cast_rays``: the nearest geom along each of R rays, for one world's poses.

Pure JAX, one instance per call (vmap over worlds and cameras; usable inside an MJX ``lax.scan``).
Each geom type is intersected as one ``(geoms of that type x rays)`` elementwise array op in the
geoms' local frames, components first and rays on the minor axis (what XLA's CPU backend
vectorises); the candidates are concatenated and reduced with ``argmin`` over geoms, and the
winner's normal and id are picked with a chain of selects (no scattered gathers). Height fields
(:mod:`caliper_jax.rays.hfield`) come last: their walk stops at the nearest hit of every other
geom and at ``max_range``, so a field behind a box or beyond the range costs nothing.

Selection follows ``mj_ray``/``mj_multiRay`` with ``flg_static=1``: a geom is skipped when its body
is ``exclude_body``, when its colour's alpha is 0, or when ``geomgroup`` is given and the geom's
group (0-5) is switched off there (groups outside 0-5 are never filtered). Rays starting inside a
closed solid return its exit point, planes are hit from their +z side only (both as MuJoCo).

Distances are in units of the direction vector (the hit point is ``origin + distance * dir``), as
MuJoCo returns them; pass unit directions to get metres. Misses: ``distance`` inf, ``geom`` -1,
``normal`` 0. ``max_range`` is an exact gate (hits beyond it are misses), unlike ``mj_multiRay``'s
``cutoff``, which only culls geoms by their bounding volume.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.rays import hfield as _hfield
from caliper_jax.rays import mesh as _mesh
from caliper_jax.rays.primitives import HFIELD, MESH, PRIMITIVES, local_normal
from caliper_jax.rays.scene import RayScene


class Hits(NamedTuple):
    """``distance`` (..., R) along the ray (inf: miss), ``geom`` (..., R) int32 (-1: miss),
    ``normal`` (..., R, 3) outward unit surface normal, world frame (0 on a miss)."""

    distance: jax.Array
    geom: jax.Array
    normal: jax.Array


def as_xmat(geom_xmat):
    """(..., n, 9) or (..., n, 3, 3) rotation matrices -> (..., n, 3, 3)."""
    x = jnp.asarray(geom_xmat)
    return x.reshape(x.shape[:-1] + (3, 3)) if x.shape[-1] == 9 else x


#: above this many geoms the winner's values are gathered instead of picked by a chain of selects
_SELECT_MAX = 48


def pick(k, table):
    """``table[:, k]`` for a small table (C, G) and winners ``k`` (R,) -> (C, R)."""
    table = jnp.asarray(table)
    if table.shape[1] > _SELECT_MAX:
        return table[:, k]
    out = jnp.broadcast_to(table[:, :1], (table.shape[0], k.shape[0]))
    for g in range(1, table.shape[1]):
        out = jnp.where(k == g, table[:, g:g + 1], out)
    return out


def _pick_rows(k, rows):
    """rows (G, C, R) -> the row of the winner per ray, (C, R)."""
    if rows.shape[0] > _SELECT_MAX:
        return jnp.take_along_axis(rows, k[None, None, :], axis=0)[0]
    out = rows[0]
    for g in range(1, rows.shape[0]):
        out = jnp.where(k == g, rows[g], out)
    return out


def _visible(scene: RayScene, dtype, exclude_body, geomgroup):
    ok = (jnp.asarray(scene.geom_rgba[:, 3], dtype) != 0) & (jnp.asarray(scene.geom_bodyid)
                                                            != jnp.asarray(exclude_body))
    if geomgroup is not None:
        gg = jnp.asarray(geomgroup).reshape(6) != 0
        g = jnp.asarray(scene.geom_group)
        inrange = (g >= 0) & (g < 6)
        ok = ok & (~inrange | gg[jnp.clip(g, 0, 5)])
    return ok


def _once(x):
    """``x`` unchanged, computed once: XLA's CPU backend fuses cheap producers into every consumer
    and recomputes them per use; it does not duplicate a division (the idea of
    ``caliper_jax.lanes.boundary``, written here so that ``inf`` survives: ``inf / 1``)."""
    return x / (1 + 0 * jnp.minimum(jnp.abs(x), 1))


def _block(scene, code, idx, oT, dT, xpos, xmat, size, dtype, t_limit=None):
    """One geom type: t (G, R) and, for meshes, the triangle hit (G, R), for height fields the
    local normals (G, 3, R) (else None). ``t_limit`` (R,): height fields search no further."""
    p = xpos[idx]                                   # (G, 3)
    Rm = xmat[idx]                                  # (G, 3, 3)
    diff = [oT[k][None, :] - p[:, k, None] for k in range(3)]
    # x_local[j] = sum_k x[k] R[k, j], elementwise over (G, R)
    lo = [sum(diff[k] * Rm[:, k, j, None] for k in range(3)) for j in range(3)]
    ld = [sum(dT[k][None, :] * Rm[:, k, j, None] for k in range(3)) for j in range(3)]
    if code == MESH:
        return _cast_meshes(scene, idx, jnp.stack(lo, -1), jnp.stack(ld, -1), dtype)
    if code == HFIELD:
        return _cast_hfields(scene, idx, lo, ld, dtype, t_limit)
    sz = [size[idx, i][:, None] for i in range(3)]
    return PRIMITIVES[code](lo, ld, sz), None


def _cast(scene: RayScene, geom_xpos, geom_xmat, origins, dirs, max_range, exclude_body, geomgroup,
          dirs_t=None):
    """Core: (distance (R,), winner column k (R,), normal (3, R), geom order (ngeom,) static).
    ``dirs_t``: the directions already components-first (3, R) (then ``dirs`` is ignored)."""
    xpos = jnp.asarray(geom_xpos)
    dtype = jnp.result_type(xpos.dtype, jnp.float32)
    xpos = xpos.astype(dtype)
    xmat = as_xmat(geom_xmat).astype(dtype)
    dT = jnp.asarray(dirs, dtype).reshape(-1, 3).T if dirs_t is None else dirs_t.astype(dtype)
    nray = dT.shape[1]
    oT = jnp.broadcast_to(jnp.asarray(origins, dtype).reshape(-1, 3).T, dT.shape)
    size = jnp.asarray(scene.geom_size, dtype)
    vis = _visible(scene, dtype, exclude_body, geomgroup)
    ts, order, mesh_tri, mesh_col, hf_n, hf_col = [], [], None, 0, None, 0
    # height fields last: their walk stops at the nearest hit of every other geom (and max_range)
    for code, ids in sorted(scene.type_ids, key=lambda c: c[0] == HFIELD):
        idx = np.asarray(ids)
        limit = None
        if code == HFIELD:
            limit = jnp.full((nray,), max_range, dtype)
            if ts:
                limit = jnp.minimum(limit, jnp.min(jnp.concatenate(ts, axis=0), axis=0))
        t, extra = _block(scene, code, idx, oT, dT, xpos, xmat, size, dtype, limit)
        if code == MESH:
            mesh_tri, mesh_col = extra, len(order)
        if code == HFIELD:
            hf_n, hf_col = extra, len(order)
        ts.append(jnp.where(vis[idx][:, None], t, jnp.inf))
        order.extend(ids)
    if not ts:
        return (jnp.full((nray,), jnp.inf, dtype), jnp.zeros((nray,), jnp.int32),
                jnp.zeros((3, nray), dtype), np.full(1, -1, np.int32))
    order = np.asarray(order, np.int32)
    allt = _once(jnp.concatenate(ts, axis=0))                           # (ngeom, R), type order
    k = jnp.argmin(allt, axis=0).astype(jnp.int32)
    dist = jnp.min(allt, axis=0)
    dist = _once(jnp.where(dist <= max_range, dist, jnp.inf))
    hit = jnp.isfinite(dist)
    # the winner's pose, size and type, picked per ray; its normal in its frame, then the world's
    table = jnp.concatenate([xpos[order].T, xmat[order].reshape(-1, 9).T, size[order].T], axis=0)
    w = _once(pick(k, table))                                           # (15, R)
    pos, Rw, sz = w[0:3], w[3:12], w[12:15]
    tf = jnp.where(hit, dist, 0.0)
    pw = [oT[i] + tf * dT[i] - pos[i] for i in range(3)]
    pl = [sum(pw[i] * Rw[3 * i + j] for i in range(3)) for j in range(3)]
    codes = sorted({c for c, _ in scene.type_ids})
    gtype = pick(k, np.asarray(scene.geom_type, np.int32)[order][None])[0] if len(codes) > 1 else None
    nl = None
    for code in codes:
        if code == MESH:
            tri = _pick_rows(jnp.clip(k - mesh_col, 0, mesh_tri.shape[0] - 1), mesh_tri[:, None])[0]
            tn = jnp.asarray(scene.bvh_tri_normal, dtype)[jnp.clip(tri, 0)]
            n = [tn[:, i] for i in range(3)]
        elif code == HFIELD:
            hn = _pick_rows(jnp.clip(k - hf_col, 0, hf_n.shape[0] - 1), hf_n)
            n = [hn[i] for i in range(3)]
        else:
            n = local_normal(code, pl, sz)
        nl = n if nl is None else [jnp.where(gtype == code, n[i], nl[i]) for i in range(3)]
    normal = jnp.stack([sum(Rw[3 * i + j] * nl[j] for j in range(3)) for i in range(3)])
    normal = jnp.where(hit[None], normal, 0.0)
    return dist, k, normal, order


def cast_rays(scene: RayScene, geom_xpos, geom_xmat, origins, dirs, *, max_range=jnp.inf,
              exclude_body=-1, geomgroup=None) -> Hits:
    """Nearest hit of each ray. ``geom_xpos`` (ngeom, 3), ``geom_xmat`` (ngeom, 3, 3) or (ngeom, 9):
    geom poses in the world; ``origins`` (R, 3) or (3,) and ``dirs`` (R, 3), world frame.
    ``exclude_body``: body id whose geoms are ignored (-1: none; may be traced); ``geomgroup``:
    None or 6 flags. Returns :class:`Hits` with R rays."""
    dist, k, normal, order = _cast(scene, geom_xpos, geom_xmat, origins, dirs, max_range, exclude_body,
                                   geomgroup)
    geom = jnp.where(jnp.isfinite(dist), pick(k, order[None])[0], -1).astype(jnp.int32)
    return Hits(dist, geom, normal.T)


def _cast_hfields(scene, idx, lo, ld, dtype, t_limit):
    """Height-field geoms ``idx``: local rays (lists of 3 arrays (G, R)) -> (t (G, R), local normals
    (G, 3, R)); each field is walked up to ``t_limit`` (R,) (:mod:`caliper_jax.rays.hfield`)."""
    layout = {g[0]: g for g in scene.hfield_geoms}
    cells = jnp.asarray(scene.hfield_cells, dtype)
    planes = jnp.asarray(scene.hfield_planes, dtype)
    ts, ns = [], []
    for row, gid in enumerate(np.asarray(idx).tolist()):
        _, k, nrow, ncol, cadr, padr, loff, lnx = layout[gid]
        nc, npl = (nrow - 1) * (ncol - 1), loff[-1] + 1
        t, n = _hfield.ray_hfield([a[row] for a in lo], [a[row] for a in ld],
                                  jnp.asarray(scene.hfield_size[k], dtype), cells[cadr:cadr + nc],
                                  planes[padr:padr + npl], jnp.asarray(scene.hfield_slope[k], dtype),
                                  nrow=nrow, ncol=ncol, level_offset=loff, level_nx=lnx, t_limit=t_limit)
        ts.append(t)
        ns.append(jnp.stack(n))
    return jnp.stack(ts), jnp.stack(ns)


def _cast_meshes(scene, idx, lo, ld, dtype):
    """Mesh geoms ``idx``: local rays (G, R, 3) -> (t (G, R), global triangle id (G, R))."""
    arrays = scene.bvh_arrays(dtype)
    roots = jnp.asarray(scene.geom_mesh)[idx]
    ng, nr = lo.shape[:2]
    walk = jax.vmap(lambda r, o, d: _mesh.ray_bvh(arrays, r, o, d, scene.bvh_stack))
    _, tri = walk(jnp.broadcast_to(roots[:, None], (ng, nr)).reshape(-1),
                  jax.lax.stop_gradient(lo).reshape(-1, 3), jax.lax.stop_gradient(ld).reshape(-1, 3))
    tri = tri.reshape(ng, nr)
    # the walk is not differentiable (while_loop); recompute t on the found triangle
    t = _mesh.ray_triangles(lo, ld, arrays["tri"][jnp.clip(tri, 0)])
    return jnp.where(tri >= 0, t, jnp.inf), tri
