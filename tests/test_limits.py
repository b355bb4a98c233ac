"""caliper_jax.limits: work budgets checked before any work, and the capped file reader (no JAX)."""
import os

import pytest

from caliper_jax import limits
from caliper_jax.errors import CaliperError


def test_budget_names_the_input_the_estimate_and_how_to_raise_it(monkeypatch):
    monkeypatch.delenv("CALIPER_MAX_STEPS", raising=False)
    assert limits.check("steps", 10, "--ticks") == 10
    with pytest.raises(CaliperError, match=r"^--ticks: 2,000,000 steps, over the limit of 1,000,000 steps "
                                           r"\(set CALIPER_MAX_STEPS=N to raise it\)$"):
        limits.check("steps", 2e6, "--ticks")
    for amount in (float("nan"), float("inf"), 10**400):
        with pytest.raises(CaliperError, match="unbounded|over the limit"):
            limits.check("steps", amount, "--ticks")
    monkeypatch.setenv("CALIPER_MAX_STEPS", "3e6")
    assert limits.check("steps", 2e6, "--ticks") == 2_000_000
    for bad in ("lots", "0", "-1"):
        monkeypatch.setenv("CALIPER_MAX_STEPS", bad)
        with pytest.raises(CaliperError, match="CALIPER_MAX_STEPS: expected a positive integer"):
            limits.check("steps", 1, "--ticks")


def test_memory_budget(monkeypatch):
    monkeypatch.delenv("CALIPER_MAX_MEMORY_MB", raising=False)
    limits.check_memory(100 * 2**20, "--dt")
    with pytest.raises(CaliperError, match="--dt: .* MiB, over the limit of 1,024 MiB"):
        limits.check_memory(7 * 2**40, "--dt")


def test_files_must_be_regular_and_small(tmp_path, monkeypatch):
    monkeypatch.delenv("CALIPER_MAX_FILE_MB", raising=False)
    good = tmp_path / "a.urdf"
    good.write_text("<robot/>")
    assert limits.read_text(good, "URDF file") == "<robot/>"
    with pytest.raises(CaliperError, match="not a regular file"):
        limits.read_bytes("/dev/zero", "URDF file")          # refused without reading a byte
    fifo = tmp_path / "fifo.urdf"
    os.mkfifo(fifo)
    with pytest.raises(CaliperError, match="FIFO"):
        limits.read_bytes(fifo, "URDF file")                 # would block forever if opened
    with pytest.raises(CaliperError, match="is a directory"):
        limits.read_bytes(tmp_path, "URDF file")
    with pytest.raises(CaliperError, match="no such URDF file"):
        limits.read_bytes(tmp_path / "missing.urdf", "URDF file")
    big = tmp_path / "big.urdf"
    with open(big, "wb") as f:
        f.truncate(65 * 2**20)                               # sparse: claims 65 MiB
    with pytest.raises(CaliperError, match=r"65.0 MiB, over the 64 MiB limit .*CALIPER_MAX_FILE_MB"):
        limits.read_bytes(big, "URDF file")
    binary = tmp_path / "b.urdf"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CaliperError, match="not UTF-8 text"):
        limits.read_text(binary, "URDF file")


def test_the_robot_readers_use_the_capped_reader(tmp_path):
    from caliper_jax.loading import read_description

    for path in ("/dev/zero", "/dev/null"):
        with pytest.raises(CaliperError, match="not a regular file"):
            read_description(path)
    link = tmp_path / "zero.xml"
    link.symlink_to("/dev/zero")
    with pytest.raises(CaliperError, match="not a regular file"):
        read_description(link)                                # MJCF: refused before MuJoCo opens it
