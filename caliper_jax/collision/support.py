"""Posed convex cores and their support functions (pure JAX, one shape per call).

``support(kind, shape, d)`` returns a point of the core farthest along the world
direction ``d`` (any point of the supporting face when it is not unique). ``kind`` is a static
core name, or ``"any"`` to dispatch on the shape's integer ``code`` at run time (one compiled
solver for a batch of mixed kinds). The margin ball (``shape.radius``) is not included:
callers subtract radii from core distances, which is exact for a Minkowski sum with a ball.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from caliper_jax.collision.geometry import KINDS
from caliper_jax.spatial import mtv, mv

#: Integer codes of the core kinds (``Shape.code``).
CODE = {k: i for i, k in enumerate(KINDS)}


class Shape(NamedTuple):
    """One collider posed in the world: ``R`` (3, 3), ``p`` (3,), ``radius`` (), ``half`` (3,),
    ``code`` (kind code, int) and ``verts`` (V, 3): hull vertices in the collider frame (padded
    by repetition; a (1, 3) placeholder when no shape of the batch is a hull)."""

    R: jnp.ndarray
    p: jnp.ndarray
    radius: jnp.ndarray
    half: jnp.ndarray
    code: jnp.ndarray
    verts: jnp.ndarray


def safe_norm(x, axis=-1):
    """|x| with a zero (not NaN) gradient at x = 0 (double-where guard)."""
    sq = jnp.sum(x * x, axis=axis)
    ok = sq > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, sq, 1.0)), 0.0)


def _local(kind: str, shape: Shape, dl):
    half = shape.half
    zero = jnp.zeros((), dl.dtype)
    if kind == "point":
        return jnp.zeros(3, dl.dtype)
    if kind == "segment":
        return jnp.stack([zero, zero, jnp.where(dl[2] >= 0, half[2], -half[2])])
    if kind == "box":
        return jnp.where(dl >= 0, half, -half)
    if kind == "cylinder":
        rho = safe_norm(dl[:2])
        ok = rho > 0
        scale = jnp.where(ok, half[0] / jnp.where(ok, rho, 1.0), 0.0)
        return jnp.stack([dl[0] * scale, dl[1] * scale, jnp.where(dl[2] >= 0, half[2], -half[2])])
    if kind == "hull":
        verts = shape.verts
        return verts[jnp.argmax(jnp.sum(verts * dl, -1))]
    raise ValueError(f"no support function for core kind {kind!r}")


def support_local(kind: str, shape: Shape, dl):
    """Support point of the core in its own frame for a local direction ``dl`` (3,)."""
    if kind != "any":
        return _local(kind, shape, dl)
    # one formula for every kind: a box part sign(d) * b, a disc part of radius rd in the local xy
    # plane, and a hull vertex; each kind zeroes the parts it lacks (point: all; segment: b = (0, 0,
    # h); box: b = half; cylinder: b = (0, 0, h) and rd = radius; hull: only the vertex)
    code = shape.code
    half = shape.half
    is_cyl = code == CODE["cylinder"]
    axial = (code == CODE["segment"]) | is_cyl
    zero = jnp.zeros((), dl.dtype)
    b = jnp.where(code == CODE["box"], half, jnp.where(axial, jnp.stack([zero, zero, half[2]]), 0.0))
    out = jnp.where(dl >= 0, b, -b)
    rho = safe_norm(dl[:2])
    ok = is_cyl & (rho > 0)
    scale = jnp.where(ok, half[0] / jnp.where(ok, rho, 1.0), 0.0)
    out = out + jnp.stack([dl[0] * scale, dl[1] * scale, zero])
    if shape.verts.shape[0] > 1:
        verts = shape.verts
        out = out + jnp.where(code == CODE["hull"], verts[jnp.argmax(jnp.sum(verts * dl, -1))], 0.0)
    return out


def support(kind: str, shape: Shape, d):
    """Support point of the posed core along the world direction ``d``."""
    if kind == "point":
        return shape.p
    return shape.p + mv(shape.R, support_local(kind, shape, mtv(shape.R, d)))


def to_local(shape: Shape, x):
    """World point -> collider frame."""
    return mtv(shape.R, x - shape.p)


def to_world(shape: Shape, x):
    return shape.p + mv(shape.R, x)
