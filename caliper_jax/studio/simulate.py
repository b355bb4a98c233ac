"""Simulate panel: a :class:`caliper_jax.studio.live.LiveSession` of a zoo task, drawn from its
snapshots by a viewer thread (~30 Hz) that only reads; the physics thread never waits for it or for
a browser. Start / Pause / Resume / Reset / Stop, gripper open/close (the task's grasp: weld or
friction), the success verdict and the held prop, and teleop recording (takes saved to a LeRobot v3
dataset). While live, the Jog sliders and gizmo edit the session's servo target, never the drawn
pose.
"""

from __future__ import annotations

import threading

import numpy as np

from caliper_jax.errors import CaliperError

VIEW_HZ = 30.0


def zoo_names() -> list[str]:
    """Every zoo task, the registry arms' tasks (tasks/zoo/arms) included."""
    from tasks.schema import zoo_names as names

    return list(names(arms=True))


def task_robot(name: str) -> str:
    """The robot name of zoo task ``name`` (its description file's stem, e.g. ``panda``)."""
    from pathlib import Path

    from tasks.schema import find_task, load_task

    return Path(str(load_task(find_task(name)).robot)).stem


def task_for_robot(names, robot: str, current=None):
    """``current`` when it is a task of ``robot``, else the robot's lift-cube task, else the first
    of ``names`` that is one of its tasks (else ``current`` or the first name): the task Simulate
    preselects for the loaded robot."""
    if current in names and task_robot(current) == robot:
        return current
    own = [n for n in names if task_robot(n) == robot]
    lifts = [n for n in own if n.endswith("lift-cube")]
    if lifts or own:
        return (lifts or own)[0]
    return current if current in names else names[0]


def draw_task_objects(scene, task, root: str) -> tuple[dict, list]:
    """Draw ``task``'s props (their shape, size and colour; posed later), its zones (translucent)
    and its fixtures (static boxes at their world pose and colour) under ``root``; returns
    ({prop name: handle}, [zone handles, then fixture handles])."""
    props, statics = {}, []
    for p in task.props:
        color = tuple(int(255 * c) for c in p.rgba[:3])
        name = f"{root}/props/{p.name}"
        if p.kind == "box":
            props[p.name] = scene.add_box(name, color=color, dimensions=tuple(2.0 * np.asarray(p.size)))
        elif p.kind == "sphere":
            props[p.name] = scene.add_icosphere(name, radius=float(p.size[0]), color=color)
        else:
            props[p.name] = scene.add_cylinder(
                name, radius=float(p.size[0]), height=2.0 * float(p.size[1]), color=color
            )
    for z in task.zones:
        statics.append(scene.add_box(f"{root}/zones/{z.name}", color=(60, 200, 100),
                                     dimensions=tuple(2.0 * np.asarray(z.half)),
                                     position=np.asarray(z.center), opacity=0.3))
    for f in getattr(task, "fixtures", ()):
        color = tuple(int(255 * c) for c in f.rgba[:3])
        statics.append(scene.add_box(f"{root}/fixtures/{f.name}", color=color,
                                     dimensions=tuple(2.0 * np.asarray(f.size)), position=np.asarray(f.pos),
                                     wxyz=np.asarray(f.quat)))
    return props, statics


class SimulatePanel:
    """The Simulate tab. Python API: ``start(task)``, ``pause``, ``resume``, ``reset``, ``stop``,
    ``gripper(closed)``, ``start_take(root, label)``, ``stop_take(save)``, ``finish_dataset``."""

    def __init__(self, app, tab, task=None):
        self.app, self.tab = app, tab
        self.session = None
        self._viewer = None
        self._viewer_stop = threading.Event()
        self._props = {}
        self._statics = []
        gui = app.server.gui
        names = zoo_names()
        self.names = names
        with tab:
            first = task if task in names else task_for_robot(names, app.model.name)
            self.task = gui.add_dropdown("Task", names, initial_value=first)
            if task is not None and task not in names:
                self.task_text = gui.add_text("Task file", str(task))
            else:
                self.task_text = gui.add_text("Task file (optional)", "")
            row = [
                ("Start live", self._gui(lambda: self.start())),
                ("Pause", self._gui(self.pause)),
                ("Resume", self._gui(self.resume)),
                ("Reset", self._gui(self.reset)),
                ("Stop", self._gui(self.stop)),
                ("Close gripper", self._gui(lambda: self.gripper(True))),
                ("Open gripper", self._gui(lambda: self.gripper(False))),
            ]
            for label, cb in row:
                gui.add_button(label).on_click(cb)
            self.status = gui.add_markdown("Not running.")
            with gui.add_folder("Record teleop", expand_by_default=False):
                self.rec_root = gui.add_text("Dataset folder", "")
                self.rec_label = gui.add_text("Task label", "")
                for label, cb in (
                    (
                        "Start take",
                        self._gui(lambda: self.start_take(self.rec_root.value, self.rec_label.value or None)),
                    ),
                    ("Save take", self._gui(lambda: self.stop_take(True))),
                    ("Discard take", self._gui(lambda: self.stop_take(False))),
                    ("Finish dataset", self._gui(self.finish_dataset)),
                ):
                    gui.add_button(label).on_click(cb)

    def _gui(self, fn):
        def cb(_event):
            try:
                fn()
            except CaliperError as exc:
                self.status.content = f"error: {exc}"

        return cb

    # ---- session control ------------------------------------------------------------------------------
    def start(self, task=None) -> None:
        """Start (or restart) a live session of ``task`` (default: the dropdown / task file)."""
        from caliper_jax.studio.live import LiveSession

        if task is None:
            task = self.task_text.value.strip() or self.task.value
        self.stop()
        self.clear_scene()
        self.session = None
        session = LiveSession(task)
        if self.app.model.name != session.model.name or self.app.model.nq != session.model.nq:
            self.app.load_robot(session.task.robot, label=session.model.name)  # the task's own robot
        self.session = session
        self._draw_props()
        session.start()
        self._viewer_stop.clear()
        self._viewer = threading.Thread(target=self._view_loop, name="studio-sim-view", daemon=True)
        self._viewer.start()

    def _need(self):
        if self.session is None:
            raise CaliperError("no live session: press Start live first")
        return self.session

    def pause(self) -> None:
        self._need().pause()
        self.view()

    def resume(self) -> None:
        self._need().resume()

    def reset(self) -> None:
        self._need().reset()
        self.view()

    def gripper(self, closed: bool) -> None:
        self._need().set_gripper(closed)

    def _stop_viewer(self) -> None:
        self._viewer_stop.set()
        if self._viewer is not None:
            self._viewer.join(timeout=2.0)
            self._viewer = None

    def stop(self) -> None:
        self._stop_viewer()
        if self.session is not None:
            self.session.stop()
            self.view()

    def close(self) -> None:
        self.stop()
        self.clear_scene()

    def on_robot(self) -> None:
        """The app loaded another robot: a session of the old one ends, its props and zones go,
        and the task list preselects a task of the new robot."""
        if self.session is not None and self.session.model.name != self.app.model.name:
            session, self.session = self.session, None
            self._stop_viewer()
            session.stop()
            self.clear_scene()
        self.task.value = task_for_robot(self.names, self.app.model.name, self.task.value)

    def on_jog(self, q) -> None:
        """A jog edit while live: the arm's servo target; the gripper keeps its own command."""
        s = self.session
        if s is not None and s.running and s.model.nq == len(q):
            s.set_arm_target(q)

    # ---- recording -----------------------------------------------------------------------------------
    def start_take(self, root, label=None, fps=None) -> None:
        if not str(root).strip():
            raise CaliperError("recording: give a dataset folder")
        self._need().start_take(root, label, fps)

    def stop_take(self, save: bool = True):
        return self._need().stop_take(save)

    def finish_dataset(self) -> None:
        self._need().finish_dataset()

    # ---- viewer ---------------------------------------------------------------------------------------
    def clear_scene(self) -> None:
        """Remove the drawn props, zones and fixtures (of a finished or replaced session)."""
        for h in list(self._props.values()) + self._statics:
            h.remove()
        self._props, self._statics = {}, []

    def _draw_props(self) -> None:
        self.clear_scene()
        self._props, self._statics = draw_task_objects(self.app.server.scene, self.session.task, "/sim")

    def view(self) -> dict | None:
        """Draw the session's current snapshot once; returns it."""
        if self.session is None:
            return None
        snap = self.session.snapshot()
        if self.session.model.name != self.app.model.name:  # the robot was replaced meanwhile
            return snap
        self.app.draw(np.asarray(snap["q"]))
        for name, pose in snap["props"].items():
            h = self._props.get(name)
            if h is not None:
                h.position = np.asarray(pose[:3])
                h.wxyz = np.asarray(pose[3:])
        state = (
            "ERROR: " + snap["error"]
            if snap["error"]
            else ("paused" if snap["paused"] else ("live" if snap["running"] else "stopped"))
        )
        verdict = {None: "n/a", True: "SUCCESS", False: "not yet"}[snap["success"]]
        rec = f"recording ({snap['take_frames']} frames)" if snap["recording"] else "not recording"
        grip = "closed" if snap["gripper_closed"] else "open"
        self.status.content = (
            f"**{snap['task']}** ({snap['robot']}) {state} t=`{snap['time']:.3f}` s, tick `{snap['tick']}`, "
            f"gripper {grip} ({snap['grasp']} grasp)  \n"
            f"success: {verdict} | held: {snap['held'] or '-'} | contacts: {snap['contacts']}  \n"
            f"{rec}, {snap['saved_episodes']} episode(s) saved | max debt "
            f"`{1000 * snap['max_debt_s']:.2f}` ms, dropped `{snap['dropped_s']:.3f}` s"
        )
        return snap

    def _view_loop(self) -> None:
        while not self._viewer_stop.wait(1.0 / VIEW_HZ):
            try:
                snap = self.view()
            except Exception:  # the server may be shutting down; the physics goes on
                continue
            if snap is None or snap["error"] or not snap["running"]:
                break

    def state(self) -> dict:
        if self.session is None:
            return {"running": False}
        return self.session.snapshot()
