"""The policy autopsy: every diagnostic that applies, merged under one verdict.

:func:`autopsy` runs

* D -- the dataset doctor (:func:`doctors.dataset.diagnose`) on the dataset;
* P -- the policy debugger (:func:`learn.debug.analyze_policy`), dataset-aware;
* E -- closed-loop evaluation (:func:`learn.evaluate.evaluate`), only when a task is given;
* L -- the deploy-loop latency profiler (:func:`learn.profile.profile_rollout`), likewise.

The verdict is template-based. Sections are ranked by their most severe finding; ties break toward
the dataset, then the policy, then the evaluation, then latency -- data problems cause policy
problems, not the other way round, so the upstream fix comes first. The merged finding list follows
the same rule (severity, then section), so the most likely cause is the first finding.

Everything but the L section is deterministic for a (policy, dataset, task, seed). L is
wall-clock: :meth:`AutopsyReport.to_dict` keeps it in its own ``timings`` field, and
``to_dict(timings=False)`` leaves it out of the order and the verdict as well, for byte-identical
output.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from doctors.asset.report import SEVERITIES

SECTIONS = ("D", "P", "E", "L")          # also the tie-break order
TITLES = {"D": "dataset doctor (D)", "P": "policy debugger (P)", "E": "closed-loop eval (E)",
          "L": "deploy latency (L)"}
_NOUN = {"D": "the dataset", "P": "the policy", "E": "the closed-loop evaluation", "L": "the deploy loop"}


# -- ordering (pure) -------------------------------------------------------------------------------
def _severity_rank(finding) -> int:
    return SEVERITIES.index(finding.severity) if finding.severity in SEVERITIES else len(SEVERITIES)


def section_rank(findings) -> int:
    """0 (an Error) .. 2 (only Infos); 3 when ``findings`` is empty."""
    return min((_severity_rank(f) for f in findings), default=len(SEVERITIES))


def order_sections(by_section: dict) -> list[str]:
    """Section keys of ``{key: findings}`` most severe first, ties toward D, P, E, L."""
    return sorted(by_section, key=lambda k: (section_rank(by_section[k]), SECTIONS.index(k)))


def order_findings(by_section: dict) -> list[tuple[str, object]]:
    """(section, finding) pairs: most severe first, ties toward D, P, E, L, then by code (stable)."""
    pairs = [(k, i, f) for k in by_section for i, f in enumerate(by_section[k])]
    pairs.sort(key=lambda p: (_severity_rank(p[2]), SECTIONS.index(p[0]), p[2].code, p[1]))
    return [(k, f) for k, _, f in pairs]


def _counts(findings) -> str:
    c = {s: sum(f.severity == s for f in findings) for s in SEVERITIES}
    parts = [f"{c['Error']} error(s)", f"{c['Warning']} warning(s)"]
    if c["Info"]:
        parts.append(f"{c['Info']} info(s)")
    codes = sorted({f.code for f in findings})
    return f"{', '.join(parts)} ({', '.join(codes)})"


def section_sentence(key: str, findings, summary: dict | None = None) -> str:
    """One clause describing section ``key``'s outcome."""
    summary = summary or {}
    if key == "D":
        return (f"the dataset has {_counts(findings)} that predict training failure" if findings
                else "the dataset is clean")
    if key == "P":
        return (f"the policy debugger reports {_counts(findings)}" if findings
                else "the policy checks are clean")
    if key == "E":
        head = "closed loop"
        if "successes" in summary and "episodes" in summary:
            head += f": {summary['successes']}/{summary['episodes']} episodes succeeded"
            if summary.get("wilson95") is not None:
                lo, hi = summary["wilson95"]
                head += f" (95% CI [{lo:.2f}, {hi:.2f}])"
        return f"{head}, {_counts(findings)}" if findings else f"{head}, no eval findings"
    if key == "L":
        hz, fps = summary.get("achievable_hz"), summary.get("fps")
        rate = "" if hz is None or fps is None else f" (~{hz:.0f} Hz achievable at a {fps:g} Hz budget)"
        if findings:
            return f"the deploy loop{rate} reports {_counts(findings)}"
        return f"the deploy loop holds its rate{rate}"
    raise ValueError(f"unknown section {key!r}")


def verdict_text(by_section: dict, summaries: dict | None = None, skipped: dict | None = None) -> str:
    """The verdict paragraph of ``{section: findings}``: leads with the most severe section (ties
    toward the dataset); ``skipped`` {section: reason} is mentioned at the end."""
    summaries, skipped = summaries or {}, skipped or {}
    order = order_sections(by_section)
    if not order:
        text = "No diagnostics ran."
    elif all(not by_section[k] for k in order):
        text = "No findings: " + "; ".join(section_sentence(k, [], summaries.get(k)) for k in order) + "."
    else:
        lead = order[0]
        first = order_findings({lead: by_section[lead]})[0][1]
        text = (f"Most likely cause first -- {_NOUN[lead]}: "
                f"{section_sentence(lead, by_section[lead], summaries.get(lead))}; start with {first.code}.")
        rest = [section_sentence(k, by_section[k], summaries.get(k)) for k in order[1:]]
        if rest:
            text += " Then: " + "; ".join(rest) + "."
    reasons: dict = {}
    for k in SECTIONS:
        if k in skipped:
            reasons.setdefault(skipped[k], []).append(TITLES[k])
    for reason, titles in reasons.items():
        text += f" Not run: {' and '.join(titles)} -- {reason}."
    return text


def _where(f) -> str:
    """``feature=... dof=... episode=...`` of a finding's location fields that are set."""
    parts = []
    for name in ("feature", "dof", "episode", "frame", "joint", "link"):
        v = getattr(f, name, None)
        if v is not None:
            parts.append(f"{name}={v}")
    return " ".join(parts) + " " if parts else ""


def finding_dict(section: str, f) -> dict:
    """A uniform JSON form of a finding of any of the doctors (lowercase severity, ``fix_hint``,
    location fields that are set)."""
    out = {"section": section, "code": f.code, "severity": f.severity.lower(), "message": f.message,
           "fix_hint": getattr(f, "hint", None) or getattr(f, "fix_hint", None)}
    extra = f.to_dict() if hasattr(f, "to_dict") else {}
    for k, v in extra.items():
        if k not in out and k not in ("hint", "fix_hint") and v is not None and v is not False:
            out[k] = v
    return out


# -- report ----------------------------------------------------------------------------------------
@dataclass
class AutopsyReport:
    policy: str
    dataset: str
    findings: dict                        # {section: [findings]} for the sections that ran
    summaries: dict = field(default_factory=dict)   # {section: JSON-ready summary} (not L)
    skipped: dict = field(default_factory=dict)     # {section: reason}
    latency: object = None                # learn.profile.LatencyReport or None
    evaluation: object = None             # what learn.evaluate.evaluate returned, or None

    def _sections(self, timings: bool) -> dict:
        return {k: v for k, v in self.findings.items() if timings or k != "L"}

    def order(self, timings: bool = True) -> list[str]:
        return order_sections(self._sections(timings))

    def ordered_findings(self, timings: bool = True) -> list[tuple[str, object]]:
        """(section, finding), the most likely cause first."""
        return order_findings(self._sections(timings))

    def verdict(self, timings: bool = True) -> str:
        summaries = dict(self.summaries)
        if timings and self.latency is not None:
            hz = self.latency.achievable_hz
            summaries["L"] = {"achievable_hz": hz if hz != float("inf") else None, "fps": self.latency.fps}
        return verdict_text(self._sections(timings), summaries, self.skipped)

    def errors(self, timings: bool = True) -> int:
        return sum(f.severity == "Error" for fs in self._sections(timings).values() for f in fs)

    @property
    def exit_code(self) -> int:
        """1 when any section reported an Error, else 0 (the CLI's exit status)."""
        return int(self.errors() > 0)

    def to_dict(self, timings: bool = True) -> dict:
        """JSON-ready form. Wall-clock numbers sit under ``timings``; with ``timings=False`` the L
        section is left out entirely (order and verdict included), so the result is deterministic."""
        out = {"policy": self.policy, "dataset": self.dataset, "verdict": self.verdict(timings),
               "order": self.order(timings), "exit_code": int(self.errors(timings) > 0),
               "findings": [finding_dict(k, f) for k, f in self.ordered_findings(timings)],
               "sections": {k: {"summary": self.summaries.get(k, {}),
                                "findings": [finding_dict(k, f) for f in fs]}
                            for k, fs in self._sections(False).items()},
               "skipped": dict(self.skipped)}
        if timings:
            out["timings"] = None if self.latency is None else {"latency": self.latency.to_dict()}
        return out

    def render_text(self) -> str:
        lines = ["== Caliper autopsy ==", f"policy:  {self.policy}", f"dataset: {self.dataset}", "",
                 "VERDICT: " + self.verdict(), ""]
        for k in SECTIONS:
            if k in self.skipped:
                lines += [f"-- {TITLES[k]} --", f"not run: {self.skipped[k]}", ""]
                continue
            if k not in self.findings:
                continue
            head = f"-- {TITLES[k]}"
            s = self.summaries.get(k, {})
            if k == "D" and s:
                head += f" -- {s.get('episodes')} episodes, {s.get('frames')} frames @ {s.get('fps')} fps"
            lines.append(head + " --")
            if k == "L" and self.latency is not None:
                lines.append(self.latency.render_text())
            else:
                if k == "E" and self.evaluation is not None:
                    lines.append(self.evaluation.summary())
                if not self.findings[k]:
                    lines.append("no findings -- every reachable check passed.")
                for f in self.findings[k]:
                    lines.append(f"  [{f.code}] ({f.severity.lower()}) {_where(f)}{f.message}")
                    lines.append(f"      fix: {getattr(f, 'hint', '')}")
            lines.append("")
        return "\n".join(lines).rstrip() + "\n"


# -- the driver ------------------------------------------------------------------------------------
def _eval_section(policy, task, episodes: int, seed: int):
    """(findings, summary, result) of :func:`learn.evaluate.evaluate`."""
    from learn.evaluate import evaluate

    result = evaluate(policy, task, episodes=episodes, seed=seed)
    lo, hi = result.wilson
    summary = {"episodes": int(result.n), "successes": int(result.successes), "wilson95": [lo, hi],
               "mean_return": result.mean_return}
    return list(result.findings), summary, result


def autopsy(policy_or_checkpoint_dir, dataset_root, *, task=None, episodes: int = 20, seed: int = 0,
            profile_ticks: int = 200, robot_limits=None, probes: int = 32) -> AutopsyReport:
    """D + P (+ E + L when ``task`` is given) of a policy (a :class:`learn.bundle.TrainedPolicy`,
    a checkpoint folder or an exported ``.safetensors``) and the dataset it was trained on.
    ``robot_limits`` (for P003) defaults to the task robot's joint limits when a task is given."""
    from doctors.dataset import diagnose
    from learn.debug import _load_checkpoint, analyze_policy, config_findings, read_checkpoint_config

    source = policy_or_checkpoint_dir
    is_path = isinstance(source, (str, Path))
    findings, summaries, skipped = {}, {}, {}
    report = diagnose(dataset_root, progress=False)
    findings["D"] = list(report.findings)
    summaries["D"] = {"episodes": report.episodes, "frames": report.frames, "fps": report.fps}
    policy = source
    if is_path:
        config, _ = read_checkpoint_config(source)
        unloadable = any(f.code == "P008" and f.severity == "Error" for f in config_findings(config))
        policy = None if unloadable else _load_checkpoint(source)
    ts = task_fps = None
    if task is not None:
        from tasks.env import resolve_task
        from tasks.env_spec import make_layout

        ts = resolve_task(task)
        task_fps = make_layout(ts).fps
        if robot_limits is None:
            robot_limits = (ts.model.qpos_lower, ts.model.qpos_upper)
    findings["P"] = analyze_policy(source if policy is None else policy, dataset_root,
                                   robot_limits=robot_limits, probes=probes, seed=seed)
    latency = evaluation = None
    if ts is None:
        skipped["E"] = skipped["L"] = "no task given (rollouts need a simulated task)"
    elif policy is None:
        skipped["E"] = skipped["L"] = "the policy configuration cannot be built (P008)"
    elif int(policy.features.fps) != int(task_fps):
        skipped["E"] = skipped["L"] = (f"the policy was trained at {policy.features.fps} fps but the task "
                                       f"runs at {task_fps} fps, and deploy refuses a cadence mismatch")
    else:
        findings["E"], summaries["E"], evaluation = _eval_section(policy, ts, episodes, seed)
        from learn.profile import profile_rollout

        latency = profile_rollout(policy, ts, ticks=profile_ticks, seed=seed)
        findings["L"] = list(latency.findings)
    return AutopsyReport(str(source) if is_path else "<in-memory policy>", str(dataset_root), findings,
                         summaries, skipped, latency, evaluation)


__all__ = ["AutopsyReport", "SECTIONS", "autopsy", "finding_dict", "order_findings", "order_sections",
           "section_rank", "section_sentence", "verdict_text"]
