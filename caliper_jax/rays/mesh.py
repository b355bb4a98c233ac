"""Triangle meshes: a bounding volume hierarchy built on the host (NumPy), traversed in JAX.

``build_bvh`` sorts a mesh's triangles into a binary tree of axis-aligned boxes (median split of
the triangle centroids along the box's longest axis, at most ``LEAF`` triangles per leaf) and
flattens it depth first. Several meshes are concatenated into one :class:`BVH` (node and triangle
indices are global; ``roots`` holds each mesh's root node). ``ray_bvh`` walks one mesh's tree for
one ray with a fixed-size stack in ``lax.while_loop`` (vmap it over rays and geoms) and returns
the nearest two-sided triangle crossing, as MuJoCo's ``mj_ray`` does for mesh geoms (it intersects
the mesh's triangles, not its convex hull: checked in MuJoCo 3.17 on a concave mesh).
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.rays.primitives import MINVAL

#: most triangles in one leaf
LEAF = 4


@dataclass(frozen=True)
class BVH:
    """Flattened trees of one or more meshes (host NumPy arrays).

    ``node_lo``/``node_hi`` (N, 3) boxes; ``node_left``/``node_right`` (N,) children (-1 at a
    leaf); ``node_start``/``node_count`` (N,) the leaf's triangle range; ``tri`` (T + LEAF, 3, 3)
    triangle vertices in leaf order (padded), ``tri_normal`` (T + LEAF, 3) unit face normals
    ((v1 - v0) x (v2 - v0)); ``roots`` one root node per mesh; ``depth`` the deepest leaf."""

    node_lo: np.ndarray
    node_hi: np.ndarray
    node_left: np.ndarray
    node_right: np.ndarray
    node_start: np.ndarray
    node_count: np.ndarray
    tri: np.ndarray
    tri_normal: np.ndarray
    roots: tuple
    depth: int


def _build_one(tri: np.ndarray, node_base: int, tri_base: int):
    """Depth-first flattened tree of one mesh; returns node rows and the triangle order."""
    cent = tri.mean(axis=1)
    nodes = []          # [lo, hi, left, right, start, count]
    order = []
    depth = [0]

    def rec(idx, level):
        me = len(nodes)
        lo = tri[idx].reshape(-1, 3).min(0)
        hi = tri[idx].reshape(-1, 3).max(0)
        nodes.append([lo, hi, -1, -1, 0, 0])
        depth[0] = max(depth[0], level)
        if len(idx) <= LEAF:
            nodes[me][4] = tri_base + len(order)
            nodes[me][5] = len(idx)
            order.extend(idx.tolist())
            return me
        c = cent[idx]
        axis = int(np.argmax(c.max(0) - c.min(0)))
        srt = idx[np.argsort(c[:, axis], kind="stable")]
        half = len(srt) // 2
        nodes[me][2] = node_base + rec(srt[:half], level + 1)
        nodes[me][3] = node_base + rec(srt[half:], level + 1)
        return me

    rec(np.arange(len(tri)), 0)
    return nodes, order, depth[0]


def build_bvh(meshes) -> BVH:
    """One BVH over a list of meshes, each ``(vertices (V, 3), faces (F, 3) int)`` in its geom frame."""
    rows, tris, roots, depth = [], [], [], 0
    for vert, face in meshes:
        vert = np.asarray(vert, dtype=np.float64).reshape(-1, 3)
        face = np.asarray(face, dtype=np.int64).reshape(-1, 3)
        t = vert[face]
        roots.append(len(rows))
        nodes, order, dep = _build_one(t, len(rows), sum(len(x) for x in tris))
        rows.extend(nodes)
        tris.append(t[np.asarray(order, dtype=np.int64)])
        depth = max(depth, dep)
    tri = np.concatenate(tris + [np.zeros((LEAF, 3, 3))], axis=0) if tris else np.zeros((LEAF, 3, 3))
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    norm = np.linalg.norm(n, axis=-1, keepdims=True)
    n = np.where(norm > 0, n / np.where(norm > 0, norm, 1.0), 0.0)
    if not rows:
        rows = [[np.zeros(3), np.zeros(3), -1, -1, 0, 0]]
    return BVH(node_lo=np.array([r[0] for r in rows]), node_hi=np.array([r[1] for r in rows]),
               node_left=np.array([r[2] for r in rows], np.int32),
               node_right=np.array([r[3] for r in rows], np.int32),
               node_start=np.array([r[4] for r in rows], np.int32),
               node_count=np.array([r[5] for r in rows], np.int32),
               tri=tri, tri_normal=n, roots=tuple(roots), depth=depth)


def ray_triangles(o, d, tri):
    """Two-sided ray-triangle crossings (Moller-Trumbore). ``o``, ``d`` (..., 3), ``tri``
    (..., 3, 3) broadcast; returns ``t`` (...), inf on a miss or behind the origin."""
    v0, v1, v2 = tri[..., 0, :], tri[..., 1, :], tri[..., 2, :]
    e1, e2 = v1 - v0, v2 - v0
    p = jnp.cross(d, e2)
    det = jnp.sum(e1 * p, -1)
    ok = jnp.abs(det) > MINVAL
    inv = jnp.where(ok, 1.0 / jnp.where(ok, det, 1.0), 0.0)
    s = o - v0
    u = jnp.sum(s * p, -1) * inv
    q = jnp.cross(s, e1)
    v = jnp.sum(d * q, -1) * inv
    t = jnp.sum(e2 * q, -1) * inv
    hit = ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t >= 0)
    return jnp.where(hit, t, jnp.inf)


def _slab(o, inv_d, lo, hi):
    """Entry parameter of the ray into box [lo, hi] (inf when it misses or lies behind)."""
    t0 = (lo - o) * inv_d
    t1 = (hi - o) * inv_d
    tmin = jnp.max(jnp.nan_to_num(jnp.minimum(t0, t1), nan=-jnp.inf), -1)
    tmax = jnp.min(jnp.nan_to_num(jnp.maximum(t0, t1), nan=jnp.inf), -1)
    hit = (tmax >= jnp.maximum(tmin, 0.0))
    return jnp.where(hit, jnp.maximum(tmin, 0.0), jnp.inf)


def ray_bvh(bvh_arrays, root, o, d, stack_size: int):
    """Nearest crossing of one ray (local ``o``, ``d`` (3,)) with the mesh whose root node is
    ``root``. ``bvh_arrays``: dict of the :class:`BVH` arrays as JAX arrays. Returns ``(t, tri)``:
    distance (inf on a miss) and the global triangle index (-1 on a miss)."""
    a = bvh_arrays
    # a zero component gives +-inf slabs (the NaN of 0 * inf is mapped away in _slab)
    inv_d = 1.0 / d
    stack = jnp.zeros((stack_size,), jnp.int32).at[0].set(root)
    leaf_k = jnp.arange(LEAF, dtype=jnp.int32)

    def cond(c):
        return c[1] > 0

    def body(c):
        stk, sp, best, best_tri = c
        sp = sp - 1
        node = stk[sp]
        enter = _slab(o, inv_d, a["node_lo"][node], a["node_hi"][node])
        visit = enter <= best
        left = a["node_left"][node]
        leaf = left < 0
        # leaf: test its triangles
        ids = a["node_start"][node] + leaf_k
        ts = ray_triangles(o, d, a["tri"][ids])
        ts = jnp.where((leaf_k < a["node_count"][node]) & visit & leaf, ts, jnp.inf)
        k = jnp.argmin(ts).astype(jnp.int32)
        better = ts[k] < best
        best = jnp.where(better, ts[k], best)
        best_tri = jnp.where(better, ids[k], best_tri).astype(jnp.int32)
        # inner node: push both children
        push = visit & ~leaf
        stk = jnp.where(push, stk.at[sp].set(a["node_right"][node]).at[sp + 1].set(left), stk)
        sp = jnp.where(push, sp + 2, sp)
        return stk, sp, best, best_tri

    init = (stack, jnp.int32(1), jnp.asarray(jnp.inf, o.dtype), jnp.int32(-1))
    _, _, best, best_tri = jax.lax.while_loop(cond, body, init)
    return best, best_tri


def stack_size(bvh: BVH) -> int:
    """Stack entries a depth-first walk needs: one sibling per level plus the current pair."""
    return bvh.depth + 2
