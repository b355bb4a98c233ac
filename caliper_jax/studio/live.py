"""A live simulation session: a zoo task on MuJoCo's C engine, stepped at a fixed 1 ms in real time.

:class:`LiveSession` owns one ``MjData`` of a task scene built with a 1 ms timestep
(:func:`tasks.scene.build_scene`, position servos). Everything it computes comes from the engine:
MuJoCo steps the physics, the grasp rule is the task's own, as :class:`tasks.env.VecEnv` applies it
(:mod:`tasks.env_spec`'s ``closing``, ``grasp_candidates``, ``grasp_update``): on a weld-grasp task
the taken prop is welded in the jaw frame the way ``VecEnv`` writes the weld; on a friction-grasp
task (the Panda's and the SO-101's, ``TaskScene.grasp == "friction"``) the scene has no weld, the
pads' contact friction alone holds the prop, and the rule only reports the held prop (one that
stays inside the jaw box while the gripper is closed). The success verdict is
:func:`tasks.predicates.evaluator_np` of the task's predicate (per instant, never latched, no
success dwell; the held prop and the carry state :func:`tasks.predicates.carry_update` updated at
every control tick, as the environments do), and a recording goes through
:class:`caliper_jax.dataset.LeRobotWriter` with the features of :func:`tasks.demo.features`.

Pacing (the face's job, not the engine's): ``pump()`` turns elapsed clock time into whole physics
steps through an accumulator; the catch-up debt is capped at ``debt_cap`` seconds (0.25 s) and any
excess is dropped (counted in ``dropped_s``), never run as an ever larger batch. ``start()`` runs
``pump`` on a background thread that does not depend on any browser; ``advance(n)`` steps by hand
(tests, benchmarks). Pause stops stepping and stops accumulating time; the servo target is kept, so
the arm holds (nothing is de-energised). ``reset()`` is ``mj_resetData`` plus the task's start
pose: the same inputs after a reset give the same states bit for bit. A failed step or a non-finite
state ends the session: ``error`` holds the reason and ``check()`` raises it.

Recording: ``start_take(root, label)`` ... ``stop_take(save=True)`` writes one episode of frames
captured at exact tick decimation (``observation.state`` the measured joints at the frame's tick,
``action`` the servo target, ``observation.environment_state`` the props' poses; timestamps k/fps).
Pausing mid-take freezes capture (no gap); ``reset()`` mid-take discards the take.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from caliper_jax.errors import CaliperError
from tasks.predicates import carry_start, carry_ticks, carry_update, held_mask

TIMESTEP = 1e-3
DEBT_CAP_S = 0.25


def _task(task):
    from tasks.schema import Task, find_task, load_task

    return task if isinstance(task, Task) else load_task(find_task(task))


class LiveSession:
    """A live session of ``task`` (zoo name, task file or Task). ``clock``: seconds, monotonic
    (default ``time.perf_counter``); ``timestep`` the physics step (s); ``debt_cap`` (s)."""

    def __init__(self, task, *, timestep: float = TIMESTEP, debt_cap: float = DEBT_CAP_S, clock=None):
        import mujoco

        from tasks.env_spec import make_layout
        from tasks.predicates import evaluator_np
        from tasks.scene import DEFAULT_INTEGRATOR, build_scene

        if not (np.isfinite(timestep) and timestep > 0):
            raise CaliperError(f"timestep must be a positive number of seconds, got {timestep}")
        if not (np.isfinite(debt_cap) and debt_cap > 0):
            raise CaliperError(f"debt_cap must be a positive number of seconds, got {debt_cap}")
        self._mujoco = mujoco
        self.task = _task(task)
        self.ts = build_scene(
            self.task, options={"integrator": DEFAULT_INTEGRATOR, "timestep": float(timestep)}
        )
        self.model = self.ts.model
        self.layout = make_layout(self.ts)  # fps / substeps from the 1 ms scene
        self.mj = self.ts.scene.mj
        self.data = mujoco.MjData(self.mj)
        self.dt = float(self.mj.opt.timestep)
        self.debt_cap = float(debt_cap)
        self.clock = clock or time.perf_counter
        lay = self.ts.scene.layout
        self._lay = lay
        self.prop_names = tuple(self.ts.prop_names)
        self._prop_qpos = np.array(
            [lay.prop_qposadr[p] + k for p in self.prop_names for k in range(7)], np.int64
        ).reshape(len(self.prop_names), 7)
        self._prop_dof = np.array(
            [lay.prop_dofadr[p] + k for p in self.prop_names for k in range(3)], np.int64
        ).reshape(len(self.prop_names), 3)
        self.grasp = getattr(self.ts, "grasp", "weld")  # "weld" | "friction": the task's grasp model
        # one weld per prop, as VecEnv reads them; a friction-grasp scene has none (and an equality it
        # does have, such as the Panda's finger coupling, is never touched)
        self._weld_eq = np.array(
            [lay.weld_eq[p] for p in self.prop_names] if lay.weld_eq else [], np.int64
        ).reshape(-1)
        self._eq_data0 = np.array(self.mj.eq_data, copy=True)
        from tasks.env_spec import jaw_body

        self._jaw = jaw_body(self.ts) if self.prop_names else -1
        self._success = (
            evaluator_np(self.task.success, self.prop_names) if self.task.success is not None else None
        )
        self.control_every = int(self.layout.substeps)  # physics steps per control (grasp) tick
        self._lock = threading.RLock()
        self._thread = None
        self._stop = threading.Event()
        self.error = None
        self.paused = False
        self.record_fps = int(self.layout.fps)
        self._take = None
        self._writer = None
        self.saved_episodes = 0
        self.notes = []
        self.reset()
        self.max_debt_s = 0.0
        self.dropped_s = 0.0

    # ---- state -------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Back to the task's start: ``mj_resetData`` (warm start included), start pose, welds off,
        servo target = start pose, tick 0. Works while paused. A take in progress is discarded."""
        mj, d, m = self._mujoco, self.data, self.mj
        with self._lock:
            if self._take is not None:
                self._take = None
                self.notes.append("reset discarded the take in progress")
            m.eq_data[:] = self._eq_data0
            mj.mj_resetData(m, d)
            d.qpos[:] = self.ts.qpos(self.ts.q0)
            self.target = np.asarray(self.ts.q0, np.float64).copy()
            d.ctrl[:] = self.target[self._lay.ctrl_to_q]
            if len(self._weld_eq):
                d.eq_active[self._weld_eq] = 0
            mj.mj_forward(m, d)
            self.held = -1
            self._carry = carry_start(np, (len(self.prop_names),))
            self._carried = np.zeros(len(self.prop_names), bool)
            self.tick = 0
            self._acc = 0.0
            self._last = None

    def set_target(self, q) -> None:
        """New servo hold target (nq,), clipped into the joint limits (the engine's limits)."""
        q = np.asarray(q, np.float64)
        if q.shape != (self.model.nq,) or not np.all(np.isfinite(q)):
            raise CaliperError(f"target: expected {self.model.nq} finite values, got shape {q.shape}")
        lo, hi = np.asarray(self.model.qpos_lower), np.asarray(self.model.qpos_upper)
        with self._lock:
            self.target = np.clip(q, lo, hi)
            self.data.ctrl[:] = self.target[self._lay.ctrl_to_q]

    def set_gripper(self, closed: bool) -> None:
        """Gripper target to its closed / open end (the task's gripper), other joints unchanged."""
        with self._lock:
            q = self.target.copy()
            q[self.layout.gripper_q] = self.layout.gripper_closed if closed else self.layout.gripper_open
            self.set_target(q)

    def set_arm_target(self, q) -> None:
        """New servo target (nq,) for the arm only: the gripper coordinate keeps its current target,
        so an arm command (a jog slider, an IK solve) never opens or closes the gripper."""
        q = np.asarray(q, np.float64)
        if q.shape != (self.model.nq,):
            raise CaliperError(f"target: expected {self.model.nq} finite values, got shape {q.shape}")
        with self._lock:
            q = q.copy()
            q[self.layout.gripper_q] = self.target[self.layout.gripper_q]
            self.set_target(q)

    @property
    def gripper_closed(self) -> bool:
        """Whether the gripper is commanded closed (the env's closing rule on the servo target)."""
        from tasks.env_spec import closing

        return bool(closing(self.layout, self.target))

    @property
    def time(self) -> float:
        return self.tick * self.dt

    def q(self) -> np.ndarray:
        return self._lay.q_from_qpos(self.data.qpos[None])[0]

    def snapshot(self) -> dict:
        """The state a viewer shows: measured q, target, props, held prop, success, contacts."""
        with self._lock:
            d = self.data
            props = d.qpos[self._prop_qpos] if len(self.prop_names) else np.zeros((0, 7))
            vel = d.qvel[self._prop_dof] if len(self.prop_names) else np.zeros((0, 3))
            success = None
            if self._success is not None:
                held = held_mask(np, self.held, len(self.prop_names))
                success = bool(self._success(props[:, :3], self.ts.pos0, vel, held, self._carried))
            return {
                "task": self.task.name,
                "tick": int(self.tick),
                "time": self.time,
                "q": self.q().tolist(),
                "target": self.target.tolist(),
                "gripper_closed": self.gripper_closed,
                "robot": self.model.name,
                "props": {n: props[i].tolist() for i, n in enumerate(self.prop_names)},
                "held": None if self.held < 0 else self.prop_names[self.held],
                "grasp": self.grasp,
                "success": success,
                "contacts": int(d.ncon),
                "paused": self.paused,
                "running": self.running,
                "error": self.error,
                "recording": self._take is not None,
                "take_frames": 0 if self._take is None else len(self._take["state"]),
                "saved_episodes": self.saved_episodes,
                "max_debt_s": self.max_debt_s,
                "dropped_s": self.dropped_s,
                "timestep": self.dt,
                "notes": list(self.notes),
            }

    def check(self) -> None:
        """Raise the error that ended the session, if any."""
        if self.error is not None:
            raise CaliperError(f"live session of {self.task.name} ended: {self.error}")

    # ---- stepping ------------------------------------------------------------------------------------
    def _control_tick(self) -> None:
        """At a control tick: grasp decisions (the env's rule) on the tick's starting state."""
        if self._jaw < 0:
            return
        m, d, L = self.mj, self.data, self.layout
        held = held_mask(np, self.held, len(self.prop_names))
        self._carry, self._carried = carry_update(np, self._carry, held, d.qpos[self._prop_qpos][:, :3],
                                                  self.ts.pos0, carry_ticks(L.fps))
        from caliper_jax.io.rotations import quat_conj, quat_mul
        from tasks.env_spec import closing, grasp_candidates, grasp_update

        close = bool(closing(L, self.target))
        if not close and self.held < 0:
            return
        self._mujoco.mj_kinematics(m, d)
        props = d.qpos[self._prop_qpos]
        jaw_pos, jaw_rot = d.xpos[self._jaw].copy(), d.xmat[self._jaw].reshape(3, 3).copy()
        cand = grasp_candidates(L, np, jaw_pos, jaw_rot, props[:, :3])
        held = int(grasp_update(np, np.array(self.held), np.array(close), cand, L.friction))
        if held == self.held:
            return
        if not len(self._weld_eq):  # friction grasp: the pads hold the prop, the rule only reports it
            self.held = held
            return
        if self.held >= 0:
            d.eq_active[self._weld_eq[self.held]] = 0
        if held >= 0:
            eq = self._weld_eq[held]
            row = self._eq_data0[eq].copy()
            row[:3] = 0.0
            row[3:6] = jaw_rot.T @ (props[held, :3] - jaw_pos)
            rq = quat_mul(quat_conj(d.xquat[self._jaw].copy()), props[held, 3:])
            row[6:10] = rq / np.linalg.norm(rq)
            m.eq_data[eq] = row
            d.eq_active[eq] = 1
        self.held = held

    def _capture(self) -> None:
        d, take = self.data, self._take
        take["state"].append(self.q().astype(np.float32))
        take["action"].append(self.target.astype(np.float32))
        props = d.qpos[self._prop_qpos].reshape(-1) if len(self.prop_names) else np.zeros(0)
        take["env"].append(props.astype(np.float32))

    def advance(self, steps: int) -> int:
        """Step the physics ``steps`` times (grasp at control ticks, capture at record ticks).
        Returns the steps done; a failure ends the session (``error``) and raises."""
        steps = int(steps)
        if steps < 0:
            raise CaliperError(f"steps must be >= 0, got {steps}")
        self.check()
        mj, m, d = self._mujoco, self.mj, self.data
        done = 0
        with self._lock:
            rec_every = self._take["every"] if self._take is not None else 0
            while done < steps:
                if self.tick % self.control_every == 0:
                    self._control_tick()
                if rec_every and self.tick % rec_every == 0:
                    self._capture()
                k = steps - done
                k = min(k, self.control_every - self.tick % self.control_every)
                if rec_every:
                    k = min(k, rec_every - self.tick % rec_every)
                bad = self._bad_warnings()
                try:
                    mj.mj_step(m, d, nstep=k)
                except Exception as exc:  # MuJoCo raises on a fatal step error
                    self._fail(f"MuJoCo step failed at t={self.time:.3f} s: {exc}")
                self.tick += k
                done += k
                if (
                    self._bad_warnings() > bad
                    or not np.isfinite(d.qpos).all()
                    or not np.isfinite(d.qvel).all()
                ):
                    self._fail(f"unstable state (non-finite or bad acceleration) at t={self.time:.3f} s")
        return done

    def _bad_warnings(self) -> int:
        """MuJoCo's count of bad qpos / qvel / qacc events (it resets the data on each)."""
        w, W = self.data.warning, self._mujoco.mjtWarning
        return int(w[W.mjWARN_BADQPOS].number + w[W.mjWARN_BADQVEL].number + w[W.mjWARN_BADQACC].number)

    def _fail(self, reason: str):
        self.error = reason
        self._stop.set()
        raise CaliperError(f"live session of {self.task.name} ended: {reason}")

    def pump(self, now: float | None = None) -> int:
        """Turn the clock time since the last pump into whole steps (accumulator, debt capped at
        ``debt_cap``; excess dropped) and run them. Paused: time does not accumulate."""
        now = self.clock() if now is None else float(now)
        with self._lock:
            if self._last is None or self.paused:
                self._last = now
                return 0
            self._acc += max(now - self._last, 0.0)
            self._last = now
            if self._acc > self.debt_cap:
                self.dropped_s += self._acc - self.debt_cap
                self._acc = self.debt_cap
            self.max_debt_s = max(self.max_debt_s, self._acc)
            n = int(self._acc / self.dt + 1e-9)
            self._acc = max(self._acc - n * self.dt, 0.0)
        return self.advance(n)

    def pause(self) -> None:
        with self._lock:
            self.paused = True

    def resume(self) -> None:
        with self._lock:
            self.paused = False
            self._last = None  # no catch-up for the paused time

    # ---- the background thread -------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Run ``pump`` in a background (daemon) thread until ``stop()`` or an error."""
        self.check()
        if self.running:
            return
        self._stop.clear()
        with self._lock:
            self._last = None
        self._thread = threading.Thread(target=self._loop, name=f"live-{self.task.name}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.pump()
            except CaliperError:
                return  # error recorded by _fail
            except Exception as exc:  # anything else ends the session loudly too
                self.error = f"{type(exc).__name__}: {exc}"
                return
            wait = self.dt - self._acc
            time.sleep(max(wait, 0.0) if not self.paused else 0.01)

    def stop(self) -> None:
        """Stop the thread and finish an open dataset."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        self.finish_dataset()

    # ---- recording ------------------------------------------------------------------------------------
    def start_take(self, root, label: str | None = None, fps: int | None = None) -> None:
        """Start recording a take into the LeRobot v3 dataset at ``root`` (created on the first
        saved take, appended to afterwards). ``fps`` must divide the physics rate."""
        from pathlib import Path

        fps = self.record_fps if fps is None else int(fps)
        ratio = 1.0 / (fps * self.dt) if fps > 0 else 0.0
        every = round(ratio)
        if fps <= 0 or every < 1 or abs(every - ratio) > 1e-9 * ratio:
            raise CaliperError(f"record fps={fps} must divide the physics rate {1.0 / self.dt:g} Hz")
        with self._lock:
            if self._take is not None:
                raise CaliperError("a take is already being recorded; stop it first")
            if self._writer is not None and (Path(root) != self._writer.root or fps != self._writer_fps):
                raise CaliperError(
                    f"this session records into {self._writer.root} at {self._writer_fps} fps; "
                    "finish that dataset first"
                )
            self._take = {
                "root": Path(root),
                "label": label or self.task.name,
                "fps": fps,
                "every": every,
                "state": [],
                "action": [],
                "env": [],
            }

    def stop_take(self, save: bool = True) -> int | None:
        """End the take: save it as one episode (returns its index) or discard it (None)."""
        from caliper_jax.dataset import LeRobotWriter
        from tasks.demo import features

        with self._lock:
            take, self._take = self._take, None
        if take is None:
            raise CaliperError("no take is being recorded")
        if not save or not take["state"]:
            return None
        if self._writer is None:
            self._writer = LeRobotWriter(
                take["root"], take["fps"], features(self.model, self.prop_names), robot_type=self.model.name
            )
            self._writer_fps = take["fps"]
        self._writer.add_frames(
            {
                "observation.state": np.stack(take["state"]),
                "action": np.stack(take["action"]),
                "observation.environment_state": np.stack(take["env"]),
            }
        )
        index = self._writer.save_episode(task=take["label"])
        self.saved_episodes += 1
        return index

    def finish_dataset(self) -> None:
        """Close the dataset being recorded (a take in progress is discarded)."""
        with self._lock:
            self._take = None
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()


__all__ = ["TIMESTEP", "DEBT_CAP_S", "LiveSession"]
