"""The doctor's report: findings (most severe first), per-feature summaries, text/Markdown/JSON faces."""

from __future__ import annotations

from dataclasses import dataclass, field

from doctors.dataset.findings import Finding


@dataclass
class Report:
    dataset: str
    episodes: int
    frames: int
    fps: int
    findings: list[Finding]
    summaries: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.findings = sorted(self.findings, key=Finding.sort_key)

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(f.severity == s for f in self.findings) for s in ("Error", "Warning", "Info")}

    @property
    def clean(self) -> bool:
        return not self.findings

    def codes(self) -> list[str]:
        return sorted({f.code for f in self.findings})

    def to_dict(self) -> dict:
        return {
            "dataset": self.dataset,
            "episodes": self.episodes,
            "frames": self.frames,
            "fps": self.fps,
            "clean": self.clean,
            "counts": self.counts,
            "findings": [f.to_dict() for f in self.findings],
            "summaries": self.summaries,
        }

    def text(self) -> str:
        head = (
            f"dataset doctor - {self.dataset}\n"
            f"  {self.episodes} episodes, {self.frames} frames @ {self.fps} fps"
        )
        if self.clean:
            return head + "\n  no findings"
        c = self.counts
        lines = [head, f"  {c['Error']} error(s), {c['Warning']} warning(s), {c['Info']} info"]
        for f in self.findings:
            lines.append(f"  [{f.code}] ({f.severity.lower()}) {f.message}")
            lines.append(f"      fix: {f.hint}")
        return "\n".join(lines)

    def markdown(self) -> str:
        """A section for a dataset card."""
        c = self.counts
        lines = [
            "## Dataset doctor",
            "",
            f"{self.episodes} episodes, {self.frames} frames at {self.fps} fps: "
            f"{c['Error']} error(s), {c['Warning']} warning(s), {c['Info']} info.",
            "",
        ]
        if self.findings:
            lines += ["| code | severity | episode | message | fix |", "|---|---|---|---|---|"]
            for f in self.findings:
                ep = "" if f.episode is None else str(f.episode)
                lines.append(f"| {f.code} | {f.severity} | {ep} | {_cell(f.message)} | {_cell(f.hint)} |")
            lines.append("")
        if self.summaries:
            lines += [
                "| feature | dim | units | mean | std | min bin occupancy |",
                "|---|---|---|---|---|---|",
            ]
            for key, s in self.summaries.items():
                units = ", ".join(sorted(set(s["units"])))
                lines.append(
                    f"| {_cell(key)} | {s['dim']} | {units} | {_num(s['mean'])} | {_num(s['std'])} | "
                    f"{min(s['bin_occupancy']):.2f} |"
                )
        return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _num(values: list[float]) -> str:
    shown = ", ".join(f"{v:.3g}" for v in values[:4])
    return f"[{shown}{', ...' if len(values) > 4 else ''}]"
