"""Verdicts on learning results, as findings (:class:`doctors.asset.report.Finding`: code, severity,
message, hint) computed from plain numbers, so every rule is testable with planted values.

Eval harness (E001-E003, all Warnings):

* **E001** all episodes failed: 0 of N succeeded.
* **E002** seed lottery: 0 < k < N and the Wilson 95% interval is wider than 0.5 -- the run
  cannot tell checkpoints apart (2/4 fires at width 0.70; 50/100 stays silent).
* **E003** zero reward signal: every episode returned exactly 0.0. (The task environments pay 1.0
  on the success tick, so a run with no success also returns 0 everywhere.)

This module is pure Python (no JAX, no NumPy).
"""
from __future__ import annotations

import math

from doctors.asset.report import SEVERITIES, Finding

#: z of a two-sided 95% interval (the facts' value).
WILSON_Z = 1.959963984540054
#: E002 fires above this Wilson interval width.
LOTTERY_WIDTH = 0.5


def wilson_interval(k: int, n: int, z: float = WILSON_Z) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes in ``n`` trials (honest at 0/n and n/n)."""
    if n < 1:
        raise ValueError(f"wilson_interval: n must be >= 1, got {n}")
    if not 0 <= k <= n:
        raise ValueError(f"wilson_interval: need 0 <= k <= n, got k={k}, n={n}")
    p, d = k / n, 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Most severe first, then by code (stable)."""
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.code))


def eval_findings(successes, returns) -> list[Finding]:
    """E001-E003 of one evaluation. ``successes``: per-episode bools, or the success count (N is then
    ``len(returns)``); ``returns``: per-episode returns. No episodes: no findings."""
    returns = [float(r) for r in returns]
    if isinstance(successes, (int,)) and not isinstance(successes, bool):
        k, n = int(successes), len(returns)
    else:
        flags = [bool(s) for s in successes]
        k, n = sum(flags), len(flags)
        if returns and len(returns) != n:
            raise ValueError(f"eval_findings: {n} success flags but {len(returns)} returns")
    if n == 0:
        return []
    if not 0 <= k <= n:
        raise ValueError(f"eval_findings: {k} successes out of {n} episodes")
    out = []
    if k == 0:
        out.append(Finding(
            "E001", "Warning",
            f"all {n} episodes failed (0/{n} successes): the policy does not do the task closed loop, "
            f"whatever its training loss says",
            "check the deploy cadence (env fps vs the dataset's fps: chunks consumed at the wrong rate), the "
            "observation feature mapping (right robot, right dof count), and sweep the other checkpoints "
            "before blaming the data; if it persists run the autopsy -- the cause is usually upstream"))
    lo, hi = wilson_interval(k, n)
    if 0 < k < n and hi - lo > LOTTERY_WIDTH:
        out.append(Finding(
            "E002", "Warning",
            f"seed lottery: {k}/{n} successes, Wilson 95% interval [{lo:.2f}, {hi:.2f}] (width "
            f"{hi - lo:.2f} > {LOTTERY_WIDTH}): this run cannot tell checkpoints apart -- picking one on "
            f"it is picking on luck",
            f"raise the number of episodes (the interval shrinks ~1/sqrt(n); {n} -> {4 * n} halves it)"))
    if returns and all(r == 0.0 for r in returns):
        out.append(Finding(
            "E003", "Warning",
            f"zero reward signal: every one of the {n} episodes returned exactly 0.0, so returns cannot "
            f"rank near-misses",
            "give the task a reward that grades progress (or evaluate a policy that succeeds: the task "
            "environments pay 1.0 on the success tick)"))
    return sort_findings(out)


__all__ = ["LOTTERY_WIDTH", "WILSON_Z", "eval_findings", "sort_findings", "wilson_interval"]
