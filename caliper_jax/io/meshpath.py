"""Resolve mesh URIs the way robot packages lay them out (relative, ``package://``, ``file://``)."""
from __future__ import annotations

import os
from pathlib import Path


def _ancestors(directory: Path):
    yield directory
    yield from directory.parents


def candidate_paths(uri: str, source_file: str | os.PathLike, roots=()) -> list[Path]:
    """Every path, in search order, where the mesh named by ``uri`` may live.

    ``package://pkg/rest`` is searched as ``A/pkg/rest`` and ``A/rest`` (when ``A`` itself is
    named ``pkg``) for every ancestor ``A`` of the file's directory, then under each root.
    Relative paths are searched against the file's directory, its ancestors and the roots.
    """
    base = Path(source_file).resolve().parent
    roots = [Path(r) for r in roots]
    if uri.startswith("file://"):
        return [Path(uri[len("file://"):])]
    if uri.startswith("package://"):
        rest = uri[len("package://"):]
        package, _, inner = rest.partition("/")
        out: list[Path] = []
        for anc in [*_ancestors(base), *roots]:
            if anc.name == package:
                out.append(anc / inner)
            out.append(anc / package / inner)
        return out
    path = Path(uri)
    if path.is_absolute():
        return [path]
    return [anc / path for anc in [*_ancestors(base), *roots]]


def resolve_mesh(uri: str, source_file: str | os.PathLike, roots=()) -> tuple[str | None, list[str]]:
    """(the first existing candidate or None, every candidate tried as strings)."""
    tried = []
    for cand in candidate_paths(uri, source_file, roots):
        tried.append(str(cand))
        if cand.is_file():
            return str(cand), tried
    return None, tried
