"""Reading ``.npz`` archives within the budgets: every array's *declared* shape and dtype is read
from its ``.npy`` header (a few hundred bytes of each zip member) and the total is checked against
``CALIPER_MAX_MEMORY_MB`` *before* anything is decompressed -- a 100 KB archive that inflates to
7 GB is refused in a second, not after swapping. Object (pickle) arrays are refused unread.
"""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from caliper_jax import limits
from caliper_jax.errors import CaliperError

_BAD = (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError, zipfile.LargeZipFile)


def declared_arrays(archive: zipfile.ZipFile, what: str) -> dict[str, tuple[tuple, np.dtype]]:
    """{name: (shape, dtype)} of every ``name.npy`` member, from its header alone."""
    out = {}
    for info in archive.infolist():
        if not info.filename.endswith(".npy"):
            continue
        name = info.filename[:-4]
        with archive.open(info) as member:
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(member)
            else:
                shape, _, dtype = np.lib.format.read_array_header_2_0(member)
        if dtype.hasobject:
            raise CaliperError(f"{what}: array {name!r} is not a numeric array (Python objects, pickle; "
                               "not read)")
        out[name] = (tuple(int(n) for n in shape), dtype)
    return out


def load_npz(path, what: str | None = None, keys=None, raw: bytes | None = None) -> dict[str, np.ndarray]:
    """The arrays of ``path`` (only ``keys`` when given) after the file-size budget and the memory
    budget of their declared shapes; every error is one CaliperError naming ``what`` (default: the
    path). ``raw``: the file's bytes when the caller has already read them (within the budget)."""
    what = what or str(path)
    if raw is None:
        raw = limits.read_bytes(Path(path), ".npz archive")
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            declared = declared_arrays(archive, what)
            wanted = {k: v for k, v in declared.items() if keys is None or k in keys}
            nbytes = sum(float(np.prod(shape, dtype=np.float64)) * dtype.itemsize
                         for shape, dtype in wanted.values())
            limits.check_memory(nbytes, f"{what}: arrays {', '.join(wanted) or '-'} (declared shapes "
                                        f"{'; '.join(str(s) for s, _ in wanted.values())})")
            with np.load(io.BytesIO(raw), allow_pickle=False) as z:
                return {k: np.asarray(z[k]) for k in wanted}
    except CaliperError:
        raise
    except _BAD as exc:
        raise CaliperError(f"{what}: not a readable .npz archive ({type(exc).__name__}: "
                           f"{' '.join(str(exc).split())[:120]})") from None
