"""Progress on stderr for long commands: tqdm bars (with an ETA when the total is known) and a stage
line with a spinner and the elapsed time (for work with no count, e.g. compiling). JAX-free, so the
doctors can use it.

Shown only when stderr is a terminal, never under ``--json`` (the CLI calls :func:`set_quiet`);
``CALIPER_PROGRESS=1`` forces it on (tests), ``CALIPER_PROGRESS=0`` off. An explicit
``enabled=`` argument wins over all of these. Nothing here ever writes to stdout.
"""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager

from tqdm import tqdm

ENV = "CALIPER_PROGRESS"
_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_SPIN = "|/-\\"

tqdm.monitor_interval = 0        # no tqdm monitor thread; our stage thread refreshes what it needs

_quiet = False                   # set by the CLI under --json
_lock = threading.RLock()
_open: list = []                 # enabled bars and stages currently drawn, innermost last
_stage = None                    # the current stage line, if any


def set_quiet(quiet: bool) -> None:
    """The CLI's ``--json``: no progress unless forced by ``CALIPER_PROGRESS=1`` or ``enabled=True``."""
    global _quiet
    _quiet = bool(quiet)


def enabled(flag: bool | None = None, stream=None) -> bool:
    """Whether to draw: ``flag`` if given, else ``CALIPER_PROGRESS``, else off under ``--json``,
    else whether ``stream`` (stderr) is a terminal."""
    if flag is not None:
        return bool(flag)
    env = os.environ.get(ENV, "").strip().lower()
    if env in _ON:
        return True
    if env in _OFF or _quiet:
        return False
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


_is_on = enabled


def freeze(timeout: float = 0.5) -> None:
    """Stop every bar and stage line from drawing again (the exit path of an interrupt: its last
    line must stay last). Takes tqdm's write lock and never gives it back."""
    lock = getattr(tqdm, "_lock", None)
    if lock is not None:
        try:
            lock.acquire(timeout=timeout)
        except Exception:  # best effort on the way out
            pass


def line_open() -> bool:
    """A bar or stage line is drawn without its newline (a message should start on a new line)."""
    return bool(_open)


class Bar(tqdm):
    """A tqdm bar on stderr that is silent unless :func:`enabled`; pauses the stage line while drawn."""

    def __init__(self, total=None, desc=None, *, unit="it", enabled: bool | None = None, stream=None,
                 **kwargs):
        stream = stream if stream is not None else sys.stderr
        on = _is_on(enabled, stream)
        kwargs.setdefault("dynamic_ncols", True)
        kwargs.setdefault("mininterval", 0.1)
        kwargs.setdefault("position", 0)         # one line: the stage line is paused, not stacked
        if on:
            with _lock:
                if _stage is not None:
                    _stage.pause()
        self._shown = on
        super().__init__(total=total, desc=desc, unit=unit, file=stream, disable=not on, **kwargs)
        if on:
            with _lock:
                _open.append(self)

    def close(self):
        shown, self._shown = getattr(self, "_shown", False), False
        super().close()
        if shown:
            with _lock:
                if self in _open:
                    _open.remove(self)
                if _stage is not None:
                    _stage.resume()


def bar(total, desc: str, unit: str = "it", enabled: bool | None = None, stream=None, **kwargs) -> Bar:
    """A progress bar (``update(n)``, ``close()``; a context manager too)."""
    return Bar(total, desc, unit=unit, enabled=enabled, stream=stream, **kwargs)


class _Stage:
    """``<spinner> <label>: <text> [elapsed]``, redrawn by a daemon thread every 0.2 s."""

    DELAY = 0.5                  # seconds before the line first appears (quick commands show nothing)

    def __init__(self, label: str, stream):
        self.label, self.text, self._i, self._paused, self.drawn = label, "", 0, 0, False
        self.bar = tqdm(total=None, bar_format="{desc} [{elapsed}]", file=stream, leave=False,
                        dynamic_ncols=True, mininterval=0, delay=self.DELAY)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="caliper-progress", daemon=True)
        self._thread.start()

    def _desc(self) -> str:
        return f"{_SPIN[self._i % len(_SPIN)]} {self.label}" + (f": {self.text}" if self.text else "")

    def _run(self) -> None:
        if self._stop.wait(self.DELAY):
            return
        while True:
            with _lock:
                if not self._paused:
                    self._draw(spin=True)
            if self._stop.wait(0.2):
                return

    def _draw(self, spin: bool = False) -> None:
        self._i += spin
        self.bar.set_description_str(self._desc(), refresh=True)
        if not self.drawn:
            self.drawn = True
            _open.append(self)

    def set(self, text: str) -> None:
        with _lock:
            self.text = text
            if not self._paused and self.drawn:
                self._draw()

    def pause(self) -> None:
        self._paused += 1
        if self._paused == 1:
            self.bar.clear()
            if self in _open:
                _open.remove(self)

    def resume(self) -> None:
        self._paused = max(0, self._paused - 1)
        if not self._paused and self.drawn:
            self.drawn = False
            self._draw()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
        with _lock:
            if self in _open:
                _open.remove(self)
            if self.drawn and not self._paused:
                self.bar.clear()     # tqdm clears only what update() drew; we draw with refresh()
            self.bar.close()


class _EndsStage:
    """sys.stdout while a stage line is drawn on the same terminal: the first write (the command's
    report) ends the stage line first, so the two never share a line."""

    def __init__(self, stdout):
        self._stdout = stdout

    def write(self, text):
        if _stage is not None:
            end_stage()
        return self._stdout.write(text)

    def __getattr__(self, name):
        return getattr(self._stdout, name)


@contextmanager
def stage(label: str, enabled: bool | None = None, stream=None):
    """A stage line for the duration of the block (or until :func:`end_stage`, or the first
    write to stdout when that is a terminal too); nested stages only relabel the outer one.
    Yields a function ``set(text)`` that changes the text after the label."""
    global _stage
    stream = stream if stream is not None else sys.stderr
    if _stage is not None or not _is_on(enabled, stream):
        yield set_stage
        return
    with _lock:
        _stage = _Stage(label, stream)
    stdout = sys.stdout
    try:
        shared = stdout is not None and stdout.isatty() and stream.isatty()
    except (AttributeError, ValueError, OSError):
        shared = False
    if shared:
        sys.stdout = _EndsStage(stdout)
    try:
        yield set_stage
    finally:
        if shared and isinstance(sys.stdout, _EndsStage):
            sys.stdout = stdout
        end_stage()


def end_stage() -> None:
    """Stop and clear the current stage line, if any (before printing a report)."""
    global _stage
    with _lock:
        current, _stage = _stage, None
    if current is not None:
        current.close()


def message(text: str, stream=None) -> None:
    """Write one full line to stderr without tearing a drawn bar or stage line."""
    tqdm.write(text, file=stream if stream is not None else sys.stderr)


def set_stage(text: str) -> None:
    """Change the current stage line's text (no-op when there is none)."""
    current = _stage
    if current is not None:
        current.set(text)


__all__ = ["ENV", "Bar", "bar", "enabled", "end_stage", "freeze", "line_open", "message", "set_quiet",
           "set_stage", "stage"]
