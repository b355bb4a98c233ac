"""Streaming accumulators: exact moments merged per episode (Chan), histograms, a seeded reservoir."""

from __future__ import annotations

import numpy as np


class Moments:
    """Count, mean, M2, min, max per dof and optionally the co-moment matrix, over finite rows."""

    def __init__(self, dim: int, with_cov: bool):
        self.n = 0
        self.mean = np.zeros(dim)
        self.m2 = np.zeros(dim)
        self.cov = np.zeros((dim, dim)) if with_cov else None
        self.min = np.full(dim, np.inf)
        self.max = np.full(dim, -np.inf)

    def update(self, x: np.ndarray) -> None:
        m = len(x)
        if m == 0:
            return
        mu = x.mean(axis=0)
        c = x - mu
        delta = mu - self.mean
        total = self.n + m
        weight = self.n * m / total
        self.mean += delta * (m / total)
        self.m2 += (c * c).sum(axis=0) + delta**2 * weight
        if self.cov is not None:
            self.cov += c.T @ c + np.outer(delta, delta) * weight
        self.n = total
        np.minimum(self.min, x.min(axis=0), out=self.min)
        np.maximum(self.max, x.max(axis=0), out=self.max)

    @property
    def std(self) -> np.ndarray:
        return np.sqrt(self.m2 / max(self.n, 1))

    def correlation(self) -> np.ndarray:
        sd = np.sqrt(np.diag(self.cov))
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.cov / np.outer(sd, sd)


def bin_index(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, bins: int) -> np.ndarray:
    """Bin of every value of ``x`` (n, dims) among ``bins`` equal bins per dof between ``lo`` and
    ``hi`` (dims,): int64 (n, dims), values outside the bounds clipped into the end bins, a dof
    with ``hi <= lo`` all in bin 0. The one binning of D003/D007, the summaries and the coverage
    generator (``tasks.coverage``)."""
    width = np.where(hi > lo, hi - lo, 1.0)
    return np.clip(((x - lo) / width * bins).astype(np.int64), 0, bins - 1)


def bin_counts(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, bins: int) -> np.ndarray:
    """Frames per bin (dims, bins) int64 of ``x`` (n, dims), binned as :func:`bin_index`."""
    dims = len(lo)
    if len(x) == 0:
        return np.zeros((dims, bins), dtype=np.int64)
    flat = (bin_index(x, lo, hi, bins) + np.arange(dims) * bins).ravel()
    return np.bincount(flat, minlength=dims * bins).reshape(dims, bins)


def occupancy(counts: np.ndarray) -> np.ndarray:
    """Share of each dof's bins holding at least one frame (dims,), from counts (dims, bins)."""
    return (counts > 0).mean(axis=1)


class Histogram:
    """Per-dof counts in ``bins`` equal bins between fixed bounds, plus frames at min / at max."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray, bins: int):
        self.lo, self.hi, self.bins = lo, hi, bins
        self.counts = np.zeros((len(lo), bins), dtype=np.int64)
        self.at_min = np.zeros(len(lo), dtype=np.int64)
        self.at_max = np.zeros(len(lo), dtype=np.int64)

    def update(self, x: np.ndarray) -> None:
        if len(x) == 0:
            return
        self.counts += bin_counts(x, self.lo, self.hi, self.bins)
        self.at_min += (x == self.lo).sum(axis=0)
        self.at_max += (x == self.hi).sum(axis=0)

    def occupancy(self) -> np.ndarray:
        return occupancy(self.counts)


class Reservoir:
    """Seeded reservoir sample (algorithm R) of rows with their (episode, frame) origin."""

    def __init__(self, size: int, seed: int):
        self.size = size
        self.rng = np.random.default_rng(seed)
        self.seen = 0
        self.rows: list = []
        self.where: list[tuple[int, int]] = []

    def update(self, rows: np.ndarray, episode: int, frames: np.ndarray) -> None:
        m = len(rows)
        if m == 0:
            return
        t = self.seen + np.arange(m)
        fill = int(np.clip(self.size - self.seen, 0, m))
        for i in range(fill):
            self.rows.append(rows[i])
            self.where.append((episode, int(frames[i])))
        if fill < m:
            slots = self.rng.integers(0, t[fill:] + 1)
            for i in np.flatnonzero(slots < self.size):
                self.rows[slots[i]] = rows[fill + i]
                self.where[slots[i]] = (episode, int(frames[fill + i]))
        self.seen += m
