"""The deterministic executor: validate, order the nodes topologically (ties broken by id), run each
node's engine call once, pass port values along the edges.

No clock, no randomness of its own: seeded nodes take their seed from their parameters, so a
graph gives the same outputs on every run and equals the direct calls of the same functions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.graph.ir import GraphDoc, GraphError, load_graph
from caliper_jax.graph.nodes import NODE_TYPES, REQUIRED, RunContext
from caliper_jax.graph.validate import topological_order, validate
from caliper_jax.limits import BudgetError, PathEscapeError

LIST_LIMIT = 64   # arrays up to this many elements are listed in to_dict(); larger ones summarised


@dataclass
class GraphResult:
    """``outputs`` {node id: {port: value}} (NumPy arrays, dicts, floats, engine objects for Model
    and Trajectory), ``order`` the node ids in run order, ``doc`` the graph that ran."""

    outputs: dict
    order: list
    doc: GraphDoc

    def to_dict(self, list_limit: int = LIST_LIMIT) -> dict:
        """JSON-able: every output summarised (small arrays listed, large ones by shape and range)."""
        types = {n.id: NODE_TYPES[n.type].outputs for n in self.doc.nodes}
        return {"graph": self.doc.name, "order": list(self.order),
                "outputs": {nid: {port: summarize(v, types[nid].get(port, "Any"), list_limit)
                                  for port, v in ports.items()} for nid, ports in self.outputs.items()}}


def _float(x):
    x = float(x)
    return x if math.isfinite(x) else None


def summarize(value, port_type: str = "Any", list_limit: int = LIST_LIMIT):
    """A JSON-able view of one port value."""
    if port_type == "Model" or type(value).__name__ == "Model":
        return {"type": "Model", "name": value.name, "nq": int(value.nq), "nv": int(value.nv),
                "frames": len(value.frame_names)}
    if hasattr(value, "duration") and hasattr(value, "sample"):
        ndof = getattr(value, "ndof", None)
        if ndof is None and hasattr(value, "q_start"):
            ndof = np.shape(value.q_start)[-1]
        return {"type": type(value).__name__, "duration": _float(np.asarray(value.duration)),
                "ndof": None if ndof is None else int(ndof)}
    if isinstance(value, dict):
        return {str(k): summarize(v, "Any", list_limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [summarize(v, "Any", list_limit) for v in value]
    if isinstance(value, (np.ndarray, np.generic)) or type(value).__module__.startswith("jax"):
        arr = np.asarray(value)
        if arr.ndim == 0:
            return summarize(arr.item(), port_type, list_limit)
        if arr.size <= list_limit:
            return summarize(arr.tolist(), port_type, list_limit)
        finite = arr[np.isfinite(arr)] if arr.dtype.kind in "fc" else arr
        return {"shape": list(arr.shape), "dtype": str(arr.dtype),
                "min": _float(finite.min()) if finite.size else None,
                "max": _float(finite.max()) if finite.size else None}
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return _float(value)
    return str(value)


def _params(node, spec) -> dict:
    out = {k: (None if p.default is REQUIRED else p.default) for k, p in spec.params.items()}
    out.update({k: v for k, v in node.params.items() if v is not None})
    return out


def run_graph(doc, *, out_dir=None) -> GraphResult:
    """Validate and run ``doc`` (GraphDoc, dict, path or shipped example name).

    ``out_dir``: where nodes that write (Record) put relative paths, and LoadDataset reads them
    (default: the current directory). An invalid graph raises :class:`GraphError` with
    ``.findings``; a node that fails raises GraphError naming it (``.node``)."""
    doc = load_graph(doc)
    findings = validate(doc)
    if findings:
        first = findings[0]
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        raise GraphError(f"graph {doc.name or '?'} is not valid: {first['message']}{more}",
                         node=first["node"], port=first["port"], findings=findings)
    ctx = RunContext(Path(out_dir) if out_dir is not None else Path.cwd())
    nodes = {n.id: n for n in doc.nodes}
    feeds: dict = {}
    for e in doc.edges:
        feeds.setdefault(e.dst, []).append(e)
    order = topological_order(doc)
    outputs: dict = {}
    for node_id in order:
        node = nodes[node_id]
        spec = NODE_TYPES[node.type]
        inputs = {e.dst_port: outputs[e.src][e.src_port] for e in feeds.get(node_id, [])}
        try:
            produced = spec.run(inputs, _params(node, spec), ctx)
        except GraphError:
            raise
        except (PathEscapeError, BudgetError) as exc:  # refused as bad input (exit 2), not a node failure
            raise type(exc)(f"node {node_id!r} ({node.type}): {exc}") from None
        except (CaliperError, ValueError, OSError, KeyError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            raise GraphError(f"node {node_id!r} ({node.type}): {msg}", node=node_id) from exc
        except Exception as exc:   # not bad input: a failure inside the engine; still name the node
            first = (str(exc).strip().splitlines() or [""])[0]
            raise GraphError(f"node {node_id!r} ({node.type}): internal error {type(exc).__name__}: "
                             f"{first}", node=node_id) from exc
        outputs[node_id] = {port: produced[port] for port in spec.outputs if port in produced}
    return GraphResult(outputs, order, doc)
