"""``RayScene``: the geoms of a compiled MuJoCo model, as the ray engine sees them.

A pytree. Array leaves (host NumPy, float64; cast to the poses' dtype when a ray is cast):
``geom_size`` (ngeom, 3), ``geom_rgba`` (ngeom, 4), ``geom_bodyid`` (ngeom,), ``geom_group``
(ngeom,), ``geom_mesh`` (ngeom,) the BVH root node of a mesh geom (-1 otherwise) and the BVH arrays
of every mesh (:class:`caliper_jax.rays.mesh.BVH`); for height fields (:mod:`caliper_jax.rays.hfield`)
``hfield_size`` (nhfield, 4) MuJoCo's ``hfield_size``, ``hfield_cells`` (sum of cells, 4) and
``hfield_planes`` (sum of pyramid cells, 4) the tables of every field, ``hfield_slope`` (nhfield,).
Static metadata (hashable, part of the jit key): ``geom_type`` and ``geom_names`` tuples,
``type_ids`` (type code, geom ids of that type) so each type is intersected as one array op, the
BVH stack size, and ``hfield_geoms``: per height-field geom ``(geom id, field index, nrow, ncol,
cell offset, plane offset, level offsets, level row lengths)``.

Poses are not part of the scene: they come per world as ``geom_xpos (..., ngeom, 3)`` and
``geom_xmat (..., ngeom, 3, 3)`` (or ``(..., ngeom, 9)``), the fields of MuJoCo's ``MjData`` and of
an MJX ``Data``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import jax
import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.rays import hfield as _hfield
from caliper_jax.rays import mesh as _mesh
from caliper_jax.rays.primitives import BOX, CAPSULE, CYLINDER, ELLIPSOID, HFIELD, MESH, PLANE, SPHERE

SUPPORTED = {PLANE: "plane", HFIELD: "hfield", SPHERE: "sphere", CAPSULE: "capsule",
             ELLIPSOID: "ellipsoid", CYLINDER: "cylinder", BOX: "box", MESH: "mesh"}


def _static(**kw):
    return field(metadata={"static": True}, **kw)


@dataclass(frozen=True)
class RayScene:
    geom_size: np.ndarray
    geom_rgba: np.ndarray
    geom_bodyid: np.ndarray
    geom_group: np.ndarray
    geom_mesh: np.ndarray
    bvh_node_lo: np.ndarray
    bvh_node_hi: np.ndarray
    bvh_node_left: np.ndarray
    bvh_node_right: np.ndarray
    bvh_node_start: np.ndarray
    bvh_node_count: np.ndarray
    bvh_tri: np.ndarray
    bvh_tri_normal: np.ndarray
    geom_type: tuple = _static()
    geom_names: tuple = _static()
    type_ids: tuple = _static()
    bvh_stack: int = _static(default=2)
    hfield_size: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    hfield_cells: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    hfield_planes: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    hfield_slope: np.ndarray = field(default_factory=lambda: np.zeros((0,)))
    hfield_geoms: tuple = _static(default=())

    @property
    def ngeom(self) -> int:
        return len(self.geom_type)

    def bvh_arrays(self, dtype) -> dict:
        import jax.numpy as jnp
        f = {k: jnp.asarray(getattr(self, "bvh_" + k), dtype)
             for k in ("node_lo", "node_hi", "tri", "tri_normal")}
        i = {k: jnp.asarray(getattr(self, "bvh_" + k), jnp.int32)
             for k in ("node_left", "node_right", "node_start", "node_count")}
        return {**f, **i}


jax.tree_util.register_dataclass(
    RayScene,
    data_fields=[f.name for f in dataclasses.fields(RayScene) if not f.metadata.get("static")],
    meta_fields=[f.name for f in dataclasses.fields(RayScene) if f.metadata.get("static")],
)


def make_scene(geom_type, geom_size, *, geom_rgba=None, geom_bodyid=None, geom_group=None,
               meshes=None, geom_meshid=None, geom_names=None, hfields=None,
               geom_hfieldid=None) -> RayScene:
    """A scene from plain arrays (MuJoCo type codes and sizes; ``meshes`` a list of
    ``(vertices, faces)`` in the geom frame, ``geom_meshid`` (ngeom,) the mesh of each mesh geom;
    ``hfields`` a list of ``(data (nrow, ncol) normalised samples, row = y index, hfield_size (4,))``,
    ``geom_hfieldid`` (ngeom,) the field of each height-field geom)."""
    gtype = tuple(int(t) for t in np.asarray(geom_type).reshape(-1))
    n = len(gtype)
    size = np.asarray(geom_size, dtype=np.float64)
    if size.shape != (n, 3):
        raise CaliperError(f"geom_size: expected shape ({n}, 3), got {size.shape}")
    names = tuple(geom_names) if geom_names is not None else tuple(f"geom{i}" for i in range(n))
    for i, t in enumerate(gtype):
        if t not in SUPPORTED:
            raise CaliperError(f"geom {i} ({names[i]!r}): geom type {t} is not supported by the ray "
                               f"engine (supported: {', '.join(SUPPORTED.values())})")
    rgba = np.ones((n, 4)) if geom_rgba is None else np.asarray(geom_rgba, np.float64).reshape(n, 4)
    body = np.zeros(n, np.int32) if geom_bodyid is None else np.asarray(geom_bodyid, np.int32).reshape(n)
    group = np.zeros(n, np.int32) if geom_group is None else np.asarray(geom_group, np.int32).reshape(n)
    meshes = list(meshes or [])
    bvh = _mesh.build_bvh(meshes)
    gmesh = np.full(n, -1, np.int32)
    meshid = None if geom_meshid is None else np.asarray(geom_meshid).reshape(n)
    for i, t in enumerate(gtype):
        if t == MESH:
            k = -1 if meshid is None else int(meshid[i])
            if not 0 <= k < len(meshes):
                raise CaliperError(f"geom {i} ({names[i]!r}): mesh geom without mesh data (geom_meshid)")
            gmesh[i] = bvh.roots[k]
    hf = _hfield_tables(gtype, names, hfields, geom_hfieldid)
    type_ids = tuple((t, tuple(i for i in range(n) if gtype[i] == t))
                     for t in sorted(set(gtype)))
    return RayScene(geom_size=size, geom_rgba=rgba, geom_bodyid=body, geom_group=group, geom_mesh=gmesh,
                    bvh_node_lo=bvh.node_lo, bvh_node_hi=bvh.node_hi, bvh_node_left=bvh.node_left,
                    bvh_node_right=bvh.node_right, bvh_node_start=bvh.node_start,
                    bvh_node_count=bvh.node_count, bvh_tri=bvh.tri, bvh_tri_normal=bvh.tri_normal,
                    geom_type=gtype, geom_names=names, type_ids=type_ids,
                    bvh_stack=_mesh.stack_size(bvh), **hf)


def _hfield_tables(gtype, names, hfields, geom_hfieldid) -> dict:
    """The height-field fields of a :class:`RayScene` (tables built once per field, host side)."""
    fields = list(hfields or [])
    hid = None if geom_hfieldid is None else np.asarray(geom_hfieldid).reshape(len(gtype))
    sizes, cells, planes, slopes, layout = [], [], [], [], []
    cell_n = plane_n = 0
    for k, (data, size) in enumerate(fields):
        data = np.asarray(data, dtype=np.float64)
        size = np.asarray(size, dtype=np.float64).reshape(-1)
        if size.shape != (4,) or not (size[:3] > 0).all() or size[3] < 0:
            raise CaliperError(f"height field {k}: hfield_size must be 4 values (x, y, top > 0, base >= 0), "
                               f"got {size.tolist()}")
        tab = _hfield.tables(data)
        layout.append((int(data.shape[0]), int(data.shape[1]), cell_n, plane_n, tab["level_offset"],
                       tab["level_nx"]))
        sizes.append(size)
        cells.append(tab["cells"])
        planes.append(tab["planes"])
        slopes.append(tab["slope"])
        cell_n += len(tab["cells"])
        plane_n += len(tab["planes"])
    geoms = []
    for i, t in enumerate(gtype):
        if t == HFIELD:
            k = -1 if hid is None else int(hid[i])
            if not 0 <= k < len(fields):
                raise CaliperError(f"geom {i} ({names[i]!r}): height-field geom without height-field data "
                                   "(geom_hfieldid)")
            geoms.append((i, k) + layout[k])
    if not fields:
        return {}
    return {"hfield_size": np.stack(sizes), "hfield_cells": np.concatenate(cells),
            "hfield_planes": np.concatenate(planes), "hfield_slope": np.asarray(slopes, np.float64),
            "hfield_geoms": tuple(geoms)}


def scene_from_mujoco(mj_model) -> RayScene:
    """The ray scene of a compiled ``mujoco.MjModel`` (host; MuJoCo imported lazily). Geom colour
    is the material's rgba where the geom has a material, else ``geom_rgba`` (as MuJoCo's ray
    visibility test reads them); meshes are read from ``mesh_vert``/``mesh_face`` (geom frame),
    height fields from ``hfield_data`` (float32 samples, used as float64) and ``hfield_size``."""
    import mujoco

    m = mj_model
    if not isinstance(m, mujoco.MjModel):
        raise CaliperError(f"scene_from_mujoco: expected a mujoco.MjModel, got {type(m).__name__}")
    rgba = np.array(m.geom_rgba, dtype=np.float64)
    matid = np.asarray(m.geom_matid)
    has = matid >= 0
    if has.any():
        rgba[has] = np.asarray(m.mat_rgba)[matid[has]]
    meshes = []
    for k in range(m.nmesh):
        va, vn = int(m.mesh_vertadr[k]), int(m.mesh_vertnum[k])
        fa, fn = int(m.mesh_faceadr[k]), int(m.mesh_facenum[k])
        meshes.append((np.asarray(m.mesh_vert[va:va + vn]), np.asarray(m.mesh_face[fa:fa + fn])))
    hfields = []
    for k in range(m.nhfield):
        nr, nc, a = int(m.hfield_nrow[k]), int(m.hfield_ncol[k]), int(m.hfield_adr[k])
        hfields.append((np.asarray(m.hfield_data[a:a + nr * nc], np.float64).reshape(nr, nc),
                        np.asarray(m.hfield_size[k], np.float64)))
    names = tuple(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, i) or f"geom{i}" for i in range(m.ngeom))
    return make_scene(np.asarray(m.geom_type), np.asarray(m.geom_size), geom_rgba=rgba,
                      geom_bodyid=np.asarray(m.geom_bodyid), geom_group=np.asarray(m.geom_group),
                      meshes=meshes, geom_meshid=np.asarray(m.geom_dataid), geom_names=names,
                      hfields=hfields, geom_hfieldid=np.asarray(m.geom_dataid))
