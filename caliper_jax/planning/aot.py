"""Planning programs kept on disk as compiled executables (a fresh process skips tracing too).

jax's persistent compilation cache skips XLA's compile, but a fresh process still traces every
jitted function and lowers it to MLIR to compute the cache key: for the planner's four big
programs (the sphere checker, the search, the shortcut, the kinematics of the exact stage) that is
most of the first call's time once the cache is warm (panda: about 4 s of tracing and lowering
against 1 s of cache loads, ``benchmarks/bench_plan_compile.py``). A :class:`Program` keeps the
executable itself: on a call whose argument shapes it has not seen, it looks for the executable
under ``caliper_programs/`` in the persistent cache folder, keyed by everything the traced
function depends on -- the ``key`` parts its owner names (model, sphere cover, options), the
arguments' tree, shapes and dtypes, the jax and jaxlib versions, the backend and device kind, the
x64 flag, and a digest of caliper_jax's own source (any code change is a new key) -- and loads
it; else it lowers and compiles (without the persistent cache: an executable loaded from it does
not serialise completely) and writes the result (atomic: temp file + rename). Without a cache
folder a Program is its jitted function. A stored executable that fails to load or to run on its
first call is recompiled and replaced.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
from contextlib import contextmanager
from pathlib import Path

import jax
import numpy as np

#: Bump when the stored format changes: older files are then ignored.
_VERSION = 1
_SOURCE: list = []
#: Executables loaded from disk and compiled-and-stored by every Program of this process.
STATS = {"loaded": 0, "compiled": 0}


def _source_digest() -> str:
    """SHA-1 of every ``.py`` file of the caliper_jax package (once per process)."""
    if not _SOURCE:
        import caliper_jax

        root = Path(caliper_jax.__file__).resolve().parent
        h = hashlib.sha1()
        for p in sorted(root.rglob("*.py")):
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
        _SOURCE.append(h.hexdigest())
    return _SOURCE[0]


def folder() -> Path | None:
    """``caliper_programs/`` in jax's persistent compilation cache folder, or None when the
    cache is off or not a local folder."""
    base = jax.config.jax_compilation_cache_dir
    if not base or "://" in str(base) or not jax.config.jax_enable_compilation_cache:
        return None
    return Path(base) / "caliper_programs"


def _feed(h, x) -> None:
    """Hash ``x``'s content: arrays by dtype, shape and bytes; dataclasses, named tuples,
    sequences and dicts recursively; a Model by its pytree (static fields and leaves).
    TypeError for an object whose content is not visible (a repr with an address)."""
    from caliper_jax.model import Model

    if isinstance(x, (np.ndarray, np.generic, jax.Array)):
        a = np.asarray(x)
        h.update(f"A{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    elif isinstance(x, Model):
        leaves, tree = jax.tree_util.tree_flatten(x)
        h.update(f"M{tree}".encode())
        _feed(h, leaves)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        h.update(f"D{type(x).__qualname__}".encode())
        for f in dataclasses.fields(x):
            h.update(f.name.encode())
            _feed(h, getattr(x, f.name))
    elif isinstance(x, dict):
        h.update(f"d{len(x)}".encode())
        for k in sorted(x, key=repr):
            _feed(h, k)
            _feed(h, x[k])
    elif isinstance(x, (tuple, list)):
        h.update(f"T{type(x).__qualname__}{len(x)}".encode())
        for v in x:
            _feed(h, v)
    elif x is None or isinstance(x, (bool, int, float, complex, str, bytes, Path)):
        h.update(f"S{type(x).__name__}{x!r}".encode())
    else:
        r = repr(x)
        if " at 0x" in r:
            raise TypeError(f"no content key for {type(x).__name__}")
        h.update(f"R{type(x).__qualname__}{r}".encode())


def content_key(*parts) -> str:
    """SHA-1 of ``parts``' content (see :func:`_feed`)."""
    h = hashlib.sha1()
    _feed(h, parts)
    return h.hexdigest()


def program_key(obj):
    """``obj.program_key()``: the parts a program built on ``obj`` closes over; TypeError (the
    program is then not persisted) when ``obj`` does not say."""
    fn = getattr(obj, "program_key", None)
    if fn is None:
        raise TypeError(f"no program key for {type(obj).__name__}")
    return fn()


def _signature(args):
    """(tree, ((shape, dtype, weak), ...)) of jax/NumPy array arguments; None for other leaves."""
    leaves, tree = jax.tree_util.tree_flatten(args)
    sig = []
    for x in leaves:
        if isinstance(x, jax.Array):
            sig.append((x.shape, x.dtype.name, bool(getattr(x, "weak_type", False))))
        elif isinstance(x, np.ndarray):
            sig.append((x.shape, x.dtype.name, False))
        else:
            return None
    return tree, tuple(sig)


@contextmanager
def _no_persistent_cache():
    old = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", old)


def _env() -> tuple:
    from importlib.metadata import PackageNotFoundError, version

    try:
        jaxlib = version("jaxlib")
    except PackageNotFoundError:
        jaxlib = ""
    dev = jax.devices()[0]
    return (_VERSION, jax.__version__, jaxlib, dev.platform, dev.device_kind,
            getattr(dev.client, "platform_version", ""), jax.device_count(), bool(jax.config.jax_enable_x64),
            _source_digest())


class Program:
    """``jitted`` (a ``jax.jit`` function of array pytrees) whose executables persist across
    processes; ``key()`` returns the parts the traced function closes over (see the module
    docstring). Calls with non-array leaves, and all calls without a cache folder, go to
    ``jitted`` itself."""

    def __init__(self, name: str, jitted, key):
        self.name, self.jitted, self._key, self._base = name, jitted, key, None
        self._exe: dict = {}
        self.loaded = 0           # executables loaded from disk
        self.compiled = 0         # executables compiled and stored

    def __call__(self, *args):
        where = folder()
        sig = None if where is None else _signature(args)
        if sig is None:
            return self.jitted(*args)
        exe = self._exe.get(sig)
        if exe is not None:
            return exe(*args)
        try:
            if self._base is None:
                self._base = content_key(self.name, self._key(), _env())
            path = where / f"{hashlib.sha1(repr((self._base, sig)).encode()).hexdigest()}.bin"
        except TypeError:         # a part without a content key: never persisted
            self._exe[sig] = self.jitted
            return self.jitted(*args)
        exe = _load(path)
        if exe is not None:
            try:
                out = jax.block_until_ready(exe(*args))
                self._exe[sig] = exe
                self.loaded += 1
                STATS["loaded"] += 1
                return out
            except Exception:     # a stale or partial executable: compile it again
                pass
        with _no_persistent_cache():
            exe = self.jitted.lower(*args).compile()
        _store(path, exe)
        self.compiled += 1
        STATS["compiled"] += 1
        self._exe[sig] = exe
        return exe(*args)


    def _cache_size(self) -> int:
        """Compiled variants held: the jitted function's plus the persisted executables."""
        return self.jitted._cache_size() + sum(e is not self.jitted for e in self._exe.values())


def _load(path: Path):
    if not path.is_file():
        return None
    from jax.experimental.serialize_executable import deserialize_and_load

    try:
        with open(path, "rb") as f:
            blob, in_tree, out_tree = pickle.load(f)   # written by _store only, in the user's own cache
        return deserialize_and_load(blob, in_tree, out_tree)
    except Exception:
        return None


def _store(path: Path, exe) -> None:
    """Atomic write; an executable that cannot be serialised, or an unwritable folder, is no error."""
    from jax.experimental.serialize_executable import serialize

    try:
        data = pickle.dumps(serialize(exe), protocol=pickle.HIGHEST_PROTOCOL)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except Exception:
        pass


def program(name: str, fn, key) -> Program:
    """:class:`Program` of ``jax.jit(fn)``."""
    return Program(name, jax.jit(fn), key)


__all__ = ["STATS", "Program", "content_key", "folder", "program", "program_key"]
