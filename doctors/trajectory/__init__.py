"""Trajectory lint (T001-T007) and path report over sampled rows. NumPy only: never imports JAX."""
from doctors.trajectory.lint import ERROR, INFO, WARNING, Finding, LintOptions, lint_path, sort_findings
from doctors.trajectory.report import PathReport, SeriesSummary, format_report, path_report
from doctors.trajectory.rows import LintLimits

__all__ = [
    "ERROR",
    "INFO",
    "WARNING",
    "Finding",
    "LintLimits",
    "LintOptions",
    "PathReport",
    "SeriesSummary",
    "format_report",
    "lint_path",
    "path_report",
    "sort_findings",
]
