"""Crash safety: atomic file writes, multi-file commits with a roll-forward log, directory swaps.

A multi-file change is staged as ``<final>.caliper-tmp`` files (names no lerobot glob matches),
then a commit log ``.caliper_txn.json`` listing the renames and deletions is written atomically,
then applied, then removed. ``recover(root)`` finishes an interrupted commit (the log exists) or
discards an unfinished one (stray temp files, no log), so a killed process never leaves a file
that looks valid but is not.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
from pathlib import Path

from caliper_jax.errors import CaliperError

TMP_SUFFIX = ".caliper-tmp"
TXN_NAME = ".caliper_txn.json"
EDIT_SUFFIX = ".caliper-edit"
OLD_SUFFIX = ".caliper-old"


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    tmp.write_bytes(data)
    os.replace(tmp, path)


class Transaction:
    """Stage files under a dataset root, then make them all visible at once with ``commit()``."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.renames: list[tuple[str, str]] = []
        self.deletes: list[str] = []

    def stage(self, rel: str) -> Path:
        """Return the temp path to write the future ``rel`` to."""
        tmp = self.root / (rel + TMP_SUFFIX)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        self.renames.append((rel + TMP_SUFFIX, rel))
        return tmp

    def stage_bytes(self, rel: str, data: bytes) -> None:
        self.stage(rel).write_bytes(data)

    def delete(self, rel: str) -> None:
        self.deletes.append(rel)

    def commit(self) -> None:
        if not self.renames and not self.deletes:
            return
        targets = {final for _, final in self.renames}
        log = {"renames": self.renames, "deletes": [d for d in self.deletes if d not in targets]}
        write_atomic(self.root / TXN_NAME, json.dumps(log).encode())
        _apply(self.root, log)
        self.renames, self.deletes = [], []


def _apply(root: Path, log: dict) -> None:
    """Roll the commit log forward. Every path in it is checked first (a list of strings, each
    inside ``root``, symlinks followed): a log that names anything else is refused before one file
    is touched."""
    from caliper_jax.limits import PathEscapeError, inside

    where = f"{root / TXN_NAME}"
    try:
        renames = [(inside(root, tmp, f"{where}: renames"), inside(root, final, f"{where}: renames"))
                   for tmp, final in log["renames"]]
        deletes = [inside(root, rel, f"{where}: deletes") for rel in log["deletes"]]
    except PathEscapeError:
        raise
    except (KeyError, TypeError, ValueError):
        raise CaliperError(f"{where}: malformed commit log (expected renames [[tmp, final], ...] and "
                           "deletes [path, ...])") from None
    for tmp, final in renames:
        if tmp.exists():
            os.replace(tmp, final)
    for path in deletes:
        path.unlink(missing_ok=True)
    (root / TXN_NAME).unlink(missing_ok=True)


def pending_commit(root: Path) -> bool:
    return (Path(root) / TXN_NAME).exists()


def recover(root: Path) -> dict:
    """Bring ``root`` to a consistent state after a crash; return what was done (plain data)."""
    root = Path(root)
    done = {
        "rolled_forward": False,
        "removed_temp_files": 0,
        "restored_from_swap": False,
        "removed_edit_dirs": 0,
    }
    old, edit = _sibling(root, OLD_SUFFIX), _sibling(root, EDIT_SUFFIX)
    if not root.exists() and old.exists():
        os.rename(old, root)
        done["restored_from_swap"] = True
    for stale in (old, edit):
        if stale.exists():
            shutil.rmtree(stale)
            done["removed_edit_dirs"] += 1
    if not root.is_dir():
        raise CaliperError(f"{root}: not a dataset directory")
    txn = root / TXN_NAME
    if txn.exists():
        try:
            log = json.loads(txn.read_text())
        except (ValueError, RecursionError):
            log = None  # a torn log cannot exist (atomic write); treat as no commit
        if log is not None:
            _apply(root, log)
            done["rolled_forward"] = True
        txn.unlink(missing_ok=True)
    for tmp in sorted(root.rglob("*" + TMP_SUFFIX)):
        tmp.unlink()
        done["removed_temp_files"] += 1
    return done


def _sibling(root: Path, suffix: str) -> Path:
    return root.with_name("." + root.name + suffix)


def edit_dir(root: Path) -> Path:
    """A fresh sibling directory to rewrite ``root`` into."""
    path = _sibling(Path(root), EDIT_SUFFIX)
    if path.exists():
        shutil.rmtree(path)
    return path


def _renameat2_exchange(a: Path, b: Path) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return rc == 0


def swap_in(root: Path, new: Path) -> None:
    """Replace directory ``root`` by ``new`` atomically (RENAME_EXCHANGE), then delete the old copy.

    Without renameat2 the fallback is two renames; ``recover`` restores ``root`` if a crash lands
    between them.
    """
    root, new = Path(root), Path(new)
    old = _sibling(root, OLD_SUFFIX)
    if _renameat2_exchange(new, root):
        os.rename(new, old)
    else:
        os.rename(root, old)
        os.rename(new, root)
    shutil.rmtree(old)
