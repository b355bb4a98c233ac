"""Graph panel: load a GraphDoc (a shipped example or a file), show it as nodes and edges (an SVG
laid out from each node's ``ui`` position), validate it, run it from the page and show the
outputs. Engine calls only: ``caliper_jax.graph`` (load_graph, validate, run_graph).
"""

from __future__ import annotations

import html
import json
import tempfile

from caliper_jax.errors import CaliperError

NODE_W, NODE_H = 150, 44


def _graph_api():
    try:
        import caliper_jax.graph as g
    except ImportError as exc:  # the graph package is optional for the studio
        raise CaliperError(f"the dataflow graph package is not available ({exc})") from None
    return g


def graph_svg(doc) -> str:
    """An SVG of ``doc``: one box per node (id and type) at its ``ui`` x/y (a grid when absent),
    one line per edge labelled with its ports."""
    pos = {}
    for i, n in enumerate(doc.nodes):
        ui = n.ui or {}
        pos[n.id] = (float(ui.get("x", 220 * (i % 4))), float(ui.get("y", 120 * (i // 4))))
    xs = [p[0] for p in pos.values()] or [0.0]
    ys = [p[1] for p in pos.values()] or [0.0]
    x0, y0 = min(xs) - 10, min(ys) - 10
    w, h = max(xs) - x0 + NODE_W + 20, max(ys) - y0 + NODE_H + 20
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="{x0} {y0} {w} {h}" width="100%" '
        f'style="font: 11px sans-serif; background: #fafafa">'
    ]
    for e in doc.edges:
        if e.src in pos and e.dst in pos:
            (ax, ay), (bx, by) = pos[e.src], pos[e.dst]
            ax, ay, bx, by = ax + NODE_W, ay + NODE_H / 2, bx, by + NODE_H / 2
            parts.append(f'<line x1="{ax}" y1="{ay}" x2="{bx}" y2="{by}" stroke="#888" stroke-width="1.5"/>')
            parts.append(
                f'<text x="{(ax + bx) / 2}" y="{(ay + by) / 2 - 3}" fill="#555">'
                f"{html.escape(e.src_port)}&#8594;{html.escape(e.dst_port)}</text>"
            )
    for n in doc.nodes:
        x, y = pos[n.id]
        parts.append(
            f'<g class="graph-node" data-node="{html.escape(n.id)}"><rect x="{x}" y="{y}" width="{NODE_W}" '
            f'height="{NODE_H}" rx="6" fill="#e8f0fe" stroke="#3367d6"/>'
            f'<text x="{x + 8}" y="{y + 18}" font-weight="bold">{html.escape(n.id)}</text>'
            f'<text x="{x + 8}" y="{y + 34}" fill="#333">{html.escape(n.type)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


class GraphPanel:
    """The Graph tab. Python API: ``load(source)``, ``check()``, ``run()``."""

    def __init__(self, app, tab, graph=None):
        self.app, self.tab = app, tab
        self.doc = None
        self.findings = None
        self.result = None
        self.error = None
        gui = app.server.gui
        try:
            names = sorted(_graph_api().examples())
        except CaliperError as exc:
            names, self.error = [], str(exc)
        with tab:
            self.example = gui.add_dropdown("Example graph", tuple(names) or ("-",))
            self.file = gui.add_text("Graph file (optional)", "" if graph is None else str(graph))
            gui.add_button("Load graph").on_click(
                self._gui(lambda: self.load(self.file.value.strip() or self.example.value))
            )
            gui.add_button("Run graph").on_click(self._gui(self.run))
            self.status = gui.add_markdown(self.error or "No graph loaded.")
            self.picture = gui.add_html("")
            self.outputs = gui.add_markdown("")
        if names or graph is not None:
            try:
                self.load(graph if graph is not None else names[0])
            except CaliperError as exc:
                self.status.content = f"error: {exc}"

    def _gui(self, fn):
        def cb(_event):
            try:
                fn()
            except CaliperError as exc:
                self.error = str(exc)
                self.status.content = f"error: {exc}"

        return cb

    def load(self, source) -> dict:
        """Load and validate a graph (example name, file path or dict); draw it."""
        g = _graph_api()
        self.doc = g.load_graph(source)
        self.result, self.error = None, None
        self.findings = g.validate(self.doc)
        self.picture.content = graph_svg(self.doc)
        self.outputs.content = ""
        self.status.content = (
            f"**{self.doc.name or 'graph'}**: {len(self.doc.nodes)} nodes, {len(self.doc.edges)} "
            f"edges, "
            + (
                "valid"
                if not self.findings
                else f"{len(self.findings)} problem(s): {self.findings[0]['message']}"
            )
        )
        return self.state()

    def run(self) -> dict:
        """Run the loaded graph (written outputs go to a fresh temporary folder); show the outputs."""
        g = _graph_api()
        if self.doc is None:
            self.load(self.file.value.strip() or self.example.value)
        out_dir = tempfile.mkdtemp(prefix="caliper-studio-graph-")
        result = g.run_graph(self.doc, out_dir=out_dir)
        self.result = result.to_dict()
        self.outputs.content = (
            "**Outputs**\n\n```json\n" + json.dumps(self.result["outputs"], indent=1)[:6000] + "\n```"
        )
        self.status.content = f"**{self.doc.name or 'graph'}** ran: " + " -> ".join(self.result["order"])
        return self.result

    def state(self) -> dict:
        return {
            "loaded": self.doc is not None,
            "name": None if self.doc is None else self.doc.name,
            "nodes": [] if self.doc is None else [n.id for n in self.doc.nodes],
            "edges": [] if self.doc is None else [e.text for e in self.doc.edges],
            "findings": self.findings,
            "result": self.result,
            "error": self.error,
        }
