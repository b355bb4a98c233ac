"""Computed-torque control: ``tau = M(q) (qdd* + kp e + kd edot) + b(q, qd)`` with the bias
``b = rnea(q, qd, 0, g)`` (Coriolis, centrifugal and gravity), saturated to +-effort on the
command that is actually sent.

With a perfect model the closed loop decouples into one linear system per joint,
``e'' + kd e' + kp e = 0`` (e = q* - q), so one gain pair works on every robot: the defaults
kp = 100, kd = 20 give a critically damped response with a natural frequency of 10 rad/s.

Position mode tracks (q*, qd*, qdd*); velocity mode tracks (qd*, qdd*) with
``qdd = qdd* + kd (qd* - qd)``. Pure functions, one instance per call.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.dynamics import bias_forces, crba
from caliper_jax.errors import CaliperError
from caliper_jax.integrators import INTEGRATORS
from caliper_jax.model import Model

KP = 100.0
KD = 20.0
DT = 1e-3
MODES = ("position", "velocity")

_STATIC = dict(metadata={"static": True})


@dataclasses.dataclass(frozen=True)
class ControlParams:
    """Gains and timing of the loop. ``kp``, ``kd`` (scalars or (nv,)) and ``dt`` are traced
    leaves; ``mode``, ``integrator``, ``substeps`` and ``sensor_noise`` are static."""

    kp: Any
    kd: Any
    dt: Any                                        # control tick, seconds
    mode: str = dataclasses.field(default="position", **_STATIC)
    integrator: str = dataclasses.field(default="euler", **_STATIC)  # plant, for rollouts
    substeps: int = dataclasses.field(default=1, **_STATIC)          # plant steps per tick
    sensor_noise: float = dataclasses.field(default=0.0, **_STATIC)  # std of measured-q noise

    def replace(self, **changes) -> ControlParams:
        return dataclasses.replace(self, **changes)


jax.tree_util.register_dataclass(
    ControlParams, data_fields=["kp", "kd", "dt"],
    meta_fields=["mode", "integrator", "substeps", "sensor_noise"])


def control_params(model: Model, kp=KP, kd=KD, dt: float = DT, mode: str = "position",
                   integrator: str = "euler", substeps: int = 1, sensor_noise: float = 0.0) -> ControlParams:
    """Validated :class:`ControlParams` in the model's dtype (host side)."""
    if mode not in MODES:
        raise CaliperError(f"control mode must be one of {MODES}, got {mode!r}")
    if integrator not in INTEGRATORS:
        raise CaliperError(f"integrator must be one of {INTEGRATORS}, got {integrator!r}")
    if not (np.isfinite(dt) and dt > 0):
        raise CaliperError(f"dt must be a positive number of seconds, got {dt}")
    if int(substeps) != substeps or substeps < 1:
        raise CaliperError(f"substeps must be a positive integer, got {substeps}")
    if not (np.isfinite(sensor_noise) and sensor_noise >= 0):
        raise CaliperError(f"sensor_noise must be >= 0, got {sensor_noise}")
    if model.nq != model.nv:
        raise CaliperError(f"joint-space control needs nq == nv; {model.name!r} has nq={model.nq}, "
                           f"nv={model.nv} (a free or ball joint)")
    gains = {}
    for name, value in (("kp", kp), ("kd", kd)):
        arr = np.asarray(value, dtype=np.float64)
        if arr.ndim > 1 or (arr.ndim == 1 and arr.shape[0] != model.nv):
            raise CaliperError(f"{name}: expected a scalar or {model.nv} values, got shape {arr.shape}")
        if not np.all(np.isfinite(arr) & (arr >= 0)):
            raise CaliperError(f"{name}: gains must be finite and >= 0, got {value}")
        gains[name] = jnp.asarray(arr, model.dtype)
    return ControlParams(gains["kp"], gains["kd"], jnp.asarray(dt, model.dtype), mode, integrator,
                         int(substeps), float(sensor_noise))


def dynamics_terms(model: Model, q, v):
    """(M(q), b(q, v)): the joint-space inertia and the bias rnea(q, v, 0, g)."""
    return crba(model, q), bias_forces(model, q, v)


def computed_torque_from(M, b, q, v, q_ref, v_ref, a_ref, kp=KP, kd=KD, mode: str = "position"):
    """Computed torque from precomputed ``M`` and ``b`` (see :func:`dynamics_terms`)."""
    if mode == "position":
        a_star = a_ref + kp * (q_ref - q) + kd * (v_ref - v)
    elif mode == "velocity":
        a_star = a_ref + kd * (v_ref - v)
    else:
        raise CaliperError(f"control mode must be one of {MODES}, got {mode!r}")
    return M @ a_star + b


def computed_torque(model: Model, q, v, q_ref, v_ref, a_ref, kp=KP, kd=KD, mode: str = "position"):
    """Unsaturated computed torque (nv,): M(q) a* + rnea(q, v, 0, g)."""
    M, b = dynamics_terms(model, q, v)
    return computed_torque_from(M, b, q, v, q_ref, v_ref, a_ref, kp, kd, mode)


def saturate(model: Model, tau):
    """(tau clipped to +-model.dof_effort_limit, per-joint bool: was it clipped)."""
    limit = model.dof_effort_limit
    out = jnp.clip(tau, -limit, limit)
    return out, out != tau


__all__ = ["ControlParams", "KD", "KP", "DT", "MODES", "computed_torque", "computed_torque_from",
           "control_params", "dynamics_terms", "saturate"]
