"""Jog panel: joint sliders (limits shown), a draggable target gizmo solved live by ``ik`` (locked
joints respected), and the singularity HUD from ``analyze`` (sigma_min, manipulability, condition
number, escape direction). Engine calls only: ``caliper_jax.ik.ik``, ``caliper_jax.ik.analyze``,
``caliper_jax.api.fk``.
"""

from __future__ import annotations

import numpy as np

from caliper_jax.errors import CaliperError

UNBOUNDED = np.pi  # slider range for a coordinate without limits


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


class JogPanel:
    """The Jog tab of ``app`` (a StudioApp). Python API: ``set_q``, ``set_joint``, ``solve_target``,
    ``set_locked``; GUI callbacks call the same methods."""

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
        self.refresh()

    def _slider_cb(self, i):
        def cb(_event):
            if not self.syncing:
                self.set_joint(i, float(self.sliders[i].value))

        return cb

    def _gizmo_cb(self, _event):
        from caliper_jax.io.rotations import quat_to_mat

        T = np.eye(4)
        T[:3, :3] = quat_to_mat(np.asarray(self.gizmo.wxyz, np.float64))
        T[:3, 3] = np.asarray(self.gizmo.position, np.float64)
        try:
            self.solve_target(T, move_gizmo=False)
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

    def set_q(self, q, move_gizmo: bool = True) -> None:
        """The robot to q (nq,), clipped into the slider ranges: sliders, drawing, HUD, gizmo."""
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
        self.refresh(move_gizmo)

    def refresh(self, move_gizmo: bool = True) -> None:
        if not self.app.live():  # while live, the simulation alone draws the robot
            self.app.draw(self.app.q)
        try:
            self.hud = hud(self.app.model, self.app.q, self.app.tool_frame)
            self.hud_md.content = hud_markdown(self.hud, self.labels)
        except CaliperError as exc:
            self.hud, self.hud_md.content = None, f"HUD: {exc}"
        if move_gizmo and self.gizmo is not None:
            T = self.tool_pose()
            self.gizmo.position = T[:3, 3]
            self.gizmo.wxyz = _wxyz(T[:3, :3])

    def solve_target(self, T, move_gizmo: bool = True) -> dict:
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
        self.set_q(res.q, move_gizmo=False)
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
            "gizmo": {
                "position": np.asarray(self.gizmo.position).tolist(),
                "wxyz": np.asarray(self.gizmo.wxyz).tolist(),
            },
        }


def _wxyz(R):
    from caliper_jax.studio.scene import wxyz

    return wxyz(R)
