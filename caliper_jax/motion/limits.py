"""Per-dof motion limits (position box, velocity, acceleration, jerk) with the spec's defaults.

Validation happens here, on the host, with NumPy: the planners downstream assume every
limit is positive and finite and never check again inside a trace.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from caliper_jax.errors import CaliperError

#: vmax used when a joint has no usable velocity limit (absent, <= 0 or non-finite).
DEFAULT_VMAX = 1.0
#: amax = ACCEL_PER_VEL * vmax unless given.
ACCEL_PER_VEL = 5.0
#: jmax = JERK_PER_ACCEL * amax unless given.
JERK_PER_ACCEL = 10.0


def _vector(name: str, value, ndof: int | None) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0 and ndof is not None:
        arr = np.full((ndof,), float(arr))
    if arr.ndim != 1:
        raise CaliperError(f"MotionLimits.{name}: expected a 1-D array per dof, got shape {arr.shape}")
    if ndof is not None and arr.shape[0] != ndof:
        raise CaliperError(f"MotionLimits.{name}: expected {ndof} entries (one per dof), got {arr.shape[0]}")
    return arr


def _check_positive_finite(name: str, arr: np.ndarray) -> None:
    bad = ~(np.isfinite(arr) & (arr > 0.0))
    if np.any(bad):
        dof = int(np.flatnonzero(bad)[0])
        raise CaliperError(
            f"MotionLimits.{name}[{dof}] = {arr[dof]!r}: must be > 0 and finite"
        )


class MotionLimits(NamedTuple):
    """Limits per dof. A NamedTuple, hence a JAX pytree whose five leaves are arrays of shape (ndof,).

    ``lower``/``upper`` may be infinite (continuous joints); ``vmax``, ``amax``, ``jmax`` are
    positive and finite. Build it with :meth:`from_arrays` or :meth:`from_model`, which validate.
    """

    lower: np.ndarray
    upper: np.ndarray
    vmax: np.ndarray
    amax: np.ndarray
    jmax: np.ndarray

    @property
    def ndof(self) -> int:
        return int(np.shape(self.vmax)[-1])

    @classmethod
    def from_arrays(cls, lower, upper, velocity=None, acceleration=None, jerk=None) -> MotionLimits:
        """Limits from per-dof arrays, with defaults.

        vmax = ``velocity`` where it is given, finite and > 0, else 1.0 (per dof);
        amax = ``acceleration`` if given else 5 * vmax; jmax = ``jerk`` if given else 10 * amax.
        Explicit ``acceleration``/``jerk`` values are validated (> 0, finite), not defaulted.
        Raises :class:`caliper_jax.errors.CaliperError` naming the field and dof.
        """
        lower = _vector("lower", lower, None)
        ndof = lower.shape[0]
        upper = _vector("upper", upper, ndof)
        for name, arr in (("lower", lower), ("upper", upper)):
            if np.any(np.isnan(arr)):
                dof = int(np.flatnonzero(np.isnan(arr))[0])
                raise CaliperError(f"MotionLimits.{name}[{dof}] is NaN")
        if np.any(lower > upper):
            dof = int(np.flatnonzero(lower > upper)[0])
            raise CaliperError(
                f"MotionLimits.lower[{dof}] = {lower[dof]!r} exceeds upper[{dof}] = {upper[dof]!r}"
            )
        if velocity is None:
            vmax = np.full((ndof,), DEFAULT_VMAX)
        else:
            vel = _vector("vmax", velocity, ndof)
            usable = np.isfinite(vel) & (vel > 0.0)
            vmax = np.where(usable, vel, DEFAULT_VMAX)
        amax = ACCEL_PER_VEL * vmax if acceleration is None else _vector("amax", acceleration, ndof)
        jmax = JERK_PER_ACCEL * amax if jerk is None else _vector("jmax", jerk, ndof)
        for name, arr in (("vmax", vmax), ("amax", amax), ("jmax", jmax)):
            _check_positive_finite(name, arr)
        return cls(lower=lower, upper=upper, vmax=vmax, amax=amax, jmax=jmax)

    @classmethod
    def from_model(cls, model, acceleration=None, jerk=None) -> MotionLimits:
        """Limits read from a Model: ``qpos_lower``/``qpos_upper`` (nq,) and ``dof_velocity_limit`` (nv,).

        Joint-space motion needs one coordinate per dof, so ``model.nq == model.nv`` is required
        (a free or ball joint makes the two differ).
        """
        nq, nv = int(model.nq), int(model.nv)
        if nq != nv:
            raise CaliperError(
                f"motion planning needs nq == nv (one coordinate per dof); this model has nq={nq}, nv={nv}"
            )
        lower = np.asarray(model.qpos_lower, dtype=np.float64).reshape(-1)
        upper = np.asarray(model.qpos_upper, dtype=np.float64).reshape(-1)
        vel = np.asarray(model.dof_velocity_limit, dtype=np.float64).reshape(-1)
        for name, arr, n in (("qpos_lower", lower, nq), ("qpos_upper", upper, nq),
                             ("dof_velocity_limit", vel, nv)):
            if arr.shape[0] != n:
                raise CaliperError(f"model.{name}: expected {n} entries, got {arr.shape[0]}")
        return cls.from_arrays(lower, upper, vel, acceleration, jerk)
