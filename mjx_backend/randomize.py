"""Domain randomisation of model parameters, drawn per world from an explicit JAX PRNG key.

:func:`sample` draws multiplicative factors and returns the randomised MuJoCo model fields as
arrays with a leading world axis, named after ``MjModel`` fields (``body_mass``,
``body_inertia``, ``dof_damping``, ``dof_frictionloss``, ``geom_friction``,
``actuator_gainprm``, ``actuator_biasprm``, ``gravity``). The same key and spec give the same
bytes; each field draws from its own fixed sub-key, so widening one range leaves the others'
draws unchanged.

They are applied two ways, with identical values:
- MJX: :func:`batch_mjx_model` puts them on the ``mjx.Model`` as batched leaves and returns the
  matching ``in_axes`` for ``jax.vmap`` -- a new draw reuses the compiled step, no retracing;
- CPU: :func:`mjmodels` returns one ``MjModel`` copy per world for ``mujoco.rollout``.

Masses and inertias scale together (a density change); servo gains scale kp and kv together.
Derived constants MuJoCo computes at compile time (``*_invweight0``, used to scale constraint
impedance) are left as compiled, on both paths.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError

FIELDS = ("mass", "damping", "frictionloss", "friction", "gain", "gravity")


@dataclass(frozen=True)
class RandomizationSpec:
    """Uniform multiplicative ranges (lo, hi), or None to keep a parameter fixed."""

    mass: tuple | None = (0.8, 1.2)          # body mass and inertia, per body
    damping: tuple | None = (0.5, 1.5)       # joint viscous damping, per dof
    frictionloss: tuple | None = (0.5, 1.5)  # joint Coulomb friction, per dof
    friction: tuple | None = (0.7, 1.3)      # geom sliding friction, per geom
    gain: tuple | None = (0.9, 1.1)          # actuator gain (kp and kv together), per actuator
    gravity: tuple | None = None             # gravity vector, per world

    def __post_init__(self):
        for name in FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            try:
                lo, hi = (float(v) for v in value)
            except (TypeError, ValueError):
                raise CaliperError(f"randomization {name}: expected (lo, hi), got {value!r}") from None
            if not (np.isfinite(lo) and np.isfinite(hi) and 0 <= lo <= hi):
                raise CaliperError(f"randomization {name}: need 0 <= lo <= hi, got ({lo}, {hi})")
            object.__setattr__(self, name, (lo, hi))


def sample(mj, key, nworld: int, spec: RandomizationSpec | None = None) -> dict:
    """Randomised fields {MjModel field: (nworld, ...) float64 array} for the compiled ``mj``
    (an ``MjModel`` or a :class:`~mjx_backend.layout.CompiledScene`)."""
    import jax

    mj = getattr(mj, "mj", mj)
    spec = spec or RandomizationSpec()
    if nworld < 1:
        raise CaliperError(f"nworld must be >= 1, got {nworld}")
    keys = dict(zip(FIELDS, jax.random.split(key, len(FIELDS)), strict=True))

    def factors(name, shape):
        lo, hi = getattr(spec, name)
        u = jax.random.uniform(keys[name], (nworld,) + shape, dtype="float32")
        return lo + (hi - lo) * np.asarray(u, dtype=np.float64)

    out = {}
    if spec.mass is not None:
        s = factors("mass", (mj.nbody,))
        out["body_mass"] = mj.body_mass[None] * s
        out["body_inertia"] = mj.body_inertia[None] * s[..., None]
    if spec.damping is not None:
        out["dof_damping"] = mj.dof_damping[None] * factors("damping", (mj.nv,))
    if spec.frictionloss is not None:
        out["dof_frictionloss"] = mj.dof_frictionloss[None] * factors("frictionloss", (mj.nv,))
    if spec.friction is not None:
        fr = np.array(np.broadcast_to(mj.geom_friction, (nworld,) + mj.geom_friction.shape))
        fr[..., 0] *= factors("friction", (mj.ngeom,))
        out["geom_friction"] = fr
    if spec.gain is not None and mj.nu:
        s = factors("gain", (mj.nu,))
        gain = np.array(np.broadcast_to(mj.actuator_gainprm, (nworld,) + mj.actuator_gainprm.shape))
        bias = np.array(np.broadcast_to(mj.actuator_biasprm, (nworld,) + mj.actuator_biasprm.shape))
        gain[..., 0] *= s
        bias[..., 1:3] *= s[..., None]
        out["actuator_gainprm"], out["actuator_biasprm"] = gain, bias
    if spec.gravity is not None:
        out["gravity"] = np.asarray(mj.opt.gravity)[None] * factors("gravity", ())[:, None]
    return out


def _check(params: dict, nworld: int) -> None:
    for name, arr in params.items():
        if np.shape(arr)[0] != nworld:
            raise CaliperError(f"randomized {name}: leading axis {np.shape(arr)[0]} != nworld {nworld}")


def mjmodels(mj, params: dict, nworld: int) -> list:
    """One ``MjModel`` copy per world carrying that world's parameters (CPU rollout)."""
    _check(params, nworld)
    out = []
    for w in range(nworld):
        m = copy.copy(mj)
        for name, arr in params.items():
            if name == "gravity":
                m.opt.gravity[:] = arr[w]
            else:
                getattr(m, name)[:] = arr[w]
        out.append(m)
    return out


def batch_mjx_model(mx, params: dict, nworld: int):
    """(batched mjx.Model, in_axes) with ``params`` as leaves carrying a world axis."""
    import jax
    import jax.numpy as jnp

    _check(params, nworld)
    axes = jax.tree_util.tree_map(lambda _: None, mx)
    for name, arr in params.items():
        if name == "gravity":
            mx = mx.replace(opt=mx.opt.replace(gravity=jnp.asarray(arr, mx.opt.gravity.dtype)))
            axes = axes.replace(opt=axes.opt.replace(gravity=0))
            continue
        leaf = getattr(mx, name, None)
        if leaf is None:
            raise CaliperError(f"mjx.Model has no field {name!r}")
        mx = mx.replace(**{name: jnp.asarray(arr, leaf.dtype)})
        axes = axes.replace(**{name: 0})
    return mx, axes


__all__ = ["FIELDS", "RandomizationSpec", "batch_mjx_model", "mjmodels", "sample"]
