"""Asset doctor over every robot description shipped in example-robot-data.

Each URDF must be diagnosed without an exception; when the installed version is the one the docs
table was generated from, the per-file counts must match ``docs/asset_doctor.md``.
"""
from __future__ import annotations

import importlib.metadata
import re
from collections import Counter
from pathlib import Path

import pytest

from caliper_jax.errors import CaliperError
from doctors.asset import Report, diagnose

DOC = Path(__file__).parents[1] / "docs" / "asset_doctor.md"


def robots_dir() -> Path | None:
    """``share/example-robot-data/robots`` of the installed (cmeel) distribution, if any."""
    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file("cmeel.prefix/share/example-robot-data/robots")))
    return path if path.is_dir() else None


def installed_version() -> str | None:
    try:
        return importlib.metadata.version("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        return None


ROBOTS = robots_dir()
URDFS = sorted(ROBOTS.rglob("*.urdf")) if ROBOTS else []
XACROS = sorted(ROBOTS.rglob("*.xacro")) if ROBOTS else []
pytestmark = pytest.mark.skipif(ROBOTS is None, reason="example-robot-data is not installed")


def summary(report: Report) -> tuple[int, int, int, str]:
    """(errors, warnings, infos, "A001 x4, A005 x1, ...") as in the docs table."""
    counts = report.counts
    codes = ", ".join(f"{code} x{n}" for code, n in sorted(Counter(report.codes).items())) or "-"
    return counts["Error"], counts["Warning"], counts["Info"], codes


def documented() -> tuple[str | None, dict[str, tuple[int, int, int, str]]]:
    """The example-robot-data version and rows recorded in the docs table."""
    text = DOC.read_text() if DOC.is_file() else ""
    version = re.search(r"example-robot-data (\d[\w.]*)", text)
    row = re.compile(r"^\| `([^`]+\.urdf)` \| (\d+) \| (\d+) \| (\d+) \| ([^|]+) \|$", re.M)
    rows = {m[1]: (int(m[2]), int(m[3]), int(m[4]), m[5].strip()) for m in row.finditer(text)}
    return (version[1] if version else None), rows


def test_example_robot_data_ships_urdfs():
    assert len(URDFS) >= 60


@pytest.mark.parametrize("path", URDFS, ids=[p.name for p in URDFS])
def test_every_urdf_is_diagnosed(path):
    report = diagnose(path)
    assert isinstance(report, Report)
    report.to_dict()
    version, rows = documented()
    name = path.relative_to(ROBOTS).as_posix()
    if version == installed_version() and rows:
        assert summary(report) == rows[name], f"docs/asset_doctor.md row for {name} is stale"


@pytest.mark.parametrize("path", XACROS, ids=[p.name for p in XACROS])
def test_every_xacro_expands_or_errors_cleanly(path):
    try:
        assert isinstance(diagnose(path), Report)
    except CaliperError as exc:
        assert "\n" not in str(exc)
