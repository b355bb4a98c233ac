"""Jog panel: joint sliders (limits shown), a draggable target gizmo solved live by ``ik`` (locked
joints respected), and the singularity HUD from ``analyze`` (sigma_min, manipulability, condition
number, escape direction), and the collision status against a scene of obstacles (the ground plane
and boxes ``x,y,z,hx,hy,hz;...``), checked at every change. Engine calls only:
``caliper_jax.ik.ik``, ``caliper_jax.ik.analyze``, ``caliper_jax.api.fk``,
``caliper_jax.collision.build_collision_model`` and ``caliper_jax.collision.api.check``.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from caliper_jax.errors import CaliperError
from caliper_jax.studio.worker import LatestWins

UNBOUNDED = np.pi  # slider range for a coordinate without limits
QUIET_S = 0.1  # the collision report waits until the gizmo drag has been still this long


def coordinate_labels(model) -> list[str]:
    """One label per q coordinate: the joint names for 1-dof robots, ``name[k]`` otherwise."""
    if len(model.joint_names) == model.nq:
        return list(model.joint_names)
    return [f"q[{i}]" for i in range(model.nq)]


def slider_range(model) -> np.ndarray:
    """(nq, 2) slider bounds: the joint limits, +-pi (or +-1 m) where a coordinate is unbounded."""
    lo, hi = np.asarray(model.qpos_lower, np.float64), np.asarray(model.qpos_upper, np.float64)
    return np.stack([np.where(np.isfinite(lo), lo, -UNBOUNDED), np.where(np.isfinite(hi), hi, UNBOUNDED)], -1)


def hud(model, q, frame: str) -> dict:
    """The singularity HUD at q: sigma_min, manipulability, condition number, escape direction."""
    from caliper_jax.ik import analyze

    m = analyze(model, np.asarray(q, np.float64), frame=frame)
    esc = np.asarray(m["escape_direction"], np.float64)
    cond = float(m["condition_number"])
    return {
        "frame": m["frame"],
        "sigma_min": float(np.asarray(m["singular_values"])[-1]),
        "manipulability": float(m["manipulability"]),
        "condition_number": cond if np.isfinite(cond) else None,
        "rank": int(m["rank"]),
        "escape_direction": esc.tolist(),
    }


def hud_markdown(h: dict, names) -> str:
    cond = "inf" if h["condition_number"] is None else f"{h['condition_number']:.3g}"
    esc = np.asarray(h["escape_direction"])
    n = np.linalg.norm(esc)
    if n > 0:
        k = int(np.argmax(np.abs(esc)))
        escape = f"{names[k]} {'+' if esc[k] > 0 else '-'} (|grad w| {n:.3g})"
    else:
        escape = "none (stationary)"
    return (
        f"**Singularity HUD** ({h['frame']})  \n"
        f"sigma_min `{h['sigma_min']:.4g}` | manipulability `{h['manipulability']:.4g}` | "
        f"condition `{cond}` | rank `{h['rank']}`  \nescape: {escape}"
    )


def parse_boxes(text: str) -> list:
    """``"x,y,z,hx,hy,hz;..."`` (centre and half extents, m; ``;`` between boxes) -> box obstacles
    named ``box0``, ``box1``, ... (each as ``caliper check --box``)."""
    import dataclasses

    from caliper_jax.collision.geometry import parse_box

    out = []
    for k, part in enumerate(p for p in str(text).split(";") if p.strip()):
        try:
            c = parse_box(part.strip())
        except CaliperError as exc:
            raise CaliperError(f"boxes field, box {k} ({part.strip()!r}): {exc}") from None
        out.append(dataclasses.replace(c, name=f"box{k}"))
    return out


def collision_status(model, cm, q, active=None) -> dict:
    """The collision report of q against ``cm`` (``caliper_jax.collision.api.check``), cut to what
    the HUD shows: verdict, min distance, closest pair, colliding pairs, and which robot bodies
    and obstacles take part in a collision. ``active``: the obstacles really in the scene (the
    others are parked slots of a padded scene and left out); None: all of them."""
    from caliper_jax.collision.api import check

    obstacles = list(cm.obstacles) if active is None else [n for n in cm.obstacles if n in set(active)]
    parked = set(cm.obstacles) - set(obstacles)
    r = check(model, cm, q) if cm.npair else {"link_pairs": [], "colliding": []}
    links = [p for p in r["link_pairs"] if p["a"] not in parked and p["b"] not in parked]
    if not links:
        return {"in_collision": False, "min_distance": None, "closest": None, "colliding": [],
                "bodies": [], "obstacles": obstacles, "hit_obstacles": [], "note": "nothing to check"}
    body = dict(zip(cm.names[: cm.n_robot], cm.body[: cm.n_robot], strict=True))
    pairs = [{k: p[k] for k in ("a", "b", "kind", "distance")} for p in r["colliding"]
             if p["a"] not in parked and p["b"] not in parked]
    hit = {n for p in pairs for n in (p["a"], p["b"])}
    is_obstacle = set(obstacles)
    return {
        "in_collision": bool(pairs),
        "min_distance": links[0]["distance"],
        "closest": links[0],
        "colliding": pairs,
        "bodies": sorted({int(body[n]) for n in hit if n in body and body[n] >= 0}),
        "obstacles": obstacles,
        "hit_obstacles": sorted(n for n in hit if n in is_obstacle),
        "note": None,
    }


def collision_markdown(c) -> str:
    if c is None:
        return "**Collision**: off"
    if c.get("error"):
        return f"**Collision**: error: {c['error']}"
    if c["min_distance"] is None:
        return f"**Collision**: {c['note']}"
    cl = c["closest"]
    head = "**IN COLLISION**" if c["in_collision"] else "**Collision**: clear"
    lines = [f"{head}, min distance `{c['min_distance']:+.4f}` m ({cl['a']} / {cl['b']})"]
    for p in c["colliding"][:5]:
        lines.append(f"{p['kind']} {p['a']} / {p['b']} `{p['distance']:+.4f}` m")
    return "  \n".join(lines)


class JogPanel:
    """The Jog tab of ``app`` (a StudioApp). Python API: ``set_q``, ``set_joint``, ``solve_target``,
    ``set_locked``, ``set_scene``; GUI callbacks call the same methods (a gizmo move through the
    ``drag`` worker: ``drag.wait()`` returns once the newest move is drawn)."""

    def __init__(self, app, tab):
        self.app = app
        self.tab = tab
        self.folder = None
        self.sliders = []
        self.locks = []
        self.syncing = False
        self.last_ik = None
        self.hud = None
        with tab:
            self.position_only = app.server.gui.add_checkbox(
                "IK position only", False, hint="ignore the target's orientation"
            )
            self.hud_md = app.server.gui.add_markdown("**Singularity HUD**")
            self.ik_md = app.server.gui.add_markdown("IK: drag the gizmo")
            with app.server.gui.add_folder("Collision scene"):
                self.ground_in = app.server.gui.add_checkbox("Ground plane (z = 0)", True)
                self.boxes_in = app.server.gui.add_text(
                    "Boxes", "", hint="x,y,z,hx,hy,hz;... (centre, half extents, m)"
                )
                app.server.gui.add_button("Apply scene").on_click(lambda _e: self._scene_from_gui())
                self.collision_md = app.server.gui.add_markdown("**Collision**")
        self.ground, self.boxes = True, []
        self.cm = None
        self.padded = None  # the PaddedScene of the current robot
        self.warm_s = None  # seconds the IK / HUD / collision compiles took at load
        self._scene_s = None
        self._collide_lock = threading.Lock()
        self.worker = LatestWins(self._check_async, name="studio-collision")
        # gizmo pointer moves: one thread solves the newest, superseded moves are dropped, so a
        # burst never queues (viser runs each callback on its own pool thread otherwise)
        self.drag = LatestWins(self._drag, name="studio-drag")
        self.obstacle_drawing = None
        self.collision = None
        self.reports = 0  # collision reports made (a benchmark counts those during a drag)
        self.gizmo = None
        self.build()

    # ---- building ------------------------------------------------------------------------------------
    def build(self) -> None:
        """(Re)build sliders, locks and gizmo for the app's current robot."""
        app, model = self.app, self.app.model
        gui = app.server.gui
        if self.folder is not None:
            self.folder.remove()
        self.labels = coordinate_labels(model)
        rng = slider_range(model)
        self.sliders, self.locks = [], []
        with self.tab:
            self.folder = gui.add_folder("Joints")
            with self.folder:
                for i, name in enumerate(self.labels):
                    lo, hi = float(rng[i, 0]), float(rng[i, 1])
                    s = gui.add_slider(
                        name,
                        min=lo,
                        max=hi,
                        step=(hi - lo) / 1000.0,
                        initial_value=float(np.clip(app.q[i], lo, hi)),
                        hint=f"limits [{lo:.4g}, {hi:.4g}]",
                    )
                    s.on_update(self._slider_cb(i))
                    self.sliders.append(s)
                locks = gui.add_folder("Locked in IK", expand_by_default=False)
                with locks:
                    for name in self.labels:
                        self.locks.append(gui.add_checkbox(f"lock {name}", False))
        self.position_only.value = model.nv < 6
        T = self.tool_pose()
        if self.gizmo is not None:
            self.gizmo.remove()
        self.gizmo = app.server.scene.add_transform_controls(
            "/ik_target", scale=0.15, position=T[:3, 3], wxyz=_wxyz(T[:3, :3])
        )
        self.gizmo.on_update(self._gizmo_cb)
        self.padded = None
        t0 = time.perf_counter()
        self._build_scene()
        self.refresh()
        self.warm(time.perf_counter() - t0)

    def warm(self, already: float = 0.0) -> float:
        """Compile what a gizmo drag runs (IK of the tool frame; the HUD and the collision check
        ran in ``build``, taking ``already`` s) for this robot now, not on the first drag; with
        jax's persistent compilation cache on (the CLI's default) a second start loads them from
        disk. Returns the seconds taken (``warm_s``)."""
        from caliper_jax import progress
        from caliper_jax.ik import ik

        t0 = time.perf_counter()
        T = self.tool_pose()
        with progress.stage(f"caliper studio: compiling IK for {self.app.model.name}"):
            ik(self.app.model, T, frame=self.app.tool_frame, seed_q=self.app.q,
               locked=self.locked(), position_only=bool(self.position_only.value))
            if self.padded is not None:  # a box around the tool: the penetration (EPA) path too
                from caliper_jax.collision.geometry import box

                hit = self.padded.place(self.ground, [box(T[:3, 3], (0.05, 0.05, 0.05))])
                collision_status(self.app.model, hit, self.app.q, self.padded.active)
                self.cm = self.padded.place(self.ground, self.boxes)
        self.warm_s = time.perf_counter() - t0 + already
        return self.warm_s

    # ---- the collision scene ---------------------------------------------------------------------------
    def obstacles(self) -> list:
        """The scene's obstacles (Colliders): the ground when on, then the boxes."""
        from caliper_jax.collision.geometry import ground

        return ([ground(0.0)] if self.ground else []) + list(self.boxes)

    def _build_scene(self) -> None:
        """Place the obstacles in the robot's padded scene (built on first use: the one
        compile); the drawing shows the active ones."""
        from caliper_jax.studio.obstacles import PaddedScene
        from caliper_jax.studio.scene import ObstacleDrawing

        obstacles = self.obstacles()
        if self.obstacle_drawing is not None:
            self.obstacle_drawing.remove()
        self.obstacle_drawing = ObstacleDrawing(self.app.server, obstacles)
        t0 = time.perf_counter()
        try:
            if self.padded is None or self.padded.model is not self.app.model:
                self.padded = PaddedScene(self.app.model)
            self.cm = self.padded.place(self.ground, self.boxes)
            self._scene_s = time.perf_counter() - t0
        except CaliperError as exc:  # the robot's collision geometry: the panel stays usable
            self.cm, self.padded, self._scene_s = None, None, None
            self.collision = {"error": str(exc), "in_collision": None, "min_distance": None,
                              "colliding": [], "bodies": [], "hit_obstacles": []}
            self.collision_md.content = collision_markdown(self.collision)

    def set_scene(self, boxes=None, ground=None, sync: bool = True) -> dict | None:
        """Replace the obstacles: ``boxes`` as text ``"x,y,z,hx,hy,hz;..."`` (or a list of
        6-number rows), ``ground`` True / False (None: keep). Returns the new collision status;
        ``sync`` False (the Apply button): the report follows on the worker, returns None."""
        if boxes is not None:
            text = boxes if isinstance(boxes, str) else ";".join(",".join(str(float(v)) for v in row)
                                                                 for row in boxes)
            self.boxes = parse_boxes(text)
            self.boxes_in.value = text
        if ground is not None:
            self.ground = bool(ground)
            self.ground_in.value = self.ground
        self._build_scene()
        self.refresh(move_gizmo=False, sync=sync)
        return self.collision if sync else None

    def _scene_from_gui(self) -> None:
        try:
            self.set_scene(boxes=self.boxes_in.value, ground=bool(self.ground_in.value), sync=False)
        except CaliperError as exc:
            self.collision_md.content = f"**Collision**: error: {exc}"

    def check_collision(self, q=None) -> dict | None:
        """The collision status at q (default: the current q); obstacles and links in collision
        turn red."""
        model, cm, active = self.app.model, self.cm, self.padded.active if self.padded else None
        q = self.app.q if q is None else q
        with self._collide_lock:
            self.reports += 1
            try:
                c = collision_status(model, cm, q, active)
            except CaliperError as exc:
                c = {"error": str(exc), "in_collision": None, "min_distance": None, "colliding": [],
                     "bodies": [], "hit_obstacles": []}
            if model is not self.app.model or cm is not self.cm:
                return c  # the robot or the scene changed meanwhile: a stale report is not shown
            self.collision = c
            self.collision_md.content = collision_markdown(c)
            self.app.drawing.highlight(c["bodies"])
            if self.obstacle_drawing is not None:
                self.obstacle_drawing.highlight(c["hit_obstacles"])
        return c

    def _check_async(self, q) -> None:
        """The collision report (on its worker) once a drag pauses: it yields the CPU to the
        drag worker until no pointer move has been handled for ``QUIET_S``, then checks the newest
        pose only."""
        while (quiet := self.drag.idle_for()) < QUIET_S and not getattr(self.app, "closed", False):
            time.sleep(max(QUIET_S - quiet, 0.005))
            if self.worker.pending:
                return  # a newer pose waits: check that one instead
        if self.cm is not None:
            self.check_collision(q)

    def _slider_cb(self, i):
        def cb(_event):
            if not self.syncing:
                q = self.app.q.copy()
                q[i] = float(self.sliders[i].value)
                self.set_q(q, sync=False)

        return cb

    def _gizmo_cb(self, _event):
        """A pointer move of the gizmo: hand its pose to the drag worker (latest wins)."""
        from caliper_jax.io.rotations import quat_to_mat

        T = np.eye(4)
        T[:3, :3] = quat_to_mat(np.asarray(self.gizmo.wxyz, np.float64))
        T[:3, 3] = np.asarray(self.gizmo.position, np.float64)
        self.drag.submit(T)

    def _drag(self, T) -> None:
        """The newest pointer move: IK -> servo target -> draw -> sliders / HUD, sent to the page
        as one atomic batch (one wake-up of viser's loop instead of one per message); the exact
        collision report follows on its own worker."""
        try:
            with self.app.server.atomic():
                self.solve_target(T, move_gizmo=False, sync=False)
        except CaliperError as exc:
            self.ik_md.content = f"IK: error: {exc}"

    # ---- actions -----------------------------------------------------------------------------------------
    def tool_pose(self, q=None) -> np.ndarray:
        from caliper_jax import api

        q = self.app.q if q is None else q
        return np.asarray(api.fk(self.app.model, q)[self.app.model.frame_id(self.app.tool_frame)], np.float64)

    def locked(self) -> list[str]:
        return [self.labels[i] for i, c in enumerate(self.locks) if c.value]

    def set_locked(self, names) -> None:
        names = set(names)
        unknown = names - set(self.labels)
        if unknown:
            raise CaliperError(f"locked: unknown joint(s) {sorted(unknown)}; joints are {self.labels}")
        for name, c in zip(self.labels, self.locks, strict=True):
            c.value = name in names

    def set_joint(self, joint, value: float) -> None:
        """One coordinate (index or label) to ``value`` (clipped to its slider range)."""
        i = self.labels.index(joint) if isinstance(joint, str) else int(joint)
        q = self.app.q.copy()
        q[i] = value
        self.set_q(q)

    def set_q(self, q, move_gizmo: bool = True, sync: bool = True) -> None:
        """The robot to q (nq,), clipped into the slider ranges: sliders, drawing, HUD, gizmo.
        ``sync`` False (the GUI's pointer events): the collision report follows on the worker."""
        q = np.asarray(q, np.float64)
        model = self.app.model
        if q.shape != (model.nq,) or not np.all(np.isfinite(q)):
            raise CaliperError(
                f"q: expected {model.nq} finite values for {model.name!r}, got shape {q.shape}"
            )
        rng = slider_range(model)
        self.app.q = np.clip(q, rng[:, 0], rng[:, 1])
        self.syncing = True
        try:
            for s, v in zip(self.sliders, self.app.q, strict=True):
                if s.value != v:
                    s.value = float(v)
        finally:
            self.syncing = False
        self.app.on_jog(self.app.q)
        self.refresh(move_gizmo, sync)

    def refresh(self, move_gizmo: bool = True, sync: bool = True) -> None:
        if not self.app.live():  # while live, the simulation alone draws the robot
            self.app.draw(self.app.q)
        try:
            self.hud = hud(self.app.model, self.app.q, self.app.tool_frame)
            self.hud_md.content = hud_markdown(self.hud, self.labels)
        except CaliperError as exc:
            self.hud, self.hud_md.content = None, f"HUD: {exc}"
        if self.cm is not None:
            if sync:
                self.check_collision()
            else:
                self.worker.submit(self.app.q.copy())
        if move_gizmo and self.gizmo is not None:
            T = self.tool_pose()
            self.gizmo.position = T[:3, 3]
            self.gizmo.wxyz = _wxyz(T[:3, :3])

    def solve_target(self, T, move_gizmo: bool = True, sync: bool = True) -> dict:
        """IK of the tool frame to T (4x4 T_world_frame), seeded at the current q, locked joints
        kept; the robot moves to the solution. Returns the IK report (also in ``state()``)."""
        from caliper_jax.ik import ik

        model = self.app.model
        T = np.asarray(T, np.float64)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise CaliperError(f"target: expected a finite 4x4 pose, got shape {T.shape}")
        res = ik(
            model,
            T,
            frame=self.app.tool_frame,
            seed_q=self.app.q,
            locked=self.locked(),
            position_only=bool(self.position_only.value),
        )
        self.last_ik = {
            "target": T.tolist(),
            "success": bool(res.success),
            "q": np.asarray(res.q).tolist(),
            "pos_residual": float(res.pos_residual),
            "rot_residual": float(res.rot_residual),
            "locked": self.locked(),
            "position_only": bool(self.position_only.value),
        }
        self.set_q(res.q, move_gizmo=False, sync=sync)
        if move_gizmo and self.gizmo is not None:
            self.gizmo.position = T[:3, 3]
            self.gizmo.wxyz = _wxyz(T[:3, :3])
        word = "reached" if res.success else "NOT reached"
        self.ik_md.content = (
            f"IK {word}: position residual `{float(res.pos_residual):.3g}` m, rotation "
            f"`{float(res.rot_residual):.3g}` rad"
        )
        return self.last_ik

    def state(self) -> dict:
        return {
            "joint_names": self.labels,
            "sliders": [float(s.value) for s in self.sliders],
            "limits": slider_range(self.app.model).tolist(),
            "locked": self.locked(),
            "hud": self.hud,
            "ik": self.last_ik,
            "collision": self.collision,
            "warm_s": self.warm_s,
            "scene_capacity": None if self.padded is None else self.padded.capacity,
            "scene_notes": [] if self.padded is None else list(self.padded.notes),
            "gizmo": {
                "position": np.asarray(self.gizmo.position).tolist(),
                "wxyz": np.asarray(self.gizmo.wxyz).tolist(),
            },
        }


def _wxyz(R):
    from caliper_jax.studio.scene import wxyz

    return wxyz(R)
