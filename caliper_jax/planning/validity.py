"""Batched validity checks for the planners: inside the joint limits and collision-free.

A :class:`Checker` uses one jitted, vmapped collision test (GJK yes/no within ``margin`` over
every self and world pair of a :class:`~caliper_jax.collision.CollisionModel`,
:func:`caliper_jax.collision.api.collision_flags`). Every request -- one configuration, the
samples along one edge, or thousands of samples along hundreds of edges -- is padded to one of a
few fixed batch sizes (``api.BUCKETS``, then chunks of ``api.CHUNK``), so the test compiles a
handful of times per robot and all geometry runs in batched JAX calls. The planners' Python loops
only grow trees and graphs.

**Edges are checked at a resolution.** A straight joint-space edge is valid when the states
sampled along it -- no two consecutive samples more than ``resolution`` apart in any joint (rad or
m) -- are valid. Between samples nothing is checked: a thin enough obstacle can slip between two
samples (tunnelling). Lower the resolution, or inflate the geometry with ``margin``, to make that
less likely; the guarantee stays sampled, not continuous.
"""
from __future__ import annotations

import numpy as np

from caliper_jax.collision import api
from caliper_jax.collision.scene import CollisionModel
from caliper_jax.errors import CaliperError
from caliper_jax.model import Model


def joint_space_only(model: Model) -> None:
    """Planners interpolate straight lines in q: every joint must be revolute or prismatic."""
    bad = [n for n, t in zip(model.body_names, model.jnt_type, strict=True)
           if t not in ("revolute", "prismatic")]
    if bad:
        raise CaliperError(f"joint-space planning needs revolute/prismatic joints; {model.name!r} has "
                           f"{', '.join(bad)}")


class Checker:
    """Validity of configurations and straight edges for ``model`` among ``cm``.

    ``margin``: required clearance (m) on every pair; ``resolution``: largest per-joint step
    between edge samples; ``batch``: pad every collision call to exactly this many states (one
    compiled shape) instead of the default size classes; ``filtered``: clear pairs with a
    conservative sphere cover first and run GJK only on the rest
    (:func:`caliper_jax.collision.api.filtered_in_collision`; the same answers) -- by default when
    the scene has mesh hulls, where GJK is expensive. ``calls`` and ``states`` count batched
    calls and states checked.
    """

    def __init__(self, model: Model, cm: CollisionModel, *, margin: float = 0.0, resolution: float = 0.02,
                 batch: int | None = None, filtered: bool | None = None):
        joint_space_only(model)
        if not (np.isfinite(resolution) and resolution > 0):
            raise CaliperError(f"resolution must be > 0, got {resolution!r}")
        if not (np.isfinite(margin) and margin >= 0):
            raise CaliperError(f"margin must be >= 0, got {margin!r}")
        if batch is not None and batch < 1:
            raise CaliperError(f"batch must be >= 1, got {batch}")
        self.model, self.cm = model, cm
        self.batch = batch
        if filtered is None:            # worth it when GJK is expensive: mesh hulls
            filtered = "hull" in cm.kinds
        self.filter = api.SphereFilter(cm) if filtered else None
        self.margin, self.resolution = float(margin), float(resolution)
        self.lower = np.asarray(model.qpos_lower, dtype=np.float64)
        self.upper = np.asarray(model.qpos_upper, dtype=np.float64)
        self.nq = model.nq
        self.calls = 0
        self.states = 0

    # ---- states -----------------------------------------------------------------------------

    def valid(self, qs) -> np.ndarray:
        """(n,) bool for configurations (n, nq): limits on the host, collisions in padded
        batched calls (:func:`caliper_jax.collision.api.collision_flags`)."""
        qs = np.asarray(qs, dtype=np.float64).reshape(-1, self.nq)
        n = qs.shape[0]
        if n == 0:
            return np.zeros(0, dtype=bool)
        inside = np.all((qs >= self.lower) & (qs <= self.upper), axis=-1)
        chunk = self.batch or api.CHUNK
        fixed = self.batch is not None
        if self.filter is not None:
            hit = api.filtered_in_collision(self.model, self.filter, qs, self.margin, chunk=chunk,
                                            fixed=fixed)
        else:
            hit = api.collision_flags(self.model, self.cm, qs, self.margin, chunk=chunk,
                                      fixed=fixed).any(axis=-1)
        self.calls += -(-n // chunk)
        self.states += n
        return inside & ~hit

    def valid_one(self, q) -> bool:
        return bool(self.valid(np.asarray(q)[None])[0])

    # ---- edges --------------------------------------------------------------------------------

    def steps(self, q0, q1) -> int:
        """Number of intervals an edge is cut into (>= 1)."""
        span = float(np.max(np.abs(np.asarray(q1) - np.asarray(q0)))) if self.nq else 0.0
        return max(1, int(np.ceil(span / self.resolution - 1e-9)))

    def samples(self, q0, q1) -> np.ndarray:
        """States along the edge q0 -> q1 excluding q0, including q1: (steps, nq)."""
        q0, q1 = np.asarray(q0, dtype=np.float64), np.asarray(q1, dtype=np.float64)
        k = self.steps(q0, q1)
        t = np.arange(1, k + 1)[:, None] / k
        return q0 + t * (q1 - q0)

    def edges_valid(self, starts, ends) -> np.ndarray:
        """(m,) bool: every sample of each edge valid (start states are assumed checked)."""
        starts = np.asarray(starts, dtype=np.float64).reshape(-1, self.nq)
        ends = np.asarray(ends, dtype=np.float64).reshape(-1, self.nq)
        if starts.shape[0] == 0:
            return np.zeros(0, dtype=bool)
        chunks, owner = [], []
        for e, (a, b) in enumerate(zip(starts, ends, strict=True)):
            s = self.samples(a, b)
            chunks.append(s)
            owner.append(np.full(s.shape[0], e))
        ok = self.valid(np.concatenate(chunks))
        bad = np.zeros(starts.shape[0], dtype=bool)
        np.logical_or.at(bad, np.concatenate(owner), ~ok)
        return ~bad

    def valid_prefix(self, q0, q1) -> float:
        """Fraction ``s`` in [0, 1] of the edge q0 -> q1 whose samples are all valid (1: the whole
        edge, 0: already the first sample fails)."""
        s = self.samples(q0, q1)
        ok = self.valid(s)
        if ok.all():
            return 1.0
        first_bad = int(np.argmin(ok))
        return first_bad / s.shape[0]

    def path_valid(self, path) -> bool:
        """Every state of a waypoint path (n, nq) and every edge between them, at the resolution."""
        path = np.asarray(path, dtype=np.float64)
        if not self.valid_one(path[0]):
            return False
        if path.shape[0] == 1:
            return True
        return bool(np.all(self.edges_valid(path[:-1], path[1:])))
