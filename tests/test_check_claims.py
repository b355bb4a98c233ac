"""tools/check_claims.py: every figure stated as measured names its test or benchmark, every
guarantee of docs/claims.md has a test CI runs (default run, or marked ``claim``)."""
import subprocess
import sys
from pathlib import Path

from tests.tool_helpers import load_tool, write_tree

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "check_claims.py"


def test_repository_claims_are_all_produced_and_under_ci():
    proc = subprocess.run([sys.executable, str(TOOL)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("ok")


CLAIMS = """# Claims

| guarantee | stated in | test |
|---|---|---|
| fast | README.md | `tests/test_a.py::test_fast` |
| slow, under CI | README.md | `tests/test_a.py::test_slow_claim` |
"""
TESTS = ("import pytest\n\ndef test_fast():\n    pass\n\n@pytest.mark.slow\n@pytest.mark.claim\n"
         "def test_slow_claim():\n    pass\n\n@pytest.mark.slow\ndef test_release_only():\n    pass\n")


def test_a_clean_tree_passes_and_each_planted_defect_fails(tmp_path):
    tool = load_tool("check_claims")
    write_tree(tmp_path, {
        "README.md": "# x\n\nRuns at 5.2 ms a call (measured, `benchmarks/bench_x.py`).\n\n"
                     "The gate holds the measured position at 3 ticks.\n",
        "docs/a.md": "## Measured\n\nProduced by `tests/test_a.py::test_fast`.\n\n| op | ms |\n|---|---|\n"
                     "| fk | 1.5 |\n",
        "docs/claims.md": CLAIMS, "tests/test_a.py": TESTS, "benchmarks/bench_x.py": "",
    })
    report = tool.check(tmp_path)
    assert report["ok"], report["problems"]
    assert len(report["figures"]) == 2 and len(report["guarantees"]) == 2     # not the "measured position"

    def problems(files):
        write_tree(tmp_path, files)
        return [p["problem"] for p in tool.check(tmp_path)["problems"]]

    # a measured figure that names nothing
    out = problems({"docs/b.md": "# b\n\nMeasured: 3x faster than the reference.\n"})
    assert len(out) == 1 and "cites no tests/ or benchmarks/" in out[0]
    # a producer that is not there
    out = problems({"docs/b.md": "# b\n\nMeasured: 3x faster (`tests/test_a.py::test_gone`).\n"})
    assert len(out) == 1 and "defines no test_gone" in out[0]
    write_tree(tmp_path, {"docs/b.md": "# b\n"})
    # a guarantee whose test CI never runs (slow, not claim)
    out = problems({"docs/claims.md": CLAIMS + "| x | README.md | `tests/test_a.py::test_release_only` |\n"})
    assert out == ["marked slow but not claim: CI never runs it"]
    assert tool.main([str(tmp_path)]) == 1
