"""Tree walks by depth level: the path for deep kinematic trees.

The reference kinematics and dynamics unroll the tree walk in Python, one composition per body,
and sum over ancestors or subtrees with dense masks. That is what XLA compiles fastest and runs
fastest for arms (panda, ur5: a handful of bodies), but the program -- and XLA's compile time --
grows with the depth of the tree (a 30-link chain compiled FK in ~5 s, 100 links in ~26 s, and the
masks grow as nbody^2). Models past :func:`use_levels`'s limits instead walk the tree by **depth
level** inside one ``lax.scan``: all bodies of one level at once (a gather of their parents'
values from the previous level, then one batched operation), so the program has a fixed size
whatever the depth, and a chain of 1000 links compiles as fast as one of 20.

The schedule (:func:`schedule`) is static, built on the host once per topology (convention 3):
bodies are laid out level by level in a padded ``(nlevel, width)`` table; each slot knows its
parent's slot in the level above. Pads read slot 0 of the level above and are never read back,
so a level is a plain gather + batched op with no masking. The work is ``nlevel * width``
compositions: exactly ``nbody`` for a chain (width 1), more for a tree whose widest level is much
wider than the average (the padding is the price of one fixed-size scan step).

Three walks cover kinematics and dynamics:

* :func:`compose_down` -- world poses from local ones (root to leaves);
* :func:`accumulate_down` -- ``out[i] = sum of x over i and its ancestors`` (velocities,
  accelerations of every body from per-body joint contributions);
* :func:`accumulate_up` -- ``out[i] = sum of x over the subtree of i`` (RNEA forces, CRBA
  composite inertias), leaves to root, children added to their parent by a scatter-add.

All three are differentiable (``grad``, ``jacfwd``, ``jacrev``) and ``vmap``-able; the lane
kernels of :mod:`caliper_jax.lanes` are not used for such models (``lanes.supports`` is False), so
``jax.vmap`` runs the vmapped scan.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.spatial import mm, mv

#: the unrolled walk is kept for models with at most this many bodies *and* at most
#: MAX_UNROLLED_DEPTH levels (every arm and quadruped of the registry: depth <= 9, <= 19 bodies)
MAX_UNROLLED_BODIES = 64
#: deeper trees take the level walk: an unrolled 30-link chain already compiled FK in ~5 s
MAX_UNROLLED_DEPTH = 16


class Schedule(NamedTuple):
    """Static level layout of a tree (NumPy arrays, built once per ``body_parent``)."""
    level_body: np.ndarray     # (nlevel, width) body in each slot, nbody for a pad
    parent_slot: np.ndarray    # (nlevel, width) slot of the parent in the level above (0 for
    #                            roots and pads)
    body_slot: np.ndarray      # (nbody,) flat slot (level * width + slot) of each body
    depth: np.ndarray          # (nbody,) level of each body (roots: 0)
    preorder: np.ndarray       # (nbody,) position of each body in a depth-first preorder
    subtree_end: np.ndarray    # (nbody,) preorder + subtree size: k is in i's subtree iff
    #                            preorder[i] <= preorder[k] < subtree_end[i]

    @property
    def nlevel(self) -> int:
        return self.level_body.shape[0]

    @property
    def width(self) -> int:
        return self.level_body.shape[1]


@lru_cache(maxsize=256)
def _schedule(body_parent: tuple, x64: bool) -> Schedule:
    n = len(body_parent)
    children = [[] for _ in range(n + 1)]                  # index n: the world
    for i, parent in enumerate(body_parent):
        if not -1 <= parent < n or parent == i:
            raise ValueError(f"body {i}: invalid parent index {parent}")
        children[parent if parent >= 0 else n].append(i)
    depth = np.full(n, -1, dtype=np.int64)
    preorder = np.zeros(n, dtype=np.int64)
    size = np.ones(n, dtype=np.int64)
    post = []
    stack = [(c, 0) for c in reversed(children[n])]
    count = 0
    while stack:                                           # iterative depth-first walk
        body, d = stack.pop()
        depth[body], preorder[body] = d, count
        count += 1
        post.append(body)
        stack.extend((c, d + 1) for c in reversed(children[body]))
    if count != n:
        raise ValueError("body_parent does not describe a tree rooted at the world")
    for body in reversed(post):                            # children come after their parent
        if body_parent[body] >= 0:
            size[body_parent[body]] += size[body]
    nlevel = int(depth.max()) + 1 if n else 0
    levels = [[] for _ in range(nlevel)]
    for body in np.argsort(preorder, kind="stable"):       # preorder within each level
        levels[depth[body]].append(int(body))
    width = max((len(lv) for lv in levels), default=0)
    level_body = np.full((nlevel, width), n, dtype=np.int64)
    parent_slot = np.zeros((nlevel, width), dtype=np.int64)
    slot = np.zeros(n, dtype=np.int64)
    for d, lv in enumerate(levels):
        for s, body in enumerate(lv):
            level_body[d, s], slot[body] = body, s
            if d > 0:
                parent_slot[d, s] = slot[body_parent[body]]
    body_slot = depth * width + slot
    return Schedule(level_body, parent_slot, body_slot, depth, preorder, preorder + size)


def schedule(model) -> Schedule:
    """The level schedule of ``model``'s tree (cached per topology and per ``jax_enable_x64``
    setting: see ``model.tables`` on sharing NumPy index arrays across precisions)."""
    return _schedule(tuple(model.body_parent), bool(jax.config.jax_enable_x64))


def use_levels(model) -> bool:
    """True when ``model`` takes the level walk: more than MAX_UNROLLED_BODIES bodies or a tree
    deeper than MAX_UNROLLED_DEPTH levels."""
    if model.nbody > MAX_UNROLLED_BODIES:
        return True
    return model.nbody > 0 and schedule(model).nlevel > MAX_UNROLLED_DEPTH


def ancestor_mask(sched: Schedule, bodies_a, bodies_b):
    """Boolean (len(a), len(b)) array: body a[j] is body b[k] or one of its ancestors, computed
    from the preorder intervals (two small index vectors in the program, not an n x n table)."""
    pre_a = jnp.asarray(sched.preorder[np.asarray(bodies_a)], jnp.int32)
    end_a = jnp.asarray(sched.subtree_end[np.asarray(bodies_a)], jnp.int32)
    pre_b = jnp.asarray(sched.preorder[np.asarray(bodies_b)], jnp.int32)
    return (pre_a[:, None] <= pre_b[None, :]) & (pre_b[None, :] < end_a[:, None])


# ---- the walks -------------------------------------------------------------------------------

def _by_level(sched: Schedule, x, pad):
    """Per-body rows x (nbody, ...) -> (nlevel, width, ...), pads filled with ``pad`` (...)."""
    ext = jnp.concatenate([x, jnp.broadcast_to(jnp.asarray(pad, x.dtype), (1,) + x.shape[1:])])
    return ext[sched.level_body]


def _to_bodies(sched: Schedule, levelled):
    """(nlevel, width, ...) -> per-body rows (nbody, ...)."""
    flat = levelled.reshape((sched.nlevel * sched.width,) + levelled.shape[2:])
    return flat[sched.body_slot]


def compose_down(sched: Schedule, R_local, p_local):
    """World poses of every body from the poses in their parents' frames (roots: in the world):
    R (nbody, 3, 3), p (nbody, 3), one scan step per level."""
    eye = jnp.eye(3, dtype=R_local.dtype)
    R_lv, p_lv = _by_level(sched, R_local, eye), _by_level(sched, p_local, 0.0)

    def level(carry, xs):
        R_up, p_up = carry
        R_loc, p_loc, parent = xs
        R_par, p_par = R_up[parent], p_up[parent]
        out = (mm(R_par, R_loc), p_par + mv(R_par, p_loc))
        return out, out

    first = (R_lv[0], p_lv[0])
    _, (R_rest, p_rest) = jax.lax.scan(level, first, (R_lv[1:], p_lv[1:], sched.parent_slot[1:]))
    R_all = jnp.concatenate([R_lv[:1], R_rest])
    p_all = jnp.concatenate([p_lv[:1], p_rest])
    return _to_bodies(sched, R_all), _to_bodies(sched, p_all)


def accumulate_down(sched: Schedule, x):
    """out[i] = x[i] + out[parent(i)] (roots: x[i]) for x (nbody, ...)."""
    x_lv = _by_level(sched, x, 0.0)

    def level(up, xs):
        x_here, parent = xs
        out = up[parent] + x_here
        return out, out

    _, rest = jax.lax.scan(level, x_lv[0], (x_lv[1:], sched.parent_slot[1:]))
    return _to_bodies(sched, jnp.concatenate([x_lv[:1], rest]))


def accumulate_up(sched: Schedule, x):
    """out[i] = sum of x over body i and all its descendants, for x (nbody, ...)."""
    x_lv = _by_level(sched, x, 0.0)                        # pads are zero and stay zero

    def level(below, xs):
        x_here, child_parent = xs                          # child_parent: parent slots of the
        out = x_here.at[child_parent].add(below)           # level below (its pads add zeros)
        return out, out

    _, rest = jax.lax.scan(level, x_lv[-1], (x_lv[:-1], sched.parent_slot[1:]), reverse=True)
    return _to_bodies(sched, jnp.concatenate([rest, x_lv[-1:]]))


__all__ = ["MAX_UNROLLED_BODIES", "MAX_UNROLLED_DEPTH", "Schedule", "accumulate_down", "accumulate_up",
           "ancestor_mask", "compose_down", "schedule", "use_levels"]
