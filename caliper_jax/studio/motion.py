"""Motion panel: MOVE_J / MOVE_L / MOVE_C from the current pose to the Jog gizmo's target, previewed
as a ghost path of the tool with a time scrubber; the path report and trajectory lint findings
(T001-T007) listed, each jumping to its time. Engine calls only: ``caliper_jax.motion`` (move_j,
move_l, move_c, sample_at, lint_model_path), ``caliper_jax.ik.ik``, ``caliper_jax.api.fk``.
"""

from __future__ import annotations

import numpy as np

from caliper_jax.errors import CaliperError

KINDS = ("MOVE_J", "MOVE_L", "MOVE_C")
MAX_FINDING_BUTTONS = 20


def _tool_path(model, q: np.ndarray, frame: int) -> np.ndarray:
    """(N, 3) tool positions along rows q (N, nq); the batch is padded to a power of two so that
    moves of different lengths reuse a few compiled FK calls."""
    from caliper_jax import api

    n = len(q)
    size = 1 << max(int(n - 1).bit_length(), 3)
    padded = np.concatenate([q, np.repeat(q[-1:], size - n, axis=0)]) if size > n else q
    return np.asarray(api.fk(model, padded)[:n, frame, :3, 3], np.float64)


class MotionPanel:
    """The Motion tab. Python API: ``plan(kind, target=..., via=..., q_goal=...)``, ``scrub(t)``,
    ``jump(i)`` (to finding i's time)."""

    def __init__(self, app, tab):
        self.app, self.tab = app, tab
        gui = app.server.gui
        with tab:
            self.kind = gui.add_dropdown("Move", KINDS, initial_value="MOVE_J")
            self.via = gui.add_vector3("MOVE_C via (m)", (0.0, 0.0, 0.0), step=0.01)
            self.dt = gui.add_number("Sample dt (s)", 0.01, min=1e-3, max=0.1, step=1e-3)
            go = gui.add_button("Plan to gizmo target")
            go.on_click(lambda _e: self._plan_from_gui())
            self.summary = gui.add_markdown("No move planned.")
            self.scrubber = gui.add_slider(
                "Time (s)", min=0.0, max=1.0, step=0.001, initial_value=0.0, disabled=True
            )
            self.scrubber.on_update(
                lambda _e: None if self._syncing else self.scrub(float(self.scrubber.value))
            )
            self.findings_folder = gui.add_folder("Lint findings")
        self._syncing = False
        self._buttons = []
        self.ghost = None
        self.result = None
        self.time = None

    def clear(self) -> None:
        if self.ghost is not None:
            self.ghost.remove()
            self.ghost = None
        for b in self._buttons:
            b.remove()
        self._buttons = []
        self.result = None
        self.summary.content = "No move planned."
        self.scrubber.disabled = True

    def _plan_from_gui(self) -> None:
        try:
            self.plan(self.kind.value, via=np.asarray(self.via.value, np.float64), dt=float(self.dt.value))
        except CaliperError as exc:
            self.summary.content = f"error: {exc}"

    def plan(
        self, kind: str = "MOVE_J", *, target=None, via=None, q_goal=None, q_start=None, dt: float = 0.01
    ) -> dict:
        """Plan ``kind`` from ``q_start`` (default: the current pose) to ``target`` (4x4 pose of the
        tool frame; default: the Jog gizmo) or, MOVE_J only, to joint positions ``q_goal``; MOVE_C
        passes ``via`` (x, y, z; default: the midpoint raised 5 cm). Then lint and draw it."""
        from caliper_jax import api
        from caliper_jax.ik import ik
        from caliper_jax.motion import MotionLimits, move_c, move_j, move_l
        from caliper_jax.motion.path_metrics import lint_model_path
        from caliper_jax.motion.trajectory import sample_at, uniform_times

        app, model = self.app, self.app.model
        if kind not in KINDS:
            raise CaliperError(f"move kind {kind!r}: expected one of {', '.join(KINDS)}")
        if not (np.isfinite(dt) and dt > 0):
            raise CaliperError(f"dt must be a positive number of seconds, got {dt}")
        q0 = np.asarray(app.q if q_start is None else q_start, np.float64)
        frame = model.frame_id(app.tool_frame)
        if target is None and q_goal is None:
            target = (
                app.jog.tool_pose(q0) if app.jog.last_ik is None else np.asarray(app.jog.last_ik["target"])
            )
            if app.jog.gizmo is not None:
                from caliper_jax.io.rotations import quat_to_mat

                target = np.eye(4)
                target[:3, :3] = quat_to_mat(np.asarray(app.jog.gizmo.wxyz, np.float64))
                target[:3, 3] = np.asarray(app.jog.gizmo.position, np.float64)
        position_only = bool(app.jog.position_only.value)
        problem = None
        if kind == "MOVE_J":
            if q_goal is None:
                res = ik(model, target, frame=app.tool_frame, seed_q=q0, position_only=position_only)
                if not res.success:
                    problem = f"IK to the target did not converge (residual {float(res.pos_residual):.3g} m)"
                q_goal = res.q
            traj = move_j(q0, np.asarray(q_goal, np.float64), MotionLimits.from_model(model))
        else:
            target = np.asarray(target, np.float64)
            kw = dict(frame=frame, position_only=position_only, strict=False)
            if kind == "MOVE_L":
                move = move_l(model, q0, target, **kw)
            else:
                p0 = api.fk(model, q0)[frame][:3, 3]
                v = None if via is None else np.asarray(via, np.float64)
                if v is None or not np.any(v):
                    v = 0.5 * (p0 + target[:3, 3]) + np.array([0.0, 0.0, 0.05])
                move = move_c(model, q0, v, target, **kw)
            rep = move.report
            if rep.ik_failures:
                problem = f"IK failed at {len(rep.ik_failures)} of {rep.n_samples} samples"
            elif rep.discontinuities:
                problem = f"a joint jumps at t={rep.discontinuities[0].time:.3f} s"
            traj = move.trajectory
        duration = float(traj.duration)
        rows = sample_at(traj, uniform_times(duration, dt))
        report, findings, _ = lint_model_path(model, *rows, frame=frame)
        tool = _tool_path(model, np.asarray(rows.q, np.float64), frame)
        self.rows, self.findings = rows, list(findings)
        self.result = {
            "kind": kind,
            "duration": duration,
            "rows": int(rows.times.shape[0]),
            "problem": problem,
            "q_start": q0.tolist(),
            "q_end": np.asarray(rows[1][-1]).tolist(),
            "tool_path": tool.tolist(),
            "findings": [f.to_dict() for f in self.findings],
        }
        self._draw(tool, duration)
        return self.result

    def _draw(self, tool: np.ndarray, duration: float) -> None:
        gui, scene = self.app.server.gui, self.app.server.scene
        if self.ghost is not None:
            self.ghost.remove()
        seg = (
            np.stack([tool[:-1], tool[1:]], axis=1).astype(np.float32)
            if len(tool) > 1
            else np.repeat(tool[:, None], 2, axis=1).astype(np.float32)
        )
        self.ghost = scene.add_line_segments(
            "/motion/ghost_path", seg, colors=(240, 150, 30), thickness=0.004
        )
        r = self.result
        self.summary.content = (
            f"**{r['kind']}** {duration:.3f} s, {r['rows']} rows, "
            f"{len(self.findings)} lint finding(s)" + (f"  \nproblem: {r['problem']}" if r["problem"] else "")
        )
        self._syncing = True
        try:
            self.scrubber.max = max(duration, 1e-3)
            self.scrubber.value = 0.0
            self.scrubber.disabled = False
        finally:
            self._syncing = False
        for b in self._buttons:
            b.remove()
        self._buttons = []
        with self.findings_folder:
            for i, f in enumerate(self.findings[:MAX_FINDING_BUTTONS]):
                joint = "" if f.joint_name is None else f" {f.joint_name}"
                b = gui.add_button(f"{f.code}{joint} @ {f.time:.3f} s", hint=f.message)
                b.on_click(lambda _e, i=i: self.jump(i))
                self._buttons.append(b)

    def scrub(self, t: float) -> np.ndarray:
        """Show the sampled row nearest to time t on the robot; returns its q."""
        if self.result is None:
            raise CaliperError("no move planned yet")
        times = np.asarray(self.rows[0])
        k = int(np.argmin(np.abs(times - float(t))))
        self.time = float(times[k])
        q = np.asarray(self.rows[1][k], np.float64)
        self.app.jog.set_q(q, move_gizmo=False)
        self._syncing = True
        try:
            self.scrubber.value = self.time
        finally:
            self._syncing = False
        return q

    def jump(self, i: int) -> float:
        """Scrub to lint finding i's time; returns that time."""
        if not 0 <= int(i) < len(getattr(self, "findings", [])):
            raise CaliperError(f"finding {i}: no such finding")
        self.scrub(float(self.findings[int(i)].time))
        return self.time

    def state(self) -> dict:
        if self.result is None:
            return {"planned": False}
        out = {k: v for k, v in self.result.items() if k != "tool_path"}
        return {"planned": True, **out, "time": self.time}
