"""Input checking for the trajectory lint and path report (NumPy only, no JAX)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from caliper_jax.errors import CaliperError


class LintLimits(NamedTuple):
    """Per-dof limits the lint compares against; any object with these five attributes works
    (``caliper_jax.motion.MotionLimits`` included), as does a mapping with these keys."""

    lower: np.ndarray
    upper: np.ndarray
    vmax: np.ndarray
    amax: np.ndarray
    jmax: np.ndarray


class Rows(NamedTuple):
    times: np.ndarray  # (n,)
    q: np.ndarray  # (n, ndof)
    qd: np.ndarray
    qdd: np.ndarray


def _get(limits, name):
    if isinstance(limits, dict):
        if name not in limits:
            if name == "jmax":
                return np.inf
            raise CaliperError(f"limits: missing {name!r}")
        return limits[name]
    if not hasattr(limits, name):
        if name == "jmax":
            return np.inf
        raise CaliperError(f"limits: missing attribute {name!r}")
    return getattr(limits, name)


def check_rows(times, q, qd, qdd) -> Rows:
    """Rows as float64 arrays of consistent shapes, finite, times non-decreasing."""
    t = np.asarray(times, dtype=np.float64).reshape(-1)
    arrs = {}
    for name, val in (("q", q), ("qd", qd), ("qdd", qdd)):
        a = np.asarray(val, dtype=np.float64)
        if a.ndim == 1:
            a = a[:, None]
        if a.ndim != 2 or a.shape[0] != t.shape[0]:
            raise CaliperError(f"{name}: expected shape ({t.shape[0]}, ndof) to match times, got {a.shape}")
        arrs[name] = a
    ndof = arrs["q"].shape[1]
    for name in ("qd", "qdd"):
        if arrs[name].shape[1] != ndof:
            raise CaliperError(f"{name}: expected {ndof} columns like q, got {arrs[name].shape[1]}")
    if t.shape[0] < 1:
        raise CaliperError("times: need at least one sample")
    for name, a in (("times", t), *arrs.items()):
        bad = ~np.isfinite(a)
        if np.any(bad):
            row = int(np.argwhere(bad)[0][0])
            raise CaliperError(f"{name}: non-finite value at sample {row}")
    if np.any(np.diff(t) < 0.0):
        k = int(np.flatnonzero(np.diff(t) < 0.0)[0])
        raise CaliperError(f"times: must not decrease (sample {k + 1} is earlier than sample {k})")
    return Rows(t, arrs["q"], arrs["qd"], arrs["qdd"])


def check_limits(limits, ndof: int) -> LintLimits:
    out = []
    for name in LintLimits._fields:
        a = np.asarray(_get(limits, name), dtype=np.float64)
        a = np.broadcast_to(a, (ndof,)) if a.ndim == 0 else a.reshape(-1)
        if a.shape[0] != ndof:
            raise CaliperError(f"limits.{name}: expected {ndof} entries, got {a.shape[0]}")
        if np.any(np.isnan(a)):
            raise CaliperError(f"limits.{name}[{int(np.flatnonzero(np.isnan(a))[0])}] is NaN")
        if name in ("vmax", "amax", "jmax") and np.any(a <= 0.0):
            raise CaliperError(f"limits.{name}[{int(np.flatnonzero(a <= 0.0)[0])}] must be > 0")
        out.append(np.array(a, dtype=np.float64))
    return LintLimits(*out)


def check_series(name: str, values, n: int):
    if values is None:
        return None
    a = np.asarray(values, dtype=np.float64).reshape(-1)
    if a.shape[0] != n:
        raise CaliperError(f"{name}: expected {n} values (one per sample), got {a.shape[0]}")
    if np.any(np.isnan(a)):
        raise CaliperError(f"{name}: NaN at sample {int(np.flatnonzero(np.isnan(a))[0])}")
    return a


def position_margin(q: np.ndarray, lim: LintLimits) -> np.ndarray:
    """min(q - lower, upper - q) per sample and dof (inf for unbounded joints)."""
    with np.errstate(invalid="ignore"):
        return np.minimum(q - lim.lower, lim.upper - q)
