"""Shortcut smoothing of a waypoint path, with batched edge checks.

Each round proposes ``proposals`` random shortcuts (i, j), j >= i + 2, checks all their straight
edges in one batched call, and applies the valid ones longest first, skipping any that overlap an
applied one. A final round tries to drop every interior waypoint at once (i - 1 -> i + 1,
alternating). Deterministic for a given sampler state.
"""
from __future__ import annotations

import numpy as np

from caliper_jax.planning.sampling import Sampler
from caliper_jax.planning.validity import Checker


def _apply(path, cuts):
    """Remove the waypoints strictly inside the accepted (i, j) cuts."""
    keep = np.ones(path.shape[0], dtype=bool)
    for i, j in cuts:
        keep[i + 1:j] = False
    return path[keep]


def _accept(cands, ok):
    chosen = []
    order = sorted((c for c, g in zip(cands, ok, strict=True) if g), key=lambda c: (-(c[1] - c[0]), c[0]))
    for i, j in order:
        if all(j <= a or i >= b for a, b in chosen):
            chosen.append((i, j))
    return chosen


def shortcut(checker: Checker, path, sampler: Sampler, *, rounds: int = 30, proposals: int = 16):
    """A shorter path with the same endpoints whose every edge is valid at the checker's resolution."""
    path = np.asarray(path, dtype=np.float64)
    if path.shape[0] <= 2:
        return path
    if checker.edges_valid(path[:1], path[-1:])[0]:
        return path[[0, -1]]
    for _ in range(rounds):
        n = path.shape[0]
        if n <= 2:
            break
        u = sampler.uniform(2 * proposals)
        i = np.minimum((u[:proposals] * (n - 2)).astype(np.int64), n - 3)
        span = n - 1 - (i + 2) + 1
        j = i + 2 + np.minimum((u[proposals:] * span).astype(np.int64), span - 1)
        cands = sorted(set(zip(i.tolist(), j.tolist(), strict=True)))
        ci = np.array(cands)
        ok = checker.edges_valid(path[ci[:, 0]], path[ci[:, 1]])
        path = _apply(path, _accept(cands, ok))
    for parity in (1, 2):
        n = path.shape[0]
        if n <= 2:
            break
        cands = [(k - 1, k + 1) for k in range(parity, n - 1, 2)]
        if not cands:
            continue
        ci = np.array(cands)
        ok = checker.edges_valid(path[ci[:, 0]], path[ci[:, 1]])
        path = _apply(path, _accept(cands, ok))
    return path


def path_length(path) -> float:
    path = np.asarray(path, dtype=np.float64)
    return float(np.sum(np.linalg.norm(np.diff(path, axis=0), axis=1))) if path.shape[0] > 1 else 0.0
