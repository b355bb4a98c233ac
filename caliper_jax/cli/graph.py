"""``caliper graph``: check and run dataflow graphs (``*.caliper-graph.json``).

* ``caliper graph check FILE [--json]``: validate; exit 0 when valid, 1 with the findings (each
  naming the node and port) when not;
* ``caliper graph run FILE [--json] [--out DIR]``: validate and run; the outputs of every node,
  summarised; nodes that write (Record) put relative paths under ``DIR`` (default: the current
  directory), and ``DIR/result.json`` holds the report. Exit 0 done; 1 invalid graph or a node
  that failed (its report names it);
* ``caliper graph list [--json]``: the example graphs shipped with the package (FILE may be one
  of their names) and the node types.

A file that cannot be read or is not a graph document is exit 2 with one line naming the field.
Runs are float64 (like every other command).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from caliper_jax.cli.common import emit, enable_x64, output_dir
from caliper_jax.errors import CaliperError


def _findings_text(path, findings) -> str:
    lines = [f"{path}: {len(findings)} problem(s)"]
    for f in findings:
        where = f["node"] + (f".{f['port']}" if f.get("port") else "") if f.get("node") else "-"
        lines.append(f"  [{f['code']}] {where}: {f['message']}")
    return "\n".join(lines)


def cmd_check(args) -> int:
    from caliper_jax.graph import load_graph, topological_order, validate

    doc = load_graph(args.file)
    findings = validate(doc)
    report = {"file": str(args.file), "name": doc.name, "valid": not findings, "nodes": len(doc.nodes),
              "edges": len(doc.edges), "findings": findings,
              "order": [] if findings else topological_order(doc)}
    if findings:
        emit(args, report, _findings_text(args.file, findings))
        return 1
    emit(args, report, f"{args.file}: valid ({len(doc.nodes)} nodes, {len(doc.edges)} edges); run order: "
                       f"{' '.join(report['order'])}")
    return 0


def _value_text(v, width: int = 100) -> str:
    text = json.dumps(v, allow_nan=True)
    return text if len(text) <= width else text[: width - 3] + "..."


def cmd_run(args) -> int:
    from caliper_jax.graph import GraphError, load_graph, run_graph, validate

    doc = load_graph(args.file)
    findings = validate(doc)
    escape = next((f for f in findings if f["code"] == "path_escape"), None)
    if escape is not None:                  # security: refused in one line, nothing is run
        raise CaliperError(f"{args.file}: {escape['message']}")
    if findings:
        emit(args, {"file": str(args.file), "name": doc.name, "ok": False, "findings": findings},
             _findings_text(args.file, findings))
        return 1
    if args.out:
        output_dir(args.out, "--out", empty=False)   # writable: checked before any node runs
    enable_x64()
    out_dir = Path(args.out) if args.out else Path.cwd()
    if args.out:
        out_dir.mkdir(parents=True, exist_ok=True)
    try:
        result = run_graph(doc, out_dir=out_dir)
    except GraphError as exc:
        report = {"file": str(args.file), "name": doc.name, "ok": False, "failed_node": exc.node,
                  "message": str(exc)}
        emit(args, report, f"{args.file}: FAILED at node {exc.node!r}: {exc}")
        return 1
    report = {"file": str(args.file), "ok": True, **result.to_dict()}
    if args.out:
        (out_dir / "result.json").write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
        report["result_file"] = str(out_dir / "result.json")
    lines = [f"{args.file}: ran {len(result.order)} nodes ({' '.join(result.order)})"]
    for node_id in result.order:
        for port, v in report["outputs"][node_id].items():
            lines.append(f"  {node_id}.{port} = {_value_text(v)}")
    if args.out:
        lines.append(f"  report: {report['result_file']}")
    emit(args, report, "\n".join(lines))
    return 0


def cmd_list(args) -> int:
    from caliper_jax.graph import describe_all, examples

    shipped = {name: str(p) for name, p in examples().items()}
    nodes = describe_all()
    lines = ["example graphs (caliper graph run NAME):"] + [f"  {n:<20} {p}" for n, p in shipped.items()]
    lines.append("node types:")
    for name, d in nodes.items():
        ins = ", ".join(f"{k}:{t}" for k, t in d["inputs"].items()) or "-"
        outs = ", ".join(f"{k}:{t}" for k, t in d["outputs"].items())
        lines.append(f"  {name:<14} ({d['category']}) {ins} -> {outs}")
    emit(args, {"examples": shipped, "node_types": nodes}, "\n".join(lines))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("graph", help="check and run dataflow graphs (*.caliper-graph.json)",
                       description=__doc__.split("\n\n")[1] if __doc__ else None,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = p.add_subparsers(dest="graph_command", metavar="VERB", parser_class=type(p))
    verbs.required = True
    c = verbs.add_parser("check", help="validate a graph (exit 1 with the findings)")
    c.add_argument("file", metavar="FILE", help="a .caliper-graph.json file or a shipped example's name")
    c.add_argument("--json", action="store_true", help="machine-readable report")
    c.set_defaults(func=cmd_check)
    r = verbs.add_parser("run", help="validate and run a graph")
    r.add_argument("file", metavar="FILE", help="a .caliper-graph.json file or a shipped example's name")
    r.add_argument("--json", action="store_true", help="machine-readable report")
    r.add_argument("--out", metavar="DIR", help="directory for files the graph writes and result.json")
    r.set_defaults(func=cmd_run)
    n = verbs.add_parser("list", help="shipped example graphs and node types")
    n.add_argument("--json", action="store_true", help="machine-readable report")
    n.set_defaults(func=cmd_list)
