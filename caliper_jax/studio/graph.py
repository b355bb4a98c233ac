"""Graph panel: load a GraphDoc (a shipped example or a file), draw it as a readable diagram
(nodes in run-order layers top to bottom, >= 12 px text at "fit", a zoom slider), validate it, run
it from the page and show the outputs as one table per node; each trajectory output is plotted
(q against t) and its tool path drawn in the 3-D view. Engine calls only: ``caliper_jax.graph``
(load_graph, validate, run_graph), ``caliper_jax.motion.trajectory.sample_at`` and FK.
"""

from __future__ import annotations

import html
import tempfile

import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.ik.api import default_frame

NODE_W, NODE_H = 140, 46  # viewBox units; a two-node layer is about the panel's width (~320 px)
GAP_X, GAP_Y, PAD = 16, 34, 10
MAX_COLS = 2  # nodes per row
PALETTE = ("#d62", "#26c", "#2a6", "#a2c", "#c92", "#299", "#777", "#c24")
FONT = 13  # viewBox units: >= 12 px on screen at "fit" (100 %) for layers of up to two nodes
PLOT_ROWS = 100  # samples of a trajectory output for its plot and its 3-D path


def _graph_api():
    try:
        import caliper_jax.graph as g
    except ImportError as exc:  # the graph package is optional for the studio
        raise CaliperError(f"the dataflow graph package is not available ({exc})") from None
    return g


def _layers(doc) -> dict:
    """Node id -> (row, slot): nodes grouped by their longest edge path from a source (run
    order), each group on rows of at most ``MAX_COLS`` nodes."""
    from caliper_jax.graph.validate import topological_order

    try:
        order = topological_order(doc)
    except Exception:  # a cycle: validation reports it; draw in file order
        order = [n.id for n in doc.nodes]
    depth = {n: 0 for n in order}
    for n in order:
        for e in doc.edges:
            if e.src == n and e.dst in depth:
                depth[e.dst] = max(depth[e.dst], depth[n] + 1)
    out, row = {}, 0
    for layer in sorted(set(depth.values())):
        members = [n for n in order if depth[n] == layer]
        for k, n in enumerate(members):  # a wide layer wraps onto further rows
            out[n] = (row + k // MAX_COLS, k % MAX_COLS)
        row += (len(members) + MAX_COLS - 1) // MAX_COLS
    return out


def graph_svg(doc, zoom: float = 100.0) -> str:
    """An SVG of ``doc`` in layers top to bottom (run order): one box per node (id and type, text
    at ``FONT`` units), one arrow per edge labelled with its ports. It fits the panel's width at
    ``zoom`` 100 (%); larger zooms scroll."""
    place = _layers(doc)
    per = {}
    for layer, slot in place.values():
        per[layer] = max(per.get(layer, 0), slot + 1)
    cols = max(per.values(), default=1)
    rows = max(per, default=0) + 1
    w = 2 * PAD + cols * NODE_W + (cols - 1) * GAP_X
    h = 2 * PAD + rows * NODE_H + (rows - 1) * GAP_Y
    pos = {}
    for nid, (layer, slot) in place.items():
        offset = (w - 2 * PAD - (per[layer] * NODE_W + (per[layer] - 1) * GAP_X)) / 2
        pos[nid] = (PAD + offset + slot * (NODE_W + GAP_X), PAD + layer * (NODE_H + GAP_Y))
    parts = [
        f'<div style="overflow:auto; max-height:70vh"><svg xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {w:g} {h:g}" width="{float(zoom):g}%" role="img" aria-label="graph diagram" '
        f'style="font: {FONT}px sans-serif; background: #fafafa">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#777"/></marker></defs>'
    ]
    for e in doc.edges:
        if e.src in pos and e.dst in pos:
            (ax, ay), (bx, by) = pos[e.src], pos[e.dst]
            ax, ay, bx, by = ax + NODE_W / 2, ay + NODE_H, bx + NODE_W / 2, by
            parts.append(f'<line x1="{ax:g}" y1="{ay:g}" x2="{bx:g}" y2="{by:g}" stroke="#777" '
                         'stroke-width="1.5" marker-end="url(#arrow)"/>')
            label = f"{html.escape(e.src_port)}&#8594;{html.escape(e.dst_port)}"
            parts.append(f'<text x="{(ax + bx) / 2 + 4:g}" y="{(ay + by) / 2 + 4:g}" fill="#555" '
                         f'font-size="{FONT - 1}">{label}</text>')
    for n in doc.nodes:
        x, y = pos[n.id]
        parts.append(
            f'<g class="graph-node" data-node="{html.escape(n.id)}"><rect x="{x:g}" y="{y:g}" '
            f'width="{NODE_W}" height="{NODE_H}" rx="6" fill="#e8f0fe" stroke="#3367d6"/>'
            f'<text x="{x + 8:g}" y="{y + 19:g}" font-weight="bold">{html.escape(n.id)}</text>'
            f'<text x="{x + 8:g}" y="{y + 37:g}" fill="#333">{html.escape(n.type)}</text></g>'
        )
    parts.append("</svg></div>")
    return "".join(parts)


def _cell(v) -> str:
    """One summarised output value as a short table cell."""
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, dict) and "shape" in v:
        return f"array {v['shape']} {v['dtype']}, min {v['min']:.4g}, max {v['max']:.4g}" if (
            v.get("min") is not None and v.get("max") is not None) else f"array {v['shape']}"
    if isinstance(v, list):
        flat = [_cell(x) for x in v[:8]]
        return "[" + ", ".join(flat) + (", ..." if len(v) > 8 else "") + "]"
    text = str(v).replace("|", "/").replace("\n", " ")
    return text if len(text) <= 90 else text[:87] + "..."


def outputs_markdown(summary: dict) -> str:
    """The run's outputs (``GraphResult.to_dict()['outputs']``) as one table per node: port (or
    port.key for dict outputs) and value."""
    blocks = []
    for nid, ports in summary.items():
        rows = ["| port | value |", "|---|---|"]
        for port, v in ports.items():
            if isinstance(v, dict) and "shape" not in v:
                rows += [f"| {port}.{k} | {_cell(x)} |" for k, x in list(v.items())[:12]]
            else:
                rows.append(f"| {port} | {_cell(v)} |")
        blocks.append(f"**{nid}**\n\n" + "\n".join(rows))
    return "\n\n".join(blocks)


def trajectories(result) -> list:
    """(node id, port, trajectory) for every trajectory output of a run (``GraphResult``)."""
    return [(nid, port, v) for nid, ports in result.outputs.items() for port, v in ports.items()
            if hasattr(v, "duration") and hasattr(v, "sample")]


def graph_model(result, fallback):
    """The robot model the graph loaded (its first Model output), else ``fallback``."""
    for ports in result.outputs.values():
        for v in ports.values():
            if type(v).__name__ == "Model":
                return v
    return fallback


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
            self.zoom = gui.add_slider("Diagram zoom (%)", min=50, max=300, step=10, initial_value=100)
            self.zoom.on_update(lambda _e: self._redraw())
            self.picture = gui.add_html("")
            self.outputs = gui.add_markdown("")
        self.plots = []
        self.paths = []
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
        self._redraw()
        self.outputs.content = ""
        self._clear_results()
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
        self.outputs.content = "**Outputs**\n\n" + outputs_markdown(self.result["outputs"])
        self._show_trajectories(result)
        self.status.content = f"**{self.doc.name or 'graph'}** ran: " + " -> ".join(self.result["order"])
        return self.result

    def _redraw(self) -> None:
        if self.doc is not None:
            self.picture.content = graph_svg(self.doc, float(self.zoom.value))

    def _clear_results(self) -> None:
        for h in self.plots + self.paths:
            h.remove()
        self.plots, self.paths = [], []
        self.drawn_paths = {}

    def _show_trajectories(self, result) -> None:
        """Each trajectory output: a plot of q(t) in the panel and its tool path in the 3-D view
        (FK of the graph's robot, through the same call as the Motion tab's ghost path)."""
        from caliper_jax.motion.trajectory import sample_at
        from caliper_jax.studio.motion import _tool_path
        from caliper_jax.studio.scene import import_viser

        uplot = import_viser().uplot
        self._clear_results()
        model = graph_model(result, self.app.model)
        try:
            frame = model.frame_id(default_frame(model))
        except CaliperError:
            frame = len(model.frame_names) - 1
        gui, scene = self.app.server.gui, self.app.server.scene
        for nid, port, traj in trajectories(result):
            duration = float(np.asarray(traj.duration))
            rows = sample_at(traj, np.linspace(0.0, duration, PLOT_ROWS))
            q = np.asarray(rows.q, np.float64)
            series = [uplot.Series(label="t (s)")] + [
                uplot.Series(label=f"q[{i}]", stroke=PALETTE[i % len(PALETTE)]) for i in range(q.shape[1])
            ]
            with self.tab:
                self.plots.append(gui.add_uplot(
                    (rows.times, *q.T), tuple(series), scales={"x": uplot.Scale(time=False)},
                    title=f"{nid}.{port}: q(t)", aspect=2.0,
                ))
            if q.shape[1] == model.nq:
                tool = _tool_path(model, q, frame)
                seg = np.stack([tool[:-1], tool[1:]], axis=1).astype(np.float32)
                self.paths.append(scene.add_line_segments(
                    f"/graph/paths/{nid}_{port}", seg, colors=(30, 160, 90), thickness=0.004
                ))
                self.drawn_paths[f"{nid}.{port}"] = tool.tolist()

    def state(self) -> dict:
        return {
            "loaded": self.doc is not None,
            "name": None if self.doc is None else self.doc.name,
            "nodes": [] if self.doc is None else [n.id for n in self.doc.nodes],
            "edges": [] if self.doc is None else [e.text for e in self.doc.edges],
            "findings": self.findings,
            "result": self.result,
            "error": self.error,
            "paths": {k: len(v) for k, v in getattr(self, "drawn_paths", {}).items()},
            "plots": len(self.plots),
        }
