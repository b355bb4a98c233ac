"""NumPy-in, NumPy-out entry points over the pure JAX core, jitted once per robot topology.

Inputs may carry any leading batch dimensions (they are vmapped); outputs are NumPy arrays.
Poses use one layout everywhere: 4x4 homogeneous ``T_world_frame``, row-major.
"""
from __future__ import annotations

from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax import dynamics, integrators, kinematics
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model


def _as_array(model: Model, x, n: int, what: str):
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0 or arr.shape[-1] != n:
        raise CaliperError(f"{what}: expected a trailing dimension of {n} for {model.name!r}, "
                           f"got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise CaliperError(f"{what}: non-finite values")
    return jnp.asarray(arr, dtype=model.dtype)


@lru_cache(maxsize=None)
def _batched(fn, nargs: int, nbatch: int, static: tuple = ()):
    """jit(vmap^nbatch(fn)) over the first ``nargs`` array arguments after the model."""
    def call(model, *args):
        return fn(model, *args, *static)

    f = call
    for _ in range(nbatch):
        f = jax.vmap(f, in_axes=(None,) + (0,) * nargs)
    return jax.jit(f)


def _run(fn, model, arrays, static=()):
    batch = arrays[0].shape[:-1]
    for a in arrays[1:]:
        if a.shape[:-1] != batch:
            raise CaliperError(f"batch shapes differ: {batch} vs {a.shape[:-1]}")
    return np.asarray(_batched(fn, len(arrays), len(batch), tuple(static))(model, *arrays))


def fk(model: Model, q) -> np.ndarray:
    """T_world_frame for every frame: (..., nframe, 4, 4)."""
    return _run(kinematics.forward_kinematics, model, [_as_array(model, q, model.nq, "q")])


def fk_dict(model: Model, q) -> dict:
    """{frame name: 4x4 list} for one configuration."""
    T = fk(model, q)
    return {name: T[i].tolist() for i, name in enumerate(model.frame_names)}


def jacobian(model: Model, q, frame: str, reference: str = "world") -> np.ndarray:
    """Geometric Jacobian (..., 6, nv) of a named frame, rows [v; w]."""
    if reference not in kinematics.REFERENCES:
        raise CaliperError(f"reference must be one of {kinematics.REFERENCES}, got {reference!r}")
    return _run(kinematics.frame_jacobian, model, [_as_array(model, q, model.nq, "q")],
                (model.frame_id(frame), reference))


def inverse_dynamics(model: Model, q, v, a) -> np.ndarray:
    arrays = [_as_array(model, q, model.nq, "q"), _as_array(model, v, model.nv, "v"),
              _as_array(model, a, model.nv, "a")]
    return _run(dynamics.rnea, model, arrays)


def mass_matrix(model: Model, q) -> np.ndarray:
    return _run(dynamics.crba, model, [_as_array(model, q, model.nq, "q")])


def forward_dynamics(model: Model, q, v, tau) -> np.ndarray:
    arrays = [_as_array(model, q, model.nq, "q"), _as_array(model, v, model.nv, "v"),
              _as_array(model, tau, model.nv, "tau")]
    return _run(dynamics.forward_dynamics, model, arrays)


def gravity_torques(model: Model, q) -> np.ndarray:
    return _run(dynamics.gravity_torques, model, [_as_array(model, q, model.nq, "q")])


@lru_cache(maxsize=None)
def _sim_fn(steps: int, integrator: str):
    def run(model, q0, v0, dt):
        taus = jnp.zeros((steps, model.nv), model.dtype)
        qs, vs = integrators.simulate(model, q0, v0, taus, dt, integrator)
        energy = jax.vmap(dynamics.total_energy, in_axes=(None, 0, 0))(model, qs, vs)
        return qs, vs, energy

    return jax.jit(run)


def simulate_passive(model: Model, q0, v0=None, duration: float = 1.0, dt: float = 1e-3,
                     integrator: str = "rk4"):
    """Unactuated rollout -> (times, qs, vs, total energy) as NumPy arrays."""
    if not (np.isfinite(duration) and duration > 0):
        raise CaliperError(f"duration must be a positive number of seconds, got {duration}")
    if not (np.isfinite(dt) and 0 < dt <= duration):
        raise CaliperError(f"dt must be in (0, duration], got {dt}")
    if integrator not in integrators.INTEGRATORS:
        raise CaliperError(f"unknown integrator {integrator!r} (expected one of "
                           f"{', '.join(integrators.INTEGRATORS)})")
    steps = int(round(duration / dt))
    q0 = _as_array(model, q0, model.nq, "q0")
    v0 = _as_array(model, np.zeros(model.nv) if v0 is None else v0, model.nv, "v0")
    qs, vs, energy = _sim_fn(steps, integrator)(model, q0, v0, jnp.asarray(dt, model.dtype))
    return np.arange(steps + 1) * dt, np.asarray(qs), np.asarray(vs), np.asarray(energy)
