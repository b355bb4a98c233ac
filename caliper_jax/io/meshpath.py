"""Resource URLs to file candidates: relative, absolute, ``file://``, ``package://`` (shared by the
model loader and the asset doctor; standard library only).

``package://pkg/rel`` is looked up against the referencing file's ancestors (an ancestor named
``pkg``, or a ``pkg`` folder inside an ancestor) and then against the configured roots (the same
two forms). Every candidate is returned in search order so findings can list what was tried.
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import unquote

PACKAGE_SCHEMES = ("package://", "model://")


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def package_dirs(pkg: str, base_dir: Path, roots: Sequence[Path]) -> Iterator[Path]:
    """Candidate directories for package ``pkg`` (unchecked, in search order)."""
    base = _absolute(base_dir)
    for anchor in (base, *base.parents, *(_absolute(Path(r)) for r in roots)):
        if anchor.name == pkg:
            yield anchor
        yield anchor / pkg


def candidates(url: str, base_dir: Path, roots: Sequence[Path] = ()) -> list[Path]:
    """Every path ``url`` may name, in search order, without duplicates (empty: unsupported URL)."""
    found: list[Path] = []
    for scheme in PACKAGE_SCHEMES:
        if url.startswith(scheme):
            pkg, _, rel = url[len(scheme):].lstrip("/").partition("/")
            if pkg and rel:
                found = [d / rel for d in package_dirs(pkg, base_dir, roots)]
            break
    else:
        if url.startswith("file://"):
            url = unquote(url[len("file://"):])
            url = url[len("localhost"):] if url.startswith("localhost/") else url
        if url and "://" not in url:
            path = Path(url)
            found = [path if path.is_absolute() else _absolute(base_dir / path)]
    return list(dict.fromkeys(found))


def _is(path: Path, kind: str) -> bool:
    """``path.is_file()`` / ``is_dir()`` that treats unusable names (e.g. too long) as absent."""
    try:
        return getattr(path, kind)()
    except OSError:
        return False


def resolve(url: str, base_dir: Path, roots: Sequence[Path] = ()) -> tuple[Path | None, list[Path]]:
    """The first existing file ``url`` names (or None) and every candidate tried."""
    tried = candidates(url, base_dir, roots)
    return next((p for p in tried if _is(p, "is_file")), None), tried


def find_package(pkg: str, base_dir: Path, roots: Sequence[Path] = ()) -> Path | None:
    """The first existing directory of package ``pkg`` (xacro ``$(find pkg)``)."""
    return next((d for d in package_dirs(pkg, base_dir, roots) if _is(d, "is_dir")), None)


def resolve_mesh(uri: str, source_file, roots=()) -> tuple[str | None, list[str]]:
    """(the resolved file or None, every candidate tried) for a mesh URI in ``source_file``."""
    found, tried = resolve(uri, Path(source_file).parent, [Path(r) for r in roots])
    return (str(found) if found else None), [str(t) for t in tried]
