"""Host-side colliders: the model's collision geometry and world obstacles as convex *cores*.

Every collider is a convex core grown by a ball of ``radius`` (a Minkowski sum), so one support
function per core kind serves every shape:

=========  ======================================  ===================================
core       shape                                    parameters
=========  ======================================  ===================================
point      sphere                                   radius
segment    capsule (axis along the local z)         radius, ``half[2]`` = half length
box        box                                      ``half`` = half extents
cylinder   cylinder (axis along the local z)        ``half[0]`` = radius, ``half[2]`` = half length
hull       convex hull of a mesh's vertices         ``vertices`` (V, 3); radius >= 0 covers a reduction
halfspace  {x : n . (x - p) <= 0}, n = R[:, 2]      (obstacles only: ground planes, walls)
=========  ======================================  ===================================

Geometry that cannot be turned into a collider (unresolved or unreadable meshes, unknown kinds,
degenerate sizes) and links without collision geometry are returned as :class:`Uncovered`
entries: nothing is dropped silently. NumPy only (meshes load through trimesh, hulls through
scipy, both imported lazily).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from caliper_jax.errors import CaliperError

KINDS = ("point", "segment", "box", "cylinder", "hull", "halfspace")
#: The reference system's cap on collision-mesh hull vertices (A006); larger hulls are reduced.
MAX_HULL_VERTICES = 1024


@dataclass(frozen=True, eq=False)
class Collider:
    """One convex collider in its body's frame (``body`` -1: fixed in the world)."""

    name: str
    body: int
    kind: str
    R: np.ndarray
    p: np.ndarray
    radius: float = 0.0
    half: np.ndarray = field(default_factory=lambda: np.zeros(3))
    vertices: np.ndarray | None = None   # hull vertices in the collider frame
    faces: np.ndarray | None = None      # hull triangles (indices into vertices)
    geom: int = -1                       # index into model.geoms, -1 for obstacles
    obstacle: bool = False
    note: str = ""                       # e.g. how a large hull was reduced

    def describe(self) -> dict:
        out = {"name": self.name, "kind": self.kind, "body": self.body, "radius": float(self.radius),
               "p": [float(x) for x in self.p]}
        if self.kind in ("box", "segment", "cylinder"):
            out["half"] = [float(x) for x in self.half]
        if self.kind == "hull":
            out["vertices"] = int(self.vertices.shape[0])
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class Uncovered:
    """A link (frame) that collision checking does not cover, and why."""

    link: str
    reason: str

    def to_dict(self) -> dict:
        return {"link": self.link, "reason": self.reason}


# ---- obstacles ---------------------------------------------------------------------------------

def _vec(x, n, what):
    arr = np.asarray(x, dtype=np.float64).reshape(-1)
    if arr.shape != (n,) or not np.all(np.isfinite(arr)):
        raise CaliperError(f"{what}: expected {n} finite numbers, got {x!r}")
    return arr


def _rotation(R, what):
    if R is None:
        return np.eye(3)
    R = np.asarray(R, dtype=np.float64)
    if R.shape != (3, 3) or not np.all(np.isfinite(R)) or not np.allclose(R.T @ R, np.eye(3), atol=1e-6) \
            or np.linalg.det(R) < 0:
        raise CaliperError(f"{what}: R must be a 3x3 rotation matrix")
    return R


def box(center, half, R=None, name: str = "box") -> Collider:
    """A box obstacle: ``center`` (3,), ``half`` extents (3,) > 0, optional rotation ``R``."""
    half = _vec(half, 3, f"obstacle {name!r} half extents")
    if np.any(half <= 0):
        raise CaliperError(f"obstacle {name!r}: half extents must be > 0, got {half.tolist()}")
    return Collider(name, -1, "box", _rotation(R, f"obstacle {name!r}"),
                    _vec(center, 3, f"obstacle {name!r} center"), half=half, obstacle=True)


def sphere(center, radius: float, name: str = "sphere") -> Collider:
    if not (np.isfinite(radius) and radius > 0):
        raise CaliperError(f"obstacle {name!r}: radius must be > 0, got {radius!r}")
    return Collider(name, -1, "point", np.eye(3), _vec(center, 3, f"obstacle {name!r} center"),
                    radius=float(radius), obstacle=True)


def capsule(center, radius: float, half_length: float, R=None, name: str = "capsule") -> Collider:
    if not (np.isfinite(radius) and radius > 0 and np.isfinite(half_length) and half_length >= 0):
        raise CaliperError(f"obstacle {name!r}: need radius > 0 and half length >= 0")
    return Collider(name, -1, "segment", _rotation(R, f"obstacle {name!r}"),
                    _vec(center, 3, f"obstacle {name!r} center"), radius=float(radius),
                    half=np.array([0.0, 0.0, float(half_length)]), obstacle=True)


def halfspace(normal, offset: float, name: str = "halfspace") -> Collider:
    """The solid {x : normal . x <= offset} (``normal`` need not be unit)."""
    n = _vec(normal, 3, f"obstacle {name!r} normal")
    norm = float(np.linalg.norm(n))
    if norm < 1e-12:
        raise CaliperError(f"obstacle {name!r}: normal must be non-zero")
    n = n / norm
    helper = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, n)
    x /= np.linalg.norm(x)
    R = np.stack([x, np.cross(n, x), n], axis=1)
    return Collider(name, -1, "halfspace", R, n * (float(offset) / norm), obstacle=True)


def ground(z: float = 0.0, name: str = "ground") -> Collider:
    """The ground: everything below height ``z`` is solid."""
    if not np.isfinite(z):
        raise CaliperError(f"ground height must be finite, got {z!r}")
    return halfspace((0.0, 0.0, 1.0), float(z), name)


def _numbers(text: str, flag: str, layout: str) -> list:
    parts = [p for p in str(text).replace(",", " ").split() if p]
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        raise CaliperError(f"{flag}: not a list of numbers: {text!r}") from None
    if len(vals) != layout.count(",") + 1:
        raise CaliperError(f"{flag}: expected {layout} ({layout.count(',') + 1} numbers), got {len(vals)}")
    return vals


def parse_box(text: str) -> Collider:
    """``"cx,cy,cz,hx,hy,hz"`` -> a box obstacle (the CLI's ``--box``)."""
    vals = _numbers(text, "--box", "cx,cy,cz,hx,hy,hz")
    return box(vals[:3], vals[3:], name=f"box({text})")


def parse_sphere(text: str) -> Collider:
    """``"cx,cy,cz,r"`` -> a sphere obstacle (the CLI's ``--sphere``)."""
    vals = _numbers(text, "--sphere", "cx,cy,cz,r")
    return sphere(vals[:3], vals[3], name=f"sphere({text})")


# ---- meshes -> hulls -------------------------------------------------------------------------

def _load_vertices(path: str) -> np.ndarray:
    try:
        import trimesh
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("trimesh is not installed (pip install trimesh)") from exc
    mesh = trimesh.load(path, force="mesh", process=False)
    verts = np.asarray(getattr(mesh, "vertices", np.zeros((0, 3))), dtype=np.float64)
    if verts.ndim != 2 or verts.shape[0] < 4:
        raise RuntimeError("mesh has fewer than 4 vertices")
    return verts


def convex_hull(points: np.ndarray):
    """(hull vertices (V, 3), triangles (F, 3) indexing them) of a point cloud, via scipy."""
    try:
        from scipy.spatial import ConvexHull, QhullError
    except ImportError as exc:  # pragma: no cover
        raise RuntimeError("scipy is not installed (pip install scipy)") from exc
    points = np.asarray(points, dtype=np.float64)
    try:
        hull = ConvexHull(points)
    except QhullError as exc:
        first = str(exc).splitlines()[0]
        raise RuntimeError(f"degenerate (flat) geometry, no convex hull: {first}") from None
    idx = hull.vertices
    remap = -np.ones(points.shape[0], dtype=np.int64)
    remap[idx] = np.arange(idx.size)
    return points[idx], remap[hull.simplices]


def reduce_hull(vertices: np.ndarray, cap: int):
    """Keep at most ``cap`` hull vertices (farthest-point order, deterministic) and return
    ``(vertices, faces, inflation)`` where the reduced hull grown by ``inflation`` covers the
    original: ``inflation`` is an upper bound on the distance of every dropped vertex to it."""
    n = vertices.shape[0]
    if n <= cap:
        v, f = convex_hull(vertices)
        return v, f, 0.0
    centroid = vertices.mean(axis=0)
    chosen = [int(np.argmax(np.linalg.norm(vertices - centroid, axis=1)))]
    dmin = np.linalg.norm(vertices - vertices[chosen[0]], axis=1)
    while len(chosen) < cap:
        k = int(np.argmax(dmin))
        chosen.append(k)
        dmin = np.minimum(dmin, np.linalg.norm(vertices - vertices[k], axis=1))
    kept = vertices[np.array(chosen)]
    v, f = convex_hull(kept)
    # distance to the nearest kept vertex bounds the distance to the reduced hull from above
    return v, f, float(np.max(dmin))


# ---- the robot's colliders ---------------------------------------------------------------------

def _geom_collider(g, index: int, max_hull_vertices: int) -> Collider:
    R = np.asarray(g.R, dtype=np.float64)
    p = np.asarray(g.p, dtype=np.float64)
    size = np.asarray(g.size, dtype=np.float64)
    if not np.all(np.isfinite(size)):
        raise RuntimeError(f"non-finite size {size.tolist()}")
    if g.kind == "sphere":
        if size[0] <= 0:
            raise RuntimeError(f"sphere radius {size[0]} <= 0")
        return Collider(g.link, g.body, "point", R, p, radius=float(size[0]), geom=index)
    if g.kind == "capsule":
        if size[0] <= 0 or size[1] < 0:
            raise RuntimeError(f"capsule size {size.tolist()} is degenerate")
        return Collider(g.link, g.body, "segment", R, p, radius=float(size[0]),
                        half=np.array([0.0, 0.0, size[1]]), geom=index)
    if g.kind == "cylinder":
        if size[0] <= 0 or size[1] <= 0:
            raise RuntimeError(f"cylinder size {size.tolist()} is degenerate")
        return Collider(g.link, g.body, "cylinder", R, p, half=np.array([size[0], size[0], size[1]]),
                        geom=index)
    if g.kind == "box":
        if np.any(size[:3] <= 0):
            raise RuntimeError(f"box half extents {size[:3].tolist()} are degenerate")
        return Collider(g.link, g.body, "box", R, p, half=size[:3].copy(), geom=index)
    if g.kind == "mesh":
        if g.mesh is None:
            tried = f" (tried {', '.join(g.tried)})" if g.tried else ""
            raise RuntimeError(f"collision mesh {g.mesh_uri!r} cannot be resolved{tried}")
        try:
            verts = _load_vertices(g.mesh)
        except RuntimeError:
            raise
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
            raise RuntimeError(f"collision mesh {g.mesh} cannot be loaded ({why})") from None
        scale = size[:3] if size.size >= 3 else np.ones(3)
        hv, _ = convex_hull(verts * scale)
        v, f, inflation = reduce_hull(hv, max_hull_vertices)
        note = ""
        if inflation > 0:
            note = (f"hull of {hv.shape[0]} vertices reduced to {v.shape[0]}, grown by {inflation:.4g} m "
                    "to stay conservative")
        return Collider(g.link, g.body, "hull", R, p, radius=inflation, vertices=v, faces=f, geom=index,
                        note=note)
    raise RuntimeError(f"unsupported collision geometry kind {g.kind!r}")


def robot_colliders(model, max_hull_vertices: int = MAX_HULL_VERTICES):
    """Colliders for every usable collision geom of ``model`` plus the uncovered links.

    Returns ``(colliders, uncovered)``. A link is uncovered when it has no collision geometry
    (reason says whether it has visual geometry) or when one of its collision geoms cannot be
    used (reason names the geom and why).
    """
    if max_hull_vertices < 4:
        raise CaliperError(f"max_hull_vertices must be >= 4, got {max_hull_vertices}")
    colliders, uncovered = [], []
    covered = set()
    for i, g in enumerate(model.geoms):
        if g.role != "collision":
            continue
        try:
            colliders.append(_geom_collider(g, i, max_hull_vertices))
            covered.add(g.link)
        except RuntimeError as exc:
            uncovered.append(Uncovered(g.link, f"{g.kind} geom #{i} not checked: {exc}"))
    failed = {u.link for u in uncovered}
    visual = {g.link for g in model.geoms if g.role == "visual"}
    for name, kind in zip(model.frame_names, model.frame_kind, strict=True):
        if kind != "link" or name in covered or name in failed:
            continue
        reason = "visual geometry only, no collision geometry" if name in visual else "no collision geometry"
        uncovered.append(Uncovered(name, reason))
    return colliders, uncovered
