"""The evaluation protocol: named, disjoint seed splits, and effective-N success intervals.

**Seed splits.** A randomisation seed ``s`` gives every world ``w`` the episode stream
``fold_in(fold_in(PRNGKey(s), w), e)`` (:mod:`tasks.env`), so episodes of two different seeds never
share their draws. The protocol gives each use its own half-open range of seeds:

=========  ======================  ==========================================================
split      seeds                   used for
=========  ======================  ==========================================================
``train``  [0, 1000)               demonstrations (``caliper task demo`` records seed 0)
``val``    [1000, 1_000_000)       model selection and tuning (the tuned configs of
                                   ``benchmarks/bench_learn.py`` were chosen on seed 1000)
``test``   [1_000_000, 2_000_000)  the reported success; never looked at while tuning
=========  ======================  ==========================================================

The ranges are disjoint by construction (each starts where the previous ends);
:func:`split_seeds` gives the first ``n`` seeds of a split, :func:`split_of` names the split a
seed belongs to (None outside every range).

**Effective N.** An episode is defined by its initial conditions -- the randomisation draws of
(seed, world, world episode). With randomisation off (or every field fixed) every world starts
from the same scene, so 16 worlds are one episode played 16 times, not 16 samples of the task.
:func:`effective_count` groups the episodes by their draws: N_eff is the number of distinct
initial conditions, k_eff the sum over groups of each group's success fraction (an integer when
a deterministic policy repeats itself); the Wilson interval is computed on (k_eff, N_eff).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError


@dataclass(frozen=True)
class SeedSplit:
    """Seeds ``start <= s < stop`` of one use of the protocol."""

    name: str
    start: int
    stop: int
    use: str

    def __contains__(self, seed) -> bool:
        return isinstance(seed, (int, np.integer)) and self.start <= int(seed) < self.stop

    def seeds(self, n: int) -> tuple[int, ...]:
        """The first ``n`` seeds of the split."""
        size = self.stop - self.start
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or not 1 <= n <= size:
            raise CaliperError(f"split {self.name!r}: number of seeds must be in 1..{size}, got {n!r}")
        return tuple(range(self.start, self.start + int(n)))


#: The three splits, in order; the single definition of the protocol's seeds.
SPLITS = {s.name: s for s in (
    SeedSplit("train", 0, 1000, "demonstrations"),
    SeedSplit("val", 1000, 1_000_000, "model selection and tuning"),
    SeedSplit("test", 1_000_000, 2_000_000, "reported success (never used for tuning)"),
)}
SPLIT_NAMES = tuple(SPLITS)


def get_split(name: str) -> SeedSplit:
    if name not in SPLITS:
        raise CaliperError(f"split {name!r}: expected one of {', '.join(SPLIT_NAMES)}")
    return SPLITS[name]


def split_seeds(name: str, n: int = 1) -> tuple[int, ...]:
    """The first ``n`` randomisation seeds of split ``name`` ("train", "val" or "test")."""
    return get_split(name).seeds(n)


def split_of(seed) -> str | None:
    """The name of the split holding ``seed``, or None when no split does."""
    return next((s.name for s in SPLITS.values() if seed in s), None)


def resolve_seed(seed, split) -> int:
    """The seed an evaluation runs: ``seed`` when given (it must lie in ``split`` when both are
    given), else the first seed of ``split``, else 0."""
    if seed is not None and (not isinstance(seed, (int, np.integer)) or isinstance(seed, bool)):
        raise CaliperError(f"seed must be an integer, got {seed!r}")
    if split is None:
        return 0 if seed is None else int(seed)
    sp = get_split(split)
    if seed is None:
        return sp.start
    if seed not in sp:
        raise CaliperError(f"seed {seed} is not a {split} seed (the {split} split is [{sp.start}, "
                           f"{sp.stop}); {seed} belongs to {split_of(seed) or 'no split'})")
    return int(seed)


def draw_signature(draws: dict, i: int) -> bytes:
    """The initial conditions of episode ``i`` of ``draws`` ({field: (n, ...)}) as bytes."""
    return b"".join(k.encode() + np.ascontiguousarray(np.asarray(draws[k])[i], np.float32).tobytes()
                    for k in sorted(draws))


def effective_count(successes, signatures) -> tuple[float, int]:
    """(k_eff, N_eff) of episodes with ``successes`` (n,) bool and initial-condition
    ``signatures`` (n,) hashable: one trial per distinct signature, its success the fraction of
    that signature's episodes that succeeded."""
    groups: dict = {}
    for s, sig in zip(successes, signatures, strict=True):
        groups.setdefault(sig, []).append(bool(s))
    k = float(sum(sum(g) / len(g) for g in groups.values()))
    return k, len(groups)


__all__ = ["SPLITS", "SPLIT_NAMES", "SeedSplit", "draw_signature", "effective_count", "get_split",
           "resolve_seed", "split_of", "split_seeds"]
