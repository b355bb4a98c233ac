"""What the ``caliper`` process does around a command: interrupts, partial outputs, the persistent
compilation cache, one-line warnings and the one error path.

Interrupts. Python runs signal handlers only in the main thread between bytecodes, so while the
main thread sits in XLA (compiling or running a long scan) or in MuJoCo's C code, Ctrl-C waited for
minutes, and the ``KeyboardInterrupt`` then unwound through the interpreter's shutdown while XLA's
threads still ran (the segfault). :func:`install_interrupts` instead (entry point only):

1. blocks SIGINT/SIGTERM in the main thread *before* JAX or MuJoCo start a thread, so every thread
   they start inherits the block and no C code of theirs sees a signal (no EINTR surprises);
2. routes Python's C-level signal handler to a socket (``signal.set_wakeup_fd``): whichever thread
   the kernel picks (the watcher, the only one with the signals unblocked, or a thread started
   before step 1), the signal number is written there at once, without waiting for the main thread;
3. a daemon *watcher* thread reads that socket and then: waits (at most ``WRITE_GRACE_S``) for a
   command's output write in progress (:func:`writing`) to finish, removes every registered partial
   output (:func:`partial_output`), prints ``caliper: interrupted`` (and the JSON error under
   ``--json``) and calls ``os._exit(130)`` (143 for SIGTERM): no interpreter shutdown, no static
   destructors racing XLA's threads, no traceback. A second signal during that cleanup exits at
   once.

A command that writes files wraps them in ``partial_output(path)`` for the whole command and the
actual write in ``writing()``; an interrupt then leaves either the complete output or nothing
(a path that existed before is not removed: an existing dataset is appended to atomically and is
brought back to a consistent state by its own ``cleanup``).

Called in-process (``cli.main([...])`` from a test or a notebook) nothing here touches process-wide
state: no signal handlers, no sigmask, no compilation-cache configuration; a ``KeyboardInterrupt``
is caught in ``main`` (exit 130) and the partial outputs are removed by their context managers.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

from caliper_jax import compile_cache, progress
from caliper_jax.compile_cache import (  # noqa: F401  (re-exported: the CLI's names)
    CACHE_ENV,
    NO_CACHE_ENV,
    TMP_SUFFIX,
    compile_cache_dir,
)

SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: How long an interrupt waits for an output write in progress before cleaning up anyway.
WRITE_GRACE_S = 1.0

# ---- partial outputs ----------------------------------------------------------------------------

_io_lock = threading.RLock()          # held by the main thread while it writes an output
_outputs: dict[int, tuple[Path, object]] = {}
_next_id = [0]
_state = {"json": False, "installed": False, "dying": False}


def _remove_path(path: Path) -> None:
    """Remove a file or a folder tree. A folder is first renamed out of the way (atomic), so a
    writer still running in another thread cannot add to it while it is deleted."""
    if path.is_dir() and not path.is_symlink():
        grave = path.with_name(f".{path.name}.caliper-removing-{os.getpid()}")
        try:
            os.rename(path, grave)
        except OSError:
            grave = path
        for _attempt in range(5):
            shutil.rmtree(grave, ignore_errors=True)
            if not grave.exists():
                break
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def _empty_dir(path: Path) -> None:
    for child in list(path.iterdir()) if path.is_dir() else ():
        _remove_path(child)


@contextmanager
def partial_output(path, cleanup=None):
    """Register ``path`` (a file or folder this command is about to write) for removal if the
    command is interrupted or fails before the block ends.

    What existed before is kept: a path that did not exist is removed, a folder that was empty is
    emptied again; for a non-empty existing folder ``cleanup()`` (if given) is called instead (e.g.
    to bring an appended-to dataset back to a consistent state)."""
    path = Path(path)
    if not path.exists():
        top = path                       # the writer may create missing parents too: remove those
        while not top.parent.exists() and top.parent != top:
            top = top.parent
        undo = lambda: _remove_path(top)
    elif path.is_dir() and not any(path.iterdir()):
        undo = lambda: _empty_dir(path)
    else:
        undo = cleanup or (lambda: None)
    with _io_lock:
        _next_id[0] += 1
        key = _next_id[0]
        _outputs[key] = (path, undo)
    try:
        yield path
    except BaseException:
        with _io_lock:
            entry = _outputs.pop(key, None)
        if entry is not None:
            _run_quietly(entry[1])
        raise
    finally:
        with _io_lock:
            _outputs.pop(key, None)


@contextmanager
def writing():
    """Hold off an interrupt's cleanup while the block writes an output (up to ``WRITE_GRACE_S``)."""
    with _io_lock:
        yield


def _run_quietly(fn) -> None:
    try:
        fn()
    except Exception:  # cleanup is best effort: never turn an interrupt into a traceback
        pass


def remove_partial_outputs() -> None:
    """Remove every registered partial output (the watcher calls this holding the write lock)."""
    while _outputs:
        try:
            _key, (_path, undo) = _outputs.popitem()
        except (KeyError, RuntimeError):
            break
        _run_quietly(undo)


# ---- interrupts ---------------------------------------------------------------------------------

def set_json(flag: bool) -> None:
    """Under ``--json`` an interrupt also prints the JSON error object on stdout."""
    _state["json"] = bool(flag)


def error_json(code: str, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message}})


def wait_if_dying() -> None:
    """Block the calling thread for good if an interrupt is being handled (the watcher exits)."""
    while _state["dying"]:
        time.sleep(1.0)


def _die(signum: int) -> None:
    # The lock is never released: the process ends holding it, so no new write can start.
    _io_lock.acquire(timeout=WRITE_GRACE_S)
    try:
        _run_quietly(remove_partial_outputs)
        if _state.get("unguarded_cache") is not None:
            _run_quietly(lambda: _drop_recent_cache_entries(_state["unguarded_cache"]))
        word = "interrupted" if signum == signal.SIGINT else "terminated"
        _run_quietly(progress.freeze)
        head = "\n" if progress.line_open() else ""
        if _state["json"]:
            os.write(1, (error_json("interrupted", f"{word} by signal {signum}") + "\n").encode())
        os.write(2, f"{head}caliper: {word}\n".encode())
    finally:
        os._exit(128 + signum)


def _watch(sock: socket.socket) -> None:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)   # this thread takes the signals
    while True:
        try:
            data = sock.recv(64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum not in SIGNALS:
                continue
            if _state["dying"]:             # a second Ctrl-C while cleaning up: leave now
                os.write(2, b"caliper: interrupted\n")
                os._exit(128 + signum)
            _state["dying"] = True
            threading.Thread(target=_die, args=(signum,), name="caliper-exit", daemon=True).start()


def _ignore(signum, frame) -> None:
    """The Python-level handler: the watcher does the work (this only keeps the C handler installed)."""


def install_interrupts() -> bool:
    """Set up the watcher (see the module docstring). Only from the main thread, once; False if not."""
    if _state["installed"] or threading.current_thread() is not threading.main_thread():
        return False
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    for s in SIGNALS:
        signal.signal(s, _ignore)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    _state["socks"] = (reader, writer)         # keep both ends open for the life of the process
    threading.Thread(target=_watch, args=(reader,), name="caliper-signals", daemon=True).start()
    _state["installed"] = True
    return True


# ---- persistent compilation cache (caliper_jax.compile_cache; the CLI adds its interrupt guard) ----

def enable_compile_cache(path: Path | None) -> Path | None:
    """Turn on jax's persistent compilation cache at ``path`` (None: no cache), each entry written
    under :func:`writing` (:func:`caliper_jax.compile_cache.enable_compile_cache`). Returns the
    directory in use, or None."""
    if path is None:
        return None
    used = compile_cache.enable_compile_cache(path, write_guard=writing)
    if used is not None and not compile_cache.writes_guarded():
        _state["unguarded_cache"] = used
    return used


def _drop_recent_cache_entries(path: Path, seconds: float = 5.0) -> None:
    import time

    now = time.time()
    for entry in os.scandir(path):
        try:
            if entry.is_file() and entry.stat().st_mtime >= now - seconds:
                os.unlink(entry.path)
        except OSError:
            pass


# ---- warnings and errors --------------------------------------------------------------------------

def warning_line(message, category) -> str:
    text = " ".join(str(message).split())
    return f"caliper: warning: {text} ({category.__name__})"


@contextmanager
def one_line_warnings():
    """Python warnings (e.g. MuJoCo's UserWarning with its source line) as one line
    ``caliper: warning: ...`` on stderr; restored afterwards."""
    saved = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        progress.message(warning_line(message, category))

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = saved


def library_warnings(lines) -> None:
    """What libraries said during the command (counted by :mod:`caliper_jax.notices`), one
    ``caliper: warning:`` line per kind."""
    for line in lines:
        progress.message(f"caliper: warning: {line}")


def silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def fail(code: str, message: str, *, want_json: bool, status: int = 2, label: str = "error") -> int:
    """The one error path: ``caliper: error: MESSAGE`` on stderr, and under ``--json`` the object
    ``{"error": {"code", "message"}}`` on stdout. Returns the exit status. While an interrupt is
    being handled the error is a consequence of the cleanup (an output removed under a writer):
    say nothing and wait for the watcher to end the process."""
    wait_if_dying()
    message = " ".join(str(message).split()) or code
    sys.stdout.flush()
    progress.message(f"caliper: {label}: {message}")
    if want_json:
        print(error_json(code, message), flush=True)
    return status


__all__ = ["CACHE_ENV", "NO_CACHE_ENV", "compile_cache_dir", "enable_compile_cache", "fail",
           "install_interrupts", "one_line_warnings", "partial_output", "remove_partial_outputs",
           "set_json", "writing"]
