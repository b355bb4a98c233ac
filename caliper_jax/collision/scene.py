"""``CollisionModel``: a robot's colliders, the world obstacles and the pairs to check.

Built once on the host from a :class:`~caliper_jax.model.Model`. It is a pytree like the Model:
names, kinds, the body each collider rides on and the pair lists are static (part of the jit
cache key); placements, sizes and hull vertices are array leaves, so moving an obstacle does not
recompile.

Self-collision pairs are every two robot colliders on different bodies, minus an allow-list of
link pairs that are expected to touch:

* tree adjacency (seeded automatically): a body and its nearest ancestor that carries
  collision geometry (the world for root bodies) -- parent/child links touch at their joint;
* an SRDF's ``<disable_collisions>`` pairs, when one is given;
* any extra pairs the caller passes.

World pairs are every moving robot collider against every obstacle. Pairs of two fixed
colliders (world-attached robot geometry against obstacles) are skipped: no motion can change
them. Each pair is stored in canonical kind order (see :mod:`caliper_jax.collision.pairs`).
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.collision.geometry import (
    MAX_HULL_VERTICES,
    Collider,
    Uncovered,
    convex_hull,
    robot_colliders,
)
from caliper_jax.collision.pairs import KIND_ORDER
from caliper_jax.collision.srdf import read_disabled_pairs
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model, default_dtype

_STATIC = dict(metadata={"static": True})


@dataclasses.dataclass(frozen=True)
class CollisionModel:
    # ---- static ----------------------------------------------------------------------------
    names: tuple = dataclasses.field(**_STATIC)        # collider names (link or obstacle)
    kinds: tuple = dataclasses.field(**_STATIC)        # core kind per collider
    body: tuple = dataclasses.field(**_STATIC)         # body index per collider, -1 world
    hull_slot: tuple = dataclasses.field(**_STATIC)    # row of hull_verts, -1 when not a hull
    n_robot: int = dataclasses.field(**_STATIC)        # colliders [0, n_robot) are the robot's
    pairs: tuple = dataclasses.field(**_STATIC)        # (i, j) canonical kind order
    pair_self: tuple = dataclasses.field(**_STATIC)    # True: self pair, False: world pair
    allowed: tuple = dataclasses.field(**_STATIC)      # sorted link-name pairs never checked
    uncovered: tuple = dataclasses.field(**_STATIC)    # Uncovered entries
    notes: tuple = dataclasses.field(**_STATIC)        # human notes (hull reductions, SRDF misses)
    # ---- leaves -----------------------------------------------------------------------------
    R: Any = None          # (N, 3, 3) collider frame in its body frame (world frame for obstacles)
    p: Any = None          # (N, 3)
    radius: Any = None     # (N,)
    half: Any = None       # (N, 3)
    hull_verts: Any = None  # (H, V, 3) hull vertices (padded by repeating the first), H >= 1

    @property
    def ncollider(self) -> int:
        return len(self.names)

    @property
    def npair(self) -> int:
        return len(self.pairs)

    @property
    def obstacles(self) -> tuple:
        return self.names[self.n_robot:]

    def pair_names(self) -> list:
        return [(self.names[i], self.names[j]) for i, j in self.pairs]

    def replace(self, **changes) -> "CollisionModel":
        return dataclasses.replace(self, **changes)


_DATA = tuple(f.name for f in dataclasses.fields(CollisionModel) if not f.metadata.get("static"))
#: Static fields the computation depends on (part of the jit cache key).
_GEOMETRY = ("kinds", "body", "hull_slot", "n_robot", "pairs", "pair_self")
#: Static fields for reports only: carried through flatten/unflatten but left out of the cache key,
#: so two scenes that differ only in names (or allow-list provenance, notes) share compilations.
_REPORT = ("names", "allowed", "uncovered", "notes")


class _ReportOnly:
    __slots__ = ("values",)

    def __init__(self, values):
        self.values = values

    def __eq__(self, other):
        return isinstance(other, _ReportOnly)

    def __hash__(self):
        return 0


def _flatten(cm):
    return (tuple(getattr(cm, k) for k in _DATA),
            (tuple(getattr(cm, k) for k in _GEOMETRY), _ReportOnly(tuple(getattr(cm, k) for k in _REPORT))))


def _unflatten(aux, children):
    geometry, report = aux
    fields = {**dict(zip(_DATA, children, strict=True)), **dict(zip(_GEOMETRY, geometry, strict=True)),
              **dict(zip(_REPORT, report.values, strict=True))}
    return CollisionModel(**fields)


jax.tree_util.register_pytree_node(CollisionModel, _flatten, _unflatten)


def adjacent_links(model: Model, colliders) -> set:
    """Link pairs adjacent in the tree of geometry-carrying bodies (see the module docstring)."""
    with_geom = {c.body for c in colliders}
    links_of = {}
    for c in colliders:
        links_of.setdefault(c.body, set()).add(c.name)

    def geometric_parent(b):
        b = model.body_parent[b]
        while b >= 0 and b not in with_geom:
            b = model.body_parent[b]
        return b

    pairs = set()
    for b in with_geom:
        if b < 0:
            continue
        parent = geometric_parent(b)
        for la in links_of[b]:
            for lb in links_of.get(parent, ()):
                pairs.add(tuple(sorted((la, lb))))
    return pairs


def _hull_table(colliders):
    """Hull vertices of every hull collider, padded by repeating the first vertex: (H, V, 3) with
    H >= 1, and each collider's row (-1 when not a hull)."""
    hulls = [c.vertices for c in colliders if c.kind == "hull"]
    vmax = max([h.shape[0] for h in hulls] + [1])
    table = np.zeros((max(len(hulls), 1), vmax, 3))
    for k, h in enumerate(hulls):
        table[k] = h[0]
        table[k, :h.shape[0]] = h
    slots = np.cumsum([c.kind == "hull" for c in colliders]) - 1
    return table, tuple(int(k) if c.kind == "hull" else -1 for k, c in zip(slots, colliders, strict=True))


def build_collision_model(model: Model, obstacles=(), *, srdf=None, disabled_pairs=(),
                          self_collision: bool = True, max_hull_vertices: int = MAX_HULL_VERTICES,
                          colliders=None, dtype=None) -> CollisionModel:
    """A CollisionModel for ``model`` among ``obstacles`` (see :mod:`.geometry`: ``box``,
    ``sphere``, ``capsule``, ``ground``, ``halfspace``).

    ``srdf``: path of an SRDF whose ``<disable_collisions>`` pairs join the allow-list;
    ``disabled_pairs``: extra (link, link) pairs to skip; ``self_collision=False`` checks
    the world only. ``colliders`` overrides the robot's colliders (e.g. the sphere
    approximation); by default they come from the model's collision geometry.
    """
    dtype = dtype or getattr(model, "dtype", None) or default_dtype()
    notes = []
    if colliders is None:
        robot, uncovered = robot_colliders(model, max_hull_vertices)
    else:
        robot, uncovered = list(colliders), []
    for c in robot:
        if c.note:
            notes.append(f"{c.name}: {c.note}")
    obstacles = list(obstacles)
    for o in obstacles:
        if not isinstance(o, Collider) or not o.obstacle:
            raise CaliperError("obstacles must be built with caliper_jax.collision (box, sphere, "
                               f"ground...), got {o!r}")
    allowed = set(adjacent_links(model, robot))
    extra = list(disabled_pairs)
    if srdf is not None:
        extra += read_disabled_pairs(srdf)
    link_names = set(model.frame_names)
    for a, b in extra:
        for name in (a, b):
            if name not in link_names:
                notes.append(f"disabled pair ({a}, {b}): no link named {name!r} in {model.name!r}")
        allowed.add(tuple(sorted((a, b))))
    cols = robot + obstacles
    n_robot = len(robot)
    pairs, pair_self = [], []

    def add(i, j, is_self):
        if KIND_ORDER[cols[i].kind] > KIND_ORDER[cols[j].kind]:
            i, j = j, i
        if cols[i].kind == "halfspace" and cols[j].kind == "halfspace":
            return
        pairs.append((i, j))
        pair_self.append(is_self)

    if self_collision:
        for i in range(n_robot):
            for j in range(i + 1, n_robot):
                a, b = robot[i], robot[j]
                if a.body == b.body or (a.body < 0 and b.body < 0):
                    continue
                if tuple(sorted((a.name, b.name))) in allowed:
                    continue
                add(i, j, True)
    for i in range(n_robot):
        if robot[i].body < 0:
            continue
        for k in range(len(obstacles)):
            add(i, n_robot + k, False)
    return assemble(cols, n_robot, pairs, pair_self, allowed=sorted(allowed), uncovered=uncovered,
                    notes=notes, dtype=dtype)


def assemble(cols, n_robot: int, pairs, pair_self, *, allowed=(), uncovered=(), notes=(),
             dtype=None) -> CollisionModel:
    """A CollisionModel from colliders (the robot's first, ``n_robot`` of them) and explicit pairs
    ``(i, j)`` in canonical kind order with their self/world flags."""
    dtype = dtype or default_dtype()
    for i, j in pairs:
        if KIND_ORDER[cols[i].kind] > KIND_ORDER[cols[j].kind]:
            raise ValueError(f"pair ({cols[i].name}, {cols[j].name}) is not in canonical kind order")
    table, slots = _hull_table(cols)
    as_arr = lambda x, shape: jnp.asarray(np.asarray(x, dtype=np.float64).reshape(shape), dtype=dtype)
    n = len(cols)
    return CollisionModel(
        names=tuple(c.name for c in cols),
        kinds=tuple(c.kind for c in cols),
        body=tuple(int(c.body) for c in cols),
        hull_slot=slots,
        n_robot=int(n_robot),
        pairs=tuple((int(i), int(j)) for i, j in pairs),
        pair_self=tuple(bool(x) for x in pair_self),
        allowed=tuple(tuple(p) for p in allowed),
        uncovered=tuple(uncovered),
        notes=tuple(notes),
        R=as_arr([c.R for c in cols], (n, 3, 3)),
        p=as_arr([c.p for c in cols], (n, 3)),
        radius=as_arr([c.radius for c in cols], (n,)),
        half=as_arr([c.half for c in cols], (n, 3)),
        hull_verts=as_arr(table, table.shape),
    )


def colliders_of(cm: CollisionModel) -> list:
    """The :class:`Collider` list a CollisionModel was built from (host copies; hull faces
    recomputed from the stored vertices)."""
    R, p = np.asarray(cm.R, np.float64), np.asarray(cm.p, np.float64)
    radius, half = np.asarray(cm.radius, np.float64), np.asarray(cm.half, np.float64)
    table = np.asarray(cm.hull_verts, np.float64)
    out = []
    for i in range(cm.ncollider):
        verts = faces = None
        if cm.kinds[i] == "hull":
            verts, faces = convex_hull(table[cm.hull_slot[i]])
        out.append(Collider(cm.names[i], cm.body[i], cm.kinds[i], R[i], p[i], float(radius[i]), half[i],
                            verts, faces, obstacle=i >= cm.n_robot))
    return out


def with_obstacles(cm: CollisionModel, obstacles) -> CollisionModel:
    """The same robot among new obstacles of the same kinds, count and order (no recompile):
    only the obstacle leaves change."""
    obstacles = list(obstacles)
    old = cm.kinds[cm.n_robot:]
    if tuple(o.kind for o in obstacles) != old:
        raise CaliperError(f"with_obstacles: expected obstacles of kinds {old}, got "
                           f"{tuple(o.kind for o in obstacles)} (build a new CollisionModel instead)")
    n = cm.n_robot
    dt = cm.R.dtype
    def upd(arr, vals):
        return arr.at[n:].set(jnp.asarray(np.asarray(vals, dtype=np.float64), dt)) if obstacles else arr

    return cm.replace(R=upd(cm.R, [o.R for o in obstacles]), p=upd(cm.p, [o.p for o in obstacles]),
                      radius=upd(cm.radius, [o.radius for o in obstacles]),
                      half=upd(cm.half, [o.half for o in obstacles]))


# ---- static pair groups ---------------------------------------------------------------------------

_ROUND = ("point", "segment")


@lru_cache(maxsize=128)
def pair_groups(kinds: tuple, pairs: tuple, hull_slot: tuple):
    """Pairs split by solver: ``(name, kind_a, kind_b, pair indices)`` for the groups
    round (sphere/capsule pairs), point_box, halfspace and convex (GJK/EPA over any kinds)."""
    groups = {"round": [], "point_box": [], "halfspace": [], "convex": []}
    for k, (i, j) in enumerate(pairs):
        ka, kb = kinds[i], kinds[j]
        if kb == "halfspace":
            groups["halfspace"].append(k)
        elif ka in _ROUND and kb in _ROUND:
            groups["round"].append(k)
        elif ka == "point" and kb == "box":
            groups["point_box"].append(k)
        else:
            groups["convex"].append(k)
    spec = {"round": ("segment", "segment"), "point_box": ("point", "box"), "halfspace": ("any", "halfspace"),
            "convex": ("any", "any")}
    out = []
    for name, idx in groups.items():
        if idx:
            out.append((name, *spec[name], tuple(idx)))
    return tuple(out)


def describe(cm: CollisionModel) -> dict:
    """A JSON-ready summary: colliders per link, pair counts, allow-list, uncovered links."""
    return {
        "colliders": [{"name": n, "kind": k, "body": b}
                      for n, k, b in zip(cm.names, cm.kinds, cm.body, strict=True)],
        "robot_colliders": cm.n_robot,
        "obstacles": list(cm.obstacles),
        "self_pairs": int(sum(cm.pair_self)),
        "world_pairs": int(len(cm.pairs) - sum(cm.pair_self)),
        "allowed_pairs": [list(p) for p in cm.allowed],
        "uncovered": [u.to_dict() for u in cm.uncovered],
        "notes": list(cm.notes),
    }


def build_sphere_model(model: Model, obstacles=(), *, max_per_collider: int = 8,
                       max_hull_vertices: int = MAX_HULL_VERTICES, **kw):
    """The sphere approximation of ``model`` (see :mod:`.spheres`) as a CollisionModel among
    ``obstacles``, plus the per-collider fit report. Keyword arguments as for
    :func:`build_collision_model` (``srdf``, ``disabled_pairs``, ``self_collision``)."""
    from caliper_jax.collision.spheres import sphere_colliders

    robot, uncovered = robot_colliders(model, max_hull_vertices)
    spheres, fits = sphere_colliders(robot, max_per_collider)
    cm = build_collision_model(model, obstacles, colliders=spheres, **kw)
    notes = tuple(f"{c.name}: {c.note}" for c in robot if c.note) + cm.notes
    return cm.replace(uncovered=tuple(uncovered), notes=notes), fits


__all__ = ["CollisionModel", "Uncovered", "adjacent_links", "assemble", "build_collision_model",
           "build_sphere_model", "colliders_of", "describe", "pair_groups", "with_obstacles"]
