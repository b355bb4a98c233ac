"""Motion panel: MOVE_J / MOVE_L / MOVE_C from the current pose to the Jog gizmo's target, and
collision-free plans among the Jog scene's obstacles (``caliper_jax.planning.plan`` retimed by
``plan_trajectory``), previewed as a ghost path of the tool with a time scrubber and played back
at real time; the path report and trajectory lint findings (T001-T007) listed, each jumping to its
time. Engine calls only: ``caliper_jax.motion`` (move_j, move_l, move_c, sample_at,
lint_model_path), ``caliper_jax.planning`` (plan, plan_trajectory), ``caliper_jax.ik.ik``,
``caliper_jax.api.fk``.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from caliper_jax.errors import CaliperError

KINDS = ("MOVE_J", "MOVE_L", "MOVE_C")
MAX_FINDING_BUTTONS = 20
PLAY_PERIOD_S = 1.0 / 30.0  # how often playback moves the scrubber


class Player:
    """Plays a timeline ``[0, duration]`` (s) at real time on a background thread: every
    ``period`` s it calls ``seek(t)`` with ``t = start + speed * (clock() - clock at play)``, and
    stops after seeking ``duration``, on ``pause()``, or when ``seek`` raises a CaliperError
    (kept in ``error``). The wall clock paces the display only; it never enters a result."""

    def __init__(self, seek, *, period: float = PLAY_PERIOD_S, clock=time.monotonic):
        self.seek, self.period, self.clock = seek, float(period), clock
        self.thread = None
        self.stop_event = threading.Event()
        self.error = None

    @property
    def playing(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def play(self, start: float, duration: float, speed: float = 1.0) -> None:
        if not (np.isfinite(speed) and speed > 0):
            raise CaliperError(f"playback speed must be a positive number, got {speed!r}")
        self.pause()
        start, duration = float(start), float(duration)
        if start >= duration:
            start = 0.0  # at the end: play again from the start
        self.stop_event = threading.Event()
        self.error = None
        stop, t0 = self.stop_event, self.clock()

        def run():
            while not stop.is_set():
                t = min(start + speed * (self.clock() - t0), duration)
                try:
                    self.seek(t)
                except CaliperError as exc:
                    self.error = str(exc)
                    return
                if t >= duration:
                    return
                stop.wait(self.period)

        self.thread = threading.Thread(target=run, name="studio-playback", daemon=True)
        self.thread.start()

    def pause(self) -> None:
        """Stop playing (the position stays where it was)."""
        self.stop_event.set()
        th = self.thread
        if th is not None and th is not threading.current_thread():
            th.join(timeout=5.0)
        self.thread = None


def _tool_path(model, q: np.ndarray, frame: int) -> np.ndarray:
    """(N, 3) tool positions along rows q (N, nq); the batch is padded to a power of two so that
    moves of different lengths reuse a few compiled FK calls."""
    from caliper_jax import api

    n = len(q)
    size = 1 << max(int(n - 1).bit_length(), 3)
    padded = np.concatenate([q, np.repeat(q[-1:], size - n, axis=0)]) if size > n else q
    return np.asarray(api.fk(model, padded)[:n, frame, :3, 3], np.float64)


class MotionPanel:
    """The Motion tab. Python API: ``plan(kind, target=..., via=..., q_goal=...)``,
    ``plan_path(q_goal, planner=...)`` (collision-free, among the Jog scene's obstacles),
    ``scrub(t)``, ``play()`` / ``pause()`` (real-time playback), ``jump(i)`` (to finding i's time)."""

    def __init__(self, app, tab):
        self.app, self.tab = app, tab
        gui = app.server.gui
        with tab:
            self.kind = gui.add_dropdown("Move", KINDS, initial_value="MOVE_J")
            self.via = gui.add_vector3("MOVE_C via (m)", (0.0, 0.0, 0.0), step=0.01)
            self.dt = gui.add_number("Sample dt (s)", 0.01, min=1e-3, max=0.1, step=1e-3)
            go = gui.add_button("Plan to gizmo target")
            go.on_click(lambda _e: self._plan_from_gui())
            from caliper_jax.planning import PLANNERS

            with gui.add_folder("Collision-free plan"):
                self.planner_in = gui.add_dropdown("Planner", PLANNERS, initial_value="auto")
                self.goal_in = gui.add_text(
                    "Goal q", "", hint="comma-separated joint values; empty: IK of the gizmo target"
                )
                gui.add_button("Plan (Jog scene obstacles)").on_click(lambda _e: self._plan_path_from_gui())
            self.summary = gui.add_markdown("No move planned.")
            self.play_btn = gui.add_button("Play / Pause", disabled=True)
            self.play_btn.on_click(lambda _e: self._toggle_play())
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
        self.last_plan = None
        self.time = None
        self.player = Player(self._seek)

    def close(self) -> None:
        self.player.pause()

    def clear(self) -> None:
        self.player.pause()
        if self.ghost is not None:
            self.ghost.remove()
            self.ghost = None
        for b in self._buttons:
            b.remove()
        self._buttons = []
        self.result = None
        self.summary.content = "No move planned."
        self.scrubber.disabled = True
        self.play_btn.disabled = True

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

        app, model = self.app, self.app.model
        if kind not in KINDS:
            raise CaliperError(f"move kind {kind!r}: expected one of {', '.join(KINDS)}")
        if not (np.isfinite(dt) and dt > 0):
            raise CaliperError(f"dt must be a positive number of seconds, got {dt}")
        q0 = np.asarray(app.q if q_start is None else q_start, np.float64)
        frame = model.frame_id(app.tool_frame)
        if target is None and q_goal is None:
            target = self._gizmo_target(q0)
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
        return self._preview(kind, traj, q0, problem, dt)

    def _gizmo_target(self, q0) -> np.ndarray:
        """The Jog gizmo's pose (4x4), else the last IK target, else the tool pose at q0."""
        jog = self.app.jog
        if jog.gizmo is not None:
            from caliper_jax.io.rotations import quat_to_mat

            target = np.eye(4)
            target[:3, :3] = quat_to_mat(np.asarray(jog.gizmo.wxyz, np.float64))
            target[:3, 3] = np.asarray(jog.gizmo.position, np.float64)
            return target
        return jog.tool_pose(q0) if jog.last_ik is None else np.asarray(jog.last_ik["target"])

    def _plan_path_from_gui(self) -> None:
        try:
            text = self.goal_in.value.strip()
            goal = None if not text else [float(v) for v in text.replace(",", " ").split()]
        except ValueError:
            self.summary.content = f"error: Goal q: not a list of numbers: {self.goal_in.value!r}"
            return
        try:
            self.plan_path(goal, planner=self.planner_in.value, dt=float(self.dt.value))
        except CaliperError as exc:
            self.summary.content = f"error: {exc}"

    def plan_path(
        self, q_goal=None, *, planner: str = "auto", seed: int = 0, retime: str = "scurve",
        q_start=None, dt: float = 0.01,
    ) -> dict:
        """A collision-free joint path from ``q_start`` (default: the current pose) to ``q_goal``
        (nq,) (default: IK of the Jog gizmo target) among the Jog scene's obstacles, by
        ``caliper_jax.planning.plan`` (``planner``, ``seed``), timed by ``plan_trajectory``
        (``retime``), then linted and drawn like a move. The planner's report is
        ``result["plan"]``; a start / goal in collision or no path found raises a CaliperError."""
        from caliper_jax.planning import PLANNERS, RETIMERS, plan, plan_trajectory

        app, model = self.app, self.app.model
        if planner not in PLANNERS:
            raise CaliperError(f"planner {planner!r}: expected one of {', '.join(PLANNERS)}")
        if retime not in RETIMERS:
            raise CaliperError(f"retime {retime!r}: expected one of {', '.join(RETIMERS)}")
        if not (np.isfinite(dt) and dt > 0):
            raise CaliperError(f"dt must be a positive number of seconds, got {dt}")
        q0 = np.asarray(app.q if q_start is None else q_start, np.float64)
        problem = None
        if q_goal is None:
            from caliper_jax.ik import ik

            res = ik(model, self._gizmo_target(q0), frame=app.tool_frame, seed_q=q0,
                     position_only=bool(app.jog.position_only.value))
            if not res.success:
                problem = f"IK to the target did not converge (residual {float(res.pos_residual):.3g} m)"
            q_goal = res.q
        goal = np.asarray(q_goal, np.float64)
        if goal.shape != (model.nq,) or not np.all(np.isfinite(goal)):
            raise CaliperError(f"goal q: expected {model.nq} finite values for {model.name!r}, "
                               f"got shape {goal.shape}")
        if app.jog.cm is None:
            raise CaliperError(f"plan: no collision model for {model.name!r} ({app.jog.collision['error']})")
        res = plan(model, app.jog.cm, goal, q0, planner=planner, seed=int(seed))
        report = res.to_dict()
        self.last_plan = report
        if not res.success:
            self.summary.content = f"plan {res.status}: {res.reason}"
            raise CaliperError(f"plan {res.status}: {res.reason}")
        traj = plan_trajectory(model, res.waypoints, method=retime)
        return self._preview(f"PLAN ({res.planner})", traj, q0, problem, dt, plan=report)

    def _preview(self, kind, traj, q0, problem, dt, plan=None) -> dict:
        """Sample, lint and draw ``traj`` (a motion Trajectory) as the current result."""
        from caliper_jax.motion.path_metrics import lint_model_path
        from caliper_jax.motion.trajectory import sample_at, uniform_times

        model = self.app.model
        frame = model.frame_id(self.app.tool_frame)
        self.player.pause()
        self.time = None
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
            "plan": plan,
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
            self.play_btn.disabled = False
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
        with self.app.lock:
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

    def _seek(self, t: float) -> None:
        self.scrub(t)

    def play(self, speed: float = 1.0) -> None:
        """Play the current trajectory at real time (``speed`` x) from the scrubber's time (from
        the start when at the end) on a background thread; ``pause()`` stops it."""
        if self.result is None:
            raise CaliperError("no move planned yet")
        t = 0.0 if self.time is None else self.time
        self.player.play(t, self.result["duration"], speed)

    def pause(self) -> None:
        self.player.pause()

    @property
    def playing(self) -> bool:
        return self.player.playing

    def _toggle_play(self) -> None:
        try:
            self.pause() if self.playing else self.play()
        except CaliperError as exc:
            self.summary.content = f"error: {exc}"

    def jump(self, i: int) -> float:
        """Scrub to lint finding i's time; returns that time."""
        if not 0 <= int(i) < len(getattr(self, "findings", [])):
            raise CaliperError(f"finding {i}: no such finding")
        self.scrub(float(self.findings[int(i)].time))
        return self.time

    def state(self) -> dict:
        if self.result is None:
            return {"planned": False, "plan": self.last_plan, "playing": False}
        out = {k: v for k, v in self.result.items() if k != "tool_path"}
        return {"planned": True, **out, "time": self.time, "playing": self.playing,
                "play_error": self.player.error}
