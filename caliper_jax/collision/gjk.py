"""GJK distance and EPA penetration depth between two convex cores (pure JAX, fixed shapes).

Both work on the Minkowski difference C = A - B through its support function
``sup(d) -> (s_A(d) - s_B(-d), s_A(d), s_B(-d))``. The signed distance of A and B is
``-min_{|n|=1} h_C(n)`` (``h_C`` the support function of C): GJK finds it when the cores are
apart (the closest point of C to the origin), EPA when they overlap (the face of C nearest to the
origin). The minimising ``n`` is the unit normal pointing from A to B in both cases.

These solvers are *not* differentiated: callers feed them stop-gradient shapes and
differentiate the certificate ``n . (b - a)`` instead (see :mod:`caliper_jax.collision.pairs`).
Loops are ``lax.while_loop`` with static iteration caps, so they vmap and jit with fixed
shapes: under ``vmap`` a batch runs until its slowest member converges.

* GJK keeps a simplex of up to four support points in fixed slots. The closest point of a
  simplex to the origin is found branch-free: all 15 faces (4 vertices, 6 edges, 4 triangles, the
  tetrahedron) are projected, those with strictly positive barycentric coordinates are
  feasible, and the feasible projection of smallest norm wins (the closest point lies in the
  relative interior of exactly such a face). Stops when the duality gap
  ``|v| - v.w/|v|`` falls below a relative tolerance, or early once the lower bound on the
  distance exceeds ``stop_above`` (used for yes/no checks).
* EPA grows a triangulated polytope inside C from GJK's final simplex (a tetrahedron, or a
  bipyramid over a triangle when GJK stopped on a lower-dimensional face). Each step takes the
  face nearest the origin, adds the support point along its normal, removes the faces that
  point can see and re-triangulates the horizon. Horizon edges are the directed edges of
  visible faces whose reverse is not an edge of a visible face, found with a fixed
  (nvert x nvert) edge table; new faces go into free slots (a closed triangulation with V
  vertices has 2V - 4 faces, so the buffers never overflow).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.spatial import cross

#: Default iteration caps. Polytopes converge in a few dozen EPA steps; curved cores (cylinders,
#: spheres and capsules met through GJK/EPA) converge about linearly and need more for 1e-6.
GJK_ITERATIONS = 64
EPA_ITERATIONS = 128

_PAIRS = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))
_TRIPLES = ((0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3))


def tolerances(dtype):
    """(relative duality-gap tolerance, machine epsilon) for a float dtype."""
    eps = jnp.finfo(dtype).eps
    return float(eps) ** 0.5 * 1e-2, float(eps)


_PI = np.array(_PAIRS)
_TI = np.array(_TRIPLES)


def _closest_on_simplex(W, active):
    """Closest point to the origin of conv(W[active]): (point (3,), barycentric (4,), full).

    Every face is handled at once: vertices (4), edges (6), triangles (4), the tetrahedron."""
    dt = W.dtype
    _, eps = tolerances(dt)
    onehot = jnp.eye(4, dtype=dt)
    dot = lambda x, y: jnp.sum(x * y, -1)
    # edges
    a, b = W[_PI[:, 0]], W[_PI[:, 1]]
    e = b - a
    ee = dot(e, e)
    good = ee > 64 * eps * (dot(a, a) + dot(b, b))
    t = -dot(a, e) / jnp.where(good, ee, 1.0)
    p2 = a + t[:, None] * e
    l2 = (1 - t)[:, None] * onehot[_PI[:, 0]] + t[:, None] * onehot[_PI[:, 1]]
    ok2 = active[_PI[:, 0]] & active[_PI[:, 1]] & good & (t > 0) & (t < 1)
    # triangles
    a, b, c = W[_TI[:, 0]], W[_TI[:, 1]], W[_TI[:, 2]]
    e1, e2 = b - a, c - a
    g11, g12, g22 = dot(e1, e1), dot(e1, e2), dot(e2, e2)
    r1, r2 = -dot(a, e1), -dot(a, e2)
    det = g11 * g22 - g12 * g12
    good = det > 256 * eps * g11 * g22
    inv = 1.0 / jnp.where(good, det, 1.0)
    s = (r1 * g22 - r2 * g12) * inv
    t = (g11 * r2 - g12 * r1) * inv
    p3 = a + s[:, None] * e1 + t[:, None] * e2
    l3 = ((1 - s - t)[:, None] * onehot[_TI[:, 0]] + s[:, None] * onehot[_TI[:, 1]]
          + t[:, None] * onehot[_TI[:, 2]])
    ok3 = (active[_TI[:, 0]] & active[_TI[:, 1]] & active[_TI[:, 2]] & good & (s > 0) & (t > 0)
           & (1 - s - t > 0))
    # tetrahedron
    a = W[0]
    e1, e2, e3 = W[1] - a, W[2] - a, W[3] - a
    c23 = cross(e2, e3)
    det = e1 @ c23
    scale = jnp.sqrt((e1 @ e1) * (e2 @ e2) * (e3 @ e3))
    good = jnp.abs(det) > 256 * eps * scale
    inv = 1.0 / jnp.where(good, det, 1.0)
    m = jnp.stack([-(a @ c23), -(e1 @ cross(a, e3)), -(e1 @ cross(e2, a))]) * inv
    l4 = jnp.concatenate([1 - jnp.sum(m, keepdims=True), m])
    ok4 = jnp.all(active) & good & jnp.all(l4 > 0)
    P = jnp.concatenate([W, p2, p3, jnp.zeros((1, 3), dt)])
    L = jnp.concatenate([onehot, l2, l3, l4[None]])
    OK = jnp.concatenate([active, ok2, ok3, ok4[None]])
    n2 = jnp.where(OK, dot(P, P), jnp.inf)
    k = jnp.argmin(n2)
    return P[k], L[k], k == 14


class GJKResult(NamedTuple):
    v: jnp.ndarray          # closest point of C to the origin found (|v| bounds the distance above)
    a: jnp.ndarray          # witness on core A (v = a - b)
    b: jnp.ndarray          # witness on core B
    lower: jnp.ndarray      # lower bound on the core distance
    intersect: jnp.ndarray  # True: the origin is in C (cores overlap or touch)
    W: jnp.ndarray          # final simplex (4, 3) and its A/B support points
    WA: jnp.ndarray
    WB: jnp.ndarray
    active: jnp.ndarray     # (4,) slots in use
    direction: jnp.ndarray  # last search direction
    iterations: jnp.ndarray


def gjk(sup, d0, *, max_iter: int = GJK_ITERATIONS, stop_above=None) -> GJKResult:
    """Distance between two convex cores given the Minkowski-difference support ``sup``.

    ``d0``: first search direction (e.g. from A's centre to B's). ``stop_above`` (>= 0) ends
    the search as soon as the distance is proven to exceed it (the result is then only a
    bound: ``lower > stop_above``).
    """
    dt = d0.dtype
    tol, eps = tolerances(dt)
    d0 = jnp.where(d0 @ d0 > 0, d0, jnp.array([1.0, 0.0, 0.0], dt))
    w0, a0, b0 = sup(d0)
    W = jnp.broadcast_to(w0, (4, 3))
    WA = jnp.broadcast_to(a0, (4, 3))
    WB = jnp.broadcast_to(b0, (4, 3))
    active = jnp.array([True, False, False, False])
    lam = jnp.array([1.0, 0.0, 0.0, 0.0], dt)
    zero = jnp.zeros((), dt)
    state = (W, WA, WB, active, lam, w0, d0, zero, jnp.array(0), jnp.array(False), jnp.array(False))

    def cond(s):
        return (~s[9]) & (s[8] < max_iter)

    def body(s):
        W, WA, WB, active, lam, v, _, lower, it, _, _ = s
        d = -v
        w, a, b = sup(d)
        vv, vw = v @ v, v @ w
        scale2 = jnp.max(jnp.where(active, jnp.sum(W * W, -1), 0.0))
        floor2 = 64 * eps * scale2
        converged = vv - vw <= tol * jnp.maximum(vv, floor2)
        lower_new = jnp.maximum(lower, jnp.where(vv > 0, vw / jnp.sqrt(jnp.where(vv > 0, vv, 1.0)), 0.0))
        stop = converged
        if stop_above is not None:
            stop = stop | (lower_new > stop_above)
        slot = jnp.argmin(active)
        W2, WA2, WB2 = W.at[slot].set(w), WA.at[slot].set(a), WB.at[slot].set(b)
        act2 = active.at[slot].set(True)
        v2, lam2, full = _closest_on_simplex(W2, act2)
        hit = full | (v2 @ v2 <= (64 * eps) ** 2 * jnp.maximum(scale2, w @ w))
        keep = act2 & (lam2 > 0)
        # no progress (numerically degenerate faces): the current point is as good as it gets
        stalled = (~hit) & (v2 @ v2 >= vv)
        stop = stop | stalled
        pick = lambda old, new: jnp.where(stop, old, new)
        return (pick(W, W2), pick(WA, WA2), pick(WB, WB2), pick(active, keep), pick(lam, lam2),
                pick(v, v2), d, lower_new, it + 1, stop | hit, (~stop) & hit)

    W, WA, WB, active, lam, v, direction, lower, it, _, hit = jax.lax.while_loop(cond, body, state)
    lam = jnp.where(active, lam, 0.0)
    a = lam @ WA
    b = lam @ WB
    return GJKResult(a - b, a, b, jnp.where(hit, 0.0, lower), hit, W, WA, WB, active, direction, it)


def _face_geometry(V, F, valid, tiny):
    v0, v1, v2 = V[F[:, 0]], V[F[:, 1]], V[F[:, 2]]
    nraw = cross(v1 - v0, v2 - v0)
    l2 = jnp.sum(nraw * nraw, -1)
    ok = valid & (l2 > tiny)
    n = nraw / jnp.sqrt(jnp.where(ok, l2, 1.0))[:, None]
    d = jnp.where(ok, jnp.sum(n * v0, -1), jnp.inf)
    return n, d, ok


def _orient(V, faces, centroid):
    """Flip faces (k, 3) so their normals point away from ``centroid``."""
    v0, v1, v2 = V[faces[:, 0]], V[faces[:, 1]], V[faces[:, 2]]
    out = jnp.sum(cross(v1 - v0, v2 - v0) * (v0 - centroid), -1) >= 0
    return jnp.where(out[:, None], faces, faces[:, jnp.array([0, 2, 1])])


class EPAResult(NamedTuple):
    depth: jnp.ndarray    # penetration depth of the cores (>= 0)
    normal: jnp.ndarray   # unit normal from A to B
    a: jnp.ndarray        # witness on core A
    b: jnp.ndarray        # witness on core B (a - b = depth * normal)
    iterations: jnp.ndarray


def epa(sup, g: GJKResult, *, iterations: int = EPA_ITERATIONS) -> EPAResult:
    """Penetration depth of overlapping cores, continuing from a GJK result with
    ``g.intersect``; lanes without an intersection return depth 0 immediately."""
    dt = g.W.dtype
    tol, eps = tolerances(dt)
    nV = 5 + iterations
    nF = 2 * nV - 4
    order = jnp.argsort(~g.active, stable=True)
    P, PA, PB = g.W[order], g.WA[order], g.WB[order]
    cnt = jnp.sum(g.active)
    scale2 = jnp.max(jnp.sum(P * P, -1))
    # a triangle through the origin's face, completed by supports when GJK stopped on an edge
    e = P[1] - P[0]
    axis = jnp.eye(3, dtype=dt)[jnp.argmin(jnp.abs(e))]
    u = cross(e, axis)
    c, ca, cb = sup(u)
    tri = jnp.where(cnt >= 3, P[2], c)
    tri_a = jnp.where(cnt >= 3, PA[2], ca)
    tri_b = jnp.where(cnt >= 3, PB[2], cb)
    nrm = cross(P[1] - P[0], tri - P[0])
    nn = nrm @ nrm
    degenerate = (cnt <= 1) | ((cnt <= 3) & (nn <= 64 * eps * scale2 * scale2))
    d_up, ua, ub = sup(nrm)
    d_dn, da, db = sup(-nrm)
    bip = jnp.stack([P[0], P[1], tri, d_up, d_dn])
    bip_a = jnp.stack([PA[0], PA[1], tri_a, ua, da])
    bip_b = jnp.stack([PB[0], PB[1], tri_b, ub, db])
    tet = jnp.concatenate([P, P[3:4]])
    tet_a = jnp.concatenate([PA, PA[3:4]])
    tet_b = jnp.concatenate([PB, PB[3:4]])
    is_tet = cnt == 4
    V0 = jnp.where(is_tet, tet, bip)
    VA0 = jnp.where(is_tet, tet_a, bip_a)
    VB0 = jnp.where(is_tet, tet_b, bip_b)
    tet_faces = jnp.array([[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3], [0, 0, 0], [0, 0, 0]])
    bip_faces = jnp.array([[0, 1, 3], [1, 2, 3], [2, 0, 3], [0, 1, 4], [1, 2, 4], [2, 0, 4]])
    centroid = jnp.where(is_tet, jnp.mean(tet[:4], 0), jnp.mean(bip, 0))
    F0 = jnp.where(is_tet, _orient(V0, tet_faces, centroid), _orient(V0, bip_faces, centroid))
    valid0 = jnp.where(is_tet, jnp.array([True] * 4 + [False] * 2), jnp.ones(6, bool))
    V = jnp.zeros((nV, 3), dt).at[:5].set(V0)
    VA = jnp.zeros((nV, 3), dt).at[:5].set(VA0)
    VB = jnp.zeros((nV, 3), dt).at[:5].set(VB0)
    F = jnp.zeros((nF, 3), jnp.int32).at[:6].set(F0.astype(jnp.int32))
    valid = jnp.zeros(nF, bool).at[:6].set(valid0)
    tiny = (64 * eps) ** 2 * scale2 * scale2
    floor = 1e-3 * jnp.sqrt(scale2)
    done0 = (~g.intersect) | degenerate
    state = (V, VA, VB, F, valid, jnp.array(5), jnp.array(0), done0)

    def cond(s):
        return (~s[7]) & (s[6] < iterations)

    def body(s):
        V, VA, VB, F, valid, nv, it, _ = s
        n, d, ok = _face_geometry(V, F, valid, tiny)
        f = jnp.argmin(d)
        nf = n[f]
        w, a, b = sup(nf)
        gap = nf @ w - d[f]
        stop = (gap <= tol * jnp.maximum(d[f], floor)) | (nv >= nV) | ~jnp.isfinite(d[f])
        V2, VA2, VB2 = V.at[nv].set(w), VA.at[nv].set(a), VB.at[nv].set(b)
        vis = ok & (jnp.sum(n * (w - V[F[:, 0]]), -1) > tol * floor)
        vis = vis.at[f].set(True)
        src, dst = F, jnp.roll(F, -1, axis=1)
        marks = jnp.broadcast_to(vis[:, None], F.shape).astype(jnp.int8)
        E = jnp.zeros((nV, nV), jnp.int8).at[src, dst].max(marks)
        horizon = (vis[:, None] & (E[dst, src] == 0)).reshape(-1)
        kept = valid & ~vis
        free_slots = jnp.nonzero(~kept, size=nF, fill_value=nF)[0]
        rank = jnp.cumsum(horizon) - 1
        slot = jnp.where(horizon, free_slots[jnp.clip(rank, 0, nF - 1)], nF)
        newf = jnp.stack([src.reshape(-1), dst.reshape(-1), jnp.full(3 * nF, nv, jnp.int32)], -1)
        F2 = F.at[slot].set(newf, mode="drop")
        valid2 = kept.at[slot].set(True, mode="drop")
        overflow = jnp.sum(horizon) > jnp.sum(~kept)
        # The nearest face's distance is a lower bound that only grows. Once a support point is
        # (numerically) coplanar with faces near the nearest one, the horizon can come out wrong
        # and leave an inverted face: the new nearest distance drops. Keep the last good polytope.
        _, d2, _ = _face_geometry(V2, F2, valid2, tiny)
        regress = jnp.min(d2) < d[f] - tol * jnp.maximum(d[f], floor)
        stop = stop | overflow | regress
        pick = lambda old, new: jnp.where(stop, old, new)
        return (pick(V, V2), pick(VA, VA2), pick(VB, VB2), pick(F, F2), pick(valid, valid2),
                jnp.where(stop, nv, nv + 1), it + 1, stop)

    V, VA, VB, F, valid, _, it, _ = jax.lax.while_loop(cond, body, state)
    n, d, ok = _face_geometry(V, F, valid, tiny)
    f = jnp.argmin(d)
    depth, normal = d[f], n[f]
    # The nearest point of the boundary is p = depth * normal. It lies in the nearest facet, which
    # may be split into (nearly) coplanar triangles: among the triangles whose plane passes within
    # sqrt(eps) * scale of p, take the one containing p best (largest smallest barycentric weight).
    p = depth * normal
    v0, v1, v2 = V[F[:, 0]], V[F[:, 1]], V[F[:, 2]]
    e1, e2 = v1 - v0, v2 - v0
    ep = p[None] - v0
    dot = lambda x, y: jnp.sum(x * y, -1)
    d00, d01, d11, d20, d21 = dot(e1, e1), dot(e1, e2), dot(e2, e2), dot(ep, e1), dot(ep, e2)
    den = d00 * d11 - d01 * d01
    den = jnp.where(den > 0, den, 1.0)
    l1 = (d11 * d20 - d01 * d21) / den
    l2 = (d00 * d21 - d01 * d20) / den
    lam = jnp.stack([1 - l1 - l2, l1, l2], -1)
    near = ok & (jnp.abs(dot(n, p[None]) - d) <= eps ** 0.5 * jnp.sqrt(scale2))
    score = jnp.where(near, jnp.min(lam, -1), -jnp.inf)
    f = jnp.argmax(score)
    lam = jnp.clip(lam[f], 0.0, 1.0)
    lam = lam / jnp.sum(lam)
    idx = F[f]
    a = lam @ VA[idx]
    b = lam @ VB[idx]
    # (on curved cores the facets are slivers and the weights lose digits: witnesses there are
    # good to about 1e-4 of the shapes' size, while the depth keeps the solver's tolerance)
    # degenerate start (touching at a vertex / on a flat face): depth 0 along the last direction
    fallback = jnp.where(cnt <= 1, g.direction, u)
    gdir = fallback / jnp.sqrt(jnp.maximum(fallback @ fallback, jnp.finfo(dt).tiny))
    bad = degenerate | ~jnp.isfinite(depth) | ~g.intersect
    return EPAResult(jnp.where(bad, 0.0, depth), jnp.where(bad, gdir, normal),
                     jnp.where(bad, g.a, a), jnp.where(bad, g.b, b), it)
