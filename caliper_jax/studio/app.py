"""The studio server: one viser server, one robot, five tabs (Jog, Motion, Simulate, Data, Graph).

``StudioApp(robot)`` starts the server on ``host:port`` (port 0: a free one) and serves viser's
bundled client (no internet needed); ``url`` is where to point a browser. Every panel is a thin
layer over engine calls, and each has a Python API (the GUI callbacks call the same methods), so
tests drive the studio from Python and read ``state()`` back. ``close()`` stops the server (and a
live session).
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading

import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.studio.scene import RobotDrawing, import_viser

DEFAULT_ROBOT = "gripper_arm"

# viser 1.1's text inputs carry a <label for=uuid> but the input lacks that id, so assistive tech
# (and Playwright's get_by_label) cannot name them. This hidden image's onerror runs once in the
# page and keeps every labelled input named (aria-label = its label's text) as panels change.
_LABEL_SCRIPT = (
    "if(!window.caliperLabels){window.caliperLabels=1;var f=function(){"
    "document.querySelectorAll('label[for]').forEach(function(l){"
    "if(document.getElementById(l.htmlFor))return;var b=l;"
    "for(var k=0;k<5&&b;k++){b=b.parentElement;var i=b&&b.querySelector('input,textarea');"
    "if(i){if(i.getAttribute('aria-label')!==l.textContent)i.setAttribute('aria-label',l.textContent);"
    "return;}}});};"
    "new MutationObserver(f).observe(document.body,{childList:true,subtree:true});f();}"
)
LABEL_LINKER = f'<img alt="" style="display:none" src="data:image/gif;base64,AA==" onerror="{_LABEL_SCRIPT}">'


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free now on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class StudioApp:
    """The studio. ``robot``: registry name or URDF / MJCF path; ``dataset``: a LeRobot v3 root
    opened in the Data tab; ``task``: a zoo task name / file preselected in Simulate."""

    def __init__(
        self,
        robot: str = DEFAULT_ROBOT,
        *,
        dataset=None,
        task=None,
        host: str = "127.0.0.1",
        port: int = 0,
        graph=None,
    ):
        viser = import_viser()
        if not (isinstance(port, int) and 0 <= port < 65536):
            raise CaliperError(f"port must be an integer in [0, 65535], got {port!r}")
        self.lock = threading.RLock()
        self.host = host
        self.port = port or free_port(host)
        with contextlib.redirect_stdout(sys.stderr):  # viser's banner: stdout stays for --json
            self.server = viser.ViserServer(host=host, port=self.port, verbose=False)
        self.port = int(self.server.get_port())  # viser moves on when the port is taken
        self.server.scene.add_grid("/grid", width=2.0, height=2.0, cell_size=0.1, section_size=0.5)
        self.server.initial_camera.position = (0.9, -0.9, 0.7)
        self.server.initial_camera.look_at = (0.0, 0.0, 0.2)
        self.model = None
        self.drawing = None
        self.load_robot(robot, rebuild=False)
        gui = self.server.gui
        gui.add_html(LABEL_LINKER)
        with gui.add_folder("Robot"):
            self.robot_text = gui.add_text("Robot (name or file)", str(robot))
            load = gui.add_button("Load robot")
            load.on_click(lambda _e: self._load_from_gui())
            self.collision_in = gui.add_checkbox(
                "Collision geometry", False, hint="draw the collision geometry (orange)"
            )
            self.collision_in.on_update(lambda _e: self.drawing.show_collision(bool(self.collision_in.value)))
            self.robot_md = gui.add_markdown(self._robot_summary())
        tabs = gui.add_tab_group()
        from caliper_jax.studio.data import DataPanel
        from caliper_jax.studio.graph import GraphPanel
        from caliper_jax.studio.jog import JogPanel
        from caliper_jax.studio.motion import MotionPanel
        from caliper_jax.studio.simulate import SimulatePanel

        self.jog = JogPanel(self, tabs.add_tab("Jog"))
        self.robot_md.content = self._robot_summary()
        self.motion = MotionPanel(self, tabs.add_tab("Motion"))
        self.simulate = SimulatePanel(self, tabs.add_tab("Simulate"), task=task)
        self.data = DataPanel(self, tabs.add_tab("Data"), dataset=dataset)
        self.graph = GraphPanel(self, tabs.add_tab("Graph"), graph=graph)
        self.closed = False

    # ---- robot ---------------------------------------------------------------------------------------
    def load_robot(self, robot, rebuild: bool = True, label: str | None = None) -> None:
        """Load a registry robot or a URDF / MJCF file and draw it at its default seed; the old
        robot's scene nodes go. ``label``: what the Robot box shows (default ``robot``)."""
        from caliper_jax.ik.api import default_frame, default_seed
        from caliper_jax.loading import load

        model = load(str(robot))
        with self.lock:
            if self.drawing is not None:
                self.drawing.remove()
            self.model = model
            self.robot = str(robot) if label is None else str(label)
            try:
                self.tool_frame = default_frame(model)
            except CaliperError:
                self.tool_frame = model.frame_names[-1]
            self.q = np.asarray(default_seed(model), np.float64)
            self.drawing = RobotDrawing(self.server, model)
            self.drawing.update(self.q)
            if getattr(self, "collision_in", None) is not None and self.collision_in.value:
                self.drawing.show_collision(True)
        if rebuild:
            self.robot_text.value = self.robot
            self.robot_md.content = self._robot_summary()
            self.jog.build()
            self.motion.clear()
            self.simulate.on_robot()

    def _robot_summary(self) -> str:
        m, d = self.model, self.drawing
        text = f"`{m.name}`: {m.nq} coordinates, tool frame `{self.tool_frame}`, {d.ngeom} geoms drawn"
        jog = getattr(self, "jog", None)
        if jog is not None and jog.warm_s is not None:
            text += f"  \nIK compiled at load ({jog.warm_s:.1f} s): drags answer at once"
        if d.mesh_errors:
            text += f"  \n{len(d.mesh_errors)} mesh(es) not drawn: {d.mesh_errors[0]}"
        return text

    def _load_from_gui(self) -> None:
        try:
            self.load_robot(self.robot_text.value)
        except CaliperError as exc:
            self.robot_md.content = f"error: {exc}"

    def draw(self, q) -> None:
        self.drawing.update(q)

    def live(self) -> bool:
        """Whether a live session is running (it then owns the drawn pose)."""
        sim = getattr(self, "simulate", None)
        return bool(sim is not None and sim.session is not None and sim.session.running)

    def on_jog(self, q) -> None:
        """A jog edit: while a live session runs, it edits the session's servo target."""
        sim = getattr(self, "simulate", None)
        if sim is not None:
            sim.on_jog(q)

    # ---- server ------------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/"

    def state(self) -> dict:
        """Everything the page shows, as plain Python (lists, floats, strings)."""
        with self.lock:
            return {
                "url": self.url,
                "robot": self.robot,
                "model": self.model.name,
                "nq": int(self.model.nq),
                "tool_frame": self.tool_frame,
                "q": self.q.tolist(),
                "drawn_q": None if self.drawing.last_q is None else self.drawing.last_q.tolist(),
                "body_positions": None
                if self.drawing.body_positions is None
                else self.drawing.body_positions.tolist(),
                "clients": len(self.server.get_clients()),
                "jog": self.jog.state(),
                "motion": self.motion.state(),
                "simulate": self.simulate.state(),
                "data": self.data.state(),
                "graph": self.graph.state(),
            }

    def close(self) -> None:
        if getattr(self, "closed", True):
            return
        self.closed = True
        self.jog.drag.close()
        self.jog.worker.close()
        self.motion.close()
        self.data.close()
        self.simulate.close()
        with contextlib.redirect_stdout(sys.stderr):
            self.server.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


__all__ = ["DEFAULT_ROBOT", "StudioApp", "free_port"]
