"""SIGKILL at controlled points: saved episodes survive, nothing half-written looks valid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from caliper_jax.dataset import LeRobotReader, LeRobotWriter, recover
from caliper_jax.dataset.synthetic import episode, write_synthetic
from caliper_jax.errors import CaliperError

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL semantics need POSIX")

PRELUDE = """
import os, shutil, signal, sys
import caliper_jax.dataset.atomic as atomic
from caliper_jax.dataset import LeRobotWriter, delete_episodes
from caliper_jax.dataset.synthetic import episode, features
root = sys.argv[1]
def die():
    os.kill(os.getpid(), signal.SIGKILL)
def kill_on_replace(n):
    real, calls = os.replace, []
    def replace(src, dst):
        calls.append(dst)
        if len(calls) == n:
            die()
        real(src, dst)
    atomic.os.replace = replace
def write(writer, ep, n=30):
    writer.add_frames(episode(0, ep, n, 30))
"""


def _run_child(body: str, root: Path) -> None:
    code = PRELUDE + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def _nothing_looks_valid_but_broken(root: Path) -> None:
    for path in root.rglob("*"):
        if path.suffix == ".parquet":
            pq.read_table(path)  # raises on a truncated or footerless file
        elif path.suffix == ".json":
            json.loads(path.read_text())


def _assert_episodes(root: Path, count: int, length: int = 30) -> None:
    r = LeRobotReader(root)
    assert r.num_episodes == count and r.num_frames == count * length
    for ep in range(count):
        np.testing.assert_array_equal(r.episode(ep)["action"], episode(0, ep, length, 30)["action"])


def test_kill_mid_episode_keeps_saved_episodes(tmp_path):
    root = tmp_path / "ds"
    _run_child(
        """
        w = LeRobotWriter(root, 30, features())
        for ep in range(3):
            write(w, ep)
            w.save_episode(task="t")
        write(w, 3, 12)
        die()
    """,
        root,
    )
    _nothing_looks_valid_but_broken(root)
    _assert_episodes(root, 3)
    with LeRobotWriter(root) as w:  # a killed dataset can be appended to
        w.add_frames(episode(0, 3, 30, 30))
        w.save_episode(task="t")
    _assert_episodes(root, 4)


def test_kill_inside_a_commit_rolls_forward(tmp_path):
    root = tmp_path / "ds"
    _run_child(
        """
        w = LeRobotWriter(root, 30, features())
        for ep in range(2):
            write(w, ep)
            w.save_episode(task="t")
        write(w, 2)
        kill_on_replace(3)  # commit log written, one file renamed, then killed
        w.save_episode(task="t")
    """,
        root,
    )
    _nothing_looks_valid_but_broken(root)
    with pytest.raises(CaliperError, match="interrupted write"):
        LeRobotReader(root)
    assert recover(root)["rolled_forward"] is True
    _assert_episodes(root, 3)


def test_kill_before_the_commit_log_discards_the_episode(tmp_path):
    root = tmp_path / "ds"
    _run_child(
        """
        w = LeRobotWriter(root, 30, features())
        for ep in range(2):
            write(w, ep)
            w.save_episode(task="t")
        write(w, 2)
        kill_on_replace(1)  # everything staged, the commit log not yet in place
        w.save_episode(task="t")
    """,
        root,
    )
    _nothing_looks_valid_but_broken(root)
    _assert_episodes(root, 2)
    assert recover(root)["removed_temp_files"] > 0
    assert not list(root.rglob("*.caliper-tmp"))


def test_kill_during_compaction(tmp_path):
    root = tmp_path / "ds"
    _run_child(
        """
        w = LeRobotWriter(root, 30, features())
        for ep in range(4):
            write(w, ep)
            w.save_episode(task="t")
        kill_on_replace(2)
        w.close()
    """,
        root,
    )
    _nothing_looks_valid_but_broken(root)
    recover(root)
    _assert_episodes(root, 4)
    assert len(list((root / "data").glob("*/*.parquet"))) == 1


@pytest.mark.parametrize("where, survivors", [("before_swap", 4), ("after_swap", 3)])
def test_kill_mid_edit(tmp_path, where, survivors):
    root = tmp_path / "ds"
    write_synthetic(root, episodes=4, length=30)
    before = LeRobotReader(root).episode(3)["action"]
    hook = (
        "atomic.swap_in = lambda root, new: die()\nimport caliper_jax.dataset.edit as edit\n"
        "edit.swap_in = atomic.swap_in"
        if where == "before_swap"
        else "atomic.shutil.rmtree = lambda p: die()"
    )
    _run_child(hook + "\ndelete_episodes(root, [0])\n", root)
    _nothing_looks_valid_but_broken(root)
    done = recover(root)
    assert done["removed_edit_dirs"] == 1
    r = LeRobotReader(root)
    assert r.num_episodes == survivors
    np.testing.assert_array_equal(r.episode(survivors - 1)["action"], before)
    assert not [p for p in root.parent.iterdir() if p.name.startswith(".")]
