"""RRT-Connect and RRT* in joint space.

RRT*'s tree grows on the host (NumPy arrays, nearest neighbours by brute force); every validity
question is one batched call to a :class:`~caliper_jax.planning.validity.Checker`:

* RRT-Connect (Kuffner and LaValle 2000) is :func:`caliper_jax.planning.vrrt.rrt_connect_search`,
  the one implementation every caller shares (the fast path, this host planner, the task
  witnesses); here its states are answered by the Checker through a host callback
  (:func:`~caliper_jax.planning.vrrt.host_search`).
* RRT* (Karaman and Frazzoli 2011): one tree; each new node picks the cheapest valid parent among
  its neighbours (at most ``neighbors`` within the shrinking radius) and rewires those neighbours
  through itself when that shortens them. The edges to all neighbours are checked in one call.
  After the goal is first reached it keeps refining for ``refine`` more iterations.

Both return the raw waypoint path (start ... goal) or None.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from caliper_jax.planning.sampling import Sampler
from caliper_jax.planning.validity import Checker

#: Nodes per tree (and waypoints per path) of the host-validity RRT-Connect.
HOST_CAPACITY = 1024


@dataclass
class SearchStats:
    iterations: int = 0
    nodes: int = 0


class _Tree:
    def __init__(self, root, capacity: int):
        self.q = np.zeros((capacity, root.shape[0]))
        self.parent = np.full(capacity, -1, dtype=np.int64)
        self.cost = np.zeros(capacity)
        self.n = 1
        self.q[0] = root

    def nearest(self, x) -> int:
        d = np.sum((self.q[:self.n] - x) ** 2, axis=1)
        return int(np.argmin(d))

    def near(self, x, radius: float, k: int):
        d = np.sqrt(np.sum((self.q[:self.n] - x) ** 2, axis=1))
        idx = np.flatnonzero(d <= radius)
        if idx.size > k:
            idx = idx[np.argsort(d[idx], kind="stable")[:k]]
        return idx, d[idx]

    def add(self, x, parent: int, cost: float = 0.0) -> int:
        if self.n == self.q.shape[0]:
            grow = self.q.shape[0]
            self.q = np.concatenate([self.q, np.zeros_like(self.q[:grow])])
            self.parent = np.concatenate([self.parent, np.full(grow, -1, dtype=np.int64)])
            self.cost = np.concatenate([self.cost, np.zeros(grow)])
        i = self.n
        self.q[i], self.parent[i], self.cost[i] = x, parent, cost
        self.n += 1
        return i

    def branch(self, i: int) -> np.ndarray:
        """Root ... node i."""
        out = []
        while i >= 0:
            out.append(self.q[i])
            i = int(self.parent[i])
        return np.array(out[::-1])


def _steer(a, b, step: float):
    d = b - a
    dist = float(np.max(np.abs(d))) if d.size else 0.0
    if dist <= step:
        return b.copy(), True
    return a + d * (step / dist), False


def rrt_connect(checker: Checker, start, goal, sampler: Sampler, *, step: float = 0.3,
                max_iterations: int = 2000, goal_bias: float = 0.05, candidates: int = 8):
    """Waypoints start -> goal (n, nq) or None, and :class:`SearchStats`: the jitted
    RRT-Connect of :mod:`caliper_jax.planning.vrrt` (one implementation for every caller) with
    ``checker.valid`` answering its states on the host, edges checked at ``checker.resolution``,
    samples drawn in ``sampler``'s box from a key of its stream. Trees hold up to
    ``HOST_CAPACITY`` nodes each (4x more, one more compile, when they fill)."""
    from caliper_jax.planning.vrrt import TREE_FULL, SearchOptions, host_search

    lo, hi = sampler.box
    opts = SearchOptions(step=float(step), resolution=float(checker.resolution), capacity=HOST_CAPACITY,
                         max_iterations=int(max_iterations), goal_bias=float(goal_bias),
                         path_capacity=HOST_CAPACITY, candidates=int(candidates))
    key = sampler.key()
    r = host_search(checker.valid, start, goal, key, lo, hi, opts)
    if not r["found"] and r["code"] == TREE_FULL:
        opts = opts._replace(capacity=4 * HOST_CAPACITY, path_capacity=4 * HOST_CAPACITY)
        r = host_search(checker.valid, start, goal, key, lo, hi, opts)
    stats = SearchStats(r["iterations"], r["nodes"])
    return (None if r["path"] is None else _dedupe(r["path"])), stats


def _dedupe(path):
    keep = [0]
    for i in range(1, path.shape[0]):
        if np.any(path[i] != path[keep[-1]]):
            keep.append(i)
    return path[keep]


def rrt_star(checker: Checker, start, goal, sampler: Sampler, *, step: float = 0.3,
             max_iterations: int = 3000, goal_bias: float = 0.05, neighbors: int = 16,
             refine: int = 300, gamma: float | None = None):
    """Waypoints start -> goal (n, nq) or None, and :class:`SearchStats`."""
    start, goal = np.asarray(start, float), np.asarray(goal, float)
    stats = SearchStats()
    tree = _Tree(start, 512)
    nq = start.shape[0]
    lo = np.where(np.isfinite(checker.lower), checker.lower, -np.pi)
    hi = np.where(np.isfinite(checker.upper), checker.upper, np.pi)
    if gamma is None:   # a generous constant: 2 (1 + 1/d)^(1/d) times the box "radius"
        gamma = 2.0 * (1 + 1.0 / nq) ** (1.0 / nq) * float(np.prod(hi - lo)) ** (1.0 / nq)
    if checker.edges_valid(start[None], goal[None])[0]:
        return np.stack([start, goal]), stats
    goal_node, found_at = -1, None
    children: dict[int, list[int]] = {0: []}
    for it in range(max_iterations):
        stats.iterations = it + 1
        if found_at is not None and it - found_at >= refine:
            break
        x = goal.copy() if sampler.uniform()[0] < goal_bias else sampler.config()
        i_near = tree.nearest(x)
        x_new, _ = _steer(tree.q[i_near], x, step)
        if goal_node >= 0 and np.all(x_new == goal):
            continue
        n = tree.n + 1
        radius = min(gamma * (np.log(n) / n) ** (1.0 / nq), 3 * step)
        idx, dist = tree.near(x_new, max(radius, step * (1 + 1e-9)), neighbors)
        if i_near not in idx:
            idx = np.append(idx, i_near)
            dist = np.append(dist, np.linalg.norm(tree.q[i_near] - x_new))
        ok = checker.edges_valid(tree.q[idx], np.repeat(x_new[None], idx.size, axis=0))
        if not ok.any():
            continue
        via = np.where(ok, tree.cost[idx] + dist, np.inf)
        best = int(np.argmin(via))
        parent = int(idx[best])
        new = tree.add(x_new, parent, float(via[best]))
        children.setdefault(parent, []).append(new)
        children[new] = []
        # rewire the neighbours through the new node
        for k, j in enumerate(idx):
            j = int(j)
            if ok[k] and j != parent and tree.cost[new] + dist[k] < tree.cost[j] - 1e-12:
                old = int(tree.parent[j])
                children[old].remove(j)
                tree.parent[j] = new
                children[new].append(j)
                delta = tree.cost[new] + dist[k] - tree.cost[j]
                stack = [j]
                while stack:
                    u = stack.pop()
                    tree.cost[u] += delta
                    stack.extend(children[u])
        if np.all(x_new == goal):
            goal_node, found_at = new, it
    stats.nodes = tree.n
    if goal_node < 0:
        return None, stats
    return tree.branch(goal_node), stats
