"""Validation of a GraphDoc: every problem as a finding that names the node and port.

A finding is ``{"code", "node", "port", "message"}`` (``port`` is the parameter's name for
parameter findings, None where no port is involved). Codes:

``duplicate_id``    two nodes share an id
``unknown_type``    a node type not in NODE_TYPES
``unknown_param``   a parameter the node type does not take
``missing_param``   a required parameter not given
``bad_param``       a parameter of the wrong type or out of range (a robot not in the registry...)
``path_escape``     a path parameter that would leave the run's folder (absolute, or ``..``)
``unknown_node``    an edge names a node that does not exist
``unknown_port``    an edge names a port the node does not have (or an input as an output...)
``type_mismatch``   an edge joins ports of different types
``multiple_edges``  more than one edge into one input
``dangling_input``  a required input with no edge
``cycle``           the edges form a cycle (the message lists its nodes)
"""
from __future__ import annotations

import heapq

from caliper_jax.graph.ir import GraphDoc, GraphError, load_graph
from caliper_jax.graph.nodes import NODE_TYPES, check_param, path_escape


def _finding(code: str, node, port, message: str) -> dict:
    return {"code": code, "node": node, "port": port, "message": message}


def _params(doc: GraphDoc, out: list) -> None:
    for n in doc.nodes:
        spec = NODE_TYPES.get(n.type)
        if spec is None:
            continue
        for key in n.params:
            if key not in spec.params:
                known = ", ".join(spec.params) or "none"
                out.append(_finding("unknown_param", n.id, key, f"node {n.id!r} ({n.type}): unknown "
                                    f"parameter {key!r} (parameters: {known})"))
        for key, p in spec.params.items():
            if key not in n.params:
                if p.required:
                    out.append(_finding("missing_param", n.id, key, f"node {n.id!r} ({n.type}): parameter "
                                        f"{key!r} is required ({p.doc})"))
                continue
            value = n.params[key]
            if value is None and not p.required:
                continue
            problem = check_param(p, value)
            if not problem and p.kind == "path":
                escape = path_escape(value)
                if escape:
                    out.append(_finding("path_escape", n.id, key, f"node {n.id!r} ({n.type}): parameter "
                                        f"{key!r}: {escape}"))
                    continue
            if problem:
                out.append(_finding("bad_param", n.id, key, f"node {n.id!r} ({n.type}): parameter {key!r}: "
                                    f"{problem}"))


def _edges(doc: GraphDoc, out: list) -> None:
    nodes = {n.id: n for n in doc.nodes}
    fed: dict = {}
    for e in doc.edges:
        ends = []
        for node_id, port, side in ((e.src, e.src_port, "outputs"), (e.dst, e.dst_port, "inputs")):
            node = nodes.get(node_id)
            if node is None:
                out.append(_finding("unknown_node", node_id, port, f"edge {e.text}: no node {node_id!r}"))
                ends.append(None)
                continue
            spec = NODE_TYPES.get(node.type)
            if spec is None:
                ends.append(None)   # reported as unknown_type
                continue
            ports = getattr(spec, side)
            if port not in ports:
                other = spec.inputs if side == "outputs" else spec.outputs
                kind = "an input" if side == "outputs" else "an output"
                extra = f" ({port!r} is {kind})" if port in other else ""
                names = ", ".join(ports) or "none"
                out.append(_finding("unknown_port", node_id, port, f"edge {e.text}: node {node_id!r} "
                                    f"({node.type}) has no {side[:-1]} port {port!r}{extra} "
                                    f"({side}: {names})"))
                ends.append(None)
                continue
            ends.append(ports[port])
        src_type, dst_type = ends
        if dst_type is not None:
            fed.setdefault((e.dst, e.dst_port), []).append(e)
        if src_type is not None and dst_type is not None and dst_type != "Any" and src_type != dst_type:
            out.append(_finding("type_mismatch", e.dst, e.dst_port, f"edge {e.text}: {e.src}.{e.src_port} is "
                                f"{src_type} but {e.dst}.{e.dst_port} takes {dst_type}"))
    for (node_id, port), edges in fed.items():
        if len(edges) > 1:
            out.append(_finding("multiple_edges", node_id, port, f"input {node_id}.{port} has {len(edges)} "
                                f"edges ({', '.join(e.text for e in edges)}); an input takes one"))
    for n in doc.nodes:
        spec = NODE_TYPES.get(n.type)
        if spec is None:
            continue
        for port in spec.required_inputs(n.params):
            if (n.id, port) not in fed:
                out.append(_finding("dangling_input", n.id, port, f"node {n.id!r} ({n.type}): input {port!r} "
                                    f"({spec.inputs[port]}) is not connected"))


def _order(doc: GraphDoc):
    """(topological order with ties broken by id, the nodes left on or after a cycle)."""
    ids = sorted({n.id for n in doc.nodes})
    succ = {i: set() for i in ids}
    indeg = dict.fromkeys(ids, 0)
    for e in doc.edges:
        if e.src in succ and e.dst in succ and e.dst not in succ[e.src]:
            succ[e.src].add(e.dst)
            indeg[e.dst] += 1
    ready = [i for i in ids if indeg[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in sorted(succ[i]):
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready, j)
    left = [i for i in ids if i not in set(order)]
    return order, left, succ


def _cycle(left, succ) -> list[str]:
    """One cycle among the nodes ``left`` after Kahn's algorithm, starting at its smallest id."""
    rest = set(left)
    start = min(rest)
    path, seen = [start], {start: 0}
    while True:
        nxt = min(j for j in succ[path[-1]] if j in rest)
        if nxt in seen:
            cyc = path[seen[nxt]:]
            k = cyc.index(min(cyc))
            return cyc[k:] + cyc[:k]
        seen[nxt] = len(path)
        path.append(nxt)


def validate(doc) -> list[dict]:
    """Every problem of ``doc`` (a GraphDoc, dict or path) as findings; [] when it can run."""
    doc = load_graph(doc)
    out: list = []
    counts: dict = {}
    for n in doc.nodes:
        counts[n.id] = counts.get(n.id, 0) + 1
    for node_id, k in counts.items():
        if k > 1:
            out.append(_finding("duplicate_id", node_id, None, f"{k} nodes have the id {node_id!r}"))
    for n in doc.nodes:
        if n.type not in NODE_TYPES:
            import difflib

            lower = {t.lower(): t for t in NODE_TYPES}
            matches = difflib.get_close_matches(n.type.lower(), list(lower), n=2, cutoff=0.6)
            close = [lower[c] for c in matches]
            hint = f"; did you mean {' or '.join(close)}?" if close else f" (types: {', '.join(NODE_TYPES)})"
            out.append(_finding("unknown_type", n.id, None, f"node {n.id!r}: unknown type {n.type!r}{hint}"))
    _params(doc, out)
    _edges(doc, out)
    _, left, succ = _order(doc)
    if left:
        cyc = _cycle(left, succ)
        links = [next(e for e in doc.edges if e.src == a and e.dst == b)
                 for a, b in zip(cyc, cyc[1:] + cyc[:1], strict=True)]
        out.append(_finding("cycle", cyc[0], links[-1].dst_port, f"the edges form a cycle: "
                            f"{' -> '.join(cyc + cyc[:1])} ({', '.join(e.text for e in links)})"))
    return out


def topological_order(doc: GraphDoc) -> list[str]:
    """Node ids in run order (sources first; ties broken by id); a cycle raises GraphError."""
    order, left, succ = _order(doc)
    if left:
        cyc = _cycle(left, succ)
        raise GraphError(f"the edges form a cycle: {' -> '.join(cyc + cyc[:1])}", node=cyc[0])
    return order
