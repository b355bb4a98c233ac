"""Scripted demonstrations: an expert per task built from the stack itself.

For one episode the expert looks at where the props really start (after randomisation), moves
the task's props there and asks :mod:`tasks.witness` for a grasp and a carry: position IK puts the
jaw's bottom face on the scored prop's top face, a batched IK over the goal region finds a carry
pose whose welded prop satisfies the predicate, and a collision-checked joint path (the straight
line, else RRT-connect) joins them. The expert then plans

    start (gripper open) -> grasp (open) -> close (CLOSE_DWELL_S at rest) -> carry path
    (closed) -> carry pose, held [-> at rest SETTLE_DWELL_S, and until the gripper has been
    closed CARRY_S + CARRY_MARGIN_S -> gripper open, held]

(the bracketed release when the predicate wants the prop released: ``placed_in_zone`` with
``released``) as one jerk-limited trajectory
(:func:`caliper_jax.motion.trajectory.retime_waypoints`, every leg a synchronised S-curve at
SPEED_SCALE of the joint velocity limits), sampled at the task's fps. The rows are joint
position targets: the environment runs them closed loop through its safety gate,
position servos, contact and the weld grasp, and ends the episode when the verdict fires (after
the task's success dwell). A ``lifted ... held`` predicate is met with the prop in hand; a
placement that wants the prop released is met after the release, the jaw open around the prop.

The approach is the straight joint-space line from the start pose to the grasp: on gripper_arm a
pose "above" the grasp needs a deeply bent elbow whose swing knocked the prop away (measured), while
the start pose already hangs the jaw over the props' spawn area. A robot whose start pose is far
from the props would need a collision-checked approach here.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from caliper_jax.errors import CaliperError

SPEED_SCALE = 0.3      # fraction of the joint velocity limits
CLOSE_DWELL_S = 0.3    # s at rest with the gripper closing before the carry
SETTLE_DWELL_S = 0.3   # s at rest at the carry pose before a release
CARRY_MARGIN_S = 0.2   # s held beyond tasks.predicates.CARRY_S before a release (the gated close lags)


@dataclass(frozen=True)
class Demo:
    """One planned episode: ``targets`` (T, nq) joint position targets, one per control tick (hold
    the last row after T), the witness it follows, the tick the gripper is commanded closed and the
    tick it is commanded open again (None: it never releases)."""

    targets: np.ndarray
    witness: object
    close_tick: int
    release_tick: int | None = None


def moved_task(task, pos, quat):
    """``task`` with its props starting at ``pos`` (P, 3) and ``quat`` (P, 4) (w, x, y, z)."""
    pos, quat = np.asarray(pos, np.float64), np.asarray(quat, np.float64)
    props = tuple(dataclasses.replace(p, pos=tuple(pos[i]), quat=tuple(quat[i] / np.linalg.norm(quat[i])))
                  for i, p in enumerate(task.props))
    return dataclasses.replace(task, props=props)


def _opened(ts, q) -> np.ndarray:
    q = np.array(q, dtype=np.float64)
    q[ts.gripper.q_index] = ts.gripper.open
    return q


def approach(ts, w, start, grasp) -> np.ndarray:
    """(K, nq) waypoints from ``start`` to ``grasp`` (gripper open) along which the robot penetrates
    nothing deeper than CONTACT_TOL, except the jaw resting on the prop it is about to take no deeper
    than it does at the start or at the grasp (so sliding over its top is allowed, sweeping through
    its side is not): the straight line when clear, else RRT-connect; the straight line when no
    clear path exists."""
    from tasks import witness as W

    kin = W._Kin(ts)
    jaw = {kin.name(g) for g in np.flatnonzero(kin.jaw_geoms)}
    target = kin.name(ts.scene.layout.prop_geom[w.prop])

    def on_target(a, b) -> bool:
        return target in (a, b) and bool({a, b} & jaw)

    def depth_on_target(q) -> float:
        kin.set(q)
        return max((d for a, b, d in kin.overlaps(depth=0.0) if on_target(a, b)), default=0.0)

    allowed = max(depth_on_target(start), depth_on_target(grasp)) + W.CONTACT_TOL

    def clear(qa, qb) -> bool:
        n = int(np.ceil(np.max(np.abs(qb - qa)) / W.PATH_STEP)) + 1
        for s in np.linspace(0.0, 1.0, n):
            kin.set(qa + s * (qb - qa))
            if any(not (on_target(a, b) and d <= allowed) for a, b, d in kin.overlaps()):
                return False
        return True

    path = W.connect(ts, clear, start, grasp, ts.gripper.open)
    return np.stack([start, grasp]) if path is None else path


def motion_limits(ts):
    from caliper_jax.motion.limits import MotionLimits

    m = ts.model
    vel = SPEED_SCALE * np.asarray(m.dof_velocity_limit, np.float64)
    lo, hi = np.asarray(m.qpos_lower, np.float64), np.asarray(m.qpos_upper, np.float64)
    return MotionLimits.from_arrays(lo, hi, vel, 4.0 * vel, 40.0 * vel)


def _rows(waypoints, limits, fps: int) -> np.ndarray:
    """(n, nq) targets every 1/fps along the jerk-limited trajectory through ``waypoints``."""
    from caliper_jax.motion.trajectory import retime_waypoints, uniform_rows

    wp = np.asarray(waypoints, np.float64)
    keep = np.concatenate([[True], np.any(np.abs(np.diff(wp, axis=0)) > 1e-12, axis=1)])
    wp = wp[keep]
    if len(wp) < 2:
        return wp
    return np.asarray(uniform_rows(retime_waypoints(wp, limits), 1.0 / fps).q, np.float64)


def plan_demo(ts, fps: int) -> Demo:
    """The expert's plan for the task scene ``ts`` as built (props at their start poses)."""
    from tasks.predicates import carry_ticks, released_props
    from tasks.witness import witness

    w = witness(ts)
    limits = motion_limits(ts)
    start, grasp_open = _opened(ts, ts.q0), _opened(ts, w.q_grasp)
    reach = _rows([*approach(ts, w, start, grasp_open), w.q_grasp], limits, fps)
    dwell = np.repeat(w.q_grasp[None], max(1, round(CLOSE_DWELL_S * fps)), axis=0)
    carry = _rows(np.asarray(w.path), limits, fps)
    targets = np.concatenate([reach, dwell, carry[1:]])
    close_tick = len(reach) - 1
    if w.prop not in released_props(ts.task.success):
        return Demo(targets, w, close_tick)
    held = len(targets) - close_tick                        # ticks commanded closed so far
    wait = max(round(SETTLE_DWELL_S * fps), carry_ticks(fps) + round(CARRY_MARGIN_S * fps) - held, 1)
    settle = np.repeat(targets[-1:], wait, axis=0)
    targets = np.concatenate([targets, settle, _opened(ts, targets[-1])[None]])
    return Demo(targets, w, close_tick, len(targets) - 1)


def plan_for_start(ts, pos, quat, fps: int) -> Demo:
    """The plan for one episode whose props start at ``pos`` (P, 3) / ``quat`` (P, 4)."""
    from tasks.scene import build_scene

    moved = build_scene(moved_task(ts.task, pos, quat))
    return plan_demo(moved, fps)


class ScriptedExpert:
    """A host-side policy over a :class:`tasks.env.VecEnv`: ``act(obs, info)`` -> (W, nq) targets.

    At each world's first tick of an episode (``info["episode"]["tick"] == 0``) it plans from the
    prop start poses in the observation; afterwards it plays the plan, holding its last row. A world
    whose plan cannot be made (no witness from that start) holds its start pose and is reported in
    ``failed_plans``."""

    def __init__(self, env):
        from tasks.env_spec import observation_parts

        self.env, self.ts, self.layout = env, env.task_scene, env.layout
        self._parts = observation_parts
        W = env.num_envs
        self.plans: list[Demo | None] = [None] * W
        self.failed_plans: list[tuple[int, int, str]] = []    # (world, episode, why)
        self._hold = np.zeros((W, self.layout.nq))

    def act(self, obs, info) -> np.ndarray:
        parts = self._parts(self.layout, np.asarray(obs, np.float64))
        ticks = np.asarray(info["episode"]["tick"])
        out = np.empty((len(ticks), self.layout.nq))
        for w, t in enumerate(ticks):
            if t == 0:
                self._replan(w, parts, info)
            plan = self.plans[w]
            out[w] = self._hold[w] if plan is None else plan.targets[min(int(t), len(plan.targets) - 1)]
        return out

    def _replan(self, w: int, parts: dict, info) -> None:
        self._hold[w] = parts["q"][w]
        try:
            start = parts["prop_pos"][w], parts["prop_quat"][w]
            self.plans[w] = plan_for_start(self.ts, *start, self.layout.fps)
        except CaliperError as exc:
            self.plans[w] = None
            self.failed_plans.append((w, int(info["episode"]["index"][w]), str(exc)))


__all__ = ["CARRY_MARGIN_S", "CLOSE_DWELL_S", "SETTLE_DWELL_S", "Demo", "SPEED_SCALE", "ScriptedExpert",
           "moved_task", "plan_demo", "plan_for_start"]
