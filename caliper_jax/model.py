"""The pytree ``Model``: static topology + array leaves of physical parameters.

Static (hashable, part of the jit cache key): sizes, names, joint types, parent indices, address
tables, geometry. Leaves (traced): joint placements and axes, inertias, limits, damping,
armature, frame placements, gravity. So ``jax.vmap`` over a batched Model is domain
randomisation and ``jax.grad`` w.r.t. a Model is identification, without retracing.

Coordinates: ``q`` (nq,) and ``v`` (nv,) are the *independent* coordinates. Mimic joints (when
honoured) are driven by their source joint and expanded internally to the full coordinates
``q_full`` (nq_full,). Ball joints take a (w, x, y, z) quaternion and a body-frame angular
velocity; a free joint takes ``[x, y, z, qw, qx, qy, qz]`` (position in the parent frame) and
a body-frame twist ``[v; w]`` (Pinocchio's free-flyer velocity; MuJoCo's quaternion order).
"""
from __future__ import annotations

import dataclasses
import difflib
from functools import lru_cache
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.io.description import JOINT_NQ, JOINT_NV, Geom, RobotDescription

_STATIC = dict(metadata={"static": True})


@dataclasses.dataclass(frozen=True)
class Model:
    # ---- static topology -------------------------------------------------------------------
    name: str = dataclasses.field(**_STATIC)
    body_names: tuple = dataclasses.field(**_STATIC)      # one per moving joint (its name)
    jnt_type: tuple = dataclasses.field(**_STATIC)        # 'revolute'|'prismatic'|'ball'|'free'
    body_parent: tuple = dataclasses.field(**_STATIC)     # parent body index, -1 = world
    body_qadr: tuple = dataclasses.field(**_STATIC)       # first index into q_full
    body_vadr: tuple = dataclasses.field(**_STATIC)       # first index into v_full
    nq: int = dataclasses.field(**_STATIC)
    nv: int = dataclasses.field(**_STATIC)
    nq_full: int = dataclasses.field(**_STATIC)
    nv_full: int = dataclasses.field(**_STATIC)
    qfull_src: tuple = dataclasses.field(**_STATIC)       # q_full[i] comes from q[qfull_src[i]]
    vfull_src: tuple = dataclasses.field(**_STATIC)       # v_full[i] comes from v[vfull_src[i]]
    vfull_mimic: tuple = dataclasses.field(**_STATIC)     # v_full index -> index into mimic_* or -1
    frame_names: tuple = dataclasses.field(**_STATIC)
    frame_body: tuple = dataclasses.field(**_STATIC)      # body carrying each frame, -1 = world
    frame_kind: tuple = dataclasses.field(**_STATIC)      # 'link' | 'joint'
    geoms: tuple = dataclasses.field(**_STATIC)           # caliper_jax.io.Geom
    source: str = dataclasses.field(**_STATIC)
    # ---- leaves ------------------------------------------------------------------------------
    jnt_R: Any = None            # (nbody, 3, 3) joint frame in parent body frame at neutral
    jnt_p: Any = None            # (nbody, 3)
    jnt_axis: Any = None         # (nbody, 3) unit axis in the joint frame (1-dof joints)
    body_mass: Any = None        # (nbody,)
    body_com: Any = None         # (nbody, 3) centre of mass in the body frame
    body_inertia: Any = None     # (nbody, 3, 3) rotational inertia about the COM, body axes
    frame_R: Any = None          # (nframe, 3, 3) frame in its body's frame
    frame_p: Any = None          # (nframe, 3)
    qpos_lower: Any = None       # (nq,) -inf where unbounded
    qpos_upper: Any = None       # (nq,)
    dof_velocity_limit: Any = None  # (nv,) inf where absent
    dof_effort_limit: Any = None    # (nv,)
    dof_damping: Any = None         # (nv,) viscous, N m s/rad or N s/m
    dof_friction: Any = None        # (nv,) Coulomb (carried; used by the simulators)
    dof_armature: Any = None        # (nv,) reflected rotor inertia added to M's diagonal
    mimic_multiplier: Any = None    # (nmimic,) for the mimic joints, in body order
    mimic_offset: Any = None        # (nmimic,)
    gravity: Any = None             # (3,) world frame

    # ---- sizes and lookups -----------------------------------------------------------------
    @property
    def nbody(self) -> int:
        return len(self.body_names)

    @property
    def nframe(self) -> int:
        return len(self.frame_names)

    @property
    def has_mimic(self) -> bool:
        return any(i >= 0 for i in self.vfull_mimic)

    @property
    def dtype(self):
        return jnp.asarray(self.jnt_p).dtype

    @property
    def joint_names(self) -> tuple:
        """Names of the independent joints (mimic joints excluded), in q order."""
        return tuple(name for i, name in enumerate(self.body_names)
                     if self.vfull_mimic[self.body_vadr[i]] < 0)

    def frame_id(self, name: str) -> int:
        return _lookup(self.frame_names, name, "frame", self.name)

    def body_id(self, name: str) -> int:
        return _lookup(self.body_names, name, "joint", self.name)

    def supports(self, body: int) -> tuple:
        """Bodies from the root down to ``body`` (inclusive); () for the world."""
        chain = []
        while body >= 0:
            chain.append(body)
            body = self.body_parent[body]
        return tuple(reversed(chain))

    def astype(self, dtype) -> "Model":
        """The same model with every floating leaf cast to ``dtype``."""
        return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype=dtype), self)

    def replace(self, **changes) -> "Model":
        return dataclasses.replace(self, **changes)


def _lookup(names, name, what, model_name) -> int:
    try:
        return names.index(name)
    except ValueError:
        close = difflib.get_close_matches(name, names, n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise CaliperError(f"robot {model_name!r} has no {what} named {name!r}{hint}") from None


jax.tree_util.register_dataclass(
    Model,
    data_fields=[f.name for f in dataclasses.fields(Model) if not f.metadata.get("static")],
    meta_fields=[f.name for f in dataclasses.fields(Model) if f.metadata.get("static")],
)


def default_dtype():
    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32


def build_model(desc: RobotDescription, dtype=None) -> Model:
    """Turn a host-side description into a Model with leaves of ``dtype`` (default: float64
    when ``jax_enable_x64`` is on, else float32)."""
    dtype = dtype or default_dtype()
    bodies = desc.bodies
    index = {b.name: i for i, b in enumerate(bodies)}
    qadr, vadr, nq_full, nv_full = [], [], 0, 0
    for b in bodies:
        qadr.append(nq_full)
        vadr.append(nv_full)
        nq_full += JOINT_NQ[b.type]
        nv_full += JOINT_NV[b.type]
    # independent coordinates: every coordinate of a non-mimic joint, in body order
    q_red, v_red = {}, {}
    for i, b in enumerate(bodies):
        if b.mimic is None:
            for k in range(b.nq):
                q_red[qadr[i] + k] = len(q_red)
            for k in range(b.nv):
                v_red[vadr[i] + k] = len(v_red)
    qfull_src, vfull_src, vfull_mimic = [], [], []
    mult, off = [], []
    for i, b in enumerate(bodies):
        if b.mimic is None:
            qfull_src += [q_red[qadr[i] + k] for k in range(b.nq)]
            vfull_src += [v_red[vadr[i] + k] for k in range(b.nv)]
            vfull_mimic += [-1] * b.nv
        else:
            src = index[b.mimic[0]]
            qfull_src.append(q_red[qadr[src]])
            vfull_src.append(v_red[vadr[src]])
            vfull_mimic.append(len(mult))
            mult.append(b.mimic[1])
            off.append(b.mimic[2])
    independent = [b for b in bodies if b.mimic is None]

    def per_coord(attr, n_of, default):
        out = []
        for b in independent:
            value = getattr(b, attr)
            n = n_of(b)
            if value is None or len(value) != n:
                value = np.full(n, default)
            out.append(np.asarray(value, dtype=np.float64))
        return np.concatenate(out) if out else np.zeros(0)

    nq_of, nv_of = (lambda b: b.nq), (lambda b: b.nv)
    leaves = dict(
        jnt_R=np.stack([b.R for b in bodies]) if bodies else np.zeros((0, 3, 3)),
        jnt_p=np.stack([b.p for b in bodies]) if bodies else np.zeros((0, 3)),
        jnt_axis=np.stack([b.axis for b in bodies]) if bodies else np.zeros((0, 3)),
        body_mass=np.array([b.mass for b in bodies]),
        body_com=np.stack([b.com for b in bodies]) if bodies else np.zeros((0, 3)),
        body_inertia=np.stack([b.inertia for b in bodies]) if bodies else np.zeros((0, 3, 3)),
        frame_R=np.stack([f.R for f in desc.frames]),
        frame_p=np.stack([f.p for f in desc.frames]),
        qpos_lower=per_coord("lower", nq_of, -np.inf),
        qpos_upper=per_coord("upper", nq_of, np.inf),
        dof_velocity_limit=per_coord("velocity", nv_of, np.inf),
        dof_effort_limit=per_coord("effort", nv_of, np.inf),
        dof_damping=per_coord("damping", nv_of, 0.0),
        dof_friction=per_coord("friction", nv_of, 0.0),
        dof_armature=per_coord("armature", nv_of, 0.0),
        mimic_multiplier=np.array(mult, dtype=np.float64),
        mimic_offset=np.array(off, dtype=np.float64),
        gravity=np.asarray(desc.gravity, dtype=np.float64),
    )
    for key, value in leaves.items():
        if key.startswith(("qpos_", "dof_velocity", "dof_effort")):
            bad = np.isnan(value)
        else:
            bad = ~np.isfinite(value)
        if bad.any():
            raise CaliperError(f"{desc.source}: non-finite value in {key}")
    return Model(
        name=desc.name,
        body_names=tuple(b.name for b in bodies),
        jnt_type=tuple(b.type for b in bodies),
        body_parent=tuple(b.parent for b in bodies),
        body_qadr=tuple(qadr),
        body_vadr=tuple(vadr),
        nq=len(q_red),
        nv=len(v_red),
        nq_full=nq_full,
        nv_full=nv_full,
        qfull_src=tuple(qfull_src),
        vfull_src=tuple(vfull_src),
        vfull_mimic=tuple(vfull_mimic),
        frame_names=tuple(f.name for f in desc.frames),
        frame_body=tuple(f.parent for f in desc.frames),
        frame_kind=tuple(f.kind for f in desc.frames),
        geoms=tuple(desc.geoms),
        source=desc.source,
        **{k: jnp.asarray(v, dtype=dtype) for k, v in leaves.items()},
    )


def model_in_axes(model: Model, batched=()) -> Model:
    """``in_axes`` for ``jax.vmap`` over a Model whose leaves named in ``batched`` carry a
    leading batch axis (others shared)."""
    fields = {f.name for f in dataclasses.fields(Model) if not f.metadata.get("static")}
    unknown = set(batched) - fields
    if unknown:
        raise CaliperError(f"unknown Model leaves: {', '.join(sorted(unknown))}")
    return model.replace(**{name: (0 if name in batched else None) for name in fields})


def stack_models(models) -> Model:
    """Stack models of identical topology along a new leading axis of every leaf."""
    first = models[0]
    treedef = jax.tree_util.tree_structure(first)
    for m in models[1:]:
        if jax.tree_util.tree_structure(m) != treedef:
            raise CaliperError("stack_models: models differ in topology")
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *models)


# ---- static tables (built once per topology) -------------------------------------------------

@lru_cache(maxsize=256)
def _tables(body_parent: tuple, jnt_type: tuple, body_vadr: tuple, nv_full: int, x64: bool):
    nbody = len(body_parent)
    parent = np.asarray(body_parent, dtype=np.int64).reshape(nbody)
    support = np.eye(nbody, dtype=bool)                      # support[i, k]: k is i or an ancestor
    rows, anc = np.arange(nbody), parent
    while len(rows):                                         # every body one level up per pass
        live = anc >= 0                                      # (depth passes, not nbody x depth)
        rows, anc = rows[live], anc[live]
        support[rows, anc] = True
        anc = parent[anc]
    dof_body = np.zeros(nv_full, dtype=np.int64)
    for i, jtype in enumerate(jnt_type):
        dof_body[body_vadr[i]:body_vadr[i] + JOINT_NV[jtype]] = i
    dof_support = support[:, dof_body]                       # (nbody, nv_full): dof moves body
    return support, dof_body, dof_support


def tables(model: Model):
    """(support (nbody, nbody), dof_body (nv_full,), dof_support (nbody, nv_full)) as NumPy.

    One set of arrays per ``jax_enable_x64`` setting: JAX can replay a NumPy index array first
    traced with x64 off as an int32 constant inside a later float64 trace ("lax.add requires
    arguments to have the same dtypes, got int32, int64"), so the arrays are not shared."""
    return _tables(model.body_parent, model.jnt_type, model.body_vadr, model.nv_full,
                   bool(jax.config.jax_enable_x64))


__all__ = ["Model", "Geom", "build_model", "default_dtype", "model_in_axes", "stack_models", "tables"]

