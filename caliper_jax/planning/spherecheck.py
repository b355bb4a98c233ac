"""The planning collision checker: a robot of spheres against world primitives, one fused kernel.

:func:`planning_checker` turns a robot and a world of primitives into a :class:`PlanningChecker`
whose ``valid(params, qs)`` answers "inside the joint limits and collision-free" for a batch of
configurations ``qs`` (B, nq) -> (B,) bool. It is a pure JAX function (jittable, vmappable over
``params``, traceable inside ``lax.while_loop``): the robot's spheres, pair lists and kinematic
tables are closed over as constants; the world lives in :class:`CheckParams` (a pytree of arrays,
each obstacle kind padded to a capacity), so a moved, resized, added or removed obstacle -- up to
the capacity -- reuses the compiled code (:meth:`PlanningChecker.with_obstacles`).

**Robot as spheres, conservative.** Every collision geometry of the robot (mesh hulls, boxes,
cylinders, capsules; see :mod:`caliper_jax.collision.geometry`) is covered by spheres whose union
contains it: a mesh is inside its convex hull, and the hull is inside the union of the slab spheres
of :mod:`caliper_jax.collision.spheres`, or of the :func:`split_cover` (``split`` spheres from
recursive halving of the polytope; each piece is convex and its ball holds all its vertices) when
that reaches at least ``SPLIT_GAIN`` (5 mm) less far outside the collider (or less far with no
more spheres). Radii are padded by
``RADIUS_PAD`` (10 um) against float32 rounding of the kinematics. So a configuration the checker
calls valid is collision-free under the exact mesh checker (property-tested on panda and ur5). The
price is false alarms near obstacles: panda's moving links are covered to within 2.8-4.2 cm with
``split=4`` (the slab fit alone: 3.1-5.7 cm; the fixed base 5.7 cm); ``describe()`` lists the
sphere count and the largest excess per link. The fit is cached in memory per robot (name,
kinematic fingerprint, SRDF, ``max_per_collider``, ``split``) and, when jax's persistent
compilation cache is on, on disk beside it (``caliper_spheres/``): it takes seconds with mesh
loading (panda: about 5 s), most of a planner's first call once the compiles come from the cache.

**Pairs.** Self pairs are those :func:`~caliper_jax.collision.build_collision_model` checks (every
two colliders on different bodies minus tree adjacency and the SRDF's ``<disable_collisions>``),
expanded to all their sphere pairs; world pairs are every moving robot sphere against every
obstacle slot (spheres fixed to the world are not checked against obstacles: no motion changes
them).

**Kernel.** In the lane layout of :mod:`caliper_jax.lanes` (batch on the last axis, ``block``
lanes per block): body poses by the unrolled lane FK, sphere centres per body, then squared
distances compared with squared thresholds (no square roots): sphere-sphere
``|c_i - c_j|^2 < (r_i + r_j + m)^2``, sphere-box ``|max(|R^T (c - p)| - h, 0)|^2 < (r + m)^2``,
sphere-capsule (closest point on the segment), sphere-half-space ``n . c - d < r + m``; ``any``
over pairs. ``m`` is the margin (a traced leaf). Padded obstacle slots sit far away (1e6 m).

Formulation notes (``benchmarks/bench_plan_check.py`` measures them; panda, float32, a 2-core CPU
shared with other jobs, so the figures are noisy): the lane layout runs 2-3x faster than a ``vmap``
of the same kernel per configuration at batch 64 and 4096 (about 1.1-1.8e6 against 4-5e5
configurations/s at 4096), because every elementwise op runs over ``block`` contiguous values;
blocks of 128-512 lanes measured alike within the noise (256 kept). Gathering the self-pair
centres with constant indices keeps the work to the checked pairs (panda: 544 self sphere pairs
of 58 spheres). Early exit (``early_exit=True``: world pairs first, the self pairs under a
``lax.cond`` only when some lane is still clear) measured inside a jitted loop: batch 1 0.5x,
batch 8 1.3x, batch 64 0.9x the plain kernel -- not kept as the default (under ``vmap`` over
problems the cond becomes a select and does both anyway). At batch 1 a jitted call from Python
costs about 60-120 us, mostly dispatch; inside a jitted loop a batch-1 check is about 8 us. More
spheres fit tighter but cost quadratically in self pairs. Panda among the ``panda_problems``
obstacles, 2000 random configurations of which 22.4% collide under the exact meshes (coal):

==========  =======  ===========  =====================  ========================
``split``   spheres  self pairs   worst moving link (m)  sphere model: colliding
==========  =======  ===========  =====================  ========================
0 (slabs)   56       534          0.057                  33.9%
4 (default) 58       544          0.042                  29.3%
8           94       1472         0.037                  27.1% (about 1/3 the speed)
==========  =======  ===========  =====================  ========================
"""
from __future__ import annotations

import dataclasses
import hashlib
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax import lanes
from caliper_jax.collision.geometry import MAX_HULL_VERTICES, Collider
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model

#: Added to every robot sphere radius (m): covers float32 rounding of the kinematics.
RADIUS_PAD = 1e-5
#: Where empty obstacle slots are parked (m): farther than any robot reaches.
FAR = 1e6
#: Lanes per block of the lane kernel (measured on a 2-core CPU: see the module docstring).
BLOCK = 256
#: Spheres per polytope collider in the split cover (see :func:`split_cover`); 0 or 1: slab fit only.
SPLIT = 4
#: The split cover replaces the slab fit only when its excess is this much smaller (m): fewer
#: spheres for the small boxes (panda's fingers) the slab fit already covers within millimetres.
SPLIT_GAIN = 0.005
#: Obstacle kinds of the world, in CheckParams order, with the builder that makes each.
KINDS = {"point": "sphere", "segment": "capsule", "box": "box", "halfspace": "ground/halfspace"}


class CheckParams(NamedTuple):
    """The world of a :class:`PlanningChecker` (a pytree of arrays, world frame, metres).

    Each kind is padded to its capacity (empty slots parked at ``FAR``):
    spheres ``sphere_p`` (S, 3), ``sphere_r`` (S,); capsules ``capsule_p`` (C, 3) centre,
    ``capsule_a`` (C, 3) unit axis, ``capsule_h`` (C,) half length, ``capsule_r`` (C,);
    boxes ``box_R`` (X, 3, 3) (columns: the box axes in the world), ``box_p`` (X, 3),
    ``box_half`` (X, 3); half-spaces ``half_n`` (H, 3) unit outward normal, ``half_d`` (H,)
    offset (solid where ``n . x <= d``); ``margin`` () the clearance every pair must keep."""

    sphere_p: Any
    sphere_r: Any
    capsule_p: Any
    capsule_a: Any
    capsule_h: Any
    capsule_r: Any
    box_R: Any
    box_p: Any
    box_half: Any
    half_n: Any
    half_d: Any
    margin: Any


# ---- the robot's spheres (host side, cached) ---------------------------------------------------

@dataclasses.dataclass(frozen=True, eq=False)
class _RobotSpheres:
    body: np.ndarray          # (n,) body index per sphere, -1: fixed in the world
    centre: np.ndarray        # (n, 3) in the body frame (world frame when body -1)
    radius: np.ndarray        # (n,) padded radius
    link: tuple               # link name per sphere
    self_i: np.ndarray        # (P,) self sphere pairs
    self_j: np.ndarray
    fits: tuple               # SphereFit per collider
    uncovered: tuple
    notes: tuple
    self_pairs: int           # collider-level self pairs


_CACHE: dict = {}


def _edges(faces):
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    return np.unique(np.sort(e, axis=1), axis=0)


def _clip(verts, edges, normal, offset):
    """Vertices spanning conv(verts) cut to {x : normal . x <= offset}: the kept vertices and the
    crossings of the polytope's edges with the plane (a convex polytope cut by a plane is the hull
    of exactly these points)."""
    t = verts @ normal - offset
    a, b = edges[:, 0], edges[:, 1]
    e = edges[((t[a] < 0) != (t[b] < 0)) & (t[a] != t[b])]
    s = (t[e[:, 0]] / (t[e[:, 0]] - t[e[:, 1]]))[:, None]
    return np.concatenate([verts[t <= 0], verts[e[:, 0]] + s * (verts[e[:, 1]] - verts[e[:, 0]])])


def _ball(pts):
    """(centre, radius) of a ball holding every point: the better of the principal-frame
    bounding-box centre and Badoiu-Clarkson steps from it."""
    cen = pts - pts.mean(0)
    v = np.linalg.eigh(cen.T @ cen)[1]
    loc = pts @ v
    x = ((loc.min(0) + loc.max(0)) / 2) @ v.T
    best = (x, float(np.max(np.linalg.norm(pts - x, axis=1))))
    for i in range(1, 60):
        x = x + (pts[np.argmax(np.linalg.norm(pts - x, axis=1))] - x) / (i + 1)
        r = float(np.max(np.linalg.norm(pts - x, axis=1)))
        if r < best[1]:
            best = (x.copy(), r)
    return best


def split_cover(c: Collider, budget: int):
    """Cover a polytope collider (box, cylinder prism, hull) by ``budget`` spheres: start from one
    ball around the whole polytope and repeatedly cut the piece whose ball reaches farthest outside
    the collider in two across its principal axis (at the middle); each piece is a convex polytope
    and its ball holds all its vertices, hence the piece. Returns (centres, radii, excess)."""
    from caliper_jax.collision import spheres as S
    from caliper_jax.collision.geometry import convex_hull

    verts, faces = S._polytope(c)
    dirs = S._fibonacci(256)
    pieces = []

    def add(pts):
        ctr, r = _ball(pts)
        r = r * (1 + 1e-9) + 1e-12 + c.radius
        pieces.append([pts, ctr, r, float(S._outside(c, ctr + r * dirs, verts, faces).max()), True])

    add(verts)
    while len(pieces) < budget:
        live = [k for k, piece in enumerate(pieces) if piece[4]]
        if not live:
            break
        k = max(live, key=lambda k: pieces[k][3])
        try:
            hv, hf = convex_hull(pieces[k][0])
        except RuntimeError:             # a flat piece: keep its ball
            pieces[k][4] = False
            continue
        cen = hv - hv.mean(0)
        axis = np.linalg.eigh(cen.T @ cen)[1][:, -1]
        t = hv @ axis
        mid = (t.min() + t.max()) / 2
        ed = _edges(hf)
        pieces.pop(k)
        add(_clip(hv, ed, axis, mid))
        add(_clip(hv, ed, -axis, -mid))
    centres = np.array([piece[1] for piece in pieces])
    radii = np.array([piece[2] for piece in pieces])
    return centres, radii, S._excess(c, centres, radii, verts, faces)


def _fit(cols, max_per_collider: int, split: int):
    """Sphere colliders and SphereFits: per collider the slab fit of :mod:`~caliper_jax.collision.spheres`,
    or the :func:`split_cover` of ``split`` spheres when that reaches ``SPLIT_GAIN`` less far outside,
    or less far with no more spheres."""
    from caliper_jax.collision.spheres import SphereFit, fit_collider

    out, fits = [], []
    for c in cols:
        centres, radii, excess = fit_collider(c, max_per_collider)
        if split > 1 and c.kind in ("box", "cylinder", "hull"):
            alt = split_cover(c, split)
            if alt[2] < excess - SPLIT_GAIN or (alt[1].size <= radii.size and alt[2] < excess):
                centres, radii, excess = alt
        for ctr, r in zip(centres, radii, strict=True):
            out.append(Collider(c.name, c.body, "point", np.eye(3), c.R @ ctr + c.p, radius=float(r),
                                geom=c.geom))
        fits.append(SphereFit(c.name, c.kind, len(radii), float(excess)))
    return out, fits


def _fingerprint(model: Model) -> str:
    h = hashlib.sha1()
    h.update(repr((model.name, model.body_parent, model.jnt_type, model.nq)).encode())
    h.update(repr([g for g in model.geoms if getattr(g, "role", "collision") != "visual"]).encode())
    for leaf in (model.jnt_p, model.jnt_R, model.jnt_axis):
        h.update(np.ascontiguousarray(np.asarray(leaf, np.float64)).tobytes())
    return h.hexdigest()


def robot_spheres(model: Model, srdf=None, max_per_collider: int = 8, split: int = SPLIT,
                  disabled_pairs=()) -> _RobotSpheres:
    """The conservative sphere cover of ``model``'s collision geometry and its self sphere pairs
    (cached in memory per robot, SRDF, disabled pairs, ``max_per_collider`` and ``split``)."""
    from caliper_jax.collision.scene import build_collision_model

    disabled_pairs = tuple(sorted(tuple(sorted(map(str, p))) for p in disabled_pairs))
    key = (_fingerprint(model), None if srdf is None else str(Path(srdf).resolve()), disabled_pairs,
           int(max_per_collider), int(split))
    if key in _CACHE:
        return _CACHE[key]
    disk = _disk_path(key)
    hit = _disk_load(disk)
    if hit is not None:
        _CACHE[key] = hit
        return hit
    cm = build_collision_model(model, (), srdf=srdf, disabled_pairs=disabled_pairs,
                               max_hull_vertices=MAX_HULL_VERTICES)
    from caliper_jax.collision.scene import colliders_of

    cols = colliders_of(cm)
    spheres, fits = _fit(cols, max_per_collider, split)
    count = [f.count for f in fits]
    first = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(int)
    si, sj = [], []
    for (a, b), is_self in zip(cm.pairs, cm.pair_self, strict=True):
        if not is_self:
            continue
        for s in range(count[a]):
            for t in range(count[b]):
                si.append(first[a] + s)
                sj.append(first[b] + t)
    out = _RobotSpheres(
        body=np.array([s.body for s in spheres], dtype=np.int64),
        centre=np.array([s.p for s in spheres], dtype=np.float64).reshape(-1, 3),
        radius=np.array([s.radius for s in spheres], dtype=np.float64) + RADIUS_PAD,
        link=tuple(s.name for s in spheres),
        self_i=np.array(si, dtype=np.int64), self_j=np.array(sj, dtype=np.int64),
        fits=tuple(fits), uncovered=tuple(cm.uncovered), notes=tuple(cm.notes),
        self_pairs=int(sum(cm.pair_self)))
    _CACHE[key] = out
    _disk_store(disk, out)
    return out


#: Bump when the fit or _RobotSpheres changes: older files on disk are then ignored.
_DISK_VERSION = 1


def _disk_path(key) -> Path | None:
    """Where the fit for ``key`` persists: ``caliper_spheres/`` inside jax's persistent
    compilation cache directory when one is configured (``caliper`` enables it by default), so a
    warm cache skips the fit (seconds for a meshed robot) as it skips the compiles; else None."""
    folder = jax.config.jax_compilation_cache_dir
    if not folder or "://" in str(folder):
        return None
    digest = hashlib.sha1(repr((_DISK_VERSION, key)).encode()).hexdigest()
    return Path(folder) / "caliper_spheres" / f"{digest}.pkl"


def _disk_load(path: Path | None):
    if path is None or not path.is_file():
        return None
    import pickle

    try:
        with open(path, "rb") as f:
            out = pickle.load(f)          # written by _disk_store only, in the user's own cache
    except Exception:                     # a truncated or stale file: refit
        return None
    return out if isinstance(out, _RobotSpheres) else None


def _disk_store(path: Path | None, out: _RobotSpheres) -> None:
    """Atomic write (temp file + rename); an unwritable cache is no error."""
    if path is None:
        return
    import os
    import pickle

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass


# ---- the world ----------------------------------------------------------------------------------

def _capacities(obstacles, capacity) -> dict:
    counts = {k: 0 for k in KINDS}
    for o in obstacles:
        counts[o.kind] += 1
    if capacity is None:
        return counts
    if isinstance(capacity, (int, np.integer)):
        if capacity < 0:
            raise CaliperError(f"capacity must be >= 0, got {capacity}")
        caps = {k: max(int(capacity), counts[k]) for k in KINDS}
        return caps
    if isinstance(capacity, dict):
        names = {**{k: k for k in KINDS}, "sphere": "point", "capsule": "segment", "ground": "halfspace"}
        caps = dict(counts)
        for k, v in capacity.items():
            if k not in names:
                raise CaliperError(f"capacity: unknown obstacle kind {k!r} (sphere, capsule, box, halfspace)")
            if not isinstance(v, (int, np.integer)) or v < 0:
                raise CaliperError(f"capacity[{k!r}] must be an int >= 0, got {v!r}")
            caps[names[k]] = int(v)
        return caps
    raise CaliperError(f"capacity: expected None, an int or a dict kind -> int, got {capacity!r}")


def _check_obstacles(obstacles) -> list:
    obstacles = list(obstacles)
    for k, o in enumerate(obstacles):
        if not isinstance(o, Collider) or not o.obstacle:
            raise CaliperError(f"obstacles[{k}]: expected an obstacle from caliper_jax.collision (box, "
                               f"sphere, capsule, ground, halfspace), got {o!r}")
        if o.kind not in KINDS:
            raise CaliperError(f"obstacles[{k}] ({o.name!r}): kind {o.kind!r} is not supported by the "
                               f"planning checker (sphere, capsule, box, ground/halfspace)")
    return obstacles


def make_params(obstacles, caps: dict, margin: float, dtype) -> CheckParams:
    """CheckParams for ``obstacles`` padded to ``caps`` (kind -> capacity); CaliperError when a
    kind has more obstacles than its capacity."""
    obstacles = _check_obstacles(obstacles)
    if not (np.isfinite(margin) and margin >= 0):
        raise CaliperError(f"margin must be a finite number >= 0, got {margin!r}")
    by = {k: [o for o in obstacles if o.kind == k] for k in KINDS}
    for k, items in by.items():
        if len(items) > caps[k]:
            raise CaliperError(f"obstacles: {len(items)} {KINDS[k]} obstacle(s) but the checker's capacity "
                               f"for that kind is {caps[k]} (build the checker with a larger capacity=)")

    def fill(k, make, far, shape):
        rows = [make(o) for o in by[k]] + [far] * (caps[k] - len(by[k]))
        return np.array(rows, dtype=np.float64).reshape((caps[k],) + shape)

    eye = np.eye(3)
    arrays = dict(
        sphere_p=fill("point", lambda o: o.p, [FAR, FAR, FAR], (3,)),
        sphere_r=fill("point", lambda o: o.radius, 0.0, ()),
        capsule_p=fill("segment", lambda o: o.p, [FAR, FAR, FAR], (3,)),
        capsule_a=fill("segment", lambda o: o.R[:, 2], [0.0, 0.0, 1.0], (3,)),
        capsule_h=fill("segment", lambda o: o.half[2], 0.0, ()),
        capsule_r=fill("segment", lambda o: o.radius, 0.0, ()),
        box_R=fill("box", lambda o: o.R, eye, (3, 3)),
        box_p=fill("box", lambda o: o.p, [FAR, FAR, FAR], (3,)),
        box_half=fill("box", lambda o: o.half, [1.0, 1.0, 1.0], (3,)),
        half_n=fill("halfspace", lambda o: o.R[:, 2], [0.0, 0.0, 1.0], (3,)),
        half_d=fill("halfspace", lambda o: o.R[:, 2] @ o.p, -FAR, ()),
        margin=np.float64(margin),
    )
    return CheckParams(**{k: jax.device_put(np.asarray(v, dtype=dtype)) for k, v in arrays.items()})


# ---- the kernel ---------------------------------------------------------------------------------

def _centres(model: Model, rs: _RobotSpheres, q, dtype):
    """Sphere centres in the world for L configurations q (nq, L): (n, 3, L), in sphere order."""
    world = lanes._world_poses(model, q)                      # (nbody, 4, 3, L): R rows, origin
    L = q.shape[-1]
    parts, order = [], []
    for b in np.unique(rs.body):
        idx = np.flatnonzero(rs.body == b)
        local = jnp.asarray(rs.centre[idx], dtype)            # (m, 3)
        if b < 0:
            parts.append(jnp.broadcast_to(local[:, :, None], (idx.size, 3, L)))
        else:
            R, p = world[b, :3], world[b, 3]                  # (3, 3, L), (3, L)
            parts.append(sum(R[None, :, k, :] * local[:, k, None, None] for k in range(3)) + p[None])
        order.append(idx)
    c = jnp.concatenate(parts, axis=0)
    inv = np.argsort(np.concatenate(order))
    return c if np.array_equal(inv, np.arange(inv.size)) else c[inv]


def _sum3(x):
    return x[..., 0, :] + x[..., 1, :] + x[..., 2, :]


def _collides(model: Model, rs: _RobotSpheres, moving: np.ndarray, params: CheckParams, q,
              early_exit: bool = False):
    """(L,) bool: some checked sphere pair closer than the margin, for q (nq, L). World pairs
    first; ``early_exit``: the self pairs only when some lane is still clear (a ``lax.cond``)."""
    dt = params.margin.dtype
    m = params.margin
    c = _centres(model, rs, q, dt)                             # (n, 3, L)
    r = jnp.asarray(rs.radius, dt)
    world = _world_hits(c, r, moving, params, m)
    if not rs.self_i.size:
        return world

    def self_hits(_):
        d = c[rs.self_i] - c[rs.self_j]                         # (P, 3, L)
        thr = jnp.asarray(rs.radius[rs.self_i] + rs.radius[rs.self_j], dt) + m
        return world | jnp.any(_sum3(d * d) < (thr * thr)[:, None], axis=0)

    if early_exit:
        return jax.lax.cond(jnp.all(world), lambda _: world, self_hits, None)
    return self_hits(None)


def _world_hits(c, r, moving, params: CheckParams, m):
    """(L,) bool: a moving sphere closer than ``m`` to an obstacle; c (n, 3, L), r (n,)."""
    hits = []
    cm, rm = c[moving], r[moving]                               # moving spheres (n_m, 3, L), (n_m,)
    rmm = (rm + m)[:, None, None]                               # (n_m, 1, 1)
    if params.sphere_p.shape[0]:
        d = cm[:, None] - params.sphere_p[None, :, :, None]   # (n_m, S, 3, L)
        thr = rm[:, None] + params.sphere_r[None] + m
        hits.append(jnp.any(_sum3(d * d) < (thr * thr)[..., None], axis=(0, 1)))
    if params.capsule_p.shape[0]:
        rel = cm[:, None] - params.capsule_p[None, :, :, None]   # (n_m, C, 3, L)
        a = params.capsule_a[None, :, :, None]
        t = jnp.clip(_sum3(rel * a), -params.capsule_h[None, :, None], params.capsule_h[None, :, None])
        d = rel - t[:, :, None] * a
        thr = rm[:, None] + params.capsule_r[None] + m
        hits.append(jnp.any(_sum3(d * d) < (thr * thr)[..., None], axis=(0, 1)))
    if params.box_p.shape[0]:
        rel = cm[:, None] - params.box_p[None, :, :, None]     # (n_m, X, 3, L)
        R = params.box_R                                         # (X, 3, 3)
        out = 0.0
        for k in range(3):                                       # coordinate along the box's axis k
            u = _sum3(rel * R[None, :, :, k, None])
            g = jnp.maximum(jnp.abs(u) - params.box_half[None, :, k, None], 0.0)
            out = out + g * g
        hits.append(jnp.any(out < rmm * rmm, axis=(0, 1)))
    if params.half_n.shape[0]:
        h = _sum3(cm[:, None] * params.half_n[None, :, :, None]) - params.half_d[None, :, None]
        hits.append(jnp.any(h < rmm, axis=(0, 1)))
    if not hits:
        return jnp.zeros(c.shape[-1], bool)
    out = hits[0]
    for x in hits[1:]:
        out = out | x
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class PlanningChecker:
    """Validity of configurations for planning (see the module docstring). Build with
    :func:`planning_checker`."""

    model: Model
    nq: int
    lower: np.ndarray          # (nq,) joint limits
    upper: np.ndarray
    params: CheckParams
    spheres: _RobotSpheres = dataclasses.field(repr=False)
    capacity: dict = dataclasses.field(default_factory=dict)
    block: int = BLOCK
    early_exit: bool = False

    @cached_property
    def _moving(self) -> np.ndarray:
        return np.flatnonzero(self.spheres.body >= 0)

    def valid(self, params: CheckParams, qs):
        """(B,) bool for configurations ``qs`` (B, nq): inside the joint limits (inclusive) and
        no checked sphere pair closer than ``params.margin``. Pure JAX."""
        qs = jnp.asarray(qs)
        if qs.ndim != 2 or qs.shape[1] != self.nq:
            raise CaliperError(f"qs: expected shape (B, {self.nq}) for {self.model.name!r}, got {qs.shape}")
        dt = params.margin.dtype
        qs = qs.astype(dt)
        inside = jnp.all((qs >= jnp.asarray(self.lower, dt)) & (qs <= jnp.asarray(self.upper, dt)), axis=1)
        model, rs, moving, early = self.model, self.spheres, self._moving, self.early_exit
        if moving.size == 0:  # no geometry on a moving body (e.g. pendulum2): nothing can collide
            return inside

        def kernel(p, q):                                        # q (nq, L) -> (L,)
            return _collides(model, rs, moving, p, q, early)

        hit = _run(kernel, params, qs, self.block)
        return inside & ~hit

    def with_obstacles(self, obstacles, margin: float | None = None) -> CheckParams:
        """CheckParams of a new world with the same shapes (no recompile); ``margin`` defaults
        to the current one. CaliperError when a kind exceeds its capacity."""
        margin = float(self.params.margin) if margin is None else margin
        return make_params(obstacles, self.capacity, margin, self.params.margin.dtype)

    def program_key(self) -> tuple:
        """What :meth:`valid` closes over (the world is an argument): the key of its persisted
        executables (:mod:`caliper_jax.planning.aot`)."""
        return (self.model, self.nq, self.lower, self.upper, self.spheres, self.block, self.early_exit)

    @cached_property
    def _jitted(self):
        from caliper_jax.planning.aot import program

        return program("spherecheck.valid", self.valid, self.program_key)

    def valid_np(self, qs, params: CheckParams | None = None) -> np.ndarray:
        """NumPy convenience: ``qs`` (B, nq) or (nq,) -> (B,) or () bool (jitted per batch size)."""
        arr = np.asarray(qs, dtype=np.float64)
        if arr.ndim not in (1, 2) or arr.shape[-1] != self.nq:
            raise CaliperError(f"qs: expected shape (B, {self.nq}) or ({self.nq},) for {self.model.name!r}, "
                               f"got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise CaliperError("qs: non-finite values")
        if arr.shape[0] == 0:
            return np.zeros(0, dtype=bool)
        out = np.asarray(self._jitted(self.params if params is None else params, arr.reshape(-1, self.nq)))
        return out[0] if arr.ndim == 1 else out

    def describe(self) -> dict:
        """JSON-ready summary: spheres per link (count, largest excess beyond the geometry), pair
        counts, obstacle capacities, uncovered links."""
        rs = self.spheres
        links: dict = {}
        for f in rs.fits:
            e = links.setdefault(f.name, {"spheres": 0, "excess": 0.0})
            e["spheres"] += f.count
            e["excess"] = max(e["excess"], float(f.excess))
        return {
            "robot": self.model.name, "spheres": int(rs.radius.size), "links": links,
            "self_pairs": rs.self_pairs, "self_sphere_pairs": int(rs.self_i.size),
            "moving_spheres": int(self._moving.size),
            "capacity": {KINDS[k]: v for k, v in self.capacity.items()},
            "margin": float(self.params.margin), "radius_pad": RADIUS_PAD,
            "uncovered": [u.to_dict() for u in rs.uncovered], "notes": list(rs.notes),
        }


def _run(kernel, params, qs, block):
    """kernel(params, q (nq, L)) -> (L,) over qs (B, nq) in blocks of ``block`` lanes."""
    B = qs.shape[0]
    width = min(block, B)
    nblock = -(-B // width)
    pad = nblock * width - B
    if pad:
        qs = jnp.concatenate([qs, jnp.broadcast_to(qs[-1:], (pad, qs.shape[1]))])
    lanes_q = jnp.moveaxis(qs.reshape(nblock, width, qs.shape[1]), 1, -1)   # (nblock, nq, width)
    if nblock == 1:
        out = kernel(params, lanes_q[0])[None]
    else:
        out = jax.vmap(kernel, in_axes=(None, 0))(params, lanes_q)
    return out.reshape(-1)[:B]


def planning_checker(model: Model, obstacles=(), *, srdf=None, disabled_pairs=(), margin: float = 0.0,
                     capacity=None, max_per_collider: int = 8, split: int = SPLIT, block: int = BLOCK,
                     early_exit: bool = False, dtype=None) -> PlanningChecker:
    """A :class:`PlanningChecker` for ``model`` among ``obstacles`` (``box``, ``sphere``,
    ``capsule``, ``ground``, ``halfspace`` from :mod:`caliper_jax.collision`).

    ``srdf``: path of an SRDF whose ``<disable_collisions>`` pairs are not checked;
    ``disabled_pairs``: more (link, link) pairs not checked (e.g. a CollisionModel's ``allowed``);
    ``margin`` (m): clearance every pair must keep; ``capacity``: obstacle slots per kind -- an
    int (every kind, at least the given count) or a dict (``{"box": 8, "sphere": 4}``); by default
    exactly the given counts. ``split``: spheres per polytope in the split cover (0: the slab fit
    only); ``block``: lanes per kernel block; ``early_exit``: skip the self pairs when every lane
    already hits the world (see the module docstring). ``dtype``: of the world leaves and the
    kernel (default the model's: float32 unless x64 is on)."""
    if not isinstance(model, Model):
        raise CaliperError(f"model: expected a caliper_jax Model, got {type(model).__name__}")
    if not lanes.supports(model):
        raise CaliperError(f"planning_checker: {model.name!r} needs revolute/prismatic joints only "
                           f"(got {sorted(set(model.jnt_type))})")
    if not isinstance(block, (int, np.integer)) or block < 1:
        raise CaliperError(f"block must be an int >= 1, got {block!r}")
    if srdf is not None and not Path(srdf).is_file():
        raise CaliperError(f"srdf: no such file {str(srdf)!r}")
    obstacles = _check_obstacles(obstacles)
    dtype = dtype or model.jnt_p.dtype
    caps = _capacities(obstacles, capacity)
    params = make_params(obstacles, caps, margin, dtype)
    rs = robot_spheres(model, srdf, max_per_collider, split, disabled_pairs)
    lo = np.asarray(model.qpos_lower, np.float64)
    hi = np.asarray(model.qpos_upper, np.float64)
    if model.jnt_p.dtype != jnp.dtype(dtype):
        model = model.astype(dtype) if hasattr(model, "astype") else model
    return PlanningChecker(model=model, nq=int(model.nq), lower=lo, upper=hi, params=params, spheres=rs,
                           capacity=caps, block=int(block), early_exit=bool(early_exit))


__all__ = ["CheckParams", "PlanningChecker", "make_params", "planning_checker", "robot_spheres"]
