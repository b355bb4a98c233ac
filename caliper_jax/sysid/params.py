"""Named, bounded model parameters for system identification, and how they are written into an
``mjx.Model``.

A parameter is one positive scalar (a friction coefficient, a damping in N m s/rad, a mass in kg,
a contact time constant in s, ...) written into one or more entries of an ``mjx.Model`` field.
Kinds (the ``--params`` names) and what one parameter of each kind covers:

========== =============================================== ======================================
kind       field entries                                   one parameter per
========== =============================================== ======================================
friction   ``geom_friction[g, 0]`` (sliding)               prop body (all its geoms)
damping    ``dof_damping[d]``                              robot joint (hinge/slide dof)
armature   ``dof_armature[d]``                             robot joint
frictionloss ``dof_frictionloss[d]``                       robot joint
mass       ``body_mass[b]`` (``body_inertia[b]`` scaled    prop body
           with it: a density change)
solref     ``geom_solref[g, 0]`` (contact time constant)   prop body
solimp     ``geom_solimp[g, 0]`` (impedance at zero depth) prop body
========== =============================================== ======================================

A "prop" is a body hanging from the world by a free joint; a robot joint is a hinge or slide
joint. ``kind:NAME`` picks one parameter (``damping:j1``, ``friction:cube``).

Bounds: every parameter lives in ``[lo, hi]`` with ``0 < lo < hi`` and is optimised as an
unconstrained ``z`` through a log-sigmoid map, ``value = exp(log lo + (log hi - log lo) *
sigmoid(z))``: always inside its bounds, scale-free (a step in ``z`` is a relative change), and
smooth. Default bounds are nominal x [1/5, 5]; a zero nominal (MuJoCo's default damping,
armature, frictionloss) gets the absolute bounds of :data:`ABSOLUTE_BOUNDS`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError

KINDS = ("friction", "damping", "armature", "frictionloss", "mass", "solref", "solimp")
_DOF_KINDS = {"damping": "dof_damping", "armature": "dof_armature", "frictionloss": "dof_frictionloss"}
_PROP_KINDS = {"friction": ("geom_friction", 0), "solref": ("geom_solref", 0), "solimp": ("geom_solimp", 0),
               "mass": ("body_mass", None)}
#: (lo, hi) for a parameter whose nominal value is zero.
ABSOLUTE_BOUNDS = {"damping": (1e-3, 20.0), "armature": (1e-4, 1.0), "frictionloss": (1e-3, 5.0)}
#: Hard limits of the default (nominal x [1/5, 5]) bounds: solimp d0 must stay below 1.
_CAP = {"solimp": 0.99, "friction": 5.0}
RELATIVE_RANGE = 5.0


@dataclass(frozen=True)
class Param:
    """One identified scalar. ``field``: the mjx.Model field; ``index``: tuple of index tuples it is
    written to; ``nominal``: its value in the compiled model; ``lo``/``hi``: bounds."""

    name: str
    kind: str
    field: str
    index: tuple
    nominal: float
    lo: float
    hi: float


@dataclass(frozen=True)
class ParamSet:
    """An ordered set of :class:`Param`; ``values`` <-> unconstrained ``z`` maps and model writes."""

    params: tuple

    @property
    def names(self) -> tuple:
        return tuple(p.name for p in self.params)

    @property
    def nominal(self) -> np.ndarray:
        return np.array([p.nominal for p in self.params], dtype=np.float64)

    def __len__(self) -> int:
        return len(self.params)

    def _logs(self, xp):
        lo = xp.log(xp.asarray([p.lo for p in self.params], dtype=np.float64))
        hi = xp.log(xp.asarray([p.hi for p in self.params], dtype=np.float64))
        return lo, hi

    def to_values(self, z):
        """(P,) unconstrained -> (P,) values inside the bounds (JAX-traceable)."""
        import jax
        import jax.numpy as jnp

        lo, hi = self._logs(np)
        z = jnp.asarray(z)
        return jnp.exp(jnp.asarray(lo, z.dtype) + jnp.asarray(hi - lo, z.dtype) * jax.nn.sigmoid(z))

    def to_z(self, values) -> np.ndarray:
        """(P,) values (NumPy) -> unconstrained; values are clipped just inside their bounds."""
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        if v.shape != (len(self),):
            raise CaliperError(f"parameter values: expected {len(self)} ({', '.join(self.names)}), "
                               f"got {v.size}")
        lo, hi = self._logs(np)
        s = (np.log(np.maximum(v, 1e-300)) - lo) / (hi - lo)
        s = np.clip(s, 1e-9, 1 - 1e-9)
        return np.log(s) - np.log1p(-s)

    def apply(self, mx, values):
        """``mx`` (an mjx.Model) with every parameter's entries set to ``values`` (P,)."""
        import jax.numpy as jnp

        fields = {}
        for k, p in enumerate(self.params):
            arr = fields.get(p.field)
            if arr is None:
                arr = getattr(mx, p.field)
            v = values[k].astype(arr.dtype)
            for idx in p.index:
                arr = arr.at[idx].set(v)
            fields[p.field] = arr
            if p.kind == "mass":        # inertia scales with the mass (density change)
                inert = fields.get("body_inertia", mx.body_inertia)
                for idx in p.index:
                    inert = inert.at[idx].set(mx.body_inertia[idx] * (v / p.nominal))
                fields["body_inertia"] = inert
        return mx.replace(**{k: jnp.asarray(v) for k, v in fields.items()})

    def apply_mj(self, mj, values):
        """A copy of the MjModel ``mj`` carrying ``values`` (the CPU engine's twin of :meth:`apply`)."""
        import copy

        m = copy.deepcopy(mj)
        for p, v in zip(self.params, np.asarray(values, np.float64), strict=True):
            arr = getattr(m, p.field)
            for idx in p.index:
                if p.kind == "mass":
                    m.body_inertia[idx] = mj.body_inertia[idx] * (v / p.nominal)
                arr[idx] = v
        return m


def _name(mj, obj, i) -> str:
    import mujoco

    return mujoco.mj_id2name(mj, obj, i) or f"#{i}"


def robot_joints(mj) -> dict:
    """{joint name: dof address} of the hinge and slide joints."""
    import mujoco

    out = {}
    for j in range(mj.njnt):
        if int(mj.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            out[_name(mj, mujoco.mjtObj.mjOBJ_JOINT, j)] = int(mj.jnt_dofadr[j])
    return out


def prop_bodies(mj) -> dict:
    """{body name: body id} of the bodies with a free joint."""
    import mujoco

    out = {}
    for j in range(mj.njnt):
        if int(mj.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE):
            b = int(mj.jnt_bodyid[j])
            out[_name(mj, mujoco.mjtObj.mjOBJ_BODY, b)] = b
    return out


def _entries(mj, kind: str, target: str | None) -> list:
    """[(name, field, index tuple, nominal)] of one kind (all targets, or the one named)."""
    out = []
    if kind in _DOF_KINDS:
        field = _DOF_KINDS[kind]
        joints = robot_joints(mj)
        if target is not None and target not in joints:
            raise CaliperError(f"--params {kind}:{target}: no hinge/slide joint {target!r} "
                               f"(joints: {', '.join(joints) or 'none'})")
        for name, d in joints.items():
            if target in (None, name):
                out.append((f"{kind}:{name}", field, ((d,),), float(getattr(mj, field)[d])))
        return out
    field, col = _PROP_KINDS[kind]
    props = prop_bodies(mj)
    if target is not None and target not in props:
        raise CaliperError(f"--params {kind}:{target}: no free-floating body {target!r} "
                           f"(props: {', '.join(props) or 'none'})")
    for name, b in props.items():
        if target not in (None, name):
            continue
        if kind == "mass":
            out.append((f"mass:{name}", field, ((b,),), float(mj.body_mass[b])))
            continue
        geoms = [g for g in range(mj.ngeom) if mj.geom_bodyid[g] == b]
        if not geoms:
            raise CaliperError(f"--params {kind}:{name}: body {name!r} has no geoms")
        vals = {float(getattr(mj, field)[g, col]) for g in geoms}
        out.append((f"{kind}:{name}", field, tuple((g, col) for g in geoms), float(np.mean(sorted(vals)))))
    return out


def param_set(mj, names, bounds: dict | None = None) -> ParamSet:
    """A :class:`ParamSet` for the compiled MjModel ``mj`` (or a CompiledScene) from ``names``
    (a comma-separated string or a sequence of kinds / ``kind:target``). ``bounds``: {parameter
    name or kind: (lo, hi)} overriding the defaults."""
    mj = getattr(mj, "mj", mj)
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    bounds = dict(bounds or {})
    params, seen = [], set()
    for raw in names:
        kind, _, target = str(raw).partition(":")
        if kind not in KINDS:
            raise CaliperError(f"--params: unknown parameter kind {kind!r} (kinds: {', '.join(KINDS)})")
        found = _entries(mj, kind, target or None)
        if not found:
            what = "hinge/slide joints" if kind in _DOF_KINDS else "free-floating props"
            raise CaliperError(f"--params {raw}: the model has no {what}")
        for name, field, index, nominal in found:
            if name in seen:
                continue
            seen.add(name)
            lo, hi = bounds.get(name, bounds.get(kind, (None, None)))
            if lo is None:
                if nominal > 0:
                    lo, hi = nominal / RELATIVE_RANGE, nominal * RELATIVE_RANGE
                    hi = min(hi, _CAP.get(kind, hi))
                else:
                    lo, hi = ABSOLUTE_BOUNDS[kind]
            lo, hi = float(lo), float(hi)
            if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo < hi):
                raise CaliperError(f"bounds of {name}: need 0 < lo < hi, got ({lo}, {hi})")
            params.append(Param(name, kind, field, index, nominal, lo, hi))
    if not params:
        raise CaliperError("--params: no parameters named")
    return ParamSet(tuple(params))


__all__ = ["ABSOLUTE_BOUNDS", "KINDS", "Param", "ParamSet", "param_set", "prop_bodies", "robot_joints"]
