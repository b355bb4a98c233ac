#!/usr/bin/env python3
"""Every figure the README and docs state as measured names what produces it; every guarantee
they state has a test that CI runs.

    python tools/check_claims.py [--json] [--list] [ROOT]

Two checks (each violation is listed; exit code 1 when there is any, else 0):

* **figures**: README.md and docs/*.md are split into paragraphs (blank-line separated; a table
  is one paragraph). A paragraph *states a measured figure* when it holds a number and the word
  "measured" (not as an adjective of a sensor value: "the measured position/state/q/..."), or when
  it holds a number under a heading containing "Measured". Each such paragraph must cite its
  producer: a ``tests/....py`` or ``benchmarks/....py`` path (optionally ``::test_name``) in the
  paragraph itself, or in the heading or first paragraph of its section or of a section enclosing
  it (a "produced by" line covers the section).
  Every cited file must exist and every cited test name must be defined in its file.
* **guarantees**: the table of docs/claims.md lists each guarantee with the test that proves it
  (``tests/file.py::test_name``). The test must exist, and CI must run it: either it is in the
  default run (not marked ``slow``) or it is marked ``claim`` (the claims step of .ci/run,
  ``python -m pytest -m claim``).

Nothing is imported or run: files are read with :mod:`ast` and regular expressions.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

PRODUCER = re.compile(r"\b((?:tests|benchmarks)/[\w./-]*?\.py)(?:::(\w+))?")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?(?![\w])"
                    r"|\d+(?:\.\d+)?\s?(?:x|%|ms|us|s|min|MB|GB|m|mm)\b")
MEASURED = re.compile(r"\bmeasured\b", re.IGNORECASE)
# "measured" as the adjective of a sensor reading, not a claim about a figure
NOT_A_FIGURE = re.compile(r"\bmeasured\*?\s+(?:position|positions|state|stream|joints?|q|value|poses?|"
                          r"velocit(?:y|ies)|torques?|effort|data|signal|trajector(?:y|ies))\b|"
                          r"\bq_measured\b", re.IGNORECASE)
HEADING = re.compile(r"^(#{1,6})\s+(.*)")
CLAIM_ROW = re.compile(r"^\|\s*(?P<claim>[^|]+?)\s*\|\s*(?P<where>[^|]+?)\s*\|"
                       r"\s*`?(?P<test>tests/[\w/.-]+\.py::[\w\[\]-]+)`?\s*\|")


@dataclass
class Paragraph:
    path: str
    line: int
    text: str
    section: str
    section_intro: str
    producers: list = field(default_factory=list)


def paragraphs(path: Path, rel: str) -> list[Paragraph]:
    """The paragraphs of a markdown file outside fenced code blocks, each with its section heading
    and the "produced by" context: the headings and first paragraphs of its section and of every
    enclosing section."""
    out, block, start, fenced = [], [], 0, False
    stack: list[list] = []                      # [level, heading, intro paragraph or None]
    lines = path.read_text(encoding="utf-8").splitlines()

    def flush():
        nonlocal block
        if block:
            text = "\n".join(block)
            if stack and stack[-1][2] is None:
                stack[-1][2] = text
            context = "\n".join(f"{h}\n{i or ''}" for _, h, i in stack)
            out.append(Paragraph(rel, start, text, stack[-1][1] if stack else "", context))
            block = []

    for n, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            flush()
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = HEADING.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append([level, heading.group(2).strip(), None])
            continue
        if not line.strip():
            flush()
            continue
        if not block:
            start = n
        block.append(line)
    flush()
    return out


def states_a_measured_figure(p: Paragraph) -> bool:
    if not NUMBER.search(p.text):
        return False
    text = NOT_A_FIGURE.sub("", p.text)
    return bool(MEASURED.search(text)) or "measured" in p.section.lower()


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _check_producer(root: Path, file: str, name: str | None) -> str | None:
    path = root / file
    if not path.is_file():
        return f"{file} does not exist"
    if name and name not in _test_names(path):
        return f"{file} defines no {name}"
    return None


def check_figures(root: Path) -> tuple[list[dict], list[dict]]:
    docs = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    figures, problems = [], []
    for path in docs:
        if not path.is_file() or path.name == "claims.md":
            continue
        rel = str(path.relative_to(root))
        for p in paragraphs(path, rel):
            if not states_a_measured_figure(p):
                continue
            cited = PRODUCER.findall(p.text) or PRODUCER.findall(p.section_intro)
            summary = " ".join(p.text.split())[:100]
            entry = {"file": rel, "line": p.line, "section": p.section, "text": summary,
                     "producers": [f + (f"::{n}" if n else "") for f, n in cited]}
            figures.append(entry)
            if not cited:
                problems.append({**entry, "problem": "states a measured figure but cites no tests/ or "
                                                     "benchmarks/ file that produces it"})
            for f, n in cited:
                why = _check_producer(root, f, n or None)
                if why:
                    problems.append({**entry, "problem": f"cites a producer that is not there: {why}"})
    return figures, problems


def _marks(root: Path, file: str, name: str) -> set[str] | None:
    """The pytest marks of a test function, its module's ``pytestmark`` included (None: no such
    test). Marks are read from decorators and ``pytestmark`` assignments by name."""
    tree = ast.parse((root / file).read_text(encoding="utf-8"))
    marks = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            marks |= set(re.findall(r"mark\.(\w+)", ast.unparse(node.value)))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            for dec in node.decorator_list:
                marks |= set(re.findall(r"mark\.(\w+)", ast.unparse(dec)))
            return marks
    return None


def check_guarantees(root: Path) -> tuple[list[dict], list[dict]]:
    table = root / "docs" / "claims.md"
    if not table.is_file():
        return [], [{"file": "docs/claims.md", "problem": "missing: the table of guarantees and their tests"}]
    rows, problems = [], []
    for n, line in enumerate(table.read_text(encoding="utf-8").splitlines(), 1):
        m = CLAIM_ROW.match(line)
        if not m:
            continue
        file, _, name = m.group("test").partition("::")
        name = name.split("[")[0]
        row = {"file": "docs/claims.md", "line": n, "claim": m.group("claim"), "stated_in": m.group("where"),
               "test": m.group("test")}
        rows.append(row)
        why = _check_producer(root, file, name)
        if why:
            problems.append({**row, "problem": f"no such test: {why}"})
            continue
        marks = _marks(root, file, name)
        row["marks"] = sorted(marks)
        if "slow" in marks and "claim" not in marks:
            problems.append({**row, "problem": "marked slow but not claim: CI never runs it"})
    if not rows:
        problems.append({"file": "docs/claims.md", "problem": "no guarantee rows found"})
    return rows, problems


def check(root: Path) -> dict:
    figures, figure_problems = check_figures(root)
    guarantees, guarantee_problems = check_guarantees(root)
    return {"figures": figures, "guarantees": guarantees, "problems": figure_problems + guarantee_problems,
            "ok": not (figure_problems or guarantee_problems)}


def format_text(report: dict, listing: bool = False) -> str:
    lines = [f"claims: {len(report['figures'])} measured-figure paragraph(s) in README/docs, "
             f"{len(report['guarantees'])} guarantee(s) in docs/claims.md"]
    if listing:
        for f in report["figures"]:
            lines.append(f"  {f['file']}:{f['line']}: {', '.join(f['producers']) or '-'}  | {f['text'][:60]}")
        for g in report["guarantees"]:
            lines.append(f"  guarantee: {g['claim']} -> {g['test']}")
    for p in report["problems"]:
        where = f"{p['file']}:{p.get('line', '')}"
        lines.append(f"FAIL {where}: {p['problem']}" + (f"\n    {p['text']}" if "text" in p else ""))
    lines.append("ok" if report["ok"] else "FAILED")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parent.parent),
                        help="repository root (default: this checkout)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--list", action="store_true", help="list every figure and guarantee with its test")
    args = parser.parse_args(argv)
    report = check(Path(args.root))
    print(json.dumps(report, indent=2) if args.json else format_text(report, args.list))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
