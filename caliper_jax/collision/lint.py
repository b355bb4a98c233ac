"""Trajectory lint, collision half: T008 (path in collision) and T009 (near miss).

Findings use the trajectory lint's :class:`doctors.trajectory.lint.Finding` (same fields, same
sorting), so they merge with T001-T007 from :func:`doctors.trajectory.lint_path`:

* **T008** (Error): the smallest signed distance over all checked pairs is negative; one finding per
  contiguous window of colliding samples, at the deepest sample, ``value`` the signed distance there
  (minus the penetration depth), ``limit`` 0.
* **T009** (Warning): the smallest distance is below ``clearance`` without colliding; one finding
  per contiguous window of such samples that contains no colliding sample (a window that does is
  already a T008), at the closest sample, ``value`` the distance, ``limit`` the clearance.
  ``clearance`` 0 disables T009.

Both are whole-robot findings (``joint`` None); the message names the closest pair. Only the
sampled rows are checked: what happens between samples is not (sample densely -- 100 per segment
by default).
"""
from __future__ import annotations

import numpy as np

from caliper_jax.collision import api
from caliper_jax.collision.scene import CollisionModel
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model
from doctors.trajectory.lint import ERROR, WARNING, Finding, sort_findings

#: Default near-miss clearance (m) for T009.
DEFAULT_CLEARANCE = 0.02
#: Default rows per trajectory segment when sampling a Trajectory.
SAMPLES_PER_SEGMENT = 100


def _runs(mask: np.ndarray):
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True))


def closest_pairs(model: Model, cm: CollisionModel, q):
    """Per sample: the smallest signed distance and the index of its pair ((n,), (n,))."""
    d = api.distances(model, cm, q)
    if d.shape[-1] == 0:
        n = d.shape[0]
        return np.full(n, np.inf), np.full(n, -1)
    k = np.argmin(d, axis=-1)
    return np.take_along_axis(d, k[:, None], axis=-1)[:, 0], k


def lint_collision(model: Model, cm: CollisionModel, times, q,
                   clearance: float = DEFAULT_CLEARANCE) -> list[Finding]:
    """T008/T009 over sampled rows ``times`` (n,), ``q`` (n, nq); sorted findings ([] = clean)."""
    t = np.asarray(times, dtype=np.float64).reshape(-1)
    q = np.asarray(q, dtype=np.float64)
    if not np.all(np.isfinite(t)):
        raise CaliperError("times: non-finite values")
    if q.ndim != 2 or q.shape[0] != t.shape[0]:
        raise CaliperError(f"q: expected shape ({t.shape[0]}, nq) to match times, got {q.shape}")
    if not (np.isfinite(clearance) and clearance >= 0):
        raise CaliperError(f"clearance must be >= 0 (0 disables T009), got {clearance!r}")
    if t.shape[0] == 0:
        return []
    dmin, pair = closest_pairs(model, cm, q)
    names = cm.pair_names()

    def label(k):
        if pair[k] < 0:
            return "no pair"
        a, b = names[pair[k]]
        return f"{a} / {b}"

    findings = []
    colliding = dmin < 0
    for a, b in _runs(colliding):
        k = a + int(np.argmin(dmin[a:b]))
        findings.append(Finding(
            "T008", ERROR, None, float(t[k]), float(dmin[k]), 0.0,
            "replan around the obstacle (caliper plan / trajopt) or move the obstacle",
            f"path in collision from t={t[a]:.3f} s to t={t[b - 1]:.3f} s: {label(k)} penetrate by "
            f"{-dmin[k]:.4g} m (deepest at t={t[k]:.3f} s)", float(t[a]), float(t[b - 1])))
    if clearance > 0:
        for a, b in _runs(dmin < clearance):
            if colliding[a:b].any():
                continue
            k = a + int(np.argmin(dmin[a:b]))
            findings.append(Finding(
                "T009", WARNING, None, float(t[k]), float(dmin[k]), float(clearance),
                "add clearance: replan with a margin or move the path away from the obstacle",
                f"near miss from t={t[a]:.3f} s to t={t[b - 1]:.3f} s: {label(k)} come within "
                f"{dmin[k]:.4g} m (< clearance {clearance:g} m; closest at t={t[k]:.3f} s)",
                float(t[a]), float(t[b - 1])))
    return sort_findings(findings)


def trajectory_rows(traj, per_segment: int = SAMPLES_PER_SEGMENT):
    """(times, q) sampled evenly over a :class:`caliper_jax.motion.Trajectory`: ``per_segment``
    rows per segment (at least 2 in all), first row at 0, last at the duration."""
    from caliper_jax.motion.trajectory import sample_at

    if per_segment < 1:
        raise CaliperError(f"per_segment must be >= 1, got {per_segment!r}")
    nseg = int(np.shape(traj.t_start)[-1])
    times = np.linspace(0.0, float(traj.duration), max(2, per_segment * nseg))
    rows = sample_at(traj, times)
    return np.asarray(rows.times, dtype=np.float64), np.asarray(rows.q, dtype=np.float64)


def lint_trajectory(model: Model, cm: CollisionModel, traj, clearance: float = DEFAULT_CLEARANCE,
                    per_segment: int = SAMPLES_PER_SEGMENT) -> list[Finding]:
    """T008/T009 over a Trajectory sampled ``per_segment`` rows per segment."""
    t, q = trajectory_rows(traj, per_segment)
    return lint_collision(model, cm, t, q, clearance)


__all__ = ["DEFAULT_CLEARANCE", "SAMPLES_PER_SEGMENT", "closest_pairs", "lint_collision", "lint_trajectory",
           "trajectory_rows"]
