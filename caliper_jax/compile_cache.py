"""The persistent XLA compilation cache: one call turns it on for a Python session.

``caliper`` turns it on for every command that uses JAX; a Python user calls
:func:`enable_compile_cache` (``caliper_jax.enable_compile_cache()``) once, before the first
compile, and later processes reuse the compiled programs (seconds instead of tens of seconds for
an evaluation scan or a training step). The folder: ``$CALIPER_CACHE_DIR``, else
``$XDG_CACHE_HOME/caliper_jax/jax``, else ``~/.cache/caliper_jax/jax``;
``CALIPER_NO_COMPILE_CACHE=1`` turns it off. Entries are written to a temp file and renamed into
place, so a process killed mid-write never leaves a truncated entry (jax never rewrites a key).
"""
from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path

CACHE_ENV = "CALIPER_CACHE_DIR"
NO_CACHE_ENV = "CALIPER_NO_COMPILE_CACHE"
TMP_SUFFIX = ".caliper-tmp"
#: the context every cache write runs in (the CLI sets its interrupt guard here)
_write_guard = [nullcontext]


def compile_cache_dir(env=None) -> Path | None:
    """Where compiled XLA programs are kept: ``$CALIPER_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/caliper_jax/jax``, else ``~/.cache/caliper_jax/jax``; None when
    ``CALIPER_NO_COMPILE_CACHE`` is set (to anything but 0 / empty)."""
    env = os.environ if env is None else env
    if env.get(NO_CACHE_ENV, "").strip() not in ("", "0"):
        return None
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser()
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "caliper_jax" / "jax"


#: jax options set for the cache: every program is cached, however quick its compile or small its
#: executable (caliper's programs are many small ones; jax's default keeps only >= 1 s compiles).
CACHE_SETTINGS = {"jax_persistent_cache_min_compile_time_secs": 0.0,
                  "jax_persistent_cache_min_entry_size_bytes": -1}


def enable_compile_cache(path=None, *, write_guard=None) -> Path | None:
    """Turn on jax's persistent compilation cache (process-wide; it imports jax) at ``path``
    (default :func:`compile_cache_dir`; None there: no cache). An unusable folder means no
    cache, not an error. ``write_guard``: a context-manager factory every entry write runs in.
    Returns the folder in use, or None."""
    if path is None:
        path = compile_cache_dir()
        if path is None:
            return None
    path = Path(path).expanduser()
    if write_guard is not None:
        _write_guard[0] = write_guard
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(path, os.W_OK):
        return None
    import jax

    jax.config.update("jax_compilation_cache_dir", str(path))
    for name, value in CACHE_SETTINGS.items():
        jax.config.update(name, value)
    _guarded[0] = _guard_cache_writes()
    _drop_stale_temp_files(path)
    return path


_guarded = [False]


def writes_guarded() -> bool:
    """True when cache entries are written atomically (jax's private LRUCache was patched)."""
    return _guarded[0]


def _guard_cache_writes() -> bool:
    """jax writes a cache entry in place (``Path.write_bytes``), so a process that dies in the
    middle of it (an interrupt, a SIGKILL, the OOM killer) would leave a truncated entry that every
    later run fails to read (a warning and a recompile, forever: jax never rewrites an existing
    key). So each entry is written to a temp file and renamed into place, inside the write guard
    (the CLI's makes an interrupt wait for it). jax's ``LRUCache`` is private: if it is not there,
    this returns False (the CLI then deletes the entries written in its last seconds when it is
    interrupted). With jax's own eviction on (``jax_compilation_cache_max_size`` and the
    ``filelock`` package) its ``put`` is kept, under the guard only."""
    try:
        from jax._src import lru_cache

        put, suffix = lru_cache.LRUCache.put, lru_cache._CACHE_SUFFIX
    except (ImportError, AttributeError):
        return False
    if getattr(put, "_caliper_guarded", False):
        return True

    def put_atomically(self, key, value):
        with _write_guard[0]():
            folder = str(self.path)
            if getattr(self, "eviction_enabled", True) or "://" in folder:
                return put(self, key, value)
            if not key:
                raise ValueError("key cannot be empty")
            final = os.path.join(folder, f"{key}{suffix}")
            if os.path.exists(final):
                return None
            tmp = os.path.join(folder, f".{key}.{os.getpid()}{TMP_SUFFIX}")
            with open(tmp, "wb") as f:
                f.write(value)
            os.replace(tmp, final)
            return None

    put_atomically._caliper_guarded = True
    put_atomically.__doc__ = put.__doc__
    lru_cache.LRUCache.put = put_atomically
    return True


def _drop_stale_temp_files(path: Path, age_s: float = 3600.0) -> None:
    """Temp files of cache writes whose process died (SIGKILL) before the rename."""
    import time

    now = time.time()
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.name.endswith(TMP_SUFFIX) and entry.stat().st_mtime < now - age_s:
                os.unlink(entry.path)
        except OSError:
            pass


__all__ = ["CACHE_ENV", "CACHE_SETTINGS", "NO_CACHE_ENV", "TMP_SUFFIX", "compile_cache_dir",
           "enable_compile_cache", "writes_guarded"]
