"""Collision queries at one configuration (pure JAX; batch with ``jax.vmap``, jit at the caller).

* :func:`contacts` -- signed distance, unit normal and witness points for every pair
  (differentiable in ``q``, see :mod:`caliper_jax.collision.pairs`);
* :func:`distances` / :func:`min_distance` -- the signed distances only / their minimum;
* :func:`collision_flags` / :func:`in_collision` -- yes/no within a margin through
  :func:`pair_flag`: GJK only, stopping as soon as a pair is proven clear, so several times
  cheaper than :func:`contacts`;
* sphere models (the sphere approximation): :func:`sphere_blocks` (dense distances),
  :func:`sphere_potential` (a sum over the checked pairs, for CHOMP) and
  :func:`sphere_distances` (pair order).

Pair order is ``cm.pairs``; self pairs and world pairs are told apart by ``cm.pair_self``. The
batched NumPy face over these functions is :mod:`caliper_jax.collision.api`.
"""
from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.collision.gjk import EPA_ITERATIONS, GJK_ITERATIONS
from caliper_jax.collision.pairs import Contact, certify, solve
from caliper_jax.collision.scene import CollisionModel, pair_groups
from caliper_jax.collision.support import CODE, Shape, safe_norm
from caliper_jax.kinematics import body_poses
from caliper_jax.model import Model
from caliper_jax.spatial import mm, mv


def collider_poses(model: Model, cm: CollisionModel, q):
    """World placement of every collider: R (N, 3, 3), p (N, 3)."""
    dt = cm.R.dtype
    if model.nbody:
        Rb, pb = body_poses(model, q)
        Rb, pb = Rb.astype(dt), pb.astype(dt)
    else:
        Rb, pb = jnp.zeros((0, 3, 3), dt), jnp.zeros((0, 3), dt)
    Rb = jnp.concatenate([Rb, jnp.eye(3, dtype=dt)[None]], axis=0)
    pb = jnp.concatenate([pb, jnp.zeros((1, 3), dt)], axis=0)
    # each collider's body by a one-hot product rather than a gather: its gradient is a product
    # too, not a scatter (several times faster on CPU); body -1 picks the appended world row
    pick = jnp.asarray(np.eye(model.nbody + 1)[np.array(cm.body, dtype=np.int64)], dt)
    Rp, pp = jnp.einsum("nb,bij->nij", pick, Rb), pick @ pb
    return mm(Rp, cm.R), pp + mv(Rp, cm.p)


def hull_vertices(cm: CollisionModel, idx, with_hulls: bool):
    """(n, V, 3) hull vertices of colliders ``idx`` (zeros for non-hulls); (n, 1, 3) zeros when
    ``with_hulls`` is False."""
    idx = np.asarray(idx, dtype=np.int64)
    if not with_hulls:
        return jnp.zeros((idx.size, 1, 3), cm.R.dtype)
    slots = np.array([cm.hull_slot[i] for i in idx], dtype=np.int64)
    table = cm.hull_verts[np.maximum(slots, 0)]
    return jnp.where(jnp.asarray(slots >= 0)[:, None, None], table, 0.0)


def _shapes(cm: CollisionModel, Rw, pw, idx, with_hulls: bool):
    idx = np.asarray(idx, dtype=np.int64)
    codes = np.array([CODE[cm.kinds[i]] for i in idx], dtype=np.int32)
    return Shape(Rw[idx], pw[idx], cm.radius[idx], cm.half[idx], jnp.asarray(codes),
                 hull_vertices(cm, idx, with_hulls))


def _grouped(model, cm, q, per_group):
    """Run ``per_group(kind_a, kind_b, A, B)`` (vmapped over the group's pairs) for every group
    and return the results in ``cm.pairs`` order."""
    Rw, pw = collider_poses(model, cm, q)
    results, order = [], []
    for _, ka, kb, idx in pair_groups(cm.kinds, cm.pairs, cm.hull_slot):
        ia = [cm.pairs[k][0] for k in idx]
        ib = [cm.pairs[k][1] for k in idx]
        with_hulls = any(cm.kinds[i] == "hull" for i in ia + ib)
        A, B = _shapes(cm, Rw, pw, ia, with_hulls), _shapes(cm, Rw, pw, ib, with_hulls)
        results.append(per_group(ka, kb, A, B))
        order += list(idx)
    inverse = np.argsort(np.array(order, dtype=np.int64))
    return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs)[inverse], *results)


def contacts(model: Model, cm: CollisionModel, q, *, depth: bool = True,
             gjk_iterations: int = GJK_ITERATIONS, epa_iterations: int = EPA_ITERATIONS) -> Contact:
    """Signed distance (P,), normal (P, 3) from the first collider of each pair to the second,
    and witness points (P, 3) on each, for every pair of ``cm``.

    ``depth=False`` skips EPA (much cheaper to compile and run): separated pairs and pairs with a
    closed form (spheres, capsules, sphere-box, half-spaces) stay exact, while overlapping convex
    cores report a distance of about ``-(r_A + r_B)`` -- an upper bound -- with an arbitrary
    normal."""
    if not cm.pairs:
        dt = cm.R.dtype
        z3 = jnp.zeros((0, 3), dt)
        return Contact(jnp.zeros((0,), dt), z3, z3, z3)

    def run(ka, kb, A, B):
        def one(a, b):
            w = solve(ka, kb, a, b, depth=depth, gjk_iterations=gjk_iterations,
                      epa_iterations=epa_iterations)
            return certify(a, b, w)
        return jax.vmap(one)(A, B)

    return _grouped(model, cm, q, run)


def distances(model: Model, cm: CollisionModel, q, **kw):
    """Signed distance of every pair (P,): > 0 apart, < 0 penetrating."""
    return contacts(model, cm, q, **kw).distance


def min_distance(model: Model, cm: CollisionModel, q, **kw):
    """The smallest signed distance over all pairs (+inf when there are none)."""
    d = distances(model, cm, q, **kw)
    return jnp.min(d, initial=jnp.inf)


def pair_flag(kind_a: str, kind_b: str, a: Shape, b: Shape, margin):
    """True when colliders ``a`` and ``b`` are closer than ``margin`` (touching or overlapping when
    0): GJK without EPA, stopped as soon as the cores are proven farther apart than that."""
    w = solve(kind_a, kind_b, a, b, depth=False, stop_above=margin + a.radius + b.radius)
    return w.intersect | (w.normal @ (w.b - w.a) - a.radius - b.radius <= margin)


def collision_flags(model: Model, cm: CollisionModel, q, margin=0.0):
    """Per pair (P,): True when the pair is closer than ``margin`` (in contact when 0)."""
    if not cm.pairs:
        return jnp.zeros((0,), bool)
    margin = jnp.asarray(margin, cm.R.dtype)

    def run(ka, kb, A, B):
        return jax.vmap(lambda a, b: pair_flag(ka, kb, a, b, margin))(A, B)

    return _grouped(model, cm, jax.lax.stop_gradient(q), run)


def in_collision(model: Model, cm: CollisionModel, q, margin=0.0):
    """True when any pair is closer than ``margin``."""
    return jnp.any(collision_flags(model, cm, q, margin))


# ---- sphere models: dense closed forms -----------------------------------------------------------

_SPHERE_OBSTACLES = ("point", "segment", "box", "halfspace")


@lru_cache(maxsize=64)
def _sphere_layout(kinds: tuple, n_robot: int, pairs: tuple, pair_self: tuple):
    """Static layout of a sphere model's pairs in the dense blocks of :func:`sphere_blocks`:
    masks (self (n, n) upper triangle, world (n, n_obstacle)) and each pair's index into the
    flattened blocks ``[self.ravel(), world.ravel()]``."""
    n, m = n_robot, len(kinds) - n_robot
    self_mask, world_mask = np.zeros((n, n), bool), np.zeros((n, m), bool)
    flat = []
    for (i, j), is_self in zip(pairs, pair_self, strict=True):
        if is_self:
            i, j = min(i, j), max(i, j)
            self_mask[i, j] = True
            flat.append(i * n + j)
        else:
            i, j = (i, j) if i < n else (j, i)          # (robot sphere, obstacle)
            world_mask[i, j - n] = True
            flat.append(n * n + i * m + (j - n))
    return self_mask, world_mask, np.asarray(flat, dtype=np.int64)


def is_sphere_model(cm: CollisionModel) -> bool:
    """All robot colliders are spheres and all obstacles have a closed form against a sphere."""
    return (all(k == "point" for k in cm.kinds[:cm.n_robot])
            and all(k in _SPHERE_OBSTACLES for k in cm.kinds[cm.n_robot:]))


def sphere_blocks(model: Model, cm: CollisionModel, q):
    """Dense signed distances of a sphere model (:func:`is_sphere_model`): every robot sphere
    against every other (n, n) and against every obstacle (n, n_obstacle), closed forms, NaN-safe
    gradients. Which entries are checked pairs: ``sphere_masks(cm)``. Dense blocks keep the
    gradient free of gathers and scatters (CHOMP sums a potential over them)."""
    if not is_sphere_model(cm):
        raise ValueError("sphere_blocks needs robot spheres and sphere/capsule/box/half-space obstacles")
    n = cm.n_robot
    Rw, pw = collider_poses(model, cm, q)
    c, r = pw[:n], cm.radius[:n]
    between = safe_norm(c[:, None] - c[None]) - r[:, None] - r[None]
    cols = []
    for j in range(n, cm.ncollider):
        R, p, kind = Rw[j], pw[j], cm.kinds[j]
        rel = c - p
        if kind == "point":
            d = safe_norm(rel) - r - cm.radius[j]
        elif kind == "segment":
            h = cm.half[j, 2]
            t = jnp.clip(rel @ R[:, 2], -h, h)
            d = safe_norm(rel - t[:, None] * R[:, 2]) - r - cm.radius[j]
        elif kind == "box":
            gap = jnp.abs(rel @ R) - cm.half[j]
            d = safe_norm(jnp.maximum(gap, 0.0)) + jnp.minimum(jnp.max(gap, -1), 0.0) - r
        else:                                   # half-space: the solid below the plane n . x <= n . p
            d = rel @ R[:, 2] - r
        cols.append(d)
    world = jnp.stack(cols, axis=1) if cols else jnp.zeros((n, 0), c.dtype)
    return between, world


def sphere_masks(cm: CollisionModel):
    """(self mask (n, n), world mask (n, n_obstacle)): the entries of :func:`sphere_blocks` that
    are checked pairs (static NumPy)."""
    self_mask, world_mask, _ = _sphere_layout(cm.kinds, cm.n_robot, cm.pairs, cm.pair_self)
    return self_mask, world_mask


def sphere_potential(model: Model, cm: CollisionModel, q, fn):
    """``sum(fn(d))`` over every checked pair of a sphere model, from the dense blocks."""
    between, world = sphere_blocks(model, cm, q)
    self_mask, world_mask = sphere_masks(cm)
    return (jnp.sum(jnp.where(self_mask, fn(between), 0.0))
            + jnp.sum(jnp.where(world_mask, fn(world), 0.0)))


def sphere_distances(model: Model, cm: CollisionModel, q):
    """Signed distances (P,) in ``cm.pairs`` order for a sphere model (:func:`is_sphere_model`),
    from :func:`sphere_blocks`; any other CollisionModel falls back to :func:`distances`."""
    if not is_sphere_model(cm):
        return distances(model, cm, q)
    if not cm.pairs:
        return jnp.zeros((0,), cm.R.dtype)
    between, world = sphere_blocks(model, cm, q)
    flat = _sphere_layout(cm.kinds, cm.n_robot, cm.pairs, cm.pair_self)[2]
    return jnp.concatenate([between.ravel(), world.ravel()])[flat]


__all__ = ["collider_poses", "collision_flags", "contacts", "distances", "in_collision", "is_sphere_model",
           "min_distance", "pair_flag", "sphere_blocks", "sphere_distances", "sphere_masks",
           "sphere_potential"]
