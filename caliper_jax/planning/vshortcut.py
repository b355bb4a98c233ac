"""Shortcut smoothing of a padded waypoint path as one jitted loop (vmappable over problems).

``iterations`` rounds; each picks a random pair of waypoints ``i < j - 1`` of the current path
and, when the straight edge between them is valid, drops the waypoints in between. The edge is
checked at ``resolution`` on the dyadic grid ``j / 2^L`` (``2^L >= span / resolution``) in
bisection order, ``chunk`` states per ``valid`` call, stopping at the first invalid chunk: a
blocked shortcut usually costs one call, a valid one ``ceil((2^L - 1) / chunk)`` calls.

The path is a fixed buffer ``(P, nq)`` with a ``length``; entries past it repeat the last
waypoint (the :func:`caliper_jax.planning.vrrt.rrt_connect_search` layout).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.planning.lattice import bisection_order, counter_uniform, levels_for


class ShortcutOptions(NamedTuple):
    """``iterations``: shortcut attempts; ``resolution``: edge-check step; ``max_span``: the
    longest edge possible (the widest joint range; sets the finest grid); ``chunk``: states per
    validity call."""

    iterations: int = 48
    resolution: float = 0.05
    max_span: float = 2 * np.pi
    chunk: int = 16


def shortcut_search(valid, params, path, length, key, opts: ShortcutOptions):
    """(path (P, nq), length, states checked): pure JAX, ``valid``/``opts`` static."""
    P = path.shape[0]
    dt = path.dtype
    levels = levels_for(opts.max_span, opts.resolution)
    fr = bisection_order(levels)
    n_chunks = max(1, -(-fr.shape[0] // opts.chunk))
    fr = np.concatenate([fr, np.full(n_chunks * opts.chunk - fr.shape[0], 0.5)])
    frac = jnp.asarray(fr.reshape(n_chunks, opts.chunk), dt)
    res = jnp.asarray(opts.resolution, dt)
    rows = jnp.arange(P, dtype=jnp.int32)
    seed = jax.random.bits(key, (2,), jnp.uint32)

    def edge_ok(a, b):
        span = jnp.max(jnp.abs(b - a))
        lv = jnp.ceil(jnp.log2(jnp.maximum(span / res, 1.0)) - 1e-6)
        need = jnp.exp2(lv).astype(jnp.int32) - 1            # interior states to check
        chunks = -(-need // opts.chunk)

        def cond(c):
            k, ok, _ = c
            return ok & (k < chunks)

        def body(c):
            k, ok, n = c
            pts = a + frac[k][:, None] * (b - a)[None]
            return k + 1, jnp.all(valid(params, pts)), n + opts.chunk

        _, ok, n = jax.lax.while_loop(cond, body, (jnp.int32(0), jnp.bool_(True), jnp.int32(0)))
        return ok, n

    def body(it, c):
        path, L, states = c
        u = counter_uniform(seed, it, (2,), np.dtype(dt).type)
        hi_i = jnp.maximum(L - 2, 1)
        i = jnp.minimum((u[0] * hi_i).astype(jnp.int32), hi_i - 1)
        width = jnp.maximum(L, i + 3) - (i + 2)
        j = i + 2 + jnp.minimum((u[1] * width).astype(jnp.int32), width - 1)
        try_it = (L >= 3) & (j < L)
        ok, n = jax.lax.cond(try_it, lambda: edge_ok(path[i], path[jnp.minimum(j, P - 1)]),
                             lambda: (jnp.bool_(False), jnp.int32(0)))
        drop = jnp.where(ok, j - i - 1, 0).astype(jnp.int32)
        src = jnp.where(rows <= i, rows, jnp.minimum(rows + drop, P - 1))
        return path[src], L - drop, states + n

    path, length, states = jax.lax.fori_loop(jnp.int32(0), jnp.int32(opts.iterations), body,
                                             (path, length.astype(jnp.int32), jnp.int32(0)))
    return path, length, states


__all__ = ["ShortcutOptions", "shortcut_search"]
