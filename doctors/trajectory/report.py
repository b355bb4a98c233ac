"""Path report over sampled rows: cycle time, per-joint limit margin and utilisation, and the
manipulability / sigma_min profile when the caller supplies it. NumPy only."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from doctors.trajectory.rows import check_limits, check_rows, check_series, position_margin


@dataclass(frozen=True)
class SeriesSummary:
    """Minimum (with its time) and mean of a per-sample scalar."""

    min: float
    mean: float
    time_of_min: float

    @classmethod
    def of(cls, times: np.ndarray, values: np.ndarray) -> SeriesSummary:
        k = int(np.argmin(values))
        return cls(float(values[k]), float(np.mean(values)), float(times[k]))


@dataclass(frozen=True)
class PathReport:
    cycle_time: float
    n_samples: int
    limit_margin: np.ndarray  # (ndof,) smallest min(q - lower, upper - q); negative = violated
    limit_margin_time: np.ndarray  # (ndof,) when it happens
    velocity_utilisation: np.ndarray  # (ndof,) max |qd| / vmax
    acceleration_utilisation: np.ndarray  # (ndof,) max |qdd| / amax
    manipulability: SeriesSummary | None = None
    sigma_min: SeriesSummary | None = None
    joint_names: tuple = field(default_factory=tuple)

    def to_dict(self) -> dict:
        def series(s):
            return None if s is None else {"min": s.min, "mean": s.mean, "time_of_min": s.time_of_min}

        return {
            "cycle_time": self.cycle_time,
            "n_samples": self.n_samples,
            "joints": [
                {
                    "joint": j,
                    "name": self.joint_names[j] if j < len(self.joint_names) else None,
                    "limit_margin": float(self.limit_margin[j]),
                    "limit_margin_time": float(self.limit_margin_time[j]),
                    "velocity_utilisation": float(self.velocity_utilisation[j]),
                    "acceleration_utilisation": float(self.acceleration_utilisation[j]),
                }
                for j in range(self.limit_margin.shape[0])
            ],
            "manipulability": series(self.manipulability),
            "sigma_min": series(self.sigma_min),
        }


def path_report(times, q, qd, qdd, limits, manipulability=None, sigma_min=None, joint_names=()) -> PathReport:
    """Summarise a sampled trajectory against ``limits`` (lower, upper, vmax, amax per dof).

    ``manipulability`` and ``sigma_min`` are optional per-sample series computed by the caller
    from Jacobians along the path; each is summarised by its minimum, the instant of that
    minimum, and its mean.
    """
    rows = check_rows(times, q, qd, qdd)
    lim = check_limits(limits, rows.q.shape[1])
    n = rows.times.shape[0]
    margin = position_margin(rows.q, lim)
    k = np.argmin(margin, axis=0)
    man = check_series("manipulability", manipulability, n)
    sig = check_series("sigma_min", sigma_min, n)
    return PathReport(
        cycle_time=float(rows.times[-1] - rows.times[0]),
        n_samples=n,
        limit_margin=margin[k, np.arange(margin.shape[1])],
        limit_margin_time=rows.times[k],
        velocity_utilisation=np.max(np.abs(rows.qd), axis=0) / lim.vmax,
        acceleration_utilisation=np.max(np.abs(rows.qdd), axis=0) / lim.amax,
        manipulability=None if man is None else SeriesSummary.of(rows.times, man),
        sigma_min=None if sig is None else SeriesSummary.of(rows.times, sig),
        joint_names=tuple(joint_names),
    )


def format_report(report: PathReport, findings=()) -> str:
    """Plain-text rendering of a report and its lint findings (for terminals and logs)."""
    lines = [f"cycle time      : {report.cycle_time:.4f} s  ({report.n_samples} samples)"]
    if report.manipulability is not None:
        m = report.manipulability
        lines.append(f"manipulability  : min {m.min:.4g} @ t={m.time_of_min:.3f}s   mean {m.mean:.4g}")
    if report.sigma_min is not None:
        s = report.sigma_min
        lines.append(f"sigma_min       : min {s.min:.4g} @ t={s.time_of_min:.3f}s   mean {s.mean:.4g}")
    names = [report.joint_names[j] if j < len(report.joint_names) else str(j)
             for j in range(report.limit_margin.shape[0])]
    width = max([16] + [len(n) for n in names])
    lines.append(f"{'joint':<{width}} {'limit-margin':>12} {'vel-util':>9} {'acc-util':>9}")
    for j, name in enumerate(names):
        lines.append(f"{name:<{width}} {report.limit_margin[j]:>12.4g} "
                     f"{report.velocity_utilisation[j]:>9.3f} {report.acceleration_utilisation[j]:>9.3f}")
    errors = sum(f.severity == "Error" for f in findings)
    warnings = sum(f.severity == "Warning" for f in findings)
    lines.append("")
    lines.append(f"LINT: {errors} error(s), {warnings} warning(s)")
    for f in findings:
        lines.append(f"  [{f.code}] {f.severity.upper():<7} {f.message}")
        lines.append(f"         fix: {f.fix}")
    return "\n".join(lines)
