"""Trajectory lint T001-T007 over sampled rows (times, q, qd, qdd). NumPy only.

T008/T009 (collision and near-miss) belong to the collision checker and are not computed here.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from doctors.trajectory.rows import check_limits, check_rows, check_series, position_margin

ERROR, WARNING, INFO = "Error", "Warning", "Info"
_SEVERITY_RANK = {ERROR: 0, WARNING: 1, INFO: 2}


@dataclass(frozen=True)
class LintOptions:
    """Thresholds; engineering defaults for metric robots, tune per cell."""

    overspeed_ratio: float = 1.01  # T002: max |qd| / vmax above this
    overaccel_ratio: float = 1.01  # T003: max |qdd| / amax above this
    near_limit_margin: float = 0.05  # T004: margin below this (rad or m) ...
    near_limit_fraction: float = 0.25  # ... on more than this fraction of samples
    detour_min_travel: float = 0.5  # T005: travel above this ...
    detour_ratio: float = 3.0  # ... and above this times |net change|
    jerk_ratio: float = 1.5  # T006: finite-difference jerk above this times jmax
    singular_sigma: float = 1e-2  # T007: sigma_min below this


@dataclass(frozen=True)
class Finding:
    """One lint finding, as data. ``joint`` is None for whole-robot findings (T007); ``value`` is
    the measured quantity and ``limit`` the threshold it was compared with; ``t_start``/``t_end``
    bound the window when the finding spans one."""

    code: str
    severity: str
    joint: int | None
    time: float
    value: float
    limit: float
    fix: str
    message: str
    t_start: float | None = None
    t_end: float | None = None
    joint_name: str | None = None   # the joint's name when the caller gave names (lint_path)

    def to_dict(self) -> dict:
        return asdict(self)


def sort_findings(findings):
    return sorted(findings, key=lambda f: (_SEVERITY_RANK.get(f.severity, 9), f.code, f.time,
                                           -1 if f.joint is None else f.joint))


def _windows(mask: np.ndarray):
    """(start, stop) index pairs of the runs of True in ``mask`` (stop exclusive)."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[0::2], edges[1::2], strict=True))


def _t001(rows, lim, margin, opts):
    out = []
    for j in range(margin.shape[1]):
        k = int(np.argmin(margin[:, j]))
        m = float(margin[k, j])
        if m < 0.0:
            side = "lower" if rows.q[k, j] < lim.lower[j] else "upper"
            bound = lim.lower[j] if side == "lower" else lim.upper[j]
            out.append(Finding(
                "T001", ERROR, j, float(rows.times[k]), m, 0.0,
                "replan inside the joint range or correct the limits in the model",
                f"joint {j} passes its {side} position limit {bound:.6g} by {-m:.4g} "
                f"(worst at t={rows.times[k]:.3f} s)"))
    return out


def _ratio_check(code, rows_x, cap, thresh, times, what, fix):
    out = []
    ratio = np.abs(rows_x) / cap
    for j in range(ratio.shape[1]):
        k = int(np.argmax(ratio[:, j]))
        if ratio[k, j] > thresh:
            val = float(abs(rows_x[k, j]))
            out.append(Finding(
                code, ERROR, j, float(times[k]), val, float(cap[j]), fix,
                f"joint {j} {what} {val:.4g} is {ratio[k, j]:.3f}x its limit {cap[j]:.4g} "
                f"(at t={times[k]:.3f} s)"))
    return out


def _t004(rows, margin, skip, opts):
    out = []
    near = margin < opts.near_limit_margin
    for j in range(margin.shape[1]):
        if j in skip:
            continue
        frac = float(np.mean(near[:, j]))
        if frac > opts.near_limit_fraction:
            k = int(np.argmin(margin[:, j]))
            out.append(Finding(
                "T004", WARNING, j, float(rows.times[k]), frac, opts.near_limit_fraction,
                "move the path away from the joint limit or widen the range if the hardware allows",
                f"joint {j} stays within {opts.near_limit_margin:g} of a position limit on "
                f"{100 * frac:.1f}% of samples (closest {margin[k, j]:.4g} at t={rows.times[k]:.3f} s)"))
    return out


def _t005(rows, opts):
    out = []
    t, q = rows.times, rows.q
    n = t.shape[0]
    if n < 2:
        return out
    span = t[-1] - t[0]
    frac = (t - t[0]) / span if span > 0.0 else np.linspace(0.0, 1.0, n)
    for j in range(q.shape[1]):
        travel = float(np.sum(np.abs(np.diff(q[:, j]))))
        net = float(abs(q[-1, j] - q[0, j]))
        if travel > opts.detour_min_travel and travel > opts.detour_ratio * net:
            chord = q[0, j] + (q[-1, j] - q[0, j]) * frac
            k = int(np.argmax(np.abs(q[:, j] - chord)))
            out.append(Finding(
                "T005", WARNING, j, float(t[k]), travel, opts.detour_ratio * net,
                "take the short way round (wrap the goal angle) or add a waypoint",
                f"joint {j} travels {travel:.4g} for a net change of {net:.4g} "
                f"(detour; farthest from the straight path at t={t[k]:.3f} s)"))
    return out


def _t006(rows, lim, opts):
    out = []
    t, qdd = rows.times, rows.qdd
    if t.shape[0] < 2:
        return out
    dt = np.diff(t)
    ok = dt > 0.0
    if not np.any(ok):
        return out
    jerk = np.zeros((dt.shape[0], qdd.shape[1]))
    jerk[ok] = np.diff(qdd, axis=0)[ok] / dt[ok, None]
    for j in range(qdd.shape[1]):
        if not np.isfinite(lim.jmax[j]):
            continue
        k = int(np.argmax(np.abs(jerk[:, j])))
        val = float(abs(jerk[k, j]))
        if val > opts.jerk_ratio * lim.jmax[j]:
            out.append(Finding(
                "T006", WARNING, j, float(t[k]), val, float(opts.jerk_ratio * lim.jmax[j]),
                "use a jerk-limited profile (S-curve) or lower the acceleration",
                f"joint {j} jerk {val:.4g} is {val / lim.jmax[j]:.2f}x its limit {lim.jmax[j]:.4g} "
                f"between t={t[k]:.3f} s and t={t[k + 1]:.3f} s", float(t[k]), float(t[k + 1])))
    return out


def _t007(times, sigma, opts):
    out = []
    for a, b in _windows(sigma < opts.singular_sigma):
        k = a + int(np.argmin(sigma[a:b]))
        out.append(Finding(
            "T007", WARNING, None, float(times[k]), float(sigma[k]), opts.singular_sigma,
            "re-pose the path away from the singular configuration, or accept damped IK through it",
            f"sigma_min of the Jacobian drops to {sigma[k]:.4e} (< {opts.singular_sigma:.1e}) "
            f"from t={times[a]:.3f} s to t={times[b - 1]:.3f} s (lowest at t={times[k]:.3f} s)",
            float(times[a]), float(times[b - 1])))
    return out


def lint_path(times, q, qd, qdd, limits, sigma_min=None, options: LintOptions | None = None,
              joint_names=None) -> list[Finding]:
    """T001-T007 over sampled rows; returns findings sorted by severity, code, time ([] = clean).

    ``limits`` has per-dof ``lower``, ``upper``, ``vmax``, ``amax`` and (optional, default inf)
    ``jmax``; ``sigma_min`` is the smallest singular value of the world Jacobian per sample,
    computed by the caller (T007 is skipped without it). ``joint_names`` (one per dof): the
    messages name joints by name (``joint_name`` set), not by their index.
    """
    opts = options or LintOptions()
    rows = check_rows(times, q, qd, qdd)
    lim = check_limits(limits, rows.q.shape[1])
    sigma = check_series("sigma_min", sigma_min, rows.times.shape[0])
    margin = position_margin(rows.q, lim)
    findings = _t001(rows, lim, margin, opts)
    over_limit = {f.joint for f in findings}
    findings += _ratio_check("T002", rows.qd, lim.vmax, opts.overspeed_ratio, rows.times, "speed",
                             "stretch the duration or lower the commanded speed")
    findings += _ratio_check("T003", rows.qdd, lim.amax, opts.overaccel_ratio, rows.times, "acceleration",
                             "stretch the duration or lower the commanded acceleration")
    findings += _t004(rows, margin, over_limit, opts)
    findings += _t005(rows, opts)
    findings += _t006(rows, lim, opts)
    if sigma is not None:
        findings += _t007(rows.times, sigma, opts)
    if joint_names is not None:
        names = [str(n) for n in joint_names]
        findings = [f if f.joint is None else
                    replace(f, joint_name=names[f.joint],
                            message=f.message.replace(f"joint {f.joint} ", f"joint {names[f.joint]} ", 1))
                    for f in findings]
    return sort_findings(findings)
