"""Automatic sphere approximation of a robot's colliders (host side, NumPy).

Every collider is covered by a few spheres strung along its principal axis, so distance queries
become sphere-sphere / sphere-box closed forms -- cheap, smooth and easy to batch (CHOMP uses them).
The cover is *conservative*: the union of a collider's spheres contains the collider, so a sphere
distance never exceeds the true distance.

* sphere: itself;
* capsule: ``k`` spheres on the axis, spacing ``s``, radius ``sqrt(r^2 + (s/2)^2)``;
* box, cylinder (as its circumscribed 32-gon prism) and mesh hull: the convex polytope is cut into
  ``k`` slabs across its principal axis (longest box axis, cylinder axis, or the hull's first
  principal component); each slab's polytope is the hull of the vertices inside it and of the
  edge crossings of its two planes, and its sphere is centred on that point set's bounding-box
  centre with the radius reaching its farthest point -- a ball covering those points covers their
  hull.

``k`` (at most ``max_per_collider``) is the smallest count within 5% of the least
over-approximation over 1..``max_per_collider`` slabs -- long thin bodies get many spheres, squat
ones few (more slabs shrink the radial bulge but grow the overshoot past the ends). The
over-approximation -- how far the spheres reach beyond the geometry -- is measured per collider:
the largest distance outside the collider over each sphere's surface, from a sweep of 512
directions refined by local search around the four worst; the distance is exact for boxes,
capsules and cylinders, and measured against the facet planes for hulls (exact where the nearest
feature is a face, a slight underestimate near edges).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.collision.geometry import Collider, convex_hull

_DIRS = 512


@dataclass(frozen=True)
class SphereFit:
    """How one collider was covered: ``count`` spheres reaching at most ``excess`` metres
    beyond it."""

    name: str
    kind: str
    count: int
    excess: float

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "spheres": self.count, "excess": self.excess}


def _fibonacci(n: int) -> np.ndarray:
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    r = np.sqrt(1 - z * z)
    phi = np.pi * (1 + 5 ** 0.5) * i
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], -1)


def _polytope(c: Collider):
    """Vertices and triangles (collider frame) of a box, cylinder prism or hull."""
    if c.kind == "box":
        h = c.half
        corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]) * h
        return convex_hull(corners)
    if c.kind == "cylinder":
        n = 32
        r = c.half[0] / np.cos(np.pi / n)       # circumscribed polygon
        ang = 2 * np.pi * np.arange(n) / n
        ring = np.stack([r * np.cos(ang), r * np.sin(ang), np.zeros(n)], -1)
        pts = np.concatenate([ring + [0, 0, c.half[2]], ring - [0, 0, c.half[2]]])
        return convex_hull(pts)
    return c.vertices, c.faces


def _principal_axis(c: Collider, verts: np.ndarray) -> np.ndarray:
    if c.kind == "box":
        return np.eye(3)[int(np.argmax(c.half))]
    if c.kind == "cylinder":
        return np.array([0.0, 0.0, 1.0]) if c.half[2] >= c.half[0] else np.array([1.0, 0.0, 0.0])
    centred = verts - verts.mean(axis=0)
    w, v = np.linalg.eigh(centred.T @ centred)
    return v[:, -1]


def _slab_spheres(verts, faces, axis, k):
    edges = np.unique(np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1),
                      axis=0)
    t = verts @ axis
    lo, hi = float(t.min()), float(t.max())
    cuts = np.linspace(lo, hi, k + 1)
    # an orthonormal frame (axis, e1, e2) for bounding boxes
    helper = np.eye(3)[int(np.argmin(np.abs(axis)))]
    e1 = np.cross(axis, helper)
    e1 /= np.linalg.norm(e1)
    frame = np.stack([axis, e1, np.cross(axis, e1)])
    centres, radii = [], []
    ta, tb = t[edges[:, 0]], t[edges[:, 1]]
    for i in range(k):
        a, b = cuts[i], cuts[i + 1]
        pts = [verts[(t >= a - 1e-12) & (t <= b + 1e-12)]]
        for plane in (a, b):
            cross = (np.minimum(ta, tb) < plane) & (np.maximum(ta, tb) > plane)
            if np.any(cross):
                e = edges[cross]
                s = ((plane - t[e[:, 0]]) / (t[e[:, 1]] - t[e[:, 0]]))[:, None]
                pts.append(verts[e[:, 0]] + s * (verts[e[:, 1]] - verts[e[:, 0]]))
        pts = np.concatenate(pts)
        local = pts @ frame.T
        centre = ((local.min(axis=0) + local.max(axis=0)) / 2) @ frame
        centres.append(centre)
        radii.append(float(np.max(np.linalg.norm(pts - centre, axis=1))) * (1 + 1e-9) + 1e-12)
    return np.array(centres), np.array(radii)


def _outside(c: Collider, pts, verts, faces):
    """Distance of points (m, 3) outside the collider (0 inside); facet planes for hulls."""
    if c.kind == "segment":
        z = np.clip(pts[:, 2], -c.half[2], c.half[2])
        return np.maximum(np.linalg.norm(pts - np.stack([0 * z, 0 * z, z], -1), axis=1) - c.radius, 0.0)
    if c.kind == "box":
        return np.linalg.norm(np.maximum(np.abs(pts) - c.half, 0.0), axis=1)
    if c.kind == "cylinder":
        dr = np.maximum(np.linalg.norm(pts[:, :2], axis=1) - c.half[0], 0.0)
        dz = np.maximum(np.abs(pts[:, 2]) - c.half[2], 0.0)
        return np.hypot(dr, dz)
    v0, v1, v2 = verts[faces[:, 0]], verts[faces[:, 1]], verts[faces[:, 2]]
    n = np.cross(v1 - v0, v2 - v0)
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    flip = np.sum(n * (v0 - verts.mean(axis=0)), axis=1) < 0
    n[flip] *= -1
    b = np.sum(n * v0, axis=1)
    return np.maximum(np.max(pts @ n.T - b[None, :], axis=1) - c.radius, 0.0)


def _excess(c: Collider, centres, radii, verts, faces, refine: bool = True) -> float:
    """max over the spheres' surfaces of the distance outside the collider: a coarse sweep of
    directions, then the best few refined by shrinking local searches."""
    if c.kind == "point":
        return 0.0
    dirs = _fibonacci(_DIRS)
    local = _fibonacci(64)
    best = 0.0
    for ctr, r in zip(centres, radii, strict=True):
        val = _outside(c, ctr + r * dirs, verts, faces)
        starts = dirs[np.argsort(val)[-4:]]
        best = max(best, float(val.max()))
        for u in (starts if refine else ()):
            step = 0.2
            for _ in range(14):
                cand = u + step * local
                cand /= np.linalg.norm(cand, axis=1, keepdims=True)
                v = _outside(c, ctr + r * cand, verts, faces)
                k = int(np.argmax(v))
                if v[k] > float(_outside(c, (ctr + r * u)[None], verts, faces)[0]):
                    u = cand[k]
                best = max(best, float(v[k]))
                step *= 0.5
    return best


def fit_collider(c: Collider, max_per_collider: int = 8):
    """(centres (k, 3) in the collider frame, radii (k,), excess) covering one collider."""
    if c.kind == "point":
        return np.zeros((1, 3)), np.array([c.radius]), 0.0
    if c.kind == "segment":
        r, h = c.radius, c.half[2]
        k = int(np.clip(np.ceil(2 * h / (0.9 * r)) + 1, 1, max_per_collider)) if h > 0 else 1
        z = np.linspace(-h, h, k) if k > 1 else np.zeros(1)
        s = 2 * h / (k - 1) if k > 1 else 2 * h
        rho = np.sqrt(r * r + (s / 2) ** 2) if k > 1 else r + h
        centres = np.stack([0 * z, 0 * z, z], -1)
        radii = np.full(k, rho)
        return centres, radii, _excess(c, centres, radii, None, None)
    if c.kind == "halfspace":
        raise ValueError("half-spaces have no sphere approximation")
    verts, faces = _polytope(c)
    axis = _principal_axis(c, verts)
    best = None
    for k in range(1, max_per_collider + 1):
        centres, radii = _slab_spheres(verts, faces, axis, k)
        radii = radii + c.radius   # a hull's conservative inflation carries over
        excess = _excess(c, centres, radii, verts, faces, refine=False)
        if best is None or excess < 0.95 * best[2]:
            best = (centres, radii, excess)
    centres, radii, _ = best
    return centres, radii, _excess(c, centres, radii, verts, faces)


def sphere_colliders(colliders, max_per_collider: int = 8):
    """Sphere colliders (kind ``point``, same bodies and link names) covering ``colliders``,
    and one :class:`SphereFit` per collider."""
    out, fits = [], []
    for c in colliders:
        centres, radii, excess = fit_collider(c, max_per_collider)
        for ctr, r in zip(centres, radii, strict=True):
            out.append(Collider(c.name, c.body, "point", np.eye(3), c.R @ ctr + c.p, radius=float(r),
                                geom=c.geom))
        fits.append(SphereFit(c.name, c.kind, len(radii), float(excess)))
    return out, fits
