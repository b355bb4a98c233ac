"""The persisted schema of a dataflow graph (``*.caliper-graph.json``) and its (de)serialisation.

A document::

    {"format": "caliper-graph", "version": 1, "name": "ik_movel",
     "nodes": [{"id": "robot", "type": "LoadRobot", "params": {"robot": "pendulum2"}}, ...],
     "edges": [{"from": "robot.model", "to": "fk.model"}, ...]}

Each node may also carry ``"ui"`` (any JSON object, e.g. its position in the Studio editor), kept
verbatim. An edge joins an output port ``node.port`` to an input port ``node.port``. Loading checks
the *shape* of the document only (fields, their JSON types); whether node types, ports, types and
parameters make sense is :func:`caliper_jax.graph.validate`'s job. ``to_dict(load(d)) == d`` for
every document written by :func:`to_dict` (and :func:`dumps` of a loaded document is stable).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from caliper_jax.errors import CaliperError

FORMAT = "caliper-graph"
VERSION = 1
SUFFIX = ".caliper-graph.json"
EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"
_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class GraphError(CaliperError):
    """A graph that cannot be loaded, validated or run; ``node`` / ``port`` name where (or None)."""

    def __init__(self, message: str, node: str | None = None, port: str | None = None, findings=()):
        super().__init__(message)
        self.node = node
        self.port = port
        self.findings = list(findings)


@dataclass(frozen=True)
class Node:
    """One node: ``id`` (unique, ``[A-Za-z_][A-Za-z0-9_-]*``), ``type`` (a NODE_TYPES key), ``params``."""

    id: str
    type: str
    params: dict = field(default_factory=dict)
    ui: dict | None = None


@dataclass(frozen=True)
class Edge:
    """Output ``src.src_port`` feeds input ``dst.dst_port``."""

    src: str
    src_port: str
    dst: str
    dst_port: str

    @property
    def text(self) -> str:
        return f"{self.src}.{self.src_port} -> {self.dst}.{self.dst_port}"


@dataclass(frozen=True)
class GraphDoc:
    """A whole graph: ``nodes`` and ``edges`` in document order, a ``name`` and the format version."""

    nodes: tuple
    edges: tuple
    name: str = ""
    version: int = VERSION

    def node(self, node_id: str) -> Node | None:
        return next((n for n in self.nodes if n.id == node_id), None)

    def to_dict(self) -> dict:
        return to_dict(self)


def _endpoint(text, where: str) -> tuple[str, str]:
    if not isinstance(text, str) or text.count(".") != 1 or not all(text.split(".")):
        raise GraphError(f"{where}: expected 'node.port', got {text!r}")
    node, port = text.split(".")
    return node, port


def _fail(where: str, expected: str, got) -> GraphError:
    return GraphError(f"{where}: expected {expected}, got {type(got).__name__} {got!r}"[:300])


def from_dict(data, source: str = "graph") -> GraphDoc:
    """A GraphDoc from parsed JSON; a malformed document raises :class:`GraphError` naming the field."""
    if not isinstance(data, dict):
        raise _fail(source, "a JSON object", data)
    unknown = sorted(set(data) - {"format", "version", "name", "nodes", "edges"})
    if unknown:
        raise GraphError(f"{source}: unknown top-level field(s) {', '.join(unknown)} "
                         "(expected format, version, name, nodes, edges)")
    if data.get("format", FORMAT) != FORMAT:
        raise GraphError(f"{source}: format: expected {FORMAT!r}, got {data.get('format')!r}")
    version = data.get("version", VERSION)
    if not isinstance(version, int) or isinstance(version, bool) or version != VERSION:
        raise GraphError(f"{source}: version: this caliper reads version {VERSION}, got {version!r}")
    name = data.get("name", "")
    if not isinstance(name, str):
        raise _fail(f"{source}: name", "a string", name)
    raw_nodes, raw_edges = data.get("nodes"), data.get("edges", [])
    if not isinstance(raw_nodes, list):
        raise _fail(f"{source}: nodes", "a list of node objects", raw_nodes)
    if not isinstance(raw_edges, list):
        raise _fail(f"{source}: edges", "a list of edge objects", raw_edges)
    from caliper_jax import limits

    try:
        limits.check("nodes", len(raw_nodes), f"{source}: nodes")
        limits.check("nodes", len(raw_edges), f"{source}: edges")
    except CaliperError as exc:
        raise GraphError(str(exc)) from None
    nodes = []
    for i, n in enumerate(raw_nodes):
        where = f"{source}: nodes[{i}]"
        if not isinstance(n, dict):
            raise _fail(where, "an object with id, type, params", n)
        extra = sorted(set(n) - {"id", "type", "params", "ui"})
        if extra:
            raise GraphError(f"{where}: unknown field(s) {', '.join(extra)} (expected id, type, params, ui)")
        for key in ("id", "type"):
            if not isinstance(n.get(key), str):
                raise _fail(f"{where}.{key}", "a string", n.get(key))
        if not _ID.match(n["id"]):
            raise GraphError(f"{where}.id: {n['id']!r} is not a valid id (letters, digits, _ and -; "
                             "no dots, not starting with a digit)", node=n["id"])
        params = n.get("params", {})
        if not isinstance(params, dict):
            raise _fail(f"{where}.params", "an object", params)
        ui = n.get("ui")
        if ui is not None and not isinstance(ui, dict):
            raise _fail(f"{where}.ui", "an object", ui)
        nodes.append(Node(n["id"], n["type"], dict(params), None if ui is None else dict(ui)))
    edges = []
    for i, e in enumerate(raw_edges):
        where = f"{source}: edges[{i}]"
        if not isinstance(e, dict) or set(e) != {"from", "to"}:
            raise _fail(where, "an object {\"from\": \"node.port\", \"to\": \"node.port\"}", e)
        src, src_port = _endpoint(e["from"], f"{where}.from")
        dst, dst_port = _endpoint(e["to"], f"{where}.to")
        edges.append(Edge(src, src_port, dst, dst_port))
    return GraphDoc(tuple(nodes), tuple(edges), name, version)


def to_dict(doc: GraphDoc) -> dict:
    """The JSON object of ``doc`` (the inverse of :func:`from_dict`)."""
    nodes = []
    for n in doc.nodes:
        item = {"id": n.id, "type": n.type, "params": dict(n.params)}
        if n.ui is not None:
            item["ui"] = dict(n.ui)
        nodes.append(item)
    return {"format": FORMAT, "version": doc.version, "name": doc.name, "nodes": nodes,
            "edges": [{"from": f"{e.src}.{e.src_port}", "to": f"{e.dst}.{e.dst_port}"} for e in doc.edges]}


def dumps(doc: GraphDoc) -> str:
    """Canonical JSON text (indent 2, ASCII, a final newline)."""
    return json.dumps(to_dict(doc), indent=2, ensure_ascii=True, allow_nan=False) + "\n"


def save_graph(doc: GraphDoc, path) -> Path:
    path = Path(path)
    path.write_text(dumps(doc))
    return path


def examples() -> dict[str, Path]:
    """The graphs shipped with the package: {name: path}."""
    return {p.name[: -len(SUFFIX)]: p for p in sorted(EXAMPLES_DIR.glob(f"*{SUFFIX}"))}


def resolve_path(ref) -> Path:
    """A file path, or the name of a shipped example (``caliper graph run ik_movel``)."""
    path = Path(ref)
    if path.is_file():
        return path
    shipped = examples()
    if str(ref) in shipped:
        return shipped[str(ref)]
    if path.exists():
        raise GraphError(f"{path}: is not a file")
    import difflib

    word = str(ref)
    for suffix in (SUFFIX, ".json"):
        word = word[: -len(suffix)] if word.endswith(suffix) else word
    lower = {name.lower(): name for name in shipped}
    close = difflib.get_close_matches(word.lower(), list(lower), n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(lower[c] for c in close)}? " if close else ""
    raise GraphError(f"{ref}: no such file, and not a shipped example graph ({hint}examples: "
                     f"{', '.join(shipped) or 'none'})")


def load_graph(source) -> GraphDoc:
    """A GraphDoc from a dict, a GraphDoc, a path, or a shipped example's name.

    Unreadable files, bad JSON and malformed documents raise :class:`GraphError` naming the file
    and the field."""
    if isinstance(source, GraphDoc):
        return source
    if isinstance(source, dict):
        return from_dict(source)
    if not isinstance(source, (str, Path)):
        raise GraphError("load_graph: expected a path, an example name or a dict, got "
                         f"{type(source).__name__}")
    path = resolve_path(source)
    from caliper_jax import limits

    try:
        limits.check_file(str(path), "graph file")
    except CaliperError as exc:
        raise GraphError(str(exc)) from None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphError(f"{path}: cannot read: {exc}") from None
    try:
        limits.check_depth(text, str(path))
    except CaliperError as exc:
        raise GraphError(str(exc)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise GraphError(f"{path}: not valid JSON: {exc.msg} ({where})") from None
    return from_dict(data, str(path))
