"""Singularity measures along a joint path, and the model-aware trajectory lint / path report.

``sigma_min`` is the smallest singular value of the frame's 6-row world Jacobian (rows [v; w],
LOCAL_WORLD_ALIGNED; the singular values do not depend on the axes the rows are written in) and
``manipulability`` the product of its singular values (Yoshikawa). They feed T007 and the path
report of ``doctors.trajectory``, which stay NumPy-only: this module is the JAX side that
computes the series from a Model.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.ik import api as ik_api
from caliper_jax.ik.singularity import jacobian, singular_values
from caliper_jax.model import Model
from caliper_jax.motion.limits import MotionLimits
from doctors.trajectory import LintOptions, lint_path, path_report

#: Configurations per compiled call are padded to a power of two, at least this many.
MIN_BUCKET = 64


def singularity_measures(model: Model, q, frame: int):
    """(sigma_min, manipulability) of ``frame`` at one configuration q (pure; vmap it)."""
    s = singular_values(jacobian(model, q, frame))
    return s[-1], jnp.prod(s)


@lru_cache(maxsize=None)
def _measures_fn(frame: int):
    return jax.jit(jax.vmap(lambda m, q: singularity_measures(m, q, frame), in_axes=(None, 0)))


class PathMetrics(NamedTuple):
    """Per sample (NumPy, the rows' batch shape): ``sigma_min``, ``manipulability``; ``frame``."""

    sigma_min: np.ndarray
    manipulability: np.ndarray
    frame: str


def path_metrics(model: Model, q, frame=None) -> PathMetrics:
    """sigma_min and manipulability of ``frame`` (default: the tool frame) at configurations
    q (..., nq), in one jitted, vmapped call (padded to a power of two to bound recompiles)."""
    frame_idx, frame_name = ik_api.resolve_frame(model, frame)
    qa = np.asarray(q, dtype=np.float64)
    if qa.ndim == 0 or qa.shape[-1] != model.nq or not np.all(np.isfinite(qa)):
        raise CaliperError(f"q: expected finite (..., {model.nq}) for {model.name!r}, got shape {qa.shape}")
    batch = qa.shape[:-1]
    flat = qa.reshape(-1, model.nq)
    n = flat.shape[0]
    size = max(MIN_BUCKET, 1 << max(n - 1, 1).bit_length())
    if n == 0:
        raise CaliperError("q: no configurations")
    padded = np.concatenate([flat, np.repeat(flat[-1:], size - n, axis=0)])
    sig, man = _measures_fn(frame_idx)(ik_api.jit_model(model), jnp.asarray(padded, model.dtype))
    return PathMetrics(np.asarray(sig, np.float64)[:n].reshape(batch),
                       np.asarray(man, np.float64)[:n].reshape(batch), frame_name)


def lint_model_path(model: Model, times, q, qd, qdd, *, limits: MotionLimits | None = None, frame=None,
                    options: LintOptions | None = None):
    """The path report and lint (T001-T007) of sampled rows on ``model``: the limits default to
    the model's, sigma_min / manipulability come from ``frame``'s Jacobian (default: the tool
    frame). Returns (PathReport, findings, PathMetrics)."""
    limits = MotionLimits.from_model(model) if limits is None else limits
    metrics = path_metrics(model, q, frame)
    names = dof_names(model)
    report = path_report(times, q, qd, qdd, limits, manipulability=metrics.manipulability,
                         sigma_min=metrics.sigma_min, joint_names=names)
    findings = lint_path(times, q, qd, qdd, limits, sigma_min=metrics.sigma_min, options=options,
                         joint_names=names)
    return report, findings, metrics


def dof_names(model: Model) -> tuple:
    """One name per coordinate for the report (the joint's name; nq == nv motion models)."""
    names = [""] * model.nq
    for b, name in enumerate(model.body_names):
        va = model.body_vadr[b]
        if model.vfull_mimic[va] < 0 and model.jnt_type[b] in ("revolute", "prismatic"):
            names[model.qfull_src[model.body_qadr[b]]] = name
    return tuple(n or str(i) for i, n in enumerate(names))


__all__ = ["MIN_BUCKET", "singularity_measures", "PathMetrics", "path_metrics", "lint_model_path",
           "dof_names"]
