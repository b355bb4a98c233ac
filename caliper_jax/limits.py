"""Work and memory budgets, checked before any work is done, and the capped file reader.

Every input that sets an amount of work or memory (a duration over a time step, ticks, rows,
samples, worlds, restarts, iterations, a file's size, a chain's length) is compared with a budget
*before* anything is allocated; going over raises a one-line :class:`CaliperError` naming the
input, the estimate and the limit, and how to raise it. One mechanism for every budget: an
environment variable ``CALIPER_MAX_<NAME>`` (e.g. ``CALIPER_MAX_STEPS=50000000 caliper sim ...``).

NumPy-free and JAX-free, so the dataset IO and the doctors can use it.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from caliper_jax.errors import CaliperError

# name -> (default, what one unit is)
BUDGETS: dict[str, tuple[int, str]] = {
    # sequential work: simulation steps, control ticks, trajectory rows and samples, solver and
    # planner iterations -- multiplied by the worlds / restarts / initialisations run together
    "steps": (1_000_000, "steps"),
    # things held in memory at once: worlds, restarts, initialisations, batch lanes, waypoints
    "batch": (65_536, "lanes"),
    # estimated size of the arrays a command builds
    "memory_mb": (1_024, "MiB"),
    # bytes read from one input file (URDF, MJCF, SRDF, JSON, NPZ, dataset metadata)
    "file_mb": (64, "MiB"),
    # moving bodies of one robot (compile time and memory grow with the chain)
    "bodies": (10_000, "bodies"),
    # nesting depth of one JSON document (task, graph, config): arrays and objects inside each other
    "depth": (64, "levels"),
    # nodes of one dataflow graph (validation and the run order grow with it)
    "nodes": (2_000, "nodes"),
}


class BudgetError(CaliperError):
    """An input that asks for more work or memory than a budget allows (exit 2, like bad input)."""


def env_name(name: str) -> str:
    return f"CALIPER_MAX_{name.upper()}"


def limit(name: str) -> int:
    """The budget ``name`` (see :data:`BUDGETS`), from ``CALIPER_MAX_<NAME>`` when set."""
    default, _ = BUDGETS[name]
    raw = os.environ.get(env_name(name))
    if raw is None or not raw.strip():
        return default
    try:
        value = int(float(raw))
    except (ValueError, OverflowError):
        raise CaliperError(f"{env_name(name)}: expected a positive integer, got {raw!r}") from None
    if value < 1:
        raise CaliperError(f"{env_name(name)}: expected a positive integer, got {raw!r}")
    return value


def check(name: str, amount, what: str) -> int:
    """``amount`` (a number, possibly huge or non-finite) against budget ``name``; returns it as an
    int. ``what`` names the input(s) that set it, e.g. ``"--duration / --dt"``."""
    budget = limit(name)
    _, unit = BUDGETS[name]
    try:
        value = float(amount)
    except (TypeError, ValueError, OverflowError):
        value = float("inf")
    if not value <= budget:  # also catches nan and inf
        shown = "an unbounded number of" if value != value or value == float("inf") else f"{value:,.0f}"
        raise BudgetError(f"{what}: {shown} {unit}, over the limit of {budget:,} {unit} "
                           f"(set {env_name(name)}=N to raise it)")
    return int(value)


def check_memory(nbytes, what: str) -> None:
    """An estimated allocation of ``nbytes`` against the memory budget."""
    check("memory_mb", float(nbytes) / 2**20, what)


def check_file(path, what: str = "file") -> Path:
    """``path`` must be an existing regular file within the file-size budget (no device, FIFO,
    socket or directory: ``/dev/zero`` is refused without reading a byte). Returns it as a Path."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise CaliperError(f"{path}: no such {what}") from None
    except OSError as exc:
        raise CaliperError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise CaliperError(f"{path}: is a directory ({what} expected)")
    if not stat.S_ISREG(st.st_mode):
        raise CaliperError(f"{path}: not a regular file but a device, FIFO or socket ({what} expected)")
    budget = limit("file_mb")
    if st.st_size > budget * 2**20:
        raise BudgetError(f"{path}: {st.st_size / 2**20:,.1f} MiB, over the {budget} MiB limit for one "
                           f"{what} (set {env_name('file_mb')}=N to raise it)")
    return path


def read_bytes(path, what: str = "file") -> bytes:
    """The bytes of ``path`` after :func:`check_file`; never more than the budget, even when the
    file grows while it is read."""
    path = check_file(path, what)
    cap = limit("file_mb") * 2**20
    try:
        with open(path, "rb") as handle:
            data = handle.read(cap + 1)
    except OSError as exc:
        raise CaliperError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if len(data) > cap:
        raise CaliperError(f"{path}: over the {cap // 2**20} MiB limit for one {what} "
                           f"(set {env_name('file_mb')}=N to raise it)")
    return data


def read_text(path, what: str = "file") -> str:
    """The UTF-8 text of ``path`` (see :func:`read_bytes`)."""
    data = read_bytes(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CaliperError(f"{path}: not UTF-8 text (a binary file? byte {exc.start} is "
                           f"0x{data[exc.start]:02x}; {what} expected)") from None


# ---- nesting depth and JSON -----------------------------------------------------------------------

def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON ``text`` (brackets inside strings do not count);
    no recursion and no parse, so a 100k-deep document is measured safely (strings are dropped with
    a regex first, so the Python loop only visits the brackets)."""
    import re

    brackets = re.sub(r"[^\[\]{}]+", "", re.sub(r'"(?:[^"\\]|\\.)*"', "", text))
    depth = deepest = 0
    for ch in brackets:
        if ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        else:
            depth -= 1
    return deepest


def check_depth(text: str, what: str) -> None:
    """JSON ``text`` nested deeper than the ``depth`` budget is refused *before* it is parsed (the
    parser and every recursive walk after it would end in RecursionError)."""
    budget = limit("depth")
    # cheap pre-filter: a document with fewer brackets than the budget cannot be too deep
    if text.count("[") + text.count("{") <= budget:
        return
    deepest = json_depth(text)
    if deepest > budget:
        raise BudgetError(f"{what}: nested {deepest:,} levels deep, over the limit of {budget} levels "
                           f"(set {env_name('depth')}=N to raise it)")


def load_json(text: str, what: str, **kwargs):
    """``json.loads`` with the nesting depth bounded first (:func:`check_depth`); a syntax error is a
    CaliperError naming ``what``, the line and the column."""
    import json

    check_depth(text, what)
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError as exc:
        raise CaliperError(f"{what}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") \
            from None
    except RecursionError:        # only reachable when the depth budget was raised very high
        raise CaliperError(f"{what}: nested too deeply to parse (lower {env_name('depth')})") from None


# ---- paths that come from files ------------------------------------------------------------------

class PathEscapeError(CaliperError):
    """A path read from a file (a graph node, a dataset's metadata, a checkpoint's file list) that
    resolves outside the folder it must stay in."""


def inside(root, rel, what: str) -> Path:
    """``root / rel`` when it resolves (symlinks followed, ``..`` collapsed) inside ``root``; else a
    one-line :class:`PathEscapeError` naming ``what``. ``rel`` may be absolute only if it is inside
    ``root`` too. Parts that do not exist yet are resolved as far as they exist (a symlinked parent
    pointing away is caught before anything is written through it)."""
    root_path = Path(root)
    text = str(rel)
    if "\x00" in text:
        raise PathEscapeError(f"{what}: {text!r} holds a NUL byte")
    base = root_path.resolve()
    target = (root_path / text).resolve()      # strict=False: follows the links that exist
    if target != base and base not in target.parents:
        raise PathEscapeError(f"{what}: {text!r} resolves to {target}, outside {root_path} "
                              "(paths from a file must stay inside that folder); refused")
    return target


__all__ = ["BUDGETS", "BudgetError", "PathEscapeError", "check", "check_depth", "check_file", "check_memory",
           "env_name", "inside", "json_depth", "limit", "load_json", "read_bytes", "read_text"]
