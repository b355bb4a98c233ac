"""NumPy-in, NumPy-out collision queries, batched over any leading dimensions of ``q``.

The batched, jitted face of :mod:`caliper_jax.collision.query` (the pure-JAX core: one
configuration, differentiable). Everything here is built from the core's pieces -- collider poses,
the per-pair solver :func:`~caliper_jax.collision.pairs.solve` and the yes/no test
:func:`~caliper_jax.collision.query.pair_flag` -- arranged for throughput:

* exact signed distances (:func:`contacts`, :func:`distances`, :func:`check`) run in two stages so
  that the expensive EPA solver compiles once per process rather than once per robot: (1) per
  robot, a jit of ``vmap`` over configurations of poses, closed forms and GJK for every pair;
  (2) shared, EPA only on the convex pairs that GJK found overlapping, gathered on the host into
  lanes of one compiled shape;
* yes/no checks (:func:`collision_flags`, :func:`in_collision`) are GJK only, stopping as soon
  as a pair is proven clear; :func:`filtered_in_collision` first clears pairs with a
  conservative sphere cover (:class:`SphereFilter`) and runs GJK on the rest only;
* :func:`pairwise`: distances between loose posed colliders (the reference tests use it).

Configurations are processed in chunks of at most ``chunk`` (padded to a few size classes), so
memory stays bounded and a handful of shapes are compiled.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.collision import query
from caliper_jax.collision.pairs import solve
from caliper_jax.collision.scene import CollisionModel, assemble, colliders_of, pair_groups
from caliper_jax.collision.support import CODE, Shape
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model, default_dtype

CHUNK = 1024
#: Batch sizes compiled (smaller batches are padded up to the next one; larger ones are cut
#: into chunks of ``CHUNK``).
BUCKETS = (32, 256)
#: Lanes per EPA call (stage 2): one compiled shape.
EPA_LANES = 64
#: Lane counts compiled for the filtered GJK pass.
FLAG_LANES = (256, 1024, 4 * CHUNK)


def _bucket(n: int, chunk: int) -> int:
    for b in BUCKETS:
        if n <= b:
            return b
    return chunk


def _as_q(model: Model, q):
    arr = np.asarray(q, dtype=np.float64)
    if arr.ndim == 0 or arr.shape[-1] != model.nq:
        raise CaliperError(f"q: expected a trailing dimension of {model.nq} for {model.name!r}, "
                           f"got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise CaliperError("q: non-finite values")
    return arr


def _pad(rows: np.ndarray, size: int) -> np.ndarray:
    """``rows`` padded to ``size`` by repeating the last row."""
    m = rows.shape[0]
    return rows if m >= size else np.concatenate([rows, np.repeat(rows[-1:], size - m, axis=0)])


def _chunks(flat: np.ndarray, chunk: int, fixed: bool = False):
    """(start, padded block, real count) over the rows of ``flat``; ``fixed``: every block is
    padded to ``chunk`` (one compiled shape)."""
    for s in range(0, flat.shape[0], chunk):
        block = flat[s:s + chunk]
        m = block.shape[0]
        yield s, _pad(block, chunk if fixed else _bucket(m, chunk)), m


def _lane_blocks(lanes: np.ndarray, sizes):
    """(real rows, rows padded to the smallest of ``sizes`` that fits, else the largest)."""
    top = sizes[-1]
    for s in range(0, lanes.shape[0], top):
        part = lanes[s:s + top]
        yield part, _pad(part, next(b for b in sizes if b >= part.shape[0]))


class _Table:
    """Host copies of a CollisionModel's per-collider leaves, to gather posed :class:`Shape`
    lanes for any (pose, collider) list. Hull tables are padded to a power-of-two width (at least
    8) so that robots of similar hull sizes share compiled lane kernels."""

    def __init__(self, cm: CollisionModel):
        self.dtype = cm.R.dtype
        self.codes = np.array([CODE[k] for k in cm.kinds], dtype=np.int32)
        self.radius = np.asarray(cm.radius, dtype=np.float64)
        self.half = np.asarray(cm.half, dtype=np.float64)
        self.slots = np.asarray(cm.hull_slot, dtype=np.int64)
        table = np.asarray(cm.hull_verts, dtype=np.float64)
        width = max(8, 1 << (table.shape[1] - 1).bit_length())
        self.verts = np.concatenate([table, np.repeat(table[:, :1], width - table.shape[1], axis=1)], axis=1)

    def shapes(self, R, p, col) -> Shape:
        """Shapes of colliders ``col`` (m,) posed at ``R`` (m, 3, 3), ``p`` (m, 3)."""
        col = np.asarray(col, dtype=np.int64)
        slot = self.slots[col]
        verts = np.where((slot >= 0)[:, None, None], self.verts[np.maximum(slot, 0)], 0.0)
        dt = self.dtype
        return Shape(jnp.asarray(R, dt), jnp.asarray(p, dt), jnp.asarray(self.radius[col], dt),
                     jnp.asarray(self.half[col], dt), jnp.asarray(self.codes[col]), jnp.asarray(verts, dt))


@partial(jax.jit, static_argnames="kind_b")
def _witness_lanes(A: Shape, B: Shape, kind_b: str = "any"):
    return jax.vmap(lambda a, b: solve("any", kind_b, a, b))(A, B)


@partial(jax.jit, static_argnames="kind_b")
def _flag_lanes(A: Shape, B: Shape, margin, kind_b: str = "any"):
    return jax.vmap(lambda a, b: query.pair_flag("any", kind_b, a, b, margin))(A, B)


def _surface(n, a, b, ra, rb) -> dict:
    """Core witnesses -> the signed distance and surface witnesses (NumPy; as ``pairs.certify``)."""
    return {"distance": np.sum(n * (b - a), -1) - ra - rb, "normal": n,
            "point_a": a + ra[..., None] * n, "point_b": b - rb[..., None] * n}


# ---- exact signed distances ---------------------------------------------------------------------

def _stage1_one(model, cm, q):
    Rw, pw = query.collider_poses(model, cm, q)

    def run(ka, kb, A, B):
        return jax.vmap(lambda a, b: solve(ka, kb, a, b, depth=False))(A, B)

    w = query._grouped(model, cm, q, run)
    return w.normal, w.a, w.b, w.intersect, Rw, pw


_stage1 = jax.jit(jax.vmap(_stage1_one, in_axes=(None, None, 0)))


def _convex_mask(cm: CollisionModel) -> np.ndarray:
    mask = np.zeros(cm.npair, dtype=bool)
    for name, _, _, idx in pair_groups(cm.kinds, cm.pairs, cm.hull_slot):
        if name == "convex":
            mask[list(idx)] = True
    return mask


def _epa_fill(cm, table: _Table, n, a, b, hit, Rw, pw):
    """Replace GJK placeholders by EPA results for overlapping convex pairs (in place)."""
    lanes = np.argwhere(hit & _convex_mask(cm)[None, :])        # (configuration, pair) rows
    pairs = np.asarray(cm.pairs, dtype=np.int64).reshape(-1, 2)
    for part, rows in _lane_blocks(lanes, (EPA_LANES,)):
        c, k = rows[:, 0], rows[:, 1]
        ia, ib = pairs[k, 0], pairs[k, 1]
        w = _witness_lanes(table.shapes(Rw[c, ia], pw[c, ia], ia), table.shapes(Rw[c, ib], pw[c, ib], ib))
        m = part.shape[0]
        sel = (part[:, 0], part[:, 1])
        n[sel] = np.asarray(w.normal)[:m]
        a[sel] = np.asarray(w.a)[:m]
        b[sel] = np.asarray(w.b)[:m]


def contacts(model: Model, cm: CollisionModel, q, *, chunk: int = CHUNK, fixed: bool = False) -> dict:
    """Exact signed distances for every pair at ``q`` (..., nq): a dict of NumPy arrays
    ``distance`` (..., P), ``normal`` (..., P, 3) from the first collider to the second,
    ``point_a``/``point_b`` (..., P, 3) witness points on the two surfaces."""
    arr = _as_q(model, q)
    batch = arr.shape[:-1]
    flat = arr.reshape(-1, model.nq)
    P = cm.npair
    out = {k: np.zeros((flat.shape[0], P) + s) for k, s in
           (("distance", ()), ("normal", (3,)), ("point_a", (3,)), ("point_b", (3,)))}
    if P and flat.shape[0]:
        table = _Table(cm)
        pairs = np.asarray(cm.pairs, dtype=np.int64)
        ra, rb = table.radius[pairs[:, 0]], table.radius[pairs[:, 1]]
        for s, block, m in _chunks(flat, chunk, fixed):
            res = _stage1(model, cm, jnp.asarray(block, model.dtype))
            n, a, b, hit, Rw, pw = (np.array(x)[:m] for x in res)
            _epa_fill(cm, table, n, a, b, hit, Rw, pw)
            for key, val in _surface(n, a, b, ra, rb).items():
                out[key][s:s + m] = val
    return {k: v.reshape(batch + v.shape[1:]) for k, v in out.items()}


def distances(model: Model, cm: CollisionModel, q, **kw) -> np.ndarray:
    """Signed distance of every pair (..., P): > 0 apart, < 0 penetrating."""
    return contacts(model, cm, q, **kw)["distance"]


def pairwise(pairs, dtype=None) -> dict:
    """Exact signed distances between posed colliders (:class:`~caliper_jax.collision.Collider`
    placed in the world by their ``R``/``p``): ``pairs`` is a list of (A, B). Returns NumPy
    arrays ``distance`` (n,), ``normal`` (n, 3) from A to B, ``point_a``/``point_b`` (n, 3).
    The same compiled lane solver as stage 2 of :func:`contacts` (a half-space may be either
    member; two half-spaces are not supported)."""
    n = len(pairs)
    flips = np.zeros(n, dtype=bool)
    cols = []
    for k, (a, b) in enumerate(pairs):
        if a.kind == "halfspace" and b.kind == "halfspace":
            raise CaliperError(f"pairwise: pair {k} is half-space against half-space (not supported)")
        if a.kind == "halfspace":
            a, b = b, a
            flips[k] = True
        cols += [a, b]
    out = {k: np.zeros((n,) + s) for k, s in (("distance", ()), ("normal", (3,)), ("point_a", (3,)),
                                              ("point_b", (3,)))}
    if n:
        table = _Table(assemble(cols, 0, (), (), dtype=dtype or default_dtype()))
        R = np.stack([c.R for c in cols]).astype(np.float64)
        p = np.stack([c.p for c in cols]).astype(np.float64)
        to_half = np.array([b.kind == "halfspace" for b in cols[1::2]])
        for half in (False, True):
            for part, rows in _lane_blocks(np.flatnonzero(to_half == half), (EPA_LANES,)):
                ia, ib = 2 * rows, 2 * rows + 1
                w = _witness_lanes(table.shapes(R[ia], p[ia], ia), table.shapes(R[ib], p[ib], ib),
                                   kind_b="halfspace" if half else "any")
                m = part.shape[0]
                nrm, a, b = (np.asarray(x, dtype=np.float64)[:m] for x in (w.normal, w.a, w.b))
                res = _surface(nrm, a, b, table.radius[2 * part], table.radius[2 * part + 1])
                for key, val in res.items():
                    out[key][part] = val
    out["normal"][flips] *= -1
    out["point_a"][flips], out["point_b"][flips] = out["point_b"][flips], out["point_a"][flips].copy()
    return out


def check(model: Model, cm: CollisionModel, q, margin: float = 0.0) -> dict:
    """Report for one configuration: every pair's signed distance (closest first), the pairs in
    collision (distance < 0) or within ``margin``, the closest pair per link pair, and the
    uncovered links."""
    arr = _as_q(model, q)
    if arr.ndim != 1:
        raise CaliperError(f"q: expected one configuration of {model.nq} values, got shape {arr.shape}")
    if not (np.isfinite(margin) and margin >= 0):
        raise CaliperError(f"margin must be >= 0, got {margin!r}")
    c = contacts(model, cm, arr)
    order = np.argsort(c["distance"], kind="stable")
    rows = []
    for k in order:
        i, j = cm.pairs[k]
        rows.append({"a": cm.names[i], "b": cm.names[j], "kind": "self" if cm.pair_self[k] else "world",
                     "distance": float(c["distance"][k]), "normal": c["normal"][k].tolist(),
                     "point_a": c["point_a"][k].tolist(), "point_b": c["point_b"][k].tolist()})
    colliding = [r for r in rows if r["distance"] < 0]
    near = [r for r in rows if 0 <= r["distance"] < margin]
    seen, links = set(), []
    for r in rows:                      # closest geom pair per link pair, closest first
        key = (r["a"], r["b"], r["kind"])
        if key not in seen:
            seen.add(key)
            links.append({"a": r["a"], "b": r["b"], "kind": r["kind"], "distance": r["distance"]})
    return {
        "robot": model.name, "q": arr.tolist(),
        "in_collision": bool(colliding),
        "min_distance": rows[0]["distance"] if rows else None,
        "colliding": colliding, "near": near, "link_pairs": links, "pairs": rows,
        "self_pairs": int(sum(cm.pair_self)), "world_pairs": int(cm.npair - sum(cm.pair_self)),
        "obstacles": list(cm.obstacles),
        "uncovered": [u.to_dict() for u in cm.uncovered],
        "notes": list(cm.notes),
    }


# ---- yes/no checks ------------------------------------------------------------------------------

@jax.jit
def _flags(model, cm, qs, margin):
    return jax.vmap(lambda q: query.collision_flags(model, cm, q, margin))(qs)


def collision_flags(model: Model, cm: CollisionModel, q, margin: float = 0.0, *,
                    chunk: int = CHUNK, fixed: bool = False) -> np.ndarray:
    """Per pair, closer than ``margin`` (..., P) bool -- GJK only, the fast path. ``fixed``: pad
    every call to ``chunk`` configurations (a single compiled shape)."""
    arr = _as_q(model, q)
    batch = arr.shape[:-1]
    flat = arr.reshape(-1, model.nq)
    out = np.zeros((flat.shape[0], cm.npair), dtype=bool)
    if cm.npair and flat.shape[0]:
        for s, block, m in _chunks(flat, chunk, fixed):
            out[s:s + m] = np.asarray(_flags(model, cm, jnp.asarray(block, model.dtype),
                                             jnp.asarray(margin, model.dtype)))[:m]
    return out.reshape(batch + (cm.npair,))


def in_collision(model: Model, cm: CollisionModel, q, margin: float = 0.0, **kw) -> np.ndarray:
    """Any pair closer than ``margin`` (...,) bool."""
    return np.any(collision_flags(model, cm, q, margin, **kw), axis=-1)


class SphereFilter:
    """A conservative sphere cover of ``cm``'s robot colliders, paired like ``cm``: exact pair
    ``k`` is certainly farther apart than ``margin`` when every sphere pair in segment ``k`` is
    (the spheres contain the colliders). Built once on the host."""

    def __init__(self, cm: CollisionModel, max_per_collider: int = 8):
        from caliper_jax.collision.spheres import sphere_colliders

        cols = colliders_of(cm)
        spheres, fits = sphere_colliders(cols[:cm.n_robot], max_per_collider)
        obstacles = cols[cm.n_robot:]
        count = [f.count for f in fits] + [1] * len(obstacles)
        first = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(int)
        pairs, segment = [], []
        for k, (i, j) in enumerate(cm.pairs):
            a, b = (i, j) if i < cm.n_robot else (j, i)     # the robot member first: spheres are points
            for s in range(count[a]):
                for t in range(count[b]):
                    pairs.append((first[a] + s, first[b] + t))
                    segment.append(k)
        self.cm = cm
        self.spheres = assemble(spheres + obstacles, len(spheres), pairs, [cm.pair_self[k] for k in segment],
                                allowed=cm.allowed, uncovered=cm.uncovered, notes=cm.notes, dtype=cm.R.dtype)
        self.segment = np.asarray(segment, dtype=np.int64)
        self.starts = np.searchsorted(self.segment, np.arange(cm.npair))


@jax.jit
def _sphere_stage(model, cm, spheres, qs):
    def one(q):
        return query.sphere_distances(model, spheres, q), query.collider_poses(model, cm, q)
    return jax.vmap(one)(qs)


def filtered_in_collision(model: Model, filt: SphereFilter, qs, margin: float = 0.0, *, chunk: int = CHUNK,
                          fixed: bool = False) -> np.ndarray:
    """(n,) bool: any pair of ``filt.cm`` closer than ``margin`` -- the same answer as
    :func:`in_collision`, computed as a sphere-cover pass over every configuration followed by GJK
    only on the (configuration, pair) lanes the cover cannot clear, gathered on the host."""
    cm = filt.cm
    arr = _as_q(model, qs).reshape(-1, model.nq)
    out = np.zeros(arr.shape[0], dtype=bool)
    if not cm.npair or not arr.shape[0]:
        return out
    table = _Table(cm)
    pairs = np.asarray(cm.pairs, dtype=np.int64)
    to_half = np.array([cm.kinds[j] == "halfspace" for _, j in cm.pairs])
    mg = jnp.asarray(margin, cm.R.dtype)
    for s, block, m in _chunks(arr, chunk, fixed):
        d, (Rw, pw) = _sphere_stage(model, cm, filt.spheres, jnp.asarray(block, model.dtype))
        d, Rw, pw = np.asarray(d), np.asarray(Rw), np.asarray(pw)
        near = np.minimum.reduceat(d[:m], filt.starts, axis=1) <= margin          # (m, P)
        for half in (False, True):
            lanes = np.argwhere(near & (to_half[None, :] == half))
            for part, rows in _lane_blocks(lanes, FLAG_LANES):
                c, k = rows[:, 0], rows[:, 1]
                ia, ib = pairs[k, 0], pairs[k, 1]
                hit = np.asarray(_flag_lanes(table.shapes(Rw[c, ia], pw[c, ia], ia),
                                             table.shapes(Rw[c, ib], pw[c, ib], ib), mg,
                                             kind_b="halfspace" if half else "any"))[:part.shape[0]]
                out[s + part[hit, 0]] = True
    return out


__all__ = ["SphereFilter", "check", "collision_flags", "contacts", "distances", "filtered_in_collision",
           "in_collision", "pairwise"]
