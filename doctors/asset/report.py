"""Findings and reports: the plain data the asset doctor returns, and their text rendering."""
from __future__ import annotations

from dataclasses import dataclass, field

SEVERITIES = ("Error", "Warning", "Info")


@dataclass(frozen=True)
class Finding:
    """One defect. ``severity`` is "Error", "Warning" or "Info"; ``hint`` says what to do."""

    code: str
    severity: str
    message: str
    hint: str
    auto_fixable: bool = False
    link: str | None = None
    joint: str | None = None
    file: str | None = None

    def to_dict(self) -> dict:
        """JSON form; severities are lowercase there ("error" | "warning" | "info")."""
        out = {"code": self.code, "severity": self.severity.lower(), "message": self.message,
               "fix_hint": self.hint, "auto_fixable": self.auto_fixable}
        out.update({k: v for k, v in (("link", self.link), ("joint", self.joint), ("file", self.file))
                    if v is not None})
        return out


def _order(finding: Finding) -> tuple[int, str]:
    return SEVERITIES.index(finding.severity), finding.code


@dataclass
class Report:
    """All findings for one file, most severe first (then by code, then document order)."""

    path: str
    findings: list[Finding]
    unchecked_meshes: list[str] = field(default_factory=list)  # resolved, but no reader for the format

    def __post_init__(self) -> None:
        self.findings = sorted(self.findings, key=_order)

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(f.severity == s for f in self.findings) for s in SEVERITIES}

    @property
    def clean(self) -> bool:
        return not self.findings

    @property
    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def to_dict(self) -> dict:
        counts = self.counts
        return {"path": self.path, "clean": self.clean, "errors": counts["Error"],
                "warnings": counts["Warning"], "infos": counts["Info"],
                "findings": [f.to_dict() for f in self.findings], "unchecked_meshes": self.unchecked_meshes}

    def to_text(self) -> str:
        counts = self.counts
        lines = [f"asset doctor: {counts['Error']} error(s), {counts['Warning']} warning(s), "
                 f"{counts['Info']} info(s) -- {self.path}"]
        for severity in SEVERITIES:
            group = [f for f in self.findings if f.severity == severity]
            if group:
                lines += ["", f"{severity.upper()} ({len(group)})"]
                for f in group:
                    fixable = " [auto-fixable]" if f.auto_fixable else ""
                    lines += [f"  [{f.code}] {f.message}{fixable}", f"         hint: {f.hint}"]
        if self.unchecked_meshes:
            lines += ["", f"note: {len(self.unchecked_meshes)} mesh file(s) found but not loaded "
                          "(no reader for their format installed)"]
        return "\n".join(lines)
