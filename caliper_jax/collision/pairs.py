"""Signed distance between two posed colliders, with normal and witness points.

Two steps, so that distances are exact *and* safely differentiable:

1. :func:`solve` finds the contact certificate -- the unit normal ``n`` from A to B and witness
   points ``a``, ``b`` on the two cores -- with closed forms (sphere/capsule pairs, sphere-box,
   anything-half-space) or GJK/EPA (every other convex pair). It runs on stop-gradient inputs.
2. :func:`certify` re-expresses the witnesses in their colliders' frames and evaluates
   ``d = n . (b - a) - r_A - r_B`` on the differentiable poses. The signed distance is
   ``max_n min_{a, b} n . (b - a)`` (minus radii), so by Danskin's theorem its derivative with
   respect to the poses is the derivative of this expression with the certificate held fixed.
   Where the witnesses are unique (almost everywhere) that is the exact gradient; at a face-face
   contact the distance has a kink in the rotation and any witness gives a subgradient. No
   square root is differentiated, so the gradient is NaN-free.

Pairs use a canonical kind order (point < segment < box < cylinder < hull < halfspace): A is the
lower kind. Positive distance: separation; negative: penetration depth.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from caliper_jax.collision.geometry import KINDS
from caliper_jax.collision.gjk import EPA_ITERATIONS, GJK_ITERATIONS, epa, gjk, tolerances
from caliper_jax.collision.support import Shape, support, to_local, to_world
from caliper_jax.spatial import cross, mtv, mv

KIND_ORDER = {k: i for i, k in enumerate(KINDS)}
_ROUND = ("point", "segment")


class Witness(NamedTuple):
    normal: jnp.ndarray     # unit, from A to B
    a: jnp.ndarray          # witness on A's core (world)
    b: jnp.ndarray          # witness on B's core (world)
    intersect: jnp.ndarray  # the cores overlap (GJK) -- meaningful for yes/no checks


class Contact(NamedTuple):
    """Signed distance ``distance`` (> 0 apart, < 0 penetrating), unit ``normal`` from A to B,
    witness points on the surfaces of A and B (``point_b - point_a = distance * normal``)."""

    distance: jnp.ndarray
    normal: jnp.ndarray
    point_a: jnp.ndarray
    point_b: jnp.ndarray


def canonical(kind_a: str, kind_b: str) -> bool:
    """True when (kind_a, kind_b) is already in canonical order ("any" never precedes
    "halfspace")."""
    if "any" in (kind_a, kind_b):
        return kind_a != "halfspace"
    return KIND_ORDER[kind_a] <= KIND_ORDER[kind_b]


def _unit(x, fallback):
    n2 = x @ x
    ok = n2 > jnp.finfo(x.dtype).tiny
    return jnp.where(ok, x / jnp.sqrt(jnp.where(ok, n2, 1.0)), fallback)


def _perpendicular(u):
    axis = jnp.eye(3, dtype=u.dtype)[jnp.argmin(jnp.abs(u))]
    return _unit(cross(u, axis), jnp.array([0.0, 0.0, 1.0], u.dtype))


def _ends(kind, S: Shape):
    if kind == "point":
        return S.p, S.p
    axis = S.R[:, 2] * S.half[2]
    return S.p - axis, S.p + axis


def closest_segments(p1, q1, p2, q2):
    """Closest points (c1, c2) of segments [p1, q1] and [p2, q2]; either may be a point."""
    _, eps = tolerances(p1.dtype)
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e, f = d1 @ d1, d2 @ d2, d2 @ r
    c, b = d1 @ r, d1 @ d2
    size = a + e + r @ r
    a_ok, e_ok = a > eps * eps * size, e > eps * eps * size
    a_s, e_s = jnp.where(a_ok, a, 1.0), jnp.where(e_ok, e, 1.0)
    denom = a * e - b * b
    d_ok = denom > 64 * eps * a * e
    s = jnp.where(d_ok, jnp.clip((b * f - c * e) / jnp.where(d_ok, denom, 1.0), 0.0, 1.0), 0.0)
    t = (b * s + f) / e_s
    s = jnp.where(t < 0, jnp.clip(-c / a_s, 0.0, 1.0), jnp.where(t > 1, jnp.clip((b - c) / a_s, 0.0, 1.0), s))
    t = jnp.clip(t, 0.0, 1.0)
    # degenerate segments
    s = jnp.where(a_ok, jnp.where(e_ok, s, jnp.clip(-c / a_s, 0.0, 1.0)), 0.0)
    t = jnp.where(e_ok, jnp.where(a_ok, t, jnp.clip(f / e_s, 0.0, 1.0)), 0.0)
    return p1 + s * d1, p2 + t * d2


def _solve_round(kind_a, kind_b, A, B) -> Witness:
    p1, q1 = _ends(kind_a, A)
    p2, q2 = _ends(kind_b, B)
    a, b = closest_segments(p1, q1, p2, q2)
    d1, d2 = q1 - p1, q2 - p2
    fallback = _unit(cross(d1, d2), _perpendicular(_unit(d1 + d2, jnp.array([1.0, 0.0, 0.0], a.dtype))))
    n = _unit(b - a, fallback)
    return Witness(n, a, b, (b - a) @ (b - a) <= 0)


def _solve_point_box(A, B) -> Witness:
    x = mtv(B.R, A.p - B.p)
    h = B.half
    q = jnp.abs(x) - h
    outside = jnp.max(q) > 0
    clamped = jnp.clip(x, -h, h)
    sgn = jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype)
    k = jnp.argmax(q)
    onek = jnp.arange(3) == k
    face = jnp.where(onek, sgn * h, x)
    n_in = jnp.where(onek, -sgn, 0.0)
    diff = clamped - x
    n_loc = jnp.where(outside, _unit(diff, n_in), n_in)
    b_loc = jnp.where(outside, clamped, face)
    return Witness(mv(B.R, n_loc), A.p, B.p + mv(B.R, b_loc), ~outside)


def _solve_halfspace(kind_a, A, B) -> Witness:
    m = B.R[:, 2]
    a = support(kind_a, A, -m)
    s = m @ (a - B.p)
    return Witness(-m, a, a - s * m, s <= 0)


def solve(kind_a: str, kind_b: str, A: Shape, B: Shape, *, depth: bool = True,
          stop_above=None, gjk_iterations: int = GJK_ITERATIONS,
          epa_iterations: int = EPA_ITERATIONS) -> Witness:
    """Contact certificate of A and B (kinds in canonical order), not differentiated.

    A kind may be ``"any"`` (dispatch on ``Shape.code`` at run time). ``depth=False`` skips EPA:
    overlapping cores then get an arbitrary normal and only ``intersect`` is meaningful.
    ``stop_above`` (core distance) lets GJK stop once the cores are proven farther apart than that
    (yes/no checks).
    """
    if not canonical(kind_a, kind_b):
        raise ValueError(f"pair ({kind_a}, {kind_b}) is not in canonical order")
    if kind_a == "halfspace" and kind_b == "halfspace":
        raise ValueError("half-space against half-space is not supported")
    A, B = jax.lax.stop_gradient((A, B))
    if kind_b == "halfspace":
        return _solve_halfspace(kind_a, A, B)
    if kind_a in _ROUND and kind_b in _ROUND:
        return _solve_round(kind_a, kind_b, A, B)
    if kind_a == "point" and kind_b == "box":
        return _solve_point_box(A, B)

    def sup(d):
        sa = support(kind_a, A, d)
        sb = support(kind_b, B, -d)
        return sa - sb, sa, sb

    g = gjk(sup, B.p - A.p, max_iter=gjk_iterations, stop_above=stop_above)
    n_sep = _unit(-g.v, _unit(B.p - A.p, jnp.array([1.0, 0.0, 0.0], A.p.dtype)))
    if not depth:
        return Witness(n_sep, g.a, g.b, g.intersect)
    e = epa(sup, g, iterations=epa_iterations)
    pick = lambda x, y: jnp.where(g.intersect, x, y)
    return Witness(pick(e.normal, n_sep), pick(e.a, g.a), pick(e.b, g.b), g.intersect)


def certify(A: Shape, B: Shape, w: Witness) -> Contact:
    """Differentiable signed distance from a fixed certificate (see the module docstring)."""
    n = jax.lax.stop_gradient(w.normal)
    a_loc = jax.lax.stop_gradient(to_local(A, w.a))
    b_loc = jax.lax.stop_gradient(to_local(B, w.b))
    a, b = to_world(A, a_loc), to_world(B, b_loc)
    dist = n @ (b - a) - A.radius - B.radius
    return Contact(dist, n, a + A.radius * n, b - B.radius * n)


def signed_distance(kind_a: str, kind_b: str, A: Shape, B: Shape, **kw) -> Contact:
    """Signed distance of two posed colliders in either kind order (normal from A to B)."""
    if canonical(kind_a, kind_b):
        return certify(A, B, solve(kind_a, kind_b, A, B, **kw))
    c = certify(B, A, solve(kind_b, kind_a, B, A, **kw))
    return Contact(c.distance, -c.normal, c.point_b, c.point_a)
