"""Library noise, counted instead of printed: at most one ``caliper: warning:`` line per kind.

Libraries under the stack talk on their own: MJX prints ``Failed to import warp`` on stdout when it
is imported without the optional warp backend, SVT-AV1 writes ~25 lines of encoder log on stderr
per video it encodes, MuJoCo's C code prints ``WARNING: Nan, Inf or huge value in QACC ...`` (and
appends it to ``MUJOCO_LOG.TXT`` in the current folder) for every unstable step of every world.
Here each such message is reduced to its *kind* (the message without the DOF, the time and the
numbers) and counted; :func:`drain` turns the counts into one line per kind, e.g.
``MuJoCo: Nan, Inf or huge value in QACC (the simulation is unstable) (412 times)``, which the CLI
prints as ``caliper: warning: ...`` when the command ends (not after an error: the error stays the
only line). Three sources, three mechanisms:

* MuJoCo: :func:`install_mujoco` sets ``mujoco.set_mju_user_warning`` (no stderr, no log file);
* Python-level prints (MJX's warp notice): :class:`FilteredStream` wraps ``sys.stdout`` and takes
  out the lines that match :data:`STDOUT_NOISE`;
* native writes to file descriptor 2 (SVT-AV1): :func:`native_stderr` points fd 2 at a temporary
  file for the block, counts the lines that match and passes every other line on.

No NumPy, no JAX: the dataset IO and the engine may use it.
"""
from __future__ import annotations

import io
import os
import re
import sys
import tempfile
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_counts: dict[str, int] = {}

#: (pattern, kind) of lines printed on stdout by libraries at import time
STDOUT_NOISE = (
    (re.compile(r"^Failed to import (mujoco_)?warp\b"), "MJX: its optional warp backend is not installed "
                                                       "(import notices; MJX runs on JAX without it)"),
)
#: (pattern, kind) of native stderr lines
SVT_NOISE = ((re.compile(r"^Svt\["), "SVT-AV1: encoder log lines (informational; the videos were written)"),)


def note(kind: str, n: int = 1) -> None:
    """Count ``n`` messages of ``kind``."""
    with _lock:
        _counts[kind] = _counts.get(kind, 0) + n


def counts() -> dict[str, int]:
    with _lock:
        return dict(_counts)


def drain() -> list[str]:
    """One line per kind counted so far, ``KIND (N times)``; the counts are reset."""
    with _lock:
        items = list(_counts.items())
        _counts.clear()
    return [f"{kind} ({n} time{'s' if n != 1 else ''})" for kind, n in items]


def clear() -> None:
    with _lock:
        _counts.clear()


@contextmanager
def captured(prefix: str):
    """Take the kinds starting with ``prefix`` counted during the block out of the counts (so the
    CLI does not print them) into the dict yielded ({kind: n}, filled when the block ends): a
    caller that reports them itself, e.g. an evaluation that puts MuJoCo's warnings in its result."""
    with _lock:
        before = dict(_counts)
    got: dict[str, int] = {}
    try:
        yield got
    finally:
        with _lock:
            for kind, n in list(_counts.items()):
                if kind.startswith(prefix) and n > before.get(kind, 0):
                    got[kind] = n - before.get(kind, 0)
                    if before.get(kind, 0):
                        _counts[kind] = before[kind]
                    else:
                        del _counts[kind]


# ---- MuJoCo --------------------------------------------------------------------------------------

def mujoco_kind(message: str) -> str:
    """``Nan, Inf or huge value in QACC at DOF 3. The simulation is unstable. Time = 0.12.`` ->
    ``MuJoCo: Nan, Inf or huge value in QACC. The simulation is unstable.``"""
    text = " ".join(str(message).replace("WARNING:", "").split())
    text = re.sub(r"\s*at DOF \d+", "", text)
    text = re.sub(r"\s*Time = [-+0-9.eE]+", "", text).rstrip(". ")
    return f"MuJoCo: {text}."


def install_mujoco() -> bool:
    """Route MuJoCo's warnings here (process-wide; True when installed). Only when ``mujoco`` is
    importable; the import is not forced otherwise (call it where MuJoCo is used)."""
    try:
        import mujoco
    except ImportError:
        return False
    mujoco.set_mju_user_warning(lambda msg: note(mujoco_kind(msg)))
    return True


# ---- Python-level stdout -----------------------------------------------------------------------------

class FilteredStream(io.TextIOBase):
    """A text stream that passes whole lines to ``target`` except those matching ``noise`` (counted).
    A partial line is held until its newline or a flush."""

    def __init__(self, target, noise=STDOUT_NOISE):
        super().__init__()
        self.target = target
        self.noise = noise
        self._pending = ""

    def _line(self, line: str) -> None:
        for pattern, kind in self.noise:
            if pattern.search(line):
                note(kind)
                return
        self.target.write(line)

    def write(self, text: str) -> int:
        self._pending += text
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            self._line(line + "\n")
        return len(text)

    def flush(self) -> None:
        if self._pending and not any(p.match(self._pending) for p, _ in self.noise):
            self.target.write(self._pending)
            self._pending = ""
        self.target.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.target.fileno()

    @property
    def encoding(self):
        return getattr(self.target, "encoding", "utf-8")

    @property
    def buffer(self):
        return self.target.buffer


@contextmanager
def filtered_stdout(noise=STDOUT_NOISE):
    """``sys.stdout`` wrapped in a :class:`FilteredStream` for the block."""
    saved = sys.stdout
    stream = FilteredStream(saved, noise)
    sys.stdout = stream
    try:
        yield stream
    finally:
        try:
            stream.flush()
        finally:
            sys.stdout = saved


# ---- native stderr -------------------------------------------------------------------------------------

@contextmanager
def native_stderr(noise=SVT_NOISE):
    """File descriptor 2 goes to a temporary file for the block; afterwards the lines matching
    ``noise`` are counted and every other line is written to the real stderr. For short blocks
    around a C library that logs (an encoder); anything else written to fd 2 meanwhile (a progress
    line) is only delayed."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode("utf-8", "replace")
            passed = []
            for line in text.splitlines(keepends=True):
                for pattern, kind in noise:
                    if pattern.search(line):
                        note(kind)
                        break
                else:
                    passed.append(line)
            if passed:
                os.write(2, "".join(passed).encode())


__all__ = ["FilteredStream", "captured", "clear", "counts", "drain", "filtered_stdout", "install_mujoco",
           "mujoco_kind", "native_stderr", "note"]
