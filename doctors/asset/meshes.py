"""Mesh files: resolution with every candidate recorded, and loading to a triangle array.

STL (binary and ASCII) and OBJ are read with NumPy. Other formats go through trimesh when it is
installed and supports them; otherwise the file is reported as found but unchecked.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from caliper_jax.io import meshpath as paths

_STL_RECORD = np.dtype([("normal", "<f4", (3,)), ("vertices", "<f4", (3, 3)), ("attr", "<u2")])
_STL_VERTEX = re.compile(rb"vertex\s+(\S+)\s+(\S+)\s+(\S+)")
_OBJ_VERTEX = re.compile(rb"^[ \t]*v[ \t]+(\S+)[ \t]+(\S+)[ \t]+(\S+)", re.M)
_OBJ_FACE = re.compile(rb"^[ \t]*f[ \t]+([^\r\n]*)", re.M)
_OBJ_SUFFIX = re.compile(rb"/\S*")


class MeshLoadError(Exception):
    """The file exists but is not a readable mesh."""


@dataclass(frozen=True)
class Resolution:
    url: str
    path: Path | None
    tried: tuple[Path, ...]


class Meshes:
    """Resolves and loads the meshes of one document, each file at most once."""

    def __init__(self, base_dir: Path, roots: Sequence[Path] = ()):
        self.base_dir = base_dir
        self.roots = tuple(Path(r) for r in roots)
        self._resolved: dict[str, Resolution] = {}
        self._loaded: dict[Path, np.ndarray | None | MeshLoadError] = {}
        self._vertex_counts: dict[Path, int] = {}
        self.unchecked: list[str] = []

    def resolve(self, url: str) -> Resolution:
        if url not in self._resolved:
            path, tried = paths.resolve(url, self.base_dir, self.roots)
            self._resolved[url] = Resolution(url, path, tuple(tried))
        return self._resolved[url]

    def triangles(self, path: Path) -> np.ndarray | None:
        """(m, 3, 3) float64 triangles; None when no reader handles the format."""
        if path not in self._loaded:
            try:
                self._loaded[path] = read_triangles(path)
            except MeshLoadError as exc:
                self._loaded[path] = exc
            if self._loaded[path] is None:
                self.unchecked.append(str(path))
        result = self._loaded[path]
        if isinstance(result, MeshLoadError):
            raise result
        return result

    def vertex_count(self, path: Path) -> int | None:
        """Distinct vertices of the mesh at ``path`` (None when unchecked)."""
        if path not in self._vertex_counts:
            tris = self.triangles(path)
            if tris is None:
                return None
            self._vertex_counts[path] = len(merge(tris)[0])
        return self._vertex_counts[path]


def merge(triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct vertices (exact equality, -0.0 == 0.0) and the (m, 3) faces indexing them.

    Points are grouped by a 64-bit hash of their bits (one 1-D sort); the grouping is then
    verified exactly, falling back to a row sort in the astronomically rare case of a collision.
    """
    points = np.asarray(triangles, dtype=np.float64).reshape(-1, 3) + 0.0
    key = np.zeros(len(points), dtype=np.uint64)
    for column in points.view(np.uint64).T:
        key = _mix(key ^ column)
    order = np.argsort(key)
    starts = np.ones(len(key), dtype=bool)
    starts[1:] = key[order[1:]] != key[order[:-1]]
    inverse = np.empty(len(key), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    vertices = points[order[starts]]
    if not np.array_equal(vertices[inverse], points):
        vertices, inverse = np.unique(points, axis=0, return_inverse=True)
    return vertices, inverse.reshape(-1, 3)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: every input bit affects every output bit."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def read_triangles(path: Path) -> np.ndarray | None:
    """Load ``path`` as triangles; None for formats without a reader; MeshLoadError when broken."""
    ext = path.suffix.lower().lstrip(".")
    if ext in ("stl", "obj"):
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise MeshLoadError(f"cannot read file ({exc.strerror or exc})") from None
        tris = _stl(data) if ext == "stl" else _obj(data)
    else:
        tris = _with_trimesh(path, ext)
        if tris is None:
            return None
    if tris.size == 0:
        raise MeshLoadError("mesh has no triangles")
    if not np.all(np.isfinite(tris)):
        raise MeshLoadError("mesh has non-finite vertex coordinates")
    return tris


def _stl(data: bytes) -> np.ndarray:
    count = int.from_bytes(data[80:84], "little") if len(data) >= 84 else -1
    size = 84 + 50 * count
    ascii_like = data.lstrip()[:5].lower() == b"solid"
    if len(data) == size or (not ascii_like and count > 0 and size <= len(data)):
        records = np.frombuffer(data, dtype=_STL_RECORD, count=count, offset=84)
        return records["vertices"].astype(np.float64)
    if not ascii_like:
        raise MeshLoadError("neither a binary STL (size does not match the triangle count) nor ASCII STL")
    values = _STL_VERTEX.findall(data)
    if not values or len(values) % 3:
        raise MeshLoadError("ASCII STL without complete facets")
    try:
        return np.array(values).astype(np.float64).reshape(-1, 3, 3)
    except ValueError:
        raise MeshLoadError("ASCII STL with a non-numeric vertex") from None


def _obj(data: bytes) -> np.ndarray:
    """OBJ ``v`` and ``f`` records (polygons fanned; negative indices count back from the face)."""
    try:
        points = np.array(_OBJ_VERTEX.findall(data), dtype=bytes).astype(np.float64).reshape(-1, 3)
        faces = list(_OBJ_FACE.finditer(data))
        tokens = [_OBJ_SUFFIX.sub(b"", face.group(1)).split() for face in faces]
        sizes = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
        triangles = []
        for size in np.unique(sizes[sizes >= 3]):
            pick = np.flatnonzero(sizes == size)
            rows = np.array([tokens[i] for i in pick]).astype(np.int64)
            if (rows < 0).any():
                starts = [m.start() for m in _OBJ_VERTEX.finditer(data)]
                before = np.searchsorted(starts, [faces[i].start() for i in pick])[:, None]
                rows = np.where(rows < 0, before + rows, rows - 1)
            else:
                rows = rows - 1
            triangles += [rows[:, [0, k, k + 1]] for k in range(1, size - 1)]
    except ValueError:
        raise MeshLoadError("OBJ with a non-numeric vertex or face index") from None
    index = np.concatenate(triangles) if triangles else np.zeros((0, 3), dtype=np.int64)
    if index.size and (index.min() < 0 or index.max() >= len(points)):
        raise MeshLoadError("OBJ face index out of range")
    return points[index]


def _with_trimesh(path: Path, ext: str) -> np.ndarray | None:
    try:
        import trimesh
    except ImportError:
        return None
    if ext not in trimesh.available_formats():
        return None
    try:
        mesh = trimesh.load(str(path), force="mesh", process=False)
        return np.asarray(mesh.triangles, dtype=np.float64).reshape(-1, 3, 3)
    except Exception as exc:  # a third-party reader may raise anything on a broken file
        raise MeshLoadError(f"{type(exc).__name__}: {exc}") from None
