"""The dataflow graph (GraphDoc): a JSON document of typed nodes and edges, its validation and a
deterministic executor whose compute nodes call engine functions only.

    from caliper_jax.graph import load_graph, validate, run_graph
    doc = load_graph("ik_movel")          # a path, a dict, or a shipped example's name
    assert validate(doc) == []            # findings {"code", "node", "port", "message"}
    result = run_graph(doc)               # .outputs {node id: {port: value}}, .order, .to_dict()

See docs/graph.md for the schema, the node types and the CLI (``caliper graph check|run``).
"""
from caliper_jax.graph.execute import GraphResult, run_graph, summarize
from caliper_jax.graph.ir import (
    FORMAT,
    SUFFIX,
    VERSION,
    Edge,
    GraphDoc,
    GraphError,
    Node,
    dumps,
    examples,
    from_dict,
    load_graph,
    save_graph,
    to_dict,
)
from caliper_jax.graph.nodes import NODE_TYPES, PORT_TYPES, NodeSpec, ParamSpec, describe_all
from caliper_jax.graph.validate import topological_order, validate

__all__ = [
    "FORMAT", "SUFFIX", "VERSION", "Edge", "GraphDoc", "GraphError", "GraphResult", "NODE_TYPES", "Node",
    "NodeSpec", "PORT_TYPES", "ParamSpec", "describe_all", "dumps", "examples", "from_dict", "load_graph",
    "run_graph", "save_graph", "summarize", "to_dict", "topological_order", "validate",
]
