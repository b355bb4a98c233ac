"""Probabilistic roadmap (Kavraki et al. 1996) in joint space, batched.

Rounds of: draw ``batch`` samples and keep the valid ones (one batched call), link every new
node to its ``k`` nearest roadmap nodes (all candidate edges checked together, in as few
batched calls as fit), then search start -> goal with Dijkstra. Rounds repeat until a path
exists or ``max_nodes`` is reached.
"""
from __future__ import annotations

import heapq

import numpy as np

from caliper_jax.planning.rrt import SearchStats
from caliper_jax.planning.sampling import Sampler
from caliper_jax.planning.validity import Checker


def _dijkstra(adj, n, source, target):
    dist = np.full(n, np.inf)
    prev = np.full(n, -1, dtype=np.int64)
    dist[source] = 0.0
    heap = [(0.0, source)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        if u == target:
            break
        for v, w in adj[u]:
            nd = d + w
            if nd < dist[v]:
                dist[v] = nd
                prev[v] = u
                heapq.heappush(heap, (nd, v))
    if not np.isfinite(dist[target]):
        return None
    path = [target]
    while path[-1] != source:
        path.append(int(prev[path[-1]]))
    return path[::-1]


def prm(checker: Checker, start, goal, sampler: Sampler, *, batch: int = 256, k: int = 10,
        max_nodes: int = 4096):
    """Waypoints start -> goal (n, nq) or None, and :class:`SearchStats`."""
    start, goal = np.asarray(start, float), np.asarray(goal, float)
    stats = SearchStats()
    if checker.edges_valid(start[None], goal[None])[0]:
        return np.stack([start, goal]), stats
    nodes = [start, goal]
    adj: list[list] = [[], []]
    new_from = 0
    while True:
        stats.iterations += 1
        q = np.array(nodes)
        # connect nodes [new_from, n) to their k nearest among all nodes
        cand = set()
        for i in range(new_from, q.shape[0]):
            d = np.sum((q - q[i]) ** 2, axis=1)
            d[i] = np.inf
            for j in np.argsort(d, kind="stable")[:k]:
                if np.isfinite(d[j]):
                    cand.add((min(i, int(j)), max(i, int(j))))
        cand = sorted(cand)
        if cand:
            ci = np.array(cand)
            ok = checker.edges_valid(q[ci[:, 0]], q[ci[:, 1]])
            for (i, j), good in zip(cand, ok, strict=True):
                if good:
                    w = float(np.linalg.norm(q[i] - q[j]))
                    adj[i].append((j, w))
                    adj[j].append((i, w))
        route = _dijkstra(adj, q.shape[0], 0, 1)
        stats.nodes = q.shape[0]
        if route is not None:
            return q[route], stats
        if q.shape[0] >= max_nodes or stats.iterations >= 4 * (max_nodes // batch + 1):
            return None, stats
        samples = sampler.configs(batch)
        good = samples[checker.valid(samples)]
        new_from = q.shape[0]
        for s in good[: max_nodes - q.shape[0]]:
            nodes.append(s)
            adj.append([])
